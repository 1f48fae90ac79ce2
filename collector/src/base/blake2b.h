/*
 * BLAKE2b (RFC 7693), unkeyed: a digest no one can steer, for naming what was computed from a
 * file another user controls (cfi/unwind_table.h's digest keys the on-disk table cache). Chosen
 * over SHA-256 for speed without CPU extensions: about 1 GB/s in plain C on x86-64, where a
 * plain SHA-256 does a tenth of that, and the digest runs over megabytes of CFI per file.
 * Streaming, no allocation.
 */
#ifndef PP_COLLECTOR_BLAKE2B_H
#define PP_COLLECTOR_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

#define PP_BLAKE2B_MAX_SIZE 64

struct pp_blake2b {
	uint64_t h[8];
	uint64_t t[2]; /* bytes compressed so far */
	uint8_t block[128];
	size_t fill; /* bytes waiting in block */
	size_t outlen;
};

/* A digest of outlen bytes (1..64). */
void pp_blake2b_init(struct pp_blake2b *s, size_t outlen);
void pp_blake2b_update(struct pp_blake2b *s, const void *data, size_t len);
/* Writes the outlen bytes given to pp_blake2b_init. */
void pp_blake2b_final(struct pp_blake2b *s, uint8_t *out);

#endif /* PP_COLLECTOR_BLAKE2B_H */
