/*
 * Fuzz target for Go's function table reader: the bytes are a .gopclntab section (either byte
 * order by the last byte); every function it lists must lie inside it and end after it starts.
 */
#include <stddef.h>
#include <stdint.h>

#include "symbolize/go_pclntab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_gopcln t;

	if (!size || pp_gopcln_open(&t, data, size, data[size - 1] & 1))
		return 0;
	for (uint64_t i = 0; i < t.nfunc && i < 100000; i++) {
		uint64_t entry, end, name;

		if (pp_gopcln_func(&t, i, &entry, &end, &name))
			continue;
		if (end <= entry || name >= size)
			__builtin_trap();
	}
	return 0;
}
