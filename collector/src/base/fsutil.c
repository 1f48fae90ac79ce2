/*
 * Path building and whole-file reads (see fsutil.h): sysfs/procfs pseudo-files, a few bytes
 * to a few KiB, read(2) into the caller's buffer; regular files read whole into the heap,
 * bounded. Both loop because a read may return fewer bytes than asked.
 */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void pp_pathf(char *dst, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(dst, size, fmt, ap) >= (int)size)
		dst[0] = '\0';
	va_end(ap);
}

int pp_read_fd_whole(int fd, uint64_t max, void **out, size_t *len)
{
	struct stat st;
	size_t got = 0;
	uint8_t *buf;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		return -ENOMEM;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -EIO;

			free(buf);
			return err;
		}
		got += (size_t)n;
	}
	*out = buf;
	*len = got;
	return 0;
}

int pp_read_text_whole(const char *path, size_t max, char **out, size_t *len)
{
	size_t cap = 64 * 1024, n = 0;
	char *buf = malloc(cap);
	int fd, err;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(buf);
		return err;
	}
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb = cap < max ? realloc(buf, cap * 2) : NULL;

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*out = buf;
	*len = n;
	return 0;
}

ssize_t pp_read_small_file(const char *path, char *buf, size_t size)
{
	ssize_t n, total = 0;
	int fd;

	if (!size)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((size_t)total < size - 1) {
		n = read(fd, buf + total, size - 1 - (size_t)total);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			close(fd);
			return n;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}

int pp_mkdir_parents(const char *dir, mode_t mode)
{
	char path[4096];
	size_t len = strlen(dir);

	if (!len || len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int pp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}
