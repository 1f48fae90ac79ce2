/*
 * Little-endian fields of the agent's own file formats (the unwind table cache's tables and
 * identities): written and read byte by byte, whatever the host's order or alignment.
 */
#ifndef PP_BASE_LE_H
#define PP_BASE_LE_H

#include <stdint.h>

/* The low `bytes` bytes of v at p; returns the byte after them. */
static inline uint8_t *pp_le_put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

/* The `bytes`-byte value at *p, and *p moved past it. */
static inline uint64_t pp_le_get(const uint8_t **p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)(*p)[i] << (8 * i);
	*p += bytes;
	return v;
}

#endif /* PP_BASE_LE_H */
