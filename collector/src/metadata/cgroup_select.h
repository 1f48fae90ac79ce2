/*
 * Finds the cgroups a profile is limited to (--container-id, --namespace through pod UIDs):
 * walks the cgroup v2 hierarchy and reports the top-most cgroup of each selected container
 * or pod, so the shim can pass every task in it or below it.
 */
#ifndef PP_COLLECTOR_CGROUP_SELECT_H
#define PP_COLLECTOR_CGROUP_SELECT_H

#include <stddef.h>

struct pp_cgroup_criteria {
	/* Container ids, full (64 hex) or a unique prefix of at least 12, as `docker ps` and
	 * `crictl ps` print them. */
	const char *const *container_ids;
	size_t n_container_ids;
	const char *const *pod_uids; /* dashed pod UIDs */
	size_t n_pod_uids;
};

/* Called for each selected cgroup with its path relative to the root ("/kubepods.slice/...").
 * Return 0 to go on, anything else to stop the walk with that value. */
typedef int (*pp_cgroup_select_fn)(void *ctx, const char *rel_path);

/*
 * Walks root (a cgroup2 mount, or any directory tree laid out like one) at most max_depth
 * levels deep (0: 16). Returns the number of cgroups reported, or a negative errno (the root
 * cannot be opened; -EINVAL for a bad criterion such as a container id prefix shorter than 12
 * or not hex), or what the callback stopped with.
 */
int pp_cgroup_select(const char *root, const struct pp_cgroup_criteria *c, int max_depth,
		     pp_cgroup_select_fn fn, void *ctx);

#endif /* PP_COLLECTOR_CGROUP_SELECT_H */
