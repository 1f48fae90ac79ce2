/*
 * Reading ELF files that other users control. Any process can map a file whose headers claim
 * what they like: 2^32 sections, a 2 GiB symbol table in a sparse 8 GiB file that holds 12 KiB,
 * a note segment the size of the file. libelf believes the headers (elf_begin allocates per
 * claimed section, elf_getdata copies a whole section into memory), so every claim is checked
 * here first, against fixed caps and against the file's real extent: bytes the agent reads must
 * be inside the file and backed by data, not a hole.
 *
 * Files are read with pread into bounded buffers, never mapped: a file truncated by its owner
 * while mapped would turn the next read into SIGBUS.
 */
#ifndef PP_COLLECTOR_ELF_READ_H
#define PP_COLLECTOR_ELF_READ_H

#include <stddef.h>
#include <stdint.h>

/* Linked executables and libraries have tens of these; objects with -ffunction-sections more. */
#define PP_ELF_MAX_SECTIONS 65536u
#define PP_ELF_MAX_SEGMENTS 4096u
/* The section name table (a few hundred bytes in real files). */
#define PP_ELF_MAX_SHSTRTAB_BYTES (1u << 20)
/* One note segment or section (a build id note is 36 bytes). */
#define PP_ELF_MAX_NOTE_BYTES (64u << 10)

/* An ELF image: a file (fd >= 0, read with pread) or bytes in memory (fd < 0). */
struct pp_elf_src {
	int fd;
	const uint8_t *mem;
	uint64_t size; /* the file's st_size, or the image's length */
};

/* A source for fd: -EINVAL for anything but a regular file, or fstat's -errno. */
int pp_elf_src_fd(struct pp_elf_src *src, int fd);
void pp_elf_src_mem(struct pp_elf_src *src, const void *buf, size_t len);

/* Exactly len bytes at off: 0, -EINVAL when they are not all inside the image, or -errno. */
int pp_elf_read_at(const struct pp_elf_src *src, uint64_t off, void *buf, size_t len);

/*
 * Whether [off, off + len) may be read: 0; -EINVAL when it is not inside the image; -EFBIG
 * when len is over max; -ENXIO when a file holds a hole there (a sparse file claiming bytes
 * it does not have: real ELF files have none). Moves fd's offset (the readers use pread).
 */
int pp_elf_range_check(const struct pp_elf_src *src, uint64_t off, uint64_t len, uint64_t max);

/* What pp_elf_preflight found: the counts libelf will see. */
struct pp_elf_shape {
	int elf_class; /* ELFCLASS32 or ELFCLASS64 */
	int big_endian;
	uint64_t shnum, phnum, shstrndx;
};

/*
 * The ELF header and its tables checked before libelf is given the file: magic, class, byte
 * order, version; section and program header tables of the standard entry size, their counts
 * (extended numbering too) within PP_ELF_MAX_*, inside the file and backed; the section name
 * table within PP_ELF_MAX_SHSTRTAB_BYTES, inside and backed. Returns 0 (shape may be NULL),
 * -ENOEXEC for no ELF file, -EINVAL for tables outside the file, -EFBIG over a cap, -ENXIO
 * for tables in a hole, or -errno of a read.
 */
int pp_elf_preflight(const struct pp_elf_src *src, struct pp_elf_shape *shape);

/*
 * The bytes of a section at [off, off + size) of src, read whole into *out (malloc'ed, *out_len
 * bytes): decompressed when they are SHF_COMPRESSED (flags; zlib or zstd, by its Chdr) or a
 * GNU ".zdebug" section ("ZLIB" and a big-endian size; zdebug non-zero). Both what is read and
 * what it decompresses to must be at most max bytes, and the decompressed size is the one the
 * header states: a decompression bomb is refused before any inflating. Returns 0, the range
 * errors of pp_elf_range_check, -EFBIG (a stated size over max), -EBADMSG (corrupt or not the
 * size stated), -EOPNOTSUPP (another compression), -ENOMEM.
 */
int pp_elf_section_read(const struct pp_elf_src *src, const struct pp_elf_shape *shape,
			uint64_t flags, int zdebug, uint64_t off, uint64_t size, uint64_t max,
			void **out, size_t *out_len);

/* A short name for the errors above, for counters and messages ("sparse", "too big", ...). */
const char *pp_elf_refusal_name(int err);

#endif /* PP_COLLECTOR_ELF_READ_H */
