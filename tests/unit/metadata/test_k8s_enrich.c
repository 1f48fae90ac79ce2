/*
 * Tests of the pod-metadata enricher: a real API-server pod list loaded into the store, and a
 * directory tree standing in for the node's cgroups (ids are inode numbers) whose container
 * cgroups carry that list's container ids: every attribute of issue-4 item 3 arrives through
 * the container cache, the owning workload is the most specific one, and a container the
 * list lacks keeps its cgroup-derived attributes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "base/fsutil.h"
#include "metadata/k8s_enrich.h"

#define LIST PP_TEST_DATA_DIR "/k8s/podlist_apiserver.json"
#define CHECKOUT_APP "6dd6cf154425d58c7bdbef93750269e248335fcf325d9236c98151c3e8cfc841"
#define NODE_EXPORTER "6869e2ddc0775082b343fc685c67b2ad780fd3bea7abcd426775c38547cd99d1"
#define POSTGRES "720d3fd9deec5c8a6c55c3cf195841390fc3c212a74c54701a02ae1ef322345f"
#define NIGHTLY "1948541e4b6653d2c7828765e41d46c41614bb8c4297688d4f94aca96ba6e04a"
#define UNKNOWN_ID "0000000000000000000000000000000000000000000000000000000000000001"

static char root[128];

TEST(pod_metadata_reaches_containers)
{
	struct pp_k8s_meta_opts ko = {
	    .source = PP_K8S_APISERVER, .node_name = "worker-1", .no_thread = 1};
	struct pp_container_meta_opts co = {.max_entries = 64};
	struct pp_k8s_meta *k;
	struct pp_container_meta *m;
	const struct pp_container_info *i;
	uint64_t id_checkout, id_exporter, id_pg, id_nightly, id_unknown;
	size_t len;
	char *list = pp_test_read_file(LIST, &len);

	REQUIRE(list);
	snprintf(root, sizeof(root), "/tmp/pp_test_k8s_enrich_%d", (int)getpid());
	id_checkout =
	    pp_test_mkdirs(root, "kubepods.slice/kubepods-burstable.slice/"
				 "kubepods-burstable-podaf82255f_05f1_2293_d0b8_3f1e2fc6d124.slice/"
				 "cri-containerd-" CHECKOUT_APP ".scope");
	id_exporter =
	    pp_test_mkdirs(root, "kubepods/burstable/pod69ee2891-65f0-fd66-d337-27ed281e0218/"
				 "crio-" NODE_EXPORTER);
	id_pg = pp_test_mkdirs(
	    root, "kubepods.slice/kubepods-pod4c14377b_27f7_41c5_876a_d91843a1d62e.slice/"
		  "docker-" POSTGRES ".scope");
	id_nightly = pp_test_mkdirs(
	    root, "kubepods.slice/kubepods-besteffort.slice/"
		  "kubepods-besteffort-pod9e661cb8_54c6_0967_1b2c_a58d4b8d38a2.slice/"
		  "cri-containerd-" NIGHTLY ".scope");
	id_unknown = pp_test_mkdirs(root, "system.slice/docker-" UNKNOWN_ID ".scope");
	REQUIRE(id_checkout && id_exporter && id_pg && id_nightly && id_unknown);

	k = pp_k8s_meta_new(&ko);
	REQUIRE(k);
	co.cgroup2_root = root;
	co.enricher = pp_k8s_enricher(k);
	m = pp_container_meta_new(&co);
	REQUIRE(m);

	/* Before the list: cgroup-derived attributes only. */
	i = pp_container_meta_lookup(m, id_checkout, 1, 0);
	CHECK_STR(i->ref.id, CHECKOUT_APP);
	CHECK_STR(i->pod_name, "");
	REQUIRE(pp_k8s_meta_load_buffer(k, list, len) == 0);

	i = pp_container_meta_lookup(m, id_checkout, 1, 0);
	CHECK_STR(i->pod_name, "checkout-7d9f8b6c5d-x2k9p");
	CHECK_STR(i->namespace_name, "shop");
	CHECK_STR(i->container_name, "app");
	CHECK_STR(i->workload_kind, "deployment");
	CHECK_STR(i->workload_name, "checkout");
	CHECK_STR(i->service_name, "checkout");

	i = pp_container_meta_lookup(m, id_exporter, 2, 0);
	CHECK_STR(i->workload_kind, "daemonset");
	CHECK_STR(i->workload_name, "node-exporter");
	CHECK_STR(i->service_name, "node-exporter"); /* no label: the container name */
	CHECK_EQ_U64(i->ref.runtime, PP_RUNTIME_CRIO);

	i = pp_container_meta_lookup(m, id_pg, 3, 0);
	CHECK_STR(i->workload_kind, "statefulset");
	CHECK_STR(i->namespace_name, "db");

	i = pp_container_meta_lookup(m, id_nightly, 4, 0);
	CHECK_STR(i->workload_kind, "cronjob");
	CHECK_STR(i->workload_name, "nightly-report");

	i = pp_container_meta_lookup(m, id_unknown, 5, 0);
	CHECK_STR(i->ref.id, UNKNOWN_ID);
	CHECK_STR(i->pod_name, "");

	{
		struct pp_label l[PP_CONTAINER_MAX_ATTRS];
		size_t n;

		i = pp_container_meta_lookup(m, id_checkout, 1, 0);
		n = pp_container_info_attrs(i, l, PP_CONTAINER_MAX_ATTRS);
		REQUIRE(n == 8);
		CHECK_STR(l[3].key, "k8s.pod.name");
		CHECK_STR(l[6].key, "k8s.deployment.name");
		CHECK_STR(l[7].key, "service.name");
	}
	pp_container_meta_free(m);
	pp_k8s_meta_free(k);
	free(list);
	CHECK(pp_test_rm_tree(root) == 0);
}

TEST_LIST = {
    {"pod_metadata_reaches_containers", pod_metadata_reaches_containers},
};
TEST_MAIN()
