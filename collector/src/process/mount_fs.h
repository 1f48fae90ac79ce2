/*
 * Which file system a path of a process lies on, from its /proc/PID/mountinfo: a procfs file
 * that never blocks, where asking the file system itself (statfs, or any open) would wait on
 * a FUSE daemon the process may control. Readers on the sample path refuse FUSE files this
 * way before they open anything.
 */
#ifndef PP_COLLECTOR_MOUNT_FS_H
#define PP_COLLECTOR_MOUNT_FS_H

#include <stddef.h>
#include <stdint.h>

/*
 * The type of the mount that holds path (absolute, as the process sees it: no symbolic link
 * followed) in len bytes of mountinfo text: the mount whose point is the longest prefix of
 * path, the last listed where mounts are stacked. Copies it into fstype (cut to size). Returns
 * 0, -ENOENT when no line covers path, -EINVAL for bad arguments. Lines that do not parse are
 * skipped; text need not end with a newline or NUL.
 */
int pp_mountinfo_fstype(const char *text, size_t len, const char *path, char *fstype, size_t size);

/* Whether a type is FUSE's ("fuse", "fuseblk", "fuse.NAME"). */
int pp_fstype_is_fuse(const char *fstype);

/*
 * Whether path of process pid (proc_root NULL: "/proc") lies on FUSE: 1, 0, or -errno when
 * its mountinfo cannot be read (at most 4 MiB of it is).
 */
int pp_proc_path_on_fuse(const char *proc_root, uint32_t pid, const char *path);

#endif /* PP_COLLECTOR_MOUNT_FS_H */
