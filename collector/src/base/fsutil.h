/*
 * Small filesystem helpers shared by the sysfs/procfs readers (PMU discovery, system facts):
 * building paths under a configurable root and reading one short pseudo-file whole; and the
 * agent's own directories made with their parents.
 */
#ifndef PP_COLLECTOR_FSUTIL_H
#define PP_COLLECTOR_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * snprintf for paths. On truncation dst becomes "" (size must be > 0), a path that simply
 * will not open, so callers need not check: the open that follows fails with ENOENT.
 */
void pp_pathf(char *dst, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Reads at most size - 1 bytes of path into buf and NUL-terminates them; the content is left
 * as is (a trailing newline stays, a longer file is cut without notice). Retries EINTR.
 * Returns the number of bytes read (0 for an empty file), or -errno when open or any read
 * fails (nothing partial is reported as success), or -EINVAL when size is 0.
 */
ssize_t pp_read_small_file(const char *path, char *buf, size_t size);

/*
 * The whole regular file open at fd (the caller's; its offset is not moved: pread), when it
 * holds at most max bytes: 0 with *out (malloc'ed, the caller frees; not NUL-terminated) and
 * *len. -EINVAL for anything but a regular file, -EFBIG over max, -ENOMEM, -EIO when it is
 * shorter than fstat said (truncated while read), or a read's -errno. Retries EINTR.
 */
int pp_read_fd_whole(int fd, uint64_t max, void **out, size_t *len);

/*
 * A file whose size stat does not tell (a /proc file: maps, mountinfo), read to its end while
 * under max bytes (one larger is cut there): 0 with *out (malloc'ed, the caller frees; not
 * NUL-terminated) and *len, or open's -errno, -ENOMEM. Retries EINTR.
 */
int pp_read_text_whole(const char *path, size_t max, char **out, size_t *len);

/* All len bytes of buf written to fd: 0, or write's -errno (-EIO for none written). */
int pp_write_all(int fd, const void *buf, size_t len);

/*
 * mkdir -p: dir and each missing directory above it, made with mode (an existing one is left
 * as it is). 0, -ENAMETOOLONG for "" or a path of 4 KiB or more, or mkdir's -errno.
 */
int pp_mkdir_parents(const char *dir, mode_t mode);

#endif /* PP_COLLECTOR_FSUTIL_H */
