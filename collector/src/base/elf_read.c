/* Checking ELF headers and the byte ranges they claim before anything is read (elf_read.h). */
#define _GNU_SOURCE /* SEEK_HOLE */
#include "elf_read.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

int pp_elf_src_fd(struct pp_elf_src *src, int fd)
{
	struct stat st;

	memset(src, 0, sizeof(*src));
	src->fd = -1;
	if (fd < 0)
		return -EBADF;
	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	src->fd = fd;
	src->size = (uint64_t)st.st_size;
	return 0;
}

void pp_elf_src_mem(struct pp_elf_src *src, const void *buf, size_t len)
{
	src->fd = -1;
	src->mem = buf;
	src->size = len;
}

static int inside(const struct pp_elf_src *src, uint64_t off, uint64_t len)
{
	return off <= src->size && len <= src->size - off;
}

int pp_elf_read_at(const struct pp_elf_src *src, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;

	if (!inside(src, off, len))
		return -EINVAL;
	if (src->fd < 0) {
		memcpy(buf, src->mem + off, len);
		return 0;
	}
	while (done < len) {
		ssize_t n = pread(src->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EINVAL; /* shorter than fstat said: truncated meanwhile */
		done += (size_t)n;
	}
	return 0;
}

int pp_elf_range_check(const struct pp_elf_src *src, uint64_t off, uint64_t len, uint64_t max)
{
	off_t hole;

	if (!inside(src, off, len))
		return -EINVAL;
	if (len > max)
		return -EFBIG;
	if (src->fd < 0 || len == 0)
		return 0;
	/* where the next hole starts; file systems without holes answer the file's end */
	hole = lseek(src->fd, (off_t)off, SEEK_HOLE);
	if (hole >= 0 && (uint64_t)hole < off + len)
		return -ENXIO;
	return 0;
}

static uint64_t rd(const uint8_t *p, size_t n, int big)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[big ? i : n - 1 - i] << (8 * (n - 1 - i));
	return v;
}

/* The fields of one section header that the checks need. */
struct shdr_facts {
	uint64_t type, offset, size, link, info;
};

static int read_shdr(const struct pp_elf_src *src, const struct pp_elf_shape *sh, uint64_t shoff,
		     uint64_t i, struct shdr_facts *out)
{
	uint8_t b[64];
	int is64 = sh->elf_class == ELFCLASS64, big = sh->big_endian;
	size_t esz = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	int err = pp_elf_read_at(src, shoff + i * esz, b, esz);

	if (err)
		return err;
	out->type = rd(b + 4, 4, big);
	out->offset = is64 ? rd(b + 24, 8, big) : rd(b + 16, 4, big);
	out->size = is64 ? rd(b + 32, 8, big) : rd(b + 20, 4, big);
	out->link = is64 ? rd(b + 40, 4, big) : rd(b + 24, 4, big);
	out->info = is64 ? rd(b + 44, 4, big) : rd(b + 28, 4, big);
	return 0;
}

/* A header table of count entries of esz bytes at off: inside, within cap, backed. */
static int table_check(const struct pp_elf_src *src, uint64_t off, uint64_t count, uint64_t esz,
		       uint64_t cap)
{
	if (count > cap)
		return -EFBIG;
	return pp_elf_range_check(src, off, count * esz, cap * esz);
}

int pp_elf_preflight(const struct pp_elf_src *src, struct pp_elf_shape *shape)
{
	struct pp_elf_shape s = {0};
	uint8_t e[sizeof(Elf64_Ehdr)];
	uint64_t phoff, shoff, phentsize, shentsize;
	struct shdr_facts first = {0};
	size_t ehsize;
	int is64, big, err;

	if (src->size < EI_NIDENT || pp_elf_read_at(src, 0, e, EI_NIDENT) ||
	    memcmp(e, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	if ((e[EI_CLASS] != ELFCLASS32 && e[EI_CLASS] != ELFCLASS64) ||
	    (e[EI_DATA] != ELFDATA2LSB && e[EI_DATA] != ELFDATA2MSB) || e[EI_VERSION] != EV_CURRENT)
		return -ENOEXEC;
	is64 = e[EI_CLASS] == ELFCLASS64;
	big = e[EI_DATA] == ELFDATA2MSB;
	ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	if (pp_elf_read_at(src, 0, e, ehsize))
		return -ENOEXEC;
	s.elf_class = e[EI_CLASS];
	s.big_endian = big;
	phoff = is64 ? rd(e + 32, 8, big) : rd(e + 28, 4, big);
	shoff = is64 ? rd(e + 40, 8, big) : rd(e + 32, 4, big);
	phentsize = rd(e + (is64 ? 54 : 42), 2, big);
	s.phnum = rd(e + (is64 ? 56 : 44), 2, big);
	shentsize = rd(e + (is64 ? 58 : 46), 2, big);
	s.shnum = rd(e + (is64 ? 60 : 48), 2, big);
	s.shstrndx = rd(e + (is64 ? 62 : 50), 2, big);
	if (shoff) {
		if (shentsize != (is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)))
			return -EINVAL;
		/* extended numbering: the real counts live in section header 0 */
		err = read_shdr(src, &s, shoff, 0, &first);
		if (err)
			return err;
		if (s.shnum == 0)
			s.shnum = first.size;
		if (s.shstrndx == SHN_XINDEX)
			s.shstrndx = first.link;
		if (s.phnum == PN_XNUM)
			s.phnum = first.info;
		err = table_check(src, shoff, s.shnum, shentsize, PP_ELF_MAX_SECTIONS);
		if (err)
			return err;
	} else {
		s.shnum = 0;
	}
	if (phoff && s.phnum) {
		if (phentsize != (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
			return -EINVAL;
		err = table_check(src, phoff, s.phnum, phentsize, PP_ELF_MAX_SEGMENTS);
		if (err)
			return err;
	}
	if (s.shnum && s.shstrndx && s.shstrndx < s.shnum) {
		struct shdr_facts str;

		err = read_shdr(src, &s, shoff, s.shstrndx, &str);
		if (!err && str.type != SHT_NOBITS)
			err = pp_elf_range_check(src, str.offset, str.size,
						 PP_ELF_MAX_SHSTRTAB_BYTES);
		if (err)
			return err;
	}
	if (shape)
		*shape = s;
	return 0;
}

/* Inflate n bytes at in into exactly want bytes (the size the header stated). */
static int inflate_exact(int type, const uint8_t *in, size_t n, uint8_t *out, size_t want)
{
	if (type == ELFCOMPRESS_ZLIB) {
		uLongf got = (uLongf)want;

		return uncompress(out, &got, in, (uLong)n) == Z_OK && got == want ? 0 : -EBADMSG;
	}
	if (type == ELFCOMPRESS_ZSTD) {
		size_t got = ZSTD_decompress(out, want, in, n);

		return !ZSTD_isError(got) && got == want ? 0 : -EBADMSG;
	}
	return -EOPNOTSUPP;
}

int pp_elf_section_read(const struct pp_elf_src *src, const struct pp_elf_shape *shape,
			uint64_t flags, int zdebug, uint64_t off, uint64_t size, uint64_t max,
			void **out, size_t *out_len)
{
	uint8_t *raw, *dec;
	uint64_t want;
	size_t hdr;
	int type, err;

	*out = NULL;
	*out_len = 0;
	err = pp_elf_range_check(src, off, size, max);
	if (err)
		return err;
	raw = malloc(size ? size : 1);
	if (!raw)
		return -ENOMEM;
	err = pp_elf_read_at(src, off, raw, size);
	if (err) {
		free(raw);
		return err;
	}
	if (!(flags & SHF_COMPRESSED) && !zdebug) {
		*out = raw;
		*out_len = size;
		return 0;
	}
	if (flags & SHF_COMPRESSED) {
		int is64 = shape->elf_class == ELFCLASS64, big = shape->big_endian;

		hdr = is64 ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
		if (size < hdr) {
			free(raw);
			return -EBADMSG;
		}
		type = (int)rd(raw, 4, big);
		want = is64 ? rd(raw + 8, 8, big) : rd(raw + 4, 4, big);
	} else {
		/* GNU's .zdebug: "ZLIB", the size big-endian, a zlib stream */
		hdr = 12;
		if (size < hdr || memcmp(raw, "ZLIB", 4) != 0) {
			free(raw);
			return -EBADMSG;
		}
		type = ELFCOMPRESS_ZLIB;
		want = rd(raw + 4, 8, 1);
	}
	if (want > max) {
		free(raw);
		return -EFBIG;
	}
	dec = malloc(want ? want : 1);
	if (!dec) {
		free(raw);
		return -ENOMEM;
	}
	err = inflate_exact(type, raw + hdr, size - hdr, dec, want);
	free(raw);
	if (err) {
		free(dec);
		return err;
	}
	*out = dec;
	*out_len = want;
	return 0;
}

const char *pp_elf_refusal_name(int err)
{
	switch (err) {
	case -ENOEXEC:
		return "not ELF";
	case -EINVAL:
		return "outside the file";
	case -EFBIG:
		return "over a size cap";
	case -ENXIO:
		return "sparse (a hole where data is claimed)";
	default:
		return "unreadable";
	}
}
