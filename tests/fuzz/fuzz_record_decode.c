/* Fuzz target: arbitrary bytes as a ring-buffer record. */
#include <stddef.h>
#include <stdint.h>

#include "sampling/record_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	volatile uint64_t sink = 0;

	if (pp_record_decode(data, size, &d, &st) == 0 && d.kind == PP_DECODED_SAMPLE) {
		for (uint32_t i = 0; i < (uint32_t)d.sample.nr_kstack + d.sample.nr_ustack; i++)
			sink += pp_decoded_frame(&d, i);
		/* a stack copy lies within the record, every byte of it */
		for (uint32_t i = 0; d.raw_bytes && i < d.raw.len; i++)
			sink += d.raw_bytes[i];
	}
	(void)sink;
	return 0;
}
