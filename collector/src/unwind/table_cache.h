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

#include <stdint.h>

#include "cfi/unwind_table.h"

/* Where the agent keeps them unless told (its state, beside the debuginfod cache). */
#define PP_UNWIND_TABLE_CACHE_DIR_DEFAULT "/var/lib/pebsprof/unwind-tables"
/* The value that asks for no cache: every start compiles its tables. */
#define PP_UNWIND_TABLE_CACHE_NONE "none"

struct pp_table_cache_opts {
	const char *dir;    /* created (0700) if missing; must be this user's, no one else's */
	uint64_t max_bytes; /* 0: 64 MiB */
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

void pp_table_cache_get_stats(const struct pp_table_cache *c, struct pp_table_cache_stats *out);

#endif /* PP_COLLECTOR_TABLE_CACHE_H */
