/*
 * The unwind table manager on real processes (tests/data/unwind's chain programs, started
 * here) with an in-memory sink in place of the shim's maps: each process's list names its
 * executable mappings in address order with their tables' runs; a file is compiled once
 * however many processes map it; the rows in the array are the compiler's; a release frees
 * the process and its hold; a small row budget evicts unused tables and counts what does not
 * fit; a process that exits unseen is swept.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/elf_symbols.h"
#include "unwind/unwind_pack.h"
#include "cfi/unwind_table.h"
#include "base/fsutil.h"
#include "process/proc_cache.h"
#include "process/procmaps.h"
#include "unwind/table_cache.h"
#include "unwind/unwinder.h"
#include "unwind_rows.h"
#include "../../data/unwind/chain.h"

#define MAX_PROCS 16

struct mem_sink {
	struct pp_unwinder_sink sink;
	uint32_t *rows;
	struct pp_bpf_unwind_rule rules[PP_UW_MAX_RULES];
	struct {
		uint32_t tgid;
		struct pp_bpf_unwind_list p;
	} procs[MAX_PROCS];
	unsigned sets, dels;
	bool refuse;	   /* set_proc finds no room */
	unsigned wrong_at; /* del_proc given a note set_proc did not leave for that process */
};

static int mem_write_rows(void *ctx, uint32_t first, const uint32_t *words, uint32_t n)
{
	struct mem_sink *m = ctx;

	if ((uint64_t)first + n > m->sink.nr_rows)
		return -ERANGE;
	memcpy(m->rows + first, words, n * sizeof(*words));
	return 0;
}

static int mem_write_rule(void *ctx, uint32_t i, const struct pp_bpf_unwind_rule *rule)
{
	struct mem_sink *m = ctx;

	if (i >= PP_UW_MAX_RULES)
		return -ERANGE;
	m->rules[i] = *rule;
	return 0;
}

/* The note a list leaves (*at) is its slot + 1. */
static int mem_set_proc(void *ctx, uint32_t tgid, const struct pp_bpf_unwind_list *p, uint64_t *at)
{
	struct mem_sink *m = ctx;
	int free_slot = -1;

	if (m->refuse)
		return -ENOSPC;
	for (int i = 0; i < MAX_PROCS; i++) {
		if (m->procs[i].tgid == tgid) {
			m->wrong_at += *at != (uint64_t)i + 1;
			m->procs[i].p = *p;
			m->sets++;
			return 0;
		}
		if (!m->procs[i].tgid && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		return -E2BIG;
	m->wrong_at += *at != 0;
	m->procs[free_slot].tgid = tgid;
	m->procs[free_slot].p = *p;
	*at = (uint64_t)free_slot + 1;
	m->sets++;
	return 0;
}

static void mem_del_proc(void *ctx, uint32_t tgid, uint64_t at)
{
	struct mem_sink *m = ctx;
	uint64_t had = 0;

	for (int i = 0; i < MAX_PROCS; i++)
		if (m->procs[i].tgid == tgid) {
			m->procs[i].tgid = 0;
			had = (uint64_t)i + 1;
		}
	m->wrong_at += at != had;
	m->dels++;
}

static int mem_read_rows(void *ctx, uint32_t first, uint32_t n, uint32_t *out)
{
	struct mem_sink *m = ctx;

	if ((uint64_t)first + n > m->sink.nr_rows)
		return -ERANGE;
	memcpy(out, m->rows + first, n * sizeof(*out));
	return 0;
}

static struct mem_sink *mem_sink_new(uint32_t nr_rows)
{
	struct mem_sink *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->rows = calloc(nr_rows, sizeof(*m->rows));
	m->sink = (struct pp_unwinder_sink){.write_rows = mem_write_rows,
					    .write_rule = mem_write_rule,
					    .set_proc = mem_set_proc,
					    .del_proc = mem_del_proc,
					    .read_rows = mem_read_rows,
					    .ctx = m,
					    .nr_rows = nr_rows};
	return m;
}

static void mem_sink_free(struct mem_sink *m)
{
	if (m)
		free(m->rows);
	free(m);
}

static const struct pp_bpf_unwind_list *mem_proc(struct mem_sink *m, uint32_t tgid)
{
	for (int i = 0; i < MAX_PROCS; i++)
		if (m->procs[i].tgid == tgid)
			return &m->procs[i].p;
	return NULL;
}

static char g_dir[512];
static int g_state;
static const char *g_skip_reason;

static int fixture(void)
{
	if (g_state)
		return g_state;
	g_state = -1;
	if (pp_test_scratch_dir(g_dir, sizeof(g_dir), "pp-unwinder")) {
		g_skip_reason = "cannot create a temporary directory";
		return g_state;
	}
	if (pp_test_sh("sh '%s/unwind/build.sh' '%s' >/dev/null 2>&1", PP_TEST_DATA_DIR, g_dir)) {
		g_skip_reason = "the test programs did not build (cc, c++)";
		return g_state;
	}
	g_skip_reason = NULL;
	g_state = 1;
	return g_state;
}

/* A chain program spinning for a while; its libraries are mapped once maps show them. */
static pid_t start(const char *prog)
{
	static char buf[1 << 16], prev[1 << 16];
	char path[PATH_MAX], maps[64];
	ssize_t prev_n = -1;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", g_dir, prog);
	pid = fork();
	if (pid == 0) {
		setenv("PP_CHAIN_SPIN", "20", 1);
		execl(path, prog, (char *)NULL);
		_exit(127);
	}
	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	/*
	 * Until the dynamic loader mapped every library: ours and libc there, and the maps the
	 * same in two reads 10 ms apart (a loader on a busy machine maps one library at a time,
	 * and a list taken between two would lack the later ones).
	 */
	for (int i = 0; i < 1000; i++) {
		int fd = open(maps, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = '\0';
			if (strstr(buf, "libpp_chain.so") && strstr(buf, "libc.so") &&
			    n == prev_n && !memcmp(buf, prev, (size_t)n))
				break;
			memcpy(prev, buf, (size_t)n);
			prev_n = n;
		}
		usleep(10000);
	}
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The list's mapping of a file whose path contains name, found through /proc/PID/maps. */
static const struct pp_bpf_unwind_mapping *mapping_of(const struct pp_bpf_unwind_list *p, pid_t pid,
						      const char *name)
{
	char path[64], line[512];
	unsigned long lo, hi;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strstr(line, name) || !strstr(line, " r-xp ") ||
		    sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		fclose(f);
		for (uint32_t i = 0; i < p->nr; i++)
			if (p->m[i].start == lo && p->m[i].end == hi)
				return &p->m[i];
		return NULL;
	}
	if (f)
		fclose(f);
	return NULL;
}

TEST(a_process_gets_its_mappings_and_tables)
{
	struct mem_sink *m;
	struct pp_unwinder *u;
	struct pp_unwinder_stats st;
	const struct pp_bpf_unwind_list *p;
	const struct pp_bpf_unwind_mapping *lib, *libc, *vdso;
	struct pp_unwind_table *t;
	char path[PATH_MAX];
	pid_t pid;
	int fd;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	m = mem_sink_new(1u << 20);
	REQUIRE(m != NULL);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	pid = start("chain");
	CHECK(pp_unwinder_install(u, (uint32_t)pid) == 0);
	p = mem_proc(m, (uint32_t)pid);
	REQUIRE(p != NULL);
	for (uint32_t i = 1; i < p->nr; i++)
		CHECK(p->m[i - 1].end <= p->m[i].start);
	lib = mapping_of(p, pid, "libpp_chain.so");
	libc = mapping_of(p, pid, "libc.so.6");
	REQUIRE(lib != NULL && libc != NULL);
	CHECK(lib->nr_pages >= 1 && libc->nr_pages > 10);
	/* code of no file is listed too, without a table: code outside the list is new */
	vdso = mapping_of(p, pid, "[vdso]");
	REQUIRE(vdso != NULL);
	CHECK_EQ_U64(vdso->nr_pages, 0);
	CHECK_EQ_U64(p->flags, PP_UW_PROC_ALL_MAPPINGS);
	CHECK(m->rows[libc->first_word + libc->nr_pages] > 10000); /* libc's run: its rows */

	/*
	 * The run in the array, looked up as the shim does, gives the compiler's table: at each
	 * row's first and last byte, its rule, rule for rule
	 */
	for (int k = 0; k < 2; k++) {
		const struct pp_bpf_unwind_mapping *mp = k ? libc : lib;
		const uint32_t *run = &m->rows[mp->first_word];
		uint32_t nwords = run[mp->nr_pages];
		size_t checked = 0, n;
		bool bad = false;

		if (k)
			snprintf(path, sizeof(path), "/usr/lib/x86_64-linux-gnu/libc.so.6");
		else
			snprintf(path, sizeof(path), "%s/libpp_chain.so", g_dir);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		t = pp_unwind_table_open_fd(fd, 0);
		close(fd);
		REQUIRE(t != NULL);
		n = pp_unwind_table_count(t);
		for (size_t i = 0; i + 1 < n && !bad; i++) {
			struct pp_unwind_row row = row_of(t, i);
			const struct pp_unwind_row *want = &row;
			uint64_t base_vaddr = row_of(t, 0).pc;
			uint64_t at[2] = {want->pc - base_vaddr,
					  row_of(t, i + 1).pc - 1 - base_vaddr};

			for (int j = 0; j < 2 && !bad; j++) {
				uint32_t rule;

				if (!pp_unwind_packed_find(run, nwords, mp->nr_pages, at[j],
							   &rule)) {
					CHECK(!"the shim's lookup finds no row where the table has "
					       "one");
					bad = true;
					break;
				}
				if (!pp_unwind_rule_matches(rule, &m->rules[rule], want)) {
					CHECK(!"a row's rule differs from the compiler's");
					bad = true;
				}
				checked++;
			}
		}
		printf("  %s: %zu rows, %u words in %u pages, %zu lookups agree\n",
		       k ? "libc.so.6" : "libpp_chain.so", n, nwords, mp->nr_pages, checked);
		CHECK(checked >= 2 * (n - 1));
		pp_unwind_table_free(t);
	}
	snprintf(path, sizeof(path), "%s/libpp_chain.so", g_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	t = pp_unwind_table_open_fd(fd, 0);
	close(fd);
	REQUIRE(t != NULL);
	/* the mapping's base: the address of the table's first row in this process */
	{
		uint64_t vaddr = 0;
		struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
		size_t nl = pp_unwind_table_get_loads(t, loads);
		char line[512], mpath[64];
		unsigned long lo, hi, off = 0;
		FILE *f;

		snprintf(mpath, sizeof(mpath), "/proc/%d/maps", pid);
		f = fopen(mpath, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, "libpp_chain.so") && strstr(line, " r-xp ") &&
			    sscanf(line, "%lx-%lx r-xp %lx", &lo, &hi, &off) == 3)
				break;
		if (f)
			fclose(f);
		REQUIRE(pp_unwind_vaddr_of(loads, nl, off, 1, &vaddr) == 0);
		struct pp_unwind_row first;

		REQUIRE(pp_unwind_table_get(t, 0, &first));
		CHECK_EQ_U64(lib->base, lib->start - vaddr + first.pc);
	}
	pp_unwind_table_free(t);

	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.procs_live, 1);
	CHECK(st.tables_built >= 4); /* chain, libpp_chain.so, libpp_chain_fp.so, libc, ld.so */
	CHECK(st.rows_used > 10000);
	stop(pid);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

TEST(files_are_compiled_once_and_releases_free_processes)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder *u;
	struct pp_unwinder_stats s1, s2;
	pid_t a, b, c;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	a = start("chain");
	b = start("chain");
	c = start("chain_cxx");
	CHECK(pp_unwinder_install(u, (uint32_t)a) == 0);
	pp_unwinder_get_stats(u, &s1);
	CHECK(pp_unwinder_install(u, (uint32_t)b) == 0);
	CHECK(pp_unwinder_install(u, (uint32_t)a) == 0); /* a rescan */
	pp_unwinder_get_stats(u, &s2);
	CHECK_EQ_U64(s2.tables_built, s1.tables_built); /* the same files: none compiled again */
	CHECK(s2.tables_shared > s1.tables_shared);
	CHECK_EQ_U64(s2.procs_live, 2);
	CHECK(pp_unwinder_install(u, (uint32_t)c) == 0);
	pp_unwinder_get_stats(u, &s2);
	CHECK(s2.tables_built >= s1.tables_built + 2); /* chain_cxx and libstdc++ are new */
	CHECK_EQ_U64(s2.procs_live, 3);

	/* releases go through the queue: drained here (no worker) */
	pp_unwinder_release(u, (uint32_t)a);
	pp_unwinder_release(u, (uint32_t)b);
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &s2);
	CHECK_EQ_U64(s2.procs_live, 1);
	CHECK_EQ_U64(s2.procs_released, 2);
	CHECK(mem_proc(m, (uint32_t)a) == NULL && mem_proc(m, (uint32_t)b) == NULL);
	CHECK(mem_proc(m, (uint32_t)c) != NULL);

	/* a process that exits without a release: the sweep finds it gone */
	stop(c);
	pp_unwinder_note(u, (uint32_t)c); /* noted again after its exit, as a late sample is */
	pp_unwinder_drain(u);
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &s2);
	CHECK_EQ_U64(s2.procs_live, 0);
	CHECK(s2.procs_swept >= 1);
	CHECK(mem_proc(m, (uint32_t)c) == NULL);
	stop(a);
	stop(b);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

TEST(a_small_budget_evicts_unused_tables_and_counts_what_does_not_fit)
{
	/* libc takes ~28,000 rows, libstdc++ ~34,000: 40,000 holds one of them */
	struct mem_sink *m = mem_sink_new(40000);
	struct pp_unwinder *u;
	struct pp_unwinder_stats st;
	const struct pp_bpf_unwind_list *p;
	const struct pp_bpf_unwind_mapping *cxx, *libc;
	pid_t a, c;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	a = start("chain");
	c = start("chain_cxx");
	CHECK(pp_unwinder_install(u, (uint32_t)a) == 0);
	pp_unwinder_release(u, (uint32_t)a);
	pp_unwinder_drain(u);
	/*
	 * a's tables are unused now: chain_cxx's install evicts them, least recently installed
	 * first, for libstdc++; libc it maps itself, so libstdc++ still cannot fit: counted, and
	 * its mapping walks frame pointers
	 */
	CHECK(pp_unwinder_install(u, (uint32_t)c) == 0);
	pp_unwinder_get_stats(u, &st);
	printf("  40,000 rows: %llu tables built, %llu evicted, %llu did not fit, %llu rows used\n",
	       (unsigned long long)st.tables_built, (unsigned long long)st.tables_evicted,
	       (unsigned long long)st.tables_no_room, (unsigned long long)st.rows_used);
	CHECK(st.tables_evicted >= 1);
	CHECK(st.tables_no_room >= 1);
	CHECK(st.rows_used <= st.rows_total);
	p = mem_proc(m, (uint32_t)c);
	REQUIRE(p != NULL);
	cxx = mapping_of(p, c, "libstdc++");
	libc = mapping_of(p, c, "libc.so.6");
	CHECK(cxx != NULL && cxx->nr_pages == 0);
	CHECK(libc != NULL && libc->nr_pages > 10);
	CHECK(st.mappings_no_table >= 1);
	/* another process mapping libstdc++: no rows were freed since, so no second compile */
	{
		struct pp_unwinder_stats st2;
		pid_t d = start("chain_cxx");

		CHECK(pp_unwinder_install(u, (uint32_t)d) == 0);
		pp_unwinder_get_stats(u, &st2);
		CHECK_EQ_U64(st2.tables_built, st.tables_built);
		CHECK_EQ_U64(st2.tables_no_room, st.tables_no_room);
		stop(d);
	}
	stop(a);
	stop(c);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

TEST(the_worker_installs_noted_processes)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder *u;
	struct pp_unwinder_stats st;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.worker = true});
	REQUIRE(u != NULL);
	a = start("chain");
	for (int i = 0; i < 1000; i++)
		pp_unwinder_note(u, (uint32_t)a); /* many samples: one install */
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.procs_installed, 1);
	CHECK(mem_proc(m, (uint32_t)a) != NULL);
	pp_unwinder_release(u, (uint32_t)a);
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.procs_live, 0);
	CHECK(mem_proc(m, (uint32_t)a) == NULL);
	stop(a);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/* The side-band reported a library mapped since by p: its list is made again, then the stats. */
static void mapped_since(struct pp_unwinder *u, const struct pp_proc *p,
			 struct pp_unwinder_stats *st)
{
	((struct pp_proc *)p)->maps_version++;
	pp_unwinder_note_proc(u, p);
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, st);
}

/*
 * Where the kernel reports every process's mappings, a process read from /proc (the process
 * cache's entry, made before the agent saw it start) is installed from the mappings the cache
 * holds: its maps file is not read again for the list, however often and long it is sampled;
 * a mapping reported later (a version bump) installs it again, and a kernel thread not at all.
 * Without the reports the same samples read its maps again after the rescan interval.
 */
TEST(a_process_read_from_proc_is_not_read_again_where_mappings_are_reported)
{
	struct pp_proc_cache *pc = pp_proc_cache_new(&(struct pp_proc_cache_opts){.capacity = 8});
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder_stats st;
	const struct pp_proc *p;
	struct pp_proc kthread;
	struct pp_unwinder *u;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL && pc != NULL);
	a = start("chain");
	p = pp_proc_cache_get(pc, (uint32_t)a);
	REQUIRE(p != NULL && !(p->flags & PP_PROC_F_EVENTS) && p->maps.n > 0);
	for (int reports = 1; reports >= 0; reports--) {
		u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.worker = true,
									 .rescan_ms = 20,
									 .mmap_reports = reports});
		REQUIRE(u != NULL);
		for (int i = 0; i < 6; i++) {
			pp_unwinder_note_proc(u, p);
			pp_unwinder_drain(u);
			usleep(60 * 1000); /* past the rescan interval and the note's own 50 ms */
		}
		pp_unwinder_get_stats(u, &st);
		CHECK(mem_proc(m, (uint32_t)a) != NULL);
		if (reports) {
			CHECK_EQ_U64(st.maps_reads, 0);
			CHECK_EQ_U64(st.procs_from_events, 1);
			CHECK_EQ_U64(st.procs_unchanged, 0);
			mapped_since(u, p, &st);
			CHECK_EQ_U64(st.procs_from_events, 2);
			CHECK_EQ_U64(st.maps_reads, 0);
		} else {
			CHECK(st.maps_reads + st.procs_unchanged >= 3);
			CHECK_EQ_U64(st.procs_from_events, 0);
		}
		/* kernel threads: no user stacks, nothing to install or read */
		kthread = (struct pp_proc){.pid = 2, .flags = PP_PROC_F_KTHREAD};
		pp_unwinder_note_proc(u, &kthread);
		pp_unwinder_drain(u);
		CHECK(mem_proc(m, 2) == NULL);
		pp_unwinder_release(u, (uint32_t)a);
		pp_unwinder_drain(u);
		pp_unwinder_free(u);
	}
	stop(a);
	pp_proc_cache_free(pc);
	mem_sink_free(m);
}

/*
 * A process's list made again that the sink refuses (no room for it) takes the list before
 * with it: that list names tables the process lets go, whose rows are reused once they are
 * evicted, and a walk over it would read another file's rows. The next change installs it
 * again.
 */
TEST(a_refused_reinstall_removes_the_list_before)
{
	struct pp_proc_cache *pc = pp_proc_cache_new(&(struct pp_proc_cache_opts){.capacity = 8});
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder_stats st;
	const struct pp_proc *p;
	struct pp_unwinder *u;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL && pc != NULL);
	a = start("chain");
	p = pp_proc_cache_get(pc, (uint32_t)a);
	REQUIRE(p != NULL && p->maps.n > 0);
	u = pp_unwinder_new(&m->sink,
			    &(struct pp_unwinder_opts){.worker = true, .mmap_reports = true});
	REQUIRE(u != NULL);
	pp_unwinder_note_proc(u, p);
	pp_unwinder_drain(u);
	REQUIRE(mem_proc(m, (uint32_t)a) != NULL);
	REQUIRE(mem_proc(m, (uint32_t)a)->nr > 0);

	m->refuse = true;
	mapped_since(u, p, &st);
	CHECK_EQ_U64(st.procs_no_room, 1);
	CHECK_EQ_U64(st.procs_live, 0);
	CHECK(mem_proc(m, (uint32_t)a) == NULL);

	m->refuse = false;
	mapped_since(u, p, &st);
	CHECK(mem_proc(m, (uint32_t)a) != NULL);
	CHECK_EQ_U64(st.procs_live, 1);
	pp_unwinder_release(u, (uint32_t)a);
	pp_unwinder_drain(u);
	CHECK(mem_proc(m, (uint32_t)a) == NULL);
	CHECK_EQ_U64(m->wrong_at, 0);
	pp_unwinder_free(u);
	stop(a);
	pp_proc_cache_free(pc);
	mem_sink_free(m);
}

/* The executable mappings of files in pid's maps: what an install asks a table for. */
static unsigned exec_file_mappings(const struct pp_proc *p)
{
	unsigned n = 0;

	for (size_t i = 0; i < p->maps.n; i++) {
		const struct pp_map_entry *e = &p->maps.entries[i];

		n += e->kind == PP_MAP_KIND_FILE && (e->perms & PP_MAP_EXEC) && e->inode &&
		     !e->deleted;
	}
	return n;
}

static uint64_t installed_by_identity(struct pp_unwinder *u, const struct pp_proc *p)
{
	struct pp_unwinder_stats before, after;

	pp_unwinder_get_stats(u, &before);
	mapped_since(u, p, &after);
	return after.tables_by_identity - before.tables_by_identity;
}

/*
 * Each file is found again by its own name, without an open: a copy of a program (the same
 * CFI, one table for both) as the side-band names it, one process after the other, and a
 * second process of a program read from /proc (a fork of a process older than the agent maps
 * what its parent did). Before, a table kept one name: the copy and the original took it in
 * turn, and every install of either opened its file again.
 */
TEST(files_sharing_a_table_are_each_found_again_without_an_open)
{
	struct pp_proc_cache *pc = pp_proc_cache_new(&(struct pp_proc_cache_opts){.capacity = 8});
	struct mem_sink *m = mem_sink_new(1u << 20);
	const struct pp_proc *pa, *pb, *pc2;
	struct pp_unwinder *u;
	unsigned na, nb;
	pid_t a, b, c;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL && pc != NULL);
	REQUIRE(pp_test_sh("cp '%s/chain' '%s/chain_copy'", g_dir, g_dir) == 0);
	a = start("chain");
	b = start("chain_copy");
	c = start("chain");
	pa = pp_proc_cache_get(pc, (uint32_t)a);
	pb = pp_proc_cache_get(pc, (uint32_t)b);
	pc2 = pp_proc_cache_get(pc, (uint32_t)c);
	REQUIRE(pa != NULL && pb != NULL && pc2 != NULL);
	na = exec_file_mappings(pa);
	nb = exec_file_mappings(pb);
	REQUIRE(na >= 3 && nb == na); /* the program, libpp_chain, libpp_chain_fp, libc, ld.so */
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.mmap_reports = true});
	REQUIRE(u != NULL);

	/* read from /proc: a's files opened once, c's (the same files) found by a's names */
	CHECK_EQ_U64(installed_by_identity(u, pa), 0);
	CHECK_EQ_U64(installed_by_identity(u, pc2), na);

	/* named by the side-band: each file's name found again, the copy's and the original's */
	for (size_t i = 0; i < pa->maps.n; i++)
		((struct pp_proc *)pa)->maps.entries[i].from_sideband = 1;
	for (size_t i = 0; i < pb->maps.n; i++)
		((struct pp_proc *)pb)->maps.entries[i].from_sideband = 1;
	(void)installed_by_identity(u, pa);
	(void)installed_by_identity(u, pb);
	for (int round = 0; round < 3; round++) {
		CHECK_EQ_U64(installed_by_identity(u, pa), na);
		CHECK_EQ_U64(installed_by_identity(u, pb), nb);
	}
	/* one table for the program and its copy */
	{
		const struct pp_bpf_unwind_list *la = mem_proc(m, (uint32_t)a);
		const struct pp_bpf_unwind_list *lb = mem_proc(m, (uint32_t)b);
		const struct pp_bpf_unwind_mapping *ma = la ? mapping_of(la, a, "/chain") : NULL;
		const struct pp_bpf_unwind_mapping *mb =
		    lb ? mapping_of(lb, b, "/chain_copy") : NULL;

		REQUIRE(ma != NULL && mb != NULL);
		CHECK_EQ_U64(ma->first_word, mb->first_word);
		CHECK(ma->nr_pages > 0 && ma->nr_pages == mb->nr_pages);
	}
	pp_unwinder_free(u);
	stop(a);
	stop(b);
	stop(c);
	pp_proc_cache_free(pc);
	mem_sink_free(m);
}

/*
 * A process with more executable mappings than a list holds (JIT code in hundreds of
 * regions): its files' mappings keep their room, in the order of addresses, and the code of
 * no file takes what is left.
 */
TEST(files_keep_their_room_in_a_full_list)
{
	struct pp_proc_cache *pc = pp_proc_cache_new(&(struct pp_proc_cache_opts){.capacity = 8});
	struct mem_sink *m = mem_sink_new(1u << 20);
	const struct pp_bpf_unwind_list *bp;
	struct pp_unwinder_stats st;
	const struct pp_proc *p;
	struct pp_unwinder *u;
	struct pp_proc big;
	struct pp_maps maps;
	char path[64], *text, *own;
	size_t len = 0, own_len = 0, files = 0, anon = 0;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL && pc != NULL);
	a = start("chain");
	p = pp_proc_cache_get(pc, (uint32_t)a);
	REQUIRE(p != NULL && p->maps.n > 0);
	/* 300 regions of anonymous code below the files, then the process's own lines */
	snprintf(path, sizeof(path), "/proc/%d/maps", a);
	REQUIRE(pp_read_text_whole(path, 1 << 20, &own, &own_len) == 0);
	text = malloc(300 * 64 + own_len);
	REQUIRE(text != NULL);
	for (int i = 0; i < 300; i++)
		len += (size_t)snprintf(text + len, 64, "%lx-%lx r-xp 00000000 00:00 0\n",
					0x10000000ul + i * 0x2000ul, 0x10001000ul + i * 0x2000ul);
	memcpy(text + len, own, own_len);
	len += own_len;
	free(own);
	REQUIRE(pp_maps_parse(text, len, &maps) == 0);
	for (size_t i = 0; i < maps.n; i++)
		if (maps.entries[i].perms & PP_MAP_EXEC)
			maps.entries[i].kind == PP_MAP_KIND_FILE ? files++ : anon++;
	REQUIRE(files >= 3 && anon > 300);
	big = *p;
	big.maps = maps;
	big.flags |= PP_PROC_F_EVENTS;
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.mmap_reports = true});
	REQUIRE(u != NULL);
	pp_unwinder_note_proc(u, &big);
	pp_unwinder_drain(u);
	bp = mem_proc(m, (uint32_t)a);
	REQUIRE(bp != NULL);
	CHECK_EQ_U64(bp->nr, PP_UNWIND_MAX_MAPPINGS);
	CHECK(mapping_of(bp, a, "libc.so.6") != NULL);
	CHECK(mapping_of(bp, a, "libpp_chain.so") != NULL);
	CHECK(mapping_of(bp, a, "libc.so.6")->nr_pages > 10);
	/* the anonymous regions first (lowest), as many as leave room for every file */
	CHECK_EQ_U64(bp->m[0].start, 0x10000000);
	CHECK_EQ_U64(bp->m[0].nr_pages, 0);
	CHECK_EQ_U64(bp->m[PP_UNWIND_MAX_MAPPINGS - files - 1].start,
		     0x10000000 + (PP_UNWIND_MAX_MAPPINGS - files - 1) * 0x2000ul);
	for (uint32_t i = 1; i < bp->nr; i++)
		CHECK(bp->m[i - 1].end <= bp->m[i].start);
	/* not all of them: code outside the list is not taken for new (no stack copies) */
	CHECK_EQ_U64(bp->flags, 0);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.mappings_cut, 0);
	CHECK_EQ_U64(st.mappings, files);
	pp_unwinder_free(u);
	pp_maps_fini(&maps);
	free(text);
	stop(a);
	pp_proc_cache_free(pc);
	mem_sink_free(m);
}

/*
 * With kick_by_caller the worker takes what a turn queued when the caller kicks it, once:
 * a process noted while the worker sleeps is not installed before the kick (it sleeps on),
 * and is after it.
 */
TEST(a_caller_kicked_worker_installs_at_the_kick)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder_stats st;
	struct pp_unwinder *u;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	u = pp_unwinder_new(&m->sink,
			    &(struct pp_unwinder_opts){.worker = true, .kick_by_caller = true});
	REQUIRE(u != NULL);
	a = start("chain");
	/* the worker asleep first: a thread just started would find the queue without a wake */
	pp_unwinder_drain(u);
	pp_unwinder_note(u, (uint32_t)a);
	usleep(200 * 1000); /* the worker would have installed it long since, woken */
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.procs_installed, 0);
	CHECK(mem_proc(m, (uint32_t)a) == NULL);
	pp_unwinder_kick(u);
	for (int i = 0; i < 500 && !mem_proc(m, (uint32_t)a); i++)
		usleep(10 * 1000);
	CHECK(mem_proc(m, (uint32_t)a) != NULL);
	pp_unwinder_release(u, (uint32_t)a);
	pp_unwinder_drain(u);
	stop(a);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/* A sink whose process lists wait for the test to open a gate: the worker stays busy. */
static volatile int g_gate_open;

static int gated_set_proc(void *ctx, uint32_t tgid, const struct pp_bpf_unwind_list *p,
			  uint64_t *at)
{
	for (int i = 0; i < 10000 && !__atomic_load_n(&g_gate_open, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	return mem_set_proc(ctx, tgid, p, at);
}

/* The end of a capture waits for the worker a bounded time: said when it is still busy. */
TEST(drain_for_waits_a_bounded_time)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder *u;
	struct pp_unwinder_stats st;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	m->sink.set_proc = gated_set_proc;
	__atomic_store_n(&g_gate_open, 0, __ATOMIC_RELEASE);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.worker = true});
	REQUIRE(u != NULL);
	a = start("chain");
	pp_unwinder_note(u, (uint32_t)a);
	CHECK_EQ_U64(pp_unwinder_drain_for(u, 50), (uint64_t)-ETIMEDOUT);
	__atomic_store_n(&g_gate_open, 1, __ATOMIC_RELEASE);
	CHECK_EQ_U64(pp_unwinder_drain_for(u, 10000), 0);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.procs_installed, 1);
	CHECK(mem_proc(m, (uint32_t)a) != NULL);
	stop(a);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/* One start of the agent: pid installed into m, and what it took. */
static void agent_start(struct mem_sink *m, const struct pp_unwinder_opts *o, pid_t pid,
			struct pp_unwinder_stats *st)
{
	struct pp_unwinder *u = pp_unwinder_new(&m->sink, o);

	memset(st, 0, sizeof(*st));
	REQUIRE(u != NULL);
	CHECK(pp_unwinder_install(u, (uint32_t)pid) == 0);
	pp_unwinder_get_stats(u, st);
	pp_unwinder_free(u);
}

/*
 * Two starts of the agent with one table cache: the second reads every table the first
 * compiled, compiles none, knows the digests of the files unchanged since (identities), and
 * puts the very rows and rules in the kernel's arrays that the first did. A cache file altered
 * between the starts is refused, removed and compiled again.
 */
TEST(a_second_start_reads_the_tables_from_the_cache)
{
	struct mem_sink *m1 = mem_sink_new(1u << 20), *m2 = mem_sink_new(1u << 20);
	char dir[600];
	struct pp_unwinder_opts o = {0};
	struct pp_unwinder_stats s1, s2;
	const struct pp_bpf_unwind_list *p1, *p2;
	pid_t a;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m1 && m2);
	snprintf(dir, sizeof(dir), "%s/table-cache", g_dir);
	o.table_cache_dir = dir;
	a = start("chain_cxx");

	agent_start(m1, &o, a, &s1);
	CHECK(s1.cache_on);
	CHECK(s1.tables_built >= 3); /* chain_cxx, libpp_chain, libstdc++, libc, ... */
	CHECK_EQ_U64(s1.tables_from_cache, 0);
	CHECK_EQ_U64(s1.cache_stored, s1.tables_built);
	CHECK(s1.cache_bytes > 0);

	agent_start(m2, &o, a, &s2);
	CHECK_EQ_U64(s2.tables_built, 0);
	CHECK_EQ_U64(s2.tables_from_cache, s1.tables_built);
	/* libc's and libstdc++'s digests from the first start's identities, not read again (the
	 * test's own files, built just now, are read: too fresh to trust their ctime) */
	CHECK_EQ_U64(s1.cache_identity_hits, 0);
	CHECK(s2.cache_identity_hits >= 2 && s2.cache_identity_hits <= s1.tables_built);
	CHECK_EQ_U64(s2.rows_used, s1.rows_used);
	CHECK_EQ_U64(s2.cache_refused, 0);
	/* the same lists, runs, rows and rules: one allocation order, one packing */
	p1 = mem_proc(m1, (uint32_t)a);
	p2 = mem_proc(m2, (uint32_t)a);
	REQUIRE(p1 && p2);
	CHECK(!memcmp(p1, p2, sizeof(*p1)));
	CHECK(!memcmp(m1->rows, m2->rows, s1.rows_used * sizeof(uint32_t)));
	CHECK(!memcmp(m1->rules, m2->rules, sizeof(m1->rules)));

	/* every file altered in its middle: refused, removed, compiled and kept again */
	CHECK(pp_test_sh("for f in '%s'/*.uwt; do printf X | dd of=\"$f\" bs=1 seek=200 "
			 "conv=notrunc 2>/dev/null; done",
			 dir) == 0);
	agent_start(m2, &o, a, &s2);
	CHECK_EQ_U64(s2.tables_from_cache, 0);
	CHECK_EQ_U64(s2.cache_refused, s1.tables_built);
	CHECK_EQ_U64(s2.tables_built, s1.tables_built);
	CHECK_EQ_U64(s2.cache_stored, s1.tables_built);
	stop(a);
	mem_sink_free(m1);
	mem_sink_free(m2);
}

/*
 * A hostile neighbour ships a library claiming the build id of one the node runs, with other
 * CFI: it gets a table of its own, and the genuine library's processes keep theirs (tables are
 * keyed by the digest of their CFI, not by what a file says it is).
 */
TEST(a_file_claiming_anothers_build_id_gets_its_own_table)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct pp_unwinder_stats s1, s2;
	const struct pp_bpf_unwind_mapping *real, *forged;
	char path[PATH_MAX], id_real[64] = "", id_forged[64] = "";
	struct pp_unwinder *u;
	pid_t a, b;
	int fd;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	/* the same bytes but for one in the middle of .eh_frame: the same build id */
	REQUIRE(pp_test_sh(
		    "cd '%s' && mkdir -p forged && cp libpp_chain.so forged/ && "
		    "set -- $(readelf -SW forged/libpp_chain.so | sed -n "
		    "'s/.*] \\.eh_frame  *PROGBITS  *[0-9a-f]*  *\\([0-9a-f]*\\)  *"
		    "\\([0-9a-f]*\\).*/\\1 \\2/p') && "
		    "printf '\\377' | dd of=forged/libpp_chain.so bs=1 seek=$((0x$1 + 0x$2 / 2)) "
		    "conv=notrunc 2>/dev/null && ! cmp -s libpp_chain.so forged/libpp_chain.so",
		    g_dir) == 0);
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "%s/%slibpp_chain.so", g_dir, k ? "forged/" : "");
		fd = open(path, O_RDONLY | O_CLOEXEC);
		REQUIRE(fd >= 0);
		REQUIRE(pp_elf_read_build_id_fd(fd, k ? id_forged : id_real, sizeof(id_real)) == 0);
		close(fd);
	}
	CHECK(id_real[0] && !strcmp(id_real, id_forged));

	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	a = start("chain");
	CHECK(pp_unwinder_install(u, (uint32_t)a) == 0);
	pp_unwinder_get_stats(u, &s1);
	snprintf(path, sizeof(path), "%s/forged", g_dir);
	setenv("LD_LIBRARY_PATH", path, 1); /* before the run path: the forged copy is loaded */
	b = start("chain");
	unsetenv("LD_LIBRARY_PATH");
	CHECK(pp_unwinder_install(u, (uint32_t)b) == 0);
	pp_unwinder_get_stats(u, &s2);
	REQUIRE(mem_proc(m, (uint32_t)a) && mem_proc(m, (uint32_t)b));
	real = mapping_of(mem_proc(m, (uint32_t)a), a, "/libpp_chain.so");
	forged = mapping_of(mem_proc(m, (uint32_t)b), b, "forged/libpp_chain.so");
	REQUIRE(real != NULL && forged != NULL);
	CHECK(real->nr_pages >= 1);
	/* compiled apart (or found without CFI), never served the genuine file's run */
	CHECK(s2.tables_built + s2.tables_none == s1.tables_built + s1.tables_none + 1);
	CHECK(!(forged->nr_pages && forged->first_word == real->first_word));
	printf("  forged copy: %s (%u pages at word %u; the genuine file's at %u)\n",
	       forged->nr_pages ? "its own table" : "no table", forged->nr_pages,
	       forged->first_word, real->first_word);
	stop(a);
	stop(b);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/* --- stack copies walked once their process has tables --- */

struct walked_copy {
	int status;
	enum pp_unwind_stop why;
	size_t npcs;
	uint64_t pcs[PP_MAX_STACK_DEPTH];
	unsigned table_frames;
	char blob[16];
};

struct walked_box {
	size_t n;
	struct walked_copy w[4];
};

static void keep_walked(void *ctx, const struct pp_unwind_walked *w)
{
	struct walked_box *b = ctx;
	struct walked_copy *c = b->n < 4 ? &b->w[b->n] : NULL;

	b->n++;
	if (!c)
		return;
	c->status = w->status;
	c->why = w->why;
	c->npcs = w->npcs;
	memcpy(c->pcs, w->pcs, w->npcs * sizeof(*w->pcs));
	c->table_frames = w->st.table_frames;
	snprintf(c->blob, sizeof(c->blob), "%.*s", (int)w->blob_len, (const char *)w->blob);
}

static void count_walked(void *ctx, const struct pp_unwind_walked *w)
{
	(void)w;
	(*(size_t *)ctx)++;
}

/* The function at pc in pid's executable mappings (pc - 1 for a return address). */
static void function_at(pid_t pid, uint64_t pc, char *out, size_t size)
{
	char path[64], line[640], file[512];
	unsigned long lo, hi, off;
	char perms[8];
	FILE *f;

	snprintf(out, size, "?");
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		struct pp_elf_symbols *syms;
		const char *name;
		uint64_t vaddr;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %511s", &lo, &hi, perms, &off, file) !=
			5 ||
		    perms[2] != 'x' || pc < lo || pc >= hi)
			continue;
		syms = pp_elf_symbols_open_path(file);
		if (syms && pp_elf_symbols_map_addr(syms, pc, lo, off, &vaddr) == 0 &&
		    (name = pp_elf_symbols_lookup(syms, vaddr, NULL)))
			snprintf(out, size, "%s", name);
		pp_elf_symbols_free(syms);
		break;
	}
	if (f)
		fclose(f);
}

/* A copy of len bytes of the dumped stack, walked later, tagged (the blob) with tag. */
static int walk_dump(struct pp_unwinder *u, uint32_t tgid, const struct pp_chain_dump *d,
		     const uint8_t *stack, uint32_t len, const char *tag)
{
	return pp_unwinder_walk_later(u, &(struct pp_unwind_later){
					     .tgid = tgid,
					     .regs = {.rip = d->rip, .rsp = d->rsp, .rbp = d->rbp},
					     .stack = stack,
					     .stack_base = d->rsp,
					     .stack_len = len,
					     .blob = tag,
					     .blob_len = strlen(tag),
					 });
}

/* The chain program's frames, leaf first, as perf names them (chain.expected): how many. */
static size_t chain_expected(char want[64][64])
{
	char path[600];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/unwind/chain.expected", PP_TEST_DATA_DIR);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < 64 && fgets(want[n], sizeof(want[0]), f))
		want[n][strcspn(want[n], "\n")] = '\0', n++;
	fclose(f);
	return n;
}

/*
 * The chain program started, holding its deepest frame while its dump (registers and stack,
 * tagged name) is read: its pid, *stack (malloc'ed, NULL where no dump came), and *len, what
 * the shim copies of it (from sp to the end of the page after sp's, and the 8 KiB above).
 */
static pid_t chain_dumped(const char *name, struct pp_chain_dump *d, uint8_t **stack, uint32_t *len)
{
	char dump[600], prog[600];
	pid_t pid;
	FILE *f;

	*stack = NULL;
	snprintf(dump, sizeof(dump), "%s/%s.dump", g_dir, name);
	snprintf(prog, sizeof(prog), "%s/chain", g_dir);
	unlink(dump);
	pid = fork();
	if (pid == 0) {
		setenv("PP_CHAIN_DUMP", dump, 1);
		setenv("PP_CHAIN_HOLD", "30", 1);
		execl(prog, "chain", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; pid > 0 && i < 1000 && !*stack; i++) { /* whole once its maps are in */
		f = fopen(dump, "rb");
		if (f && fread(d, sizeof(*d), 1, f) == 1 && d->len && d->len < (1u << 20)) {
			*stack = malloc(d->len);
			if (*stack && fread(*stack, 1, d->len, f) != d->len) {
				free(*stack);
				*stack = NULL;
			}
		}
		if (f)
			fclose(f);
		if (!*stack)
			usleep(10000);
	}
	*len = (uint32_t)(PP_RAW_USTACK_MAX - (d->rsp & 4095));
	if (*stack && *len > d->len)
		*len = (uint32_t)d->len;
	return pid;
}

/*
 * A sample of a process without tables carries the top of its stack (PP_SF_USTACK_RAW): the
 * copy is walked behind the process's install with the rows and rules the shim would have
 * read, and gives the whole 28-frame chain of the chain program (built without frame
 * pointers), named as perf names it, down to main; a copy cut short stops at its end
 * (unreadable) with the same first frames; a process never installed gives nothing; the
 * walks waiting are bounded; and a walk takes no more frames than the shim's depth.
 */
TEST(a_stack_copy_is_walked_once_its_process_has_tables)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	char want[64][64], got[128];
	struct pp_unwinder_stats st;
	struct walked_box box = {0};
	struct pp_chain_dump d = {0};
	struct pp_unwinder *u;
	uint8_t *stack = NULL;
	size_t nwant = 0, taken = 0;
	uint32_t len;
	pid_t pid;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	nwant = chain_expected(want);
	pid = chain_dumped("later", &d, &stack, &len);
	REQUIRE(pid > 0 && stack != NULL);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	pp_unwinder_note(u, (uint32_t)pid); /* the sample's process: its install comes first */
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, len, "whole") == 0);
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, 96, "cut") == 0);
	CHECK(walk_dump(u, 1, &d, stack, len, "none") == 0); /* never noted: no list */
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), 3);
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 0); /* not walked yet */
	pp_unwinder_drain(u);
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 3);
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), 0);
	REQUIRE(box.n == 3);
	CHECK(!strcmp(box.w[0].blob, "whole") && !strcmp(box.w[1].blob, "cut") &&
	      !strcmp(box.w[2].blob, "none"));
	/* the whole chain, leaf first, to its outermost frame */
	CHECK(box.w[0].status == 0);
	CHECK(box.w[0].why == PP_UNWIND_END);
	CHECK(box.w[0].table_frames > 0);
	CHECK(box.w[0].npcs > nwant);
	CHECK_EQ_U64(box.w[0].pcs[0], d.rip);
	for (size_t i = 0; i < nwant && i < box.w[0].npcs; i++) {
		function_at(pid, box.w[0].pcs[i] - (i > 0), got, sizeof(got));
		if (strcmp(got, want[i]))
			fprintf(stderr, "frame %zu: %s, expected %s\n", i, got, want[i]);
		CHECK(!strcmp(got, want[i]));
	}
	/* cut: stops where the copy ends, its frames the whole walk's */
	CHECK(box.w[1].status == 0);
	CHECK(box.w[1].why == PP_UNWIND_UNREADABLE);
	CHECK(box.w[1].npcs >= 1 && box.w[1].npcs < box.w[0].npcs);
	CHECK(!memcmp(box.w[1].pcs, box.w[0].pcs, box.w[1].npcs * sizeof(uint64_t)));
	CHECK(box.w[2].status == -ESRCH);
	CHECK_EQ_U64(box.w[2].npcs, 0);

	/* bounded: the walks past PP_UNWIND_WALKS_MAX waiting are refused, and counted */
	for (int i = 0; i < PP_UNWIND_WALKS_MAX; i++)
		REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == 0);
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == -ENOSPC);
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, PP_RAW_USTACK_MAX + 1, "") == -EINVAL);
	pp_unwinder_drain(u);
	/*
	 * Walked and not taken (a loop short of CPU): they hold their frames and sample, not the
	 * copies, and leave room for as many copies again, up to PP_UNWIND_WALKED_MAX of them
	 */
	for (int i = 0; i < PP_UNWIND_WALKS_MAX; i++)
		REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == 0);
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == -ENOSPC);
	pp_unwinder_drain(u);
	for (int i = 2 * PP_UNWIND_WALKS_MAX; i < PP_UNWIND_WALKED_MAX - 1; i++) {
		REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == 0);
		if (i % PP_UNWIND_WALKS_MAX == PP_UNWIND_WALKS_MAX - 1)
			pp_unwinder_drain(u);
	}
	pp_unwinder_drain(u);
	/* a copy queued is a walk done to come: one short of the bound, one more fits */
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == 0);
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == -ENOSPC);
	pp_unwinder_drain(u);
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), PP_UNWIND_WALKED_MAX);
	CHECK(walk_dump(u, (uint32_t)pid, &d, stack, len, "") == -ENOSPC);
	box.n = 0;
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), PP_UNWIND_WALKED_MAX);
	/* in queue order, each with its frames and its sample as given (box keeps the first) */
	CHECK(box.w[0].status == 0 && box.w[0].npcs >= 1 && !strcmp(box.w[0].blob, ""));
	CHECK_EQ_U64(pp_unwinder_take_walked(u, count_walked, &taken), 0);
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "after") == 0);
	pp_unwinder_drain(u);
	box.n = 0;
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 1);
	CHECK(box.w[0].status == 0 && !strcmp(box.w[0].blob, "after"));
	CHECK(box.w[0].npcs >= 1);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.walks_done, PP_UNWIND_WALKED_MAX + 4);
	CHECK_EQ_U64(st.walks_refused, 4);
	pp_unwinder_free(u);

	/* the shim's user stack depth (record's --max-stack) bounds the walk as it bounds its own
	 */
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.max_frames = 5});
	REQUIRE(u != NULL);
	pp_unwinder_note(u, (uint32_t)pid);
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "depth") == 0);
	pp_unwinder_drain(u);
	box.n = 0;
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 1);
	CHECK(box.w[0].status == 0 && box.w[0].why == PP_UNWIND_DEPTH);
	CHECK_EQ_U64(box.w[0].npcs, 5);
	stop(pid);
	free(stack);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/*
 * A copy taken in an image its process has replaced by an exec since (a wrapper's) is walked
 * with a list of that image's mappings, made for the walk and never written to the shim: the
 * whole chain, as its process's own list gives it, where that process's list now belongs to
 * another image (here: none, and then one of no mapping at all). Its tables are held for the
 * walk alone: a process installed after it still finds them, and they can go.
 */
TEST(a_copy_of_an_image_replaced_by_exec_is_walked_with_that_images_mappings)
{
	struct mem_sink *m = mem_sink_new(1u << 20), *m2 = mem_sink_new(1u << 20);
	struct pp_proc image = {.flags = PP_PROC_F_EVENTS | PP_PROC_F_REPLACED};
	struct pp_unwinder_stats st;
	struct walked_box box = {0};
	struct pp_chain_dump d = {0};
	struct pp_unwinder *u;
	uint8_t *stack = NULL;
	char path[64], *text = NULL;
	size_t tlen = 0;
	uint32_t len;
	pid_t pid;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL && m2 != NULL);
	pid = chain_dumped("image", &d, &stack, &len);
	REQUIRE(pid > 0 && stack != NULL);
	/* the image as the side-band reported it: the chain's mappings */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	REQUIRE(pp_read_text_whole(path, 1 << 20, &text, &tlen) == 0);
	REQUIRE(pp_maps_parse(text, tlen, &image.maps) == 0);
	free(text);
	image.pid = (uint32_t)pid;
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	/* the reference: the process's own list */
	pp_unwinder_note(u, (uint32_t)pid);
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "own") == 0);
	pp_unwinder_drain(u);
	REQUIRE(pp_unwinder_take_walked(u, keep_walked, &box) == 1);
	REQUIRE(box.w[0].status == 0 && box.w[0].why == PP_UNWIND_END);
	pp_unwinder_free(u);

	/* a fresh unwinder and shim, the process never noted: no list for it */
	u = pp_unwinder_new(&m2->sink, &(struct pp_unwinder_opts){0});
	REQUIRE(u != NULL);
	REQUIRE(pp_unwinder_walk_later(u, &(struct pp_unwind_later){
					      .tgid = (uint32_t)pid,
					      .regs = {.rip = d.rip, .rsp = d.rsp, .rbp = d.rbp},
					      .stack = stack,
					      .stack_base = d.rsp,
					      .stack_len = len,
					      .blob = "image",
					      .blob_len = 5,
					      .image = &image,
					  }) == 0);
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "plain") == 0);
	pp_unwinder_drain(u);
	REQUIRE(pp_unwinder_take_walked(u, keep_walked, &box) == 2);
	CHECK(!strcmp(box.w[1].blob, "image") && !strcmp(box.w[2].blob, "plain"));
	/* the same frames as the process's own list gave, every one */
	CHECK(box.w[1].status == 0);
	CHECK(box.w[1].why == PP_UNWIND_END);
	CHECK(box.w[1].table_frames == box.w[0].table_frames && box.w[1].table_frames > 0);
	CHECK_EQ_U64(box.w[1].npcs, box.w[0].npcs);
	CHECK(!memcmp(box.w[1].pcs, box.w[0].pcs, box.w[0].npcs * sizeof(uint64_t)));
	/* the plain copy, with no list of its process: not walked */
	CHECK(box.w[2].status == -ESRCH);
	/* no list was written for the process */
	CHECK(mem_proc(m2, (uint32_t)pid) == NULL);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.walks_of_images, 1);
	CHECK_EQ_U64(st.procs_installed, 0);
	/* its tables were let go: a process installed now shares them, none built again */
	{
		uint64_t built = st.tables_built;

		pp_unwinder_note(u, (uint32_t)pid);
		pp_unwinder_drain(u);
		pp_unwinder_get_stats(u, &st);
		CHECK_EQ_U64(st.procs_installed, 1);
		CHECK_EQ_U64(st.tables_built, built);
		CHECK(mem_proc(m2, (uint32_t)pid) != NULL);
	}
	stop(pid);
	free(stack);
	pp_maps_fini(&image.maps);
	pp_unwinder_free(u);
	mem_sink_free(m);
	mem_sink_free(m2);
}

/* The rule the shim finds at pc in mapping mp of the sink's array (NULL: no row). */
static const struct pp_bpf_unwind_rule *
shim_rule_at(struct mem_sink *m, const struct pp_bpf_unwind_mapping *mp, uint64_t pc)
{
	const uint32_t *run = &m->rows[mp->first_word];
	uint32_t rule;

	if (!mp->nr_pages || pc < mp->base ||
	    !pp_unwind_packed_find(run, run[mp->nr_pages], mp->nr_pages, pc - mp->base, &rule))
		return NULL;
	return &m->rules[rule];
}

/*
 * A partial table (every file here, partial_min_fdes 1): the shim first finds a deferred row
 * over the file's code (its walks take the sample's copy there); a copy walked in user space
 * finds the FDEs it reaches and gives the same whole chain, down to main, as whole tables do;
 * the rows found are written to the shim (deferred no longer at those pcs, still deferred
 * elsewhere), and a second walk of the same copy reads them from there; the chain's library,
 * whose 28 frames paid for its whole compile at once, is compiled whole. With
 * partial_min_fdes above every file's count, none is partial.
 */
TEST(partial_tables_find_rows_as_walks_reach_them)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	char want[64][64], got[128];
	const struct pp_bpf_unwind_mapping *libc, *lib;
	const struct pp_bpf_unwind_list *p;
	const struct pp_bpf_unwind_rule *r;
	struct pp_unwinder_stats st, st2;
	struct walked_box box = {0};
	struct pp_chain_dump d = {0}, dx = {0};
	struct pp_unwinder *u;
	uint8_t *stack = NULL, *sa = NULL, *sb = NULL;
	size_t nwant = 0, libc_frame = 0;
	uint32_t len, lx;
	pid_t pid, other_a, other_b;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	nwant = chain_expected(want);
	pid = chain_dumped("partial", &d, &stack, &len);
	REQUIRE(pid > 0 && stack != NULL);
	/*
	 * Two more processes of the program, one let go before the walks: a new run's holders
	 * are found among the live processes whichever place each holds there.
	 */
	other_a = chain_dumped("partial-a", &dx, &sa, &lx);
	other_b = chain_dumped("partial-b", &dx, &sb, &lx);
	REQUIRE(other_a > 0 && sa != NULL && other_b > 0 && sb != NULL);

	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.partial_min_fdes = 1});
	REQUIRE(u != NULL);
	REQUIRE(pp_unwinder_install(u, (uint32_t)other_a) == 0);
	REQUIRE(pp_unwinder_install(u, (uint32_t)pid) == 0);
	REQUIRE(pp_unwinder_install(u, (uint32_t)other_b) == 0);
	pp_unwinder_release(u, (uint32_t)other_a);
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &st);
	CHECK(st.tables_partial >= 3); /* chain, libpp_chain.so, libc and more */
	CHECK_EQ_U64(st.tables_built, 0);
	p = mem_proc(m, (uint32_t)pid);
	REQUIRE(p != NULL);
	lib = mapping_of(p, pid, "libpp_chain.so");
	libc = mapping_of(p, pid, "libc.so.6");
	REQUIRE(lib != NULL && libc != NULL);
	/* before any walk: deferred over the code, the sample's pc included */
	r = shim_rule_at(m, lib, d.rip);
	CHECK(r && r->cfa_rule == PP_UW_CFA_DEFERRED);

	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "first") == 0);
	pp_unwinder_drain(u);
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 1);
	CHECK(box.w[0].status == 0 && box.w[0].why == PP_UNWIND_END);
	CHECK(box.w[0].npcs > nwant);
	for (size_t i = 0; i < nwant && i < box.w[0].npcs; i++) {
		function_at(pid, box.w[0].pcs[i] - (i > 0), got, sizeof(got));
		if (strcmp(got, want[i]))
			fprintf(stderr, "frame %zu: %s, expected %s\n", i, got, want[i]);
		CHECK(!strcmp(got, want[i]));
	}
	for (size_t i = 1; i < box.w[0].npcs; i++)
		if (libc->start <= box.w[0].pcs[i] && box.w[0].pcs[i] < libc->end)
			libc_frame = i;
	pp_unwinder_get_stats(u, &st);
	CHECK(st.partial_fdes >= 3 && st.partial_frames >= 3);
	CHECK(st.partial_writes >= 1);
	CHECK(st.partial_promoted >= 1); /* libpp_chain.so: 28 misses, a few FDEs */

	/* the rows found are the shim's now: libc's frame has its rule, the rest is deferred */
	p = mem_proc(m, (uint32_t)pid);
	REQUIRE(p != NULL);
	lib = mapping_of(p, pid, "libpp_chain.so");
	libc = mapping_of(p, pid, "libc.so.6");
	REQUIRE(lib != NULL && libc != NULL && libc_frame > 0);
	r = shim_rule_at(m, lib, d.rip);
	CHECK(r && r->cfa_rule != PP_UW_CFA_DEFERRED && r->cfa_rule != PP_UW_CFA_NONE);
	r = shim_rule_at(m, libc, box.w[0].pcs[libc_frame] - 1);
	CHECK(r && r->cfa_rule != PP_UW_CFA_DEFERRED && r->cfa_rule != PP_UW_CFA_NONE);
	r = shim_rule_at(m, libc, libc->start + (libc->end - libc->start) / 2);
	CHECK(r && r->cfa_rule == PP_UW_CFA_DEFERRED);
	{ /* the other live process, which shares libc's table, was moved to the new run too */
		const struct pp_bpf_unwind_list *pb = mem_proc(m, (uint32_t)other_b);
		const struct pp_bpf_unwind_mapping *libc_b =
		    pb ? mapping_of(pb, other_b, "libc.so.6") : NULL;

		REQUIRE(libc_b != NULL);
		r = shim_rule_at(m, libc_b,
				 libc_b->start + (box.w[0].pcs[libc_frame] - 1 - libc->start));
		CHECK(r && r->cfa_rule != PP_UW_CFA_DEFERRED && r->cfa_rule != PP_UW_CFA_NONE);
	}

	/* the same copy again: the same chain, read from the shim's rows, no FDE looked up */
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "second") == 0);
	pp_unwinder_drain(u);
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 1);
	CHECK(box.w[1].status == 0 && box.w[1].why == PP_UNWIND_END);
	CHECK(box.w[1].npcs == box.w[0].npcs &&
	      !memcmp(box.w[1].pcs, box.w[0].pcs, box.w[0].npcs * sizeof(uint64_t)));
	pp_unwinder_get_stats(u, &st2);
	CHECK_EQ_U64(st2.partial_fdes, st.partial_fdes);
	CHECK_EQ_U64(st2.partial_frames, st.partial_frames);
	pp_unwinder_free(u);

	/* a bar above every file's FDEs: all compiled whole */
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.partial_min_fdes = 1u << 30});
	REQUIRE(u != NULL);
	REQUIRE(pp_unwinder_install(u, (uint32_t)pid) == 0);
	pp_unwinder_get_stats(u, &st);
	CHECK_EQ_U64(st.tables_partial, 0);
	CHECK(st.tables_built >= 3);
	stop(pid);
	stop(other_a);
	stop(other_b);
	free(stack);
	free(sa);
	free(sb);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/* libc's executable mapping in pid: its bounds, file offset and path; false where not found. */
static bool libc_text(pid_t pid, unsigned long *lo, unsigned long *hi, unsigned long *off,
		      char *path, size_t size)
{
	char maps[64], line[768], file[512];
	bool found = false;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "r");
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "libc.so.6") && strstr(line, " r-xp ") &&
			sscanf(line, "%lx-%lx %*s %lx %*s %*s %511s", lo, hi, off, file) == 4;
	if (f)
		fclose(f);
	if (found)
		snprintf(path, size, "%s", file);
	return found;
}

/*
 * A partial table's new run that a holder's list cannot be moved to (the sink refuses it):
 * that list goes, since it names the old run, whose rows are let go and reused. The walk
 * that found the rows comes out whole all the same, from the list kept here.
 */
TEST(a_holder_whose_list_cannot_move_to_a_new_run_loses_it)
{
	struct mem_sink *m = mem_sink_new(1u << 20);
	struct walked_box box = {0};
	struct pp_chain_dump d = {0};
	struct pp_unwinder_stats st;
	struct pp_unwinder *u;
	uint8_t *stack = NULL;
	uint32_t len;
	pid_t pid;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	pid = chain_dumped("partial-refused", &d, &stack, &len);
	REQUIRE(pid > 0 && stack != NULL);
	u = pp_unwinder_new(&m->sink, &(struct pp_unwinder_opts){.partial_min_fdes = 1});
	REQUIRE(u != NULL);
	REQUIRE(pp_unwinder_install(u, (uint32_t)pid) == 0);
	REQUIRE(mem_proc(m, (uint32_t)pid) != NULL);

	m->refuse = true;
	REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "refused") == 0);
	pp_unwinder_drain(u);
	CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 1);
	CHECK(box.w[0].status == 0 && box.w[0].why == PP_UNWIND_END);
	pp_unwinder_get_stats(u, &st);
	CHECK(st.partial_writes >= 1);
	CHECK(st.partial_move_failed >= 1);
	CHECK(mem_proc(m, (uint32_t)pid) == NULL);
	CHECK_EQ_U64(m->wrong_at, 0);
	stop(pid);
	free(stack);
	pp_unwinder_free(u);
	mem_sink_free(m);
}

/*
 * The FDEs an earlier start found in a partial table come back at the next start, all looked
 * up at once, in one pass over the rows: hundreds of them here, every 64th byte of the first
 * half of libc's code. The shim then finds at each of those addresses the rule libc's whole
 * table gives there, and the second half of libc is still deferred to walks.
 */
TEST(an_earlier_starts_fdes_are_looked_up_at_once)
{
	struct mem_sink *whole = mem_sink_new(1u << 22), *part = mem_sink_new(1u << 22);
	struct pp_unwinder_opts o = {.partial_min_fdes = 1u << 30};
	const struct pp_bpf_unwind_mapping *mw, *mp;
	const struct pp_bpf_unwind_rule *rw, *rp;
	unsigned long lo, hi, off;
	struct pp_unwinder_stats st;
	struct pp_table_cache *c;
	size_t nhints = 0, same = 0, failed = 0;
	uint64_t *hints;
	char dir[600], path[512];
	struct stat sb;
	pid_t pid;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(whole && part);
	snprintf(dir, sizeof(dir), "%s/found-cache", g_dir);
	pid = start("chain");
	REQUIRE(libc_text(pid, &lo, &hi, &off, path, sizeof(path)));
	REQUIRE(stat(path, &sb) == 0);
	/* runtime pc - lo + off is the file's address where the text is mapped as it lies */
	hints = malloc(((hi - lo) / 2 / 64 + 1) * sizeof(*hints));
	REQUIRE(hints != NULL);
	for (unsigned long pc = lo; pc < lo + (hi - lo) / 2; pc += 64)
		hints[nhints++] = pc - lo + off;
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir});
	REQUIRE(c != NULL);
	CHECK(pp_table_cache_put_found(c, &sb, hints, nhints) == 0);
	pp_table_cache_free(c);

	agent_start(whole, &o, pid, &st); /* libc's whole table: what the rules must be */
	CHECK_EQ_U64(st.tables_partial, 0);
	o.partial_min_fdes = 1;
	o.table_cache_dir = dir;
	agent_start(part, &o, pid, &st);
	CHECK(st.tables_partial >= 1);
	CHECK(st.partial_fdes_again > 100);
	mw = mapping_of(mem_proc(whole, (uint32_t)pid), pid, "libc.so.6");
	mp = mapping_of(mem_proc(part, (uint32_t)pid), pid, "libc.so.6");
	REQUIRE(mw && mp);
	for (size_t i = 0; i < nhints; i++) {
		uint64_t pc = hints[i] - off + lo;

		rw = shim_rule_at(whole, mw, pc);
		rp = shim_rule_at(part, mp, pc);
		if (!rw || rw->cfa_rule == PP_UW_CFA_NONE)
			continue; /* no FDE there (padding between functions) */
		if (rp && !memcmp(rw, rp, sizeof(*rw)))
			same++;
		else if (++failed <= 5)
			fprintf(stderr, "libc+0x%lx: the partial table's rule differs\n",
				(unsigned long)hints[i]);
	}
	CHECK(same > nhints / 2);
	CHECK_EQ_U64(failed, 0);
	rp = shim_rule_at(part, mp, lo + (hi - lo) * 3 / 4);
	CHECK(rp && rp->cfa_rule == PP_UW_CFA_DEFERRED);
	free(hints);
	stop(pid);
	mem_sink_free(whole);
	mem_sink_free(part);
}

/*
 * What partial tables' walks found is kept for a restart while the agent runs, not only at its
 * end (an agent killed keeps what it had found): by default not within the first 5 minutes,
 * so libc's found FDEs are on disk only once the unwinder is freed; with the period at 1 ms,
 * the drain after the walk keeps them while it runs.
 */
TEST(found_fdes_are_kept_while_the_agent_runs)
{
	struct mem_sink *m = mem_sink_new(1u << 22);
	struct pp_unwinder_opts o = {.partial_min_fdes = 1};
	struct walked_box box = {0};
	struct pp_chain_dump d = {0};
	struct pp_unwinder_stats st;
	struct pp_table_cache *c;
	struct pp_unwinder *u;
	unsigned long lo, hi, off;
	char dir[600], path[512];
	uint8_t *stack = NULL;
	uint64_t *got = NULL;
	struct stat sb;
	uint32_t len;
	size_t n = 0;
	pid_t pid;

	if (fixture() != 1)
		SKIP(g_skip_reason);
	REQUIRE(m != NULL);
	snprintf(dir, sizeof(dir), "%s/found-kept", g_dir);
	o.table_cache_dir = dir;
	pid = chain_dumped("kept", &d, &stack, &len);
	REQUIRE(pid > 0 && stack != NULL);
	REQUIRE(libc_text(pid, &lo, &hi, &off, path, sizeof(path)) && stat(path, &sb) == 0);

	for (int period = 0; period < 2; period++) {
		o.found_keep_ms = period ? 1 : 0;
		REQUIRE(pp_test_sh("rm -f '%s'/*.fdes", dir) == 0);
		u = pp_unwinder_new(&m->sink, &o);
		REQUIRE(u != NULL);
		REQUIRE(pp_unwinder_install(u, (uint32_t)pid) == 0);
		usleep(2000); /* the 1 ms period past */
		REQUIRE(walk_dump(u, (uint32_t)pid, &d, stack, len, "kept") == 0);
		pp_unwinder_drain(u);
		box.n = 0;
		CHECK_EQ_U64(pp_unwinder_take_walked(u, keep_walked, &box), 1);
		pp_unwinder_get_stats(u, &st);
		CHECK(st.partial_fdes >= 1);
		c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir});
		REQUIRE(c != NULL);
		if (period) {
			CHECK(pp_table_cache_get_found(c, &sb, &got, &n) == 0 && n >= 1);
			CHECK(st.partial_found_kept >= 1);
		} else {
			CHECK(pp_table_cache_get_found(c, &sb, &got, &n) == -ENOENT);
			CHECK_EQ_U64(st.partial_found_kept, 0);
		}
		free(got);
		got = NULL;
		pp_table_cache_free(c);
		pp_unwinder_free(u);
		/* kept at the end either way */
		c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir});
		REQUIRE(c != NULL);
		CHECK(pp_table_cache_get_found(c, &sb, &got, &n) == 0 && n >= 1);
		free(got);
		got = NULL;
		pp_table_cache_free(c);
	}
	stop(pid);
	free(stack);
	mem_sink_free(m);
}

/* xorshift64: the sink test's writes and reads, the same every run */
static uint64_t sink_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * The sink over a real BPF array: small writes through its kept mappings, large ones through
 * a mapping of their own, reads across pieces and after the kept ones were replaced; what it
 * reads back and what the kernel's array holds are what was written.
 */
TEST(the_bpf_sink_reads_what_it_wrote)
{
	const uint32_t nr_rows = 80u << 14; /* 80 pieces of 64 KiB: more than it keeps mapped */
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
	struct pp_unwinder_sink *sink;
	uint32_t *mirror, *buf;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pp_test_rows", 4, 8, nr_rows / 2, &opts);
	int peeked = 0;

	if (fd < 0 && (errno == EPERM || errno == EACCES))
		SKIP("cannot create BPF maps here: needs root or CAP_BPF");
	REQUIRE(fd >= 0);
	sink = pp_unwinder_bpf_sink_new(fd, nr_rows, fd, fd, fd, 1);
	mirror = calloc(nr_rows, sizeof(*mirror));
	buf = malloc(nr_rows * sizeof(*buf));
	REQUIRE(sink && mirror && buf);
	for (int round = 0; round < 400; round++) {
		/* one write in ten large (up to 4 MiB), the rest up to 80 KiB, anywhere */
		uint32_t n = (uint32_t)(round % 10 == 9 ? sink_rand(&x) % (1u << 20)
							: sink_rand(&x) % 20000) +
			     1;
		uint32_t first = (uint32_t)(sink_rand(&x) % (nr_rows - n + 1));

		for (uint32_t i = 0; i < n; i++)
			buf[i] = (uint32_t)sink_rand(&x);
		REQUIRE(sink->write_rows(sink->ctx, first, buf, n) == 0);
		memcpy(mirror + first, buf, n * sizeof(*buf));
		for (int r = 0; r < 4; r++) {
			uint32_t rn = (uint32_t)(sink_rand(&x) % 3000) + 1;
			uint32_t rfirst = (uint32_t)(sink_rand(&x) % (nr_rows - rn + 1));

			const uint32_t *in_place;

			REQUIRE(sink->read_rows(sink->ctx, rfirst, rn, buf) == 0);
			CHECK(memcmp(buf, mirror + rfirst, rn * sizeof(*buf)) == 0);
			/* in place where one kept piece (64 KiB) holds the run, the same words */
			in_place = sink->peek_rows(sink->ctx, rfirst, rn);
			if (rfirst / 16384 == (rfirst + rn - 1) / 16384) {
				REQUIRE(in_place != NULL);
				CHECK(memcmp(in_place, mirror + rfirst, rn * sizeof(*buf)) == 0);
				peeked++;
			} else {
				CHECK(in_place == NULL);
			}
		}
	}
	CHECK(peeked > 1000);
	CHECK(sink->peek_rows(sink->ctx, nr_rows - 1, 2) == NULL);
	CHECK(sink->write_rows(sink->ctx, nr_rows - 1, buf, 2) == -ERANGE);
	CHECK(sink->read_rows(sink->ctx, nr_rows - 1, 2, buf) == -ERANGE);
	REQUIRE(sink->read_rows(sink->ctx, 0, nr_rows, buf) == 0);
	CHECK(memcmp(buf, mirror, nr_rows * sizeof(*buf)) == 0);
	/* The kernel's array itself, pair by pair, at a sample of its keys */
	for (uint32_t k = 0; k < nr_rows / 2; k += 997) {
		uint64_t v = 0;

		REQUIRE(bpf_map_lookup_elem(fd, &k, &v) == 0);
		CHECK(memcmp(&v, mirror + 2 * k, sizeof(v)) == 0);
	}
	pp_unwinder_bpf_sink_free(sink);
	free(mirror);
	free(buf);
	close(fd);
}

/* A list of n entries whose starts say which list and entry they are. */
static void fill_list(struct pp_bpf_unwind_list *l, uint32_t n, uint64_t tag)
{
	memset(l, 0, sizeof(*l));
	l->nr = n;
	l->flags = PP_UW_PROC_ALL_MAPPINGS;
	for (uint32_t i = 0; i < n; i++) {
		l->m[i].start = tag << 32 | (uint64_t)i << 12;
		l->m[i].end = l->m[i].start + 0x1000;
		l->m[i].first_word = (uint32_t)tag;
	}
}

/* What the kernel's maps hold for tgid: 0 and its value and entries, or -errno. */
static int kernel_list(int procs_fd, int mappings_fd, uint32_t tgid, struct pp_bpf_unwind_proc *v,
		       struct pp_bpf_unwind_mapping *m)
{
	if (bpf_map_lookup_elem(procs_fd, &tgid, v))
		return -errno;
	for (uint32_t i = 0; i < v->nr; i++) {
		uint32_t key = v->first + i;

		if (bpf_map_lookup_elem(mappings_fd, &key, &m[i]))
			return -errno;
	}
	return 0;
}

/*
 * Process lists over real BPF maps: each list is a run of the entry array the process's value
 * names; a list replaced or removed keeps its entries as they were until its run cooled (a
 * walk may still read them), and only then is its room given to another list; a list that
 * finds no room is refused, and the list before it stays.
 */
TEST(the_bpf_sink_writes_each_list_as_a_run_and_reuses_it_only_once_cooled)
{
	const uint32_t slots = 64;
	LIBBPF_OPTS(bpf_map_create_opts, mm, .map_flags = BPF_F_MMAPABLE);
	struct pp_bpf_unwind_list *l = malloc(sizeof(*l)), *l2 = malloc(sizeof(*l2));
	struct pp_bpf_unwind_mapping got[PP_UNWIND_MAX_MAPPINGS];
	struct pp_bpf_unwind_proc v, old;
	uint64_t at[4] = {0}, old_at; /* the sink's notes of tgids 100 to 103 */
	int rows = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pp_test_rows", 4, 8, 64, &mm);
	int procs = bpf_map_create(BPF_MAP_TYPE_HASH, "pp_test_procs", 4, sizeof(v),
				   PP_UNWIND_MAX_PROCS, NULL);
	int maps = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pp_test_lists", 4,
				  sizeof(struct pp_bpf_unwind_mapping), slots, &mm);
	struct pp_unwinder_sink *sink;
	struct timespec t0, t1;
	int ret;

	if (rows < 0 && (errno == EPERM || errno == EACCES))
		SKIP("cannot create BPF maps here: needs root or CAP_BPF");
	REQUIRE(rows >= 0 && procs >= 0 && maps >= 0 && l && l2);
	sink = pp_unwinder_bpf_sink_new(rows, 128, rows, procs, maps, slots);
	REQUIRE(sink != NULL);

	fill_list(l, 3, 1);
	REQUIRE(sink->set_proc(sink->ctx, 100, l, &at[0]) == 0);
	REQUIRE(kernel_list(procs, maps, 100, &v, got) == 0);
	CHECK(v.nr == 3 && v.flags == PP_UW_PROC_ALL_MAPPINGS && v.first + 3 <= slots);
	CHECK(memcmp(got, l->m, 3 * sizeof(*got)) == 0);
	old = v;

	/* replaced: a run of its own; the old entries still hold the old list */
	fill_list(l2, 5, 2);
	REQUIRE(sink->set_proc(sink->ctx, 100, l2, &at[0]) == 0);
	REQUIRE(kernel_list(procs, maps, 100, &v, got) == 0);
	CHECK(v.nr == 5 && memcmp(got, l2->m, 5 * sizeof(*got)) == 0);
	CHECK(v.first >= old.first + old.nr || v.first + v.nr <= old.first);
	for (uint32_t i = 0; i < old.nr; i++) {
		uint32_t key = old.first + i;
		struct pp_bpf_unwind_mapping e;

		REQUIRE(bpf_map_lookup_elem(maps, &key, &e) == 0);
		CHECK(memcmp(&e, &l->m[i], sizeof(e)) == 0);
	}

	/* 3 cooling + 5 named + 50 = 58 of 64: the next 10 find no room, and 101 keeps its list */
	fill_list(l, 50, 3);
	REQUIRE(sink->set_proc(sink->ctx, 101, l, &at[1]) == 0);
	fill_list(l2, 10, 4);
	CHECK(sink->set_proc(sink->ctx, 102, l2, &at[2]) == -ENOSPC);
	CHECK(bpf_map_lookup_elem(procs, &(uint32_t){102}, &v) != 0 && errno == ENOENT);
	CHECK(at[2] == 0);
	fill_list(l2, 7, 5);
	old_at = at[1];
	CHECK(sink->set_proc(sink->ctx, 101, l2, &at[1]) == -ENOSPC);
	REQUIRE(kernel_list(procs, maps, 101, &v, got) == 0);
	CHECK(v.nr == 50 && memcmp(got, l->m, 50 * sizeof(*got)) == 0);
	CHECK(at[1] == old_at); /* the note still says where the list before lies */

	/* removed: gone from the hash at once; its 5 entries cool with the 3 */
	sink->del_proc(sink->ctx, 100, at[0]);
	CHECK(bpf_map_lookup_elem(procs, &(uint32_t){100}, &v) != 0 && errno == ENOENT);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fill_list(l2, 8, 6); /* room once both cooled: the 8 entries before 101's */
	while ((ret = sink->set_proc(sink->ctx, 102, l2, &at[2])) == -ENOSPC) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec > 10)
			break;
		usleep(20 * 1000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(ret == 0);
	/* not before the cooling time (1 s), less a tick for the clocks' grain */
	CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 990);
	REQUIRE(kernel_list(procs, maps, 102, &v, got) == 0);
	CHECK(v.nr == 8 && memcmp(got, l2->m, 8 * sizeof(*got)) == 0);

	/* an empty list (the agent's own) takes no entries */
	fill_list(l2, 0, 7);
	CHECK(sink->set_proc(sink->ctx, 103, l2, &at[3]) == 0);
	REQUIRE(kernel_list(procs, maps, 103, &v, got) == 0);
	CHECK(v.nr == 0);
	pp_unwinder_bpf_sink_free(sink);
	free(l);
	free(l2);
	close(rows);
	close(procs);
	close(maps);
}

TEST_LIST = {
    {"the_bpf_sink_reads_what_it_wrote", the_bpf_sink_reads_what_it_wrote},
    {"the_bpf_sink_writes_each_list_as_a_run_and_reuses_it_only_once_cooled",
     the_bpf_sink_writes_each_list_as_a_run_and_reuses_it_only_once_cooled},
    {"found_fdes_are_kept_while_the_agent_runs", found_fdes_are_kept_while_the_agent_runs},
    {"an_earlier_starts_fdes_are_looked_up_at_once", an_earlier_starts_fdes_are_looked_up_at_once},
    {"a_file_claiming_anothers_build_id_gets_its_own_table",
     a_file_claiming_anothers_build_id_gets_its_own_table},
    {"a_second_start_reads_the_tables_from_the_cache",
     a_second_start_reads_the_tables_from_the_cache},
    {"a_process_gets_its_mappings_and_tables", a_process_gets_its_mappings_and_tables},
    {"a_refused_reinstall_removes_the_list_before", a_refused_reinstall_removes_the_list_before},
    {"a_holder_whose_list_cannot_move_to_a_new_run_loses_it",
     a_holder_whose_list_cannot_move_to_a_new_run_loses_it},
    {"files_are_compiled_once_and_releases_free_processes",
     files_are_compiled_once_and_releases_free_processes},
    {"a_small_budget_evicts_unused_tables_and_counts_what_does_not_fit",
     a_small_budget_evicts_unused_tables_and_counts_what_does_not_fit},
    {"the_worker_installs_noted_processes", the_worker_installs_noted_processes},
    {"a_caller_kicked_worker_installs_at_the_kick", a_caller_kicked_worker_installs_at_the_kick},
    {"a_process_read_from_proc_is_not_read_again_where_mappings_are_reported",
     a_process_read_from_proc_is_not_read_again_where_mappings_are_reported},
    {"drain_for_waits_a_bounded_time", drain_for_waits_a_bounded_time},
    {"files_keep_their_room_in_a_full_list", files_keep_their_room_in_a_full_list},
    {"files_sharing_a_table_are_each_found_again_without_an_open",
     files_sharing_a_table_are_each_found_again_without_an_open},
    {"partial_tables_find_rows_as_walks_reach_them", partial_tables_find_rows_as_walks_reach_them},
    {"a_copy_of_an_image_replaced_by_exec_is_walked_with_that_images_mappings",
     a_copy_of_an_image_replaced_by_exec_is_walked_with_that_images_mappings},
    {"a_stack_copy_is_walked_once_its_process_has_tables",
     a_stack_copy_is_walked_once_its_process_has_tables},
};
TEST_MAIN()
