/* The node's host name (host_name.h). */
#include "host_name.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"

/* A DNS host name: letters, digits, '-', '.', at most 253 bytes. */
static bool valid_host_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

static bool same_uts(const char *proc_root)
{
	char a[512], b[512], la[64] = "", lb[64] = "";
	ssize_t na, nb;

	pp_pathf(a, sizeof(a), "%s/self/ns/uts", proc_root);
	pp_pathf(b, sizeof(b), "%s/1/ns/uts", proc_root);
	na = readlink(a, la, sizeof(la) - 1);
	nb = readlink(b, lb, sizeof(lb) - 1);
	/* unknown (no permission to look at pid 1): take our own name */
	if (na <= 0 || nb <= 0)
		return true;
	la[na] = lb[nb] = '\0';
	return strcmp(la, lb) == 0;
}

enum pp_host_name_source pp_host_name(const char *proc_root, char *out, size_t len)
{
	char path[512], buf[300];

	if (!same_uts(proc_root)) {
		pp_pathf(path, sizeof(path), "%s/1/root/etc/hostname", proc_root);
		if (pp_read_small_file(path, buf, sizeof(buf)) > 0) {
			size_t n = strcspn(buf, "\r\n"); /* the first line, blanks at its end cut */

			while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
				n--;
			buf[n] = '\0';
			if (valid_host_name(buf) && strlen(buf) < len) {
				snprintf(out, len, "%s", buf);
				return PP_HOST_NAME_HOST_FILE;
			}
		}
	}
	if (gethostname(out, len - 1) != 0)
		snprintf(out, len, "unknown");
	out[len - 1] = '\0';
	return PP_HOST_NAME_OWN;
}
