/*
 * Tests of the container metadata cache: /proc/PID/cgroup texts of v2, hybrid and v1 hosts;
 * cgroup ids resolved through a directory tree laid out as the kubelet's systemd and
 * cgroupfs drivers lay out pods (the walk needs only inode numbers, so a plain directory tree
 * stands in for cgroupfs); a per-process fake /proc; late pod metadata; the table's bound;
 * and the resource attributes in their fixed order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pebsprof/record.h>

#include "check.h"
#include "testfs.h"
#include "metadata/cgroup_ids.h"
#include "metadata/container_meta.h"

#define CID_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CID_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define POD_UID "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"
#define POD_UID_US "1b2c3d4e_5f60_4718_8293_a4b5c6d7e8f9"

static int parse(const char *s, struct pp_container_ref *ref)
{
	return pp_proc_cgroup_parse(s, strlen(s), ref);
}

TEST(proc_cgroup_v2)
{
	struct pp_container_ref ref;

	CHECK_EQ_U64(parse("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-"
			   "pod" POD_UID_US ".slice/cri-containerd-" CID_A ".scope\n",
			   &ref),
		     1);
	CHECK_STR(ref.id, CID_A);
	CHECK_EQ_U64(ref.runtime, PP_RUNTIME_CONTAINERD);
	CHECK_STR(ref.pod_uid, POD_UID);
	CHECK_EQ_U64(ref.qos, PP_QOS_BURSTABLE);

	CHECK_EQ_U64(parse("0::/user.slice/user-0.slice/session-1.scope\n", &ref), 0);
	CHECK_STR(ref.id, "");
}

TEST(proc_cgroup_v1_and_hybrid)
{
	struct pp_container_ref ref;
	/* cgroup v1 host with docker's cgroupfs driver. */
	const char *v1 = "12:pids:/docker/" CID_B "\n"
			 "11:memory:/docker/" CID_B "\n"
			 "1:name=systemd:/docker/" CID_B "\n";
	/* Hybrid host: the unified line names a host service, a v1 line the container. */
	const char *hybrid = "0::/system.slice/containerd.service\n"
			     "4:cpu,cpuacct:/kubepods/besteffort/pod" POD_UID "/" CID_A "\n";

	CHECK_EQ_U64(parse(v1, &ref), 1);
	CHECK_STR(ref.id, CID_B);
	CHECK_EQ_U64(ref.runtime, PP_RUNTIME_DOCKER);
	CHECK_EQ_U64(parse(hybrid, &ref), 1);
	CHECK_STR(ref.id, CID_A);
	CHECK_STR(ref.pod_uid, POD_UID);
	CHECK_EQ_U64(ref.qos, PP_QOS_BESTEFFORT);
}

TEST(proc_cgroup_garbage)
{
	struct pp_container_ref ref;

	CHECK_EQ_U64(parse("", &ref), (uint64_t)-EINVAL);
	CHECK_EQ_U64(parse("not a cgroup file\n", &ref), (uint64_t)-EINVAL);
	CHECK_EQ_U64(parse("x:memory:/docker/" CID_B "\n", &ref), (uint64_t)-EINVAL);
	CHECK_EQ_U64(parse(":memory:/a\n", &ref), (uint64_t)-EINVAL);
	CHECK_EQ_U64(pp_proc_cgroup_parse(NULL, 0, &ref), (uint64_t)-EINVAL);
	/* A line without a path is valid text but names nothing. */
	CHECK_EQ_U64(parse("0::\n", &ref), 0);
}

static char tree[256];

struct fake_pods {
	uint64_t generation;
	int known; /* whether CID_A is known yet */
	int calls;
};

static int fake_enrich(void *ctx, struct pp_container_info *info)
{
	struct fake_pods *f = ctx;

	f->calls++;
	if (!f->known || strcmp(info->ref.id, CID_A))
		return -ENOENT;
	snprintf(info->pod_name, sizeof(info->pod_name), "checkout-7d9f8b6c5-x2x4q");
	snprintf(info->namespace_name, sizeof(info->namespace_name), "shop");
	snprintf(info->container_name, sizeof(info->container_name), "app");
	snprintf(info->workload_kind, sizeof(info->workload_kind), "deployment");
	snprintf(info->workload_name, sizeof(info->workload_name), "checkout");
	snprintf(info->service_name, sizeof(info->service_name), "checkout-svc");
	return 0;
}

static uint64_t fake_generation(void *ctx)
{
	return ((struct fake_pods *)ctx)->generation;
}

TEST(cgroup_tree_lookup_and_late_metadata)
{
	struct fake_pods pods = {.generation = 1};
	struct pp_container_meta_opts o = {
	    .cgroup2_root = tree,
	    .proc_root = "/nonexistent-pp-proc", /* no mountinfo: a pure cgroup v2 host */
	    .max_entries = 16,
	    .enricher = {.enrich = fake_enrich, .generation = fake_generation, .ctx = &pods},
	};
	struct pp_container_meta *m;
	const struct pp_container_info *info;
	struct pp_container_meta_stats st;
	uint64_t id_a, id_b, id_host;

	snprintf(tree, sizeof(tree), "/tmp/pp_test_cm_%d", (int)getpid());
	id_a = pp_test_mkdirs(
	    tree, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_UID_US
		  ".slice/cri-containerd-" CID_A ".scope");
	id_b = pp_test_mkdirs(tree, "kubepods/besteffort/pod" POD_UID "/" CID_B);
	id_host = pp_test_mkdirs(tree, "system.slice/sshd.service");
	REQUIRE(id_a && id_b && id_host);
	m = pp_container_meta_new(&o);
	REQUIRE(m != NULL);

	info = pp_container_meta_lookup(m, id_a, 100, 0);
	CHECK_STR(info->ref.id, CID_A);
	CHECK_STR(info->ref.pod_uid, POD_UID);
	CHECK_STR(info->pod_name, ""); /* metadata not there yet */

	info = pp_container_meta_lookup(m, id_b, 101, 0);
	CHECK_STR(info->ref.id, CID_B);
	CHECK_EQ_U64(info->ref.runtime, PP_RUNTIME_UNKNOWN);
	info = pp_container_meta_lookup(m, id_host, 102, 0);
	CHECK_STR(info->ref.id, "");

	/* Same generation: a hit does not ask the enricher again. */
	int calls = pods.calls;
	info = pp_container_meta_lookup(m, id_a, 100, 0);
	CHECK_EQ_U64(pods.calls, calls);

	/* Metadata arrives: the cached container picks it up on its next lookup. */
	pods.known = 1;
	pods.generation++;
	info = pp_container_meta_lookup(m, id_a, 100, 0);
	CHECK_STR(info->pod_name, "checkout-7d9f8b6c5-x2x4q");
	CHECK_STR(info->service_name, "checkout-svc");

	/* An id that is no cgroup: answered "no container", counted, asked again on a hit. */
	info = pp_container_meta_lookup(m, 0x7fffffffffull, 103, 0);
	CHECK_STR(info->ref.id, "");
	pp_container_meta_lookup(m, 0x7fffffffffull, 103, 0);
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.unresolved, 2);
	CHECK_EQ_U64(st.per_process, 0);
	CHECK_EQ_U64(st.entries, 4);
	CHECK(st.enriched >= 1);

	/* A container started after the last walk: unknown at first, found by a later walk
	 * (walks are at most one a second) and no longer "no container" once found. */
	uint64_t id_new = pp_test_mkdirs(tree, "docker/" CID_B);
	REQUIRE(id_new != 0);
	info = pp_container_meta_lookup(m, id_new, 104, 0);
	if (info->ref.id[0] == '\0') {
		usleep(1100 * 1000);
		info = pp_container_meta_lookup(m, id_new, 104, 0);
	}
	CHECK_STR(info->ref.id, CID_B);
	CHECK_EQ_U64(info->ref.runtime, PP_RUNTIME_DOCKER);
	pp_container_meta_free(m);
	pp_test_rm_tree(tree);
}

TEST(bound_evicts_least_recent)
{
	struct pp_container_meta_opts o = {
	    .cgroup2_root = tree, .proc_root = "/nonexistent-pp-proc", .max_entries = 2};
	struct pp_container_meta *m;
	struct pp_container_meta_stats st;
	uint64_t ids[3];

	snprintf(tree, sizeof(tree), "/tmp/pp_test_cm_b_%d", (int)getpid());
	ids[0] = pp_test_mkdirs(tree, "docker/" CID_A);
	ids[1] = pp_test_mkdirs(tree, "docker/" CID_B);
	ids[2] = pp_test_mkdirs(tree, "system.slice");
	m = pp_container_meta_new(&o);
	REQUIRE(m != NULL);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 3; i++)
			pp_container_meta_lookup(m, ids[i], 1, 0);
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.entries, 2);
	CHECK_EQ_U64(st.evictions, 4); /* every lookup after the second missed */
	CHECK_STR(pp_container_meta_lookup(m, ids[1], 1, 0)->ref.id, CID_B);
	pp_container_meta_free(m);
	pp_test_rm_tree(tree);
}

TEST(per_process_fake_proc)
{
	struct pp_container_meta_opts o = {.per_process = 1, .max_entries = 8};
	struct pp_container_meta *m;
	const struct pp_container_info *info;
	char path[512];
	FILE *f;

	snprintf(tree, sizeof(tree), "/tmp/pp_test_cm_p_%d", (int)getpid());
	pp_test_mkdirs(tree, "4242");
	snprintf(path, sizeof(path), "%s/4242/cgroup", tree);
	f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs("3:memory:/docker/" CID_B "\n0::/\n", f);
	fclose(f);
	o.proc_root = tree;
	m = pp_container_meta_new(&o);
	REQUIRE(m != NULL);
	info = pp_container_meta_lookup(m, 1, 4242, 0);
	CHECK_STR(info->ref.id, CID_B);
	/* Rewritten file (a reused pid): the cached answer stays for the old generation, the
	 * new generation reads the file again. */
	f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs("0::/system.slice/cron.service\n", f);
	fclose(f);
	CHECK_STR(pp_container_meta_lookup(m, 1, 4242, 0)->ref.id, CID_B);
	CHECK_STR(pp_container_meta_lookup(m, 1, 4242, 1)->ref.id, "");
	CHECK_STR(pp_container_meta_lookup(m, 1, 4242, 0)->ref.id, CID_B);
	/* A process that is gone: no container, no crash. */
	CHECK_STR(pp_container_meta_lookup(m, 1, 999999, 0)->ref.id, "");
	pp_container_meta_free(m);
	pp_test_rm_tree(tree);
}

TEST(attrs_order_and_subset)
{
	struct pp_container_info info;
	struct pp_label l[PP_CONTAINER_MAX_ATTRS];
	size_t n;

	memset(&info, 0, sizeof(info));
	snprintf(info.ref.id, sizeof(info.ref.id), "%s", CID_A);
	info.ref.runtime = PP_RUNTIME_CRIO;
	snprintf(info.ref.pod_uid, sizeof(info.ref.pod_uid), "%s", POD_UID);
	n = pp_container_info_attrs(&info, l, PP_CONTAINER_MAX_ATTRS);
	REQUIRE(n == 3);
	CHECK_STR(l[0].key, "container.id");
	CHECK_STR(l[1].key, "container.runtime");
	CHECK_STR(l[1].value, "cri-o");
	CHECK_STR(l[2].key, "k8s.pod.uid");

	snprintf(info.pod_name, sizeof(info.pod_name), "db-0");
	snprintf(info.namespace_name, sizeof(info.namespace_name), "data");
	snprintf(info.container_name, sizeof(info.container_name), "postgres");
	snprintf(info.workload_kind, sizeof(info.workload_kind), "statefulset");
	snprintf(info.workload_name, sizeof(info.workload_name), "db");
	snprintf(info.service_name, sizeof(info.service_name), "postgres");
	n = pp_container_info_attrs(&info, l, PP_CONTAINER_MAX_ATTRS);
	REQUIRE(n == 8);
	CHECK_STR(l[6].key, "k8s.statefulset.name");
	CHECK_STR(l[6].value, "db");
	CHECK_STR(l[7].key, "service.name");
	CHECK_EQ_U64(pp_container_info_attrs(&info, l, 2), 2);
}

static void write_file(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/*
 * A hybrid host (cgroup v1 hierarchies beside the unified one) whose runtime uses the cgroupfs
 * driver: the unified hierarchy shows the container's tasks under the runtime's service, so
 * the process's own cgroup file is asked, once per process; a container the unified cgroup
 * names is still found by its id.
 */
TEST(hybrid_host_asks_the_process)
{
	struct pp_container_meta_opts o = {.max_entries = 16};
	struct pp_container_meta_stats st;
	struct pp_container_meta *m;
	char root[600];
	uint64_t id_service, id_ctr;

	snprintf(tree, sizeof(tree), "/tmp/pp_test_cm_h_%d", (int)getpid());
	id_service = pp_test_mkdirs(tree, "cg/system.slice/containerd.service");
	id_ctr = pp_test_mkdirs(tree, "cg/system.slice/docker-" CID_A ".scope");
	pp_test_mkdirs(tree, "proc/self");
	pp_test_mkdirs(tree, "proc/700");
	REQUIRE(id_service && id_ctr);
	write_file("proc/self/mountinfo",
		   "25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs ro,mode=755\n"
		   "26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
		   "27 25 0:24 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
	write_file("proc/700/cgroup", "0::/system.slice/containerd.service\n"
				      "5:memory:/kubepods/burstable/pod" POD_UID "/" CID_B "\n");
	snprintf(root, sizeof(root), "%s/cg", tree);
	o.cgroup2_root = root;
	snprintf(root + 300, 300, "%s/proc", tree);
	o.proc_root = root + 300;
	m = pp_container_meta_new(&o);
	REQUIRE(m);
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.hybrid, 1);
	CHECK_STR(pp_container_meta_lookup(m, id_service, 700, 0)->ref.id, CID_B);
	CHECK_STR(pp_container_meta_lookup(m, id_service, 700, 0)->ref.pod_uid, POD_UID);
	CHECK_STR(pp_container_meta_lookup(m, id_ctr, 701, 0)->ref.id, CID_A);
	/* A host process with no cgroup file to read: no container. */
	CHECK_STR(pp_container_meta_lookup(m, id_service, 702, 0)->ref.id, "");
	pp_container_meta_free(m);
	pp_test_rm_tree(tree);
}

/*
 * Keys of v1 and v2 cgroups (PP_CONTAINER_KEY_V1): the first live process met with a key is
 * read, and its answer holds for the key's other processes, the gone ones too, without
 * reading theirs; a key whose first process was gone is asked again with the next one. A
 * process's own entry (the bit alone) whose process is gone is not asked again.
 */
TEST(v1_keys_read_a_cgroup_once)
{
	struct pp_container_meta_opts o = {.per_process = 1, .max_entries = 16};
	struct pp_container_meta_stats st;
	struct pp_container_meta *m;
	const uint64_t key_a = PP_CONTAINER_KEY_V1 | 0x1234, key_b = PP_CONTAINER_KEY_V1 | 0x5678;

	snprintf(tree, sizeof(tree), "/tmp/pp_test_cm_v1_%d", (int)getpid());
	pp_test_mkdirs(tree, "800");
	pp_test_mkdirs(tree, "900");
	write_file("800/cgroup", "5:memory:/docker/" CID_A "\n0::/\n");
	write_file("900/cgroup", "5:memory:/kubepods/burstable/pod" POD_UID "/" CID_B "\n0::/\n");
	o.proc_root = tree;
	m = pp_container_meta_new(&o);
	REQUIRE(m);
	CHECK_STR(pp_container_meta_lookup(m, key_a, 800, 0)->ref.id, CID_A);
	/* 801 and 802 have no file (gone): the key's answer is theirs */
	CHECK_STR(pp_container_meta_lookup(m, key_a, 801, 0)->ref.id, CID_A);
	CHECK_STR(pp_container_meta_lookup(m, key_a, 802, 3)->ref.id, CID_A);
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.proc_reads, 1);
	CHECK_EQ_U64(st.v1_lookups, 3);
	/* key_b met first with a gone process: unresolved, then its live one answers */
	CHECK_STR(pp_container_meta_lookup(m, key_b, 901, 0)->ref.id, "");
	CHECK_STR(pp_container_meta_lookup(m, key_b, 900, 0)->ref.id, CID_B);
	CHECK_STR(pp_container_meta_lookup(m, key_b, 900, 0)->ref.pod_uid, POD_UID);
	CHECK_STR(pp_container_meta_lookup(m, key_b, 902, 0)->ref.id, CID_B);
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.proc_reads, 3);
	/* the bit alone: the process's own file, once even when it is gone */
	CHECK_STR(pp_container_meta_lookup(m, PP_CONTAINER_KEY_V1, 900, 0)->ref.id, CID_B);
	CHECK_STR(pp_container_meta_lookup(m, PP_CONTAINER_KEY_V1, 903, 0)->ref.id, "");
	CHECK_STR(pp_container_meta_lookup(m, PP_CONTAINER_KEY_V1, 903, 0)->ref.id, "");
	CHECK_STR(pp_container_meta_lookup(m, 1, 903, 0)->ref.id, "");
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.proc_reads, 5);
	pp_container_meta_free(m);
	pp_test_rm_tree(tree);
}

/* Which v1 hierarchy keys the samples, from /proc/cgroups as kernels write it. */
TEST(v1_key_subsystem_from_proc_cgroups)
{
	/* a hybrid host's (cgroup2 holds net_cls and the others with hierarchy 0) */
	static const char hybrid[] = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
				     "cpuset\t3\t3\t1\ncpu\t1\t3\t1\ncpuacct\t2\t3\t1\n"
				     "blkio\t7\t3\t1\nmemory\t4\t10\t1\ndevices\t5\t3\t1\n"
				     "freezer\t6\t3\t1\nnet_cls\t0\t2\t1\nperf_event\t0\t2\t1\n"
				     "net_prio\t0\t2\t1\nhugetlb\t0\t2\t1\npids\t8\t3\t1\n";
	/* memory disabled (cgroup_disable=memory): pids, the next choice */
	static const char no_memory[] = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
					"cpuset\t2\t1\t1\ncpu\t3\t1\t1\nmemory\t0\t1\t0\n"
					"pids\t4\t1\t1\n";
	/* cgroup2 only: every hierarchy 0 */
	static const char v2[] = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
				 "cpuset\t0\t80\t1\ncpu\t0\t80\t1\nmemory\t0\t80\t1\n";
	static const char only_other[] = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
					 "cpuset\t0\t1\t1\nnet_cls\t2\t1\t1";

	CHECK(pp_proc_cgroups_subsys(hybrid, strlen(hybrid), NULL, 0) == 5);
	CHECK(pp_proc_cgroups_subsys(no_memory, strlen(no_memory), NULL, 0) == 4);
	CHECK(pp_proc_cgroups_subsys(v2, strlen(v2), NULL, 0) == 0);
	CHECK(pp_proc_cgroups_subsys(only_other, strlen(only_other), NULL, 0) == 2);
	CHECK(pp_proc_cgroups_subsys("", 0, NULL, 0) == 0);
	CHECK(pp_proc_cgroups_subsys("memory 4 10\n", 12, NULL, 0) == -EINVAL);
	CHECK(pp_proc_cgroups_subsys(NULL, 3, NULL, 0) == -EINVAL);
}

/*
 * A key checked against the cgroups the process read for it is in now: one that moved since
 * its sample (as a runtime's init does) does not answer for the key; the next one does.
 */
TEST(v1_keys_are_checked_against_the_process)
{
	struct pp_container_meta_opts o = {.per_process = 1, .max_entries = 16};
	struct pp_container_meta_stats st;
	struct pp_container_meta *m;
	char text[1024];
	struct stat s1, s2;
	uint64_t key;

	snprintf(tree, sizeof(tree), "/tmp/pp_test_cm_vk_%d", (int)getpid());
	pp_test_mkdirs(tree, "mem/docker/" CID_A);
	pp_test_mkdirs(tree, "mem/system.slice");
	pp_test_mkdirs(tree, "cg2/system.slice/docker.service");
	pp_test_mkdirs(tree, "proc/self");
	pp_test_mkdirs(tree, "proc/800");
	pp_test_mkdirs(tree, "proc/801");
	snprintf(text, sizeof(text),
		 "25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs ro,mode=755\n"
		 "26 25 0:23 / %s/cg2 rw shared:9 - cgroup2 cgroup2 rw\n"
		 "27 25 0:24 / %s/mem rw shared:10 - cgroup cgroup rw,memory\n",
		 tree, tree);
	write_file("proc/self/mountinfo", text);
	write_file("proc/cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
				   "cpuset\t3\t3\t1\nmemory\t4\t10\t1\n");
	write_file("proc/800/cgroup", "4:memory:/docker/" CID_A "\n1:cpuset:/\n"
				      "0::/system.slice/docker.service\n");
	write_file("proc/801/cgroup", "4:memory:/system.slice\n0::/system.slice/docker.service\n");
	snprintf(text, sizeof(text), "%s/mem/docker/" CID_A, tree);
	REQUIRE(stat(text, &s1) == 0);
	snprintf(text, sizeof(text), "%s/cg2/system.slice/docker.service", tree);
	REQUIRE(stat(text, &s2) == 0);
	key = PP_CONTAINER_KEY_V1 | pp_cgroup_key(s1.st_ino, s2.st_ino);
	snprintf(text, sizeof(text), "%s/proc", tree);
	o.proc_root = text;
	m = pp_container_meta_new(&o);
	REQUIRE(m);
	/* 801 left the container's cgroups after its sample: no answer for the key */
	CHECK_STR(pp_container_meta_lookup(m, key, 801, 0)->ref.id, "");
	CHECK_STR(pp_container_meta_lookup(m, key, 800, 0)->ref.id, CID_A);
	CHECK_STR(pp_container_meta_lookup(m, key, 801, 0)->ref.id, CID_A);
	pp_container_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.key_mismatches, 1);
	CHECK_EQ_U64(st.proc_reads, 2);
	/* without the v2 part (a key made without cgroup2) 800 no longer makes it */
	CHECK_STR(
	    pp_container_meta_lookup(m, PP_CONTAINER_KEY_V1 | pp_cgroup_key(s1.st_ino, 0), 800, 0)
		->ref.id,
	    "");
	pp_container_meta_free(m);
	pp_test_rm_tree(tree);
}

TEST_LIST = {
    {"v1_keys_are_checked_against_the_process", v1_keys_are_checked_against_the_process},
    {"v1_keys_read_a_cgroup_once", v1_keys_read_a_cgroup_once},
    {"v1_key_subsystem_from_proc_cgroups", v1_key_subsystem_from_proc_cgroups},
    {"proc_cgroup_v2", proc_cgroup_v2},
    {"proc_cgroup_v1_and_hybrid", proc_cgroup_v1_and_hybrid},
    {"proc_cgroup_garbage", proc_cgroup_garbage},
    {"cgroup_tree_lookup_and_late_metadata", cgroup_tree_lookup_and_late_metadata},
    {"bound_evicts_least_recent", bound_evicts_least_recent},
    {"per_process_fake_proc", per_process_fake_proc},
    {"attrs_order_and_subset", attrs_order_and_subset},
    {"hybrid_host_asks_the_process", hybrid_host_asks_the_process},
};
TEST_MAIN()
