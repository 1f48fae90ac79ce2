/* Opening files inside a process's root without following it outside (see root_open.h). */
#define _GNU_SOURCE
#include "root_open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int openat2_in_root(int root_fd, const char *path, unsigned int flags)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (flags & PP_ROOT_OPEN_NO_SYMLINKS)
		how.resolve |= RESOLVE_NO_SYMLINKS;
	if (flags & PP_ROOT_OPEN_PATH)
		how.flags = O_PATH | O_CLOEXEC;
	do {
		fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	} while (fd < 0 && (errno == EINTR || errno == EAGAIN));
	return fd < 0 ? -errno : (int)fd;
}

/* Only a regular file, and from here on a blocking one like any other. */
static int keep_if_regular(int fd)
{
	struct stat st;
	int fl;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int pp_root_open(const char *root, const char *path, unsigned int flags)
{
	int root_fd, fd;

	if (!path || path[0] != '/')
		return -EINVAL;
	if (!root || !root[0]) {
		/* the host's own files, named by the agent's configuration */
		int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

		if (flags & PP_ROOT_OPEN_NO_SYMLINKS)
			oflags |= O_NOFOLLOW;
		if (flags & PP_ROOT_OPEN_PATH)
			oflags = O_PATH | O_CLOEXEC | (oflags & O_NOFOLLOW);
		fd = open(path, oflags);
		if (fd < 0)
			return -errno;
		return flags & PP_ROOT_OPEN_PATH ? fd : keep_if_regular(fd);
	}
	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return -errno;
	/*
	 * No fallback where openat2 is missing (before 5.6, or a seccomp profile that hides it):
	 * a path through /proc/PID/root resolves absolute links against the agent's own root.
	 */
	fd = openat2_in_root(root_fd, path, flags);
	close(root_fd);
	if (fd < 0 || (flags & PP_ROOT_OPEN_PATH))
		return fd;
	return keep_if_regular(fd);
}

int pp_reopen(int path_fd)
{
	char self[64];
	int fd;

	/* the descriptor's own magic link: the very inode, whatever its path has become */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return keep_if_regular(fd);
}
