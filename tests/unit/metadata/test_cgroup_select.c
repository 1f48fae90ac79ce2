/*
 * Tests of the cgroup selection walk on a directory tree laid out as a Kubernetes node's
 * cgroups (systemd and cgroupfs drivers, containerd, CRI-O and docker): the top-most cgroup of
 * each selected container or pod is reported once, its children are not, others never are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metadata/cgroup_select.h"
#include "check.h"
#include "testfs.h"

#define CID_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CID_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define CID_C "aaaaaaaaaaaabbbbbbbbbbbbccccccccccccddddddddddddeeeeeeeeeeeeffff"
#define POD_1 "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"
#define POD_1_US "1b2c3d4e_5f60_4718_8293_a4b5c6d7e8f9"
#define POD_2 "99999999-0000-4000-8000-000000000001"

static char tree[256];

struct seen {
	char paths[8][512];
	int n;
};

static int collect(void *ctx, const char *rel)
{
	struct seen *s = ctx;

	if (s->n < 8)
		snprintf(s->paths[s->n++], sizeof(s->paths[0]), "%s", rel);
	return 0;
}

static int has(const struct seen *s, const char *rel)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->paths[i], rel))
			return 1;
	return 0;
}

#define POD1_DIR "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_1_US ".slice"

static void build_tree(void)
{
	snprintf(tree, sizeof(tree), "/tmp/pp_test_cgsel_%d", (int)getpid());
	pp_test_mkdirs(tree, POD1_DIR "/cri-containerd-" CID_A ".scope");
	pp_test_mkdirs(tree, POD1_DIR "/crio-" CID_B ".scope/init");
	pp_test_mkdirs(tree, "kubepods/besteffort/pod" POD_2 "/" CID_C);
	pp_test_mkdirs(tree,
		       "system.slice/docker-" CID_C ".scope"); /* same id, other place: found too */
	pp_test_mkdirs(tree, "system.slice/containerd.service");
}

TEST(by_container_id)
{
	const char *ids[] = {CID_B, "aaaaaaaaaaaa"};
	struct pp_cgroup_criteria c = {.container_ids = ids, .n_container_ids = 2};
	struct seen s = {0};

	build_tree();
	CHECK_EQ_U64(pp_cgroup_select(tree, &c, 0, collect, &s), 3);
	CHECK(has(&s, POD1_DIR "/crio-" CID_B ".scope"));
	CHECK(!has(&s, POD1_DIR "/crio-" CID_B ".scope/init"));
	CHECK(has(&s, "/kubepods/besteffort/pod" POD_2 "/" CID_C));
	CHECK(has(&s, "/system.slice/docker-" CID_C ".scope"));
	pp_test_rm_tree(tree);
}

TEST(by_pod_uid)
{
	const char *pods[] = {POD_1, POD_2};
	struct pp_cgroup_criteria c = {.pod_uids = pods, .n_pod_uids = 2};
	struct seen s = {0};

	build_tree();
	CHECK_EQ_U64(pp_cgroup_select(tree, &c, 0, collect, &s), 2);
	CHECK(has(&s, POD1_DIR));
	CHECK(has(&s, "/kubepods/besteffort/pod" POD_2));
	pp_test_rm_tree(tree);
}

TEST(bad_criteria_and_root)
{
	const char *short_id[] = {"0123"};
	const char *not_hex[] = {"0123456789abcdefXYZ"};
	const char *bad_uid[] = {"not-a-uid"};
	struct pp_cgroup_criteria c1 = {.container_ids = short_id, .n_container_ids = 1};
	struct pp_cgroup_criteria c2 = {.container_ids = not_hex, .n_container_ids = 1};
	struct pp_cgroup_criteria c3 = {.pod_uids = bad_uid, .n_pod_uids = 1};
	struct pp_cgroup_criteria none = {0};
	struct seen s = {0};

	CHECK_EQ_U64(pp_cgroup_select("/", &c1, 0, collect, &s), (uint64_t)-EINVAL);
	CHECK_EQ_U64(pp_cgroup_select("/", &c2, 0, collect, &s), (uint64_t)-EINVAL);
	CHECK_EQ_U64(pp_cgroup_select("/", &c3, 0, collect, &s), (uint64_t)-EINVAL);
	CHECK_EQ_U64(pp_cgroup_select("/nonexistent/pp", &none, 0, collect, &s), (uint64_t)-ENOENT);
	CHECK_EQ_U64(s.n, 0);
}

static int stop_at_first(void *ctx, const char *rel)
{
	(void)rel;
	(*(int *)ctx)++;
	return 42;
}

TEST(callback_stops_walk)
{
	const char *pods[] = {POD_1, POD_2};
	struct pp_cgroup_criteria c = {.pod_uids = pods, .n_pod_uids = 2};
	int calls = 0;

	build_tree();
	CHECK_EQ_U64(pp_cgroup_select(tree, &c, 0, stop_at_first, &calls), 42);
	CHECK_EQ_U64(calls, 1);
	pp_test_rm_tree(tree);
}

TEST_LIST = {
    {"by_container_id", by_container_id},
    {"by_pod_uid", by_pod_uid},
    {"bad_criteria_and_root", bad_criteria_and_root},
    {"callback_stops_walk", callback_stops_walk},
};
TEST_MAIN()
