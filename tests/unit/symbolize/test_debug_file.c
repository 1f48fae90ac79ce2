/*
 * Tests of the separate debug file search against binaries split at test time with objcopy
 * (--only-keep-debug, --strip-all, --add-gnu-debuglink): found by build id and by each
 * debuglink place, inside a process root before the host, refused when the build id or CRC
 * does not match, and never led out of the root by a symbolic link or blocked by a FIFO.
 * Expected addresses come from nm on the unstripped binary.
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
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/debug_file.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/symcache.h"

static const char prog_src[] =
    "__attribute__((noinline)) static int pp_hidden_worker(int x)\n"
    "{ int s = 0; for (int i = 0; i < x; i++) s += i ^ (s >> 2); return s; }\n"
    "int main(int argc, char **argv) { (void)argv; return pp_hidden_worker(argc) & 1; }\n";

static char g_dir[512];
static int g_state;
static const char *g_skip_reason;
static char g_build_id[PP_BUILD_ID_HEX_SIZE];
static unsigned long long g_hidden_addr, g_hidden_addr_noid;

static void cleanup_dir(void)
{
	if (g_dir[0] && pp_test_sh("rm -rf '%s'", g_dir) != 0)
		fprintf(stderr, "  could not remove %s\n", g_dir);
}

/* The address nm gives a symbol of file, 0 when absent. */
static unsigned long long nm_addr(const char *file, const char *sym)
{
	char cmd[2 * PATH_MAX], line[512];
	unsigned long long a = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm '%s/%s' 2>/dev/null", g_dir, file);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p)) {
		char t, name[256];
		unsigned long long v;

		if (sscanf(line, "%llx %c %255s", &v, &t, name) == 3 && strcmp(name, sym) == 0)
			a = v;
	}
	pclose(p);
	return a;
}

static int fixture(void)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;
	FILE *f;

	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_sh("cc --version >/dev/null 2>&1 && which nm objcopy >/dev/null 2>&1") != 0) {
		g_skip_reason = "no cc or binutils (nm, objcopy) to build the test binaries";
		return g_state;
	}
	if (pp_test_mkdtemp(g_dir, sizeof(g_dir), "pp-dbg")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	atexit(cleanup_dir);
	snprintf(path, sizeof(path), "%s/prog.c", g_dir);
	f = fopen(path, "w");
	if (!f || fputs(prog_src, f) < 0 || fclose(f) != 0) {
		g_skip_reason = "cannot write the test source";
		return g_state;
	}
	g_skip_reason = "cc or objcopy failed to build and split the test binaries";
	if (pp_test_sh("cd '%s' && cc -O1 -fPIE -pie -Wl,--build-id -o prog prog.c && "
		       "objcopy --only-keep-debug prog prog.debug && "
		       "objcopy --strip-all --add-gnu-debuglink=prog.debug prog prog_s && "
		       "cc -O1 -fPIE -pie -Wl,--build-id=none -o prognoid prog.c && "
		       "objcopy --only-keep-debug prognoid prognoid.debug && "
		       "objcopy --strip-all --add-gnu-debuglink=prognoid.debug prognoid prognoid_s",
		       g_dir))
		return g_state;
	g_hidden_addr = nm_addr("prog", "pp_hidden_worker");
	g_hidden_addr_noid = nm_addr("prognoid", "pp_hidden_worker");
	snprintf(path, sizeof(path), "%s/prog", g_dir);
	s = pp_elf_symbols_open_path(path);
	if (!s || !g_hidden_addr || !g_hidden_addr_noid) {
		pp_elf_symbols_free(s);
		g_skip_reason = "nm found no pp_hidden_worker in the test binary";
		return g_state;
	}
	snprintf(g_build_id, sizeof(g_build_id), "%s", pp_elf_symbols_build_id(s));
	pp_elf_symbols_free(s);
	g_skip_reason = NULL;
	g_state = 1;
	return g_state;
}

#define NEED_FIXTURE()                                                                             \
	do {                                                                                       \
		if (fixture() != 1)                                                                \
			SKIP(g_skip_reason);                                                       \
	} while (0)

/* A fresh empty directory under the fixture's, as a process root or a debug directory. */
static void fresh_dir(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", g_dir, name);
	if (pp_test_sh("rm -rf '%s' && mkdir -p '%s'", out, out) != 0)
		out[0] = '\0';
}

/* Copy fixture file name to root + rel, making the folders on the way. */
static int place(const char *name, const char *root, const char *rel)
{
	return pp_test_sh("mkdir -p \"$(dirname '%s%s')\" && cp '%s/%s' '%s%s'", root, rel, g_dir,
			  name, root, rel);
}

static void build_id_rel(char *out, size_t size)
{
	snprintf(out, size, "/usr/lib/debug/.build-id/%.2s/%s.debug", g_build_id, g_build_id + 2);
}

/* The stripped table of name, named through its debug file when fd >= 0 (consumed). */
static const char *name_after_adopt(const char *name, int fd, unsigned long long addr,
				    struct pp_elf_symbols **keep)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s, *d;

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	s = pp_elf_symbols_open_path(path);
	*keep = s;
	if (!s)
		return NULL;
	if (fd >= 0) {
		d = pp_elf_symbols_open_fd(fd);
		close(fd);
		if (!d || pp_elf_symbols_adopt(s, d, PP_SYMBOLS_DEBUG_FILE) != 0) {
			pp_elf_symbols_free(d);
			return NULL;
		}
	}
	return pp_elf_symbols_lookup(s, addr, NULL);
}

static struct pp_debug_target target_of(const char *root, const char *path, const char *id,
					const char *stripped)
{
	char p[PATH_MAX];
	struct pp_elf_symbols *s;
	struct pp_debug_target t = {.root = root, .path = path, .build_id = id};
	static char link[256];

	snprintf(p, sizeof(p), "%s/%s", g_dir, stripped);
	s = pp_elf_symbols_open_path(p);
	link[0] = '\0';
	if (s) {
		snprintf(link, sizeof(link), "%s", pp_elf_symbols_debuglink(s));
		t.has_crc = pp_elf_symbols_debuglink_crc(s, &t.crc) == 0;
		pp_elf_symbols_free(s);
	}
	t.debuglink = link;
	return t;
}

TEST(found_by_build_id_inside_the_root)
{
	char root[PATH_MAX], nodbg[PATH_MAX], rel[PATH_MAX], found[PATH_MAX * 2];
	struct pp_debug_dirs *dirs;
	struct pp_elf_symbols *s = NULL;
	struct pp_debug_target t;
	int fd;

	NEED_FIXTURE();
	fresh_dir(root, sizeof(root), "root-bid");
	fresh_dir(nodbg, sizeof(nodbg), "nodbg");
	build_id_rel(rel, sizeof(rel));
	REQUIRE(place("prog.debug", root, rel) == 0);
	dirs = pp_debug_dirs_new(NULL);
	REQUIRE(dirs != NULL);
	t = target_of(root, "/app/prog", g_build_id, "prog_s");
	t.debuglink = ""; /* by build id alone */
	fd = pp_debug_file_open(dirs, &t, found, sizeof(found));
	CHECK(fd >= 0);
	CHECK(strstr(found, "root-bid:/usr/lib/debug/.build-id/") != NULL);
	CHECK_STR(name_after_adopt("prog_s", fd, g_hidden_addr, &s), "pp_hidden_worker");
	CHECK(pp_elf_symbols_source(s) == PP_SYMBOLS_DEBUG_FILE);
	CHECK(pp_elf_symbols_has_symtab(s));
	pp_elf_symbols_free(s);

	/* without the file: not found, and the stripped binary alone cannot name it */
	t.root = nodbg;
	CHECK_EQ_U64((uint64_t)pp_debug_file_open(dirs, &t, NULL, 0), (uint64_t)-ENOENT);
	CHECK(name_after_adopt("prog_s", -1, g_hidden_addr, &s) == NULL);
	CHECK(pp_elf_symbols_source(s) != PP_SYMBOLS_DEBUG_FILE);
	pp_elf_symbols_free(s);
	pp_debug_dirs_free(dirs);
}

TEST(found_by_debuglink_in_each_place)
{
	static const char *const places[] = {"/app/prognoid.debug", "/app/.debug/prognoid.debug",
					     "/usr/lib/debug/app/prognoid.debug"};
	char root[PATH_MAX], found[PATH_MAX * 2], want[PATH_MAX * 2];
	struct pp_debug_dirs *dirs = pp_debug_dirs_new(NULL);

	NEED_FIXTURE();
	REQUIRE(dirs != NULL);
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		struct pp_elf_symbols *s = NULL;
		struct pp_debug_target t;
		int fd;

		fresh_dir(root, sizeof(root), "root-link");
		REQUIRE(place("prognoid.debug", root, places[i]) == 0);
		t = target_of(root, "/app/prognoid", "", "prognoid_s");
		CHECK_STR(t.debuglink, "prognoid.debug");
		CHECK(t.has_crc);
		fd = pp_debug_file_open(dirs, &t, found, sizeof(found));
		snprintf(want, sizeof(want), "%s:%s", root, places[i]);
		CHECK_STR(fd >= 0 ? found : "not found", want);
		CHECK_STR(name_after_adopt("prognoid_s", fd, g_hidden_addr_noid, &s),
			  "pp_hidden_worker");
		pp_elf_symbols_free(s);
	}
	pp_debug_dirs_free(dirs);
}

TEST(wrong_crc_or_build_id_is_refused)
{
	char root[PATH_MAX], rel[PATH_MAX], file[PATH_MAX + 64];
	struct pp_debug_dirs *dirs = pp_debug_dirs_new(NULL);
	struct pp_debug_target t;

	NEED_FIXTURE();
	REQUIRE(dirs != NULL);
	/* a debuglink file whose bytes changed: the CRC no longer matches */
	fresh_dir(root, sizeof(root), "root-crc");
	REQUIRE(place("prognoid.debug", root, "/app/prognoid.debug") == 0);
	snprintf(file, sizeof(file), "%s/app/prognoid.debug", root);
	REQUIRE(pp_test_sh("printf x >> '%s'", file) == 0);
	t = target_of(root, "/app/prognoid", "", "prognoid_s");
	CHECK_EQ_U64((uint64_t)pp_debug_file_open(dirs, &t, NULL, 0), (uint64_t)-ENOENT);

	/* another binary's debug file under this one's build id */
	fresh_dir(root, sizeof(root), "root-bid-wrong");
	build_id_rel(rel, sizeof(rel));
	REQUIRE(place("prognoid.debug", root, rel) == 0);
	t = target_of(root, "/app/prog", g_build_id, "prog_s");
	t.debuglink = "";
	CHECK_EQ_U64((uint64_t)pp_debug_file_open(dirs, &t, NULL, 0), (uint64_t)-ENOENT);

	/* a target with nothing to look for */
	t.build_id = "";
	CHECK_EQ_U64((uint64_t)pp_debug_file_open(dirs, &t, NULL, 0), (uint64_t)-EINVAL);
	pp_debug_dirs_free(dirs);
}

TEST(host_searched_after_the_root)
{
	char root[PATH_MAX], host[PATH_MAX], rel[PATH_MAX], found[PATH_MAX * 2];
	struct pp_debug_dirs *dirs;
	struct pp_debug_target t;
	int fd;

	NEED_FIXTURE();
	fresh_dir(root, sizeof(root), "root-empty");
	fresh_dir(host, sizeof(host), "hostdbg");
	snprintf(rel, sizeof(rel), "/.build-id/%.2s/%s.debug", g_build_id, g_build_id + 2);
	REQUIRE(place("prog.debug", host, rel) == 0);
	dirs = pp_debug_dirs_new(host);
	REQUIRE(dirs != NULL);
	t = target_of(root, "/app/prog", g_build_id, "prog_s");
	fd = pp_debug_file_open(dirs, &t, found, sizeof(found));
	CHECK(fd >= 0);
	CHECK(strncmp(found, "host:", 5) == 0);
	if (fd >= 0)
		close(fd);
	pp_debug_dirs_free(dirs);
}

TEST(links_resolve_inside_the_root_only)
{
	char root[PATH_MAX], host[PATH_MAX], rel[PATH_MAX], link[PATH_MAX * 2];
	char hostfile[PATH_MAX * 2];
	struct pp_debug_dirs *dirs = pp_debug_dirs_new(NULL);
	struct pp_debug_target t;
	int fd;

	NEED_FIXTURE();
	REQUIRE(dirs != NULL);
	/* an absolute link to a real debug file on the host: inside the root it names nothing */
	fresh_dir(root, sizeof(root), "root-escape");
	fresh_dir(host, sizeof(host), "host-target");
	REQUIRE(place("prog.debug", host, "/prog.debug") == 0);
	build_id_rel(rel, sizeof(rel));
	snprintf(link, sizeof(link), "%s%s", root, rel);
	snprintf(hostfile, sizeof(hostfile), "%s/prog.debug", host);
	REQUIRE(pp_test_sh("mkdir -p \"$(dirname '%s')\" && ln -s '%s' '%s'", link, hostfile,
			   link) == 0);
	t = target_of(root, "/app/prog", g_build_id, "prog_s");
	t.debuglink = "";
	CHECK_EQ_U64((uint64_t)pp_debug_file_open(dirs, &t, NULL, 0), (uint64_t)-ENOENT);

	/* a relative link inside the root (how Debian's .build-id tree is built) is followed */
	REQUIRE(place("prog.debug", root, "/usr/lib/debug/app/prog.debug") == 0);
	REQUIRE(pp_test_sh("ln -sf ../../app/prog.debug '%s'", link) == 0);
	fd = pp_debug_file_open(dirs, &t, NULL, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	pp_debug_dirs_free(dirs);
}

TEST(fifo_refused_without_blocking)
{
	char root[PATH_MAX], rel[PATH_MAX], fifo[PATH_MAX * 2];
	struct pp_debug_dirs *dirs = pp_debug_dirs_new(NULL);
	struct pp_debug_target t;

	NEED_FIXTURE();
	REQUIRE(dirs != NULL);
	fresh_dir(root, sizeof(root), "root-fifo");
	build_id_rel(rel, sizeof(rel));
	snprintf(fifo, sizeof(fifo), "%s%s", root, rel);
	REQUIRE(pp_test_sh("mkdir -p \"$(dirname '%s')\" && mkfifo '%s'", fifo, fifo) == 0);
	t = target_of(root, "/app/prog", g_build_id, "prog_s");
	t.debuglink = "";
	alarm(10); /* a blocking open would hang here: SIGALRM fails the test instead */
	CHECK_EQ_U64((uint64_t)pp_debug_file_open(dirs, &t, NULL, 0), (uint64_t)-ENOENT);
	alarm(0);
	pp_debug_dirs_free(dirs);
}

/* The table of the file at path, as the symbol loader asks for it: by an fd it opened. */
static const struct pp_elf_symbols *get_mapped(struct pp_symcache *c, const char *path,
					       const char *root, const char *name)
{
	const struct pp_elf_symbols *s;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	s = pp_symcache_get_fd(c, fd, root, name, NULL);
	close(fd);
	return s;
}

TEST(symcache_names_stripped_files_through_debug_dirs)
{
	char root[PATH_MAX], rel[PATH_MAX], path[PATH_MAX + 64];
	struct pp_debug_dirs *dirs = pp_debug_dirs_new(NULL);
	const struct pp_elf_symbols *s;
	struct pp_symcache_stats st;
	struct pp_symcache *c;

	NEED_FIXTURE();
	REQUIRE(dirs != NULL);
	fresh_dir(root, sizeof(root), "root-cache");
	build_id_rel(rel, sizeof(rel));
	REQUIRE(place("prog.debug", root, rel) == 0);
	REQUIRE(place("prog_s", root, "/app/prog") == 0);
	snprintf(path, sizeof(path), "%s/app/prog", root);
	c = pp_symcache_new(8, 64u << 20);
	REQUIRE(c != NULL);
	/* no debug directories: .dynsym alone */
	s = get_mapped(c, path, root, "/app/prog");
	REQUIRE(s != NULL);
	CHECK(pp_elf_symbols_lookup(s, g_hidden_addr, NULL) == NULL);
	CHECK_EQ_U64(pp_symcache_forget_build_id(c, g_build_id), 1);

	pp_symcache_set_debug_dirs(c, dirs);
	s = get_mapped(c, path, root, "/app/prog");
	REQUIRE(s != NULL);
	CHECK_STR(pp_elf_symbols_lookup(s, g_hidden_addr, NULL), "pp_hidden_worker");
	CHECK(pp_elf_symbols_source(s) == PP_SYMBOLS_DEBUG_FILE);
	pp_symcache_get_stats(c, &st);
	CHECK_EQ_U64(st.debug_files, 1);
	CHECK_EQ_U64(st.debug_missing, 1);

	/* addresses only: no symbol read, no debug file looked for */
	pp_symcache_forget_build_id(c, g_build_id);
	pp_symcache_set_open_flags(c, PP_ELF_OPEN_NO_SYMBOLS);
	s = get_mapped(c, path, root, "/app/prog");
	REQUIRE(s != NULL);
	CHECK(pp_elf_symbols_lookup(s, g_hidden_addr, NULL) == NULL);
	CHECK(pp_elf_symbols_source(s) == PP_SYMBOLS_NOT_READ);
	CHECK_STR(pp_elf_symbols_build_id(s), g_build_id);
	CHECK(pp_elf_symbols_segment_count(s) > 0);
	pp_symcache_get_stats(c, &st);
	CHECK_EQ_U64(st.debug_files, 1);
	pp_symcache_free(c);
	pp_debug_dirs_free(dirs);
}

TEST(debug_dirs_list)
{
	struct pp_debug_dirs *d;

	d = pp_debug_dirs_new("/a:/b/");
	CHECK(d != NULL);
	pp_debug_dirs_free(d);
	d = pp_debug_dirs_new("");
	CHECK(d != NULL);
	pp_debug_dirs_free(d);
	errno = 0;
	CHECK(pp_debug_dirs_new("relative") == NULL && errno == EINVAL);
	CHECK(pp_debug_dirs_new("/a::/b") == NULL && errno == EINVAL);
	CHECK(pp_debug_dirs_new("/a:/b:/c:/d:/e:/f:/g:/h:/i") == NULL && errno == EINVAL);
}

TEST(crc_is_zlibs)
{
	char path[] = "/tmp/pp-crc-XXXXXX";
	uint32_t crc = 0;
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	unlink(path);
	REQUIRE(write(fd, "123456789", 9) == 9);
	CHECK_EQ_U64(pp_debug_file_crc(fd, 1 << 20, &crc), 0);
	CHECK_EQ_U64(crc, 0xcbf43926u); /* the CRC-32 check value */
	CHECK_EQ_U64((uint64_t)pp_debug_file_crc(fd, 4, &crc), (uint64_t)-EFBIG);
	close(fd);
}

TEST_LIST = {
    {"found_by_build_id_inside_the_root", found_by_build_id_inside_the_root},
    {"found_by_debuglink_in_each_place", found_by_debuglink_in_each_place},
    {"wrong_crc_or_build_id_is_refused", wrong_crc_or_build_id_is_refused},
    {"host_searched_after_the_root", host_searched_after_the_root},
    {"links_resolve_inside_the_root_only", links_resolve_inside_the_root_only},
    {"fifo_refused_without_blocking", fifo_refused_without_blocking},
    {"symcache_names_stripped_files_through_debug_dirs",
     symcache_names_stripped_files_through_debug_dirs},
    {"debug_dirs_list", debug_dirs_list},
    {"crc_is_zlibs", crc_is_zlibs},
};
TEST_MAIN()
