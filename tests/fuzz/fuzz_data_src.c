/*
 * Fuzz target for the data_src decoder and renderers: the input's first 8 bytes (little-endian,
 * zero-padded) are a perf_mem_data_src value. Checks that decoding keeps every defined bit, that
 * each string fits PP_DATA_SRC_STR_MAX, and that rendering into any smaller buffer yields a
 * NUL-terminated prefix of the full text with the length reported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memory/data_src.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef size_t (*render_fn)(const struct pp_data_src *d, char *buf, size_t len);

static uint64_t reencode(const struct pp_data_src *d)
{
	return (uint64_t)d->op << PP_MEM_OP_SHIFT | (uint64_t)d->lvl << PP_MEM_LVL_SHIFT |
	       (uint64_t)d->snoop << PP_MEM_SNOOP_SHIFT | (uint64_t)d->lock << PP_MEM_LOCK_SHIFT |
	       (uint64_t)d->dtlb << PP_MEM_TLB_SHIFT | (uint64_t)d->lvl_num << PP_MEM_LVLNUM_SHIFT |
	       (uint64_t)d->remote << PP_MEM_REMOTE_SHIFT |
	       (uint64_t)d->snoopx << PP_MEM_SNOOPX_SHIFT | (uint64_t)d->blk << PP_MEM_BLK_SHIFT |
	       (uint64_t)d->hops << PP_MEM_HOPS_SHIFT;
}

static void check_render(const struct pp_data_src *d, render_fn fn)
{
	char full[PP_DATA_SRC_STR_MAX + 1], part[PP_DATA_SRC_STR_MAX + 1];
	size_t n = fn(d, full, sizeof(full));

	/* Fits the documented size with room to spare. */
	if (n >= PP_DATA_SRC_STR_MAX - 1 || strlen(full) != n)
		abort();
	for (size_t len = 0; len <= n + 1; len++) {
		size_t m;

		memset(part, 'Z', sizeof(part));
		m = fn(d, part, len);
		if (len == 0) {
			if (m != 0 || part[0] != 'Z')
				abort();
			continue;
		}
		if (m > len - 1 || strlen(part) != m || memcmp(part, full, m) != 0)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char script[PP_DATA_SRC_SCRIPT_MAX];
	struct pp_data_src d;
	uint64_t val = 0;
	size_t n;

	for (size_t i = 0; i < size && i < 8; i++)
		val |= (uint64_t)data[i] << (8 * i);

	pp_data_src_decode(val, &d);
	if (reencode(&d) != (val & ((1ULL << 46) - 1)))
		abort();

	check_render(&d, pp_data_src_level_str);
	check_render(&d, pp_data_src_snoop_str);
	check_render(&d, pp_data_src_tlb_str);
	check_render(&d, pp_data_src_blk_str);
	if (!pp_data_src_op_name(&d) || !pp_data_src_lock_name(&d) || !pp_data_src_level_class(&d))
		abort();

	n = pp_data_src_format_script(val, script, sizeof(script));
	if (n >= sizeof(script) - 1 || strlen(script) != n || strncmp(script, "|OP ", 4) != 0)
		abort();
	return 0;
}
