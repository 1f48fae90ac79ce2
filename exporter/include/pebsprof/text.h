/*
 * Text that came from outside the agent (symbol names, perf-map names, comm, paths, pod
 * labels, configuration) made safe for every place it goes: pprof and OTLP (whose decoders
 * refuse a message holding one string that is not UTF-8), folded stacks, SVG, the terminal.
 *
 * Clean text is valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF) with no
 * control character: C0 (0x00-0x1f), DEL (0x7f) or C1 (U+0080-U+009F, which 8-bit terminals
 * read as ESC sequences). Cleaning replaces, visibly and never silently dropping a byte:
 *   a byte that does not begin a valid sequence   ->  U+FFFD (one per byte)
 *   a C0 control or DEL                           ->  "\xNN"
 *   a C1 control                                  ->  "\u00NN"
 */
#ifndef PEBSPROF_TEXT_H
#define PEBSPROF_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* The longest a cleaned string can grow: each input byte becomes at most this many. */
#define PP_TEXT_MAX_GROWTH 6

enum pp_text_fault {
	PP_TEXT_CLEAN = 0,
	PP_TEXT_BAD_UTF8, /* a byte that does not begin a valid UTF-8 sequence */
	PP_TEXT_CONTROL,  /* a control character (valid UTF-8, but never shown raw) */
};

/*
 * The first fault in s[0..len): PP_TEXT_CLEAN, or the fault and its byte offset in *at (may
 * be NULL).
 */
enum pp_text_fault pp_text_check(const char *s, size_t len, size_t *at);

/* pp_text_check(s, strlen(s), NULL) == PP_TEXT_CLEAN. NULL is clean. */
bool pp_text_is_clean(const char *s);

/*
 * Writes the cleaned form of s[0..len) into out (NUL-terminated, cut at a character boundary
 * when out_size is too small) and returns the length the whole cleaned form has, as
 * snprintf does. out may be NULL with out_size 0, to measure.
 */
size_t pp_text_clean(const char *s, size_t len, char *out, size_t out_size);

/* The cleaned copy of s, malloc'ed; NULL with errno ENOMEM. */
char *pp_text_clean_dup(const char *s);

#endif /* PEBSPROF_TEXT_H */
