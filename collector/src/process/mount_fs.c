/* The file system a process's path lies on, read from its mountinfo (mount_fs.h). */
#include "mount_fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"

#define MAX_MOUNTINFO_BYTES (4u << 20)
#define MAX_FIELD 4096

/* Field i (0-based, space-separated) of line[0..n): start and length, or -1. */
static int field(const char *line, size_t n, int i, const char **f, size_t *flen)
{
	size_t at = 0;

	for (int k = 0; at < n; k++) {
		size_t end = at;

		while (end < n && line[end] != ' ')
			end++;
		if (k == i) {
			*f = line + at;
			*flen = end - at;
			return 0;
		}
		at = end + 1;
	}
	return -1;
}

/* The mount point with the kernel's octal escapes (\040 space, \134 backslash...) undone. */
static size_t unescape(const char *s, size_t n, char *out, size_t size)
{
	size_t w = 0;

	for (size_t i = 0; i < n && w + 1 < size; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			out[w++] = (char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 |
					  (s[i + 3] - '0'));
			i += 3;
		} else {
			out[w++] = s[i];
		}
	}
	out[w] = '\0';
	return w;
}

/* Does mount point mp (mlen bytes, perhaps holding a NUL a line smuggled in) hold path? */
static int covers(const char *mp, size_t mlen, const char *path)
{
	size_t plen = strlen(path);

	if (mlen == 1 && mp[0] == '/')
		return 1;
	return mlen <= plen && memcmp(path, mp, mlen) == 0 &&
	       (path[mlen] == '/' || path[mlen] == '\0');
}

int pp_mountinfo_fstype(const char *text, size_t len, const char *path, char *fstype, size_t size)
{
	size_t best = 0;
	int found = 0;

	if (!text || !path || path[0] != '/' || !fstype || !size)
		return -EINVAL;
	for (size_t at = 0; at < len;) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at), *f, *sep;
		size_t n = nl ? (size_t)(nl - line) : len - at, flen, mlen;
		char mp[MAX_FIELD];

		at += n + 1;
		/* the optional fields end at " - ", then the type */
		sep = NULL;
		for (size_t i = 0; i + 2 < n; i++) {
			if (line[i] == ' ' && line[i + 1] == '-' && line[i + 2] == ' ') {
				sep = line + i + 3;
				break;
			}
		}
		if (!sep || field(line, n, 4, &f, &flen) || flen == 0 || flen >= sizeof(mp))
			continue;
		mlen = unescape(f, flen, mp, sizeof(mp));
		if (!covers(mp, mlen, path) || mlen < best)
			continue;
		best = mlen;
		found = 1;
		{
			size_t tl = 0, rest = (size_t)(line + n - sep);

			while (tl < rest && sep[tl] != ' ')
				tl++;
			snprintf(fstype, size, "%.*s", (int)tl, sep);
		}
	}
	return found ? 0 : -ENOENT;
}

int pp_fstype_is_fuse(const char *t)
{
	return !strcmp(t, "fuse") || !strcmp(t, "fuseblk") || !strncmp(t, "fuse.", 5);
}

int pp_proc_path_on_fuse(const char *proc_root, uint32_t pid, const char *path)
{
	char name[256], type[64], *buf;
	size_t n = 0;
	int ret;

	snprintf(name, sizeof(name), "%s/%u/mountinfo", proc_root ? proc_root : "/proc", pid);
	ret = pp_read_text_whole(name, MAX_MOUNTINFO_BYTES, &buf, &n);
	if (ret)
		return ret;
	ret = pp_mountinfo_fstype(buf, n, path, type, sizeof(type));
	free(buf);
	return ret == 0 ? pp_fstype_is_fuse(type) : ret;
}
