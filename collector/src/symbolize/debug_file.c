/* The search for separate debug files (see debug_file.h). */
#include "debug_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/elf_read.h"
#include "base/fsutil.h"
#include "base/root_open.h"
#include "elf_symbols.h"

struct pp_debug_dirs {
	size_t n;
	char *dirs[PP_DEBUG_DIRS_MAX];
};

struct pp_debug_dirs *pp_debug_dirs_new(const char *list)
{
	struct pp_debug_dirs *d = calloc(1, sizeof(*d));
	const char *p;

	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	if (!list || !list[0])
		list = PP_DEBUG_DIRS_DEFAULT;
	p = list;
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		int err = 0;

		while (len > 1 && p[len - 1] == '/')
			len--;
		if (len == 0 || p[0] != '/' || d->n == PP_DEBUG_DIRS_MAX)
			err = EINVAL;
		else if (len >= 1024)
			err = ENAMETOOLONG;
		else if (!(d->dirs[d->n] = strndup(p, len)))
			err = ENOMEM;
		if (err) {
			pp_debug_dirs_free(d);
			errno = err;
			return NULL;
		}
		d->n++;
		if (!colon)
			break;
		p = colon + 1;
	}
	return d;
}

void pp_debug_dirs_free(struct pp_debug_dirs *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->dirs[i]);
	free(d);
}

int pp_debug_file_crc(int fd, uint64_t max_bytes, uint32_t *crc)
{
	unsigned char buf[1 << 16];
	uLong c = crc32(0L, Z_NULL, 0);
	uint64_t total = 0;
	off_t off = 0;

	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > max_bytes)
			return -EFBIG;
		c = crc32(c, buf, (uInt)n);
		off += n;
	}
	*crc = (uint32_t)c;
	return 0;
}

/*
 * Does the file behind fd prove to be t's debug file? By build id, the ids must be equal; by
 * debuglink, the CRC the link records must match (as gdb checks it), and the ids too where
 * both files have one.
 */
static int matches(int fd, const struct pp_debug_target *t, int by_build_id)
{
	char id[PP_BUILD_ID_HEX_SIZE];
	int target_has_id = t->build_id && t->build_id[0];
	struct pp_elf_src src;
	uint32_t crc;

	/* whole and backed: the CRC reads all of it, and a sparse one would be zeros for free */
	if (pp_elf_src_fd(&src, fd) != 0 ||
	    pp_elf_range_check(&src, 0, src.size, PP_DEBUG_FILE_MAX_BYTES) != 0)
		return 0;
	if (pp_elf_read_build_id_fd(fd, id, sizeof(id)) != 0)
		return 0;
	if (target_has_id && id[0] && strcmp(id, t->build_id) != 0)
		return 0;
	if (by_build_id)
		return target_has_id && id[0];
	if (!t->has_crc)
		return 0;
	return pp_debug_file_crc(fd, PP_DEBUG_FILE_MAX_BYTES, &crc) == 0 && crc == t->crc;
}

static int try_candidate(const char *root, const char *path, const struct pp_debug_target *t,
			 int by_build_id, char *found, size_t found_size)
{
	int fd;

	if (!path[0] || strcmp(path, t->path) == 0)
		return -ENOENT;
	fd = pp_root_open(root, path, 0);
	if (fd < 0)
		return fd;
	if (!matches(fd, t, by_build_id)) {
		close(fd);
		return -ENOENT;
	}
	if (found && found_size)
		snprintf(found, found_size, "%s:%s", root && root[0] ? root : "host", path);
	return fd;
}

/* Every candidate in one root (the process's, or the host's for NULL), in gdb's order. */
static int search_root(const struct pp_debug_dirs *d, const char *root,
		       const struct pp_debug_target *t, char *found, size_t found_size)
{
	char cand[4096], dir[4096];
	const char *slash;
	int fd;

	if (t->build_id && strlen(t->build_id) > 2) {
		for (size_t i = 0; i < d->n; i++) {
			pp_pathf(cand, sizeof(cand), "%s/.build-id/%.2s/%s.debug", d->dirs[i],
				 t->build_id, t->build_id + 2);
			fd = try_candidate(root, cand, t, 1, found, found_size);
			if (fd >= 0)
				return fd;
		}
	}
	if (!t->debuglink || !t->debuglink[0])
		return -ENOENT;
	slash = strrchr(t->path, '/');
	if (!slash)
		return -ENOENT;
	pp_pathf(dir, sizeof(dir), "%.*s", (int)(slash - t->path), t->path);
	pp_pathf(cand, sizeof(cand), "%s/%s", dir, t->debuglink);
	fd = try_candidate(root, cand, t, 0, found, found_size);
	if (fd >= 0)
		return fd;
	pp_pathf(cand, sizeof(cand), "%s/.debug/%s", dir, t->debuglink);
	fd = try_candidate(root, cand, t, 0, found, found_size);
	if (fd >= 0)
		return fd;
	for (size_t i = 0; i < d->n; i++) {
		pp_pathf(cand, sizeof(cand), "%s%s/%s", d->dirs[i], dir, t->debuglink);
		fd = try_candidate(root, cand, t, 0, found, found_size);
		if (fd >= 0)
			return fd;
	}
	return -ENOENT;
}

int pp_debug_file_open(const struct pp_debug_dirs *d, const struct pp_debug_target *t, char *found,
		       size_t found_size)
{
	int fd;

	if (!d || !t || !t->path || t->path[0] != '/')
		return -EINVAL;
	if ((!t->build_id || !t->build_id[0]) && (!t->debuglink || !t->debuglink[0]))
		return -EINVAL;
	if (t->root && t->root[0]) {
		fd = search_root(d, t->root, t, found, found_size);
		if (fd >= 0)
			return fd;
	}
	return search_root(d, NULL, t, found, found_size);
}
