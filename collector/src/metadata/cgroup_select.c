/*
 * The cgroup walk behind --container-id and --namespace, on cgroup_ids' walker. A match stops
 * the descent: tasks below a selected cgroup pass the shim's ancestor check anyway.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cgroup_ids.h"
#include "cgroup_path.h"
#include "cgroup_select.h"

#define DEFAULT_MAX_DEPTH 16
#define MIN_ID_PREFIX 12

struct select_ctx {
	const struct pp_cgroup_criteria *c;
	pp_cgroup_select_fn fn;
	void *ctx;
	int found;
	int stopped_with; /* what fn returned to stop the walk */
};

static bool selected(const struct pp_cgroup_criteria *c, const struct pp_container_ref *ref)
{
	for (size_t i = 0; ref->id[0] && i < c->n_container_ids; i++)
		if (!strncmp(ref->id, c->container_ids[i], strlen(c->container_ids[i])))
			return true;
	for (size_t i = 0; ref->pod_uid[0] && i < c->n_pod_uids; i++)
		if (!strcmp(ref->pod_uid, c->pod_uids[i]))
			return true;
	return false;
}

static int visit(void *ctx, const char *rel_path, uint64_t ino)
{
	struct select_ctx *sc = ctx;
	struct pp_container_ref ref;

	(void)ino;
	if (pp_cgroup_path_parse(rel_path, strlen(rel_path), &ref) < 0 || !selected(sc->c, &ref))
		return PP_CGROUP_WALK_DESCEND;
	sc->found++;
	sc->stopped_with = sc->fn(sc->ctx, rel_path);
	return sc->stopped_with ? -ECANCELED : PP_CGROUP_WALK_PRUNE;
}

static bool valid_id(const char *id)
{
	size_t n = strlen(id);

	if (n < MIN_ID_PREFIX || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

int pp_cgroup_select(const char *root, const struct pp_cgroup_criteria *c, int max_depth,
		     pp_cgroup_select_fn fn, void *ctx)
{
	struct select_ctx sc = {.c = c, .fn = fn, .ctx = ctx};
	int ret;

	if (!root || !c || !fn)
		return -EINVAL;
	for (size_t i = 0; i < c->n_container_ids; i++)
		if (!valid_id(c->container_ids[i]))
			return -EINVAL;
	for (size_t i = 0; i < c->n_pod_uids; i++)
		if (strlen(c->pod_uids[i]) != 36)
			return -EINVAL;
	ret = pp_cgroup_walk(root, max_depth > 0 ? max_depth : DEFAULT_MAX_DEPTH, visit, &sc, NULL);
	if (sc.stopped_with)
		return sc.stopped_with;
	return ret < 0 ? ret : sc.found;
}
