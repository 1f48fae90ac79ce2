/*
 * The unwind tables the shim walks with (PP_USTACK_AUTO, PP_USTACK_DWARF in record.h): for
 * each process that samples show, its executable file mappings are read from /proc, each
 * file's .eh_frame compiled once (keyed by build id, shared by every process and container
 * that maps it) into a run of 4-byte rows in the kernel's row array, their rules in the
 * rule array all tables share (unwind_pack.h), and the process's sorted
 * mapping list written to the per-process map. Off the sample path: a worker thread does the
 * reading and compiling, so a new process's first samples still take frame-pointer steps.
 *
 * The row array is the memory bound: a table that does not fit evicts the least recently
 * installed tables no live process uses; one that still does not fit is left out (its
 * mappings walk frame pointers). Both are counted. A process that execs or exits releases
 * its entry and its hold on tables.
 *
 * Where the rows and mapping lists go is a sink: the shim's maps (pp_unwinder_bpf_sink), or
 * memory in tests.
 */
#ifndef PP_COLLECTOR_UNWINDER_H
#define PP_COLLECTOR_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pebsprof/record.h>

#include "process/proc_cache.h"
#include "unwind_walk.h"

struct pp_unwinder_sink {
	/* Write n words (a table's run, record.h) at index first of the row array: 0 or -errno. */
	int (*write_rows)(void *ctx, uint32_t first, const uint32_t *words, uint32_t n);
	/* Write the rule at index i of the rule array (before any row names it): 0 or -errno. */
	int (*write_rule)(void *ctx, uint32_t i, const struct pp_bpf_unwind_rule *rule);
	/*
	 * Set or replace a process's mapping list: 0 or -errno (-ENOSPC: no room; the list
	 * before stays). *at is the sink's note of where the process's list lies, 0 before its
	 * first: the caller keeps it for the process's next set_proc and its del_proc.
	 */
	int (*set_proc)(void *ctx, uint32_t tgid, const struct pp_bpf_unwind_list *p, uint64_t *at);
	/* Remove a process's mapping list, at as set_proc left it (absent is fine). */
	void (*del_proc)(void *ctx, uint32_t tgid, uint64_t at);
	/*
	 * Read n words at index first of the row array: 0 or -errno. NULL: stack copies are
	 * not walked (pp_unwinder_walk_later refuses them).
	 */
	int (*read_rows)(void *ctx, uint32_t first, uint32_t n, uint32_t *out);
	/*
	 * The n words at index first of the row array where they lie, valid until the sink's
	 * next call; NULL where they cannot be had in place (read_rows then). NULL: none.
	 */
	const uint32_t *(*peek_rows)(void *ctx, uint32_t first, uint32_t n);
	void *ctx;
	uint32_t nr_rows; /* the row array's size, in 4-byte words */
};

struct pp_unwinder_opts {
	const char *proc_root; /* NULL: /proc */
	bool worker;	       /* a worker thread; false: only pp_unwinder_install does work */
	uint32_t max_procs;    /* 0: PP_UNWIND_MAX_PROCS */
	uint32_t max_tables;   /* files remembered, with or without a table; 0: 4096 */
	uint32_t rescan_ms;    /* a sampled process's maps are read again after this; 0: 2000 */
	bool include_self;     /* also this process (tests); by default it walks frame pointers */
	/*
	 * The kernel reports every process's new mappings (the side-band), so a process read
	 * from /proc once need not be read again: pp_unwinder_note_proc installs its cached
	 * mappings as they change, as it does a reported process's.
	 */
	bool mmap_reports;
	/*
	 * The worker is woken by pp_unwinder_kick, once for what a caller's turn queued (the
	 * agent's poll loop: a node starting hundreds of programs a second then wakes it once a
	 * turn, not once a process); false: at each process queued.
	 */
	bool kick_by_caller;
	/* --user-unwind dwarf: a walk of a stack copy stops where no table row is, as the shim's */
	bool tables_only;
	/* frames a walk of a stack copy takes at most: the shim's user stack depth (0: all) */
	uint32_t max_frames;
	/* compiled tables kept here across starts (table_cache.h); NULL: compiled at each start */
	const char *table_cache_dir;
	uint64_t table_cache_bytes; /* its bound; 0: 64 MiB */
	/*
	 * A file with at least this many FDEs that no earlier start compiled gets a partial
	 * table: a deferred row over its code, where the shim's walks take the sample's stack
	 * copy, and the rows of each FDE a walk of a copy reaches found then (cfi/fde_lookup.h)
	 * and written to the shim, until its walks have paid for compiling it whole. 0: 20,000
	 * (the big libraries whose compile takes 20-100 ms); UINT32_MAX: every file whole.
	 */
	uint32_t partial_min_fdes;
	/*
	 * How often what partial tables' walks found is kept in the table cache while the agent
	 * runs (it is kept at the end too: an agent killed keeps what it had found until then).
	 * 0: every 5 minutes.
	 */
	uint64_t found_keep_ms;
};

struct pp_unwinder_stats {
	uint64_t procs_installed;     /* mapping lists written (rescans included) */
	uint64_t procs_unchanged;     /* rescans that found the same maps: nothing written */
	uint64_t procs_released;      /* by exec, exit or the process bound */
	uint64_t procs_live;	      /* lists in the kernel now */
	uint64_t procs_failed;	      /* /proc/PID/maps unreadable (gone, or no permission) */
	uint64_t procs_dropped;	      /* the queue or the process bound was full */
	uint64_t procs_no_room;	      /* lists the shim's entry array had no room for */
	uint64_t procs_swept;	      /* released because /proc no longer had them (exit unseen) */
	uint64_t tables_built;	      /* files whose CFI was compiled */
	uint64_t tables_shared;	      /* mappings served by a table built before */
	uint64_t tables_none;	      /* files without usable CFI (no .eh_frame_hdr, unreadable) */
	uint64_t tables_refused;      /* ... of which refused: headers over the caps, or sparse */
	uint64_t not_the_mapped_file; /* a mapping's path led to another file: not opened */
	uint64_t tables_evicted;      /* removed from the row array to make room */
	uint64_t tables_no_room;      /* did not fit even after evicting */
	uint64_t mappings;	      /* executable file mappings in the lists written */
	uint64_t mappings_no_table;   /* ... of which walk frame pointers, because: */
	uint64_t mappings_unopened;   /* its file could not be opened (gone, refused) */
	uint64_t mappings_no_cfi;     /* its file has no usable CFI (or was refused) */
	uint64_t mappings_no_room;    /* its table did not fit the row budget */
	uint64_t mappings_unplaced;   /* no executable segment holds its file offset */
	uint64_t mappings_cut;	      /* past PP_UNWIND_MAX_MAPPINGS in a process */
	uint64_t rows_used;	      /* words of the row array in use now (rows, pages) */
	uint64_t rows_total;	      /* its size */
	uint64_t rules_used;	      /* rules in the rule array now */
	uint64_t tables_too_big;      /* more rows than a table may have, or 4 GiB of code */
	uint64_t build_ns;	      /* time compiling tables, in all */
	uint64_t tables_rebuilt;      /* ... built again after they were evicted */
	uint64_t tables_by_identity;  /* mappings given a table without opening their file */
	uint64_t procs_from_events;   /* lists made from mappings given (the side-band's) */
	uint64_t maps_reads;	      /* /proc/PID/maps reads */
	/* the table cache (table_cache.h): tables read from it instead of compiled, ... */
	uint64_t tables_from_cache;
	uint64_t cache_stored, cache_refused, cache_trimmed, cache_failed; /* its files */
	uint64_t cache_identity_hits; /* digests known from an earlier start's identities */
	uint64_t cache_bytes;	      /* in its directory now */
	uint64_t cache_read_ns;	      /* digesting files, reading and decoding tables */
	bool cache_on;
	/* stack copies (pp_unwinder_walk_later): walked, refused (too many waiting); walked
	 * with a list of the image they were taken in (pp_unwind_later.image) */
	uint64_t walks_done, walks_refused, walks_of_images;
	/* partial tables: files given one, FDEs found for walks, frames walked by rows found
	 * then, runs written again, compiled whole since; their failures */
	uint64_t tables_partial, partial_fdes, partial_frames, partial_writes, partial_promoted;
	/* FDEs an earlier start found, looked up again at once; partial tables whose found FDEs
	 * were kept for the next start (in the table cache, at the end) */
	uint64_t partial_fdes_again, partial_found_kept;
	uint64_t partial_write_failed, partial_move_failed;
};

struct pp_unwinder;

struct pp_unwinder *pp_unwinder_new(const struct pp_unwinder_sink *sink,
				    const struct pp_unwinder_opts *opts);
void pp_unwinder_free(struct pp_unwinder *u);

/*
 * A sample of tgid was seen (the sample path: cheap; called from one thread). A process not
 * installed yet, or whose maps were read more than rescan_ms ago, is queued for the worker.
 */
void pp_unwinder_note(struct pp_unwinder *u, uint32_t tgid);
/*
 * A sample of p was seen, or (eager) the side-band reported new executable mappings of p.
 * A process the side-band made (PP_PROC_F_EVENTS), or any with opts.mmap_reports, is
 * installed from its mappings as p holds them, never read from /proc: once per image and
 * change of its mappings, its files found through the processes it came from when it is gone.
 * Others are noted as by pp_unwinder_note; kernel threads not at all.
 */
void pp_unwinder_note_proc(struct pp_unwinder *u, const struct pp_proc *p);
/* With opts.kick_by_caller: wakes the worker where work was queued since the last kick. */
void pp_unwinder_kick(struct pp_unwinder *u);
/* The process exec'd or exited: its list is removed and its tables released. */
void pp_unwinder_release(struct pp_unwinder *u, uint32_t tgid);
/* Install (or re-read) a process now, on the caller's thread: 0 or -errno. */
int pp_unwinder_install(struct pp_unwinder *u, uint32_t tgid);
/*
 * Wait until the worker's queue is empty (tests, the end of a capture). Without a worker,
 * releases the processes /proc no longer has, then does the queued work here.
 */
void pp_unwinder_drain(struct pp_unwinder *u);
/* The same, waiting for the worker at most timeout_ms: 0, or -ETIMEDOUT. */
int pp_unwinder_drain_for(struct pp_unwinder *u, uint64_t timeout_ms);

void pp_unwinder_get_stats(struct pp_unwinder *u, struct pp_unwinder_stats *out);

/*
 * A sample's copy of the top of its user stack (PP_SF_USTACK_RAW: its process had no tables
 * in the shim yet), to walk once they are in: queued behind the process's install, walked by
 * the worker with the mapping list installed for it and the rows and rules the shim reads,
 * in the order the shim walks (unwind_walk.h), even when the process has exited since.
 */
struct pp_unwind_later {
	uint32_t tgid;
	struct pp_unwind_regs regs; /* where the walk starts */
	const uint8_t *stack;	    /* the copy: [stack_base, stack_base + stack_len) */
	uint64_t stack_base;
	uint32_t stack_len; /* at most PP_RAW_USTACK_MAX */
	const void *blob;   /* the caller's, copied, given back with the walk */
	size_t blob_len;    /* at most PP_SAMPLE_MAX_SIZE */
	/*
	 * NULL: the copy is walked with its process's list. Else the image it was taken in, one
	 * its process has replaced by an exec since (PP_PROC_F_REPLACED; a wrapper's: env, a
	 * shell before the program it starts): walked with a list of that image's mappings
	 * (copied here), made for this walk alone and never written to the shim.
	 */
	const struct pp_proc *image;
};

/*
 * 0 (queued, copied), -ENOSPC (PP_UNWIND_WALKS_MAX copies waiting for their walk, or
 * PP_UNWIND_WALKED_MAX walks done and not taken), -EINVAL, -EOPNOTSUPP (no read_rows)
 */
int pp_unwinder_walk_later(struct pp_unwinder *u, const struct pp_unwind_later *w);

#define PP_UNWIND_WALKS_MAX 640 /* copies waiting for their walk (30 KiB each): 19 MiB at most */
/*
 * Walks done and not taken yet: 13 MiB at most. A walk done keeps its frames and the sample,
 * not the copy (a sixth of the memory at most), so a collector short of CPU, whose worker
 * walks while its loop waits to take them, holds them rather than refusing the copies behind.
 */
#define PP_UNWIND_WALKED_MAX 4096

struct pp_unwind_walked {
	const void *blob;
	size_t blob_len;
	/* 0: walked; -ESRCH: no list was installed for the process (none of its files had a
	 * table, or it was gone before it could be); the walk's pcs are then empty */
	int status;
	enum pp_unwind_stop why;
	const uint64_t *pcs; /* leaf first, at most PP_MAX_STACK_DEPTH */
	size_t npcs;
	struct pp_unwind_walk_stats st;
};

/* Hands each walk done since the last call to fn, in the order they were queued: how many. */
size_t pp_unwinder_take_walked(struct pp_unwinder *u,
			       void (*fn)(void *ctx, const struct pp_unwind_walked *w), void *ctx);
/* Walks queued and not yet taken. */
uint32_t pp_unwinder_walks_waiting(struct pp_unwinder *u);

/*
 * A sink writing to the shim's maps: rows_fd the row array of nr_rows words, rules_fd the rule
 * array (PP_UW_MAX_RULES), procs_fd the per-process hash, mappings_fd the array of nr_slots
 * entries its lists are runs of (a list that finds no run free is refused, -ENOSPC). Freed
 * with pp_unwinder_bpf_sink_free after the unwinder.
 */
struct pp_unwinder_sink *pp_unwinder_bpf_sink_new(int rows_fd, uint32_t nr_rows, int rules_fd,
						  int procs_fd, int mappings_fd, uint32_t nr_slots);
void pp_unwinder_bpf_sink_free(struct pp_unwinder_sink *sink);

#endif /* PP_COLLECTOR_UNWINDER_H */
