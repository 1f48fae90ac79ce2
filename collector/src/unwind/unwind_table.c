/*
 * The CFI compiler (see unwind_table.h). libdw evaluates the CFI row by row: at each FDE's
 * start (from .eh_frame_hdr's sorted table) dwarf_cfi_addrframe gives the rules and the pc
 * range they hold for, and the next row starts where that range ends. The rules come back as
 * DWARF expressions, matched here against the few forms compilers emit.
 */
#include "unwind_table.h"

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

/* Rows of one FDE are looked at this many times at most (a corrupt FDE cannot spin). */
#define MAX_ROWS_PER_FDE 65536
/*
 * libdw sizes a frame's register array by the largest register number an instruction names
 * and copies it for every DW_CFA_remember_state: a hostile register number costs it gigabytes
 * (found by fuzz_unwind). x86-64's DWARF registers end at 125 (k7).
 */
#define MAX_CFI_REG 127
#define MAX_REMEMBER_STATE 64
/* One FDE's and its CIE's instructions, in bytes (compilers' longest are a few hundred). */
#define MAX_CFI_INSNS 16384

struct pp_unwind_table {
	struct pp_unwind_row *rows;
	size_t n, cap, max_rows;
	struct pp_unwind_table_stats stats;
	struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
	size_t nloads;
};

/*
 * CFI validation. libdw evaluates each row by executing the CIE's and the FDE's instructions
 * from the start, so it runs only over entries checked here first: registers and nesting
 * bounded, every operand inside the entry, and the instruction bytes it will execute
 * counted against a budget proportional to the section's size.
 */
struct cfi_cie {
	uint64_t off;
	size_t insn_len;
	uint8_t fde_enc;
	bool z;
	bool ok;
};

struct cfi_fde {
	uint64_t off; /* section offset, as .eh_frame_hdr's table points at it */
	size_t cost;  /* instruction bytes one evaluation executes (CIE's + FDE's) */
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

/* The FDE pointer encoding from a CIE's "z..." augmentation, or false if not understood. */
static bool cie_fde_encoding(const Dwarf_CIE *cie, uint8_t *enc)
{
	const char *a = cie->augmentation;
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end;

	*enc = DW_EH_PE_absptr;
	if (!a || a[0] != 'z')
		return a && a[0] == '\0'; /* "": no augmentation, absolute pointers */
	if (!p && cie->augmentation_data_size)
		return false;
	end = p + cie->augmentation_data_size;
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

static int cie_push(struct cfi_index *ix, const struct cfi_cie *c)
{
	if (ix->ncie == ix->cie_cap) {
		size_t cap = ix->cie_cap ? ix->cie_cap * 2 : 16;
		struct cfi_cie *n = realloc(ix->cies, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ix->cies = n;
		ix->cie_cap = cap;
	}
	ix->cies[ix->ncie++] = *c;
	return 0;
}

static int fde_push(struct cfi_index *ix, uint64_t off, size_t cost)
{
	if (ix->nfde == ix->fde_cap) {
		size_t cap = ix->fde_cap ? ix->fde_cap * 2 : 1024;
		struct cfi_fde *n = realloc(ix->fdes, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ix->fdes = n;
		ix->fde_cap = cap;
	}
	ix->fdes[ix->nfde++] = (struct cfi_fde){.off = off, .cost = cost};
	return 0;
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

static const struct cfi_fde *fde_find(const struct cfi_index *ix, uint64_t off)
{
	size_t lo = 0, hi = ix->nfde;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix->fdes[mid].off == off)
			return &ix->fdes[mid];
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
static int cfi_index_build(struct cfi_index *ix, const unsigned char *ident, Elf_Data *data)
{
	for (int pass = 0; pass < 2; pass++) {
		Dwarf_Off off = 0, next;

		while (off < data->d_size) {
			Dwarf_CFI_Entry e;
			int rc = dwarf_next_cfi(ident, data, true, off, &next, &e);
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
				c.insn_len = (size_t)(e.cie.initial_instructions_end -
						      e.cie.initial_instructions);
				err = cie_push(ix, &c);
			} else if (rc == 0 && pass == 1 && e.CIE_id != LIBDW_CIE_ID) {
				const struct cfi_cie *c = cie_find(ix, e.fde.CIE_pointer);
				const uint8_t *p = e.fde.start, *end = e.fde.end;
				uint64_t aug = 0;

				if (c && c->ok && skip(&p, end, 2 * enc_size(c->fde_enc)) &&
				    (!c->z || (uleb(&p, end, &aug) && skip(&p, end, aug))) &&
				    insns_ok(p, end, enc_size(c->fde_enc)))
					err =
					    fde_push(ix, off, c->insn_len + (size_t)(end - p) + 1);
			}
			if (err)
				return err;
			off = next;
		}
	}
	return 0;
}

static bool is_op(const Dwarf_Op *op, uint8_t atom)
{
	return op->atom == atom;
}

static void cfa_rule(Dwarf_Frame *f, struct pp_unwind_row *r)
{
	Dwarf_Op *ops = NULL;
	size_t n = 0;

	r->cfa_rule = PP_CFA_UNSUPPORTED;
	if (dwarf_frame_cfa(f, &ops, &n) != 0 || n == 0)
		return;
	if (n == 1 && is_op(&ops[0], DW_OP_bregx)) {
		int64_t off = (int64_t)ops[0].number2;

		if (off < INT32_MIN || off > INT32_MAX)
			return;
		r->cfa_off = (int32_t)off;
		if (ops[0].number == REG_RSP)
			r->cfa_rule = PP_CFA_RSP;
		else if (ops[0].number == REG_RBP)
			r->cfa_rule = PP_CFA_RBP;
		return;
	}
	/* PLT entries: rsp + 8 + ((rip & 15) >= K) << 3 */
	if (n == 9 && is_op(&ops[0], DW_OP_breg7) && ops[0].number == 8 &&
	    is_op(&ops[1], DW_OP_breg16) && ops[1].number == 0 && is_op(&ops[2], DW_OP_lit15) &&
	    is_op(&ops[3], DW_OP_and) && ops[4].atom >= DW_OP_lit0 && ops[4].atom <= DW_OP_lit15 &&
	    is_op(&ops[5], DW_OP_ge) && is_op(&ops[6], DW_OP_lit3) && is_op(&ops[7], DW_OP_shl) &&
	    is_op(&ops[8], DW_OP_plus)) {
		r->cfa_rule = PP_CFA_PLT;
		r->cfa_off = ops[4].atom - DW_OP_lit0;
		return;
	}
	/* signal trampolines: the interrupted rsp is saved in the ucontext */
	if (n == 2 && is_op(&ops[0], DW_OP_breg7) && is_op(&ops[1], DW_OP_deref) &&
	    (int64_t)ops[0].number >= INT32_MIN && (int64_t)ops[0].number <= INT32_MAX) {
		r->cfa_rule = PP_CFA_DEREF_RSP;
		r->cfa_off = (int32_t)(int64_t)ops[0].number;
	}
}

static bool fits16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

static void reg_rule(Dwarf_Frame *f, int regno, uint8_t *rule, int16_t *off)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t n = 0;

	*rule = PP_REG_UNSUPPORTED;
	*off = 0;
	if (dwarf_frame_register(f, regno, mem, &ops, &n) != 0)
		return;
	if (n == 0) {
		*rule = ops == mem    ? PP_REG_UNDEFINED
			: ops == NULL ? PP_REG_SAME
				      : PP_REG_UNSUPPORTED;
		return;
	}
	if (!is_op(&ops[0], DW_OP_call_frame_cfa))
		return;
	if (n == 1) {
		*rule = PP_REG_AT_CFA;
		return;
	}
	if (n == 2 && is_op(&ops[1], DW_OP_plus_uconst) && fits16((int64_t)ops[1].number)) {
		*rule = PP_REG_AT_CFA;
		*off = (int16_t)(int64_t)ops[1].number;
	} else if (n == 2 && is_op(&ops[1], DW_OP_breg7) && fits16((int64_t)ops[1].number)) {
		/* DW_CFA_expression over the frame's own rsp (signal frames' ucontext) */
		*rule = PP_REG_AT_RSP;
		*off = (int16_t)(int64_t)ops[1].number;
	}
}

static bool same_rules(const struct pp_unwind_row *a, const struct pp_unwind_row *b)
{
	return a->cfa_rule == b->cfa_rule && a->cfa_off == b->cfa_off &&
	       a->rbp_rule == b->rbp_rule && a->rbp_off == b->rbp_off && a->ra_rule == b->ra_rule &&
	       a->ra_off == b->ra_off && a->flags == b->flags;
}

/* Append a row, merged into the previous one when the rules are the same. */
static int push(struct pp_unwind_table *t, const struct pp_unwind_row *r)
{
	if (t->n && same_rules(&t->rows[t->n - 1], r) && t->rows[t->n - 1].pc <= r->pc)
		return 0;
	if (t->n && t->rows[t->n - 1].pc == r->pc) {
		t->rows[t->n - 1] = *r; /* an empty range before it: the later rules win */
		return 0;
	}
	if (t->n == t->max_rows)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct pp_unwind_row *nr;

		if (cap > t->max_rows)
			cap = t->max_rows;
		nr = realloc(t->rows, cap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		t->rows = nr;
		t->cap = cap;
	}
	t->rows[t->n++] = *r;
	return 0;
}

static void count(struct pp_unwind_table *t, const struct pp_unwind_row *r)
{
	switch (r->cfa_rule) {
	case PP_CFA_RSP:
		t->stats.cfa_rsp++;
		break;
	case PP_CFA_RBP:
		t->stats.cfa_rbp++;
		break;
	case PP_CFA_PLT:
		t->stats.cfa_plt++;
		break;
	case PP_CFA_DEREF_RSP:
		t->stats.cfa_signal++;
		break;
	case PP_CFA_UNSUPPORTED:
		t->stats.cfa_unsupported++;
		break;
	default:
		break;
	}
	if (r->rbp_rule == PP_REG_UNSUPPORTED || r->ra_rule == PP_REG_UNSUPPORTED)
		t->stats.reg_unsupported++;
}

/* The rows of one FDE, from start up to limit (the next FDE's start). */
static int compile_fde(struct pp_unwind_table *t, Dwarf_CFI *cfi, uint64_t start, uint64_t limit,
		       size_t cost, uint64_t *budget)
{
	uint64_t pc = start;
	int err;

	for (int i = 0; i < MAX_ROWS_PER_FDE && pc < limit; i++) {
		struct pp_unwind_row r = {.pc = pc};
		Dwarf_Frame *f = NULL;
		Dwarf_Addr lo, hi;
		bool signal = false;

		if (*budget < cost)
			return -E2BIG;
		*budget -= cost;
		if (dwarf_cfi_addrframe(cfi, pc, &f) != 0) {
			if (pc == start)
				t->stats.fdes_unreadable++;
			break;
		}
		if (dwarf_frame_info(f, &lo, &hi, &signal) < 0 || hi <= pc) {
			free(f);
			t->stats.fdes_unreadable++;
			break;
		}
		cfa_rule(f, &r);
		reg_rule(f, REG_RBP, &r.rbp_rule, &r.rbp_off);
		reg_rule(f, REG_RA, &r.ra_rule, &r.ra_off);
		r.flags = signal ? PP_UNWIND_SIGNAL_FRAME : 0;
		free(f);
		err = push(t, &r);
		if (err)
			return err;
		pc = hi;
	}
	/* a gap up to the next FDE: no CFI there */
	if (pc < limit) {
		struct pp_unwind_row gap = {.pc = pc, .cfa_rule = PP_CFA_NONE};

		return push(t, &gap);
	}
	return 0;
}

struct section {
	uint64_t vaddr;
	Elf_Data *data;
};

static int find_section(Elf *elf, const char *want, struct section *out)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENODATA;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, want) != 0)
			continue;
		out->data = elf_getdata(scn, NULL);
		if (!out->data || !out->data->d_buf)
			return -EINVAL;
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

static void read_loads(Elf *elf, struct pp_unwind_table *t)
{
	size_t n;

	if (elf_getphdrnum(elf, &n) != 0)
		return;
	for (size_t i = 0; i < n && t->nloads < PP_UNWIND_MAX_LOADS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		t->loads[t->nloads].vaddr = ph.p_vaddr;
		t->loads[t->nloads].offset = ph.p_offset;
		t->loads[t->nloads].filesz = ph.p_filesz;
		t->nloads++;
	}
}

/* The hdr's table entry i: an FDE's initial location and its offset in .eh_frame. */
static void hdr_entry(const struct section *hdr, const struct section *eh, size_t i, bool big,
		      uint64_t *loc, uint64_t *fde_off)
{
	const uint8_t *p = (const uint8_t *)hdr->data->d_buf + 12 + 8 * i;

	*loc = hdr->vaddr + (uint64_t)(int64_t)rd32(p, big);
	*fde_off = hdr->vaddr + (uint64_t)(int64_t)rd32(p + 4, big) - eh->vaddr;
}

static int build(Elf *elf, size_t max_rows, struct pp_unwind_table **out)
{
	struct cfi_index ix = {0};
	struct pp_unwind_table *t;
	struct section hdr, eh;
	const uint8_t *h;
	uint64_t budget, prev_loc = 0;
	Dwarf_CFI *cfi;
	GElf_Ehdr ehdr;
	uint32_t nfde;
	bool big;
	int err;

	*out = NULL;
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
		return -ENOEXEC;
	if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_machine != EM_X86_64)
		return -ENOTSUP;
	big = ehdr.e_ident[EI_DATA] == ELFDATA2MSB;
	err = find_section(elf, ".eh_frame_hdr", &hdr);
	if (!err)
		err = find_section(elf, ".eh_frame", &eh);
	if (err)
		return err;
	h = hdr.data->d_buf;
	if (hdr.data->d_size < 12)
		return -EINVAL;
	/* version 1; eh_frame_ptr sdata4/udata4; fde_count udata4; table datarel sdata4 */
	if (h[0] != 1)
		return -ENOTSUP;
	if ((h[1] & 0x0f) != DW_EH_PE_sdata4 && (h[1] & 0x0f) != DW_EH_PE_udata4)
		return -ENOTSUP;
	if (h[2] != DW_EH_PE_udata4 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -ENOTSUP;
	nfde = (uint32_t)rd32(h + 8, big);
	if ((uint64_t)nfde * 8 > hdr.data->d_size - 12)
		return -EINVAL;
	err = cfi_index_build(&ix, ehdr.e_ident, eh.data);
	if (err) {
		cfi_index_fini(&ix);
		return err;
	}
	cfi = dwarf_getcfi_elf(elf);
	t = calloc(1, sizeof(*t));
	if (!cfi || !t) {
		cfi_index_fini(&ix);
		free(t);
		if (cfi)
			dwarf_cfi_end(cfi);
		return cfi ? -ENOMEM : -ENODATA;
	}
	t->max_rows = max_rows ? max_rows : (size_t)1 << 22;
	t->stats.fdes = nfde;
	read_loads(elf, t);
	/* compilers' FDEs execute a few dozen bytes per row: 64 per byte of CFI is generous */
	budget = ((uint64_t)eh.data->d_size << 6) + ((uint64_t)1 << 20);
	for (uint32_t i = 0; i < nfde && !err; i++) {
		uint64_t start, limit = UINT64_MAX, off, next_off;
		const struct cfi_fde *fde;

		hdr_entry(&hdr, &eh, i, big, &start, &off);
		/*
		 * libdw finds an FDE by binary search over this table: unless it is strictly
		 * sorted, the FDE it evaluates need not be the one checked here.
		 */
		if (i && start <= prev_loc) {
			err = -EINVAL;
			break;
		}
		prev_loc = start;
		if (i + 1 < nfde)
			hdr_entry(&hdr, &eh, i + 1, big, &limit, &next_off);
		fde = fde_find(&ix, off);
		if (!fde) { /* not an FDE that passed the checks: no rows, the unwinder stops */
			t->stats.fdes_unreadable++;
			err =
			    push(t, &(struct pp_unwind_row){.pc = start, .cfa_rule = PP_CFA_NONE});
			continue;
		}
		err = compile_fde(t, cfi, start, limit, fde->cost, &budget);
	}
	dwarf_cfi_end(cfi);
	cfi_index_fini(&ix);
	if (err) {
		pp_unwind_table_free(t);
		return err;
	}
	if (t->n && t->n < t->cap) { /* tables live long: give the doubling's slack back */
		struct pp_unwind_row *fit = realloc(t->rows, t->n * sizeof(*fit));

		if (fit) {
			t->rows = fit;
			t->cap = t->n;
		}
	}
	t->stats.rows = t->n;
	for (size_t i = 0; i < t->n; i++)
		count(t, &t->rows[i]);
	*out = t;
	return 0;
}

struct pp_unwind_table *pp_unwind_table_open_fd(int fd, size_t max_rows)
{
	struct pp_unwind_table *t = NULL;
	struct stat st;
	Elf *elf;
	int err;

	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		errno = fd < 0 ? EBADF : ENOEXEC;
		return NULL;
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	/* ELF_C_READ, not _MMAP: a file truncated under us must not turn into SIGBUS */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	err = build(elf, max_rows, &t);
	elf_end(elf);
	if (err) {
		errno = -err;
		return NULL;
	}
	return t;
}

struct pp_unwind_table *pp_unwind_table_open_mem(const void *buf, size_t len, size_t max_rows)
{
	struct pp_unwind_table *t = NULL;
	char *copy;
	Elf *elf;
	int err;

	if (!buf || len < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0) {
		errno = ENOEXEC;
		return NULL;
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	copy = malloc(len);
	if (!copy) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(copy, buf, len);
	elf = elf_memory(copy, len);
	err = build(elf, max_rows, &t);
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

	for (size_t i = 1; i < n; i++) {
		if (rows[i - 1].pc > rows[i].pc) {
			errno = EINVAL;
			return NULL;
		}
	}
	t = calloc(1, sizeof(*t));
	if (t && n) {
		t->rows = malloc(n * sizeof(*rows));
		if (!t->rows) {
			free(t);
			t = NULL;
		} else {
			memcpy(t->rows, rows, n * sizeof(*rows));
		}
	}
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->n = t->cap = t->max_rows = n;
	t->stats.rows = n;
	for (size_t i = 0; i < n; i++)
		count(t, &t->rows[i]);
	return t;
}

void pp_unwind_table_free(struct pp_unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	free(t);
}

const struct pp_unwind_row *pp_unwind_table_lookup(const struct pp_unwind_table *t, uint64_t pc)
{
	size_t lo = 0, hi;

	if (!t || !t->n)
		return NULL;
	hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->rows[lo - 1] : NULL;
}

size_t pp_unwind_table_get_loads(const struct pp_unwind_table *t, struct pp_unwind_load *out)
{
	if (!t)
		return 0;
	memcpy(out, t->loads, t->nloads * sizeof(*out));
	return t->nloads;
}

int pp_unwind_vaddr_of(const struct pp_unwind_load *loads, size_t n, uint64_t file_offset,
		       uint64_t *vaddr)
{
	for (size_t i = 0; i < n; i++) {
		/* a mapping starts at the page holding the segment's first byte */
		uint64_t page_off = loads[i].offset & ~(uint64_t)0xfff;

		if (file_offset >= page_off && file_offset < loads[i].offset + loads[i].filesz) {
			*vaddr = file_offset - loads[i].offset + loads[i].vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

size_t pp_unwind_table_count(const struct pp_unwind_table *t)
{
	return t ? t->n : 0;
}

const struct pp_unwind_row *pp_unwind_table_get(const struct pp_unwind_table *t, size_t i)
{
	return t && i < t->n ? &t->rows[i] : NULL;
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
	return t ? sizeof(*t) + t->cap * sizeof(*t->rows) : 0;
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
