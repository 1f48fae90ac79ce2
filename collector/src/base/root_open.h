/*
 * Opening a file inside another process's root (/proc/PID/root) the way that process would
 * see it, without letting that process steer the agent elsewhere: symbolic links, absolute ones
 * included, resolve inside the root (openat2 RESOLVE_IN_ROOT), never through magic links, and a
 * FIFO or device node cannot block the open. The agent reads such files as root, so a
 * container that plants "tmp/x -> /etc/shadow" must get its own /etc/shadow or nothing.
 */
#ifndef PP_COLLECTOR_ROOT_OPEN_H
#define PP_COLLECTOR_ROOT_OPEN_H

/* pp_root_open flags. */
#define PP_ROOT_OPEN_NO_SYMLINKS 0x1u /* refuse any symbolic link on the way (ELOOP) */
/*
 * Resolve only: an O_PATH descriptor of whatever the path names (nothing is opened, so no
 * FIFO, device or FUSE file acts on it), for the caller to check with fstat and then open
 * with pp_reopen.
 */
#define PP_ROOT_OPEN_PATH 0x2u

/*
 * Open path (absolute, as seen inside root) read-only under root, a directory such as
 * "/proc/1234/root", or on the host when root is NULL or "". The open never blocks
 * (O_NONBLOCK; the flag is cleared again once the file is known to be regular), and only a
 * regular file is returned. Returns an O_CLOEXEC fd, or -errno:
 *   -ELOOP   a symbolic link with PP_ROOT_OPEN_NO_SYMLINKS;
 *   -EXDEV   the path would leave root (a ".." or a magic link: openat2's answer);
 *   -EINVAL  not a regular file (a FIFO, a socket, a device, a directory);
 *   -ENOSYS  no openat2 (before 5.6, or hidden by seccomp): nothing is opened under a root
 *            then, since a plain path through it resolves absolute links on the host;
 *   the errno of the open otherwise.
 */
int pp_root_open(const char *root, const char *path, unsigned int flags);

/*
 * Open for reading the file an O_PATH descriptor (PP_ROOT_OPEN_PATH) stands for, through the
 * agent's own /proc/self/fd link: an fd of a regular file, or -errno (-EINVAL for anything
 * else).
 */
int pp_reopen(int path_fd);

#endif /* PP_COLLECTOR_ROOT_OPEN_H */
