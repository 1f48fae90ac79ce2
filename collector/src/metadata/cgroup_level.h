/*
 * A cgroup v2 directory's id and level, as the shim's cgroup filter needs them: the id is what
 * bpf_get_current_cgroup_id and bpf_get_current_ancestor_cgroup_id return (the kernfs node
 * id), the level the directory's depth below the cgroup2 mount (the root is level 0).
 */
#ifndef PP_COLLECTOR_CGROUP_LEVEL_H
#define PP_COLLECTOR_CGROUP_LEVEL_H

#include <stddef.h>
#include <stdint.h>

/*
 * Depth of a cgroup path relative to the cgroup2 mount, buf[0..len) (no NUL needed): the
 * number of its components, "" and "/" being the root (0). Empty and "." components are
 * skipped. Returns 0 and sets *level, or -EINVAL for a ".." component (the depth would depend
 * on where it leads) or bad arguments.
 */
int pp_cgroup_rel_level(const char *buf, size_t len, uint32_t *level);

/*
 * The cgroup id of an open cgroup2 directory: its 8-byte file handle (the kernfs id, exact on
 * every kernel), else its inode number (equal to the id on 64-bit kernels since 5.5).
 * Returns 0 or -errno.
 */
int pp_cgroup_fd_id(int fd, uint64_t *id);

/*
 * Id and level of the cgroup at path: either a filesystem path inside the cgroup2 mount
 * ("/sys/fs/cgroup/kubepods.slice/...") or a path relative to it as /proc/PID/cgroup prints it
 * ("/kubepods.slice/..."). cgroup2_root NULL: the mount from /proc/self/mountinfo. Symbolic
 * links are resolved first. Returns 0, -ENOENT (no such cgroup), -EXDEV (path is not in the
 * cgroup2 hierarchy) or -errno.
 */
int pp_cgroup_id_level(const char *cgroup2_root, const char *path, uint64_t *id, uint32_t *level);

#endif /* PP_COLLECTOR_CGROUP_LEVEL_H */
