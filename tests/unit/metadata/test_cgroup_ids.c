/*
 * Tests of the cgroup id table: the mountinfo cgroup2 finder on real mountinfo texts (plain
 * v2, hybrid with /sys/fs/cgroup/unified, a container with a bound host hierarchy) and edge
 * cases; the table's walk, rate limit, LRU bound and sweep on a plain directory tree (the walk
 * only needs inode numbers); and, as root, real cgroup v2 directories whose ids (st_ino, the
 * name_to_handle_at handle, and the cgroup of a process moved into one) resolve to the path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metadata/cgroup_ids.h"
#include "check.h"

#define CORPUS PP_TEST_DATA_DIR "/../fuzz/corpus/mountinfo/"
#define CGROUP2_MAGIC 0x63677270

static int find_str(const char *s, char *out, size_t outlen)
{
	return pp_mountinfo_find_cgroup2(s, strlen(s), out, outlen);
}

static int find_file(const char *name, char *out, size_t outlen)
{
	char path[512], buf[16384];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), CORPUS "%s", name);
	f = fopen(path, "rb");
	if (!f)
		return -1000;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	/* An exact-size heap copy so ASan sees any read past len. */
	char *copy = malloc(n ? n : 1);
	if (!copy)
		return -1001;
	memcpy(copy, buf, n);
	int rc = pp_mountinfo_find_cgroup2(copy, n, out, outlen);
	free(copy);
	return rc;
}

TEST(mountinfo_corpus)
{
	char out[256];

	CHECK_EQ_U64(find_file("plain_v2", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup");
	CHECK_EQ_U64(find_file("hybrid", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/unified");
	/* The container's own view binds a subtree; the host hierarchy (root "/") wins. */
	CHECK_EQ_U64(find_file("container", out, sizeof(out)), 0);
	CHECK_STR(out, "/host/sys/fs/cgroup");
	CHECK_EQ_U64(find_file("escaped_noeol", out, sizeof(out)), 0);
	CHECK_STR(out, "/mnt/my cgroup\\x");
	CHECK_EQ_U64(find_file("v1_only", out, sizeof(out)), (uint64_t)-ENOENT);
}

TEST(mountinfo_cases)
{
	char out[64], small[8];

	CHECK_EQ_U64(find_str("", out, sizeof(out)), (uint64_t)-ENOENT);
	CHECK_EQ_U64(pp_mountinfo_find_cgroup2(NULL, 0, out, sizeof(out)), (uint64_t)-ENOENT);
	CHECK_EQ_U64(pp_mountinfo_find_cgroup2("x", 1, NULL, 4), (uint64_t)-EINVAL);
	CHECK_EQ_U64(pp_mountinfo_find_cgroup2("x", 1, out, 0), (uint64_t)-EINVAL);
	/* v1 "cgroup" is not cgroup2, nor is "cgroup2" as the source or an option. */
	CHECK_EQ_U64(find_str("1 2 0:1 / /a rw - cgroup cgroup2 cgroup2\n", out, sizeof(out)),
		     (uint64_t)-ENOENT);
	CHECK_EQ_U64(find_str("1 2 0:1 / /a rw - cgroup2x none rw\n", out, sizeof(out)),
		     (uint64_t)-ENOENT);
	/* No separator: the fields are not trusted. */
	CHECK_EQ_U64(find_str("1 2 0:1 / /a rw cgroup2 none rw\n", out, sizeof(out)),
		     (uint64_t)-ENOENT);
	/* Optional fields before the separator; several spaces between fields. */
	CHECK_EQ_U64(
	    find_str("1 2 0:1 / /cg rw shared:4 master:1  -  cgroup2 none rw", out, sizeof(out)),
	    0);
	CHECK_STR(out, "/cg");
	/* A cut-off line ("cgroup" of "cgroup2") must not match, whatever follows len. */
	{
		const char *s = "1 2 0:1 / /cg rw - cgroup2 none rw\n";

		CHECK_EQ_U64(pp_mountinfo_find_cgroup2(s, strlen("1 2 0:1 / /cg rw - cgroup"), out,
						       sizeof(out)),
			     (uint64_t)-ENOENT);
		CHECK_EQ_U64(pp_mountinfo_find_cgroup2(s, strlen("1 2 0:1 / /cg rw - cgroup2"), out,
						       sizeof(out)),
			     0);
		CHECK_STR(out, "/cg");
	}
	/* Too small for the path; an escape cut short stays literal. */
	CHECK_EQ_U64(find_str("1 2 0:1 / /sys/fs/cgroup rw - cgroup2 c rw\n", small, sizeof(small)),
		     (uint64_t)-ENAMETOOLONG);
	CHECK_EQ_U64(find_str("1 2 0:1 / /a\\04 rw - cgroup2 c rw\n", out, sizeof(out)), 0);
	CHECK_STR(out, "/a\\04");
	CHECK_EQ_U64(find_str("1 2 0:1 / /a\\011b\\012 rw - cgroup2 c rw\n", out, sizeof(out)), 0);
	CHECK_STR(out, "/a\tb\n");
	/* "\400" is no byte; a mount point decoding to a NUL is skipped. */
	CHECK_EQ_U64(find_str("1 2 0:1 / /a\\400 rw - cgroup2 c rw\n", out, sizeof(out)), 0);
	CHECK_STR(out, "/a\\400");
	CHECK_EQ_U64(find_str("1 2 0:1 / /a\\000 rw - cgroup2 c rw\n", out, sizeof(out)),
		     (uint64_t)-ENOENT);
	/* First full-root mount wins over an earlier subtree bind and a later full one. */
	CHECK_EQ_U64(find_str("1 2 0:1 /sub /a rw - cgroup2 c rw\n"
			      "3 2 0:1 / /b rw - cgroup2 c rw\n"
			      "4 2 0:1 / /c rw - cgroup2 c rw\n",
			      out, sizeof(out)),
		     0);
	CHECK_STR(out, "/b");
	CHECK_EQ_U64(find_str("1 2 0:1 /sub /a rw - cgroup2 c rw\n", out, sizeof(out)), 0);
	CHECK_STR(out, "/a");
}

/* ---- table on a plain directory tree ---- */

struct fake_clock {
	uint64_t ns;
};

static uint64_t fake_now(void *ctx)
{
	return ((struct fake_clock *)ctx)->ns;
}

static uint64_t ino_of(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) != 0)
		return 0;
	return (uint64_t)sb.st_ino;
}

static int mkdirf(const char *base, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s%s", base, rel);
	return mkdir(p, 0755);
}

static uint64_t inof(const char *base, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s%s", base, rel);
	return ino_of(p);
}

static void rmdirf(const char *base, const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s%s", base, rel);
	rmdir(p);
}

/* cgroup v1 hierarchies (filesystem type "cgroup", not "cgroup2") tell a hybrid host. */
TEST(mountinfo_cgroup1)
{
	const char *v2only = "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
	const char *hybrid = "25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs ro,mode=755\n"
			     "26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
			     "27 25 0:24 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup "
			     "cgroup rw,memory\n";
	/* "cgroup" in a mount point or as the source is not the filesystem type. */
	const char *lookalike = "30 25 0:40 / /mnt/cgroup rw - tmpfs cgroup rw\n";

	CHECK_EQ_U64(pp_mountinfo_has_cgroup1(v2only, strlen(v2only)), 0);
	CHECK_EQ_U64(pp_mountinfo_has_cgroup1(hybrid, strlen(hybrid)), 1);
	CHECK_EQ_U64(pp_mountinfo_has_cgroup1(lookalike, strlen(lookalike)), 0);
	CHECK_EQ_U64(pp_mountinfo_has_cgroup1(hybrid, 40), 0); /* cut before the v1 line */
	CHECK_EQ_U64(pp_mountinfo_has_cgroup1(NULL, 0), 0);
}

TEST(table_on_tree)
{
	char base[] = "/tmp/pp-cgid-XXXXXX";
	static const char *const dirs[] = {"/a", "/a/b", "/a/b/c", "/d", "/d/e f"};
	struct fake_clock clk = {.ns = 1000};
	struct pp_cgroup_ids_opts o = {0};
	struct pp_cgroup_ids_stats st;
	struct pp_cgroup_ids *c;
	char file[600];
	int fd;

	REQUIRE(mkdtemp(base) != NULL);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		REQUIRE(mkdirf(base, dirs[i]) == 0);
	/* A regular file is not a cgroup. */
	snprintf(file, sizeof(file), "%s/a/cgroup.procs", base);
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	REQUIRE(fd >= 0);
	close(fd);

	o.cgroup2_root = base;
	o.max_entries = 4;
	o.now_ns = fake_now;
	o.clock_ctx = &clk;
	c = pp_cgroup_ids_new_opts(&o);
	REQUIRE(c != NULL);
	CHECK_STR(pp_cgroup_ids_root(c), base);

	/* First miss walks; the tree has 6 directories but only 4 fit. */
	CHECK_STR(pp_cgroup_ids_lookup(c, inof(base, "/a/b/c")), "/a/b/c");
	pp_cgroup_ids_stats(c, &st);
	CHECK_EQ_U64(st.walks, 1);
	CHECK_EQ_U64(st.misses, 1);
	CHECK_EQ_U64(st.entries, 4);
	CHECK_EQ_U64(st.walk_errors, 0);
	CHECK_STR(pp_cgroup_ids_lookup(c, inof(base, "/a/b/c")), "/a/b/c");
	CHECK_STR(pp_cgroup_ids_lookup(c, ino_of(base)), "/");
	pp_cgroup_ids_stats(c, &st);
	CHECK_EQ_U64(st.hits, 2);

	/* A file's inode is never an answer; the second miss within 1 s does not walk. */
	CHECK(pp_cgroup_ids_lookup(c, ino_of(file)) == NULL);
	pp_cgroup_ids_stats(c, &st);
	CHECK_EQ_U64(st.walks, 1);
	clk.ns += 2000000000ull;
	CHECK(pp_cgroup_ids_lookup(c, ino_of(file)) == NULL);
	pp_cgroup_ids_stats(c, &st);
	CHECK_EQ_U64(st.walks, 2);

	/* A cgroup made after a walk: unknown until the gap has passed. */
	REQUIRE(mkdirf(base, "/d/new") == 0);
	clk.ns += 500000000ull;
	CHECK(pp_cgroup_ids_lookup(c, inof(base, "/d/new")) == NULL);
	pp_cgroup_ids_stats(c, &st);
	CHECK_EQ_U64(st.walks, 2);
	clk.ns += 600000000ull;
	CHECK_STR(pp_cgroup_ids_lookup(c, inof(base, "/d/e f")), "/d/e f");
	clk.ns += 1100000000ull;
	CHECK_STR(pp_cgroup_ids_lookup(c, inof(base, "/d/new")), "/d/new");
	pp_cgroup_ids_stats(c, &st);
	CHECK(st.evictions >= 1);
	CHECK(st.entries <= 4);
	/* Most recently used entries survive the eviction. */
	CHECK_STR(pp_cgroup_ids_lookup(c, inof(base, "/d/new")), "/d/new");

	/* A removed cgroup is swept by the next full walk. */
	uint64_t gone = inof(base, "/d/new");
	uint64_t hits_before;

	REQUIRE(rmdir(strcat(strcpy(file, base), "/d/new")) == 0);
	clk.ns += 2000000000ull;
	CHECK_STR(pp_cgroup_ids_lookup(c, inof(base, "/a")), "/a");
	pp_cgroup_ids_stats(c, &st);
	hits_before = st.hits;
	clk.ns += 10;
	CHECK(pp_cgroup_ids_lookup(c, gone) == NULL);
	pp_cgroup_ids_stats(c, &st);
	CHECK_EQ_U64(st.hits, hits_before);
	pp_cgroup_ids_free(c);

	/* Construction errors. */
	errno = 0;
	CHECK(pp_cgroup_ids_new(base, 0) == NULL && errno == EINVAL);
	o.cgroup2_root = NULL;
	o.proc_root = "/nonexistent-proc";
	errno = 0;
	CHECK(pp_cgroup_ids_new_opts(&o) == NULL && errno == ENOENT);
	pp_cgroup_ids_free(NULL);

	snprintf(file, sizeof(file), "%s/a/cgroup.procs", base);
	unlink(file);
	for (size_t i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;)
		rmdirf(base, dirs[i]);
	CHECK(rmdir(base) == 0);
}

TEST(proc_root_mountinfo)
{
	char base[] = "/tmp/pp-cgid-proc-XXXXXX";
	char p[256];
	FILE *f;
	struct pp_cgroup_ids_opts o = {0};
	struct pp_cgroup_ids *c;

	REQUIRE(mkdtemp(base) != NULL);
	snprintf(p, sizeof(p), "%s/self", base);
	REQUIRE(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/self/mountinfo", base);
	f = fopen(p, "w");
	REQUIRE(f != NULL);
	fprintf(f, "1 2 0:1 / / rw - ext4 /dev/x rw\n5 1 0:9 / %s/\\040cg rw - cgroup2 c rw\n",
		base);
	fclose(f);
	o.proc_root = base;
	o.max_entries = 8;
	c = pp_cgroup_ids_new_opts(&o);
	CHECK(c != NULL);
	if (c) {
		snprintf(p, sizeof(p), "%s/ cg", base);
		CHECK_STR(pp_cgroup_ids_root(c), p);
	}
	pp_cgroup_ids_free(c);
	snprintf(p, sizeof(p), "%s/self/mountinfo", base);
	unlink(p);
	snprintf(p, sizeof(p), "%s/self", base);
	rmdir(p);
	CHECK(rmdir(base) == 0);
}

/* ---- real cgroup v2 ---- */

static uint64_t handle_id(const char *path)
{
	struct {
		struct file_handle fh;
		unsigned char data[16];
	} h;
	int mnt;
	uint64_t id = 0;

	memset(&h, 0, sizeof(h));
	h.fh.handle_bytes = sizeof(h.data);
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mnt, 0) != 0 || h.fh.handle_bytes != 8)
		return 0;
	memcpy(&id, h.fh.f_handle, 8);
	return id;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	n = n < 0 ? -errno : 0;
	close(fd);
	return (int)n;
}

/* The "0::" path of /proc/pid/cgroup into out; 0 or -1. */
static int proc_cgroup_v2(pid_t pid, char *out, size_t outlen)
{
	char p[64], line[4096];
	FILE *f;
	int rc = -1;

	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	f = fopen(p, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, outlen, "%s", line + 3);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

static void rmdir_retry(const char *path)
{
	for (int i = 0; i < 50; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return;
		usleep(20000); /* a reaped task leaves its cgroup a moment later */
	}
	fprintf(stderr, "  could not remove %s: %s\n", path, strerror(errno));
}

TEST(real_cgroup2)
{
	struct fake_clock clk = {.ns = 1};
	struct pp_cgroup_ids_opts o = {0};
	struct pp_cgroup_ids *c;
	struct statfs sfs;
	char top[512], mid[600], leaf[700], procs[800], rel[512], cg[4096], path[4200];
	char pidbuf[32];
	pid_t child;
	uint64_t id;

	if (geteuid() != 0)
		SKIP("needs root to create cgroups");
	o.max_entries = 4096;
	o.now_ns = fake_now;
	o.clock_ctx = &clk;
	c = pp_cgroup_ids_new_opts(&o);
	if (!c)
		SKIP("no cgroup2 filesystem mounted (mountinfo)");
	if (statfs(pp_cgroup_ids_root(c), &sfs) != 0 || (uint64_t)sfs.f_type != CGROUP2_MAGIC) {
		pp_cgroup_ids_free(c);
		SKIP("the mountinfo cgroup2 mount point is not cgroup2");
	}
	fprintf(stderr, "  cgroup2 root: %s\n", pp_cgroup_ids_root(c));

	snprintf(rel, sizeof(rel), "/pp-test-%d", (int)getpid());
	snprintf(top, sizeof(top), "%s%s", pp_cgroup_ids_root(c), rel);
	snprintf(mid, sizeof(mid), "%s/kubepods.slice", top);
	snprintf(leaf, sizeof(leaf), "%s/x.scope", mid);
	if (mkdir(top, 0755) != 0) {
		pp_cgroup_ids_free(c);
		SKIP("cannot create a cgroup under the cgroup2 root");
	}
	CHECK(mkdir(mid, 0755) == 0);
	CHECK(mkdir(leaf, 0755) == 0);

	/* st_ino and the file handle are the same id, and it resolves to the path. */
	id = ino_of(leaf);
	CHECK(id != 0);
	CHECK_EQ_U64(handle_id(leaf), id);
	snprintf(path, sizeof(path), "%s/kubepods.slice/x.scope", rel);
	CHECK_STR(pp_cgroup_ids_lookup(c, id), path);
	snprintf(path, sizeof(path), "%s/kubepods.slice", rel);
	CHECK_STR(pp_cgroup_ids_lookup(c, handle_id(mid)), path);
	CHECK_STR(pp_cgroup_ids_lookup(c, ino_of(pp_cgroup_ids_root(c))), "/");

	/* A process moved into the leaf: its cgroup, as the kernel reports it, has that id. */
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)child);
	CHECK(write_str(procs, pidbuf) == 0);
	if (proc_cgroup_v2(child, cg, sizeof(cg)) == 0) {
		snprintf(path, sizeof(path), "%s/kubepods.slice/x.scope", rel);
		/* Our own cgroup must be the namespace root for the paths to line up. */
		char self[4096];

		if (proc_cgroup_v2(getpid(), self, sizeof(self)) == 0 && strcmp(self, "/") == 0) {
			CHECK_STR(cg, path);
		} else {
			fprintf(stderr, "  note: own cgroup %s, /proc path not compared\n", self);
		}
		char from_proc[4600];

		snprintf(from_proc, sizeof(from_proc), "%s%s", pp_cgroup_ids_root(c), path);
		CHECK_EQ_U64(handle_id(from_proc), id);
		CHECK_STR(pp_cgroup_ids_lookup(c, handle_id(from_proc)), path);
	} else {
		CHECK(!"no 0:: line in /proc/<child>/cgroup");
	}

	/* A cgroup created later resolves after the rate-limit gap. */
	char late[800];

	snprintf(late, sizeof(late), "%s/late.scope", mid);
	CHECK(mkdir(late, 0755) == 0);
	clk.ns += 100;
	CHECK(pp_cgroup_ids_lookup(c, ino_of(late)) == NULL);
	clk.ns += 2000000000ull;
	snprintf(path, sizeof(path), "%s/kubepods.slice/late.scope", rel);
	CHECK_STR(pp_cgroup_ids_lookup(c, ino_of(late)), path);

	struct pp_cgroup_ids_stats st;

	pp_cgroup_ids_stats(c, &st);
	CHECK(st.walks == 2);
	CHECK(st.hits >= 2);

	/* Cleanup: back to the root cgroup, reap, remove deepest first. */
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", pp_cgroup_ids_root(c));
	write_str(procs, pidbuf);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	rmdir_retry(late);
	rmdir_retry(leaf);
	rmdir_retry(mid);
	rmdir_retry(top);
	CHECK(access(top, F_OK) != 0);
	pp_cgroup_ids_free(c);
}

TEST_LIST = {
    {"mountinfo_cgroup1", mountinfo_cgroup1},	  {"mountinfo_corpus", mountinfo_corpus},
    {"mountinfo_cases", mountinfo_cases},	  {"table_on_tree", table_on_tree},
    {"proc_root_mountinfo", proc_root_mountinfo}, {"real_cgroup2", real_cgroup2},
};
TEST_MAIN()
