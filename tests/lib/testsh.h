/*
 * Shell helpers the unit tests share for fixtures built at test time (cc, objcopy, a server):
 * a printf-formatted command run through system(3), and a fresh temporary directory.
 */
#ifndef PP_TEST_TESTSH_H
#define PP_TEST_TESTSH_H

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* Run the formatted command with /bin/sh: its exit status, or -1 when it did not exit. */
__attribute__((format(printf, 1, 2))) static inline int pp_test_sh(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A new directory $TMPDIR/NAME-XXXXXX (/tmp without TMPDIR) in dir: 0, or -1 ("" in dir). */
static inline int pp_test_mkdtemp(char *dir, size_t size, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, size, "%s/%s-XXXXXX", tmp ? tmp : "/tmp", name);
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		return -1;
	}
	return 0;
}

#endif /* PP_TEST_TESTSH_H */
