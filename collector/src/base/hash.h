/*
 * Hashes for the agent's own tables and names, never for a key another user may choose to
 * collide (those are checked in full after the hash): a string's 64-bit FNV-1a hash, and a
 * 64-bit key's bits mixed (MurmurHash3's finalizer) so that keys close together (addresses,
 * ids) land far apart.
 */
#ifndef PP_BASE_HASH_H
#define PP_BASE_HASH_H

#include <stdint.h>

static inline uint64_t pp_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static inline uint64_t pp_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

#endif
