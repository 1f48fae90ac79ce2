/*
 * cgroup id -> path table for the cgroup v2 ids the BPF shim records. A miss walks the cgroup2
 * hierarchy (rate-limited), reading each directory's inode number, which on 64-bit kernels
 * since 5.5 is the kernfs node id that bpf_get_current_cgroup_id() returns. Ids are never
 * reused (64-bit), so entries need no expiry; a walk drops the ones whose cgroup is gone.
 */
#include "cgroup_ids.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/fsutil.h"

#define PP_MOUNTINFO_MAX (4u << 20) /* mountinfo with thousands of mounts fits */
#define PP_CGROUP_WALK_DEPTH 128    /* deeper cgroups are not walked (one fd per level) */
#define PP_CGROUP_DEFAULT_GAP_NS 1000000000ull

struct cg_entry {
	uint64_t id;
	char *path;
	uint32_t hnext;	     /* next in hash chain: index + 1, 0 = end */
	uint32_t prev, next; /* LRU list: index + 1, 0 = none */
	uint64_t gen;	     /* walk generation last seen in */
};

struct pp_cgroup_ids {
	char *root;
	size_t cap;
	size_t used;
	struct cg_entry *ents;
	uint32_t *free_stack; /* indices of unused slots */
	size_t nfree;
	uint32_t *buckets; /* index + 1 */
	size_t nbuckets;   /* power of two */
	uint32_t lru_head, lru_tail;
	uint64_t gen;
	uint64_t gap_ns;
	uint64_t last_walk_ns;
	bool walked;
	uint64_t (*now_ns)(void *);
	void *clock_ctx;
	struct pp_cgroup_ids_stats st;
};

/* ---- mountinfo ---- */

/* Next space-separated field of [*p, end); returns its length, 0 at end of line. */
static size_t next_field(const char **p, const char *end, const char **start)
{
	const char *s = *p;

	while (s < end && *s == ' ')
		s++;
	*start = s;
	while (s < end && *s != ' ')
		s++;
	*p = s;
	return (size_t)(s - *start);
}

static bool is_oct(char ch)
{
	return ch >= '0' && ch <= '7';
}

/* Decode the kernel's "\ooo" escapes of f[0..n) into out; -ENAMETOOLONG when it won't fit. */
static int unescape(const char *f, size_t n, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char ch = f[i];

		if (ch == '\\' && i + 3 < n && f[i + 1] >= '0' && f[i + 1] <= '3' &&
		    is_oct(f[i + 2]) && is_oct(f[i + 3])) {
			unsigned v = (unsigned)(f[i + 1] - '0') * 64 +
				     (unsigned)(f[i + 2] - '0') * 8 + (unsigned)(f[i + 3] - '0');
			ch = (char)(v & 0xff);
			i += 3;
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = ch;
	}
	out[o] = '\0';
	return 0;
}

/* A mount point holding a NUL (raw or "\000") names no path that could be opened. */
static bool has_nul(const char *f, size_t n)
{
	if (memchr(f, '\0', n))
		return true;
	for (size_t i = 0; i + 3 < n; i++)
		if (f[i] == '\\' && f[i + 1] == '0' && f[i + 2] == '0' && f[i + 3] == '0')
			return true;
	return false;
}

/* The fields of one mountinfo line the collector needs; NULL/0 when the line lacks them. */
struct mountinfo_line {
	const char *root, *mp, *fstype, *super;
	size_t root_n, mp_n, fstype_n, super_n;
};

/* Splits [p, eol): field 4 is the mount root, 5 the mount point; after the lone "-" that ends
 * the optional fields come the filesystem type, the source and the super block's options. */
static void mountinfo_fields(const char *p, const char *eol, struct mountinfo_line *l)
{
	const char *f;
	size_t n;
	int idx = 0, after = -1; /* fields after the "-" */

	memset(l, 0, sizeof(*l));
	while ((n = next_field(&p, eol, &f)) > 0) {
		if (after >= 0) {
			after++;
			if (after == 1) {
				l->fstype = f;
				l->fstype_n = n;
			} else if (after == 3) {
				l->super = f;
				l->super_n = n;
				return;
			}
		} else if (idx == 3) {
			l->root = f;
			l->root_n = n;
		} else if (idx == 4) {
			l->mp = f;
			l->mp_n = n;
		} else if (idx >= 6 && n == 1 && f[0] == '-') {
			after = 0;
		}
		idx++;
	}
}

static bool fstype_is(const struct mountinfo_line *l, const char *type)
{
	return l->fstype_n == strlen(type) && memcmp(l->fstype, type, l->fstype_n) == 0;
}

int pp_mountinfo_has_cgroup1(const char *buf, size_t len)
{
	const char *p = buf, *end;

	if (!buf)
		return 0;
	end = buf + len;

	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct mountinfo_line l;

		if (!eol)
			eol = end;
		mountinfo_fields(p, eol, &l);
		if (fstype_is(&l, "cgroup"))
			return 1;
		p = eol + (eol < end);
	}
	return 0;
}

bool pp_cgroup_list_has(const char *opts, size_t n, const char *word)
{
	size_t wn = strlen(word);

	for (const char *p = opts, *end = opts + n; p < end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t len = (size_t)((comma ? comma : end) - p);

		if (len == wn && memcmp(p, word, wn) == 0)
			return true;
		p += len + 1;
	}
	return false;
}

int pp_mountinfo_find_cgroup1(const char *buf, size_t len, const char *subsys, char *out,
			      size_t outlen)
{
	const char *p = buf, *end = buf ? buf + len : NULL;

	if ((!buf && len) || !subsys || !out || outlen == 0)
		return -EINVAL;
	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct mountinfo_line l;

		if (!eol)
			eol = end;
		mountinfo_fields(p, eol, &l);
		/* the whole hierarchy (mount root "/"): a bind of a subtree names paths otherwise
		 */
		if (fstype_is(&l, "cgroup") && l.super &&
		    pp_cgroup_list_has(l.super, l.super_n, subsys) && l.mp &&
		    !has_nul(l.mp, l.mp_n) && l.root_n == 1 && l.root[0] == '/')
			return unescape(l.mp, l.mp_n, out, outlen);
		p = eol + (eol < end);
	}
	return -ENOENT;
}

int pp_cgroup_v1_key_choose(const char *proc_root, struct pp_cgroup_v1_key *out)
{
	char *mi = NULL, path[PATH_MAX], buf[4096];
	ssize_t n;
	int subsys, ret;

	memset(out, 0, sizeof(*out));
	n = pp_mountinfo_read(proc_root, &mi);
	if (n <= 0 || !pp_mountinfo_has_cgroup1(mi, (size_t)n)) {
		free(mi);
		return n < 0 ? (int)n : 0;
	}
	pp_pathf(path, sizeof(path), "%s/cgroups", proc_root ? proc_root : "/proc");
	ret = (int)pp_read_small_file(path, buf, sizeof(buf));
	subsys =
	    ret > 0 ? pp_proc_cgroups_subsys(buf, (size_t)ret, out->name, sizeof(out->name)) : ret;
	if (subsys > 0)
		ret = pp_mountinfo_find_cgroup1(mi, (size_t)n, out->name, out->v1_root,
						sizeof(out->v1_root));
	if (subsys > 0 && ret == 0) {
		out->subsys = (uint32_t)subsys;
		out->with_v2 = pp_mountinfo_find_cgroup2(mi, (size_t)n, out->v2_root,
							 sizeof(out->v2_root)) == 0;
	}
	free(mi);
	return subsys < 0 ? subsys : 0;
}

int pp_proc_cgroups_subsys(const char *buf, size_t len, char *name_out, size_t name_len)
{
	/* Container runtimes make a cgroup per container in each: the first ones in any case */
	static const char *const preferred[] = {"memory", "pids",    "cpu",    "cpuacct",
						"blkio",  "devices", "freezer"};
	const size_t npref = sizeof(preferred) / sizeof(preferred[0]);
	const char *p = buf, *end = buf ? buf + len : NULL;
	size_t best_rank = npref + 1;
	int index = 0, best = 0;

	if (!buf && len)
		return -EINVAL;
	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		char name[64];
		unsigned long hierarchy, ncgroups, enabled;
		char line[256];
		size_t n, rank;

		if (!eol)
			eol = end;
		n = (size_t)(eol - p);
		if (n && *p != '#') {
			if (n >= sizeof(line))
				return -EINVAL;
			memcpy(line, p, n);
			line[n] = '\0';
			if (sscanf(line, "%63s %lu %lu %lu", name, &hierarchy, &ncgroups,
				   &enabled) != 4)
				return -EINVAL;
			for (rank = 0; rank < npref && strcmp(name, preferred[rank]) != 0; rank++)
				;
			if (hierarchy && enabled && rank < best_rank) {
				best_rank = rank;
				best = index + 1;
				if (name_out && name_len)
					snprintf(name_out, name_len, "%s", name);
			}
			index++;
		}
		p = eol + (eol < end);
	}
	return best;
}

int pp_mountinfo_find_cgroup2(const char *buf, size_t len, char *out, size_t outlen)
{
	const char *p = buf, *end = buf ? buf + len : NULL;
	const char *best_mp = NULL;
	size_t best_n = 0;
	bool best_full = false;

	if ((!buf && len) || !out || outlen == 0)
		return -EINVAL;
	out[0] = '\0';
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct mountinfo_line l;

		if (!eol)
			eol = end;
		mountinfo_fields(p, eol, &l);
		const char *root = l.root, *mp = l.mp;
		size_t root_n = l.root_n, mp_n = l.mp_n;

		if (fstype_is(&l, "cgroup2") && mp && !has_nul(mp, mp_n)) {
			bool full = root_n == 1 && root[0] == '/';

			if (!best_mp || (full && !best_full)) {
				best_mp = mp;
				best_n = mp_n;
				best_full = full;
			}
		}
		p = eol + (eol < end);
	}
	if (!best_mp)
		return -ENOENT;
	return unescape(best_mp, best_n, out, outlen);
}

ssize_t pp_mountinfo_read(const char *proc_root, char **out)
{
	char path[PATH_MAX];
	char *buf = malloc(PP_MOUNTINFO_MAX);
	ssize_t n;

	*out = NULL;
	if (!buf)
		return -ENOMEM;
	pp_pathf(path, sizeof(path), "%s/self/mountinfo", proc_root ? proc_root : "/proc");
	n = pp_read_small_file(path, buf, PP_MOUNTINFO_MAX);
	if (n < 0)
		free(buf);
	else
		*out = buf;
	return n;
}

int pp_cgroup2_mount(const char *proc_root, char *out, size_t outlen)
{
	char *buf;
	ssize_t n;
	int ret;

	if (!out || !outlen)
		return -EINVAL;
	n = pp_mountinfo_read(proc_root, &buf);
	if (n < 0)
		return (int)n;
	ret = pp_mountinfo_find_cgroup2(buf, (size_t)n, out, outlen);
	free(buf);
	return ret;
}

/* ---- table ---- */

static uint64_t default_now(void *ctx)
{
	(void)ctx;
	return pp_clock_ns(CLOCK_MONOTONIC);
}

static size_t bucket_of(const struct pp_cgroup_ids *c, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (c->nbuckets - 1);
}

static struct cg_entry *find(struct pp_cgroup_ids *c, uint64_t id)
{
	for (uint32_t i = c->buckets[bucket_of(c, id)]; i; i = c->ents[i - 1].hnext)
		if (c->ents[i - 1].id == id)
			return &c->ents[i - 1];
	return NULL;
}

static uint32_t idx_of(const struct pp_cgroup_ids *c, const struct cg_entry *e)
{
	return (uint32_t)(e - c->ents) + 1;
}

static void lru_unlink(struct pp_cgroup_ids *c, struct cg_entry *e)
{
	if (e->prev)
		c->ents[e->prev - 1].next = e->next;
	else
		c->lru_head = e->next;
	if (e->next)
		c->ents[e->next - 1].prev = e->prev;
	else
		c->lru_tail = e->prev;
	e->prev = e->next = 0;
}

static void lru_push_front(struct pp_cgroup_ids *c, struct cg_entry *e)
{
	uint32_t i = idx_of(c, e);

	e->prev = 0;
	e->next = c->lru_head;
	if (c->lru_head)
		c->ents[c->lru_head - 1].prev = i;
	c->lru_head = i;
	if (!c->lru_tail)
		c->lru_tail = i;
}

static void remove_entry(struct pp_cgroup_ids *c, struct cg_entry *e)
{
	uint32_t i = idx_of(c, e);
	uint32_t *pp = &c->buckets[bucket_of(c, e->id)];

	while (*pp && *pp != i)
		pp = &c->ents[*pp - 1].hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(c, e);
	free(e->path);
	e->path = NULL;
	e->hnext = 0;
	c->free_stack[c->nfree++] = i - 1;
	c->used--;
}

/*
 * Insert or update id. A new entry takes a free slot; when none is free it evicts the least
 * recently used entry only if may_evict (a lookup's answer), else it is not kept (walk).
 */
static struct cg_entry *upsert(struct pp_cgroup_ids *c, uint64_t id, const char *path,
			       bool may_evict)
{
	struct cg_entry *e = find(c, id);
	size_t b;

	if (e) {
		if (strcmp(e->path, path) != 0) {
			char *np = strdup(path);

			if (!np)
				return NULL;
			free(e->path);
			e->path = np;
		}
		e->gen = c->gen;
		return e;
	}
	if (!c->nfree) {
		if (!may_evict || !c->lru_tail)
			return NULL;
		remove_entry(c, &c->ents[c->lru_tail - 1]);
		c->st.evictions++;
	}
	e = &c->ents[c->free_stack[c->nfree - 1]];
	e->path = strdup(path);
	if (!e->path)
		return NULL;
	c->nfree--;
	e->id = id;
	e->gen = c->gen;
	b = bucket_of(c, id);
	e->hnext = c->buckets[b];
	c->buckets[b] = idx_of(c, e);
	lru_push_front(c, e);
	c->used++;
	return e;
}

/* ---- walking the hierarchy ---- */

struct walker {
	pp_cgroup_visit_fn fn;
	void *ctx;
	int max_depth;
	int stop; /* what a visitor stopped the walk with; 0 while it goes on */
	struct pp_cgroup_walk_stats *st;
	char path[PATH_MAX];
};

/* Visit the children of the directory dfd whose relative path is w->path[0..plen). */
static void walk_dir(struct walker *w, int dfd, size_t plen, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		w->st->errors++;
		w->st->complete = false;
		return;
	}
	while (!w->stop && (errno = 0, de = readdir(d)) != NULL) {
		size_t nlen;
		struct stat sb;
		int fd, verdict;

		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (de->d_name[0] == '.' &&
		    (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
			continue;
		nlen = strlen(de->d_name);
		if (plen + 1 + nlen + 1 > sizeof(w->path)) {
			w->st->complete = false;
			continue;
		}
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			/* Removed since readdir, or not a directory after all: not an error. */
			if (errno != ENOENT && errno != ENOTDIR) {
				w->st->errors++;
				w->st->complete = false;
			}
			continue;
		}
		if (fstat(fd, &sb) != 0) {
			close(fd);
			w->st->errors++;
			w->st->complete = false;
			continue;
		}
		w->path[plen] = '/';
		memcpy(w->path + plen + 1, de->d_name, nlen + 1);
		verdict = w->fn(w->ctx, w->path, (uint64_t)sb.st_ino);
		if (verdict == PP_CGROUP_WALK_DESCEND && depth + 1 < w->max_depth) {
			walk_dir(w, fd, plen + 1 + nlen, depth + 1);
		} else {
			close(fd);
			if (verdict == PP_CGROUP_WALK_DESCEND)
				w->st->complete = false;
			else if (verdict != PP_CGROUP_WALK_PRUNE)
				w->stop = verdict;
		}
		w->path[plen] = '\0';
	}
	if (!w->stop && errno != 0) {
		w->st->errors++;
		w->st->complete = false;
	}
	closedir(d);
}

int pp_cgroup_walk(const char *root, int max_depth, pp_cgroup_visit_fn fn, void *ctx,
		   struct pp_cgroup_walk_stats *st)
{
	struct pp_cgroup_walk_stats local;
	struct walker w = {.fn = fn, .ctx = ctx, .max_depth = max_depth, .st = st ? st : &local};
	struct stat sb;
	int fd, verdict;

	w.st->complete = true;
	w.st->errors = 0;
	if (!root || !fn || max_depth < 1)
		return -EINVAL;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0) {
		int err = -errno;

		if (fd >= 0)
			close(fd);
		w.st->errors++;
		w.st->complete = false;
		return err;
	}
	verdict = fn(ctx, "/", (uint64_t)sb.st_ino);
	if (verdict == PP_CGROUP_WALK_DESCEND) {
		walk_dir(&w, fd, 0, 0);
		return w.stop;
	}
	close(fd);
	return verdict == PP_CGROUP_WALK_PRUNE ? 0 : verdict;
}

/* ---- the table's walk ---- */

struct walk {
	struct pp_cgroup_ids *c;
	uint64_t target;
	bool found;
	char found_path[PATH_MAX];
};

static int walk_seen(void *ctx, const char *path, uint64_t id)
{
	struct walk *w = ctx;

	if (id == w->target && !w->found) {
		w->found = true;
		memcpy(w->found_path, path, strlen(path) + 1);
	}
	upsert(w->c, id, path, false);
	return PP_CGROUP_WALK_DESCEND;
}

/* Walk the hierarchy; true when target was found, its path then in w->found_path. */
static bool walk_all(struct pp_cgroup_ids *c, struct walk *w)
{
	struct pp_cgroup_walk_stats st;

	c->st.walks++;
	c->gen++;
	w->c = c;
	w->found = false;
	pp_cgroup_walk(c->root, PP_CGROUP_WALK_DEPTH, walk_seen, w, &st);
	c->st.walk_errors += st.errors;
	/* Cgroups not met in a full walk are gone; their ids never come back. */
	if (st.complete) {
		for (size_t i = 0; i < c->cap; i++)
			if (c->ents[i].path && c->ents[i].gen != c->gen)
				remove_entry(c, &c->ents[i]);
	}
	return w->found;
}

const char *pp_cgroup_ids_lookup(struct pp_cgroup_ids *c, uint64_t id)
{
	struct cg_entry *e;
	struct walk *w;
	uint64_t now;

	if (!c)
		return NULL;
	e = find(c, id);
	if (e) {
		c->st.hits++;
		lru_unlink(c, e);
		lru_push_front(c, e);
		return e->path;
	}
	c->st.misses++;
	now = c->now_ns(c->clock_ctx);
	if (c->walked && now - c->last_walk_ns < c->gap_ns)
		return NULL;
	c->walked = true;
	c->last_walk_ns = now;
	w = malloc(sizeof(*w));
	if (!w)
		return NULL;
	w->target = id;
	e = NULL;
	if (walk_all(c, w)) {
		e = upsert(c, id, w->found_path, true);
		if (e) {
			lru_unlink(c, e);
			lru_push_front(c, e);
		}
	}
	free(w);
	return e ? e->path : NULL;
}

struct pp_cgroup_ids *pp_cgroup_ids_new_opts(const struct pp_cgroup_ids_opts *opts)
{
	struct pp_cgroup_ids *c;
	char root[PATH_MAX];
	size_t nb = 2;
	int err;

	if (!opts || opts->max_entries == 0 || opts->max_entries >= UINT32_MAX / 4) {
		errno = EINVAL;
		return NULL;
	}
	if (opts->cgroup2_root) {
		if (strlen(opts->cgroup2_root) >= sizeof(root)) {
			errno = ENAMETOOLONG;
			return NULL;
		}
		strcpy(root, opts->cgroup2_root);
	} else {
		err = pp_cgroup2_mount(opts->proc_root, root, sizeof(root));
		if (err) {
			errno = -err;
			return NULL;
		}
	}
	/* Trailing slashes would double up in paths; keep "/" itself. */
	for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--)
		root[l - 1] = '\0';

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	while (nb < opts->max_entries * 2)
		nb <<= 1;
	c->cap = opts->max_entries;
	c->nbuckets = nb;
	c->root = strdup(root);
	c->ents = calloc(c->cap, sizeof(*c->ents));
	c->free_stack = calloc(c->cap, sizeof(*c->free_stack));
	c->buckets = calloc(nb, sizeof(*c->buckets));
	if (!c->root || !c->ents || !c->free_stack || !c->buckets) {
		pp_cgroup_ids_free(c);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < c->cap; i++)
		c->free_stack[i] = (uint32_t)(c->cap - 1 - i);
	c->nfree = c->cap;
	c->gap_ns = opts->min_walk_gap_ns ? opts->min_walk_gap_ns : PP_CGROUP_DEFAULT_GAP_NS;
	c->now_ns = opts->now_ns ? opts->now_ns : default_now;
	c->clock_ctx = opts->clock_ctx;
	return c;
}

struct pp_cgroup_ids *pp_cgroup_ids_new(const char *cgroup2_root, size_t max_entries)
{
	struct pp_cgroup_ids_opts o = {.cgroup2_root = cgroup2_root, .max_entries = max_entries};

	return pp_cgroup_ids_new_opts(&o);
}

void pp_cgroup_ids_free(struct pp_cgroup_ids *c)
{
	if (!c)
		return;
	if (c->ents)
		for (size_t i = 0; i < c->cap; i++)
			free(c->ents[i].path);
	free(c->ents);
	free(c->free_stack);
	free(c->buckets);
	free(c->root);
	free(c);
}

const char *pp_cgroup_ids_root(const struct pp_cgroup_ids *c)
{
	return c ? c->root : NULL;
}

void pp_cgroup_ids_stats(const struct pp_cgroup_ids *c, struct pp_cgroup_ids_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!c)
		return;
	*out = c->st;
	out->entries = c->used;
}
