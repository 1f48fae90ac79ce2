/*
 * A compiled unwind table as bytes, for keeping it across the agent's restarts (the unwinder's
 * table cache): the rows, their rules, the file's segments and the compile's counts, with the
 * digest of what it was compiled from (pp_unwind_table_digest_fd) and a checksum. Decoding
 * checks everything a table must hold (sorted rows, rule indexes in range, known rules), so a
 * torn, truncated or altered file is refused rather than unwound with.
 */
#ifndef PP_COLLECTOR_UNWIND_TABLE_FILE_H
#define PP_COLLECTOR_UNWIND_TABLE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "unwind_table.h"

/* The table and its digest as bytes in a new buffer (*buf, *len; free()): 0 or -ENOMEM. */
int pp_unwind_table_encode(const struct pp_unwind_table *t,
			   const uint8_t digest[PP_UNWIND_DIGEST_SIZE], void **buf, size_t *len);
/*
 * The table len bytes at buf hold, and its digest in digest_out. buf is the table's from here
 * on, failed or not: its rows are read where they lie, not copied (a restarted agent reads back
 * tens of MiB of them). map_len 0: buf is from malloc; else buf is a private mapping of
 * map_len bytes (a file mapped whole: its pages are the page cache's, neither copied nor held
 * twice), unmapped with the table. NULL with errno set:
 *   EBADMSG  not such bytes, or a checksum, size or content that does not hold;
 *   EPROTO   another version of the format;
 *   ENOMEM.
 */
struct pp_unwind_table *pp_unwind_table_decode(void *buf, size_t len, size_t map_len,
					       uint8_t digest_out[PP_UNWIND_DIGEST_SIZE]);

#endif /* PP_COLLECTOR_UNWIND_TABLE_FILE_H */
