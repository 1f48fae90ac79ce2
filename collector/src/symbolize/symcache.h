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

#include "debug_file.h"
#include "process/mapped_file.h"
#include "elf_symbols.h"
#include "symbol_store.h"

/* How long a failure to open or parse a file is remembered, unless changed. */
#define PP_SYMCACHE_NEGATIVE_TTL_MS_DEFAULT 10000u

struct pp_symcache_stats {
	uint64_t hits;		     /* answered from a cached entry (positive or negative) */
	uint64_t misses;	     /* no entry for the file: it had to be opened */
	uint64_t opens;		     /* symbol tables built from a file (or read back) */
	uint64_t from_store;	     /* of opens, tables read back from the store on disk */
	uint64_t open_failures;	     /* files that could not be opened or parsed */
	uint64_t negative_hits;	     /* of hits, those that repeated a remembered failure */
	uint64_t shared_by_build_id; /* misses read and found to name alike a table cached under
				      * their build id: that one shared (the memory of a copy) */
	uint64_t evictions;	     /* entries dropped to stay within max_files, max_bytes */
	uint64_t too_big;	     /* tables larger than max_bytes alone: not kept */
	uint64_t refused;	     /* files whose headers claim bytes a sparse file lacks */
	uint64_t build_id_mismatch;  /* lookups refused with ESTALE */
	uint64_t debug_files;	     /* stripped files named by a separate debug file on disk */
	uint64_t debug_fetched;	     /* ... by one the debug fetcher (debuginfod) gave */
	uint64_t debug_missing;	     /* stripped files for which neither had one (yet) */
	uint64_t debug_errors;	     /* debug files found but unusable (corrupt, too big) */
	uint64_t forgotten;	     /* entries dropped by pp_symcache_forget_build_id */
	uint64_t identity_hits;	     /* of hits, found by the mapping's identity: no open */
};

/*
 * Asked for a stripped file's debug file when none is on disk (debuginfod, see
 * debuginfod_fetch.h); must not block. Returns an open fd of the debug file, -EAGAIN when the
 * answer is not known yet (asked in the background; the caller will forget the build id once
 * it is), or another -errno when there is none.
 */
typedef int (*pp_debug_fetch_fn)(void *ctx, const char *build_id);

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

/*
 * Where stripped files' separate debug files are looked for (borrowed; NULL: nowhere, the
 * default), and the fetcher asked when none is there (NULL: none).
 */
void pp_symcache_set_debug_dirs(struct pp_symcache *c, const struct pp_debug_dirs *dirs);
void pp_symcache_set_debug_fetch(struct pp_symcache *c, pp_debug_fetch_fn fn, void *ctx);

/*
 * PP_ELF_OPEN_* flags for every file opened from now on (PP_ELF_OPEN_NO_SYMBOLS: build ids and
 * segments only, for --symbolize none; no debug file is looked for then).
 */
void pp_symcache_set_open_flags(struct pp_symcache *c, unsigned int flags);

/*
 * Where the tables built from files are kept across the agent's restarts (symbol_store.h;
 * borrowed; NULL: nowhere, the default): a file's own table is read back from there while the
 * file is unchanged, and kept there when built. Not with PP_ELF_OPEN_* flags.
 */
void pp_symcache_set_store(struct pp_symcache *c, struct pp_symbol_store *store);

/*
 * Drop every entry whose table has this build id, so the next get reads the file again (its
 * debug file has just become available). Returns how many entries were dropped.
 */
size_t pp_symcache_forget_build_id(struct pp_symcache *c, const char *build_id);

/* Change how long failures are remembered (0: not at all). */
void pp_symcache_set_negative_ttl_ms(struct pp_symcache *c, uint64_t ttl_ms);

/*
 * The symbol table of the ELF file behind fd (opened by the caller: symbolize/symloader opens
 * a mapping's file the safe way, process/mapped_file.h), found again by its identity (fstat).
 * root and name are the file's process root ("/proc/PID/root", NULL: the host's) and its path
 * as the process sees it, where its debug file is looked for. When expected_build_id is neither
 * NULL nor "" and the file's build id differs (compared ignoring case; a file without one
 * differs), returns NULL with errno ESTALE: a replaced binary must never lend its names to
 * samples of the old one. Otherwise NULL with errno as pp_elf_symbols_open_fd_limited (also
 * while a failure is remembered). Files refused for their claims (EFBIG, ENXIO) are counted,
 * said once with name, and remembered until evicted.
 *
 * The table is borrowed from the cache: valid until the next get on c (which may evict it; take
 * a reference with pp_elf_symbols_ref to keep it) or pp_symcache_free.
 */
const struct pp_elf_symbols *pp_symcache_get_fd(struct pp_symcache *c, int fd, const char *root,
						const char *name, const char *expected_build_id);

/* The same for the host file at path, opened here (tests and host-only callers). */
const struct pp_elf_symbols *pp_symcache_get_file(struct pp_symcache *c, const char *path,
						  const char *expected_build_id);

/*
 * The table cached for the file the side-band names id, when a get of the file (fd) was
 * followed by pp_symcache_add_identity with that id less than 30 s ago: found without
 * opening the file (a process gone, or the thousandth exec of one program). NULL with errno
 * ENOENT otherwise (open it, get it, add the identity again).
 * Borrowed as from pp_symcache_get_fd.
 */
const struct pp_elf_symbols *pp_symcache_get_identity(struct pp_symcache *c,
						      const struct pp_file_identity *id);
/* Remember that the file open as fd is the one the side-band names id. */
void pp_symcache_add_identity(struct pp_symcache *c, const struct pp_file_identity *id, int fd);

/*
 * The separate debug file of the binary whose table is syms (its build id and debuglink), named
 * name in the process's root: under the debug directories first, then from the fetcher. An fd
 * the caller closes, with *src saying which (PP_SYMBOLS_DEBUG_FILE or _DEBUGINFOD), or -ENOENT.
 */
int pp_symcache_open_debug_file(struct pp_symcache *c, const struct pp_elf_symbols *syms,
				const char *root, const char *name, enum pp_symbol_source *src);

/* Entries and bytes held now, and the counters so far. */
size_t pp_symcache_size(const struct pp_symcache *c);
size_t pp_symcache_bytes(const struct pp_symcache *c);
void pp_symcache_get_stats(const struct pp_symcache *c, struct pp_symcache_stats *out);

#endif /* PP_COLLECTOR_SYMCACHE_H */
