/*
 * A loaded kernel module's .ko with its DWARF, laid out where the running kernel loaded it, for
 * the data types of its memory accesses. A .ko is a relocatable object: every section starts at
 * address 0 and its DWARF's addresses (and its code's references to its own data) are
 * relocations. The kernel says where it put each allocated section (/sys/module/NAME/sections/,
 * root only); a copy of the file in memory gets those addresses as its sections' addresses and
 * its relocations applied, which is what a linked image would hold: the data-type resolver then
 * reads it like a vmlinux, at the kernel's own addresses.
 *
 * The files are found the way modprobe and perf find them (modules.dep under
 * /lib/modules/RELEASE for the module, /usr/lib/debug/lib/modules/RELEASE and DIR/.build-id
 * for its debug file), and taken only with the build id the kernel shows for the loaded module
 * (/sys/module/NAME/notes): a file of another build would name the wrong instructions.
 */
#ifndef PP_COLLECTOR_KERNEL_MODULE_H
#define PP_COLLECTOR_KERNEL_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "elf_symbols.h"

struct pp_kernel_image_opts;

/* The kernel's limit on a module's name, its NUL included (MODULE_NAME_LEN) */
#define PP_KMOD_NAME_MAX 56
/* A module's sections the kernel lists (a large driver has a few hundred) */
#define PP_KMOD_MAX_SECTIONS 1024

/* One section of a loaded module: its name and the address the kernel placed it at. */
struct pp_kmod_section {
	char name[64];
	uint64_t addr;
};

/* What pp_kmod_layout did. */
struct pp_kmod_layout_stats {
	uint32_t placed;      /* allocated sections given the kernel's address */
	uint64_t relocations; /* applied */
	uint64_t skipped;     /* in code: against symbols the module does not define */
};

/*
 * Lays out the x86-64 relocatable ELF in buf (len bytes, the whole file; changed in place):
 * each allocated section named in secs gets that address, every other section 0; then the
 * relocations of the debug sections (.debug_*) are applied, all of them, and those of the code
 * sections (SHF_EXECINSTR) against symbols the module defines (its own data, for RIP-relative
 * operands; calls into the kernel are left as they are). Every table, symbol and target is
 * checked against the image before it is used. Returns 0; -ENOEXEC for no 64-bit
 * little-endian x86-64 ET_REL; -EINVAL for a table, symbol or relocation outside the image or
 * its section; -EOPNOTSUPP for a debug section's relocation of a type it does not know, or one
 * in a compressed section; -ERANGE for a 32-bit relocation whose value does not fit.
 */
int pp_kmod_layout(uint8_t *buf, size_t len, const struct pp_kmod_section *secs, size_t nsecs,
		   struct pp_kmod_layout_stats *st);

/*
 * The path, relative to the modules' directory, of module name in modules.dep's text (n bytes):
 * the line whose file's base name, less ".ko" (and a compression suffix), is name with '-' and
 * '_' alike, as modprobe matches them. 0 with rel filled, -ENOENT, -ENAMETOOLONG.
 */
int pp_kmod_dep_find(const char *buf, size_t n, const char *name, char *rel, size_t rel_size);

/* Whether name can be a module's (letters, digits, '_', '-'; shorter than PP_KMOD_NAME_MAX). */
int pp_kmod_name_valid(const char *name);

/*
 * The sections of loaded module name, from <sys_root>/module/NAME/sections/: *out (malloc'ed,
 * the caller frees) and *n. 0, -ENOENT (no such module loaded), -EACCES (the addresses read 0:
 * not root), -E2BIG over PP_KMOD_MAX_SECTIONS, -ENOMEM.
 */
int pp_kmod_sections_read(const char *sys_root, const char *name, struct pp_kmod_section **out,
			  size_t *n);

/*
 * The section of the module's relocatable ELF (len bytes at buf) that defines symbol: its
 * name, the symbol's offset in it and the section's size. 0, -ENOENT (no such symbol, or
 * not in a section), -ENOEXEC (no 64-bit little-endian ET_REL), -EINVAL (tables outside the
 * image).
 */
int pp_kmod_symbol_section(const uint8_t *buf, size_t len, const char *symbol, char *section,
			   size_t section_size, uint64_t *value, uint64_t *size);

/*
 * A symbol of the loaded module and its address as kallsyms names it (the agent's kallsyms
 * come through BPF, whatever kptr_restrict says): where the kernel hides the sections'
 * addresses from the agent (no CAP_SYSLOG), the section holding the symbol is placed from it.
 */
struct pp_kmod_anchor {
	const char *symbol;
	uint64_t addr;
};

/* A loaded module's files, laid out; its buffers the resolver reads. */
struct pp_kmod_image {
	char name[PP_KMOD_NAME_MAX];
	char build_id[PP_BUILD_ID_HEX_SIZE];
	char path[512]; /* where its DWARF was found, for messages */
	uint8_t *code;	/* the module's laid-out image */
	size_t code_len;
	uint8_t *dwarf; /* its debug file's, or code when the module itself has DWARF */
	size_t dwarf_len;
	uint64_t text_addr; /* its .text's address: a module loaded again moves it */
	/*
	 * Placed from an anchor (the sections' addresses hidden): the one section placed,
	 * [anchored_lo, anchored_hi); an instruction outside it asks for another layout.
	 */
	int anchored;
	uint64_t anchored_lo, anchored_hi;
	struct pp_kmod_layout_stats layout;
};

/*
 * Finds, reads (each file at most max_bytes) and lays out loaded module name's .ko and debug
 * file, as o (the kernel image's options: root, sys_root, release, debug_dirs, fetch) says
 * where to look. 0 with out filled (pp_kmod_image_fini frees it), or -errno with what was tried
 * in why: -ENOENT (not loaded, no file, or none of its build), -EOPNOTSUPP (a compressed .ko,
 * which the running kernel decompressed at load), -ENODATA (no DWARF anywhere), -EACCES (the
 * kernel hides its sections' addresses), -EFBIG, -EINPROGRESS (debuginfod is fetching it),
 * or what pp_kmod_layout refused. Where the kernel hides the addresses and anchor (may be NULL)
 * is given, the section holding its symbol is placed from it (out->anchored).
 */
int pp_kmod_image_open(const struct pp_kernel_image_opts *o, const char *name,
		       const struct pp_kmod_anchor *anchor, uint64_t max_bytes,
		       struct pp_kmod_image *out, char *why, size_t why_size);
void pp_kmod_image_fini(struct pp_kmod_image *m);

/* The address the kernel shows for loaded module name's .text now: 0, or -errno. */
int pp_kmod_text_addr(const char *sys_root, const char *name, uint64_t *addr);

#endif /* PP_COLLECTOR_KERNEL_MODULE_H */
