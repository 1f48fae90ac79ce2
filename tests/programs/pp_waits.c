/*
 * A workload with known off-CPU shares, for the off-CPU tests: each round it sleeps in
 * wait_sleep (15 x 20 ms), reads a pipe a writer thread fills every 20 ms in wait_pipe
 * (10 x 20 ms), waits on a futex that nobody wakes in wait_futex (5 x 20 ms), burns the CPU in
 * burn (200 ms of its CPU time) and takes 200 sleeps of 50 us in wait_short, each under a 1 ms
 * threshold. Off the CPU above the threshold: wait_sleep 50 %, wait_pipe 33 %, wait_futex 17 %
 * of the main thread's time.
 *
 * usage: pp_waits [--pidfile FILE] [--warmup SECONDS] ROUNDS
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20

/* noclone keeps gcc from emitting wait_sleep.constprop.0 and the like */
#ifdef __clang__
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

NOINLINE void wait_sleep(void);
NOINLINE void wait_pipe(void);
NOINLINE void wait_futex(void);
NOINLINE void wait_short(void);
NOINLINE void burn(void);
NOINLINE void warm_up(double secs);

static int pipe_fds[2];
static volatile int writer_stop;

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void *pipe_writer(void *arg)
{
	(void)arg;
	while (!writer_stop) {
		sleep_ms(WAIT_MS);
		if (write(pipe_fds[1], "x", 1) != 1)
			break;
	}
	return NULL;
}

void wait_sleep(void)
{
	for (int i = 0; i < 15; i++)
		sleep_ms(WAIT_MS);
}

void wait_pipe(void)
{
	char c;

	for (int i = 0; i < 10; i++)
		if (read(pipe_fds[0], &c, 1) != 1)
			exit(3);
}

void wait_futex(void)
{
	static int word;
	struct timespec ts = {.tv_nsec = WAIT_MS * 1000000L};

	for (int i = 0; i < 5; i++)
		syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
}

void wait_short(void)
{
	struct timespec ts = {.tv_nsec = 50000};

	for (int i = 0; i < 200; i++)
		nanosleep(&ts, NULL);
}

static double now_mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static double thread_cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static volatile unsigned long burnt; /* what burn computes, so it is computed */

void burn(void)
{
	double until = thread_cpu_ms() + 200;

	while (thread_cpu_ms() < until)
		for (int i = 0; i < 10000; i++)
			burnt += (unsigned long)i;
}

/*
 * Waits SECS before the rounds, outside run_round: a profiler builds the unwind tables of a
 * new process meanwhile, so the rounds' stacks are whole from their first wait.
 */
NOINLINE void warm_up(double secs)
{
	double until = now_mono() + secs;

	while (now_mono() < until)
		sleep_ms(50);
}

static void run_round(void)
{
	char buf[256];
	int pending = 0;

	wait_sleep();
	/* what the writer wrote meanwhile is not a wait: start from an empty pipe */
	if (ioctl(pipe_fds[0], FIONREAD, &pending) == 0 && pending > 0)
		if (read(pipe_fds[0], buf,
			 pending < (int)sizeof(buf) ? (size_t)pending : sizeof(buf)) < 0)
			exit(3);
	wait_pipe();
	wait_futex();
	burn();
	wait_short();
}

int main(int argc, char **argv)
{
	const char *pidfile = NULL;
	double warmup = 0;
	pthread_t writer;
	long rounds;
	int a = 1;

	for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
		if (strcmp(argv[a], "--pidfile") == 0)
			pidfile = argv[a + 1];
		else if (strcmp(argv[a], "--warmup") == 0)
			warmup = atof(argv[a + 1]);
		else
			break;
	}
	if (a >= argc || (rounds = strtol(argv[a], NULL, 10)) <= 0 || warmup < 0) {
		fprintf(stderr, "usage: pp_waits [--pidfile FILE] [--warmup SECONDS] ROUNDS\n");
		return 2;
	}
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");

		if (!f)
			return 1;
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	if (pipe(pipe_fds))
		return 1;
	warm_up(warmup);
	if (pthread_create(&writer, NULL, pipe_writer, NULL))
		return 1;
	for (long r = 0; r < rounds; r++)
		run_round();
	writer_stop = 1;
	pthread_join(writer, NULL);
	return 0;
}
