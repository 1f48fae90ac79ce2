/*
 * Output formats of a profile: pprof (gzipped profile.proto), folded stacks, an SVG flame
 * graph, and the top-functions report `pebsprof record` prints.
 *
 * All return 0 or a negative errno; none of them log. Files are written whole or not at all
 * (temporary file + rename), so a failed write never leaves a truncated profile behind.
 */
#ifndef PEBSPROF_WRITERS_H
#define PEBSPROF_WRITERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pebsprof/profile.h>

/* Serialized, uncompressed perftools.profiles.Profile. *out is malloc'ed; caller frees. */
int pp_pprof_encode(const struct pp_profile *p, uint8_t **out, size_t *out_len);
/*
 * The off-CPU samples of p (pp_sample_info.wait) as a pprof of their own: one sample type,
 * (off_cpu, nanoseconds), no period (what Pyroscope's /ingest names off_cpu), values the
 * nanoseconds waited, each sample labelled with off_cpu.state. pp_pprof_encode leaves them
 * out.
 */
int pp_pprof_encode_off_cpu(const struct pp_profile *p, uint8_t **out, size_t *out_len);
/* Gzipped pprof, as `go tool pprof` and Pyroscope read it. */
int pp_pprof_write_file(const struct pp_profile *p, const char *path);
/* The label budget pp_pprof_encode applies to p: which names it leaves out (profile.h). */
void pp_pprof_plan_labels(const struct pp_profile *p, struct pp_label_budget *b);
/*
 * An upper bound of the bytes pp_pprof_encode would write for samples idx[0..n) of p
 * (idx NULL: samples 0..n), computed without encoding: the limit checks of a backend that
 * measures profiles as pprof (Pyroscope) cost nothing when the bound is below them. It
 * also bounds the pprof Pyroscope builds from the same samples sent over OTLP, which carries
 * fewer labels. SIZE_MAX when memory runs out.
 */
size_t pp_pprof_size_bound(const struct pp_profile *p, const size_t *idx, size_t n);
/*
 * Splits a serialized pprof Profile in two for a push the server found too large: the first
 * half gets the first half of the samples, the second the rest, each with only the
 * locations, functions, mappings and strings it refers to (string indexes renumbered; ids
 * kept) and every other field as it was. *first and *second are malloc'ed. Returns 0,
 * -EINVAL (not a profile, a string index out of range), -ENOMEM, or -E2BIG for fewer than
 * two samples: there is no smaller profile, drop it.
 */
int pp_pprof_split(const uint8_t *buf, size_t len, uint8_t **first, size_t *first_len,
		   uint8_t **second, size_t *second_len);

/* Folded stacks: "root;caller;leaf count" per line, sorted, as flamegraph.pl reads them. */
int pp_folded_write(const struct pp_profile *p, FILE *f);
int pp_folded_write_file(const struct pp_profile *p, const char *path);

/* A self-contained SVG flame graph (root at the bottom), viewable in any browser. */
int pp_flamegraph_write_svg(const struct pp_profile *p, FILE *f, const char *title);
int pp_flamegraph_write_file(const struct pp_profile *p, const char *path, const char *title);

struct pp_top_entry {
	const char *function; /* borrowed from the profile */
	uint64_t self;	      /* samples where it is the leaf (non-data) frame */
	uint64_t total;	      /* samples where it appears anywhere in the stack, once each */
};

/* Fills out[0..*n) sorted by self, then total, descending. out may be NULL to count only. */
int pp_profile_top_functions(const struct pp_profile *p, struct pp_top_entry *out, size_t max,
			     size_t *n);
/* Prints a table "self% total% function" of the top max functions. */
void pp_report_print_top(const struct pp_profile *p, FILE *f, size_t max);

/*
 * Prints the accessed data by type and field, like perf report -s type,typeoff: the samples
 * whose leaf is a field and whose next frame is its type (two data frames), the max most
 * sampled fields with their share of all samples, their count, average load latency
 * (cycles) and memory levels by the "memory.level" label (L1 with LFB, L2, L3, and the rest:
 * DRAM, remote, unknown). Prints nothing when no sample has a type.
 */
void pp_report_print_data_types(const struct pp_profile *p, FILE *f, size_t max);

#endif /* PEBSPROF_WRITERS_H */
