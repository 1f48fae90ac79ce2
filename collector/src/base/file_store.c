/*
 * The agent's kept files (file_store.h): a directory checked once as this user's alone, its
 * files reached with *at calls on its descriptor and never through a link, each written as
 * tmp.PID.N and renamed into place.
 */
#include "file_store.h"

#include "fsutil.h"
#include "le.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_PREFIX "tmp."
/* A temporary file this old was left by an agent that died while writing it. */
#define STALE_TMP_S 600
#define NAME_MAX_LEN 96

struct pp_file_store {
	int dirfd;
	char dir[256];
	char suffix[16];
	char what[48];
	size_t name_hex;
	uint64_t max_bytes, max_file_bytes;
	uint64_t seq; /* temporary names */
	struct pp_file_store_stats st;
};

static bool is_store_name(const struct pp_file_store *s, const char *name)
{
	size_t n = strlen(name), sl = strlen(s->suffix);

	if (n != s->name_hex + sl || strcmp(name + s->name_hex, s->suffix))
		return false;
	for (size_t i = 0; i < s->name_hex; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return true;
}

struct entry {
	char name[NAME_MAX_LEN];
	int64_t mtime_ns;
	uint64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

/*
 * The directory's files (oldest first in *out when out is given) and their bytes; stale
 * temporary files removed on the way.
 */
static uint64_t scan(struct pp_file_store *s, struct entry **out, size_t *nout)
{
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t bytes = 0;
	struct dirent *de;
	int fd = dup(s->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		goto out;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat st;

		if (fstatat(s->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			if (time(NULL) - st.st_mtim.tv_sec > STALE_TMP_S)
				unlinkat(s->dirfd, de->d_name, 0);
			continue;
		}
		if (!is_store_name(s, de->d_name))
			continue;
		bytes += (uint64_t)st.st_size;
		if (!out)
			continue;
		if (n == cap) {
			struct entry *nv = realloc(v, (cap ? cap * 2 : 64) * sizeof(*v));

			if (!nv)
				continue;
			v = nv;
			cap = cap ? cap * 2 : 64;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		v[n].bytes = (uint64_t)st.st_size;
		n++;
	}
	closedir(d);
out:
	if (out) {
		if (n)
			qsort(v, n, sizeof(*v), by_age);
		*out = v;
		*nout = n;
	}
	return bytes;
}

struct pp_file_store *pp_file_store_new(const struct pp_file_store_opts *opts)
{
	struct pp_file_store *s;
	struct stat st;
	int fd, ret;

	if (!opts || !opts->dir || !opts->dir[0] || !opts->suffix || !opts->name_hex ||
	    strlen(opts->dir) >= sizeof(s->dir) || strlen(opts->suffix) >= sizeof(s->suffix) ||
	    opts->name_hex + strlen(opts->suffix) >= NAME_MAX_LEN) {
		errno = EINVAL;
		return NULL;
	}
	/* its parents too: /var/lib/pebsprof on a new node */
	ret = pp_mkdir_parents(opts->dir, 0700);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	fd = open(opts->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	/* what others could write would be read as the agent's own: ours alone */
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		errno = EPERM;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	s->dirfd = fd;
	snprintf(s->dir, sizeof(s->dir), "%s", opts->dir);
	snprintf(s->suffix, sizeof(s->suffix), "%s", opts->suffix);
	snprintf(s->what, sizeof(s->what), "%s", opts->what ? opts->what : "file store");
	s->name_hex = opts->name_hex;
	s->max_bytes = opts->max_bytes;
	s->max_file_bytes = opts->max_file_bytes;
	s->st.bytes = scan(s, NULL, NULL);
	return s;
}

void pp_file_store_free(struct pp_file_store *s)
{
	if (!s)
		return;
	close(s->dirfd);
	free(s);
}

int pp_file_store_dirfd(const struct pp_file_store *s)
{
	return s->dirfd;
}

const char *pp_file_store_dir(const struct pp_file_store *s)
{
	return s->dir;
}

void pp_file_store_refuse(struct pp_file_store *s, const char *name, const char *why)
{
	struct stat st;

	/* a link or a special file in its place goes too (unlinkat does not follow) */
	if (!fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && !S_ISDIR(st.st_mode) &&
	    !unlinkat(s->dirfd, name, 0) && S_ISREG(st.st_mode))
		s->st.bytes -=
		    s->st.bytes >= (uint64_t)st.st_size ? (uint64_t)st.st_size : s->st.bytes;
	s->st.refused++;
	pp_warn("%s: removed %s/%s: %s", s->what, s->dir, name, why);
}

/* name opened for reading: the fd, or -ENOENT, -ENOMEM, or -EBADMSG for a link (refused). */
static int open_kept(struct pp_file_store *s, const char *name)
{
	int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0)
		return fd;
	if (errno == ELOOP) {
		pp_file_store_refuse(s, name, "not a regular file");
		return -EBADMSG;
	}
	return errno == ENOMEM ? -ENOMEM : -ENOENT;
}

/* The answer to a read or map of name that failed with err (0: the file was empty). */
static int refuse_unread(struct pp_file_store *s, const char *name, int err)
{
	if (err == -ENOMEM)
		return -ENOMEM;
	pp_file_store_refuse(s, name,
			     err == -EFBIG    ? "too big"
			     : err == -EINVAL ? "not a regular file"
			     : !err	      ? "empty"
					      : "unreadable (torn)");
	return -EBADMSG;
}

int pp_file_store_read(struct pp_file_store *s, const char *name, void **buf, size_t *len)
{
	int fd = open_kept(s, name);
	int err;

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	err = pp_read_fd_whole(fd, s->max_file_bytes, buf, len);
	close(fd);
	if (!err && *len)
		return 0;
	free(*buf);
	*buf = NULL;
	return refuse_unread(s, name, err);
}

int pp_file_store_map(struct pp_file_store *s, const char *name, void **map, size_t *len)
{
	int fd = open_kept(s, name);
	struct stat st;
	void *m;
	int err = 0;

	*map = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st))
		err = -EIO;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if ((uint64_t)st.st_size > s->max_file_bytes)
		err = -EFBIG;
	if (err || !st.st_size) {
		close(fd);
		return refuse_unread(s, name, err);
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return err == -ENOMEM ? -ENOMEM : refuse_unread(s, name, -EIO);
	*map = m;
	*len = (size_t)st.st_size;
	return 0;
}

void pp_file_store_touch(struct pp_file_store *s, const char *name)
{
	utimensat(s->dirfd, name, NULL, AT_SYMLINK_NOFOLLOW);
}

/* Remove the least recently used files until the directory holds at most max_bytes. */
static void trim(struct pp_file_store *s, const char *keep)
{
	struct entry *v;
	size_t n;

	s->st.bytes = scan(s, &v, &n);
	for (size_t i = 0; i < n && s->st.bytes > s->max_bytes; i++) {
		if (!strcmp(v[i].name, keep) || unlinkat(s->dirfd, v[i].name, 0))
			continue;
		s->st.bytes -= v[i].bytes;
		s->st.trimmed++;
	}
	free(v);
}

int pp_file_store_put_by(struct pp_file_store *s, const char *name, size_t len,
			 int (*write_to)(int fd, void *arg), void *arg)
{
	char tmp[64];
	struct stat st;
	int fd, err;

	if (len > s->max_bytes / 2)
		return -EFBIG;
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%d.%llu", (int)getpid(),
		 (unsigned long long)s->seq++);
	fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_to(fd, arg);
	/* a writer that said len and wrote otherwise would throw the directory's count off */
	if (!err && (fstat(fd, &st) || (uint64_t)st.st_size != len))
		err = -EIO;
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(s->dirfd, tmp, s->dirfd, name))
		err = -errno;
	if (err) {
		unlinkat(s->dirfd, tmp, 0);
		return err;
	}
	s->st.bytes += len;
	if (s->st.bytes > s->max_bytes)
		trim(s, name);
	return 0;
}

struct bytes {
	const void *buf;
	size_t len;
};

static int write_bytes(int fd, void *arg)
{
	const struct bytes *b = arg;

	return pp_write_all(fd, b->buf, b->len);
}

int pp_file_store_put(struct pp_file_store *s, const char *name, const void *buf, size_t len)
{
	return pp_file_store_put_by(s, name, len, write_bytes, &(struct bytes){buf, len});
}

void pp_file_store_get_stats(const struct pp_file_store *s, struct pp_file_store_stats *out)
{
	if (s)
		*out = s->st;
	else
		memset(out, 0, sizeof(*out));
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ h >> 33;
}

void pp_file_identity_name(const struct stat *st, const char *suffix, char *out, size_t size)
{
	uint64_t a = mix(mix(0, (uint64_t)st->st_dev), (uint64_t)st->st_ino);
	uint64_t b = mix(mix(mix(a, (uint64_t)st->st_ctim.tv_sec), (uint64_t)st->st_ctim.tv_nsec),
			 (uint64_t)st->st_size);

	snprintf(out, size, "%016llx%016llx%s", (unsigned long long)a, (unsigned long long)b,
		 suffix);
}

uint8_t *pp_file_identity_put(uint8_t *p, const struct stat *st)
{
	p = pp_le_put(p, (uint64_t)st->st_dev, 8);
	p = pp_le_put(p, (uint64_t)st->st_ino, 8);
	p = pp_le_put(p, (uint64_t)st->st_ctim.tv_sec, 8);
	p = pp_le_put(p, (uint64_t)st->st_ctim.tv_nsec, 8);
	return pp_le_put(p, (uint64_t)st->st_size, 8);
}

bool pp_file_identity_is(const uint8_t *p, const struct stat *st)
{
	uint8_t want[PP_FILE_IDENTITY_BYTES];

	pp_file_identity_put(want, st);
	return !memcmp(p, want, sizeof(want));
}

int pp_boot_id(const char *given, char *out, size_t size)
{
	if (given)
		snprintf(out, size, "%s", given);
	else if (pp_read_small_file("/proc/sys/kernel/random/boot_id", out, size) <= 0)
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return out[0] ? 0 : -ENOENT;
}
