/*
 * A file's CFI found an address at a time: .eh_frame_hdr's search table read once, and only
 * the FDE covering an address asked for (and its CIE) read from the file and compiled, into
 * the rows the whole file's compile (unwind_table.h) gives for that FDE. For the big
 * libraries a short program maps and whose code few samples ever walk through, where
 * compiling the whole file costs a hundred milliseconds of which the walks use a few rows.
 */
#ifndef PP_COLLECTOR_FDE_LOOKUP_H
#define PP_COLLECTOR_FDE_LOOKUP_H

#include <stddef.h>
#include <stdint.h>

#include "unwind_table.h"

struct pp_fde_lookup;

/*
 * A lookup over the file fd (duplicated: the caller keeps its own) or an image in memory
 * (copied). NULL with errno: ENOTSUP for a file that is not little-endian x86-64, whose
 * .eh_frame_hdr is of another form, or with .debug_frame (code .eh_frame may lack: such a
 * file is compiled whole); ENODATA without .eh_frame or its header; EINVAL for a table not
 * strictly sorted; the refusals of base/elf_read (EFBIG, ENXIO, ...).
 */
struct pp_fde_lookup *pp_fde_lookup_open_fd(int fd);
struct pp_fde_lookup *pp_fde_lookup_open_mem(const void *buf, size_t len);
void pp_fde_lookup_free(struct pp_fde_lookup *l);

/* The lookup's own descriptor of the file (-1 for an image in memory): to compile it whole. */
int pp_fde_lookup_fd(const struct pp_fde_lookup *l);
/* The FDEs .eh_frame_hdr lists: what compiling the whole file would cost. */
uint32_t pp_fde_lookup_count(const struct pp_fde_lookup *l);
/* The file's PT_LOAD segments (at most PP_UNWIND_MAX_LOADS), their number returned. */
size_t pp_fde_lookup_get_loads(const struct pp_fde_lookup *l, struct pp_unwind_load *out);

/* At most this many rows for one FDE (a corrupt one cannot give more). */
#define PP_FDE_MAX_ROWS 65536

/*
 * The rows covering pc (an ELF virtual address): those of the FDE whose range starts at or
 * below it, from its start up to the next FDE's (*start, *limit), in rows (at most
 * PP_FDE_MAX_ROWS, *n of them, sorted; the gap after the FDE's own range a PP_CFA_NONE row).
 * An FDE that cannot be read or is refused gives one PP_CFA_NONE row: walks stop there, as
 * the whole file's table says. Returns 1; 0 where pc is below the first FDE (no CFI, *limit
 * the first FDE's start); -ENOMEM.
 */
int pp_fde_lookup_rows(struct pp_fde_lookup *l, uint64_t pc, struct pp_unwind_row *rows, size_t *n,
		       uint64_t *start, uint64_t *limit);

struct pp_fde_lookup_stats {
	uint64_t lookups;      /* pp_fde_lookup_rows calls */
	uint64_t entries_read; /* FDEs and CIEs read from the file */
	uint64_t refused;      /* FDEs unreadable or refused: a PP_CFA_NONE row */
};
void pp_fde_lookup_get_stats(const struct pp_fde_lookup *l, struct pp_fde_lookup_stats *out);

#endif /* PP_COLLECTOR_FDE_LOOKUP_H */
