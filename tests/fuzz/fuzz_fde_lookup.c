/*
 * Fuzz target for the FDE lookup: the bytes are an ELF file whose .eh_frame_hdr and .eh_frame
 * may be anything. Every answer must be rows sorted from the FDE's start, inside its span;
 * where the whole file's compile of the same bytes also gives a row with CFI, the lookup must
 * give the same row (the FDEs the lookup reads are the ones the compile reads).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cfi/fde_lookup.h"
#include "cfi/unwind_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(struct pp_fde_lookup *l, const struct pp_unwind_table *t,
		     struct pp_unwind_row *rows, uint64_t pc)
{
	struct pp_unwind_row want, *got = NULL;
	uint64_t start, limit;
	size_t n;
	int ret = pp_fde_lookup_rows(l, pc, rows, &n, &start, &limit);

	if (ret < 0)
		return;
	if (ret == 0) {
		if (n || (limit <= pc && limit != UINT64_MAX))
			__builtin_trap();
		return;
	}
	if (!n || n > PP_FDE_MAX_ROWS || start > pc || (pc >= limit && limit != UINT64_MAX) ||
	    rows[0].pc != start)
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		if ((i && rows[i - 1].pc > rows[i].pc) ||
		    (rows[i].pc >= limit && limit != UINT64_MAX))
			__builtin_trap();
		if (rows[i].pc <= pc)
			got = &rows[i];
	}
	if (t && got && got->cfa_rule != PP_CFA_NONE && pp_unwind_table_lookup(t, pc, &want) &&
	    want.cfa_rule != PP_CFA_NONE &&
	    (want.cfa_rule != got->cfa_rule || want.cfa_off != got->cfa_off ||
	     want.ra_rule != got->ra_rule || want.ra_off != got->ra_off ||
	     want.rbp_rule != got->rbp_rule || want.rbp_off != got->rbp_off))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_fde_lookup *l = pp_fde_lookup_open_mem(data, size);
	struct pp_unwind_table *t;
	struct pp_unwind_row *rows;
	size_t n;

	if (!l)
		return 0;
	rows = malloc(PP_FDE_MAX_ROWS * sizeof(*rows));
	t = pp_unwind_table_open_mem(data, size, 1u << 16);
	if (rows) {
		n = pp_unwind_table_count(t);
		for (size_t i = 0; i < n && i < 4096; i++) {
			struct pp_unwind_row r;

			if (pp_unwind_table_get(t, i, &r)) {
				check_at(l, t, rows, r.pc);
				check_at(l, t, rows, r.pc + 1);
			}
		}
		check_at(l, t, rows, 0);
		check_at(l, t, rows, UINT64_MAX);
		for (size_t i = 0; i + 8 <= size && i < 512;
		     i += 8) { /* addresses from the bytes */
			uint64_t pc = 0;

			for (int k = 0; k < 8; k++)
				pc |= (uint64_t)data[i + k] << (8 * k);
			check_at(l, t, rows, pc);
		}
	}
	pp_unwind_table_free(t);
	free(rows);
	pp_fde_lookup_free(l);
	return 0;
}
