/*
 * Exporter-private interned string table, the shape both pprof and OTLP want for their
 * string_table: index 0 is always "", every distinct string appears once, and an index fits
 * an int32 (OTLP's *_strindex fields are int32; pprof's are int64, so the bound suits both).
 */
#ifndef PP_EXPORTER_STRTAB_H
#define PP_EXPORTER_STRTAB_H

#include "htab.h"

#include <stdint.h>

/*
 * The table borrows its strings: it stores the caller's pointers, never copies, so every
 * string added must outlive the table (or at least the last use of strs). strs and n are
 * read-only for callers; strs[0 .. n) is what goes into a message's string_table.
 * A zeroed struct is a valid argument to pp_strtab_fini().
 */
struct pp_strtab {
	const char **strs;
	uint32_t n, cap;
	struct pp_htab idx;
};

/* Starts an empty table holding "" at index 0. Returns 0 or -ENOMEM. */
int pp_strtab_init(struct pp_strtab *t);
/* Frees the table's own memory (never the strings); t is zeroed and may be init'ed again. */
void pp_strtab_fini(struct pp_strtab *t);
/*
 * Returns the index of s (a string equal to s if present, else s itself, appended), in
 * [0, INT32_MAX), or -ENOMEM when memory runs out, or -E2BIG when the table already holds
 * INT32_MAX strings. A failure leaves the table as it was.
 */
int32_t pp_strtab_add(struct pp_strtab *t, const char *s);

#endif /* PP_EXPORTER_STRTAB_H */
