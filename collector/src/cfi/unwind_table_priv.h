/*
 * The table as the compiler (unwind_table.c) and its file form (unwind_table_file.c) both hold
 * it; nothing outside cfi/ includes this.
 */
#ifndef PP_COLLECTOR_UNWIND_TABLE_PRIV_H
#define PP_COLLECTOR_UNWIND_TABLE_PRIV_H

#include "unwind_table.h"

#include <stdlib.h>
#include <sys/mman.h>

/* A row's rules: a file's rows repeat a few thousand of them a million times. */
struct row_rule {
	int32_t cfa_off;
	int16_t rbp_off, ra_off;
	uint8_t cfa_rule, rbp_rule, ra_rule, flags;
};

/* Distinct rules one table may hold (its rows name them by a 16-bit index). */
#define MAX_TABLE_RULES 65535
/* Rows a table holds unless its caller says otherwise. */
#define DEFAULT_MAX_ROWS ((size_t)1 << 22)

/*
 * Rows are held compact, 6 bytes where a struct pp_unwind_row takes 16: the pc as an offset
 * from the first row's, and the index of its rules in the table's own list. Compiling
 * libclang-cpp's 1.0 million rows (764 distinct rules) held 16 MiB of rows at its peak.
 */
struct pp_unwind_table {
	uint64_t base_pc;  /* the first row's pc */
	uint32_t *pc_offs; /* each row's pc - base_pc, ascending */
	uint16_t *rule_ix; /* each row's index in rules */
	size_t n, cap, max_rows;
	struct row_rule *rules;
	size_t nrules, rules_cap;
	uint16_t *rule_slots; /* while compiling: rules by hash (index + 1; 0 free) */
	size_t nslots;
	struct pp_unwind_table_stats stats;
	struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
	size_t nloads;
	/*
	 * a decoded table's file form, owned: pc_offs and rule_ix point into it, not freed alone;
	 * a mapping of backing_map_len bytes where that is not 0, else from malloc
	 */
	void *backing;
	size_t backing_map_len;
};

/* A decoded table's file form let go: unmapped, or freed. */
static inline void pp_unwind_backing_release(void *backing, size_t map_len)
{
	if (map_len)
		munmap(backing, map_len);
	else
		free(backing);
}

/*
 * For fde_lookup.c: a file's .eh_frame_hdr, read and checked (version, encodings, a strictly
 * sorted table), and where .eh_frame lies, not read. pp_cfi_hdr_read returns 0; -ENOTSUP for a
 * file that is not little-endian x86-64, whose hdr is of another form, or that has
 * .debug_frame (code .eh_frame may lack: compiled whole); -ENODATA without .eh_frame or its
 * header; the refusals of base/elf_read.
 */
struct pp_cfi_hdr {
	uint8_t *table; /* the section's bytes (owned: free()) */
	size_t len;
	uint64_t hdr_vaddr;
	uint32_t nfde;
	uint64_t eh_offset, eh_size, eh_vaddr;
	struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
	size_t nloads;
};

struct pp_elf_src;
int pp_cfi_hdr_read(const struct pp_elf_src *src, struct pp_cfi_hdr *out);

/*
 * One FDE compiled into t, from its bytes and its CIE's (each entry from its length field
 * on): its rows from start up to limit (the next FDE's start), the gap after its range a
 * PP_CFA_NONE row, as the whole file's compile makes them. 0, -EBADMSG for an entry refused
 * (the checks of cfi_index_build), -EINVAL, or -ENOMEM.
 */
int pp_cfi_compile_entry(const uint8_t *cie, size_t cie_len, const uint8_t *fde, size_t fde_len,
			 uint64_t start, uint64_t limit, struct pp_unwind_table *t);

#endif /* PP_COLLECTOR_UNWIND_TABLE_PRIV_H */
