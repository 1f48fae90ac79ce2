/*
 * Data-type resolution (see data_type.h): capstone decodes the instruction at the PC, libdw
 * finds the variable whose location at that PC is the operand's base register, and the type's
 * members say which field the displacement falls in. Globals are found by address in a table of
 * the binary's DWARF variables, built on first use; stack slots from their subprogram's frame
 * base, which for gcc is the CFA that the binary's CFI (cfi/) gives at the PC.
 */
#include "data_type.h"

#include "base/elf_read.h"
#include "base/log.h"
#include "cfi/unwind_table.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdbool.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INSN_BYTES 15
/* What libdw may read of one file's sections at most, decompressed (see check_sections) */
#define MAX_DWARF_BYTES (256ull << 20)
#define MAX_TYPE_DEPTH 8	   /* typedefs, qualifiers and nested members followed at most */
#define MAX_GLOBALS (1u << 20)	   /* DWARF variables kept for address lookups at most */
#define MAX_FUNC_RANGES (1u << 21) /* functions' address ranges kept for scope lookups */
/* Lexical blocks and inlined calls nested in a function, followed down to the PC at most. */
#define MAX_SCOPE_DEPTH 64
/*
 * CFI rows of a binary compiled for its stack slots at most (6 bytes each: 1.5 MiB). A larger
 * binary's gcc stack slots stay unresolved (stack_slot), so that the loader's few resolvers
 * stay small beside the unwinder's own tables.
 */
#define MAX_FRAME_ROWS (1u << 18)

/* Both tables' entries start with their address (cmp_addr, at_or_below). */
struct global_var {
	uint64_t addr, size;
	Dwarf_Off die; /* the variable's DIE */
};

/* One address range of a function's code, for finding the function at a PC. */
struct func_range {
	uint64_t lo, hi;
	Dwarf_Off die; /* its DW_TAG_subprogram */
};

struct pp_data_type_resolver {
	struct pp_elf_src code;
	Elf *code_elf, *dwarf_elf; /* dwarf_elf: NULL when it is code_elf */
	Dwarf *dwarf;		   /* NULL: no DWARF */
	/*
	 * The binary's CFI compiled by cfi/ (.eh_frame, and its .debug_frame), on first use (NULL:
	 * none or refused): each entry checked before it runs.
	 */
	struct pp_unwind_table *frames;
	int frames_tried;
	/*
	 * A separate debug file's .debug_frame through libdw, on first use (NULL: none). Not
	 * libdw's .eh_frame: libdw finds that through .eh_frame_hdr and reads what it claims
	 * unchecked, so a hostile file could make it allocate at will (and libdw 0.188 then
	 * leaks); .debug_frame is a section check_sections has checked.
	 */
	Dwarf_CFI *cfi;
	int cfi_tried;
	csh cs;
	struct global_var *globals; /* sorted by addr; built on first use, with funcs */
	size_t nglobals;
	/*
	 * The functions' code ranges, sorted, on first use: the scopes at a PC are then found
	 * from its function down, not by walking its unit from the top (a kernel's units have
	 * thousands of entries, and dwarf_getscopes visits them all for each PC).
	 */
	struct func_range *funcs;
	size_t nfuncs;
	int index_built;      /* globals and funcs (build_index) */
	uint64_t dwarf_bytes; /* what libdw read of the debug sections */
};

static const char *const miss_names[PP_DT_MISS__COUNT] = {
    [PP_DT_RESOLVED] = "resolved",	 [PP_DT_NO_CODE] = "no_code",
    [PP_DT_UNDECODABLE] = "undecodable", [PP_DT_NO_MEM_OPERAND] = "no_mem_operand",
    [PP_DT_NO_DWARF] = "no_dwarf",	 [PP_DT_NO_VARIABLE] = "no_variable",
    [PP_DT_STACK_SLOT] = "stack_slot",	 [PP_DT_NOT_POINTER] = "not_pointer",
    [PP_DT_NO_FILE] = "no_file",	 [PP_DT_KERNEL_MODULE] = "kernel_module",
    [PP_DT_TOO_BIG] = "too_big",
};

const char *pp_data_type_miss_name(enum pp_data_type_miss miss)
{
	return (unsigned)miss < PP_DT_MISS__COUNT ? miss_names[miss] : "unknown";
}

/*
 * What libdw will read of the file, checked before it is given it: each debug section inside
 * the file and backed by data, a compressed one's stated size too, all of them within
 * MAX_DWARF_BYTES. libdw reads them whole (and inflates compressed ones to the size their
 * header states), so an ELF another user wrote could otherwise make the agent allocate what
 * it claims. Returns 0 or a negative errno (pp_elf_refusal_name).
 */
static int check_sections(Elf *elf, const struct pp_elf_src *src, const struct pp_elf_shape *shape,
			  uint64_t max, uint64_t *total_out)
{
	Elf_Scn *scn = NULL;
	uint64_t total = 0;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		uint8_t hdr[24];
		uint64_t bytes;
		GElf_Shdr sh;
		int err;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    (strncmp(name, ".debug_", 7) != 0 && strncmp(name, ".zdebug_", 8) != 0))
			continue;
		err = pp_elf_range_check(src, sh.sh_offset, sh.sh_size, MAX_DWARF_BYTES);
		if (err)
			return err;
		bytes = sh.sh_size;
		if (name[1] == 'z') { /* GNU's .zdebug: "ZLIB", the size big-endian, zlib */
			if (sh.sh_size < 12 || pp_elf_read_at(src, sh.sh_offset, hdr, 12) ||
			    memcmp(hdr, "ZLIB", 4) != 0)
				return -EBADMSG;
			bytes = 0;
			for (int b = 4; b < 12; b++)
				bytes = bytes << 8 | hdr[b];
		} else if (sh.sh_flags & SHF_COMPRESSED) {
			size_t chdr = shape->elf_class == ELFCLASS64 ? sizeof(Elf64_Chdr)
								     : sizeof(Elf32_Chdr);

			if (shape->big_endian)
				return -EOPNOTSUPP; /* x86-64 code only */
			if (sh.sh_size < chdr || pp_elf_read_at(src, sh.sh_offset, hdr, chdr))
				return -EBADMSG;
			if (shape->elf_class == ELFCLASS64) {
				Elf64_Chdr c;

				memcpy(&c, hdr, sizeof(c));
				bytes = c.ch_size;
			} else {
				Elf32_Chdr c;

				memcpy(&c, hdr, sizeof(c));
				bytes = c.ch_size;
			}
		}
		if (bytes > max || total + bytes > max)
			return -EFBIG;
		total += bytes;
	}
	*total_out = total;
	return 0;
}

/*
 * Whether the string sections end in a NUL. libdw hands out names as pointers into them
 * (dwarf_formstring) and checks only that each starts inside, so a last string without its
 * NUL would be read past the section. Asked after dwarf_begin_elf, which has inflated the
 * compressed ones.
 */
static bool strings_terminated(Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		Elf_Data *data;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    (strcmp(name, ".debug_str") != 0 && strcmp(name, ".debug_line_str") != 0))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data ||
		    (data->d_size && ((const char *)data->d_buf)[data->d_size - 1] != '\0'))
			return false;
	}
	return true;
}

/*
 * An ELF of fd for libelf, its headers checked first; read with pread, never mapped, unless
 * mapped (PP_DATA_TYPE_MAPPED: a file only root can change).
 */
/* fd, or the image mem (len bytes) where fd < 0, checked and given to libelf */
static Elf *open_checked(int fd, const void *mem, size_t len, struct pp_elf_src *src,
			 struct pp_elf_shape *shape, int mapped, int *err)
{
	Elf *elf;

	if (fd < 0) {
		pp_elf_src_mem(src, mem, len);
		*err = 0;
	} else {
		*err = pp_elf_src_fd(src, fd);
	}
	if (!*err)
		*err = pp_elf_preflight(src, shape);
	if (*err)
		return NULL;
	/* ELF_C_READ, not _MMAP: a file its owner truncates must not turn into SIGBUS */
	elf = fd < 0 ? elf_memory((char *)mem, len)
		     : elf_begin(fd, mapped ? ELF_C_READ_MMAP : ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		*err = -ENOEXEC;
		return NULL;
	}
	return elf;
}

struct pp_data_type_resolver *pp_data_type_resolver_new(int code_fd, int dwarf_fd)
{
	return pp_data_type_resolver_open(code_fd, dwarf_fd, NULL);
}

static struct pp_data_type_resolver *resolver_open(int code_fd, const void *code, size_t code_len,
						   int dwarf_fd, const void *dwarf,
						   size_t dwarf_len,
						   const struct pp_data_type_opts *o);

struct pp_data_type_resolver *pp_data_type_resolver_open(int code_fd, int dwarf_fd,
							 const struct pp_data_type_opts *o)
{
	if (code_fd < 0 || dwarf_fd < 0) {
		errno = EBADF;
		return NULL;
	}
	return resolver_open(code_fd, NULL, 0, dwarf_fd, NULL, 0, o);
}

struct pp_data_type_resolver *pp_data_type_resolver_open_mem(const void *code, size_t code_len,
							     const void *dwarf, size_t dwarf_len,
							     const struct pp_data_type_opts *o)
{
	return resolver_open(-1, code, code_len, -1, dwarf ? dwarf : code,
			     dwarf ? dwarf_len : code_len, o);
}

#ifndef PP_CAPSTONE_SONAME
#define PP_CAPSTONE_SONAME "libcapstone.so.4"
#endif

/*
 * capstone, loaded the first time a resolver is opened: an agent that samples no memory event
 * never maps it (Debian's build holds every architecture: 3 MiB of tables the loader relocates,
 * resident in each process that links it).
 */
static struct {
	cs_err (*open)(cs_arch arch, cs_mode mode, csh *handle);
	cs_err (*option)(csh handle, cs_opt_type type, size_t value);
	size_t (*disasm)(csh handle, const uint8_t *code, size_t size, uint64_t address,
			 size_t count, cs_insn **insn);
	void (*free)(cs_insn *insn, size_t count);
	cs_err (*close)(csh *handle);
	bool loaded;
} g_cs;
static pthread_once_t g_cs_once = PTHREAD_ONCE_INIT;

static void capstone_load(void)
{
	void *h = dlopen(PP_CAPSTONE_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (h) {
		*(void **)&g_cs.open = dlsym(h, "cs_open");
		*(void **)&g_cs.option = dlsym(h, "cs_option");
		*(void **)&g_cs.disasm = dlsym(h, "cs_disasm");
		*(void **)&g_cs.free = dlsym(h, "cs_free");
		*(void **)&g_cs.close = dlsym(h, "cs_close");
		g_cs.loaded = g_cs.open && g_cs.option && g_cs.disasm && g_cs.free && g_cs.close;
		if (!g_cs.loaded)
			dlclose(h); /* another library under that name: nothing of it is used */
	}
	if (!g_cs.loaded) /* once: every resolver after this one fails the same way */
		pp_warn(
		    "data types: %s cannot be loaded (Debian libcapstone4): memory samples keep "
		    "no data type",
		    PP_CAPSTONE_SONAME);
}

static bool capstone_ready(void)
{
	pthread_once(&g_cs_once, capstone_load);
	return g_cs.loaded;
}

static struct pp_data_type_resolver *resolver_open(int code_fd, const void *code, size_t code_len,
						   int dwarf_fd, const void *dwarf,
						   size_t dwarf_len,
						   const struct pp_data_type_opts *o)
{
	int mapped = o && (o->flags & PP_DATA_TYPE_MAPPED);
	uint64_t max = o && o->max_dwarf_bytes && o->max_dwarf_bytes < MAX_DWARF_BYTES
			   ? o->max_dwarf_bytes
			   : MAX_DWARF_BYTES;
	struct pp_data_type_resolver *r = calloc(1, sizeof(*r));
	struct pp_elf_shape shape;
	struct pp_elf_src dsrc;
	Elf *delf;
	int err = -ENOMEM;

	if (!r)
		goto fail;
	elf_version(EV_CURRENT);
	r->code_elf = open_checked(code_fd, code, code_len, &r->code, &shape, mapped, &err);
	if (!r->code_elf)
		goto fail;
	if (!capstone_ready()) {
		err = -ELIBACC;
		goto fail;
	}
	if (g_cs.open(CS_ARCH_X86, CS_MODE_64, &r->cs) != CS_ERR_OK) {
		r->cs = 0;
		err = -ENOMEM;
		goto fail;
	}
	g_cs.option(r->cs, CS_OPT_DETAIL, CS_OPT_ON);
	if (code_fd >= 0 ? dwarf_fd == code_fd : dwarf == code) {
		delf = r->code_elf;
		dsrc = r->code;
	} else {
		delf = r->dwarf_elf =
		    open_checked(dwarf_fd, dwarf, dwarf_len, &dsrc, &shape, mapped, &err);
		if (!delf)
			goto fail;
	}
	err = check_sections(delf, &dsrc, &shape, max, &r->dwarf_bytes);
	if (err)
		goto fail;
	r->dwarf = dwarf_begin_elf(delf, DWARF_C_READ, NULL); /* NULL: the file has no DWARF */
	if (r->dwarf && !strings_terminated(delf)) {
		dwarf_end(r->dwarf); /* the names would run past their section: no DWARF */
		r->dwarf = NULL;
	}
	return r;
fail:
	pp_data_type_resolver_free(r);
	errno = -err;
	return NULL;
}

void pp_data_type_resolver_free(struct pp_data_type_resolver *r)
{
	if (!r)
		return;
	if (r->cs)
		g_cs.close(&r->cs);
	if (r->dwarf)
		dwarf_end(r->dwarf);
	pp_unwind_table_free(r->frames);
	if (r->dwarf_elf)
		elf_end(r->dwarf_elf);
	if (r->code_elf)
		elf_end(r->code_elf);
	free(r->globals);
	free(r->funcs);
	free(r);
}

/*
 * Copies up to MAX_INSN_BYTES of code at pc, read from the file (only those bytes, not the
 * section); returns how many, 0 when no code section has it.
 */
static size_t read_code(const struct pp_data_type_resolver *r, uint64_t pc, uint8_t *buf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(r->code_elf, scn))) {
		uint64_t off, n;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) || pc < sh.sh_addr ||
		    pc - sh.sh_addr >= sh.sh_size)
			continue;
		off = pc - sh.sh_addr;
		n = sh.sh_size - off < MAX_INSN_BYTES ? sh.sh_size - off : MAX_INSN_BYTES;
		if (sh.sh_offset > UINT64_MAX - off ||
		    pp_elf_read_at(&r->code, sh.sh_offset + off, buf, n))
			return 0;
		return n;
	}
	return 0;
}

/* The DWARF register number (x86-64 psABI) of a capstone register, -1 if none. */
static int dwarf_regno(x86_reg reg)
{
	switch (reg) {
	case X86_REG_RAX:
	case X86_REG_EAX:
		return 0;
	case X86_REG_RDX:
	case X86_REG_EDX:
		return 1;
	case X86_REG_RCX:
	case X86_REG_ECX:
		return 2;
	case X86_REG_RBX:
	case X86_REG_EBX:
		return 3;
	case X86_REG_RSI:
	case X86_REG_ESI:
		return 4;
	case X86_REG_RDI:
	case X86_REG_EDI:
		return 5;
	case X86_REG_RBP:
	case X86_REG_EBP:
		return 6;
	case X86_REG_RSP:
	case X86_REG_ESP:
		return 7;
	case X86_REG_R8:
	case X86_REG_R8D:
		return 8;
	case X86_REG_R9:
	case X86_REG_R9D:
		return 9;
	case X86_REG_R10:
	case X86_REG_R10D:
		return 10;
	case X86_REG_R11:
	case X86_REG_R11D:
		return 11;
	case X86_REG_R12:
	case X86_REG_R12D:
		return 12;
	case X86_REG_R13:
	case X86_REG_R13D:
		return 13;
	case X86_REG_R14:
	case X86_REG_R14D:
		return 14;
	case X86_REG_R15:
	case X86_REG_R15D:
		return 15;
	default:
		return -1;
	}
}

/* The operand the instruction accesses memory through; 0 when there is none. */
struct mem_operand {
	x86_reg base, index;
	int scale;
	int64_t disp;
	uint64_t next_pc; /* for RIP-relative operands */
	uint8_t size, is_store;
};

static enum pp_data_type_miss decode(struct pp_data_type_resolver *r, uint64_t pc,
				     struct mem_operand *m)
{
	uint8_t code[MAX_INSN_BYTES];
	size_t n = read_code(r, pc, code);
	enum pp_data_type_miss miss = PP_DT_NO_MEM_OPERAND;
	cs_insn *insn;

	if (!n)
		return PP_DT_NO_CODE;
	if (g_cs.disasm(r->cs, code, n, pc, 1, &insn) != 1)
		return PP_DT_UNDECODABLE;
	/* lea and nop compute or ignore an address: they access no memory */
	if (insn->id != X86_INS_LEA && insn->id != X86_INS_NOP) {
		const cs_x86 *x = &insn->detail->x86;

		for (uint8_t i = 0; i < x->op_count; i++) {
			const cs_x86_op *op = &x->operands[i];

			if (op->type != X86_OP_MEM)
				continue;
			m->base = op->mem.base;
			m->index = op->mem.index;
			m->scale = op->mem.scale;
			m->disp = op->mem.disp;
			m->next_pc = insn->address + insn->size;
			m->size = op->size;
			m->is_store = (op->access & CS_AC_WRITE) != 0;
			miss = PP_DT_RESOLVED;
			break;
		}
	}
	g_cs.free(insn, 1);
	return miss;
}

static int die_type(Dwarf_Die *die, Dwarf_Die *type)
{
	Dwarf_Attribute attr;

	return dwarf_attr_integrate(die, DW_AT_type, &attr) && dwarf_formref_die(&attr, type) ? 0
											      : -1;
}

/*
 * Peels typedefs and qualifiers off *t. Returns the name of the outermost typedef peeled (the
 * name to show for an anonymous struct), or NULL.
 */
static const char *peel(Dwarf_Die *t)
{
	const char *typedef_name = NULL;

	for (int depth = 0; depth < MAX_TYPE_DEPTH; depth++) {
		int tag = dwarf_tag(t);

		if (tag == DW_TAG_typedef && !typedef_name)
			typedef_name = dwarf_diename(t);
		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type &&
		    tag != DW_TAG_volatile_type && tag != DW_TAG_restrict_type &&
		    tag != DW_TAG_atomic_type)
			break;
		if (die_type(t, t))
			break;
	}
	return typedef_name;
}

static void type_name(Dwarf_Die *t, const char *typedef_name, char *buf, size_t len)
{
	const char *name = dwarf_diename(t);
	const char *kind = "";

	switch (dwarf_tag(t)) {
	case DW_TAG_structure_type:
		kind = "struct ";
		break;
	case DW_TAG_union_type:
		kind = "union ";
		break;
	case DW_TAG_class_type:
		kind = "class ";
		break;
	case DW_TAG_enumeration_type:
		kind = "enum ";
		break;
	default:
		break;
	}
	if (name)
		snprintf(buf, len, "%s%s", kind, name);
	else if (typedef_name)
		snprintf(buf, len, "%s", typedef_name);
	else
		snprintf(buf, len, "%s(anonymous)", kind[0] ? kind : "");
}

static void append(char *buf, size_t len, const char *s)
{
	size_t used = strnlen(buf, len);

	if (used + 1 < len)
		snprintf(buf + used, len - used, "%s", s);
}

/* Appends to field the path of the member of t at offset off, member within member. */
static void describe_field(Dwarf_Die *t, uint64_t off, char *field, size_t len, int depth)
{
	Dwarf_Die child, mtype;
	int tag;

	if (depth >= MAX_TYPE_DEPTH)
		return;
	peel(t);
	tag = dwarf_tag(t);
	if (tag == DW_TAG_array_type) {
		Dwarf_Word esize;

		if (die_type(t, &mtype) || dwarf_aggregate_size(&mtype, &esize) || !esize)
			return;
		append(field, len, "[]");
		describe_field(&mtype, off % esize, field, len, depth + 1);
		return;
	}
	if (tag != DW_TAG_structure_type && tag != DW_TAG_union_type && tag != DW_TAG_class_type)
		return;
	if (dwarf_child(t, &child) != 0)
		return;
	do {
		Dwarf_Attribute attr;
		Dwarf_Word loc = 0, msize;
		const char *name;

		if (dwarf_tag(&child) != DW_TAG_member)
			continue;
		if (dwarf_attr_integrate(&child, DW_AT_data_member_location, &attr) &&
		    dwarf_formudata(&attr, &loc))
			continue; /* a location expression: not a plain offset */
		if (die_type(&child, &mtype) || dwarf_aggregate_size(&mtype, &msize))
			continue;
		if (off < loc || off - loc >= msize)
			continue;
		name = dwarf_diename(&child);
		if (name) {
			if (field[0])
				append(field, len, ".");
			append(field, len, name);
		}
		describe_field(&mtype, off - loc, field, len, depth + 1);
		return;
	} while (dwarf_siblingof(&child, &child) == 0);
}

/*
 * Fills out from the object type t accessed at offset off. An array of objects is named by
 * its element: g_table[3].tx_bytes is "struct conn.tx_bytes".
 */
static void describe(Dwarf_Die *t, int64_t off, const struct mem_operand *m,
		     struct pp_data_type *out)
{
	const char *typedef_name = peel(t);

	for (int depth = 0; depth < MAX_TYPE_DEPTH && off >= 0 && dwarf_tag(t) == DW_TAG_array_type;
	     depth++) {
		Dwarf_Die elem;
		Dwarf_Word esize;

		if (die_type(t, &elem) || dwarf_aggregate_size(&elem, &esize) || !esize)
			break;
		off %= (int64_t)esize;
		*t = elem;
		typedef_name = peel(t);
	}

	type_name(t, typedef_name, out->type, sizeof(out->type));
	out->field[0] = '\0';
	out->offset = off;
	out->size = m->size;
	out->is_store = m->is_store;
	if (off >= 0)
		describe_field(t, (uint64_t)off, out->field, sizeof(out->field), 0);
}

/* Whether the location expression is "the value is in register regno". */
static int in_register(const Dwarf_Op *expr, size_t n, int regno)
{
	if (n != 1)
		return 0;
	if (expr[0].atom >= DW_OP_reg0 && expr[0].atom <= DW_OP_reg31)
		return expr[0].atom - DW_OP_reg0 == regno;
	return expr[0].atom == DW_OP_regx && expr[0].number == (Dwarf_Word)regno;
}

/*
 * The compile unit covering pc. Without .debug_aranges (clang writes none by default) libdw
 * 0.188 finds none, so the units' own ranges are asked then.
 */
static int cu_at(Dwarf *dw, uint64_t pc, Dwarf_Die *cu)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	if (dwarf_addrdie(dw, pc, cu))
		return 0;
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		if (dwarf_offdie(dw, off + hsize, cu) && dwarf_haspc(cu, pc) == 1)
			return 0;
		off = next;
	}
	return -1;
}

/* The scopes at pc, innermost first (dwarf_getscopes); n < 0: no compile unit covers pc. */
struct pc_scopes {
	Dwarf_Die *dies;
	int n;
};

static int cmp_addr(const void *a, const void *b)
{
	uint64_t x, y;

	memcpy(&x, a, sizeof(x)); /* both tables' entries start with their address */
	memcpy(&y, b, sizeof(y));
	return x < y ? -1 : x > y;
}

/*
 * How many of the n entries (size bytes each, sorted by the address they start with) start at
 * or below addr: the one before that index is the last that may hold addr.
 */
static size_t at_or_below(const void *base, size_t n, size_t size, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t at;

		memcpy(&at, (const char *)base + mid * size, sizeof(at));
		if (at <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The address a one-operation location names: DW_OP_addr, or DW_OP_addrx (DWARF 5, clang's
 * default) and its GNU form, an index into .debug_addr.
 */
static int op_address(Dwarf_Attribute *loc, Dwarf_Op *op, Dwarf_Addr *addr)
{
	Dwarf_Attribute indexed;

	if (op->atom == DW_OP_addr) {
		*addr = op->number;
		return 0;
	}
	if (op->atom != DW_OP_addrx && op->atom != DW_OP_GNU_addr_index)
		return -1;
	return dwarf_getlocation_attr(loc, op, &indexed) == 0 && dwarf_formaddr(&indexed, addr) == 0
		   ? 0
		   : -1;
}

/* Room for one more entry in a table of cap (grown by doubling up to max): 0, or -1. */
static int table_room(void **table, size_t n, size_t *cap, size_t size, size_t first, size_t max)
{
	size_t ncap;
	void *grown;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : first;
	if (ncap > max || !(grown = realloc(*table, ncap * size)))
		return -1;
	*table = grown;
	*cap = ncap;
	return 0;
}

struct index_build {
	size_t globals_cap, funcs_cap;
	int globals_full, funcs_full; /* over the bound: what is left takes the slow way */
};

/* A unit's variable with a fixed address (a global or a static), into the globals' table. */
static void index_global(struct pp_data_type_resolver *r, struct index_build *b, Dwarf_Die *var)
{
	Dwarf_Attribute attr;
	Dwarf_Op *expr;
	Dwarf_Die type;
	Dwarf_Word size;
	Dwarf_Addr addr;
	size_t n;

	if (b->globals_full || !dwarf_attr_integrate(var, DW_AT_location, &attr) ||
	    dwarf_getlocation(&attr, &expr, &n) != 0 || n != 1 ||
	    op_address(&attr, &expr[0], &addr) || die_type(var, &type) ||
	    dwarf_aggregate_size(&type, &size) || !size)
		return;
	if (table_room((void **)&r->globals, r->nglobals, &b->globals_cap, sizeof(*r->globals), 256,
		       MAX_GLOBALS)) {
		b->globals_full = 1;
		return;
	}
	r->globals[r->nglobals++] =
	    (struct global_var){.addr = addr, .size = size, .die = dwarf_dieoffset(var)};
}

/* A function's code ranges, into the functions' table. */
static void index_function(struct pp_data_type_resolver *r, struct index_build *b, Dwarf_Die *fn)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t it = 0;

	while (!b->funcs_full && (it = dwarf_ranges(fn, it, &base, &lo, &hi)) > 0) {
		if (hi <= lo)
			continue;
		if (table_room((void **)&r->funcs, r->nfuncs, &b->funcs_cap, sizeof(*r->funcs),
			       1024, MAX_FUNC_RANGES)) {
			b->funcs_full = 1;
			return;
		}
		r->funcs[r->nfuncs++] =
		    (struct func_range){.lo = lo, .hi = hi, .die = dwarf_dieoffset(fn)};
	}
}

/*
 * The entries among parent's children: a unit's variables (depth 0), its functions and those in
 * its namespaces.
 */
static void index_children(struct pp_data_type_resolver *r, struct index_build *b,
			   Dwarf_Die *parent, int depth)
{
	Dwarf_Die child;

	if (depth > 8 || dwarf_child(parent, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_namespace)
			index_children(r, b, &child, depth + 1);
		else if (tag == DW_TAG_subprogram)
			index_function(r, b, &child);
		else if (tag == DW_TAG_variable && depth == 0)
			index_global(r, b, &child);
	} while (!(b->globals_full && b->funcs_full) && dwarf_siblingof(&child, &child) == 0);
}

/*
 * The binary's variables with a fixed address and its functions' code ranges, each sorted by
 * address: one walk of every unit, at the first lookup of either.
 */
static void build_index(struct pp_data_type_resolver *r)
{
	struct index_build b = {0};
	Dwarf_Off off = 0, next;
	size_t hsize;

	r->index_built = 1;
	while (!(b.globals_full && b.funcs_full) &&
	       dwarf_nextcu(r->dwarf, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;

		if (dwarf_offdie(r->dwarf, off + hsize, &cu))
			index_children(r, &b, &cu, 0);
		off = next;
	}
	if (r->nglobals)
		qsort(r->globals, r->nglobals, sizeof(*r->globals), cmp_addr);
	if (r->nfuncs)
		qsort(r->funcs, r->nfuncs, sizeof(*r->funcs), cmp_addr);
}

/* The function whose code holds pc: 0 and *fn, or -1. */
static int func_at(struct pp_data_type_resolver *r, uint64_t pc, Dwarf_Die *fn)
{
	size_t i;

	if (!r->index_built)
		build_index(r);
	i = at_or_below(r->funcs, r->nfuncs, sizeof(*r->funcs), pc);
	if (i == 0 || pc >= r->funcs[i - 1].hi)
		return -1;
	return dwarf_offdie(r->dwarf, r->funcs[i - 1].die, fn) ? 0 : -1;
}

/* The global or static variable holding addr, or NULL. */
static const struct global_var *find_global(struct pp_data_type_resolver *r, uint64_t addr)
{
	size_t i;

	if (!r->index_built)
		build_index(r);
	i = at_or_below(r->globals, r->nglobals, sizeof(*r->globals), addr);
	if (i == 0 || addr - r->globals[i - 1].addr >= r->globals[i - 1].size)
		return NULL;
	return &r->globals[i - 1];
}
/*
 * The scopes at pc inside function fn, innermost first: the lexical blocks and inlined calls
 * holding pc, then fn. Returns how many (at least 1), or -1 without memory.
 */
static int scopes_in(Dwarf_Die *fn, uint64_t pc, Dwarf_Die **out)
{
	Dwarf_Die path[MAX_SCOPE_DEPTH], child;
	int n = 0;

	path[n++] = *fn;
	while (n < MAX_SCOPE_DEPTH && dwarf_child(&path[n - 1], &child) == 0) {
		int found = 0;

		do {
			int tag = dwarf_tag(&child);

			if ((tag == DW_TAG_lexical_block || tag == DW_TAG_inlined_subroutine) &&
			    dwarf_haspc(&child, pc) == 1) {
				path[n++] = child;
				found = 1;
				break;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!found)
			break;
	}
	*out = malloc((size_t)n * sizeof(**out));
	if (!*out)
		return -1;
	for (int i = 0; i < n; i++)
		(*out)[i] = path[n - 1 - i];
	return n;
}

static struct pc_scopes scopes_at(struct pp_data_type_resolver *r, uint64_t pc)
{
	struct pc_scopes sc = {NULL, -1};
	Dwarf_Die cu, fn;

	if (func_at(r, pc, &fn) == 0 && (sc.n = scopes_in(&fn, pc, &sc.dies)) > 0)
		return sc;
	/* no function of the index holds it (one nested in a type, or past the bound) */
	sc.n = -1;
	if (cu_at(r->dwarf, pc, &cu) == 0) {
		sc.n = dwarf_getscopes(&cu, pc, &sc.dies);
		if (sc.n < 0)
			sc.n = 0;
	}
	return sc;
}

/* Whether a variable whose location at the PC is expr[0..n) is the one looked for. */
typedef bool (*var_match_fn)(Dwarf_Die *var, const Dwarf_Op *expr, size_t n, void *ctx);

/*
 * The first variable or parameter in the scopes (innermost first) whose location at pc match
 * accepts: 0 and *var, else -1.
 */
static int variable_at(const struct pc_scopes *sc, uint64_t pc, var_match_fn match, void *ctx,
		       Dwarf_Die *var)
{
	for (int s = 0; s < sc->n; s++) {
		int scope = dwarf_tag(&sc->dies[s]);
		Dwarf_Die child;

		/*
		 * A unit's own variables are globals (a DW_OP_addr location, never a register or a
		 * frame slot), and a unit of a kernel holds thousands of entries to walk past.
		 */
		if (scope == DW_TAG_compile_unit || scope == DW_TAG_partial_unit ||
		    scope == DW_TAG_type_unit || dwarf_child(&sc->dies[s], &child) != 0)
			continue;
		do {
			int tag = dwarf_tag(&child);
			Dwarf_Attribute attr;
			Dwarf_Op *expr;
			size_t n;

			if ((tag != DW_TAG_variable && tag != DW_TAG_formal_parameter) ||
			    !dwarf_attr_integrate(&child, DW_AT_location, &attr) ||
			    dwarf_getlocation_addr(&attr, pc, &expr, &n, 1) != 1)
				continue;
			if (match(&child, expr, n, ctx)) {
				*var = child;
				return 0;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
	}
	return -1;
}

static bool held_in(Dwarf_Die *var, const Dwarf_Op *expr, size_t n, void *regno)
{
	(void)var;
	return in_register(expr, n, *(const int *)regno);
}

/* The variable or parameter held in register reg at pc. */
static int register_variable(const struct pc_scopes *sc, uint64_t pc, x86_reg reg, Dwarf_Die *var)
{
	int regno = dwarf_regno(reg);

	return regno >= 0 ? variable_at(sc, pc, held_in, &regno, var) : -1;
}

/* DWARF's numbers (x86-64 psABI) of the registers the CFA rules name */
#define DWARF_RBP 6
#define DWARF_RSP 7

/*
 * The offset from the canonical frame address (CFA) of [reg + disp] at pc, where the binary's
 * CFI says the CFA is reg plus a constant there (gcc's frames: rsp, or rbp once it is set up):
 * 0 and *rel, else -1.
 */
static int cfa_relative_by_table(struct pp_data_type_resolver *r, uint64_t pc, int regno,
				 int64_t disp, int64_t *rel)
{
	struct pp_unwind_row row;

	if (!r->frames_tried) {
		r->frames_tried = 1;
		r->frames = pp_unwind_table_open_fd(r->code.fd, MAX_FRAME_ROWS);
	}
	if (!r->frames || !pp_unwind_table_lookup(r->frames, pc, &row) ||
	    !((row.cfa_rule == PP_CFA_RSP && regno == DWARF_RSP) ||
	      (row.cfa_rule == PP_CFA_RBP && regno == DWARF_RBP)))
		return -1;
	*rel = disp - row.cfa_off;
	return 0;
}

/* The same from a separate debug file's .debug_frame, read by libdw. */
static int cfa_relative_by_debug_frame(struct pp_data_type_resolver *r, uint64_t pc, int regno,
				       int64_t disp, int64_t *rel)
{
	Dwarf_Frame *frame = NULL;
	Dwarf_Op *ops;
	size_t nops;
	int ret = -1;

	if (!r->dwarf_elf) /* the binary's own .debug_frame is in the table */
		return -1;
	if (!r->cfi_tried) {
		r->cfi_tried = 1;
		r->cfi = dwarf_getcfi(r->dwarf); /* owned by the Dwarf */
	}
	if (!r->cfi || dwarf_cfi_addrframe(r->cfi, pc, &frame) != 0)
		return -1;
	/* libdw gives a register-plus-offset CFA as DW_OP_bregx (a compiler may say bregN) */
	if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1) {
		if (ops[0].atom == DW_OP_bregx && ops[0].number == (Dwarf_Word)regno) {
			*rel = disp - (int64_t)ops[0].number2;
			ret = 0;
		} else if (ops[0].atom == DW_OP_breg0 + regno) {
			*rel = disp - (int64_t)ops[0].number;
			ret = 0;
		}
	}
	free(frame);
	return ret;
}

/*
 * Where [reg + disp] is relative to the frame base of the subprogram: the base is a register
 * (clang with a frame pointer: DW_OP_reg6, rbp), or the CFA (gcc: DW_OP_call_frame_cfa) where
 * the CFI gives its rule at pc. 0 and *rel, else -1.
 */
static int frame_base_relative(struct pp_data_type_resolver *r, Dwarf_Die *subprogram, uint64_t pc,
			       int regno, int64_t disp, int64_t *rel)
{
	Dwarf_Attribute attr;
	Dwarf_Op *expr;
	size_t n;

	if (!dwarf_attr_integrate(subprogram, DW_AT_frame_base, &attr) ||
	    dwarf_getlocation(&attr, &expr, &n) != 0 || n != 1)
		return -1;
	if (expr[0].atom == DW_OP_call_frame_cfa)
		return cfa_relative_by_table(r, pc, regno, disp, rel) == 0
			   ? 0
			   : cfa_relative_by_debug_frame(r, pc, regno, disp, rel);
	if (in_register(expr, n, regno)) {
		*rel = disp;
		return 0;
	}
	return -1;
}

/* A local at a DW_OP_fbreg offset holding the byte rel from the frame base. */
struct frame_slot {
	int64_t rel;  /* the byte, from the frame base */
	int64_t into; /* found: the offset into the variable */
	Dwarf_Die type;
};

static bool holds_slot(Dwarf_Die *var, const Dwarf_Op *expr, size_t n, void *ctx)
{
	struct frame_slot *slot = ctx;
	Dwarf_Word size;
	int64_t at;

	if (n != 1 || expr[0].atom != DW_OP_fbreg || die_type(var, &slot->type) ||
	    dwarf_aggregate_size(&slot->type, &size))
		return false;
	at = (int64_t)expr[0].number;
	if (slot->rel < at || (uint64_t)(slot->rel - at) >= size)
		return false;
	slot->into = slot->rel - at;
	return true;
}

/*
 * A local variable in the frame at pc holding the byte at [base + disp] of the access:
 * located by DW_OP_fbreg from its subprogram's frame base.
 */
static int resolve_stack_slot(struct pp_data_type_resolver *r, const struct pc_scopes *sc,
			      uint64_t pc, const struct mem_operand *m, struct pp_data_type *out)
{
	struct frame_slot slot;
	Dwarf_Die var;
	int s = 0;

	if (m->index != X86_REG_INVALID)
		return -1;
	while (s < sc->n && dwarf_tag(&sc->dies[s]) != DW_TAG_subprogram)
		s++;
	if (s >= sc->n || /* no subprogram, or no DWARF at pc (n < 0) */
	    frame_base_relative(r, &sc->dies[s], pc, dwarf_regno(m->base), m->disp, &slot.rel) ||
	    variable_at(sc, pc, holds_slot, &slot, &var))
		return -1;
	describe(&slot.type, slot.into, m, out);
	return 0;
}

static int resolve_global(struct pp_data_type_resolver *r, uint64_t addr,
			  const struct mem_operand *m, struct pp_data_type *out)
{
	const struct global_var *g = addr ? find_global(r, addr) : NULL;
	Dwarf_Die var, type;

	if (!g || !dwarf_offdie(r->dwarf, g->die, &var) || die_type(&var, &type))
		return -1;
	describe(&type, (int64_t)(addr - g->addr), m, out);
	return 0;
}

/* The access through a register, with the scopes at the PC (sc->n < 0: no DWARF covers it). */
static enum pp_data_type_miss resolve_in_scopes(struct pp_data_type_resolver *r,
						const struct pc_scopes *sc, uint64_t pc,
						uint64_t data_addr, const struct mem_operand *m,
						struct pp_data_type *out)
{
	Dwarf_Die var, type;

	if (register_variable(sc, pc, m->base, &var) == 0 ||
	    /* [a + b]: the compiler may put the object's pointer in either */
	    (m->scale == 1 && register_variable(sc, pc, m->index, &var) == 0)) {
		if (die_type(&var, &type))
			return PP_DT_NOT_POINTER;
		peel(&type);
		if ((dwarf_tag(&type) != DW_TAG_pointer_type &&
		     dwarf_tag(&type) != DW_TAG_reference_type &&
		     dwarf_tag(&type) != DW_TAG_rvalue_reference_type) ||
		    die_type(&type, &type))
			return PP_DT_NOT_POINTER;
		describe(&type, m->disp, m, out);
		return PP_DT_RESOLVED;
	}
	/* no variable holds the base: a global by the sample's data address, if it has one */
	if (data_addr && resolve_global(r, data_addr, m, out) == 0)
		return PP_DT_RESOLVED;
	if (m->base == X86_REG_RSP || m->base == X86_REG_RBP)
		return resolve_stack_slot(r, sc, pc, m, out) == 0 ? PP_DT_RESOLVED
								  : PP_DT_STACK_SLOT;
	return sc->n >= 0 ? PP_DT_NO_VARIABLE : PP_DT_NO_DWARF;
}

enum pp_data_type_miss pp_data_type_resolve(struct pp_data_type_resolver *r, uint64_t pc,
					    uint64_t data_addr, struct pp_data_type *out)
{
	struct mem_operand m = {0};
	enum pp_data_type_miss miss = decode(r, pc, &m);
	struct pc_scopes sc;

	if (miss)
		return miss;
	if (!r->dwarf)
		return PP_DT_NO_DWARF;
	if (m.base == X86_REG_RIP) /* a global or static: its address is in the instruction */
		return resolve_global(r, m.next_pc + (uint64_t)m.disp, &m, out) == 0
			   ? PP_DT_RESOLVED
			   : PP_DT_NO_VARIABLE;
	/* the scopes once: the register's variable, the frame's, and whether DWARF covers pc */
	sc = scopes_at(r, pc);
	miss = resolve_in_scopes(r, &sc, pc, data_addr, &m, out);
	free(sc.dies);
	return miss;
}

uint64_t pp_data_type_dwarf_bytes(const struct pp_data_type_resolver *r)
{
	return r->dwarf_bytes;
}

int pp_data_type_has_dwarf(const struct pp_data_type_resolver *r)
{
	return r->dwarf != NULL;
}

int pp_data_type_file_vaddr(const struct pp_data_type_resolver *r, uint64_t file_offset,
			    uint64_t *vaddr)
{
	size_t phnum;

	if (elf_getphdrnum(r->code_elf, &phnum))
		return -ENOENT;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(r->code_elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    file_offset < ph.p_offset || file_offset - ph.p_offset >= ph.p_filesz)
			continue;
		*vaddr = ph.p_vaddr + (file_offset - ph.p_offset);
		return 0;
	}
	return -ENOENT;
}

int pp_data_type_format(const struct pp_data_type *t, char *buf, size_t len)
{
	if (t->field[0])
		return snprintf(buf, len, "%s.%s", t->type, t->field);
	return snprintf(buf, len, "%s %+lld", t->type, (long long)t->offset);
}
