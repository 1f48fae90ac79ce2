/*
 * Fuzz target for the data-type resolver: the bytes are a binary with its DWARF (an ELF
 * another user may have written), read through a file descriptor (memfd). Every instruction
 * boundary the resolver could be asked about is tried: each byte of the first code sections,
 * with a data address from the file's own bytes, so hostile headers, DWARF and code all reach
 * the decoder, the scope and location walk, the member walk and the globals table.
 */
#define _GNU_SOURCE /* memfd_create */
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/data_type.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PCS 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz_data_type", MFD_CLOEXEC);
	struct pp_data_type_resolver *r;
	uint64_t data_addr = 0;
	Elf_Scn *scn = NULL;
	unsigned tried = 0;
	Elf *elf;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	if (size >= 8)
		memcpy(&data_addr, data + size - 8, 8);
	r = pp_data_type_resolver_new(fd, fd);
	/* the resolver checked the headers: libelf may read them here too */
	elf = r ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	while (elf && tried < MAX_PCS && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		for (uint64_t off = 0; off < sh.sh_size && tried < MAX_PCS; off++, tried++) {
			struct pp_data_type t;
			char leaf[PP_DATA_TYPE_NAME_MAX + PP_DATA_FIELD_MAX + 32];

			if (pp_data_type_resolve(r, sh.sh_addr + off, tried & 1 ? data_addr : 0,
						 &t) == PP_DT_RESOLVED &&
			    pp_data_type_format(&t, leaf, sizeof(leaf)) <= 0)
				__builtin_trap();
		}
	}
	elf_end(elf);
	pp_data_type_resolver_free(r);
	close(fd);
	return 0;
}
