/*
 * Free runs of a fixed range of slots (the row array's words, the process lists' mapping
 * entries): first fit, and a run given back merged with its free neighbours. The caller
 * owns what is in the slots; this only says which are free.
 */
#ifndef PP_UNWIND_EXTENTS_H
#define PP_UNWIND_EXTENTS_H

#include <stdint.h>

struct pp_extent {
	uint32_t first, n;
};

struct pp_extents {
	struct pp_extent *runs; /* free runs, by first, none touching another */
	uint32_t nruns, cap;
	uint64_t used;	/* slots allocated */
	uint64_t frees; /* runs given back, ever: a run that did not fit may fit since */
};

/* [0, n) free: 0, or -ENOMEM. */
int pp_extents_init(struct pp_extents *x, uint32_t n);
void pp_extents_fini(struct pp_extents *x);

/* n slots from the first free run that holds them: 0 and *first, or -ENOSPC. */
int pp_extents_alloc(struct pp_extents *x, uint32_t n, uint32_t *first);

/* [first, first + n), allocated before, free again. */
void pp_extents_free(struct pp_extents *x, uint32_t first, uint32_t n);

#endif
