/*
 * Tests of opening a mapping's file on a process's behalf: a child maps a file of ours, its
 * real /proc/PID/maps entry is parsed, and the open must reach that very file through
 * map_files, or by its path inside the process's root with the device and inode checked;
 * a path swapped for a link to another file, a FIFO, a deleted file or a stale entry must be
 * refused, never followed and never blocking; and the name a mapping gives its file for a
 * cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "process/mapped_file.h"
#include "process/procmaps.h"

struct child {
	pid_t pid;
	int ctl; /* a byte written here ends the child */
};

/* A child that maps path (read-only) and waits. */
static int child_mapping(struct child *c, const char *path)
{
	int ready[2], ctl[2];
	char b;

	if (pipe(ready) || pipe(ctl))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		int fd = open(path, O_RDONLY);
		void *p = fd >= 0 ? mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;

		close(ready[0]);
		close(ctl[1]);
		if (p == MAP_FAILED)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		(void)!read(ctl[0], &b, 1);
		_exit(0);
	}
	close(ready[1]);
	close(ctl[0]);
	c->ctl = ctl[1];
	if (read(ready[0], &b, 1) != 1) {
		close(ready[0]);
		return -1;
	}
	close(ready[0]);
	return 0;
}

static void child_end(struct child *c)
{
	if (c->pid <= 0)
		return;
	(void)!write(c->ctl, "x", 1);
	close(c->ctl);
	waitpid(c->pid, NULL, 0);
	c->pid = 0;
}

/* The child's maps entry for path (copied into *out, its path into pbuf). */
static int find_entry(pid_t pid, const char *path, struct pp_map_entry *out, char *pbuf,
		      size_t psize)
{
	static char buf[4 << 20]; /* sanitizer builds map a great deal */
	char maps_path[64];
	struct pp_maps m;
	size_t n = 0;
	ssize_t r;
	int fd, found = -1;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", (int)pid);
	fd = open(maps_path, O_RDONLY);
	if (fd < 0)
		return -1;
	while (n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) > 0)
		n += (size_t)r;
	close(fd);
	if (n == 0 || pp_maps_parse(buf, n, &m))
		return -1;
	for (size_t i = 0; i < m.n; i++) {
		if (strcmp(m.entries[i].path, path) == 0) {
			*out = m.entries[i];
			snprintf(pbuf, psize, "%s", m.entries[i].path);
			out->path = pbuf;
			found = 0;
			break;
		}
	}
	pp_maps_fini(&m);
	return found;
}

/* The same file as path? */
static int same_file(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

TEST(map_files_and_root_reach_the_mapped_file)
{
	char dir[PATH_MAX], lib[PATH_MAX + 16], secret[PATH_MAX + 16], pbuf[PATH_MAX];
	struct pp_map_entry e, stale;
	enum pp_mapped_via via;
	struct child c = {0};
	int fd;

	if (geteuid() != 0)
		SKIP("needs root to read another process's map_files");
	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-mapped") == 0);
	snprintf(lib, sizeof(lib), "%s/lib.so", dir);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	REQUIRE(pp_test_sh("head -c 8192 /bin/true > '%s' && echo secret > '%s' && chmod 600 '%s'",
			   lib, secret, secret) == 0);
	REQUIRE(child_mapping(&c, lib) == 0);
	REQUIRE(find_entry(c.pid, lib, &e, pbuf, sizeof(pbuf)) == 0);

	/* the very file, through map_files */
	fd = pp_mapped_file_open("/proc", (uint32_t)c.pid, &e, &via);
	REQUIRE(fd >= 0);
	CHECK_EQ_U64(via, PP_MAPPED_VIA_MAP_FILES);
	CHECK(same_file(fd, lib));
	close(fd);

	/* an entry whose range no longer exists: by its path in the root, identity checked */
	stale = e;
	stale.start = 0x1000;
	stale.end = 0x2000;
	fd = pp_mapped_file_open("/proc", (uint32_t)c.pid, &stale, &via);
	REQUIRE(fd >= 0);
	CHECK_EQ_U64(via, PP_MAPPED_VIA_ROOT);
	CHECK(same_file(fd, lib));
	close(fd);

	/* an entry naming another inode than the file: refused by the path */
	stale.inode = e.inode + 1;
	CHECK(pp_mapped_file_open("/proc", (uint32_t)c.pid, &stale, &via) == -ESTALE);
	CHECK_EQ_U64(via, PP_MAPPED_VIA_NONE);
	/* ... while map_files hands over the mapped file whatever the entry says */
	stale.start = e.start;
	stale.end = e.end;
	fd = pp_mapped_file_open("/proc", (uint32_t)c.pid, &stale, &via);
	REQUIRE(fd >= 0);
	CHECK_EQ_U64(via, PP_MAPPED_VIA_MAP_FILES);
	CHECK(same_file(fd, lib));
	close(fd);

	/* the path swapped for a link to another file: map_files still gives the mapped one */
	REQUIRE(pp_test_sh("mv '%s' '%s.moved' && ln -s '%s' '%s'", lib, lib, secret, lib) == 0);
	fd = pp_mapped_file_open("/proc", (uint32_t)c.pid, &e, &via);
	REQUIRE(fd >= 0);
	CHECK_EQ_U64(via, PP_MAPPED_VIA_MAP_FILES);
	{
		char moved[PATH_MAX + 32];

		snprintf(moved, sizeof(moved), "%s.moved", lib);
		CHECK(same_file(fd, moved));
	}
	close(fd);
	/* ... and by the path, the link leads to another inode: refused, the secret unopened */
	stale = e;
	stale.start = 0x1000;
	stale.end = 0x2000;
	CHECK(pp_mapped_file_open("/proc", (uint32_t)c.pid, &stale, &via) == -ESTALE);
	/* a FIFO there: refused at once, never blocking */
	REQUIRE(pp_test_sh("rm -f '%s' && mkfifo '%s'", lib, lib) == 0);
	alarm(10);
	CHECK(pp_mapped_file_open("/proc", (uint32_t)c.pid, &stale, &via) == -EINVAL);
	alarm(0);
	/* a deleted file: only map_files reaches it */
	stale.deleted = 1;
	CHECK(pp_mapped_file_open("/proc", (uint32_t)c.pid, &stale, &via) == -ENOENT);
	child_end(&c);
	/* the process gone: nothing */
	CHECK(pp_mapped_file_open("/proc", (uint32_t)c.pid, &e, &via) < 0);
}

TEST(refuses_what_is_not_a_file_mapping)
{
	struct pp_map_entry e = {.start = 0x1000, .end = 0x2000, .kind = PP_MAP_KIND_ANON};

	e.path = "";
	CHECK(pp_mapped_file_open(NULL, (uint32_t)getpid(), &e, NULL) == -EINVAL);
	e.kind = PP_MAP_KIND_FILE;
	e.path = "relative/path";
	CHECK(pp_mapped_file_open(NULL, (uint32_t)getpid(), &e, NULL) == -EINVAL);
	CHECK(pp_mapped_file_open(NULL, (uint32_t)getpid(), NULL, NULL) == -EINVAL);
}

/*
 * The name a mapping gives its file for a cache: the side-band's identity as it is; a maps
 * line's device and inode with its path's hash, bit 63 set, so it equals no side-band
 * generation and no other path's; none for a deleted file's line or a mapping without an inode.
 */
TEST(a_mapping_names_its_file_by_the_side_band_or_its_maps_line)
{
	struct pp_map_entry e = {.kind = PP_MAP_KIND_FILE,
				 .dev_major = 254,
				 .dev_minor = 1,
				 .inode = 4242,
				 .ino_generation = 0x9abcdef0,
				 .from_sideband = 1,
				 .path = "/usr/lib/libc.so.6"};
	struct pp_file_identity a, b;

	CHECK(pp_mapped_file_identity(&e, &a));
	CHECK(a.dev_major == 254 && a.dev_minor == 1 && a.inode == 4242);
	CHECK_EQ_U64(a.ino_generation, 0x9abcdef0);

	e.from_sideband = 0;
	e.ino_generation = 0;
	CHECK(pp_mapped_file_identity(&e, &a));
	CHECK(a.dev_major == 254 && a.dev_minor == 1 && a.inode == 4242);
	CHECK(a.ino_generation >> 63);
	e.path = "/usr/lib/libm.so.6";
	CHECK(pp_mapped_file_identity(&e, &b));
	CHECK(b.ino_generation >> 63 && b.ino_generation != a.ino_generation);

	e.deleted = 1;
	CHECK(!pp_mapped_file_identity(&e, &b));
	e.deleted = 0;
	e.inode = 0;
	CHECK(!pp_mapped_file_identity(&e, &b));
}

TEST_LIST = {
    {"map_files_and_root_reach_the_mapped_file", map_files_and_root_reach_the_mapped_file},
    {"refuses_what_is_not_a_file_mapping", refuses_what_is_not_a_file_mapping},
    {"a_mapping_names_its_file_by_the_side_band_or_its_maps_line",
     a_mapping_names_its_file_by_the_side_band_or_its_maps_line},
};

TEST_MAIN()
