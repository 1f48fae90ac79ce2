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

struct pp_kallsyms *pp_kallsyms_parse(const char *buf, size_t len)
{
	struct builder b = {0};
	struct pp_kallsyms *k;
	size_t zero_lines = 0, bad = 0;
	const char *p = buf, *end = buf + len;
	int err = 0;

	if (!buf && len) {
		errno = EINVAL;
		return NULL;
	}
	while (p && p < end && !err) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *name, *mod;
		size_t name_len, mod_len;
		uint64_t addr = 0;
		char type;

		if (eol > p) {
			switch (
			    parse_line(p, eol, &addr, &type, &name, &name_len, &mod, &mod_len)) {
			case LINE_BAD:
				bad++;
				break;
			case LINE_OTHER:
				break;
			case LINE_TEXT_ZERO:
				zero_lines++;
				break;
			case LINE_TEXT:
				err = add_sym(&b, addr, type, name, name_len, mod, mod_len);
				break;
			}
		}
		p = nl ? nl + 1 : end;
	}
	if (!err && b.n == 0)
		err = zero_lines ? -EPERM : -ENOENT;
	k = err ? NULL : calloc(1, sizeof(*k));
	if (!err && !k)
		err = -ENOMEM;
	if (err) {
		free(b.syms);
		free(b.names);
		errno = -err;
		return NULL;
	}
	finish(&b);
	k->syms = b.syms;
	k->n = b.n;
	k->names = b.names;
	k->bad_lines = bad;
	return k;
}

static int read_all(const char *path, char **out, size_t *out_len)
{
	size_t len = 0, cap = 1u << 20;
	char *buf = malloc(cap);
	int fd, err = 0;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(buf);
		return err;
	}
	for (;;) {
		ssize_t r;

		if (len == cap) {
			char *nb;

			if (cap >= MAX_FILE_BYTES) {
				err = -EFBIG;
				break;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

struct pp_kallsyms *pp_kallsyms_load(const char *proc_root)
{
	struct pp_kallsyms *k;
	char path[4096];
	char *buf = NULL;
	size_t len = 0;
	int n, err;

	n = snprintf(path, sizeof(path), "%s/kallsyms", proc_root ? proc_root : "/proc");
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	err = read_all(path, &buf, &len);
	if (err) {
		errno = -err;
		return NULL;
	}
	k = pp_kallsyms_parse(buf, len);
	err = errno;
	free(buf);
	errno = err;
	return k;
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
