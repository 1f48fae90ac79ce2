/*
 * Fuzz target for the ELF symbol reader: the bytes are an ELF image, read both from memory and
 * through a file descriptor (memfd), then every table is walked and looked up in. When the
 * input's last byte is odd the file also grows to 8 GiB of holes past the bytes, so headers
 * can claim huge tables "inside" it, as a sparse file on disk does: the reader must refuse
 * them without reading or allocating them (run with -malloc_limit_mb to hold it to that).
 */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/elf_symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct pp_elf_symbols *s)
{
	uint64_t start, va;

	for (size_t i = 0; i < pp_elf_symbols_count(s); i++) {
		const struct pp_elf_symbol *sym = pp_elf_symbols_get(s, i);

		/* Every kept symbol covers at least its first byte. */
		if (sym->end <= sym->start || !pp_elf_symbols_lookup(s, sym->start, &start))
			__builtin_trap();
		(void)pp_elf_symbols_lookup(s, sym->end, NULL);
		(void)pp_elf_symbols_lookup(s, sym->start + (sym->end - sym->start) / 2, NULL);
	}
	for (size_t i = 0; i < pp_elf_symbols_data_count(s); i++) {
		const struct pp_elf_symbol *sym = pp_elf_symbols_data_get(s, i);

		if (!pp_elf_symbols_lookup_data(s, sym->start, &start))
			__builtin_trap();
	}
	for (size_t i = 0; i < pp_elf_symbols_segment_count(s); i++) {
		const struct pp_elf_segment *g = pp_elf_symbols_segment(s, i);

		if (pp_elf_file_offset_to_vaddr(s, g->offset, &va) == 0)
			(void)pp_elf_symbols_lookup(s, va, NULL);
		(void)pp_elf_symbols_map_addr(s, 0x7f0000001000ull, 0x7f0000000000ull, g->offset,
					      &va);
	}
	(void)pp_elf_symbols_lookup(s, 0, NULL);
	(void)pp_elf_symbols_lookup(s, UINT64_MAX, NULL);
	(void)pp_elf_symbols_build_id(s);
	(void)pp_elf_symbols_debuglink(s);
	{
		uint32_t crc;

		(void)pp_elf_symbols_debuglink_crc(s, &crc);
	}
	(void)pp_symbol_source_name(pp_elf_symbols_source(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_elf_symbols *s = pp_elf_symbols_open_mem(data, size);
	char id[PP_BUILD_ID_HEX_SIZE];
	int fd;

	if (s) {
		walk(s);
		pp_elf_symbols_free(s);
	}
	fd = memfd_create("pp-fuzz-elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size == 0 || write(fd, data, size) == (ssize_t)size) {
		if (size && (data[size - 1] & 1))
			(void)ftruncate(fd, (off_t)8 << 30);
		(void)pp_elf_read_build_id_fd(fd, id, sizeof(id));
		s = pp_elf_symbols_open_fd_limited(fd, 0, 1u << 20);
		if (s) {
			walk(s);
			pp_elf_symbols_free(s);
		}
	}
	close(fd);
	return 0;
}
