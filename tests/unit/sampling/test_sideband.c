/*
 * Tests of the side-band: records laid out as the kernel writes them (include/uapi/linux/
 * perf_event.h, with sample_id_all and sample_type TID | TIME) through the parser, malformed
 * ones refused; and, where perf events may be opened, the real kernel's reports of a child
 * that forks, execs a program and exits.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sampling/sideband.h"

struct rec {
	uint8_t b[512];
	size_t n;
};

static void put(struct rec *r, const void *p, size_t n)
{
	memcpy(r->b + r->n, p, n);
	r->n += n;
}

static void put_u32(struct rec *r, uint32_t v)
{
	put(r, &v, sizeof(v));
}

static void put_u64(struct rec *r, uint64_t v)
{
	put(r, &v, sizeof(v));
}

/* A name padded with NULs to 8 bytes, as the kernel writes it. */
static void put_name(struct rec *r, const char *s)
{
	size_t n = strlen(s) + 1, padded = (n + 7) & ~(size_t)7;

	memset(r->b + r->n, 0, padded);
	memcpy(r->b + r->n, s, n);
	r->n += padded;
}

/* Header first (size filled in by finish), then the body, then the sample_id trailer. */
static void begin(struct rec *r, uint32_t type, uint16_t misc)
{
	struct perf_event_header h = {.type = type, .misc = misc};

	memset(r, 0, sizeof(*r));
	put(r, &h, sizeof(h));
}

static void finish(struct rec *r, uint32_t pid, uint32_t tid, uint64_t time)
{
	struct perf_event_header h;

	put_u32(r, pid);
	put_u32(r, tid);
	put_u64(r, time);
	memcpy(&h, r->b, sizeof(h));
	h.size = (uint16_t)r->n;
	memcpy(r->b, &h, sizeof(h));
}

static void mmap2_record(struct rec *r, const char *name)
{
	begin(r, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
	put_u32(r, 100); /* pid */
	put_u32(r, 101); /* tid */
	put_u64(r, 0x7f0000001000ull);
	put_u64(r, 0x26000);
	put_u64(r, 0x1000);
	put_u32(r, 0xfe); /* maj */
	put_u32(r, 1);	  /* min */
	put_u64(r, 332383);
	put_u64(r, 7); /* ino generation */
	put_u32(r, 5); /* PROT_READ | PROT_EXEC */
	put_u32(r, 2); /* MAP_PRIVATE */
	put_name(r, name);
	finish(r, 100, 101, 123456789);
}

TEST(parses_every_record_kind)
{
	struct pp_sb_event ev;
	struct rec r;

	mmap2_record(&r, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
	REQUIRE(pp_sideband_parse(r.b, r.n, &ev) == 0);
	CHECK_EQ_U64(ev.kind, PP_SB_MMAP);
	CHECK_EQ_U64(ev.pid, 100);
	CHECK_EQ_U64(ev.tid, 101);
	CHECK_EQ_U64(ev.start, 0x7f0000001000ull);
	CHECK_EQ_U64(ev.len, 0x26000);
	CHECK_EQ_U64(ev.pgoff, 0x1000);
	CHECK_EQ_U64(ev.dev_major, 0xfe);
	CHECK_EQ_U64(ev.dev_minor, 1);
	CHECK_EQ_U64(ev.inode, 332383);
	CHECK_EQ_U64(ev.ino_generation, 7);
	CHECK_EQ_U64(ev.prot, 5);
	CHECK_EQ_U64(ev.time_ns, 123456789);
	CHECK_STR(ev.path, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");

	begin(&r, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	put_u32(&r, 200);
	put_u32(&r, 200);
	put_name(&r, "cc1plus");
	finish(&r, 200, 200, 5);
	REQUIRE(pp_sideband_parse(r.b, r.n, &ev) == 0);
	CHECK_EQ_U64(ev.kind, PP_SB_COMM);
	CHECK(ev.exec);
	CHECK_STR(ev.comm, "cc1plus");

	begin(&r, PERF_RECORD_FORK, 0);
	put_u32(&r, 300); /* pid */
	put_u32(&r, 200); /* ppid */
	put_u32(&r, 300); /* tid */
	put_u32(&r, 200); /* ptid */
	put_u64(&r, 6);
	finish(&r, 300, 300, 6);
	REQUIRE(pp_sideband_parse(r.b, r.n, &ev) == 0);
	CHECK_EQ_U64(ev.kind, PP_SB_FORK);
	CHECK_EQ_U64(ev.pid, 300);
	CHECK_EQ_U64(ev.ppid, 200);
	CHECK_EQ_U64(ev.tid, 300);

	begin(&r, PERF_RECORD_EXIT, 0);
	put_u32(&r, 300);
	put_u32(&r, 200);
	put_u32(&r, 300);
	put_u32(&r, 200);
	put_u64(&r, 7);
	finish(&r, 300, 300, 7);
	REQUIRE(pp_sideband_parse(r.b, r.n, &ev) == 0);
	CHECK_EQ_U64(ev.kind, PP_SB_EXIT);

	begin(&r, PERF_RECORD_LOST, 0);
	put_u64(&r, 1);
	put_u64(&r, 42);
	finish(&r, 0, 0, 8);
	REQUIRE(pp_sideband_parse(r.b, r.n, &ev) == 0);
	CHECK_EQ_U64(ev.kind, PP_SB_LOST);
	CHECK_EQ_U64(ev.lost, 42);

	begin(&r, PERF_RECORD_SWITCH, 0);
	finish(&r, 1, 1, 9);
	CHECK(pp_sideband_parse(r.b, r.n, &ev) == -ENOENT);
}

TEST(malformed_records_are_refused)
{
	struct pp_sb_event ev;
	struct rec r;
	struct perf_event_header h;

	mmap2_record(&r, "/bin/true");
	/* a size that is not the buffer's */
	CHECK(pp_sideband_parse(r.b, r.n - 8, &ev) == -EINVAL);
	/* a name without its NUL before the trailer */
	{
		struct rec bad = r;
		size_t name_at = sizeof(struct perf_event_header) + 64;

		memset(bad.b + name_at, 'A', bad.n - 16 - name_at);
		CHECK(pp_sideband_parse(bad.b, bad.n, &ev) == -EINVAL);
	}
	/* a body too short for its fields */
	begin(&r, PERF_RECORD_MMAP2, 0);
	put_u32(&r, 1);
	finish(&r, 1, 1, 1);
	CHECK(pp_sideband_parse(r.b, r.n, &ev) == -EINVAL);
	/* build ids instead of the device and inode: not what was asked for */
	mmap2_record(&r, "/bin/true");
	memcpy(&h, r.b, sizeof(h));
	h.misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
	memcpy(r.b, &h, sizeof(h));
	CHECK(pp_sideband_parse(r.b, r.n, &ev) == -EINVAL);
	/* shorter than a header and its trailer */
	CHECK(pp_sideband_parse(r.b, 12, &ev) == -EINVAL);
	CHECK(pp_sideband_parse(NULL, 64, &ev) == -EINVAL);
}

struct seen {
	pid_t child;
	int fork, exec, exit, mmap_exe;
	uint64_t exe_ino;
	uint64_t t_min, t_max, bad_time;
};

static void on_event(void *ctx, const struct pp_sb_event *ev)
{
	struct seen *s = ctx;

	if (ev->pid != (uint32_t)s->child)
		return;
	if (ev->time_ns < s->t_min || ev->time_ns > s->t_max)
		s->bad_time++;
	switch (ev->kind) {
	case PP_SB_FORK:
		s->fork += ev->ppid == (uint32_t)getpid();
		break;
	case PP_SB_COMM:
		s->exec += ev->exec && !strcmp(ev->comm, "true");
		break;
	case PP_SB_MMAP:
		s->mmap_exe += ev->inode == s->exe_ino && (ev->prot & 4);
		break;
	case PP_SB_EXIT:
		s->exit++;
		break;
	default:
		break;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The real kernel's reports of a child that forks, execs /bin/true and exits. */
TEST(live_fork_exec_exit)
{
	struct pp_sideband_opts o = {0};
	struct pp_sideband *sb = pp_sideband_open(&o);
	struct seen s = {0};
	struct stat st;
	int status;

	if (!sb && (errno == EACCES || errno == EPERM)) {
		SKIP("perf events not permitted here (run as root)");
	}
	REQUIRE(sb != NULL);
	REQUIRE(stat("/bin/true", &st) == 0);
	s.exe_ino = (uint64_t)st.st_ino;
	s.t_min = mono_ns();
	s.child = fork();
	REQUIRE(s.child >= 0);
	if (s.child == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	REQUIRE(waitpid(s.child, &status, 0) == s.child);
	s.t_max = mono_ns();
	for (int i = 0; i < 100 && !(s.exit && s.mmap_exe); i++) {
		pp_sideband_drain(sb, on_event, &s);
		if (!(s.exit && s.mmap_exe))
			usleep(10000);
	}
	CHECK_EQ_U64(s.fork, 1);
	CHECK_EQ_U64(s.exec, 1);
	CHECK(s.mmap_exe >= 1);
	CHECK(s.exit >= 1);
	/* the records' clock is the samples' (CLOCK_MONOTONIC) */
	CHECK_EQ_U64(s.bad_time, 0);
	CHECK(pp_sideband_ring_bytes(sb) > 0);
	pp_sideband_free(sb);
}

TEST_LIST = {
    {"parses_every_record_kind", parses_every_record_kind},
    {"malformed_records_are_refused", malformed_records_are_refused},
    {"live_fork_exec_exit", live_fork_exec_exit},
};
TEST_MAIN()
