/*
 * A cache, bounded in entries and in bytes, of per-process facts (start time, comm, exe, parsed
 * maps) keyed by tgid and read from a configurable proc root. The collector asks it for every
 * sample, so it answers from memory, remembers recently vanished pids, and rate-limits its rereads
 * of /proc.
 *
 * Not thread-safe: one collector thread owns a cache.
 */
#ifndef PP_COLLECTOR_PROC_CACHE_H
#define PP_COLLECTOR_PROC_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "procmaps.h"

#define PP_PROC_COMM_LEN 64
#define PP_PROC_RELATIVES 2

/* struct pp_proc.flags */
#define PP_PROC_F_EXITED 0x1	  /* pp_proc_cache_on_exit() was called; evicted first */
#define PP_PROC_F_STALE 0x2	  /* exec seen; reloaded on the next get */
#define PP_PROC_F_KTHREAD 0x4	  /* a kernel thread (PF_KTHREAD): no exe, no maps */
#define PP_PROC_F_EXE_DELETED 0x8 /* the exe link ended in " (deleted)" */
#define PP_PROC_F_NO_EXE 0x10	  /* the exe link could not be read */
#define PP_PROC_F_NO_MAPS 0x20	  /* maps could not be read (not because the process left) */
/* made from the kernel's side-band (an exec or a fork), not read from /proc */
#define PP_PROC_F_EVENTS 0x40
/* the image before an exec, handed out for samples taken before it: never reread */
#define PP_PROC_F_REPLACED 0x80

struct pp_proc {
	uint32_t pid;		 /* the tgid (what user space calls the process id) */
	uint32_t flags;		 /* PP_PROC_F_* */
	uint64_t start_time;	 /* field 22 of /proc/PID/stat: clock ticks after boot */
	uint64_t loaded_ns;	 /* cache clock when the entry was (re)loaded */
	uint64_t maps_loaded_ns; /* cache clock when maps were last read */
	/* Bumped when exec or pid reuse replaced the contents, so users can drop derived state. */
	uint64_t generation;
	char comm[PP_PROC_COMM_LEN]; /* /proc/PID/comm without the newline */
	char *exe; /* readlink of /proc/PID/exe without " (deleted)"; "" if unknown */
	/*
	 * Side-band images: the processes it was forked from (parent, grandparent; 0: none),
	 * whose roots were its own when it started: its files are found through them when it
	 * is gone (mapped_file.h).
	 */
	uint32_t relatives[PP_PROC_RELATIVES];
	uint32_t maps_version; /* bumped when the side-band adds an executable mapping */
	struct pp_maps maps;
};

struct pp_proc_cache_stats {
	uint64_t hits;		   /* gets answered by a cached entry */
	uint64_t pre_exec_hits;	   /* ... a stale one, for a sample taken before the exec */
	uint64_t older_image_hits; /* ... an image before the last one replaced (a wrapper's) */
	uint64_t pre_image_misses; /* samples older than every image of their pid kept: ESTALE */
	uint64_t misses;	   /* gets for a pid not cached (and not negatively cached) */
	uint64_t loads; /* full reads of a process from the proc root (first load or reload) */
	uint64_t reloads_for_unplaced_addr; /* maps rereads because an address was not mapped */
	uint64_t reloads_suppressed;	    /* ... skipped by the per-process rate limit */
	uint64_t evictions;		    /* entries dropped to stay within capacity */
	uint64_t expired;		    /* exited entries dropped after exited_ttl_ns */
	uint64_t gone;			    /* loads that found the process gone (ESRCH) */
	uint64_t negative_hits;		    /* gets answered ESRCH from the negative cache */
	uint64_t negative_evictions;	    /* live negative entries overwritten */
	uint64_t pid_reuse;	 /* reloads that found a different process under the same pid */
	uint64_t load_errors;	 /* loads failed for other reasons (permissions, memory) */
	uint64_t maps_bad_lines; /* malformed maps lines skipped, summed over loads */
	uint64_t sb_images;	 /* images made from side-band execs and forks (no /proc read) */
	uint64_t sb_mmaps;	 /* mappings the side-band reported, applied to cached entries */
	/* ... of processes not cached (read from /proc when sampled), or older than every image */
	uint64_t sb_mmaps_unused;
	/* ... applied, made before an exec read earlier: given to the image that exec ended */
	uint64_t sb_mmaps_late;
};

struct pp_proc_cache_opts {
	const char *proc_root;	    /* NULL: "/proc"; copied */
	size_t capacity;	    /* processes held; must be > 0 */
	size_t negative_capacity;   /* pids remembered as gone; 0: 256 */
	uint64_t negative_ttl_ns;   /* how long a gone pid is remembered; 0: 1 s */
	uint64_t reload_min_gap_ns; /* per process, between maps rereads; 0: 200 ms */
	size_t max_maps_bytes;	    /* larger maps files are cut here; 0: 64 MiB */
	/* Bytes the entries may hold (exe paths, maps); the least recently used (exited first)
	 * are evicted past it, never the one just loaded; 0: 16 MiB. */
	size_t max_bytes;
	uint64_t exited_ttl_ns; /* exited entries are dropped this long after the exit; 0: 30 s */
	/* Monotonic clock in ns; NULL: CLOCK_MONOTONIC. Tests inject their own. */
	uint64_t (*now_ns)(void *clock_ctx);
	void *clock_ctx;
};

struct pp_proc_cache;

/* Returns NULL and sets errno (EINVAL for a zero capacity, ENOMEM). */
struct pp_proc_cache *pp_proc_cache_new(const struct pp_proc_cache_opts *opts);
/* NULL is a no-op. Every struct pp_proc handed out becomes invalid. */
void pp_proc_cache_free(struct pp_proc_cache *c);

/*
 * The process with tgid pid, loaded on a miss; a stale entry (exec) is reloaded, and an exited
 * one is rechecked (at most once per reload_min_gap_ns) for pid reuse. Returns NULL with errno
 * ESRCH when the process is gone (remembered for negative_ttl_ns), or another errno when
 * /proc could not be read. The entry is owned by the cache and valid until the next call that
 * takes the cache non-const (it may be evicted or reloaded then); its fields are read-only.
 */
const struct pp_proc *pp_proc_cache_get(struct pp_proc_cache *c, uint32_t pid);
/*
 * The same for a sample taken at sample_ns (the clock of pp_proc_cache_on_exec_at; 0: now): a
 * sample taken before the exec that made the entry stale gets the entry as it is, the image it
 * ran in, instead of a reload; one taken before a side-band exec gets the replaced image it
 * ran in, or NULL with errno ESTALE where that one is no longer kept.
 */
const struct pp_proc *pp_proc_cache_get_at(struct pp_proc_cache *c, uint32_t pid,
					   uint64_t sample_ns);

/*
 * The mapping of proc (from pp_proc_cache_get on c) that contains addr. When none does, the
 * maps are reread once, unless they were read less than reload_min_gap_ns ago or the process
 * has exited, and the lookup retried. Returns NULL with errno ENOENT when addr stays unplaced.
 * A reread invalidates entries returned earlier for this proc.
 */
const struct pp_map_entry *pp_proc_cache_find_map(struct pp_proc_cache *c,
						  const struct pp_proc *proc, uint64_t addr);

/* The process exec'ed: its cached exe and maps are stale and are reloaded on the next get. */
void pp_proc_cache_on_exec(struct pp_proc_cache *c, uint32_t pid);
/* The same, with the exec's time on the samples' clock (the shim's bpf_ktime_get_ns). */
void pp_proc_cache_on_exec_at(struct pp_proc_cache *c, uint32_t pid, uint64_t exec_ns);
/*
 * The process exited: the entry stays (queued samples may still need it) but is marked
 * exited, is not reread for unplaced addresses, and is evicted before live entries.
 */
void pp_proc_cache_on_exit(struct pp_proc_cache *c, uint32_t pid);
/*
 * A process with this pid was just created: forget a negative entry for it, and treat a cached
 * entry under the same pid as a process that has exited (the pid was reused).
 */
void pp_proc_cache_on_fork(struct pp_proc_cache *c, uint32_t pid);

/*
 * The kernel's side-band (sampling/sideband.h), applied as it is read, times on the samples'
 * clock. An exec starts a new image of pid (the last eight before it are kept a while, each
 * for the samples taken while it ran); a fork starts the child with a copy of its parent's
 * image, when the parent is cached; a mapping is added to the image that made it, replacing
 * what it covers: one older than the current image goes to the replaced image of its time.
 * A process known this way is never read from /proc, except to place an address none of its
 * reported mappings holds (a heap address of a memory sample, or records the kernel lost).
 * Records older than every image kept are ignored.
 */
void pp_proc_cache_on_sb_exec(struct pp_proc_cache *c, uint32_t pid, const char *comm,
			      uint64_t time_ns);
void pp_proc_cache_on_sb_fork(struct pp_proc_cache *c, uint32_t pid, uint32_t ppid,
			      uint64_t time_ns);
/*
 * The image the exec that made proc (a current image, from get) replaced, the newest kept, or
 * NULL: a sample taken in that exec, in the kernel before the new image ran, still has that
 * image's user registers. Valid as for get.
 */
const struct pp_proc *pp_proc_cache_image_before(struct pp_proc_cache *c,
						 const struct pp_proc *proc);
/* The cached image of pid now, without reading /proc (NULL: none); valid as for get. */
const struct pp_proc *pp_proc_cache_peek(struct pp_proc_cache *c, uint32_t pid);
void pp_proc_cache_on_sb_comm(struct pp_proc_cache *c, uint32_t pid, const char *comm);
void pp_proc_cache_on_sb_mmap(struct pp_proc_cache *c, uint32_t pid, uint64_t time_ns,
			      const struct pp_map_entry *e);

void pp_proc_cache_get_stats(const struct pp_proc_cache *c, struct pp_proc_cache_stats *out);
/* Number of processes held (at most capacity). */
size_t pp_proc_cache_count(const struct pp_proc_cache *c);
/* Bytes the entries hold now (what max_bytes bounds), and the read buffer kept between reads
 * (at most 256 KiB: a larger one, for a huge maps file, is given back after the read). */
size_t pp_proc_cache_bytes(const struct pp_proc_cache *c);
size_t pp_proc_cache_buffer_bytes(const struct pp_proc_cache *c);

/*
 * Write "<proc_root>/<pid>/root<path>" to out: the path as the process sees it, reachable from
 * our mount namespace even when the process runs in a container. path must be absolute.
 * proc_root NULL means "/proc". Returns 0, -EINVAL, or -ENAMETOOLONG when out is too small.
 */
int pp_proc_path_in_root(const char *proc_root, uint32_t pid, const char *path, char *out,
			 size_t outlen);

/* The fields of /proc/PID/stat the cache uses. */
struct pp_proc_stat {
	char comm[PP_PROC_COMM_LEN]; /* between the first '(' and the last ')', truncated */
	char state;
	uint32_t ppid;
	uint32_t flags;	     /* field 9: PF_* */
	uint64_t start_time; /* field 22 */
};

/*
 * Parse the text of /proc/PID/stat (len bytes, no NUL needed). comm may hold spaces and
 * parentheses, so the fields after it are counted from the last ')'. Returns 0 or -EINVAL.
 */
int pp_proc_stat_parse(const char *buf, size_t len, struct pp_proc_stat *out);

#endif /* PP_COLLECTOR_PROC_CACHE_H */
