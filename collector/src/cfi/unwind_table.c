/*
 * The CFI compiler (see unwind_table.h). libdw's dwarf_next_cfi reads the CIEs and FDEs of
 * .eh_frame; their instructions are checked, then run here once per FDE (from
 * .eh_frame_hdr's sorted table), a row at each advance of the location. DWARF expressions
 * are matched against the few forms compilers emit.
 *
 * Evaluating with libdw's dwarf_cfi_addrframe was measured first: it runs the instructions
 * from the FDE's start for every pc asked, 3.5 times slower here (libc 6.6 ms against 2.0,
 * 200 binaries 226 against 64) and quadratic in an FDE's length, and it sized a frame by the
 * largest register number an instruction names, so one hostile number cost it gigabytes.
 */
#include "unwind_table.h"
#include "unwind_table_priv.h"

#include "base/elf_read.h"
#include "base/blake2b.h"
#include "base/vec.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* x86-64 DWARF register numbers. */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

/* Rows one FDE may give (a corrupt FDE cannot fill the table). */
#define MAX_ROWS_PER_FDE 65536
/* x86-64's DWARF registers end at 125 (k7): a larger number is corrupt CFI. */
#define MAX_CFI_REG 127
#define MAX_REMEMBER_STATE 64
/* One FDE's and its CIE's instructions, in bytes (compilers' longest are a few hundred). */
#define MAX_CFI_INSNS 16384
/* One CFI section, in bytes: libclang-cpp's .eh_frame is 5 MiB, the largest seen 30. */
#define MAX_CFI_SECTION_BYTES (64u << 20)

/*
 * CFI validation: an entry runs only once checked here, registers and nesting bounded and
 * every operand inside the entry, so the evaluator needs no check of its own.
 */
struct cfi_cie {
	uint64_t off;
	const uint8_t *insns, *insns_end; /* the initial instructions */
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool z;
	bool signal; /* "S": its FDEs are signal trampolines */
	bool ok;
};

struct cfi_fde {
	uint64_t off; /* section offset, as .eh_frame_hdr's table points at it */
	uint32_t cie; /* index in cfi_index.cies */
	const uint8_t *insns, *insns_end; /* its instructions */
	uint64_t range;			  /* bytes of code it covers */
	uint64_t pc; /* where it starts: read here from .debug_frame (absolute addresses) */
};

struct cfi_index {
	struct cfi_cie *cies;
	size_t ncie, cie_cap;
	struct cfi_fde *fdes; /* good FDEs, by offset */
	size_t nfde, fde_cap;
};

static bool uleb(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

static bool skip(const uint8_t **p, const uint8_t *end, uint64_t n)
{
	if ((uint64_t)(end - *p) < n)
		return false;
	*p += n;
	return true;
}

/* The size of a pointer in encoding enc (0: variable or invalid: not accepted). */
static size_t enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		return 8;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		return 2;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		return 4;
	default:
		return 0;
	}
}

static bool reg_ok(const uint8_t **p, const uint8_t *end)
{
	uint64_t reg;

	return uleb(p, end, &reg) && reg <= MAX_CFI_REG;
}

static bool block_ok(const uint8_t **p, const uint8_t *end)
{
	uint64_t len;

	return uleb(p, end, &len) && skip(p, end, len);
}

/* Whether an instruction stream is one libdw may execute; set_loc_size 0 refuses set_loc. */
static bool insns_ok(const uint8_t *p, const uint8_t *end, size_t set_loc_size)
{
	unsigned remembered = 0;
	uint64_t v;

	if (end - p > MAX_CFI_INSNS)
		return false;
	while (p < end) {
		uint8_t op = *p++;
		bool ok = true;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			continue;
		case DW_CFA_offset:
			ok = uleb(&p, end, &v);
			break;
		case DW_CFA_restore:
			continue;
		default:
			switch (op) {
			case DW_CFA_nop:
			case DW_CFA_restore_state:
			case DW_CFA_GNU_window_save: /* also AArch64's negate_ra_state */
				break;
			case DW_CFA_remember_state:
				ok = ++remembered <= MAX_REMEMBER_STATE;
				break;
			case DW_CFA_set_loc:
				ok = set_loc_size && skip(&p, end, set_loc_size);
				break;
			case DW_CFA_advance_loc1:
				ok = skip(&p, end, 1);
				break;
			case DW_CFA_advance_loc2:
				ok = skip(&p, end, 2);
				break;
			case DW_CFA_advance_loc4:
				ok = skip(&p, end, 4);
				break;
			case DW_CFA_MIPS_advance_loc8:
				ok = skip(&p, end, 8);
				break;
			case DW_CFA_offset_extended:
			case DW_CFA_offset_extended_sf:
			case DW_CFA_val_offset:
			case DW_CFA_val_offset_sf:
			case DW_CFA_def_cfa:
			case DW_CFA_def_cfa_sf:
			case DW_CFA_GNU_negative_offset_extended:
				ok = reg_ok(&p, end) && uleb(&p, end, &v);
				break;
			case DW_CFA_register:
				ok = reg_ok(&p, end) && reg_ok(&p, end);
				break;
			case DW_CFA_restore_extended:
			case DW_CFA_undefined:
			case DW_CFA_same_value:
			case DW_CFA_def_cfa_register:
				ok = reg_ok(&p, end);
				break;
			case DW_CFA_def_cfa_offset:
			case DW_CFA_def_cfa_offset_sf:
			case DW_CFA_GNU_args_size:
				ok = uleb(&p, end, &v);
				break;
			case DW_CFA_def_cfa_expression:
				ok = block_ok(&p, end);
				break;
			case DW_CFA_expression:
			case DW_CFA_val_expression:
				ok = reg_ok(&p, end) && block_ok(&p, end);
				break;
			default:
				ok = false;
			}
		}
		if (!ok)
			return false;
	}
	return true;
}

/*
 * The FDE pointer encoding from a CIE's augmentation string a and its "z" data [p, p + size),
 * or false if not understood.
 */
static bool aug_fde_encoding(const char *a, const uint8_t *p, size_t size, uint8_t *enc)
{
	const uint8_t *end;

	*enc = DW_EH_PE_absptr;
	if (!a || a[0] != 'z')
		return a && a[0] == '\0'; /* "": no augmentation, absolute pointers */
	if (!p && size)
		return false;
	end = p + size;
	for (a++; *a; a++) {
		switch (*a) {
		case 'L':
			if (!skip(&p, end, 1))
				return false;
			break;
		case 'R':
			if (p >= end)
				return false;
			*enc = *p++;
			break;
		case 'P': {
			uint8_t penc;

			if (p >= end)
				return false;
			penc = *p++;
			if (!enc_size(penc) || !skip(&p, end, enc_size(penc)))
				return false;
			break;
		}
		case 'S':
		case 'B':
			break;
		default:
			return false;
		}
	}
	return enc_size(*enc) != 0;
}

static bool cie_fde_encoding(const Dwarf_CIE *cie, uint8_t *enc)
{
	return aug_fde_encoding(cie->augmentation, cie->augmentation_data,
				cie->augmentation_data_size, enc);
}

static int cie_push(struct cfi_index *ix, const struct cfi_cie *c)
{
	int err = pp_vec_reserve((void **)&ix->cies, &ix->cie_cap, ix->ncie, sizeof(*c), 16, 0);

	if (!err)
		ix->cies[ix->ncie++] = *c;
	return err;
}

static int fde_push(struct cfi_index *ix, const struct cfi_fde *f)
{
	int err = pp_vec_reserve((void **)&ix->fdes, &ix->fde_cap, ix->nfde, sizeof(*f), 1024, 0);

	if (!err)
		ix->fdes[ix->nfde++] = *f;
	return err;
}

/* An unsigned little-endian value of size bytes (the FDE's address range). */
static uint64_t rd_le(const uint8_t *p, size_t size)
{
	uint64_t v = 0;

	for (size_t i = size; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

static const struct cfi_cie *cie_find(const struct cfi_index *ix, uint64_t off)
{
	size_t lo = 0, hi = ix->ncie;

	while (lo < hi) { /* CIEs were appended in section order */
		size_t mid = lo + (hi - lo) / 2;

		if (ix->cies[mid].off == off)
			return &ix->cies[mid];
		if (ix->cies[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * The FDE at section offset off. *next is where the last one found ended: linkers lay out
 * .eh_frame in the order of the code, so the search table's next entry is nearly always there,
 * and a binary search per entry (its steps cache misses in a 100,000-FDE index) is the rare
 * case.
 */
static const struct cfi_fde *fde_find(const struct cfi_index *ix, uint64_t off, size_t *next)
{
	size_t lo = 0, hi = ix->nfde;

	if (*next < ix->nfde && ix->fdes[*next].off == off)
		return &ix->fdes[(*next)++];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix->fdes[mid].off == off) {
			*next = mid + 1;
			return &ix->fdes[mid];
		}
		if (ix->fdes[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void cfi_index_fini(struct cfi_index *ix)
{
	free(ix->cies);
	free(ix->fdes);
}

/* Two passes over the section: CIEs (an FDE may point forward), then FDEs. */
static int cfi_index_build(struct cfi_index *ix, const unsigned char *ident, Elf_Data *data,
			   bool eh_frame)
{
	for (int pass = 0; pass < 2; pass++) {
		Dwarf_Off off = 0, next;

		while (off < data->d_size) {
			Dwarf_CFI_Entry e;
			int rc = dwarf_next_cfi(ident, data, eh_frame, off, &next, &e);
			int err = 0;

			if (rc > 0 || next == (Dwarf_Off)-1 || next <= off)
				break;
			if (rc == 0 && pass == 0 && e.CIE_id == LIBDW_CIE_ID) {
				struct cfi_cie c = {.off = off};

				c.ok = e.cie.return_address_register <= MAX_CFI_REG &&
				       cie_fde_encoding(&e.cie, &c.fde_enc) &&
				       insns_ok(e.cie.initial_instructions,
						e.cie.initial_instructions_end, 0);
				c.z = e.cie.augmentation[0] == 'z';
				c.signal = strchr(e.cie.augmentation, 'S') != NULL;
				c.insns = e.cie.initial_instructions;
				c.insns_end = e.cie.initial_instructions_end;
				c.code_align = e.cie.code_alignment_factor;
				c.data_align = e.cie.data_alignment_factor;
				c.ra_reg = e.cie.return_address_register;
				err = cie_push(ix, &c);
			} else if (rc == 0 && pass == 1 && e.CIE_id != LIBDW_CIE_ID) {
				const struct cfi_cie *c = cie_find(ix, e.fde.CIE_pointer);
				const uint8_t *p = e.fde.start, *end = e.fde.end;
				uint64_t aug = 0;
				size_t es = c ? enc_size(c->fde_enc) : 0;

				if (c && c->ok && (size_t)(end - p) >= 2 * es) {
					struct cfi_fde f = {.off = off,
							    .cie = (uint32_t)(c - ix->cies),
							    .range = rd_le(p + es, es),
							    .pc = rd_le(p, es)};

					p += 2 * es;
					if ((!c->z ||
					     (uleb(&p, end, &aug) && skip(&p, end, aug))) &&
					    insns_ok(p, end, es)) {
						f.insns = p;
						f.insns_end = end;
						err = fde_push(ix, &f);
					}
				}
			}
			if (err)
				return err;
			off = next;
		}
	}
	return 0;
}

static struct row_rule rule_of_row(const struct pp_unwind_row *r)
{
	return (struct row_rule){.cfa_off = r->cfa_off,
				 .rbp_off = r->rbp_off,
				 .ra_off = r->ra_off,
				 .cfa_rule = r->cfa_rule,
				 .rbp_rule = r->rbp_rule,
				 .ra_rule = r->ra_rule,
				 .flags = r->flags};
}

/*
 * A rule is compared and hashed as its 12 bytes, two loads (it has no padding): a large
 * file's compile asks the rule list once for most of its million rows.
 */
_Static_assert(sizeof(struct row_rule) == 12, "struct row_rule has no padding");

static void rule_words(const struct row_rule *r, uint64_t *lo, uint32_t *hi)
{
	memcpy(lo, r, sizeof(*lo));
	memcpy(hi, (const uint8_t *)r + sizeof(*lo), sizeof(*hi));
}

static bool same_rule(const struct row_rule *a, const struct row_rule *b)
{
	uint64_t alo, blo;
	uint32_t ahi, bhi;

	rule_words(a, &alo, &ahi);
	rule_words(b, &blo, &bhi);
	return alo == blo && ahi == bhi;
}

static size_t rule_hash(const struct row_rule *r)
{
	uint64_t lo, h;
	uint32_t hi;

	rule_words(r, &lo, &hi);
	h = lo * 0x9e3779b97f4a7c15ull ^ (uint64_t)hi * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ h >> 29);
}

/* Grow the rule slots to twice the rules they may hold, rehashing. */
static int rule_slots_grow(struct pp_unwind_table *t)
{
	size_t n = t->nslots ? t->nslots * 2 : 256;
	uint16_t *slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->nrules; i++) {
		size_t j = rule_hash(&t->rules[i]) & (n - 1);

		while (slots[j])
			j = (j + 1) & (n - 1);
		slots[j] = (uint16_t)(i + 1);
	}
	free(t->rule_slots);
	t->rule_slots = slots;
	t->nslots = n;
	return 0;
}

/* The index of rule r in the table's list, added if new. */
static int intern_rule(struct pp_unwind_table *t, struct row_rule r, uint16_t *out)
{
	size_t j;
	int err;

	if ((t->nrules + 1) * 2 > t->nslots && t->nslots <= MAX_TABLE_RULES) {
		err = rule_slots_grow(t);
		if (err)
			return err;
	}
	for (j = rule_hash(&r) & (t->nslots - 1); t->rule_slots[j]; j = (j + 1) & (t->nslots - 1)) {
		if (same_rule(&t->rules[t->rule_slots[j] - 1], &r)) {
			*out = (uint16_t)(t->rule_slots[j] - 1);
			return 0;
		}
	}
	if (t->nrules >= MAX_TABLE_RULES)
		return -E2BIG;
	err = pp_vec_reserve((void **)&t->rules, &t->rules_cap, t->nrules, sizeof(r), 64, 0);
	if (err)
		return err;
	t->rules[t->nrules] = r;
	t->rule_slots[j] = (uint16_t)(t->nrules + 1);
	*out = (uint16_t)t->nrules++;
	return 0;
}

static uint64_t row_pc(const struct pp_unwind_table *t, size_t i)
{
	return t->base_pc + t->pc_offs[i];
}

/* Append a row (pc at or after the last one's) as it is. */
static int append(struct pp_unwind_table *t, uint64_t pc, uint16_t rule)
{
	if (!t->n)
		t->base_pc = pc;
	if (pc < t->base_pc || (t->n && pc < row_pc(t, t->n - 1)))
		return -EINVAL; /* the rows are sorted */
	if (pc - t->base_pc > UINT32_MAX)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t cap = t->cap;
		int err = pp_vec_reserve((void **)&t->pc_offs, &cap, t->n, sizeof(*t->pc_offs),
					 1024, t->max_rows);
		uint16_t *ix;

		if (err)
			return err;
		ix = realloc(t->rule_ix, cap * sizeof(*ix));
		if (!ix)
			return -ENOMEM; /* pc_offs grew: the next append finds room there */
		t->rule_ix = ix;
		t->cap = cap;
	}
	t->pc_offs[t->n] = (uint32_t)(pc - t->base_pc);
	t->rule_ix[t->n++] = rule;
	return 0;
}

static struct pp_unwind_row row_of_rule(const struct row_rule *r, uint64_t pc)
{
	return (struct pp_unwind_row){.pc = pc,
				      .cfa_off = r->cfa_off,
				      .rbp_off = r->rbp_off,
				      .ra_off = r->ra_off,
				      .cfa_rule = r->cfa_rule,
				      .rbp_rule = r->rbp_rule,
				      .ra_rule = r->ra_rule,
				      .flags = r->flags};
}

static void row_at(const struct pp_unwind_table *t, size_t i, struct pp_unwind_row *out)
{
	*out = row_of_rule(&t->rules[t->rule_ix[i]], row_pc(t, i));
}

/* Append a row of rule rr at pc, merged into the previous one when the rules are the same. */
static int push_rule(struct pp_unwind_table *t, uint64_t pc, const struct row_rule *rr)
{
	uint16_t rule;
	int err;

	/* most rows repeat the one before: merged without a lookup */
	if (t->n && row_pc(t, t->n - 1) <= pc && same_rule(&t->rules[t->rule_ix[t->n - 1]], rr))
		return 0;
	err = intern_rule(t, *rr, &rule);
	if (err)
		return err;
	if (t->n && row_pc(t, t->n - 1) == pc) {
		/* an empty range before it: the later rules win */
		t->rule_ix[t->n - 1] = rule;
		return 0;
	}
	return append(t, pc, rule);
}

static int push(struct pp_unwind_table *t, const struct pp_unwind_row *r)
{
	struct row_rule rr = rule_of_row(r);

	return push_rule(t, r->pc, &rr);
}

/* Counts n rows of rule r in the table's stats. */
static void count(struct pp_unwind_table *t, const struct row_rule *r, uint64_t n)
{
	switch (r->cfa_rule) {
	case PP_CFA_RSP:
		t->stats.cfa_rsp += n;
		break;
	case PP_CFA_RBP:
		t->stats.cfa_rbp += n;
		break;
	case PP_CFA_PLT:
		t->stats.cfa_plt += n;
		break;
	case PP_CFA_DEREF_RSP:
		t->stats.cfa_signal += n;
		break;
	case PP_CFA_UNSUPPORTED:
		t->stats.cfa_unsupported += n;
		break;
	default:
		break;
	}
	if (r->rbp_rule == PP_REG_UNSUPPORTED || r->ra_rule == PP_REG_UNSUPPORTED)
		t->stats.reg_unsupported += n;
}

/*
 * The CFI evaluator: one pass over a CIE's and an FDE's instructions (checked by insns_ok
 * before), a row each time the location advances. libdw's dwarf_cfi_addrframe evaluates from
 * the FDE's start for every pc asked, so a table took time in the square of its FDEs' length.
 */
struct rule {
	uint8_t kind; /* enum pp_reg_rule */
	int64_t off;
};

struct cfi_state {
	uint8_t cfa_kind; /* PP_CFA_RSP stands for "a register": cfa_reg says which */
	uint64_t cfa_reg;
	int64_t cfa_off;
	struct rule rbp, ra;
};

/* One per table: its FDEs are compiled one after another in it. */
struct cfi_run {
	struct pp_unwind_table *t;
	const struct cfi_cie *cie;
	struct cfi_state st, initial; /* initial: after the CIE, for DW_CFA_restore */
	struct cfi_state saved[MAX_REMEMBER_STATE];
	unsigned nsaved;
	uint64_t loc, end; /* the current row's start; the FDE's end */
	int rows;
	/* the CIE `initial` was run for and how that ended: a file's FDEs share a few CIEs */
	const struct cfi_cie *initial_of;
	int initial_err;
	/* the state this FDE's last row was made from: a row of the same state is merged */
	struct cfi_state last;
	bool have_last;
};

static bool sleb(const uint8_t **p, const uint8_t *end, int64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*p >= end || shift >= 64)
			return false;
		b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	*out = (int64_t)v;
	return true;
}

/* DW_OP_breg7 N as the whole expression: rsp + N. */
static bool expr_rsp_plus(const uint8_t *p, const uint8_t *end, int64_t *off)
{
	return p < end && *p++ == DW_OP_breg7 && sleb(&p, end, off) && p == end;
}

/* The CFA from an expression: PLT entries' and signal trampolines' forms, else unsupported. */
static void cfa_expression(struct cfi_state *st, const uint8_t *p, const uint8_t *end)
{
	static const uint8_t plt_tail[] = {DW_OP_lit15, DW_OP_and};
	int64_t off = 0, zero = 1;

	st->cfa_kind = PP_CFA_UNSUPPORTED;
	if (p >= end || *p++ != DW_OP_breg7 || !sleb(&p, end, &off))
		return;
	/* breg7 N; deref: a signal frame's saved rsp */
	if (end - p == 1 && *p == DW_OP_deref && off >= INT32_MIN && off <= INT32_MAX) {
		st->cfa_kind = PP_CFA_DEREF_RSP;
		st->cfa_off = off;
		return;
	}
	/* breg7 8; breg16 0; lit15; and; litK; ge; lit3; shl; plus */
	if (off != 8 || p >= end || *p++ != DW_OP_breg16 || !sleb(&p, end, &zero) || zero != 0 ||
	    end - p != 7 || memcmp(p, plt_tail, 2) != 0 || p[2] < DW_OP_lit0 ||
	    p[2] > DW_OP_lit15 || p[3] != DW_OP_ge || p[4] != DW_OP_lit3 || p[5] != DW_OP_shl ||
	    p[6] != DW_OP_plus)
		return;
	st->cfa_kind = PP_CFA_PLT;
	st->cfa_off = p[2] - DW_OP_lit0;
}

static struct rule *rule_of(struct cfi_run *r, struct cfi_state *st, uint64_t reg)
{
	if (reg == REG_RBP)
		return &st->rbp;
	if (reg == r->cie->ra_reg)
		return &st->ra;
	return NULL; /* a register the walk does not restore */
}

static bool fits16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

static void to_row(const struct rule *src, uint8_t *kind, int16_t *off)
{
	*kind = src->kind;
	*off = 0;
	if (src->kind == PP_REG_AT_CFA || src->kind == PP_REG_AT_RSP) {
		if (fits16(src->off))
			*off = (int16_t)src->off;
		else
			*kind = PP_REG_UNSUPPORTED;
	}
}

static bool same_reg_rule(const struct rule *a, const struct rule *b)
{
	return a->kind == b->kind && a->off == b->off;
}

static bool same_state(const struct cfi_state *a, const struct cfi_state *b)
{
	return a->cfa_kind == b->cfa_kind && a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off &&
	       same_reg_rule(&a->rbp, &b->rbp) && same_reg_rule(&a->ra, &b->ra);
}

/* Emit the row for [r->loc, to) and move on to `to`. */
static int advance(struct cfi_run *r, uint64_t to)
{
	const struct cfi_state *st = &r->st;
	struct row_rule rule = {0};
	int err;

	if (to <= r->loc)
		return 0;
	if (++r->rows > MAX_ROWS_PER_FDE)
		return -E2BIG;
	/* the rules of the row before, which push would merge this row into */
	if (r->have_last && same_state(&r->last, st)) {
		r->loc = to;
		return 0;
	}
	r->last = *st;
	r->have_last = true;
	rule.cfa_rule = st->cfa_kind;
	if (st->cfa_kind == PP_CFA_RSP)
		rule.cfa_rule = st->cfa_reg == REG_RSP	 ? PP_CFA_RSP
				: st->cfa_reg == REG_RBP ? PP_CFA_RBP
							 : PP_CFA_UNSUPPORTED;
	if (st->cfa_off < INT32_MIN || st->cfa_off > INT32_MAX)
		rule.cfa_rule = PP_CFA_UNSUPPORTED;
	else
		rule.cfa_off = (int32_t)st->cfa_off;
	to_row(&st->rbp, &rule.rbp_rule, &rule.rbp_off);
	to_row(&st->ra, &rule.ra_rule, &rule.ra_off);
	rule.flags = r->cie->signal ? PP_UNWIND_SIGNAL_FRAME : 0;
	err = push_rule(r->t, r->loc, &rule);
	r->loc = to;
	return err;
}

/*
 * Run an instruction stream (checked by insns_ok). Returns 0 at its end, 1 when it asks for
 * what rows cannot say (DW_CFA_set_loc: the FDE's rows end there), or -errno.
 */
static int execute(struct cfi_run *r, const uint8_t *p, const uint8_t *end, bool rows)
{
	const struct cfi_cie *c = r->cie;
	struct cfi_state *st = &r->st;

	while (p < end) {
		uint8_t op = *p++, hi = op & 0xc0, lo = op & 0x3f;
		uint64_t reg = 0, u = 0, delta = 0;
		int64_t sv = 0;
		struct rule *rr;
		int err;

		if (hi == DW_CFA_advance_loc) {
			delta = lo;
		} else if (hi == DW_CFA_offset) {
			(void)uleb(&p, end, &u);
			if ((rr = rule_of(r, st, lo)))
				*rr = (struct rule){PP_REG_AT_CFA, (int64_t)u * c->data_align};
			continue;
		} else if (hi == DW_CFA_restore) {
			if ((rr = rule_of(r, st, lo)))
				*rr = *rule_of(r, &r->initial, lo);
			continue;
		} else {
			switch (op) {
			case DW_CFA_nop:
			case DW_CFA_GNU_args_size:
				if (op == DW_CFA_GNU_args_size)
					(void)uleb(&p, end, &u);
				continue;
			case DW_CFA_GNU_window_save:
				continue;
			case DW_CFA_set_loc:
				return 1;
			case DW_CFA_advance_loc1:
				delta = p[0];
				p += 1;
				break;
			case DW_CFA_advance_loc2:
				delta = (uint64_t)p[0] | (uint64_t)p[1] << 8;
				p += 2;
				break;
			case DW_CFA_advance_loc4:
				delta = rd_le(p, 4);
				p += 4;
				break;
			case DW_CFA_MIPS_advance_loc8:
				delta = rd_le(p, 8);
				p += 8;
				break;
			case DW_CFA_offset_extended:
			case DW_CFA_GNU_negative_offset_extended:
				(void)uleb(&p, end, &reg);
				(void)uleb(&p, end, &u);
				sv = (int64_t)u * c->data_align;
				if ((rr = rule_of(r, st, reg)))
					*rr = (struct rule){
					    PP_REG_AT_CFA, op == DW_CFA_offset_extended ? sv : -sv};
				continue;
			case DW_CFA_offset_extended_sf:
				(void)uleb(&p, end, &reg);
				(void)sleb(&p, end, &sv);
				if ((rr = rule_of(r, st, reg)))
					*rr = (struct rule){PP_REG_AT_CFA, sv * c->data_align};
				continue;
			case DW_CFA_val_offset:
			case DW_CFA_val_offset_sf:
			case DW_CFA_register:
				(void)uleb(&p, end, &reg);
				if (op == DW_CFA_val_offset_sf)
					(void)sleb(&p, end, &sv);
				else
					(void)uleb(&p, end, &u);
				if ((rr = rule_of(r, st, reg)))
					*rr = (struct rule){op == DW_CFA_register && u == reg
								? PP_REG_SAME
								: PP_REG_UNSUPPORTED,
							    0};
				continue;
			case DW_CFA_restore_extended:
				(void)uleb(&p, end, &reg);
				if ((rr = rule_of(r, st, reg)))
					*rr = *rule_of(r, &r->initial, reg);
				continue;
			case DW_CFA_undefined:
			case DW_CFA_same_value:
				(void)uleb(&p, end, &reg);
				if ((rr = rule_of(r, st, reg)))
					*rr = (struct rule){
					    op == DW_CFA_undefined ? PP_REG_UNDEFINED : PP_REG_SAME,
					    0};
				continue;
			case DW_CFA_remember_state:
				if (r->nsaved < MAX_REMEMBER_STATE)
					r->saved[r->nsaved++] = *st;
				continue;
			case DW_CFA_restore_state:
				/* the CFA rule too, as libgcc's, libunwind's and libdw's unwinders
				 * do: epilogues rely on it */
				if (r->nsaved)
					*st = r->saved[--r->nsaved];
				continue;
			case DW_CFA_def_cfa:
				(void)uleb(&p, end, &st->cfa_reg);
				(void)uleb(&p, end, &u);
				st->cfa_kind = PP_CFA_RSP;
				st->cfa_off = (int64_t)u;
				continue;
			case DW_CFA_def_cfa_sf:
				(void)uleb(&p, end, &st->cfa_reg);
				(void)sleb(&p, end, &sv);
				st->cfa_kind = PP_CFA_RSP;
				st->cfa_off = sv * c->data_align;
				continue;
			case DW_CFA_def_cfa_register:
				(void)uleb(&p, end, &st->cfa_reg);
				if (st->cfa_kind != PP_CFA_RSP) /* only after a register rule */
					st->cfa_kind = PP_CFA_UNSUPPORTED;
				continue;
			case DW_CFA_def_cfa_offset:
				(void)uleb(&p, end, &u);
				st->cfa_off = (int64_t)u;
				if (st->cfa_kind != PP_CFA_RSP)
					st->cfa_kind = PP_CFA_UNSUPPORTED;
				continue;
			case DW_CFA_def_cfa_offset_sf:
				(void)sleb(&p, end, &sv);
				st->cfa_off = sv * c->data_align;
				if (st->cfa_kind != PP_CFA_RSP)
					st->cfa_kind = PP_CFA_UNSUPPORTED;
				continue;
			case DW_CFA_def_cfa_expression:
				(void)uleb(&p, end, &u);
				cfa_expression(st, p, p + u);
				p += u;
				continue;
			case DW_CFA_expression:
			case DW_CFA_val_expression:
				(void)uleb(&p, end, &reg);
				(void)uleb(&p, end, &u);
				if ((rr = rule_of(r, st, reg))) {
					/* the CFA is pushed first: breg7 N alone says rsp + N */
					rr->kind =
					    op == DW_CFA_expression && expr_rsp_plus(p, p + u, &sv)
						? PP_REG_AT_RSP
						: PP_REG_UNSUPPORTED;
					rr->off = sv;
				}
				p += u;
				continue;
			default:
				return 1; /* insns_ok let nothing else through */
			}
		}
		/* an advance: the row so far ends where the new one starts */
		if (!rows)
			continue;
		err = advance(r, r->loc + delta * c->code_align < r->end
				     ? r->loc + delta * c->code_align
				     : r->end);
		if (err)
			return err;
	}
	return 0;
}

/* The rows of one FDE, from start up to limit (the next FDE's start), in r. */
static int compile_fde(struct cfi_run *r, const struct cfi_index *ix, const struct cfi_fde *f,
		       uint64_t start, uint64_t limit)
{
	struct pp_unwind_table *t = r->t;
	int err;

	r->cie = &ix->cies[f->cie];
	if (r->initial_of != r->cie) {
		/* the x86-64 ABI's rules before any instruction (libdw's abi_cfi): CFA rsp + 8,
		 * the return address at CFA - 8, rbp callee-saved */
		r->st = (struct cfi_state){.cfa_kind = PP_CFA_RSP,
					   .cfa_reg = REG_RSP,
					   .cfa_off = 8,
					   .rbp = {PP_REG_SAME, 0},
					   .ra = {PP_REG_AT_CFA, -8}};
		r->nsaved = 0;
		r->initial_err = execute(r, r->cie->insns, r->cie->insns_end, false);
		r->initial = r->st;
		r->initial_of = r->cie;
	}
	err = r->initial_err;
	r->st = r->initial;
	r->nsaved = 0;
	r->rows = 0;
	r->have_last = false;
	r->loc = start;
	r->end = f->range && start + f->range > start ? start + f->range : start;
	if (r->end > limit)
		r->end = limit;
	if (err >= 0) {
		err = execute(r, f->insns, f->insns_end, true);
		if (err == 1)
			err = 0; /* set_loc: the rows so far stand */
	}
	if (!err)
		err = advance(r, r->end); /* the last row, to the FDE's end */
	/* a gap up to the next FDE: no CFI there */
	if (!err && r->end < limit)
		err = push(t, &(struct pp_unwind_row){.pc = r->end, .cfa_rule = PP_CFA_NONE});
	return err < 0 ? err : 0;
}

struct section {
	uint64_t vaddr;
	Elf_Data *data; /* &own, once read */
	Elf_Data own;
	void *buf; /* owns own.d_buf */
};

static void section_fini(struct section *sec)
{
	free(sec->buf);
	sec->buf = NULL;
}

/*
 * The section named want (or its GNU compressed twin, ".zdebug..." for ".debug..."), read only
 * when its bytes are inside the file, backed (no hole of a sparse file) and at most
 * MAX_CFI_SECTION_BYTES, decompressed within the same bound when compressed (Go compresses
 * its .debug_frame; objcopy --compress-debug-sections, zlib or zstd): -ENODATA when there is
 * none, another error when one is there but refused (counted as a file without a table).
 */
static int find_section(Elf *elf, const struct pp_elf_src *src, const struct pp_elf_shape *shape,
			const char *want, struct section *out)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENODATA;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		size_t len;
		int zdebug, err;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		zdebug = strncmp(want, ".debug", 6) == 0 && strncmp(name, ".zdebug", 7) == 0 &&
			 strcmp(name + 7, want + 6) == 0;
		if (strcmp(name, want) != 0 && !zdebug)
			continue;
		err = pp_elf_section_read(src, shape, sh.sh_flags, zdebug, sh.sh_offset, sh.sh_size,
					  MAX_CFI_SECTION_BYTES, &out->buf, &len);
		if (err)
			return err == -ENODATA ? -EBADMSG : err;
		out->own = (Elf_Data){.d_buf = out->buf,
				      .d_type = ELF_T_BYTE,
				      .d_size = len,
				      .d_version = EV_CURRENT};
		out->data = &out->own;
		out->vaddr = sh.sh_addr;
		return 0;
	}
	return -ENODATA;
}

static int32_t rd32(const uint8_t *p, bool big)
{
	uint32_t v = big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
			 : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];

	return (int32_t)v;
}

/* The PT_LOAD segments, at most PP_UNWIND_MAX_LOADS, their number returned. */
static size_t read_loads(Elf *elf, struct pp_unwind_load *loads)
{
	size_t n, k = 0;

	if (elf_getphdrnum(elf, &n) != 0)
		return 0;
	for (size_t i = 0; i < n && k < PP_UNWIND_MAX_LOADS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		loads[k].vaddr = ph.p_vaddr;
		loads[k].offset = ph.p_offset;
		loads[k].filesz = ph.p_filesz;
		loads[k].exec = !!(ph.p_flags & PF_X);
		k++;
	}
	return k;
}

/*
 * An .eh_frame entry e of len bytes: its id, and its body after the id in [*p, *end). No
 * 64-bit lengths (compilers emit none in .eh_frame).
 */
static bool entry_body(const uint8_t *e, size_t len, uint32_t *id, const uint8_t **p,
		       const uint8_t **end)
{
	uint32_t n;

	if (len < 8)
		return false;
	n = (uint32_t)rd32(e, false);
	if (n == 0xffffffffu || n < 4 || (size_t)n > len - 4)
		return false;
	*id = (uint32_t)rd32(e + 4, false);
	*p = e + 8;
	*end = e + 4 + n;
	return true;
}

/* A CIE read from its bytes, checked as cfi_index_build checks libdw's: false if refused. */
static bool cie_parse(const uint8_t *e, size_t len, struct cfi_cie *c)
{
	const uint8_t *p, *end, *aug_data = NULL;
	uint64_t aug_len = 0;
	const char *aug;
	uint8_t version;
	size_t alen;
	uint32_t id;

	if (!entry_body(e, len, &id, &p, &end) || id != 0 || p >= end)
		return false;
	version = *p++;
	if (version != 1 && version != 3)
		return false;
	aug = (const char *)p;
	alen = strnlen(aug, (size_t)(end - p));
	if (alen == (size_t)(end - p) || strstr(aug, "eh"))
		return false; /* unterminated, or gcc 2's "eh" data */
	p += alen + 1;
	if (!uleb(&p, end, &c->code_align) || !sleb(&p, end, &c->data_align))
		return false;
	if (version == 1) {
		if (p >= end)
			return false;
		c->ra_reg = *p++;
	} else if (!uleb(&p, end, &c->ra_reg)) {
		return false;
	}
	if (aug[0] == 'z') {
		if (!uleb(&p, end, &aug_len) || (uint64_t)(end - p) < aug_len)
			return false;
		aug_data = p;
		p += aug_len;
	}
	c->z = aug[0] == 'z';
	c->signal = strchr(aug, 'S') != NULL;
	c->insns = p;
	c->insns_end = end;
	c->ok = c->ra_reg <= MAX_CFI_REG && aug_fde_encoding(aug, aug_data, aug_len, &c->fde_enc) &&
		insns_ok(p, end, 0);
	return c->ok;
}

int pp_cfi_compile_entry(const uint8_t *cie, size_t cie_len, const uint8_t *fde, size_t fde_len,
			 uint64_t start, uint64_t limit, struct pp_unwind_table *t)
{
	struct cfi_cie c = {0};
	struct cfi_fde f = {0};
	struct cfi_index ix = {.cies = &c, .ncie = 1, .fdes = &f, .nfde = 1};
	const uint8_t *p, *end;
	struct cfi_run *run;
	uint64_t aug;
	uint32_t id;
	size_t es;
	int err;

	if (limit <= start)
		return -EINVAL;
	if (!cie_parse(cie, cie_len, &c) || !entry_body(fde, fde_len, &id, &p, &end) || !id)
		return -EBADMSG;
	es = enc_size(c.fde_enc);
	if ((size_t)(end - p) < 2 * es)
		return -EBADMSG;
	f.range = rd_le(p + es, es);
	p += 2 * es;
	if ((c.z && !(uleb(&p, end, &aug) && skip(&p, end, aug))) || !insns_ok(p, end, es))
		return -EBADMSG;
	f.insns = p;
	f.insns_end = end;
	run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	run->t = t;
	err = compile_fde(run, &ix, &f, start, limit);
	free(run);
	return err;
}

/* The hdr's table entry i: an FDE's initial location and its offset in .eh_frame. */
static void hdr_entry(const struct section *hdr, const struct section *eh, size_t i, bool big,
		      uint64_t *loc, uint64_t *fde_off)
{
	const uint8_t *p = (const uint8_t *)hdr->data->d_buf + 12 + 8 * i;

	*loc = hdr->vaddr + (uint64_t)(int64_t)rd32(p, big);
	*fde_off = hdr->vaddr + (uint64_t)(int64_t)rd32(p + 4, big) - eh->vaddr;
}

/*
 * .eh_frame_hdr's header, the only form linkers write: version 1, eh_frame_ptr sdata4 or
 * udata4, fde_count udata4, the table datarel sdata4; its count in *nfde, the table inside
 * len. 0, -ENOTSUP for another form, -EINVAL.
 */
static int hdr_header(const uint8_t *h, size_t len, bool big, uint32_t *nfde)
{
	if (len < 12)
		return -EINVAL;
	if (h[0] != 1)
		return -ENOTSUP;
	if ((h[1] & 0x0f) != DW_EH_PE_sdata4 && (h[1] & 0x0f) != DW_EH_PE_udata4)
		return -ENOTSUP;
	if (h[2] != DW_EH_PE_udata4 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -ENOTSUP;
	*nfde = (uint32_t)rd32(h + 8, big);
	return (uint64_t)*nfde * 8 > len - 12 ? -EINVAL : 0;
}

/* One FDE to compile, from either section: where it starts and which index holds it. */
struct fde_ref {
	uint64_t pc;
	const struct cfi_index *ix;
	const struct cfi_fde *fde; /* NULL: listed by .eh_frame_hdr but refused */
};

struct fde_refs {
	struct fde_ref *v;
	size_t n, cap;
};

static int ref_push(struct fde_refs *r, uint64_t pc, const struct cfi_index *ix,
		    const struct cfi_fde *fde)
{
	int err = pp_vec_reserve((void **)&r->v, &r->cap, r->n, sizeof(*r->v), 1024, 0);

	if (!err)
		r->v[r->n++] = (struct fde_ref){pc, ix, fde};
	return err;
}

/* .eh_frame's FDEs in the order of .eh_frame_hdr's table, which must be strictly sorted. */
static int eh_frame_refs(const GElf_Ehdr *ehdr, const struct section *hdr, const struct section *eh,
			 struct cfi_index *ix, struct fde_refs *out)
{
	const uint8_t *h = hdr->data->d_buf;
	bool big = ehdr->e_ident[EI_DATA] == ELFDATA2MSB;
	size_t next = 0;
	uint32_t nfde;
	int err = hdr_header(h, hdr->data->d_size, big, &nfde);

	if (err)
		return err;
	err = cfi_index_build(ix, ehdr->e_ident, eh->data, true);
	for (uint32_t i = 0; i < nfde && !err; i++) {
		uint64_t start, off;

		hdr_entry(hdr, eh, i, big, &start, &off);
		if (out->n && start <= out->v[out->n - 1].pc) /* linkers sort it strictly */
			return -EINVAL;
		err = ref_push(out, start, ix, fde_find(ix, off, &next));
	}
	return err;
}

static int by_pc(const void *a, const void *b)
{
	const struct fde_ref *x = a, *y = b;

	return x->pc < y->pc ? -1 : x->pc > y->pc;
}

/* .debug_frame's FDEs (absolute addresses, no search table), sorted here. */
static int debug_frame_refs(const GElf_Ehdr *ehdr, const struct section *df, struct cfi_index *ix,
			    struct fde_refs *out)
{
	int err = cfi_index_build(ix, ehdr->e_ident, df->data, false);

	for (size_t i = 0; i < ix->nfde && !err; i++)
		err = ref_push(out, ix->fdes[i].pc, ix, &ix->fdes[i]);
	if (!err && out->n > 1) /* no FDEs leaves v NULL, which qsort must not get */
		qsort(out->v, out->n, sizeof(*out->v), by_pc);
	return err;
}

/*
 * Compile both lists in address order: .eh_frame's FDEs, and .debug_frame's where present
 * for code .eh_frame does not cover (built without asynchronous unwind tables, with -g).
 * Where both have an FDE at one address, .eh_frame's is taken.
 */
static int compile_all(struct pp_unwind_table *t, const struct fde_refs *eh,
		       const struct fde_refs *dbg)
{
	struct cfi_run *run = calloc(1, sizeof(*run));
	size_t i = 0, j = 0;
	int err = 0;

	if (!run)
		return -ENOMEM;
	run->t = t;
	t->stats.fdes = eh->n + dbg->n;
	while (!err && (i < eh->n || j < dbg->n)) {
		const struct fde_ref *r;
		uint64_t limit = UINT64_MAX;

		if (j < dbg->n && (i == eh->n || dbg->v[j].pc < eh->v[i].pc)) {
			r = &dbg->v[j++];
			t->stats.from_debug_frame++;
		} else {
			if (j < dbg->n && dbg->v[j].pc == eh->v[i].pc)
				j++;
			r = &eh->v[i++];
		}
		if (i < eh->n)
			limit = eh->v[i].pc;
		if (j < dbg->n && dbg->v[j].pc < limit)
			limit = dbg->v[j].pc;
		if (limit <= r->pc) { /* another FDE at the same address: corrupt */
			t->stats.fdes_unreadable++;
			continue;
		}
		if (!r->fde) { /* not an FDE that passed the checks: no rows, the unwinder stops */
			t->stats.fdes_unreadable++;
			err =
			    push(t, &(struct pp_unwind_row){.pc = r->pc, .cfa_rule = PP_CFA_NONE});
			continue;
		}
		err = compile_fde(run, r->ix, r->fde, r->pc, limit);
	}
	free(run);
	return err;
}

/* Tables live long: the doubling's slack and the rule slots go, the rows are counted. */
static void finish(struct pp_unwind_table *t)
{
	uint32_t *rows_of;

	if (t->n && t->n < t->cap) {
		uint32_t *offs = realloc(t->pc_offs, t->n * sizeof(*offs));
		uint16_t *ix;

		if (offs)
			t->pc_offs = offs;
		ix = offs ? realloc(t->rule_ix, t->n * sizeof(*ix)) : NULL;
		if (ix) {
			t->rule_ix = ix;
			t->cap = t->n;
		}
	}
	if (t->nrules && t->nrules < t->rules_cap) {
		struct row_rule *fit = realloc(t->rules, t->nrules * sizeof(*fit));

		if (fit) {
			t->rules = fit;
			t->rules_cap = t->nrules;
		}
	}
	free(t->rule_slots);
	t->rule_slots = NULL;
	t->nslots = 0;
	t->stats.rows = t->n;
	/* rows by rule, then each rule's kind counted once (a file has a few hundred rules) */
	rows_of = calloc(t->nrules ? t->nrules : 1, sizeof(*rows_of));
	if (rows_of) {
		for (size_t i = 0; i < t->n; i++)
			rows_of[t->rule_ix[i]]++;
		for (size_t k = 0; k < t->nrules; k++)
			count(t, &t->rules[k], rows_of[k]);
	} else {
		for (size_t i = 0; i < t->n; i++)
			count(t, &t->rules[t->rule_ix[i]], 1);
	}
	free(rows_of);
}

/* The three CFI sections of a file, each read or why not (-ENODATA: not there). */
struct cfi_sections {
	struct section hdr, eh, df;
	int err_hdr, err_eh, err_df;
};

static void cfi_sections_read(Elf *elf, const struct pp_elf_src *src,
			      const struct pp_elf_shape *shape, struct cfi_sections *s)
{
	s->err_hdr = find_section(elf, src, shape, ".eh_frame_hdr", &s->hdr);
	s->err_eh = find_section(elf, src, shape, ".eh_frame", &s->eh);
	s->err_df = find_section(elf, src, shape, ".debug_frame", &s->df);
}

static void cfi_sections_fini(struct cfi_sections *s)
{
	section_fini(&s->hdr);
	section_fini(&s->eh);
	section_fini(&s->df);
}

/* The ELF header, where elf is an ELF file: -ENOEXEC otherwise. */
static int elf_header(Elf *elf, GElf_Ehdr *ehdr)
{
	return elf && elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, ehdr) ? 0 : -ENOEXEC;
}

/* The table of an x86-64 file whose sections s holds (.eh_frame only beside its header). */
static int build_from(Elf *elf, const GElf_Ehdr *ehdr, const struct cfi_sections *s,
		      size_t max_rows, struct pp_unwind_table **out)
{
	struct cfi_index ix_eh = {0}, ix_dbg = {0};
	struct fde_refs eh_refs = {0}, dbg_refs = {0};
	struct pp_unwind_table *t;
	int err, err_eh = s->err_hdr ? s->err_hdr : s->err_eh, err_dbg = s->err_df;
	bool have_eh = !err_eh, have_dbg = !err_dbg;

	*out = NULL;
	if (ehdr->e_ident[EI_CLASS] != ELFCLASS64 || ehdr->e_machine != EM_X86_64)
		return -ENOTSUP;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->max_rows = max_rows ? max_rows : DEFAULT_MAX_ROWS;
	t->nloads = read_loads(elf, t->loads);
	/* a section that is there but refused (too big, sparse) refuses the file */
	if (err_eh && err_eh != -ENODATA)
		err = err_eh;
	else if (err_dbg && err_dbg != -ENODATA)
		err = err_dbg;
	else
		err = have_eh || have_dbg ? 0 : -ENODATA;
	if (!err && have_eh)
		err = eh_frame_refs(ehdr, &s->hdr, &s->eh, &ix_eh, &eh_refs);
	if (!err && have_dbg)
		err = debug_frame_refs(ehdr, &s->df, &ix_dbg, &dbg_refs);
	if (!err)
		err = compile_all(t, &eh_refs, &dbg_refs);
	cfi_index_fini(&ix_eh);
	cfi_index_fini(&ix_dbg);
	free(eh_refs.v);
	free(dbg_refs.v);
	if (err) {
		pp_unwind_table_free(t);
		return err;
	}
	finish(t);
	*out = t;
	return 0;
}

static int build(Elf *elf, const struct pp_elf_src *src, const struct pp_elf_shape *shape,
		 size_t max_rows, struct pp_unwind_table **out)
{
	struct cfi_sections s = {0};
	GElf_Ehdr ehdr;
	int err;

	*out = NULL;
	err = elf_header(elf, &ehdr);
	if (err)
		return err;
	cfi_sections_read(elf, src, shape, &s);
	err = build_from(elf, &ehdr, &s, max_rows, out);
	cfi_sections_fini(&s);
	return err;
}

/*
 * libelf on src, its headers checked first (pp_elf_preflight, into *shape): a file read with
 * pread (ELF_C_READ, not _MMAP: a file truncated under us must not turn into SIGBUS), an image
 * in memory from a copy libelf may write (*copy, the caller's to free after elf_end). 0 with
 * *elf (NULL where libelf failed), or -errno.
 */
static int elf_open(const struct pp_elf_src *src, struct pp_elf_shape *shape, Elf **elf,
		    void **copy)
{
	int err;

	*elf = NULL;
	*copy = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	err = pp_elf_preflight(src, shape);
	if (err)
		return err;
	if (src->fd >= 0) {
		*elf = elf_begin(src->fd, ELF_C_READ, NULL);
		return 0;
	}
	*copy = malloc(src->size ? src->size : 1);
	if (!*copy)
		return -ENOMEM;
	memcpy(*copy, src->mem, src->size);
	*elf = elf_memory(*copy, src->size);
	return 0;
}

/*
 * A file's CFI read once for both its digest and its compile: the unwinder digests a file it
 * has not seen to find its table, and compiles it from the same bytes when none is kept.
 */
struct pp_cfi_source {
	struct pp_elf_src src;
	struct pp_elf_shape shape;
	Elf *elf;
	GElf_Ehdr ehdr;
	struct cfi_sections s;
};

struct pp_cfi_source *pp_cfi_source_open_fd(int fd)
{
	struct pp_cfi_source *cs = calloc(1, sizeof(*cs));
	void *copy; /* none: a file */
	int err;

	if (!cs) {
		errno = ENOMEM;
		return NULL;
	}
	err = pp_elf_src_fd(&cs->src, fd);
	if (err)
		err = fd < 0 ? -EBADF : err == -EINVAL ? -ENOEXEC : err;
	if (!err)
		err = elf_open(&cs->src, &cs->shape, &cs->elf, &copy);
	if (!err)
		err = elf_header(cs->elf, &cs->ehdr);
	if (err) {
		pp_cfi_source_free(cs);
		errno = -err;
		return NULL;
	}
	cfi_sections_read(cs->elf, &cs->src, &cs->shape, &cs->s);
	return cs;
}

void pp_cfi_source_free(struct pp_cfi_source *cs)
{
	if (!cs)
		return;
	cfi_sections_fini(&cs->s);
	elf_end(cs->elf);
	free(cs);
}

struct pp_unwind_table *pp_cfi_source_compile(const struct pp_cfi_source *cs, size_t max_rows)
{
	struct pp_unwind_table *t = NULL;
	int err = build_from(cs->elf, &cs->ehdr, &cs->s, max_rows, &t);

	if (err) {
		errno = -err;
		return NULL;
	}
	return t;
}

struct pp_unwind_table *pp_unwind_table_open_fd(int fd, size_t max_rows)
{
	struct pp_cfi_source *cs = pp_cfi_source_open_fd(fd);
	struct pp_unwind_table *t;
	int err;

	if (!cs)
		return NULL;
	t = pp_cfi_source_compile(cs, max_rows);
	err = errno;
	pp_cfi_source_free(cs);
	errno = err;
	return t;
}

/* The header of the section named want (or .zdebug's twin of a .debug name): 0 or -ENODATA. */
static int section_header(Elf *elf, const char *want, GElf_Shdr *out)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENODATA;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, out) || out->sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, out->sh_name);
		if (name && (!strcmp(name, want) ||
			     (!strncmp(want, ".debug", 6) && !strncmp(name, ".zdebug", 7) &&
			      !strcmp(name + 7, want + 6))))
			return 0;
	}
	return -ENODATA;
}

/* .eh_frame_hdr's header and table checked as eh_frame_refs checks them: 0 or -errno. */
static int hdr_check(const uint8_t *h, size_t len, uint32_t *nfde)
{
	int64_t last = 0;
	int err = hdr_header(h, len, false, nfde);

	if (err)
		return err;
	for (uint32_t i = 0; i < *nfde; i++) { /* strictly sorted, or the search goes wrong */
		int64_t loc = rd32(h + 12 + 8 * (size_t)i, false);

		if (i && loc <= last)
			return -EINVAL;
		last = loc;
	}
	return 0;
}

int pp_cfi_hdr_read(const struct pp_elf_src *src, struct pp_cfi_hdr *out)
{
	struct pp_elf_shape shape;
	struct section hdr = {0};
	GElf_Shdr eh, df;
	GElf_Ehdr ehdr;
	Elf *elf;
	void *copy;
	int err;

	memset(out, 0, sizeof(*out));
	err = elf_open(src, &shape, &elf, &copy);
	if (err)
		return err;
	err = elf_header(elf, &ehdr);
	if (!err && (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_machine != EM_X86_64 ||
		     ehdr.e_ident[EI_DATA] != ELFDATA2LSB))
		err = -ENOTSUP;
	/* .debug_frame may hold code .eh_frame lacks: such a file is compiled whole */
	if (!err && section_header(elf, ".debug_frame", &df) == 0)
		err = -ENOTSUP;
	if (!err && section_header(elf, ".eh_frame", &eh) != 0)
		err = -ENODATA;
	if (!err && (eh.sh_flags & SHF_COMPRESSED))
		err = -ENOTSUP;
	if (!err)
		err = pp_elf_range_check(src, eh.sh_offset, eh.sh_size, MAX_CFI_SECTION_BYTES);
	if (!err)
		err = find_section(elf, src, &shape, ".eh_frame_hdr", &hdr);
	if (!err)
		err = hdr_check(hdr.buf, hdr.own.d_size, &out->nfde);
	if (!err) {
		out->table = hdr.buf;
		hdr.buf = NULL;
		out->len = hdr.own.d_size;
		out->hdr_vaddr = hdr.vaddr;
		out->eh_offset = eh.sh_offset;
		out->eh_size = eh.sh_size;
		out->eh_vaddr = eh.sh_addr;
		out->nloads = read_loads(elf, out->loads);
	}
	section_fini(&hdr);
	elf_end(elf);
	free(copy);
	return err;
}

#ifndef PP_CFI_COMPILER_ID
#define PP_CFI_COMPILER_ID "unversioned"
#endif

/* One input of the digest: its presence, then where it is and its bytes. */
static void digest_section(struct pp_blake2b *h, const struct section *sec, bool present)
{
	uint64_t head[2] = {present ? sec->vaddr : 0, present ? sec->data->d_size : 0};
	uint8_t tag = present;

	pp_blake2b_update(h, &tag, 1);
	pp_blake2b_update(h, head, sizeof(head));
	if (present)
		pp_blake2b_update(h, sec->data->d_buf, sec->data->d_size);
}

/*
 * What build() reads, in the order it reads it: the header's class and machine, the PT_LOAD
 * segments, the three CFI sections (decompressed, as compiled). The compiler's own identity
 * (its source's digest, from the build) goes first, so a compiler that changes names new
 * digests rather than reading tables it would not make.
 */
int pp_cfi_source_digest(const struct pp_cfi_source *cs, uint8_t out[PP_UNWIND_DIGEST_SIZE])
{
	const struct {
		const struct section *sec;
		int err;
	} secs[] = {
	    {&cs->s.hdr, cs->s.err_hdr}, {&cs->s.eh, cs->s.err_eh}, {&cs->s.df, cs->s.err_df}};
	struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
	size_t nloads;
	struct pp_blake2b h;

	for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++)
		if (secs[i].err && secs[i].err != -ENODATA)
			return secs[i].err;
	pp_blake2b_init(&h, PP_UNWIND_DIGEST_SIZE);
	pp_blake2b_update(&h, PP_CFI_COMPILER_ID, sizeof(PP_CFI_COMPILER_ID));
	pp_blake2b_update(&h, cs->ehdr.e_ident, EI_NIDENT);
	pp_blake2b_update(&h, &cs->ehdr.e_machine, sizeof(cs->ehdr.e_machine));
	nloads = read_loads(cs->elf, loads);
	for (size_t i = 0; i < nloads; i++) {
		uint64_t l[4] = {loads[i].vaddr, loads[i].offset, loads[i].filesz, loads[i].exec};

		pp_blake2b_update(&h, l, sizeof(l));
	}
	for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++)
		digest_section(&h, secs[i].sec, !secs[i].err);
	pp_blake2b_final(&h, out);
	return 0;
}

int pp_unwind_table_digest_fd(int fd, uint8_t out[PP_UNWIND_DIGEST_SIZE])
{
	struct pp_cfi_source *cs = pp_cfi_source_open_fd(fd);
	int err;

	if (!cs)
		return -errno;
	err = pp_cfi_source_digest(cs, out);
	pp_cfi_source_free(cs);
	return err;
}

const char *pp_unwind_compiler_id(void)
{
	return PP_CFI_COMPILER_ID;
}

void pp_unwind_digest_hex(const uint8_t digest[PP_UNWIND_DIGEST_SIZE],
			  char out[PP_UNWIND_DIGEST_HEX_SIZE])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < PP_UNWIND_DIGEST_SIZE; i++) {
		out[2 * i] = hex[digest[i] >> 4];
		out[2 * i + 1] = hex[digest[i] & 15];
	}
	out[2 * PP_UNWIND_DIGEST_SIZE] = '\0';
}

struct pp_unwind_table *pp_unwind_table_open_mem(const void *buf, size_t len, size_t max_rows)
{
	struct pp_unwind_table *t = NULL;
	struct pp_elf_shape shape;
	struct pp_elf_src src;
	void *copy;
	Elf *elf;
	int err;

	if (!buf || len < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0) {
		errno = ENOEXEC;
		return NULL;
	}
	pp_elf_src_mem(&src, buf, len);
	err = elf_open(&src, &shape, &elf, &copy);
	if (err) {
		errno = -err;
		return NULL;
	}
	err = build(elf, &src, &shape, max_rows, &t);
	elf_end(elf);
	free(copy);
	if (err) {
		errno = -err;
		return NULL;
	}
	return t;
}

struct pp_unwind_table *pp_unwind_table_from_rows(const struct pp_unwind_row *rows, size_t n)
{
	struct pp_unwind_table *t;
	int err = 0;

	for (size_t i = 1; i < n; i++) {
		if (rows[i - 1].pc > rows[i].pc) {
			errno = EINVAL;
			return NULL;
		}
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->max_rows = n;
	for (size_t i = 0; i < n && !err; i++) {
		uint16_t rule;

		err = intern_rule(t, rule_of_row(&rows[i]), &rule);
		if (!err)
			err = append(t, rows[i].pc, rule);
	}
	if (err) {
		pp_unwind_table_free(t);
		errno = err == -ENOMEM ? ENOMEM : EINVAL;
		return NULL;
	}
	finish(t);
	return t;
}

void pp_unwind_table_free(struct pp_unwind_table *t)
{
	if (!t)
		return;
	if (t->backing) {
		pp_unwind_backing_release(t->backing, t->backing_map_len);
	} else {
		free(t->pc_offs);
		free(t->rule_ix);
	}
	free(t->rules);
	free(t->rule_slots);
	free(t);
}

bool pp_unwind_table_lookup(const struct pp_unwind_table *t, uint64_t pc, struct pp_unwind_row *out)
{
	size_t lo = 0, hi;
	uint32_t key;

	if (!t || !t->n || pc < t->base_pc)
		return false;
	key = pc - t->base_pc > UINT32_MAX ? UINT32_MAX : (uint32_t)(pc - t->base_pc);
	hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->pc_offs[mid] <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	row_at(t, lo - 1, out);
	return true;
}

size_t pp_unwind_table_get_loads(const struct pp_unwind_table *t, struct pp_unwind_load *out)
{
	if (!t)
		return 0;
	memcpy(out, t->loads, t->nloads * sizeof(*out));
	return t->nloads;
}

int pp_unwind_vaddr_of(const struct pp_unwind_load *loads, size_t n, uint64_t file_offset, int exec,
		       uint64_t *vaddr)
{
	/* segments of the mapping's kind first, then any */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			/* a mapping starts at the page holding the segment's first byte */
			uint64_t page_off = loads[i].offset & ~(uint64_t)0xfff;

			if (pass == 0 && !loads[i].exec != !exec)
				continue;
			if (file_offset >= page_off &&
			    file_offset < loads[i].offset + loads[i].filesz) {
				*vaddr = file_offset - loads[i].offset + loads[i].vaddr;
				return 0;
			}
		}
	}
	return -ENOENT;
}

size_t pp_unwind_table_count(const struct pp_unwind_table *t)
{
	return t ? t->n : 0;
}

size_t pp_unwind_table_rule_count(const struct pp_unwind_table *t)
{
	return t ? t->nrules : 0;
}

bool pp_unwind_table_rule_get(const struct pp_unwind_table *t, size_t k, struct pp_unwind_row *out)
{
	if (!t || k >= t->nrules)
		return false;
	*out = row_of_rule(&t->rules[k], 0);
	return true;
}

uint64_t pp_unwind_table_row_pc(const struct pp_unwind_table *t, size_t i)
{
	return row_pc(t, i);
}

uint32_t pp_unwind_table_row_rule(const struct pp_unwind_table *t, size_t i)
{
	return t->rule_ix[i];
}

void pp_unwind_table_get_rows(const struct pp_unwind_table *t, struct pp_unwind_table_rows *out)
{
	out->base_pc = t->base_pc;
	out->pc_offs = t->pc_offs;
	out->rule_ix = t->rule_ix;
	out->n = t->n;
}

bool pp_unwind_table_get(const struct pp_unwind_table *t, size_t i, struct pp_unwind_row *out)
{
	if (!t || i >= t->n)
		return false;
	row_at(t, i, out);
	return true;
}

void pp_unwind_table_get_stats(const struct pp_unwind_table *t, struct pp_unwind_table_stats *out)
{
	if (!out)
		return;
	if (!t) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = t->stats;
}

size_t pp_unwind_table_bytes(const struct pp_unwind_table *t)
{
	return t ? sizeof(*t) + t->cap * (sizeof(*t->pc_offs) + sizeof(*t->rule_ix)) +
		       t->rules_cap * sizeof(*t->rules) + t->nslots * sizeof(*t->rule_slots)
		 : 0;
}

const char *pp_cfa_rule_name(enum pp_cfa_rule r)
{
	static const char *const names[] = {"none", "rsp",	 "rbp",
					    "plt",  "deref_rsp", "unsupported"};

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

const char *pp_reg_rule_name(enum pp_reg_rule r)
{
	static const char *const names[] = {"same", "undefined", "at_cfa", "at_rsp", "unsupported"};

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}
