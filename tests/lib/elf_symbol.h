/*
 * Test helper: the address and size of a symbol in an ELF file's .symtab, read with libelf,
 * for tests that point the code under test at a known function or object of a real binary.
 */
#ifndef PP_TEST_ELF_SYMBOL_H
#define PP_TEST_ELF_SYMBOL_H

#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <string.h>

/* The link-time address of name in the file open at fd (its size in *size); 0 if none. */
static inline uint64_t pp_test_elf_symbol(int fd, const char *name, uint64_t *size)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	uint64_t addr = 0;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && !addr && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(data, (int)i, &sym) ||
			    !(n = elf_strptr(elf, sh.sh_link, sym.st_name)) || strcmp(n, name))
				continue;
			addr = sym.st_value;
			if (size)
				*size = sym.st_size;
			break;
		}
	}
	elf_end(elf);
	return addr;
}

#endif
