/*
 * The container side of a capture, shared by `record` and `run`: the container metadata cache
 * (cgroup -> container and pod) with, when a source is configured, the Kubernetes pod store
 * behind it. Owns both; the session borrows the cache.
 */
#ifndef PP_COLLECTOR_CONTAINERS_H
#define PP_COLLECTOR_CONTAINERS_H

#include <stddef.h>

#include "metadata/container_meta.h"
#include "metadata/k8s_meta.h"

struct pp_containers_opts {
	const char *proc_root;	 /* NULL: "/proc" */
	const char *cgroup_root; /* NULL or "": the cgroup2 mount from mountinfo */
	/* Pod metadata; PP_K8S_NONE for none. The other k8s fields as in pp_k8s_meta_opts. */
	struct pp_k8s_meta_opts k8s;
};

/* Which containers to profile: comma-separated lists as the user gave them; NULL or "": any. */
struct pp_containers_filter {
	const char *cgroups; /* cgroup paths, under the cgroup2 mount or in /proc/PID/cgroup form */
	const char *container_ids; /* ids, or unique prefixes of 12+ hex digits */
	const char *namespaces;	   /* Kubernetes namespaces (needs pod metadata) */
};

#define PP_CONTAINERS_MAX_NAMESPACES 16

struct pp_containers {
	struct pp_k8s_meta *k8s; /* NULL without a pod metadata source */
	struct pp_container_meta *meta;
	/* The namespace filter, followed as pods come and go. */
	char *namespaces[PP_CONTAINERS_MAX_NAMESPACES];
	size_t n_namespaces;
	uint64_t filter_generation; /* pod metadata generation last applied */
	uint64_t filter_cgroups;    /* cgroups added to the shim's filter */
};

/* Returns 0 or -errno (err says what); never fails because the API server is down. */
int pp_containers_open(const struct pp_containers_opts *o, struct pp_containers *out, char *err,
		       size_t errlen);
void pp_containers_close(struct pp_containers *c);

struct pp_shim;

/* Whether f selects anything (the shim must then be loaded with its cgroup filter on). */
int pp_containers_filter_wanted(const struct pp_containers_filter *f);

/*
 * Adds the cgroups f selects to the shim's filter: each --cgroup, the cgroup of each
 * container id (an id that matches no cgroup is an error: the user mistyped it or the
 * container is gone), and the cgroups of the pods of each namespace known now. Returns 0, or
 * -EINVAL (a usage error: err says which criterion) or another -errno. Says once, at info
 * level, when the kernel cannot filter and the collector does.
 */
int pp_containers_filter_apply(struct pp_containers *c, const struct pp_containers_filter *f,
			       struct pp_shim *shim, char *err, size_t errlen);

/*
 * With a namespace filter: when the pod metadata changed, adds the cgroups of pods that
 * appeared. Cheap when nothing changed; call once per poll tick. Returns the cgroups added.
 */
int pp_containers_filter_refresh(struct pp_containers *c, struct pp_shim *shim);

#endif /* PP_COLLECTOR_CONTAINERS_H */
