/* LSD radix sort by bytes: all eight histograms in one pass, then one move per varying byte. */
#include "radix_sort.h"

#include <string.h>

void pp_radix_sort_pairs(struct pp_sort_pair *v, struct pp_sort_pair *tmp, size_t n)
{
	size_t count[8][256];
	struct pp_sort_pair *src = v, *dst = tmp;

	if (n < 2)
		return;
	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			count[b][(v[i].key >> (8 * b)) & 0xff]++;
	for (int b = 0; b < 8; b++) {
		size_t pos = 0;
		int shift = 8 * b;

		if (count[b][(v[0].key >> shift) & 0xff] == n)
			continue; /* every key has this byte: nothing moves */
		for (int k = 0; k < 256; k++) {
			size_t c = count[b][k];

			count[b][k] = pos;
			pos += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[b][(src[i].key >> shift) & 0xff]++] = src[i];
		{
			struct pp_sort_pair *t = src;

			src = dst;
			dst = t;
		}
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
}
