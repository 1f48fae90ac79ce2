/*
 * Rows of an unwind table by value, for the unit tests of cfi/ and unwind/: the table holds them
 * compact and hands out copies.
 */
#ifndef PP_TEST_UNWIND_ROWS_H
#define PP_TEST_UNWIND_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "cfi/unwind_table.h"

/* Row i by value (zeros past the last). */
static inline struct pp_unwind_row row_of(const struct pp_unwind_table *t, size_t i)
{
	struct pp_unwind_row r = {0};

	pp_unwind_table_get(t, i, &r);
	return r;
}

/* The row covering pc, in *buf: buf, or NULL before the first row. */
static inline const struct pp_unwind_row *lookup_row(const struct pp_unwind_table *t, uint64_t pc,
						     struct pp_unwind_row *buf)
{
	return pp_unwind_table_lookup(t, pc, buf) ? buf : NULL;
}

#endif /* PP_TEST_UNWIND_ROWS_H */
