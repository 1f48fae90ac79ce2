/*
 * Tests of the ELF symbol tables against binaries built at test time with the system cc: a PIE
 * and a non-PIE executable, a shared library, a stripped copy (only .dynsym), a copy with a
 * .gnu_debuglink, and a 32-bit executable when cc -m32 can link one. Expected values come from
 * binutils (nm, readelf) and from a running child's /proc/PID/maps, never from the code under
 * test. Corrupt, truncated and empty inputs must fail with ENOEXEC / EINVAL.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/elf_symbols.h"

static const char prog_src[] =
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "#include <unistd.h>\n"
    "int pp_global_counter = 42;\n"
    "static char pp_static_buffer[4096];\n"
    "__thread int pp_tls_var = 7;\n"
    "__attribute__((noinline)) static int pp_static_helper(int x)\n"
    "{ pp_static_buffer[x & 4095]++; return x * 2 + pp_static_buffer[(x + 1) & 4095]; }\n"
    "__attribute__((noinline, visibility(\"default\"))) int pp_func_alpha(int x)\n"
    "{ int s = 0; for (int i = 0; i < x; i++) s += pp_static_helper(i) ^ pp_global_counter;\n"
    "  return s + pp_tls_var; }\n"
    "__attribute__((noinline, visibility(\"default\"))) int pp_func_tiny(int x)\n"
    "{ return x + 1; }\n"
    "__attribute__((noinline, aligned(64), visibility(\"default\"))) int pp_func_beta(int x)\n"
    "{ return pp_func_alpha(x) + pp_func_tiny(x); }\n"
    "#ifdef WITH_LIB\n"
    "int pp_lib_work(int n);\n"
    "#endif\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "	if (argc > 1 && strcmp(argv[1], \"wait\") == 0) {\n"
    "		char c;\n"
    "		printf(\"%p\\n\", (void *)pp_func_beta);\n"
    "#ifdef WITH_LIB\n"
    "		printf(\"%p\\n\", (void *)pp_lib_work);\n"
    "#endif\n"
    "		fflush(stdout);\n"
    "		return (int)read(0, &c, 1);\n"
    "	}\n"
    "	return pp_func_beta(argc) & 1;\n"
    "}\n";

static const char lib_src[] =
    "__attribute__((noinline, visibility(\"default\"))) int pp_lib_work(int n)\n"
    "{ int s = 0; for (int i = 0; i < n; i++) s += (i * 3) ^ (s >> 1); return s; }\n"
    "__attribute__((noinline, aligned(64), visibility(\"default\"))) int pp_lib_other(int n)\n"
    "{ return pp_lib_work(n) + 1; }\n"
    "int pp_lib_table[64] = {1};\n";

/* Links with a full libc, or with none (an entry point of its own) when only that works. */
static const char src32[] =
    "int pp32_counter = 3;\n"
    "__attribute__((noinline)) int pp32_func(int x)\n"
    "{ return x * pp32_counter + 1; }\n"
    "void pp32_entry(void) { for (;;) pp32_counter = pp32_func(pp32_counter); }\n"
    "int main(void) { return pp32_func(1); }\n";

static char g_dir[512];
static int g_state; /* 0: not tried, 1: built, -1: cannot build */
static const char *g_skip_reason;
static int g_have32;
static const char *g_why_no32 = "";

static void cleanup_dir(void)
{
	char cmd[PATH_MAX + 32];

	if (g_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "  could not remove %s\n", g_dir);
	}
}

static void path_of(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", g_dir, name);
}

/* stdout of a shell command, NUL-terminated; NULL on failure. */
__attribute__((format(printf, 1, 2))) static char *capture(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	size_t cap = 4096, n = 0, r;
	char *buf = malloc(cap);
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (!buf)
		return NULL;
	p = popen(cmd, "r");
	if (!p) {
		free(buf);
		return NULL;
	}
	while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += r;
		if (n + 1 == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	buf[n] = '\0';
	if (pclose(p) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int write_file(const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	path_of(path, sizeof(path), name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* Build every test binary once; later calls return the first outcome. */
static int fixture(void)
{
	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_sh("cc --version >/dev/null 2>&1") != 0) {
		g_skip_reason = "no working cc to build test binaries";
		return g_state;
	}
	if (pp_test_sh("which nm readelf objcopy >/dev/null 2>&1") != 0) {
		g_skip_reason = "binutils (nm, readelf, objcopy) not installed";
		return g_state;
	}
	if (pp_test_mkdtemp(g_dir, sizeof(g_dir), "pp-elf")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	atexit(cleanup_dir);
	if (write_file("prog.c", prog_src) || write_file("lib.c", lib_src) ||
	    write_file("s32.c", src32)) {
		g_skip_reason = "cannot write test sources";
		return g_state;
	}
	g_skip_reason = "cc failed to build the test binaries";
	if (pp_test_sh("cd '%s' && cc -O1 -fPIE -pie -rdynamic -Wl,--build-id -o prog_pie prog.c",
		       g_dir) ||
	    pp_test_sh(
		"cd '%s' && cc -O1 -fno-pie -no-pie -rdynamic -Wl,--build-id -o prog_nopie prog.c",
		g_dir) ||
	    pp_test_sh("cd '%s' && cc -O1 -fPIC -shared -Wl,--build-id -o libpptest.so lib.c",
		       g_dir) ||
	    pp_test_sh("cd '%s' && cc -O1 -fPIE -pie -DWITH_LIB -Wl,--build-id -o prog_lib prog.c "
		       "-L. -lpptest -Wl,-rpath,'%s'",
		       g_dir, g_dir))
		return g_state;
	g_skip_reason = "objcopy failed";
	if (pp_test_sh("cd '%s' && objcopy --strip-all prog_pie prog_stripped", g_dir) ||
	    pp_test_sh("cd '%s' && objcopy --only-keep-debug prog_pie prog.debug && "
		       "objcopy --strip-all --add-gnu-debuglink=prog.debug prog_pie prog_dbglink",
		       g_dir))
		return g_state;
	g_skip_reason = NULL;
	g_state = 1;
	if (pp_test_sh("cd '%s' && cc -m32 -O1 -Wl,--build-id -o prog32 s32.c >/dev/null 2>&1",
		       g_dir) == 0 ||
	    pp_test_sh("cd '%s' && cc -m32 -O1 -nostdlib -static -Wl,-e,pp32_entry -Wl,--build-id "
		       "-o prog32 s32.c >/dev/null 2>&1",
		       g_dir) == 0)
		g_have32 = 1;
	else
		g_why_no32 = "cc -m32 cannot build a 32-bit executable here (no multilib)";
	return g_state;
}

#define NEED_FIXTURE()                                                                             \
	do {                                                                                       \
		if (fixture() != 1)                                                                \
			SKIP(g_skip_reason);                                                       \
	} while (0)

struct nm_sym {
	uint64_t addr;
	uint64_t size;
	int has_size;
	char type;
	char name[256];
};

/* Parse `nm -S --defined-only [-D] file`, sorted by address. */
static struct nm_sym *nm_read(const char *file, int dynamic, size_t *count)
{
	char *out =
	    capture("nm -S -n --defined-only %s '%s' 2>/dev/null", dynamic ? "-D" : "", file);
	struct nm_sym *v = NULL;
	size_t n = 0, cap = 0;
	char *line, *save = NULL;

	*count = 0;
	if (!out)
		return NULL;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long a, s;
		char t, name[256];
		struct nm_sym e = {0};

		if (sscanf(line, "%llx %llx %c %255s", &a, &s, &t, name) == 4) {
			e.size = s;
			e.has_size = 1;
		} else if (sscanf(line, "%llx %c %255s", &a, &t, name) != 3) {
			continue;
		}
		e.addr = a;
		e.type = t;
		snprintf(e.name, sizeof(e.name), "%s", name);
		if (n == cap) {
			struct nm_sym *nv = realloc(v, (cap ? cap * 2 : 64) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
			cap = cap ? cap * 2 : 64;
		}
		v[n++] = e;
	}
	free(out);
	*count = n;
	return v;
}

static const struct nm_sym *nm_find(const struct nm_sym *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

static int is_text(char t)
{
	return t == 'T' || t == 't' || t == 'W' || t == 'w' || t == 'i';
}

/* Whether nm lists a symbol named name at addr (so name is an acceptable alias). */
static int nm_has_alias(const struct nm_sym *v, size_t n, uint64_t addr, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].addr == addr && strcmp(v[i].name, name) == 0)
			return 1;
	return 0;
}

/* The build id as `readelf -n` prints it, "" when none. */
static void readelf_build_id(const char *file, char *out, size_t size)
{
	char *text = capture("readelf -n '%s' 2>/dev/null", file);
	const char *p = text ? strstr(text, "Build ID: ") : NULL;

	out[0] = '\0';
	if (p && size > 1) {
		size_t i = 0;

		p += strlen("Build ID: ");
		while (i + 1 < size &&
		       ((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) {
			out[i] = p[i];
			i++;
		}
		out[i] = '\0';
	}
	free(text);
}

struct re_seg {
	uint64_t offset, vaddr, filesz, memsz;
	int exec;
};

/* PT_LOAD rows of `readelf -lW`; *tls_vaddr gets PT_TLS's address (0 if none). */
static size_t readelf_loads(const char *file, struct re_seg *segs, size_t max, uint64_t *tls_vaddr)
{
	char *text = capture("readelf -lW '%s' 2>/dev/null", file);
	char *line, *save = NULL;
	size_t n = 0;

	*tls_vaddr = 0;
	if (!text)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long off, va, pa, fs, ms;
		char kind[16];
		int used = 0;

		if (sscanf(line, " %15s %llx %llx %llx %llx %llx%n", kind, &off, &va, &pa, &fs, &ms,
			   &used) != 6)
			continue;
		if (strcmp(kind, "TLS") == 0)
			*tls_vaddr = va;
		if (strcmp(kind, "LOAD") != 0 || n == max)
			continue;
		segs[n] = (struct re_seg){off, va, fs, ms, strchr(line + used, 'E') != NULL};
		n++;
	}
	free(text);
	return n;
}

static struct pp_elf_symbols *open_fixture(const char *name)
{
	char path[PATH_MAX];

	path_of(path, sizeof(path), name);
	return pp_elf_symbols_open_path(path);
}

TEST(build_ids_match_readelf)
{
	const char *files[] = {"prog_pie",	"prog_nopie",	"libpptest.so",
			       "prog_stripped", "prog_dbglink", "prog32"};

	NEED_FIXTURE();
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[PATH_MAX], want[PP_BUILD_ID_HEX_SIZE];
		struct pp_elf_symbols *s;
		int fd;

		if (strcmp(files[i], "prog32") == 0 && !g_have32)
			continue;
		path_of(path, sizeof(path), files[i]);
		readelf_build_id(path, want, sizeof(want));
		CHECK(strlen(want) == 40);
		s = pp_elf_symbols_open_path(path);
		REQUIRE(s != NULL);
		CHECK_STR(pp_elf_symbols_build_id(s), want);
		pp_elf_symbols_free(s);

		/* The notes-only reader agrees. */
		fd = open(path, O_RDONLY);
		REQUIRE(fd >= 0);
		{
			char id[PP_BUILD_ID_HEX_SIZE] = "x";

			CHECK(pp_elf_read_build_id_fd(fd, id, sizeof(id)) == 0);
			CHECK_STR(id, want);
			CHECK(pp_elf_read_build_id_fd(fd, id, 10) == -ENOSPC);
		}
		close(fd);
	}
}

/*
 * Every sized function nm lists resolves at its start, middle and last byte to itself (or an
 * alias nm lists at the same address), and the named ones resolve by name exactly.
 */
static void check_functions_against_nm(const char *file, const char *const *names,
				       size_t min_checked)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;
	struct nm_sym *nm;
	size_t n, checked = 0, gaps = 0;
	uint64_t start, max_end = 0;

	path_of(path, sizeof(path), file);
	s = pp_elf_symbols_open_path(path);
	REQUIRE(s != NULL);
	nm = nm_read(path, 0, &n);
	REQUIRE(nm != NULL && n > 0);
	for (size_t i = 0; i < n; i++) {
		const struct nm_sym *e = &nm[i];
		uint64_t probes[3];

		if (!is_text(e->type) || !e->has_size || e->size == 0)
			continue;
		probes[0] = e->addr;
		probes[1] = e->addr + e->size / 2;
		probes[2] = e->addr + e->size - 1;
		for (int p = 0; p < 3; p++) {
			const char *got;

			start = 0;
			got = pp_elf_symbols_lookup(s, probes[p], &start);
			CHECK(got != NULL);
			if (!got)
				continue;
			CHECK_EQ_U64(start, e->addr);
			if (strcmp(got, e->name) != 0 && !nm_has_alias(nm, n, e->addr, got)) {
				fprintf(stderr, "  %s: 0x%llx is %s, nm says %s\n", file,
					(unsigned long long)probes[p], got, e->name);
				CHECK(0);
			}
		}
		checked++;
		if (e->addr + e->size > max_end)
			max_end = e->addr + e->size;
		/* Padding after a function up to the next symbol (nm, any kind) is no one's. */
		if (i + 1 < n && nm[i + 1].addr > e->addr + e->size && is_text(nm[i + 1].type)) {
			CHECK(pp_elf_symbols_lookup(s, e->addr + e->size, NULL) == NULL);
			CHECK(pp_elf_symbols_lookup(s, nm[i + 1].addr - 1, NULL) == NULL);
			gaps++;
		}
	}
	CHECK(checked >= min_checked);
	/* pp_func_beta and pp_lib_other are 64-byte aligned: some function must be followed by
	 * padding. */
	CHECK(gaps >= 1);
	for (const char *const *nm_name = names; *nm_name; nm_name++) {
		const struct nm_sym *e = nm_find(nm, n, *nm_name);

		CHECK(e != NULL);
		if (!e)
			continue;
		CHECK_STR(pp_elf_symbols_lookup(s, e->addr + e->size / 2, &start), *nm_name);
		CHECK_EQ_U64(start, e->addr);
	}
	CHECK(pp_elf_symbols_lookup(s, max_end + 0x100000, NULL) == NULL);
	CHECK(pp_elf_symbols_lookup(s, UINT64_MAX, NULL) == NULL);
	CHECK(pp_elf_symbols_lookup(s, 0, NULL) == NULL);
	CHECK(pp_elf_symbols_has_symtab(s));
	CHECK_STR(pp_elf_symbols_debuglink(s), "");
	/* The table is sorted and its entries do not overlap their successors' starts. */
	for (size_t i = 0; i + 1 < pp_elf_symbols_count(s); i++)
		CHECK(pp_elf_symbols_get(s, i)->start < pp_elf_symbols_get(s, i + 1)->start);
	free(nm);
	pp_elf_symbols_free(s);
}

TEST(pie_functions_match_nm)
{
	static const char *const names[] = {"pp_func_alpha",	"pp_func_beta", "pp_func_tiny",
					    "pp_static_helper", "main",		NULL};

	NEED_FIXTURE();
	check_functions_against_nm("prog_pie", names, 4);
}

TEST(nopie_functions_match_nm)
{
	static const char *const names[] = {"pp_func_alpha", "pp_func_beta", "pp_static_helper",
					    NULL};
	struct pp_elf_symbols *s;

	NEED_FIXTURE();
	check_functions_against_nm("prog_nopie", names, 4);
	s = open_fixture("prog_nopie");
	REQUIRE(s != NULL);
	CHECK_EQ_U64(pp_elf_symbols_type(s), 2 /* ET_EXEC */);
	CHECK_EQ_U64(pp_elf_symbols_class(s), 2 /* ELFCLASS64 */);
	pp_elf_symbols_free(s);
	s = open_fixture("prog_pie");
	REQUIRE(s != NULL);
	CHECK_EQ_U64(pp_elf_symbols_type(s), 3 /* ET_DYN */);
	pp_elf_symbols_free(s);
}

TEST(shared_library_functions_match_nm)
{
	static const char *const names[] = {"pp_lib_work", "pp_lib_other", NULL};

	NEED_FIXTURE();
	check_functions_against_nm("libpptest.so", names, 2);
}

TEST(stripped_binary_uses_dynsym)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;
	struct nm_sym *full, *dyn;
	size_t nfull, ndyn, checked = 0;
	const struct nm_sym *e;
	uint64_t start = 0;

	NEED_FIXTURE();
	path_of(path, sizeof(path), "prog_pie");
	full = nm_read(path, 0, &nfull);
	path_of(path, sizeof(path), "prog_stripped");
	dyn = nm_read(path, 1, &ndyn);
	s = pp_elf_symbols_open_path(path);
	REQUIRE(s != NULL && full != NULL && dyn != NULL);
	CHECK(!pp_elf_symbols_has_symtab(s));
	CHECK(pp_elf_symbols_count(s) > 0);
	/* No .symtab and no debuglink was added to this copy. */
	CHECK_STR(pp_elf_symbols_debuglink(s), "");

	e = nm_find(full, nfull, "pp_func_alpha");
	REQUIRE(e != NULL);
	CHECK_STR(pp_elf_symbols_lookup(s, e->addr + e->size / 2, &start), "pp_func_alpha");
	CHECK_EQ_U64(start, e->addr);
	/* A static function has no .dynsym entry: its code is no one's in the stripped copy. */
	e = nm_find(full, nfull, "pp_static_helper");
	REQUIRE(e != NULL);
	CHECK(pp_elf_symbols_lookup(s, e->addr + e->size / 2, NULL) == NULL);
	/* Every sized dynamic function nm -D lists resolves to itself. */
	for (size_t i = 0; i < ndyn; i++) {
		const char *got;

		if (!is_text(dyn[i].type) || !dyn[i].has_size || dyn[i].size == 0)
			continue;
		got = pp_elf_symbols_lookup(s, dyn[i].addr + dyn[i].size / 2, &start);
		CHECK(got &&
		      (strcmp(got, dyn[i].name) == 0 || nm_has_alias(dyn, ndyn, dyn[i].addr, got)));
		CHECK_EQ_U64(start, dyn[i].addr);
		checked++;
	}
	CHECK(checked >= 3);
	free(full);
	free(dyn);
	pp_elf_symbols_free(s);
}

TEST(debuglink_noted_when_stripped)
{
	struct pp_elf_symbols *s;

	NEED_FIXTURE();
	s = open_fixture("prog_dbglink");
	REQUIRE(s != NULL);
	CHECK(!pp_elf_symbols_has_symtab(s));
	CHECK_STR(pp_elf_symbols_debuglink(s), "prog.debug");
	pp_elf_symbols_free(s);
}

TEST(data_and_tls_symbols)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;
	struct nm_sym *nm;
	const struct nm_sym *e;
	struct re_seg segs[16];
	uint64_t start = 0, tls = 0;
	size_t n;

	NEED_FIXTURE();
	path_of(path, sizeof(path), "prog_pie");
	nm = nm_read(path, 0, &n);
	s = pp_elf_symbols_open_path(path);
	REQUIRE(s != NULL && nm != NULL);
	CHECK(pp_elf_symbols_data_count(s) >= 2);

	e = nm_find(nm, n, "pp_global_counter");
	REQUIRE(e != NULL);
	CHECK_STR(pp_elf_symbols_lookup_data(s, e->addr, &start), "pp_global_counter");
	CHECK_STR(pp_elf_symbols_lookup_data(s, e->addr + 3, &start), "pp_global_counter");
	CHECK_EQ_U64(start, e->addr);
	/* Data is not code, and code is not data. */
	CHECK(pp_elf_symbols_lookup(s, e->addr, NULL) == NULL);
	e = nm_find(nm, n, "pp_static_buffer");
	REQUIRE(e != NULL);
	CHECK_STR(pp_elf_symbols_lookup_data(s, e->addr + 2000, &start), "pp_static_buffer");
	CHECK_EQ_U64(start, e->addr);
	CHECK(pp_elf_symbols_lookup_data(s, e->addr + e->size, NULL) == NULL ||
	      strcmp(pp_elf_symbols_lookup_data(s, e->addr + e->size, NULL), "pp_static_buffer"));
	e = nm_find(nm, n, "pp_func_alpha");
	REQUIRE(e != NULL);
	CHECK(pp_elf_symbols_lookup_data(s, e->addr, NULL) == NULL);

	/* TLS: nm prints the offset in the TLS block; readelf the block's image address. */
	readelf_loads(path, segs, 16, &tls);
	e = nm_find(nm, n, "pp_tls_var");
	REQUIRE(e != NULL);
	REQUIRE(tls != 0);
	CHECK_STR(pp_elf_symbols_lookup_data(s, tls + e->addr + 1, &start), "pp_tls_var");
	CHECK_EQ_U64(start, tls + e->addr);
	free(nm);
	pp_elf_symbols_free(s);
}

static void check_segments(const char *file, const char *func)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;
	struct re_seg segs[16];
	struct nm_sym *nm;
	const struct nm_sym *e;
	uint64_t tls, va = 0, file_off;
	size_t n, nnm;
	int exec_found = 0;

	path_of(path, sizeof(path), file);
	s = pp_elf_symbols_open_path(path);
	REQUIRE(s != NULL);
	n = readelf_loads(path, segs, 16, &tls);
	REQUIRE(n > 0);
	CHECK_EQ_U64(pp_elf_symbols_segment_count(s), n);
	for (size_t i = 0; i < n && i < pp_elf_symbols_segment_count(s); i++) {
		const struct pp_elf_segment *g = pp_elf_symbols_segment(s, i);

		CHECK_EQ_U64(g->offset, segs[i].offset);
		CHECK_EQ_U64(g->vaddr, segs[i].vaddr);
		CHECK_EQ_U64(g->filesz, segs[i].filesz);
		CHECK_EQ_U64(g->memsz, segs[i].memsz);
		CHECK_EQ_U64(!!(g->flags & PP_ELF_SEG_X), segs[i].exec);
		if (segs[i].filesz > 0x10) {
			CHECK(pp_elf_file_offset_to_vaddr(s, segs[i].offset + 0x10, &va) == 0);
			CHECK_EQ_U64(va, segs[i].vaddr + 0x10);
		}
		if (!segs[i].exec)
			continue;
		exec_found = 1;
		/* The function's bytes in the file, translated back, are the function. */
		nm = nm_read(path, 0, &nnm);
		e = nm ? nm_find(nm, nnm, func) : NULL;
		CHECK(e != NULL);
		if (e) {
			file_off = e->addr - segs[i].vaddr + segs[i].offset;
			CHECK(pp_elf_file_offset_to_vaddr(s, file_off, &va) == 0);
			CHECK_EQ_U64(va, e->addr);
			CHECK_STR(pp_elf_symbols_lookup(s, va, NULL), func);
		}
		free(nm);
	}
	CHECK(exec_found);
	CHECK(pp_elf_file_offset_to_vaddr(s, 1ull << 40, &va) == -ENOENT);
	pp_elf_symbols_free(s);
}

TEST(segments_match_readelf)
{
	NEED_FIXTURE();
	check_segments("prog_nopie", "pp_func_alpha");
	check_segments("prog_pie", "pp_func_beta");
	check_segments("libpptest.so", "pp_lib_work");
}

/* The mapping of maps_text that contains addr: its start, file offset and path. */
static int find_mapping(const char *maps_text, uint64_t addr, uint64_t *start, uint64_t *offset,
			char *path, size_t path_size)
{
	const char *line = maps_text;

	while (line && *line) {
		unsigned long long s, e, off;
		char file[PATH_MAX] = "";

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %4095s", &s, &e, &off, file) >= 3 &&
		    addr >= s && addr < e) {
			*start = s;
			*offset = off;
			snprintf(path, path_size, "%s", file);
			return 0;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

/* Resolve a runtime address of a running process the way the symbolizer will. */
static void check_runtime_addr(const char *maps, uint64_t addr, const char *expect_file,
			       const char *expect_func)
{
	char mpath[PATH_MAX], want[PATH_MAX];
	uint64_t map_start = 0, map_off = 0, va = 0, start = 0;
	struct pp_elf_symbols *s;

	REQUIRE(find_mapping(maps, addr, &map_start, &map_off, mpath, sizeof(mpath)) == 0);
	REQUIRE(realpath(expect_file, want) != NULL);
	CHECK_STR(mpath, want);
	s = pp_elf_symbols_open_path(mpath);
	REQUIRE(s != NULL);
	CHECK(pp_elf_symbols_map_addr(s, addr, map_start, map_off, &va) == 0);
	/* Position-independent code is loaded away from its link-time address. */
	CHECK(va != addr);
	CHECK_STR(pp_elf_symbols_lookup(s, va, &start), expect_func);
	CHECK_EQ_U64(start, va);
	CHECK_STR(pp_elf_symbols_lookup(s, va + 1, &start), expect_func);
	pp_elf_symbols_free(s);
}

TEST(running_child_maps)
{
	char exe[PATH_MAX], lib[PATH_MAX], maps_path[64], line[128];
	int in[2], out[2];
	unsigned long long beta = 0, work = 0;
	char *maps;
	pid_t pid;
	FILE *f;
	int st;

	NEED_FIXTURE();
	path_of(exe, sizeof(exe), "prog_lib");
	path_of(lib, sizeof(lib), "libpptest.so");
	REQUIRE(pipe(in) == 0 && pipe(out) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(exe, exe, "wait", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	f = fdopen(out[0], "r");
	REQUIRE(f != NULL);
	if (fgets(line, sizeof(line), f))
		sscanf(line, "%llx", &beta);
	if (fgets(line, sizeof(line), f))
		sscanf(line, "%llx", &work);
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", (int)pid);
	maps = capture("cat %s", maps_path);
	/* Let the child finish: close its stdin. */
	close(in[1]);
	fclose(f);
	waitpid(pid, &st, 0);
	REQUIRE(maps != NULL);
	REQUIRE(beta != 0 && work != 0);
	check_runtime_addr(maps, beta, exe, "pp_func_beta");
	check_runtime_addr(maps, work, lib, "pp_lib_work");
	free(maps);
}

TEST(elf32_executable)
{
	char path[PATH_MAX], want[PP_BUILD_ID_HEX_SIZE];
	struct pp_elf_symbols *s;
	struct nm_sym *nm;
	const struct nm_sym *e;
	uint64_t start = 0;
	size_t n;

	NEED_FIXTURE();
	if (!g_have32)
		SKIP(g_why_no32);
	path_of(path, sizeof(path), "prog32");
	s = pp_elf_symbols_open_path(path);
	nm = nm_read(path, 0, &n);
	REQUIRE(s != NULL && nm != NULL);
	CHECK_EQ_U64(pp_elf_symbols_class(s), 1 /* ELFCLASS32 */);
	readelf_build_id(path, want, sizeof(want));
	CHECK_STR(pp_elf_symbols_build_id(s), want);
	e = nm_find(nm, n, "pp32_func");
	REQUIRE(e != NULL);
	CHECK_STR(pp_elf_symbols_lookup(s, e->addr + e->size / 2, &start), "pp32_func");
	CHECK_EQ_U64(start, e->addr);
	CHECK(pp_elf_symbols_lookup(s, e->addr + e->size + 0x100000, NULL) == NULL);
	e = nm_find(nm, n, "pp32_counter");
	REQUIRE(e != NULL);
	CHECK_STR(pp_elf_symbols_lookup_data(s, e->addr + 1, NULL), "pp32_counter");
	free(nm);
	pp_elf_symbols_free(s);
	check_segments("prog32", "pp32_func");
}

static unsigned char *slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf && read(fd, buf, (size_t)st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

TEST(path_fd_and_memory_agree)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *a, *b, *c;
	unsigned char *buf;
	size_t len = 0;
	int fd;

	NEED_FIXTURE();
	path_of(path, sizeof(path), "prog_pie");
	buf = slurp(path, &len);
	REQUIRE(buf != NULL);
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	a = pp_elf_symbols_open_path(path);
	b = pp_elf_symbols_open_fd(fd);
	c = pp_elf_symbols_open_mem(buf, len);
	close(fd);
	free(buf); /* the memory table keeps no pointer into the caller's buffer */
	REQUIRE(a && b && c);
	CHECK_STR(pp_elf_symbols_build_id(a), pp_elf_symbols_build_id(b));
	CHECK_STR(pp_elf_symbols_build_id(a), pp_elf_symbols_build_id(c));
	CHECK_EQ_U64(pp_elf_symbols_count(a), pp_elf_symbols_count(c));
	CHECK_EQ_U64(pp_elf_symbols_count(b), pp_elf_symbols_count(c));
	CHECK_EQ_U64(pp_elf_symbols_data_count(a), pp_elf_symbols_data_count(c));
	for (size_t i = 0; i < pp_elf_symbols_count(a) && i < pp_elf_symbols_count(c); i++) {
		const struct pp_elf_symbol *x = pp_elf_symbols_get(a, i);
		const struct pp_elf_symbol *y = pp_elf_symbols_get(c, i);

		CHECK_EQ_U64(x->start, y->start);
		CHECK_EQ_U64(x->end, y->end);
		CHECK_STR(x->name, y->name);
	}
	CHECK(pp_elf_symbols_get(a, pp_elf_symbols_count(a)) == NULL);
	pp_elf_symbols_free(a);
	pp_elf_symbols_free(b);
	pp_elf_symbols_free(c);
}

static int clean_error(int e)
{
	return e == ENOEXEC || e == EINVAL || e == EFBIG || e == ENXIO;
}

/* A 64-bit ELF header field, little-endian, for corrupting a copy. */
static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

TEST(bad_input_fails_cleanly)
{
	static const size_t cuts[] = {1, 4, 16, 52, 63, 64, 100, 1000, 4096};
	char path[PATH_MAX];
	unsigned char garbage[4096], *elf, *copy;
	struct pp_elf_symbols *s;
	size_t len = 0;
	unsigned seed = 12345;
	int fd;

	/* Empty and NULL. */
	errno = 0;
	CHECK(pp_elf_symbols_open_mem("", 0) == NULL);
	CHECK(clean_error(errno));
	CHECK(pp_elf_symbols_open_mem(NULL, 0) == NULL);
	CHECK(clean_error(errno));
	CHECK(pp_elf_symbols_open_mem(NULL, 10) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	CHECK(pp_elf_symbols_open_path(NULL) == NULL);
	CHECK(pp_elf_symbols_open_fd(-1) == NULL);
	/* Garbage, with and without the magic. */
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)(rand_r(&seed) >> 3);
	CHECK(pp_elf_symbols_open_mem(garbage, sizeof(garbage)) == NULL);
	CHECK_EQ_U64(errno, ENOEXEC);
	memcpy(garbage, "\177ELF", 4);
	CHECK(pp_elf_symbols_open_mem(garbage, sizeof(garbage)) == NULL);
	CHECK(clean_error(errno));
	pp_elf_symbols_free(NULL);

	NEED_FIXTURE();
	/* Not ELF files: a C source, a directory, a missing path. */
	path_of(path, sizeof(path), "prog.c");
	CHECK(pp_elf_symbols_open_path(path) == NULL);
	CHECK_EQ_U64(errno, ENOEXEC);
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	{
		char id[PP_BUILD_ID_HEX_SIZE];

		CHECK(pp_elf_read_build_id_fd(fd, id, sizeof(id)) == -ENOEXEC);
	}
	close(fd);
	CHECK(pp_elf_symbols_open_path(g_dir) == NULL);
	CHECK_EQ_U64(errno, ENOEXEC);
	path_of(path, sizeof(path), "no-such-file");
	CHECK(pp_elf_symbols_open_path(path) == NULL);
	CHECK_EQ_U64(errno, ENOENT);

	/* Truncations of a real executable: its section headers sit at the end of the file. */
	path_of(path, sizeof(path), "prog_pie");
	elf = slurp(path, &len);
	REQUIRE(elf != NULL && len > 8192);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		errno = 0;
		s = pp_elf_symbols_open_mem(elf, cuts[i]);
		CHECK(s == NULL);
		CHECK(clean_error(errno));
		pp_elf_symbols_free(s);
	}
	s = pp_elf_symbols_open_mem(elf, len / 2);
	CHECK(s == NULL);
	CHECK(clean_error(errno));
	s = pp_elf_symbols_open_mem(elf, len - 1);
	CHECK(s == NULL);
	CHECK_EQ_U64(errno, EINVAL);

	copy = malloc(len);
	REQUIRE(copy != NULL);
	/* Section headers said to be far beyond the end. */
	memcpy(copy, elf, len);
	put_u64(copy + 0x28, (uint64_t)len * 16);
	CHECK(pp_elf_symbols_open_mem(copy, len) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	/* Program headers likewise. */
	memcpy(copy, elf, len);
	put_u64(copy + 0x20, UINT64_MAX - 8);
	CHECK(pp_elf_symbols_open_mem(copy, len) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	/* Wrong class byte. */
	memcpy(copy, elf, len);
	copy[4] = 7;
	CHECK(pp_elf_symbols_open_mem(copy, len) == NULL);
	CHECK_EQ_U64(errno, ENOEXEC);

	/*
	 * Random corruption of headers and tables: any outcome but a crash (which ASan builds
	 * would report) or a dishonest error is acceptable, and lookups in what was built work.
	 */
	for (int iter = 0; iter < 400; iter++) {
		int flips = 1 + rand_r(&seed) % 16;

		memcpy(copy, elf, len);
		for (int k = 0; k < flips; k++) {
			size_t at =
			    iter % 2 ? (size_t)rand_r(&seed) % 128 : (size_t)rand_r(&seed) % len;

			copy[at] = (unsigned char)rand_r(&seed);
		}
		errno = 0;
		s = pp_elf_symbols_open_mem(copy, len);
		if (!s) {
			CHECK(clean_error(errno) || errno == ENOMEM);
			continue;
		}
		for (size_t i = 0; i < pp_elf_symbols_count(s); i += 7)
			(void)pp_elf_symbols_lookup(s, pp_elf_symbols_get(s, i)->start, NULL);
		(void)pp_elf_symbols_lookup_data(s, 0x4000, NULL);
		pp_elf_symbols_free(s);
	}
	free(copy);
	free(elf);
}

/* glibc's .symtab names versioned symbols "name@@VERSION": the version is not part of it. */
TEST(symbol_versions_are_cut)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;

	NEED_FIXTURE();
	REQUIRE(pp_test_sh("cd '%s' && printf '%%s\\n' .text '.globl \"pp_versioned@@PP_1\"' "
			   "'.type \"pp_versioned@@PP_1\",@function' '\"pp_versioned@@PP_1\":' "
			   "nop ret '.size \"pp_versioned@@PP_1\",2' > v.s && as -o v.o v.s",
			   g_dir) == 0);
	snprintf(path, sizeof(path), "%s/v.o", g_dir);
	s = pp_elf_symbols_open_path(path);
	REQUIRE(s != NULL);
	CHECK_STR(pp_elf_symbols_lookup(s, 1, NULL), "pp_versioned");
	pp_elf_symbols_free(s);
}

TEST_LIST = {
    {"build_ids_match_readelf", build_ids_match_readelf},
    {"pie_functions_match_nm", pie_functions_match_nm},
    {"nopie_functions_match_nm", nopie_functions_match_nm},
    {"shared_library_functions_match_nm", shared_library_functions_match_nm},
    {"stripped_binary_uses_dynsym", stripped_binary_uses_dynsym},
    {"debuglink_noted_when_stripped", debuglink_noted_when_stripped},
    {"data_and_tls_symbols", data_and_tls_symbols},
    {"segments_match_readelf", segments_match_readelf},
    {"running_child_maps", running_child_maps},
    {"elf32_executable", elf32_executable},
    {"path_fd_and_memory_agree", path_fd_and_memory_agree},
    {"bad_input_fails_cleanly", bad_input_fails_cleanly},
    {"symbol_versions_are_cut", symbol_versions_are_cut},
};
TEST_MAIN()
