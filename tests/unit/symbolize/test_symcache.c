/*
 * Tests of the symbol table cache with real ELF files built at test time: a file found again
 * by inode (hard link, /proc/self/root path), copies shared by build id, LRU eviction, refusal
 * of a binary whose build id differs from the expected one (ESTALE), remembered failures, and
 * tables read back from the store on disk at the next start.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/debug_file.h"
#include "symbolize/symbol_store.h"
#include "symbolize/symcache.h"

static char g_dir[512];
static int g_state;
static const char *g_skip_reason;

static void cleanup_dir(void)
{
	char cmd[600];

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

/* Three executables (a, b, c) that differ in code and so in build id; one non-ELF file. */
static int fixture(void)
{
	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_sh("cc --version >/dev/null 2>&1") != 0) {
		g_skip_reason = "no working cc to build test binaries";
		return g_state;
	}
	if (pp_test_mkdtemp(g_dir, sizeof(g_dir), "pp-symcache")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	atexit(cleanup_dir);
	g_skip_reason = "cc failed to build the test binaries";
	for (int v = 0; v < 3; v++) {
		if (pp_test_sh("cd '%s' && printf 'int pp_variant_%d(int x) { return x * %d; }\\n"
			       "int main(int c, char **v) { (void)v; return pp_variant_%d(c); "
			       "}\\n' > %c.c "
			       "&& cc -O1 -Wl,--build-id -o %c %c.c",
			       g_dir, v, v + 2, v, 'a' + v, 'a' + v, 'a' + v))
			return g_state;
	}
	if (pp_test_sh("cd '%s' && echo 'not an ELF file' > text.txt", g_dir))
		return g_state;
	g_skip_reason = NULL;
	g_state = 1;
	return g_state;
}

#define NEED_FIXTURE()                                                                             \
	do {                                                                                       \
		if (fixture() != 1)                                                                \
			SKIP(g_skip_reason);                                                       \
	} while (0)

static struct pp_symcache_stats stats(const struct pp_symcache *c)
{
	struct pp_symcache_stats st;

	pp_symcache_get_stats(c, &st);
	return st;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

TEST(same_file_by_inode)
{
	char a[PATH_MAX], link[PATH_MAX], via_root[PATH_MAX + 32];
	const struct pp_elf_symbols *s1, *s2, *s3;
	struct pp_symcache *c;

	NEED_FIXTURE();
	path_of(a, sizeof(a), "a");
	path_of(link, sizeof(link), "a.hardlink");
	REQUIRE(pp_test_sh("ln -f '%s' '%s'", a, link) == 0);
	snprintf(via_root, sizeof(via_root), "/proc/self/root%s", a);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	s1 = pp_symcache_get_file(c, a, NULL);
	REQUIRE(s1 != NULL);
	CHECK(pp_elf_symbols_lookup(s1, pp_elf_symbols_get(s1, 0)->start, NULL) != NULL);
	CHECK_EQ_U64(stats(c).misses, 1);
	CHECK_EQ_U64(stats(c).opens, 1);
	s2 = pp_symcache_get_file(c, a, NULL);
	s3 = pp_symcache_get_file(c, link, NULL);
	CHECK(s2 == s1);
	CHECK(s3 == s1);
	s3 = pp_symcache_get_file(c, via_root, NULL);
	CHECK(s3 == s1);
	CHECK_EQ_U64(stats(c).hits, 3);
	CHECK_EQ_U64(stats(c).opens, 1);
	CHECK_EQ_U64(pp_symcache_size(c), 1);
	pp_symcache_free(c);
	pp_symcache_free(NULL);
}

/*
 * With a store, a file's table built at one start is read back at the next (a new cache, as
 * a restarted agent has) and names alike; the fixture's files, written a moment ago, are not
 * kept until their ctime settles.
 */
TEST(tables_are_read_back_from_the_store_at_the_next_start)
{
	static const char *const libc_paths[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6",
						 "/usr/lib/aarch64-linux-gnu/libc.so.6"};
	char dir[PATH_MAX], a[PATH_MAX];
	const struct pp_elf_symbols *s1, *s2;
	struct pp_symbol_store *store;
	struct pp_symcache *c;
	const char *libc = NULL;
	struct stat st;

	NEED_FIXTURE();
	for (size_t i = 0; i < sizeof(libc_paths) / sizeof(libc_paths[0]) && !libc; i++)
		if (!stat(libc_paths[i], &st) && time(NULL) > st.st_ctim.tv_sec + 3)
			libc = libc_paths[i];
	if (!libc)
		SKIP("no libc.so.6 unchanged for 3 s where it is looked for");
	path_of(dir, sizeof(dir), "symbol-tables");
	path_of(a, sizeof(a), "a");
	store = pp_symbol_store_new(&(struct pp_symbol_store_opts){.dir = dir, .boot_id = "b"});
	REQUIRE(store != NULL);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	pp_symcache_set_store(c, store);
	s1 = pp_symcache_get_file(c, libc, NULL);
	REQUIRE(s1 != NULL && pp_symcache_get_file(c, a, NULL) != NULL);
	CHECK_EQ_U64(stats(c).from_store, 0);
	pp_symcache_free(c);
	{
		struct pp_symbol_store_stats ss;

		pp_symbol_store_get_stats(store, &ss);
		CHECK_EQ_U64(ss.stored, 1);    /* libc */
		CHECK_EQ_U64(ss.unsettled, 1); /* the fixture's a, just built */
	}

	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	pp_symcache_set_store(c, store);
	s2 = pp_symcache_get_file(c, libc, NULL);
	REQUIRE(s2 != NULL);
	CHECK_EQ_U64(stats(c).from_store, 1);
	CHECK_EQ_U64(stats(c).opens, 1);
	{
		struct pp_elf_symbols *built = pp_elf_symbols_open_path(libc);

		REQUIRE(built != NULL);
		CHECK(pp_elf_symbols_same(built, s2));
		pp_elf_symbols_free(built);
	}
	pp_symcache_free(c);
	pp_symbol_store_free(store);
}

TEST(copies_share_a_table_by_build_id)
{
	char a[PATH_MAX], copy[PATH_MAX];
	const struct pp_elf_symbols *s1, *s2;
	struct pp_symcache *c;

	NEED_FIXTURE();
	path_of(a, sizeof(a), "a");
	path_of(copy, sizeof(copy), "a.copy");
	REQUIRE(pp_test_sh("cp '%s' '%s'", a, copy) == 0);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	s1 = pp_symcache_get_file(c, a, NULL);
	s2 = pp_symcache_get_file(c, copy, pp_elf_symbols_build_id(s1));
	REQUIRE(s1 != NULL);
	CHECK(s2 == s1);
	CHECK_EQ_U64(stats(c).misses, 2);
	CHECK_EQ_U64(stats(c).opens, 2); /* the copy is read, then found to name alike */
	CHECK_EQ_U64(stats(c).shared_by_build_id, 1);
	CHECK_EQ_U64(pp_symcache_size(c), 2);
	pp_symcache_free(c);
}

TEST(build_id_mismatch_is_estale)
{
	char a[PATH_MAX], b[PATH_MAX], victim[PATH_MAX], id_a[PP_BUILD_ID_HEX_SIZE],
	    id_b[PP_BUILD_ID_HEX_SIZE], upper[PP_BUILD_ID_HEX_SIZE];
	const struct pp_elf_symbols *s;
	struct pp_symcache *c;

	NEED_FIXTURE();
	path_of(a, sizeof(a), "a");
	path_of(b, sizeof(b), "b");
	path_of(victim, sizeof(victim), "replaced");
	REQUIRE(pp_test_sh("cp '%s' '%s'", a, victim) == 0);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	s = pp_symcache_get_file(c, a, NULL);
	REQUIRE(s != NULL);
	snprintf(id_a, sizeof(id_a), "%s", pp_elf_symbols_build_id(s));
	s = pp_symcache_get_file(c, b, NULL);
	REQUIRE(s != NULL);
	snprintf(id_b, sizeof(id_b), "%s", pp_elf_symbols_build_id(s));
	REQUIRE(strlen(id_a) == 40 && strcmp(id_a, id_b) != 0);

	errno = 0;
	CHECK(pp_symcache_get_file(c, a, id_b) == NULL);
	CHECK_EQ_U64(errno, ESTALE);
	CHECK_EQ_U64(stats(c).build_id_mismatch, 1);
	/* The right id, in either case, and "no id to check" both succeed. */
	for (size_t i = 0; i <= strlen(id_a); i++)
		upper[i] = (char)(id_a[i] >= 'a' && id_a[i] <= 'f' ? id_a[i] - 32 : id_a[i]);
	CHECK(pp_symcache_get_file(c, a, upper) != NULL);
	CHECK(pp_symcache_get_file(c, a, "") != NULL);
	CHECK(pp_symcache_get_file(c, a, id_a) != NULL);

	/* A binary replaced in place (a process still runs the old one): refused, not reused. */
	s = pp_symcache_get_file(c, victim, id_a);
	CHECK(s != NULL);
	REQUIRE(pp_test_sh("cat '%s' > '%s'", b, victim) == 0);
	errno = 0;
	CHECK(pp_symcache_get_file(c, victim, id_a) == NULL);
	CHECK_EQ_U64(errno, ESTALE);
	s = pp_symcache_get_file(c, victim, NULL);
	REQUIRE(s != NULL);
	CHECK_STR(pp_elf_symbols_build_id(s), id_b);
	CHECK_EQ_U64(stats(c).build_id_mismatch, 2);
	pp_symcache_free(c);
}

TEST(lru_eviction)
{
	char a[PATH_MAX], b[PATH_MAX], cc[PATH_MAX];
	struct pp_symcache *c;

	NEED_FIXTURE();
	path_of(a, sizeof(a), "a");
	path_of(b, sizeof(b), "b");
	path_of(cc, sizeof(cc), "c");
	CHECK(pp_symcache_new(0, 64u << 20) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	c = pp_symcache_new(2, 64u << 20);
	REQUIRE(c != NULL);
	CHECK(pp_symcache_get_file(c, a, NULL) != NULL);
	CHECK(pp_symcache_get_file(c, b, NULL) != NULL);
	/* a becomes the most recently used, so c's arrival evicts b. */
	CHECK(pp_symcache_get_file(c, a, NULL) != NULL);
	CHECK(pp_symcache_get_file(c, cc, NULL) != NULL);
	CHECK_EQ_U64(stats(c).evictions, 1);
	CHECK_EQ_U64(pp_symcache_size(c), 2);
	CHECK_EQ_U64(stats(c).opens, 3);
	CHECK(pp_symcache_get_file(c, a, NULL) != NULL);
	CHECK_EQ_U64(stats(c).opens, 3); /* a stayed */
	CHECK(pp_symcache_get_file(c, b, NULL) != NULL);
	CHECK_EQ_U64(stats(c).opens, 4); /* b had gone */
	CHECK_EQ_U64(stats(c).evictions, 2);
	CHECK_EQ_U64(pp_symcache_size(c), 2);
	CHECK_EQ_U64(stats(c).hits, 2);
	CHECK_EQ_U64(stats(c).misses, 4);
	pp_symcache_free(c);
}

/* The byte bound: tables are counted by what they hold, and the least recently used go. */
TEST(byte_bound_evicts_lru_and_refuses_a_table_over_it)
{
	char a[PATH_MAX], b[PATH_MAX], cc[PATH_MAX];
	struct pp_symcache *c;
	size_t one;

	NEED_FIXTURE();
	path_of(a, sizeof(a), "a");
	path_of(b, sizeof(b), "b");
	path_of(cc, sizeof(cc), "c");
	CHECK(pp_symcache_new(8, 0) == NULL);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	CHECK_EQ_U64(pp_symcache_bytes(c), 0);
	REQUIRE(pp_symcache_get_file(c, a, NULL) != NULL);
	one = pp_symcache_bytes(c);
	/* a table and its entry: more than the struct, less than the file's size */
	CHECK(one > 200 && one < 64 * 1024);
	REQUIRE(pp_symcache_get_file(c, b, NULL) != NULL);
	CHECK(pp_symcache_bytes(c) > one);
	pp_symcache_free(c);

	/* room for two such tables, not three (a, b, c are the same program but a constant) */
	c = pp_symcache_new(8, one * 2 + one / 2);
	REQUIRE(c != NULL);
	CHECK(pp_symcache_get_file(c, a, NULL) != NULL);
	CHECK(pp_symcache_get_file(c, b, NULL) != NULL);
	CHECK(pp_symcache_get_file(c, a, NULL) != NULL); /* b is now the least recently used */
	CHECK(pp_symcache_get_file(c, cc, NULL) != NULL);
	CHECK_EQ_U64(stats(c).evictions, 1);
	CHECK_EQ_U64(pp_symcache_size(c), 2);
	CHECK(pp_symcache_bytes(c) <= one * 2 + one / 2);
	CHECK(pp_symcache_get_file(c, a, NULL) != NULL);
	CHECK_EQ_U64(stats(c).opens, 3); /* a stayed */
	CHECK(pp_symcache_get_file(c, b, NULL) != NULL);
	CHECK_EQ_U64(stats(c).opens, 4); /* b had gone */
	CHECK(pp_symcache_bytes(c) <= one * 2 + one / 2);
	pp_symcache_free(c);

	/* a table larger than the whole bound is not kept, and not parsed again and again */
	c = pp_symcache_new(8, one / 2);
	REQUIRE(c != NULL);
	errno = 0;
	CHECK(pp_symcache_get_file(c, a, NULL) == NULL);
	CHECK_EQ_U64(errno, EFBIG);
	CHECK_EQ_U64(stats(c).too_big, 1);
	CHECK(pp_symcache_bytes(c) < one / 2);
	errno = 0;
	CHECK(pp_symcache_get_file(c, a, NULL) == NULL);
	CHECK_EQ_U64(errno, EFBIG);
	CHECK_EQ_U64(stats(c).opens, 0); /* the read stopped at the bound: nothing was built */
	CHECK_EQ_U64(stats(c).negative_hits, 1);
	pp_symcache_free(c);
}

TEST(failures_are_remembered)
{
	char missing[PATH_MAX], text[PATH_MAX], a[PATH_MAX];
	struct pp_symcache *c;

	NEED_FIXTURE();
	path_of(missing, sizeof(missing), "appears-later");
	path_of(text, sizeof(text), "text.txt");
	path_of(a, sizeof(a), "a");
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);

	/* A missing file has no identity to remember: each call fails with ENOENT. */
	CHECK(pp_symcache_get_file(c, missing, NULL) == NULL);
	CHECK_EQ_U64(errno, ENOENT);
	CHECK(pp_symcache_get_file(c, missing, NULL) == NULL);
	CHECK_EQ_U64(errno, ENOENT);
	CHECK_EQ_U64(stats(c).open_failures, 2);
	CHECK_EQ_U64(stats(c).negative_hits, 0);

	/* A file that is not ELF: one failure, then answered from the cache with its errno. */
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK_EQ_U64(errno, ENOEXEC);
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK_EQ_U64(errno, ENOEXEC);
	CHECK_EQ_U64(stats(c).open_failures, 3);
	CHECK_EQ_U64(stats(c).negative_hits, 1);

	/* Once the interval passes, the file is tried again. */
	pp_symcache_free(c);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	pp_symcache_set_negative_ttl_ms(c, 20);
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK_EQ_U64(stats(c).open_failures, 1);
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK_EQ_U64(stats(c).open_failures, 1);
	sleep_ms(40);
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK_EQ_U64(stats(c).open_failures, 2);

	/* A file that shows up is used at once (its identity is new). */
	REQUIRE(pp_test_sh("cp '%s' '%s'", a, missing) == 0);
	CHECK(pp_symcache_get_file(c, missing, NULL) != NULL);

	/* With remembering off (and the last failure expired), every call tries again. */
	pp_symcache_set_negative_ttl_ms(c, 0);
	sleep_ms(40);
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK(pp_symcache_get_file(c, text, NULL) == NULL);
	CHECK_EQ_U64(stats(c).open_failures, 4);
	CHECK(pp_symcache_get_file(c, NULL, NULL) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	pp_symcache_free(c);
}

TEST(many_files_stay_bounded)
{
	char a[PATH_MAX], b[PATH_MAX], cc[PATH_MAX];
	const char *paths[3] = {a, b, cc};
	struct pp_symcache *c;

	NEED_FIXTURE();
	path_of(a, sizeof(a), "a");
	path_of(b, sizeof(b), "b");
	path_of(cc, sizeof(cc), "c");
	/* One slot: every switch of file evicts, and tables are freed (ASan would see leaks). */
	c = pp_symcache_new(1, 64u << 20);
	REQUIRE(c != NULL);
	for (int i = 0; i < 30; i++) {
		const struct pp_elf_symbols *s = pp_symcache_get_file(c, paths[i % 3], NULL);

		CHECK(s != NULL);
		CHECK(pp_symcache_size(c) == 1);
	}
	CHECK_EQ_U64(stats(c).evictions, 29);
	CHECK_EQ_U64(stats(c).opens, 30);
	pp_symcache_free(c);
}

/* The first symbol's name of a table, for telling two tables' names apart. */
static const char *name_at(const struct pp_elf_symbols *s, const char *prefix)
{
	for (size_t i = 0; s && pp_elf_symbols_get(s, i); i++)
		if (!strncmp(pp_elf_symbols_get(s, i)->name, prefix, strlen(prefix)))
			return pp_elf_symbols_get(s, i)->name;
	return NULL;
}

/*
 * A hostile neighbour's file claiming the build id of another, with other symbols: each is
 * named by its own bytes, whichever is read first; and a stripped binary's debug file found
 * inside one process's root names that root's copy only, not a copy elsewhere.
 */
TEST(a_claimed_build_id_shares_no_names)
{
	char genuine[PATH_MAX], forged[PATH_MAX], root[PATH_MAX], inroot[PATH_MAX + 32],
	    rootarg[PATH_MAX];
	const struct pp_elf_symbols *g, *f, *r, *h;
	struct pp_debug_dirs *dirs;
	struct pp_symcache *c;

	NEED_FIXTURE();
	REQUIRE(pp_test_sh(
		    "cd '%s' && printf 'int pp_genuine_fn(int x) { return x * 3; }\\n"
		    "int main(int c, char **v) { (void)v; return pp_genuine_fn(c); }\\n' > g.c && "
		    "sed 's/pp_genuine_fn/pp_forged_fn/' g.c > f.c && "
		    "cc -O1 -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 -o genuine "
		    "g.c && cc -O1 -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 -o "
		    "forged f.c",
		    g_dir) == 0);
	path_of(genuine, sizeof(genuine), "genuine");
	path_of(forged, sizeof(forged), "forged");
	for (int order = 0; order < 2; order++) {
		c = pp_symcache_new(8, 64u << 20);
		REQUIRE(c != NULL);
		f = order ? NULL : pp_symcache_get_file(c, forged, NULL);
		g = pp_symcache_get_file(c, genuine, NULL);
		if (order)
			f = pp_symcache_get_file(c, forged, NULL);
		REQUIRE(g != NULL && f != NULL);
		CHECK(!strcmp(pp_elf_symbols_build_id(g), pp_elf_symbols_build_id(f)));
		CHECK(g != f);
		CHECK(name_at(g, "pp_genuine_fn") && !name_at(g, "pp_forged_fn"));
		CHECK(name_at(f, "pp_forged_fn") && !name_at(f, "pp_genuine_fn"));
		CHECK_EQ_U64(stats(c).shared_by_build_id, 0);
		pp_symcache_free(c);
	}

	/* stripped, its debug file (other names) planted inside one root only */
	path_of(root, sizeof(root), "root");
	REQUIRE(pp_test_sh("cd '%s' && mkdir -p root/bin root/usr/lib/debug/.build-id/01 bin && "
			   "cp genuine bin/prog && strip bin/prog && cp bin/prog root/bin/prog && "
			   "cp forged root/usr/lib/debug/.build-id/01/"
			   "23456789abcdef0123456789abcdef01234567.debug",
			   g_dir) == 0);
	dirs = pp_debug_dirs_new(NULL);
	REQUIRE(dirs != NULL);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	pp_symcache_set_debug_dirs(c, dirs);
	snprintf(inroot, sizeof(inroot), "%s/bin/prog", root);
	snprintf(rootarg, sizeof(rootarg), "%s", root);
	{
		int fd = open(inroot, O_RDONLY | O_CLOEXEC);

		REQUIRE(fd >= 0);
		r = pp_symcache_get_fd(c, fd, rootarg, "/bin/prog", NULL);
		close(fd);
	}
	path_of(inroot, sizeof(inroot), "bin/prog");
	h = pp_symcache_get_file(c, inroot, NULL); /* the same bytes, on the host */
	REQUIRE(r != NULL && h != NULL);
	CHECK(name_at(r, "pp_forged_fn") != NULL); /* the root's own debug file names its copy */
	CHECK(h != r && !name_at(h, "pp_forged_fn"));
	pp_symcache_free(c);
	pp_debug_dirs_free(dirs);
}

TEST_LIST = {
    {"a_claimed_build_id_shares_no_names", a_claimed_build_id_shares_no_names},
    {"same_file_by_inode", same_file_by_inode},
    {"tables_are_read_back_from_the_store_at_the_next_start",
     tables_are_read_back_from_the_store_at_the_next_start},
    {"copies_share_a_table_by_build_id", copies_share_a_table_by_build_id},
    {"build_id_mismatch_is_estale", build_id_mismatch_is_estale},
    {"lru_eviction", lru_eviction},
    {"byte_bound_evicts_lru_and_refuses_a_table_over_it",
     byte_bound_evicts_lru_and_refuses_a_table_over_it},
    {"failures_are_remembered", failures_are_remembered},
    {"many_files_stay_bounded", many_files_stay_bounded},
};
TEST_MAIN()
