/*
 * Opening the file behind a process's mapping, on that process's behalf, without letting it
 * choose what the agent opens. The path in /proc/PID/maps is only a name the process can
 * change under us (a symlink out of its root, another mount on top, a FIFO, a file renamed
 * in), so the file is reached either as the very file mapped, /proc/PID/map_files/START-END,
 * or by the path resolved inside the process's root with openat2 (RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS), resolved first without opening (O_PATH) and opened only when it is
 * the mapping's file: the device and inode /proc/PID/maps gives. Nothing but a regular file is
 * ever opened.
 */
#ifndef PP_COLLECTOR_MAPPED_FILE_H
#define PP_COLLECTOR_MAPPED_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "procmaps.h"

/* How pp_mapped_file_open reached the file. */
enum pp_mapped_via {
	PP_MAPPED_VIA_NONE = 0,
	PP_MAPPED_VIA_MAP_FILES, /* /proc/PID/map_files (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) */
	PP_MAPPED_VIA_ROOT,	 /* the path inside /proc/PID/root, identity checked */
	PP_MAPPED_VIA_RELATIVE,	 /* the process was gone: the path in a relative's root, checked */
	PP_MAPPED_VIA_IDENTITY,	 /* not opened: a cache knew the file by the mapping's identity */
};

/* A file as a mapping names it: device, inode and generation (pp_mapped_file_identity). */
struct pp_file_identity {
	uint32_t dev_major, dev_minor;
	uint64_t inode, ino_generation;
};

/*
 * How mapping m names its file without an open, for a cache to find the file it found the
 * last time an open confirmed that name (for a while: an inode freed and given to a new file
 * misleads the lookup until then): the side-band's device, inode and generation; for a maps
 * line (a process read from /proc, and its forks), its device and inode with its path's hash
 * where the generation goes, bit 63 set (a generation is 32 bits: none has it). Never a deleted
 * file's maps line: without a generation a later file could take its name. false where m has
 * no name.
 */
bool pp_mapped_file_identity(const struct pp_map_entry *m, struct pp_file_identity *id);

/*
 * An O_CLOEXEC read-only fd of mapping m of process pid (proc_root NULL: "/proc"), or -errno:
 *   -ESTALE   what the path leads to is not the mapped file (another device or inode: a
 *             replaced file, or a process steering the agent elsewhere);
 *   -ENOENT   the mapping is gone, or its file deleted and map_files not open to us;
 *   -EXDEV    the path would leave the process's root;
 *   -EINVAL   not a regular file (a FIFO, a device, a socket), or m has no file;
 *   the errno of the open otherwise.
 * via (may be NULL) says which way succeeded.
 */
int pp_mapped_file_open(const char *proc_root, uint32_t pid, const struct pp_map_entry *m,
			enum pp_mapped_via *via);

/*
 * The same for a process that may have exited: when pid and its files are gone, the path is
 * resolved in the root of each of relatives[0..n) in turn (the processes it was forked from,
 * which shared its root when it started) and opened only when it is the mapped file (device
 * and inode). *root_pid says whose root it was found in.
 */
int pp_mapped_file_open_gone(const char *proc_root, uint32_t pid, const uint32_t *relatives,
			     size_t n, const struct pp_map_entry *m, enum pp_mapped_via *via,
			     uint32_t *root_pid);

#endif /* PP_COLLECTOR_MAPPED_FILE_H */
