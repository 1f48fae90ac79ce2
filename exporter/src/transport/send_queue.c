/*
 * The bounded, drop-oldest request queue between aggregation and the transport (see
 * pebsprof/send_queue.h). A mutex-protected singly linked FIFO with a byte count.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pebsprof/send_queue.h>

struct pp_send_queue {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* signalled on push and wake */
	struct pp_send_item *head, *tail;
	bool woken;
	size_t cap;
	struct pp_send_queue_stats st;
};

struct pp_send_queue *pp_send_queue_new(size_t cap_bytes)
{
	struct pp_send_queue *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;

	if (!q)
		return NULL;
	pthread_mutex_init(&q->lock, NULL);
	/* Monotonic, so a wall-clock step does not stretch or cut a sender's sleep. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	q->cap = cap_bytes ? cap_bytes : PP_SEND_QUEUE_DEFAULT_BYTES;
	q->st.cap_bytes = q->cap;
	return q;
}

void pp_send_item_free(struct pp_send_item *it)
{
	if (!it)
		return;
	free(it->body);
	free(it);
}

void pp_send_queue_free(struct pp_send_queue *q)
{
	struct pp_send_item *it, *next;

	if (!q)
		return;
	for (it = q->head; it; it = next) {
		next = it->next;
		pp_send_item_free(it);
	}
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* Unlinks the head; the lock is held. */
static struct pp_send_item *unlink_head(struct pp_send_queue *q)
{
	struct pp_send_item *it = q->head;

	if (!it)
		return NULL;
	q->head = it->next;
	if (!q->head)
		q->tail = NULL;
	it->next = NULL;
	q->st.items--;
	q->st.bytes -= it->len;
	return it;
}

int pp_send_queue_push(struct pp_send_queue *q, uint8_t *body, size_t len,
		       const struct pp_send_meta *meta)
{
	struct pp_send_item *it, *dropped = NULL;

	if (!q || !body || !len || !meta) {
		free(body);
		return -EINVAL;
	}
	if (len > q->cap) {
		pthread_mutex_lock(&q->lock);
		q->st.rejected_too_big++;
		pthread_mutex_unlock(&q->lock);
		free(body);
		return -E2BIG;
	}
	it = calloc(1, sizeof(*it));
	if (!it) {
		free(body);
		return -ENOMEM;
	}
	it->meta = *meta;
	it->body = body;
	it->len = len;

	pthread_mutex_lock(&q->lock);
	while (q->st.bytes + len > q->cap) {
		struct pp_send_item *old = unlink_head(q);

		q->st.dropped_overflow++;
		q->st.dropped_overflow_bytes += old->len;
		/* Freed outside the lock: a large free should not hold up the sender. */
		old->next = dropped;
		dropped = old;
	}
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->st.items++;
	q->st.bytes += len;
	q->st.pushed++;
	q->st.pushed_bytes += len;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);

	while (dropped) {
		struct pp_send_item *next = dropped->next;

		pp_send_item_free(dropped);
		dropped = next;
	}
	return 0;
}

int pp_send_queue_push_copy(struct pp_send_queue *q, const uint8_t *body, size_t len,
			    const struct pp_send_meta *meta)
{
	uint8_t *copy;

	if (!q || !body || !len || !meta)
		return -EINVAL;
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, body, len);
	return pp_send_queue_push(q, copy, len, meta);
}

struct pp_send_item *pp_send_queue_pop(struct pp_send_queue *q)
{
	struct pp_send_item *it;

	if (!q)
		return NULL;
	pthread_mutex_lock(&q->lock);
	it = unlink_head(q);
	pthread_mutex_unlock(&q->lock);
	return it;
}

int pp_send_queue_wait(struct pp_send_queue *q, uint64_t timeout_ms, bool for_item)
{
	struct timespec dl;
	int ret = 0;

	if (!q)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	if (timeout_ms > (uint64_t)365 * 86400 * 1000)
		timeout_ms = (uint64_t)365 * 86400 * 1000;
	dl.tv_sec += (time_t)(timeout_ms / 1000);
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&q->lock);
	while (!(for_item && q->head) && !q->woken) {
		if (pthread_cond_timedwait(&q->cond, &q->lock, &dl) == ETIMEDOUT) {
			ret = (for_item && q->head) || q->woken ? 0 : -ETIMEDOUT;
			break;
		}
	}
	q->woken = false;
	pthread_mutex_unlock(&q->lock);
	return ret;
}

void pp_send_queue_wake(struct pp_send_queue *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->woken = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void pp_send_queue_stats(struct pp_send_queue *q, struct pp_send_queue_stats *out)
{
	if (!q || !out)
		return;
	pthread_mutex_lock(&q->lock);
	*out = q->st;
	out->oldest_queued_ms = q->head ? q->head->meta.queued_ms : 0;
	pthread_mutex_unlock(&q->lock);
}
