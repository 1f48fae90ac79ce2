/*
 * Unwind tables in the shim's compact form (see unwind_pack.h): the rule dictionary and the
 * packing of a table's rows into pages of 4-byte words.
 */
#include "unwind_pack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NO_RULE UINT32_MAX
/* A table rule not yet asked of the dictionary (NO_RULE too: a refusal ends the packing). */
#define UNMAPPED NO_RULE
#define PAGE_SIZE_ROWS (1u << PP_UW_PAGE_SHIFT)

struct pp_unwind_rules {
	uint32_t max, used;
	struct pp_bpf_unwind_rule *rules;
	uint32_t *refs;
	uint32_t *next;	  /* the hash chain through the rules */
	uint32_t *bucket; /* nbuckets heads */
	uint32_t nbuckets;
	uint32_t *free_ids; /* a stack of indexes no table holds */
	uint32_t nfree;
};

static uint32_t rule_hash(const struct pp_bpf_unwind_rule *r)
{
	uint64_t h = 1469598103934665603ull;
	const unsigned char *p = (const unsigned char *)r;

	for (size_t i = 0; i < sizeof(*r); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32));
}

struct pp_unwind_rules *pp_unwind_rules_new(uint32_t max)
{
	struct pp_unwind_rules *d;

	if (max < 2 || max > PP_UW_MAX_RULES) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->max = max;
	d->nbuckets = 1;
	while (d->nbuckets < max)
		d->nbuckets <<= 1;
	d->rules = calloc(max, sizeof(*d->rules));
	d->refs = calloc(max, sizeof(*d->refs));
	d->next = calloc(max, sizeof(*d->next));
	d->bucket = malloc(d->nbuckets * sizeof(*d->bucket));
	d->free_ids = malloc(max * sizeof(*d->free_ids));
	if (!d->rules || !d->refs || !d->next || !d->bucket || !d->free_ids) {
		pp_unwind_rules_free(d);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < d->nbuckets; i++)
		d->bucket[i] = NO_RULE;
	/* rule 0 ("no CFI") is never handed out; the lowest indexes are taken first */
	for (uint32_t i = max - 1; i >= 1; i--)
		d->free_ids[d->nfree++] = i;
	d->used = 1;
	return d;
}

void pp_unwind_rules_free(struct pp_unwind_rules *d)
{
	if (!d)
		return;
	free(d->rules);
	free(d->refs);
	free(d->next);
	free(d->bucket);
	free(d->free_ids);
	free(d);
}

uint32_t pp_unwind_rules_count(const struct pp_unwind_rules *d)
{
	return d->used;
}

const struct pp_bpf_unwind_rule *pp_unwind_rules_at(const struct pp_unwind_rules *d, uint32_t i)
{
	static const struct pp_bpf_unwind_rule none;

	return i < d->max && d->refs[i] ? &d->rules[i] : &none;
}

static uint32_t rules_find(const struct pp_unwind_rules *d, const struct pp_bpf_unwind_rule *r)
{
	for (uint32_t i = d->bucket[rule_hash(r) & (d->nbuckets - 1)]; i != NO_RULE; i = d->next[i])
		if (!memcmp(&d->rules[i], r, sizeof(*r)))
			return i;
	return NO_RULE;
}

static uint32_t rules_add(struct pp_unwind_rules *d, const struct pp_bpf_unwind_rule *r)
{
	uint32_t i, b;

	if (!d->nfree)
		return NO_RULE;
	i = d->free_ids[--d->nfree];
	b = rule_hash(r) & (d->nbuckets - 1);
	d->rules[i] = *r;
	d->refs[i] = 0;
	d->next[i] = d->bucket[b];
	d->bucket[b] = i;
	d->used++;
	return i;
}

static void rules_put(struct pp_unwind_rules *d, uint32_t i)
{
	uint32_t *link;

	if (i == 0 || i >= d->max || !d->refs[i] || --d->refs[i])
		return;
	for (link = &d->bucket[rule_hash(&d->rules[i]) & (d->nbuckets - 1)]; *link != NO_RULE;
	     link = &d->next[*link])
		if (*link == i) {
			*link = d->next[i];
			break;
		}
	memset(&d->rules[i], 0, sizeof(d->rules[i]));
	d->free_ids[d->nfree++] = i;
	d->used--;
}

/* What packing one table holds while it runs. */
struct packer {
	struct pp_unwind_rules *d;
	struct pp_unwind_packed *out;
	uint8_t held[PP_UW_MAX_RULES / 8]; /* rules this table holds */
};

bool pp_unwind_rule_of_row(const struct pp_unwind_row *row, struct pp_bpf_unwind_rule *out)
{
	memset(out, 0, sizeof(*out));
	if (row->cfa_rule == PP_CFA_NONE)
		return false;
	out->cfa_off = row->cfa_off;
	out->rbp_off = row->rbp_off;
	out->ra_off = row->ra_off;
	out->cfa_rule = row->cfa_rule;
	out->rbp_rule = row->rbp_rule;
	out->ra_rule = row->ra_rule;
	out->flags = row->flags;
	return true;
}

struct pp_unwind_row pp_unwind_row_of_rule(const struct pp_bpf_unwind_rule *rule, uint64_t pc)
{
	return (struct pp_unwind_row){.pc = pc,
				      .cfa_off = rule->cfa_off,
				      .rbp_off = rule->rbp_off,
				      .ra_off = rule->ra_off,
				      .cfa_rule = rule->cfa_rule,
				      .rbp_rule = rule->rbp_rule,
				      .ra_rule = rule->ra_rule,
				      .flags = rule->flags};
}

bool pp_unwind_rule_matches(uint32_t i, const struct pp_bpf_unwind_rule *rule,
			    const struct pp_unwind_row *row)
{
	struct pp_bpf_unwind_rule want;

	if (!pp_unwind_rule_of_row(row, &want))
		return i == 0;
	return i != 0 && !memcmp(rule, &want, sizeof(want));
}

/* The index of the row's rule, held by the table: 0 for no CFI, NO_RULE when full. */
static uint32_t rule_of(struct packer *pk, const struct pp_unwind_row *row)
{
	struct pp_bpf_unwind_rule r;
	uint32_t i;

	if (!pp_unwind_rule_of_row(row, &r))
		return 0;
	i = rules_find(pk->d, &r);
	if (i == NO_RULE) {
		i = rules_add(pk->d, &r);
		if (i == NO_RULE)
			return NO_RULE;
		pk->out->new_rules[pk->out->nnew++] = (uint16_t)i;
	}
	if (!(pk->held[i / 8] & (1u << (i % 8)))) {
		pk->held[i / 8] |= (uint8_t)(1u << (i % 8));
		pk->d->refs[i]++;
		pk->out->rules[pk->out->nrules++] = (uint16_t)i;
	}
	return i;
}

static void shrink(void **p, size_t n, size_t size)
{
	void *np = realloc(*p, (n ? n : 1) * size);

	if (np)
		*p = np;
}

void pp_unwind_packed_release(struct pp_unwind_packed *p, struct pp_unwind_rules *d)
{
	if (!p)
		return;
	for (uint32_t i = 0; d && i < p->nrules; i++)
		rules_put(d, p->rules[i]);
	free(p->words);
	free(p->rules);
	free(p->new_rules);
	memset(p, 0, sizeof(*p));
}

int pp_unwind_pack(const struct pp_unwind_table *t, struct pp_unwind_rules *d, uint32_t max_words,
		   struct pp_unwind_packed *out)
{
	size_t n = pp_unwind_table_count(t), i = 0;
	struct pp_unwind_table_rows rows;
	uint64_t span, cap;
	uint32_t pos, in_effect = 0;
	struct pp_unwind_row row;
	struct packer *pk;
	uint32_t *local; /* the dictionary's index of each of the table's rules */
	size_t nlocal;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (!n)
		return -ENODATA;
	if (!max_words || max_words > PP_UW_MAX_TABLE_WORDS)
		max_words = PP_UW_MAX_TABLE_WORDS;
	pp_unwind_table_get(t, 0, &row);
	out->base_vaddr = row.pc;
	pp_unwind_table_get(t, n - 1, &row);
	span = row.pc - out->base_vaddr;
	if (span > UINT32_MAX)
		return -E2BIG;
	out->nr_pages = (uint32_t)(span >> PP_UW_PAGE_SHIFT) + 1;
	/* page words, the rows, and a row carried into each page at most */
	cap = (uint64_t)out->nr_pages * 2 + 1 + n;
	if ((uint64_t)out->nr_pages + 1 + n > max_words)
		return -E2BIG;
	if (cap > max_words)
		cap = max_words;
	pk = calloc(1, sizeof(*pk));
	nlocal = pp_unwind_table_rule_count(t) + 1;
	local = malloc(nlocal * sizeof(*local));
	if (local)
		memset(local, 0xff, nlocal * sizeof(*local)); /* every one UNMAPPED */
	out->words = malloc(cap * sizeof(*out->words));
	out->rules = malloc(PP_UW_MAX_RULES * sizeof(*out->rules));
	out->new_rules = malloc(PP_UW_MAX_RULES * sizeof(*out->new_rules));
	if (!pk || !local || !out->words || !out->rules || !out->new_rules) {
		ret = -ENOMEM;
		goto fail;
	}
	pk->d = d;
	pk->out = out;
	pp_unwind_table_get_rows(t, &rows);
	pos = out->nr_pages + 1;
	for (uint32_t p = 0; p < out->nr_pages; p++) {
		uint64_t page_end = ((uint64_t)p + 1) << PP_UW_PAGE_SHIFT;
		uint32_t page_first = pos;

		out->words[p] = pos;
		for (; i < n; i++) {
			uint64_t rel = rows.base_pc + rows.pc_offs[i] - out->base_vaddr;
			uint32_t lo = (uint32_t)(rel & (PAGE_SIZE_ROWS - 1)), rule, k;

			if (rel >= page_end)
				break;
			/* the dictionary is asked once per rule of the table, not once per row */
			k = rows.rule_ix[i];
			if (local[k] == UNMAPPED) {
				pp_unwind_table_rule_get(t, k, &row);
				local[k] = rule_of(pk, &row);
			}
			rule = local[k];
			if (rule == NO_RULE) {
				ret = -ENOSPC;
				goto fail;
			}
			if (pos == page_first && lo != 0) {
				if (pos == cap) {
					ret = -E2BIG;
					goto fail;
				}
				/* the page starts inside the previous page's last row */
				out->words[pos++] = PP_UW_ROW(0, in_effect);
			}
			in_effect = rule;
			if (pos > page_first && PP_UW_ROW_PC_LO(out->words[pos - 1]) == lo) {
				out->words[pos - 1] = PP_UW_ROW(lo, rule); /* two rows at one pc */
				continue;
			}
			if (pos > page_first && PP_UW_ROW_RULE(out->words[pos - 1]) == rule)
				continue;
			if (pos == cap) {
				ret = -E2BIG;
				goto fail;
			}
			out->words[pos++] = PP_UW_ROW(lo, rule);
		}
		if (pos == page_first) { /* a page no row starts in */
			if (pos == cap) {
				ret = -E2BIG;
				goto fail;
			}
			out->words[pos++] = PP_UW_ROW(0, in_effect);
		}
	}
	out->words[out->nr_pages] = pos;
	out->nwords = pos;
	free(pk);
	free(local);
	/* kept as long as the table is: only what it holds */
	shrink((void **)&out->rules, out->nrules, sizeof(*out->rules));
	shrink((void **)&out->new_rules, out->nnew, sizeof(*out->new_rules));
	shrink((void **)&out->words, out->nwords, sizeof(*out->words));
	return 0;
fail:
	free(pk);
	free(local);
	pp_unwind_packed_release(out, d);
	return ret;
}

uint32_t pp_unwind_packed_page_rows(uint32_t lo, uint32_t hi, uint32_t nr_pages, uint64_t nwords)
{
	if (hi <= lo || hi > nwords || lo < nr_pages + 1 || hi - lo > PAGE_SIZE_ROWS)
		return 0;
	return hi - lo;
}

bool pp_unwind_packed_page_find(const uint32_t *rows, uint32_t n, uint32_t key, uint32_t *rule)
{
	uint32_t base = 0;

	if (!n)
		return false;
	/* the shim's search: the last row at or below key */
	while (n > 1) {
		uint32_t half = n / 2;

		if (PP_UW_ROW_PC_LO(rows[base + half]) <= key)
			base += half;
		n -= half;
	}
	if (PP_UW_ROW_PC_LO(rows[base]) > key)
		return false;
	*rule = PP_UW_ROW_RULE(rows[base]);
	return true;
}

bool pp_unwind_packed_find(const uint32_t *words, uint32_t nwords, uint32_t nr_pages, uint64_t rel,
			   uint32_t *rule)
{
	uint64_t page = rel >> PP_UW_PAGE_SHIFT;
	uint32_t n;

	if (page >= nr_pages || (uint64_t)nr_pages + 1 > nwords)
		return false;
	n = pp_unwind_packed_page_rows(words[page], words[page + 1], nr_pages, nwords);
	return n && pp_unwind_packed_page_find(words + words[page], n,
					       (uint32_t)(rel & (PAGE_SIZE_ROWS - 1)), rule);
}
