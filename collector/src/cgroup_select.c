/*
 * The cgroup walk behind --container-id and --namespace. A match stops the descent: tasks
 * below a selected cgroup pass the shim's ancestor check anyway.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "cgroup_path.h"
#include "cgroup_select.h"

#define DEFAULT_MAX_DEPTH 16
#define MIN_ID_PREFIX 12

struct walk {
	const struct pp_cgroup_criteria *c;
	pp_cgroup_select_fn fn;
	void *ctx;
	int max_depth;
	int found;
	int stop; /* non-zero: what the callback returned */
	char path[PP_CGROUP_PATH_MAX];
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

static void walk_dir(struct walk *w, int dfd, size_t plen, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while (!w->stop && (de = readdir(d))) {
		struct pp_container_ref ref;
		size_t nlen = strlen(de->d_name);
		int sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (plen + 1 + nlen >= sizeof(w->path))
			continue;
		w->path[plen] = '/';
		memcpy(w->path + plen + 1, de->d_name, nlen + 1);
		if (pp_cgroup_path_parse(w->path, plen + 1 + nlen, &ref) >= 0 &&
		    selected(w->c, &ref)) {
			w->found++;
			w->stop = w->fn(w->ctx, w->path);
			continue;
		}
		if (depth + 1 >= w->max_depth)
			continue;
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub >= 0)
			walk_dir(w, sub, plen + 1 + nlen, depth + 1);
	}
	w->path[plen] = '\0';
	closedir(d);
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
	struct walk w = {.c = c, .fn = fn, .ctx = ctx};
	int dfd;

	if (!root || !c || !fn)
		return -EINVAL;
	for (size_t i = 0; i < c->n_container_ids; i++)
		if (!valid_id(c->container_ids[i]))
			return -EINVAL;
	for (size_t i = 0; i < c->n_pod_uids; i++)
		if (strlen(c->pod_uids[i]) != 36)
			return -EINVAL;
	w.max_depth = max_depth > 0 ? max_depth : DEFAULT_MAX_DEPTH;
	dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	walk_dir(&w, dfd, 0, 0);
	return w.stop ? w.stop : w.found;
}
