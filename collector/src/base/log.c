/* The collector's logger and the libbpf print hook. */
#include "log.h"

#include <bpf/libbpf.h>
#include <pebsprof/text.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pp_log_level pp_log_threshold = PP_LOG_INFO;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void pp_log_set_level(enum pp_log_level level)
{
	pp_log_threshold = level;
}

/*
 * One line on stderr. Messages name files and processes other users control, so the line is
 * cleaned (pebsprof/text.h): no terminal escape, no forged second line. libbpf's own
 * multi-line messages (verifier logs, -v only) keep their line breaks.
 */
__attribute__((format(printf, 3, 0))) static void vlog(enum pp_log_level level, bool keep_newlines,
						       const char *fmt, va_list ap)
{
	char small[2048], small_clean[2048 * 2], *line = small, *clean = small_clean;
	size_t len, w = 0, clean_size = sizeof(small_clean);
	const char *seg;
	va_list again;
	int need;

	/* a verifier log runs to megabytes, and its end says what was refused: kept whole */
	va_copy(again, ap);
	need = vsnprintf(small, sizeof(small), fmt, ap);
	if (keep_newlines && need >= (int)sizeof(small)) {
		line = malloc((size_t)need + 1);
		clean = line ? malloc((size_t)need * 2 + 2) : NULL;
		if (clean) {
			vsnprintf(line, (size_t)need + 1, fmt, again);
			clean_size = (size_t)need * 2 + 2;
		} else {
			free(line);
			line = small;
			clean = small_clean;
		}
	}
	va_end(again);
	len = strlen(line);
	while (len && line[len - 1] == '\n')
		line[--len] = '\0';
	clean[0] = '\0';
	for (seg = line; seg && w + 1 < clean_size;) {
		const char *nl = keep_newlines ? strchr(seg, '\n') : NULL;
		size_t n = nl ? (size_t)(nl - seg) : strlen(seg);

		w += pp_text_clean(seg, n, clean + w, clean_size - w);
		if (w >= clean_size)
			break;
		if (nl && w + 2 < clean_size) {
			clean[w++] = '\n';
			clean[w] = '\0';
		}
		seg = nl ? nl + 1 : NULL;
	}
	fprintf(stderr, "pebsprof: %s: %s\n", level_names[level], clean);
	if (line != small) {
		free(line);
		free(clean);
	}
}

void pp_log_write(enum pp_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, false, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 0))) static int libbpf_print(enum libbpf_print_level level,
							      const char *fmt, va_list ap)
{
	enum pp_log_level ours = PP_LOG_DEBUG;

	(void)level;

	/*
	 * libbpf warns about every failed probe and about verifier logs of programs we retry
	 * with another variant; the loader reports the failure that matters itself, so libbpf's
	 * own words are shown with -v only.
	 */
	if (ours > pp_log_threshold)
		return 0;
	vlog(ours, true, fmt, ap);
	return 0;
}

void pp_log_hook_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
