/*
 * Kubernetes PodList parser: the JSON the API server returns for
 * /api/v1/pods?fieldSelector=spec.nodeName=NODE and the kubelet for /pods, turned into compact
 * pod and container records. Only what the profiler attaches is kept (names, namespace, node,
 * the owning workload, the app.kubernetes.io/name label, container ids and names); strings are
 * interned once per list. The owning workload is resolved from the pod alone, since the agent
 * may only read pods: a ReplicaSet "<deployment>-<pod-template-hash>" gives the Deployment, a
 * Job "<cronjob>-<scheduled time, 8+ digits>" the CronJob.
 */
#ifndef PP_COLLECTOR_K8S_PODS_H
#define PP_COLLECTOR_K8S_PODS_H

#include <stddef.h>
#include <stdint.h>

#include "cgroup_path.h"

/* Kubernetes limits (+1 for the NUL): DNS subdomain names, DNS labels, label values, UIDs. */
#define PP_K8S_NAME_LEN 254 /* pod, node, workload names */
#define PP_K8S_NS_LEN 64    /* namespace: a DNS label */
#define PP_K8S_CNAME_LEN 64 /* container name: a DNS label */
#define PP_K8S_LABEL_LEN 64 /* label value */
#define PP_K8S_UID_LEN 64   /* a UUID (36); static pods' config hash (32) */
#define PP_K8S_CONTAINER_ID_HEX 64

enum pp_k8s_container_kind {
	PP_K8S_CONTAINER = 0,
	PP_K8S_CONTAINER_INIT,
	PP_K8S_CONTAINER_EPHEMERAL,
};

/* Offsets into the list's string table; 0 is the empty string. */
struct pp_k8s_pod {
	uint32_t uid;
	uint32_t name;
	uint32_t ns;
	uint32_t node;
	uint32_t app_name; /* label app.kubernetes.io/name */
	uint32_t replicaset;
	uint32_t deployment;
	uint32_t daemonset;
	uint32_t statefulset;
	uint32_t job;
	uint32_t cronjob;
};

struct pp_k8s_container {
	uint8_t id[32]; /* the 64-hex container id, as bytes */
	uint32_t pod;	/* index into pods */
	uint32_t name;
	uint8_t runtime;  /* enum pp_container_runtime */
	uint8_t kind;	  /* enum pp_k8s_container_kind */
	uint64_t seen_ns; /* CLOCK_MONOTONIC of the list that last held it (set by the store) */
};

struct pp_k8s_pods_limits {
	uint32_t max_pods;	 /* 0: no bound */
	uint32_t max_containers; /* 0: no bound */
};

struct pp_k8s_podlist {
	struct pp_k8s_pod *pods;
	size_t n_pods, cap_pods;
	struct pp_k8s_container *ctrs;
	size_t n_ctrs, cap_ctrs;
	char *str; /* interned strings, NUL-separated; str[0] == '\0' */
	size_t str_len, str_cap;
	uint32_t *intern; /* open addressing: string offset + 1, 0 = empty slot */
	size_t intern_cap;
	size_t n_strs;
	struct pp_k8s_pods_limits lim;
	/* What the parse left out, counted. */
	uint64_t pods_skipped;	  /* items without uid, name or namespace */
	uint64_t ctrs_skipped;	  /* statuses without a usable containerID (pending, other) */
	uint64_t pods_over_limit; /* dropped because max_pods was reached */
	uint64_t ctrs_over_limit; /* dropped because max_containers was reached */
};

/* An empty list with the given bounds (NULL: none). NULL and errno on failure. */
struct pp_k8s_podlist *pp_k8s_podlist_new(const struct pp_k8s_pods_limits *lim);
void pp_k8s_podlist_free(struct pp_k8s_podlist *l);

/*
 * Parse a PodList from buf[0..len) into a new list. Returns 0 with *out set (the caller frees
 * it), -EPROTO for malformed JSON, a document that is not {"kind":"PodList",...,"items":[...]}
 * or a pod that is not an object, -E2BIG for nesting deeper than a PodList has, -ENOMEM.
 * Pods and containers past the limits are dropped and counted, never an error.
 */
int pp_k8s_pods_parse(const char *buf, size_t len, const struct pp_k8s_pods_limits *lim,
		      struct pp_k8s_podlist **out);

/* The string at offset off (valid while the list lives); "" for an offset out of range. */
const char *pp_k8s_podlist_str(const struct pp_k8s_podlist *l, uint32_t off);

/* Intern s into l; returns its offset (0 for ""), or -ENOMEM. Used to copy records across. */
int64_t pp_k8s_podlist_intern(struct pp_k8s_podlist *l, const char *s);

/*
 * Append a copy of src's pod p and of the containers in ctr_idx[0..n) (which belong to p) to
 * l, strings re-interned. Returns 0, -ENOSPC when a limit leaves no room, -ENOMEM.
 */
int pp_k8s_podlist_copy_pod(struct pp_k8s_podlist *l, const struct pp_k8s_podlist *src, uint32_t p,
			    const uint32_t *ctr_idx, size_t n);

/* Bytes this list holds on the heap (capacities, not just what is used). */
size_t pp_k8s_podlist_bytes(const struct pp_k8s_podlist *l);

/* "containerd://<64 hex>" and the like: 0 with id and runtime set, else -EINVAL. */
int pp_k8s_container_id_parse(const char *s, uint8_t id[32], enum pp_container_runtime *rt);

/* 64 lowercase hex digits (+ NUL) into out[65]. */
void pp_k8s_container_id_format(const uint8_t id[32], char out[65]);
/* The reverse, exactly 64 hex digits (either case): 0 or -EINVAL. */
int pp_k8s_container_id_from_hex(const char *hex, size_t len, uint8_t id[32]);

/*
 * The workload rules, exposed for tests: the Deployment of ReplicaSet rs given the pod's
 * pod-template-hash label (NULL or "" when absent); the CronJob of Job job. Each writes
 * the name into out and returns 1, or returns 0 when the rule does not apply.
 */
int pp_k8s_deployment_of(const char *rs, const char *hash, char *out, size_t cap);
int pp_k8s_cronjob_of(const char *job, char *out, size_t cap);

#endif /* PP_COLLECTOR_K8S_PODS_H */
