/*
 * The kernel's side-band: what every process maps, execs, forks into and exits, as perf
 * reports it (PERF_RECORD_MMAP2, COMM, FORK, EXIT) on a dummy software event per CPU. A
 * process that exits before the collector reads /proc is still known: its mappings were
 * reported when it made them. Records carry CLOCK_MONOTONIC times, the clock of the shim's
 * samples, so a sample is matched with the image it ran in.
 *
 * The parser takes one record in a buffer (pp_sideband_parse, fuzzed); the reader owns the
 * events and their ring buffers and hands each record, decoded, to a callback.
 */
#ifndef PP_SIDEBAND_H
#define PP_SIDEBAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pp_sb_kind {
	PP_SB_MMAP = 1, /* a mapping was made (executable ones; data ones too with mmap_data) */
	PP_SB_COMM,	/* a thread's name changed, or (exec) a process replaced its image */
	PP_SB_FORK,	/* a task was created: a process when pid == tid and pid != ppid */
	PP_SB_EXIT,	/* a task exited */
	PP_SB_LOST,	/* the kernel dropped records: the ring was full */
};

#define PP_SB_COMM_LEN 16
#define PP_SB_PATH_MAX 4096

struct pp_sb_event {
	enum pp_sb_kind kind;
	uint32_t pid, tid;   /* tgid and thread id */
	uint32_t ppid, ptid; /* FORK and EXIT: the parent's */
	uint64_t time_ns;    /* CLOCK_MONOTONIC */
	bool exec;	     /* COMM: the name came with an exec */
	char comm[PP_SB_COMM_LEN];
	/* MMAP */
	uint64_t start, len, pgoff;
	uint32_t dev_major, dev_minor;
	uint64_t inode, ino_generation;
	uint32_t prot, flags; /* PROT_*, MAP_* */
	/*
	 * The name as the kernel gives it (a path, "[vdso]", "//anon"), NUL-terminated, at most
	 * PP_SB_PATH_MAX - 1 bytes; points into the buffer given to pp_sideband_parse.
	 */
	char *path;
	uint64_t lost; /* LOST: records dropped */
};

/*
 * Decode one record (header included) of len bytes, as read with sample_type TID | TIME and
 * sample_id_all. The buffer is modified in place (the name's NUL). Returns 0, -ENOENT for a
 * record type not used here (skip it), -EINVAL for a malformed one.
 */
int pp_sideband_parse(void *rec, size_t len, struct pp_sb_event *out);

struct pp_sideband_opts {
	uint32_t ring_pages; /* data pages per CPU (power of two); 0: 32 (128 KiB) */
	bool mmap_data;	     /* also data mappings (memory events classify data addresses) */
};

struct pp_sideband_stats {
	uint64_t records;     /* records decoded */
	uint64_t lost;	      /* records the kernel dropped (ring full) */
	uint64_t lost_events; /* LOST records seen */
	uint64_t bad;	      /* records that did not parse (skipped) */
	uint64_t drains;      /* pp_sideband_drain calls that read something */
};

struct pp_sideband;

typedef void (*pp_sb_fn)(void *ctx, const struct pp_sb_event *ev);

/*
 * Opens the events on every online CPU. NULL with errno set (the errno of perf_event_open or
 * mmap); the caller decides how to go on without it.
 */
struct pp_sideband *pp_sideband_open(const struct pp_sideband_opts *opts);
void pp_sideband_free(struct pp_sideband *sb);

/*
 * The event fds, readable when a record is written (each wakes its reader: an exec is acted
 * on at once, not at the next poll). n gets their number.
 */
const int *pp_sideband_fds(const struct pp_sideband *sb, size_t *n);

/* Hands every record written so far to cb, in time order. Returns the records read. */
size_t pp_sideband_drain(struct pp_sideband *sb, pp_sb_fn cb, void *ctx);

void pp_sideband_get_stats(const struct pp_sideband *sb, struct pp_sideband_stats *out);
/* Bytes of ring buffer mapped, all CPUs together. */
size_t pp_sideband_ring_bytes(const struct pp_sideband *sb);

#endif /* PP_SIDEBAND_H */
