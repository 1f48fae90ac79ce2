/*
 * Compiled unwind tables kept on disk across the agent's restarts, so that a node's programs
 * are compiled once, not once per start of the agent (a DaemonSet rolled out, a `record` run
 * again). Files are named by the digest of what a table is compiled from
 * (pp_unwind_table_digest_fd): whatever a container names its files or their build ids, a
 * table is found only for the very bytes it was compiled from, so no file can poison
 * another's. Bounded in bytes, least recently used first out; a file that does not decode
 * (torn, altered, another format) is removed and counted.
 *
 * One thread uses a cache (the unwinder's worker); two agents may share a directory.
 */
#ifndef PP_COLLECTOR_TABLE_CACHE_H
#define PP_COLLECTOR_TABLE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cfi/unwind_table.h"

/* Where the agent keeps them unless told (its state, beside the debuginfod cache). */
#define PP_UNWIND_TABLE_CACHE_DIR_DEFAULT "/var/lib/pebsprof/unwind-tables"
/* The value that asks for no cache: every start compiles its tables. */
#define PP_UNWIND_TABLE_CACHE_NONE "none"

struct pp_table_cache_opts {
	const char *dir;    /* created (0700) if missing; must be this user's, no one else's */
	uint64_t max_bytes; /* 0: 64 MiB */
	/* the boot the identities below belong to (NULL: /proc/sys/kernel/random/boot_id) */
	const char *boot_id;
};

struct pp_table_cache_stats {
	uint64_t hits;	   /* tables read back */
	uint64_t misses;   /* no file for the digest */
	uint64_t stored;   /* tables written */
	uint64_t refused;  /* files that did not decode or held another digest: removed */
	uint64_t trimmed;  /* files removed to keep the bound */
	uint64_t failed;   /* writes that failed (a full disk): the table is used all the same */
	uint64_t bytes;	   /* in the directory now, as this cache counts them */
	uint64_t read_ns;  /* time reading and decoding */
	uint64_t write_ns; /* time encoding and writing */
	/* identities (pp_table_cache_digest_of): digests found, and refused as too fresh */
	uint64_t identity_hits;
	uint64_t identity_unsettled;
	uint64_t identities; /* held now */
};

struct pp_table_cache;

/* The cache in opts->dir: NULL with errno (ENOTDIR, EPERM for a directory others may write). */
struct pp_table_cache *pp_table_cache_new(const struct pp_table_cache_opts *opts);
void pp_table_cache_free(struct pp_table_cache *c);

/* The table compiled from the bytes of this digest, or NULL (a miss, or a file refused). */
struct pp_unwind_table *pp_table_cache_get(struct pp_table_cache *c,
					   const uint8_t digest[PP_UNWIND_DIGEST_SIZE]);
/* Keep t under digest: 0, or -errno (counted as failed; nothing half-written stays). */
int pp_table_cache_put(struct pp_table_cache *c, const uint8_t digest[PP_UNWIND_DIGEST_SIZE],
		       const struct pp_unwind_table *t);

/*
 * Identities: the digest a file had, by what identifies it while it is not changed (device,
 * inode, ctime to the ns, size), kept beside the tables, so that an agent started again finds
 * its tables without reading and hashing each file's CFI again. Only for the boot and the
 * compiler they were noted under (device numbers and inodes are reused across boots), and only
 * where the digest was taken at least PP_TABLE_IDENTITY_SETTLED_S after the file's last change:
 * a change within the timestamps' granularity of the one before would keep the ctime. No one
 * but the agent can set a ctime, and the directory is the agent's alone.
 */
#define PP_TABLE_IDENTITY_SETTLED_S 2
#define PP_TABLE_IDENTITIES_MAX 8192

/* The digest noted for the file st describes: 0, or -ENOENT (none, or not settled). */
int pp_table_cache_digest_of(struct pp_table_cache *c, const struct stat *st,
			     uint8_t digest[PP_UNWIND_DIGEST_SIZE]);
/* Note the digest of the file st describes, taken now. */
void pp_table_cache_note_digest(struct pp_table_cache *c, const struct stat *st,
				const uint8_t digest[PP_UNWIND_DIGEST_SIZE]);

/* One noted identity, as the file holds it. */
struct pp_table_identity {
	uint64_t dev, ino;
	int64_t ctime_s, ctime_ns, size;
	uint8_t digest[PP_UNWIND_DIGEST_SIZE];
	int64_t noted_s; /* wall clock */
};
#define PP_TABLE_IDENTITY_STAMP_SIZE 112 /* the compiler's identity, the boot's */
/*
 * The identities file's parser (the file: magic, stamp, then records of 84 bytes, each sealed
 * by its CRC-32): the records of buf in out (at most max), in *n; records whose CRC does not
 * match, and a torn last one, are skipped and counted in *bad. 0, or -EPROTO for a file of
 * another format, compiler or boot (stamp), -EBADMSG for one shorter than its header.
 */
int pp_table_identities_parse(const void *buf, size_t len,
			      const char stamp[PP_TABLE_IDENTITY_STAMP_SIZE],
			      struct pp_table_identity *out, size_t max, size_t *n, size_t *bad);
#define PP_TABLE_IDENTITIES_HEADER_SIZE (8 + PP_TABLE_IDENTITY_STAMP_SIZE)
#define PP_TABLE_IDENTITY_RECORD_SIZE 84
/* The bytes of one record (PP_TABLE_IDENTITY_RECORD_SIZE), its CRC included. */
void pp_table_identity_encode(const struct pp_table_identity *id, uint8_t *out);

/*
 * The FDEs a partial table found (unwinder.h: each by the address of its first row), kept by
 * its file's identity as above, for the boot and the compiler: a restarted agent looks them up
 * again at once instead of waiting for walks to reach them. Kept only for a file unchanged for
 * PP_TABLE_IDENTITY_SETTLED_S, at most PP_TABLE_FOUND_MAX addresses. An address is only a
 * hint: the FDE it names is looked up and checked as any.
 */
#define PP_TABLE_FOUND_MAX 65536
/* The addresses kept for the file st describes: 0 with *pcs (the caller frees) and *n, or
 * -ENOENT (none, of another file, boot or compiler: those removed), -ENOMEM. */
int pp_table_cache_get_found(struct pp_table_cache *c, const struct stat *st, uint64_t **pcs,
			     size_t *n);
/* Keep them: 0, -EAGAIN for a file changed too recently, or -errno. */
int pp_table_cache_put_found(struct pp_table_cache *c, const struct stat *st, const uint64_t *pcs,
			     size_t n);
/*
 * A found-FDEs file's parser: its addresses in out (room for PP_TABLE_FOUND_MAX), in *n, when
 * its header holds stamp and the identity of st. 0, -EPROTO for another format, boot, compiler
 * or file, -EBADMSG for a size its count does not give.
 */
int pp_table_found_parse(const void *buf, size_t len,
			 const char stamp[PP_TABLE_IDENTITY_STAMP_SIZE], const struct stat *st,
			 uint64_t *out, size_t *n);

void pp_table_cache_get_stats(const struct pp_table_cache *c, struct pp_table_cache_stats *out);

#endif /* PP_COLLECTOR_TABLE_CACHE_H */
