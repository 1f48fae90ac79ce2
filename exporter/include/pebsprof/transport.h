/*
 * HTTP transport of the exporter: sends queued requests to an OTLP/HTTP receiver (Grafana
 * Pyroscope, an OpenTelemetry Collector) or to Pyroscope's /ingest push API, with the retry
 * rules of the OTLP specification (reference/notes/reliability-k8s-deploy.md §A):
 *
 * - OTLP: POST {endpoint}/v1development/profiles, Content-Type exactly
 *   application/x-protobuf, gzip'ed body with Content-Encoding: gzip; Pyroscope:
 *   POST {endpoint}/ingest?name=<app>&from=<unix>&until=<unix>&format=pprof with the pprof
 *   bytes as queued; <app> is the request's pp_send_meta.app_name, else the configured one. Both
 * send User-Agent and the OTEL_EXPORTER_OTLP_HEADERS headers.
 * - Retried: 429, 502, 503, 504 and transport failures (refused, reset, no reply, timeout),
 *   with exponential backoff and jitter (5 s, x1.5, 30 s cap, give up past 300 s by
 *   default); Retry-After (delta-seconds or HTTP-date) lengthens the wait, never shortens it.
 * - 413, and a 400 whose body says the request is too large (the Collector's answer past its
 *   max_request_body_size, Pyroscope's past its profile limits): the request is handed back
 *   as PP_SEND_SPLIT with its body (pp_send_result.body); the caller pushes two smaller
 *   requests (pp_otlp_split_request in otlp.h makes them from an OTLP body, pp_pprof_split
 *   in writers.h from a pprof one; pp_send_split says how to halve a count).
 * - Any other 4xx/5xx (400, 401, 404, 500...) is dropped and counted; never retried.
 * - 2xx with partial_success: logged through the caller's callback and counted, never retried.
 *
 * One request is in flight at a time, in queue order. pp_transport_poll() attempts what is
 * due and returns while a request waits out its backoff, so the caller's thread never
 * sleeps in here; the daemon may call it from its own loop or from a sender thread that
 * sleeps in pp_transport_wait(). Time comes from a clock the caller may replace (tests).
 * pp_transport_push() and pp_transport_stats() may be called from any thread; the other
 * functions from the one thread that polls. Nothing here writes to stdout or stderr.
 */
#ifndef PEBSPROF_TRANSPORT_H
#define PEBSPROF_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pebsprof/send_queue.h>

#define PP_TRANSPORT_OTLP_PATH "/v1development/profiles"
#define PP_TRANSPORT_PYROSCOPE_PATH "/ingest"
/* The OTLP limits: requests over 64 MiB uncompressed are not sent; responses over 4 MiB
 * are not read. */
#define PP_TRANSPORT_MAX_REQUEST_BYTES (64u << 20)
#define PP_TRANSPORT_MAX_RESPONSE_BYTES (4u << 20)
/* Bound on OTEL_EXPORTER_OTLP_HEADERS pairs. */
#define PP_TRANSPORT_MAX_HEADERS 64

/* ---- OTEL_EXPORTER_OTLP_HEADERS ---- */

struct pp_http_header {
	const char *name;
	const char *value;
};

/*
 * Parses OTEL_EXPORTER_OTLP_HEADERS ("k=v,k2=v2", W3C baggage style): names and values are
 * percent-decoded and trimmed of spaces and tabs; blank pairs are skipped; a name given
 * twice (case-insensitively) keeps its last value. Names must be HTTP tokens; values must
 * hold no control characters after decoding (no header injection); Content-Type,
 * Content-Encoding, Content-Length, Transfer-Encoding, Host, Expect and Connection are the
 * exporter's and refused. On success *out (free with pp_otlp_free_headers) holds *n headers,
 * NULL when 0. On a bad pair returns -EINVAL (-E2BIG past PP_TRANSPORT_MAX_HEADERS) and
 * writes to err a message naming the pair by number and key; values are never copied into
 * it, since they are often credentials.
 */
int pp_otlp_parse_headers(const char *buf, size_t len, struct pp_http_header **out, uint32_t *n,
			  char *err, size_t errlen);
void pp_otlp_free_headers(struct pp_http_header *headers);

/* ---- endpoint ---- */

enum pp_transport_protocol {
	PP_TRANSPORT_OTLP_HTTP = 0,	   /* POST {endpoint}/v1development/profiles */
	PP_TRANSPORT_PYROSCOPE_INGEST = 1, /* POST {endpoint}/ingest?... with pprof bytes */
};

/*
 * Checks an endpoint URL: scheme http or https, a host, no fragment, and (unless verbatim)
 * no query, since a path is appended. Returns 0 or -EINVAL with a message in err.
 */
int pp_transport_check_endpoint(const char *url, bool verbatim, char *err, size_t errlen);

/* ---- the transport ---- */

enum pp_send_outcome {
	PP_SEND_DELIVERED = 0,	  /* 2xx; partial_success, if any, is in rejected/counters */
	PP_SEND_SPLIT,		  /* too large: push the request's profiles again in two halves */
	PP_SEND_DROPPED_4XX,	  /* a non-retryable 4xx: the server refuses the data */
	PP_SEND_DROPPED_5XX,	  /* a non-retryable 5xx (500, 501...) */
	PP_SEND_GAVE_UP,	  /* retryable failures until max_elapsed_ms passed */
	PP_SEND_DROPPED_OTHER,	  /* 1xx/3xx, local failure, response too large, bad URL */
	PP_SEND_DROPPED_SHUTDOWN, /* unsent when pp_transport_flush ran */
};

const char *pp_send_outcome_name(enum pp_send_outcome o);

/* How one request ended, given to the caller's on_result callback. */
struct pp_send_result {
	uint64_t tag; /* pp_send_meta.tag */
	enum pp_send_kind kind;
	enum pp_send_outcome outcome;
	long http_status;  /* last HTTP status; 0 = no response */
	uint32_t attempts; /* HTTP attempts made */
	int64_t rejected;  /* partial_success.rejected_profiles (DELIVERED only) */
	size_t len;	   /* queued (uncompressed) body bytes */
	/* The request's description as pushed; valid during on_result only. */
	const struct pp_send_meta *meta;
	/*
	 * PP_SEND_SPLIT only (NULL otherwise): the queued body, len bytes as pushed (OTLP:
	 * uncompressed), handed back so it can be split and pushed again. Ownership passes to
	 * on_result, which must free it or keep it; without on_result it is freed here.
	 */
	uint8_t *body;
};

enum pp_transport_log_level {
	PP_TRANSPORT_LOG_DEBUG = 0,
	PP_TRANSPORT_LOG_INFO,
	PP_TRANSPORT_LOG_WARN,
	PP_TRANSPORT_LOG_ERROR,
};

struct pp_transport_config {
	enum pp_transport_protocol protocol;
	/* Base URL (http://host:4318); the path is appended. Verbatim: used as is (the
	 * OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT form; OTLP only). */
	const char *endpoint;
	bool endpoint_verbatim;
	const char *headers;	/* OTEL_EXPORTER_OTLP_HEADERS text; NULL = none */
	const char *user_agent; /* "pebsprof/<version>"; a User-Agent in headers wins */
	const char *app_name;	/* Pyroscope name= (the service name, may hold {k=v}) */
	bool gzip;		/* OTLP body gzip'ed (default true) */

	uint32_t timeout_ms;	     /* whole attempt (default 10000) */
	uint32_t backoff_initial_ms; /* first retry delay (default 5000) */
	double backoff_multiplier;   /* default 1.5 */
	uint32_t backoff_max_ms;     /* cap on one delay before jitter (default 30000) */
	uint32_t max_elapsed_ms;     /* give up when the next try would pass this since the
				      * first (default 300000; 0 = never) */
	double jitter;		     /* each delay is scaled by 1 +- jitter (default 0.5) */
	uint64_t seed;		     /* jitter random seed; 0 = from time and pid */

	size_t queue_bytes;	  /* send queue byte cap (default 64 MiB) */
	size_t max_request_bytes; /* larger pushes refused with -EMSGSIZE (default 64 MiB) */

	/* Monotonic milliseconds; NULL = CLOCK_MONOTONIC. Tests inject their own. */
	uint64_t (*clock_ms)(void *ctx);
	void *clock_ctx;
	/* Diagnostics (drops, partial success, retries); NULL = silent. */
	void (*log)(void *ctx, enum pp_transport_log_level level, const char *msg);
	void *log_ctx;
	/* Called once per request when it is resolved, from the polling thread; it owns
	 * res->body (PP_SEND_SPLIT). */
	void (*on_result)(void *ctx, const struct pp_send_result *res);
	void *result_ctx;
};

struct pp_transport_stats {
	uint64_t attempts;	   /* HTTP requests started */
	uint64_t sent;		   /* requests delivered (2xx) */
	uint64_t sent_bytes;	   /* their bytes on the wire (compressed) */
	uint64_t sent_raw_bytes;   /* their queued (uncompressed) bytes */
	uint64_t retried;	   /* retries scheduled */
	uint64_t transport_errors; /* attempts without an HTTP response */
	uint64_t dropped_4xx;
	uint64_t dropped_5xx;
	uint64_t dropped_give_up;
	uint64_t dropped_other;
	uint64_t dropped_shutdown;
	uint64_t dropped_too_big; /* pushes over max_request_bytes, refused */
	uint64_t dropped_bytes;	  /* queued bytes of every request dropped here */
	uint64_t split_needed;	  /* too-large answers (413, 400) handed back */
	uint64_t partial_success; /* 2xx responses carrying partial_success */
	uint64_t rejected_profiles;
	long last_status;
	/* How long the oldest request not yet resolved (in hand or queued) has waited since
	 * it was first queued; 0 when none waits. */
	uint64_t oldest_queued_age_ms;
	struct pp_send_queue_stats queue; /* includes the overflow drops */
};

/* Fills cfg with the defaults above (protocol OTLP, no endpoint). */
void pp_transport_config_init(struct pp_transport_config *cfg);

/*
 * Checks cfg (endpoint, headers, numbers) and opens the libcurl handle. Returns NULL with
 * errno set (EINVAL: bad config, described in err; ENOMEM) on failure.
 */
struct pp_transport *pp_transport_new(const struct pp_transport_config *cfg, char *err,
				      size_t errlen);
/* Frees the transport, its queue and any request held; no result callbacks. NULL: no-op. */
void pp_transport_free(struct pp_transport *t);

/*
 * Queues a request; takes ownership of body (malloc'ed) whatever the result. Never waits on
 * the network; may drop the oldest queued requests (counted in stats.queue). Returns 0,
 * -EINVAL, -EMSGSIZE (over max_request_bytes: split it first), -E2BIG (over the queue
 * cap), -ENOMEM. Thread-safe.
 */
int pp_transport_push(struct pp_transport *t, uint8_t *body, size_t len,
		      const struct pp_send_meta *meta);

/*
 * Attempts every request that is due, in order, until the queue is empty or the request in
 * hand waits for a retry. *next_due_ms (optional) gets the clock time of the next attempt,
 * or UINT64_MAX when nothing is pending. Each attempt blocks up to timeout_ms; no backoff
 * delay is ever slept here. Returns the number of requests resolved (>= 0).
 */
int pp_transport_poll(struct pp_transport *t, uint64_t *next_due_ms);

/*
 * For a sender thread: sleeps up to timeout_ms, returning early when a request is pushed
 * (unless one already waits for its retry) or on pp_transport_wake. Returns 0 or -ETIMEDOUT.
 */
int pp_transport_wait(struct pp_transport *t, uint64_t timeout_ms);
void pp_transport_wake(struct pp_transport *t);

/*
 * Shutdown: one attempt for each request left, the one in hand first, without backoff;
 * what is not delivered is dropped (PP_SEND_SPLIT still reported) and counted. Returns the
 * number of requests resolved.
 */
int pp_transport_flush(struct pp_transport *t);

void pp_transport_stats(struct pp_transport *t, struct pp_transport_stats *out);

/*
 * The delay before retry number `retry` (0-based) before any Retry-After: initial *
 * multiplier^retry capped at backoff_max_ms, scaled by 1 + jitter * (2u - 1), u in [0, 1).
 */
uint64_t pp_transport_backoff_ms(const struct pp_transport_config *cfg, uint32_t retry, double u);

/*
 * Parses a Retry-After value: delta-seconds, or an HTTP-date taken relative to now_unix.
 * Returns the delay in ms (0 for a date in the past) or -1 when unparsable.
 */
int64_t pp_transport_parse_retry_after(const char *value, int64_t now_unix);

/*
 * What to do with a request of n units (profiles, processes) that got PP_SEND_SPLIT or
 * -EMSGSIZE: n >= 2 gives 0 and the sizes of the two halves; n <= 1 cannot be split
 * further: -E2BIG, drop it.
 */
int pp_send_split(size_t n, size_t *first, size_t *second);

#endif /* PEBSPROF_TRANSPORT_H */
