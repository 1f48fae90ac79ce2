/*
 * Tests of the PodList parser on fixtures shaped like real API server and kubelet answers
 * (tests/data/k8s): every kept attribute, the workload rules, each runtime prefix, and what
 * must not match (pending containers, error bodies, other kinds, malformed JSON, bounds).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testfs.h"
#include "metadata/k8s_pods.h"

#define K8S_DATA PP_TEST_DATA_DIR "/k8s/"

/* Container ids in the fixtures: sha256("<pod>/<container>"), see the fixture files. */
#define ID_CHECKOUT_APP "6dd6cf154425d58c7bdbef93750269e248335fcf325d9236c98151c3e8cfc841"
#define ID_CHECKOUT_PROXY "1bd3942e25dd2fb0e424efc1c7c498c61bc2bb94fd3fb52b11908a00958e0d6e"
#define ID_CHECKOUT_INIT "cc29f701a1b01ab6aaca2aab09d076ec326c3ec71450f59dbea9cde10397436a"
#define ID_NODE_EXPORTER "6869e2ddc0775082b343fc685c67b2ad780fd3bea7abcd426775c38547cd99d1"
#define ID_POSTGRES "720d3fd9deec5c8a6c55c3cf195841390fc3c212a74c54701a02ae1ef322345f"
#define ID_MIGRATE "1a61b398219cbae41a565aee0e635bab25ffd2b3ceef7ffd0d89b00209d416b2"
#define ID_REPORT "1948541e4b6653d2c7828765e41d46c41614bb8c4297688d4f94aca96ba6e04a"
#define ID_DEBUGGER "a2b1872c2c8bb39f91f5515e0c1e2b6222892e6f4238ea534a18e03025ec40f8"
#define ID_PENDING_WEB "14a436ee6a33c611d440d721051202c82f91593d41ae09e6570d45c3f2d6ed61"

static int parse_file(const char *name, const struct pp_k8s_pods_limits *lim,
		      struct pp_k8s_podlist **out)
{
	char path[512];
	size_t len = 0;
	char *buf;
	int rc;

	snprintf(path, sizeof(path), K8S_DATA "%s", name);
	buf = pp_test_read_file(path, &len);
	if (!buf) {
		fprintf(stderr, "  cannot read %s\n", path);
		return -ENOENT;
	}
	rc = pp_k8s_pods_parse(buf, len, lim, out);
	free(buf);
	return rc;
}

static const struct pp_k8s_container *find_ctr(const struct pp_k8s_podlist *l, const char *hex)
{
	uint8_t id[32];

	if (pp_k8s_container_id_from_hex(hex, strlen(hex), id))
		return NULL;
	for (size_t i = 0; i < l->n_ctrs; i++)
		if (memcmp(l->ctrs[i].id, id, 32) == 0)
			return &l->ctrs[i];
	return NULL;
}

static const struct pp_k8s_pod *find_pod(const struct pp_k8s_podlist *l, const char *name)
{
	for (size_t i = 0; i < l->n_pods; i++)
		if (strcmp(pp_k8s_podlist_str(l, l->pods[i].name), name) == 0)
			return &l->pods[i];
	return NULL;
}

static int parse_str(const char *doc, struct pp_k8s_podlist **out)
{
	return pp_k8s_pods_parse(doc, strlen(doc), NULL, out);
}

#define STR(l, off) pp_k8s_podlist_str((l), (off))

TEST(apiserver_list_every_attribute)
{
	struct pp_k8s_podlist *l = NULL;
	const struct pp_k8s_container *c;
	const struct pp_k8s_pod *p;

	REQUIRE(parse_file("podlist_apiserver.json", NULL, &l) == 0);
	/* 10 items; all have uid, name and namespace. */
	CHECK_EQ_U64(l->n_pods, 10);
	CHECK_EQ_U64(l->pods_skipped, 0);
	/* 12 statuses with an id; the pending web container has none. */
	CHECK_EQ_U64(l->n_ctrs, 14);
	CHECK_EQ_U64(l->ctrs_skipped, 1);

	c = find_ctr(l, ID_CHECKOUT_APP);
	REQUIRE(c != NULL);
	p = &l->pods[c->pod];
	CHECK_STR(STR(l, c->name), "app");
	CHECK(c->runtime == PP_RUNTIME_CONTAINERD);
	CHECK(c->kind == PP_K8S_CONTAINER);
	CHECK_STR(STR(l, p->name), "checkout-7d9f8b6c5d-x2k9p");
	CHECK_STR(STR(l, p->ns), "shop");
	CHECK_STR(STR(l, p->uid), "af82255f-05f1-2293-d0b8-3f1e2fc6d124");
	CHECK_STR(STR(l, p->node), "worker-1.example.internal");
	CHECK_STR(STR(l, p->app_name), "checkout");
	CHECK_STR(STR(l, p->replicaset), "checkout-7d9f8b6c5d");
	CHECK_STR(STR(l, p->deployment), "checkout");
	CHECK_STR(STR(l, p->daemonset), "");
	CHECK_STR(STR(l, p->job), "");

	c = find_ctr(l, ID_CHECKOUT_PROXY);
	REQUIRE(c != NULL);
	CHECK_STR(STR(l, c->name), "istio-proxy");
	CHECK_STR(STR(l, l->pods[c->pod].name), "checkout-7d9f8b6c5d-x2k9p");
	c = find_ctr(l, ID_CHECKOUT_INIT);
	REQUIRE(c != NULL);
	CHECK(c->kind == PP_K8S_CONTAINER_INIT);
	CHECK_STR(STR(l, c->name), "istio-init");

	/* DaemonSet, CRI-O ids, no app.kubernetes.io/name label (only "app"). */
	c = find_ctr(l, ID_NODE_EXPORTER);
	REQUIRE(c != NULL);
	p = &l->pods[c->pod];
	CHECK(c->runtime == PP_RUNTIME_CRIO);
	CHECK_STR(STR(l, p->daemonset), "node-exporter");
	CHECK_STR(STR(l, p->app_name), "");
	CHECK_STR(STR(l, p->replicaset), "");
	CHECK_STR(STR(l, p->ns), "monitoring");

	/* StatefulSet, docker ids. */
	c = find_ctr(l, ID_POSTGRES);
	REQUIRE(c != NULL);
	p = &l->pods[c->pod];
	CHECK(c->runtime == PP_RUNTIME_DOCKER);
	CHECK_STR(STR(l, p->statefulset), "postgres");
	CHECK_STR(STR(l, p->app_name), "postgres");
	CHECK_STR(STR(l, p->name), "postgres-0");
	CHECK_STR(STR(l, p->uid), "4c14377b-27f7-41c5-876a-d91843a1d62e");

	/* A plain Job (terminated container still has its id) and a CronJob's Job. */
	c = find_ctr(l, ID_MIGRATE);
	REQUIRE(c != NULL);
	CHECK_STR(STR(l, l->pods[c->pod].job), "migrate-schema");
	CHECK_STR(STR(l, l->pods[c->pod].cronjob), "");
	c = find_ctr(l, ID_REPORT);
	REQUIRE(c != NULL);
	CHECK_STR(STR(l, l->pods[c->pod].job), "nightly-report-28934520");
	CHECK_STR(STR(l, l->pods[c->pod].cronjob), "nightly-report");
	CHECK_STR(STR(l, l->pods[c->pod].ns), "reports");

	/* Bare pod with an ephemeral debug container. */
	c = find_ctr(l, ID_DEBUGGER);
	REQUIRE(c != NULL);
	p = &l->pods[c->pod];
	CHECK(c->kind == PP_K8S_CONTAINER_EPHEMERAL);
	CHECK_STR(STR(l, c->name), "debugger-x7f2k");
	CHECK_STR(STR(l, p->name), "debug-shell");
	CHECK(!p->replicaset && !p->deployment && !p->daemonset && !p->statefulset && !p->job &&
	      !p->cronjob);

	/* Pending: the pod is known, its container is not (no containerID yet). */
	CHECK(find_ctr(l, ID_PENDING_WEB) == NULL);
	p = find_pod(l, "web-5f7c9d8b4-pend1");
	REQUIRE(p != NULL);
	CHECK_STR(STR(l, p->deployment), "web");

	/* ReplicaSet without pod-template-hash: stays a ReplicaSet. */
	p = find_pod(l, "legacy-rs-abcde");
	REQUIRE(p != NULL);
	CHECK_STR(STR(l, p->replicaset), "legacy-rs");
	CHECK_STR(STR(l, p->deployment), "");

	/* Mirror pod owned by the Node: no workload. Job with a 7-digit suffix: no CronJob. */
	p = find_pod(l, "kube-apiserver-worker-1");
	REQUIRE(p != NULL);
	CHECK(!p->replicaset && !p->daemonset && !p->job);
	p = find_pod(l, "batch-1234567-zz9x1");
	REQUIRE(p != NULL);
	CHECK_STR(STR(l, p->job), "batch-1234567");
	CHECK_STR(STR(l, p->cronjob), "");

	/* Interning: the node name is stored once for ten pods. */
	for (size_t i = 1; i < l->n_pods; i++)
		CHECK(l->pods[i].node == l->pods[0].node);
	CHECK(pp_k8s_podlist_bytes(l) > 0);
	pp_k8s_podlist_free(l);
}

TEST(kubelet_list_and_static_pod_uid)
{
	struct pp_k8s_podlist *l = NULL;
	const struct pp_k8s_pod *p;

	REQUIRE(parse_file("podlist_kubelet.json", NULL, &l) == 0);
	CHECK_EQ_U64(l->n_pods, 2);
	CHECK_EQ_U64(l->n_ctrs, 2);
	p = find_pod(l, "coredns-5d78c9869d-abcde");
	REQUIRE(p != NULL);
	CHECK_STR(STR(l, p->deployment), "coredns");
	CHECK_STR(STR(l, p->ns), "kube-system");
	/* Static pods carry the kubelet's config hash as UID, not a UUID. */
	p = find_pod(l, "etcd-worker-1");
	REQUIRE(p != NULL);
	CHECK_STR(STR(l, p->uid), "8f1e2d3c4b5a69788796a5b4c3d2e1f0");
	pp_k8s_podlist_free(l);
}

TEST(rejects_what_is_not_a_podlist)
{
	struct pp_k8s_podlist *l = (struct pp_k8s_podlist *)1;

	CHECK(parse_file("status_401.json", NULL, &l) == -EPROTO);
	CHECK(l == NULL);
	CHECK(parse_file("wrong_kind.json", NULL, &l) == -EPROTO);
	CHECK(parse_file("malformed_truncated.json", NULL, &l) == -EPROTO);
	CHECK(parse_str("", &l) == -EPROTO);
	CHECK(parse_str("[]", &l) == -EPROTO);
	/* kind missing, items missing, items not an array, an item not an object. */
	CHECK(parse_str("{\"items\":[]}", &l) == -EPROTO);
	CHECK(parse_str("{\"kind\":\"PodList\"}", &l) == -EPROTO);
	CHECK(parse_str("{\"kind\":\"PodList\",\"items\":{}}", &l) == -EPROTO);
	CHECK(parse_str("{\"kind\":\"PodList\",\"items\":[1]}", &l) == -EPROTO);
	/* Valid up to trailing garbage. */
	CHECK(parse_str("{\"kind\":\"PodList\",\"items\":[]}x", &l) == -EPROTO);
	CHECK(pp_k8s_pods_parse(NULL, 0, NULL, NULL) == -EINVAL);
	REQUIRE(parse_file("empty.json", NULL, &l) == 0);
	CHECK_EQ_U64(l->n_pods, 0);
	pp_k8s_podlist_free(l);
	REQUIRE(parse_str("{\"kind\":\"PodList\",\"items\":null}", &l) == 0);
	CHECK_EQ_U64(l->n_pods, 0);
	pp_k8s_podlist_free(l);
}

TEST(odd_fields_count_as_absent)
{
	/* Wrong types, a missing uid, escapes, an over-long name, non-controller owners. */
	static const char doc[] =
	    "{\"kind\":\"PodList\",\"items\":["
	    "{\"metadata\":{\"name\":\"no-uid\",\"namespace\":\"x\"}},"
	    "{\"metadata\":{\"name\":7,\"namespace\":\"x\",\"uid\":\"u1\"}},"
	    "{\"metadata\":{\"name\":\"p\\u002d1\",\"namespace\":\"n\\/s\",\"uid\":\"u2\","
	    "\"labels\":[\"not\",\"an\",\"object\"],"
	    "\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"other\"},"
	    "{\"kind\":\"DaemonSet\",\"name\":\"ds\",\"controller\":true}]},"
	    "\"spec\":{\"nodeName\":null},"
	    "\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"containerID\":\"containerd:/"
	    "/" ID_POSTGRES "\"},{\"name\":\"short\",\"containerID\":\"containerd://abc\"},"
	    "{\"name\":\"upper\",\"containerID\":\"kata://" ID_MIGRATE "\"},"
	    "{\"containerID\":\"docker://" ID_REPORT "\"},"
	    "{\"name\":\"noscheme\",\"containerID\":\"" ID_DEBUGGER "\"},"
	    "5]}}]}";
	struct pp_k8s_podlist *l = NULL;
	const struct pp_k8s_container *c;

	REQUIRE(pp_k8s_pods_parse(doc, sizeof(doc) - 1, NULL, &l) == 0);
	CHECK_EQ_U64(l->pods_skipped, 2);
	REQUIRE(l->n_pods == 1);
	CHECK_STR(STR(l, l->pods[0].name), "p-1");
	CHECK_STR(STR(l, l->pods[0].ns), "n/s");
	CHECK_STR(STR(l, l->pods[0].node), "");
	CHECK_STR(STR(l, l->pods[0].daemonset), "ds"); /* the controller reference wins */
	CHECK_STR(STR(l, l->pods[0].replicaset), "");
	/* c and upper (unknown runtime kept); short, nameless, no scheme and 5 skipped. */
	CHECK_EQ_U64(l->n_ctrs, 2);
	CHECK_EQ_U64(l->ctrs_skipped, 4);
	c = find_ctr(l, ID_MIGRATE);
	REQUIRE(c != NULL);
	CHECK(c->runtime == PP_RUNTIME_UNKNOWN);
	CHECK(find_ctr(l, ID_REPORT) == NULL);
	CHECK(find_ctr(l, ID_DEBUGGER) == NULL);
	pp_k8s_podlist_free(l);
}

TEST(bounds_drop_and_count)
{
	struct pp_k8s_pods_limits lim = {.max_pods = 3, .max_containers = 4};
	struct pp_k8s_podlist *l = NULL;

	REQUIRE(parse_file("podlist_apiserver.json", &lim, &l) == 0);
	CHECK_EQ_U64(l->n_pods, 3);
	CHECK(l->n_ctrs <= 4);
	CHECK_EQ_U64(l->pods_over_limit, 7);
	/* Every container is either kept, over the limit, or skipped (the pending one). */
	CHECK_EQ_U64(l->n_ctrs + l->ctrs_over_limit, 14);
	for (size_t i = 0; i < l->n_ctrs; i++)
		CHECK(l->ctrs[i].pod < l->n_pods);
	pp_k8s_podlist_free(l);
}

TEST(container_id_prefixes)
{
	enum pp_container_runtime rt;
	uint8_t id[32];
	char hex[65];

	CHECK(pp_k8s_container_id_parse("containerd://" ID_POSTGRES, id, &rt) == 0);
	CHECK(rt == PP_RUNTIME_CONTAINERD);
	pp_k8s_container_id_format(id, hex);
	CHECK_STR(hex, ID_POSTGRES);
	CHECK(pp_k8s_container_id_parse("cri-o://" ID_POSTGRES, id, &rt) == 0);
	CHECK(rt == PP_RUNTIME_CRIO);
	CHECK(pp_k8s_container_id_parse("docker://" ID_POSTGRES, id, &rt) == 0);
	CHECK(rt == PP_RUNTIME_DOCKER);
	CHECK(pp_k8s_container_id_parse("podman://" ID_POSTGRES, id, &rt) == 0);
	CHECK(rt == PP_RUNTIME_PODMAN);
	/* Upper-case hex is normalised. */
	CHECK(pp_k8s_container_id_parse(
		  "docker://720D3FD9DEEC5C8A6C55C3CF195841390FC3C212A74C54701A02AE1EF322345F", id,
		  &rt) == 0);
	pp_k8s_container_id_format(id, hex);
	CHECK_STR(hex, ID_POSTGRES);
	CHECK(pp_k8s_container_id_parse(ID_POSTGRES, id, &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse("://" ID_POSTGRES, id, &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse("Docker://" ID_POSTGRES, id, &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse("docker://" ID_POSTGRES "0", id, &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse("docker://abc", id, &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse("docker://", id, &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse(
		  "docker://g20d3fd9deec5c8a6c55c3cf195841390fc3c212a74c54701a02ae1ef322345f", id,
		  &rt) == -EINVAL);
	CHECK(pp_k8s_container_id_parse(NULL, id, &rt) == -EINVAL);
}

TEST(workload_rules)
{
	char out[PP_K8S_NAME_LEN], tiny[4];

	CHECK(pp_k8s_deployment_of("api-7d9f8b6c5d", "7d9f8b6c5d", out, sizeof(out)) == 1);
	CHECK_STR(out, "api");
	CHECK(pp_k8s_deployment_of("my-app-v2-5f7c9d8b4", "5f7c9d8b4", out, sizeof(out)) == 1);
	CHECK_STR(out, "my-app-v2");
	CHECK(pp_k8s_deployment_of("api-7d9f8b6c5d", "", out, sizeof(out)) == 0);
	CHECK(pp_k8s_deployment_of("api-7d9f8b6c5d", NULL, out, sizeof(out)) == 0);
	CHECK(pp_k8s_deployment_of("api-7d9f8b6c5d", "abc", out, sizeof(out)) == 0);
	CHECK(pp_k8s_deployment_of("api7d9f8b6c5d", "7d9f8b6c5d", out, sizeof(out)) == 0);
	CHECK(pp_k8s_deployment_of("-7d9f8b6c5d", "7d9f8b6c5d", out, sizeof(out)) == 0);
	CHECK(pp_k8s_deployment_of("7d9f8b6c5d", "7d9f8b6c5d", out, sizeof(out)) == 0);
	CHECK(pp_k8s_deployment_of("longname-7d9f8b6c5d", "7d9f8b6c5d", tiny, sizeof(tiny)) == 0);

	CHECK(pp_k8s_cronjob_of("nightly-report-28934520", out, sizeof(out)) == 1);
	CHECK_STR(out, "nightly-report");
	CHECK(pp_k8s_cronjob_of("x-123456789012", out, sizeof(out)) == 1);
	CHECK_STR(out, "x");
	CHECK(pp_k8s_cronjob_of("batch-1234567", out, sizeof(out)) == 0);
	CHECK(pp_k8s_cronjob_of("migrate-schema", out, sizeof(out)) == 0);
	CHECK(pp_k8s_cronjob_of("report-2893452a", out, sizeof(out)) == 0);
	CHECK(pp_k8s_cronjob_of("-28934520", out, sizeof(out)) == 0);
	CHECK(pp_k8s_cronjob_of("28934520", out, sizeof(out)) == 0);
	CHECK(pp_k8s_cronjob_of("job-28934520-", out, sizeof(out)) == 0);
}

TEST(copy_pod_reinterns)
{
	struct pp_k8s_pods_limits lim = {.max_pods = 1, .max_containers = 8};
	struct pp_k8s_podlist *src = NULL, *dst;
	const struct pp_k8s_container *c;
	uint32_t idx[2];
	size_t n = 0;

	REQUIRE(parse_file("podlist_apiserver.json", NULL, &src) == 0);
	c = find_ctr(src, ID_CHECKOUT_APP);
	REQUIRE(c != NULL);
	for (size_t i = 0; i < src->n_ctrs && n < 2; i++)
		if (src->ctrs[i].pod == c->pod)
			idx[n++] = (uint32_t)i;
	dst = pp_k8s_podlist_new(&lim);
	REQUIRE(dst != NULL);
	CHECK(pp_k8s_podlist_copy_pod(dst, src, c->pod, idx, n) == 0);
	CHECK(pp_k8s_podlist_copy_pod(dst, src, c->pod, idx, n) == -ENOSPC);
	REQUIRE(dst->n_pods == 1 && dst->n_ctrs == n);
	CHECK_STR(STR(dst, dst->pods[0].deployment), "checkout");
	CHECK_STR(STR(dst, dst->ctrs[0].name), STR(src, src->ctrs[idx[0]].name));
	CHECK(memcmp(dst->ctrs[0].id, src->ctrs[idx[0]].id, 32) == 0);
	CHECK(dst->ctrs[0].pod == 0);
	pp_k8s_podlist_free(dst);
	pp_k8s_podlist_free(src);
	pp_k8s_podlist_free(NULL);
}

TEST_LIST = {
    {"apiserver_list_every_attribute", apiserver_list_every_attribute},
    {"kubelet_list_and_static_pod_uid", kubelet_list_and_static_pod_uid},
    {"rejects_what_is_not_a_podlist", rejects_what_is_not_a_podlist},
    {"odd_fields_count_as_absent", odd_fields_count_as_absent},
    {"bounds_drop_and_count", bounds_drop_and_count},
    {"container_id_prefixes", container_id_prefixes},
    {"workload_rules", workload_rules},
    {"copy_pod_reinterns", copy_pod_reinterns},
};
TEST_MAIN()
