/*
 * Collector cost per memory sample: N synthetic shim records go through
 * pp_session_handle_record (decode, process lookup, raw-stack table, symbolization on first
 * sight) twice in one run: once as plain samples (no memory fields, a non-memory session),
 * once as memory samples (data address, data source, latency) in a memory session, where each
 * sample also resolves its data address to an ELF data symbol or mapping class and gets its
 * labels. The records are this process's own: user stacks through its functions, data
 * addresses in its .data table, its 8 MiB .bss array (named through the anonymous .bss
 * mapping), its brk heap, an anonymous mapping and its stack, so /proc and the ELF tables
 * are real. A third pass sends the memory samples again with exact IPs at the loads of four
 * accessors of a struct, so that each also gets its data type and field (the collector's
 * cache per instruction; the loader's DWARF work on first sight, off the sampling thread).
 * Prints ns/sample for each (median of R repetitions, each with a fresh session and profile,
 * so first-sight costs are inside) and the ratios.
 *
 * Usage: pp_bench_mem [-n RECORDS] [-d DISTINCT] [-r REPS] [-D] [-t]
 *   -d  distinct records cycled through (default 65536); -D direct mode (no raw-stack table);
 *   -t  key=value lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/profile.h>

#include "memory/mem_attr.h"
#include "session.h"

#define BENCH_FN __attribute__((noinline, used))
#define MAX_REPS 51
#define NFUNCS 8
#define DEPTH 6
#define BSS_SIZE (8u << 20)
#define ANON_SIZE (4u << 20)
#define PERIOD 20011

__attribute__((used)) static volatile uint64_t bench_data_table[4096] = {1};
__attribute__((used)) static volatile uint8_t bench_bss_array[BSS_SIZE];
static volatile uint64_t sink;

/* Distinct code addresses for the stacks. */
BENCH_FN static void bench_f0(void)
{
	sink += 1;
}
BENCH_FN static void bench_f1(void)
{
	sink += 2;
}
BENCH_FN static void bench_f2(void)
{
	sink += 3;
}
BENCH_FN static void bench_f3(void)
{
	sink += 4;
}
BENCH_FN static void bench_f4(void)
{
	sink += 5;
}
BENCH_FN static void bench_f5(void)
{
	sink += 6;
}
BENCH_FN static void bench_f6(void)
{
	sink += 7;
}
BENCH_FN static void bench_f7(void)
{
	sink += 8;
}

static void (*const funcs[NFUNCS])(void) = {bench_f0, bench_f1, bench_f2, bench_f3,
					    bench_f4, bench_f5, bench_f6, bench_f7};

/* Loads of a struct's fields through a pointer: the typed pass's exact IPs. */
struct bench_conn {
	long id, state, rx_bytes, tx_bytes;
};
BENCH_FN static long bench_id(const struct bench_conn *c)
{
	return c->id;
}
BENCH_FN static long bench_state(const struct bench_conn *c)
{
	return c->state;
}
BENCH_FN static long bench_rx(const struct bench_conn *c)
{
	return c->rx_bytes;
}
BENCH_FN static long bench_tx(const struct bench_conn *c)
{
	return c->tx_bytes;
}

static long (*const accessors[4])(const struct bench_conn *) = {bench_id, bench_state, bench_rx,
								bench_tx};

/* The accessor's load: its first instruction, after an endbr64 where the compiler put one. */
static uint64_t load_ip(long (*f)(const struct bench_conn *))
{
	static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
	const uint8_t *code = (const uint8_t *)(uintptr_t)f;

	return (uint64_t)(uintptr_t)code + (memcmp(code, endbr64, 4) ? 0 : 4);
}

/* Data sources as Intel SKL+ reports them: L1, LFB, L3, local DRAM. */
static const uint64_t dsrcs[4] = {
    PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, L1) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, NONE) |
	PP_MEM_S(TLB, HIT) | PP_MEM_S(TLB, L1) | PP_MEM_S(TLB, L2) |
	((uint64_t)PP_MEM_LVLNUM_L1 << PP_MEM_LVLNUM_SHIFT),
    PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, LFB) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, NONE) |
	PP_MEM_S(TLB, HIT) | PP_MEM_S(TLB, L1) | PP_MEM_S(TLB, L2) |
	((uint64_t)PP_MEM_LVLNUM_LFB << PP_MEM_LVLNUM_SHIFT),
    PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, L3) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, HIT) |
	PP_MEM_S(TLB, HIT) | PP_MEM_S(TLB, L1) | PP_MEM_S(TLB, L2) |
	((uint64_t)PP_MEM_LVLNUM_L3 << PP_MEM_LVLNUM_SHIFT),
    PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, LOC_RAM) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, HIT) |
	PP_MEM_S(TLB, MISS) | PP_MEM_S(TLB, L2) |
	((uint64_t)PP_MEM_LVLNUM_RAM << PP_MEM_LVLNUM_SHIFT),
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct recs {
	unsigned char *buf; /* n records of size rec_size each */
	size_t n, rec_size;
};

/* A data address: half in the .bss array, the rest over .data, heap, anonymous, stack. */
static uint64_t data_addr(uint64_t r, uint64_t heap, uint64_t anon, uint64_t stack)
{
	uint64_t pick = r % 100, off = r >> 8;

	if (pick < 50)
		return (uint64_t)(uintptr_t)&bench_bss_array[off % BSS_SIZE];
	if (pick < 70)
		return (uint64_t)(uintptr_t)&bench_data_table[off % 4096];
	if (pick < 85)
		return heap + off % 4096;
	if (pick < 95)
		return anon + off % ANON_SIZE;
	return stack - off % 256;
}

enum rec_kind { RECS_PLAIN, RECS_MEM, RECS_TYPED };

static int make_recs(struct recs *rs, size_t n, enum rec_kind kind, uint64_t heap, uint64_t anon)
{
	uint64_t stack_marker = (uint64_t)(uintptr_t)&rs;

	rs->rec_size = sizeof(struct pp_sample) + DEPTH * sizeof(uint64_t);
	rs->n = n;
	rs->buf = calloc(n, rs->rec_size);
	if (!rs->buf)
		return -ENOMEM;
	rng_state = 0x9e3779b97f4a7c15ull; /* every set: the same stacks in the same order */
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = rs->buf + i * rs->rec_size;
		struct pp_sample s;
		uint64_t frames[DEPTH];
		uint64_t shape = rnd(), r = rnd();

		/* 8^2 * 2 = 128 distinct stacks of depth 6. */
		for (unsigned d = 0; d < DEPTH; d++) {
			uint64_t f = d < 2 ? shape >> (3 * d) : d;

			frames[d] = (uint64_t)(uintptr_t)funcs[f % NFUNCS];
			if (d) /* return addresses, two call sites each */
				frames[d] += 1 + (shape >> 6 & 1);
		}
		memset(&s, 0, sizeof(s));
		s.hdr.type = PP_REC_SAMPLE;
		s.hdr.version = PP_RECORD_ABI_VERSION;
		s.hdr.size = (uint32_t)rs->rec_size;
		s.tgid = (uint32_t)getpid();
		s.tid = s.tgid;
		s.time_ns = 1000 + i;
		s.ip = frames[0];
		s.period = PERIOD;
		s.nr_ustack = DEPTH;
		memcpy(s.comm, "bench", 6);
		if (kind == RECS_TYPED) {
			frames[0] = load_ip(accessors[shape % 4]);
			s.ip = frames[0];
			s.flags |= PP_SF_EXACT_IP;
		}
		if (kind != RECS_PLAIN) {
			s.flags |= PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS;
			s.sample_flags = PP_PERF_SAMPLE_ADDR | PP_PERF_SAMPLE_DATA_SRC |
					 PP_PERF_SAMPLE_WEIGHT_STRUCT;
			s.addr = data_addr(r, heap, anon, stack_marker);
			s.data_src = dsrcs[(r >> 40) & 3];
			s.weight = 30 + (r >> 44) % 2000;
		}
		memcpy(p, &s, sizeof(s));
		memcpy(p + sizeof(s), frames, sizeof(frames));
	}
	return 0;
}

struct run_result {
	double ns_per_sample;
	struct pp_session_stats st;
	size_t profile_samples;
};

static int run_once(const struct recs *rs, size_t total, int mem, size_t raw_entries,
		    struct run_result *out)
{
	struct pp_profile_desc desc = {
	    .event = "mem-loads",
	    .value_type = "mem-loads",
	    .value_unit = "count",
	    .period = PERIOD,
	    .mem_latency = (uint32_t)mem,
	};
	struct pp_session_opts opts = {
	    .raw_stack_entries = raw_entries,
	    .mem_event = mem,
	    .precise_ip = 1,
	};
	struct pp_profile *p = pp_profile_new(&desc);
	struct pp_session *s = p ? pp_session_new(&opts, p) : NULL;
	double t0, t1;
	int err = 0;

	if (!s) {
		pp_profile_free(p);
		return -ENOMEM;
	}
	t0 = now_ns();
	for (size_t i = 0; i < total && !err; i++)
		err =
		    pp_session_handle_record(s, rs->buf + (i % rs->n) * rs->rec_size, rs->rec_size);
	if (!err)
		err = pp_session_flush(s);
	t1 = now_ns();
	out->ns_per_sample = (t1 - t0) / (double)total;
	pp_session_get_stats(s, &out->st);
	out->profile_samples = pp_profile_sample_count(p);
	pp_session_free(s);
	pp_profile_free(p);
	return err;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: pp_bench_mem [-n RECORDS] [-d DISTINCT] [-r REPS] [-D] [-t]\n");
}

int main(int argc, char **argv)
{
	size_t total = 1000000, distinct = 65536, raw_entries = 1 << 16;
	unsigned reps = 5;
	int kv = 0, opt;
	struct recs plain = {0}, mem = {0}, typed = {0};
	double tp[MAX_REPS], tm[MAX_REPS], tt[MAX_REPS], mp, mm, mt;
	struct run_result rp, rm, rt;
	void *heap, *anon;

	while ((opt = getopt(argc, argv, "n:d:r:Dth")) != -1) {
		switch (opt) {
		case 'n':
			total = strtoull(optarg, NULL, 10);
			break;
		case 'd':
			distinct = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			reps = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'D':
			raw_entries = 0;
			break;
		case 't':
			kv = 1;
			break;
		default:
			usage();
			return 2;
		}
	}
	if (!total || !distinct || !reps || reps > MAX_REPS) {
		usage();
		return 2;
	}
	heap = sbrk(4096);
	anon = mmap(NULL, ANON_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == (void *)-1 || anon == MAP_FAILED) {
		fprintf(stderr, "pp_bench_mem: cannot map the heap or anonymous block\n");
		return 1;
	}
	memset(anon, 1, ANON_SIZE); /* make it a real mapping, not a lazily split one */
	if (make_recs(&plain, distinct, RECS_PLAIN, (uint64_t)(uintptr_t)heap,
		      (uint64_t)(uintptr_t)anon) ||
	    make_recs(&mem, distinct, RECS_MEM, (uint64_t)(uintptr_t)heap,
		      (uint64_t)(uintptr_t)anon) ||
	    make_recs(&typed, distinct, RECS_TYPED, (uint64_t)(uintptr_t)heap,
		      (uint64_t)(uintptr_t)anon)) {
		fprintf(stderr, "pp_bench_mem: out of memory\n");
		return 1;
	}
	/* Interleaved, so drift (frequency, other load) hits both alike. */
	for (unsigned r = 0; r < reps; r++) {
		if (run_once(&plain, total, 0, raw_entries, &rp) ||
		    run_once(&mem, total, 1, raw_entries, &rm) ||
		    run_once(&typed, total, 1, raw_entries, &rt)) {
			fprintf(stderr, "pp_bench_mem: a record was refused\n");
			return 1;
		}
		tp[r] = rp.ns_per_sample;
		tm[r] = rm.ns_per_sample;
		tt[r] = rt.ns_per_sample;
	}
	qsort(tp, reps, sizeof(double), dbl_cmp);
	qsort(tm, reps, sizeof(double), dbl_cmp);
	qsort(tt, reps, sizeof(double), dbl_cmp);
	mp = tp[reps / 2];
	mm = tm[reps / 2];
	mt = tt[reps / 2];
	if (kv) {
		printf("records=%zu\ndistinct=%zu\nreps=%u\nraw_stack_entries=%zu\n", total,
		       distinct, reps, raw_entries);
		printf("plain_ns_per_sample=%.1f\nmem_ns_per_sample=%.1f\nratio=%.2f\n", mp, mm,
		       mm / mp);
		printf("plain_profile_samples=%zu\nmem_profile_samples=%zu\n", rp.profile_samples,
		       rm.profile_samples);
		printf("data_symbols=%llu\ndata_classes=%llu\nmem_obj_hits=%llu\n",
		       (unsigned long long)rm.st.data_symbols,
		       (unsigned long long)rm.st.data_classes,
		       (unsigned long long)rm.st.mem_obj_hits);
		printf("typed_ns_per_sample=%.1f\ntyped_ratio=%.2f\ntyped_profile_samples=%zu\n"
		       "data_typed=%llu\ndata_type_pending=%llu\n",
		       mt, mt / mm, rt.profile_samples, (unsigned long long)rt.st.data_typed,
		       (unsigned long long)rt.st.data_type_pending);
	} else {
		printf("%zu records (%zu distinct), median of %u, raw-stack table %s\n", total,
		       distinct, reps, raw_entries ? "on" : "off");
		printf("  plain samples   %8.1f ns/sample  (%zu aggregates)\n", mp,
		       rp.profile_samples);
		printf("  memory samples  %8.1f ns/sample  (%zu aggregates; %llu data symbols, "
		       "%llu classes)\n",
		       mm, rm.profile_samples, (unsigned long long)rm.st.data_symbols,
		       (unsigned long long)rm.st.data_classes);
		printf("  typed samples   %8.1f ns/sample  (%zu aggregates; %llu typed, %llu "
		       "waiting for the loader)\n",
		       mt, rt.profile_samples, (unsigned long long)rt.st.data_typed,
		       (unsigned long long)rt.st.data_type_pending);
		printf("  ratio memory/plain %.2f, typed/memory %.2f\n", mm / mp, mt / mm);
	}
	/* The memory run must have resolved symbols, or it measured the wrong thing. */
	if (!rm.st.data_symbols || !rm.st.data_classes) {
		fprintf(stderr, "pp_bench_mem: no data symbols resolved\n");
		return 1;
	}
	/* And the typed run must have named the accessors' struct (a -g build, not -O0). */
	if (rt.st.data_typed * 2 < total) {
		fprintf(stderr,
			"pp_bench_mem: %llu of %zu samples typed; is the tool built -O2 -g?\n",
			(unsigned long long)rt.st.data_typed, total);
		return 1;
	}
	free(plain.buf);
	free(mem.buf);
	free(typed.buf);
	return 0;
}
