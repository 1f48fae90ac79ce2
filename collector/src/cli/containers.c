/*
 * Builds the container metadata cache and the pod store behind it. The pod store runs its own
 * fetch thread; nothing here blocks on the network.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/cgroup_level.h"
#include "metadata/cgroup_select.h"
#include "containers.h"
#include "metadata/k8s_enrich.h"
#include "base/log.h"
#include "sampling/shim_loader.h"

#define MAX_LIST_ITEMS 64
#define POD_UID_LEN 37

int pp_containers_open(const struct pp_containers_opts *o, struct pp_containers *out, char *err,
		       size_t errlen)
{
	struct pp_container_meta_opts mo = {
	    .cgroup2_root = o->cgroup_root && o->cgroup_root[0] ? o->cgroup_root : NULL,
	    .proc_root = o->proc_root,
	};

	memset(out, 0, sizeof(*out));
	if (o->k8s.source != PP_K8S_NONE) {
		out->k8s = pp_k8s_meta_new(&o->k8s);
		if (!out->k8s) {
			int e = errno;

			snprintf(err, errlen, "pod metadata: %s", strerror(e));
			return -e;
		}
		mo.enricher = pp_k8s_enricher(out->k8s);
	}
	out->meta = pp_container_meta_new(&mo);
	if (!out->meta) {
		int e = errno;

		snprintf(err, errlen, "container metadata (cgroup root %s): %s",
			 mo.cgroup2_root ? mo.cgroup2_root : "from mountinfo", strerror(e));
		pp_containers_close(out);
		return -e;
	}
	return 0;
}

void pp_containers_close(struct pp_containers *c)
{
	for (size_t i = 0; i < c->n_namespaces; i++)
		free(c->namespaces[i]);
	c->n_namespaces = 0;
	/* The cache calls into the store: it goes first. */
	pp_container_meta_free(c->meta);
	pp_k8s_meta_free(c->k8s);
	c->meta = NULL;
	c->k8s = NULL;
}

/* Splits a comma-separated list in place into at most max trimmed, non-empty items. */
static size_t split_list(char *buf, char **items, size_t max)
{
	size_t n = 0;

	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < max;
	     t = strtok_r(NULL, ",", &save)) {
		char *end;

		while (*t == ' ' || *t == '\t')
			t++;
		end = t + strlen(t);
		while (end > t && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*t)
			items[n++] = t;
	}
	return n;
}

int pp_containers_filter_wanted(const struct pp_containers_filter *f)
{
	return (f->cgroups && f->cgroups[0]) || (f->container_ids && f->container_ids[0]) ||
	       (f->namespaces && f->namespaces[0]);
}

struct add_ctx {
	struct pp_containers *c;
	struct pp_shim *shim;
	int err;
};

static int add_cgroup(struct add_ctx *a, const char *rel)
{
	uint64_t id;
	uint32_t level;
	int ret = pp_cgroup_id_level(pp_container_meta_cgroup2_root(a->c->meta), rel, &id, &level);

	if (!ret)
		ret = pp_shim_add_cgroup(a->shim, id, level);
	if (ret) {
		a->err = ret;
		return ret;
	}
	a->c->filter_cgroups++;
	pp_debug("profiling cgroup %s (id %llu, level %u)", rel, (unsigned long long)id, level);
	return 0;
}

static int add_selected(void *ctx, const char *rel)
{
	return add_cgroup(ctx, rel) ? 1 : 0;
}

struct uid_list {
	char (*uids)[POD_UID_LEN];
	size_t n, cap;
};

static int collect_uid(void *ctx, const char *uid)
{
	struct uid_list *l = ctx;

	if (l->n == l->cap || strlen(uid) >= POD_UID_LEN)
		return 0; /* bounded; the rest on a later refresh */
	snprintf(l->uids[l->n++], POD_UID_LEN, "%s", uid);
	return 0;
}

/* Adds the pod cgroups of every pod of the filter's namespaces. Returns the cgroups added. */
static int add_namespaces(struct pp_containers *c, struct pp_shim *shim)
{
	const char *root = pp_container_meta_cgroup2_root(c->meta);
	struct uid_list l = {.cap = PP_CGROUP_FILTER_MAX};
	const char **ptrs;
	int before = (int)c->filter_cgroups, ret = 0;

	c->filter_generation = pp_k8s_meta_generation(c->k8s);
	l.uids = calloc(l.cap, sizeof(*l.uids));
	ptrs = calloc(l.cap, sizeof(*ptrs));
	if (!l.uids || !ptrs) {
		free(l.uids);
		free(ptrs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->n_namespaces; i++)
		pp_k8s_meta_pods_in_namespace(c->k8s, c->namespaces[i], collect_uid, &l);
	if (l.n) {
		struct pp_cgroup_criteria cr = {.pod_uids = ptrs, .n_pod_uids = l.n};
		struct add_ctx a = {.c = c, .shim = shim};

		for (size_t i = 0; i < l.n; i++)
			ptrs[i] = l.uids[i];
		ret = pp_cgroup_select(root, &cr, 0, add_selected, &a);
	}
	free(l.uids);
	free(ptrs);
	return ret < 0 ? ret : (int)c->filter_cgroups - before;
}

int pp_containers_filter_apply(struct pp_containers *c, const struct pp_containers_filter *f,
			       struct pp_shim *shim, char *err, size_t errlen)
{
	const char *root = pp_container_meta_cgroup2_root(c->meta);
	char *buf = NULL, *items[MAX_LIST_ITEMS];
	struct add_ctx a = {.c = c, .shim = shim};
	size_t n;
	int ret = 0;

	if (!pp_containers_filter_wanted(f))
		return 0;
	if (!root) {
		snprintf(err, errlen,
			 "--cgroup, --container-id and --namespace need cgroup v2, "
			 "which is not mounted here (see --cgroup-root)");
		return -EINVAL;
	}
	if (f->cgroups && f->cgroups[0]) {
		buf = strdup(f->cgroups);
		if (!buf)
			return -ENOMEM;
		n = split_list(buf, items, MAX_LIST_ITEMS);
		for (size_t i = 0; i < n && !ret; i++) {
			ret = add_cgroup(&a, items[i]);
			if (ret)
				snprintf(err, errlen, "--cgroup %s: %s", items[i],
					 ret == -ENOENT	 ? "no such cgroup"
					 : ret == -EXDEV ? "not in the cgroup v2 hierarchy"
							 : strerror(-ret));
		}
		free(buf);
		if (ret)
			return ret == -ENOENT || ret == -EXDEV ? -EINVAL : ret;
	}
	if (f->container_ids && f->container_ids[0]) {
		buf = strdup(f->container_ids);
		if (!buf)
			return -ENOMEM;
		n = split_list(buf, items, MAX_LIST_ITEMS);
		for (size_t i = 0; i < n && !ret; i++) {
			const char *one[1] = {items[i]};
			struct pp_cgroup_criteria cr = {.container_ids = one, .n_container_ids = 1};

			ret = pp_cgroup_select(root, &cr, 0, add_selected, &a);
			if (ret == -EINVAL)
				snprintf(err, errlen,
					 "--container-id %s: give the id, or at least its first 12 "
					 "hex digits",
					 items[i]);
			else if (ret == 0)
				snprintf(err, errlen,
					 "--container-id %s: no such container on this host (no "
					 "cgroup under %s names it)",
					 items[i], root);
			else if (ret < 0 || a.err)
				snprintf(err, errlen, "--container-id %s: %s", items[i],
					 strerror(a.err ? -a.err : -ret));
			ret = ret == 0 ? -EINVAL : ret < 0 ? ret : a.err;
		}
		free(buf);
		if (ret)
			return ret;
	}
	if (f->namespaces && f->namespaces[0]) {
		if (!c->k8s) {
			snprintf(err, errlen, "--namespace needs pod metadata: set --k8s-source");
			return -EINVAL;
		}
		buf = strdup(f->namespaces);
		if (!buf)
			return -ENOMEM;
		n = split_list(buf, items, PP_CONTAINERS_MAX_NAMESPACES);
		for (size_t i = 0; i < n; i++) {
			c->namespaces[c->n_namespaces] = strdup(items[i]);
			if (c->namespaces[c->n_namespaces])
				c->n_namespaces++;
		}
		free(buf);
		ret = add_namespaces(c, shim);
		if (ret < 0) {
			snprintf(err, errlen, "--namespace: %s", strerror(-ret));
			return ret;
		}
	}
	if (pp_shim_cgroup_filter_mode(shim) == PP_SHIM_CGROUP_USER)
		pp_info("this kernel lacks bpf_get_current_ancestor_cgroup_id for perf events "
			"(5.14+): filtering cgroups in user space");
	return 0;
}

int pp_containers_filter_refresh(struct pp_containers *c, struct pp_shim *shim)
{
	if (!c->n_namespaces || !c->k8s || pp_k8s_meta_generation(c->k8s) == c->filter_generation)
		return 0;
	return add_namespaces(c, shim);
}
