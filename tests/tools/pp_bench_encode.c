/*
 * Encode benchmark: how fast one export window turns into bytes on the wire, and how many
 * bytes that is per sample, for OTLP against pprof holding the same data.
 *
 * Builds a synthetic but fleet-like window through the public profile API, deterministically
 * (fixed seed): P processes running 10 programs, each process with its executable, libc and
 * the shared "[kernel.kallsyms]" mapping (all with build ids), 2000 functions in all, S
 * distinct stacks of depth 8-40 (30 % ending in kernel frames), and N samples: every stack
 * once, the rest Zipf(1)-skewed over the stacks, each on one of 4 threads of its process and
 * one of 8 CPUs. Then times, as the median of R repetitions with CLOCK_MONOTONIC:
 *   building the profile (interning + pp_profile_add_sample per sample; reported apart),
 *   pp_otlp_encode, gzip of that at the transport's level, pp_pprof_encode, gzip of that.
 * Usage: pp_bench_encode [-n SAMPLES] [-s STACKS] [-p PROCS] [-r REPS] [-S SEED] [-C] [-t]
 *   -C leaves the CPU out of the samples (less aggregation key); -t prints key=value lines.
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* exporter/src/transport/transport.c gzips request bodies at level 6 (encode/pprof.c uses the
 * default, 6). */
#define GZIP_LEVEL 6

#define NPROG 10
#define NKERN 200
#define NLIBC 300
#define NEXE 150 /* per program */
#define NFUNC (NKERN + NLIBC + NPROG * NEXE)
#define NSITE 3 /* call sites (distinct addresses) per function */
#define NTHREAD 4
#define NCPU 8
#define DEPTH_MIN 8
#define DEPTH_MAX 40
#define FIRST_EXE (NKERN + NLIBC)
#define MAX_REPS 101

#define T0 1767225600000000000ULL /* 2026-01-01T00:00:00Z */
#define WINDOW_NS 60000000000ULL
#define PERIOD_NS 10000000ULL /* 100 Hz cpu-clock */

#define KERN_START 0xffffffff81000000ULL
#define LIBC_PATH "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LIBC_BUILD_ID "c7a6ab1c45a2c8a4d4ff0f79f6e0c9b3e2b5f6a1"
#define KERN_BUILD_ID "5b2d04e6a9d3c1f0872e4a6b9c0d1e2f3a4b5c6d"

struct bench_opts {
	uint32_t nsamples;
	uint32_t nstacks;
	uint32_t nprocs;
	uint32_t reps;
	uint64_t seed;
	bool cpu;
	bool terse;
};

struct func {
	char name[96];
	uint64_t addr; /* ELF virtual address of its first call site */
	enum pp_frame_kind kind;
};

struct proc {
	uint32_t pid;
	uint32_t prog;
	char name[16];
	char exe_path[64];
	char exe_build_id[41];
	char thread_names[NTHREAD][16];
	uint64_t exe_start, libc_start;
};

/* Everything generated before the clock starts, so only the exporter is timed. */
struct bench {
	struct bench_opts o;
	struct func funcs[NFUNC];
	struct proc *procs;
	/* stacks, flat: frames[off[i] .. off[i] + len[i]) of function * NSITE + site, leaf first */
	uint32_t *stack_off, *stack_len, *stack_proc, *stack_home, *frames;
	uint32_t nframes;
	uint32_t *locs;	     /* location ids, same layout as frames; filled while building */
	uint32_t *loc_cache; /* (proc, function, site) -> location id for the current profile */
	/* samples, in time order */
	uint32_t *samp_stack;
	uint8_t *samp_thread, *samp_cpu;
	uint64_t *samp_time;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(((rng_next(s) >> 32) * n) >> 32);
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* Skewed towards low indexes, as a few hot functions dominate real stacks. */
static uint32_t rng_skewed(uint64_t *s, uint32_t n)
{
	double u = rng_unit(s);

	return (uint32_t)(u * u * n);
}

static void hex_id(uint64_t *s, char out[41])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 40; i++)
		out[i] = digits[rng_below(s, 16)];
	out[40] = '\0';
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void make_funcs(struct bench *b)
{
	static const char *const kern[] = {"entry_SYSCALL_64_after_hwframe",
					   "do_syscall_64",
					   "__x64_sys_read",
					   "ksys_read",
					   "vfs_read",
					   "__x64_sys_write",
					   "ksys_write",
					   "vfs_write",
					   "tcp_sendmsg",
					   "tcp_recvmsg",
					   "sock_read_iter",
					   "ep_poll",
					   "schedule",
					   "__schedule",
					   "finish_task_switch",
					   "asm_sysvec_apic_timer_interrupt",
					   "handle_mm_fault",
					   "exc_page_fault",
					   "copy_user_enhanced_fast_string",
					   "do_anonymous_page",
					   "clear_page_erms",
					   "futex_wait",
					   "__x64_sys_futex",
					   "do_futex"};
	static const char *const libc[] = {"__libc_start_main",
					   "__libc_start_call_main",
					   "__memcpy_avx_unaligned_erms",
					   "__memmove_avx_unaligned_erms",
					   "__memset_avx2_unaligned_erms",
					   "malloc",
					   "free",
					   "_int_malloc",
					   "_int_free",
					   "realloc",
					   "calloc",
					   "pthread_mutex_lock",
					   "pthread_mutex_unlock",
					   "pthread_cond_wait",
					   "__GI___libc_read",
					   "__GI___libc_write",
					   "epoll_wait",
					   "clock_gettime",
					   "__strlen_avx2",
					   "__strcmp_avx2",
					   "qsort",
					   "fwrite"};
	static const char *const ns[] = {"http", "db",	  "cache", "rpc",   "json",
					 "auth", "sched", "io",	   "proto", "log"};
	static const char *const cls[] = {"Server", "Client", "Pool",  "Codec", "Parser",
					  "Writer", "Reader", "Queue", "Table", "Index"};
	static const char *const verb[] = {"handle",  "encode", "decode",   "lookup",	 "insert",
					   "flush",   "poll",	"dispatch", "serialize", "parse",
					   "compute", "merge",	"sort",	    "hash",	 "emit"};
	static const char *const obj[] = {"request", "frame",  "batch", "entry", "row",
					  "header",  "buffer", "token", "chunk", "record"};
	const size_t nk = sizeof(kern) / sizeof(kern[0]), nl = sizeof(libc) / sizeof(libc[0]);

	for (uint32_t i = 0; i < NKERN; i++) {
		struct func *f = &b->funcs[i];

		if (i < nk)
			snprintf(f->name, sizeof(f->name), "%s", kern[i]);
		else
			snprintf(f->name, sizeof(f->name), "%s.part.%u", kern[i % nk], i);
		f->addr = KERN_START + 0x1000 + (uint64_t)i * 0x800;
		f->kind = PP_FRAME_KERNEL;
	}
	for (uint32_t i = 0; i < NLIBC; i++) {
		struct func *f = &b->funcs[NKERN + i];

		if (i < nl)
			snprintf(f->name, sizeof(f->name), "%s", libc[i]);
		else
			snprintf(f->name, sizeof(f->name), "__%s_impl_%u", libc[i % nl], i);
		f->addr = 0x28000 + 0x100 + (uint64_t)i * 0x400;
		f->kind = PP_FRAME_NATIVE;
	}
	for (uint32_t p = 0; p < NPROG; p++) {
		for (uint32_t j = 0; j < NEXE; j++) {
			struct func *f = &b->funcs[FIRST_EXE + p * NEXE + j];

			/* j and j + 100 differ in the verb, so names are unique per program */
			if (j == 0)
				snprintf(f->name, sizeof(f->name), "_start");
			else if (j == 1)
				snprintf(f->name, sizeof(f->name), "main");
			else
				snprintf(f->name, sizeof(f->name), "svc%u::%s::%s::%s_%s", p,
					 ns[j % 10], cls[(j / 10) % 10], verb[(j * 7) % 15],
					 obj[(j * 3) % 10]);
			f->addr = 0x1000 + 0x40 + (uint64_t)j * 0x400;
			f->kind = PP_FRAME_NATIVE;
		}
	}
}

static void make_procs(struct bench *b, uint64_t *rng)
{
	char prog_build_id[NPROG][41];

	for (uint32_t p = 0; p < NPROG; p++)
		hex_id(rng, prog_build_id[p]);
	for (uint32_t i = 0; i < b->o.nprocs; i++) {
		struct proc *pr = &b->procs[i];

		pr->pid = 1000 + i * 100;
		pr->prog = i % NPROG;
		snprintf(pr->name, sizeof(pr->name), "svc%u", pr->prog);
		snprintf(pr->exe_path, sizeof(pr->exe_path), "/opt/svc%u/bin/svc%u", pr->prog,
			 pr->prog);
		memcpy(pr->exe_build_id, prog_build_id[pr->prog], sizeof(pr->exe_build_id));
		for (uint32_t t = 0; t < NTHREAD; t++)
			snprintf(pr->thread_names[t], sizeof(pr->thread_names[t]),
				 t ? "worker-%u" : "svc%u", t ? t : pr->prog);
		/* ASLR: every process has its own bases, so its own mappings and locations */
		pr->exe_start = 0x555555554000ULL + ((uint64_t)rng_below(rng, 1u << 20) << 12);
		pr->libc_start = 0x7f0000000000ULL + ((uint64_t)rng_below(rng, 1u << 24) << 12);
	}
}

static uint64_t hash_stack(uint32_t proc, const uint32_t *f, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ proc;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ f[i]) * 0x100000001b3ULL;
	return h;
}

static uint32_t frame(uint32_t func, uint32_t site)
{
	return func * NSITE + site;
}

/* One stack, leaf first, into out; returns its depth. */
static uint32_t gen_stack(uint64_t *rng, uint32_t prog, uint32_t *out)
{
	uint32_t root[DEPTH_MAX], n = 0,
				  depth = DEPTH_MIN + rng_below(rng, DEPTH_MAX - DEPTH_MIN + 1);
	uint32_t nkern = 0, exe = FIRST_EXE + prog * NEXE;

	if (rng_below(rng, 10) < 3)
		nkern = 2 + rng_below(rng, 7);
	if (nkern > depth - 5) /* keep the 4 root frames and one frame of the program */
		nkern = depth - 5;
	root[n++] = frame(exe + 0, 0);	 /* _start */
	root[n++] = frame(NKERN + 0, 0); /* __libc_start_main */
	root[n++] = frame(NKERN + 1, 0); /* __libc_start_call_main */
	root[n++] = frame(exe + 1, 0);	 /* main */
	while (n < depth - nkern) {
		bool leafish = n + 1 == depth - nkern;

		if (rng_below(rng, 10) < (leafish ? 4u : 2u))
			root[n++] =
			    frame(NKERN + 2 + rng_skewed(rng, NLIBC - 2), rng_below(rng, NSITE));
		else
			root[n++] =
			    frame(exe + 2 + rng_skewed(rng, NEXE - 2), rng_below(rng, NSITE));
	}
	if (nkern) {
		root[n++] = frame(0, 0); /* entry_SYSCALL_64_after_hwframe */
		root[n++] = frame(1, 0); /* do_syscall_64 */
		while (n < depth)
			root[n++] = frame(2 + rng_skewed(rng, NKERN - 2), rng_below(rng, NSITE));
	}
	for (uint32_t i = 0; i < n; i++)
		out[i] = root[n - 1 - i];
	return n;
}

static int make_stacks(struct bench *b, uint64_t *rng)
{
	uint32_t ns = b->o.nstacks, cap = 1, *set;

	while (cap < 2 * ns)
		cap <<= 1;
	set = calloc(cap, sizeof(*set)); /* stack index + 1, 0 = empty */
	if (!set)
		return -ENOMEM;
	b->nframes = 0;
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t proc = rng_below(rng, b->o.nprocs), *f = b->frames + b->nframes, n;
		uint64_t h;
		bool dup;

		do {
			uint32_t slot;

			n = gen_stack(rng, b->procs[proc].prog, f);
			h = hash_stack(proc, f, n);
			dup = false;
			for (slot = (uint32_t)h & (cap - 1); set[slot];
			     slot = (slot + 1) & (cap - 1)) {
				uint32_t o = set[slot] - 1;

				if (b->stack_proc[o] == proc && b->stack_len[o] == n &&
				    !memcmp(b->frames + b->stack_off[o], f, n * sizeof(*f))) {
					dup = true;
					break;
				}
			}
			if (!dup)
				set[slot] = i + 1;
		} while (dup);
		b->stack_off[i] = b->nframes;
		b->stack_len[i] = n;
		b->stack_proc[i] = proc;
		b->stack_home[i] = rng_below(rng, NTHREAD);
		b->nframes += n;
	}
	free(set);
	return 0;
}

/* Every stack once, the rest Zipf(1) by rank, then shuffled into time order. */
static int make_samples(struct bench *b, uint64_t *rng)
{
	uint32_t ns = b->o.nstacks, n = b->o.nsamples;
	double *cdf = malloc(ns * sizeof(*cdf)), sum = 0;

	if (!cdf)
		return -ENOMEM;
	for (uint32_t k = 0; k < ns; k++)
		cdf[k] = (sum += 1.0 / (k + 1));
	for (uint32_t i = 0; i < n; i++) {
		if (i < ns) {
			b->samp_stack[i] = i;
		} else {
			double u = rng_unit(rng) * sum;
			uint32_t lo = 0, hi = ns - 1;

			while (lo < hi) {
				uint32_t mid = lo + (hi - lo) / 2;

				if (cdf[mid] < u)
					lo = mid + 1;
				else
					hi = mid;
			}
			b->samp_stack[i] = lo;
		}
	}
	free(cdf);
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j = rng_below(rng, i + 1), t = b->samp_stack[i];

		b->samp_stack[i] = b->samp_stack[j];
		b->samp_stack[j] = t;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = b->samp_stack[i];

		/* a stack mostly runs on its home thread, sometimes on another of the pool */
		b->samp_thread[i] =
		    (uint8_t)(rng_below(rng, 4) ? b->stack_home[s] : rng_below(rng, NTHREAD));
		b->samp_cpu[i] = (uint8_t)rng_below(rng, NCPU);
		b->samp_time[i] = T0 + (uint64_t)i * (WINDOW_NS / n) + rng_below(rng, 1000000);
	}
	return 0;
}

static int setup(struct bench *b)
{
	uint64_t rng = b->o.seed;
	size_t maxf = (size_t)b->o.nstacks * DEPTH_MAX;
	int err;

	b->procs = calloc(b->o.nprocs, sizeof(*b->procs));
	b->stack_off = calloc(b->o.nstacks, sizeof(uint32_t));
	b->stack_len = calloc(b->o.nstacks, sizeof(uint32_t));
	b->stack_proc = calloc(b->o.nstacks, sizeof(uint32_t));
	b->stack_home = calloc(b->o.nstacks, sizeof(uint32_t));
	b->frames = calloc(maxf, sizeof(uint32_t));
	b->locs = calloc(maxf, sizeof(uint32_t));
	b->loc_cache = calloc((size_t)b->o.nprocs * NFUNC * NSITE, sizeof(uint32_t));
	b->samp_stack = calloc(b->o.nsamples, sizeof(uint32_t));
	b->samp_thread = calloc(b->o.nsamples, 1);
	b->samp_cpu = calloc(b->o.nsamples, 1);
	b->samp_time = calloc(b->o.nsamples, sizeof(uint64_t));
	if (!b->procs || !b->stack_off || !b->stack_len || !b->stack_proc || !b->stack_home ||
	    !b->frames || !b->locs || !b->loc_cache || !b->samp_stack || !b->samp_thread ||
	    !b->samp_cpu || !b->samp_time)
		return -ENOMEM;
	make_funcs(b);
	make_procs(b, &rng);
	err = make_stacks(b, &rng);
	if (!err)
		err = make_samples(b, &rng);
	return err;
}

static void teardown(struct bench *b)
{
	free(b->procs);
	free(b->stack_off);
	free(b->stack_len);
	free(b->stack_proc);
	free(b->stack_home);
	free(b->frames);
	free(b->locs);
	free(b->loc_cache);
	free(b->samp_stack);
	free(b->samp_thread);
	free(b->samp_cpu);
	free(b->samp_time);
}

/* Interns every stack's locations (and their mappings), as the collector's resolver would. */
static int intern_all(struct bench *b, struct pp_profile *p)
{
	struct pp_mapping_info km = {.start = KERN_START,
				     .limit = KERN_START + 0x2000000,
				     .filename = "[kernel.kallsyms]",
				     .build_id = KERN_BUILD_ID};
	uint32_t kmap = pp_profile_intern_mapping(p, &km);

	if (!kmap)
		return -ENOMEM;
	memset(b->loc_cache, 0, (size_t)b->o.nprocs * NFUNC * NSITE * sizeof(uint32_t));
	for (uint32_t s = 0; s < b->o.nstacks; s++) {
		const struct proc *pr = &b->procs[b->stack_proc[s]];
		uint32_t *cache = b->loc_cache + (size_t)b->stack_proc[s] * NFUNC * NSITE;
		struct pp_mapping_info em = {.start = pr->exe_start,
					     .limit = pr->exe_start + 0x200000,
					     .filename = pr->exe_path,
					     .build_id = pr->exe_build_id,
					     .load_bias = pr->exe_start};
		struct pp_mapping_info lm = {.start = pr->libc_start,
					     .limit = pr->libc_start + 0x1a0000,
					     .file_offset = 0x28000,
					     .filename = LIBC_PATH,
					     .build_id = LIBC_BUILD_ID,
					     .load_bias = pr->libc_start - 0x28000};
		uint32_t emap = pp_profile_intern_mapping(p, &em);
		uint32_t lmap = pp_profile_intern_mapping(p, &lm);

		if (!emap || !lmap)
			return -ENOMEM;
		for (uint32_t i = 0; i < b->stack_len[s]; i++) {
			uint32_t fr = b->frames[b->stack_off[s] + i], fi = fr / NSITE;
			const struct func *f = &b->funcs[fi];

			if (!cache[fr]) {
				struct pp_location_info l = {
				    .mapping_id = fi < NKERN	   ? kmap
						  : fi < FIRST_EXE ? lmap
								   : emap,
				    .address = f->addr + (fr % NSITE) * 0x1d + 5,
				    .function = f->name,
				    .kind = f->kind,
				};

				cache[fr] = pp_profile_intern_location(p, &l);
				if (!cache[fr])
					return -ENOMEM;
			}
			b->locs[b->stack_off[s] + i] = cache[fr];
		}
	}
	return 0;
}

static int add_all(const struct bench *b, struct pp_profile *p)
{
	for (uint32_t i = 0; i < b->o.nsamples; i++) {
		uint32_t s = b->samp_stack[i];
		const struct proc *pr = &b->procs[b->stack_proc[s]];
		struct pp_sample_info si = {
		    .locations = b->locs + b->stack_off[s],
		    .nlocations = b->stack_len[s],
		    .pid = pr->pid,
		    .tid = pr->pid + b->samp_thread[i],
		    .thread_name = pr->thread_names[b->samp_thread[i]],
		    .process_name = pr->name,
		    .count = 1,
		    .value = PERIOD_NS,
		    .first_time_unix_ns = b->samp_time[i],
		    .has_cpu = b->o.cpu,
		    .cpu = b->samp_cpu[i],
		};
		int err = pp_profile_add_sample(p, &si);

		if (err)
			return err;
	}
	return 0;
}

static int build(struct bench *b, struct pp_profile **out, double *intern_ms, double *add_ms)
{
	struct pp_profile_desc d = {"cpu-clock", "cpu", "nanoseconds", PERIOD_NS, T0, WINDOW_NS,
				    0,		 0};
	struct pp_profile *p;
	double t0 = now_ms(), t1;
	int err;

	p = pp_profile_new(&d);
	if (!p)
		return -errno;
	err = intern_all(b, p);
	t1 = now_ms();
	if (!err)
		err = add_all(b, p);
	*intern_ms = t1 - t0;
	*add_ms = now_ms() - t1;
	if (err) {
		pp_profile_free(p);
		return err;
	}
	*out = p;
	return 0;
}

/* As exporter/src/transport/transport.c gzips a request body: one deflate call, gzip wrapper. */
static int gzip_buf(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	z_stream zs;
	uLong bound;
	int zr;

	memset(&zs, 0, sizeof(zs));
	if (len > UINT32_MAX)
		return -E2BIG;
	if (deflateInit2(&zs, GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	bound = deflateBound(&zs, (uLong)len);
	*out = malloc(bound);
	if (!*out) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	zs.next_out = *out;
	zs.avail_out = (uInt)bound;
	zr = deflate(&zs, Z_FINISH);
	*out_len = zs.total_out;
	deflateEnd(&zs);
	if (zr != Z_STREAM_END) {
		free(*out);
		*out = NULL;
		return -EIO;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, uint32_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct fmt_result {
	double enc_ms, gz_ms;
	size_t raw, wire;
};

/* Encodes (OTLP when otlp, else pprof) and gzips reps times; sizes must not vary. */
static int time_format(const struct pp_profile *p, bool otlp, uint32_t reps, struct fmt_result *r)
{
	const struct pp_otlp_resource res = {.host_name = "bench-host"};
	double enc[MAX_REPS], gz[MAX_REPS];

	for (uint32_t i = 0; i < reps; i++) {
		uint8_t *raw = NULL, *wire = NULL;
		size_t raw_len = 0, wire_len = 0;
		double t0 = now_ms(), t1;
		int err = otlp ? pp_otlp_encode(&p, 1, &res, &raw, &raw_len)
			       : pp_pprof_encode(p, &raw, &raw_len);

		t1 = now_ms();
		if (!err)
			err = gzip_buf(raw, raw_len, &wire, &wire_len);
		gz[i] = now_ms() - t1;
		enc[i] = t1 - t0;
		free(raw);
		free(wire);
		if (err)
			return err;
		if (i && (raw_len != r->raw || wire_len != r->wire))
			return -EPROTO; /* same profile, different bytes: not deterministic */
		r->raw = raw_len;
		r->wire = wire_len;
	}
	r->enc_ms = median(enc, reps);
	r->gz_ms = median(gz, reps);
	return 0;
}

static void report(const struct bench *b, const struct pp_profile *p, double intern_ms,
		   double add_ms, const struct fmt_result *otlp, const struct fmt_result *pprof)
{
	const struct fmt_result *r[2] = {otlp, pprof};
	const char *name[2] = {"otlp", "pprof"};
	uint64_t total = pp_profile_total_count(p);
	size_t distinct = pp_profile_sample_count(p);
	double ratio = (double)otlp->wire / (double)pprof->wire;

	if (b->o.terse) {
		printf("samples_total=%llu\nsamples_distinct=%zu\nstacks=%u\nprocesses=%u\n"
		       "functions=%u\nmappings=%zu\nlocations=%zu\nreps=%u\nseed=%llu\ncpu=%d\n",
		       (unsigned long long)total, distinct, b->o.nstacks, b->o.nprocs, NFUNC,
		       pp_profile_mapping_count(p), pp_profile_location_count(p), b->o.reps,
		       (unsigned long long)b->o.seed, b->o.cpu);
		printf("build_intern_ms=%.3f\nbuild_add_ms=%.3f\nbuild_add_ns_per_sample=%.1f\n",
		       intern_ms, add_ms, add_ms * 1e6 / b->o.nsamples);
		for (int i = 0; i < 2; i++) {
			double t = r[i]->enc_ms + r[i]->gz_ms;

			printf("%s_raw_bytes=%zu\n%s_encode_ms=%.3f\n%s_gzip_ms=%.3f\n"
			       "%s_samples_per_s=%.0f\n%s_mb_per_s=%.2f\n%s_wire_bytes=%zu\n"
			       "%s_bytes_per_sample=%.3f\n%s_bytes_per_distinct=%.3f\n",
			       name[i], r[i]->raw, name[i], r[i]->enc_ms, name[i], r[i]->gz_ms,
			       name[i], (double)total / (t / 1e3), name[i],
			       (double)r[i]->raw / 1e6 / (t / 1e3), name[i], r[i]->wire, name[i],
			       (double)r[i]->wire / (double)total, name[i],
			       (double)r[i]->wire / (double)distinct);
		}
		printf("otlp_pprof_wire_ratio=%.3f\n", ratio);
		return;
	}
	printf("window: %llu samples (%zu distinct after aggregation) over %u distinct stacks "
	       "(depth %d-%d)\n"
	       "        %u processes, %u functions, %zu mappings, %zu locations; cpu %s; seed "
	       "%llu\n",
	       (unsigned long long)total, distinct, b->o.nstacks, DEPTH_MIN, DEPTH_MAX, b->o.nprocs,
	       NFUNC, pp_profile_mapping_count(p), pp_profile_location_count(p),
	       b->o.cpu ? "kept (0..7)" : "left out", (unsigned long long)b->o.seed);
	printf("median of %u runs; gzip level %d; MB = 10^6 bytes of uncompressed output\n\n",
	       b->o.reps, GZIP_LEVEL);
	printf("%-6s %10s %10s %9s %12s %9s %10s %9s %10s\n", "format", "raw bytes", "encode ms",
	       "gzip ms", "samples/s", "MB/s", "wire bytes", "B/sample", "B/distinct");
	for (int i = 0; i < 2; i++) {
		double t = r[i]->enc_ms + r[i]->gz_ms;

		printf("%-6s %10zu %10.2f %9.2f %12.0f %9.2f %10zu %9.2f %10.2f\n", name[i],
		       r[i]->raw, r[i]->enc_ms, r[i]->gz_ms, (double)total / (t / 1e3),
		       (double)r[i]->raw / 1e6 / (t / 1e3), r[i]->wire,
		       (double)r[i]->wire / (double)total, (double)r[i]->wire / (double)distinct);
	}
	printf("\nOTLP/pprof wire bytes: %.3f\n", ratio);
	printf("samples/s and MB/s are over encode + gzip only. Building the profile is measured\n"
	       "apart: interning %.2f ms, pp_profile_add_sample %.2f ms (%.0f ns per sample).\n",
	       intern_ms, add_ms, add_ms * 1e6 / b->o.nsamples);
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-n SAMPLES] [-s STACKS] [-p PROCS] [-r REPS] [-S SEED] [-C] [-t]\n"
		"  -n samples in the window (default 100000; at least STACKS)\n"
		"  -s distinct stacks (default 20000)\n"
		"  -p processes (default 50)\n"
		"  -r repetitions, median reported (default 5, at most %d)\n"
		"  -S PRNG seed (default 1)\n"
		"  -C leave the CPU out of the samples\n"
		"  -t print key=value lines\n",
		argv0, MAX_REPS);
}

int main(int argc, char **argv)
{
	static struct bench b;
	struct pp_profile *p = NULL;
	struct fmt_result otlp = {0}, pprof = {0};
	double intern[MAX_REPS], add[MAX_REPS];
	uint32_t seed;
	int opt, err = 0;

	b.o = (struct bench_opts){100000, 20000, 50, 5, 1, true, false};
	while ((opt = getopt(argc, argv, "n:s:p:r:S:Ct")) != -1) {
		switch (opt) {
		case 'n':
			err = parse_u32(optarg, 1, 100000000, &b.o.nsamples);
			break;
		case 's':
			err = parse_u32(optarg, 1, 10000000, &b.o.nstacks);
			break;
		case 'p':
			err = parse_u32(optarg, 1, 100000, &b.o.nprocs);
			break;
		case 'r':
			err = parse_u32(optarg, 1, MAX_REPS, &b.o.reps);
			break;
		case 'S':
			err = parse_u32(optarg, 0, UINT32_MAX, &seed);
			b.o.seed = seed;
			break;
		case 'C':
			b.o.cpu = false;
			break;
		case 't':
			b.o.terse = true;
			break;
		default:
			usage(argv[0]);
			return 2;
		}
		if (err) {
			fprintf(stderr, "pp_bench_encode: -%c %s: not a valid number\n", opt,
				optarg);
			return 2;
		}
	}
	if (optind != argc || b.o.nsamples < b.o.nstacks) {
		usage(argv[0]);
		return 2;
	}
	err = setup(&b);
	for (uint32_t i = 0; !err && i < b.o.reps; i++) {
		pp_profile_free(p);
		p = NULL;
		err = build(&b, &p, &intern[i], &add[i]);
	}
	if (!err && pp_profile_location_count(p) == 0)
		err = -EPROTO;
	if (!err)
		err = time_format(p, true, b.o.reps, &otlp);
	if (!err)
		err = time_format(p, false, b.o.reps, &pprof);
	if (!err)
		report(&b, p, median(intern, b.o.reps), median(add, b.o.reps), &otlp, &pprof);
	else
		fprintf(stderr, "pp_bench_encode: %s\n", strerror(-err));
	pp_profile_free(p);
	teardown(&b);
	return err ? 1 : 0;
}
