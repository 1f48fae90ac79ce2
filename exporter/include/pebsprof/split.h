/*
 * Cuts a window's profile into parts a backend accepts, before anything is sent. Pyroscope
 * rejects a profile of more than 16,000 samples or 4 MiB (measured as pprof) whole
 * (pkg/validation/validate.go, ValidateProfile), and on v1.21 the rest of its request with
 * it; the profiles it measures are one per resource over OTLP and one per request over the
 * push, whose name= is one service. So:
 *
 * - PP_SPLIT_BY_RESOURCE (OTLP): samples are grouped as the OTLP encoder groups them into
 *   ResourceProfiles (one per container resource, one per process outside containers); a
 *   group over a limit is cut into pieces, and part k holds piece k of every group, so no
 *   profile of any part is over a limit and a window that fits stays one part.
 * - PP_SPLIT_BY_SERVICE (push): samples are grouped by service (below); each piece of each
 *   group is a part of its own, with its service's name.
 *
 * The service of a sample, as a name Pyroscope accepts (pyroscope.h): its resource's
 * service.name, else the configured one, else kernel/threads or kernel/idle for what has
 * no program, else its executable name (what the OTLP encoder writes as service.name), else
 * "unknown_service". Samples whose names map to one are one group.
 * Pieces keep the samples' order. The request-size limit of a Collector (20 MiB) is not
 * applied here: the OTLP bytes are measured after encoding (pp_otlp_split_request).
 *
 * Pyroscope's rate limiter counts a whole request, the sum of its profiles as pprof
 * (pkg/distributor/distributor.go `rateLimit`), against the tenant's burst
 * (distributor.ingestion-burst-size-mb, 2 MiB by default): a request over it is refused
 * whatever the rate, every time. So with max_request_bytes, a piece is within it too, and
 * over OTLP the pieces are packed into parts whose bounds sum within it (part k then holds
 * pieces k of several resources, in order, and the next part the rest).
 */
#ifndef PEBSPROF_SPLIT_H
#define PEBSPROF_SPLIT_H

#include <stddef.h>

#include <pebsprof/profile.h>

/*
 * Pyroscope's defaults: validation.max-profile-stacktrace-samples, max-profile-size-bytes,
 * distributor.ingestion-burst-size-mb.
 */
#define PP_PYROSCOPE_MAX_SAMPLES 16000
#define PP_PYROSCOPE_MAX_PROFILE_BYTES (4u << 20)
#define PP_PYROSCOPE_BURST_BYTES (2u << 20)

/*
 * What of a burst a request's profiles may take: the rate limiter counts the series' label
 * names and values too (a few hundred bytes a series), left a sixteenth of it.
 */
static inline size_t pp_split_burst_budget(size_t burst_bytes)
{
	return burst_bytes - burst_bytes / 16;
}

enum pp_split_by {
	PP_SPLIT_BY_RESOURCE = 0,
	PP_SPLIT_BY_SERVICE = 1,
};

struct pp_split_limits {
	size_t max_samples;	  /* samples per profile; 0 = no limit */
	size_t max_profile_bytes; /* bytes per profile as pprof; 0 = no limit */
	size_t max_request_bytes; /* bytes of a part's profiles as pprof, summed; 0 = no limit */
};

struct pp_split_part {
	/* The input itself (when it fits whole) or a part of it owned by the split. */
	const struct pp_profile *profile;
	/* PP_SPLIT_BY_SERVICE: the service every sample of the part belongs to, valid until
	 * pp_split_fini: a name Pyroscope accepts (pyroscope.h). */
	const char *service;
};

struct pp_split {
	struct pp_split_part *parts;
	size_t nparts;
	size_t groups;	 /* the profiles the backend sees in the whole window */
	size_t cut;	 /* groups cut into pieces for a limit */
	size_t oversize; /* single samples over the byte limits, which no cut helps: sent */
	size_t packed;	 /* parts more than the cuts made, to keep within max_request_bytes */
	/* owned parts, freed by pp_split_fini */
	struct pp_profile **owned;
	size_t nowned;
	char **names; /* the parts' service names */
	size_t nnames;
};

/*
 * Fills *out with the parts of p. service is the configured service name (NULL or "" =
 * none). A profile without samples gives no parts. Returns 0, -EINVAL, -ENOMEM; on error
 * *out holds nothing to free.
 */
int pp_split_profile(const struct pp_profile *p, enum pp_split_by by, const char *service,
		     const struct pp_split_limits *lim, struct pp_split *out);
void pp_split_fini(struct pp_split *s);

/*
 * The service of sample s of p, as above: written into buf (size at least 16) or a constant;
 * never NULL.
 */
const char *pp_split_service_of(const struct pp_profile *p, const struct pp_sample_info *s,
				const char *service, char *buf, size_t size);

#endif /* PEBSPROF_SPLIT_H */
