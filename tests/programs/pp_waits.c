/*
 * A workload with known off-CPU shares, for the off-CPU tests: each round it sleeps in
 * wait_sleep (15 x 20 ms), reads a pipe in wait_pipe (10 x 20 ms: an interval timer's
 * SIGALRM, 20 ms after it is armed, writes the byte from its handler), waits on a futex that
 * nobody wakes in wait_futex (5 x 20 ms), burns the CPU in burn (200 ms of its CPU time) and
 * takes 200 sleeps of 50 us in wait_short, each under a 1 ms threshold. Off the CPU above the
 * threshold, sleeping: wait_sleep 50 %, wait_pipe 33 %, wait_futex 17 % of the main thread's
 * time. Each wait is ended by a kernel timer, not by another thread, so a busy machine changes
 * no share: it only delays the thread once woken, which an off-CPU profile shows apart.
 *
 * usage: pp_waits [--pidfile FILE] [--warmup SECONDS] ROUNDS
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/time.h>
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

/* SIGALRM: the byte the pipe read waits for (write is async-signal-safe) */
static void on_alarm(int sig)
{
	(void)sig;
	if (write(pipe_fds[1], "x", 1) != 1)
		_exit(3);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void wait_sleep(void)
{
	for (int i = 0; i < 15; i++)
		sleep_ms(WAIT_MS);
}

void wait_pipe(void)
{
	struct itimerval in = {.it_value = {.tv_usec = WAIT_MS * 1000}};
	char c;

	/* the handler interrupts the read, writes, and the read (SA_RESTART) gets the byte */
	for (int i = 0; i < 10; i++)
		if (setitimer(ITIMER_REAL, &in, NULL) || read(pipe_fds[0], &c, 1) != 1)
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
	wait_sleep();
	wait_pipe();
	wait_futex();
	burn();
	wait_short();
}

int main(int argc, char **argv)
{
	const char *pidfile = NULL;
	double warmup = 0;
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
	struct sigaction alarm_action = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};

	if (pipe(pipe_fds) || sigaction(SIGALRM, &alarm_action, NULL))
		return 1;
	warm_up(warmup);
	for (long r = 0; r < rounds; r++)
		run_round();
	return 0;
}
