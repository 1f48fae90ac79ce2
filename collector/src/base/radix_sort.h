/*
 * A stable LSD radix sort of (key, value) pairs by their 64-bit key: for the symbol tables the
 * agent builds at a program's first sight (a few hundred thousand symbols by address, names by
 * string-table offset), where glibc's qsort spent more time comparing than the rest of the read.
 */
#ifndef PP_COLLECTOR_RADIX_SORT_H
#define PP_COLLECTOR_RADIX_SORT_H

#include <stddef.h>
#include <stdint.h>

struct pp_sort_pair {
	uint64_t key;
	uint64_t value; /* an index or a pointer: carried along */
};

/*
 * Sort v[0..n) by key, pairs of equal keys kept in their order; tmp holds n pairs. Byte
 * positions where every key agrees (the high bytes of addresses in one file) cost one pass
 * of counting, not a move.
 */
void pp_radix_sort_pairs(struct pp_sort_pair *v, struct pp_sort_pair *tmp, size_t n);

#endif /* PP_COLLECTOR_RADIX_SORT_H */
