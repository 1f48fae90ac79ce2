/* The collector's logger and the libbpf print hook. */
#include "log.h"

#include <bpf/libbpf.h>
#include <stdio.h>
#include <string.h>

enum pp_log_level pp_log_threshold = PP_LOG_INFO;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void pp_log_set_level(enum pp_log_level level)
{
	pp_log_threshold = level;
}

static void vlog(enum pp_log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	size_t len;

	vsnprintf(line, sizeof(line), fmt, ap);
	len = strlen(line);
	while (len && line[len - 1] == '\n')
		line[--len] = '\0';
	fprintf(stderr, "pebsprof: %s: %s\n", level_names[level], line);
}

void pp_log_write(enum pp_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
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
	vlog(ours, fmt, ap);
	return 0;
}

void pp_log_hook_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
