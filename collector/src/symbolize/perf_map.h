/*
 * Names of JIT-compiled code from the perf map a runtime writes for it: /tmp/perf-PID.map, one
 * "START SIZE name" line (hex start and size) per compiled function, appended as code is
 * compiled (the JVM's -XX:+DumpPerfMapAtExit or jcmd Compiler.perfmap, Node.js
 * --perf-basic-prof, .NET's DOTNET_PerfMapEnabled, Python 3.12's -X perf).
 *
 * The file belongs to the profiled process, so it is hostile input: it is opened inside the
 * process's root without following any symbolic link, must be a regular file owned by the
 * process's user and not on FUSE (which its owner could make hang), and is read with bounds
 * on bytes and entries. It is read again, from where the last read stopped, when an address
 * finds no name and the file has grown; a later entry wins over an earlier one for the same
 * addresses, as code is freed and the space reused.
 */
#ifndef PP_COLLECTOR_PERF_MAP_H
#define PP_COLLECTOR_PERF_MAP_H

#include <stddef.h>
#include <stdint.h>

/* A line longer than this is garbage: skipped and counted. */
#define PP_PERF_MAP_MAX_LINE 4096

/* ---- one map, from buffers (the parser; fuzzed) ---- */

struct pp_perf_map;

struct pp_perf_map_stats {
	uint64_t entries;    /* entries held */
	uint64_t bad_lines;  /* lines that were not "START SIZE name" (skipped) */
	uint64_t dropped;    /* good lines not kept: the entry or byte bound was reached */
	uint64_t bytes_read; /* bytes consumed so far */
};

/* A map holding at most max_entries entries and max_bytes of them (entries and names). */
struct pp_perf_map *pp_perf_map_new(size_t max_entries, size_t max_bytes);
void pp_perf_map_free(struct pp_perf_map *m);

/*
 * Parse the complete lines in buf[0, len) and keep their entries. Returns the bytes consumed:
 * up to and including the last newline, or all of len when final is set (the end of the
 * file, whose last line needs no newline), or past a line over PP_PERF_MAP_MAX_LINE. What is
 * not consumed is handed again, with more, in the next call.
 */
size_t pp_perf_map_feed(struct pp_perf_map *m, const char *buf, size_t len, int final);

/*
 * The name covering addr (the latest entry that does), or NULL; *sym_start (may be NULL)
 * gets its start. Borrowed until the next feed or free.
 */
const char *pp_perf_map_lookup(struct pp_perf_map *m, uint64_t addr, uint64_t *sym_start);

void pp_perf_map_get_stats(const struct pp_perf_map *m, struct pp_perf_map_stats *out);
/* The memory m holds, in bytes. */
size_t pp_perf_map_bytes(const struct pp_perf_map *m);

/*
 * The namespace pid (the last NSpid field, the pid the process knows itself by and names
 * its map after) and the real and effective uids from /proc/PID/status's text. Returns 0, or
 * -EINVAL when a field is missing or malformed (a kernel without NSpid: Pid is used).
 */
int pp_perf_map_parse_status(const char *buf, size_t len, uint32_t *nspid, uint32_t *ruid,
			     uint32_t *euid);

/* ---- the maps of many processes ---- */

struct pp_perf_maps_opts {
	const char *proc_root;	 /* NULL: "/proc" */
	size_t max_processes;	 /* 0: 256 */
	size_t max_bytes;	 /* all maps together; 0: PP_PERF_MAPS_BYTES_DEFAULT */
	size_t max_entries;	 /* per process; 0: 1 << 20 */
	uint64_t max_file_bytes; /* read no further into one file; 0: 256 MiB */
	uint64_t recheck_ns;	 /* a file is looked at again at most this often; 0: 1 s */
	/* Monotonic clock in ns; NULL: CLOCK_MONOTONIC. Tests inject their own. */
	uint64_t (*now_ns)(void *clock_ctx);
	void *clock_ctx;
};

#define PP_PERF_MAPS_BYTES_DEFAULT (16u << 20)

struct pp_perf_maps_stats {
	uint64_t files_read;	/* perf map files opened and read (first time or grown) */
	uint64_t files_missing; /* lookups whose process had no perf map (rechecked later) */
	/* Files refused: a symbolic link, not a regular file (a FIFO, a device), another
	 * user's file, on FUSE. Each is counted once per recheck. */
	uint64_t refused;
	uint64_t truncated; /* files read up to max_file_bytes and no further */
	uint64_t bad_lines; /* summed over all maps read */
	uint64_t dropped;   /* good lines not kept for the bounds */
	uint64_t evictions; /* processes' maps dropped for max_processes / max_bytes */
	uint64_t named;	    /* lookups answered with a name */
};

struct pp_perf_maps;

/* Returns NULL with errno ENOMEM. */
struct pp_perf_maps *pp_perf_maps_new(const struct pp_perf_maps_opts *opts);
void pp_perf_maps_free(struct pp_perf_maps *c);

/*
 * The JIT name of addr in process pid (a host pid) whose contents are generation (bumped on
 * exec or pid reuse: the map is started over), reading or rereading its perf map as needed.
 * NULL when it has none. Borrowed until the next call on c.
 */
const char *pp_perf_maps_lookup(struct pp_perf_maps *c, uint32_t pid, uint64_t generation,
				uint64_t addr);

/* The process exited: its map is dropped. */
void pp_perf_maps_forget(struct pp_perf_maps *c, uint32_t pid);

void pp_perf_maps_get_stats(const struct pp_perf_maps *c, struct pp_perf_maps_stats *out);
/* The memory all maps hold, in bytes. */
size_t pp_perf_maps_bytes(const struct pp_perf_maps *c);

#endif /* PP_COLLECTOR_PERF_MAP_H */
