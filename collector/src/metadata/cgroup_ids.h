/*
 * Maps the cgroup v2 ids the BPF shim records (bpf_get_current_cgroup_id: the kernfs node id,
 * which is the st_ino of the cgroup directory on 64-bit kernels >= 5.5 and the 8-byte
 * name_to_handle_at handle) back to the cgroup path, relative to the cgroup2 mount, so
 * samples can be tied to containers and pods. The table is filled by walking the hierarchy on
 * a miss, at most once per interval, and holds a bounded number of cgroups.
 */
#ifndef PP_COLLECTOR_CGROUP_IDS_H
#define PP_COLLECTOR_CGROUP_IDS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Find the cgroup2 mount point in /proc/PID/mountinfo text buf[0..len) (no NUL needed; never
 * read past len). The filesystem type is the first field after the lone "-" separator; a
 * mount point's octal escapes ("\040" for a space, "\011", "\012", "\134") are decoded. When
 * several cgroup2 filesystems are mounted the first whose mount root (field 4) is "/" wins
 * (a bind of a subtree sees only part of the ids), else the first one. Hybrid systemd hosts
 * give "/sys/fs/cgroup/unified". Returns 0 with the NUL-terminated path in out, -ENOENT when
 * no cgroup2 is mounted, -ENAMETOOLONG when it does not fit in outlen, -EINVAL for bad args.
 */
int pp_mountinfo_find_cgroup2(const char *buf, size_t len, char *out, size_t outlen);

/*
 * Whether mountinfo text buf[0..len) mounts a cgroup v1 hierarchy (filesystem type "cgroup"):
 * a hybrid host when cgroup2 is mounted too. 1 or 0.
 */
int pp_mountinfo_has_cgroup1(const char *buf, size_t len);

/*
 * From the text of /proc/cgroups (one line per subsystem the kernel has, in the order of its
 * enum cgroup_subsys_id: "name hierarchy num_cgroups enabled"), the subsystem whose v1
 * hierarchy best tells containers apart: memory, else pids, cpu, cpuacct, blkio, devices,
 * freezer, else the first other one, among those enabled and mounted in a v1 hierarchy (not
 * 0). Returns its index + 1, 0 when none is, -EINVAL for a line that is not of that form;
 * its name goes to name_out (cut to name_len) unless that is NULL.
 */
int pp_proc_cgroups_subsys(const char *buf, size_t len, char *name_out, size_t name_len);

/*
 * Whether the comma-separated list [list, list + n) holds word: a mount's super block
 * options, the controllers of a /proc/PID/cgroup line ("cpu,cpuacct").
 */
bool pp_cgroup_list_has(const char *list, size_t n, const char *word);

/*
 * The mount point of the whole cgroup v1 hierarchy of subsystem subsys (filesystem "cgroup",
 * the subsystem among its super block's options, mount root "/") in mountinfo text. Returns 0,
 * -ENOENT, -ENAMETOOLONG or -EINVAL as pp_mountinfo_find_cgroup2.
 */
int pp_mountinfo_find_cgroup1(const char *buf, size_t len, const char *subsys, char *out,
			      size_t outlen);

/*
 * How samples are keyed by cgroup on this host (PP_SF_CGROUP_V1): the v1 hierarchy chosen, where
 * it and cgroup2 are mounted. subsys 0: by the v2 id alone (no v1 hierarchy to use).
 */
struct pp_cgroup_v1_key {
	uint32_t subsys; /* index + 1 in /proc/cgroups, the kernel's enum cgroup_subsys_id */
	char name[32];	 /* "memory", ... */
	char v1_root[PATH_MAX];
	bool with_v2; /* cgroup2 is mounted (hybrid): the key holds the v2 cgroup too */
	char v2_root[PATH_MAX];
};

/*
 * Chooses from <proc_root>/self/mountinfo and <proc_root>/cgroups (proc_root NULL: "/proc").
 * The shim's loader and the container lookup each choose, and choose alike. Returns 0
 * (out->subsys 0 where v1 is not to be used) or -errno.
 */
int pp_cgroup_v1_key_choose(const char *proc_root, struct pp_cgroup_v1_key *out);

/* Reads <proc_root>/self/mountinfo (proc_root NULL: "/proc") into a malloc'ed, NUL-terminated
 * *out the caller frees. Returns its length, or -errno (*out is then NULL). */
ssize_t pp_mountinfo_read(const char *proc_root, char **out);

/*
 * The cgroup2 mount point named in <proc_root>/self/mountinfo (proc_root NULL: "/proc").
 * Returns 0 with the NUL-terminated path in out, -ENOENT when none is mounted, or -errno.
 */
int pp_cgroup2_mount(const char *proc_root, char *out, size_t outlen);

/* What a walk visitor answers; any other value stops the walk, which returns it. */
#define PP_CGROUP_WALK_DESCEND 0 /* go on, into this cgroup's children */
#define PP_CGROUP_WALK_PRUNE 1	 /* go on, but not below this cgroup */

/* Called with each cgroup's path relative to the root ("/" for the root, "/a/b") and its
 * inode number (its cgroup id on cgroup2). */
typedef int (*pp_cgroup_visit_fn)(void *ctx, const char *rel_path, uint64_t ino);

struct pp_cgroup_walk_stats {
	bool complete;	 /* every directory was read (none failed, none past max_depth) */
	uint64_t errors; /* directories that could not be opened or read */
};

/*
 * Visits the directory tree at root (a cgroup2 mount, or a tree laid out like one), the root
 * first, parents before children, at most max_depth levels below the root, without following
 * symbolic links. Returns 0, what a visitor stopped it with, or -errno when root cannot be
 * opened. st (may be NULL) says whether the walk saw everything.
 */
int pp_cgroup_walk(const char *root, int max_depth, pp_cgroup_visit_fn fn, void *ctx,
		   struct pp_cgroup_walk_stats *st);

struct pp_cgroup_ids_opts {
	const char *cgroup2_root; /* cgroup2 mount to walk; NULL: found in mountinfo; copied */
	const char *proc_root;	  /* where "self/mountinfo" is read; NULL: "/proc"; copied */
	size_t max_entries;	  /* cgroups held; must be > 0 */
	uint64_t min_walk_gap_ns; /* between two walks; 0: 1 s */
	/* Monotonic clock in ns; NULL: CLOCK_MONOTONIC. Tests inject their own. */
	uint64_t (*now_ns)(void *clock_ctx);
	void *clock_ctx;
};

struct pp_cgroup_ids_stats {
	uint64_t hits;	      /* lookups answered from the table */
	uint64_t misses;      /* lookups not in the table (whether or not a walk followed) */
	uint64_t walks;	      /* hierarchy walks done */
	uint64_t evictions;   /* least recently used entries dropped to stay within max_entries */
	uint64_t walk_errors; /* directories that could not be opened or read during walks */
	uint64_t entries;     /* cgroups held now */
};

struct pp_cgroup_ids;

/*
 * cgroup2_root NULL: the cgroup2 mount from /proc/self/mountinfo. Defaults as in the opts.
 * Returns NULL and sets errno: EINVAL (max_entries 0), ENOENT (no cgroup2 mounted), ENOMEM,
 * ENAMETOOLONG, or the errno of reading mountinfo.
 */
struct pp_cgroup_ids *pp_cgroup_ids_new(const char *cgroup2_root, size_t max_entries);
struct pp_cgroup_ids *pp_cgroup_ids_new_opts(const struct pp_cgroup_ids_opts *opts);
/* NULL is a no-op. Every path handed out becomes invalid. */
void pp_cgroup_ids_free(struct pp_cgroup_ids *c);

/*
 * The path of cgroup id relative to the root ("/" for the root itself, else
 * "/kubepods.slice/..."), or NULL when unknown (after a walk, or while walks are
 * rate-limited). A miss walks the whole hierarchy when min_walk_gap_ns has passed since the
 * last walk. The string stays valid until the next lookup or pp_cgroup_ids_free.
 */
const char *pp_cgroup_ids_lookup(struct pp_cgroup_ids *c, uint64_t id);

/* The cgroup2 mount walked (no trailing slash unless it is "/"). */
const char *pp_cgroup_ids_root(const struct pp_cgroup_ids *c);

void pp_cgroup_ids_stats(const struct pp_cgroup_ids *c, struct pp_cgroup_ids_stats *out);

#endif /* PP_COLLECTOR_CGROUP_IDS_H */
