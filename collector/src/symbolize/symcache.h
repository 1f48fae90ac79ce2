/*
 * A cache of ELF symbol tables bounded in files and in bytes. A file is found again by (st_dev,
 * st_ino, st_size, st_mtime) so the same binary is not reopened per sample, and tables are shared
 * by build id so one binary seen through many containers' /proc/PID/root paths is parsed once.
 * Failures to open are remembered for a short while (negative entries) so a missing file costs one
 * open per interval, not one per sample.
 */
#ifndef PP_COLLECTOR_SYMCACHE_H
#define PP_COLLECTOR_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "elf_symbols.h"

/* How long a failure to open or parse a file is remembered, unless changed. */
#define PP_SYMCACHE_NEGATIVE_TTL_MS_DEFAULT 10000u

struct pp_symcache_stats {
	uint64_t hits;		     /* answered from a cached entry (positive or negative) */
	uint64_t misses;	     /* no entry for the file: it had to be opened */
	uint64_t opens;		     /* symbol tables built from a file */
	uint64_t open_failures;	     /* files that could not be opened or parsed */
	uint64_t negative_hits;	     /* of hits, those that repeated a remembered failure */
	uint64_t shared_by_build_id; /* misses served by a table already cached under its id */
	uint64_t evictions;	     /* entries dropped to stay within max_files, max_bytes */
	uint64_t too_big;	     /* tables larger than max_bytes alone: not kept */
	uint64_t build_id_mismatch;  /* lookups refused with ESTALE */
};

struct pp_symcache;

/*
 * A cache holding at most max_files entries (files and remembered failures together) and
 * max_bytes of tables and entries (pp_elf_symbols_bytes; a table shared by build id counts
 * once); the least recently used entries are evicted to make room. A table larger than
 * max_bytes on its own is not kept: its file fails with EFBIG (remembered like any failure),
 * counted in too_big. NULL with errno EINVAL for max_files or max_bytes 0, or ENOMEM.
 */
struct pp_symcache *pp_symcache_new(size_t max_files, size_t max_bytes);

/* Release the cache and every table in it. NULL is a no-op. */
void pp_symcache_free(struct pp_symcache *c);

/* Change how long failures are remembered (0: not at all). */
void pp_symcache_set_negative_ttl_ms(struct pp_symcache *c, uint64_t ttl_ms);

/*
 * The symbol table of the file at path (already the /proc/PID/root/... form for processes in
 * other mount namespaces). When expected_build_id is neither NULL nor "" and the file's build id
 * differs (compared ignoring case; a file without one differs), returns NULL with errno ESTALE: a
 * replaced binary must never lend its names to samples of the old one. Otherwise NULL with errno as
 * pp_elf_symbols_open_path (also while a failure is remembered).
 *
 * The table is borrowed from the cache: valid until the next pp_symcache_get_file on c (which
 * may evict it) or pp_symcache_free.
 */
const struct pp_elf_symbols *pp_symcache_get_file(struct pp_symcache *c, const char *path,
						  const char *expected_build_id);

/* Entries and bytes held now, and the counters so far. */
size_t pp_symcache_size(const struct pp_symcache *c);
size_t pp_symcache_bytes(const struct pp_symcache *c);
void pp_symcache_get_stats(const struct pp_symcache *c, struct pp_symcache_stats *out);

#endif /* PP_COLLECTOR_SYMCACHE_H */
