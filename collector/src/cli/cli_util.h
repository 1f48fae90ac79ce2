/* Small helpers shared by the subcommands: strict number parsing and output validation. */
#ifndef PP_CLI_UTIL_H
#define PP_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Exit codes of every subcommand (DESIGN.md). */
#define PP_EXIT_OK 0
#define PP_EXIT_RUNTIME 1
#define PP_EXIT_USAGE 2

/* Parses a whole decimal string into [min, max]. Returns 0 or -EINVAL / -ERANGE. */
int pp_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parses seconds, fractions allowed ("2.5"), into nanoseconds; must be > 0. */
int pp_parse_seconds(const char *s, uint64_t *out_ns);
/*
 * Parses a duration with its unit ("500us", "1ms", "2.5ms", "1s", "0"; ns, us, ms, s) into
 * nanoseconds, at most an hour. Returns 0, -EINVAL (no number, no or an unknown unit) or
 * -ERANGE.
 */
int pp_parse_duration(const char *s, uint64_t *out_ns);

enum pp_output_format {
	PP_OUT_UNKNOWN = 0,
	PP_OUT_PPROF,  /* .pb.gz */
	PP_OUT_FOLDED, /* .folded */
	PP_OUT_SVG,    /* .svg */
	PP_OUT_OTLP,   /* .otlp.pb: an OTLP ExportProfilesServiceRequest */
};

/* The format an output path asks for by its extension. */
enum pp_output_format pp_output_format_of(const char *path);
/* Checks that the directory of path exists and is writable. Returns 0 or -errno. */
int pp_output_dir_writable(const char *path);

/*
 * A poll's wait of wait_ms, or less so that a poll begun at now returns by at_ns (the same
 * clock, in ns; at_ns at or before now: wait_ms stays): the end of a capture, a window, an
 * upload's time.
 */
int pp_poll_wait_until(int wait_ms, uint64_t now, uint64_t at_ns);

/*
 * Sets glibc's allocator for a long capture (record, run): glibc raises its mmap threshold
 * after a large block is freed, so later symbol and unwind tables land in the heap and stay in
 * RSS; a fixed threshold returns them on free. Two arenas serve the agent's threads.
 */
void pp_cli_tune_malloc(void);

#endif /* PP_CLI_UTIL_H */
