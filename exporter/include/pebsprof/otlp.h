/*
 * OTLP profiles encoder: turns profiles of the exporter's model into one
 * opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
 * (opentelemetry-proto v1.11.0, wire-equal to v1.10), and parses OTEL_RESOURCE_ATTRIBUTES.
 *
 * What the request holds (the rules of reference/notes/otlp.md §8):
 * - one ProfilesDictionary shared by the whole request; strings, mappings, locations,
 *   functions, stacks and attributes are deduplicated across all profiles and processes,
 *   and index 0 of every table is the zero value (string_table[0] == "", link_table[0] has
 *   16 + 8 zero bytes);
 * - one ResourceProfiles per process (pid and executable name), with one ScopeProfiles
 *   (scope "pebsprof") holding one Profile per input profile that has samples of that
 *   process. Resource attributes are inline (key + string_value/int_value), never the
 *   *_strindex forms: service.name, host.name, k8s.node.name (when set), process.pid,
 *   process.executable.name, then the extra attributes;
 * - sample_type (samples, count); period_type (desc.value_type, desc.value_unit), i.e.
 *   (cpu, nanoseconds) for cpu-clock and (<event>, count) for hardware events, which
 *   Pyroscope names the profile after; period = desc.period; time_unix_nano and
 *   duration_nano from the profile's window;
 * - off-CPU samples (pp_sample_info.wait) are not the event's: a process with them gets a
 *   second Profile, sample_type (off_cpu, nanoseconds) with no period_type and period 0 (what
 *   Pyroscope names off_cpu, as the OTel eBPF profiler sends it), values the nanoseconds
 *   waited, each sample with the attribute off_cpu.state;
 * - each Sample has exactly one value (the aggregated sample count) and, when the sample's
 *   first time is known and inside the window, one timestamp (that first time);
 * - sample attributes thread.id, thread.name and the sample's labels (keys unique: a label
 *   whose key repeats an earlier one is left out), and cpu.logical_number when the sample
 *   keeps its CPU (pp_sample_info.has_cpu);
 * - locations carry profile.frame.type "native" or "kernel" (data frames carry none);
 *   Location.address is the model's address (the ELF virtual address for native frames);
 *   mappings carry process.executable.build_id.gnu when the build id is known;
 *   Mapping.memory_start/limit/file_offset are the runtime values the model keeps;
 * - a location gets one Line naming its function, except a native frame whose name is a
 *   "[...]" placeholder in a mapping with a build id: that one is left without lines so
 *   the backend can symbolize it from the build id (Pyroscope does so only then).
 *
 * All functions return 0 or a negative errno and never log.
 */
#ifndef PEBSPROF_OTLP_H
#define PEBSPROF_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include <pebsprof/profile.h>

/* Bound on OTEL_RESOURCE_ATTRIBUTES pairs (Pyroscope keeps at most 30 labels per series). */
#define PP_OTLP_MAX_RESOURCE_ATTRS 64

/* Describes the resource every process's attributes start from. All fields optional. */
struct pp_otlp_resource {
	/* service.name; NULL or "" = from extra_attrs, else the process's executable name,
	 * else "unknown_service" */
	const char *service_name;
	const char *host_name;	   /* host.name; NULL or "" = left out */
	const char *node_name;	   /* k8s.node.name; NULL or "" = left out */
	const char *scope_version; /* InstrumentationScope.version; NULL = "" */
	/*
	 * Extra string attributes (from OTEL_RESOURCE_ATTRIBUTES). They replace host.name and
	 * k8s.node.name, give service.name when service_name is unset, and never replace
	 * process.pid or process.executable.name, which describe the process sampled.
	 */
	const struct pp_label *extra_attrs;
	uint32_t n_extra;
};

/*
 * Encodes nprofiles profiles (NULL entries are skipped) into a serialized, uncompressed
 * ExportProfilesServiceRequest. res may be NULL. *out is malloc'ed; the caller frees it.
 * Returns 0, -EINVAL (bad arguments or extra attribute), -ENOMEM, -E2BIG (a dictionary
 * table past INT32_MAX entries).
 */
int pp_otlp_encode(const struct pp_profile *const *profiles, size_t nprofiles,
		   const struct pp_otlp_resource *res, uint8_t **out, size_t *out_len);

/*
 * Splits a serialized (uncompressed) ExportProfilesServiceRequest in two smaller ones, for a
 * request the server answered with HTTP 413. With two or more ResourceProfiles each half gets
 * half of them, whole; with one, each half gets half of its samples (in request order; every
 * profile keeps its metadata: sample_type, period_type, period, time, duration, attributes).
 * Each half carries the request's dictionary pruned to what the half refers to, with every
 * index renumbered (index 0 of each table stays the zero value), so it is valid on its own
 * under the rules above and smaller when the dictionary dominates. Every sample lands in
 * exactly one half; a profile or scope without samples from the start goes to the first.
 * *first and *second are malloc'ed; the caller frees them. Returns 0, -EINVAL (bad
 * arguments, not a request, an index out of range), -ENOMEM, or -E2BIG when the request
 * cannot be split (one ResourceProfiles with fewer than two samples): drop it.
 */
int pp_otlp_split_request(const uint8_t *buf, size_t len, uint8_t **first, size_t *first_len,
			  uint8_t **second, size_t *second_len);

/*
 * The label budget pp_otlp_encode applies to this request (profile.h): which names it
 * leaves out, for the counters that say so. res may be NULL.
 */
void pp_otlp_plan_labels(const struct pp_profile *const *profiles, size_t nprofiles,
			 const struct pp_otlp_resource *res, struct pp_label_budget *b);

/* The same request written to path whole or not at all (uncompressed, `.otlp.pb`). */
int pp_otlp_write_file(const struct pp_profile *const *profiles, size_t nprofiles,
		       const struct pp_otlp_resource *res, const char *path);

/*
 * Parses OTEL_RESOURCE_ATTRIBUTES ("k=v,k2=v2"): keys and values are percent-decoded and
 * trimmed of spaces and tabs; blank pairs are skipped; a key given twice keeps its last
 * value. On success *out (free with pp_otlp_free_attributes) holds *n labels, which may be
 * 0 (then *out is NULL). On a malformed pair returns -EINVAL and writes to err a message
 * naming the pair and what is wrong with it; nothing is returned then (the OTel spec says
 * to discard the whole variable). -E2BIG past PP_OTLP_MAX_RESOURCE_ATTRS pairs.
 */
int pp_otlp_parse_resource_attributes(const char *buf, size_t len, struct pp_label **out,
				      uint32_t *n, char *err, size_t errlen);
void pp_otlp_free_attributes(struct pp_label *attrs);

#endif /* PEBSPROF_OTLP_H */
