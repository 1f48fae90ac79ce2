/*
 * The bounded queue between aggregation and the HTTP transport. Aggregation pushes encoded
 * requests and never waits on the network: when the queued bytes would pass the cap, the
 * oldest requests are dropped (profiles are lossy telemetry and the freshest data is worth
 * most) and counted. The sender pops from the other end. All functions are thread-safe, so
 * the sender may run in its own thread.
 */
#ifndef PEBSPROF_SEND_QUEUE_H
#define PEBSPROF_SEND_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default byte cap: the OTLP request size limit, 64 MiB. */
#define PP_SEND_QUEUE_DEFAULT_BYTES (64u << 20)

/* Longest Pyroscope application name a request carries (its service name). */
#define PP_SEND_APP_NAME_MAX 256

/* What a queued request is. */
enum pp_send_kind {
	PP_SEND_OTLP = 0,      /* an uncompressed ExportProfilesServiceRequest */
	PP_SEND_PYROSCOPE = 1, /* a pprof profile (gzip'ed or not) for Pyroscope's /ingest */
};

/* Describes a request besides its body. */
struct pp_send_meta {
	enum pp_send_kind kind;
	/* The caller's handle, given back in results: which profiles the request holds, so a
	 * request the server found too large (413) can be rebuilt in halves. */
	uint64_t tag;
	/* Pyroscope only: the profile's window in unix seconds (from=, until=). */
	int64_t from_s, until_s;
	/* Pyroscope only: the application (service) name= of this request; "" = the
	 * transport's configured one. */
	char app_name[PP_SEND_APP_NAME_MAX];
	/* When the request was first queued, on the transport's clock (ms); set by
	 * pp_transport_push when 0, and kept by the halves of a split request. */
	uint64_t queued_ms;
};

/* One queued request; the queue owns it until popped, then the popper frees it. */
struct pp_send_item {
	struct pp_send_item *next;
	struct pp_send_meta meta;
	uint8_t *body;
	size_t len;
};

struct pp_send_queue_stats {
	uint64_t pushed;	   /* requests accepted */
	uint64_t pushed_bytes;	   /* their body bytes */
	uint64_t dropped_overflow; /* oldest requests dropped to make room */
	uint64_t dropped_overflow_bytes;
	uint64_t rejected_too_big; /* requests larger than the cap itself, refused */
	uint64_t items;		   /* requests queued now */
	uint64_t bytes;		   /* body bytes queued now */
	uint64_t cap_bytes;
	uint64_t oldest_queued_ms; /* meta.queued_ms of the oldest request queued; 0 = none */
};

struct pp_send_queue;

/* cap_bytes 0 = PP_SEND_QUEUE_DEFAULT_BYTES. NULL with errno set on failure. */
struct pp_send_queue *pp_send_queue_new(size_t cap_bytes);
/* Frees the queue and every request still in it. NULL is a no-op. */
void pp_send_queue_free(struct pp_send_queue *q);

/*
 * Queues body (len bytes, malloc'ed) and takes ownership of it whatever the result: on error
 * it is freed. Drops the oldest requests until the new one fits. Returns 0, -EINVAL (NULL
 * body or meta, len 0), -E2BIG (len over the cap: refused and counted), -ENOMEM.
 */
int pp_send_queue_push(struct pp_send_queue *q, uint8_t *body, size_t len,
		       const struct pp_send_meta *meta);
/* A copy of body is queued; body stays the caller's. Same results as pp_send_queue_push. */
int pp_send_queue_push_copy(struct pp_send_queue *q, const uint8_t *body, size_t len,
			    const struct pp_send_meta *meta);

/* The oldest request, removed from the queue, or NULL when empty. Free with _item_free. */
struct pp_send_item *pp_send_queue_pop(struct pp_send_queue *q);
void pp_send_item_free(struct pp_send_item *it);

/*
 * Waits until pp_send_queue_wake was called, timeout_ms passed, or (for_item) the queue is
 * non-empty: a sender thread sleeps here between polls, with for_item false while a request
 * it holds waits out its backoff. Returns 0 when woken or non-empty, -ETIMEDOUT.
 */
int pp_send_queue_wait(struct pp_send_queue *q, uint64_t timeout_ms, bool for_item);
void pp_send_queue_wake(struct pp_send_queue *q);

void pp_send_queue_stats(struct pp_send_queue *q, struct pp_send_queue_stats *out);

#endif /* PEBSPROF_SEND_QUEUE_H */
