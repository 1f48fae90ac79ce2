/*
 * The user-stack walk over unwind tables, in C: for each frame the table row at its pc gives
 * the CFA and where the caller's rbp and return address are; a pc whose file has no table
 * takes a frame-pointer step instead, so stacks that mix both come out whole. This is the
 * algorithm the shim runs in BPF, kept here so that it can be run over a captured stack and
 * checked against the call chain a program really had.
 */
#ifndef PP_COLLECTOR_UNWIND_WALK_H
#define PP_COLLECTOR_UNWIND_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "cfi/unwind_table.h"

/* Why a walk ended. */
enum pp_unwind_stop {
	PP_UNWIND_END = 0,     /* the outermost frame: its return address is undefined */
	PP_UNWIND_FP_END,      /* a frame-pointer step found rbp 0 */
	PP_UNWIND_NO_CFI,      /* a pc in a file with a table, where no row covers it */
	PP_UNWIND_UNSUPPORTED, /* a row whose rule the walk does not follow */
	PP_UNWIND_UNREADABLE,  /* the stack could not be read where a rule points */
	PP_UNWIND_CFA_NOT_UP,  /* the next frame is not above this one */
	PP_UNWIND_DEPTH,       /* max frames reached */
	/* a step that would land where no caller can be: a frame over PP_UNWIND_MAX_FRAME_BYTES,
	 * a return address outside user space (a wrong row: stop, never invent) */
	PP_UNWIND_IMPLAUSIBLE,
};

struct pp_unwind_regs {
	uint64_t rip, rsp, rbp;
};

struct pp_unwind_ops {
	/* The table for pc's file and the bias from its ELF addresses (pc - bias), or NULL when
	 * the file has none: frame pointers there. */
	const struct pp_unwind_table *(*find)(void *ctx, uint64_t pc, uint64_t *bias);
	/*
	 * Used instead of find where set (tables in another form, the shim's rows): the row
	 * covering pc in *row and 1; 0 where pc's file has no table (a frame-pointer step); -1
	 * where it has one without a row for pc (the walk stops: no CFI).
	 */
	int (*find_row)(void *ctx, uint64_t pc, struct pp_unwind_row *row);
	/* Read 8 bytes of the target's memory at addr: 0 or a negative errno. */
	int (*read_u64)(void *ctx, uint64_t addr, uint64_t *out);
	void *ctx;
};

struct pp_unwind_walk_stats {
	unsigned table_frames; /* frames stepped over with a table row */
	unsigned fp_frames;    /* with frame pointers */
};

/*
 * Walk from regs: pcs[0] is regs->rip, each next one a return address. Returns the number of
 * pcs written (at least 1 when max > 0) and why it stopped in *why.
 */
size_t pp_unwind_walk(const struct pp_unwind_regs *regs, const struct pp_unwind_ops *ops,
		      uint64_t *pcs, size_t max, enum pp_unwind_stop *why,
		      struct pp_unwind_walk_stats *stats);

const char *pp_unwind_stop_name(enum pp_unwind_stop s);

#endif /* PP_COLLECTOR_UNWIND_WALK_H */
