/*
 * The names symbol tables gave for addresses, kept across profile windows: a frame is named
 * again at each window (its location belongs to that window's profile) and again when the
 * identity that keyed it by file expires, while the table and the address that named it are
 * the same. The memo answers those from the name found the first time, without the table's
 * search or the demangler. Keyed by the table's serial (pp_elf_symbols_serial: never reused,
 * so a freed table's answers cannot name another's addresses) and the address in the file.
 * Bounded: the slots and the bytes of names are fixed at creation; when either is full the
 * memo starts over.
 */
#ifndef PP_NAME_MEMO_H
#define PP_NAME_MEMO_H

#include <stddef.h>
#include <stdint.h>

struct pp_name_memo;

struct pp_name_memo_stats {
	uint64_t hits, misses;
	uint64_t resets; /* started over, full */
	size_t bytes;	 /* held: slots and the names' bytes in use */
};

/* slots: rounded up to a power of two (at least 64); name_bytes: the names' arena. */
struct pp_name_memo *pp_name_memo_new(size_t slots, size_t name_bytes);
void pp_name_memo_free(struct pp_name_memo *m);

/*
 * What table `table` named address vaddr: 1 with *name (the demangled name) and *system_name
 * (the symbol as the file spells it), both NULL where the table names nothing there, valid
 * until the next put; 0 when not memoized.
 */
int pp_name_memo_get(struct pp_name_memo *m, uint64_t table, uint64_t vaddr, const char **name,
		     const char **system_name);

/*
 * Remember that table named vaddr name (system_name its raw form; both NULL: nothing). A
 * name longer than the arena allows is not kept. table 0 is no table: ignored.
 */
void pp_name_memo_put(struct pp_name_memo *m, uint64_t table, uint64_t vaddr, const char *name,
		      const char *system_name);

void pp_name_memo_stats(const struct pp_name_memo *m, struct pp_name_memo_stats *out);

#endif
