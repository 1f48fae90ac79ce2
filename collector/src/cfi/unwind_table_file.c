/*
 * The table's file form (unwind_table_file.h). Little-endian, fixed header, then the rules
 * (12 bytes each), the rows' pc offsets (4) and rule indexes (2), and a CRC-32 of all before
 * it. Read back whole: a libclang-cpp table (a million rows) is 6 MiB.
 */
#include "unwind_table_file.h"
#include "unwind_table_priv.h"

#include "base/le.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAGIC "PPUWTAB\n"
#define VERSION 1u
#define NSTATS 10
#define HEADER_BYTES (8 + 4 + 4 + PP_UNWIND_DIGEST_SIZE + 8 + 8 + 4 + 4 + 8 * NSTATS)
#define LOAD_BYTES 32
#define RULE_BYTES 12
#define ROW_BYTES 6
#define CRC_BYTES 4

static void stats_to(const struct pp_unwind_table_stats *s, uint64_t v[NSTATS])
{
	const uint64_t f[NSTATS] = {s->fdes,
				    s->rows,
				    s->cfa_rsp,
				    s->cfa_rbp,
				    s->cfa_plt,
				    s->cfa_signal,
				    s->cfa_unsupported,
				    s->reg_unsupported,
				    s->fdes_unreadable,
				    s->from_debug_frame};

	memcpy(v, f, sizeof(f));
}

static void stats_from(const uint64_t v[NSTATS], struct pp_unwind_table_stats *s)
{
	*s = (struct pp_unwind_table_stats){.fdes = v[0],
					    .rows = v[1],
					    .cfa_rsp = v[2],
					    .cfa_rbp = v[3],
					    .cfa_plt = v[4],
					    .cfa_signal = v[5],
					    .cfa_unsupported = v[6],
					    .reg_unsupported = v[7],
					    .fdes_unreadable = v[8],
					    .from_debug_frame = v[9]};
}

static size_t file_bytes(size_t nloads, size_t nrules, size_t nrows)
{
	return HEADER_BYTES + nloads * LOAD_BYTES + nrules * RULE_BYTES + nrows * ROW_BYTES +
	       CRC_BYTES;
}

int pp_unwind_table_encode(const struct pp_unwind_table *t,
			   const uint8_t digest[PP_UNWIND_DIGEST_SIZE], void **buf, size_t *len)
{
	size_t n = file_bytes(t->nloads, t->nrules, t->n);
	uint64_t stats[NSTATS];
	uint8_t *b = malloc(n), *p = b;

	if (!b)
		return -ENOMEM;
	memcpy(p, MAGIC, 8);
	p += 8;
	p = pp_le_put(p, VERSION, 4);
	p = pp_le_put(p, t->nloads, 4);
	memcpy(p, digest, PP_UNWIND_DIGEST_SIZE);
	p += PP_UNWIND_DIGEST_SIZE;
	p = pp_le_put(p, t->base_pc, 8);
	p = pp_le_put(p, t->n, 8);
	p = pp_le_put(p, t->nrules, 4);
	p = pp_le_put(p, 0, 4);
	stats_to(&t->stats, stats);
	for (int i = 0; i < NSTATS; i++)
		p = pp_le_put(p, stats[i], 8);
	for (size_t i = 0; i < t->nloads; i++) {
		p = pp_le_put(p, t->loads[i].vaddr, 8);
		p = pp_le_put(p, t->loads[i].offset, 8);
		p = pp_le_put(p, t->loads[i].filesz, 8);
		p = pp_le_put(p, t->loads[i].exec, 8);
	}
	for (size_t i = 0; i < t->nrules; i++) {
		const struct row_rule *r = &t->rules[i];

		p = pp_le_put(p, (uint32_t)r->cfa_off, 4);
		p = pp_le_put(p, (uint16_t)r->rbp_off, 2);
		p = pp_le_put(p, (uint16_t)r->ra_off, 2);
		*p++ = r->cfa_rule;
		*p++ = r->rbp_rule;
		*p++ = r->ra_rule;
		*p++ = r->flags;
	}
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, t->pc_offs, t->n * 4);
	p += t->n * 4;
	memcpy(p, t->rule_ix, t->n * 2);
	p += t->n * 2;
#else
	for (size_t i = 0; i < t->n; i++)
		p = pp_le_put(p, t->pc_offs[i], 4);
	for (size_t i = 0; i < t->n; i++)
		p = pp_le_put(p, t->rule_ix[i], 2);
#endif
	p = pp_le_put(p, crc32(0, b, (uInt)(p - b)), 4);
	*buf = b;
	*len = n;
	return 0;
}

static bool rule_known(const struct row_rule *r)
{
	return r->cfa_rule <= PP_CFA_UNSUPPORTED && r->rbp_rule <= PP_REG_UNSUPPORTED &&
	       r->ra_rule <= PP_REG_UNSUPPORTED && !(r->flags & ~PP_UNWIND_SIGNAL_FRAME);
}

/* t let go, and buf with it (t owns buf once it is made); NULL with errno err. */
static struct pp_unwind_table *fail(struct pp_unwind_table *t, void *buf, size_t map_len, int err)
{
	if (!t)
		pp_unwind_backing_release(buf, map_len);
	pp_unwind_table_free(t);
	errno = err;
	return NULL;
}

struct pp_unwind_table *pp_unwind_table_decode(void *buf, size_t len, size_t map_len,
					       uint8_t digest_out[PP_UNWIND_DIGEST_SIZE])
{
	const uint8_t *p = buf;
	uint64_t nloads, nrows, nrules, exec, stats[NSTATS];
	struct pp_unwind_table *t;

	if (!buf || len < HEADER_BYTES + CRC_BYTES || memcmp(p, MAGIC, 8) != 0)
		return fail(NULL, buf, map_len, EBADMSG);
	p += 8;
	if (pp_le_get(&p, 4) != VERSION)
		return fail(NULL, buf, map_len, EPROTO);
	nloads = pp_le_get(&p, 4);
	memcpy(digest_out, p, PP_UNWIND_DIGEST_SIZE);
	p += PP_UNWIND_DIGEST_SIZE;
	t = calloc(1, sizeof(*t));
	if (!t)
		return fail(NULL, buf, map_len, ENOMEM);
	t->backing = buf;
	t->backing_map_len = map_len;
	t->base_pc = pp_le_get(&p, 8);
	nrows = pp_le_get(&p, 8);
	nrules = pp_le_get(&p, 4);
	/* the counts bound the sizes before any is multiplied */
	if (nloads > PP_UNWIND_MAX_LOADS || !nrows || nrows > DEFAULT_MAX_ROWS || !nrules ||
	    nrules > MAX_TABLE_RULES || pp_le_get(&p, 4) != 0 ||
	    len != file_bytes(nloads, nrules, nrows))
		return fail(t, buf, map_len, EBADMSG);
	{
		const uint8_t *end = (const uint8_t *)buf + len - CRC_BYTES, *q = end;

		if (pp_le_get(&q, 4) != crc32(0, buf, (uInt)(len - CRC_BYTES)))
			return fail(t, buf, map_len, EBADMSG);
	}
	for (int i = 0; i < NSTATS; i++)
		stats[i] = pp_le_get(&p, 8);
	stats_from(stats, &t->stats);
	t->nloads = nloads;
	for (size_t i = 0; i < nloads; i++) {
		t->loads[i].vaddr = pp_le_get(&p, 8);
		t->loads[i].offset = pp_le_get(&p, 8);
		t->loads[i].filesz = pp_le_get(&p, 8);
		exec = pp_le_get(&p, 8);
		if (exec > 1)
			return fail(t, buf, map_len, EBADMSG);
		t->loads[i].exec = (uint32_t)exec;
	}
	t->rules = malloc(nrules * sizeof(*t->rules));
	if (!t->rules)
		return fail(t, buf, map_len, ENOMEM);
	t->nrules = t->rules_cap = nrules;
	t->n = t->cap = t->max_rows = nrows;
	for (size_t i = 0; i < nrules; i++) {
		struct row_rule *r = &t->rules[i];

		r->cfa_off = (int32_t)(uint32_t)pp_le_get(&p, 4);
		r->rbp_off = (int16_t)(uint16_t)pp_le_get(&p, 2);
		r->ra_off = (int16_t)(uint16_t)pp_le_get(&p, 2);
		r->cfa_rule = *p++;
		r->rbp_rule = *p++;
		r->ra_rule = *p++;
		r->flags = *p++;
		if (!rule_known(r))
			return fail(t, buf, map_len, EBADMSG);
	}
	/*
	 * The rows where they lie, as they are laid out in memory (little-endian hosts; swapped
	 * in place on others), then checked: the header, 152 bytes, the segments, 32 each, and
	 * the rules, 12 each, keep the pc offsets 4-aligned in malloc's buffer or a mapping,
	 * the indexes 2. A mapping is private: the swaps in place stay this process's.
	 */
	_Static_assert(HEADER_BYTES % 4 == 0 && LOAD_BYTES % 4 == 0 && RULE_BYTES % 4 == 0,
		       "the rows are aligned in the file form");
	t->pc_offs = (uint32_t *)(void *)((uint8_t *)buf + (p - (const uint8_t *)buf));
	t->rule_ix = (uint16_t *)(void *)(t->pc_offs + nrows);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	if (map_len && mprotect(buf, map_len, PROT_READ | PROT_WRITE))
		return fail(t, buf, map_len, ENOMEM);
	for (size_t i = 0; i < nrows; i++) {
		t->pc_offs[i] = __builtin_bswap32(t->pc_offs[i]);
		t->rule_ix[i] = __builtin_bswap16(t->rule_ix[i]);
	}
#endif
	/* the first row is at the base, the others in order, each naming a rule it has */
	if (t->pc_offs[0] != 0 || t->rule_ix[0] >= nrules)
		return fail(t, buf, map_len, EBADMSG);
	{
		bool bad = false;

		for (size_t i = 1; i < nrows; i++)
			bad |= (t->pc_offs[i] < t->pc_offs[i - 1]) | (t->rule_ix[i] >= nrules);
		if (bad)
			return fail(t, buf, map_len, EBADMSG);
	}
	if (t->base_pc + t->pc_offs[nrows - 1] < t->base_pc)
		return fail(t, buf, map_len, EBADMSG);
	return t;
}
