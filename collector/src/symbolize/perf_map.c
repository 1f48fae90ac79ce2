/*
 * Perf maps (see perf_map.h): a parser that appends entries from buffers, a lazily sorted
 * table with a sequence number per entry so later entries win, and a per-process cache that
 * opens each file safely and reads only what was appended since.
 */
#include "perf_map.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/fsutil.h"
#include "base/root_open.h"
#include "process/mount_fs.h"

/* Overlapping entries are looked for this far back from the last one starting below addr. */
#define LOOKBACK 64
#define NAME_CHUNK (64u << 10)
#define FUSE_SUPER_MAGIC 0x65735546
/* One reread reads at most this much, so a drain never stalls on one big file for long. */
#define REREAD_MAX_BYTES (16u << 20)

struct pm_entry {
	uint64_t start;
	uint64_t end;
	uint64_t seq;
	const char *name;
};

struct name_chunk {
	struct name_chunk *next;
	size_t used, cap;
	char data[];
};

struct pp_perf_map {
	struct pm_entry *v;
	uint64_t *max_end; /* max_end[i]: the largest end of v[0..i], once sorted */
	size_t n, cap, sorted_n;
	size_t max_entries, max_bytes, bytes;
	uint64_t seq;
	bool skipping; /* inside a line over PP_PERF_MAP_MAX_LINE: up to its newline */
	struct name_chunk *chunks;
	struct pp_perf_map_stats stats;
};

struct pp_perf_map *pp_perf_map_new(size_t max_entries, size_t max_bytes)
{
	struct pp_perf_map *m = calloc(1, sizeof(*m));

	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->max_entries = max_entries;
	m->max_bytes = max_bytes;
	m->bytes = sizeof(*m);
	return m;
}

void pp_perf_map_free(struct pp_perf_map *m)
{
	struct name_chunk *c, *next;

	if (!m)
		return;
	for (c = m->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(m->v);
	free(m->max_end);
	free(m);
}

static int hex_field(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (++digits > 16)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	if (!digits)
		return -1;
	*out = v;
	*p = s;
	return 0;
}

static char *name_alloc(struct pp_perf_map *m, size_t len)
{
	struct name_chunk *c = m->chunks;
	char *p;

	if (!c || c->cap - c->used < len + 1) {
		size_t cap = len + 1 > NAME_CHUNK ? len + 1 : NAME_CHUNK;

		if (m->bytes + sizeof(*c) + cap > m->max_bytes)
			return NULL;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = m->chunks;
		c->used = 0;
		c->cap = cap;
		m->chunks = c;
		m->bytes += sizeof(*c) + cap;
	}
	p = c->data + c->used;
	c->used += len + 1;
	return p;
}

static bool entry_room(struct pp_perf_map *m)
{
	struct pm_entry *nv;
	size_t ncap;

	if (m->n < m->cap)
		return true;
	if (m->n >= m->max_entries)
		return false;
	ncap = m->cap ? m->cap * 2 : 256;
	if (ncap > m->max_entries)
		ncap = m->max_entries;
	/* each entry also has its max_end slot */
	if (m->bytes + (ncap - m->cap) * (sizeof(*nv) + sizeof(uint64_t)) > m->max_bytes)
		return false;
	nv = realloc(m->v, ncap * sizeof(*nv));
	if (!nv)
		return false;
	m->bytes += (ncap - m->cap) * (sizeof(*nv) + sizeof(uint64_t));
	m->v = nv;
	m->cap = ncap;
	return true;
}

/* One line without its newline: keep its entry, or count it. */
static void parse_line(struct pp_perf_map *m, const char *s, const char *end)
{
	uint64_t start, size;
	char *name;
	size_t len;

	while (end > s && end[-1] == '\r')
		end--;
	if (s == end)
		return; /* empty lines are not worth a count */
	if (memchr(s, '\0', (size_t)(end - s)) || hex_field(&s, end, &start) || s == end ||
	    *s != ' ')
		goto bad;
	while (s < end && *s == ' ')
		s++;
	if (hex_field(&s, end, &size) || s == end || *s != ' ' || size == 0 ||
	    start > UINT64_MAX - size)
		goto bad;
	while (s < end && *s == ' ')
		s++;
	if (s == end)
		goto bad;
	len = (size_t)(end - s);
	if (!entry_room(m) || !(name = name_alloc(m, len))) {
		m->stats.dropped++;
		return;
	}
	/* control bytes would corrupt folded stacks and terminals: made visible instead */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		name[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	name[len] = '\0';
	m->v[m->n++] = (struct pm_entry){
	    .start = start,
	    .end = start + size,
	    .seq = m->seq++,
	    .name = name,
	};
	m->stats.entries = m->n;
	return;
bad:
	m->stats.bad_lines++;
}

size_t pp_perf_map_feed(struct pp_perf_map *m, const char *buf, size_t len, int final)
{
	size_t off = 0;

	if (!m || !buf)
		return 0;
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t line_len = nl ? (size_t)(nl - (buf + off)) : len - off;

		if (m->skipping || line_len > PP_PERF_MAP_MAX_LINE) {
			/* garbage: skipped whole, up to its newline however far that is */
			if (!m->skipping)
				m->stats.bad_lines++;
			m->skipping = !nl;
			off = nl ? off + line_len + 1 : len;
			continue;
		}
		if (!nl && !final)
			break;
		parse_line(m, buf + off, buf + off + line_len);
		off += line_len + (nl ? 1 : 0);
	}
	m->stats.bytes_read += off;
	return off;
}

static int entry_cmp(const void *pa, const void *pb)
{
	const struct pm_entry *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

const char *pp_perf_map_lookup(struct pp_perf_map *m, uint64_t addr, uint64_t *sym_start)
{
	const struct pm_entry *best = NULL;
	size_t lo = 0, hi;

	if (!m || !m->n)
		return NULL;
	if (m->sorted_n != m->n) {
		uint64_t *me = realloc(m->max_end, m->cap * sizeof(*me));

		if (!me)
			return NULL;
		m->max_end = me;
		qsort(m->v, m->n, sizeof(*m->v), entry_cmp);
		for (size_t i = 0; i < m->n; i++)
			me[i] = i && me[i - 1] > m->v[i].end ? me[i - 1] : m->v[i].end;
		m->sorted_n = m->n;
	}
	hi = m->n;
	while (lo < hi) { /* first entry starting past addr */
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* no entry at or before i - 1 reaches addr once their largest end does not */
	for (size_t i = lo, k = 0; i > 0 && k < LOOKBACK && m->max_end[i - 1] > addr; i--, k++) {
		const struct pm_entry *e = &m->v[i - 1];

		if (addr < e->end && (!best || e->seq > best->seq))
			best = e;
	}
	if (!best)
		return NULL;
	if (sym_start)
		*sym_start = best->start;
	return best->name;
}

void pp_perf_map_get_stats(const struct pp_perf_map *m, struct pp_perf_map_stats *out)
{
	if (!out)
		return;
	if (!m) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = m->stats;
}

size_t pp_perf_map_bytes(const struct pp_perf_map *m)
{
	return m ? m->bytes : 0;
}

/* The numeric fields after "Key:" on one status line; how many were read. */
static int status_fields(const char *line, const char *end, uint64_t *out, int max)
{
	const char *p = line;
	int n = 0;

	while (n < max) {
		uint64_t v = 0;
		int digits = 0;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		while (p < end && *p >= '0' && *p <= '9') {
			if (v > (UINT32_MAX - (uint64_t)(*p - '0')) / 10)
				return -1;
			v = v * 10 + (uint64_t)(*p - '0');
			p++;
			digits++;
		}
		if (!digits)
			break;
		out[n++] = v;
	}
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p == end ? n : -1;
}

int pp_perf_map_parse_status(const char *buf, size_t len, uint32_t *nspid, uint32_t *ruid,
			     uint32_t *euid)
{
	const char *p = buf, *end = buf + len;
	uint64_t pid[1], ns[32], uid[4];
	int npid = 0, nns = 0, nuid = 0;

	if (!buf || !nspid || !ruid || !euid)
		return -EINVAL;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if (le - p > 6 && memcmp(p, "NSpid:", 6) == 0)
			nns = status_fields(p + 6, le, ns, 32);
		else if (le - p > 4 && memcmp(p, "Pid:", 4) == 0)
			npid = status_fields(p + 4, le, pid, 1);
		else if (le - p > 4 && memcmp(p, "Uid:", 4) == 0)
			nuid = status_fields(p + 4, le, uid, 4);
		p = nl ? nl + 1 : end;
	}
	if (nuid < 2 || (nns < 1 && npid < 1))
		return -EINVAL;
	*nspid = (uint32_t)(nns >= 1 ? ns[nns - 1] : pid[0]);
	*ruid = (uint32_t)uid[0];
	*euid = (uint32_t)uid[1];
	return 0;
}

/* ---- the per-process cache ---- */

struct proc_map {
	bool used;
	uint32_t pid;
	uint64_t generation;
	struct pp_perf_map *map; /* NULL: no file seen yet */
	uint64_t dev, ino;	 /* the file read */
	uint64_t offset;	 /* bytes of it consumed */
	uint64_t checked_ns;	 /* last look at the file */
	uint64_t used_ns;	 /* LRU */
	bool at_bound;		 /* max_file_bytes reached: read no more */
};

struct pp_perf_maps {
	struct pp_perf_maps_opts o;
	char *proc_root;
	struct proc_map *procs;
	size_t bytes;
	struct pp_perf_maps_stats stats;
	char *buf; /* one read's bytes */
	size_t buf_cap;
};

static uint64_t mono_now(void *ctx)
{
	(void)ctx;
	return pp_clock_ns(CLOCK_MONOTONIC);
}

struct pp_perf_maps *pp_perf_maps_new(const struct pp_perf_maps_opts *opts)
{
	struct pp_perf_maps *c = calloc(1, sizeof(*c));

	if (!c)
		goto nomem;
	if (opts)
		c->o = *opts;
	if (!c->o.max_processes)
		c->o.max_processes = 256;
	if (!c->o.max_bytes)
		c->o.max_bytes = PP_PERF_MAPS_BYTES_DEFAULT;
	if (!c->o.max_entries)
		c->o.max_entries = 1u << 20;
	if (!c->o.max_file_bytes)
		c->o.max_file_bytes = 256ull << 20;
	if (!c->o.recheck_ns)
		c->o.recheck_ns = 1000000000ull;
	if (!c->o.now_ns)
		c->o.now_ns = mono_now;
	c->proc_root = strdup(c->o.proc_root ? c->o.proc_root : "/proc");
	c->procs = calloc(c->o.max_processes, sizeof(*c->procs));
	c->buf_cap = 1u << 20;
	c->buf = malloc(c->buf_cap);
	if (!c->proc_root || !c->procs || !c->buf) {
		pp_perf_maps_free(c);
		goto nomem;
	}
	c->o.proc_root = c->proc_root;
	return c;
nomem:
	errno = ENOMEM;
	return NULL;
}

static void drop_map(struct pp_perf_maps *c, struct proc_map *pm)
{
	c->bytes -= pp_perf_map_bytes(pm->map);
	pp_perf_map_free(pm->map);
	pm->map = NULL;
	pm->offset = 0;
	pm->dev = pm->ino = 0;
	pm->at_bound = false;
}

void pp_perf_maps_free(struct pp_perf_maps *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->procs && i < c->o.max_processes; i++)
		pp_perf_map_free(c->procs[i].map);
	free(c->procs);
	free(c->proc_root);
	free(c->buf);
	free(c);
}

/* The slot of pid, or a free / least recently used one taken for it. */
static struct proc_map *slot_for(struct pp_perf_maps *c, uint32_t pid, uint64_t generation)
{
	struct proc_map *free_slot = NULL, *lru = NULL;

	for (size_t i = 0; i < c->o.max_processes; i++) {
		struct proc_map *pm = &c->procs[i];

		if (pm->used && pm->pid == pid) {
			if (pm->generation != generation) {
				drop_map(c, pm);
				pm->generation = generation;
				pm->checked_ns = 0;
			}
			return pm;
		}
		if (!pm->used && !free_slot)
			free_slot = pm;
		if (pm->used && (!lru || pm->used_ns < lru->used_ns))
			lru = pm;
	}
	if (!free_slot) {
		free_slot = lru;
		drop_map(c, free_slot);
		c->stats.evictions++;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->pid = pid;
	free_slot->generation = generation;
	return free_slot;
}

/* Make room for about need more bytes by dropping other processes' maps, oldest first. */
static void make_room(struct pp_perf_maps *c, const struct proc_map *keep, size_t need)
{
	while (c->bytes + need > c->o.max_bytes) {
		struct proc_map *lru = NULL;

		for (size_t i = 0; i < c->o.max_processes; i++) {
			struct proc_map *pm = &c->procs[i];

			if (pm != keep && pm->map && (!lru || pm->used_ns < lru->used_ns))
				lru = pm;
		}
		if (!lru)
			return;
		drop_map(c, lru);
		c->stats.evictions++;
	}
}

/* Open the process's perf map the safe way: an fd, or -errno (-EPERM: refused). */
static int open_map(struct pp_perf_maps *c, uint32_t pid, struct stat *st)
{
	char path[256], root[4096], status[4096];
	uint32_t nspid, ruid, euid;
	struct statfs sfs;
	ssize_t n;
	int fd;

	pp_pathf(path, sizeof(path), "%s/%u/status", c->proc_root, pid);
	n = pp_read_small_file(path, status, sizeof(status));
	if (n < 0)
		return (int)n;
	if (pp_perf_map_parse_status(status, (size_t)n, &nspid, &ruid, &euid))
		return -EINVAL;
	pp_pathf(root, sizeof(root), "%s/%u/root", c->proc_root, pid);
	pp_pathf(path, sizeof(path), "/tmp/perf-%u.map", nspid);
	/* this runs on the sample path: a FUSE file could hold its open forever, so its mount
	 * is looked up first, in mountinfo, which never blocks */
	if (pp_proc_path_on_fuse(c->proc_root, pid, path) == 1)
		return -EPERM;
	fd = pp_root_open(root, path, PP_ROOT_OPEN_NO_SYMLINKS);
	if (fd == -ENOENT || fd == -ENOTDIR)
		return -ENOENT;
	if (fd < 0)
		return -EPERM; /* a link, a FIFO, a device, a path leaving the root */
	if (fstat(fd, st) != 0 || (st->st_uid != ruid && st->st_uid != euid) ||
	    (fstatfs(fd, &sfs) == 0 && (unsigned long)sfs.f_type == FUSE_SUPER_MAGIC)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Read what was appended to pm's file since the last time, within the bounds. */
static void refresh(struct pp_perf_maps *c, struct proc_map *pm)
{
	uint64_t budget = REREAD_MAX_BYTES;
	size_t carry = 0;
	struct stat st;
	int fd;

	fd = open_map(c, pm->pid, &st);
	if (fd == -EPERM) {
		c->stats.refused++;
		return;
	}
	if (fd < 0) {
		c->stats.files_missing++;
		return;
	}
	if (pm->map && ((uint64_t)st.st_dev != pm->dev || (uint64_t)st.st_ino != pm->ino ||
			(uint64_t)st.st_size < pm->offset))
		drop_map(c, pm); /* another file, or rewritten from the start */
	if (!pm->map) {
		pm->map = pp_perf_map_new(c->o.max_entries, c->o.max_bytes);
		if (!pm->map) {
			close(fd);
			return;
		}
		c->bytes += pp_perf_map_bytes(pm->map);
		pm->dev = (uint64_t)st.st_dev;
		pm->ino = (uint64_t)st.st_ino;
	}
	if (pm->at_bound || (uint64_t)st.st_size == pm->offset) {
		close(fd);
		return;
	}
	c->stats.files_read++;
	for (;;) {
		uint64_t left = c->o.max_file_bytes - pm->offset - carry;
		size_t want = c->buf_cap - carry, used, before;
		ssize_t n;

		if (left < want)
			want = (size_t)left;
		if (want == 0 || budget == 0) {
			if (pm->offset + carry >= c->o.max_file_bytes) {
				pm->at_bound = true;
				c->stats.truncated++;
			}
			break;
		}
		n = pread(fd, c->buf + carry, want, (off_t)(pm->offset + carry));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		budget = (uint64_t)n >= budget ? 0 : budget - (uint64_t)n;
		before = pp_perf_map_bytes(pm->map);
		make_room(c, pm, (size_t)n);
		/* never final: a last line without its newline may still be being written */
		used = pp_perf_map_feed(pm->map, c->buf, carry + (size_t)n, 0);
		c->bytes += pp_perf_map_bytes(pm->map) - before;
		pm->offset += used;
		carry = carry + (size_t)n - used;
		if (carry)
			memmove(c->buf, c->buf + used, carry);
	}
	close(fd);
}

const char *pp_perf_maps_lookup(struct pp_perf_maps *c, uint32_t pid, uint64_t generation,
				uint64_t addr)
{
	struct proc_map *pm;
	const char *name;
	uint64_t now;

	if (!c)
		return NULL;
	now = c->o.now_ns(c->o.clock_ctx);
	pm = slot_for(c, pid, generation);
	pm->used_ns = now;
	name = pp_perf_map_lookup(pm->map, addr, NULL);
	if (!name && (!pm->checked_ns || now - pm->checked_ns >= c->o.recheck_ns)) {
		struct pp_perf_map_stats before, after;

		pm->checked_ns = now ? now : 1;
		pp_perf_map_get_stats(pm->map, &before);
		refresh(c, pm);
		pp_perf_map_get_stats(pm->map, &after);
		if (after.bad_lines >= before.bad_lines)
			c->stats.bad_lines += after.bad_lines - before.bad_lines;
		if (after.dropped >= before.dropped)
			c->stats.dropped += after.dropped - before.dropped;
		name = pp_perf_map_lookup(pm->map, addr, NULL);
	}
	if (name)
		c->stats.named++;
	return name;
}

void pp_perf_maps_forget(struct pp_perf_maps *c, uint32_t pid)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->o.max_processes; i++) {
		struct proc_map *pm = &c->procs[i];

		if (pm->used && pm->pid == pid) {
			drop_map(c, pm);
			pm->used = false;
		}
	}
}

void pp_perf_maps_get_stats(const struct pp_perf_maps *c, struct pp_perf_maps_stats *out)
{
	if (!out)
		return;
	if (!c) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = c->stats;
}

size_t pp_perf_maps_bytes(const struct pp_perf_maps *c)
{
	return c ? c->bytes : 0;
}
