/*
 * Splits a serialized pprof Profile in two, for a push the server found too large (HTTP 413,
 * or a 400 that says so): each half keeps half of the samples and only the locations,
 * functions, mappings and strings they refer to, so the halves shrink even when the
 * dictionary is most of the bytes. pprof ids are arbitrary, so references are resolved by
 * searching sorted id lists rather than by position; string indexes are renumbered.
 */
#include <pebsprof/writers.h>

#include "base/arena.h"
#include "encode/pbpack.h"
#include "pprof/profile.pb-c.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PROF(x) Perftools__Profiles__##x

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts ids[0..n) and removes repeats; returns the new count. */
static size_t sort_unique(uint64_t *ids, size_t n)
{
	size_t w = 0;

	if (n > 1)
		qsort(ids, n, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (!w || ids[w - 1] != ids[i])
			ids[w++] = ids[i];
	return w;
}

static bool has_id(const uint64_t *ids, size_t n, uint64_t id)
{
	return bsearch(&id, ids, n, sizeof(*ids), cmp_u64) != NULL;
}

/* String references: marked in one pass, renumbered in the next. */
struct strings {
	int32_t *map; /* mark: 1 if referenced; renumber: the new index */
	size_t n;
	bool renumber;
	bool bad;
};

static void str_ref(struct strings *st, int64_t *idx)
{
	if (*idx < 0 || (uint64_t)*idx >= st->n) {
		st->bad = true;
		return;
	}
	if (st->renumber)
		*idx = st->map[*idx];
	else
		st->map[*idx] = 1;
}

static void walk_strings(struct strings *st, PROF(Profile) * p)
{
	for (size_t i = 0; i < p->n_sample_type; i++) {
		str_ref(st, &p->sample_type[i]->type);
		str_ref(st, &p->sample_type[i]->unit);
	}
	for (size_t i = 0; i < p->n_sample; i++)
		for (size_t j = 0; j < p->sample[i]->n_label; j++) {
			PROF(Label) *l = p->sample[i]->label[j];

			str_ref(st, &l->key);
			str_ref(st, &l->str);
			str_ref(st, &l->num_unit);
		}
	for (size_t i = 0; i < p->n_mapping; i++) {
		str_ref(st, &p->mapping[i]->filename);
		str_ref(st, &p->mapping[i]->build_id);
	}
	for (size_t i = 0; i < p->n_function; i++) {
		str_ref(st, &p->function[i]->name);
		str_ref(st, &p->function[i]->system_name);
		str_ref(st, &p->function[i]->filename);
	}
	str_ref(st, &p->drop_frames);
	str_ref(st, &p->keep_frames);
	if (p->period_type) {
		str_ref(st, &p->period_type->type);
		str_ref(st, &p->period_type->unit);
	}
	for (size_t i = 0; i < p->n_comment; i++)
		str_ref(st, &p->comment[i]);
	str_ref(st, &p->default_sample_type);
	str_ref(st, &p->doc_url);
}

static int prune_strings(struct pp_arena *a, PROF(Profile) * p)
{
	struct strings st = {.n = p->n_string_table};
	size_t w = 0;

	if (!st.n)
		return -EINVAL; /* string_table[0] must be "" */
	st.map = pp_arena_alloc(a, st.n * sizeof(*st.map));
	if (!st.map)
		return -ENOMEM;
	st.map[0] = 1;
	walk_strings(&st, p);
	if (st.bad)
		return -EINVAL;
	for (size_t i = 0; i < st.n; i++) {
		if (!st.map[i])
			continue;
		p->string_table[w] = p->string_table[i];
		st.map[i] = (int32_t)w++;
	}
	p->n_string_table = w;
	st.renumber = true;
	walk_strings(&st, p);
	return 0;
}

/* Keeps samples [lo, hi) and what they refer to. */
static int keep_samples(struct pp_arena *a, PROF(Profile) * p, size_t lo, size_t hi)
{
	size_t nl = 0, nf = 0, nm = 0, w;
	uint64_t *locs, *funcs, *maps;

	p->sample += lo;
	p->n_sample = hi - lo;
	for (size_t i = 0; i < p->n_sample; i++)
		nl += p->sample[i]->n_location_id;
	locs = pp_arena_alloc(a, (nl + 1) * sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	nl = 0;
	for (size_t i = 0; i < p->n_sample; i++)
		for (size_t j = 0; j < p->sample[i]->n_location_id; j++)
			locs[nl++] = p->sample[i]->location_id[j];
	nl = sort_unique(locs, nl);

	w = 0;
	for (size_t i = 0; i < p->n_location; i++)
		if (has_id(locs, nl, p->location[i]->id)) {
			p->location[w++] = p->location[i];
			nf += p->location[i]->n_line;
		}
	p->n_location = w;
	funcs = pp_arena_alloc(a, (nf + 1) * sizeof(*funcs));
	maps = pp_arena_alloc(a, (p->n_location + 1) * sizeof(*maps));
	if (!funcs || !maps)
		return -ENOMEM;
	nf = 0;
	for (size_t i = 0; i < p->n_location; i++) {
		maps[nm++] = p->location[i]->mapping_id;
		for (size_t j = 0; j < p->location[i]->n_line; j++)
			funcs[nf++] = p->location[i]->line[j]->function_id;
	}
	nf = sort_unique(funcs, nf);
	nm = sort_unique(maps, nm);
	w = 0;
	for (size_t i = 0; i < p->n_function; i++)
		if (has_id(funcs, nf, p->function[i]->id))
			p->function[w++] = p->function[i];
	p->n_function = w;
	w = 0;
	for (size_t i = 0; i < p->n_mapping; i++)
		if (has_id(maps, nm, p->mapping[i]->id))
			p->mapping[w++] = p->mapping[i];
	p->n_mapping = w;
	return prune_strings(a, p);
}

static int make_half(const uint8_t *buf, size_t len, bool first, uint8_t **out, size_t *out_len)
{
	struct pp_arena a = {0};
	ProtobufCAllocator alloc = pp_arena_pb_allocator(&a);
	PROF(Profile) * p;
	size_t cut;
	int ret;

	p = perftools__profiles__profile__unpack(&alloc, len, buf);
	if (!p) {
		ret = a.failed ? -ENOMEM : -EINVAL;
		pp_arena_fini(&a);
		return ret;
	}
	cut = p->n_sample / 2;
	ret = first ? keep_samples(&a, p, 0, cut) : keep_samples(&a, p, cut, p->n_sample);
	if (!ret)
		ret = pp_pb_pack(&p->base, out, out_len);
	pp_arena_fini(&a);
	return ret;
}

int pp_pprof_split(const uint8_t *buf, size_t len, uint8_t **first, size_t *first_len,
		   uint8_t **second, size_t *second_len)
{
	struct pp_arena a = {0};
	ProtobufCAllocator alloc = pp_arena_pb_allocator(&a);
	PROF(Profile) * p;
	size_t n;
	int ret;

	if (!buf || !first || !first_len || !second || !second_len)
		return -EINVAL;
	*first = *second = NULL;
	*first_len = *second_len = 0;
	p = perftools__profiles__profile__unpack(&alloc, len, buf);
	n = p ? p->n_sample : 0;
	ret = p ? 0 : a.failed ? -ENOMEM : -EINVAL;
	pp_arena_fini(&a);
	if (ret)
		return ret;
	if (n < 2)
		return -E2BIG;
	ret = make_half(buf, len, true, first, first_len);
	if (!ret)
		ret = make_half(buf, len, false, second, second_len);
	if (ret) {
		free(*first);
		*first = NULL;
		*first_len = 0;
	}
	return ret;
}
