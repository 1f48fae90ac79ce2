/*
 * Fuzz target for the stack walk: the bytes give a table's rows (any rules, any offsets),
 * the registers and the stack memory, as a hostile process could arrange them. The walk
 * must end within its frame limit, read only through the callback and never crash; the rows
 * packed for the shim must give, looked up as the shim does, the rule the table has at each
 * row's first byte and the bytes around it; rows given through find_row walk the same.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/unwind_pack.h"
#include "cfi/unwind_table.h"
#include "unwind/unwind_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CODE_LO 0x400000u
#define CODE_HI 0x500000u
#define STACK 0x7ff000000000ull

struct input {
	struct pp_unwind_table *table;
	const uint8_t *stack;
	size_t stack_len;
};

static const struct pp_unwind_table *find(void *ctx, uint64_t pc, uint64_t *bias)
{
	const struct input *in = ctx;

	*bias = 0;
	return pc >= CODE_LO && pc < CODE_HI ? in->table : NULL; /* else frame pointers */
}

/* The same table through find_row, as the unwinder's walks of stack copies look rows up. */
static int find_row(void *ctx, uint64_t pc, struct pp_unwind_row *row)
{
	const struct input *in = ctx;

	if (pc < CODE_LO || pc >= CODE_HI)
		return 0;
	return pp_unwind_table_lookup(in->table, pc, row) ? 1 : -1;
}

static int read_u64(void *ctx, uint64_t addr, uint64_t *out)
{
	const struct input *in = ctx;

	if (addr < STACK || addr - STACK >= in->stack_len || in->stack_len - (addr - STACK) < 8)
		return -14;
	memcpy(out, in->stack + (addr - STACK), 8);
	return 0;
}

/* The packed rule at pc is the table's: traps where it is not. */
static void check_packed_at(const struct pp_unwind_table *t, const struct pp_unwind_packed *pk,
			    const struct pp_unwind_rules *d, uint64_t pc)
{
	struct pp_unwind_row want;
	uint32_t rule;

	if (!pp_unwind_table_lookup(t, pc, &want) ||
	    !pp_unwind_packed_find(pk->words, pk->nwords, pk->nr_pages, pc - pk->base_vaddr, &rule))
		__builtin_trap();
	if (!pp_unwind_rule_matches(rule, pp_unwind_rules_at(d, rule), &want))
		__builtin_trap();
}

static void check_packed(const struct pp_unwind_table *t, const struct pp_unwind_row *rows,
			 size_t nrows)
{
	struct pp_unwind_rules *d = pp_unwind_rules_new(64);
	struct pp_unwind_packed pk;

	if (!d || !nrows || pp_unwind_pack(t, d, 0, &pk) != 0) {
		pp_unwind_rules_free(d);
		return;
	}
	for (size_t i = 0; i < nrows; i++) {
		check_packed_at(t, &pk, d, rows[i].pc);
		if (rows[i].pc > rows[0].pc)
			check_packed_at(t, &pk, d, rows[i].pc - 1);
		if (rows[i].pc < rows[nrows - 1].pc)
			check_packed_at(t, &pk, d, rows[i].pc + 1);
	}
	pp_unwind_packed_release(&pk, d);
	if (pp_unwind_rules_count(d) != 1) /* every rule let go */
		__builtin_trap();
	pp_unwind_rules_free(d);
}

static int by_pc(const void *a, const void *b)
{
	const struct pp_unwind_row *x = a, *y = b;

	return x->pc < y->pc ? -1 : x->pc > y->pc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_unwind_row rows[32];
	struct pp_unwind_regs regs;
	struct input in = {0};
	uint64_t pcs[64];
	enum pp_unwind_stop why;
	size_t nrows, n;

	if (size < 1 + sizeof(regs))
		return 0;
	nrows = data[0] % 32;
	data++, size--;
	if (size < nrows * sizeof(rows[0]) + sizeof(regs))
		return 0;
	memcpy(rows, data, nrows * sizeof(rows[0]));
	data += nrows * sizeof(rows[0]), size -= nrows * sizeof(rows[0]);
	for (size_t i = 0; i < nrows; i++)
		rows[i].pc = CODE_LO + rows[i].pc % (CODE_HI - CODE_LO);
	qsort(rows, nrows, sizeof(rows[0]), by_pc);
	memcpy(&regs, data, sizeof(regs));
	data += sizeof(regs), size -= sizeof(regs);
	regs.rsp = STACK + regs.rsp % 4096; /* a stack pointer into the given bytes, mostly */
	in.table = pp_unwind_table_from_rows(rows, nrows);
	in.stack = data;
	in.stack_len = size;
	if (!in.table)
		return 0;
	check_packed(in.table, rows, nrows);
	{
		struct pp_unwind_ops ops = {.find = find, .read_u64 = read_u64, .ctx = &in};

		struct pp_unwind_ops by_row = {
		    .find_row = find_row, .read_u64 = read_u64, .ctx = &in};
		uint64_t pcs2[64];
		enum pp_unwind_stop why2;

		n = pp_unwind_walk(&regs, &ops, pcs, 64, &why, NULL);
		if (n < 1 || n > 64 || (n == 64) != (why == PP_UNWIND_DEPTH))
			__builtin_trap();
		(void)pp_unwind_stop_name(why);
		/* rows found either way walk the same frames and stop for the same reason */
		if (pp_unwind_walk(&regs, &by_row, pcs2, 64, &why2, NULL) != n || why2 != why ||
		    memcmp(pcs, pcs2, n * sizeof(pcs[0])))
			__builtin_trap();
	}
	pp_unwind_table_free(in.table);
	return 0;
}
