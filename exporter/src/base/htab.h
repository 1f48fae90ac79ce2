/*
 * Exporter-private open-addressing hash index: maps a 64-bit hash to a 32-bit index into the
 * caller's own array, so one small table serves every interning need (strings, mappings,
 * locations, samples, flame-graph nodes) without copying keys. The caller supplies equality.
 */
#ifndef PP_EXPORTER_HTAB_H
#define PP_EXPORTER_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_HTAB_NONE UINT32_MAX

struct pp_htab_slot {
	uint32_t hash;	/* low 32 bits of the key's hash, to skip most full compares */
	uint32_t idx_1; /* caller's index + 1; 0 = empty */
};

struct pp_htab {
	struct pp_htab_slot *slots;
	uint32_t mask; /* capacity - 1; capacity is a power of two */
	uint32_t n;
};

/* Returns true when the caller's element idx has the key. */
typedef bool (*pp_htab_eq_fn)(const void *ctx, uint32_t idx, const void *key);

int pp_htab_init(struct pp_htab *t, uint32_t expected);
void pp_htab_fini(struct pp_htab *t);
/* Returns the caller's index of the element with the key, or PP_HTAB_NONE. */
uint32_t pp_htab_find(const struct pp_htab *t, uint64_t hash, pp_htab_eq_fn eq, const void *ctx,
		      const void *key);
/* Adds idx under hash (the caller checked it is absent). Returns 0 or -ENOMEM. */
int pp_htab_insert(struct pp_htab *t, uint64_t hash, uint32_t idx);

/* FNV-1a over bytes, finished with a mixer so the low bits are usable for buckets. */
uint64_t pp_hash_bytes(uint64_t h, const void *buf, size_t len);
uint64_t pp_hash_str(uint64_t h, const char *s);
uint64_t pp_hash_u64(uint64_t h, uint64_t v);

#define PP_HASH_SEED 0xcbf29ce484222325ULL

#endif /* PP_EXPORTER_HTAB_H */
