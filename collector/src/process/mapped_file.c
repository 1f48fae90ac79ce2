/* Opening a mapping's file on a process's behalf, checked to be that file (mapped_file.h). */
#include "mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/root_open.h"

/* The mapping's file, as /proc/PID/maps names it: its device and inode. */
static int is_mapped_file(const struct stat *st, const struct pp_map_entry *m)
{
	return S_ISREG(st->st_mode) && (uint64_t)st->st_ino == m->inode &&
	       major(st->st_dev) == m->dev_major && minor(st->st_dev) == m->dev_minor;
}

/*
 * map_files: the kernel hands over the mapped file itself, not a name anyone can change, so
 * there is no identity to check (and none that would hold: on overlayfs before Linux 6.8 the
 * file it gives is the overlay's, while maps shows the backing file's device and inode). It is
 * stat'ed first so that nothing but a regular file is ever opened.
 */
static int open_map_files(const char *proc_root, uint32_t pid, const struct pp_map_entry *m)
{
	char path[256];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/map_files/%" PRIx64 "-%" PRIx64, proc_root, pid,
		 m->start, m->end);
	if (stat(path, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL; /* the mapping changed between the two */
	}
	return fd;
}

/* The path inside the process's root, resolved without opening, checked, then opened. */
static int open_in_root(const char *proc_root, uint32_t pid, const struct pp_map_entry *m)
{
	char root[256];
	struct stat st;
	int pfd, fd;

	if (m->deleted)
		return -ENOENT; /* whatever has the name now is not the mapped file */
	snprintf(root, sizeof(root), "%s/%u/root", proc_root, pid);
	pfd = pp_root_open(root, m->path, PP_ROOT_OPEN_PATH);
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &st) != 0) {
		fd = -errno;
	} else if (!is_mapped_file(&st, m)) {
		fd = S_ISREG(st.st_mode) ? -ESTALE : -EINVAL;
	} else {
		fd = pp_reopen(pfd);
		if (fd >= 0 && (fstat(fd, &st) != 0 || !is_mapped_file(&st, m))) {
			close(fd);
			fd = -ESTALE;
		}
	}
	close(pfd);
	return fd;
}

bool pp_mapped_file_identity(const struct pp_map_entry *m, struct pp_file_identity *id)
{
	*id = (struct pp_file_identity){m->dev_major, m->dev_minor, m->inode, m->ino_generation};
	if (!m->inode)
		return false;
	if (m->from_sideband)
		return true;
	if (m->deleted || !m->path || !m->path[0])
		return false;
	id->ino_generation = (1ull << 63) | (pp_hash_str(m->path) >> 1);
	return true;
}

int pp_mapped_file_open(const char *proc_root, uint32_t pid, const struct pp_map_entry *m,
			enum pp_mapped_via *via)
{
	int fd;

	if (via)
		*via = PP_MAPPED_VIA_NONE;
	if (!m || m->kind != PP_MAP_KIND_FILE || !m->path || m->path[0] != '/')
		return -EINVAL;
	if (!proc_root)
		proc_root = "/proc";
	fd = open_map_files(proc_root, pid, m);
	if (fd >= 0) {
		if (via)
			*via = PP_MAPPED_VIA_MAP_FILES;
		return fd;
	}
	/* map_files needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; else the path, checked */
	if (fd != -EPERM && fd != -EACCES && fd != -ENOENT)
		return fd;
	fd = open_in_root(proc_root, pid, m);
	if (fd >= 0 && via)
		*via = PP_MAPPED_VIA_ROOT;
	return fd;
}

int pp_mapped_file_open_gone(const char *proc_root, uint32_t pid, const uint32_t *relatives,
			     size_t n, const struct pp_map_entry *m, enum pp_mapped_via *via,
			     uint32_t *root_pid)
{
	int fd = pp_mapped_file_open(proc_root, pid, m, via);

	*root_pid = pid;
	if (fd != -ENOENT && fd != -ESRCH)
		return fd;
	if (!proc_root)
		proc_root = "/proc";
	for (size_t i = 0; i < n; i++) {
		int rfd;

		if (!relatives[i] || relatives[i] == pid)
			continue;
		rfd = open_in_root(proc_root, relatives[i], m);
		if (rfd >= 0) {
			if (via)
				*via = PP_MAPPED_VIA_RELATIVE;
			*root_pid = relatives[i];
			return rfd;
		}
		/* another file under the name: say so, as for the process itself */
		if (rfd == -ESTALE)
			fd = rfd;
	}
	return fd;
}
