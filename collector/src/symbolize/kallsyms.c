/*
 * Parser and lookup for /proc/kallsyms. The file has no sizes, so each symbol extends to the
 * next; aliases at one address keep one name. Addresses all zero mean kptr_restrict is hiding
 * them, which callers must be able to tell apart from a parse failure.
 *
 * The on-demand mode exists because reading /proc/kallsyms is the largest fixed cost of a
 * short capture: the kernel formats ~10^5 lines (tens of ms of system time) while a profile
 * needs the names of a few hundred to a few thousand addresses. A BPF syscall program asks
 * the kernel's own symbolizer (bpf_snprintf "%pS", a binary search) for just those.
 */
#define _GNU_SOURCE /* qsort_r */
#include "kallsyms.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <linux/bpf.h>
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

struct lazy;

struct pp_kallsyms {
	struct ksym *syms;
	size_t n;
	char *names;
	size_t bad_lines;
	struct lazy *lazy; /* on-demand mode; NULL for a parsed table */
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

/*
 * Orders the symbols by address; among aliases the best name (ksym_cmp) first. The core
 * kernel's lines come in address order (scripts/kallsyms sorts them), so a full sort of ~10^5
 * entries would mostly redo work: only the part after the sorted prefix (modules, BPF
 * programs, trampolines: usually few lines) is sorted, then merged in. Aliases need no order
 * among themselves here: dedupe keeps the best of each address run.
 */
static int sort_by_addr(struct builder *b)
{
	size_t pre = 1, tail;
	struct ksym *out;
	size_t i, j, k;

	while (pre < b->n && b->syms[pre - 1].addr <= b->syms[pre].addr)
		pre++;
	if (pre >= b->n)
		return 0;
	tail = b->n - pre;
	qsort_r(b->syms + pre, tail, sizeof(*b->syms), ksym_cmp, b->names);
	if (b->syms[pre - 1].addr <= b->syms[pre].addr)
		return 0;
	out = malloc(b->n * sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (i = 0, j = pre, k = 0; i < pre || j < b->n;) {
		if (j == b->n || (i < pre && b->syms[i].addr <= b->syms[j].addr))
			out[k++] = b->syms[i++];
		else
			out[k++] = b->syms[j++];
	}
	free(b->syms);
	b->syms = out;
	b->cap = b->n;
	return 0;
}

static int finish(struct builder *b)
{
	size_t kept = 0;
	int err = sort_by_addr(b);

	if (err)
		return err;
	for (size_t i = 0; i < b->n; i++) {
		if (kept && b->syms[kept - 1].addr == b->syms[i].addr) {
			if (ksym_cmp(&b->syms[i], &b->syms[kept - 1], b->names) < 0)
				b->syms[kept - 1] = b->syms[i];
			continue;
		}
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
	return 0;
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
	if (!err)
		err = finish(&st->b);
	if (err) {
		free(k);
		free(st->b.syms);
		free(st->b.names);
		errno = -err;
		return NULL;
	}
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

/* --- on demand ---------------------------------------------------------------------------- */

#define LAZY_DEFAULT_MAX_QUERIES 8192
/* "%pS" text the program hands back: its 512-byte stack also holds the argument. */
#define LAZY_OUT 488
/* A name for pp_kallsyms_find, NUL included. */
#define LAZY_NAME 128
#define ARENA_BLOCK 65536

/*
 * Pages of addresses the kernel could not name before the file is read whole for them: code
 * freed since its sample (a program unloaded, a probe's slot) is named by neither, and the
 * read costs about as much CPU as a capture's other kernel names together.
 */
#define LAZY_UNNAMED_PAGES_BEFORE_FILE 16

/*
 * One symbol the kernel named: [lo, hi) answers from here, trimmed so ranges never overlap;
 * name NULL: a page where it named nothing.
 */
struct range {
	uint64_t lo, hi, start;
	const char *name, *module;
};

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	char data[];
};

struct lazy {
	int sym_fd, name_fd;
	struct range *r; /* sorted by lo */
	size_t n, cap;
	struct arena_block *arena;
	size_t max_queries;
	struct pp_kallsyms_stats stats;
	struct pp_kallsyms *table; /* the whole file, once the query budget is spent */
	int table_failed;
	char *proc_root;
};

struct sym_ctx {
	int64_t ret; /* in: the address; out: bpf_snprintf's return (bytes with the NUL) */
	char out[LAZY_OUT];
};

struct name_ctx {
	uint64_t addr; /* out */
	char name[LAZY_NAME];
};

#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOV_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define LDX_DW(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_DW, d, s, o, 0)
#define STX_DW(d, s, o) INSN(BPF_STX | BPF_MEM | BPF_DW, d, s, o, 0)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static int load_prog(const struct bpf_insn *insns, size_t n)
{
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_flags = BPF_F_SLEEPABLE);

	return bpf_prog_load(BPF_PROG_TYPE_SYSCALL, "pp_ksym", "GPL", insns, n, &opts);
}

/*
 * ctx = struct sym_ctx: bpf_snprintf(stack buffer, "%pS", ctx->ret as the address), then the
 * buffer is copied into ctx, which BPF_PROG_TEST_RUN copies back (helpers may not write a
 * syscall program's ctx directly).
 */
static int load_sym_prog(int fmt_fd)
{
	enum { BUF = -8 - LAZY_OUT };
	struct bpf_insn p[16 + 2 * LAZY_OUT / 8];
	size_t n = 0;

	p[n++] = MOV_REG(BPF_REG_6, BPF_REG_1);
	p[n++] = LDX_DW(BPF_REG_1, BPF_REG_6, 0);
	p[n++] = STX_DW(BPF_REG_10, BPF_REG_1, -8);
	p[n++] = MOV_REG(BPF_REG_1, BPF_REG_10);
	p[n++] = ADD_IMM(BPF_REG_1, BUF);
	p[n++] = MOV_IMM(BPF_REG_2, LAZY_OUT);
	p[n++] = INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_3, BPF_PSEUDO_MAP_VALUE, 0, fmt_fd);
	p[n++] = INSN(0, 0, 0, 0, 0); /* offset 0 into the value */
	p[n++] = MOV_REG(BPF_REG_4, BPF_REG_10);
	p[n++] = ADD_IMM(BPF_REG_4, -8);
	p[n++] = MOV_IMM(BPF_REG_5, 8);
	p[n++] = CALL(BPF_FUNC_snprintf);
	p[n++] = STX_DW(BPF_REG_6, BPF_REG_0, 0);
	for (int off = 0; off < LAZY_OUT; off += 8) {
		p[n++] = LDX_DW(BPF_REG_1, BPF_REG_10, BUF + off);
		p[n++] = STX_DW(BPF_REG_6, BPF_REG_1, 8 + off);
	}
	p[n++] = MOV_IMM(BPF_REG_0, 0);
	p[n++] = EXIT();
	return load_prog(p, n);
}

/* ctx = struct name_ctx: bpf_kallsyms_lookup_name(copy of ctx->name) into ctx->addr. */
static int load_name_prog(void)
{
	enum { NAME = -8 - LAZY_NAME };
	struct bpf_insn p[16 + 2 * LAZY_NAME / 8];
	size_t n = 0;

	p[n++] = MOV_REG(BPF_REG_6, BPF_REG_1);
	for (int off = 0; off < LAZY_NAME; off += 8) {
		p[n++] = LDX_DW(BPF_REG_1, BPF_REG_6, 8 + off);
		p[n++] = STX_DW(BPF_REG_10, BPF_REG_1, NAME + off);
	}
	p[n++] = MOV_IMM(BPF_REG_1, 0);
	p[n++] = STX_DW(BPF_REG_10, BPF_REG_1, -8);
	p[n++] = MOV_REG(BPF_REG_1, BPF_REG_10);
	p[n++] = ADD_IMM(BPF_REG_1, NAME);
	p[n++] = MOV_IMM(BPF_REG_2, LAZY_NAME);
	p[n++] = MOV_IMM(BPF_REG_3, 0);
	p[n++] = MOV_REG(BPF_REG_4, BPF_REG_10);
	p[n++] = ADD_IMM(BPF_REG_4, -8);
	p[n++] = CALL(BPF_FUNC_kallsyms_lookup_name);
	p[n++] = LDX_DW(BPF_REG_1, BPF_REG_10, -8);
	p[n++] = STX_DW(BPF_REG_6, BPF_REG_1, 0);
	p[n++] = EXIT(); /* r0: the helper's 0 or -errno */
	return load_prog(p, n);
}

static int run_prog(int fd, void *ctx, size_t size, int *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = ctx, .ctx_size_in = (uint32_t)size);
	int err = bpf_prog_test_run_opts(fd, &opts);

	if (err)
		return err < 0 ? err : -EIO;
	*retval = (int)opts.retval;
	return 0;
}

static const char *arena_strdup(struct lazy *z, const char *s, size_t len)
{
	struct arena_block *b = z->arena;
	char *p;

	if (!b || b->size - b->used < len + 1) {
		size_t size = len + 1 > ARENA_BLOCK ? len + 1 : ARENA_BLOCK;

		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = z->arena;
		z->arena = b;
	}
	p = b->data + b->used;
	memcpy(p, s, len);
	p[len] = '\0';
	b->used += len + 1;
	return p;
}

static void lazy_free(struct lazy *z)
{
	if (!z)
		return;
	if (z->sym_fd >= 0)
		close(z->sym_fd);
	if (z->name_fd >= 0)
		close(z->name_fd);
	while (z->arena) {
		struct arena_block *next = z->arena->next;

		free(z->arena);
		z->arena = next;
	}
	free(z->r);
	pp_kallsyms_free(z->table);
	free(z->proc_root);
	free(z);
}

static bool parse_hex(const char *p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	int digits = 0, h;

	if (end - p < 3 || p[0] != '0' || p[1] != 'x')
		return false;
	for (p += 2; p < end; p++) {
		h = hexval(*p);
		if (h < 0 || ++digits > 16)
			return false;
		v = v << 4 | (uint64_t)h;
	}
	*out = v;
	return digits > 0;
}

/*
 * Splits the kernel's "%pS" text, "NAME+0xOFF/0xSIZE" with " [MODULE]" for module code, or
 * "0xADDR" when no symbol covers the address (returns false then).
 */
static bool parse_pS(const char *t, size_t len, const char **name, size_t *name_len,
		     const char **mod, size_t *mod_len, uint64_t *off, uint64_t *size)
{
	const char *end = t + len, *plus, *slash, *sp;

	*mod = NULL;
	*mod_len = 0;
	if (len > 2 && end[-1] == ']') {
		sp = memrchr(t, '[', len);
		if (!sp || sp == t || sp[-1] != ' ')
			return false;
		*mod = sp + 1;
		*mod_len = (size_t)(end - 1 - (sp + 1));
		end = sp - 1;
	}
	plus = memrchr(t, '+', (size_t)(end - t));
	if (!plus || plus == t)
		return false;
	slash = memchr(plus, '/', (size_t)(end - plus));
	if (!slash || !parse_hex(plus + 1, slash, off) || !parse_hex(slash + 1, end, size))
		return false;
	*name = t;
	*name_len = (size_t)(plus - t);
	return true;
}

/* Index of the last range with lo <= addr, or n when none. */
static size_t range_find(const struct lazy *z, uint64_t addr)
{
	size_t lo = 0, hi = z->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (z->r[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : z->n;
}

/* Remembers what the kernel said about addr; a failure only costs asking again. */
static const struct range *range_add(struct lazy *z, uint64_t addr, const char *name,
				     size_t name_len, const char *mod, size_t mod_len, uint64_t off,
				     uint64_t size)
{
	struct range r = {.start = addr - off};
	size_t at = range_find(z, addr);

	r.lo = r.start;
	r.hi = size > off ? r.start + size : addr + 1;
	if (r.hi < r.lo)
		r.hi = UINT64_MAX;
	at = at == z->n ? 0 : at + 1;
	/* Never overlap a neighbour: the addresses it answers keep their answer. */
	if (at > 0 && z->r[at - 1].hi > r.lo)
		r.lo = z->r[at - 1].hi;
	if (at < z->n && z->r[at].lo < r.hi)
		r.hi = z->r[at].lo;
	if (z->n == z->cap) {
		size_t ncap = z->cap ? z->cap * 2 : 256;
		struct range *nr = realloc(z->r, ncap * sizeof(*nr));

		if (!nr)
			return NULL;
		z->r = nr;
		z->cap = ncap;
	}
	r.name = name ? arena_strdup(z, name, name_len) : NULL;
	r.module = mod_len ? arena_strdup(z, mod, mod_len) : NULL;
	if ((name && !r.name) || (mod_len && !r.module))
		return NULL;
	memmove(&z->r[at + 1], &z->r[at], (z->n - at) * sizeof(*z->r));
	z->r[at] = r;
	z->n++;
	return &z->r[at];
}

/* The whole table, once: after the query budget, or when the kernel cannot answer. */
static const struct pp_kallsyms *lazy_table(struct lazy *z)
{
	if (!z->table && !z->table_failed) {
		z->table = pp_kallsyms_load(z->proc_root);
		z->table_failed = !z->table;
		if (z->table)
			z->stats.table_loaded = 1;
	}
	return z->table;
}

static const char *lazy_lookup(struct lazy *z, uint64_t addr, uint64_t *sym_start,
			       const char **module)
{
	struct sym_ctx ctx;
	const struct range *r;
	const char *name, *mod;
	size_t name_len, mod_len, i;
	uint64_t off, size;
	int retval;

	if (z->table)
		return pp_kallsyms_lookup(z->table, addr, sym_start, module);
	i = range_find(z, addr);
	if (i < z->n && addr < z->r[i].hi) {
		z->stats.hits++;
		r = &z->r[i];
		if (!r->name)
			return NULL; /* a page the kernel named nothing in, asked before */
		goto found;
	}
	if (z->stats.queries >= z->max_queries && lazy_table(z))
		return pp_kallsyms_lookup(z->table, addr, sym_start, module);
	z->stats.queries++;
	memset(&ctx, 0, sizeof(ctx));
	ctx.ret = (int64_t)addr;
	if (run_prog(z->sym_fd, &ctx, sizeof(ctx), &retval) || retval != 0 || ctx.ret <= 0 ||
	    ctx.ret > LAZY_OUT) {
		/* The kernel could not answer, or a name longer than the buffer: read the file. */
		if (lazy_table(z))
			return pp_kallsyms_lookup(z->table, addr, sym_start, module);
		return NULL;
	}
	if (!parse_pS(ctx.out, strnlen(ctx.out, sizeof(ctx.out)), &name, &name_len, &mod, &mod_len,
		      &off, &size) ||
	    off > addr) {
		/*
		 * The kernel knows no symbol here, yet the file may name it (a kprobe's
		 * instruction slot): the file decides, as it would have alone, once pages like
		 * this one are many; until then the page is remembered as unnamed.
		 */
		/* stats.unresolved counts those pages: each is asked once */
		if (++z->stats.unresolved < LAZY_UNNAMED_PAGES_BEFORE_FILE) {
			uint64_t page = addr & ~(uint64_t)(PAGE - 1);

			(void)range_add(z, addr, NULL, 0, NULL, 0, addr - page, PAGE);
			return NULL;
		}
		if (lazy_table(z))
			return pp_kallsyms_lookup(z->table, addr, sym_start, module);
		return NULL;
	}
	/* At most one range per kernel symbol, so this needs no bound of its own. */
	r = range_add(z, addr, name, name_len, mod, mod_len, off, size);
	if (!r)
		return NULL; /* out of memory */
found:
	if (sym_start)
		*sym_start = r->start;
	if (module)
		*module = r->module;
	return r->name;
}

static int lazy_find(struct lazy *z, const char *name, uint64_t *addr)
{
	struct name_ctx ctx = {0};
	size_t len = strlen(name);
	int retval;

	if (z->table || len >= sizeof(ctx.name) || len == 0) {
		const struct pp_kallsyms *t = lazy_table(z);

		return t ? pp_kallsyms_find(t, name, addr) : -ENOENT;
	}
	memcpy(ctx.name, name, len);
	if (run_prog(z->name_fd, &ctx, sizeof(ctx), &retval) || retval != 0 || !ctx.addr)
		return -ENOENT;
	if (addr)
		*addr = ctx.addr;
	return 0;
}

struct pp_kallsyms *pp_kallsyms_open_lazy(const char *proc_root, size_t max_queries)
{
	LIBBPF_OPTS(bpf_map_create_opts, mopts, .map_flags = BPF_F_RDONLY_PROG);
	char fmt[8] = "%pS";
	struct pp_kallsyms *k = calloc(1, sizeof(*k));
	struct lazy *z = calloc(1, sizeof(*z));
	struct sym_ctx probe = {0};
	int fmt_fd = -1, err = 0, key = 0, retval = 0;

	if (!k || !z) {
		free(k);
		free(z);
		errno = ENOMEM;
		return NULL;
	}
	z->sym_fd = z->name_fd = -1;
	z->max_queries = max_queries ? max_queries : LAZY_DEFAULT_MAX_QUERIES;
	z->stats.on_demand = 1;
	if (proc_root) {
		z->proc_root = strdup(proc_root);
		if (!z->proc_root) {
			err = -ENOMEM;
			goto fail;
		}
	}
	/* bpf_snprintf takes its format only from a frozen read-only map. */
	fmt_fd =
	    bpf_map_create(BPF_MAP_TYPE_ARRAY, "pp_ksym_fmt", sizeof(key), sizeof(fmt), 1, &mopts);
	if (fmt_fd < 0 || bpf_map_update_elem(fmt_fd, &key, fmt, 0) || bpf_map_freeze(fmt_fd)) {
		err = -errno;
		goto fail;
	}
	z->sym_fd = load_sym_prog(fmt_fd);
	if (z->sym_fd < 0) {
		err = -errno;
		goto fail;
	}
	z->name_fd = load_name_prog();
	if (z->name_fd < 0) {
		err = -errno;
		goto fail;
	}
	/* A kernel that loads the program but cannot run it (no syscall-program test runs). */
	err = run_prog(z->sym_fd, &probe, sizeof(probe), &retval);
	if (!err && (retval != 0 || probe.ret <= 0))
		err = -EOPNOTSUPP;
	if (err)
		goto fail;
	close(fmt_fd);
	k->lazy = z;
	return k;

fail:
	if (fmt_fd >= 0)
		close(fmt_fd);
	lazy_free(z);
	free(k);
	errno = err ? -err : EOPNOTSUPP;
	return NULL;
}

void pp_kallsyms_get_stats(const struct pp_kallsyms *k, struct pp_kallsyms_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (k && k->lazy)
		*out = k->lazy->stats;
}

void pp_kallsyms_free(struct pp_kallsyms *k)
{
	if (!k)
		return;
	lazy_free(k->lazy);
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
	if (k->lazy)
		return lazy_lookup(k->lazy, addr, sym_start, module);
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
	if (k->lazy)
		return lazy_find(k->lazy, name, addr);
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
	if (k && k->lazy)
		return k->lazy->table ? pp_kallsyms_count(k->lazy->table) : k->lazy->n;
	return k ? k->n : 0;
}

size_t pp_kallsyms_bad_lines(const struct pp_kallsyms *k)
{
	if (k && k->lazy)
		return pp_kallsyms_bad_lines(k->lazy->table);
	return k ? k->bad_lines : 0;
}
