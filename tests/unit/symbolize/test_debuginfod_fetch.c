/*
 * Tests of the debuginfod fetcher against a real server: Debian's debuginfod, started on
 * 127.0.0.1 over a directory holding two test programs' debug files. A debug file arrives in
 * the background (the first ask answers -EAGAIN) and names the stripped program's static
 * function; a miss is asked for once; the on-disk cache stays within its bound, a pinned file
 * outside it; a server that is down and a missing library fail cleanly. Skipped, with the
 * reason, without the server.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/debuginfod_fetch.h"
#include "symbolize/elf_symbols.h"

static char g_dir[512];
static int g_state;
static const char *g_skip_reason;
static int g_port;
static char g_id1[PP_BUILD_ID_HEX_SIZE], g_id2[PP_BUILD_ID_HEX_SIZE];
static unsigned long long g_hidden;

static void cleanup(void)
{
	if (!g_dir[0])
		return;
	(void)pp_test_sh("[ -f '%s/server.pid' ] && kill $(cat '%s/server.pid') 2>/dev/null", g_dir,
			 g_dir);
	(void)pp_test_sh("rm -rf '%s'", g_dir);
}

static int read_id(const char *file, char *out)
{
	char path[PATH_MAX];
	struct pp_elf_symbols *s;

	snprintf(path, sizeof(path), "%s/%s", g_dir, file);
	s = pp_elf_symbols_open_path(path);
	if (!s)
		return -1;
	snprintf(out, PP_BUILD_ID_HEX_SIZE, "%s", pp_elf_symbols_build_id(s));
	pp_elf_symbols_free(s);
	return out[0] ? 0 : -1;
}

/* A port of 127.0.0.1 the kernel says is free now, for the server to take (one derived from
 * the pid may be taken). */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port ? port : 20000 + (int)(getpid() % 20000);
}

static int fixture(void)
{
	char cmd[PATH_MAX];
	FILE *p;

	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_sh("command -v debuginfod >/dev/null && command -v curl >/dev/null") != 0) {
		g_skip_reason = "no debuginfod server (Debian package debuginfod) or curl";
		return g_state;
	}
	if (pp_test_mkdtemp(g_dir, sizeof(g_dir), "pp-dbgd")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	atexit(cleanup);
	g_skip_reason = "cc or objcopy failed";
	if (pp_test_sh(
		"cd '%s' && mkdir srv && printf '%%s\\n' "
		"'__attribute__((noinline)) static int pp_hidden_worker(int x)' "
		"'{ int s = 0; for (int i = 0; i < x; i++) s += i ^ (s >> 2); return s; }' "
		"'int main(int c, char **v) { (void)v; return pp_hidden_worker(c) & ID; }' > p.c "
		"&& "
		"cc -O1 -DID=1 -Wl,--build-id -o p1 p.c && cc -O1 -DID=3 -Wl,--build-id -o p2 p.c "
		"&& objcopy --only-keep-debug p1 srv/p1.debug && "
		"objcopy --only-keep-debug p2 srv/p2.debug && objcopy --strip-all p1 p1_s",
		g_dir))
		return g_state;
	if (read_id("p1", g_id1) || read_id("p2", g_id2)) {
		g_skip_reason = "the test programs have no build id";
		return g_state;
	}
	snprintf(cmd, sizeof(cmd), "nm '%s/p1' | awk '$3 == \"pp_hidden_worker\" { print $1 }'",
		 g_dir);
	p = popen(cmd, "r");
	if (!p || fscanf(p, "%llx", &g_hidden) != 1)
		g_hidden = 0;
	if (p)
		pclose(p);
	g_port = free_port();
	/* the server indexes srv/ at start; ready once it serves the first file */
	g_skip_reason = "debuginfod did not start or index the test files within 30 s";
	if (pp_test_sh("cd '%s' && (debuginfod -F srv -p %d -d '%s/db.sqlite' >server.log 2>&1 & "
		       "echo $! > server.pid) && for i in $(seq 150); do "
		       "curl -sf -o /dev/null http://127.0.0.1:%d/buildid/%s/debuginfo && exit 0; "
		       "sleep 0.2; done; exit 1",
		       g_dir, g_port, g_dir, g_port, g_id1))
		return g_state;
	g_skip_reason = NULL;
	g_state = 1;
	return g_state;
}

#define NEED_SERVER()                                                                              \
	do {                                                                                       \
		if (fixture() != 1)                                                                \
			SKIP(g_skip_reason);                                                       \
	} while (0)

static struct pp_debuginfod *fetcher(const char *cache, uint64_t max_bytes, int port)
{
	struct pp_debuginfod_opts o = {.cache_max_bytes = max_bytes, .timeout_s = 10};
	char urls[64], dir[PATH_MAX];

	snprintf(urls, sizeof(urls), "http://127.0.0.1:%d", port);
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, cache);
	o.urls = urls;
	o.cache_dir = dir;
	return pp_debuginfod_new(&o);
}

TEST(debug_file_arrives_in_the_background_and_names_frames)
{
	char ready[4][PP_BUILD_ID_HEX_SIZE];
	struct pp_debuginfod_stats st;
	struct pp_elf_symbols *s, *dbg;
	struct pp_debuginfod *d;
	char path[PATH_MAX];
	int fd;

	NEED_SERVER();
	d = fetcher("cache1", 0, g_port);
	REQUIRE(d != NULL);
	CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, g_id1), (uint64_t)-EAGAIN);
	/* asked again: still waiting, or (this thread descheduled meanwhile) arrived */
	fd = pp_debuginfod_fetch(d, g_id1);
	CHECK(fd == -EAGAIN || fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_U64(pp_debuginfod_wait_idle(d, 20000), 0);
	CHECK_EQ_U64(pp_debuginfod_take_ready(d, ready, 4), 1);
	CHECK_STR(ready[0], g_id1);
	CHECK_EQ_U64(pp_debuginfod_take_ready(d, ready, 4), 0);
	fd = pp_debuginfod_fetch(d, g_id1);
	REQUIRE(fd >= 0);
	dbg = pp_elf_symbols_open_fd(fd);
	close(fd);
	snprintf(path, sizeof(path), "%s/p1_s", g_dir);
	s = pp_elf_symbols_open_path(path);
	REQUIRE(s && dbg);
	CHECK(pp_elf_symbols_lookup(s, g_hidden, NULL) == NULL);
	CHECK_EQ_U64(pp_elf_symbols_adopt(s, dbg, PP_SYMBOLS_DEBUGINFOD), 0);
	CHECK_STR(pp_elf_symbols_lookup(s, g_hidden, NULL), "pp_hidden_worker");
	pp_elf_symbols_free(s);
	pp_debuginfod_get_stats(d, &st);
	CHECK_EQ_U64(st.requests, 1);
	CHECK_EQ_U64(st.found, 1);
	CHECK_EQ_U64(st.pending, 0);
	pp_debuginfod_free(d);
}

TEST(a_miss_is_asked_for_once)
{
	static const char missing[] = "00112233445566778899aabbccddeeff00112233";
	struct pp_debuginfod_stats st;
	struct pp_debuginfod *d;

	NEED_SERVER();
	d = fetcher("cache2", 0, g_port);
	REQUIRE(d != NULL);
	CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, missing), (uint64_t)-EAGAIN);
	CHECK_EQ_U64(pp_debuginfod_wait_idle(d, 20000), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, missing), (uint64_t)-ENOENT);
	pp_debuginfod_get_stats(d, &st);
	CHECK_EQ_U64(st.requests, 1);
	CHECK_EQ_U64(st.not_found, 1);
	/* not a build id at all: refused before anything is asked */
	CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, "../../etc/passwd"), (uint64_t)-EINVAL);
	CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, "ABCD"), (uint64_t)-EINVAL);
	pp_debuginfod_free(d);
}

/* Both test files downloaded into d, one after the other; its stats then in st. */
static void fetch_both(struct pp_debuginfod *d, struct pp_debuginfod_stats *st)
{
	pp_debuginfod_fetch(d, g_id1);
	CHECK_EQ_U64(pp_debuginfod_wait_idle(d, 20000), 0);
	pp_debuginfod_fetch(d, g_id2);
	CHECK_EQ_U64(pp_debuginfod_wait_idle(d, 20000), 0);
	pp_debuginfod_get_stats(d, st);
	CHECK_EQ_U64(st->found, 2);
}

TEST(cache_stays_within_its_bound)
{
	struct pp_debuginfod_stats st;
	struct pp_debuginfod *d;
	int fd;

	NEED_SERVER();
	/* room for one debug file: the second download pushes the first out */
	d = fetcher("cache3", 12 << 10, g_port);
	REQUIRE(d != NULL);
	fetch_both(d, &st);
	CHECK(st.cache_removed >= 1);
	CHECK(st.cache_bytes <= 12 << 10);
	fd = pp_debuginfod_fetch(d, g_id2); /* the newest is kept */
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	pp_debuginfod_free(d);
}

/* The running kernel's image: pinned, it is neither removed nor counted by the bound. */
TEST(a_pinned_file_stays_outside_the_bound)
{
	struct pp_debuginfod_stats st;
	struct pp_debuginfod *d;
	int fd;

	NEED_SERVER();
	d = fetcher("cache5", 12 << 10, g_port);
	REQUIRE(d != NULL);
	CHECK_EQ_U64(pp_debuginfod_pin(d, "not-hex"), (uint64_t)-EINVAL);
	CHECK_EQ_U64(pp_debuginfod_pin(d, g_id1), 0);
	fetch_both(d, &st);
	CHECK_EQ_U64(st.cache_removed, 0); /* as cache_stays_within_its_bound's, but pinned */
	CHECK(st.cache_bytes > 0 && st.cache_bytes <= 12 << 10);
	fd = pp_debuginfod_fetch(d, g_id1);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	pp_debuginfod_free(d);
}

TEST(server_down_and_missing_library)
{
	struct pp_debuginfod_opts o = {.urls = "http://127.0.0.1:1", .library = "libpp-none.so.9"};
	struct pp_debuginfod_stats st;
	struct pp_debuginfod *d;

	NEED_SERVER();
	errno = 0;
	CHECK(pp_debuginfod_new(&o) == NULL && errno == ENOENT);
	o.urls = "";
	o.library = NULL;
	CHECK(pp_debuginfod_new(&o) == NULL && errno == EINVAL);
	d = fetcher("cache4", 0, 1); /* nothing listens on port 1 */
	REQUIRE(d != NULL);
	CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, g_id1), (uint64_t)-EAGAIN);
	CHECK_EQ_U64(pp_debuginfod_wait_idle(d, 20000), 0);
	CHECK_EQ_U64((uint64_t)pp_debuginfod_fetch(d, g_id1), (uint64_t)-EIO);
	pp_debuginfod_get_stats(d, &st);
	CHECK_EQ_U64(st.errors, 1);
	pp_debuginfod_free(d);
}

TEST_LIST = {
    {"debug_file_arrives_in_the_background_and_names_frames",
     debug_file_arrives_in_the_background_and_names_frames},
    {"a_miss_is_asked_for_once", a_miss_is_asked_for_once},
    {"cache_stays_within_its_bound", cache_stays_within_its_bound},
    {"a_pinned_file_stays_outside_the_bound", a_pinned_file_stays_outside_the_bound},
    {"server_down_and_missing_library", server_down_and_missing_library},
};
TEST_MAIN()
