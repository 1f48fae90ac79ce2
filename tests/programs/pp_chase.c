/*
 * A pointer chase for the memory-profile hardware tests (tests/integration/test_mem_hw.sh):
 * nodes of one cache line each, linked in a random cycle over a working set of BYTES, walked
 * for SECONDS. Every load in chase() depends on the one before, so it waits for the level of
 * the hierarchy the working set fits in: L1, L2, L3 or DRAM. The nodes live in chase_buf, a
 * data symbol, so a sample's data address names it when it falls inside the buffer; the walk
 * reads node->next through a pointer, so an exact IP names "struct node.next".
 *
 * usage: pp_chase BYTES SECONDS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_BYTES (512ul << 20)

struct node {
	struct node *next;
	long payload[7]; /* one 64-byte line per node: no two nodes share a line */
};

struct node chase_buf[MAX_BYTES / sizeof(struct node)]; /* the data symbol the samples name */
volatile struct node *chase_sink;

struct node *chase(struct node *p, long steps);

__attribute__((noinline)) struct node *chase(struct node *p, long steps)
{
	while (steps-- > 0)
		p = p->next;
	return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : 16384;
	double seconds = argc > 2 ? atof(argv[2]) : 3, end;
	size_t n = bytes / sizeof(struct node), *order;
	struct node *p;

	if (n < 2 || bytes > MAX_BYTES || seconds <= 0) {
		fprintf(stderr, "usage: pp_chase BYTES SECONDS (BYTES from 128 to %lu)\n",
			MAX_BYTES);
		return 2;
	}
	order = malloc(n * sizeof(*order));
	if (!order)
		return 1;
	/* a shuffled order, linked end to end: one cycle through every node that prefetchers
	 * cannot follow */
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = next_random() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		chase_buf[order[i]].next = &chase_buf[order[(i + 1) % n]];
	free(order);
	p = &chase_buf[0];
	for (end = now_s() + seconds; now_s() < end;)
		p = chase(p, 1 << 16);
	chase_sink = p;
	return 0;
}
