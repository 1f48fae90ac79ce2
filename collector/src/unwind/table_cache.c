/*
 * The on-disk table cache (table_cache.h): DIGEST.uwt files in a file store (base/file_store.h:
 * whole files or none, their mtime the last use, bounded), and the identities file beside them.
 */
#include "table_cache.h"

#include "base/deadline.h"
#include "base/file_store.h"
#include "base/fsutil.h"
#include "base/le.h"
#include "base/log.h"
#include "cfi/unwind_table_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define DEFAULT_MAX_BYTES (64ull << 20)
/* The largest table (PP_UW_MAX_TABLE_WORDS rows of 6 bytes, 65535 rules) is under this. */
#define MAX_FILE_BYTES (40u << 20)
#define SUFFIX ".uwt"
#define FOUND_SUFFIX ".fdes"
#define FOUND_MAGIC "PPFDES01"
/* magic, stamp, the file's identity, count */
#define FOUND_HEAD_BYTES (8 + PP_TABLE_IDENTITY_STAMP_SIZE + PP_FILE_IDENTITY_BYTES + 8)
/* a few big files' worth: 500 FDEs found in each is 4 KiB */
#define FOUND_MAX_BYTES (4ull << 20)

#define IDENTITIES "identities"
#define IDENTITIES_MAGIC "PPUWID01"
/* open addressing at most half full */
#define IDENTITY_SLOTS (2 * PP_TABLE_IDENTITIES_MAX)
/* a file with twice the records the memory holds (repeats) is started again */
#define IDENTITIES_MAX_FILE                                                                        \
	(PP_TABLE_IDENTITIES_HEADER_SIZE +                                                         \
	 2ull * PP_TABLE_IDENTITIES_MAX * PP_TABLE_IDENTITY_RECORD_SIZE)

struct pp_table_cache {
	struct pp_file_store *store;
	struct pp_file_store *found; /* the FDEs partial tables found; NULL: not kept */
	int dirfd;		     /* the store's */
	const char *dir;
	struct pp_table_cache_stats st;
	/* identities: idfd -1 when not kept (no boot id, the file could not be opened) */
	int idfd;
	char stamp[PP_TABLE_IDENTITY_STAMP_SIZE];
	struct pp_table_identity *ids;
	size_t nids;
	uint32_t *slots; /* index + 1 in ids; 0 free */
};

static void name_of(const uint8_t digest[PP_UNWIND_DIGEST_SIZE], char *out, size_t size)
{
	char hex[PP_UNWIND_DIGEST_HEX_SIZE];

	pp_unwind_digest_hex(digest, hex);
	snprintf(out, size, "%s" SUFFIX, hex);
}

void pp_table_identity_encode(const struct pp_table_identity *id, uint8_t *out)
{
	uint8_t *p = out;

	p = pp_le_put(p, id->dev, 8);
	p = pp_le_put(p, id->ino, 8);
	p = pp_le_put(p, (uint64_t)id->ctime_s, 8);
	p = pp_le_put(p, (uint64_t)id->ctime_ns, 8);
	p = pp_le_put(p, (uint64_t)id->size, 8);
	memcpy(p, id->digest, PP_UNWIND_DIGEST_SIZE);
	p += PP_UNWIND_DIGEST_SIZE;
	p = pp_le_put(p, (uint64_t)id->noted_s, 8);
	pp_le_put(p, crc32(0, out, (uInt)(p - out)), 4);
}

int pp_table_identities_parse(const void *buf, size_t len,
			      const char stamp[PP_TABLE_IDENTITY_STAMP_SIZE],
			      struct pp_table_identity *out, size_t max, size_t *n, size_t *bad)
{
	const uint8_t *b = buf;

	*n = *bad = 0;
	if (len < PP_TABLE_IDENTITIES_HEADER_SIZE)
		return -EBADMSG;
	if (memcmp(b, IDENTITIES_MAGIC, 8) || memcmp(b + 8, stamp, PP_TABLE_IDENTITY_STAMP_SIZE))
		return -EPROTO;
	for (size_t off = PP_TABLE_IDENTITIES_HEADER_SIZE; off < len;
	     off += PP_TABLE_IDENTITY_RECORD_SIZE) {
		const uint8_t *p = b + off, *crc_at = p + PP_TABLE_IDENTITY_RECORD_SIZE - 4;
		struct pp_table_identity id;

		if (len - off < PP_TABLE_IDENTITY_RECORD_SIZE) {
			(*bad)++; /* torn: an agent stopped while writing it */
			break;
		}
		if (pp_le_get(&crc_at, 4) != crc32(0, p, PP_TABLE_IDENTITY_RECORD_SIZE - 4)) {
			(*bad)++;
			continue;
		}
		id.dev = pp_le_get(&p, 8);
		id.ino = pp_le_get(&p, 8);
		id.ctime_s = (int64_t)pp_le_get(&p, 8);
		id.ctime_ns = (int64_t)pp_le_get(&p, 8);
		id.size = (int64_t)pp_le_get(&p, 8);
		memcpy(id.digest, p, PP_UNWIND_DIGEST_SIZE);
		p += PP_UNWIND_DIGEST_SIZE;
		id.noted_s = (int64_t)pp_le_get(&p, 8);
		if (*n < max)
			out[(*n)++] = id;
	}
	return 0;
}

static struct pp_table_identity identity_of(const struct stat *st)
{
	return (struct pp_table_identity){.dev = (uint64_t)st->st_dev,
					  .ino = (uint64_t)st->st_ino,
					  .ctime_s = (int64_t)st->st_ctim.tv_sec,
					  .ctime_ns = (int64_t)st->st_ctim.tv_nsec,
					  .size = (int64_t)st->st_size};
}

static bool same_identity(const struct pp_table_identity *a, const struct pp_table_identity *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->ctime_s == b->ctime_s &&
	       a->ctime_ns == b->ctime_ns && a->size == b->size;
}

static size_t identity_hash(const struct pp_table_identity *id)
{
	uint64_t h = id->dev * 0x9e3779b97f4a7c15ull ^ id->ino * 0xc2b2ae3d27d4eb4full ^
		     (uint64_t)id->ctime_ns * 0x165667b19e3779f9ull ^ (uint64_t)id->ctime_s ^
		     (uint64_t)id->size << 17;

	return (size_t)(h ^ h >> 31) & (IDENTITY_SLOTS - 1);
}

/* The slot of id's identity: its entry's, or the free one it would take. */
static uint32_t *identity_slot(struct pp_table_cache *c, const struct pp_table_identity *id)
{
	size_t j = identity_hash(id);

	while (c->slots[j] && !same_identity(&c->ids[c->slots[j] - 1], id))
		j = (j + 1) & (IDENTITY_SLOTS - 1);
	return &c->slots[j];
}

/* Held in memory (a later note of one identity replaces the earlier); false when full. */
static bool identity_hold(struct pp_table_cache *c, const struct pp_table_identity *id)
{
	uint32_t *slot = identity_slot(c, id);

	if (*slot) {
		c->ids[*slot - 1] = *id;
		return true;
	}
	if (c->nids >= PP_TABLE_IDENTITIES_MAX)
		return false;
	c->ids[c->nids] = *id;
	*slot = (uint32_t)++c->nids;
	return true;
}

/* Forget every identity, in memory and in the file, which starts again with its header. */
static void identities_restart(struct pp_table_cache *c)
{
	uint8_t head[PP_TABLE_IDENTITIES_HEADER_SIZE];

	c->nids = 0;
	memset(c->slots, 0, IDENTITY_SLOTS * sizeof(*c->slots));
	memcpy(head, IDENTITIES_MAGIC, 8);
	memcpy(head + 8, c->stamp, PP_TABLE_IDENTITY_STAMP_SIZE);
	if (ftruncate(c->idfd, 0) || pp_write_all(c->idfd, head, sizeof(head))) {
		pp_warn("unwind table cache: %s/" IDENTITIES ": %s; identities not kept", c->dir,
			strerror(errno));
		close(c->idfd);
		c->idfd = -1;
	}
}

/* Reads the identities the file holds for this boot and compiler, or starts it again. */
static void identities_open(struct pp_table_cache *c, const char *boot_id)
{
	char boot[64] = "";
	struct stat st;
	void *buf = NULL;
	size_t len = 0, n = 0, bad = 0;
	int err;

	c->idfd = -1;
	if (pp_boot_id(boot_id, boot, sizeof(boot)))
		return;
	c->ids = calloc(PP_TABLE_IDENTITIES_MAX, sizeof(*c->ids));
	c->slots = calloc(IDENTITY_SLOTS, sizeof(*c->slots));
	if (!c->ids || !c->slots)
		return;
	snprintf(c->stamp, sizeof(c->stamp), "%s %s", pp_unwind_compiler_id(), boot);
	c->idfd = openat(c->dirfd, IDENTITIES,
			 O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (c->idfd < 0)
		return;
	if (fstat(c->idfd, &st) || !S_ISREG(st.st_mode)) {
		close(c->idfd);
		c->idfd = -1;
		return;
	}
	err = pp_read_fd_whole(c->idfd, IDENTITIES_MAX_FILE, &buf, &len);
	if (!err)
		err = pp_table_identities_parse(buf, len, c->stamp, c->ids, PP_TABLE_IDENTITIES_MAX,
						&n, &bad);
	free(buf);
	if (err) { /* empty, another boot's or compiler's, or grown past its bound */
		identities_restart(c);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct pp_table_identity id = c->ids[i];

		identity_hold(c, &id);
	}
	if (bad)
		pp_warn("unwind table cache: %s/" IDENTITIES
			": %zu records skipped (torn or altered)",
			c->dir, bad);
}

int pp_table_cache_digest_of(struct pp_table_cache *c, const struct stat *st,
			     uint8_t digest[PP_UNWIND_DIGEST_SIZE])
{
	struct pp_table_identity want = identity_of(st);
	const struct pp_table_identity *id;
	uint32_t slot;

	if (!c || !c->slots || !c->nids)
		return -ENOENT;
	slot = *identity_slot(c, &want);
	if (!slot)
		return -ENOENT;
	id = &c->ids[slot - 1];
	if (id->noted_s < id->ctime_s + PP_TABLE_IDENTITY_SETTLED_S) {
		c->st.identity_unsettled++;
		return -ENOENT;
	}
	memcpy(digest, id->digest, PP_UNWIND_DIGEST_SIZE);
	c->st.identity_hits++;
	return 0;
}

void pp_table_cache_note_digest(struct pp_table_cache *c, const struct stat *st,
				const uint8_t digest[PP_UNWIND_DIGEST_SIZE])
{
	struct pp_table_identity id = identity_of(st);
	uint8_t rec[PP_TABLE_IDENTITY_RECORD_SIZE];
	struct timespec now;

	if (!c || c->idfd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	id.noted_s = (int64_t)now.tv_sec;
	memcpy(id.digest, digest, PP_UNWIND_DIGEST_SIZE);
	if (!identity_hold(c, &id)) {
		identities_restart(c); /* full: the ones in use come back as they are digested */
		if (c->idfd < 0)
			return;
		identity_hold(c, &id);
	}
	pp_table_identity_encode(&id, rec);
	/* one write of O_APPEND: two agents on one directory interleave whole records */
	if (pp_write_all(c->idfd, rec, sizeof(rec)))
		c->st.failed++;
}

struct pp_table_cache *pp_table_cache_new(const struct pp_table_cache_opts *opts)
{
	struct pp_table_cache *c;

	if (!opts || !opts->dir) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	/* tables others could write would be walked by the shim in every process: ours alone */
	c->store = pp_file_store_new(&(struct pp_file_store_opts){
	    .dir = opts->dir,
	    .suffix = SUFFIX,
	    .name_hex = 2 * PP_UNWIND_DIGEST_SIZE,
	    .max_bytes = opts->max_bytes ? opts->max_bytes : DEFAULT_MAX_BYTES,
	    .max_file_bytes = MAX_FILE_BYTES,
	    .what = "unwind table cache",
	});
	if (!c->store) {
		int err = errno;

		free(c);
		errno = err;
		return NULL;
	}
	c->dirfd = pp_file_store_dirfd(c->store);
	c->dir = pp_file_store_dir(c->store);
	identities_open(c, opts->boot_id);
	/* what partial tables found: only under a boot known (the stamp), as the identities */
	if (c->idfd >= 0)
		c->found = pp_file_store_new(&(struct pp_file_store_opts){
		    .dir = opts->dir,
		    .suffix = FOUND_SUFFIX,
		    .name_hex = PP_FILE_IDENTITY_NAME_HEX,
		    .max_bytes = FOUND_MAX_BYTES,
		    .max_file_bytes = FOUND_HEAD_BYTES + PP_TABLE_FOUND_MAX * 8,
		    .what = "unwind table cache",
		});
	return c;
}

void pp_table_cache_free(struct pp_table_cache *c)
{
	if (!c)
		return;
	if (c->idfd >= 0)
		close(c->idfd);
	free(c->ids);
	free(c->slots);
	pp_file_store_free(c->found);
	pp_file_store_free(c->store);
	free(c);
}

struct pp_unwind_table *pp_table_cache_get(struct pp_table_cache *c,
					   const uint8_t digest[PP_UNWIND_DIGEST_SIZE])
{
	uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	uint8_t held[PP_UNWIND_DIGEST_SIZE];
	struct pp_unwind_table *t = NULL;
	char name[96];
	size_t len = 0;
	void *buf;
	int err;

	name_of(digest, name, sizeof(name));
	/* mapped: the rows go on as the page cache holds them, neither copied nor held twice */
	err = pp_file_store_map(c->store, name, &buf, &len);
	if (err) { /* none, no memory, or refused by the store */
		c->st.misses += err != -EBADMSG;
		goto out;
	}
	t = pp_unwind_table_decode(buf, len, len, held); /* the mapping is its */
	if (t && memcmp(held, digest, sizeof(held))) {
		pp_unwind_table_free(t);
		t = NULL;
		errno = EXDEV;
	}
	if (!t) {
		err = errno;
		if (err == ENOMEM) {
			c->st.misses++;
			goto out;
		}
		pp_file_store_refuse(c->store, name,
				     err == EPROTO  ? "another format version"
				     : err == EXDEV ? "it holds the table of another digest"
						    : "does not decode (torn or altered)");
		goto out;
	}
	pp_file_store_touch(c->store, name);
	c->st.hits++;
out:
	c->st.read_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
	return t;
}

int pp_table_cache_put(struct pp_table_cache *c, const uint8_t digest[PP_UNWIND_DIGEST_SIZE],
		       const struct pp_unwind_table *t)
{
	uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	char name[96];
	size_t len;
	void *buf;
	int err;

	err = pp_unwind_table_encode(t, digest, &buf, &len);
	if (!err) {
		/* over half the bound it would push out most of what is kept (-EFBIG) */
		name_of(digest, name, sizeof(name));
		err = pp_file_store_put(c->store, name, buf, len);
		free(buf);
	}
	if (!err)
		c->st.stored++;
	if (err && err != -EFBIG)
		c->st.failed++;
	c->st.write_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
	return err;
}

int pp_table_found_parse(const void *buf, size_t len,
			 const char stamp[PP_TABLE_IDENTITY_STAMP_SIZE], const struct stat *st,
			 uint64_t *out, size_t *n)
{
	const uint8_t *p = buf;
	uint64_t count;

	*n = 0;
	if (len < FOUND_HEAD_BYTES || memcmp(p, FOUND_MAGIC, 8))
		return len >= 8 && !memcmp(p, FOUND_MAGIC, 6) ? -EPROTO
		       : len < FOUND_HEAD_BYTES		      ? -EBADMSG
							      : -EPROTO;
	if (memcmp(p + 8, stamp, PP_TABLE_IDENTITY_STAMP_SIZE))
		return -EPROTO;
	p += 8 + PP_TABLE_IDENTITY_STAMP_SIZE;
	if (!pp_file_identity_is(p, st))
		return -EPROTO;
	p += PP_FILE_IDENTITY_BYTES;
	count = pp_le_get(&p, 8);
	if (count > PP_TABLE_FOUND_MAX || len != FOUND_HEAD_BYTES + count * 8)
		return -EBADMSG;
	for (uint64_t i = 0; i < count; i++)
		out[i] = pp_le_get(&p, 8);
	*n = (size_t)count;
	return 0;
}

int pp_table_cache_get_found(struct pp_table_cache *c, const struct stat *st, uint64_t **pcs,
			     size_t *n)
{
	char name[64];
	uint64_t *out;
	size_t len;
	void *buf;
	int err;

	*pcs = NULL;
	*n = 0;
	if (!c || !c->found)
		return -ENOENT;
	pp_file_identity_name(st, FOUND_SUFFIX, name, sizeof(name));
	err = pp_file_store_read(c->found, name, &buf, &len);
	if (err)
		return err == -ENOMEM ? -ENOMEM : -ENOENT;
	out = malloc(PP_TABLE_FOUND_MAX * sizeof(*out));
	if (!out) {
		free(buf);
		return -ENOMEM;
	}
	err = pp_table_found_parse(buf, len, c->stamp, st, out, n);
	free(buf);
	if (err) {
		free(out);
		pp_file_store_refuse(c->found, name,
				     err == -EPROTO ? "another format, file, boot or compiler"
						    : "does not decode (torn or altered)");
		return -ENOENT;
	}
	pp_file_store_touch(c->found, name);
	*pcs = out;
	return 0;
}

int pp_table_cache_put_found(struct pp_table_cache *c, const struct stat *st, const uint64_t *pcs,
			     size_t n)
{
	uint8_t *buf, *p;
	char name[64];
	int err;

	if (!c || !c->found)
		return -ENOENT;
	if (time(NULL) < st->st_ctim.tv_sec + PP_TABLE_IDENTITY_SETTLED_S)
		return -EAGAIN;
	if (n > PP_TABLE_FOUND_MAX)
		n = PP_TABLE_FOUND_MAX;
	buf = malloc(FOUND_HEAD_BYTES + n * 8);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, FOUND_MAGIC, 8);
	memcpy(buf + 8, c->stamp, PP_TABLE_IDENTITY_STAMP_SIZE);
	p = pp_file_identity_put(buf + 8 + PP_TABLE_IDENTITY_STAMP_SIZE, st);
	p = pp_le_put(p, n, 8);
	for (size_t i = 0; i < n; i++)
		p = pp_le_put(p, pcs[i], 8);
	pp_file_identity_name(st, FOUND_SUFFIX, name, sizeof(name));
	err = pp_file_store_put(c->found, name, buf, FOUND_HEAD_BYTES + n * 8);
	free(buf);
	if (err && err != -EFBIG)
		c->st.failed++;
	return err;
}

void pp_table_cache_get_stats(const struct pp_table_cache *c, struct pp_table_cache_stats *out)
{
	if (c) {
		struct pp_file_store_stats fs;

		pp_file_store_get_stats(c->store, &fs);
		*out = c->st;
		out->refused = fs.refused;
		out->trimmed = fs.trimmed;
		out->bytes = fs.bytes;
		out->identities = c->nids;
	} else {
		memset(out, 0, sizeof(*out));
	}
}
