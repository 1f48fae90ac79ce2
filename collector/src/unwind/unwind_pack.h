/*
 * The shim's compact form of unwind tables (record.h): a table's rows become 4-byte words in
 * 64 KiB pages, each naming its rule in a dictionary that all tables share, where each
 * distinct rule is kept once however many rows and tables use it. The rows of large C++
 * programs repeat a few thousand rules millions of times, so a row shrinks from the 16 bytes
 * a rule takes to 4. pp_unwind_packed_find is the shim's lookup in C, for tests.
 */
#ifndef PP_COLLECTOR_UNWIND_PACK_H
#define PP_COLLECTOR_UNWIND_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pebsprof/record.h>

#include "cfi/unwind_table.h"

/* The rule dictionary: rule 0 is "no CFI here", the others counted by the tables using them. */
struct pp_unwind_rules;

/* A dictionary of at most max rules (rule 0 included; at most PP_UW_MAX_RULES), or NULL. */
struct pp_unwind_rules *pp_unwind_rules_new(uint32_t max);
void pp_unwind_rules_free(struct pp_unwind_rules *d);
/* Rules in use, rule 0 included. */
uint32_t pp_unwind_rules_count(const struct pp_unwind_rules *d);
/* The rule at index i (rule 0 and unused indexes read as zeros). */
const struct pp_bpf_unwind_rule *pp_unwind_rules_at(const struct pp_unwind_rules *d, uint32_t i);

/*
 * A row's rule as the rule array holds it, the whole struct written (the dictionary compares
 * and hashes bytes): false for a row without CFI, which names rule 0.
 */
bool pp_unwind_rule_of_row(const struct pp_unwind_row *row, struct pp_bpf_unwind_rule *out);
/* The other way: the row at pc that a rule of the rule array stands for. */
struct pp_unwind_row pp_unwind_row_of_rule(const struct pp_bpf_unwind_rule *rule, uint64_t pc);
/* Whether rule i, holding *rule, is the one the row names (rule 0 for a row without CFI). */
bool pp_unwind_rule_matches(uint32_t i, const struct pp_bpf_unwind_rule *rule,
			    const struct pp_unwind_row *row);

/* A table in the shim's form. */
struct pp_unwind_packed {
	uint32_t *words; /* nr_pages + 1 page words, then the rows */
	uint32_t nwords;
	uint32_t nr_pages;
	uint64_t base_vaddr; /* the ELF address page 0 starts at (the first row's) */
	uint16_t *rules;     /* the distinct rules its rows name, each held once */
	uint32_t nrules;
	uint16_t *new_rules; /* those the dictionary did not have before: the shim needs them */
	uint32_t nnew;
};

/*
 * Pack the table's rows, holding each rule they name in d. At most max_words words (0: the
 * shim's PP_UW_MAX_TABLE_WORDS). 0, or:
 *   -E2BIG   more words than that, or code spanning 4 GiB or more;
 *   -ENOSPC  the dictionary cannot take the table's new rules (nothing held);
 *   -ENODATA no rows;
 *   -ENOMEM.
 */
int pp_unwind_pack(const struct pp_unwind_table *t, struct pp_unwind_rules *d, uint32_t max_words,
		   struct pp_unwind_packed *out);
/* Let go of the table's rules (rules no table holds become free) and its words. */
void pp_unwind_packed_release(struct pp_unwind_packed *p, struct pp_unwind_rules *d);

/*
 * The shim's lookup: the rule index covering rel (an address less the mapping's base) in a run
 * of nwords words with nr_pages pages; false where the run holds no row for it (outside its
 * pages, or a malformed run).
 */
bool pp_unwind_packed_find(const uint32_t *words, uint32_t nwords, uint32_t nr_pages, uint64_t rel,
			   uint32_t *rule);
/*
 * Its two steps, for a reader that has the run's words only in part (the unwinder's walks of
 * stack copies read them back from the shim's array): the number of rows of the page whose
 * page words are lo and hi, in a run of nwords words with nr_pages pages (0 where they are
 * not a page of such a run); and the rule of the last of a page's n rows at or below key.
 */
uint32_t pp_unwind_packed_page_rows(uint32_t lo, uint32_t hi, uint32_t nr_pages, uint64_t nwords);
bool pp_unwind_packed_page_find(const uint32_t *rows, uint32_t n, uint32_t key, uint32_t *rule);

#endif /* PP_COLLECTOR_UNWIND_PACK_H */
