/*
 * Tests for the collector's path and small-file helpers: the truncation rule of pp_pathf and
 * the exact contract of pp_read_small_file that the PMU and sysinfo readers rely on.
 */
#include "check.h"
#include "base/fsutil.h"
#include "testsh.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static int make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pp_fsutil.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -errno;
}

/* Creates tmpdir/name holding data[0..len); path gets its name. Returns 0 or -errno. */
static int make_file(const char *name, const char *data, size_t len, char *path, size_t size)
{
	FILE *f;
	int ok;

	if (make_tmpdir())
		return -errno;
	snprintf(path, size, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	ok = fwrite(data, 1, len, f) == len;
	if (fclose(f) || !ok)
		return -EIO;
	return 0;
}

static void remove_file(const char *path)
{
	unlink(path);
	rmdir(tmpdir);
}

TEST(pathf_formats_and_truncates_to_empty)
{
	char small[8], big[64];

	pp_pathf(big, sizeof(big), "%s/%s/%u", "/sys", "cpu", 7u);
	CHECK_STR(big, "/sys/cpu/7");
	/* Exactly fits: 7 chars + NUL. */
	pp_pathf(small, sizeof(small), "%s", "abcdefg");
	CHECK_STR(small, "abcdefg");
	/* One char too long: the whole path becomes "", never a truncated prefix. */
	pp_pathf(small, sizeof(small), "%s", "abcdefgh");
	CHECK_STR(small, "");
}

/* Reads content through a buffer of bufsize; expects want (the bytes, NUL-terminated). */
static void check_read(const char *content, size_t bufsize, const char *want)
{
	char path[128], buf[64];
	ssize_t n;

	REQUIRE(bufsize <= sizeof(buf));
	REQUIRE(make_file("f", content, strlen(content), path, sizeof(path)) == 0);
	memset(buf, 'x', sizeof(buf));
	n = pp_read_small_file(path, buf, bufsize);
	CHECK(n == (ssize_t)strlen(want));
	CHECK(memchr(buf, '\0', bufsize) != NULL);
	CHECK_STR(buf, want);
	remove_file(path);
}

TEST(read_keeps_newline_and_terminates)
{
	check_read("42\n", 32, "42\n");
}

TEST(read_truncates_to_size_minus_one)
{
	check_read("0123456789", 5, "0123");
	check_read("0123", 5, "0123");
}

TEST(read_empty_file_is_zero)
{
	check_read("", 8, "");
}

TEST(read_errors_are_negative_errno)
{
	char path[128], buf[8];

	REQUIRE(make_tmpdir() == 0);
	snprintf(path, sizeof(path), "%s/missing", tmpdir);
	CHECK(pp_read_small_file(path, buf, sizeof(buf)) == -ENOENT);
	/* A directory opens but fails on read: that is an error, not an empty file. */
	CHECK(pp_read_small_file(tmpdir, buf, sizeof(buf)) == -EISDIR);
	CHECK(pp_read_small_file(path, buf, 0) == -EINVAL);
	/* A truncated path from pp_pathf is "", which does not open. */
	CHECK(pp_read_small_file("", buf, sizeof(buf)) == -ENOENT);
	rmdir(tmpdir);
}

TEST(read_procfs_file)
{
	char buf[4096];
	ssize_t n = pp_read_small_file("/proc/self/status", buf, sizeof(buf));

	if (n == -ENOENT)
		SKIP("no /proc mounted");
	REQUIRE(n > 0);
	CHECK((size_t)n < sizeof(buf));
	CHECK(strncmp(buf, "Name:", 5) == 0);
	CHECK(strlen(buf) == (size_t)n);
}

TEST(mkdir_parents_makes_the_missing_ones)
{
	char dir[600];
	struct stat st;

	REQUIRE(make_tmpdir() == 0);
	snprintf(dir, sizeof(dir), "%s/a/b/c", tmpdir);
	CHECK(pp_mkdir_parents(dir, 0700) == 0);
	CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
	snprintf(dir, sizeof(dir), "%s/a", tmpdir);
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
	snprintf(dir, sizeof(dir), "%s/a/b/c/", tmpdir); /* there already, a trailing slash */
	CHECK(pp_mkdir_parents(dir, 0700) == 0);
	CHECK(pp_mkdir_parents("", 0700) == -ENAMETOOLONG);
	snprintf(dir, sizeof(dir), "%s/file", tmpdir);
	REQUIRE(pp_test_sh("touch '%s'", dir) == 0);
	snprintf(dir, sizeof(dir), "%s/file/below", tmpdir); /* a file in the way */
	CHECK(pp_mkdir_parents(dir, 0700) == -ENOTDIR);
	REQUIRE(pp_test_sh("rm -rf '%s'", tmpdir) == 0);
}

/* A regular file read whole, bounded; what is no regular file or over the bound refused. */
TEST(read_fd_whole_bounds_and_refuses)
{
	char path[600], data[5000];
	void *buf = NULL;
	size_t len = 0;
	int fd, pipefd[2];

	memset(data, 'x', sizeof(data));
	data[4999] = 'y';
	REQUIRE(make_file("whole", data, sizeof(data), path, sizeof(path)) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK(pp_read_fd_whole(fd, sizeof(data), &buf, &len) == 0);
	CHECK(len == sizeof(data) && buf && !memcmp(buf, data, len));
	free(buf);
	CHECK(pp_read_fd_whole(fd, sizeof(data) - 1, &buf, &len) == -EFBIG);
	CHECK(lseek(fd, 0, SEEK_CUR) == 0); /* pread: the caller's offset kept */
	close(fd);
	REQUIRE(truncate(path, 0) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	buf = NULL;
	CHECK(pp_read_fd_whole(fd, 10, &buf, &len) == 0 && len == 0);
	free(buf);
	close(fd);
	REQUIRE(pipe(pipefd) == 0);
	CHECK(pp_read_fd_whole(pipefd[0], 10, &buf, &len) == -EINVAL);
	close(pipefd[0]);
	close(pipefd[1]);
	fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0 && pp_read_fd_whole(fd, 10, &buf, &len) == -EINVAL);
	if (fd >= 0)
		close(fd);
	remove_file(path);
}

/*
 * A file stat gives no size for (/proc/self/maps) is read to its end, past the first 64 KiB
 * buffer; one over max is cut at the first buffer size at or past it; a missing one is -ENOENT.
 */
TEST(read_text_whole_reads_to_the_end_within_max)
{
	static char data[200 * 1024];
	char path[128], *out = NULL;
	size_t len = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	REQUIRE(make_file("text", data, sizeof(data), path, sizeof(path)) == 0);
	REQUIRE(pp_read_text_whole(path, 1 << 20, &out, &len) == 0);
	CHECK(len == sizeof(data) && !memcmp(out, data, len));
	free(out);
	REQUIRE(pp_read_text_whole(path, 100 * 1024, &out, &len) == 0);
	CHECK_EQ_U64(len, 128 * 1024); /* 64 KiB doubled once: at or past max, no more */
	CHECK(!memcmp(out, data, len));
	free(out);
	remove_file(path);
	CHECK(pp_read_text_whole(path, 1 << 20, &out, &len) == -ENOENT);
	if (pp_read_text_whole("/proc/self/maps", 1 << 20, &out, &len) == 0) {
		CHECK(len > 0 && memchr(out, '\n', len) != NULL);
		free(out);
	}
}

TEST_LIST = {
    {"read_text_whole_reads_to_the_end_within_max", read_text_whole_reads_to_the_end_within_max},
    {"read_fd_whole_bounds_and_refuses", read_fd_whole_bounds_and_refuses},
    {"mkdir_parents_makes_the_missing_ones", mkdir_parents_makes_the_missing_ones},
    {"pathf_formats_and_truncates_to_empty", pathf_formats_and_truncates_to_empty},
    {"read_keeps_newline_and_terminates", read_keeps_newline_and_terminates},
    {"read_truncates_to_size_minus_one", read_truncates_to_size_minus_one},
    {"read_empty_file_is_zero", read_empty_file_is_zero},
    {"read_errors_are_negative_errno", read_errors_are_negative_errno},
    {"read_procfs_file", read_procfs_file},
};
TEST_MAIN()
