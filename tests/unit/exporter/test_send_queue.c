/*
 * Tests of the bounded send queue: FIFO order, drop-oldest on overflow with counters,
 * refusal of requests larger than the cap, waiting and waking, and pushes from one thread
 * while another pops.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pebsprof/send_queue.h>

#include "check.h"

static uint8_t *filled(size_t len, uint8_t v)
{
	uint8_t *b = malloc(len);

	if (b)
		memset(b, v, len);
	return b;
}

static int push_n(struct pp_send_queue *q, size_t len, uint64_t tag)
{
	struct pp_send_meta m = {.kind = PP_SEND_OTLP, .tag = tag};

	return pp_send_queue_push(q, filled(len, (uint8_t)tag), len, &m);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

TEST(fifo_order_and_meta)
{
	struct pp_send_queue *q = pp_send_queue_new(1000);
	struct pp_send_meta m = {.kind = PP_SEND_PYROSCOPE, .tag = 7, .from_s = 10, .until_s = 20};
	struct pp_send_queue_stats st;
	struct pp_send_item *it;
	const uint8_t src[3] = {1, 2, 3};

	REQUIRE(q);
	CHECK(pp_send_queue_pop(q) == NULL);
	CHECK_EQ_U64(push_n(q, 10, 1), 0);
	CHECK_EQ_U64(push_n(q, 20, 2), 0);
	CHECK_EQ_U64(pp_send_queue_push_copy(q, src, sizeof(src), &m), 0);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.items, 3);
	CHECK_EQ_U64(st.bytes, 33);
	CHECK_EQ_U64(st.pushed, 3);
	CHECK_EQ_U64(st.pushed_bytes, 33);
	CHECK_EQ_U64(st.cap_bytes, 1000);

	it = pp_send_queue_pop(q);
	REQUIRE(it);
	CHECK_EQ_U64(it->meta.tag, 1);
	CHECK_EQ_U64(it->len, 10);
	CHECK_EQ_U64(it->body[9], 1);
	pp_send_item_free(it);
	it = pp_send_queue_pop(q);
	REQUIRE(it);
	CHECK_EQ_U64(it->meta.tag, 2);
	pp_send_item_free(it);
	it = pp_send_queue_pop(q);
	REQUIRE(it);
	CHECK_EQ_U64(it->meta.tag, 7);
	CHECK(it->meta.kind == PP_SEND_PYROSCOPE);
	CHECK_EQ_U64(it->meta.from_s, 10);
	CHECK_EQ_U64(it->meta.until_s, 20);
	CHECK(it->len == 3 && memcmp(it->body, src, 3) == 0);
	CHECK(it->body != src);
	pp_send_item_free(it);
	CHECK(pp_send_queue_pop(q) == NULL);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.items, 0);
	CHECK_EQ_U64(st.bytes, 0);
	pp_send_queue_free(q);
}

TEST(overflow_drops_oldest)
{
	struct pp_send_queue *q = pp_send_queue_new(100);
	struct pp_send_queue_stats st;
	struct pp_send_item *it;

	REQUIRE(q);
	CHECK_EQ_U64(push_n(q, 40, 1), 0);
	CHECK_EQ_U64(push_n(q, 40, 2), 0);
	/* 120 > 100: the oldest (1) goes */
	CHECK_EQ_U64(push_n(q, 40, 3), 0);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.items, 2);
	CHECK_EQ_U64(st.bytes, 80);
	CHECK_EQ_U64(st.dropped_overflow, 1);
	CHECK_EQ_U64(st.dropped_overflow_bytes, 40);
	/* 90 bytes need both older ones gone */
	CHECK_EQ_U64(push_n(q, 90, 4), 0);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.items, 1);
	CHECK_EQ_U64(st.bytes, 90);
	CHECK_EQ_U64(st.dropped_overflow, 3);
	CHECK_EQ_U64(st.dropped_overflow_bytes, 120);
	CHECK_EQ_U64(st.pushed, 4);
	/* exactly the cap fits */
	CHECK_EQ_U64(push_n(q, 100, 5), 0);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.dropped_overflow, 4);
	it = pp_send_queue_pop(q);
	REQUIRE(it);
	CHECK_EQ_U64(it->meta.tag, 5);
	pp_send_item_free(it);
	CHECK(pp_send_queue_pop(q) == NULL);
	pp_send_queue_free(q);
}

TEST(too_big_and_bad_args)
{
	struct pp_send_queue *q = pp_send_queue_new(100);
	struct pp_send_meta m = {0};
	struct pp_send_queue_stats st;

	REQUIRE(q);
	CHECK_EQ_U64(push_n(q, 50, 1), 0);
	CHECK(push_n(q, 101, 2) == -E2BIG);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.rejected_too_big, 1);
	CHECK_EQ_U64(st.items, 1); /* the refused one evicted nothing */
	CHECK_EQ_U64(st.dropped_overflow, 0);
	CHECK(pp_send_queue_push(q, NULL, 5, &m) == -EINVAL);
	CHECK(pp_send_queue_push(q, filled(5, 0), 0, &m) == -EINVAL);
	CHECK(pp_send_queue_push(q, filled(5, 0), 5, NULL) == -EINVAL);
	CHECK(pp_send_queue_push(NULL, filled(5, 0), 5, &m) == -EINVAL);
	pp_send_queue_free(q); /* frees the queued request (ASan checks) */
	pp_send_queue_free(NULL);
	pp_send_item_free(NULL);

	q = pp_send_queue_new(0);
	REQUIRE(q);
	pp_send_queue_stats(q, &st);
	CHECK_EQ_U64(st.cap_bytes, PP_SEND_QUEUE_DEFAULT_BYTES);
	pp_send_queue_free(q);
}

TEST(wait_timeout_wake_and_item)
{
	struct pp_send_queue *q = pp_send_queue_new(100);
	uint64_t t0;

	REQUIRE(q);
	t0 = mono_ms();
	CHECK(pp_send_queue_wait(q, 50, true) == -ETIMEDOUT);
	CHECK(mono_ms() - t0 >= 45);
	pp_send_queue_wake(q);
	t0 = mono_ms();
	CHECK_EQ_U64(pp_send_queue_wait(q, 5000, true), 0);
	CHECK(mono_ms() - t0 < 1000);
	CHECK_EQ_U64(push_n(q, 10, 1), 0);
	CHECK_EQ_U64(pp_send_queue_wait(q, 5000, true), 0);
	/* not waiting for items: a queued one does not end the wait */
	t0 = mono_ms();
	CHECK(pp_send_queue_wait(q, 50, false) == -ETIMEDOUT);
	CHECK(mono_ms() - t0 >= 45);
	pp_send_queue_free(q);
}

struct producer {
	struct pp_send_queue *q;
	int n;
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	for (int i = 0; i < p->n; i++)
		push_n(p->q, 16, (uint64_t)i);
	return NULL;
}

TEST(concurrent_push_pop)
{
	struct producer p = {.q = pp_send_queue_new(1024), .n = 20000};
	struct pp_send_queue_stats st;
	uint64_t popped = 0, last = 0, bytes = 0;
	bool ordered = true, first = true;
	pthread_t th;

	REQUIRE(p.q);
	REQUIRE(pthread_create(&th, NULL, produce, &p) == 0);
	for (;;) {
		struct pp_send_item *it = pp_send_queue_pop(p.q);

		if (!it) {
			pp_send_queue_stats(p.q, &st);
			if (st.pushed == (uint64_t)p.n && st.items == 0)
				break;
			pp_send_queue_wait(p.q, 10, true);
			continue;
		}
		if (!first && it->meta.tag <= last)
			ordered = false;
		first = false;
		last = it->meta.tag;
		bytes += it->len;
		popped++;
		pp_send_item_free(it);
	}
	pthread_join(th, NULL);
	pp_send_queue_stats(p.q, &st);
	CHECK(ordered);
	/* every request either came out or was counted as dropped, never both */
	CHECK_EQ_U64(popped + st.dropped_overflow, (uint64_t)p.n);
	CHECK_EQ_U64(bytes + st.dropped_overflow_bytes, 16ull * p.n);
	CHECK_EQ_U64(last, (uint64_t)p.n - 1); /* the newest always survives */
	pp_send_queue_free(p.q);
}

TEST_LIST = {
    {"fifo_order_and_meta", fifo_order_and_meta},
    {"overflow_drops_oldest", overflow_drops_oldest},
    {"too_big_and_bad_args", too_big_and_bad_args},
    {"wait_timeout_wake_and_item", wait_timeout_wake_and_item},
    {"concurrent_push_pop", concurrent_push_pop},
};
TEST_MAIN()
