/*
 * Tests of the symbol tables kept on disk (symbol_store.h) and of a table's file form
 * (pp_elf_symbols_encode / _decode), on the node's real libraries: a table read back names
 * every address as the one built from the file; bytes that are cut, point outside, go out of
 * order or come from another format are refused; the store finds a table only under its
 * file's identity, its boot and a settled ctime, removes what it cannot use, and refuses a
 * directory others may write.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/symbol_store.h"

static char g_dir[512];

static void cleanup_dir(void)
{
	if (g_dir[0] && pp_test_sh("rm -rf '%s'", g_dir) != 0)
		fprintf(stderr, "  could not remove %s\n", g_dir);
}

static const char *g_libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6",
			       "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
			       "/usr/lib/aarch64-linux-gnu/libc.so.6", "/usr/bin/node"};

/* The first of g_libs here, opened: fd and its table, built from the file. */
static const char *real_library(int *fd, struct pp_elf_symbols **built)
{
	for (size_t i = 0; i < sizeof(g_libs) / sizeof(g_libs[0]); i++) {
		*fd = open(g_libs[i], O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			continue;
		*built = pp_elf_symbols_open_fd(*fd);
		if (*built && pp_elf_symbols_count(*built) > 100)
			return g_libs[i];
		pp_elf_symbols_free(*built);
		close(*fd);
	}
	return NULL;
}

/* a and b name every address alike: each symbol's extent and name, the segments, the id. */
/* len bytes in a read-only mapping of their own, as the symbol store maps its files. */
static void *mapped_copy(const void *bytes, size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	memcpy(m, bytes, len);
	mprotect(m, len, PROT_READ);
	return m;
}

static void check_same(const struct pp_elf_symbols *a, const struct pp_elf_symbols *b)
{
	size_t n = pp_elf_symbols_count(a), bad = 0;

	CHECK(pp_elf_symbols_same(a, b));
	CHECK_EQ_U64(pp_elf_symbols_count(b), n);
	CHECK_EQ_U64(pp_elf_symbols_data_count(b), pp_elf_symbols_data_count(a));
	CHECK_STR(pp_elf_symbols_build_id(b), pp_elf_symbols_build_id(a));
	CHECK_STR(pp_elf_symbols_debuglink(b), pp_elf_symbols_debuglink(a));
	CHECK(pp_elf_symbols_source(b) == pp_elf_symbols_source(a));
	CHECK(pp_elf_symbols_class(b) == pp_elf_symbols_class(a));
	CHECK(pp_elf_symbols_has_symtab(b) == pp_elf_symbols_has_symtab(a));
	for (size_t i = 0; i < n; i++) {
		const struct pp_elf_symbol *s = pp_elf_symbols_get(a, i);
		uint64_t at_a = 0, at_b = 0;
		const char *na = pp_elf_symbols_lookup(a, s->start, &at_a);
		const char *nb = pp_elf_symbols_lookup(b, s->start, &at_b);

		bad += !na || !nb || strcmp(na, nb) || at_a != at_b;
	}
	CHECK_EQ_U64(bad, 0);
}

TEST(a_table_read_back_names_every_address_as_the_file_does)
{
	struct pp_elf_symbols *built, *copied, *kept;
	const char *lib;
	void *bytes;
	size_t len;
	int fd;

	lib = real_library(&fd, &built);
	if (!lib)
		SKIP("none of the libraries with symbols is installed");
	close(fd);
	REQUIRE(pp_elf_symbols_encode(built, &bytes, &len) == 0);
	copied = pp_elf_symbols_decode(bytes, len, 0, NULL, 0);
	REQUIRE(copied != NULL);
	check_same(built, copied);
	CHECK_EQ_U64(pp_elf_symbols_bytes(copied), pp_elf_symbols_bytes(built));
	{ /* the same bytes again, encoded from the table read back */
		void *again;
		size_t n2;

		REQUIRE(pp_elf_symbols_encode(copied, &again, &n2) == 0);
		CHECK(n2 == len && !memcmp(again, bytes, len));
		free(again);
	}
	{ /* written to a file through its chunks: the same bytes */
		FILE *tf = tmpfile();
		int mfd = tf ? fileno(tf) : -1;
		uint8_t *back = malloc(len + 1);
		ssize_t got;

		REQUIRE(mfd >= 0 && back != NULL);
		CHECK(len > 65536); /* more than one chunk of the writer's */
		CHECK_EQ_U64(pp_elf_symbols_encoded_len(built), len);
		CHECK(pp_elf_symbols_write(built, mfd) == 0);
		got = pread(mfd, back, len + 1, 0);
		CHECK(got == (ssize_t)len && !memcmp(back, bytes, len));
		free(back);
		fclose(tf);
	}
	/* the names left where they lie: the table takes the mapping */
	{
		void *m = mapped_copy(bytes, len);
		const char *name;

		REQUIRE(m != NULL);
		kept = pp_elf_symbols_decode(m, len, 0, m, len);
		REQUIRE(kept != NULL);
		check_same(built, kept);
		CHECK(pp_elf_symbols_bytes(kept) < pp_elf_symbols_bytes(built) + 256);
		name = pp_elf_symbols_get(kept, 0)->name; /* the mapping's bytes, not a copy */
		CHECK(name > (const char *)m && name < (const char *)m + len);
	}
	/* a bound under the table's size: refused, as building it would be, and unmapped */
	{
		void *m = mapped_copy(bytes, len);

		REQUIRE(m != NULL);
		errno = 0;
		CHECK(pp_elf_symbols_decode(m, len, pp_elf_symbols_bytes(built) / 2, m, len) ==
		      NULL);
		CHECK(errno == EFBIG);
		CHECK(msync(m, len, MS_ASYNC) == -1 && errno == ENOMEM); /* no longer mapped */
	}
	fprintf(stderr, "  %s: %zu symbols, %zu bytes as a file\n", lib,
		pp_elf_symbols_count(built), len);
	pp_elf_symbols_free(kept);
	pp_elf_symbols_free(copied);
	pp_elf_symbols_free(built);
	free(bytes);
}

/* Decoding a changed copy of bytes: the table, or NULL with errno in *err. */
static struct pp_elf_symbols *decode_changed(const void *bytes, size_t len, size_t at,
					     const void *with, size_t n, int *err)
{
	uint8_t *copy = malloc(len);
	struct pp_elf_symbols *s;

	if (!copy)
		return NULL;
	memcpy(copy, bytes, len);
	if (with)
		memcpy(copy + at, with, n);
	errno = 0;
	s = pp_elf_symbols_decode(copy, len, 0, NULL, 0);
	*err = errno;
	free(copy);
	return s;
}

TEST(bytes_cut_out_of_order_or_pointing_outside_are_refused)
{
	struct pp_elf_symbols *built, *s;
	uint8_t *bytes, big[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
	size_t len, nfuncs, names_len, at, cut_bad = 0;
	int fd, err;

	if (!real_library(&fd, &built))
		SKIP("none of the libraries with symbols is installed");
	close(fd);
	REQUIRE(pp_elf_symbols_encode(built, (void **)&bytes, &len) == 0);
	nfuncs = pp_elf_symbols_count(built);
	/* every length short of the whole, and one byte more */
	for (size_t n = 0; n < len; n += n < 4096 ? 1 : 4093) {
		errno = 0;
		s = pp_elf_symbols_decode(bytes, n, 0, NULL, 0);
		cut_bad += s != NULL || (errno != EBADMSG && errno != EPROTO);
		pp_elf_symbols_free(s);
	}
	CHECK_EQ_U64(cut_bad, 0);
	/* the header: magic, class, counts; then the first symbol, after the names */
	CHECK(decode_changed(bytes, len, 7, "2", 1, &err) == NULL && err == EPROTO);
	CHECK(decode_changed(bytes, len, 0, "XXSYMT01", 8, &err) == NULL && err == EBADMSG);
	CHECK(decode_changed(bytes, len, 12, "\x07", 1, &err) == NULL && err == EBADMSG);
	CHECK(decode_changed(bytes, len, 31, big, 8, &err) == NULL && err == EBADMSG);
	{
		const uint8_t *p = bytes + 8 + 20;
		size_t idlen = p[0], linklen = (size_t)p[1] | (size_t)p[2] << 8;

		names_len = 0;
		for (int i = 0; i < 8; i++)
			names_len |= (size_t)bytes[8 + 20 + 3 + 24 + i] << (8 * i);
		at = 8 + 20 + 3 + 32 + idlen + linklen + names_len; /* the first symbol */
		/* a build id that is not hex */
		if (idlen)
			CHECK(decode_changed(bytes, len, 8 + 20 + 3 + 32, "G", 1, &err) == NULL &&
			      err == EBADMSG);
	}
	/* a name past the names */
	CHECK(decode_changed(bytes, len, at + 16, big, 8, &err) == NULL && err == EBADMSG);
	/* an end before its start */
	CHECK(decode_changed(bytes, len, at + 8, "\0\0\0\0\0\0\0\0", 8, &err) == NULL &&
	      err == EBADMSG);
	/* the second symbol before the first: out of order */
	if (nfuncs > 1) {
		uint8_t zero[16] = {0};

		CHECK(decode_changed(bytes, len, at + 24, zero, 16, &err) == NULL &&
		      err == EBADMSG);
	}
	/* the last name's NUL gone: a name could run past the table's bytes */
	CHECK(decode_changed(bytes, len, at - 1, "x", 1, &err) == NULL && err == EBADMSG);
	pp_elf_symbols_free(built);
	free(bytes);
}

static struct pp_symbol_store *store_at(const char *sub, const char *boot)
{
	char dir[600];

	snprintf(dir, sizeof(dir), "%s/%s", g_dir, sub);
	return pp_symbol_store_new(&(struct pp_symbol_store_opts){.dir = dir, .boot_id = boot});
}

static size_t files_in(const char *sub)
{
	char cmd[700];
	FILE *f;
	size_t n = 0;
	int c;

	snprintf(cmd, sizeof(cmd), "ls '%s/%s' | grep -c '\\.sym$'", g_dir, sub);
	f = popen(cmd, "r");
	if (!f)
		return (size_t)-1;
	if (fscanf(f, "%zu", &n) != 1)
		n = 0;
	while ((c = fgetc(f)) != EOF)
		;
	pclose(f);
	return n;
}

/* Whether the one table file in sub is longer than len bytes (a header) and ends with them. */
static bool kept_file_ends_with(const char *sub, const void *bytes, size_t len)
{
	char path[1024];
	struct dirent *de;
	bool ok = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", g_dir, sub);
	d = opendir(path);
	while (d && (de = readdir(d)))
		if (strstr(de->d_name, ".sym")) {
			char file[1400];
			struct stat fs;
			uint8_t *back;
			int fd;

			snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
			fd = open(file, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &fs) || (size_t)fs.st_size <= len ||
			    !(back = malloc((size_t)fs.st_size))) {
				if (fd >= 0)
					close(fd);
				break;
			}
			ok = pread(fd, back, (size_t)fs.st_size, 0) == fs.st_size &&
			     !memcmp(back + fs.st_size - len, bytes, len);
			free(back);
			close(fd);
			break;
		}
	if (d)
		closedir(d);
	return ok;
}

TEST(the_store_finds_a_table_only_under_its_files_identity_and_boot)
{
	struct pp_elf_symbols *built, *got;
	struct pp_symbol_store *st;
	struct pp_symbol_store_stats ss;
	struct stat sb, other, fresh;
	const char *lib;
	int fd;

	lib = real_library(&fd, &built);
	if (!lib)
		SKIP("none of the libraries with symbols is installed");
	REQUIRE(fstat(fd, &sb) == 0);
	close(fd);
	if (time(NULL) < sb.st_ctim.tv_sec + PP_SYMBOL_STORE_SETTLED_S + 1)
		SKIP("the library changed a moment ago: its table is not kept yet");
	if (!g_dir[0]) {
		REQUIRE(pp_test_mkdtemp(g_dir, sizeof(g_dir), "pp-symstore") == 0);
		atexit(cleanup_dir);
	}
	st = store_at("s", "boot-a");
	REQUIRE(st != NULL);
	CHECK(pp_symbol_store_get(st, &sb, 0) == NULL); /* nothing kept yet */
	CHECK(pp_symbol_store_put(st, &sb, built) == 0);
	got = pp_symbol_store_get(st, &sb, 0);
	REQUIRE(got != NULL);
	check_same(built, got);
	pp_elf_symbols_free(got);
	CHECK_EQ_U64(files_in("s"), 1);
	{ /* the file: the store's header, then the table's own form, as encoded */
		void *bytes;
		size_t len;

		REQUIRE(pp_elf_symbols_encode(built, &bytes, &len) == 0);
		CHECK(kept_file_ends_with("s", bytes, len));
		free(bytes);
	}
	/* a bound it is over: not given, still kept */
	CHECK(pp_symbol_store_get(st, &sb, 4096) == NULL);
	CHECK_EQ_U64(files_in("s"), 1);
	/* the same file changed since (its ctime), or another file: none */
	other = sb;
	other.st_ctim.tv_nsec = (sb.st_ctim.tv_nsec + 1) % 1000000000;
	CHECK(pp_symbol_store_get(st, &other, 0) == NULL);
	other = sb;
	other.st_ino++;
	CHECK(pp_symbol_store_get(st, &other, 0) == NULL);
	/* a file changed under 2 s ago: its table is not kept (a change within the ctime's
	 * granularity would go unseen) */
	fresh = sb;
	fresh.st_ino += 7;
	fresh.st_ctim.tv_sec = time(NULL);
	CHECK(pp_symbol_store_put(st, &fresh, built) == -EAGAIN);
	CHECK(pp_symbol_store_get(st, &fresh, 0) == NULL);
	pp_symbol_store_get_stats(st, &ss);
	CHECK_EQ_U64(ss.stored, 1);
	CHECK_EQ_U64(ss.hits, 1);
	CHECK_EQ_U64(ss.unsettled, 1);
	CHECK(ss.bytes > 0);
	pp_symbol_store_free(st);

	/* another boot: its inodes are not this one's; the file is removed */
	st = store_at("s", "boot-b");
	REQUIRE(st != NULL);
	CHECK(pp_symbol_store_get(st, &sb, 0) == NULL);
	pp_symbol_store_get_stats(st, &ss);
	CHECK_EQ_U64(ss.refused, 1);
	CHECK_EQ_U64(files_in("s"), 0);
	/* a kept file altered on disk: refused and removed, never half-read */
	CHECK(pp_symbol_store_put(st, &sb, built) == 0);
	REQUIRE(pp_test_sh("cd '%s/s' && f=$(ls *.sym) && "
			   "dd if=/dev/zero of=\"$f\" bs=1 count=64 seek=200 conv=notrunc "
			   "2>/dev/null",
			   g_dir) == 0);
	CHECK(pp_symbol_store_get(st, &sb, 0) == NULL);
	pp_symbol_store_get_stats(st, &ss);
	CHECK_EQ_U64(ss.refused, 2);
	CHECK_EQ_U64(files_in("s"), 0);
	pp_symbol_store_free(st);

	/* a directory others may write: not used */
	REQUIRE(pp_test_sh("mkdir -p '%s/open' && chmod 0777 '%s/open'", g_dir, g_dir) == 0);
	errno = 0;
	CHECK(store_at("open", "boot-a") == NULL && errno == EPERM);
	pp_elf_symbols_free(built);
}

TEST_LIST = {
    {"a_table_read_back_names_every_address_as_the_file_does",
     a_table_read_back_names_every_address_as_the_file_does},
    {"bytes_cut_out_of_order_or_pointing_outside_are_refused",
     bytes_cut_out_of_order_or_pointing_outside_are_refused},
    {"the_store_finds_a_table_only_under_its_files_identity_and_boot",
     the_store_finds_a_table_only_under_its_files_identity_and_boot},
};
TEST_MAIN()
