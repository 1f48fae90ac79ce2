/*
 * Open-addressing (linear probing) hash index used by the exporter's interning tables. Kept
 * at most 70% full so probes stay short; grows by doubling.
 */
#include "htab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t pp_hash_bytes(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return mix64(h ^ len);
}

uint64_t pp_hash_str(uint64_t h, const char *s)
{
	return pp_hash_bytes(h, s, strlen(s));
}

uint64_t pp_hash_u64(uint64_t h, uint64_t v)
{
	return mix64(h ^ mix64(v + 0x9e3779b97f4a7c15ULL));
}

int pp_htab_init(struct pp_htab *t, uint32_t expected)
{
	uint32_t cap = 16;

	while (cap < expected * 2 && cap < (1u << 30))
		cap <<= 1;
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->mask = cap - 1;
	t->n = 0;
	return 0;
}

void pp_htab_fini(struct pp_htab *t)
{
	free(t->slots);
	t->slots = NULL;
	t->mask = 0;
	t->n = 0;
}

uint32_t pp_htab_find(const struct pp_htab *t, uint64_t hash, pp_htab_eq_fn eq, const void *ctx,
		      const void *key)
{
	uint32_t h32 = (uint32_t)hash;

	if (!t->slots)
		return PP_HTAB_NONE;
	for (uint32_t i = h32 & t->mask;; i = (i + 1) & t->mask) {
		const struct pp_htab_slot *s = &t->slots[i];

		if (!s->idx_1)
			return PP_HTAB_NONE;
		if (s->hash == h32 && eq(ctx, s->idx_1 - 1, key))
			return s->idx_1 - 1;
	}
}

static void place(struct pp_htab_slot *slots, uint32_t mask, uint32_t h32, uint32_t idx_1)
{
	uint32_t i = h32 & mask;

	while (slots[i].idx_1)
		i = (i + 1) & mask;
	slots[i].hash = h32;
	slots[i].idx_1 = idx_1;
}

static int grow(struct pp_htab *t)
{
	uint32_t old_cap = t->mask + 1, cap = old_cap * 2;
	struct pp_htab_slot *slots;

	if (old_cap >= (1u << 31))
		return -ENOMEM;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < old_cap; i++) {
		if (t->slots[i].idx_1)
			place(slots, cap - 1, t->slots[i].hash, t->slots[i].idx_1);
	}
	free(t->slots);
	t->slots = slots;
	t->mask = cap - 1;
	return 0;
}

int pp_htab_insert(struct pp_htab *t, uint64_t hash, uint32_t idx)
{
	int err;

	if (idx >= PP_HTAB_NONE - 1)
		return -ENOMEM;
	if (!t->slots) {
		err = pp_htab_init(t, 0);
		if (err)
			return err;
	}
	if ((uint64_t)(t->n + 1) * 10 > (uint64_t)(t->mask + 1) * 7) {
		err = grow(t);
		if (err)
			return err;
	}
	place(t->slots, t->mask, (uint32_t)hash, idx + 1);
	t->n++;
	return 0;
}
