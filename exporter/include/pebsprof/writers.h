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
/* Gzipped pprof, as `go tool pprof` and Pyroscope read it. */
int pp_pprof_write_file(const struct pp_profile *p, const char *path);

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

#endif /* PEBSPROF_WRITERS_H */
