/*
 * Unit tests of the node's host name: from a pod (its own UTS namespace, the host's pids
 * visible) the host's /etc/hostname through pid 1's root, not the pod's name; in the host's
 * namespace, or when pid 1 cannot be looked at, the agent's own name. Fake proc roots.
 */
#include "check.h"
#include "metadata/host_name.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static int sh(const char *cmd)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), "cd '%s' && %s", root, cmd);
	return system(buf);
}

static void own_name(char *out, size_t len)
{
	if (gethostname(out, len - 1))
		snprintf(out, len, "unknown");
	out[len - 1] = '\0';
}

TEST(pod_gets_the_hosts_name)
{
	char got[256], own[256];

	snprintf(root, sizeof(root), "/tmp/pp-hostname-XXXXXX");
	REQUIRE(mkdtemp(root));
	REQUIRE(sh("mkdir -p self/ns 1/ns 1/root/etc && ln -s 'uts:[4026532900]' self/ns/uts && "
		   "ln -s 'uts:[4026531838]' 1/ns/uts && printf 'node-7.example\\n' > "
		   "1/root/etc/hostname") == 0);
	CHECK(pp_host_name(root, got, sizeof(got)) == PP_HOST_NAME_HOST_FILE);
	CHECK_STR(got, "node-7.example");

	/* the same UTS namespace: the agent's own name is the host's */
	REQUIRE(sh("rm 1/ns/uts && ln -s 'uts:[4026532900]' 1/ns/uts") == 0);
	own_name(own, sizeof(own));
	CHECK(pp_host_name(root, got, sizeof(got)) == PP_HOST_NAME_OWN);
	CHECK_STR(got, own);

	/* pid 1 not visible (no hostPID, or no permission): the own name */
	REQUIRE(sh("rm -rf 1") == 0);
	CHECK(pp_host_name(root, got, sizeof(got)) == PP_HOST_NAME_OWN);
	CHECK_STR(got, own);

	/* a host file that is no host name is not used */
	REQUIRE(sh("mkdir -p 1/ns 1/root/etc && ln -s 'uts:[1]' 1/ns/uts && "
		   "printf 'bad name;rm\\n' > 1/root/etc/hostname") == 0);
	CHECK(pp_host_name(root, got, sizeof(got)) == PP_HOST_NAME_OWN);
	CHECK_STR(got, own);
	sh("rm -rf 1 self");
	rmdir(root);
}

TEST_LIST = {
    {"pod_gets_the_hosts_name", pod_gets_the_hosts_name},
};

TEST_MAIN()
