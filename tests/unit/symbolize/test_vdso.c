/*
 * Tests of the vdso's names: the agent's own vdso read from its maps and its image, the
 * mappings it stands for (a 64-bit process's, of its length) and those it does not (one below
 * 4 GiB, another length), and maps files without it or whose vdso is not the image the kernel
 * gave.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/vdso.h"

static char g_dir[256];

/* A maps file of one line, in the scratch directory: its path. */
static const char *maps_of(const char *name, const char *line)
{
	static char path[512];
	FILE *f;

	if (!g_dir[0] && pp_test_scratch_dir(g_dir, sizeof(g_dir), "pp-vdso"))
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	fputs(line, f);
	fclose(f);
	return path;
}

/* The vdso function's address among v's symbols, or 0. */
static uint64_t symbol_address(const struct pp_vdso *v, const char *name)
{
	for (size_t i = 0; i < pp_elf_symbols_count(v->syms); i++) {
		const struct pp_elf_symbol *sym = pp_elf_symbols_get(v->syms, i);

		if (sym->name && !strcmp(sym->name, name))
			return sym->start;
	}
	return 0;
}

TEST(the_agents_own_vdso_names_its_functions)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR), at;
	struct pp_vdso v;
	const char *name;

	if (!base)
		SKIP("no vdso in this process (AT_SYSINFO_EHDR is 0)");
	REQUIRE(pp_vdso_open_own(&v, "/proc/self/maps") == 0);
	REQUIRE(v.syms != NULL);
	CHECK(v.len >= 4096 && v.len % 4096 == 0);
	CHECK(pp_vdso_serves(&v, base, base + v.len));
	CHECK(strlen(pp_elf_symbols_build_id(v.syms)) >= 16);
	/* every x86-64 vdso since 2.6 has it; the alias without __vdso_ may name it instead */
	at = symbol_address(&v, "__vdso_clock_gettime");
	if (!at)
		at = symbol_address(&v, "clock_gettime");
	REQUIRE(at != 0);
	name = pp_elf_symbols_lookup(v.syms, at + 1, NULL);
	REQUIRE(name != NULL);
	CHECK(strstr(name, "clock_gettime") != NULL);
	/* a 32-bit process's vdso lies below 4 GiB: another image */
	CHECK(!pp_vdso_serves(&v, 0xf7fc1000, 0xf7fc1000 + v.len));
	/* another length: another image */
	CHECK(!pp_vdso_serves(&v, base, base + v.len + 4096));
	CHECK(!pp_vdso_serves(&v, base, base));
	pp_vdso_fini(&v);
	CHECK(v.syms == NULL);
	CHECK(!pp_vdso_serves(&v, base, base + 8192));
	pp_vdso_fini(&v);
}

TEST(a_maps_file_without_the_kernels_vdso_leaves_it_unnamed)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	const char *path;
	struct pp_vdso v;
	char line[256];

	if (!base)
		SKIP("no vdso in this process (AT_SYSINFO_EHDR is 0)");
	path = maps_of("none", "55d0c0000000-55d0c0001000 r-xp 00000000 08:01 12 /usr/bin/x\n");
	REQUIRE(path != NULL);
	CHECK(pp_vdso_open_own(&v, path) == -ENOENT);
	CHECK(v.syms == NULL);
	CHECK(!pp_vdso_serves(&v, base, base + 8192));
	/* a [vdso] line elsewhere than where the kernel put this process's vdso */
	snprintf(line, sizeof(line),
		 "%" PRIx64 "-%" PRIx64 " r-xp 00000000 00:00 0                  [vdso]\n",
		 base + 0x100000, base + 0x102000);
	path = maps_of("moved", line);
	REQUIRE(path != NULL);
	CHECK(pp_vdso_open_own(&v, path) == -ENOENT);
	CHECK(v.syms == NULL);
	CHECK(pp_vdso_open_own(&v, "/nonexistent/maps") == -ENOENT);
}

TEST_LIST = {
    {"the_agents_own_vdso_names_its_functions", the_agents_own_vdso_names_its_functions},
    {"a_maps_file_without_the_kernels_vdso_leaves_it_unnamed",
     a_maps_file_without_the_kernels_vdso_leaves_it_unnamed},
};
TEST_MAIN()
