/*
 * Fuzz target for the kernel notes parser (/sys/kernel/notes, ELF notes): any bytes give 0,
 * -ENOENT or -ENOSPC without reading past the buffer, and a build id found is lower-case hex of
 * an even length that fits the buffer it was given, as small buffers are given too.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/kernel_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = {PP_BUILD_ID_HEX_SIZE, 41, 3, 1};
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size); /* exactly size bytes: a read past them is a finding */
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		char out[PP_BUILD_ID_HEX_SIZE];
		size_t len;
		int rc;

		memset(out, 'x', sizeof(out));
		rc = pp_kernel_notes_build_id(copy, size, out, sizes[k]);
		if (rc != 0 && rc != -ENOENT && rc != -ENOSPC)
			abort();
		if (rc)
			continue;
		len = strnlen(out, sizes[k]);
		if (len == sizes[k] || len == 0 || len % 2)
			abort();
		for (size_t i = 0; i < len; i++)
			if (!((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f')))
				abort();
	}
	free(copy);
	return 0;
}
