/*
 * Tests of the checks an ELF file's headers pass before anything reads them: counts over the
 * caps (extended numbering too), tables outside the file, and tables or ranges in a hole of a
 * sparse file (a memfd grown past its bytes), each with its own error.
 */
#define _GNU_SOURCE /* memfd_create */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "base/elf_read.h"

/* A 64-bit little-endian header with a section header table of n entries at shoff. */
static void header(uint8_t *buf, uint64_t shoff, uint16_t shnum, uint16_t shstrndx)
{
	Elf64_Ehdr eh = {0};

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof(eh);
	eh.e_shoff = shoff;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = shnum;
	eh.e_shstrndx = shstrndx;
	memcpy(buf, &eh, sizeof(eh));
}

static void section(uint8_t *buf, uint64_t shoff, int i, const Elf64_Shdr *sh)
{
	memcpy(buf + shoff + (uint64_t)i * sizeof(*sh), sh, sizeof(*sh));
}

static int preflight_mem(const uint8_t *buf, size_t len)
{
	struct pp_elf_src src;

	pp_elf_src_mem(&src, buf, len);
	return pp_elf_preflight(&src, NULL);
}

TEST(headers_within_the_caps_pass)
{
	static uint8_t buf[4096];
	struct pp_elf_shape shape;
	struct pp_elf_src src;
	Elf64_Shdr str = {.sh_type = SHT_STRTAB, .sh_offset = 1024, .sh_size = 16};

	memset(buf, 0, sizeof(buf));
	header(buf, 2048, 3, 2);
	section(buf, 2048, 2, &str);
	pp_elf_src_mem(&src, buf, sizeof(buf));
	CHECK(pp_elf_preflight(&src, &shape) == 0);
	CHECK_EQ_U64(shape.shnum, 3);
	CHECK_EQ_U64(shape.shstrndx, 2);
	CHECK_EQ_U64(shape.elf_class, ELFCLASS64);
	CHECK_EQ_U64(shape.big_endian, 0);
	CHECK(preflight_mem((const uint8_t *)"\177ELF", 4) == -ENOEXEC);
	CHECK(preflight_mem((const uint8_t *)"MZ\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 18) == -ENOEXEC);
}

TEST(claims_over_the_caps_are_refused)
{
	static uint8_t buf[8192];
	Elf64_Shdr first = {0}, str = {.sh_type = SHT_STRTAB, .sh_offset = 1024};

	/* 100 million sections through extended numbering (e_shnum 0, the count in entry 0) */
	memset(buf, 0, sizeof(buf));
	header(buf, 2048, 0, 0);
	first.sh_size = 100000000;
	section(buf, 2048, 0, &first);
	CHECK(preflight_mem(buf, sizeof(buf)) == -EFBIG);
	/* a section name table of 2 MiB: past the end of 8 KiB, and over its cap in 3 MiB */
	memset(buf, 0, sizeof(buf));
	header(buf, 2048, 3, 2);
	str.sh_size = 2u << 20;
	section(buf, 2048, 2, &str);
	CHECK(preflight_mem(buf, sizeof(buf)) == -EINVAL);
	{
		uint8_t *big = calloc(1, 3u << 20);

		REQUIRE(big);
		memcpy(big, buf, sizeof(buf));
		CHECK(preflight_mem(big, 3u << 20) == -EFBIG);
		free(big);
	}
	/* the section table itself past the end */
	memset(buf, 0, sizeof(buf));
	header(buf, 8100, 3, 0);
	CHECK(preflight_mem(buf, sizeof(buf)) == -EINVAL);
	/* a section header of the wrong size */
	memset(buf, 0, sizeof(buf));
	header(buf, 2048, 3, 0);
	buf[58] = 12;
	CHECK(preflight_mem(buf, sizeof(buf)) == -EINVAL);
}

TEST(claims_in_a_hole_of_a_sparse_file_are_refused)
{
	static uint8_t buf[8192];
	Elf64_Shdr str = {.sh_type = SHT_STRTAB, .sh_offset = 1024, .sh_size = 16};
	struct pp_elf_src src;
	int fd = memfd_create("pp-elf-read", MFD_CLOEXEC);

	REQUIRE(fd >= 0);
	memset(buf, 0, sizeof(buf));
	header(buf, 2048, 3, 2);
	/* the name table claims 512 KiB at 1 GiB of a 2 GiB file holding 8 KiB */
	str.sh_offset = 1u << 30;
	str.sh_size = 512u << 10;
	section(buf, 2048, 2, &str);
	REQUIRE(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	REQUIRE(ftruncate(fd, (off_t)2 << 30) == 0);
	REQUIRE(pp_elf_src_fd(&src, fd) == 0);
	CHECK_EQ_U64(src.size, (uint64_t)2 << 30);
	CHECK(pp_elf_preflight(&src, NULL) == -ENXIO);
	/* ranges: the bytes written are backed, the rest is a hole, past the end is outside */
	CHECK(pp_elf_range_check(&src, 0, sizeof(buf), UINT64_MAX) == 0);
	CHECK(pp_elf_range_check(&src, 4096, 8192, UINT64_MAX) == -ENXIO);
	CHECK(pp_elf_range_check(&src, (uint64_t)1 << 30, 4096, UINT64_MAX) == -ENXIO);
	CHECK(pp_elf_range_check(&src, (uint64_t)2 << 30, 1, UINT64_MAX) == -EINVAL);
	CHECK(pp_elf_range_check(&src, 0, 8192, 4096) == -EFBIG);
	CHECK(pp_elf_range_check(&src, 0, 0, 0) == 0);
	/* a whole section table in the hole */
	header(buf, (uint64_t)1 << 30, 3, 0);
	REQUIRE(pwrite(fd, buf, sizeof(Elf64_Ehdr), 0) == (ssize_t)sizeof(Elf64_Ehdr));
	CHECK(pp_elf_preflight(&src, NULL) == -ENXIO);
	CHECK_STR(pp_elf_refusal_name(-ENXIO), "sparse (a hole where data is claimed)");
	close(fd);
	/* not a regular file */
	CHECK(pp_elf_src_fd(&src, -1) == -EBADF);
}

TEST_LIST = {
    {"headers_within_the_caps_pass", headers_within_the_caps_pass},
    {"claims_over_the_caps_are_refused", claims_over_the_caps_are_refused},
    {"claims_in_a_hole_of_a_sparse_file_are_refused",
     claims_in_a_hole_of_a_sparse_file_are_refused},
};

TEST_MAIN()
