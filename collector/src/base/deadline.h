/*
 * A clock's now in nanoseconds, and an absolute time timeout_ms from now on a clock for
 * pthread_cond_timedwait: what the collector's threads (sampling loop, unwinder, symbol
 * loader, debuginfod, pod metadata, health) each read.
 */
#ifndef PP_COLLECTOR_DEADLINE_H
#define PP_COLLECTOR_DEADLINE_H

#include <stdint.h>
#include <time.h>

/* clock's now, in ns */
static inline uint64_t pp_clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* clock's now plus timeout_ms; a year at most, so that "forever" cannot overflow. */
static inline struct timespec pp_deadline_after_ms(clockid_t clock, uint64_t timeout_ms)
{
	struct timespec ts;

	if (timeout_ms > (uint64_t)365 * 86400 * 1000)
		timeout_ms = (uint64_t)365 * 86400 * 1000;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif /* PP_COLLECTOR_DEADLINE_H */
