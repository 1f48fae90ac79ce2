/*
 * What a part of the shim costs per sample. Loads the shim through the loader (no collector
 * around it) on cpu-clock at HZ per CPU with kernel and user stacks, in two configurations run
 * alternately in one process. -x mem (the default) compares:
 *   A  no memory fields, sample_type IP;
 *   B  read_mem_fields=1, sample_type IP|ADDR|DATA_SRC|WEIGHT_STRUCT|PHYS_ADDR (a software
 *      event accepts the bits; the values are zero/NA, but the program does every read).
 * -x unwind compares who follows user frame pointers:
 *   A  the kernel's walker (bpf_get_stack) for every sample;
 *   B  the shim's own walk for samples taken in user mode.
 * -x tables compares the shim's user walks:
 *   A  its frame-pointer walk (--user-unwind fp);
 *   B  its walk with .eh_frame unwind tables (--user-unwind auto), the busy processes' tables
 *      installed before sampling. On a workload built with frame pointers both give the same
 *      stacks.
 * With busy processes on every CPU, the program's run_time_ns / run_cnt (bpf_prog_info, with
 * BPF run-time statistics enabled for the duration) gives ns per sample for each, and B/A.
 *
 * usage: pp_bench_shim [-x mem|unwind|tables] [-d SECONDS per run] [-F HZ] [-r ROUNDS]
 *                      [-v kctx|core] [-w WORKLOAD]
 *   -w  program run once per CPU as the load ("WORKLOAD 0": until killed), e.g. the frame-pointer
 *       built tests/pp_workload, so user stacks have a known depth; default: a spin loop here
 * Needs root. bench/bench_shim.sh runs it.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampling/shim_loader.h"
#include "unwind/unwinder.h"

#define MAX_CPUS 1024
#define BUSY_DEPTH 24 /* frames of the busy processes' user stacks */
#define MAX_ROUNDS 100

struct run_result {
	uint64_t run_ns, run_cnt, emitted, records, lost;
};

static int count_record(void *ctx, const void *data, size_t len)
{
	(void)data;
	(void)len;
	(*(uint64_t *)ctx)++;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile int stop_spinning; /* never set: the busy processes are killed */

/* A real call chain under the spin loop, so the user stack walk has work to do. */
static __attribute__((noinline)) unsigned long spin(int depth, volatile unsigned long *x)
{
	if (depth > 0)
		return spin(depth - 1, x) + 1;
	while (!stop_spinning)
		*x += 1;
	return *x;
}

static pid_t spawn_busy(const char *workload)
{
	pid_t pid = fork();

	if (pid == 0) {
		volatile unsigned long x = 0;

		if (workload) {
			execl(workload, workload, "0", (char *)NULL);
			fprintf(stderr, "pp_bench_shim: cannot run %s: %s\n", workload,
				strerror(errno));
			_exit(127);
		}
		spin(BUSY_DEPTH, &x);
		_exit(0);
	}
	return pid;
}

static int open_event(int cpu, unsigned hz, int mem)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = hz;
	attr.sample_type = PERF_SAMPLE_IP;
	if (mem)
		attr.sample_type |= PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC |
				    PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_PHYS_ADDR;
	attr.disabled = 1;
	return (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

enum comparison {
	CMP_MEM,    /* B reads the memory fields */
	CMP_UNWIND, /* A walks user stacks with the kernel's walker, B with the shim's */
	CMP_TABLES, /* A walks frame pointers in the shim, B unwind tables */
};

static pid_t busy[MAX_CPUS];
static int nbusy;

static int run_one(enum pp_shim_variant variant, enum comparison cmp, int b, unsigned hz,
		   double secs, struct run_result *res)
{
	struct pp_unwinder_sink *sink = NULL;
	struct pp_unwinder *unwinder = NULL;
	int mem = cmp == CMP_MEM && b;
	struct pp_shim_opts opts = {
	    .variant = variant,
	    .kstack_depth = PP_MAX_STACK_DEPTH,
	    .ustack_depth = PP_MAX_STACK_DEPTH,
	    .read_mem_fields = mem,
	    .ringbuf_bytes = 16 << 20,
	    .ustack_walk = cmp == CMP_UNWIND && !b  ? PP_USTACK_KERNEL
			   : cmp == CMP_TABLES && b ? PP_USTACK_AUTO
						    : PP_USTACK_SHIM,
	};
	struct bpf_prog_info info;
	uint32_t info_len = sizeof(info);
	uint64_t counters[PP_CNT__MAX];
	char err[512] = "";
	struct pp_shim *shim;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), nfd = 0, ret = 0;
	static int fds[MAX_CPUS];
	double end;

	shim = pp_shim_load(&opts, err, sizeof(err));
	if (!shim) {
		fprintf(stderr, "pp_bench_shim: %s\n", err);
		return -1;
	}
	if (opts.ustack_walk == PP_USTACK_AUTO) {
		uint32_t nr_rows, nr_slots;
		int rows_fd = pp_shim_unwind_rows_fd(shim, &nr_rows);
		int mappings_fd = pp_shim_unwind_mappings_fd(shim, &nr_slots);

		sink =
		    pp_unwinder_bpf_sink_new(rows_fd, nr_rows, pp_shim_unwind_rules_fd(shim),
					     pp_shim_unwind_procs_fd(shim), mappings_fd, nr_slots);
		unwinder = sink ? pp_unwinder_new(sink, &(struct pp_unwinder_opts){0}) : NULL;
		for (int i = 0; unwinder && i < nbusy; i++)
			if (pp_unwinder_install(unwinder, (uint32_t)busy[i]))
				fprintf(stderr, "pp_bench_shim: no tables for pid %d\n", busy[i]);
		if (!unwinder) {
			fprintf(stderr, "pp_bench_shim: cannot set up unwind tables\n");
			ret = -1;
			goto out;
		}
	}
	for (int cpu = 0; cpu < ncpu && cpu < MAX_CPUS; cpu++) {
		int fd = open_event(cpu, hz, mem);

		if (fd < 0) {
			fprintf(stderr, "pp_bench_shim: perf_event_open cpu %d: %s\n", cpu,
				strerror(errno));
			ret = -1;
			goto out;
		}
		fds[nfd++] = fd;
		if (pp_shim_attach(shim, fd, 0)) {
			fprintf(stderr, "pp_bench_shim: attach cpu %d failed\n", cpu);
			ret = -1;
			goto out;
		}
	}
	end = now_s() + secs;
	while (now_s() < end)
		if (pp_shim_poll(shim, 50, count_record, &res->records) < 0)
			break;
	pp_shim_detach_all(shim);
	while (pp_shim_poll(shim, 0, count_record, &res->records) > 0)
		;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(pp_shim_sample_prog_fd(shim), &info, &info_len)) {
		fprintf(stderr, "pp_bench_shim: bpf_prog_info: %s\n", strerror(errno));
		ret = -1;
		goto out;
	}
	res->run_ns += info.run_time_ns;
	res->run_cnt += info.run_cnt;
	/* Per run too: the spread between runs says how far to trust the difference. */
	printf("  run %c: %llu samples, %.1f ns/sample\n", b ? 'B' : 'A',
	       (unsigned long long)info.run_cnt,
	       info.run_cnt ? (double)info.run_time_ns / (double)info.run_cnt : 0.0);
	fflush(stdout);
	if (pp_shim_read_counters(shim, counters) == 0) {
		res->emitted += counters[PP_CNT_EMITTED];
		res->lost += counters[PP_CNT_RB_FULL] + counters[PP_CNT_SCRATCH_MISS];
	}
out:
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	pp_unwinder_free(unwinder);
	pp_unwinder_bpf_sink_free(sink);
	pp_shim_free(shim);
	return ret;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double ns_per(const struct run_result *r)
{
	return r->run_cnt ? (double)r->run_ns / (double)r->run_cnt : 0.0;
}

int main(int argc, char **argv)
{
	enum pp_shim_variant variant = PP_SHIM_AUTO;
	const char *workload = NULL;
	double secs = 5;
	unsigned hz = 10000;
	int rounds = 2, opt, stats_fd, ncpu, rc = 1;
	struct run_result res[2];
	enum comparison cmp = CMP_MEM;
	static const char *const labels[3][2] = {
	    {"A: no memory fields", "B: memory fields"},
	    {"A: kernel's user walk", "B: shim's user walk"},
	    {"A: shim frame pointers", "B: shim unwind tables"},
	};
	static double ratios[MAX_ROUNDS];

	while ((opt = getopt(argc, argv, "d:F:r:v:w:x:h")) != -1) {
		switch (opt) {
		case 'd':
			secs = atof(optarg);
			break;
		case 'F':
			hz = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'w':
			workload = optarg;
			break;
		case 'x':
			if (strcmp(optarg, "mem") != 0 && strcmp(optarg, "unwind") != 0 &&
			    strcmp(optarg, "tables") != 0) {
				fprintf(stderr, "pp_bench_shim: -x wants mem, unwind or tables\n");
				return 2;
			}
			cmp = strcmp(optarg, "mem") == 0      ? CMP_MEM
			      : strcmp(optarg, "unwind") == 0 ? CMP_UNWIND
							      : CMP_TABLES;
			break;
		case 'v':
			variant = strcmp(optarg, "core") == 0 ? PP_SHIM_CORE : PP_SHIM_KCTX;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-x mem|unwind|tables] [-d SECONDS] [-F HZ] [-r ROUNDS] "
				"[-v kctx|core] [-w WORKLOAD]\n",
				argv[0]);
			return 2;
		}
	}
	if (secs <= 0 || hz == 0 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "pp_bench_shim: -d, -F want positive numbers, -r 1..%d\n",
			MAX_ROUNDS);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "pp_bench_shim: needs root (BPF, perf events, BPF statistics)\n");
		return 77;
	}
	/* Statistics stay on while this fd is open, and go back off when the process ends. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "pp_bench_shim: cannot enable BPF run-time statistics: %s\n",
			strerror(-stats_fd));
		return 1;
	}
	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > MAX_CPUS)
		ncpu = MAX_CPUS;
	for (int i = 0; i < ncpu; i++)
		busy[i] = spawn_busy(workload);
	nbusy = ncpu;
	if (cmp == CMP_TABLES)
		usleep(300000); /* the workload's libraries mapped before its tables are read */

	memset(res, 0, sizeof(res));
	/* Alternating A and B spreads drift (frequency, other load) over both. */
	for (int r = 0; r < rounds; r++) {
		struct run_result round[2];

		memset(round, 0, sizeof(round));
		for (int b = 0; b < 2; b++) {
			if (run_one(variant, cmp, b, hz, secs, &round[b]))
				goto out;
			res[b].run_ns += round[b].run_ns;
			res[b].run_cnt += round[b].run_cnt;
			res[b].records += round[b].records;
			res[b].lost += round[b].lost;
		}
		ratios[r] = ns_per(&round[0]) > 0 ? ns_per(&round[1]) / ns_per(&round[0]) : 0;
	}
	qsort(ratios, (size_t)rounds, sizeof(ratios[0]), cmp_double);

	printf("shim cost per sample, cpu-clock %u Hz x %d CPUs, kernel+user stacks, "
	       "%d x %.1f s per configuration, %s variant\n",
	       hz, ncpu, rounds, secs,
	       variant == PP_SHIM_CORE		  ? "core"
	       : variant == PP_SHIM_KCTX	  ? "kctx"
	       : pp_kernel_has_cast_to_kern_ctx() ? "kctx"
						  : "core");
	printf("%-28s %12s %12s %10s %12s\n", "configuration", "samples", "records", "lost",
	       "ns/sample");
	printf("%-28s %12llu %12llu %10llu %12.1f\n", labels[cmp][0],
	       (unsigned long long)res[0].run_cnt, (unsigned long long)res[0].records,
	       (unsigned long long)res[0].lost, ns_per(&res[0]));
	printf("%-28s %12llu %12llu %10llu %12.1f\n", labels[cmp][1],
	       (unsigned long long)res[1].run_cnt, (unsigned long long)res[1].records,
	       (unsigned long long)res[1].lost, ns_per(&res[1]));
	if (ns_per(&res[0]) > 0)
		printf("ratio B/A: %.3f (all runs); per round: median %.3f, min %.3f, max %.3f\n",
		       ns_per(&res[1]) / ns_per(&res[0]), ratios[rounds / 2], ratios[0],
		       ratios[rounds - 1]);
	rc = res[0].run_cnt && res[1].run_cnt ? 0 : 1;
out:
	for (int i = 0; i < ncpu; i++) {
		if (busy[i] <= 0)
			continue;
		kill(busy[i], SIGKILL);
		waitpid(busy[i], NULL, 0);
	}
	close(stats_fd);
	return rc;
}
