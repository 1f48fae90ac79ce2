/*
 * Tests of the cgroup path parser: a table of real-world cgroup v2 (and v1 name=systemd) paths
 * for containerd, CRI-O, docker and podman under the systemd and cgroupfs drivers, Kubernetes
 * QoS levels, kind/k3s nesting, cgroup-namespace-relative paths, the companion cgroups that
 * must not match (conmon, .mount, host services, user sessions), and garbage input.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/cgroup_path.h"
#include "check.h"

#define ID_A "74bd99a14582624f19f92fc32e56e519dd46dfaa35167aa1da7d75ee10e6f1fb"
#define ID_B "981d3de5e32fdff76675300d28bce0c06be373c7b2c934f6bc7c4767b740d798"
#define ID_C "8e404b2e4585dab463cf199c1ed7e2787101cafe1498e8cfdb38db81cb8b4e8f"
#define UID_D "f6f2d169-f2ae-4afa-95ed-06ff2ed6b288"
#define UID_U "f6f2d169_f2ae_4afa_95ed_06ff2ed6b288"
#define UID2_D "05e102bf-8744-4942-a241-9b6f07983a53"
#define UID2_U "05e102bf_8744_4942_a241_9b6f07983a53"

struct row {
	const char *path;
	int rc;
	enum pp_container_runtime rt;
	const char *id;
	const char *pod;
	enum pp_k8s_qos qos;
};

static const struct row rows[] = {
    /* Kubernetes, systemd driver, containerd */
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U
     ".slice/cri-containerd-" ID_A ".scope",
     1, PP_RUNTIME_CONTAINERD, ID_A, UID_D, PP_QOS_BURSTABLE},
    {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID2_U
     ".slice/cri-containerd-" ID_B ".scope",
     1, PP_RUNTIME_CONTAINERD, ID_B, UID2_D, PP_QOS_BESTEFFORT},
    {"/kubepods.slice/kubepods-pod" UID_U ".slice/cri-containerd-" ID_C ".scope", 1,
     PP_RUNTIME_CONTAINERD, ID_C, UID_D, PP_QOS_GUARANTEED},
    /* the pod's own slice and the QoS slice hold no container */
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U ".slice", 0,
     PP_RUNTIME_NONE, "", UID_D, PP_QOS_BURSTABLE},
    {"/kubepods.slice/kubepods-burstable.slice", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    /* CRI-O, systemd driver (OpenShift); conmon must not match */
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U ".slice/crio-" ID_A
     ".scope",
     1, PP_RUNTIME_CRIO, ID_A, UID_D, PP_QOS_BURSTABLE},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_U
     ".slice/crio-conmon-" ID_A ".scope",
     0, PP_RUNTIME_NONE, "", UID_D, PP_QOS_BURSTABLE},
    /* cgroupfs driver: bare ID (containerd), crio-<id> without .scope */
    {"/kubepods/burstable/pod" UID_D "/" ID_A, 1, PP_RUNTIME_UNKNOWN, ID_A, UID_D,
     PP_QOS_BURSTABLE},
    {"/kubepods/besteffort/pod" UID2_D "/crio-" ID_B, 1, PP_RUNTIME_CRIO, ID_B, UID2_D,
     PP_QOS_BESTEFFORT},
    {"/kubepods/pod" UID2_D "/" ID_C, 1, PP_RUNTIME_UNKNOWN, ID_C, UID2_D, PP_QOS_GUARANTEED},
    {"/kubepods/burstable/pod" UID_D, 0, PP_RUNTIME_NONE, "", UID_D, PP_QOS_BURSTABLE},
    /* containerd without SystemdCgroup under a systemd parent (v1 and v2) */
    {"/system.slice/containerd.service/kubepods-besteffort-pod" UID2_U
     ".slice:cri-containerd:" ID_B,
     1, PP_RUNTIME_CONTAINERD, ID_B, UID2_D, PP_QOS_BESTEFFORT},
    /* cri-dockerd under the systemd driver */
    {"/kubepods.slice/kubepods-pod" UID_U ".slice/docker-" ID_A ".scope", 1, PP_RUNTIME_DOCKER,
     ID_A, UID_D, PP_QOS_GUARANTEED},
    /* plain docker: systemd (with the nested /init of docker-in-docker) and cgroupfs */
    {"/system.slice/docker-" ID_A ".scope", 1, PP_RUNTIME_DOCKER, ID_A, "", PP_QOS_NONE},
    {"/system.slice/docker-" ID_A ".scope/init", 1, PP_RUNTIME_DOCKER, ID_A, "", PP_QOS_NONE},
    {"/docker/" ID_B, 1, PP_RUNTIME_DOCKER, ID_B, "", PP_QOS_NONE},
    /* podman: root, its conmon, rootless, cgroupfs */
    {"/machine.slice/libpod-" ID_C ".scope", 1, PP_RUNTIME_PODMAN, ID_C, "", PP_QOS_NONE},
    {"/machine.slice/libpod-" ID_C ".scope/container", 1, PP_RUNTIME_PODMAN, ID_C, "", PP_QOS_NONE},
    {"/machine.slice/libpod-conmon-" ID_C ".scope", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID_A ".scope/container", 1,
     PP_RUNTIME_PODMAN, ID_A, "", PP_QOS_NONE},
    {"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-conmon-" ID_A ".scope", 0,
     PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/libpod_parent/libpod-" ID_B, 1, PP_RUNTIME_PODMAN, ID_B, "", PP_QOS_NONE},
    /* systemd mount units that mention an ID, and host services */
    {"/system.slice/run-containerd-io.containerd.runtime.v2.task-k8s.io-" ID_A "-rootfs.mount", 0,
     PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/system.slice/var-lib-docker-overlay2-" ID_B "-merged.mount", 0, PP_RUNTIME_NONE, "", "",
     PP_QOS_NONE},
    {"/system.slice/docker-" ID_A ".scope/var-lib.mount", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/system.slice/sshd.service", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/system.slice/containerd.service", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/init.scope", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/user.slice/user-1000.slice/session-3.scope", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/user.slice/user-1000.slice/user@1000.service/app.slice/"
     "vte-spawn-868f9513-eee8-457d-8e36-1b37ae8ae622.scope",
     0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    /* seen from inside a cgroup namespace */
    {"/", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/../../user.slice/user-501.slice/session-3.scope", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/../kubepods-burstable-pod" UID_U ".slice/cri-containerd-" ID_B ".scope", 1,
     PP_RUNTIME_CONTAINERD, ID_B, UID_D, PP_QOS_BURSTABLE},
    {"/../cri-containerd-" ID_B ".scope", 1, PP_RUNTIME_CONTAINERD, ID_B, "", PP_QOS_NONE},
    {"cri-containerd-" ID_B ".scope", 1, PP_RUNTIME_CONTAINERD, ID_B, "", PP_QOS_NONE},
    {"/../pod" UID_D "/" ID_C, 1, PP_RUNTIME_UNKNOWN, ID_C, UID_D, PP_QOS_NONE},
    /* kind/k3s: kubelet.slice prefix, and the whole node inside a docker container */
    {"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
     "kubelet-kubepods-besteffort-pod" UID2_U ".slice/cri-containerd-" ID_A ".scope",
     1, PP_RUNTIME_CONTAINERD, ID_A, UID2_D, PP_QOS_BESTEFFORT},
    {"/system.slice/docker-" ID_C ".scope/kubelet.slice/kubelet-kubepods.slice/"
     "kubelet-kubepods-pod" UID_U ".slice/cri-containerd-" ID_A ".scope",
     1, PP_RUNTIME_CONTAINERD, ID_A, UID_D, PP_QOS_GUARANTEED},
    {"/system.slice/docker-" ID_C ".scope/kubelet.slice/kubelet.service", 1, PP_RUNTIME_DOCKER,
     ID_C, "", PP_QOS_NONE},
    {"/docker/" ID_C "/kubepods/burstable/pod" UID2_D "/" ID_B, 1, PP_RUNTIME_UNKNOWN, ID_B, UID2_D,
     PP_QOS_BURSTABLE},
    /* tolerated spelling: trailing slash, doubled slashes, a trailing newline */
    {"/docker//" ID_B "/", 1, PP_RUNTIME_DOCKER, ID_B, "", PP_QOS_NONE},
    {"/system.slice/docker-" ID_A ".scope\n", 1, PP_RUNTIME_DOCKER, ID_A, "", PP_QOS_NONE},
    /* truncated, over-long, upper-case and non-hex IDs: no match */
    {"/system.slice/docker-74bd99a14582624f19f92fc32e56e519dd46dfaa35167aa1da7d75ee10e6f1f.scope",
     0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/system.slice/docker-" ID_A "0.scope", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/system.slice/docker-74BD99A14582624F19F92FC32E56E519DD46DFAA35167AA1DA7D75EE10E6F1FB.scope",
     0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"/docker/74bd99a14582624f19f92fc32e56e519dd46dfaa35167aa1da7d75ee10e6f1fg", 0, PP_RUNTIME_NONE,
     "", "", PP_QOS_NONE},
    {"/kubepods.slice/kubepods-pod" UID_U "x.slice/cri-containerd-" ID_A, 0, PP_RUNTIME_NONE, "",
     "", PP_QOS_NONE},
    {"/kubepods/burstable/podf6f2d169-f2ae-4afa-95ed-06ff2ed6b28/" ID_A, 1, PP_RUNTIME_UNKNOWN,
     ID_A, "", PP_QOS_NONE},
    {"/crio-", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {":cri-containerd:", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"x:rkt:" ID_A, 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
    {"\x01\xff/\x80garbage::/", 0, PP_RUNTIME_NONE, "", "", PP_QOS_NONE},
};

TEST(table_of_real_paths)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct pp_container_ref ref;
		int rc = pp_cgroup_path_parse(r->path, strlen(r->path), &ref);

		if (rc != r->rc || ref.runtime != r->rt || strcmp(ref.id, r->id) ||
		    strcmp(ref.pod_uid, r->pod) || ref.qos != r->qos)
			fprintf(stderr, "  row %zu: %s -> rc %d rt %d id '%s' pod '%s' qos %d\n", i,
				r->path, rc, ref.runtime, ref.id, ref.pod_uid, ref.qos);
		CHECK_EQ_U64(rc, r->rc);
		CHECK_EQ_U64(ref.runtime, r->rt);
		CHECK_STR(ref.id, r->id);
		CHECK_STR(ref.pod_uid, r->pod);
		CHECK_EQ_U64(ref.qos, r->qos);
	}
}

/* The parser reads only path[0..len): a path embedded in a longer /proc/PID/cgroup buffer. */
TEST(reads_only_len_bytes)
{
	static const char buf[] = "0::/system.slice/docker-" ID_A ".scope/init\n1:cpu:/x";
	const char *path = buf + 3;
	size_t len = (size_t)(strchr(path, '\n') - path);
	struct pp_container_ref ref;
	char *copy;

	CHECK_EQ_U64(pp_cgroup_path_parse(path, len, &ref), 1);
	CHECK_STR(ref.id, ID_A);
	CHECK_EQ_U64(ref.runtime, PP_RUNTIME_DOCKER);

	/* An exact-size heap copy with no NUL, so ASan catches any read past len. */
	len = strlen("/docker/" ID_B);
	copy = malloc(len);
	REQUIRE(copy);
	memcpy(copy, "/docker/" ID_B, len);
	CHECK_EQ_U64(pp_cgroup_path_parse(copy, len, &ref), 1);
	CHECK_STR(ref.id, ID_B);
	/* A prefix of the same buffer cuts the ID short: no match. */
	CHECK_EQ_U64(pp_cgroup_path_parse(copy, len - 1, &ref), 0);
	CHECK_STR(ref.id, "");
	free(copy);
}

TEST(malformed_input_is_einval)
{
	static const char nul[] = "/docker/\0" ID_A;
	struct pp_container_ref ref;
	char *longp;

	CHECK_EQ_U64(pp_cgroup_path_parse(NULL, 5, &ref), -EINVAL);
	CHECK_EQ_U64(pp_cgroup_path_parse("/x", 2, NULL), -EINVAL);
	CHECK_EQ_U64(pp_cgroup_path_parse("", 0, &ref), -EINVAL);
	CHECK_EQ_U64(pp_cgroup_path_parse("\n", 1, &ref), -EINVAL);
	CHECK_EQ_U64(pp_cgroup_path_parse(nul, sizeof(nul) - 1, &ref), -EINVAL);
	CHECK_EQ_U64(pp_cgroup_path_parse("/a\n/docker/" ID_A, strlen("/a\n/docker/" ID_A), &ref),
		     -EINVAL);
	CHECK_STR(ref.id, "");

	longp = malloc(PP_CGROUP_PATH_MAX + 1);
	REQUIRE(longp);
	memset(longp, '/', PP_CGROUP_PATH_MAX + 1);
	CHECK_EQ_U64(pp_cgroup_path_parse(longp, PP_CGROUP_PATH_MAX, &ref), 0);
	CHECK_EQ_U64(pp_cgroup_path_parse(longp, PP_CGROUP_PATH_MAX + 1, &ref), -EINVAL);
	free(longp);
}

/* A failed parse must not leave an earlier result behind in *out. */
TEST(out_is_reset)
{
	struct pp_container_ref ref;
	const char *p = "/kubepods/burstable/pod" UID_D "/" ID_A;

	REQUIRE(pp_cgroup_path_parse(p, strlen(p), &ref) == 1);
	CHECK_EQ_U64(pp_cgroup_path_parse("/system.slice/sshd.service", 26, &ref), 0);
	CHECK_STR(ref.id, "");
	CHECK_STR(ref.pod_uid, "");
	CHECK_EQ_U64(ref.runtime, PP_RUNTIME_NONE);
	CHECK_EQ_U64(ref.qos, PP_QOS_NONE);
}

TEST(runtime_names)
{
	CHECK_STR(pp_container_runtime_name(PP_RUNTIME_CONTAINERD), "containerd");
	CHECK_STR(pp_container_runtime_name(PP_RUNTIME_CRIO), "cri-o");
	CHECK_STR(pp_container_runtime_name(PP_RUNTIME_DOCKER), "docker");
	CHECK_STR(pp_container_runtime_name(PP_RUNTIME_PODMAN), "podman");
	CHECK(pp_container_runtime_name(PP_RUNTIME_NONE) == NULL);
	CHECK(pp_container_runtime_name(PP_RUNTIME_UNKNOWN) == NULL);
	CHECK(pp_container_runtime_name((enum pp_container_runtime)99) == NULL);
}

TEST_LIST = {
    {"table_of_real_paths", table_of_real_paths},
    {"reads_only_len_bytes", reads_only_len_bytes},
    {"malformed_input_is_einval", malformed_input_is_einval},
    {"out_is_reset", out_is_reset},
    {"runtime_names", runtime_names},
};
TEST_MAIN()
