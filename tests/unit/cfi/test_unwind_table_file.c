/*
 * The compiled table's file form and the digest that names it, on the host's libc and this
 * test's own executable: a table read back is the compiled one row for row; the digest follows
 * the CFI bytes and not the file's name, build id or code; and every damage to a file
 * (truncation, a flipped byte, another version, rows out of order, a rule index or kind out of
 * range, counts that lie) is refused with its error, never a table. A table decoded from a
 * mapping of its file is the same, and lets the mapping go with it, refused or not.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "testsh.h"
#include "cfi/unwind_table.h"
#include "cfi/unwind_table_file.h"

#define HEADER_BYTES 152 /* unwind_table_file.c's layout */

static const char *const libc_paths[] = {"/lib/x86_64-linux-gnu/libc.so.6",
					 "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6"};

static const char *libc_path(void)
{
	for (size_t i = 0; i < sizeof(libc_paths) / sizeof(libc_paths[0]); i++)
		if (access(libc_paths[i], R_OK) == 0)
			return libc_paths[i];
	return NULL;
}

static int digest_of(const char *path, uint8_t out[PP_UNWIND_DIGEST_SIZE])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret = fd < 0 ? -errno : pp_unwind_table_digest_fd(fd, out);

	if (fd >= 0)
		close(fd);
	return ret;
}

static struct pp_unwind_table *table_of(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct pp_unwind_table *t = fd < 0 ? NULL : pp_unwind_table_open_fd(fd, 0);

	if (fd >= 0)
		close(fd);
	return t;
}

/* Every row, rule, segment and count of a equal to b's. */
static int same_table(const struct pp_unwind_table *a, const struct pp_unwind_table *b)
{
	struct pp_unwind_table_stats sa, sb;
	struct pp_unwind_load la[PP_UNWIND_MAX_LOADS], lb[PP_UNWIND_MAX_LOADS];
	size_t n = pp_unwind_table_count(a), nl;

	if (n != pp_unwind_table_count(b) ||
	    pp_unwind_table_rule_count(a) != pp_unwind_table_rule_count(b))
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct pp_unwind_row ra, rb;

		if (!pp_unwind_table_get(a, i, &ra) || !pp_unwind_table_get(b, i, &rb) ||
		    ra.pc != rb.pc || ra.cfa_off != rb.cfa_off || ra.rbp_off != rb.rbp_off ||
		    ra.ra_off != rb.ra_off || ra.cfa_rule != rb.cfa_rule ||
		    ra.rbp_rule != rb.rbp_rule || ra.ra_rule != rb.ra_rule ||
		    ra.flags != rb.flags ||
		    pp_unwind_table_row_rule(a, i) != pp_unwind_table_row_rule(b, i))
			return 0;
	}
	nl = pp_unwind_table_get_loads(a, la);
	if (nl != pp_unwind_table_get_loads(b, lb))
		return 0;
	for (size_t i = 0; i < nl; i++)
		if (la[i].vaddr != lb[i].vaddr || la[i].offset != lb[i].offset ||
		    la[i].filesz != lb[i].filesz || la[i].exec != lb[i].exec)
			return 0;
	pp_unwind_table_get_stats(a, &sa);
	pp_unwind_table_get_stats(b, &sb);
	return !memcmp(&sa, &sb, sizeof(sa));
}

/* Decode takes its buffer: these are copies of bytes the tests keep, exactly len long. */
static struct pp_unwind_table *decode_copy(const void *buf, size_t len,
					   uint8_t held[PP_UNWIND_DIGEST_SIZE])
{
	void *c;

	if (!buf)
		return pp_unwind_table_decode(NULL, len, 0, held);
	c = malloc(len ? len : 1);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(c, buf, len);
	return pp_unwind_table_decode(c, len, 0, held);
}

TEST(a_table_read_back_is_the_compiled_one)
{
	const char *paths[] = {libc_path(), "/proc/self/exe"};

	for (size_t k = 0; k < 2; k++) {
		uint8_t digest[PP_UNWIND_DIGEST_SIZE], held[PP_UNWIND_DIGEST_SIZE];
		struct pp_unwind_table *t, *back;
		size_t len;
		void *buf;

		if (!paths[k])
			continue;
		t = table_of(paths[k]);
		REQUIRE(t != NULL);
		REQUIRE(digest_of(paths[k], digest) == 0);
		REQUIRE(pp_unwind_table_encode(t, digest, &buf, &len) == 0);
		back = decode_copy(buf, len, held);
		REQUIRE(back != NULL);
		CHECK(same_table(t, back));
		CHECK(!memcmp(held, digest, sizeof(digest)));
		/* 6 bytes a row: the form is the compiler's */
		CHECK(len <
		      6 * pp_unwind_table_count(t) + 12 * pp_unwind_table_rule_count(t) + 512);
		printf("  %s: %zu rows, %zu rules, %zu bytes\n", paths[k], pp_unwind_table_count(t),
		       pp_unwind_table_rule_count(t), len);
		pp_unwind_table_free(back);
		pp_unwind_table_free(t);
		free(buf);
	}
}

/* Whether this process maps a file whose path ends in name. */
static bool maps_file(const char *name)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "re");
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* path's len bytes mapped privately, as the table cache maps its files; NULL if not. */
static void *map_whole(const char *path, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *m = fd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);

	if (fd >= 0)
		close(fd);
	return m == MAP_FAILED ? NULL : m;
}

TEST(a_table_decoded_from_a_mapping_is_the_same_and_unmaps_it)
{
	uint8_t digest[PP_UNWIND_DIGEST_SIZE] = {7}, held[PP_UNWIND_DIGEST_SIZE];
	struct pp_unwind_table *t = table_of("/proc/self/exe"), *back;
	char path[] = "/tmp/pp-test-uwt-XXXXXX";
	int fd = mkstemp(path);
	const char *name = strrchr(path, '/') + 1;
	uint8_t *buf, *m;
	size_t len;

	REQUIRE(t != NULL);
	REQUIRE(fd >= 0);
	REQUIRE(pp_unwind_table_encode(t, digest, (void **)&buf, &len) == 0);
	REQUIRE(write(fd, buf, len) == (ssize_t)len);
	close(fd);
	m = map_whole(path, len);
	REQUIRE(m != NULL);
	back = pp_unwind_table_decode(m, len, len, held);
	REQUIRE(back != NULL);
	CHECK(same_table(t, back));
	CHECK(!memcmp(held, digest, sizeof(held)));
	CHECK(maps_file(name)); /* the rows are read where the file lies */
	pp_unwind_table_free(back);
	CHECK(!maps_file(name));
	/* a damaged file is refused, and its mapping let go all the same */
	buf[len / 2] ^= 0x20;
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, buf, len) == (ssize_t)len);
	close(fd);
	m = map_whole(path, len);
	REQUIRE(m != NULL);
	errno = 0;
	CHECK(pp_unwind_table_decode(m, len, len, held) == NULL);
	CHECK(errno == EBADMSG);
	CHECK(!maps_file(name));
	unlink(path);
	free(buf);
	pp_unwind_table_free(t);
}

/* The file offset and size of section name in path: 0 or -1. */
static int section_at(const char *path, const char *name, size_t *off, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -1;
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			const char *n;

			if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(elf, shstrndx, sh.sh_name)))
				continue;
			if (!strcmp(n, name)) {
				*off = sh.sh_offset;
				*size = sh.sh_size;
				ret = 0;
				break;
			}
		}
	}
	elf_end(elf);
	close(fd);
	return ret;
}

static int flip_byte(const char *path, size_t off)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	uint8_t b;
	int ok;

	if (fd < 0)
		return -1;
	ok = pread(fd, &b, 1, (off_t)off) == 1;
	b ^= 0x5a;
	ok = ok && pwrite(fd, &b, 1, (off_t)off) == 1;
	close(fd);
	return ok ? 0 : -1;
}

/*
 * The digest is of the CFI: a copy elsewhere digests the same; a changed build id or code
 * does not change it (the same table follows); a changed .eh_frame byte does, so a file
 * claiming another's build id gets its own name.
 */
TEST(the_digest_follows_the_cfi_bytes)
{
	char dir[512], copy[600];
	uint8_t d0[PP_UNWIND_DIGEST_SIZE], d1[PP_UNWIND_DIGEST_SIZE];
	const char *libc = libc_path();
	size_t off, size;

	if (!libc)
		SKIP("no libc.so.6 where Debian keeps it");
	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-uwt-digest") == 0);
	snprintf(copy, sizeof(copy), "%s/libc-copy.so", dir);
	REQUIRE(pp_test_sh("cp '%s' '%s'", libc, copy) == 0);
	REQUIRE(digest_of(libc, d0) == 0);
	REQUIRE(digest_of(copy, d1) == 0);
	CHECK(!memcmp(d0, d1, sizeof(d0)));

	REQUIRE(section_at(copy, ".note.gnu.build-id", &off, &size) == 0);
	REQUIRE(flip_byte(copy, off + size - 1) == 0);
	REQUIRE(section_at(copy, ".text", &off, &size) == 0);
	REQUIRE(flip_byte(copy, off + size / 2) == 0);
	REQUIRE(digest_of(copy, d1) == 0);
	CHECK(!memcmp(d0, d1, sizeof(d0))); /* another build id and code, the same CFI */

	REQUIRE(section_at(copy, ".eh_frame", &off, &size) == 0);
	REQUIRE(flip_byte(copy, off + size / 2) == 0);
	REQUIRE(digest_of(copy, d1) == 0);
	CHECK(memcmp(d0, d1, sizeof(d0)) != 0);

	/* no CFI at all digests (and compiles to nothing); not an ELF file is refused */
	REQUIRE(
	    pp_test_sh("cd '%s' && printf 'not ELF' > text && cp '%s' nohdr && "
		       "objcopy --remove-section=.eh_frame_hdr --remove-section=.eh_frame nohdr",
		       dir, libc) == 0);
	snprintf(copy, sizeof(copy), "%s/nohdr", dir);
	CHECK(digest_of(copy, d1) == 0);
	snprintf(copy, sizeof(copy), "%s/text", dir);
	CHECK(digest_of(copy, d1) == -ENOEXEC);
	CHECK(pp_unwind_table_digest_fd(-1, d1) < 0);
}

/* A file with its checksum made right again after an edit: only the content checks remain. */
static void reseal(uint8_t *buf, size_t len)
{
	uint32_t crc = (uint32_t)crc32(0, buf, (uInt)(len - 4));

	for (int i = 0; i < 4; i++)
		buf[len - 4 + i] = (uint8_t)(crc >> (8 * i));
}

static int decodes_as(const uint8_t *buf, size_t len, int want_errno)
{
	uint8_t held[PP_UNWIND_DIGEST_SIZE];
	struct pp_unwind_table *t;

	errno = 0;
	t = decode_copy(buf, len, held);
	pp_unwind_table_free(t);
	return !t && errno == want_errno;
}

TEST(damage_is_refused)
{
	uint8_t digest[PP_UNWIND_DIGEST_SIZE] = {1, 2, 3};
	struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
	struct pp_unwind_table *t = table_of("/proc/self/exe");
	size_t len, nl, nrules, n, rules_at, offs_at, ix_at;
	uint8_t *buf, *c;
	int flips_refused = 1;

	REQUIRE(t != NULL);
	REQUIRE(pp_unwind_table_encode(t, digest, (void **)&buf, &len) == 0);
	nl = pp_unwind_table_get_loads(t, loads);
	nrules = pp_unwind_table_rule_count(t);
	n = pp_unwind_table_count(t);
	REQUIRE(n >= 3 && nrules >= 2);
	rules_at = HEADER_BYTES + 32 * nl;
	offs_at = rules_at + 12 * nrules;
	ix_at = offs_at + 4 * n;
	REQUIRE(ix_at + 2 * n + 4 == len);
	c = malloc(len);
	REQUIRE(c != NULL);

	CHECK(decodes_as(buf, 0, EBADMSG));
	CHECK(decodes_as(NULL, len, EBADMSG));
	for (size_t cut = 1; cut < len; cut += cut < HEADER_BYTES ? 7 : len / 13)
		CHECK(decodes_as(buf, cut, EBADMSG));
	CHECK(decodes_as(buf, len - 1, EBADMSG));
	/* a flipped byte anywhere: the checksum (the version's bytes: another version) */
	for (size_t at = 0; at < len; at += len / 97 + 1) {
		memcpy(c, buf, len);
		c[at] ^= 0x10;
		flips_refused &= decodes_as(c, len, at >= 8 && at < 12 ? EPROTO : EBADMSG);
	}
	CHECK(flips_refused);
	/* with the checksum made right again */
	memcpy(c, buf, len);
	c[8] = 2; /* version */
	reseal(c, len);
	CHECK(decodes_as(c, len, EPROTO));
	memcpy(c, buf, len);
	memcpy(c + offs_at + 4, "\xff\xff\xff\x7f", 4); /* row 1 after row 2 */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	memcpy(c + offs_at, "\x01\0\0\0", 4); /* row 0 not at the base */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	c[ix_at + 2 * (n - 1)] = (uint8_t)nrules; /* a rule past the list */
	c[ix_at + 2 * (n - 1) + 1] = (uint8_t)(nrules >> 8);
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	c[rules_at + 8] = 99; /* an unknown CFA rule */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	c[rules_at + 11] = 0x80; /* an unknown flag */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	c[12] = 9; /* nine segments */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	c[HEADER_BYTES - 80 - 8 - 1] = 0x40; /* rows: 2^62 and more */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	memcpy(c, buf, len);
	c[HEADER_BYTES - 80 - 4 - 2] = 0x01; /* rules: 65536 and more */
	reseal(c, len);
	CHECK(decodes_as(c, len, EBADMSG));
	/* and the untouched bytes, sealed again, still decode */
	memcpy(c, buf, len);
	reseal(c, len);
	{
		uint8_t held[PP_UNWIND_DIGEST_SIZE];
		struct pp_unwind_table *back = decode_copy(c, len, held);

		CHECK(back != NULL && same_table(t, back));
		pp_unwind_table_free(back);
	}
	free(c);
	free(buf);
	pp_unwind_table_free(t);
}

TEST_LIST = {
    {"a_table_read_back_is_the_compiled_one", a_table_read_back_is_the_compiled_one},
    {"the_digest_follows_the_cfi_bytes", the_digest_follows_the_cfi_bytes},
    {"damage_is_refused", damage_is_refused},
    {"a_table_decoded_from_a_mapping_is_the_same_and_unmaps_it",
     a_table_decoded_from_a_mapping_is_the_same_and_unmaps_it},
};
TEST_MAIN()
