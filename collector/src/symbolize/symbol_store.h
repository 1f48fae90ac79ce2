/*
 * Symbol tables kept on disk across the agent's restarts, so that a restarted agent (a
 * DaemonSet rolled out, a `record` run again) finds the tables of a node's programs instead of
 * reading every file's symbols again. A table is found by the identity of the file it was
 * built from while that file is unchanged (device, inode, ctime to the ns, size), under the
 * boot it was built in (device numbers and inodes are reused across boots), and only where it
 * was built at least PP_SYMBOL_STORE_SETTLED_S after the file's last change (a change within
 * the timestamps' granularity of the one before would keep the ctime). No one but the agent
 * can set a ctime, and the directory is the agent's alone (base/file_store.h): no file another
 * process controls can lend its names to another's, or keep them once it changes.
 *
 * One thread uses a store (the symbol loader's worker); two agents may share a directory.
 */
#ifndef PP_COLLECTOR_SYMBOL_STORE_H
#define PP_COLLECTOR_SYMBOL_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "elf_symbols.h"

/* Where the agent keeps them unless told (its state, beside the unwind tables). */
#define PP_SYMBOL_STORE_DIR_DEFAULT "/var/lib/pebsprof/symbol-tables"
/* The value that asks for no store: every start reads its files' symbols. */
#define PP_SYMBOL_STORE_NONE "none"
#define PP_SYMBOL_STORE_SETTLED_S 2

/* A configured directory as the store takes it: NULL for none (unset or PP_SYMBOL_STORE_NONE). */
static inline const char *pp_symbol_store_dir_of(const char *configured)
{
	return configured && strcmp(configured, PP_SYMBOL_STORE_NONE) ? configured : NULL;
}

struct pp_symbol_store_opts {
	const char *dir;    /* created (0700) if missing; must be this user's, no one else's */
	uint64_t max_bytes; /* 0: 128 MiB */
	/* the boot the identities belong to (NULL: /proc/sys/kernel/random/boot_id) */
	const char *boot_id;
};

struct pp_symbol_store_stats {
	uint64_t hits;	    /* tables read back */
	uint64_t misses;    /* none for the file */
	uint64_t stored;    /* tables written */
	uint64_t unsettled; /* not written: the file changed under 2 s before */
	uint64_t refused;   /* files that did not decode, or of another boot: removed */
	uint64_t trimmed;   /* files removed to keep the bound */
	uint64_t failed;    /* writes that failed (a full disk): the table is used all the same */
	uint64_t bytes;	    /* in the directory now, as this store counts them */
	uint64_t read_ns;   /* time reading and decoding */
	uint64_t write_ns;  /* time encoding and writing */
};

struct pp_symbol_store;

/* The store in opts->dir: NULL with errno (ENOTDIR, EPERM for a directory others may write,
 * ENOENT where no boot id can be read). */
struct pp_symbol_store *pp_symbol_store_new(const struct pp_symbol_store_opts *opts);
void pp_symbol_store_free(struct pp_symbol_store *s);

/*
 * The table built from the file st describes (fstat of the very file), when one was kept and
 * is within max_bytes (0: no bound); NULL otherwise (a miss, or a file refused).
 */
struct pp_elf_symbols *pp_symbol_store_get(struct pp_symbol_store *s, const struct stat *st,
					   size_t max_bytes);
/*
 * Keep syms, built just now from the file st describes: 0, -EAGAIN for a file changed too
 * recently (not kept), or -errno (counted as failed; nothing half-written stays).
 */
int pp_symbol_store_put(struct pp_symbol_store *s, const struct stat *st,
			const struct pp_elf_symbols *syms);

void pp_symbol_store_get_stats(const struct pp_symbol_store *s, struct pp_symbol_store_stats *out);

#endif /* PP_COLLECTOR_SYMBOL_STORE_H */
