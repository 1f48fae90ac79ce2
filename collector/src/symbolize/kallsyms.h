/*
 * Kernel symbols from the text of /proc/kallsyms ("ffffffff81000000 T _stext", module symbols
 * with a "\t[module]" suffix): the text symbols, sorted, so a kernel stack address resolves to
 * a function name and, for module code, the module it lives in.
 */
#ifndef PP_COLLECTOR_KALLSYMS_H
#define PP_COLLECTOR_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct pp_kallsyms;

/*
 * Parse len bytes of kallsyms text (need not be NUL-terminated; the last line may lack its
 * newline). Keeps text symbols (types t, T, w, W), core kernel and module alike; lines that do
 * not parse are skipped and counted. Returns NULL with errno:
 *   EPERM   every text symbol has address 0: kptr_restrict hides addresses from this reader
 *           (run as root with CAP_SYSLOG, or lower kernel.kptr_restrict);
 *   ENOENT  no text symbol in the input;
 *   EINVAL  buf is NULL with len > 0;  ENOMEM.
 */
struct pp_kallsyms *pp_kallsyms_parse(const char *buf, size_t len);

/*
 * Read and parse <proc_root>/kallsyms; proc_root NULL means "/proc" (a test or a container
 * with the host's /proc mounted elsewhere passes its own). Errors as pp_kallsyms_parse, plus
 * the errno of open(2) / read(2).
 */
struct pp_kallsyms *pp_kallsyms_load(const char *proc_root);

/*
 * Kernel symbols on demand: each address not yet covered is named by the kernel itself (a
 * BPF syscall program calling bpf_snprintf "%pS", so kallsyms_lookup's binary search), and
 * the symbol's range is kept, so later addresses in the same function cost nothing. The
 * first max_queries questions (0: 8192, about the CPU of one full read) are answered that
 * way; after them, when the kernel cannot answer one (a name longer than 480 bytes), or when
 * it has named nothing in 16 pages of addresses asked about (each page then answers "no
 * symbol" without a question), <proc_root>/kallsyms is read whole as by pp_kallsyms_load and
 * answers from then on. Worth it because a capture needs a few thousand kernel addresses at
 * most, while reading /proc/kallsyms costs the kernel tens of ms of formatting.
 *
 * Names may differ from a parsed table's where symbols alias one address: the kernel picks
 * its own (the one its stack traces print). pp_kallsyms_find asks the kernel
 * (bpf_kallsyms_lookup_name), which knows data symbols too. Names stay valid until
 * pp_kallsyms_free, as for a table.
 *
 * Needs CAP_BPF and CAP_PERFMON (or root) and Linux 5.16 (syscall programs running
 * bpf_snprintf and bpf_kallsyms_lookup_name). Returns NULL with errno when the kernel refuses
 * (EPERM, EINVAL, EOPNOTSUPP...): the caller then uses pp_kallsyms_load.
 */
struct pp_kallsyms *pp_kallsyms_open_lazy(const char *proc_root, size_t max_queries);

struct pp_kallsyms_stats {
	int on_demand;	     /* opened with pp_kallsyms_open_lazy */
	int table_loaded;    /* the budget was spent (or the kernel failed): the file was read */
	uint64_t queries;    /* addresses the kernel was asked about */
	uint64_t hits;	     /* addresses answered from a kept range */
	uint64_t unresolved; /* addresses the kernel has no symbol for (a page each, asked once) */
};

/* Counters of the on-demand mode; all zero for a parsed table. */
void pp_kallsyms_get_stats(const struct pp_kallsyms *k, struct pp_kallsyms_stats *out);

/* Release. NULL is a no-op. */
void pp_kallsyms_free(struct pp_kallsyms *k);

/*
 * The name of the text symbol covering addr, or NULL. A symbol extends to the next one; the
 * last symbol of the core kernel or of a module extends at most to the end of the next page.
 * *sym_start (may be NULL) gets its address; *module (may be NULL) gets the module name, or
 * NULL for the core kernel. Returned strings are borrowed from k.
 */
const char *pp_kallsyms_lookup(const struct pp_kallsyms *k, uint64_t addr, uint64_t *sym_start,
			       const char **module);

/*
 * The address of the kept symbol named name (first match; a linear scan, for tests and setup,
 * not per sample; on demand, one question to the kernel). Returns 0, or -ENOENT.
 */
int pp_kallsyms_find(const struct pp_kallsyms *k, const char *name, uint64_t *addr);

/*
 * Symbols kept (after dropping duplicate addresses), and input lines that did not parse. On
 * demand: the symbols named so far (the whole table's once read), and its bad lines.
 */
size_t pp_kallsyms_count(const struct pp_kallsyms *k);
size_t pp_kallsyms_bad_lines(const struct pp_kallsyms *k);

#endif /* PP_COLLECTOR_KALLSYMS_H */
