/*
 * Fuzz target for the side-band's record parser and the maps it builds: the bytes are read as
 * a run of records, each as long as its header says (as a ring holds them); every record that
 * parses as a mapping is inserted into one process's maps, which must stay sorted and
 * disjoint and find every address a linear scan finds.
 */
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "process/procmaps.h"
#include "sampling/sideband.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_maps(const struct pp_maps *m, uint64_t probe)
{
	const struct pp_map_entry *found = NULL;

	for (size_t i = 0; i < m->n; i++) {
		if (m->entries[i].start >= m->entries[i].end)
			abort();
		if (i && m->entries[i - 1].end > m->entries[i].start)
			abort();
		if (probe >= m->entries[i].start && probe < m->entries[i].end)
			found = &m->entries[i];
	}
	if (pp_maps_find(m, probe) != found)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_maps maps = {0};
	uint8_t *rec = malloc(65536);
	size_t off = 0;

	if (!rec)
		return 0;
	while (size - off >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		struct pp_sb_event ev;

		memcpy(&h, data + off, sizeof(h));
		if (h.size < sizeof(h) || h.size > size - off)
			break;
		memcpy(rec, data + off, h.size);
		off += h.size;
		if (pp_sideband_parse(rec, h.size, &ev) != 0 || ev.kind != PP_SB_MMAP)
			continue;
		if (!ev.path || strlen(ev.path) >= PP_SB_PATH_MAX)
			abort();
		{
			struct pp_map_entry e = {.start = ev.start,
						 .end = ev.start + ev.len,
						 .offset = ev.pgoff,
						 .inode = ev.inode};

			pp_map_entry_set_name(&e, ev.path);
			if (pp_maps_insert(&maps, &e) == 0)
				check_maps(&maps, ev.start + ev.len / 2);
		}
	}
	pp_maps_fini(&maps);
	free(rec);
	return 0;
}
