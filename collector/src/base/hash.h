/* A string's 64-bit FNV-1a hash: for the agent's own hash tables and names, never for a key
 * another user may choose to collide (those are checked in full after the hash). */
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

#endif
