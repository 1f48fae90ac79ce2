/*
 * Tests of the subcommands' argument helpers: strict number and duration parsing, the output
 * format chosen by extension, and the writable-directory check run before a capture starts.
 */
#define _GNU_SOURCE /* setgroups */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cli/cli_util.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aull

/* Parses s into [min, max]; on error *out must be left alone. */
static int u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	*out = SENTINEL;
	return pp_parse_u64(s, min, max, out);
}

TEST(parse_u64_accepts_values_in_bounds)
{
	uint64_t v;

	CHECK(u64("0", 0, 10, &v) == 0);
	CHECK_EQ_U64(v, 0);
	CHECK(u64("10", 0, 10, &v) == 0);
	CHECK_EQ_U64(v, 10);
	CHECK(u64("5", 5, 5, &v) == 0);
	CHECK_EQ_U64(v, 5);
	/* Decimal only: a leading zero is not octal. */
	CHECK(u64("010", 0, 100, &v) == 0);
	CHECK_EQ_U64(v, 10);
	CHECK(u64("18446744073709551615", 0, UINT64_MAX, &v) == 0);
	CHECK_EQ_U64(v, UINT64_MAX);
}

TEST(parse_u64_rejects_out_of_bounds)
{
	uint64_t v;

	CHECK(u64("11", 0, 10, &v) == -ERANGE);
	CHECK_EQ_U64(v, SENTINEL);
	CHECK(u64("4", 5, 10, &v) == -ERANGE);
	CHECK_EQ_U64(v, SENTINEL);
	CHECK(u64("0", 1, 10, &v) == -ERANGE);
	CHECK_EQ_U64(v, SENTINEL);
	/* One past UINT64_MAX, and far past it: overflow, not wrap-around. */
	CHECK(u64("18446744073709551616", 0, UINT64_MAX, &v) == -ERANGE);
	CHECK_EQ_U64(v, SENTINEL);
	CHECK(u64("99999999999999999999999999", 0, UINT64_MAX, &v) == -ERANGE);
	CHECK_EQ_U64(v, SENTINEL);
}

TEST(parse_u64_rejects_malformed)
{
	static const char *const bad[] = {"",	 "-1",	 "+1",	" 1",  "1 ", "12abc",
					  "abc", "0x10", "1.5", "1e3", "-0"};
	uint64_t v;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = u64(bad[i], 0, UINT64_MAX, &v);

		if (ret != -EINVAL)
			fprintf(stderr, "  \"%s\" -> %d\n", bad[i], ret);
		CHECK(ret == -EINVAL);
		CHECK_EQ_U64(v, SENTINEL);
	}
	/* "-1" must not become UINT64_MAX through strtoull's negation. */
	CHECK(u64("-1", 0, UINT64_MAX, &v) == -EINVAL);
	CHECK(pp_parse_u64(NULL, 0, 10, &v) == -EINVAL);
}

static int secs(const char *s, uint64_t *ns)
{
	*ns = SENTINEL;
	return pp_parse_seconds(s, ns);
}

TEST(parse_seconds_accepts_fractions)
{
	uint64_t ns;

	CHECK(secs("2.5", &ns) == 0);
	CHECK_EQ_U64(ns, 2500000000ull);
	CHECK(secs("1", &ns) == 0);
	CHECK_EQ_U64(ns, 1000000000ull);
	CHECK(secs("0.001", &ns) == 0);
	CHECK_EQ_U64(ns, 1000000ull);
	CHECK(secs("0.000000001", &ns) == 0);
	CHECK_EQ_U64(ns, 1);
	/* strtod's exponent form is a number of seconds too. */
	CHECK(secs("1e3", &ns) == 0);
	CHECK_EQ_U64(ns, 1000000000000ull);
	/* The upper bound is one year. */
	CHECK(secs("31536000", &ns) == 0);
	CHECK_EQ_U64(ns, 31536000000000000ull);
}

/*
 * Decimal fractions are not exact in binary: 8.2 * 1e9 is 8199999999.999999 as a double, and
 * truncating it loses a nanosecond the user asked for. The result must be the nearest ns.
 */
TEST(parse_seconds_rounds_to_nearest_ns)
{
	static const struct {
		const char *s;
		uint64_t ns;
	} cases[] = {
	    {"8.2", 8200000000ull},
	    {"1.005", 1005000000ull},
	    {"0.3", 300000000ull},
	    {"4.35", 4350000000ull},
	};
	uint64_t ns;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(secs(cases[i].s, &ns) == 0);
		if (ns != cases[i].ns)
			fprintf(stderr, "  \"%s\" -> %llu ns\n", cases[i].s,
				(unsigned long long)ns);
		CHECK_EQ_U64(ns, cases[i].ns);
	}
}

TEST(parse_seconds_rejects_bad_input)
{
	static const char *const malformed[] = {"", "-1", "+1", " 1", "abc", "2.5s", "1 ", "-0"};
	static const char *const out_of_range[] = {"0", "0.0", "1e-10", "31536001", "inf", "nan"};
	uint64_t ns;

	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		int ret = secs(malformed[i], &ns);

		if (ret != -EINVAL)
			fprintf(stderr, "  \"%s\" -> %d\n", malformed[i], ret);
		CHECK(ret == -EINVAL);
	}
	for (size_t i = 0; i < sizeof(out_of_range) / sizeof(out_of_range[0]); i++) {
		int ret = secs(out_of_range[i], &ns);

		if (ret != -ERANGE)
			fprintf(stderr, "  \"%s\" -> %d\n", out_of_range[i], ret);
		CHECK(ret == -ERANGE);
	}
	CHECK(pp_parse_seconds(NULL, &ns) == -EINVAL);
}

TEST(parse_duration_takes_units)
{
	uint64_t ns = 7;

	CHECK(pp_parse_duration("1ms", &ns) == 0);
	CHECK_EQ_U64(ns, 1000000);
	CHECK(pp_parse_duration("2.5ms", &ns) == 0);
	CHECK_EQ_U64(ns, 2500000);
	CHECK(pp_parse_duration("500us", &ns) == 0);
	CHECK_EQ_U64(ns, 500000);
	CHECK(pp_parse_duration("40ns", &ns) == 0);
	CHECK_EQ_U64(ns, 40);
	CHECK(pp_parse_duration("1s", &ns) == 0);
	CHECK_EQ_U64(ns, 1000000000);
	CHECK(pp_parse_duration("0", &ns) == 0);
	CHECK_EQ_U64(ns, 0);
	ns = 7;
	/* a number without its unit is ambiguous; so is an unknown unit */
	CHECK(pp_parse_duration("5", &ns) == -EINVAL);
	CHECK(pp_parse_duration("5m", &ns) == -EINVAL);
	CHECK(pp_parse_duration("ms", &ns) == -EINVAL);
	CHECK(pp_parse_duration("-1ms", &ns) == -EINVAL);
	CHECK(pp_parse_duration(" 1ms", &ns) == -EINVAL);
	CHECK(pp_parse_duration("1ms ", &ns) == -EINVAL);
	CHECK(pp_parse_duration("", &ns) == -EINVAL);
	CHECK(pp_parse_duration(NULL, &ns) == -EINVAL);
	CHECK(pp_parse_duration("2h", &ns) == -EINVAL);
	CHECK(pp_parse_duration("3601s", &ns) == -ERANGE);
	CHECK(pp_parse_duration("1e300s", &ns) == -ERANGE);
	CHECK_EQ_U64(ns, 7);
}

TEST(output_format_by_extension)
{
	CHECK(pp_output_format_of("out.pb.gz") == PP_OUT_PPROF);
	CHECK(pp_output_format_of("/tmp/dir.x/profile.pb.gz") == PP_OUT_PPROF);
	CHECK(pp_output_format_of("stacks.folded") == PP_OUT_FOLDED);
	CHECK(pp_output_format_of("flame.svg") == PP_OUT_SVG);
	CHECK(pp_output_format_of("report.txt") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of("x.pb") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of("x.gz") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of("flame.svg.txt") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of("svg") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of("") == PP_OUT_UNKNOWN);
	/* An extension with no name before it names no file of that format. */
	CHECK(pp_output_format_of(".svg") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of(".pb.gz") == PP_OUT_UNKNOWN);
	CHECK(pp_output_format_of(".folded") == PP_OUT_UNKNOWN);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

TEST(output_dir_writable_checks_the_directory)
{
	char dir[] = "/tmp/pp-cli-util-XXXXXX";
	char path[PATH_MAX], file[PATH_MAX];
	int fd, cwd;

	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out.pb.gz", dir);
	CHECK(pp_output_dir_writable(path) == 0);
	/* The probe file is gone again and the output itself was not created. */
	CHECK(dir_entries(dir) == 0);

	snprintf(path, sizeof(path), "%s/missing/out.svg", dir);
	CHECK(pp_output_dir_writable(path) == -ENOENT);

	snprintf(file, sizeof(file), "%s/plain", dir);
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	REQUIRE(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/plain/out.svg", dir);
	CHECK(pp_output_dir_writable(path) == -ENOTDIR);

	/* No slash: the current directory. */
	cwd = open(".", O_RDONLY | O_DIRECTORY);
	REQUIRE(cwd >= 0);
	if (chdir(dir) == 0) {
		CHECK(pp_output_dir_writable("out.folded") == 0);
		CHECK(fchdir(cwd) == 0);
	} else {
		CHECK(0);
	}
	close(cwd);

	unlink(file);
	CHECK(rmdir(dir) == 0);
}

TEST(output_dir_writable_rejects_proc)
{
	/* /proc takes no new files, for root neither: access(W_OK) would have said yes. */
	CHECK(pp_output_dir_writable("/proc/out.pb.gz") < 0);
	CHECK(pp_output_dir_writable("/proc/self/out.pb.gz") < 0);
}

TEST(output_dir_writable_rejects_long_paths)
{
	static char path[PATH_MAX + 64];

	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 8] = '/';
	path[sizeof(path) - 1] = '\0';
	CHECK(pp_output_dir_writable(path) == -ENAMETOOLONG);
}

/* 0: the check said EACCES and left nothing behind; 1: it did not; 2: could not set up. */
static int read_only_dir_case(void)
{
	char dir[] = "/tmp/pp-cli-util-ro-XXXXXX";
	char path[PATH_MAX];
	int ret, ok;

	if (!mkdtemp(dir))
		return 2;
	if (chmod(dir, 0500)) {
		rmdir(dir);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/out.svg", dir);
	ret = pp_output_dir_writable(path);
	if (ret != -EACCES)
		fprintf(stderr, "  read-only dir -> %d\n", ret);
	ok = ret == -EACCES;
	chmod(dir, 0700);
	ok = ok && dir_entries(dir) == 0;
	rmdir(dir);
	return ok ? 0 : 1;
}

/*
 * Root writes into a mode 0500 directory regardless, so as root the case runs in a child that
 * has dropped to an unprivileged uid.
 */
TEST(output_dir_writable_rejects_read_only_dir)
{
	pid_t pid;
	int status, ret;

	if (geteuid() != 0) {
		ret = read_only_dir_case();
		if (ret == 2)
			SKIP("could not create a read-only directory in /tmp");
		CHECK(ret == 0);
		return;
	}
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(3);
		_exit(read_only_dir_case());
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	REQUIRE(WIFEXITED(status));
	ret = WEXITSTATUS(status);
	if (ret == 3)
		SKIP("root could not drop to uid 65534 to test a read-only directory");
	if (ret == 2)
		SKIP("uid 65534 could not create a read-only directory in /tmp");
	CHECK(ret == 0);
}

TEST_LIST = {
    {"parse_u64_accepts_values_in_bounds", parse_u64_accepts_values_in_bounds},
    {"parse_u64_rejects_out_of_bounds", parse_u64_rejects_out_of_bounds},
    {"parse_u64_rejects_malformed", parse_u64_rejects_malformed},
    {"parse_seconds_accepts_fractions", parse_seconds_accepts_fractions},
    {"parse_seconds_rounds_to_nearest_ns", parse_seconds_rounds_to_nearest_ns},
    {"parse_seconds_rejects_bad_input", parse_seconds_rejects_bad_input},
    {"parse_duration_takes_units", parse_duration_takes_units},
    {"output_format_by_extension", output_format_by_extension},
    {"output_dir_writable_checks_the_directory", output_dir_writable_checks_the_directory},
    {"output_dir_writable_rejects_proc", output_dir_writable_rejects_proc},
    {"output_dir_writable_rejects_long_paths", output_dir_writable_rejects_long_paths},
    {"output_dir_writable_rejects_read_only_dir", output_dir_writable_rejects_read_only_dir},
};

TEST_MAIN()
