/*
 * Tests of finding a path's file system in mountinfo text: the longest mount point wins, the
 * last of stacked mounts, escaped mount points, FUSE types; and this process's own /tmp
 * against what stat(1) says of it.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "process/mount_fs.h"

static const char fixture[] =
    "22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u\n"
    "23 22 0:22 / /proc rw,nosuid - proc proc rw\n"
    "30 22 0:30 / /tmp rw,nosuid,nodev shared:5 - tmpfs tmpfs rw\n"
    "31 30 0:31 / /tmp/fused rw,nosuid,nodev - fuse.sshfs host:/x rw,user_id=0\n"
    "32 30 0:32 / /tmp/my\\040dir rw - fuseblk /dev/sdb1 rw\n"
    "33 22 0:33 / /data rw - ext4 /dev/sda1 rw\n"
    "34 33 0:34 / /data rw - fuse /dev/fuse rw\n"
    "bad line without a separator\n"
    "35 22 0:35 / /tmpx rw - xfs /dev/sdc rw";

static const char *type_of(const char *path, char *buf, size_t size)
{
	return pp_mountinfo_fstype(fixture, sizeof(fixture) - 1, path, buf, size) ? "?" : buf;
}

TEST(longest_mount_point_wins)
{
	char t[32];

	CHECK_STR(type_of("/", t, sizeof(t)), "overlay");
	CHECK_STR(type_of("/usr/lib/libc.so.6", t, sizeof(t)), "overlay");
	CHECK_STR(type_of("/tmp/perf-12.map", t, sizeof(t)), "tmpfs");
	CHECK_STR(type_of("/tmp", t, sizeof(t)), "tmpfs");
	CHECK_STR(type_of("/tmpx/perf-1.map", t, sizeof(t)), "xfs"); /* not under /tmp */
	CHECK_STR(type_of("/tmp/fused/perf-7.map", t, sizeof(t)), "fuse.sshfs");
	CHECK_STR(type_of("/tmp/my dir/a", t, sizeof(t)), "fuseblk"); /* \040 is a space */
	CHECK_STR(type_of("/data/x", t, sizeof(t)), "fuse");	      /* stacked: the last */
	CHECK(pp_mountinfo_fstype(fixture, sizeof(fixture) - 1, "relative", t, sizeof(t)) ==
	      -EINVAL);
	CHECK(pp_mountinfo_fstype("", 0, "/tmp", t, sizeof(t)) == -ENOENT);
}

TEST(fuse_types)
{
	CHECK(pp_fstype_is_fuse("fuse"));
	CHECK(pp_fstype_is_fuse("fuseblk"));
	CHECK(pp_fstype_is_fuse("fuse.sshfs"));
	CHECK(!pp_fstype_is_fuse("fusectl"));
	CHECK(!pp_fstype_is_fuse("tmpfs"));
}

TEST(own_tmp_matches_stat)
{
	char want[64] = "", cmd[128];
	FILE *p;
	int on;

	snprintf(cmd, sizeof(cmd), "stat -f -c %%T /tmp 2>/dev/null");
	p = popen(cmd, "r");
	REQUIRE(p);
	if (!fgets(want, sizeof(want), p))
		want[0] = '\0';
	pclose(p);
	on = pp_proc_path_on_fuse(NULL, (uint32_t)getpid(), "/tmp/perf-1.map");
	REQUIRE(on >= 0);
	CHECK_EQ_U64(on, strncmp(want, "fuse", 4) == 0);
	CHECK(pp_proc_path_on_fuse("/nonexistent", 1, "/tmp") < 0);
}

TEST_LIST = {
    {"longest_mount_point_wins", longest_mount_point_wins},
    {"fuse_types", fuse_types},
    {"own_tmp_matches_stat", own_tmp_matches_stat},
};

TEST_MAIN()
