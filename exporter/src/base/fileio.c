/*
 * Whole-or-nothing file writes for the exporter's file outputs (temporary file + rename).
 */
#include "fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pp_file_write_atomic(const char *path, int (*fill)(FILE *f, void *arg), void *arg)
{
	static const char suffix[] = ".tmp.XXXXXX";
	size_t plen;
	char *tmp;
	FILE *f = NULL;
	int fd, err;

	if (!path || !*path || !fill)
		return -EINVAL;
	plen = strlen(path);
	tmp = malloc(plen + sizeof(suffix));
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, suffix, sizeof(suffix));

	/* Same directory as the destination, so rename() cannot cross file systems. */
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	/* mkstemp creates 0600; profiles are ordinary output files. */
	if (fchmod(fd, 0644) != 0) {
		err = -errno;
		close(fd);
		goto out_unlink;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		goto out_unlink;
	}
	err = fill(f, arg);
	if (err)
		goto out_close;
	if (fflush(f) != 0 || ferror(f)) {
		err = errno ? -errno : -EIO;
		goto out_close;
	}
	if (fsync(fileno(f)) != 0) {
		err = -errno;
		goto out_close;
	}
	if (fclose(f) != 0) {
		f = NULL;
		err = errno ? -errno : -EIO;
		goto out_unlink;
	}
	f = NULL;
	if (rename(tmp, path) != 0) {
		err = -errno;
		goto out_unlink;
	}
	free(tmp);
	return 0;

out_close:
	fclose(f);
out_unlink:
	unlink(tmp);
	free(tmp);
	return err < 0 ? err : -EIO;
}

struct bytes_arg {
	const void *buf;
	size_t len;
};

static int fill_bytes(FILE *f, void *arg)
{
	const struct bytes_arg *b = arg;

	if (b->len && fwrite(b->buf, 1, b->len, f) != b->len)
		return errno ? -errno : -EIO;
	return 0;
}

int pp_file_write_bytes(const char *path, const void *buf, size_t len)
{
	struct bytes_arg b = {.buf = buf, .len = len};

	if (!buf && len)
		return -EINVAL;
	return pp_file_write_atomic(path, fill_bytes, &b);
}
