/*
 * Parser and lookup for /proc/kallsyms. The file has no sizes, so each symbol extends to the
 * next; aliases at one address keep one name. Addresses all zero mean kptr_restrict is hiding
 * them, which callers must be able to tell apart from a parse failure.
 */
#define _GNU_SOURCE /* qsort_r */
#include "kallsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kernel's KSYM_NAME_LEN is 512; a longer name is a corrupt line. */
#define MAX_NAME_LEN 512
#define MAX_MODULE_LEN 256
/* /proc/kallsyms is ~10 MiB on a distribution kernel; refuse to read without bound. */
#define MAX_FILE_BYTES (512u << 20)
#define PAGE 4096u

struct ksym {
	uint64_t addr;
	uint64_t end;
	uint32_t name_off;
	uint32_t module_off; /* offset + 1 into names, 0 for the core kernel */
	uint16_t name_len;
	char type;
};

struct pp_kallsyms {
	struct ksym *syms;
	size_t n;
	char *names;
	size_t bad_lines;
};

struct builder {
	struct ksym *syms;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	uint32_t last_module_off;
	size_t last_module_len;
};

static int add_name(struct builder *b, const char *s, size_t len, uint32_t *off)
{
	if (b->names_len + len + 1 > UINT32_MAX - 1)
		return -ENOMEM;
	if (b->names_len + len + 1 > b->names_cap) {
		size_t ncap = b->names_cap ? b->names_cap : 65536;
		char *nn;

		while (ncap < b->names_len + len + 1)
			ncap *= 2;
		nn = realloc(b->names, ncap);
		if (!nn)
			return -ENOMEM;
		b->names = nn;
		b->names_cap = ncap;
	}
	memcpy(b->names + b->names_len, s, len);
	b->names[b->names_len + len] = '\0';
	*off = (uint32_t)b->names_len;
	b->names_len += len + 1;
	return 0;
}

static int add_sym(struct builder *b, uint64_t addr, char type, const char *name, size_t name_len,
		   const char *mod, size_t mod_len)
{
	struct ksym *k;
	int err;

	if (b->n == b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 4096;
		struct ksym *ns = realloc(b->syms, ncap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		b->syms = ns;
		b->cap = ncap;
	}
	k = &b->syms[b->n];
	k->addr = addr;
	k->type = type;
	k->name_len = (uint16_t)name_len;
	k->module_off = 0;
	err = add_name(b, name, name_len, &k->name_off);
	if (err)
		return err;
	if (mod_len) {
		/* Lines of one module are consecutive: store each module's name once per run. */
		if (!b->last_module_off || b->last_module_len != mod_len ||
		    memcmp(b->names + b->last_module_off - 1, mod, mod_len) != 0) {
			uint32_t off;

			err = add_name(b, mod, mod_len, &off);
			if (err)
				return err;
			b->last_module_off = off + 1;
			b->last_module_len = mod_len;
		}
		k->module_off = b->last_module_off;
	}
	b->n++;
	return 0;
}

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

static bool is_text_type(char t)
{
	return t == 't' || t == 'T' || t == 'w' || t == 'W';
}

/* Outcome of one line. */
enum line_kind { LINE_BAD, LINE_OTHER, LINE_TEXT, LINE_TEXT_ZERO };

/*
 * Parse "ADDR TYPE NAME[\t[MODULE]]" in [p, end) (no newline inside). On LINE_TEXT the fields
 * are set, with name and module pointing into the line.
 */
static enum line_kind parse_line(const char *p, const char *end, uint64_t *addr, char *type,
				 const char **name, size_t *name_len, const char **mod,
				 size_t *mod_len)
{
	uint64_t a = 0;
	int digits = 0, v;
	const char *q;

	while (p < end && (v = hexval(*p)) >= 0) {
		if (++digits > 16)
			return LINE_BAD;
		a = a << 4 | (uint64_t)v;
		p++;
	}
	if (digits == 0 || end - p < 3 || p[0] != ' ' || p[2] != ' ')
		return LINE_BAD;
	*type = p[1];
	p += 3;
	q = p;
	while (q < end && *q != '\t' && *q != ' ')
		q++;
	if (q == p || (size_t)(q - p) > MAX_NAME_LEN)
		return LINE_BAD;
	*name = p;
	*name_len = (size_t)(q - p);
	*mod = NULL;
	*mod_len = 0;
	while (q < end && (*q == '\t' || *q == ' '))
		q++;
	if (q < end && *q == '[') {
		const char *m = ++q;

		while (q < end && *q != ']')
			q++;
		if (q == end || q == m || (size_t)(q - m) > MAX_MODULE_LEN)
			return LINE_BAD;
		*mod = m;
		*mod_len = (size_t)(q - m);
	}
	if (!is_text_type(*type))
		return LINE_OTHER;
	*addr = a;
	return a ? LINE_TEXT : LINE_TEXT_ZERO;
}

static size_t leading_underscores(const char *s)
{
	size_t n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

static int type_rank(char t)
{
	switch (t) {
	case 'T':
		return 0;
	case 't':
		return 1;
	case 'W':
		return 2;
	default:
		return 3;
	}
}

/* By address; among aliases the global, non-weak, least-underscored, shortest name first. */
static int ksym_cmp(const void *pa, const void *pb, void *names)
{
	const struct ksym *a = pa, *b = pb;
	const char *na = (const char *)names + a->name_off, *nb = (const char *)names + b->name_off;
	size_t ua, ub;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (type_rank(a->type) != type_rank(b->type))
		return type_rank(a->type) - type_rank(b->type);
	ua = leading_underscores(na);
	ub = leading_underscores(nb);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	return strcmp(na, nb);
}

static void finish(struct builder *b)
{
	size_t kept = 0;

	qsort_r(b->syms, b->n, sizeof(*b->syms), ksym_cmp, b->names);
	for (size_t i = 0; i < b->n; i++) {
		if (kept && b->syms[kept - 1].addr == b->syms[i].addr)
			continue;
		b->syms[kept++] = b->syms[i];
	}
	b->n = kept;
	for (size_t i = 0; i < b->n; i++) {
		struct ksym *k = &b->syms[i];
		/* The page the symbol starts in and the next one: enough for all but huge ends. */
		uint64_t cap = (k->addr & ~(uint64_t)(PAGE - 1)) + 2 * PAGE;

		if (cap < k->addr)
			cap = UINT64_MAX;
		if (i + 1 < b->n && b->syms[i + 1].module_off == k->module_off)
			k->end = b->syms[i + 1].addr;
		else if (i + 1 < b->n && b->syms[i + 1].addr < cap)
			k->end = b->syms[i + 1].addr;
		else
			k->end = cap;
	}
}

struct parse_state {
	struct builder b;
	size_t zero_lines, bad;
	int err;
};

/*
 * Parses the complete lines in [p, end); with final set, a last line without its newline
 * too. Returns the bytes consumed (a trailing partial line is left for the next chunk).
 */
static size_t parse_lines(struct parse_state *st, const char *p, const char *end, int final)
{
	const char *start = p;

	while (p < end && !st->err) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *name, *mod;
		size_t name_len, mod_len;
		uint64_t addr = 0;
		char type;

		if (!nl && !final)
			break;
		if (eol > p) {
			switch (
			    parse_line(p, eol, &addr, &type, &name, &name_len, &mod, &mod_len)) {
			case LINE_BAD:
				st->bad++;
				break;
			case LINE_OTHER:
				break;
			case LINE_TEXT_ZERO:
				st->zero_lines++;
				break;
			case LINE_TEXT:
				st->err = add_sym(&st->b, addr, type, name, name_len, mod, mod_len);
				break;
			}
		}
		p = nl ? nl + 1 : end;
	}
	return (size_t)(p - start);
}

static struct pp_kallsyms *parse_finish(struct parse_state *st)
{
	struct pp_kallsyms *k;
	int err = st->err;

	if (!err && st->b.n == 0)
		err = st->zero_lines ? -EPERM : -ENOENT;
	k = err ? NULL : calloc(1, sizeof(*k));
	if (!err && !k)
		err = -ENOMEM;
	if (err) {
		free(st->b.syms);
		free(st->b.names);
		errno = -err;
		return NULL;
	}
	finish(&st->b);
	k->syms = st->b.syms;
	k->n = st->b.n;
	k->names = st->b.names;
	k->bad_lines = st->bad;
	return k;
}

struct pp_kallsyms *pp_kallsyms_parse(const char *buf, size_t len)
{
	struct parse_state st = {0};

	if (!buf && len) {
		errno = EINVAL;
		return NULL;
	}
	if (buf)
		parse_lines(&st, buf, buf + len, 1);
	return parse_finish(&st);
}

struct pp_kallsyms *pp_kallsyms_load(const char *proc_root)
{
	/*
	 * Streamed through a fixed buffer: the text is several MiB and only text symbols are
	 * kept, so reading it whole would only cost page faults and copies.
	 */
	enum { CHUNK = 1 << 20 };
	struct parse_state st = {0};
	char path[4096];
	size_t have = 0;
	char *buf;
	int n, fd;

	n = snprintf(path, sizeof(path), "%s/kallsyms", proc_root ? proc_root : "/proc");
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	buf = malloc(CHUNK);
	if (!buf) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	for (;;) {
		ssize_t r = read(fd, buf + have, CHUNK - have);
		size_t used;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st.err = -errno;
			break;
		}
		have += (size_t)r;
		used = parse_lines(&st, buf, buf + have, r == 0);
		if (r == 0 || st.err)
			break;
		if (used == 0 && have == CHUNK) {
			st.bad++; /* a line longer than the buffer: skip it */
			have = 0;
			continue;
		}
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	free(buf);
	close(fd);
	return parse_finish(&st);
}

void pp_kallsyms_free(struct pp_kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}

const char *pp_kallsyms_lookup(const struct pp_kallsyms *k, uint64_t addr, uint64_t *sym_start,
			       const char **module)
{
	size_t lo = 0, hi;
	const struct ksym *s;

	if (!k)
		return NULL;
	hi = k->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &k->syms[lo - 1];
	if (addr >= s->end)
		return NULL;
	if (sym_start)
		*sym_start = s->addr;
	if (module)
		*module = s->module_off ? k->names + s->module_off - 1 : NULL;
	return k->names + s->name_off;
}

int pp_kallsyms_find(const struct pp_kallsyms *k, const char *name, uint64_t *addr)
{
	if (!k || !name)
		return -EINVAL;
	for (size_t i = 0; i < k->n; i++) {
		if (strcmp(k->names + k->syms[i].name_off, name) == 0) {
			if (addr)
				*addr = k->syms[i].addr;
			return 0;
		}
	}
	return -ENOENT;
}

size_t pp_kallsyms_count(const struct pp_kallsyms *k)
{
	return k ? k->n : 0;
}

size_t pp_kallsyms_bad_lines(const struct pp_kallsyms *k)
{
	return k ? k->bad_lines : 0;
}
