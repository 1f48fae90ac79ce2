/*
 * Fuzz target for the /proc/PID/maps parser (and the /proc/PID/stat parser, which reads the
 * same kind of untrusted text): parse the bytes, check the table's invariants, and check that
 * binary-search lookups agree with a linear scan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "process/proc_cache.h"
#include "process/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct pp_map_entry *linear_find(const struct pp_maps *m, uint64_t addr)
{
	for (size_t i = 0; i < m->n; i++)
		if (addr >= m->entries[i].start && addr < m->entries[i].end)
			return &m->entries[i];
	return NULL;
}

static void check_lookup(const struct pp_maps *m, uint64_t addr)
{
	if (pp_maps_find(m, addr) != linear_find(m, addr))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_maps m;
	struct pp_proc_stat st;
	uint64_t probe = 0;

	if (pp_maps_parse((const char *)data, size, &m) != 0)
		return 0;
	if (m.n + m.bad_lines == 0 && size != 0)
		abort(); /* every non-empty input has at least one line */
	for (size_t i = 0; i < m.n; i++) {
		const struct pp_map_entry *e = &m.entries[i];

		if (e->start >= e->end || (i && m.entries[i - 1].end > e->start))
			abort();
		if (strlen(e->path) > size || e->kind > PP_MAP_KIND_OTHER || e->perms > 0xf)
			abort();
		check_lookup(&m, e->start);
		check_lookup(&m, e->end - 1);
		check_lookup(&m, e->end);
		if (e->start)
			check_lookup(&m, e->start - 1);
	}
	for (size_t i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
		memcpy(&probe, data + i, 8);
		check_lookup(&m, probe);
	}
	check_lookup(&m, 0);
	check_lookup(&m, UINT64_MAX);
	pp_maps_fini(&m);

	if (pp_proc_stat_parse((const char *)data, size, &st) == 0 &&
	    strlen(st.comm) >= sizeof(st.comm))
		abort();
	return 0;
}
