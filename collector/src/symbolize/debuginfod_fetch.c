/*
 * The debuginfod worker (see debuginfod_fetch.h): a table of known build ids (FIFO-bounded,
 * answers kept until pushed out), a queue the sample path appends to without waiting, and one
 * thread that asks the library and trims the on-disk cache after each download.
 */
#define _GNU_SOURCE
#include "debuginfod_fetch.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/fsutil.h"
#include "base/log.h"

/* libdebuginfod's interface (elfutils/debuginfod.h), declared here: it is loaded at run time. */
typedef struct debuginfod_client debuginfod_client;
typedef int (*debuginfod_progressfn_t)(debuginfod_client *c, long a, long b);

struct lib {
	void *handle;
	debuginfod_client *(*begin)(void);
	int (*find_debuginfo)(debuginfod_client *c, const unsigned char *id, int id_len,
			      char **path);
	void (*set_progressfn)(debuginfod_client *c, debuginfod_progressfn_t fn);
	void (*set_user_data)(debuginfod_client *c, void *data);
	void *(*get_user_data)(debuginfod_client *c);
	void (*end)(debuginfod_client *c);
};

/* A failure other than "no server has it" (a timeout, a server down) is retried this late. */
#define FAILED_RETRY_S 600

enum state { QUEUED, IN_FLIGHT, FOUND, NOT_FOUND, FAILED };

struct known {
	char id[PP_BUILD_ID_HEX_SIZE];
	enum state state;
	bool ready;	  /* found, not yet taken by pp_debuginfod_take_ready */
	time_t failed_at; /* FAILED: asked again after FAILED_RETRY_S (a server was down) */
	char *path;	  /* FOUND: the cached file */
};

struct pp_debuginfod {
	struct lib lib;
	char *cache_dir;
	uint64_t cache_max_bytes;
	unsigned int timeout_s, max_time_s;
	char pinned[PP_BUILD_ID_HEX_SIZE]; /* this build id's file is outside the bound */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* work queued, or stopping */
	pthread_cond_t idle; /* the queue drained */
	bool stopping;
	struct known *known; /* ring of max_known, oldest at known_head */
	size_t max_known, nknown, known_head;
	size_t *queue; /* indices into known, ring of max_pending */
	size_t max_pending, nqueue, queue_head;
	size_t in_flight;
	struct pp_debuginfod_stats stats;
};

static int load_lib(struct lib *l, const char *name)
{
	l->handle = dlopen(name ? name : "libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!l->handle)
		return -ENOENT;
	*(void **)&l->begin = dlsym(l->handle, "debuginfod_begin");
	*(void **)&l->find_debuginfo = dlsym(l->handle, "debuginfod_find_debuginfo");
	*(void **)&l->set_progressfn = dlsym(l->handle, "debuginfod_set_progressfn");
	*(void **)&l->set_user_data = dlsym(l->handle, "debuginfod_set_user_data");
	*(void **)&l->get_user_data = dlsym(l->handle, "debuginfod_get_user_data");
	*(void **)&l->end = dlsym(l->handle, "debuginfod_end");
	if (!l->begin || !l->find_debuginfo || !l->set_progressfn || !l->set_user_data ||
	    !l->get_user_data || !l->end) {
		dlclose(l->handle);
		l->handle = NULL;
		return -ENOENT;
	}
	return 0;
}

/* ---- the on-disk cache's bound ---- */

struct cached_file {
	char *path;
	uint64_t size;
	int64_t mtime;
};

struct walk {
	struct cached_file *v;
	size_t n, cap;
	uint64_t total;
	bool failed;
	char pinned_dir[PP_BUILD_ID_HEX_SIZE + 2]; /* "/ID/": libdebuginfod's CACHE/ID/debuginfo */
};

/* nftw has no context argument; only the worker thread walks, one walk at a time. */
static struct walk *g_walk;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (g_walk->pinned_dir[0] && strstr(path, g_walk->pinned_dir))
		return 0; /* neither counted nor a candidate */
	if (g_walk->n == g_walk->cap) {
		size_t cap = g_walk->cap ? g_walk->cap * 2 : 64;
		struct cached_file *v = realloc(g_walk->v, cap * sizeof(*v));

		if (!v) {
			g_walk->failed = true;
			return 1;
		}
		g_walk->v = v;
		g_walk->cap = cap;
	}
	g_walk->v[g_walk->n].path = strdup(path);
	if (!g_walk->v[g_walk->n].path) {
		g_walk->failed = true;
		return 1;
	}
	g_walk->v[g_walk->n].size = (uint64_t)st->st_blocks * 512;
	g_walk->v[g_walk->n].mtime = (int64_t)st->st_mtim.tv_sec;
	g_walk->total += g_walk->v[g_walk->n].size;
	g_walk->n++;
	return 0;
}

static int by_age(const void *pa, const void *pb)
{
	const struct cached_file *a = pa, *b = pb;

	return (a->mtime > b->mtime) - (a->mtime < b->mtime);
}

/* Remove the oldest files until the cache fits its bound; keep is never removed. */
static void trim_cache(struct pp_debuginfod *d, const char *keep)
{
	struct walk w = {0};
	uint64_t removed = 0;

	pthread_mutex_lock(&d->lock);
	if (d->pinned[0])
		snprintf(w.pinned_dir, sizeof(w.pinned_dir), "/%s/", d->pinned);
	pthread_mutex_unlock(&d->lock);
	g_walk = &w;
	(void)nftw(d->cache_dir, walk_one, 16, FTW_PHYS | FTW_MOUNT);
	g_walk = NULL;
	if (!w.failed && w.total > d->cache_max_bytes) {
		if (w.n > 1)
			qsort(w.v, w.n, sizeof(*w.v), by_age);
		for (size_t i = 0; i < w.n && w.total > d->cache_max_bytes; i++) {
			if (keep && strcmp(w.v[i].path, keep) == 0)
				continue;
			if (unlink(w.v[i].path) == 0) {
				w.total -= w.v[i].size;
				removed++;
			}
		}
	}
	pthread_mutex_lock(&d->lock);
	d->stats.cache_bytes = w.total;
	d->stats.cache_removed += removed;
	pthread_mutex_unlock(&d->lock);
	for (size_t i = 0; i < w.n; i++)
		free(w.v[i].path);
	free(w.v);
}

/* ---- the worker ---- */

/* The library's getter, for the progress callback, which gets only the client. */
static void *(*g_get_user_data)(debuginfod_client *c);

/* Called by the library while a transfer runs: non-zero cancels it (shutting down). */
static int progress(debuginfod_client *c, long a, long b)
{
	struct pp_debuginfod *d = g_get_user_data ? g_get_user_data(c) : NULL;
	bool stop = false;

	(void)a;
	(void)b;
	if (d) {
		pthread_mutex_lock(&d->lock);
		stop = d->stopping;
		pthread_mutex_unlock(&d->lock);
	}
	return stop;
}

static void *worker(void *arg)
{
	struct pp_debuginfod *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		char id[PP_BUILD_ID_HEX_SIZE];
		debuginfod_client *client;
		struct known *k;
		char *path = NULL;
		size_t ki;
		int fd;

		while (!d->stopping && d->nqueue == 0)
			pthread_cond_wait(&d->wake, &d->lock);
		if (d->stopping)
			break;
		ki = d->queue[d->queue_head];
		d->queue_head = (d->queue_head + 1) % d->max_pending;
		d->nqueue--;
		k = &d->known[ki];
		k->state = IN_FLIGHT;
		d->in_flight++;
		memcpy(id, k->id, sizeof(id));
		d->stats.requests++;
		pthread_mutex_unlock(&d->lock);

		/* a client per request: it keeps no state between them that we need */
		client = d->lib.begin();
		fd = -ENOMEM;
		if (client) {
			d->lib.set_user_data(client, d);
			d->lib.set_progressfn(client, progress);
			fd = d->lib.find_debuginfo(client, (const unsigned char *)id, 0, &path);
			d->lib.end(client);
		}
		if (fd >= 0)
			close(fd);
		if (fd >= 0 && path)
			trim_cache(d, path);

		pthread_mutex_lock(&d->lock);
		d->in_flight--;
		/* the entry may have been pushed out meanwhile: find it again by id */
		k = NULL;
		for (size_t i = 0; i < d->nknown; i++) {
			struct known *e = &d->known[(d->known_head + i) % d->max_known];

			if (e->state == IN_FLIGHT && strcmp(e->id, id) == 0)
				k = e;
		}
		if (fd >= 0 && path) {
			d->stats.found++;
			if (k) {
				k->state = FOUND;
				k->path = path;
				k->ready = true;
				path = NULL;
			}
		} else if (fd == -ENOENT) {
			d->stats.not_found++;
			if (k)
				k->state = NOT_FOUND;
		} else {
			d->stats.errors++;
			if (k) {
				k->state = FAILED;
				k->failed_at = time(NULL);
			}
			pp_debug("debuginfod: %s: %s", id, strerror(fd < 0 ? -fd : EIO));
		}
		free(path);
		if (d->nqueue == 0 && d->in_flight == 0)
			pthread_cond_broadcast(&d->idle);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

struct pp_debuginfod *pp_debuginfod_new(const struct pp_debuginfod_opts *o)
{
	struct pp_debuginfod *d;
	char num[32], max_num[32];
	int err;

	if (!o || !o->urls || !o->urls[0]) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	pthread_cond_init(&d->idle, NULL);
	d->cache_max_bytes =
	    o->cache_max_bytes ? o->cache_max_bytes : PP_DEBUGINFOD_CACHE_BYTES_DEFAULT;
	d->timeout_s = o->timeout_s ? o->timeout_s : PP_DEBUGINFOD_TIMEOUT_S_DEFAULT;
	d->max_time_s = o->max_time_s > d->timeout_s ? o->max_time_s : d->timeout_s;
	d->max_known = o->max_known ? o->max_known : 4096;
	d->max_pending = o->max_pending ? o->max_pending : 256;
	d->cache_dir = strdup(o->cache_dir ? o->cache_dir : PP_DEBUGINFOD_CACHE_DIR_DEFAULT);
	d->known = calloc(d->max_known, sizeof(*d->known));
	d->queue = calloc(d->max_pending, sizeof(*d->queue));
	if (!d->cache_dir || !d->known || !d->queue) {
		err = -ENOMEM;
		goto fail;
	}
	err = load_lib(&d->lib, o->library);
	if (err)
		goto fail;
	g_get_user_data = d->lib.get_user_data;
	err = pp_mkdir_parents(d->cache_dir, 0700);
	if (err)
		goto fail;
	snprintf(num, sizeof(num), "%u", d->timeout_s);
	snprintf(max_num, sizeof(max_num), "%u", d->max_time_s);
	if (setenv("DEBUGINFOD_URLS", o->urls, 1) ||
	    setenv("DEBUGINFOD_CACHE_PATH", d->cache_dir, 1) ||
	    setenv("DEBUGINFOD_TIMEOUT", num, 1) || setenv("DEBUGINFOD_MAXTIME", max_num, 1)) {
		err = -errno;
		goto fail;
	}
	err = -pthread_create(&d->thread, NULL, worker, d);
	if (err)
		goto fail;
	pthread_setname_np(d->thread, "pp-debuginfod"); /* top -H, perf: which thread */
	d->thread_started = true;
	return d;
fail:
	pp_debuginfod_free(d);
	errno = -err;
	return NULL;
}

void pp_debuginfod_free(struct pp_debuginfod *d)
{
	if (!d)
		return;
	if (d->thread_started) {
		pthread_mutex_lock(&d->lock);
		d->stopping = true;
		pthread_cond_broadcast(&d->wake);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	for (size_t i = 0; d->known && i < d->max_known; i++)
		free(d->known[i].path);
	/*
	 * The library stays loaded: its constructor set up libcurl and the TLS library under it
	 * (global state that cannot be torn down), which dlclose would unload with what they
	 * allocated still held.
	 */
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	pthread_cond_destroy(&d->idle);
	free(d->known);
	free(d->queue);
	free(d->cache_dir);
	free(d);
}

static bool valid_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n < 2 || n >= PP_BUILD_ID_HEX_SIZE || n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

int pp_debuginfod_fetch(void *ctx, const char *build_id)
{
	struct pp_debuginfod *d = ctx;
	struct known *k = NULL;
	char path[4096];
	int ret;

	if (!d || !valid_id(build_id))
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->nknown; i++) {
		struct known *e = &d->known[(d->known_head + i) % d->max_known];

		if (strcmp(e->id, build_id) == 0) {
			k = e;
			break;
		}
	}
	if (k && k->state == FAILED && time(NULL) - k->failed_at >= FAILED_RETRY_S &&
	    d->nqueue < d->max_pending) {
		k->state = QUEUED;
		d->queue[(d->queue_head + d->nqueue) % d->max_pending] = (size_t)(k - d->known);
		d->nqueue++;
		pthread_cond_signal(&d->wake);
	}
	if (k) {
		ret = k->state == FOUND	      ? 0
		      : k->state == NOT_FOUND ? -ENOENT
		      : k->state == FAILED    ? -EIO
					      : -EAGAIN;
		if (ret == 0)
			snprintf(path, sizeof(path), "%s", k->path);
		pthread_mutex_unlock(&d->lock);
		if (ret)
			return ret;
		ret = open(path, O_RDONLY | O_CLOEXEC);
		return ret >= 0 ? ret : -ENOENT; /* trimmed from the cache since */
	}
	/* the oldest answer makes room, but never one still waiting (its slot is queued) */
	if (d->nqueue == d->max_pending ||
	    (d->nknown == d->max_known && d->known[d->known_head].state <= IN_FLIGHT)) {
		d->stats.queue_full++;
		pthread_mutex_unlock(&d->lock);
		return -EAGAIN;
	}
	if (d->nknown == d->max_known) {
		struct known *old = &d->known[d->known_head];

		free(old->path);
		old->path = NULL;
		d->known_head = (d->known_head + 1) % d->max_known;
		d->nknown--;
	}
	{
		size_t ki = (d->known_head + d->nknown) % d->max_known;

		k = &d->known[ki];
		memset(k, 0, sizeof(*k));
		memcpy(k->id, build_id, strlen(build_id) + 1);
		k->state = QUEUED;
		d->nknown++;
		d->queue[(d->queue_head + d->nqueue) % d->max_pending] = ki;
		d->nqueue++;
	}
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	return -EAGAIN;
}

size_t pp_debuginfod_take_ready(struct pp_debuginfod *d, char (*ids)[PP_BUILD_ID_HEX_SIZE],
				size_t max)
{
	size_t n = 0;

	if (!d || !ids)
		return 0;
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->nknown && n < max; i++) {
		struct known *e = &d->known[(d->known_head + i) % d->max_known];

		if (e->ready) {
			memcpy(ids[n++], e->id, sizeof(e->id));
			e->ready = false;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return n;
}

int pp_debuginfod_pin(struct pp_debuginfod *d, const char *build_id)
{
	if (!d || !valid_id(build_id))
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	snprintf(d->pinned, sizeof(d->pinned), "%s", build_id);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int pp_debuginfod_wait_idle(struct pp_debuginfod *d, uint64_t timeout_ms)
{
	struct timespec until = pp_deadline_after_ms(CLOCK_REALTIME, timeout_ms);
	int ret = 0;

	if (!d)
		return 0;
	pthread_mutex_lock(&d->lock);
	while ((d->nqueue || d->in_flight) && ret == 0)
		ret = pthread_cond_timedwait(&d->idle, &d->lock, &until);
	pthread_mutex_unlock(&d->lock);
	return ret ? -ETIMEDOUT : 0;
}

void pp_debuginfod_get_stats(struct pp_debuginfod *d, struct pp_debuginfod_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	*out = d->stats;
	out->pending = d->nqueue + d->in_flight;
	pthread_mutex_unlock(&d->lock);
}
