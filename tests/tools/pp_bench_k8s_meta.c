/*
 * Memory and speed of the pod metadata store for a busy node: builds a synthetic PodList
 * (default 500 pods x 4 containers, each pod as verbose as a real one: labels, annotations,
 * env, volumes, conditions), loads it twice as two refreshes would, and reports the bytes the
 * store holds (its own count of its allocations), the process RSS growth, the parse time and
 * the lookup time. Then the whole sample-side path: a directory tree laid out as the node's
 * cgroups (one container cgroup per container, the ids being inode numbers as on cgroupfs),
 * the container cache enriched from the store, every container looked up by its cgroup id
 * as the session does: the metadata total (store + cache + cgroup id table) in RSS, and the
 * ns of a cached lookup, the per-sample cost. Exits 1 when the store or the RSS growth
 * exceeds --max-mib (default 32).
 * Usage: pp_bench_k8s_meta [--pods N] [--containers-per-pod N] [--lookups N] [--max-mib N]
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metadata/container_meta.h"
#include "metadata/k8s_enrich.h"
#include "metadata/k8s_meta.h"

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len)
			break;
		b->cap = b->cap * 2 + (size_t)n + 1;
		b->p = realloc(b->p, b->cap);
		if (!b->p) {
			perror("realloc");
			exit(2);
		}
	}
	b->len += (size_t)n;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void container_id(unsigned pod, unsigned c, char out[65])
{
	uint64_t s = (uint64_t)pod << 16 | c;

	for (int i = 0; i < 4; i++)
		snprintf(out + 16 * i, 17, "%016llx", (unsigned long long)splitmix(&s));
}

static char *make_podlist(unsigned pods, unsigned cpp, size_t *len)
{
	static const char *const kinds[] = {"ReplicaSet", "DaemonSet", "StatefulSet", "Job"};
	struct buf b = {.cap = 1 << 20};

	b.p = malloc(b.cap);
	if (!b.p)
		exit(2);
	b.p[0] = '\0';
	put(&b, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
		"\"123456\"},\"items\":[");
	for (unsigned p = 0; p < pods; p++) {
		const char *kind = kinds[p % 4];
		unsigned svc = p / 2;
		char owner[128], name[160];

		if (p % 4 == 0)
			snprintf(owner, sizeof(owner), "svc-%04u-6d8f9c7b5d", svc);
		else if (p % 4 == 3)
			snprintf(owner, sizeof(owner), "svc-%04u-28934520", svc);
		else
			snprintf(owner, sizeof(owner), "svc-%04u", svc);
		snprintf(name, sizeof(name), "%s-%05x", owner, p * 2654435761u & 0xfffff);
		put(&b,
		    "%s{\"metadata\":{\"name\":\"%s\",\"generateName\":\"%s-\",\"namespace\":"
		    "\"team-%02u\","
		    "\"uid\":\"%08x-%04x-4%03x-8%03x-%012x\",\"resourceVersion\":\"%u\","
		    "\"creationTimestamp\":\"2026-08-20T10:10:00Z\",\"labels\":{"
		    "\"app.kubernetes.io/name\":\"svc-%04u\",\"app.kubernetes.io/"
		    "part-of\":\"shop\","
		    "\"app.kubernetes.io/version\":\"1.%u.0\",\"pod-template-hash\":\"6d8f9c7b5d\","
		    "\"team\":\"team-%02u\",\"tier\":\"backend\"},\"annotations\":{"
		    "\"kubectl.kubernetes.io/restartedAt\":\"2026-08-19T09:00:00Z\","
		    "\"prometheus.io/scrape\":\"true\",\"prometheus.io/port\":\"9090\","
		    "\"checksum/config\":\"%016llx%016llx%016llx%016llx\"},"
		    "\"ownerReferences\":[{\"apiVersion\":\"apps/"
		    "v1\",\"kind\":\"%s\",\"name\":\"%s\","
		    "\"uid\":\"%08x-0000-4000-8000-000000000000\",\"controller\":true,"
		    "\"blockOwnerDeletion\":true}]},",
		    p ? "," : "", name, owner, p % 20, p, p % 0xffff, p % 0xfff, p % 0xfff, p, p,
		    svc, p % 9, p % 20, (unsigned long long)p, (unsigned long long)p * 3,
		    (unsigned long long)p * 5, (unsigned long long)p * 7, kind, owner, svc);
		put(&b,
		    "\"spec\":{\"volumes\":[{\"name\":\"kube-api-access\",\"projected\":{"
		    "\"sources\":"
		    "[{\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}}],"
		    "\"defaultMode\":420}},{\"name\":\"config\",\"configMap\":{\"name\":\"svc-%"
		    "04u\"}}],"
		    "\"containers\":[",
		    svc);
		for (unsigned c = 0; c < cpp; c++)
			put(&b,
			    "%s{\"name\":\"c%u\",\"image\":\"registry.example.com/team/"
			    "svc-%04u-c%u:1.4.2\","
			    "\"args\":[\"--port=8080\",\"--log-level=info\"],\"ports\":[{"
			    "\"containerPort\":"
			    "8080,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"NODE\",\"valueFrom\":"
			    "{"
			    "\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"spec.nodeName\"}}}"
			    ","
			    "{\"name\":\"GOMAXPROCS\",\"value\":\"2\"}],\"resources\":{\"limits\":{"
			    "\"cpu\":"
			    "\"1\",\"memory\":\"512Mi\"},\"requests\":{\"cpu\":\"100m\",\"memory\":"
			    "\"128Mi\"}},\"volumeMounts\":[{\"name\":\"kube-api-access\","
			    "\"readOnly\":true,"
			    "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}],"
			    "\"terminationMessagePath\":\"/dev/"
			    "termination-log\",\"imagePullPolicy\":"
			    "\"IfNotPresent\"}",
			    c ? "," : "", c, svc, c);
		put(&b,
		    "],\"restartPolicy\":\"Always\",\"nodeName\":\"worker-1.example.internal\","
		    "\"serviceAccountName\":\"default\",\"tolerations\":[{\"key\":"
		    "\"node.kubernetes.io/"
		    "not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
		    "\"tolerationSeconds\":300}]},\"status\":{\"phase\":\"Running\",\"conditions\":"
		    "["
		    "{\"type\":\"Ready\",\"status\":\"True\",\"lastProbeTime\":null,"
		    "\"lastTransitionTime\":\"2026-08-20T10:11:13Z\"}],\"hostIP\":\"10.0.3.17\","
		    "\"podIP\":\"10.244.%u.%u\",\"qosClass\":\"Burstable\",\"containerStatuses\":[",
		    p / 250, p % 250);
		for (unsigned c = 0; c < cpp; c++) {
			char id[65];

			container_id(p, c, id);
			put(&b,
			    "%s{\"name\":\"c%u\",\"state\":{\"running\":{\"startedAt\":"
			    "\"2026-08-20T10:11:12Z\"}},\"lastState\":{},\"ready\":true,"
			    "\"restartCount\":0,\"image\":\"registry.example.com/team/"
			    "svc-%04u-c%u:1.4.2\","
			    "\"imageID\":\"registry.example.com/team/"
			    "svc@sha256:%s\",\"containerID\":"
			    "\"containerd://%s\",\"started\":true}",
			    c ? "," : "", c, svc, c, id, id);
		}
		put(&b, "]}}");
	}
	put(&b, "]}");
	*len = b.len;
	return b.p;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"pods", required_argument, NULL, 'p'},
	    {"containers-per-pod", required_argument, NULL, 'c'},
	    {"lookups", required_argument, NULL, 'l'},
	    {"max-mib", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	unsigned pods = 500, cpp = 4, lookups = 2000000, max_mib = 32, found = 0;
	struct pp_k8s_meta_opts o = {.source = PP_K8S_KUBELET,
				     .kubelet_url = "http://127.0.0.1:1",
				     .no_thread = 1,
				     .max_pods = 4096,
				     .max_containers = 16384};
	struct pp_k8s_container_meta out;
	struct pp_k8s_meta_stats st;
	struct pp_k8s_meta *m;
	long rss0, rss1, rss2;
	double t0, t_parse, t_look;
	size_t len;
	char *json, (*ids)[65];
	int c, rc, over;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'p')
			pods = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 'c')
			cpp = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 'l')
			lookups = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 'm')
			max_mib = (unsigned)strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (!pods || !cpp)
		return 2;
	ids = malloc((size_t)pods * cpp * sizeof(*ids));
	if (!ids)
		return 2;
	for (unsigned p = 0; p < pods; p++)
		for (unsigned k = 0; k < cpp; k++)
			container_id(p, k, ids[p * cpp + k]);
	json = make_podlist(pods, cpp, &len);
	malloc_trim(0);
	rss0 = rss_kib();

	m = pp_k8s_meta_new(&o);
	if (!m) {
		perror("pp_k8s_meta_new");
		return 2;
	}
	t0 = now_s();
	rc = pp_k8s_meta_load_buffer(m, json, len);
	t_parse = now_s() - t0;
	if (rc) {
		fprintf(stderr, "load: %s\n", strerror(-rc));
		return 2;
	}
	/* A second refresh, as every 30-60 s: old snapshot freed, same content. */
	rc = pp_k8s_meta_load_buffer(m, json, len);
	if (rc) {
		fprintf(stderr, "reload: %s\n", strerror(-rc));
		return 2;
	}
	malloc_trim(0);
	rss1 = rss_kib();

	t0 = now_s();
	for (unsigned i = 0; i < lookups; i++) {
		/* A stride that visits every id in a cache-unfriendly order. */
		unsigned k = (unsigned)(((uint64_t)i * 2654435761u) % ((uint64_t)pods * cpp));

		if (pp_k8s_meta_lookup(m, ids[k], NULL, &out) == 0)
			found++;
	}
	t_look = now_s() - t0;
	pp_k8s_meta_get_stats(m, &st);
	rss2 = rss_kib();

	printf("pods %llu containers %llu (list %zu bytes, %.1f KiB per pod)\n",
	       (unsigned long long)st.pods, (unsigned long long)st.containers, len,
	       (double)len / pods / 1024);
	printf("store bytes %llu (%.2f MiB)\n", (unsigned long long)st.bytes,
	       (double)st.bytes / (1 << 20));
	printf("rss delta after two loads %ld KiB (%.2f MiB); after lookups %ld KiB\n", rss1 - rss0,
	       (double)(rss1 - rss0) / 1024, rss2 - rss0);
	printf("parse+index %.1f ms\n", t_parse * 1e3);
	printf("lookup %.0f ns (%u of %u found)\n", t_look * 1e9 / lookups, found, lookups);
	/* The sample side: cgroup ids -> container cache -> store, for every container. */
	char root[128], path[512];
	uint64_t *cg_ids = malloc((size_t)pods * cpp * sizeof(*cg_ids));
	unsigned n = pods * cpp, enriched = 0;
	long rss3;
	double t_cached;

	snprintf(root, sizeof(root), "/tmp/pp-bench-cgroups.%d", (int)getpid());
	mkdir(root, 0755);
	snprintf(path, sizeof(path), "%s/kubepods.slice", root);
	mkdir(path, 0755);
	for (unsigned i = 0; cg_ids && i < n; i++) {
		struct stat sb;

		snprintf(path, sizeof(path), "%s/kubepods.slice/cri-containerd-%s.scope", root,
			 ids[i]);
		if (mkdir(path, 0755) || stat(path, &sb)) {
			perror(path);
			return 2;
		}
		cg_ids[i] = sb.st_ino;
	}
	struct pp_container_meta_opts co = {.cgroup2_root = root, .enricher = pp_k8s_enricher(m)};
	struct pp_container_meta *cm = pp_container_meta_new(&co);

	if (!cm || !cg_ids)
		return 2;
	for (unsigned i = 0; i < n; i++)
		enriched += pp_container_meta_lookup(cm, cg_ids[i], 1, 0)->pod_name[0] != 0;
	malloc_trim(0);
	rss3 = rss_kib();
	t0 = now_s();
	for (unsigned i = 0; i < lookups; i++)
		pp_container_meta_lookup(cm, cg_ids[(uint64_t)i * 2654435761u % n], 1, 0);
	t_cached = now_s() - t0;
	printf("containers through cgroup ids: %u of %u with pod metadata\n", enriched, n);
	printf("metadata total rss delta (store + container cache + cgroup ids) %ld KiB (%.2f "
	       "MiB)\n",
	       rss3 - rss0, (double)(rss3 - rss0) / 1024);
	printf("cached lookup by cgroup id (the per-sample cost) %.0f ns\n",
	       t_cached * 1e9 / lookups);
	pp_container_meta_free(cm);
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/kubepods.slice/cri-containerd-%s.scope", root,
			 ids[i]);
		rmdir(path);
	}
	snprintf(path, sizeof(path), "%s/kubepods.slice", root);
	rmdir(path);
	rmdir(root);
	free(cg_ids);

	over = st.bytes > (uint64_t)max_mib << 20 || (rss1 - rss0) > (long)max_mib * 1024 ||
	       (rss3 - rss0) > (long)max_mib * 1024 || enriched != n;
	printf("%s: bound %u MiB\n", over ? "OVER" : "within", max_mib);
	pp_k8s_meta_free(m);
	free(json);
	free(ids);
	return over || found != lookups ? 1 : 0;
}
