/*
 * Interned string table shared by the pprof and OTLP encoders (see strtab.h). Strings are
 * found through the exporter's hash index, so adding is O(1) and the array stays in insertion
 * order, which is the order the encoders emit.
 */
#include "strtab.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_strtab *t = ctx;

	return strcmp(t->strs[idx], key) == 0;
}

int pp_strtab_init(struct pp_strtab *t)
{
	int32_t r;

	memset(t, 0, sizeof(*t));
	r = pp_strtab_add(t, "");
	if (r < 0) {
		pp_strtab_fini(t);
		return r;
	}
	return 0;
}

void pp_strtab_fini(struct pp_strtab *t)
{
	free(t->strs);
	pp_htab_fini(&t->idx);
	memset(t, 0, sizeof(*t));
}

int32_t pp_strtab_add(struct pp_strtab *t, const char *s)
{
	uint64_t h = pp_hash_str(PP_HASH_SEED, s);
	uint32_t i = pp_htab_find(&t->idx, h, str_eq, t, s);

	if (i != PP_HTAB_NONE)
		return (int32_t)i;
	if (t->n >= INT32_MAX)
		return -E2BIG;
	if (t->n == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 256;
		const char **n;

		/* Doubling past 2^30 would overshoot the index bound; stop at it instead. */
		if (t->cap >= (1u << 30))
			ncap = INT32_MAX;
		n = realloc(t->strs, (size_t)ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->strs = n;
		t->cap = ncap;
	}
	if (pp_htab_insert(&t->idx, h, t->n))
		return -ENOMEM;
	t->strs[t->n] = s;
	return (int32_t)t->n++;
}
