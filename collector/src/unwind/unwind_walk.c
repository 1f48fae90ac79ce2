/*
 * The user-stack walk (see unwind_walk.h). Every step is the one the BPF walker takes, in the
 * same order, so the two can be compared frame by frame.
 */
#include "unwind_walk.h"

#include <stdbool.h>

#include <pebsprof/record.h>

/* the end of x86-64 user space (47-bit addresses): no return address lies above it */
#define USER_END 0x00007ffffffff000ull

/* A step's outcome: STEPPED, or why the walk ends. */
#define STEPPED (-1)

/* The row for a return address is looked up at ra - 1: a call can be a function's last
 * instruction, and the row after it belongs to the next function. Not so for the pc a
 * signal interrupted, which is where the thread will resume. */
static uint64_t lookup_pc(uint64_t pc, bool exact)
{
	return exact || pc == 0 ? pc : pc - 1;
}

static int fp_step(const struct pp_unwind_ops *ops, struct pp_unwind_regs *r)
{
	uint64_t rbp, ra;

	if (r->rbp == 0)
		return PP_UNWIND_FP_END;
	if (r->rbp < r->rsp)
		return PP_UNWIND_CFA_NOT_UP;
	if (ops->read_u64(ops->ctx, r->rbp, &rbp) || ops->read_u64(ops->ctx, r->rbp + 8, &ra))
		return PP_UNWIND_UNREADABLE;
	r->rsp = r->rbp + 16;
	r->rbp = rbp;
	r->rip = ra;
	return STEPPED;
}

static int read_reg(const struct pp_unwind_ops *ops, uint8_t rule, int16_t off, uint64_t cfa,
		    uint64_t rsp, uint64_t *val)
{
	switch (rule) {
	case PP_REG_SAME:
		return STEPPED;
	case PP_REG_AT_CFA:
		return ops->read_u64(ops->ctx, cfa + (uint64_t)(int64_t)off, val)
			   ? PP_UNWIND_UNREADABLE
			   : STEPPED;
	case PP_REG_AT_RSP:
		return ops->read_u64(ops->ctx, rsp + (uint64_t)(int64_t)off, val)
			   ? PP_UNWIND_UNREADABLE
			   : STEPPED;
	default:
		return PP_UNWIND_UNSUPPORTED;
	}
}

static int table_step(const struct pp_unwind_ops *ops, const struct pp_unwind_row *row,
		      struct pp_unwind_regs *r, bool *signal)
{
	uint64_t cfa, ra = 0, rbp = r->rbp;
	int s;

	switch (row->cfa_rule) {
	case PP_CFA_RSP:
		cfa = r->rsp + (uint64_t)(int64_t)row->cfa_off;
		break;
	case PP_CFA_RBP:
		cfa = r->rbp + (uint64_t)(int64_t)row->cfa_off;
		break;
	case PP_CFA_PLT:
		cfa = r->rsp + 8 + ((r->rip & 15) >= (uint64_t)row->cfa_off ? 8 : 0);
		break;
	case PP_CFA_DEREF_RSP:
		if (ops->read_u64(ops->ctx, r->rsp + (uint64_t)(int64_t)row->cfa_off, &cfa))
			return PP_UNWIND_UNREADABLE;
		break;
	case PP_CFA_NONE:
		return PP_UNWIND_NO_CFI;
	default:
		return PP_UNWIND_UNSUPPORTED;
	}
	if (row->ra_rule == PP_REG_UNDEFINED)
		return PP_UNWIND_END;
	if (row->ra_rule == PP_REG_SAME)
		return PP_UNWIND_UNSUPPORTED;
	s = read_reg(ops, row->ra_rule, row->ra_off, cfa, r->rsp, &ra);
	if (s != STEPPED)
		return s;
	if (row->rbp_rule == PP_REG_UNDEFINED)
		rbp = 0;
	else if ((s = read_reg(ops, row->rbp_rule, row->rbp_off, cfa, r->rsp, &rbp)) != STEPPED)
		return s;
	if (cfa <= r->rsp)
		return PP_UNWIND_CFA_NOT_UP;
	if (cfa - r->rsp > PP_UNWIND_MAX_FRAME_BYTES || ra >= USER_END)
		return PP_UNWIND_IMPLAUSIBLE;
	*signal = row->flags & PP_UNWIND_SIGNAL_FRAME;
	r->rip = ra;
	r->rsp = cfa;
	r->rbp = rbp;
	return STEPPED;
}

size_t pp_unwind_walk(const struct pp_unwind_regs *regs, const struct pp_unwind_ops *ops,
		      uint64_t *pcs, size_t max, enum pp_unwind_stop *why,
		      struct pp_unwind_walk_stats *stats)
{
	struct pp_unwind_regs r = *regs;
	struct pp_unwind_walk_stats st = {0};
	int s = PP_UNWIND_DEPTH;
	bool exact = true; /* the first pc is where the sample was taken */
	size_t n = 0;

	while (n < max) {
		const struct pp_unwind_table *t;
		uint64_t bias = 0;
		bool signal = false;

		pcs[n++] = r.rip;
		if (n == max) {
			s = PP_UNWIND_DEPTH;
			break;
		}
		if (ops->find_row) {
			struct pp_unwind_row row;
			int found = ops->find_row(ops->ctx, lookup_pc(r.rip, exact), &row);

			t = NULL;
			if (found > 0) {
				s = table_step(ops, &row, &r, &signal);
				st.table_frames += s == STEPPED;
			} else if (found < 0) {
				s = PP_UNWIND_NO_CFI;
			} else {
				s = fp_step(ops, &r);
				st.fp_frames += s == STEPPED;
			}
		} else if ((t = ops->find(ops->ctx, lookup_pc(r.rip, exact), &bias))) {
			struct pp_unwind_row row;

			s = pp_unwind_table_lookup(t, lookup_pc(r.rip, exact) - bias, &row)
				? table_step(ops, &row, &r, &signal)
				: PP_UNWIND_NO_CFI;
			st.table_frames += s == STEPPED;
		} else {
			s = fp_step(ops, &r);
			st.fp_frames += s == STEPPED;
		}
		if (s != STEPPED)
			break;
		if (r.rip == 0) { /* a zeroed return address also marks the outermost frame */
			s = PP_UNWIND_END;
			break;
		}
		exact = signal;
	}
	if (why)
		*why = (enum pp_unwind_stop)s;
	if (stats)
		*stats = st;
	return n;
}

const char *pp_unwind_stop_name(enum pp_unwind_stop s)
{
	static const char *const names[] = {"end",	  "fp_end",	"no_cfi", "unsupported",
					    "unreadable", "cfa_not_up", "depth",  "implausible"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}
