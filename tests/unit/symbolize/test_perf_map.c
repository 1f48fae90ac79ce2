/*
 * Tests of JIT perf maps: the parser on good, garbage and split input, later entries winning,
 * the bounds, /proc/PID/status parsing, and the per-process cache against a proc tree built in
 * a temporary directory: a map found by the process's namespace pid inside its root, reread as
 * it grows, and hostile files (a link to another file, a FIFO, another user's file, a huge
 * file) refused or bounded without blocking.
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
#include "symbolize/perf_map.h"

static size_t feed_str(struct pp_perf_map *m, const char *s, int final)
{
	return pp_perf_map_feed(m, s, strlen(s), final);
}

TEST(parses_lines_and_names_addresses)
{
	struct pp_perf_map *m = pp_perf_map_new(1000, 1 << 20);
	struct pp_perf_map_stats st;
	uint64_t start = 0;

	REQUIRE(m != NULL);
	feed_str(m,
		 "7f0000001000 40 LazyCompile:*fib /app/fib.js:3\n"
		 "0x7f0000002000 0x20 Interpreted:java.lang.String::hashCode\n"
		 "7F0000003000 10 py::work:/app/w.py\r\n",
		 0);
	CHECK_STR(pp_perf_map_lookup(m, 0x7f0000001000, &start), "LazyCompile:*fib /app/fib.js:3");
	CHECK_EQ_U64(start, 0x7f0000001000);
	CHECK_STR(pp_perf_map_lookup(m, 0x7f000000103f, NULL), "LazyCompile:*fib /app/fib.js:3");
	CHECK(pp_perf_map_lookup(m, 0x7f0000001040, NULL) == NULL);
	CHECK_STR(pp_perf_map_lookup(m, 0x7f0000002010, NULL),
		  "Interpreted:java.lang.String::hashCode");
	CHECK_STR(pp_perf_map_lookup(m, 0x7f0000003000, NULL), "py::work:/app/w.py");
	CHECK(pp_perf_map_lookup(m, 0x1000, NULL) == NULL);
	pp_perf_map_get_stats(m, &st);
	CHECK_EQ_U64(st.entries, 3);
	CHECK_EQ_U64(st.bad_lines, 0);
	pp_perf_map_free(m);
}

TEST(garbage_lines_are_counted_and_skipped)
{
	struct pp_perf_map *m = pp_perf_map_new(1000, 1 << 20);
	struct pp_perf_map_stats st;
	char longline[PP_PERF_MAP_MAX_LINE + 100];

	REQUIRE(m != NULL);
	memset(longline, 'a', sizeof(longline) - 2);
	longline[sizeof(longline) - 2] = '\n';
	longline[sizeof(longline) - 1] = '\0';
	feed_str(m,
		 "hello world\n"
		 "1000 zz name\n"
		 "1000 0 zero_size\n"
		 "ffffffffffffffff 10 wraps\n"
		 "10000000000000000 10 too_many_digits\n"
		 "2000 10\n"
		 "3000 10 ok\x01name\x1b[31m\n"
		 "\n",
		 0);
	feed_str(m, longline, 0);
	feed_str(m, "4000 10 after_the_long_line\n", 0);
	pp_perf_map_get_stats(m, &st);
	CHECK_EQ_U64(st.bad_lines, 7);
	CHECK_EQ_U64(st.entries, 2);
	/* control bytes never reach a profile */
	CHECK_STR(pp_perf_map_lookup(m, 0x3000, NULL), "ok?name?[31m");
	CHECK_STR(pp_perf_map_lookup(m, 0x4000, NULL), "after_the_long_line");
	pp_perf_map_free(m);
}

TEST(split_input_and_long_line_across_feeds)
{
	struct pp_perf_map *m = pp_perf_map_new(1000, 1 << 20);
	const char *a = "5000 10 spl";
	struct pp_perf_map_stats st;
	char big[PP_PERF_MAP_MAX_LINE + 10];
	size_t used;

	REQUIRE(m != NULL);
	used = feed_str(m, a, 0);
	CHECK_EQ_U64(used, 0); /* no newline yet: handed again later */
	used = feed_str(m, "5000 10 split_name\n6000 8 x", 0);
	CHECK_EQ_U64(used, strlen("5000 10 split_name\n"));
	CHECK_STR(pp_perf_map_lookup(m, 0x5004, NULL), "split_name");
	CHECK_EQ_U64(feed_str(m, "6000 8 x", 1), 8); /* final: the last line needs no newline */
	CHECK_STR(pp_perf_map_lookup(m, 0x6000, NULL), "x");
	/* a garbage line cut by the read size is skipped up to its newline, not parsed in part */
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	feed_str(m, big, 0);
	feed_str(m, "7000 10 forged_tail_of_garbage\n8000 10 next\n", 0);
	pp_perf_map_get_stats(m, &st);
	CHECK_EQ_U64(st.bad_lines, 1);
	CHECK(pp_perf_map_lookup(m, 0x7000, NULL) == NULL);
	CHECK_STR(pp_perf_map_lookup(m, 0x8000, NULL), "next");
	pp_perf_map_free(m);
}

TEST(later_entries_win_for_reused_code)
{
	struct pp_perf_map *m = pp_perf_map_new(1000, 1 << 20);

	REQUIRE(m != NULL);
	feed_str(m, "1000 100 old_big\n1040 10 old_small\n", 0);
	CHECK_STR(pp_perf_map_lookup(m, 0x1044, NULL), "old_small");
	feed_str(m, "1000 100 new_big\n", 0);
	CHECK_STR(pp_perf_map_lookup(m, 0x1044, NULL), "new_big");
	CHECK_STR(pp_perf_map_lookup(m, 0x1000, NULL), "new_big");
	feed_str(m, "1040 10 newest_small\n", 0);
	CHECK_STR(pp_perf_map_lookup(m, 0x1044, NULL), "newest_small");
	CHECK_STR(pp_perf_map_lookup(m, 0x10f0, NULL), "new_big");
	pp_perf_map_free(m);
}

TEST(bounds_drop_and_count)
{
	struct pp_perf_map *m = pp_perf_map_new(3, 1 << 20);
	struct pp_perf_map_stats st;

	REQUIRE(m != NULL);
	feed_str(m, "1000 10 a\n2000 10 b\n3000 10 c\n4000 10 d\n5000 10 e\n", 0);
	pp_perf_map_get_stats(m, &st);
	CHECK_EQ_U64(st.entries, 3);
	CHECK_EQ_U64(st.dropped, 2);
	CHECK(pp_perf_map_lookup(m, 0x4000, NULL) == NULL);
	pp_perf_map_free(m);

	m = pp_perf_map_new(1000, 4096); /* not even one name chunk fits */
	REQUIRE(m != NULL);
	feed_str(m, "1000 10 a\n", 0);
	pp_perf_map_get_stats(m, &st);
	CHECK_EQ_U64(st.entries, 0);
	CHECK_EQ_U64(st.dropped, 1);
	CHECK(pp_perf_map_bytes(m) <= 4096);
	pp_perf_map_free(m);
}

TEST(status_gives_namespace_pid_and_uids)
{
	static const char ns[] = "Name:\tjava\nPid:\t4242\nPPid:\t1\n"
				 "Uid:\t1000\t1001\t1001\t1001\nGid:\t0\t0\t0\t0\n"
				 "NSpid:\t4242\t17\n";
	static const char old[] = "Pid:\t99\nUid:\t0\t0\t0\t0\n";
	uint32_t pid = 0, ruid = 0, euid = 0;

	CHECK_EQ_U64(pp_perf_map_parse_status(ns, strlen(ns), &pid, &ruid, &euid), 0);
	CHECK_EQ_U64(pid, 17);
	CHECK_EQ_U64(ruid, 1000);
	CHECK_EQ_U64(euid, 1001);
	CHECK_EQ_U64(pp_perf_map_parse_status(old, strlen(old), &pid, &ruid, &euid), 0);
	CHECK_EQ_U64(pid, 99);
	CHECK(pp_perf_map_parse_status("Pid:\t1\n", 7, &pid, &ruid, &euid) == -EINVAL);
	CHECK(pp_perf_map_parse_status("Pid:\tx\nUid:\t0\t0\n", 17, &pid, &ruid, &euid) == -EINVAL);
	CHECK(pp_perf_map_parse_status("Pid:\t99999999999\nUid:\t0\t0\n", 26, &pid, &ruid, &euid) ==
	      -EINVAL);
}

/* ---- the cache over a fake proc tree ---- */

static char g_proc[PATH_MAX];
static uint64_t g_now = 1000000000ull;

static uint64_t fake_now(void *ctx)
{
	(void)ctx;
	return g_now;
}

static void cleanup(void)
{
	if (g_proc[0])
		(void)pp_test_sh("rm -rf '%s'", g_proc);
}

/* A process 4242 known to itself as 17, running as uid 0, with an empty root. */
static int fake_proc(void)
{
	if (g_proc[0])
		return pp_test_sh("rm -rf '%s/4242/root/tmp' && mkdir -p '%s/4242/root/tmp'",
				  g_proc, g_proc);
	if (pp_test_mkdtemp(g_proc, sizeof(g_proc), "pp-pmap")) {
		return -1;
	}
	atexit(cleanup);
	return pp_test_sh(
	    "mkdir -p '%s/4242/root/tmp' && printf 'Pid:\\t4242\\nUid:\\t%u\\t%u\\t%u\\t%u\\n"
	    "NSpid:\\t4242\\t17\\n' > '%s/4242/status'",
	    g_proc, getuid(), getuid(), getuid(), getuid(), g_proc);
}

static struct pp_perf_maps *maps_new(uint64_t max_file_bytes)
{
	struct pp_perf_maps_opts o = {
	    .proc_root = g_proc,
	    .now_ns = fake_now,
	    .max_file_bytes = max_file_bytes,
	};

	return pp_perf_maps_new(&o);
}

TEST(cache_reads_the_map_by_namespace_pid_and_rereads_growth)
{
	struct pp_perf_maps_stats st;
	struct pp_perf_maps *c;

	REQUIRE(fake_proc() == 0);
	REQUIRE(pp_test_sh("printf '7f00001000 100 jit_one\\n' > '%s/4242/root/tmp/perf-17.map'",
			   g_proc) == 0);
	/* the host pid's name must not be what is read */
	REQUIRE(pp_test_sh("printf '7f00001000 100 wrong\\n' > '%s/4242/root/tmp/perf-4242.map'",
			   g_proc) == 0);
	c = maps_new(0);
	REQUIRE(c != NULL);
	CHECK_STR(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010), "jit_one");
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00002010) == NULL);
	REQUIRE(
	    pp_test_sh("printf '7f00002000 100 jit_two\\n7f0000' >> '%s/4242/root/tmp/perf-17.map'",
		       g_proc) == 0);
	/* within the recheck interval the file is not looked at again */
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00002010) == NULL);
	g_now += 2000000000ull;
	CHECK_STR(pp_perf_maps_lookup(c, 4242, 1, 0x7f00002010), "jit_two");
	/* the half-written line is finished later */
	REQUIRE(pp_test_sh("printf '3000 100 jit_three\\n' >> '%s/4242/root/tmp/perf-17.map'",
			   g_proc) == 0);
	g_now += 2000000000ull;
	CHECK_STR(pp_perf_maps_lookup(c, 4242, 1, 0x7f00003010), "jit_three");
	/* exec (a new generation): the old names are gone until the file is read again */
	REQUIRE(pp_test_sh("printf '7f00001000 100 after_exec\\n' > '%s/4242/root/tmp/perf-17.map'",
			   g_proc) == 0);
	CHECK_STR(pp_perf_maps_lookup(c, 4242, 2, 0x7f00001010), "after_exec");
	pp_perf_maps_get_stats(c, &st);
	CHECK_EQ_U64(st.files_read, 4);
	CHECK_EQ_U64(st.refused, 0);
	CHECK(pp_perf_maps_bytes(c) > 0);
	pp_perf_maps_forget(c, 4242);
	CHECK_EQ_U64(pp_perf_maps_bytes(c), 0);
	pp_perf_maps_free(c);
}

TEST(hostile_files_are_refused_without_blocking)
{
	struct pp_perf_maps_stats st;
	struct pp_perf_maps *c;
	char map[PATH_MAX + 64];

	REQUIRE(fake_proc() == 0);
	snprintf(map, sizeof(map), "%s/4242/root/tmp/perf-17.map", g_proc);
	c = maps_new(0);
	REQUIRE(c != NULL);
	alarm(20); /* a blocking open or read would hang: SIGALRM fails the test instead */

	/* a link to a file the agent can read and the process cannot */
	REQUIRE(
	    pp_test_sh("printf '7f00001000 100 secret_name\\n' > '%s/secret' && ln -s '%s/secret' "
		       "'%s'",
		       g_proc, g_proc, map) == 0);
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010) == NULL);
	/* even a relative link inside the root is refused */
	REQUIRE(pp_test_sh(
		    "rm -f '%s' && printf '7f00001000 100 linked\\n' > '%s/4242/root/tmp/real' && "
		    "ln -s real '%s'",
		    map, g_proc, map) == 0);
	g_now += 2000000000ull;
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010) == NULL);
	/* a FIFO nobody writes */
	REQUIRE(pp_test_sh("rm -f '%s' && mkfifo '%s'", map, map) == 0);
	g_now += 2000000000ull;
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010) == NULL);
	pp_perf_maps_get_stats(c, &st);
	CHECK_EQ_U64(st.refused, 3);
	CHECK_EQ_U64(st.named, 0);

	/* another user's file */
	REQUIRE(
	    pp_test_sh("rm -f '%s' && printf '7f00001000 100 theirs\\n' > '%s' && chown 65534 '%s'",
		       map, map, map) == 0);
	g_now += 2000000000ull;
	if (getuid() == 0) {
		CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010) == NULL);
		pp_perf_maps_get_stats(c, &st);
		CHECK_EQ_U64(st.refused, 4);
	}
	alarm(0);
	pp_perf_maps_free(c);
}

TEST(huge_file_is_read_up_to_the_bound)
{
	struct pp_perf_maps_stats st;
	struct pp_perf_maps *c;
	char map[PATH_MAX + 64];

	REQUIRE(fake_proc() == 0);
	snprintf(map, sizeof(map), "%s/4242/root/tmp/perf-17.map", g_proc);
	/* good lines, then 4 GiB of holes (NUL bytes, no newline), then a good line past it */
	REQUIRE(pp_test_sh("printf '7f00001000 100 first\\n' > '%s' && truncate -s 4G '%s' && "
			   "printf '7f00002000 100 past_the_bound\\n' >> '%s'",
			   map, map, map) == 0);
	c = maps_new(8u << 20);
	REQUIRE(c != NULL);
	alarm(20);
	CHECK_STR(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010), "first");
	for (int i = 0; i < 4; i++) {
		g_now += 2000000000ull;
		CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00002010) == NULL);
	}
	alarm(0);
	pp_perf_maps_get_stats(c, &st);
	CHECK_EQ_U64(st.truncated, 1);
	CHECK(st.bad_lines >= 1);
	CHECK(pp_perf_maps_bytes(c) < (1u << 20));
	pp_perf_maps_free(c);
	(void)pp_test_sh("rm -f '%s'", map);
}

TEST(no_map_is_rechecked_later)
{
	struct pp_perf_maps_stats st;
	struct pp_perf_maps *c;

	REQUIRE(fake_proc() == 0);
	c = maps_new(0);
	REQUIRE(c != NULL);
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010) == NULL);
	CHECK(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010) == NULL);
	pp_perf_maps_get_stats(c, &st);
	CHECK_EQ_U64(st.files_missing, 1);
	REQUIRE(pp_test_sh("printf '7f00001000 100 late\\n' > '%s/4242/root/tmp/perf-17.map'",
			   g_proc) == 0);
	g_now += 2000000000ull;
	CHECK_STR(pp_perf_maps_lookup(c, 4242, 1, 0x7f00001010), "late");
	/* a process that is gone has no status: nothing, no crash */
	CHECK(pp_perf_maps_lookup(c, 999999, 1, 0x7f00001010) == NULL);
	pp_perf_maps_free(c);
}

TEST_LIST = {
    {"parses_lines_and_names_addresses", parses_lines_and_names_addresses},
    {"garbage_lines_are_counted_and_skipped", garbage_lines_are_counted_and_skipped},
    {"split_input_and_long_line_across_feeds", split_input_and_long_line_across_feeds},
    {"later_entries_win_for_reused_code", later_entries_win_for_reused_code},
    {"bounds_drop_and_count", bounds_drop_and_count},
    {"status_gives_namespace_pid_and_uids", status_gives_namespace_pid_and_uids},
    {"cache_reads_the_map_by_namespace_pid_and_rereads_growth",
     cache_reads_the_map_by_namespace_pid_and_rereads_growth},
    {"hostile_files_are_refused_without_blocking", hostile_files_are_refused_without_blocking},
    {"huge_file_is_read_up_to_the_bound", huge_file_is_read_up_to_the_bound},
    {"no_map_is_rechecked_later", no_map_is_rechecked_later},
};
TEST_MAIN()
