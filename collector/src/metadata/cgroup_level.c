/* cgroup v2 directory -> (id, level) for the shim's cgroup filter; see cgroup_level.h. */
#define _GNU_SOURCE
#include "cgroup_level.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgroup_ids.h"
#include "base/fsutil.h"

#define CGROUP2_MAGIC 0x63677270 /* CGROUP2_SUPER_MAGIC */

int pp_cgroup_rel_level(const char *buf, size_t len, uint32_t *level)
{
	uint32_t n = 0;
	size_t i = 0;

	if ((!buf && len) || !level)
		return -EINVAL;
	while (i < len) {
		size_t start, clen;

		while (i < len && buf[i] == '/')
			i++;
		start = i;
		while (i < len && buf[i] != '/')
			i++;
		clen = i - start;
		if (clen == 0 || (clen == 1 && buf[start] == '.'))
			continue;
		if (clen == 2 && buf[start] == '.' && buf[start + 1] == '.')
			return -EINVAL;
		if (n == UINT32_MAX)
			return -EINVAL;
		n++;
	}
	*level = n;
	return 0;
}

int pp_cgroup_fd_id(int fd, uint64_t *id)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + 64];
	} h;
	struct stat st;
	int mount_id;

	memset(&h, 0, sizeof(h));
	h.fh.handle_bytes = 64;
	if (name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) == 0 &&
	    h.fh.handle_bytes == sizeof(uint64_t)) {
		memcpy(id, h.fh.f_handle, sizeof(*id));
		return 0;
	}
	/* No export support (old kernels, some LSMs): the inode number is the id on 64-bit. */
	if (fstat(fd, &st))
		return -errno;
	*id = (uint64_t)st.st_ino;
	return 0;
}

/* Whether path lies at or below root (both canonical), and the part below it. */
static const char *below(const char *root, const char *path)
{
	size_t rl = strlen(root);

	if (rl == 1 && root[0] == '/')
		return path;
	if (strncmp(path, root, rl) != 0 || (path[rl] != '\0' && path[rl] != '/'))
		return NULL;
	return path + rl;
}

int pp_cgroup_id_level(const char *cgroup2_root, const char *path, uint64_t *id, uint32_t *level)
{
	char root[PATH_MAX], mnt[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
	const char *rel;
	struct statfs sfs;
	int fd, ret;

	if (!path || !id || !level)
		return -EINVAL;
	if (!cgroup2_root) {
		ret = pp_cgroup2_mount(NULL, mnt, sizeof(mnt));
		if (ret)
			return ret;
		cgroup2_root = mnt;
	}
	if (!realpath(cgroup2_root, root))
		return -errno;
	/* A path inside the mount as given, else one relative to it (/proc/PID/cgroup form). */
	if (!realpath(path, real) || !below(root, real)) {
		if ((size_t)snprintf(joined, sizeof(joined), "%s/%s", root, path) >= sizeof(joined))
			return -ENAMETOOLONG;
		if (!realpath(joined, real))
			return -errno;
	}
	rel = below(root, real);
	if (!rel)
		return -EXDEV;
	ret = pp_cgroup_rel_level(rel, strlen(rel), level);
	if (ret)
		return ret;
	fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstatfs(fd, &sfs)) {
		ret = -errno;
		goto out_close_fd;
	}
	if ((unsigned long)sfs.f_type != CGROUP2_MAGIC) {
		ret = -EXDEV;
		goto out_close_fd;
	}
	ret = pp_cgroup_fd_id(fd, id);
out_close_fd:
	close(fd);
	return ret;
}
