/*
 * The table as the compiler (unwind_table.c) and its file form (unwind_table_file.c) both hold
 * it; nothing outside cfi/ includes this.
 */
#ifndef PP_COLLECTOR_UNWIND_TABLE_PRIV_H
#define PP_COLLECTOR_UNWIND_TABLE_PRIV_H

#include "unwind_table.h"

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
	/* a decoded table's file form, owned: pc_offs and rule_ix point into it, not freed alone */
	void *backing;
};

#endif /* PP_COLLECTOR_UNWIND_TABLE_PRIV_H */
