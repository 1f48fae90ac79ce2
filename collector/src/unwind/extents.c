/*
 * Free runs of a fixed range of slots: a sorted array of runs, first fit, merged on free.
 * Runs lie between allocations, so there are never more of them than allocations + 1.
 */
#include "extents.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pp_extents_init(struct pp_extents *x, uint32_t n)
{
	memset(x, 0, sizeof(*x));
	x->cap = 64;
	x->runs = malloc(x->cap * sizeof(*x->runs));
	if (!x->runs)
		return -ENOMEM;
	if (n)
		x->runs[x->nruns++] = (struct pp_extent){0, n};
	return 0;
}

void pp_extents_fini(struct pp_extents *x)
{
	free(x->runs);
	memset(x, 0, sizeof(*x));
}

static void remove_run(struct pp_extents *x, uint32_t i)
{
	memmove(&x->runs[i], &x->runs[i + 1], (x->nruns - i - 1) * sizeof(*x->runs));
	x->nruns--;
}

int pp_extents_alloc(struct pp_extents *x, uint32_t n, uint32_t *first)
{
	for (uint32_t i = 0; i < x->nruns; i++) {
		if (x->runs[i].n < n)
			continue;
		*first = x->runs[i].first;
		x->runs[i].first += n;
		x->runs[i].n -= n;
		if (!x->runs[i].n)
			remove_run(x, i);
		x->used += n;
		return 0;
	}
	return -ENOSPC;
}

void pp_extents_free(struct pp_extents *x, uint32_t first, uint32_t n)
{
	uint32_t i = 0;

	if (!n)
		return;
	x->frees++;
	while (i < x->nruns && x->runs[i].first < first)
		i++;
	x->used -= n;
	/* merge with the run before, the run after, or both */
	if (i > 0 && x->runs[i - 1].first + x->runs[i - 1].n == first) {
		x->runs[i - 1].n += n;
		if (i < x->nruns && first + n == x->runs[i].first) {
			x->runs[i - 1].n += x->runs[i].n;
			remove_run(x, i);
		}
		return;
	}
	if (i < x->nruns && first + n == x->runs[i].first) {
		x->runs[i].first = first;
		x->runs[i].n += n;
		return;
	}
	if (x->nruns == x->cap) {
		struct pp_extent *more = realloc(x->runs, 2 * x->cap * sizeof(*more));

		if (!more) {
			x->used += n; /* the slots are lost to allocation, still counted as used */
			return;
		}
		x->runs = more;
		x->cap *= 2;
	}
	memmove(&x->runs[i + 1], &x->runs[i], (x->nruns - i) * sizeof(*x->runs));
	x->runs[i] = (struct pp_extent){first, n};
	x->nruns++;
}
