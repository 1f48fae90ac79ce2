/*
 * Tests of the per-process cache. Fixture processes live in tests/data/proc/<case>/<pid>/; each
 * test builds a proc root in a temporary directory out of symlinks to them, so "the process
 * exec'ed" or "the pid now belongs to someone else" is one symlink swap. The clock is injected,
 * so rate limits and the negative cache are tested without sleeping. Live cases fork children
 * and read them through the real /proc.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "process/proc_cache.h"

#define MS 1000000ull

struct fake_clock {
	uint64_t now;
};

static uint64_t fake_now(void *ctx)
{
	return ((struct fake_clock *)ctx)->now;
}

struct fixture_root {
	char dir[64];
};

static int root_init(struct fixture_root *r)
{
	snprintf(r->dir, sizeof(r->dir), "/tmp/pp-proc-cache-XXXXXX");
	return mkdtemp(r->dir) ? 0 : -1;
}

/* Make <root>/<pid> the fixture process tests/data/proc/<fixture>/<pid>. */
static int root_set(struct fixture_root *r, uint32_t pid, const char *fixture)
{
	char link[128], target[PATH_MAX];

	snprintf(link, sizeof(link), "%s/%u", r->dir, pid);
	snprintf(target, sizeof(target), "%s/proc/%s/%u", PP_TEST_DATA_DIR, fixture, pid);
	unlink(link);
	return symlink(target, link);
}

static void root_remove(struct fixture_root *r, uint32_t pid)
{
	char link[128];

	snprintf(link, sizeof(link), "%s/%u", r->dir, pid);
	unlink(link);
}

static void root_fini(struct fixture_root *r, const uint32_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		root_remove(r, pids[i]);
	rmdir(r->dir);
}

static struct pp_proc_cache *cache_new(const char *root, size_t cap, struct fake_clock *clk)
{
	struct pp_proc_cache_opts o = {
	    .proc_root = root,
	    .capacity = cap,
	    .negative_ttl_ns = 1000 * MS,
	    .reload_min_gap_ns = 200 * MS,
	    .now_ns = clk ? fake_now : NULL,
	    .clock_ctx = clk,
	};

	return pp_proc_cache_new(&o);
}

static struct pp_proc_cache_stats stats(const struct pp_proc_cache *c)
{
	struct pp_proc_cache_stats s;

	pp_proc_cache_get_stats(c, &s);
	return s;
}

TEST(stat_parse)
{
	static const char tricky[] = "777 (evil) S 1 (x) R 1234 777 777 0 -1 4194304 1204 0 3 0 "
				     "25 7 0 0 20 0 4 0 7777 228855808 3281";
	static const char kthread[] = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 "
				      "1 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 "
				      "0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
	struct pp_proc_stat st;

	REQUIRE(pp_proc_stat_parse(tricky, strlen(tricky), &st) == 0);
	CHECK_STR(st.comm, "evil) S 1 (x");
	CHECK(st.state == 'R');
	CHECK_EQ_U64(st.ppid, 1234);
	CHECK_EQ_U64(st.flags, 4194304);
	CHECK_EQ_U64(st.start_time, 7777);

	REQUIRE(pp_proc_stat_parse(kthread, strlen(kthread), &st) == 0);
	CHECK_STR(st.comm, "kthreadd");
	CHECK_EQ_U64(st.flags & 0x00200000, 0x00200000);
	CHECK_EQ_U64(st.start_time, 1);

	/* Cut before field 22, or without a comm: rejected, never read past len. */
	CHECK(pp_proc_stat_parse(tricky, strlen(tricky) - 20, &st) == -EINVAL);
	CHECK(pp_proc_stat_parse("12 cat S 1", 10, &st) == -EINVAL);
	CHECK(pp_proc_stat_parse("12 (cat", 7, &st) == -EINVAL);
	CHECK(pp_proc_stat_parse("", 0, &st) == -EINVAL);
	/* Field 22 is the last one wanted: a stat ending right there parses. */
	REQUIRE(pp_proc_stat_parse(tricky, strlen(tricky) - 15, &st) == 0);
	CHECK_EQ_U64(st.start_time, 7777);
	/* A very long comm is truncated, the fields after it still parse. */
	{
		char buf[512];
		int n = snprintf(buf, sizeof(buf),
				 "9 (%0100d) S 1 1 1 0 -1 64 0 0 0 0 0 0 0 0 20 0 1 0 4242 0", 0);

		REQUIRE(pp_proc_stat_parse(buf, (size_t)n, &st) == 0);
		CHECK_EQ_U64(strlen(st.comm), PP_PROC_COMM_LEN - 1);
		CHECK_EQ_U64(st.start_time, 4242);
	}
}

TEST(loads_fixture_process)
{
	static const uint32_t pids[] = {1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 5 * MS};
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	const struct pp_map_entry *e;
	struct pp_proc_cache_stats s;

	REQUIRE(root_init(&r) == 0);
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);

	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	CHECK_EQ_U64(p->pid, 1234);
	CHECK_EQ_U64(p->start_time, 5000);
	CHECK_STR(p->comm, "demo server");
	CHECK_STR(p->exe, "/opt/demo/bin/demo server");
	CHECK_EQ_U64(p->flags, 0);
	CHECK_EQ_U64(p->loaded_ns, 5 * MS);
	CHECK_EQ_U64(p->maps.n, 16);
	e = pp_proc_cache_find_map(c, p, 0x55d4c0a02000ull + 0x123);
	REQUIRE(e != NULL);
	CHECK_STR(e->path, "/opt/demo/bin/demo server");
	CHECK(e->perms & PP_MAP_EXEC);
	CHECK_EQ_U64(pp_map_file_offset(e, 0x55d4c0a02123ull), 0x2123);
	e = pp_proc_cache_find_map(c, p, 0x7f3a1c3f4010ull);
	REQUIRE(e != NULL);
	CHECK_EQ_U64(e->kind, PP_MAP_KIND_VDSO);

	/* A second get is a hit on the same entry and reads nothing. */
	CHECK(pp_proc_cache_get(c, 1234) == p);
	s = stats(c);
	CHECK_EQ_U64(s.misses, 1);
	CHECK_EQ_U64(s.hits, 1);
	CHECK_EQ_U64(s.loads, 1);
	CHECK_EQ_U64(pp_proc_cache_count(c), 1);

	pp_proc_cache_free(c);
	root_fini(&r, pids, 1);
}

TEST(kthread_and_tricky_process)
{
	static const uint32_t pids[] = {2, 777};
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	struct pp_proc_cache_stats s;

	REQUIRE(root_init(&r) == 0);
	REQUIRE(root_set(&r, 2, "basic") == 0);
	REQUIRE(root_set(&r, 777, "basic") == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);

	p = pp_proc_cache_get(c, 2);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "kthreadd");
	CHECK_STR(p->exe, "");
	CHECK(p->flags & PP_PROC_F_KTHREAD);
	CHECK_EQ_U64(p->maps.n, 0);
	/* A kernel thread has no user mappings: no reread, however late. */
	clk.now = 10000 * MS;
	errno = 0;
	CHECK(pp_proc_cache_find_map(c, p, 0x400000) == NULL);
	CHECK_EQ_U64(errno, ENOENT);
	CHECK_EQ_U64(stats(c).reloads_for_unplaced_addr, 0);

	p = pp_proc_cache_get(c, 777);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "evil) S 1 (x");
	CHECK_EQ_U64(p->start_time, 7777);
	CHECK_STR(p->exe, "/tmp/payload");
	CHECK(p->flags & PP_PROC_F_EXE_DELETED);
	REQUIRE(p->maps.n == 3);
	CHECK_EQ_U64(p->maps.bad_lines, 1);
	CHECK_STR(p->maps.entries[1].path, "/tmp/payload");
	CHECK_EQ_U64(p->maps.entries[1].deleted, 1);
	s = stats(c);
	CHECK_EQ_U64(s.maps_bad_lines, 1);
	CHECK_EQ_U64(s.loads, 2);

	pp_proc_cache_free(c);
	root_fini(&r, pids, 2);
}

TEST(exec_reloads_on_next_get)
{
	static const uint32_t pids[] = {1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	uint64_t gen;

	REQUIRE(root_init(&r) == 0);
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	gen = p->generation;

	/* The process exec'ed, but until we are told so the cached image stands. */
	REQUIRE(root_set(&r, 1234, "exec") == 0);
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "demo server");

	pp_proc_cache_on_exec(c, 1234);
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	CHECK_EQ_U64(p->flags, 0);
	CHECK_STR(p->comm, "python3");
	CHECK_STR(p->exe, "/usr/bin/python3.11");
	CHECK_EQ_U64(p->start_time, 5000);
	CHECK(p->generation != gen);
	REQUIRE(p->maps.n == 3);
	CHECK_STR(pp_proc_cache_find_map(c, p, 0x5600aa06d000ull)->path, "/usr/bin/python3.11");
	/* The old image's addresses are gone. */
	CHECK(pp_maps_find(&p->maps, 0x55d4c0a02000ull) == NULL);
	CHECK_EQ_U64(stats(c).pid_reuse, 0);
	CHECK_EQ_U64(stats(c).loads, 2);

	pp_proc_cache_free(c);
	root_fini(&r, pids, 1);
}

/*
 * With a ring buffer per CPU, a sample of the old image can arrive after the exec event: it
 * gets the old image (no reload); the first sample taken after the exec reloads.
 */
TEST(samples_before_an_exec_keep_the_old_image)
{
	static const uint32_t pids[] = {1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	uint64_t gen;

	REQUIRE(root_init(&r) == 0);
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);
	p = pp_proc_cache_get_at(c, 1234, 1000);
	REQUIRE(p != NULL);
	gen = p->generation;

	REQUIRE(root_set(&r, 1234, "exec") == 0);
	pp_proc_cache_on_exec_at(c, 1234, 5000);
	/* taken at 4999, drained after the exec event: the old image, not reloaded */
	p = pp_proc_cache_get_at(c, 1234, 4999);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "demo server");
	CHECK_EQ_U64(p->generation, gen);
	CHECK(pp_proc_cache_find_map(c, p, 0x55d4c0a02000ull) != NULL);
	CHECK_EQ_U64(stats(c).loads, 1);
	CHECK_EQ_U64(stats(c).pre_exec_hits, 1);
	/* taken at the exec or later: the new image */
	p = pp_proc_cache_get_at(c, 1234, 5000);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "python3");
	CHECK(p->generation != gen);
	CHECK_EQ_U64(stats(c).loads, 2);
	/* Once reloaded the old image is gone: a late old sample gets the new one. */
	p = pp_proc_cache_get_at(c, 1234, 4000);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "python3");
	/* A new process under the pid reloads, even for a sample older than the last exec. */
	pp_proc_cache_on_exec_at(c, 1234, 9000);
	pp_proc_cache_on_fork(c, 1234);
	p = pp_proc_cache_get_at(c, 1234, 8000);
	REQUIRE(p != NULL);
	CHECK_EQ_U64(stats(c).loads, 3);
	/* An exec without a time (0) reloads on the next get, whatever the sample's time. */
	pp_proc_cache_on_exec_at(c, 1234, 0);
	p = pp_proc_cache_get_at(c, 1234, 4000);
	REQUIRE(p != NULL);
	CHECK_EQ_U64(stats(c).loads, 4);

	pp_proc_cache_free(c);
	root_fini(&r, pids, 1);
}

TEST(exit_keeps_entry_and_detects_pid_reuse)
{
	static const uint32_t pids[] = {1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 1000 * MS};
	struct pp_proc_cache *c;
	const struct pp_proc *p;

	REQUIRE(root_init(&r) == 0);
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);

	pp_proc_cache_on_exit(c, 1234);
	root_remove(&r, 1234);
	/* Queued samples of the dead process still resolve, even after /proc lost it. */
	clk.now += 500 * MS;
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	CHECK(p->flags & PP_PROC_F_EXITED);
	CHECK_STR(p->comm, "demo server");
	CHECK_STR(pp_proc_cache_find_map(c, p, 0x55d4c0a02000ull)->path,
		  "/opt/demo/bin/demo server");
	/* An exited process's maps are never reread. */
	CHECK(pp_proc_cache_find_map(c, p, 0x1000) == NULL);
	CHECK_EQ_U64(stats(c).reloads_for_unplaced_addr, 0);

	/* A new process takes the pid; within the recheck gap the old entry still answers. */
	REQUIRE(root_set(&r, 1234, "reuse") == 0);
	clk.now += 100 * MS;
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "demo server");
	clk.now += 200 * MS;
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "other");
	CHECK_STR(p->exe, "/usr/bin/other");
	CHECK_EQ_U64(p->start_time, 9000);
	CHECK_EQ_U64(p->flags & PP_PROC_F_EXITED, 0);
	CHECK_STR(pp_proc_cache_find_map(c, p, 0x560000101000ull)->path, "/usr/bin/other");
	CHECK_EQ_U64(stats(c).pid_reuse, 1);

	pp_proc_cache_free(c);
	root_fini(&r, pids, 1);
}

TEST(eviction_lru_and_exited_first)
{
	static const uint32_t pids[] = {2, 777, 1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache *c;
	struct pp_proc_cache_stats s;

	REQUIRE(root_init(&r) == 0);
	for (size_t i = 0; i < 3; i++)
		REQUIRE(root_set(&r, pids[i], "basic") == 0);

	/* Plain LRU: A B A C evicts B. */
	c = cache_new(r.dir, 2, &clk);
	REQUIRE(c != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	REQUIRE(pp_proc_cache_get(c, 2) != NULL);
	s = stats(c);
	CHECK_EQ_U64(s.evictions, 1);
	CHECK_EQ_U64(pp_proc_cache_count(c), 2);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	CHECK_EQ_U64(stats(c).hits, s.hits + 1);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	CHECK_EQ_U64(stats(c).misses, s.misses + 1);
	pp_proc_cache_free(c);

	/* An exited entry goes first even when it was used last. */
	c = cache_new(r.dir, 2, &clk);
	REQUIRE(c != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	pp_proc_cache_on_exit(c, 777);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	REQUIRE(pp_proc_cache_get(c, 2) != NULL);
	s = stats(c);
	CHECK_EQ_U64(s.evictions, 1);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	CHECK_EQ_U64(stats(c).hits, s.hits + 1);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	CHECK_EQ_U64(stats(c).misses, s.misses + 1);
	CHECK_EQ_U64(stats(c).evictions, 2);
	pp_proc_cache_free(c);

	/* Many pids through a capacity of 2: the bound holds. */
	c = cache_new(r.dir, 2, &clk);
	REQUIRE(c != NULL);
	for (int round = 0; round < 10; round++)
		for (size_t i = 0; i < 3; i++)
			REQUIRE(pp_proc_cache_get(c, pids[i]) != NULL);
	CHECK_EQ_U64(pp_proc_cache_count(c), 2);
	CHECK_EQ_U64(stats(c).evictions, 28);
	pp_proc_cache_free(c);
	root_fini(&r, pids, 3);
}

/* The byte bound: entries are counted by their maps and paths; past it the LRU ones go. */
/* An exited process's entry goes exited_ttl_ns after the exit, not when the cache is full. */
TEST(exited_entries_expire)
{
	static const uint32_t pids[] = {2, 777, 1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 1000 * MS};
	struct pp_proc_cache_opts o = {
	    .capacity = 100, .exited_ttl_ns = 30000 * MS, .now_ns = fake_now, .clock_ctx = &clk};
	struct pp_proc_cache *c;

	REQUIRE(root_init(&r) == 0);
	for (size_t i = 0; i < 3; i++)
		REQUIRE(root_set(&r, pids[i], "basic") == 0);
	o.proc_root = r.dir;
	c = pp_proc_cache_new(&o);
	REQUIRE(c != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	pp_proc_cache_on_exit(c, 1234);
	clk.now += 29000 * MS;
	/* samples in flight still find the exited process */
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	root_remove(&r, 2);
	CHECK(pp_proc_cache_get(c, 2) == NULL); /* a miss, before the ttl: nothing expires */
	CHECK_EQ_U64(pp_proc_cache_count(c), 2);
	clk.now += 2000 * MS;
	REQUIRE(root_set(&r, 2, "basic") == 0);
	REQUIRE(pp_proc_cache_get(c, 2) != NULL); /* a miss past the ttl: 1234 goes */
	CHECK_EQ_U64(stats(c).expired, 1);
	CHECK_EQ_U64(pp_proc_cache_count(c), 2);
	CHECK_EQ_U64(stats(c).evictions, 0);
	pp_proc_cache_free(c);
	root_fini(&r, pids, 3);
}

/* The bytes of pid's entry alone. */
static size_t entry_bytes(struct pp_proc_cache_opts o, uint32_t pid)
{
	struct pp_proc_cache *c;
	size_t b = 0;

	o.max_bytes = 0;
	c = pp_proc_cache_new(&o);
	if (c && pp_proc_cache_get(c, pid))
		b = pp_proc_cache_bytes(c);
	pp_proc_cache_free(c);
	return b;
}

/* The byte bound: entries are counted by their maps and paths; past it the LRU ones go. */
TEST(byte_bound_evicts_lru)
{
	static const uint32_t pids[] = {2, 777, 1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache_opts o = {.capacity = 100, .now_ns = fake_now, .clock_ctx = &clk};
	struct pp_proc_cache *c;
	size_t b[3];

	REQUIRE(root_init(&r) == 0);
	for (size_t i = 0; i < 3; i++)
		REQUIRE(root_set(&r, pids[i], "basic") == 0);
	o.proc_root = r.dir;
	for (size_t i = 0; i < 3; i++)
		b[i] = entry_bytes(o, pids[i]);
	/* an entry holds its maps (16 in 1234's, 4 in 777's, none in the kernel thread 2's) */
	CHECK(b[2] > sizeof(struct pp_proc) + 16 * sizeof(struct pp_map_entry));
	CHECK(b[1] > sizeof(struct pp_proc) + 4 * sizeof(struct pp_map_entry));
	CHECK(b[0] > sizeof(struct pp_proc) && b[0] < b[1]);
	/* 1234 and 777 fit, not with 2 as well */
	o.max_bytes = b[2] + b[1] + b[0] / 2;
	c = pp_proc_cache_new(&o);
	REQUIRE(c != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	REQUIRE(pp_proc_cache_get(c, 777) != NULL);
	CHECK_EQ_U64(pp_proc_cache_bytes(c), b[2] + b[1]);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL); /* 777 is now the least recently used */
	REQUIRE(pp_proc_cache_get(c, 2) != NULL);
	CHECK_EQ_U64(stats(c).evictions, 1);
	CHECK_EQ_U64(pp_proc_cache_count(c), 2);
	CHECK_EQ_U64(pp_proc_cache_bytes(c), b[2] + b[0]);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	CHECK_EQ_U64(stats(c).loads, 3); /* 1234 stayed */
	for (int round = 0; round < 10; round++)
		for (size_t i = 0; i < 3; i++)
			REQUIRE(pp_proc_cache_get(c, pids[i]) != NULL);
	CHECK(pp_proc_cache_bytes(c) <= o.max_bytes);
	CHECK(stats(c).evictions > 10);
	pp_proc_cache_free(c);

	/* a bound below one entry: the entry just loaded stays, alone */
	o.max_bytes = b[2] / 2;
	c = pp_proc_cache_new(&o);
	REQUIRE(c != NULL);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	{
		const struct pp_proc *p = pp_proc_cache_get(c, 777);

		REQUIRE(p != NULL);
		CHECK_EQ_U64(p->pid, 777);
		CHECK(p->maps.n > 0);
	}
	CHECK_EQ_U64(pp_proc_cache_count(c), 1);
	CHECK_EQ_U64(pp_proc_cache_bytes(c), b[1]);
	pp_proc_cache_free(c);
	root_fini(&r, pids, 3);
}

TEST(negative_cache)
{
	static const uint32_t pids[] = {1234};
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache *c;
	struct pp_proc_cache_stats s;

	REQUIRE(root_init(&r) == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);

	errno = 0;
	CHECK(pp_proc_cache_get(c, 1234) == NULL);
	CHECK_EQ_U64(errno, ESRCH);
	/* A burst of samples of the dead pid reads /proc once. */
	for (int i = 0; i < 100; i++) {
		errno = 0;
		CHECK(pp_proc_cache_get(c, 1234) == NULL);
		CHECK_EQ_U64(errno, ESRCH);
		clk.now += 5 * MS;
	}
	s = stats(c);
	CHECK_EQ_U64(s.loads, 1);
	CHECK_EQ_U64(s.gone, 1);
	CHECK_EQ_U64(s.misses, 1);
	CHECK_EQ_U64(s.negative_hits, 100);

	/* The pid appears (reused): it stays negative until the TTL ends... */
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	CHECK(pp_proc_cache_get(c, 1234) == NULL);
	clk.now += 500 * MS;
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);
	CHECK_EQ_U64(stats(c).loads, 2);

	/* ...unless a fork of that pid is reported, which forgets the negative entry at once. */
	pp_proc_cache_free(c);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);
	root_remove(&r, 1234);
	CHECK(pp_proc_cache_get(c, 1234) == NULL);
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	pp_proc_cache_on_fork(c, 1234);
	REQUIRE(pp_proc_cache_get(c, 1234) != NULL);

	/* An exec'ed process that then vanished is dropped and remembered as gone. */
	pp_proc_cache_on_exec(c, 1234);
	root_remove(&r, 1234);
	errno = 0;
	CHECK(pp_proc_cache_get(c, 1234) == NULL);
	CHECK_EQ_U64(errno, ESRCH);
	CHECK_EQ_U64(pp_proc_cache_count(c), 0);
	s = stats(c);
	CHECK(pp_proc_cache_get(c, 1234) == NULL);
	CHECK_EQ_U64(stats(c).negative_hits, s.negative_hits + 1);
	CHECK_EQ_U64(stats(c).loads, s.loads);

	pp_proc_cache_free(c);
	root_fini(&r, pids, 1);
}

TEST(negative_cache_is_bounded)
{
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache_opts o = {
	    .proc_root = "/nonexistent-proc-root",
	    .capacity = 4,
	    .negative_capacity = 16,
	    .now_ns = fake_now,
	    .clock_ctx = &clk,
	};
	struct pp_proc_cache *c = pp_proc_cache_new(&o);
	struct pp_proc_cache_stats s;

	REQUIRE(c != NULL);
	for (uint32_t pid = 100; pid < 1100; pid++)
		CHECK(pp_proc_cache_get(c, pid) == NULL);
	s = stats(c);
	CHECK_EQ_U64(s.gone, 1000);
	/* 1000 pids into 16 slots: all but at most 16 were overwritten while still live. */
	CHECK(s.negative_evictions >= 1000 - 16);
	pp_proc_cache_free(c);
}

TEST(unplaced_address_reload_is_rate_limited)
{
	static const uint32_t pids[] = {1234};
	const uint64_t plugin = 0x7f3a1b001100ull;
	struct fixture_root r;
	struct fake_clock clk = {.now = 0};
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	const struct pp_map_entry *e;
	struct pp_proc_cache_stats s;

	REQUIRE(root_init(&r) == 0);
	REQUIRE(root_set(&r, 1234, "basic") == 0);
	c = cache_new(r.dir, 8, &clk);
	REQUIRE(c != NULL);
	p = pp_proc_cache_get(c, 1234);
	REQUIRE(p != NULL);

	/* The process dlopen()s a plugin after we read its maps. */
	REQUIRE(root_set(&r, 1234, "dlopen") == 0);
	CHECK(pp_proc_cache_find_map(c, p, plugin) == NULL);
	clk.now = 100 * MS;
	CHECK(pp_proc_cache_find_map(c, p, plugin) == NULL);
	s = stats(c);
	CHECK_EQ_U64(s.reloads_suppressed, 2);
	CHECK_EQ_U64(s.reloads_for_unplaced_addr, 0);

	clk.now = 200 * MS;
	e = pp_proc_cache_find_map(c, p, plugin);
	REQUIRE(e != NULL);
	CHECK_STR(e->path, "/usr/lib/demo/libplugin.so");
	CHECK_EQ_U64(stats(c).reloads_for_unplaced_addr, 1);
	CHECK_EQ_U64(p->maps.n, 18);
	CHECK_EQ_U64(p->maps_loaded_ns, 200 * MS);
	CHECK_EQ_U64(p->loaded_ns, 0);

	/* An address that never maps: one reread per gap, however many samples hit it. */
	for (int i = 0; i < 1000; i++) {
		CHECK(pp_proc_cache_find_map(c, p, 0x1000) == NULL);
		clk.now += MS;
	}
	s = stats(c);
	CHECK_EQ_U64(s.reloads_for_unplaced_addr, 1 + 4);
	CHECK_EQ_U64(s.reloads_suppressed, 2 + 1000 - 4);

	/* A reread that finds the pid reused keeps the old maps and marks the entry exited. */
	REQUIRE(root_set(&r, 1234, "reuse") == 0);
	clk.now += 1000 * MS;
	CHECK(pp_proc_cache_find_map(c, p, 0x560000101000ull) == NULL);
	CHECK(p->flags & PP_PROC_F_EXITED);
	CHECK_EQ_U64(p->maps.n, 18);
	CHECK_STR(pp_proc_cache_find_map(c, p, plugin)->path, "/usr/lib/demo/libplugin.so");

	pp_proc_cache_free(c);
	root_fini(&r, pids, 1);
}

TEST(path_in_root)
{
	char out[64];

	CHECK(pp_proc_path_in_root(NULL, 42, "/usr/lib/libc.so.6", out, sizeof(out)) == 0);
	CHECK_STR(out, "/proc/42/root/usr/lib/libc.so.6");
	CHECK(pp_proc_path_in_root("/host/proc", 7, "/app/my bin", out, sizeof(out)) == 0);
	CHECK_STR(out, "/host/proc/7/root/app/my bin");
	CHECK(pp_proc_path_in_root(NULL, 42, "relative/x", out, sizeof(out)) == -EINVAL);
	CHECK(pp_proc_path_in_root(NULL, 42, "[vdso]", out, sizeof(out)) == -EINVAL);
	CHECK(pp_proc_path_in_root(NULL, 42, NULL, out, sizeof(out)) == -EINVAL);
	CHECK(pp_proc_path_in_root(NULL, 4294967295u,
				   "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", out,
				   sizeof(out)) == -ENAMETOOLONG);
	CHECK(pp_proc_path_in_root(NULL, 1, "/x", out, 0) == -EINVAL);
}

TEST(bad_options)
{
	struct pp_proc_cache_opts o = {.capacity = 0};

	errno = 0;
	CHECK(pp_proc_cache_new(&o) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	CHECK(pp_proc_cache_new(NULL) == NULL);
	pp_proc_cache_free(NULL);
	errno = 0;
	CHECK(pp_proc_cache_find_map(NULL, NULL, 0) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
}

/* ---- live processes through the real /proc ---- */

static int __attribute__((noinline)) live_marker(int x)
{
	return x + 7;
}

/* Whether pid's maps show an executable mapping of a path ending in suffix. */
static bool maps_have_exec(pid_t pid, const char *suffix)
{
	char path[64], line[PATH_MAX + 128];
	size_t sl = strlen(suffix);
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		char *perms = strchr(line, ' ');

		line[n] = '\0';
		found = perms && perms[3] == 'x' && n >= sl && strcmp(line + n - sl, suffix) == 0;
	}
	fclose(f);
	return found;
}

/*
 * Waits until pid has exec'd a file whose path ends in suffix and mapped it: the kernel
 * points /proc/PID/exe at the new file before it maps its segments, so exe alone can be
 * seen while the maps still lack them.
 */
static int wait_exe_endswith(pid_t pid, const char *suffix)
{
	char path[64], buf[PATH_MAX];

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	for (int i = 0; i < 500; i++) {
		ssize_t n = readlink(path, buf, sizeof(buf) - 1);

		if (n > 0) {
			size_t sl = strlen(suffix);

			buf[n] = '\0';
			if ((size_t)n >= sl && strcmp(buf + n - sl, suffix) == 0 &&
			    maps_have_exec(pid, suffix))
				return 0;
		}
		usleep(10000);
	}
	return -1;
}

static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

TEST(live_child_then_killed)
{
	char self_exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	struct pp_proc_cache *c, *c2;
	const struct pp_proc *p;
	const struct pp_map_entry *e;
	pid_t child;

	if (access("/proc/self/stat", R_OK) != 0)
		SKIP("/proc is not mounted");
	REQUIRE(n > 0);
	self_exe[n] = '\0';
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	c = cache_new(NULL, 8, NULL);
	REQUIRE(c != NULL);
	p = pp_proc_cache_get(c, (uint32_t)child);
	if (!p)
		kill_and_reap(child);
	REQUIRE(p != NULL);
	CHECK_EQ_U64(p->pid, (uint32_t)child);
	CHECK(p->start_time > 0);
	CHECK_STR(p->exe, self_exe);
	CHECK(strncmp(p->comm, "test_proc_cache", 15) == 0);
	CHECK_EQ_U64(p->flags, 0);
	CHECK_EQ_U64(p->maps.bad_lines, 0);
	/* The child is a fork: our code is at the same address in it. */
	e = pp_proc_cache_find_map(c, p, (uint64_t)(uintptr_t)&live_marker);
	REQUIRE(e != NULL);
	CHECK(e->perms & PP_MAP_EXEC);
	CHECK_STR(e->path, self_exe);
	CHECK(live_marker(0) == 7);

	kill_and_reap(child);
	/* A fresh look finds it gone. */
	c2 = cache_new(NULL, 8, NULL);
	REQUIRE(c2 != NULL);
	errno = 0;
	CHECK(pp_proc_cache_get(c2, (uint32_t)child) == NULL);
	CHECK_EQ_U64(errno, ESRCH);
	CHECK_EQ_U64(stats(c2).gone, 1);
	pp_proc_cache_free(c2);
	/* The first cache keeps the exited entry for queued samples... */
	pp_proc_cache_on_exit(c, (uint32_t)child);
	p = pp_proc_cache_get(c, (uint32_t)child);
	REQUIRE(p != NULL);
	CHECK(p->flags & PP_PROC_F_EXITED);
	/* ...and a stale entry of a vanished process reloads to ESRCH. */
	pp_proc_cache_on_exec(c, (uint32_t)child);
	errno = 0;
	CHECK(pp_proc_cache_get(c, (uint32_t)child) == NULL);
	CHECK_EQ_U64(errno, ESRCH);
	pp_proc_cache_free(c);
}

/* A child execs a copy of sleep whose name has a space, and the copy is then deleted. */
TEST(live_exec_of_deleted_binary)
{
	char dir[] = "/tmp/pp-proc-live-XXXXXX", bin[128], cmd[512];
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	const struct pp_map_entry *e = NULL;
	pid_t child;
	int found = 0;

	if (access("/bin/sleep", X_OK) != 0)
		SKIP("no /bin/sleep to exec");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(bin, sizeof(bin), "%s/my sleep", dir);
	snprintf(cmd, sizeof(cmd), "cp /bin/sleep '%s'", bin);
	REQUIRE(system(cmd) == 0);

	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		execl(bin, "my sleep", "30", (char *)NULL);
		_exit(127);
	}
	c = cache_new(NULL, 8, NULL);
	REQUIRE(c != NULL);
	if (wait_exe_endswith(child, "/my sleep") != 0) {
		kill_and_reap(child);
		unlink(bin);
		rmdir(dir);
		pp_proc_cache_free(c);
		REQUIRE(!"child did not exec");
	}
	unlink(bin);
	p = pp_proc_cache_get(c, (uint32_t)child);
	if (p) {
		CHECK_STR(p->exe, bin);
		CHECK(p->flags & PP_PROC_F_EXE_DELETED);
		CHECK_STR(p->comm, "my sleep");
		for (size_t i = 0; i < p->maps.n; i++) {
			if ((p->maps.entries[i].perms & PP_MAP_EXEC) &&
			    strcmp(p->maps.entries[i].path, bin) == 0) {
				e = &p->maps.entries[i];
				found = 1;
				break;
			}
		}
		CHECK(found);
		if (e)
			CHECK_EQ_U64(e->deleted, 1);
	}
	CHECK(p != NULL);
	kill_and_reap(child);
	rmdir(dir);
	pp_proc_cache_free(c);
}

/* A mapping as the side-band reports it. */
static struct pp_map_entry sb_map(uint64_t start, uint64_t end, uint64_t off, uint64_t ino,
				  const char *path)
{
	struct pp_map_entry e = {.start = start,
				 .end = end,
				 .offset = off,
				 .inode = ino,
				 .dev_major = 0xfe,
				 .perms = PP_MAP_READ | PP_MAP_EXEC,
				 .kind = PP_MAP_KIND_FILE,
				 .from_sideband = 1,
				 .path = path};
	return e;
}

/*
 * A process known only from the side-band: its image, executable and mappings come from the
 * reports, never from /proc (the proc root is empty, so any read would fail), and it stays
 * after it exits for the samples still queued.
 */
TEST(sideband_exec_and_mmaps_make_the_image)
{
	struct fake_clock clk = {.now = 1000 * MS};
	struct fixture_root r;
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	const struct pp_map_entry *m;
	struct pp_map_entry e;

	REQUIRE(root_init(&r) == 0);
	c = cache_new(r.dir, 16, &clk);
	REQUIRE(c != NULL);
	pp_proc_cache_on_sb_exec(c, 4242, "short", 100);
	e = sb_map(0x400000, 0x401000, 0x1000, 77, "/usr/bin/short");
	pp_proc_cache_on_sb_mmap(c, 4242, 101, &e);
	e = sb_map(0x7f0000000000, 0x7f0000026000, 0x1000, 78, "/lib/ld.so");
	pp_proc_cache_on_sb_mmap(c, 4242, 102, &e);
	pp_proc_cache_on_exit(c, 4242);
	p = pp_proc_cache_get_at(c, 4242, 150);
	REQUIRE(p != NULL);
	CHECK(p->flags & PP_PROC_F_EVENTS);
	CHECK(p->flags & PP_PROC_F_EXITED);
	CHECK_STR(p->comm, "short");
	CHECK_STR(p->exe, "/usr/bin/short");
	CHECK_EQ_U64(p->maps.n, 2);
	m = pp_proc_cache_find_map(c, p, 0x400123);
	REQUIRE(m != NULL);
	CHECK_STR(m->path, "/usr/bin/short");
	CHECK_EQ_U64(pp_map_file_offset(m, 0x400123), 0x1123);
	/* an address no report holds: the process is gone, nothing is reread */
	CHECK(pp_proc_cache_find_map(c, p, 0x500000) == NULL);
	CHECK_EQ_U64(stats(c).loads, 0);
	CHECK_EQ_U64(stats(c).sb_images, 1);
	CHECK_EQ_U64(stats(c).sb_mmaps, 2);
	pp_proc_cache_free(c);
	root_fini(&r, NULL, 0);
}

/*
 * Exec, fork and late records: a sample taken before an exec gets the image it ran in; a
 * child starts with a copy of its parent's mappings and knows where it came from; a mapping
 * made before an exec and read after it goes to the image that made it; records older than
 * every image they could change are ignored.
 */
TEST(sideband_exec_fork_and_late_records)
{
	struct fake_clock clk = {.now = 1000 * MS};
	struct fixture_root r;
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	struct pp_map_entry e;

	REQUIRE(root_init(&r) == 0);
	c = cache_new(r.dir, 16, &clk);
	REQUIRE(c != NULL);
	pp_proc_cache_on_sb_exec(c, 10, "shell", 100);
	e = sb_map(0x1000, 0x2000, 0, 1, "/bin/sh");
	pp_proc_cache_on_sb_mmap(c, 10, 101, &e);
	/* the shell forks 11, which execs cc at 300 */
	pp_proc_cache_on_sb_fork(c, 11, 10, 200);
	p = pp_proc_cache_get_at(c, 11, 250);
	REQUIRE(p != NULL);
	CHECK_STR(p->exe, "/bin/sh");
	CHECK_EQ_U64(p->maps.n, 1);
	CHECK_EQ_U64(p->relatives[0], 10);
	pp_proc_cache_on_sb_exec(c, 11, "cc", 300);
	e = sb_map(0x5000, 0x9000, 0, 2, "/usr/bin/cc");
	pp_proc_cache_on_sb_mmap(c, 11, 301, &e);
	/* a record from before the exec, read late (another CPU's ring): the old image's */
	e = sb_map(0x20000, 0x21000, 0, 3, "/lib/old.so");
	pp_proc_cache_on_sb_mmap(c, 11, 290, &e);
	CHECK_EQ_U64(stats(c).sb_mmaps_late, 1);
	p = pp_proc_cache_get_at(c, 11, 320);
	REQUIRE(p != NULL);
	CHECK_STR(p->exe, "/usr/bin/cc");
	CHECK_STR(p->comm, "cc");
	CHECK_EQ_U64(p->maps.n, 1);
	CHECK(pp_proc_cache_find_map(c, p, 0x5800) != NULL);
	CHECK_EQ_U64(p->relatives[0], 10); /* an exec keeps where it came from */
	/* a sample of the shell image, taken before the exec, read after it */
	p = pp_proc_cache_get_at(c, 11, 260);
	REQUIRE(p != NULL);
	CHECK(p->flags & PP_PROC_F_REPLACED);
	CHECK_STR(p->exe, "/bin/sh");
	CHECK(pp_proc_cache_find_map(c, p, 0x1800) != NULL);
	CHECK(pp_proc_cache_find_map(c, p, 0x20800) != NULL);
	CHECK(pp_proc_cache_find_map(c, p, 0x5800) == NULL);
	CHECK_EQ_U64(p->maps.n, 2);
	CHECK_EQ_U64(stats(c).pre_exec_hits, 1);
	/* older than the fork that made pid 11: no image of it was this process */
	errno = 0;
	CHECK(pp_proc_cache_get_at(c, 11, 150) == NULL);
	CHECK_EQ_U64(errno, ESTALE);
	e = sb_map(0x30000, 0x31000, 0, 5, "/lib/older.so");
	pp_proc_cache_on_sb_mmap(c, 11, 180, &e);
	CHECK_EQ_U64(stats(c).sb_mmaps_late, 1);
	CHECK_EQ_U64(stats(c).sb_mmaps_unused, 1);
	/* a fork record older than the image: ignored, the image stays */
	pp_proc_cache_on_sb_fork(c, 11, 10, 150);
	p = pp_proc_cache_get_at(c, 11, 400);
	REQUIRE(p != NULL);
	CHECK_STR(p->exe, "/usr/bin/cc");
	/* a parent not cached: the child is known by where it came from, read when sampled */
	pp_proc_cache_on_sb_fork(c, 12, 99, 500);
	CHECK(pp_proc_cache_peek(c, 12) != NULL);
	CHECK(pp_proc_cache_peek(c, 12)->flags & PP_PROC_F_STALE);
	CHECK_EQ_U64(pp_proc_cache_peek(c, 12)->relatives[0], 99);
	pp_proc_cache_on_sb_exec(c, 12, "ls", 600);
	e = sb_map(0x7000, 0x8000, 0, 4, "/bin/ls");
	pp_proc_cache_on_sb_mmap(c, 12, 601, &e);
	p = pp_proc_cache_get_at(c, 12, 700);
	REQUIRE(p != NULL);
	CHECK_STR(p->exe, "/bin/ls");
	CHECK_EQ_U64(p->relatives[0], 99);
	/* the one /proc read: the unknown parent, tried once when it forked (gone here) */
	CHECK_EQ_U64(stats(c).loads, 1);
	pp_proc_cache_free(c);
	root_fini(&r, NULL, 0);
}

/*
 * A wrapper chain: a shell forks, the child execs env, env execs bash, bash execs python,
 * all before the side-band is read. The samples of each image, read after the last exec,
 * get the image they were taken in: its name and its mappings, never the next one's. Past
 * the images kept, a sample gets no process rather than another program's.
 */
TEST(samples_of_a_wrapper_chain_get_the_image_they_ran_in)
{
	static const char *const progs[] = {"env",     "bash", "pyenv", "pyenv-exec", "bash",
					    "python3", "cc1",  "as",	"collect2",   "ld"};
	struct fake_clock clk = {.now = 1000 * MS};
	struct fixture_root r;
	struct pp_proc_cache *c;
	const struct pp_proc *p;
	struct pp_map_entry e;
	char paths[10][32];
	size_t bytes_before;

	REQUIRE(root_init(&r) == 0);
	c = cache_new(r.dir, 16, &clk);
	REQUIRE(c != NULL);
	pp_proc_cache_on_sb_exec(c, 10, "sh", 100);
	e = sb_map(0x1000, 0x2000, 0, 1, "/bin/sh");
	pp_proc_cache_on_sb_mmap(c, 10, 101, &e);
	pp_proc_cache_on_sb_fork(c, 20, 10, 200);
	/* exec i at 300 + 100 i, its program mapped at 0x10000 (i + 1): each image its own */
	for (int i = 0; i < 3; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/usr/bin/%s", progs[i]);
		pp_proc_cache_on_sb_exec(c, 20, progs[i], 300 + 100 * (uint64_t)i);
		e = sb_map(0x10000 * (uint64_t)(i + 1), 0x10000 * (uint64_t)(i + 1) + 0x1000, 0,
			   10 + (uint64_t)i, paths[i]);
		pp_proc_cache_on_sb_mmap(c, 20, 301 + 100 * (uint64_t)i, &e);
	}
	/* the forked shell's sample, then each program's */
	p = pp_proc_cache_get_at(c, 20, 250);
	REQUIRE(p != NULL);
	CHECK(p->flags & PP_PROC_F_REPLACED);
	CHECK_STR(p->comm, "sh");
	CHECK(pp_proc_cache_find_map(c, p, 0x1800) != NULL);
	CHECK(pp_proc_cache_find_map(c, p, 0x10800) == NULL);
	for (int i = 0; i < 3; i++) {
		uint64_t in = 0x10000 * (uint64_t)(i + 1) + 0x800;

		p = pp_proc_cache_get_at(c, 20, 350 + 100 * (uint64_t)i);
		REQUIRE(p != NULL);
		CHECK_STR(p->comm, progs[i]);
		CHECK_STR(p->exe, paths[i]);
		CHECK_EQ_U64(p->maps.n, 1);
		CHECK(pp_proc_cache_find_map(c, p, in) != NULL);
		CHECK(p->flags & PP_PROC_F_REPLACED ? i < 2 : i == 2);
	}
	CHECK_EQ_U64(stats(c).pre_exec_hits, 3);
	CHECK_EQ_U64(stats(c).older_image_hits, 2);
	/* seven execs more: the forked shell's image and env's are no longer kept */
	bytes_before = pp_proc_cache_bytes(c);
	for (int i = 3; i < 10; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/usr/bin/%s", progs[i]);
		pp_proc_cache_on_sb_exec(c, 20, progs[i], 300 + 100 * (uint64_t)i);
	}
	CHECK(pp_proc_cache_bytes(c) > bytes_before);
	errno = 0;
	CHECK(pp_proc_cache_get_at(c, 20, 250) == NULL);
	CHECK_EQ_U64(errno, ESTALE);
	errno = 0;
	CHECK(pp_proc_cache_get_at(c, 20, 350) == NULL);
	CHECK_EQ_U64(errno, ESTALE);
	CHECK_EQ_U64(stats(c).pre_image_misses, 2);
	p = pp_proc_cache_get_at(c, 20, 450);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "bash");
	p = pp_proc_cache_get_at(c, 20, 1150);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "collect2");
	CHECK(p->flags & PP_PROC_F_REPLACED);
	p = pp_proc_cache_get_at(c, 20, 1250);
	REQUIRE(p != NULL);
	CHECK_STR(p->comm, "ld");
	CHECK(!(p->flags & PP_PROC_F_REPLACED));
	/* long after the last exec no sample of the replaced images is in flight */
	p = pp_proc_cache_get_at(c, 20, 1250 + 6000 * MS);
	REQUIRE(p != NULL);
	CHECK(pp_proc_cache_get_at(c, 20, 450) != NULL);
	CHECK_STR(pp_proc_cache_get_at(c, 20, 450)->comm, "ld");
	pp_proc_cache_free(c);
	root_fini(&r, NULL, 0);
}

TEST_LIST = {
    {"stat_parse", stat_parse},
    {"loads_fixture_process", loads_fixture_process},
    {"kthread_and_tricky_process", kthread_and_tricky_process},
    {"exec_reloads_on_next_get", exec_reloads_on_next_get},
    {"samples_before_an_exec_keep_the_old_image", samples_before_an_exec_keep_the_old_image},
    {"exit_keeps_entry_and_detects_pid_reuse", exit_keeps_entry_and_detects_pid_reuse},
    {"eviction_lru_and_exited_first", eviction_lru_and_exited_first},
    {"byte_bound_evicts_lru", byte_bound_evicts_lru},
    {"exited_entries_expire", exited_entries_expire},
    {"negative_cache", negative_cache},
    {"negative_cache_is_bounded", negative_cache_is_bounded},
    {"unplaced_address_reload_is_rate_limited", unplaced_address_reload_is_rate_limited},
    {"path_in_root", path_in_root},
    {"bad_options", bad_options},
    {"live_child_then_killed", live_child_then_killed},
    {"live_exec_of_deleted_binary", live_exec_of_deleted_binary},
    {"sideband_exec_and_mmaps_make_the_image", sideband_exec_and_mmaps_make_the_image},
    {"sideband_exec_fork_and_late_records", sideband_exec_fork_and_late_records},
    {"samples_of_a_wrapper_chain_get_the_image_they_ran_in",
     samples_of_a_wrapper_chain_get_the_image_they_ran_in},
};
TEST_MAIN()
