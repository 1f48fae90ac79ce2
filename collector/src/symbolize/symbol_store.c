/*
 * The symbol table cache on disk (symbol_store.h): one file per table in a file store, named
 * by a hash of its file's identity, holding a stamp (the reader's build and the boot), that
 * identity in full and the table's own sealed form (pp_elf_symbols_encode).
 */
#include "symbol_store.h"

#include "base/deadline.h"
#include "base/file_store.h"
#include "base/fsutil.h"
#include "base/le.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef PP_SYMBOLS_BUILDER_ID
#define PP_SYMBOLS_BUILDER_ID "unversioned"
#endif

#define DEFAULT_MAX_BYTES (128ull << 20)
/* pp_elf_symbols' bound by default (256 MiB of table) as encoded, and the header */
#define MAX_FILE_BYTES (320ull << 20)
#define SUFFIX ".sym"
#define MAGIC "PPSYMS01"
#define STAMP_SIZE 112
/* magic, stamp, the file's identity, when built */
#define HEAD_BYTES (8 + STAMP_SIZE + PP_FILE_IDENTITY_BYTES + 8)

struct pp_symbol_store {
	struct pp_file_store *files;
	char stamp[STAMP_SIZE]; /* NUL-padded */
	struct pp_symbol_store_stats st;
};

struct pp_symbol_store *pp_symbol_store_new(const struct pp_symbol_store_opts *opts)
{
	struct pp_symbol_store *s;
	char boot[64] = "";
	int err;

	if (!opts || !opts->dir) {
		errno = EINVAL;
		return NULL;
	}
	if (pp_boot_id(opts->boot_id, boot, sizeof(boot))) {
		/* identities of no known boot could be another boot's */
		errno = ENOENT;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->stamp, sizeof(s->stamp), "%s %s", PP_SYMBOLS_BUILDER_ID, boot);
	s->files = pp_file_store_new(&(struct pp_file_store_opts){
	    .dir = opts->dir,
	    .suffix = SUFFIX,
	    .name_hex = PP_FILE_IDENTITY_NAME_HEX,
	    .max_bytes = opts->max_bytes ? opts->max_bytes : DEFAULT_MAX_BYTES,
	    .max_file_bytes = MAX_FILE_BYTES,
	    .what = "symbol table cache",
	});
	if (!s->files) {
		err = errno;
		free(s);
		errno = err;
		return NULL;
	}
	return s;
}

void pp_symbol_store_free(struct pp_symbol_store *s)
{
	if (!s)
		return;
	pp_file_store_free(s->files);
	free(s);
}

/*
 * The table in a file's bytes, if its header is this store's and st's: NULL with errno and
 * *why. The mapping buf is taken either way (the table keeps it for its names, or it is
 * unmapped).
 */
static struct pp_elf_symbols *decode(const struct pp_symbol_store *s, uint8_t *buf, size_t len,
				     const struct stat *st, size_t max_bytes, const char **why)
{
	const uint8_t *p = buf + 8 + STAMP_SIZE;
	uint64_t built_s;
	struct pp_elf_symbols *syms;
	int err;

	if (len < HEAD_BYTES || memcmp(buf, MAGIC, 8)) {
		*why = "not a symbol table of this format";
		err = EPROTO;
		goto fail;
	}
	if (memcmp(buf + 8, s->stamp, STAMP_SIZE)) {
		*why = "built by another reader, or in another boot";
		err = EPROTO;
		goto fail;
	}
	if (!pp_file_identity_is(p, st)) {
		*why = "it holds the table of another file";
		err = EXDEV;
		goto fail;
	}
	p += PP_FILE_IDENTITY_BYTES;
	built_s = pp_le_get(&p, 8);
	if (built_s < (uint64_t)st->st_ctim.tv_sec + PP_SYMBOL_STORE_SETTLED_S) {
		*why = "built while its file could still change unseen";
		err = EBADMSG;
		goto fail;
	}
	syms = pp_elf_symbols_decode(p, len - HEAD_BYTES, max_bytes, buf, len);
	if (!syms)
		*why = errno == EPROTO ? "another format version"
				       : "does not decode (torn or altered)";
	return syms;
fail:
	munmap(buf, len);
	errno = err;
	return NULL;
}

struct pp_elf_symbols *pp_symbol_store_get(struct pp_symbol_store *s, const struct stat *st,
					   size_t max_bytes)
{
	uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	struct pp_elf_symbols *syms = NULL;
	const char *why = NULL;
	char name[64];
	size_t len;
	void *buf;
	int err;

	pp_file_identity_name(st, SUFFIX, name, sizeof(name));
	/* mapped: a table's names are most of it, and a profile names few of them */
	err = pp_file_store_map(s->files, name, &buf, &len);
	if (err) { /* none, no memory, or refused by the store */
		s->st.misses += err != -EBADMSG;
		goto out;
	}
	syms = decode(s, buf, len, st, max_bytes, &why); /* buf is its */
	if (!syms) {
		/* over the caller's bound, or no memory now: kept for a later start */
		if (errno == EFBIG || errno == ENOMEM)
			s->st.misses++;
		else
			pp_file_store_refuse(s->files, name, why);
		goto out;
	}
	pp_file_store_touch(s->files, name);
	s->st.hits++;
out:
	s->st.read_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
	return syms;
}

/* A store's file: its header, then the table's bytes. */
struct table_file {
	uint8_t head[HEAD_BYTES];
	const struct pp_elf_symbols *syms;
};

static int write_table_file(int fd, void *arg)
{
	const struct table_file *f = arg;
	int err = pp_write_all(fd, f->head, sizeof(f->head));

	return err ? err : pp_elf_symbols_write(f->syms, fd);
}

int pp_symbol_store_put(struct pp_symbol_store *s, const struct stat *st,
			const struct pp_elf_symbols *syms)
{
	uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	size_t len = pp_elf_symbols_encoded_len(syms);
	struct table_file f = {.syms = syms};
	struct timespec now;
	char name[64];
	uint8_t *p;
	int err;

	clock_gettime(CLOCK_REALTIME, &now);
	if (now.tv_sec < st->st_ctim.tv_sec + PP_SYMBOL_STORE_SETTLED_S) {
		s->st.unsettled++;
		return -EAGAIN;
	}
	if (!len) {
		err = -EINVAL;
	} else {
		memcpy(f.head, MAGIC, 8);
		memcpy(f.head + 8, s->stamp, STAMP_SIZE);
		p = pp_file_identity_put(f.head + 8 + STAMP_SIZE, st);
		pp_le_put(p, (uint64_t)now.tv_sec, 8);
		pp_file_identity_name(st, SUFFIX, name, sizeof(name));
		/*
		 * Written from the table where it lies: a big table (node's: 10 MiB) encoded in
		 * memory first would cost as much again in fresh pages. Over half the bound it
		 * would push out most of what is kept (-EFBIG).
		 */
		err = pp_file_store_put_by(s->files, name, HEAD_BYTES + len, write_table_file, &f);
	}
	if (!err)
		s->st.stored++;
	else if (err != -EFBIG)
		s->st.failed++;
	s->st.write_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
	return err;
}

void pp_symbol_store_get_stats(const struct pp_symbol_store *s, struct pp_symbol_store_stats *out)
{
	struct pp_file_store_stats fs;

	if (!s) {
		memset(out, 0, sizeof(*out));
		return;
	}
	pp_file_store_get_stats(s->files, &fs);
	*out = s->st;
	out->refused = fs.refused;
	out->trimmed = fs.trimmed;
	out->bytes = fs.bytes;
}
