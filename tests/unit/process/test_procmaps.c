/*
 * Tests of the /proc/PID/maps parser: real-world maps text (PIE binary, shared libraries,
 * pseudo mappings, deleted files, names with spaces), malformed lines, buffers without a
 * trailing newline or NUL, and the live /proc/self/maps of this test binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "process/procmaps.h"

/* From a real x86-64 process (addresses as printed by the kernel, padding included). */
static const char real_maps[] =
    "55eda498c000-55eda498e000 r--p 00000000 fe:00 247134                     /usr/bin/cat\n"
    "55eda498e000-55eda4993000 r-xp 00002000 fe:00 247134                     /usr/bin/cat\n"
    "55eda4993000-55eda4996000 r--p 00007000 fe:00 247134                     /usr/bin/cat\n"
    "55eda4997000-55eda4998000 rw-p 0000a000 fe:00 247134                     /usr/bin/cat\n"
    "55ede25db000-55ede25fc000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f0119d5e000-7f0119d80000 rw-p 00000000 00:00 0 \n"
    "7f0119de1000-7f0119e07000 r--p 00000000 fe:00 332835                     "
    "/usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f0119e07000-7f0119f5d000 r-xp 00026000 fe:00 332835                     "
    "/usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f0119fc6000-7f0119fcd000 r--s 00000000 fe:00 332280                     "
    "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache\n"
    "7f0119fd0000-7f0119fd4000 r--p 00000000 00:00 0                          [vvar]\n"
    "7f0119fd4000-7f0119fd6000 r--p 00000000 00:00 0                          [vvar_vclock]\n"
    "7f0119fd6000-7f0119fd8000 r-xp 00000000 00:00 0                          [vdso]\n"
    "7fff56f14000-7fff56f35000 rw-p 00000000 00:00 0                          [stack]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

TEST(parses_real_maps)
{
	struct pp_maps m;
	const struct pp_map_entry *e;

	REQUIRE(pp_maps_parse(real_maps, strlen(real_maps), &m) == 0);
	CHECK_EQ_U64(m.n, 14);
	CHECK_EQ_U64(m.bad_lines, 0);
	CHECK_EQ_U64(m.resorted, 0);

	e = &m.entries[1];
	CHECK_EQ_U64(e->start, 0x55eda498e000ull);
	CHECK_EQ_U64(e->end, 0x55eda4993000ull);
	CHECK_EQ_U64(e->offset, 0x2000);
	CHECK_EQ_U64(e->perms, PP_MAP_READ | PP_MAP_EXEC);
	CHECK_EQ_U64(e->dev_major, 0xfe);
	CHECK_EQ_U64(e->dev_minor, 0);
	CHECK_EQ_U64(e->inode, 247134);
	CHECK_EQ_U64(e->deleted, 0);
	CHECK_EQ_U64(e->kind, PP_MAP_KIND_FILE);
	CHECK_STR(e->path, "/usr/bin/cat");

	CHECK_STR(m.entries[4].path, "[heap]");
	CHECK_EQ_U64(m.entries[4].kind, PP_MAP_KIND_HEAP);
	CHECK_EQ_U64(m.entries[4].perms, PP_MAP_READ | PP_MAP_WRITE);
	/* Anonymous: the kernel leaves a trailing blank and no name. */
	CHECK_STR(m.entries[5].path, "");
	CHECK_EQ_U64(m.entries[5].kind, PP_MAP_KIND_ANON);
	CHECK_EQ_U64(m.entries[8].perms, PP_MAP_READ | PP_MAP_SHARED);
	CHECK_EQ_U64(m.entries[9].kind, PP_MAP_KIND_VVAR);
	CHECK_EQ_U64(m.entries[10].kind, PP_MAP_KIND_VVAR);
	CHECK_EQ_U64(m.entries[11].kind, PP_MAP_KIND_VDSO);
	CHECK_EQ_U64(m.entries[12].kind, PP_MAP_KIND_STACK);

	e = &m.entries[13];
	CHECK_EQ_U64(e->start, 0xffffffffff600000ull);
	CHECK_EQ_U64(e->end, 0xffffffffff601000ull);
	CHECK_EQ_U64(e->perms, PP_MAP_EXEC);
	CHECK_EQ_U64(e->kind, PP_MAP_KIND_VSYSCALL);
	CHECK_STR(e->path, "[vsyscall]");

	/* Lookups: first byte, last byte, one past the end, gaps, below and above everything. */
	e = pp_maps_find(&m, 0x55eda498e000ull);
	CHECK(e == &m.entries[1]);
	e = pp_maps_find(&m, 0x55eda4992fffull);
	CHECK(e == &m.entries[1]);
	CHECK(pp_maps_find(&m, 0x55eda4993000ull) == &m.entries[2]);
	CHECK(pp_maps_find(&m, 0x55eda4996800ull) == NULL); /* gap before the rw- segment */
	CHECK(pp_maps_find(&m, 0x1000) == NULL);
	CHECK(pp_maps_find(&m, 0xffffffffff600abcull) == &m.entries[13]);
	CHECK(pp_maps_find(&m, 0xffffffffff601000ull) == NULL);
	CHECK(pp_maps_find(&m, UINT64_MAX) == NULL);
	CHECK_EQ_U64(pp_map_file_offset(&m.entries[7], 0x7f0119e07010ull), 0x26010);
	pp_maps_fini(&m);
	CHECK(m.entries == NULL && m.n == 0);
}

TEST(names_deleted_spaces_anon)
{
	static const char text[] =
	    "00400000-00401000 r-xp 00000000 08:01 1234                               "
	    "/opt/my app/bin/server (deleted)\n"
	    "00600000-00601000 r--p 00000000 08:01 99                                 "
	    "/home/u/dir with  two  spaces/lib x.so\n"
	    "7f0000000000-7f0000100000 rw-p 00000000 00:00 0                          "
	    "[anon:libc_malloc]\n"
	    "7f0000200000-7f0000300000 rw-s 00000000 00:01 4321                       "
	    "[anon_shmem:shared ring]\n"
	    "7f0000400000-7f0000401000 r-xp 00000000 00:01 77                         "
	    "/memfd:jit-code (deleted)\n"
	    "7f0000500000-7f0000501000 rw-s 00000000 00:0e 12                         "
	    "anon_inode:[perf_event]\n"
	    "7f0000600000-7f0000601000 r--p 00000000 103:02 88                        "
	    "/data/new\\012line\n"
	    "7f0000700000-7f0000701000 r--p 00000000 08:01 89                         "
	    "/tmp/(deleted)\n"
	    "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          "
	    "[stack:4242]\n";
	struct pp_maps m;

	REQUIRE(pp_maps_parse(text, strlen(text), &m) == 0);
	REQUIRE(m.n == 9);
	CHECK_EQ_U64(m.bad_lines, 0);
	CHECK_STR(m.entries[0].path, "/opt/my app/bin/server");
	CHECK_EQ_U64(m.entries[0].deleted, 1);
	CHECK_EQ_U64(m.entries[0].kind, PP_MAP_KIND_FILE);
	CHECK_STR(m.entries[1].path, "/home/u/dir with  two  spaces/lib x.so");
	CHECK_EQ_U64(m.entries[1].deleted, 0);
	CHECK_STR(m.entries[2].path, "[anon:libc_malloc]");
	CHECK_EQ_U64(m.entries[2].kind, PP_MAP_KIND_ANON);
	CHECK_STR(m.entries[3].path, "[anon_shmem:shared ring]");
	CHECK_EQ_U64(m.entries[3].kind, PP_MAP_KIND_ANON);
	CHECK_EQ_U64(m.entries[3].perms, PP_MAP_READ | PP_MAP_WRITE | PP_MAP_SHARED);
	CHECK_STR(m.entries[4].path, "/memfd:jit-code");
	CHECK_EQ_U64(m.entries[4].deleted, 1);
	CHECK_EQ_U64(m.entries[4].kind, PP_MAP_KIND_FILE);
	CHECK_STR(m.entries[5].path, "anon_inode:[perf_event]");
	CHECK_EQ_U64(m.entries[5].kind, PP_MAP_KIND_OTHER);
	/* Majors above 0xff print with more digits; the kernel escapes '\n' in names. */
	CHECK_EQ_U64(m.entries[6].dev_major, 0x103);
	CHECK_EQ_U64(m.entries[6].dev_minor, 2);
	CHECK_STR(m.entries[6].path, "/data/new\nline");
	/* " (deleted)" must be a suffix after a blank, not any "(deleted)". */
	CHECK_STR(m.entries[7].path, "/tmp/(deleted)");
	CHECK_EQ_U64(m.entries[7].deleted, 0);
	CHECK_EQ_U64(m.entries[8].kind, PP_MAP_KIND_STACK);
	pp_maps_fini(&m);
}

TEST(malformed_lines_are_skipped_and_counted)
{
	static const char text[] =
	    "00400000-00401000 r-xp 00000000 08:01 1234 /bin/good1\n"
	    "garbage\n"
	    "\n"
	    "00500000 00501000 r-xp 00000000 08:01 1 /bin/no-dash\n"
	    "00600000-00601000 rwxq 00000000 08:01 1 /bin/bad-perm\n"
	    "00700000-00701000 r-x 00000000 08:01 1 /bin/short-perm\n"
	    "00800000-00801000 r-xp 0000zz00 08:01 1 /bin/bad-offset\n"
	    "00900000-00901000 r-xp 00000000 0801 1 /bin/bad-dev\n"
	    "00a00000-00a01000 r-xp 00000000 08:01 x1 /bin/bad-inode\n"
	    "00b00000-00b01000 r-xp 00000000 08:01 12abc /bin/inode-junk\n"
	    "00c00000-00b01000 r-xp 00000000 08:01 1 /bin/end-before-start\n"
	    "00d00000-00d00000 r-xp 00000000 08:01 1 /bin/empty-range\n"
	    "10000000000000000-10000000000001000 r-xp 00000000 08:01 1 /bin/17-digits\n"
	    "00e00000-00e01000 r-xp 00000000 08:01 99999999999999999999999 /bin/inode-ovf\n"
	    "00f00000-00f01000 r-xp 00000000 08:01 1\n"
	    "01000000-01001000 r-xp 00000000 08:01 1234 /bin/good3\n";
	struct pp_maps m;

	REQUIRE(pp_maps_parse(text, strlen(text), &m) == 0);
	CHECK_EQ_U64(m.n, 3);
	CHECK_EQ_U64(m.bad_lines, 13);
	REQUIRE(m.n == 3);
	CHECK_STR(m.entries[0].path, "/bin/good1");
	CHECK_STR(m.entries[1].path, "");
	CHECK_EQ_U64(m.entries[1].start, 0xf00000);
	CHECK_STR(m.entries[2].path, "/bin/good3");
	CHECK(pp_maps_find(&m, 0x1000800) == &m.entries[2]);
	CHECK(pp_maps_find(&m, 0x500800) == NULL);
	pp_maps_fini(&m);
}

TEST(no_trailing_newline_no_nul)
{
	static const char line[] = "7f00-8f00 r-xp 00000010 08:01 42    /lib/a.so";
	/* The copy has no NUL and is followed by bytes that would extend the name if read. */
	char *buf = malloc(sizeof(line) + 8);
	struct pp_maps m;
	size_t len = sizeof(line) - 1;

	REQUIRE(buf != NULL);
	memcpy(buf, line, len);
	memcpy(buf + len, "XXXXXXXX", 8);
	REQUIRE(pp_maps_parse(buf, len, &m) == 0);
	REQUIRE(m.n == 1);
	CHECK_STR(m.entries[0].path, "/lib/a.so");
	CHECK_EQ_U64(m.entries[0].offset, 0x10);
	pp_maps_fini(&m);

	/* Cut in the middle of the inode: the inode is what was there, no name. */
	REQUIRE(pp_maps_parse(buf, 31, &m) == 0);
	REQUIRE(m.n == 1);
	CHECK_EQ_U64(m.entries[0].inode, 4);
	CHECK_STR(m.entries[0].path, "");
	pp_maps_fini(&m);

	/* Cut inside the device: malformed. */
	REQUIRE(pp_maps_parse(buf, 27, &m) == 0);
	CHECK_EQ_U64(m.n, 0);
	CHECK_EQ_U64(m.bad_lines, 1);
	pp_maps_fini(&m);
	free(buf);
}

TEST(empty_input_and_bad_args)
{
	struct pp_maps m;

	REQUIRE(pp_maps_parse("", 0, &m) == 0);
	CHECK_EQ_U64(m.n, 0);
	CHECK_EQ_U64(m.bad_lines, 0);
	CHECK(pp_maps_find(&m, 0) == NULL);
	pp_maps_fini(&m);
	REQUIRE(pp_maps_parse(NULL, 0, &m) == 0);
	CHECK_EQ_U64(m.n, 0);
	pp_maps_fini(&m);
	CHECK(pp_maps_parse(NULL, 5, &m) == -EINVAL);
	CHECK(pp_maps_parse("x", 1, NULL) == -EINVAL);
	CHECK(pp_maps_find(NULL, 0) == NULL);
	pp_maps_fini(NULL);
	REQUIRE(pp_maps_parse("\n", 1, &m) == 0);
	CHECK_EQ_U64(m.n, 0);
	CHECK_EQ_U64(m.bad_lines, 1);
	pp_maps_fini(&m);
}

TEST(unsorted_and_overlapping_input)
{
	static const char text[] = "3000-4000 r-xp 00000000 08:01 3 /c\n"
				   "1000-2000 r-xp 00000000 08:01 1 /a\n"
				   "2000-3000 r-xp 00000000 08:01 2 /b\n"
				   "1800-2800 r-xp 00000000 08:01 9 /overlaps\n";
	struct pp_maps m;

	REQUIRE(pp_maps_parse(text, strlen(text), &m) == 0);
	CHECK_EQ_U64(m.resorted, 1);
	REQUIRE(m.n == 3);
	CHECK_EQ_U64(m.bad_lines, 1);
	CHECK_STR(m.entries[0].path, "/a");
	CHECK_STR(m.entries[1].path, "/b");
	CHECK_STR(m.entries[2].path, "/c");
	CHECK_STR(pp_maps_find(&m, 0x1fff)->path, "/a");
	CHECK_STR(pp_maps_find(&m, 0x2000)->path, "/b");
	CHECK_STR(pp_maps_find(&m, 0x3fff)->path, "/c");
	CHECK(pp_maps_find(&m, 0xfff) == NULL);
	pp_maps_fini(&m);
}

/* Every lookup over a larger table agrees with a linear scan. */
TEST(find_matches_linear_scan)
{
	char *text = malloc(200 * 80);
	size_t len = 0;
	struct pp_maps m;

	REQUIRE(text != NULL);
	for (unsigned i = 0; i < 200; i++) {
		/* Mappings of varying size with gaps every third. */
		uint64_t start = 0x10000ull + i * 0x10000ull;
		uint64_t end = start + (i % 3 == 0 ? 0x10000ull : 0x1000ull * (1 + i % 7));

		len += (size_t)snprintf(text + len, 80, "%lx-%lx r-xp 00000000 08:01 %u /lib%u\n",
					(unsigned long)start, (unsigned long)end, i, i);
	}
	REQUIRE(pp_maps_parse(text, len, &m) == 0);
	REQUIRE(m.n == 200);
	for (uint64_t a = 0; a < 0x10000ull * 202; a += 0x321) {
		const struct pp_map_entry *want = NULL;

		for (size_t i = 0; i < m.n; i++) {
			if (a >= m.entries[i].start && a < m.entries[i].end) {
				want = &m.entries[i];
				break;
			}
		}
		CHECK(pp_maps_find(&m, a) == want);
	}
	pp_maps_fini(&m);
	free(text);
}

static char *read_all(const char *path, size_t *len)
{
	size_t cap = 1 << 16, used = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY);

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	for (;;) {
		ssize_t r;

		if (used == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + used, cap - used);
		if (r <= 0)
			break;
		used += (size_t)r;
	}
	close(fd);
	*len = used;
	return buf;
}

/* A function of this binary whose address must land in an executable mapping of it. */
static int __attribute__((noinline)) marker_function(int x)
{
	return x * 3 + 1;
}

TEST(live_self_maps)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t len;
	char *text;
	struct pp_maps m;
	const struct pp_map_entry *e;
	int (*volatile fp)(int) = marker_function;

	REQUIRE(n > 0);
	exe[n] = '\0';
	text = read_all("/proc/self/maps", &len);
	if (!text)
		SKIP("/proc/self/maps is not readable");
	REQUIRE(pp_maps_parse(text, len, &m) == 0);
	CHECK(m.n > 5);
	CHECK_EQ_U64(m.bad_lines, 0);
	/* The kernel lists mappings in ascending order, without overlaps. */
	CHECK_EQ_U64(m.resorted, 0);
	for (size_t i = 1; i < m.n; i++)
		CHECK(m.entries[i - 1].end <= m.entries[i].start);

	e = pp_maps_find(&m, (uint64_t)(uintptr_t)fp);
	REQUIRE(e != NULL);
	CHECK(e->perms & PP_MAP_EXEC);
	CHECK(e->perms & PP_MAP_READ);
	CHECK_EQ_U64(e->kind, PP_MAP_KIND_FILE);
	CHECK_STR(e->path, exe);
	CHECK(fp(1) == 4);

	/* libc's code, found through a libc function, is an executable file mapping. */
	e = pp_maps_find(&m, (uint64_t)(uintptr_t)&getppid);
	REQUIRE(e != NULL);
	CHECK(e->perms & PP_MAP_EXEC);
	CHECK(strstr(e->path, "libc.so") != NULL || strstr(e->path, "libc-") != NULL);

	/* A stack variable lives in [stack] (the main thread's stack). */
	e = pp_maps_find(&m, (uint64_t)(uintptr_t)&len);
	REQUIRE(e != NULL);
	CHECK_EQ_U64(e->kind, PP_MAP_KIND_STACK);
	pp_maps_fini(&m);
	free(text);
}

/*
 * Mappings inserted as the kernel reports them (pp_maps_insert) against a model that knows,
 * page by page, which insert last covered it: after each insert the entries are sorted,
 * disjoint, and each page names the right mapping, path and file offset.
 */
#define MODEL_PAGES 64
TEST(insert_matches_page_model)
{
	struct pp_maps m = {0};
	int owner[MODEL_PAGES];
	uint64_t off0[64], start0[64];
	char names[64][16];
	unsigned seed = 12345;

	for (int p = 0; p < MODEL_PAGES; p++)
		owner[p] = -1;
	for (int k = 0; k < 64; k++) {
		struct pp_map_entry e = {0};
		int a, b;

		seed = seed * 1103515245u + 12345u;
		a = (int)((seed >> 8) % MODEL_PAGES);
		seed = seed * 1103515245u + 12345u;
		b = a + 1 + (int)((seed >> 8) % 12);
		if (b > MODEL_PAGES)
			b = MODEL_PAGES;
		snprintf(names[k], sizeof(names[k]), "/lib/f%d.so", k);
		off0[k] = (uint64_t)k << 20;
		e.start = 0x1000ull * (uint64_t)a;
		start0[k] = e.start;
		e.end = 0x1000ull * (uint64_t)b;
		e.offset = off0[k];
		e.perms = PP_MAP_READ | PP_MAP_EXEC;
		e.kind = PP_MAP_KIND_FILE;
		e.inode = (uint64_t)k;
		e.path = names[k];
		REQUIRE(pp_maps_insert(&m, &e) == 0);
		for (int p = a; p < b; p++)
			owner[p] = k;
		for (size_t i = 1; i < m.n; i++)
			CHECK(m.entries[i - 1].end <= m.entries[i].start);
		for (int p = 0; p < MODEL_PAGES; p++) {
			uint64_t addr = 0x1000ull * (uint64_t)p + 0x10;
			const struct pp_map_entry *f = pp_maps_find(&m, addr);

			if (owner[p] < 0) {
				CHECK(f == NULL);
				continue;
			}
			REQUIRE(f != NULL);
			CHECK_EQ_U64(f->inode, (uint64_t)owner[p]);
			CHECK_STR(f->path, names[owner[p]]);
			/* the file offset of an address keeps to its own mapping's start */
			CHECK_EQ_U64(pp_map_file_offset(f, addr),
				     off0[owner[p]] + addr - start0[owner[p]]);
		}
	}
	{
		struct pp_maps copy;

		REQUIRE(pp_maps_copy(&copy, &m) == 0);
		REQUIRE(copy.n == m.n);
		for (size_t i = 0; i < m.n; i++) {
			CHECK_EQ_U64(copy.entries[i].start, m.entries[i].start);
			CHECK_STR(copy.entries[i].path, m.entries[i].path);
			CHECK(copy.entries[i].path != m.entries[i].path);
		}
		pp_maps_fini(&copy);
	}
	pp_maps_fini(&m);
}

static struct pp_map_entry file_mapping(uint64_t start, uint64_t end, uint64_t offset,
					uint8_t perms, const char *path)
{
	return (struct pp_map_entry){.start = start,
				     .end = end,
				     .offset = offset,
				     .perms = perms,
				     .kind = PP_MAP_KIND_FILE,
				     .inode = 7,
				     .path = path};
}

/*
 * A library as the loader maps it: its whole span first, then each segment over it. The
 * segments share one copy of the path, and maps read from /proc take inserts after them
 * with their paths intact, however often the strings move.
 */
TEST(insert_shares_a_files_path_and_keeps_parsed_paths)
{
	static const char text[] = "00400000-00401000 r-xp 00000000 08:01 11 /usr/bin/prog\n"
				   "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n";
	char lib[] = "/usr/lib/x86_64-linux-gnu/libsomething-with-a-long-name.so.1";
	const uint64_t base = 0x7f1000000000ull;
	struct pp_map_entry e = file_mapping(base, base + 0x40000, 0, PP_MAP_READ, lib);
	struct pp_maps m;
	char name[64];

	REQUIRE(pp_maps_parse(text, sizeof(text) - 1, &m) == 0);
	REQUIRE(m.n == 2);

	REQUIRE(pp_maps_insert(&m, &e) == 0);
	e = file_mapping(base + 0x10000, base + 0x30000, 0x10000, PP_MAP_READ | PP_MAP_EXEC, lib);
	REQUIRE(pp_maps_insert(&m, &e) == 0);
	e = file_mapping(base + 0x30000, base + 0x40000, 0x30000, PP_MAP_READ | PP_MAP_WRITE, lib);
	REQUIRE(pp_maps_insert(&m, &e) == 0);
	lib[1] = 'X'; /* the caller's buffer is its own again */
	REQUIRE(m.n == 5);
	CHECK_EQ_U64(m.entries[2].start, base);
	CHECK_EQ_U64(m.entries[2].end, base + 0x10000);
	CHECK_EQ_U64(m.entries[3].perms, PP_MAP_READ | PP_MAP_EXEC);
	CHECK_EQ_U64(m.entries[3].offset, 0x10000);
	CHECK_STR(m.entries[3].path,
		  "/usr/lib/x86_64-linux-gnu/libsomething-with-a-long-name.so.1");
	CHECK(m.entries[2].path == m.entries[3].path && m.entries[3].path == m.entries[4].path);

	/* many more files: the strings move several times; every path stays right */
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "/opt/app/lib%03d.so", i);
		e = file_mapping(base + 0x100000 * (uint64_t)(i + 1),
				 base + 0x100000 * (uint64_t)(i + 1) + 0x1000, 0,
				 PP_MAP_READ | PP_MAP_EXEC, name);
		REQUIRE(pp_maps_insert(&m, &e) == 0);
	}
	REQUIRE(m.n == 205);
	CHECK_STR(m.entries[0].path, "/usr/bin/prog");
	CHECK_STR(m.entries[1].path, "");
	CHECK_STR(m.entries[4].path,
		  "/usr/lib/x86_64-linux-gnu/libsomething-with-a-long-name.so.1");
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "/opt/app/lib%03d.so", i);
		CHECK_STR(m.entries[5 + i].path, name);
	}
	CHECK(pp_maps_bytes(&m) >= m.n * sizeof(m.entries[0]));
	pp_maps_fini(&m);
}

/*
 * One range mapped over and over with new files (a process that maps and unmaps at one place):
 * the strings the cut-away mappings leave behind are dropped when the strings move, so they
 * stay within a small multiple of what is named.
 */
TEST(insert_over_one_range_keeps_its_strings_bounded)
{
	struct pp_maps m = {0};
	char name[128];

	for (int i = 0; i < 20000; i++) {
		struct pp_map_entry e;

		snprintf(name, sizeof(name),
			 "/var/lib/some/rather/long/directory/name/file-%06d.bin", i);
		e = file_mapping(0x10000, 0x20000, 0, PP_MAP_READ, name);
		REQUIRE(pp_maps_insert(&m, &e) == 0);
	}
	REQUIRE(m.n == 1);
	CHECK_STR(m.entries[0].path, "/var/lib/some/rather/long/directory/name/file-019999.bin");
	CHECK(m.strings_cap <= 1024);
	CHECK(m.cap <= 8);
	pp_maps_fini(&m);
}

/* Names as PERF_RECORD_MMAP2 gives them. */
TEST(entry_names_from_the_side_band)
{
	struct pp_map_entry e = {0};
	char anon[] = "//anon", del[] = "/tmp/x (deleted)", vdso[] = "[vdso]", file[] = "/a b";

	pp_map_entry_set_name(&e, anon);
	CHECK_EQ_U64(e.kind, PP_MAP_KIND_ANON);
	CHECK_STR(e.path, "");
	pp_map_entry_set_name(&e, del);
	CHECK_EQ_U64(e.kind, PP_MAP_KIND_FILE);
	CHECK_EQ_U64(e.deleted, 1);
	CHECK_STR(e.path, "/tmp/x");
	pp_map_entry_set_name(&e, vdso);
	CHECK_EQ_U64(e.kind, PP_MAP_KIND_VDSO);
	CHECK_EQ_U64(e.deleted, 0);
	pp_map_entry_set_name(&e, file);
	CHECK_STR(e.path, "/a b");
}

TEST_LIST = {
    {"parses_real_maps", parses_real_maps},
    {"names_deleted_spaces_anon", names_deleted_spaces_anon},
    {"malformed_lines_are_skipped_and_counted", malformed_lines_are_skipped_and_counted},
    {"no_trailing_newline_no_nul", no_trailing_newline_no_nul},
    {"empty_input_and_bad_args", empty_input_and_bad_args},
    {"unsorted_and_overlapping_input", unsorted_and_overlapping_input},
    {"find_matches_linear_scan", find_matches_linear_scan},
    {"live_self_maps", live_self_maps},
    {"insert_matches_page_model", insert_matches_page_model},
    {"insert_shares_a_files_path_and_keeps_parsed_paths",
     insert_shares_a_files_path_and_keeps_parsed_paths},
    {"insert_over_one_range_keeps_its_strings_bounded",
     insert_over_one_range_keeps_its_strings_bounded},
    {"entry_names_from_the_side_band", entry_names_from_the_side_band},
};
TEST_MAIN()
