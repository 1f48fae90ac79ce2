/*
 * Debug files from debuginfod servers, opt-in (--debuginfod URLS or DEBUGINFOD_URLS), through
 * Debian's libdebuginfod loaded with dlopen, so the agent needs the library only when asked
 * to use it. Never on the sample path: a worker thread asks the servers, one build id at a
 * time, with a time limit per request, into an on-disk cache bounded in bytes; the sample
 * path only learns what has arrived. Every answer, a miss included, is remembered (bounded),
 * so a build id is asked for once.
 */
#ifndef PP_COLLECTOR_DEBUGINFOD_FETCH_H
#define PP_COLLECTOR_DEBUGINFOD_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "elf_symbols.h"

#define PP_DEBUGINFOD_CACHE_DIR_DEFAULT "/var/lib/pebsprof/debuginfod"
#define PP_DEBUGINFOD_CACHE_BYTES_DEFAULT (128ull << 20)
#define PP_DEBUGINFOD_TIMEOUT_S_DEFAULT 30u

struct pp_debuginfod_opts {
	const char *urls;	  /* space-separated server URLs, as DEBUGINFOD_URLS; required */
	const char *cache_dir;	  /* NULL: PP_DEBUGINFOD_CACHE_DIR_DEFAULT (created) */
	uint64_t cache_max_bytes; /* 0: PP_DEBUGINFOD_CACHE_BYTES_DEFAULT */
	/* a request is given up when it receives under 100 KiB in this many seconds; 0:
	 * PP_DEBUGINFOD_TIMEOUT_S_DEFAULT */
	unsigned int timeout_s;
	/* one request's limit in all; 0: timeout_s. A kernel image (hundreds of MiB) needs
	 * minutes on a slow link. */
	unsigned int max_time_s;
	size_t max_pending; /* build ids waiting for the worker; 0: 256 */
	size_t max_known;   /* answers remembered; 0: 4096 */
	/* The library to load; NULL: "libdebuginfod.so.1". Tests name a missing one. */
	const char *library;
};

struct pp_debuginfod_stats {
	uint64_t requests;	/* build ids asked of the servers */
	uint64_t found;		/* ... that a server had */
	uint64_t not_found;	/* ... that none had (remembered) */
	uint64_t errors;	/* ... that failed otherwise (timeouts, network; remembered) */
	uint64_t queue_full;	/* build ids not queued: max_pending were waiting */
	uint64_t cache_bytes;	/* gauge: bytes in the on-disk cache after the last trim */
	uint64_t cache_removed; /* files removed to keep the cache within its bound */
	uint64_t pending;	/* gauge: waiting or in flight */
};

struct pp_debuginfod;

/*
 * Load the library, prepare the cache directory and start the worker. NULL with errno set:
 * EINVAL (no URLs), ENOENT (libdebuginfod.so.1 could not be loaded: install Debian's
 * libdebuginfod1), ENOMEM, or the errno of creating the cache directory or the thread.
 * Sets DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT and DEBUGINFOD_MAXTIME in
 * the environment, which is how the library takes them: call it before starting other threads.
 */
struct pp_debuginfod *pp_debuginfod_new(const struct pp_debuginfod_opts *opts);
/* Stops the worker (a request in flight is cancelled) and frees. NULL is a no-op. */
void pp_debuginfod_free(struct pp_debuginfod *d);

/*
 * Never blocks on the network (a pp_debug_fetch_fn; ctx is the struct pp_debuginfod): an open
 * fd of the cached debug file when it has arrived, -EAGAIN when it is asked for now or
 * already waiting, -ENOENT when no server has it, -EIO when asking failed, -EINVAL for a bad id.
 */
int pp_debuginfod_fetch(void *ctx, const char *build_id);

/*
 * Build ids whose debug file arrived since the last call, up to max of them (the rest wait for
 * the next call): the caller names what it has already sent unnamed. Returns how many.
 */
size_t pp_debuginfod_take_ready(struct pp_debuginfod *d, char (*ids)[PP_BUILD_ID_HEX_SIZE],
				size_t max);

/*
 * Keep the debug file of this build id out of the cache's bound: never removed by the trim, and
 * not counted against it. For the running kernel's image, hundreds of MiB, which a bound sized
 * for programs' debug files would otherwise remove at the next download and the agent fetch
 * again at its next start. One build id; a later call replaces it. -EINVAL for a bad id.
 */
int pp_debuginfod_pin(struct pp_debuginfod *d, const char *build_id);

/* Wait until nothing is pending, at most timeout_ms: 0, or -ETIMEDOUT. */
int pp_debuginfod_wait_idle(struct pp_debuginfod *d, uint64_t timeout_ms);

void pp_debuginfod_get_stats(struct pp_debuginfod *d, struct pp_debuginfod_stats *out);

#endif /* PP_COLLECTOR_DEBUGINFOD_FETCH_H */
