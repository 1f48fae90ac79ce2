/* BLAKE2b as RFC 7693 gives it (sections 3.1-3.3), one 128-byte block at a time. */
#include "blake2b.h"

#include <string.h>

static const uint64_t iv[8] = {
    0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull,
    0x510e527fade682d1ull, 0x9b05688c2b3e6c1full, 0x1f83d9abfb41bd6bull, 0x5be0cd19137e2179ull,
};

static const uint8_t sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static uint64_t ror64(uint64_t x, unsigned n)
{
	return x >> n | x << (64 - n);
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

#define G(a, b, c, d, x, y)                                                                        \
	do {                                                                                       \
		a = a + b + (x);                                                                   \
		d = ror64(d ^ a, 32);                                                              \
		c = c + d;                                                                         \
		b = ror64(b ^ c, 24);                                                              \
		a = a + b + (y);                                                                   \
		d = ror64(d ^ a, 16);                                                              \
		c = c + d;                                                                         \
		b = ror64(b ^ c, 63);                                                              \
	} while (0)

#define ROUND(r)                                                                                   \
	do {                                                                                       \
		G(v[0], v[4], v[8], v[12], m[sigma[r][0]], m[sigma[r][1]]);                        \
		G(v[1], v[5], v[9], v[13], m[sigma[r][2]], m[sigma[r][3]]);                        \
		G(v[2], v[6], v[10], v[14], m[sigma[r][4]], m[sigma[r][5]]);                       \
		G(v[3], v[7], v[11], v[15], m[sigma[r][6]], m[sigma[r][7]]);                       \
		G(v[0], v[5], v[10], v[15], m[sigma[r][8]], m[sigma[r][9]]);                       \
		G(v[1], v[6], v[11], v[12], m[sigma[r][10]], m[sigma[r][11]]);                     \
		G(v[2], v[7], v[8], v[13], m[sigma[r][12]], m[sigma[r][13]]);                      \
		G(v[3], v[4], v[9], v[14], m[sigma[r][14]], m[sigma[r][15]]);                      \
	} while (0)

static void compress(struct pp_blake2b *s, const uint8_t *block, int last)
{
	uint64_t m[16], v[16];

	for (int i = 0; i < 16; i++)
		m[i] = load64(block + 8 * i);
	for (int i = 0; i < 8; i++) {
		v[i] = s->h[i];
		v[i + 8] = iv[i];
	}
	v[12] ^= s->t[0];
	v[13] ^= s->t[1];
	if (last)
		v[14] = ~v[14];
		/* unrolled, the message schedule's indexes are constants: m stays in registers */
#if defined(__clang__)
#pragma clang loop unroll(full)
#elif defined(__GNUC__)
#pragma GCC unroll 12
#endif
	for (int r = 0; r < 12; r++)
		ROUND(r);
	for (int i = 0; i < 8; i++)
		s->h[i] ^= v[i] ^ v[i + 8];
}

static void count(struct pp_blake2b *s, uint64_t n)
{
	s->t[0] += n;
	s->t[1] += s->t[0] < n;
}

void pp_blake2b_init(struct pp_blake2b *s, size_t outlen)
{
	if (!outlen || outlen > PP_BLAKE2B_MAX_SIZE)
		outlen = PP_BLAKE2B_MAX_SIZE;
	memcpy(s->h, iv, sizeof(iv));
	s->h[0] ^= 0x01010000ull ^ outlen; /* depth 1, fanout 1, no key */
	s->t[0] = s->t[1] = 0;
	s->fill = 0;
	s->outlen = outlen;
}

void pp_blake2b_update(struct pp_blake2b *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	/* a full block is compressed only once more input follows: the last one is marked */
	while (len) {
		size_t take;

		if (s->fill == sizeof(s->block)) {
			count(s, sizeof(s->block));
			compress(s, s->block, 0);
			s->fill = 0;
		}
		if (!s->fill) {
			for (; len > sizeof(s->block);
			     p += sizeof(s->block), len -= sizeof(s->block)) {
				count(s, sizeof(s->block));
				compress(s, p, 0);
			}
		}
		take = sizeof(s->block) - s->fill < len ? sizeof(s->block) - s->fill : len;
		memcpy(s->block + s->fill, p, take);
		s->fill += take;
		p += take;
		len -= take;
	}
}

void pp_blake2b_final(struct pp_blake2b *s, uint8_t *out)
{
	uint8_t h[PP_BLAKE2B_MAX_SIZE];

	count(s, s->fill);
	memset(s->block + s->fill, 0, sizeof(s->block) - s->fill);
	compress(s, s->block, 1);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 8; j++)
			h[8 * i + j] = (uint8_t)(s->h[i] >> (8 * j));
	memcpy(out, h, s->outlen);
}
