/*
 * pp_workload: a CPU-bound program whose functions take known shares of CPU time, so the
 * integration tests and the benchmark can check what a profiler attributes to each.
 *
 *   main -> run_phase -> burn_alpha               50 %
 *                     -> burn_beta                30 %
 *                     -> via_gamma -> burn_gamma  20 %
 *
 * Shares are measured in thread CPU time (CLOCK_THREAD_CPUTIME_ID), not in iterations, so
 * they hold whatever the CPU speed or the load on the machine. The mix is interleaved in
 * 20 ms rounds over the whole run so that any sub-interval of the run shows the same shares.
 *
 * Usage: pp_workload [--threads N] [--fork] [--exit N] [--cpu-ms N] [--pidfile F] [--rusage F]
 *                    [SECONDS]
 *   SECONDS   wall-clock run time (default 5; 0 = until killed)
 *   --cpu-ms N   also stop once the process has had N ms of CPU (whole rounds): a test that
 *                needs a number of samples gets them on a busy machine too, where a fixed
 *                wall time gives a starved workload a fraction of them
 *   --threads N  N threads in this process run the mix (default 1: main thread only)
 *   --fork       a child process runs the same mix; the parent waits for it, and it dies
 *                with the parent
 *   --exit N     exit status (default 0)
 *   --pidfile F  write the pids of the processes running the mix, one per line
 *   --rusage F   at exit, write "USER_S SYS_S" CPU seconds used by this process and its child,
 *                so tests can compare a profile's sample count with the CPU time it covers
 * It prints nothing in normal runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* noclone keeps gcc from emitting burn_alpha.constprop.0 and the like; clang has no such pass. */
#ifdef __clang__
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

/* One round of the mix, in thread CPU nanoseconds: 10 + 6 + 4 ms = 50/30/20 %. */
#define ALPHA_NS 10000000ULL
#define BETA_NS 6000000ULL
#define GAMMA_NS 4000000ULL

/*
 * Iterations between two reads of the thread CPU clock. The read is a system call; at
 * roughly 30 us of spinning per read its cost stays around 1 % and is spread evenly over
 * the three functions, so it cannot skew their shares.
 */
#define SPIN_CHECK_EVERY 16384

/* Per thread, so threads do not bounce one cache line between CPUs. */
static _Thread_local volatile uint64_t sink;
static uint64_t deadline_ns;   /* CLOCK_MONOTONIC; 0 = run forever */
static uint64_t cpu_budget_ns; /* CLOCK_PROCESS_CPUTIME_ID; 0 = no budget */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * The spin loop is a macro, not a function, so the samples land in the burn function's own
 * body (self time) rather than in a shared helper.
 */
#define SPIN_FOR(budget_ns)                                                                        \
	do {                                                                                       \
		uint64_t end_ = clock_ns(CLOCK_THREAD_CPUTIME_ID) + (budget_ns);                   \
		do {                                                                               \
			for (unsigned i_ = 0; i_ < SPIN_CHECK_EVERY; i_++)                         \
				sink = sink * 6364136223846793005ULL + i_;                         \
		} while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end_);                                \
	} while (0)

NOINLINE void burn_alpha(void);
NOINLINE void burn_beta(void);
NOINLINE void burn_gamma(void);
NOINLINE void via_gamma(void);
NOINLINE void run_phase(void);

NOINLINE void burn_alpha(void)
{
	SPIN_FOR(ALPHA_NS);
	__asm__ volatile("" ::: "memory"); /* keep the call frame: no tail position */
}

NOINLINE void burn_beta(void)
{
	SPIN_FOR(BETA_NS);
	__asm__ volatile("" ::: "memory");
}

NOINLINE void burn_gamma(void)
{
	SPIN_FOR(GAMMA_NS);
	__asm__ volatile("" ::: "memory");
}

/* A distinct caller, so tests can assert a caller chain two levels deep. */
NOINLINE void via_gamma(void)
{
	burn_gamma();
	__asm__ volatile("" ::: "memory");
}

NOINLINE void run_phase(void)
{
	do {
		burn_alpha();
		burn_beta();
		via_gamma();
	} while ((!deadline_ns || clock_ns(CLOCK_MONOTONIC) < deadline_ns) &&
		 (!cpu_budget_ns || clock_ns(CLOCK_PROCESS_CPUTIME_ID) < cpu_budget_ns));
}

static void *worker_main(void *arg)
{
	(void)arg;
	run_phase();
	return NULL;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max || s[0] == '-')
		return -EINVAL;
	*out = v;
	return 0;
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int write_rusage(const char *path)
{
	struct rusage self, kids;
	FILE *f;

	if (getrusage(RUSAGE_SELF, &self) || getrusage(RUSAGE_CHILDREN, &kids))
		return -errno;
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "pp_workload: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	fprintf(f, "%.3f %.3f\n", tv_s(self.ru_utime) + tv_s(kids.ru_utime),
		tv_s(self.ru_stime) + tv_s(kids.ru_stime));
	return fclose(f) ? -errno : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pp_workload [--threads N] [--fork] [--exit N] [--cpu-ms N] "
		   "[--pidfile FILE] [--rusage FILE] [SECONDS]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"threads", required_argument, NULL, 't'}, {"fork", no_argument, NULL, 'f'},
	    {"exit", required_argument, NULL, 'x'},    {"cpu-ms", required_argument, NULL, 'c'},
	    {"pidfile", required_argument, NULL, 'p'}, {"rusage", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},	       {NULL, 0, NULL, 0},
	};
	unsigned long seconds = 5, threads = 1, exit_code = 0, cpu_ms = 0;
	const char *pidfile = NULL, *rusage_file = NULL;
	pthread_t tids[64];
	pid_t child = -1;
	int do_fork = 0, c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_uint(optarg, 64, &threads) || threads == 0) {
				fprintf(stderr, "pp_workload: --threads wants 1..64, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'f':
			do_fork = 1;
			break;
		case 'x':
			if (parse_uint(optarg, 255, &exit_code)) {
				fprintf(stderr, "pp_workload: --exit wants 0..255, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'c':
			if (parse_uint(optarg, 86400000, &cpu_ms)) {
				fprintf(stderr,
					"pp_workload: --cpu-ms wants 0..86400000, got '%s'\n",
					optarg);
				return 2;
			}
			cpu_budget_ns = (uint64_t)cpu_ms * 1000000ULL;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'r':
			rusage_file = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc && parse_uint(argv[optind++], 86400, &seconds)) {
		fprintf(stderr, "pp_workload: SECONDS wants 0..86400, got '%s'\n",
			argv[optind - 1]);
		return 2;
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}

	if (seconds)
		deadline_ns = clock_ns(CLOCK_MONOTONIC) + seconds * 1000000000ULL;

	if (do_fork) {
		pid_t parent = getpid();

		child = fork();
		if (child < 0) {
			fprintf(stderr, "pp_workload: fork: %s\n", strerror(errno));
			return 1;
		}
		if (child == 0) {
			/* a test that kills the parent stops the child too */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			run_phase();
			_exit(0);
		}
	}
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");

		if (!f) {
			fprintf(stderr, "pp_workload: %s: %s\n", pidfile, strerror(errno));
			return 1;
		}
		fprintf(f, "%d\n", (int)getpid());
		if (child > 0)
			fprintf(f, "%d\n", (int)child);
		fclose(f);
	}

	for (unsigned long i = 1; i < threads; i++) {
		int err = pthread_create(&tids[i], NULL, worker_main, NULL);

		if (err) {
			fprintf(stderr, "pp_workload: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	run_phase();
	for (unsigned long i = 1; i < threads; i++)
		pthread_join(tids[i], NULL);

	if (child > 0) {
		int status;

		while (waitpid(child, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (rusage_file && write_rusage(rusage_file))
		return 1;
	return (int)exit_code;
}
