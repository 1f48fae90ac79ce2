/*
 * Where a sample ran: the shim's cgroup id (or, on hosts without cgroup v2, the process's
 * /proc/PID/cgroup) turned into the container, its runtime and pod, and, when a pod metadata
 * source is plugged in, the pod's name, namespace, container name, workload and service name.
 * Answers are cached per cgroup (per v1 cgroup, or per process, on hosts without cgroup v2)
 * in a bounded table, so the sample path costs a hash lookup; a miss costs one cgroup lookup
 * (itself cached and rate-limited) and one in-memory metadata lookup, never an API call.
 */
#ifndef PP_COLLECTOR_CONTAINER_META_H
#define PP_COLLECTOR_CONTAINER_META_H

#include <stddef.h>
#include <stdint.h>

#include <pebsprof/profile.h>

#include "cgroup_path.h"

/* Field sizes follow the Kubernetes limits (DNS subdomain names 253, labels 63). */
struct pp_container_info {
	struct pp_container_ref ref; /* id "" when the sample ran in no container */
	char pod_name[254];
	char namespace_name[64];
	char container_name[64];
	char workload_kind[32]; /* "deployment", "daemonset", "statefulset", "job", "cronjob",
				   "replicaset"; "" when none */
	char workload_name[254];
	char service_name[254]; /* app.kubernetes.io/name, else the container name; "" if none */
};

/*
 * Pod metadata, supplied by the caller (the Kubernetes client, or a test). enrich fills the
 * k8s fields of info for info->ref and returns 0, or -ENOENT when the container is not
 * known (yet); it must not block. generation changes whenever the metadata behind enrich
 * changes, so cached answers are looked up again.
 */
struct pp_container_enricher {
	int (*enrich)(void *ctx, struct pp_container_info *info);
	uint64_t (*generation)(void *ctx);
	void *ctx;
};

struct pp_container_meta_opts {
	const char *cgroup2_root; /* NULL: found in <proc_root>/self/mountinfo */
	const char *proc_root;	  /* NULL: "/proc" */
	size_t max_entries;	  /* answers cached, per cgroup (per process on v1); 0: 4096 */
	size_t max_cgroup_paths;  /* cgroup id -> path table under it; 0: 16384 */
	/* Force the per-process /proc/PID/cgroup path even when cgroup v2 is mounted. */
	int per_process;
	struct pp_container_enricher enricher; /* enrich NULL: cgroup-derived fields only */
};

struct pp_container_meta_stats {
	uint64_t lookups;
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions;
	uint64_t unresolved;	 /* cgroup or process not found: answered "no container" */
	uint64_t proc_reads;	 /* /proc/PID/cgroup files read (per process, or per v1 cgroup) */
	uint64_t v1_lookups;	 /* lookups by a key of v1 and v2 cgroups (PP_CONTAINER_KEY_V1) */
	uint64_t key_mismatches; /* processes read for a key whose cgroups no longer made it */
	uint64_t enriched;	 /* answers with pod metadata */
	uint64_t entries;
	int per_process; /* 1 when answers come from /proc/PID/cgroup */
	int hybrid;	 /* 1 when v1 hierarchies are mounted beside cgroup2 */
};

struct pp_container_meta;

/*
 * A cgroup_id with this bit is a key of the task's cgroups in one v1 hierarchy and in v2
 * (PP_SF_CGROUP_V1), on a host with v1 hierarchies: what the /proc/PID/cgroup of the first
 * live process met with that key says holds for all of its processes, read once, and for
 * those gone before they could be read. The bit alone: the task's own file is read.
 */
#define PP_CONTAINER_KEY_V1 (1ull << 62)

/* Returns NULL with errno set (ENOMEM; EINVAL for bad options). Without cgroup v2 it works
 * per process. */
struct pp_container_meta *pp_container_meta_new(const struct pp_container_meta_opts *opts);
void pp_container_meta_free(struct pp_container_meta *m);

/*
 * Where the sample of process pid with cgroup v2 id cgroup_id (or a key of its v1 and v2
 * cgroups with PP_CONTAINER_KEY_V1) ran. pid_generation tells a reused pid from its predecessor
 * (per-process mode keys on both; the caller's process cache has such a number). Never NULL; the
 * pointer stays valid until the next call on m. A sample in no container gets an info whose ref.id
 * is "" (its pod fields may still be set for a pod's own cgroups).
 */
const struct pp_container_info *pp_container_meta_lookup(struct pp_container_meta *m,
							 uint64_t cgroup_id, uint32_t pid,
							 uint64_t pid_generation);

/* The cgroup2 mount whose ids are resolved, or NULL in per-process mode (no cgroup v2). */
const char *pp_container_meta_cgroup2_root(const struct pp_container_meta *m);

void pp_container_meta_get_stats(const struct pp_container_meta *m,
				 struct pp_container_meta_stats *out);

/*
 * Parse /proc/PID/cgroup text buf[0..len): the v2 line "0::<path>" is tried first, then every
 * v1 line "N:<controllers>:<path>", and the first path that names a container wins. Returns 1
 * with *out set, 0 when no line names a container (*out may still hold a pod), -EINVAL for
 * text that is not a cgroup file.
 */
int pp_proc_cgroup_parse(const char *buf, size_t len, struct pp_container_ref *out);

/* Most resource attributes pp_container_info_attrs writes. */
#define PP_CONTAINER_MAX_ATTRS 12

/*
 * The OpenTelemetry resource attributes of info, in a fixed order: container.id,
 * container.runtime, k8s.pod.uid, k8s.pod.name, k8s.namespace.name, k8s.container.name,
 * k8s.<kind>.name, service.name; only those that are known. Values point into info.
 * Returns how many were written (at most max).
 */
size_t pp_container_info_attrs(const struct pp_container_info *info, struct pp_label *out,
			       size_t max);

#endif /* PP_COLLECTOR_CONTAINER_META_H */
