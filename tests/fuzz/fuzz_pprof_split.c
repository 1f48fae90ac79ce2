/* Fuzz target: arbitrary bytes as a pushed pprof body the server found too large, split. */
#include <stdint.h>
#include <stdlib.h>

#include <pebsprof/writers.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;

	if (pp_pprof_split(data, size, &a, &alen, &b, &blen) == 0) {
		/* Halves split again must not crash either. */
		uint8_t *c = NULL, *d = NULL;
		size_t clen = 0, dlen = 0;

		if (pp_pprof_split(b, blen, &c, &clen, &d, &dlen) == 0) {
			free(c);
			free(d);
		}
		free(a);
		free(b);
	}
	return 0;
}
