/*
 * A directory of files the agent keeps across its restarts (what it compiled or built from
 * the node's files): one directory, this user's alone, opened once and every file reached
 * relative to it without following links; each file written under a temporary name and
 * renamed into place (a reader sees a whole file or none); its mtime its last use; the
 * directory bounded in bytes, least recently used first out. What a file holds is its
 * owner's to check: one that does not decode is refused (removed, counted, said once).
 *
 * One thread uses a store; two agents may share a directory.
 */
#ifndef PP_COLLECTOR_FILE_STORE_H
#define PP_COLLECTOR_FILE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct pp_file_store_opts {
	const char *dir;	 /* created (0700, parents too) if missing */
	const char *suffix;	 /* of the store's files, e.g. ".uwt" */
	size_t name_hex;	 /* their names: this many lower-case hex digits, then suffix */
	uint64_t max_bytes;	 /* the directory's bound */
	uint64_t max_file_bytes; /* a file larger is not read (refused) */
	const char *what;	 /* for messages: "unwind table cache" */
};

struct pp_file_store_stats {
	uint64_t refused; /* files removed as their owner could not use them */
	uint64_t trimmed; /* files removed to keep the bound */
	uint64_t bytes;	  /* in the directory now, as this store counts them */
};

struct pp_file_store;

/* The store in opts->dir: NULL with errno (ENOTDIR; EPERM for a directory others may write). */
struct pp_file_store *pp_file_store_new(const struct pp_file_store_opts *opts);
void pp_file_store_free(struct pp_file_store *s);

/* The directory, opened: for files of the owner's beside the store's (not counted). */
int pp_file_store_dirfd(const struct pp_file_store *s);
const char *pp_file_store_dir(const struct pp_file_store *s);

/*
 * The bytes of the file name (the store's name form): 0 with *buf (the caller's to free) and
 * *len; -ENOENT for none; -ENOMEM; -EBADMSG for one empty, over max_file_bytes or not a
 * regular file, which is refused.
 */
int pp_file_store_read(struct pp_file_store *s, const char *name, void **buf, size_t *len);
/*
 * The same file mapped read-only (private) instead of read: 0 with *map (the caller's to
 * munmap, *len bytes) or the errors of pp_file_store_read. Nothing is copied and only the
 * pages touched are read, which suits a big file of which a part is used. The store's files
 * are only ever replaced by a rename or removed, never rewritten in place, so a mapping keeps
 * the bytes it was given.
 */
int pp_file_store_map(struct pp_file_store *s, const char *name, void **map, size_t *len);
/* name used now: the bound removes the least recently used first. */
void pp_file_store_touch(struct pp_file_store *s, const char *name);
/* Remove name, which its owner could not use, why said once as a warning. */
void pp_file_store_refuse(struct pp_file_store *s, const char *name, const char *why);
/*
 * Keep len bytes as name, in place of any file of that name: 0, or -errno with nothing
 * half-written left; -EFBIG for more than half the bound (it would push out most of what is
 * kept). Files least recently used go while the directory is over its bound.
 */
int pp_file_store_put(struct pp_file_store *s, const char *name, const void *buf, size_t len);
/*
 * The same for a file of len bytes that write_to(fd, arg) writes (0 or -errno), for bytes
 * that are not in one buffer: a file of another length than len is not kept (-EIO).
 */
int pp_file_store_put_by(struct pp_file_store *s, const char *name, size_t len,
			 int (*write_to)(int fd, void *arg), void *arg);

void pp_file_store_get_stats(const struct pp_file_store *s, struct pp_file_store_stats *out);

/*
 * What a kept file is found by where it stands for a file of the node: that file's identity
 * while it is unchanged (device, inode, ctime to the ns, size). Device numbers and inodes are
 * reused across boots, so such files are kept under a boot's id, and only for files unchanged
 * for a while (a change within the timestamps' granularity of the one before keeps the ctime);
 * no one but the kernel sets a ctime.
 */
#define PP_FILE_IDENTITY_BYTES 40 /* as pp_file_identity_put writes it */
#define PP_FILE_IDENTITY_NAME_HEX 32
/* The store's name for st's file: PP_FILE_IDENTITY_NAME_HEX hex digits hashing its identity,
 * then suffix (the identity in full goes inside, and is checked there). */
void pp_file_identity_name(const struct stat *st, const char *suffix, char *out, size_t size);
/* st's identity at p (PP_FILE_IDENTITY_BYTES, little-endian): the byte after it. */
uint8_t *pp_file_identity_put(uint8_t *p, const struct stat *st);
/* Whether the identity at p (PP_FILE_IDENTITY_BYTES) is st's. */
bool pp_file_identity_is(const uint8_t *p, const struct stat *st);
/* The boot's id: given (NULL: /proc/sys/kernel/random/boot_id) in out, 0, or -ENOENT. */
int pp_boot_id(const char *given, char *out, size_t size);

#endif /* PP_COLLECTOR_FILE_STORE_H */
