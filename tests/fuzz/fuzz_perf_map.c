/*
 * Fuzz target for the JIT perf map parser and the /proc/PID/status fields it needs: the bytes
 * are fed in two pieces split at a point the first byte picks (a reread of a growing file),
 * then looked up at every entry's start; the status parser gets the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "symbolize/perf_map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_perf_map *m = pp_perf_map_new(4096, 1u << 20);
	const char *buf = (const char *)data;
	uint32_t nspid, ruid, euid;
	size_t split = size ? data[0] % (size + 1) : 0, used;
	uint64_t probes[] = {0, 0x1000, 0x7f0000001000ull, UINT64_MAX};
	struct pp_perf_map_stats st;

	if (!m)
		return 0;
	used = pp_perf_map_feed(m, buf, split, 0);
	if (used > split)
		__builtin_trap();
	/* what was not consumed is handed again with the rest, as the cache does */
	used += pp_perf_map_feed(m, buf + used, size - used, 1);
	if (used != size)
		__builtin_trap();
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		uint64_t start;
		const char *name = pp_perf_map_lookup(m, probes[i], &start);

		if (name && (start > probes[i] || strlen(name) == 0))
			__builtin_trap();
	}
	pp_perf_map_get_stats(m, &st);
	if (pp_perf_map_bytes(m) > (1u << 20) + 4096)
		__builtin_trap();
	pp_perf_map_free(m);
	(void)pp_perf_map_parse_status(buf, size, &nspid, &ruid, &euid);
	return 0;
}
