/*
 * Pod metadata store for the sample pipeline: container id (or pod UID) -> pod name,
 * namespace, node, container name, owning workload and service.name. A background thread
 * lists this node's pods from the API server (or the kubelet) every 30-60 s and when a lookup
 * misses, builds a new snapshot off to the side and swaps it in under a mutex. Lookups copy
 * the answer out, never do I/O and never wait for the network. API errors never stop the
 * profiler: the last good snapshot stays, and each change of state is logged once.
 */
#ifndef PP_COLLECTOR_K8S_META_H
#define PP_COLLECTOR_K8S_META_H

#include <stddef.h>
#include <stdint.h>

#include "cgroup_path.h"
#include "k8s_pods.h"

/* Where pod metadata comes from (--k8s-source). */
enum pp_k8s_source {
	PP_K8S_AUTO,
	PP_K8S_APISERVER,
	PP_K8S_KUBELET,
	PP_K8S_NONE,
};

#define PP_K8S_DEFAULT_TOKEN_PATH "/var/run/secrets/kubernetes.io/serviceaccount/token"
#define PP_K8S_DEFAULT_CA_PATH "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
#define PP_K8S_KUBELET_PORT 10250

/* Every field may be left 0/NULL for its default. */
struct pp_k8s_meta_opts {
	/* auto: apiserver when api_url or KUBERNETES_SERVICE_HOST is set, else none. */
	enum pp_k8s_source source;
	/* API server base URL; default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
	 * (port 443 when unset; an IPv6 host goes in brackets). */
	const char *api_url;
	/* Kubelet base URL; default https://$NODE_IP:10250 ($HOST_IP, else 127.0.0.1). */
	const char *kubelet_url;
	const char *node_name;	   /* default $NODE_NAME; the API server source needs it */
	const char *token_path;	   /* default PP_K8S_DEFAULT_TOKEN_PATH; "" = send no token */
	const char *ca_path;	   /* default PP_K8S_DEFAULT_CA_PATH; system CAs if unreadable */
	int kubelet_insecure;	   /* kubelet only: accept its self-signed serving certificate */
	uint32_t refresh_ms;	   /* period, default 45000, jittered to [2/3, 4/3] of it */
	uint32_t miss_refresh_ms;  /* least time between refreshes asked by misses, default 5000 */
	uint32_t token_ttl_ms;	   /* token file re-read after this, default 60000 (and on 401) */
	uint32_t timeout_ms;	   /* whole request, default 10000 */
	size_t max_response_bytes; /* default 64 MiB */
	uint32_t max_pods;	   /* default 1024 */
	uint32_t max_containers;   /* default 8192 */
	uint32_t grace_ms; /* keep containers gone from the list this long, default 120000 */
	int no_thread;	   /* tests: no thread; refresh only with pp_k8s_meta_refresh_now() */
};

enum pp_k8s_state {
	PP_K8S_STATE_OFF = 0, /* source none */
	PP_K8S_STATE_STARTING,
	PP_K8S_STATE_OK,
	PP_K8S_STATE_FAILING, /* last fetch failed; the last good snapshot (if any) is served */
};

/* One answer, copied out; strings are "" when unknown. Sized to the Kubernetes limits. */
struct pp_k8s_container_meta {
	char container_id[PP_K8S_CONTAINER_ID_HEX + 1]; /* "" when matched by pod UID only */
	enum pp_container_runtime runtime;
	enum pp_k8s_container_kind kind;
	char container_name[PP_K8S_CNAME_LEN];
	char pod_uid[PP_K8S_UID_LEN];
	char pod_name[PP_K8S_NAME_LEN];
	char namespace_name[PP_K8S_NS_LEN];
	char node_name[PP_K8S_NAME_LEN];
	char replicaset_name[PP_K8S_NAME_LEN];
	char deployment_name[PP_K8S_NAME_LEN];
	char daemonset_name[PP_K8S_NAME_LEN];
	char statefulset_name[PP_K8S_NAME_LEN];
	char job_name[PP_K8S_NAME_LEN];
	char cronjob_name[PP_K8S_NAME_LEN];
	/* Label app.kubernetes.io/name, else the container name ("" by pod UID without it). */
	char service_name[PP_K8S_NAME_LEN];
	int by_pod_uid; /* 1: the container id was unknown, the pod UID matched */
};

struct pp_k8s_meta_stats {
	enum pp_k8s_source source; /* resolved: apiserver, kubelet or none */
	enum pp_k8s_state state;
	uint64_t generation;
	uint64_t pods, containers; /* in the current snapshot */
	uint64_t bytes;		   /* heap held by the store (snapshot and indexes) */
	uint64_t fetch_ok, fetch_fail;
	uint64_t evicted_pods, evicted_containers; /* over max_pods / max_containers, all time */
	uint64_t kept_containers; /* carried over from a previous list within grace_ms, all time */
	uint64_t lookups, hits, misses;
	uint64_t refresh_requests; /* misses that asked for a refresh */
	uint64_t token_reads;
	char url[512];	      /* what is fetched */
	char last_error[256]; /* reason of the last failure, "" if none */
};

/*
 * Build the store and, unless the source is none or opts->no_thread, start the fetch thread
 * (the first fetch starts at once; this call does not wait for it). Never fails on API
 * errors. NULL with errno: EINVAL (bad source), ENOMEM, or what pthread_create said.
 */
struct pp_k8s_meta *pp_k8s_meta_new(const struct pp_k8s_meta_opts *opts);
/* Stops the thread (aborting a transfer in flight) and frees everything; NULL is a no-op. */
void pp_k8s_meta_free(struct pp_k8s_meta *m);

/*
 * Look up by container id (64 hex) first, then by pod UID (the cgroup's; either may be NULL
 * or ""). Returns 0 with *out filled, or -ENOENT (also for m NULL). When the container id is
 * unknown, a refresh is asked for (rate-limited; an id still unknown after the refresh that
 * followed its first miss asks no more), whether or not the pod UID matched. No I/O.
 */
int pp_k8s_meta_lookup(struct pp_k8s_meta *m, const char *container_id, const char *pod_uid,
		       struct pp_k8s_container_meta *out);

/* Bumps with each new snapshot; callers caching answers drop them when it changes. */
uint64_t pp_k8s_meta_generation(const struct pp_k8s_meta *m);

/*
 * Calls fn with the UID of every pod of namespace ns in the current snapshot (the lock is
 * held: fn must not call into m). Returns the number of pods, or the first non-zero value fn
 * returned, which stops the walk.
 */
int pp_k8s_meta_pods_in_namespace(struct pp_k8s_meta *m, const char *ns,
				  int (*fn)(void *ctx, const char *pod_uid), void *ctx);

void pp_k8s_meta_get_stats(struct pp_k8s_meta *m, struct pp_k8s_meta_stats *out);

/*
 * Fetch now in the calling thread (serialised with the thread's fetches). Returns 0 when a new
 * snapshot is in place; else negative errno (-EHOSTUNREACH transport, -EACCES 401/403, -EIO
 * other HTTP status, -EFBIG response too big, -EPROTO not a PodList, -ENODATA no node name,
 * -ENOENT source none), keeping the last snapshot.
 */
int pp_k8s_meta_refresh_now(struct pp_k8s_meta *m);

/*
 * Parse buf as a PodList and swap it in as the new snapshot, exactly as a fetch would (bounds,
 * grace, generation, state). For tests and the benchmark. 0 or the parse error.
 */
int pp_k8s_meta_load_buffer(struct pp_k8s_meta *m, const char *buf, size_t len);

/* "auto", "apiserver", "kubelet", "none" <-> the enum; parse returns -EINVAL for others. */
int pp_k8s_source_parse(const char *s, enum pp_k8s_source *out);
const char *pp_k8s_source_name(enum pp_k8s_source s);
const char *pp_k8s_state_name(enum pp_k8s_state s);

#endif /* PP_COLLECTOR_K8S_META_H */
