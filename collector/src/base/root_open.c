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

#include "fsutil.h"

static int openat2_in_root(int root_fd, const char *path, unsigned int flags)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (flags & PP_ROOT_OPEN_NO_SYMLINKS)
		how.resolve |= RESOLVE_NO_SYMLINKS;
	do {
		fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	} while (fd < 0 && (errno == EINTR || errno == EAGAIN));
	return fd < 0 ? -errno : (int)fd;
}

static int open_fallback(const char *root, const char *path, unsigned int flags)
{
	char full[4096];
	int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
	int fd;

	if (flags & PP_ROOT_OPEN_NO_SYMLINKS)
		oflags |= O_NOFOLLOW;
	pp_pathf(full, sizeof(full), "%s%s", root ? root : "", path);
	fd = open(full, oflags);
	return fd < 0 ? -errno : fd;
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
		fd = open_fallback(NULL, path, flags);
		return fd < 0 ? fd : keep_if_regular(fd);
	}
	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return -errno;
	fd = openat2_in_root(root_fd, path, flags);
	close(root_fd);
	if (fd == -ENOSYS)
		fd = open_fallback(root, path, flags);
	return fd < 0 ? fd : keep_if_regular(fd);
}
