/*
 * Unwind tables: the .eh_frame call frame information (CFI) of one ELF file (and its
 * .debug_frame's, for code .eh_frame does not cover), compiled into
 * rows sorted by ELF address, each holding, from its pc to the next row's, how to find the
 * caller: the CFA (canonical frame address, the caller's stack pointer) and where the caller's
 * rbp and return address are. Only the rules compilers emit for x86-64 user code are
 * represented, each named; anything else is a row that says the unwinder must stop.
 *
 * The file is untrusted (it comes from a profiled container): libdw reads its entries, each
 * checked (register numbers, nesting, operands in bounds) before it runs, once, in a linear
 * pass; the FDE list comes from .eh_frame_hdr's table, which must be sorted; every count is
 * bounded.
 *
 * arm64 needs the same rows with its registers: the CFA from sp (31) or x29, the return
 * address in x30 (the link register, DW_REG 30) rather than at CFA-8 for leaf functions, and
 * pointer authentication (DW_CFA_AARCH64_negate_ra_state) named; `enum pp_cfa_rule` and
 * `enum pp_reg_rule` are where they go.
 */
#ifndef PP_COLLECTOR_UNWIND_TABLE_H
#define PP_COLLECTOR_UNWIND_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How to compute the CFA at a pc. */
enum pp_cfa_rule {
	PP_CFA_NONE = 0,    /* no CFI covers this pc (a gap between FDEs): stop */
	PP_CFA_RSP,	    /* rsp + cfa_off */
	PP_CFA_RBP,	    /* rbp + cfa_off */
	PP_CFA_PLT,	    /* a PLT entry: rsp + 8, + 8 more when (rip & 15) >= cfa_off */
	PP_CFA_DEREF_RSP,   /* *(rsp + cfa_off): a signal frame (libc's __restore_rt) */
	PP_CFA_UNSUPPORTED, /* another register or expression: stop */
	PP_CFA_DEFERRED,    /* not compiled yet (the unwinder's partial tables; never compiled) */
};

/* Where a caller's register (rbp, the return address) is. */
enum pp_reg_rule {
	PP_REG_SAME = 0,    /* not changed by this frame (rbp: still in rbp) */
	PP_REG_UNDEFINED,   /* lost (the return address of the outermost frame) */
	PP_REG_AT_CFA,	    /* saved at CFA + off */
	PP_REG_AT_RSP,	    /* saved at rsp + off (signal frames: in the ucontext) */
	PP_REG_UNSUPPORTED, /* another rule: stop */
};

/* A row's flags. */
#define PP_UNWIND_SIGNAL_FRAME 0x1 /* the FDE is a signal trampoline ("S") */

struct pp_unwind_row {
	uint64_t pc; /* ELF virtual address where this row starts */
	int32_t cfa_off;
	int16_t rbp_off;
	int16_t ra_off;
	uint8_t cfa_rule; /* enum pp_cfa_rule */
	uint8_t rbp_rule; /* enum pp_reg_rule */
	uint8_t ra_rule;  /* enum pp_reg_rule */
	uint8_t flags;	  /* PP_UNWIND_* */
};

struct pp_unwind_table_stats {
	uint64_t fdes;		   /* FDEs listed by .eh_frame_hdr */
	uint64_t rows;		   /* rows kept (consecutive equal rows merged) */
	uint64_t cfa_rsp, cfa_rbp; /* rows by CFA rule */
	uint64_t cfa_plt, cfa_signal;
	uint64_t cfa_unsupported;  /* rows where the unwinder must stop */
	uint64_t reg_unsupported;  /* rows whose rbp or return address rule is not represented */
	uint64_t fdes_unreadable;  /* FDEs refused (corrupt) */
	uint64_t from_debug_frame; /* FDEs taken from .debug_frame (code .eh_frame lacks) */
};

struct pp_unwind_table;

/*
 * Compile the CFI of the ELF file behind fd / in len bytes at buf (copied). At most max_rows
 * rows (0: 1 << 22). NULL with errno set:
 *   ENOEXEC  not an ELF file;
 *   ENODATA  neither .eh_frame with its .eh_frame_hdr nor .debug_frame (frame pointers);
 *   ENOTSUP  not x86-64, or an .eh_frame_hdr table encoding other than the linkers'
 *            (datarel sdata4);
 *   EINVAL   a header or table that lies outside the file, or a table not strictly sorted;
 *   EFBIG    headers over base/elf_read.h's caps, or a CFI section over 64 MiB;
 *   ENXIO    headers or a CFI section claimed where a sparse file has a hole;
 *   E2BIG    more than max_rows rows, or an FDE of more than 65536;
 *   ENOMEM.
 */
struct pp_unwind_table *pp_unwind_table_open_fd(int fd, size_t max_rows);
struct pp_unwind_table *pp_unwind_table_open_mem(const void *buf, size_t len, size_t max_rows);
/*
 * A table of the given rows (copied), which must be sorted by pc, span less than 4 GiB and name
 * at most 65535 distinct rules: NULL with EINVAL if not.
 */
struct pp_unwind_table *pp_unwind_table_from_rows(const struct pp_unwind_row *rows, size_t n);
void pp_unwind_table_free(struct pp_unwind_table *t);
/*
 * A digest (BLAKE2b, 32 bytes) of everything the compile of fd reads, and of the compiler: two
 * files with the same digest compile to the same table, so a table kept under it (a cache,
 * unwind_table_file.h) stands for any such file however it was named. 0, or the errors of
 * pp_unwind_table_open_fd for a file it would refuse (ENODATA is not one: no CFI digests).
 */
#define PP_UNWIND_DIGEST_SIZE 32
int pp_unwind_table_digest_fd(int fd, uint8_t out[PP_UNWIND_DIGEST_SIZE]);
/*
 * The two at once: a file's CFI read once for its digest and, where no table is kept under
 * that, its compile (each of the two above reads the file's sections itself). Open: NULL with
 * errno as pp_unwind_table_open_fd's for a file that is no ELF file; the digest and the
 * compile then fail as the functions above do.
 */
struct pp_cfi_source;
struct pp_cfi_source *pp_cfi_source_open_fd(int fd);
int pp_cfi_source_digest(const struct pp_cfi_source *cs, uint8_t out[PP_UNWIND_DIGEST_SIZE]);
struct pp_unwind_table *pp_cfi_source_compile(const struct pp_cfi_source *cs, size_t max_rows);
void pp_cfi_source_free(struct pp_cfi_source *cs);
/* The compiler's identity the digests include (its source's digest, from the build). */
const char *pp_unwind_compiler_id(void);
/* The digest in lower-case hex, as it names the table (a cache file, a table's key). */
#define PP_UNWIND_DIGEST_HEX_SIZE (2 * PP_UNWIND_DIGEST_SIZE + 1)
void pp_unwind_digest_hex(const uint8_t digest[PP_UNWIND_DIGEST_SIZE],
			  char out[PP_UNWIND_DIGEST_HEX_SIZE]);

/* The row covering pc (the last row starting at or below it) in *out; false before the first. */
bool pp_unwind_table_lookup(const struct pp_unwind_table *t, uint64_t pc,
			    struct pp_unwind_row *out);

/* A PT_LOAD segment: where the file's bytes go in its ELF addresses. */
struct pp_unwind_load {
	uint64_t vaddr, offset, filesz;
	uint32_t exec; /* PF_X: code */
};

#define PP_UNWIND_MAX_LOADS 8

/* The file's PT_LOAD segments (at most PP_UNWIND_MAX_LOADS), their number returned. */
size_t pp_unwind_table_get_loads(const struct pp_unwind_table *t, struct pp_unwind_load *out);

/*
 * The ELF virtual address of a file offset, by PT_LOAD segments: what a mapping of the file
 * at that offset starts at (its load bias is start - *vaddr). exec: the mapping is executable,
 * so an executable segment wins where two share the offset's page, as lld lays them out (the
 * read-only one ends and the code begins in one page: p_vaddr = p_offset + 0x1000). 0 or
 * -ENOENT.
 */
int pp_unwind_vaddr_of(const struct pp_unwind_load *loads, size_t n, uint64_t file_offset, int exec,
		       uint64_t *vaddr);

size_t pp_unwind_table_count(const struct pp_unwind_table *t);
/* Row i in *out; false past the last. */
bool pp_unwind_table_get(const struct pp_unwind_table *t, size_t i, struct pp_unwind_row *out);
/*
 * The table as it is held: its distinct rules, and each row's pc and rule index (i below the
 * count), so that work per rule is done once per rule rather than once per row.
 */
size_t pp_unwind_table_rule_count(const struct pp_unwind_table *t);
/* Rule k as a row at pc 0; false past the last. */
bool pp_unwind_table_rule_get(const struct pp_unwind_table *t, size_t k, struct pp_unwind_row *out);
uint64_t pp_unwind_table_row_pc(const struct pp_unwind_table *t, size_t i);
uint32_t pp_unwind_table_row_rule(const struct pp_unwind_table *t, size_t i);
/*
 * The same rows as arrays, for a pass over millions of them (the shim's packing): row i
 * starts at base_pc + pc_offs[i], ascending, and names rule rule_ix[i]. Valid while t is.
 */
struct pp_unwind_table_rows {
	uint64_t base_pc;
	const uint32_t *pc_offs;
	const uint16_t *rule_ix;
	size_t n;
};
void pp_unwind_table_get_rows(const struct pp_unwind_table *t, struct pp_unwind_table_rows *out);
void pp_unwind_table_get_stats(const struct pp_unwind_table *t, struct pp_unwind_table_stats *out);
/* The memory the rows take, in bytes. */
size_t pp_unwind_table_bytes(const struct pp_unwind_table *t);

/* The rules' short names, for logs and tests ("rsp", "plt", "at_cfa", ...). */
const char *pp_cfa_rule_name(enum pp_cfa_rule r);
const char *pp_reg_rule_name(enum pp_reg_rule r);

#endif /* PP_COLLECTOR_UNWIND_TABLE_H */
