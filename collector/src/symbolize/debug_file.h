/*
 * Finding the separate debug file of a stripped binary, the way gdb and elfutils do: by build id
 * (DIR/.build-id/ab/cdef....debug) and by .gnu_debuglink (next to the binary, in its .debug/
 * folder, and under DIR plus the binary's folder), for each debug directory DIR, first inside
 * the process's root (a container ships its own debug packages) and then on the host. A
 * candidate counts only when it proves to be the binary's: the same build id, or for a
 * debuglink without one, the CRC-32 the link records.
 */
#ifndef PP_COLLECTOR_DEBUG_FILE_H
#define PP_COLLECTOR_DEBUG_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Where distributions install debug files (Debian's *-dbg and *-dbgsym packages). */
#define PP_DEBUG_DIRS_DEFAULT "/usr/lib/debug"
/* At most this many debug directories are searched. */
#define PP_DEBUG_DIRS_MAX 8
/* Debug files larger than this are not read (the CRC alone would read all of it). */
#define PP_DEBUG_FILE_MAX_BYTES (2ull << 30)

struct pp_debug_dirs;

/*
 * The directories to search: a colon-separated list of absolute paths (NULL or "": the
 * default alone). Returns NULL with errno EINVAL for a relative path, an empty element or more
 * than PP_DEBUG_DIRS_MAX of them, ENAMETOOLONG, or ENOMEM.
 */
struct pp_debug_dirs *pp_debug_dirs_new(const char *list);
void pp_debug_dirs_free(struct pp_debug_dirs *d);

/* The binary whose debug file is looked for. */
struct pp_debug_target {
	const char *root;      /* the process's root directory ("/proc/PID/root"); NULL: host */
	const char *path;      /* the binary's path as the process sees it (absolute) */
	const char *build_id;  /* lower-case hex, "" or NULL when it has none */
	const char *debuglink; /* its .gnu_debuglink name, "" or NULL when none */
	int has_crc;	       /* crc is the debuglink's CRC-32 */
	uint32_t crc;
};

/*
 * Open the debug file of t: an fd the caller closes, with where it was found written into
 * found (may be NULL; "ROOT-or-host:path"), or -ENOENT when no candidate proved to be it,
 * -EINVAL for a target with neither a build id nor a debuglink.
 */
int pp_debug_file_open(const struct pp_debug_dirs *d, const struct pp_debug_target *t, char *found,
		       size_t found_size);

/* The CRC-32 (zlib's, as .gnu_debuglink uses) of what fd holds: 0 and *crc, or -errno. */
int pp_debug_file_crc(int fd, uint64_t max_bytes, uint32_t *crc);

#endif /* PP_COLLECTOR_DEBUG_FILE_H */
