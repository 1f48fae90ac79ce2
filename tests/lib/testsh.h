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

/* Directories made by pp_test_scratch_dir, removed when the test ends. */
static char pp_test_scratch[8][PATH_MAX];

static inline void pp_test_scratch_cleanup(void)
{
	for (int i = 0; i < 8; i++)
		if (pp_test_scratch[i][0])
			(void)pp_test_sh("rm -rf '%s'", pp_test_scratch[i]);
}

/* pp_test_mkdtemp, and the directory goes when the test exits: 0, or -1. */
static inline int pp_test_scratch_dir(char *dir, size_t size, const char *name)
{
	for (int i = 0; i < 8; i++) {
		if (pp_test_scratch[i][0])
			continue;
		if (pp_test_mkdtemp(dir, size, name))
			return -1;
		if (i == 0)
			atexit(pp_test_scratch_cleanup);
		snprintf(pp_test_scratch[i], sizeof(pp_test_scratch[i]), "%s", dir);
		return 0;
	}
	return -1;
}

#endif /* PP_TEST_TESTSH_H */
