/*
 * Tests of the CFI compiler against readelf --debug-dump=frames-interp, an independent
 * reading of the same .eh_frame: every row readelf prints (its LOC, CFA, rbp and return
 * address columns) must be what our table says at that address. On programs built here at
 * -O2 without frame pointers (C, C++ with exceptions, a shared library) and on the host's libc
 * and libstdc++. Plus the PLT and signal-frame rules by name, and bad input.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "cfi/unwind_table.h"
#include "unwind_rows.h"

static const char c_src[] =
    "#include <stdio.h>\n"
    "__attribute__((noinline)) long pp_leaf(long x) { long a[64]; for (int i = 0; i < 64; i++)"
    " a[i] = x * i; return a[x & 63]; }\n"
    "__attribute__((noinline)) long pp_mid(long x) { return pp_leaf(x + 1) + printf(\"\"); }\n"
    "int main(int c, char **v) { (void)v; return (int)pp_mid(c); }\n";

static const char cxx_src[] =
    "#include <stdexcept>\n#include <string>\n#include <vector>\n"
    "__attribute__((noinline)) int pp_thrower(int x) { if (x > 3) throw std::runtime_error(\"x\");"
    " return x; }\n"
    "int main(int c, char **) { std::vector<std::string> v(c, \"a\");"
    " try { return pp_thrower(c); } catch (const std::exception &e) { return (int)v.size(); } }\n";

static char g_dir[512];
static int g_state;
static const char *g_skip_reason;

static int fixture(void)
{
	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_sh("command -v readelf >/dev/null && cc --version >/dev/null 2>&1")) {
		g_skip_reason = "no readelf or cc";
		return g_state;
	}
	if (pp_test_scratch_dir(g_dir, sizeof(g_dir), "pp-unwind")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	g_skip_reason = "cc or c++ failed to build the test programs";
	if (pp_test_sh("cd '%s' && printf '%%s' '%s' > p.c && "
		       "cc -O2 -fomit-frame-pointer -o prog_c p.c && "
		       "cc -O2 -fomit-frame-pointer -fPIC -shared -o libpp.so p.c && "
		       "cc -O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables "
		       "-fno-unwind-tables -o prog_dbg p.c",
		       g_dir, c_src))
		return g_state;
	if (pp_test_sh("cd '%s' && cat > p.cc <<'SRC'\n%sSRC\n"
		       "c++ -O2 -fomit-frame-pointer -o prog_cxx p.cc",
		       g_dir, cxx_src))
		return g_state;
	g_skip_reason = NULL;
	g_state = 1;
	return g_state;
}

/* "rsp+16" -> rule, offset; "exp" -> -1 (an expression: checked by name elsewhere) */
static int parse_cfa(const char *s, int *rule, long *off)
{
	if (!strncmp(s, "rsp+", 4) || !strncmp(s, "rbp+", 4)) {
		*rule = s[1] == 's' ? PP_CFA_RSP : PP_CFA_RBP;
		*off = strtol(s + 4, NULL, 10);
		return 0;
	}
	*rule = -1;
	return !strcmp(s, "exp") ? 0 : -1;
}

/*
 * "u" -> -3 (readelf prints it both for a register no rule mentions, which keeps its value,
 * and for DW_CFA_undefined), "s" -> same, "c-16" -> at_cfa -16, "exp" -> -1; anything else
 * -> unsupported (-2)
 */
static void parse_reg(const char *s, int *rule, long *off)
{
	*off = 0;
	if (!strcmp(s, "u"))
		*rule = -3;
	else if (!strcmp(s, "s"))
		*rule = PP_REG_SAME;
	else if (s[0] == 'c' && (s[1] == '-' || s[1] == '+'))
		*rule = PP_REG_AT_CFA, *off = strtol(s + 1, NULL, 10);
	else if (!strcmp(s, "exp"))
		*rule = -1;
	else
		*rule = -2;
}

/*
 * Compare t with readelf's reading of file: 0 when every row agrees; prints the first
 * disagreements. *rows_checked gets how many readelf rows were compared.
 */
static int compare_with_readelf(const char *file, const struct pp_unwind_table *t,
				size_t *rows_checked)
{
	char cmd[PATH_MAX + 64], line[4096], cols[32][16];
	int ncols = 0, bad = 0, rbp_col = -1, ra_col = -1, in_fde = 0;
	FILE *p;

	*rows_checked = 0;
	snprintf(cmd, sizeof(cmd), "readelf -wF '%s' 2>/dev/null", file);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *tok, *save = NULL;
		char *f[32];
		int n = 0;

		for (tok = strtok_r(line, " \t\n", &save); tok && n < 32;
		     tok = strtok_r(NULL, " \t\n", &save))
			f[n++] = tok;
		/* "OFFSET LENGTH ID FDE cie=... pc=..." or "... CIE": rows of CIEs are no pcs */
		if (n >= 4 && (!strcmp(f[3], "FDE") || !strcmp(f[3], "CIE"))) {
			in_fde = !strcmp(f[3], "FDE");
			ncols = 0;
			continue;
		}
		if (n >= 2 && !strcmp(f[0], "LOC") && !strcmp(f[1], "CFA")) {
			ncols = n;
			rbp_col = ra_col = -1;
			for (int i = 0; i < n; i++) {
				snprintf(cols[i], sizeof(cols[i]), "%s", f[i]);
				if (!strcmp(f[i], "rbp"))
					rbp_col = i;
				if (!strcmp(f[i], "ra"))
					ra_col = i;
			}
			continue;
		}
		if (!in_fde || !ncols || n != ncols || strlen(f[0]) != 16)
			continue;
		{
			uint64_t loc = strtoull(f[0], NULL, 16);
			struct pp_unwind_row buf;
			const struct pp_unwind_row *r = lookup_row(t, loc, &buf);
			int cfa, rbp = PP_REG_SAME, ra = -2;
			long cfa_off = 0, rbp_off = 0, ra_off = 0;
			int ok;

			if (parse_cfa(f[1], &cfa, &cfa_off))
				continue;
			if (rbp_col > 0)
				parse_reg(f[rbp_col], &rbp, &rbp_off);
			if (ra_col > 0)
				parse_reg(f[ra_col], &ra, &ra_off);
			(*rows_checked)++;
			ok = r != NULL;
			if (ok && cfa >= 0)
				ok = r->cfa_rule == cfa && r->cfa_off == cfa_off;
			else if (ok)
				ok = r->cfa_rule == PP_CFA_PLT || r->cfa_rule == PP_CFA_DEREF_RSP ||
				     r->cfa_rule == PP_CFA_UNSUPPORTED;
			if (ok && rbp == -3)
				ok = r->rbp_rule == PP_REG_SAME || r->rbp_rule == PP_REG_UNDEFINED;
			else if (ok && rbp >= 0)
				ok = r->rbp_rule == rbp && r->rbp_off == rbp_off;
			else if (ok && rbp == -1)
				ok = r->rbp_rule == PP_REG_AT_RSP ||
				     r->rbp_rule == PP_REG_UNSUPPORTED;
			if (ok && ra == -3)
				ok = r->ra_rule == PP_REG_SAME || r->ra_rule == PP_REG_UNDEFINED;
			else if (ok && ra >= 0)
				ok = r->ra_rule == ra && r->ra_off == ra_off;
			else if (ok && ra == -1)
				ok =
				    r->ra_rule == PP_REG_AT_RSP || r->ra_rule == PP_REG_UNSUPPORTED;
			if (!ok && bad++ < 5)
				fprintf(
				    stderr,
				    "  %s at %#llx: readelf %s rbp=%s ra=%s, ours %s%+d rbp=%s%+d "
				    "ra=%s%+d\n",
				    file, (unsigned long long)loc, f[1],
				    rbp_col > 0 ? f[rbp_col] : "-", ra_col > 0 ? f[ra_col] : "-",
				    r ? pp_cfa_rule_name(r->cfa_rule) : "no row",
				    r ? r->cfa_off : 0, r ? pp_reg_rule_name(r->rbp_rule) : "",
				    r ? r->rbp_off : 0, r ? pp_reg_rule_name(r->ra_rule) : "",
				    r ? r->ra_off : 0);
		}
	}
	pclose(p);
	return bad;
}

static void check_file(const char *path, size_t min_rows)
{
	struct pp_unwind_table_stats st;
	struct pp_unwind_table *t;
	size_t checked = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	REQUIRE(fd >= 0);
	t = pp_unwind_table_open_fd(fd, 0);
	close(fd);
	REQUIRE(t != NULL);
	pp_unwind_table_get_stats(t, &st);
	CHECK_EQ_U64(compare_with_readelf(path, t, &checked), 0);
	fprintf(stderr,
		"  %s: %llu FDEs, %zu rows (%zu readelf rows compared), %llu PLT, %llu signal, "
		"%llu unsupported CFA, %zu bytes\n",
		path, (unsigned long long)st.fdes, pp_unwind_table_count(t), checked,
		(unsigned long long)st.cfa_plt, (unsigned long long)st.cfa_signal,
		(unsigned long long)st.cfa_unsupported, pp_unwind_table_bytes(t));
	CHECK(checked >= min_rows);
	CHECK(st.fdes_unreadable == 0);
	pp_unwind_table_free(t);
}

TEST(test_programs_agree_with_readelf)
{
	char path[PATH_MAX];

	if (fixture() != 1)
		SKIP(g_skip_reason);
	snprintf(path, sizeof(path), "%s/prog_c", g_dir);
	check_file(path, 5);
	snprintf(path, sizeof(path), "%s/libpp.so", g_dir);
	check_file(path, 5);
	snprintf(path, sizeof(path), "%s/prog_cxx", g_dir);
	check_file(path, 5);
}

/*
 * Code built without asynchronous unwind tables but with -g has its CFI in .debug_frame only
 * (the C runtime's in .eh_frame): both are compiled, and agree with readelf, which dumps both.
 */
TEST(debug_frame_where_eh_frame_lacks_the_code)
{
	struct pp_unwind_table_stats st;
	struct pp_unwind_table *t;
	char path[PATH_MAX];
	int fd;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	snprintf(path, sizeof(path), "%s/prog_dbg", g_dir);
	check_file(path, 5);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	t = pp_unwind_table_open_fd(fd, 0);
	close(fd);
	REQUIRE(t != NULL);
	pp_unwind_table_get_stats(t, &st);
	CHECK(st.from_debug_frame >= 2); /* pp_leaf, pp_mid, main */
	CHECK(st.fdes > st.from_debug_frame);
	pp_unwind_table_free(t);
}

/* Field by field: a row's tail padding is not part of its value. */
static bool rows_equal(const struct pp_unwind_row *a, const struct pp_unwind_row *b)
{
	return a->pc == b->pc && a->cfa_off == b->cfa_off && a->rbp_off == b->rbp_off &&
	       a->ra_off == b->ra_off && a->cfa_rule == b->cfa_rule && a->rbp_rule == b->rbp_rule &&
	       a->ra_rule == b->ra_rule && a->flags == b->flags;
}

/* The rows of a file read from path, or NULL. */
static struct pp_unwind_table *table_of(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct pp_unwind_table *t;

	if (fd < 0)
		return NULL;
	t = pp_unwind_table_open_fd(fd, 0);
	close(fd);
	return t;
}

/*
 * A .debug_frame compressed as Go and objcopy --compress-debug-sections compress it
 * (SHF_COMPRESSED with zlib or zstd, and GNU's older .zdebug_frame) gives the rows of the
 * uncompressed one, exactly.
 */
TEST(compressed_debug_frame_gives_the_same_rows)
{
	static const char *const kinds[] = {"zlib", "zstd", "zlib-gnu"};
	struct pp_unwind_table *plain, *t;
	char path[PATH_MAX], comp[PATH_MAX + 16];

	if (fixture() != 1)
		SKIP(g_skip_reason);
	snprintf(path, sizeof(path), "%s/prog_dbg", g_dir);
	plain = table_of(path);
	REQUIRE(plain != NULL);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct pp_unwind_table_stats st;

		snprintf(comp, sizeof(comp), "%s.%s", path, kinds[k]);
		if (pp_test_sh("objcopy --compress-debug-sections=%s '%s' '%s' 2>/dev/null",
			       kinds[k], path, comp)) {
			fprintf(stderr, "  objcopy cannot compress with %s here: not checked\n",
				kinds[k]);
			continue;
		}
		REQUIRE(
		    pp_test_sh("readelf -SW '%s' | grep -Eq '(\\.zdebug_frame|debug_frame.* C )'",
			       comp) == 0);
		t = table_of(comp);
		REQUIRE(t != NULL);
		pp_unwind_table_get_stats(t, &st);
		CHECK(st.from_debug_frame >= 2);
		CHECK_EQ_U64(pp_unwind_table_count(t), pp_unwind_table_count(plain));
		for (size_t i = 0; i < pp_unwind_table_count(t) && i < pp_unwind_table_count(plain);
		     i++) {
			struct pp_unwind_row a = row_of(t, i), b = row_of(plain, i);

			if (!rows_equal(&a, &b)) {
				CHECK(!"a row differs from the uncompressed file's");
				break;
			}
		}
		pp_unwind_table_free(t);
	}
	pp_unwind_table_free(plain);
}

TEST(host_libraries_agree_with_readelf)
{
	static const char *const libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6",
					   "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};

	if (pp_test_sh("command -v readelf >/dev/null"))
		SKIP("no readelf");
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		if (access(libs[i], R_OK)) {
			fprintf(stderr, "  %s missing here\n", libs[i]);
			continue;
		}
		check_file(libs[i], 1000);
	}
}

/* libc's PLT and its signal trampoline, by name: the two expression rules compilers emit. */
TEST(plt_and_signal_frame_rules)
{
	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	struct pp_unwind_table_stats st;
	struct pp_unwind_table *t;
	int fd = open(libc, O_RDONLY | O_CLOEXEC), plt = 0, sig = 0;

	if (fd < 0)
		SKIP("no libc.so.6 at the Debian path");
	t = pp_unwind_table_open_fd(fd, 0);
	close(fd);
	REQUIRE(t != NULL);
	for (size_t i = 0; i < pp_unwind_table_count(t); i++) {
		struct pp_unwind_row row = row_of(t, i);
		const struct pp_unwind_row *r = &row;

		if (r->cfa_rule == PP_CFA_PLT) {
			plt++;
			CHECK(r->cfa_off == 10 || r->cfa_off == 11);
		}
		if (r->cfa_rule == PP_CFA_DEREF_RSP) {
			sig++;
			/* __restore_rt: rsp of the interrupted code and its rip in the ucontext */
			CHECK(r->flags & PP_UNWIND_SIGNAL_FRAME);
			CHECK(r->ra_rule == PP_REG_AT_RSP && r->rbp_rule == PP_REG_AT_RSP);
		}
	}
	pp_unwind_table_get_stats(t, &st);
	CHECK(plt >= 1);
	CHECK(sig >= 1);
	CHECK_EQ_U64(st.cfa_plt, (uint64_t)plt);
	pp_unwind_table_free(t);
}

TEST(bad_input)
{
	static const char text[] = "not an ELF file at all";
	char path[PATH_MAX];
	int fd;

	errno = 0;
	CHECK(pp_unwind_table_open_mem(text, sizeof(text), 0) == NULL && errno == ENOEXEC);
	CHECK(pp_unwind_table_open_fd(-1, 0) == NULL);
	if (fixture() != 1)
		SKIP(g_skip_reason);
	/* stripped of .eh_frame_hdr: nothing to unwind with */
	REQUIRE(pp_test_sh("cd '%s' && objcopy --remove-section=.eh_frame_hdr prog_c prog_nohdr",
			   g_dir) == 0);
	snprintf(path, sizeof(path), "%s/prog_nohdr", g_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	errno = 0;
	CHECK(pp_unwind_table_open_fd(fd, 0) == NULL && errno == ENODATA);
	close(fd);
	/* the row bound */
	snprintf(path, sizeof(path), "%s/prog_cxx", g_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	errno = 0;
	CHECK(pp_unwind_table_open_fd(fd, 2) == NULL && errno == E2BIG);
	close(fd);
}

/* A file's bytes, with every occurrence of `from` replaced by `to` (same length). */
static char *patched(const char *path, const char *from, const char *to, size_t n, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long size;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t)size);
	if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = 0;
	for (long i = 0; i + (long)n <= size; i++) {
		if (!memcmp(buf + i, from, n)) {
			memcpy(buf + i, to, n);
			*len = (size_t)size;
		}
	}
	if (!*len) {
		free(buf);
		return NULL;
	}
	return buf;
}

TEST(hostile_cfi_is_refused_before_it_runs)
{
	char path[PATH_MAX];
	struct pp_unwind_table_stats st;
	struct pp_unwind_table *t;
	size_t len = 0;
	char *buf;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	snprintf(path, sizeof(path), "%s/prog_c", g_dir);
	/*
	 * The CIEs' "def_cfa rsp+8; offset rip at cfa-8" becomes "def_cfa r16383+144", a
	 * register x86-64 does not have (libdw, evaluating, sized frames for 16384 registers;
	 * a hostile uleb cost it gigabytes). The CIEs are refused, so is each FDE that uses
	 * them: no rows to unwind with, no error.
	 */
	buf = patched(path, "\x0c\x07\x08\x90\x01", "\x0c\xff\x7f\x90\x01", 5, &len);
	REQUIRE(buf != NULL);
	t = pp_unwind_table_open_mem(buf, len, 0);
	REQUIRE(t != NULL);
	pp_unwind_table_get_stats(t, &st);
	CHECK(st.fdes > 0 && st.fdes_unreadable == st.fdes);
	for (size_t i = 0; i < pp_unwind_table_count(t); i++)
		CHECK(row_of(t, i).cfa_rule == PP_CFA_NONE);
	pp_unwind_table_free(t);
	free(buf);

	/* an unknown opcode in place of def_cfa: refused the same way */
	buf = patched(path, "\x0c\x07\x08\x90\x01", "\x3f\x07\x08\x90\x01", 5, &len);
	REQUIRE(buf != NULL);
	t = pp_unwind_table_open_mem(buf, len, 0);
	REQUIRE(t != NULL);
	pp_unwind_table_get_stats(t, &st);
	CHECK(st.fdes_unreadable == st.fdes);
	pp_unwind_table_free(t);
	free(buf);
}

TEST_LIST = {
    {"test_programs_agree_with_readelf", test_programs_agree_with_readelf},
    {"debug_frame_where_eh_frame_lacks_the_code", debug_frame_where_eh_frame_lacks_the_code},
    {"compressed_debug_frame_gives_the_same_rows", compressed_debug_frame_gives_the_same_rows},
    {"host_libraries_agree_with_readelf", host_libraries_agree_with_readelf},
    {"plt_and_signal_frame_rules", plt_and_signal_frame_rules},
    {"bad_input", bad_input},
    {"hostile_cfi_is_refused_before_it_runs", hostile_cfi_is_refused_before_it_runs},
};
TEST_MAIN()
