/*
 * The collector's logger: one line per event on stderr, "pebsprof: level: message". Only the
 * layer that decides what happens next logs; leaf code returns negative errno instead.
 */
#ifndef PP_LOG_H
#define PP_LOG_H

#include <stdarg.h>

enum pp_log_level {
	PP_LOG_ERROR = 0,
	PP_LOG_WARN = 1,
	PP_LOG_INFO = 2,
	PP_LOG_DEBUG = 3,
};

extern enum pp_log_level pp_log_threshold;

void pp_log_set_level(enum pp_log_level level);
void pp_log_write(enum pp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Routes libbpf's messages through pp_log (warnings always, debug with -v). */
void pp_log_hook_libbpf(void);

/* Arguments are not evaluated below the threshold. */
#define pp_log(level, ...)                                                                         \
	do {                                                                                       \
		if ((level) <= pp_log_threshold)                                                   \
			pp_log_write((level), __VA_ARGS__);                                        \
	} while (0)

#define pp_error(...) pp_log(PP_LOG_ERROR, __VA_ARGS__)
#define pp_warn(...) pp_log(PP_LOG_WARN, __VA_ARGS__)
#define pp_info(...) pp_log(PP_LOG_INFO, __VA_ARGS__)
#define pp_debug(...) pp_log(PP_LOG_DEBUG, __VA_ARGS__)

#endif /* PP_LOG_H */
