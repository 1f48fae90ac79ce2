/* Strict argument parsing and output-path checks for the subcommands. */
#include "cli_util.h"

#include <errno.h>
#include <malloc.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pp_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* The number s starts with, unsigned and without leading space; *end after it. */
static int leading_number(const char *s, double *v, char **end)
{
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	*v = strtod(s, end);
	if (*end == s)
		return -EINVAL;
	return errno ? -ERANGE : 0;
}

int pp_parse_seconds(const char *s, uint64_t *out_ns)
{
	double v;
	char *end;
	int err = leading_number(s, &v, &end);

	if (err != -EINVAL && *end)
		return -EINVAL;
	if (err)
		return err;
	if (!(v > 0) || v > 365.0 * 24 * 3600)
		return -ERANGE;
	*out_ns = (uint64_t)(v * 1e9 + 0.5);
	return *out_ns ? 0 : -ERANGE;
}

int pp_parse_duration(const char *s, uint64_t *out_ns)
{
	static const struct {
		const char *name;
		double ns;
	} units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
	double v;
	char *end;
	int err = leading_number(s, &v, &end);

	if (err)
		return err;
	if (v == 0 && !*end) {
		*out_ns = 0;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].name) != 0)
			continue;
		v *= units[i].ns;
		if (!(v >= 0) || v > 3600e9)
			return -ERANGE;
		*out_ns = (uint64_t)(v + 0.5);
		return 0;
	}
	return -EINVAL;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls > lx && strcmp(s + ls - lx, suffix) == 0;
}

enum pp_output_format pp_output_format_of(const char *path)
{
	if (ends_with(path, ".pb.gz"))
		return PP_OUT_PPROF;
	if (ends_with(path, ".folded"))
		return PP_OUT_FOLDED;
	if (ends_with(path, ".svg"))
		return PP_OUT_SVG;
	if (ends_with(path, ".otlp.pb"))
		return PP_OUT_OTLP;
	return PP_OUT_UNKNOWN;
}

int pp_output_dir_writable(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else if (slash == path) {
		snprintf(dir, sizeof(dir), "/");
	} else {
		if ((size_t)(slash - path) >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	/* access() says yes to root on pseudo filesystems; only creating a file tells. */
	char probe[PATH_MAX + 32];
	int fd, ret = 0;

	snprintf(probe, sizeof(probe), "%s/.pebsprof-XXXXXX", dir);
	fd = mkstemp(probe);
	if (fd < 0)
		return -errno;
	if (unlink(probe))
		ret = -errno;
	close(fd);
	return ret;
}

void pp_cli_tune_malloc(void)
{
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_ARENA_MAX, 2);
}

int pp_poll_wait_until(int wait_ms, uint64_t now, uint64_t at_ns)
{
	if (at_ns > now && at_ns - now < (uint64_t)wait_ms * 1000000ull)
		return (int)((at_ns - now) / 1000000) + 1;
	return wait_ms;
}
