/*
 * Drives the pod metadata store for the integration test: builds it from the options on the
 * command line (fetch thread included, as the collector runs it), then answers commands read
 * from stdin, one per line, each answer ending with a line "end":
 *   wait GEN MS        wait until the generation reaches GEN -> "gen N"
 *   refresh            a synchronous fetch -> "refresh rc=N"
 *   lookup ID|- [UID]  -> "lookup rc=N key=value ..." with the OpenTelemetry attribute names
 *   stats              -> "stats state=S gen=N pods=N containers=N ok=N fail=N error=..."
 *   sleep MS
 *   quit
 * Options: --source S --api-url U --kubelet-url U --token PATH --ca PATH --node NAME
 * --insecure --refresh-ms N --miss-refresh-ms N --token-ttl-ms N --timeout-ms N.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metadata/k8s_meta.h"

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void attr(const char *k, const char *v)
{
	if (v && v[0])
		printf(" %s=%s", k, v);
}

static void do_lookup(struct pp_k8s_meta *m, const char *id, const char *uid)
{
	struct pp_k8s_container_meta o;
	int rc = pp_k8s_meta_lookup(m, strcmp(id, "-") ? id : NULL, uid, &o);

	printf("lookup rc=%d", rc);
	if (rc == 0) {
		attr("container.id", o.container_id);
		attr("container.runtime", pp_container_runtime_name(o.runtime));
		attr("k8s.pod.uid", o.pod_uid);
		attr("k8s.pod.name", o.pod_name);
		attr("k8s.namespace.name", o.namespace_name);
		attr("k8s.node.name", o.node_name);
		attr("k8s.container.name", o.container_name);
		attr("k8s.replicaset.name", o.replicaset_name);
		attr("k8s.deployment.name", o.deployment_name);
		attr("k8s.daemonset.name", o.daemonset_name);
		attr("k8s.statefulset.name", o.statefulset_name);
		attr("k8s.job.name", o.job_name);
		attr("k8s.cronjob.name", o.cronjob_name);
		attr("service.name", o.service_name);
		if (o.by_pod_uid)
			printf(" by_pod_uid=1");
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"source", required_argument, NULL, 's'},
	    {"api-url", required_argument, NULL, 'a'},
	    {"kubelet-url", required_argument, NULL, 'k'},
	    {"token", required_argument, NULL, 't'},
	    {"ca", required_argument, NULL, 'c'},
	    {"node", required_argument, NULL, 'n'},
	    {"insecure", no_argument, NULL, 'i'},
	    {"refresh-ms", required_argument, NULL, 'r'},
	    {"miss-refresh-ms", required_argument, NULL, 'm'},
	    {"token-ttl-ms", required_argument, NULL, 'T'},
	    {"timeout-ms", required_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	struct pp_k8s_meta_opts o = {.source = PP_K8S_APISERVER};
	struct pp_k8s_meta *m;
	char line[1024];
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (pp_k8s_source_parse(optarg, &o.source)) {
				fprintf(stderr, "bad source %s\n", optarg);
				return 2;
			}
			break;
		case 'a':
			o.api_url = optarg;
			break;
		case 'k':
			o.kubelet_url = optarg;
			break;
		case 't':
			o.token_path = optarg;
			break;
		case 'c':
			o.ca_path = optarg;
			break;
		case 'n':
			o.node_name = optarg;
			break;
		case 'i':
			o.kubelet_insecure = 1;
			break;
		case 'r':
			o.refresh_ms = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'm':
			o.miss_refresh_ms = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'T':
			o.token_ttl_ms = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'o':
			o.timeout_ms = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		default:
			return 2;
		}
	}
	m = pp_k8s_meta_new(&o);
	if (!m) {
		fprintf(stderr, "pp_k8s_meta_new: %s\n", strerror(errno));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		char *argv2[4] = {NULL, NULL, NULL, NULL}, *save = NULL;
		int n = 0;

		for (char *t = strtok_r(line, " \t\n", &save); t && n < 4;
		     t = strtok_r(NULL, " \t\n", &save))
			argv2[n++] = t;
		if (!n)
			continue;
		if (strcmp(argv2[0], "quit") == 0) {
			break;
		} else if (strcmp(argv2[0], "wait") == 0 && n == 3) {
			uint64_t want = strtoull(argv2[1], NULL, 10);
			long ms = strtol(argv2[2], NULL, 10);

			for (long t = 0; t < ms && pp_k8s_meta_generation(m) < want; t += 10)
				sleep_ms(10);
			printf("gen %llu\n", (unsigned long long)pp_k8s_meta_generation(m));
		} else if (strcmp(argv2[0], "refresh") == 0) {
			printf("refresh rc=%d\n", pp_k8s_meta_refresh_now(m));
		} else if (strcmp(argv2[0], "lookup") == 0 && n >= 2) {
			do_lookup(m, argv2[1], argv2[2]);
		} else if (strcmp(argv2[0], "stats") == 0) {
			struct pp_k8s_meta_stats st;

			pp_k8s_meta_get_stats(m, &st);
			printf(
			    "stats state=%s gen=%llu pods=%llu containers=%llu ok=%llu fail=%llu "
			    "error=%s\n",
			    pp_k8s_state_name(st.state), (unsigned long long)st.generation,
			    (unsigned long long)st.pods, (unsigned long long)st.containers,
			    (unsigned long long)st.fetch_ok, (unsigned long long)st.fetch_fail,
			    st.last_error);
		} else if (strcmp(argv2[0], "sleep") == 0 && n == 2) {
			sleep_ms(strtol(argv2[1], NULL, 10));
		} else {
			printf("unknown command %s\n", argv2[0]);
		}
		printf("end\n");
	}
	pp_k8s_meta_free(m);
	return 0;
}
