/*
 * The walk over unwind tables, on real stacks: tests/data/unwind's programs, built at -O2
 * without frame pointers (C and C++, two shared libraries, one built with frame pointers),
 * dump their registers and stack at the leaf of a known 28-frame chain; the walk over the
 * tables compiled from the files in their /proc/self/maps must give the whole chain, in the
 * order perf --call-graph dwarf shows it (tests/integration/test_unwind_perf.sh checks that
 * order against perf itself), and end at _start. Frame pointers alone give a few frames of
 * the same stack; the frame-pointer library walked without a table still comes out whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../data/unwind/chain.h"
#include "check.h"
#include "testsh.h"
#include "cfi/unwind_table.h"
#include "unwind/unwind_walk.h"

static char g_dir[512];
static int g_state;
static const char *g_skip_reason;

static int fixture(void)
{
	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_sh("command -v nm >/dev/null && cc --version >/dev/null 2>&1 && "
		       "c++ --version >/dev/null 2>&1")) {
		g_skip_reason = "no nm, cc or c++";
		return g_state;
	}
	if (pp_test_scratch_dir(g_dir, sizeof(g_dir), "pp-walk")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	if (pp_test_sh("sh '%s/unwind/build.sh' '%s' >/dev/null", PP_TEST_DATA_DIR, g_dir)) {
		g_skip_reason = "the test programs did not build";
		return g_state;
	}
	g_skip_reason = NULL;
	g_state = 1;
	return g_state;
}

/* --- one process's captured state --- */

struct symbol {
	uint64_t addr, size;
	char name[96];
};

struct mapping {
	uint64_t start, end, bias;
	char path[256];
	struct pp_unwind_table *table; /* NULL: frame pointers */
	struct symbol *syms;
	size_t nsyms;
};

struct capture {
	struct pp_chain_dump hdr;
	uint8_t *stack;
	struct mapping maps[64];
	size_t nmaps;
	const char *no_table; /* a file walked as if it had no table */
};

/* The ELF address bias of a mapping at file offset off: start - off - (p_vaddr - p_offset). */
static int mapping_bias(const char *path, uint64_t start, uint64_t off, uint64_t *bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	size_t n;
	int rc = -1;

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_getphdrnum(e, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if ((ph.p_offset & ~(uint64_t)0xfff) == off) {
				*bias = start - off - (ph.p_vaddr - ph.p_offset);
				rc = 0;
				break;
			}
		}
	}
	elf_end(e);
	close(fd);
	return rc;
}

/* Function symbols by `nm -S` (static ones too), demangled, plus the dynamic ones. */
static void load_symbols(struct mapping *m)
{
	char cmd[PATH_MAX + 64], line[512];
	size_t cap = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "{ nm -C -S --defined-only '%s'; nm -C -S -D --defined-only '%s'; } "
		 "2>/dev/null",
		 m->path, m->path);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p)) {
		struct symbol s = {0};
		char type;
		int used = 0;

		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %n", &s.addr, &s.size, &type, &used) <
			3 ||
		    !used || (type != 't' && type != 'T' && type != 'W' && type != 'i'))
			continue;
		snprintf(s.name, sizeof(s.name), "%s", line + used);
		s.name[strcspn(s.name, "\n")] = '\0';
		if (m->nsyms == cap) {
			cap = cap ? cap * 2 : 256;
			m->syms = realloc(m->syms, cap * sizeof(*m->syms));
			if (!m->syms)
				abort();
		}
		m->syms[m->nsyms++] = s;
	}
	if (p)
		pclose(p);
}

static int capture_load(struct capture *c, const char *dump)
{
	FILE *f = fopen(dump, "rb");
	char *maps, *line, *save = NULL;

	memset(c, 0, sizeof(*c));
	if (!f)
		return -1;
	if (fread(&c->hdr, sizeof(c->hdr), 1, f) != 1 || c->hdr.len > (1u << 20) ||
	    c->hdr.maps_len > (1u << 16)) {
		fclose(f);
		return -1;
	}
	c->stack = malloc(c->hdr.len);
	maps = calloc(1, c->hdr.maps_len + 1);
	if (!c->stack || !maps || fread(c->stack, 1, c->hdr.len, f) != c->hdr.len ||
	    fread(maps, 1, c->hdr.maps_len, f) != c->hdr.maps_len) {
		free(maps);
		fclose(f);
		return -1;
	}
	fclose(f);
	for (line = strtok_r(maps, "\n", &save); line && c->nmaps < 64;
	     line = strtok_r(NULL, "\n", &save)) {
		struct mapping *m = &c->maps[c->nmaps];
		char perms[8] = "";
		uint64_t off;
		int used = 0;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &m->start,
			   &m->end, perms, &off, &used) < 4 ||
		    !used || perms[2] != 'x' || line[used] != '/')
			continue;
		snprintf(m->path, sizeof(m->path), "%s", line + used);
		if (mapping_bias(m->path, m->start, off, &m->bias))
			continue;
		c->nmaps++;
	}
	free(maps);
	return 0;
}

static void capture_free(struct capture *c)
{
	for (size_t i = 0; i < c->nmaps; i++) {
		pp_unwind_table_free(c->maps[i].table);
		free(c->maps[i].syms);
	}
	free(c->stack);
}

static struct mapping *mapping_at(struct capture *c, uint64_t pc)
{
	for (size_t i = 0; i < c->nmaps; i++)
		if (pc >= c->maps[i].start && pc < c->maps[i].end)
			return &c->maps[i];
	return NULL;
}

static const struct pp_unwind_table *find_table(void *ctx, uint64_t pc, uint64_t *bias)
{
	struct capture *c = ctx;
	struct mapping *m = mapping_at(c, pc);

	if (!m || (c->no_table && strstr(m->path, c->no_table)))
		return NULL;
	if (!m->table) {
		int fd = open(m->path, O_RDONLY | O_CLOEXEC);

		m->table = pp_unwind_table_open_fd(fd, 0);
		if (fd >= 0)
			close(fd);
		if (!m->table)
			return NULL;
	}
	*bias = m->bias;
	return m->table;
}

static int read_stack(void *ctx, uint64_t addr, uint64_t *out)
{
	struct capture *c = ctx;

	if (addr < c->hdr.rsp || addr - c->hdr.rsp + 8 > c->hdr.len)
		return -EFAULT;
	memcpy(out, c->stack + (addr - c->hdr.rsp), 8);
	return 0;
}

static const struct pp_unwind_table *no_tables(void *ctx, uint64_t pc, uint64_t *bias)
{
	(void)ctx, (void)pc, (void)bias;
	return NULL;
}

/* The function at pc ("?" when none): return addresses are named at pc - 1. */
static const char *name_at(struct capture *c, uint64_t pc, bool leaf)
{
	struct mapping *m = mapping_at(c, pc);
	uint64_t a;

	if (!m)
		return "?";
	if (!m->syms)
		load_symbols(m);
	a = pc - m->bias - (leaf ? 0 : 1);
	for (size_t i = 0; i < m->nsyms; i++)
		if (a >= m->syms[i].addr && a < m->syms[i].addr + m->syms[i].size)
			return m->syms[i].name;
	return "?";
}

/* tests/data/unwind/PROG.expected: the chain from the leaf down, one function a line, named
 * as perf --call-graph dwarf names them (C++ without parameters) */
static size_t expected_chain(const char *prog, char out[][64], size_t max)
{
	char path[PATH_MAX];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/unwind/%s.expected", PP_TEST_DATA_DIR, prog);
	f = fopen(path, "r");
	while (f && n < max && fgets(out[n], 64, f)) {
		out[n][strcspn(out[n], "\n")] = '\0';
		n++;
	}
	if (f)
		fclose(f);
	return n;
}

/* a name as perf prints it: a C++ function without its parameters */
static void perf_name(const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s", name);
	if (strchr(out, ':'))
		out[strcspn(out, "(")] = '\0';
}

/* Run prog, walk its dump; whether the walk named the whole chain, in order, down to _start. */
static void check_program(const char *prog, const char *no_table)
{
	char dump[PATH_MAX], want[40][64], got[64];
	struct capture c;
	uint64_t pcs[128];
	size_t nwant, n;
	enum pp_unwind_stop why;
	struct pp_unwind_walk_stats st;
	struct pp_unwind_ops ops = {.find = find_table, .read_u64 = read_stack};
	struct pp_unwind_regs regs;
	bool whole = true;

	snprintf(dump, sizeof(dump), "%s/%s.dump", g_dir, prog);
	REQUIRE(pp_test_sh("cd '%s' && PP_CHAIN_DUMP='%s' ./%s", g_dir, dump, prog) == 0);
	REQUIRE(capture_load(&c, dump) == 0);
	c.no_table = no_table;
	ops.ctx = &c;
	regs = (struct pp_unwind_regs){.rip = c.hdr.rip, .rsp = c.hdr.rsp, .rbp = c.hdr.rbp};
	n = pp_unwind_walk(&regs, &ops, pcs, 128, &why, &st);
	nwant = expected_chain(prog, want, 40);
	REQUIRE(nwant >= 20);
	printf("  %s%s%s: %zu frames (%u by table, %u by frame pointer), stopped: %s\n", prog,
	       no_table ? ", no table for " : "", no_table ? no_table : "", n, st.table_frames,
	       st.fp_frames, pp_unwind_stop_name(why));
	for (size_t i = 0; i < nwant; i++) {
		perf_name(i < n ? name_at(&c, pcs[i], i == 0) : "(none)", got, sizeof(got));
		if (strcmp(got, want[i])) {
			printf("    frame %zu: %s, wanted %s\n", i, got, want[i]);
			whole = false;
		}
	}
	CHECK(whole);
	/* below main: libc's __libc_start_call_main, then _start, whose return address is
	 * undefined in its CFI: the outermost frame */
	CHECK(why == PP_UNWIND_END);
	CHECK(n >= nwant + 2 && n <= nwant + 3);
	CHECK(n > 0 && !strcmp(name_at(&c, pcs[n - 1], false), "_start"));
	if (no_table)
		CHECK_EQ_U64(st.fp_frames, 2); /* pp_fp_inner, pp_fp_outer */
	else
		CHECK_EQ_U64(st.fp_frames, 0);

	/* the same stack by frame pointers alone: the chain is lost within a few frames */
	ops.find = no_tables;
	n = pp_unwind_walk(&regs, &ops, pcs, 128, &why, &st);
	printf("  %s by frame pointers only: %zu frames, stopped: %s\n", prog, n,
	       pp_unwind_stop_name(why));
	CHECK(n < nwant);
	capture_free(&c);
}

TEST(c_chain_is_whole)
{
	if (fixture() != 1)
		SKIP(g_skip_reason);
	check_program("chain", NULL);
}

TEST(cxx_chain_is_whole)
{
	if (fixture() != 1)
		SKIP(g_skip_reason);
	check_program("chain_cxx", NULL);
}

TEST(frame_pointer_library_without_table_in_the_middle)
{
	if (fixture() != 1)
		SKIP(g_skip_reason);
	check_program("chain", "libpp_chain_fp.so");
	check_program("chain_cxx", "libpp_chain_fp.so");
}

/* Stops are named: a stack cut short, a CFA that does not move up, the depth limit. */
TEST(walk_stops_are_named)
{
	char dump[PATH_MAX];
	struct capture c;
	uint64_t pcs[128];
	enum pp_unwind_stop why;
	struct pp_unwind_ops ops = {.find = find_table, .read_u64 = read_stack};
	struct pp_unwind_regs regs;
	size_t n;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	snprintf(dump, sizeof(dump), "%s/stops.dump", g_dir);
	REQUIRE(pp_test_sh("cd '%s' && PP_CHAIN_DUMP='%s' ./chain", g_dir, dump) == 0);
	REQUIRE(capture_load(&c, dump) == 0);
	ops.ctx = &c;
	regs = (struct pp_unwind_regs){.rip = c.hdr.rip, .rsp = c.hdr.rsp, .rbp = c.hdr.rbp};

	n = pp_unwind_walk(&regs, &ops, pcs, 5, &why, NULL);
	CHECK(n == 5 && why == PP_UNWIND_DEPTH);

	c.hdr.len = 256; /* only the leaf's frames were copied */
	n = pp_unwind_walk(&regs, &ops, pcs, 128, &why, NULL);
	CHECK(why == PP_UNWIND_UNREADABLE && n > 1 && n < 10);
	c.hdr.len = 1u << 20;

	/* a pc in a file with a table but outside any FDE */
	regs.rip = c.maps[0].start - 1;
	for (size_t i = 0; i < c.nmaps; i++)
		if (strstr(c.maps[i].path, "libpp_chain.so"))
			regs.rip = c.maps[i].start; /* the ELF header's page: no code, no CFI */
	n = pp_unwind_walk(&regs, &ops, pcs, 128, &why, NULL);
	CHECK(n == 1 &&
	      (why == PP_UNWIND_NO_CFI || why == PP_UNWIND_FP_END || why == PP_UNWIND_UNREADABLE));
	capture_free(&c);
}

TEST_LIST = {
    {"c_chain_is_whole", c_chain_is_whole},
    {"cxx_chain_is_whole", cxx_chain_is_whole},
    {"frame_pointer_library_without_table_in_the_middle",
     frame_pointer_library_without_table_in_the_middle},
    {"walk_stops_are_named", walk_stops_are_named},
};
TEST_MAIN()
