/*
 * cgroup_level: the depth of cgroup paths, the cgroup2 mount from a mountinfo under a test
 * root, and id/level of real directories (this machine's cgroup2 mount where there is one).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metadata/cgroup_ids.h"
#include "metadata/cgroup_level.h"
#include "check.h"

static uint32_t level_of(const char *s)
{
	uint32_t l = 12345;

	if (pp_cgroup_rel_level(s, strlen(s), &l))
		return 9999;
	return l;
}

TEST(rel_level)
{
	uint32_t l;

	CHECK_EQ_U64(level_of(""), 0);
	CHECK_EQ_U64(level_of("/"), 0);
	CHECK_EQ_U64(level_of("//./"), 0);
	CHECK_EQ_U64(level_of("/kubepods.slice"), 1);
	CHECK_EQ_U64(level_of("kubepods.slice/"), 1);
	CHECK_EQ_U64(level_of("/kubepods.slice/kubepods-burstable.slice/"
			      "kubepods-burstable-pod1234.slice/cri-containerd-abcd.scope"),
		     4);
	CHECK_EQ_U64(level_of("/a//b/./c"), 3);
	CHECK_EQ_U64(level_of("/a/.../b"), 3); /* "..." is a name, not a parent step */
	CHECK(pp_cgroup_rel_level("/a/../b", 7, &l) == -EINVAL);
	CHECK(pp_cgroup_rel_level("..", 2, &l) == -EINVAL);
	CHECK(pp_cgroup_rel_level(NULL, 0, &l) == 0 && l == 0);
	CHECK(pp_cgroup_rel_level(NULL, 3, &l) == -EINVAL);
	/* Only len bytes are read: the rest of the buffer would add levels. */
	CHECK(pp_cgroup_rel_level("/a/b/c/d", 4, &l) == 0 && l == 2);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return;
	fputs(text, f);
	fclose(f);
}

TEST(mount_from_mountinfo)
{
	char dir[] = "/tmp/pp-cglevel-XXXXXX", path[PATH_MAX], out[PATH_MAX];

	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/self", dir);
	REQUIRE(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/self/mountinfo", dir);
	/* A hybrid host: cgroup v1 controllers plus the unified hierarchy. */
	write_file(path, "25 30 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n"
			 "26 25 0:23 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755\n"
			 "27 26 0:24 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw\n"
			 "28 26 0:25 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu\n");
	CHECK(pp_cgroup2_mount(dir, out, sizeof(out)) == 0);
	CHECK_STR(out, "/sys/fs/cgroup/unified");
	CHECK(pp_cgroup2_mount(dir, out, 8) == -ENAMETOOLONG);
	write_file(path, "25 30 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n");
	CHECK(pp_cgroup2_mount(dir, out, sizeof(out)) == -ENOENT);
	unlink(path);
	CHECK(pp_cgroup2_mount(dir, out, sizeof(out)) == -ENOENT);
	snprintf(path, sizeof(path), "%s/self", dir);
	rmdir(path);
	rmdir(dir);
}

TEST(not_a_cgroup)
{
	char dir[] = "/tmp/pp-cglevel-XXXXXX", sub[PATH_MAX];
	uint64_t id;
	uint32_t level;

	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(sub, sizeof(sub), "%s/a", dir);
	REQUIRE(mkdir(sub, 0755) == 0);
	/* A directory tree that is not cgroup2: right depth, but refused. */
	CHECK(pp_cgroup_id_level(dir, sub, &id, &level) == -EXDEV);
	CHECK(pp_cgroup_id_level(dir, "/a", &id, &level) == -EXDEV);
	CHECK(pp_cgroup_id_level(dir, "/missing", &id, &level) == -ENOENT);
	rmdir(sub);
	rmdir(dir);
}

TEST(real_cgroup2)
{
	char mnt[PATH_MAX];
	struct stat st;
	uint64_t id, id2;
	uint32_t level;
	int fd;

	if (pp_cgroup2_mount(NULL, mnt, sizeof(mnt)))
		SKIP("no cgroup2 mounted here");
	if (stat(mnt, &st))
		SKIP("cgroup2 mount not reachable");
	REQUIRE(pp_cgroup_id_level(NULL, mnt, &id, &level) == 0);
	CHECK_EQ_U64(level, 0);
	/* The root cgroup's kernfs id is 1 (its inode number too). */
	CHECK_EQ_U64(id, 1);
	CHECK(pp_cgroup_id_level(NULL, "/", &id2, &level) == 0);
	CHECK_EQ_U64(id2, id);
	CHECK_EQ_U64(level, 0);
	fd = open(mnt, O_RDONLY | O_DIRECTORY);
	REQUIRE(fd >= 0);
	CHECK(pp_cgroup_fd_id(fd, &id2) == 0);
	CHECK_EQ_U64(id2, id);
	close(fd);
}

TEST_LIST = {
    {"rel_level", rel_level},
    {"mount_from_mountinfo", mount_from_mountinfo},
    {"not_a_cgroup", not_a_cgroup},
    {"real_cgroup2", real_cgroup2},
};
TEST_MAIN()
