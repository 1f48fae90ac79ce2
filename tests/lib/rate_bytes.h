/*
 * What Grafana Pyroscope's rate limiter counts of one OTLP request (pkg/distributor/
 * distributor.go `rateLimit`): each resource's profile converted to its own pprof, summed.
 * For the splitter's tests and the fleet simulation, which both measure requests by it.
 */
#ifndef PP_TEST_RATE_BYTES_H
#define PP_TEST_RATE_BYTES_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

/* The bytes a request holding part counts: 0 and *out, or -ENOMEM. */
static inline int pp_test_request_rate_bytes(const struct pp_profile *part, uint64_t *out)
{
	size_t n = pp_profile_sample_count(part), m;
	size_t *idx = calloc(n + 1, sizeof(*idx));
	bool *done = calloc(n + 1, sizeof(*done));
	int err = idx && done ? 0 : -ENOMEM;

	*out = 0;
	for (size_t i = 0; !err && i < n; i++) {
		const struct pp_sample_info *a = pp_profile_get_sample(part, i);
		struct pp_profile *sub;
		uint8_t *body = NULL;
		size_t len = 0;

		if (done[i])
			continue;
		/* a resource: a container's, or one process outside containers */
		m = 0;
		for (size_t j = i; j < n; j++) {
			const struct pp_sample_info *b = pp_profile_get_sample(part, j);

			if (!done[j] && b->resource_id == a->resource_id &&
			    (a->resource_id || b->pid == a->pid)) {
				done[j] = true;
				idx[m++] = j;
			}
		}
		sub = pp_profile_subset_new(part, idx, m);
		err = sub ? pp_pprof_encode(sub, &body, &len) : -ENOMEM;
		*out += len;
		free(body);
		pp_profile_free(sub);
	}
	free(idx);
	free(done);
	return err;
}

#endif /* PP_TEST_RATE_BYTES_H */
