/*
 * Data-type resolution of a memory access: which type, and which field of it, the instruction
 * at a PC reads or writes. The instruction is decoded (capstone) for its memory operand; the
 * binary's DWARF (libdw) says which variable or parameter lives in the operand's base register
 * at that PC, and its type; the operand's displacement (or, for a global, the data address)
 * names the field. What perf 6.8+ does offline (perf report -s type,typeoff), per PC.
 *
 * A resolver owns one binary: its code (to read the instruction) and its DWARF (the binary
 * itself or its separate debug file). Addresses are the binary's own link-time addresses (the
 * caller removes the load bias). Resolution reads the files: run it off the sampling path and
 * keep its results (they depend on the PC alone, and on the data address for globals).
 */
#ifndef PP_COLLECTOR_DATA_TYPE_H
#define PP_COLLECTOR_DATA_TYPE_H

#include <stddef.h>
#include <stdint.h>

/* Why an access got no type; the caller keeps its data-object class ("[heap]", ...) then. */
enum pp_data_type_miss {
	PP_DT_RESOLVED = 0,
	PP_DT_NO_CODE,	      /* the PC is in no code section of the binary */
	PP_DT_UNDECODABLE,    /* the bytes at the PC are no instruction capstone knows */
	PP_DT_NO_MEM_OPERAND, /* the instruction accesses no memory through an operand */
	PP_DT_NO_DWARF,	      /* no DWARF covers the PC */
	PP_DT_NO_VARIABLE,    /* no variable lives in the base register there (a temporary) */
	PP_DT_STACK_SLOT,     /* relative to the stack or frame pointer, and no local there: the
			       * CFA is unknown at the PC, or the slot a spill or a temporary */
	PP_DT_NOT_POINTER,    /* the base register's variable is no pointer to an object */
	PP_DT_NO_FILE,	      /* the binary could not be opened, or was refused (hostile, too big);
			       * for kernel code: no image of the running kernel with DWARF */
	PP_DT_KERNEL_MODULE,  /* kernel code of a module whose files were not found (no .ko and
			       * DWARF of its build, a compressed .ko) or not looked for */
	PP_DT_TOO_BIG,	      /* the file's DWARF is over what the types may hold in memory */
	PP_DT_MISS__COUNT,
};

/* The reason's name, for counters: "no_code", "no_variable", ... */
const char *pp_data_type_miss_name(enum pp_data_type_miss miss);

#define PP_DATA_TYPE_NAME_MAX 128
#define PP_DATA_FIELD_MAX 192

struct pp_data_type {
	char type[PP_DATA_TYPE_NAME_MAX]; /* "struct conn", "union u", "long int", a typedef */
	/*
	 * The field the access falls in, as a path from the type: "rx_bytes", "hdr.len",
	 * "slots[].tx". Empty where the offset falls in padding or the type has no fields.
	 */
	char field[PP_DATA_FIELD_MAX];
	int64_t offset; /* bytes from the start of the type (negative: before it) */
	uint32_t size;	/* bytes the instruction accesses (the operand's size), 0 if unknown */
	uint8_t is_store;
};

struct pp_data_type_resolver;

/*
 * A resolver for the binary open at code_fd, whose DWARF is in dwarf_fd (the same fd, or a
 * debug file's). The fds stay the caller's and must stay open while the resolver lives.
 * Returns NULL with errno set when the ELF cannot be read.
 */
struct pp_data_type_resolver *pp_data_type_resolver_new(int code_fd, int dwarf_fd);
/*
 * PP_DATA_TYPE_MAPPED: the files are mapped, not read into memory: their DWARF then costs page
 * cache the kernel can reclaim rather than the agent's heap (a vmlinux's is 200 MiB). Only for
 * files no one but root can change (the host's kernel image): one truncated under the mapping
 * would turn the next read into SIGBUS.
 */
#define PP_DATA_TYPE_MAPPED 0x1u

struct pp_data_type_opts {
	unsigned int flags; /* PP_DATA_TYPE_* */
	/*
	 * Refuse (EFBIG) a file whose debug sections, as read (inflated), pass this many bytes;
	 * 0 or over: the fixed cap, 256 MiB. Read, they are the resolver's heap.
	 */
	uint64_t max_dwarf_bytes;
};

/* pp_data_type_resolver_new with options (o NULL: none). */
struct pp_data_type_resolver *pp_data_type_resolver_open(int code_fd, int dwarf_fd,
							 const struct pp_data_type_opts *o);

/*
 * A resolver for an image in memory (code_len bytes at code; its DWARF at dwarf, or NULL: in
 * code), such as a kernel module laid out at the kernel's addresses (kernel_module.h). The
 * buffers stay the caller's and must live as long as the resolver; they are read, not changed.
 */
struct pp_data_type_resolver *pp_data_type_resolver_open_mem(const void *code, size_t code_len,
							     const void *dwarf, size_t dwarf_len,
							     const struct pp_data_type_opts *o);

/* The bytes of debug sections the resolver read (its heap, when not mapped). */
uint64_t pp_data_type_dwarf_bytes(const struct pp_data_type_resolver *r);
void pp_data_type_resolver_free(struct pp_data_type_resolver *r);

/*
 * Resolves the access of the instruction at pc (a link-time address of the binary); data_addr
 * is the sample's data address as a link-time address of the binary, or 0 when unknown (then
 * globals are found only through RIP-relative operands). Returns PP_DT_RESOLVED with out
 * filled, or the reason it could not.
 */
enum pp_data_type_miss pp_data_type_resolve(struct pp_data_type_resolver *r, uint64_t pc,
					    uint64_t data_addr, struct pp_data_type *out);

/* Whether the resolver's DWARF file has any (else look for a debug file). */
int pp_data_type_has_dwarf(const struct pp_data_type_resolver *r);

/*
 * The link-time address of a byte of the binary's file (an instruction's file offset, as a
 * mapping shows it): 0 and *vaddr, or -ENOENT when no loadable segment holds it.
 */
int pp_data_type_file_vaddr(const struct pp_data_type_resolver *r, uint64_t file_offset,
			    uint64_t *vaddr);

/* "struct conn.rx_bytes", or "struct conn +24" without a field: the data leaf frame. */
int pp_data_type_format(const struct pp_data_type *t, char *buf, size_t len);

#endif
