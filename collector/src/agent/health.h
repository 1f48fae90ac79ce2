/*
 * The agent's health and metrics endpoint (`pebsprof run --listen ADDR:PORT`): a small
 * HTTP/1.1 server in its own thread (plain sockets and poll) answering
 *
 *   GET /healthz  200 "ok", or 503 with a one-line reason (pp_health_check below): for
 *                 readiness and alerting;
 *   GET /livez    the same for sampling alone (the export rules left out): for a liveness
 *                 probe, since restarting the agent cannot bring a backend back;
 *   GET /metrics  Prometheus text exposition format 0.0.4 (pp_metrics_render below);
 *
 * HEAD works like GET without the body; any other method gets 405, any other path 404, a
 * malformed request 400, a request line and headers over PP_HTTP_MAX_REQUEST bytes 431.
 * Every response closes the connection. The server is one epoll loop that never blocks on a
 * client: a connection gets PP_HEALTH_IO_TIMEOUT_MS from its accept to send a whole request
 * (however slowly its bytes come), and as long again to read the answer. At most
 * PP_HEALTH_MAX_CONNS are open at once (fewer under a low descriptor limit); the kernel's
 * accept queue is always emptied, and past the cap the oldest connection still waiting for its
 * request is closed, so idle or slow clients, however many, cannot keep a fresh probe out.
 *
 * The sampler never waits on this thread: the run loop hands a pp_health_snapshot to
 * pp_health_server_update() once per poll tick (a memcpy under a mutex), and requests are
 * answered from the last copy, so no lock is taken per sample and a slow client holds
 * nothing the run loop needs.
 *
 * When is the agent unhealthy (503)? The rules, in the order they are checked, with the
 * reason line each gives:
 *
 *   starting      no snapshot yet: sampling is not attached.
 *   stopping      SIGTERM/SIGINT received; the last window is being shipped.
 *   loop stalled  the run loop has not ticked for more than limits.stall_ns (it ticks at
 *                 least every 100 ms while healthy; a stuck loop stops updating).
 *   no samples    the kernel side made no progress for more than limits.stall_ns: neither
 *                 the BPF program's invocation counter nor the records read from the ring
 *                 buffer grew (events disabled or detached, ring buffer not drained).
 *   export        the last limits.failed_windows exports in a row failed (a request dropped
 *                 after its retries or refused by the server, or a window that could not be
 *                 queued or written), or uploads have been failing (an attempt failed and
 *                 nothing was delivered since) for more than limits.export_fail_ns.
 *   behind        the oldest request not yet delivered was queued more than
 *                 limits.queue_age_ns ago: an outage shows before its retry budget ends.
 *
 * Healthy but degraded (200, the reason after "ok; degraded: "): PP_HEALTH_UNREADABLE_PCT
 * percent or more of the last window's samples came from processes whose maps or binaries
 * could not be read (no CAP_SYS_PTRACE, AppArmor), so their user frames are bare.
 *
 * `pebsprof run` sets stall_ns from --stall-timeout (default: two windows, at least 30 s),
 * failed_windows to PP_HEALTH_FAILED_WINDOWS, export_fail_ns to the transport's retry
 * budget (300 s) plus one window, and queue_age_ns to PP_HEALTH_QUEUE_AGE_WINDOWS windows
 * (at least 30 s).
 */
#ifndef PP_COLLECTOR_HEALTH_H
#define PP_COLLECTOR_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include <pebsprof/record.h>
#include <pebsprof/transport.h>

#include "base/self_cpu.h"
#include "sampling/record_decode.h"

/* Bound on the request line and headers; longer requests get 431. */
#define PP_HTTP_MAX_REQUEST 4096
/* Time a connection has to send its request, and then to read the answer. */
#define PP_HEALTH_IO_TIMEOUT_MS 2000
#define PP_HEALTH_MAX_CONNS 1024
/* How many windows the oldest queued one may wait before the agent is unhealthy. */
#define PP_HEALTH_QUEUE_AGE_WINDOWS 3
/* Share of a window's samples with unreadable maps that makes the agent "degraded". */
#define PP_HEALTH_UNREADABLE_PCT 10
/* Export failures in a row that make the agent unhealthy. */
#define PP_HEALTH_FAILED_WINDOWS 3

/* ---- requests ---- */

enum pp_http_method {
	PP_HTTP_GET,
	PP_HTTP_HEAD,
	PP_HTTP_OTHER, /* a valid token we do not serve: 405 */
};

struct pp_http_request {
	enum pp_http_method method;
	const char *path; /* borrowed from the buffer: the path without query, never NUL-ended */
	size_t path_len;
	int minor;	   /* HTTP/1.minor: 0 or 1 */
	size_t header_len; /* bytes up to and including the blank line ending the headers */
};

/*
 * Parses the start of buf as an HTTP/1.x request: request line (origin form, or absolute
 * form whose path is taken), header lines, blank line; a body, if any, is not looked at.
 * Leading empty lines are skipped; lines may end in CRLF or LF. Returns 0 with out filled,
 * -EAGAIN when buf is a valid but incomplete beginning (read more; the caller bounds how
 * much), or -EBADMSG as soon as the bytes cannot begin a valid request.
 */
int pp_http_parse_request(const char *buf, size_t len, struct pp_http_request *out);

/* ---- health ---- */

struct pp_health_limits {
	uint64_t stall_ns;	 /* loop or kernel progress older than this: unhealthy */
	uint32_t failed_windows; /* this many failed exports in a row: unhealthy; 0 = off */
	uint64_t export_fail_ns; /* failing without a delivery this long: unhealthy; 0 = off */
	uint64_t queue_age_ns; /* the oldest queued request waited this long: unhealthy; 0 = off */
};

/* Requests the server answered, for /metrics; filled in by the server itself. */
struct pp_health_http_stats {
	uint64_t by_status[6]; /* 200, 400, 404, 405, 431, 503 */
	uint64_t timeouts;     /* connections closed at their deadline */
	uint64_t shed;	       /* connections closed to make room past the cap */
};

/*
 * What the run loop knows, copied once per tick. Times are CLOCK_MONOTONIC nanoseconds.
 * Counters are totals since start.
 */
/* Room for the sources of frame names (the session has fewer). */
#define PP_HEALTH_NAME_SOURCES 8
/* Room for the results of data-type resolution (typed, waiting, and the reasons). */
#define PP_HEALTH_DATA_TYPE_RESULTS 16

struct pp_health_snapshot {
	uint64_t updated_ns;  /* the tick that took this copy; 0 = none yet (starting) */
	uint64_t progress_ns; /* the last tick at which the kernel side made progress */
	int stopping;	      /* shutting down */
	/* Sampling. */
	uint64_t samples;	     /* samples added to profiles */
	uint64_t samples_late;	     /* ... into a window that started after they were taken */
	uint64_t samples_unreadable; /* ... of processes whose maps or binaries could not be read */
	/* Share (percent) of the last window's samples whose process's maps or binary could not be
	 * read; at PP_HEALTH_UNREADABLE_PCT or more, /healthz says "degraded" (still 200). */
	uint32_t unreadable_pct;
	uint64_t shim[PP_CNT__MAX];
	struct pp_decode_stats decode;
	uint64_t samples_no_process; /* kept, without process metadata */
	/* taken in an image an exec replaced before they were read: kept, or no longer */
	uint64_t samples_of_replaced_images, samples_of_images_not_kept;
	/* stack copies (pp_session_stats): walked whole, short by why, left as the shim's */
	uint64_t copies_whole, copies_short_copy_ended, copies_short_no_cfi, copies_short_other;
	uint64_t copies_no_tables, copies_refused;
	uint64_t copies_of_replaced_images; /* ... of which an image replaced by exec since */
	uint64_t add_errors;		    /* samples the profile refused (memory) */
	uint64_t frames, frames_unmapped, frames_no_symbol, frames_no_file;
	uint64_t frames_not_code; /* user walks ended at a return address outside code */
	/* Locations named, by source ("symtab", "perf_map", ...: names[i] says), and unnamed. */
	uint64_t frames_named[PP_HEALTH_NAME_SOURCES];
	const char *frames_named_source[PP_HEALTH_NAME_SOURCES]; /* NULL: unused slot */
	uint64_t frames_unnamed;
	/*
	 * Memory samples with an exact IP by what naming their data type gave ("typed",
	 * "waiting", or why not: data_types_result[i] says); none set: not a memory event.
	 */
	uint64_t data_types[PP_HEALTH_DATA_TYPE_RESULTS];
	const char *data_types_result[PP_HEALTH_DATA_TYPE_RESULTS]; /* NULL: unused slot */
	uint64_t perf_map_refused, perf_map_bad_lines; /* hostile or broken JIT perf maps */
	/* unwind tables (--user-unwind auto, dwarf); unwind_rows_total 0: not in use */
	uint64_t unwind_tables_built, unwind_tables_shared, unwind_tables_none;
	uint64_t unwind_tables_evicted, unwind_tables_no_room, unwind_tables_too_big;
	uint64_t unwind_rows_used, unwind_rows_total, unwind_rules_used, unwind_procs_live;
	uint64_t unwind_procs_no_room; /* lists the shim's entry array had no room for */
	uint64_t unwind_tables_rebuilt, unwind_maps_reads, unwind_procs_from_events;
	/* partial tables (unwinder.h): started, compiled whole since, FDEs found, runs written */
	uint64_t unwind_partial_tables, unwind_partial_promoted, unwind_partial_fdes;
	uint64_t unwind_partial_writes;
	/* the on-disk table cache; unwind_cache_on 0: none (not exported) */
	uint64_t unwind_cache_on, unwind_tables_from_cache, unwind_cache_stored;
	uint64_t unwind_cache_refused, unwind_cache_trimmed, unwind_cache_failed,
	    unwind_cache_bytes;
	/* processes: images from the side-band, /proc reads, side-band records and losses */
	uint64_t process_images_reported, process_reads, process_map_rereads;
	uint64_t sideband_records, sideband_lost;
	int64_t process_cache_entries; /* -1 = unknown: not exported */
	int64_t symbol_cache_files;    /* -1 = unknown: not exported */
	/* bytes held by each cache now (the session's pp_session_stats gauges) */
	uint64_t process_cache_bytes, symbol_cache_bytes, frame_cache_bytes, raw_stack_bytes;
	uint64_t mem_obj_cache_bytes;
	uint64_t symbol_evictions, symbol_too_big;
	/* the symbol table cache on disk; symbol_store_on 0: none (not exported) */
	uint64_t symbol_store_on, symbol_store_hits, symbol_store_stored, symbol_store_unsettled;
	uint64_t symbol_store_refused, symbol_store_trimmed, symbol_store_failed,
	    symbol_store_bytes;
	/* Files refused for symbols: claiming bytes a sparse file lacks, a path leading to
	 * another file than the one mapped, unreachable; tables refused for unwinding. */
	uint64_t symbol_refused_sparse, symbol_not_mapped_file, symbol_unreachable;
	uint64_t unwind_tables_refused;
	uint64_t frames_awaited, frames_awaited_finished; /* made while their file was read */
	uint64_t
	    symbol_tables_at_once; /* mappings named by a table known by their file's identity */
	uint64_t names_memoized;   /* frames named again from the name found before */
	uint64_t strings_cleaned;  /* strings that were not clean text, summed per window */
	/* Windows and export. */
	uint64_t windows_closed;	  /* windows ended at an interval boundary */
	uint64_t windows_exported;	  /* non-empty windows handed to the exporter */
	uint64_t export_failures;	  /* exports that failed (see "export" above) */
	uint32_t failures_in_a_row;	  /* of those, since the last success */
	uint64_t export_failing_since_ns; /* 0 = not failing */
	int has_transport;		  /* uploads over HTTP: the fields below are valid */
	struct pp_transport_stats transport;
	uint64_t split_resent, split_dropped; /* too large for the server (413, 400) */
	/* Cut before sending for the backend's limits (pebsprof/split.h). */
	uint64_t profiles_cut, requests_cut, requests_packed, samples_oversize;
	uint64_t label_names_dropped; /* left out for Pyroscope's 30 names, summed per window */
	struct pp_health_http_stats http;
	/* the agent's CPU time by thread, read as /metrics is asked (none: not shown) */
	struct pp_self_cpu cpu;
};

enum pp_health_status {
	PP_HEALTH_OK = 0,
	PP_HEALTH_STARTING,
	PP_HEALTH_STOPPING,
	PP_HEALTH_LOOP_STALLED,
	PP_HEALTH_NO_SAMPLES,
	PP_HEALTH_EXPORT_FAILED_WINDOWS,
	PP_HEALTH_EXPORT_FAILING,
	PP_HEALTH_EXPORT_BEHIND,
};

/*
 * Applies the rules above at now_ns. Writes "ok" or the reason (one line, no newline) to
 * reason when it is not NULL.
 */
enum pp_health_status pp_health_check(const struct pp_health_snapshot *s,
				      const struct pp_health_limits *l, uint64_t now_ns,
				      char *reason, size_t reason_len);

/*
 * The /metrics text for s at now_ns, in exposition format 0.0.4. *out is malloc'ed (the
 * caller frees it). Returns 0 or -ENOMEM.
 */
int pp_metrics_render(const struct pp_health_snapshot *s, const struct pp_health_limits *l,
		      uint64_t now_ns, char **out, size_t *len);

/*
 * The whole HTTP response to a request whose parse gave parse_ret (0: req is valid;
 * -EBADMSG: 400; any other: 431, the bound was reached), status line to body, with
 * Connection: close. *out is malloc'ed. Returns the status code, or -ENOMEM.
 */
int pp_health_response(int parse_ret, const struct pp_http_request *req,
		       const struct pp_health_snapshot *s, const struct pp_health_limits *l,
		       uint64_t now_ns, char **out, size_t *len);

/* ---- the server ---- */

/*
 * Splits ADDR:PORT (pp_listen_check syntax): host gets the address without brackets, ""
 * for every interface. Port 0 (the kernel picks one; tests) passes here, though the
 * configuration refuses it. Returns 0 or -EINVAL.
 */
int pp_listen_split(const char *addr, char *host, size_t hostlen, uint16_t *port);

struct pp_health_server;

/*
 * Binds addr (":PORT" is every interface, IPv6 and IPv4 where the kernel has IPv6) and
 * starts the server thread; until the first update /healthz says "starting". NULL with
 * errno set and a message in err on failure (bad address, port in use, no permission).
 */
struct pp_health_server *pp_health_server_new(const char *addr,
					      const struct pp_health_limits *limits, char *err,
					      size_t errlen);
/* The bound port (useful when the kernel picked it). */
uint16_t pp_health_server_port(const struct pp_health_server *s);
/* Replaces the snapshot requests are answered from; never waits on a client. */
void pp_health_server_update(struct pp_health_server *s, const struct pp_health_snapshot *snap);
/* Stops the thread, closes every connection and the socket. NULL is a no-op. */
void pp_health_server_free(struct pp_health_server *s);

/* What `pebsprof run --help` says about the endpoint. */
#define PP_HEALTH_USAGE                                                                            \
	"With --listen, GET /metrics answers Prometheus text and GET /healthz answers 200\n"       \
	"\"ok\", or 503 with the reason when: the agent is starting or stopping; the run loop\n"   \
	"or the kernel's samples made no progress for stall-timeout; the last 3 exports in a\n"    \
	"row failed (dropped after retries, refused, or not written); or uploads have failed\n"    \
	"with nothing delivered for longer than the retry budget (300 s) plus one window;\n"       \
	"or the oldest queued window has waited more than 3 windows (at least 30 s).\n"            \
	"GET /livez applies the sampling rules only (for a liveness probe).\n"

#endif /* PP_COLLECTOR_HEALTH_H */
