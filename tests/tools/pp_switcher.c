/*
 * A load of context switches at a chosen rate, for bench/bench_offcpu.sh: pairs of threads
 * pass a byte back and forth over pipes, each pass a wait of the reader and a wake-up, paced
 * in slices of 1 ms (or longer, for a pair's single message) to MESSAGES per second in all; every
 * 50th wait is a 2 ms sleep, so some waits are long enough for the off-CPU threshold. The switches
 * this makes (two or more a message, depending on which CPUs the threads run on) are what the bench
 * counts, from /proc/stat.
 *
 * usage: pp_switcher MESSAGES_PER_SECOND SECONDS [PAIRS]
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct pair {
	int ping[2], pong[2];
	long per_slice; /* messages per slice */
	double slice_s; /* 1 ms, or longer where a pair sends under 1000 a second */
	double until;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts;
	double s = t - now_s();

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The echoing side: every byte read is sent back. */
static void *echo(void *arg)
{
	struct pair *p = arg;
	char c;

	while (read(p->ping[0], &c, 1) == 1)
		if (write(p->pong[1], &c, 1) != 1)
			break;
	return NULL;
}

/* The pacing side: per_slice round trips, then the rest of the slice asleep. */
static void *drive(void *arg)
{
	struct pair *p = arg;
	double slice = now_s();
	long n = 0;
	char c = 'x';

	while (now_s() < p->until) {
		for (long i = 0; i < p->per_slice; i++, n++) {
			if (write(p->ping[1], &c, 1) != 1 || read(p->pong[0], &c, 1) != 1)
				return NULL;
			if (n % 50 == 49) {
				struct timespec ts = {.tv_nsec = 2000000};

				nanosleep(&ts, NULL);
			}
		}
		slice += p->slice_s;
		sleep_until(slice);
	}
	close(p->ping[1]);
	return NULL;
}

int main(int argc, char **argv)
{
	long rate, pairs = 1;
	double secs;
	struct pair *p;
	pthread_t *th;

	if (argc < 3 || (rate = strtol(argv[1], NULL, 10)) <= 0 || (secs = atof(argv[2])) <= 0 ||
	    (argc > 3 && (pairs = strtol(argv[3], NULL, 10)) <= 0)) {
		fprintf(stderr, "usage: pp_switcher MESSAGES_PER_SECOND SECONDS [PAIRS]\n");
		return 2;
	}
	p = calloc((size_t)pairs, sizeof(*p));
	th = calloc((size_t)pairs * 2, sizeof(*th));
	if (!p || !th)
		return 1;
	for (long i = 0; i < pairs; i++) {
		if (pipe(p[i].ping) || pipe(p[i].pong))
			return 1;
		double per_s = (double)rate / (double)pairs;

		p[i].per_slice = per_s >= 1000 ? (long)(per_s / 1000) : 1;
		p[i].slice_s = per_s >= 1000 ? 0.001 : 1.0 / per_s;
		p[i].until = now_s() + secs;
		if (pthread_create(&th[2 * i], NULL, echo, &p[i]) ||
		    pthread_create(&th[2 * i + 1], NULL, drive, &p[i]))
			return 1;
	}
	for (long i = 0; i < 2 * pairs; i++)
		pthread_join(th[i], NULL);
	return 0;
}
