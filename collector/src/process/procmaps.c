/*
 * /proc/PID/maps parser. The kernel prints each VMA as
 *   "%08lx-%08lx %c%c%c%c %08llx %02x:%02x %lu " then, when the VMA has a name, padding and
 * the name (show_vma_header_prefix / show_map_vma). The parser is lenient about spacing, strict
 * about every numeric field, and skips (and counts) a line it cannot read rather than failing
 * the whole table: one odd line must not cost the symbols of a whole process.
 */
#include "procmaps.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DELETED_SUFFIX " (deleted)"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse 1..maxdigits hex digits at *p (< end). Advances *p. Returns 0 or -1. */
static int parse_hex(const char **p, const char *end, unsigned maxdigits, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned n = 0;
	int d;

	while (s < end && (d = hexval(*s)) >= 0) {
		if (++n > maxdigits)
			return -1;
		v = (v << 4) | (uint64_t)d;
		s++;
	}
	if (n == 0)
		return -1;
	*p = s;
	*out = v;
	return 0;
}

static int parse_dec(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return -1;
	while (s < end && *s >= '0' && *s <= '9') {
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 0;
}

/* At least one blank is required between fields; more are tolerated. */
static int skip_blanks(const char **p, const char *end)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s == *p)
		return -1;
	*p = s;
	return 0;
}

static int parse_perms(const char **p, const char *end, uint8_t *perms)
{
	const char *s = *p;
	uint8_t v = 0;

	if (end - s < 4)
		return -1;
	if (s[0] == 'r')
		v |= PP_MAP_READ;
	else if (s[0] != '-')
		return -1;
	if (s[1] == 'w')
		v |= PP_MAP_WRITE;
	else if (s[1] != '-')
		return -1;
	if (s[2] == 'x')
		v |= PP_MAP_EXEC;
	else if (s[2] != '-')
		return -1;
	if (s[3] == 's')
		v |= PP_MAP_SHARED;
	else if (s[3] != 'p')
		return -1;
	*perms = v;
	*p = s + 4;
	return 0;
}

static int has_prefix(const char *s, size_t n, const char *prefix)
{
	size_t pl = strlen(prefix);

	return n >= pl && memcmp(s, prefix, pl) == 0;
}

static int equals(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static uint8_t classify(const char *s, size_t n)
{
	if (n == 0)
		return PP_MAP_KIND_ANON;
	if (s[0] == '/')
		return PP_MAP_KIND_FILE;
	if (equals(s, n, "[heap]"))
		return PP_MAP_KIND_HEAP;
	if (equals(s, n, "[stack]") || has_prefix(s, n, "[stack:"))
		return PP_MAP_KIND_STACK;
	if (equals(s, n, "[vdso]"))
		return PP_MAP_KIND_VDSO;
	if (equals(s, n, "[vvar]") || equals(s, n, "[vvar_vclock]"))
		return PP_MAP_KIND_VVAR;
	if (equals(s, n, "[vsyscall]"))
		return PP_MAP_KIND_VSYSCALL;
	if (has_prefix(s, n, "[anon:") || has_prefix(s, n, "[anon_shmem:"))
		return PP_MAP_KIND_ANON;
	return PP_MAP_KIND_OTHER;
}

/*
 * Copy the name into the string pool, undoing the kernel's "\ooo" escape of '\n' (the only
 * character seq_file_path escapes in maps). Returns the number of bytes written before the NUL.
 */
static size_t copy_path(char *dst, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] == '0' && s[i + 2] == '1' &&
		    s[i + 3] == '2') {
			dst[o++] = '\n';
			i += 3;
			continue;
		}
		dst[o++] = s[i];
	}
	dst[o] = '\0';
	return o;
}

/*
 * Parse one line [p, end) (no newline inside). On success fills e and appends the path to the
 * pool at *pool, advancing it. Returns 0, or -1 for a malformed line.
 */
static int parse_line(const char *p, const char *end, struct pp_map_entry *e, char **pool)
{
	uint64_t v;
	const char *name;
	size_t n;

	memset(e, 0, sizeof(*e));
	if (parse_hex(&p, end, 16, &e->start) || p >= end || *p++ != '-')
		return -1;
	if (parse_hex(&p, end, 16, &e->end) || skip_blanks(&p, end))
		return -1;
	if (e->start >= e->end)
		return -1;
	if (parse_perms(&p, end, &e->perms) || skip_blanks(&p, end))
		return -1;
	if (parse_hex(&p, end, 16, &e->offset) || skip_blanks(&p, end))
		return -1;
	if (parse_hex(&p, end, 8, &v) || p >= end || *p++ != ':')
		return -1;
	e->dev_major = (uint32_t)v;
	if (parse_hex(&p, end, 8, &v))
		return -1;
	e->dev_minor = (uint32_t)v;
	if (skip_blanks(&p, end) || parse_dec(&p, end, &e->inode))
		return -1;
	/* The inode ends the line or is followed by blanks (and then perhaps a name). */
	if (p < end && *p != ' ' && *p != '\t')
		return -1;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	name = p;
	n = (size_t)(end - p);
	if (memchr(name, '\0', n))
		return -1;
	if (n >= sizeof(DELETED_SUFFIX) - 1 &&
	    memcmp(name + n - (sizeof(DELETED_SUFFIX) - 1), DELETED_SUFFIX,
		   sizeof(DELETED_SUFFIX) - 1) == 0) {
		e->deleted = 1;
		n -= sizeof(DELETED_SUFFIX) - 1;
	}
	e->kind = classify(name, n);
	e->path = *pool;
	*pool += copy_path(*pool, name, n) + 1;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct pp_map_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

/* Sort when the input was out of order, then drop entries that overlap a kept one. */
static void normalize(struct pp_maps *m)
{
	size_t kept = 0;

	for (size_t i = 1; i < m->n; i++) {
		if (m->entries[i].start < m->entries[i - 1].start) {
			qsort(m->entries, m->n, sizeof(m->entries[0]), cmp_entry);
			m->resorted = 1;
			break;
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		if (kept && m->entries[i].start < m->entries[kept - 1].end) {
			m->bad_lines++;
			continue;
		}
		m->entries[kept++] = m->entries[i];
	}
	m->n = kept;
}

int pp_maps_parse(const char *buf, size_t len, struct pp_maps *out)
{
	const char *p, *end;
	size_t lines = 0;
	char *pool;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!buf && len)
		return -EINVAL;
	if (len == 0)
		return 0;

	end = buf + len;
	for (p = buf; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		lines++;
		p = nl ? nl + 1 : end;
	}
	out->entries = calloc(lines, sizeof(out->entries[0]));
	/* Each line's name plus its NUL fits in the line's own bytes (the header is longer). */
	out->strings = malloc(len + 1);
	if (!out->entries || !out->strings) {
		pp_maps_fini(out);
		return -ENOMEM;
	}
	pool = out->strings;

	for (p = buf; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if (parse_line(p, eol, &out->entries[out->n], &pool) == 0)
			out->n++;
		else
			out->bad_lines++;
		p = nl ? nl + 1 : end;
	}
	out->cap = lines;
	out->strings_len = (size_t)(pool - out->strings);
	out->strings_cap = len + 1;
	normalize(out);
	return 0;
}

void pp_maps_fini(struct pp_maps *m)
{
	if (!m)
		return;
	free(m->entries);
	free(m->strings);
	memset(m, 0, sizeof(*m));
}

const struct pp_map_entry *pp_maps_find(const struct pp_maps *m, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!m || !m->n)
		return NULL;
	/* Find the last entry with start <= addr. */
	hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->entries[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	if (addr < m->entries[lo - 1].end)
		return &m->entries[lo - 1];
	return NULL;
}

void pp_map_entry_set_name(struct pp_map_entry *e, char *name)
{
	size_t n = strlen(name);

	e->deleted = 0;
	if (equals(name, n, "//anon")) {
		e->kind = PP_MAP_KIND_ANON;
		e->path = "";
		return;
	}
	if (n >= sizeof(DELETED_SUFFIX) - 1 &&
	    memcmp(name + n - (sizeof(DELETED_SUFFIX) - 1), DELETED_SUFFIX,
		   sizeof(DELETED_SUFFIX) - 1) == 0) {
		e->deleted = 1;
		n -= sizeof(DELETED_SUFFIX) - 1;
		name[n] = '\0';
	}
	e->kind = classify(name, n);
	e->path = name;
}

size_t pp_maps_bytes(const struct pp_maps *m)
{
	return m->cap * sizeof(m->entries[0]) + m->strings_cap;
}

/* The bytes ents' paths take, each once (entries side by side naming one copy share it). */
static size_t paths_size(const struct pp_map_entry *ents, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		if (!i || ents[i].path != ents[i - 1].path)
			len += strlen(ents[i].path) + 1;
	return len;
}

/* ents' paths copied to pool (paths_size bytes) and named there, still shared: the bytes used. */
static size_t paths_copy(struct pp_map_entry *ents, size_t n, char *pool)
{
	const char *prev = NULL;
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		const char *old = ents[i].path;
		size_t len;

		/* a file's segments side by side share their path, as pp_maps_insert made them */
		if (i && old == prev) {
			ents[i].path = ents[i - 1].path;
			continue;
		}
		prev = old;
		len = strlen(old);
		memcpy(pool + off, old, len + 1);
		ents[i].path = pool + off;
		off += len + 1;
	}
	return off;
}

/* m made of ents (n of them, room for cap), their paths copied into a pool of their own. */
static int maps_rebuild(struct pp_maps *m, struct pp_map_entry *ents, size_t n, size_t cap)
{
	size_t pool_len = paths_size(ents, n);
	char *pool = malloc(pool_len ? pool_len : 1);

	if (!pool) {
		free(ents);
		return -ENOMEM;
	}
	m->strings_len = paths_copy(ents, n, pool); /* before m's own go: ents may name them */
	free(m->entries);
	free(m->strings);
	m->entries = ents;
	m->cap = cap;
	m->strings = pool;
	m->strings_cap = pool_len ? pool_len : 1;
	m->n = n;
	return 0;
}

/* Room for n entries: 0 or -ENOMEM (m as it was). */
static int entries_reserve(struct pp_maps *m, size_t n)
{
	struct pp_map_entry *ents;
	size_t cap = m->cap ? m->cap : 8;

	if (n <= m->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	ents = realloc(m->entries, cap * sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	m->entries = ents;
	m->cap = cap;
	return 0;
}

/*
 * A copy of path (len bytes) at the end of m's strings, which move to a bigger pool first
 * when full: the paths still named, once each (a file's segments side by side share one),
 * the cut-away ones left behind. NULL: no memory (m as it was).
 */
static const char *strings_append(struct pp_maps *m, const char *path, size_t len)
{
	size_t live, cap, off;
	char *pool, *copy;

	if (m->strings_len + len + 1 <= m->strings_cap) {
		copy = m->strings + m->strings_len;
		memcpy(copy, path, len + 1);
		m->strings_len += len + 1;
		return copy;
	}
	live = paths_size(m->entries, m->n);
	cap = 2 * (live + len + 1) > 256 ? 2 * (live + len + 1) : 256;
	pool = malloc(cap);
	if (!pool)
		return NULL;
	off = paths_copy(m->entries, m->n, pool);
	copy = pool + off; /* before the old pool goes: path may lie in it */
	memcpy(copy, path, len + 1);
	free(m->strings);
	m->strings = pool;
	m->strings_len = off + len + 1;
	m->strings_cap = cap;
	return copy;
}

/*
 * path as m holds it: where a neighbour of the place it goes ([lo, hi) and the one on each
 * side) names the same file (the segments of a library the loader maps one by one), that
 * neighbour's copy; else a new one. NULL: no memory.
 */
static const char *held_path(struct pp_maps *m, const char *path, size_t lo, size_t hi)
{
	for (size_t i = lo > 0 ? lo - 1 : 0; i < m->n && i <= hi; i++)
		if (!strcmp(m->entries[i].path, path))
			return m->entries[i].path;
	return strings_append(m, path, strlen(path));
}

/*
 * In place: the entries e overlaps, [lo, hi), give way to what is left of the first before e,
 * e, and what is left of the last after it. The entries and strings grow by doubling, so a
 * process's mappings reported one by one cost a shift each, not a copy of the whole list.
 */
int pp_maps_insert(struct pp_maps *m, const struct pp_map_entry *e)
{
	struct pp_map_entry head, tail, placed = *e;
	size_t lo = 0, hi, n_new;
	bool keep_head, keep_tail;

	if (!m || !e || e->start >= e->end || !e->path)
		return -EINVAL;
	/* the first entry ending after e starts, then the first starting at or after its end */
	for (size_t span = m->n; span > 0;) {
		size_t half = span / 2;

		if (m->entries[lo + half].end <= e->start) {
			lo += half + 1;
			span -= half + 1;
		} else {
			span = half;
		}
	}
	for (hi = lo; hi < m->n && m->entries[hi].start < e->end; hi++)
		;
	placed.path = held_path(m, e->path, lo, hi);
	if (!placed.path || entries_reserve(m, m->n + 2))
		return -ENOMEM;
	keep_head = lo < hi && m->entries[lo].start < e->start;
	keep_tail = lo < hi && m->entries[hi - 1].end > e->end;
	if (keep_head) {
		head = m->entries[lo];
		head.end = e->start;
	}
	if (keep_tail) {
		tail = m->entries[hi - 1];
		tail.offset += e->end - tail.start;
		tail.start = e->end;
	}
	n_new = (size_t)keep_head + 1 + (size_t)keep_tail;
	memmove(&m->entries[lo + n_new], &m->entries[hi], (m->n - hi) * sizeof(*m->entries));
	m->n = m->n - (hi - lo) + n_new;
	if (keep_head)
		m->entries[lo++] = head;
	m->entries[lo++] = placed;
	if (keep_tail)
		m->entries[lo] = tail;
	return 0;
}

int pp_maps_copy(struct pp_maps *dst, const struct pp_maps *src)
{
	struct pp_map_entry *ents;
	int err;

	memset(dst, 0, sizeof(*dst));
	if (!src->n)
		return 0;
	ents = malloc(src->n * sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	memcpy(ents, src->entries, src->n * sizeof(*ents));
	err = maps_rebuild(dst, ents, src->n, src->n);
	if (err)
		memset(dst, 0, sizeof(*dst));
	return err;
}
