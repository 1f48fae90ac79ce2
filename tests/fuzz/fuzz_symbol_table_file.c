/*
 * Fuzz target for the symbol table file decoder (the agent's symbol table cache on disk): any
 * bytes give a table or NULL with EBADMSG, EPROTO or ENOMEM, never a read past them; a table
 * given has its symbols sorted, each extent in order and each name a string inside the table,
 * and encodes back to the very bytes it came from (the form has one encoding, so nothing
 * unchecked rides along). Each input is decoded twice: names copied, and left in a read-only
 * mapping (which the table takes), as the store reads its files; the input ends where the
 * mapping does, so a read past it faults.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/elf_symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_table(const struct pp_elf_symbols *s)
{
	size_t n = pp_elf_symbols_count(s), nd = pp_elf_symbols_data_count(s);

	for (size_t i = 0; i < n + nd; i++) {
		const struct pp_elf_symbol *y =
		    i < n ? pp_elf_symbols_get(s, i) : pp_elf_symbols_data_get(s, i - n);
		const struct pp_elf_symbol *prev = i == 0 || i == n ? NULL
						   : i < n	    ? pp_elf_symbols_get(s, i - 1)
							   : pp_elf_symbols_data_get(s, i - n - 1);

		if (!y || y->end < y->start || (prev && prev->start > y->start) ||
		    strlen(y->name) > pp_elf_symbols_bytes(s))
			__builtin_trap();
		if (i < n && !pp_elf_symbols_lookup(s, y->start, NULL) && y->end > y->start)
			__builtin_trap();
	}
	for (size_t i = 0; i < pp_elf_symbols_segment_count(s); i++) {
		uint64_t vaddr;
		const struct pp_elf_segment *g = pp_elf_symbols_segment(s, i);

		(void)pp_elf_file_offset_to_vaddr(s, g->offset, &vaddr);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	struct pp_elf_symbols *s;
	size_t len;
	void *again;

	if (!copy)
		return 0;
	memcpy(copy, data, size); /* exactly size bytes: a read past them is a finding */
	errno = 0;
	s = pp_elf_symbols_decode(copy, size, 0, NULL, 0);
	if (!s) {
		if (errno != EBADMSG && errno != EPROTO && errno != ENOMEM)
			__builtin_trap();
	} else {
		check_table(s);
		if (pp_elf_symbols_encode(s, &again, &len) == 0) {
			if (len != size || memcmp(again, data, size))
				__builtin_trap();
			free(again);
		}
		pp_elf_symbols_free(s);
	}
	free(copy);
	{ /* the input at the end of a mapping, as the store maps a file */
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t map_len = (size / page + 2) * page;
		uint8_t *map =
		    mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint8_t *at;

		if (map == MAP_FAILED)
			return 0;
		at = map + map_len - page - size;
		/* the page after the input is none of its: a read there faults */
		munmap(map + map_len - page, page);
		map_len -= page;
		memcpy(at, data, size);
		mprotect(map, map_len, PROT_READ);
		errno = 0;
		s = pp_elf_symbols_decode(at, size, 0, map, map_len); /* map is its */
	}
	if (!s) {
		if (errno != EBADMSG && errno != EPROTO && errno != ENOMEM)
			__builtin_trap();
		return 0;
	}
	check_table(s);
	pp_elf_symbols_free(s);
	return 0;
}
