/*
 * Room for one more element in a growable array: the doubling every append-only table of
 * the collector repeats, in one place.
 */
#ifndef PP_COLLECTOR_VEC_H
#define PP_COLLECTOR_VEC_H

#include <errno.h>
#include <stdlib.h>

/*
 * Make *items (n used of *cap, elem bytes each) hold at least n + 1: the capacity doubles from
 * first_cap, up to max (0: no bound). 0, -ENOMEM, or -E2BIG when n has reached max.
 */
static inline int pp_vec_reserve(void **items, size_t *cap, size_t n, size_t elem, size_t first_cap,
				 size_t max)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	if (max && n >= max)
		return -E2BIG;
	ncap = *cap ? *cap * 2 : first_cap;
	if (max && ncap > max)
		ncap = max;
	if (ncap <= n || ncap > (size_t)-1 / elem)
		return -ENOMEM;
	p = realloc(*items, ncap * elem);
	if (!p)
		return -ENOMEM;
	*items = p;
	*cap = ncap;
	return 0;
}

#endif /* PP_COLLECTOR_VEC_H */
