/*
 * The on-disk table cache: a table kept is read back whole; a miss, a torn or altered file,
 * a link planted at a table's name and a table too big for the bound each do what
 * table_cache.h says, counted; the bound removes the least recently used (a read counts as a
 * use); a directory others may write is refused; temporary files an agent left behind go.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testsh.h"
#include "cfi/unwind_table.h"
#include "unwind/table_cache.h"

/* A table of n rows, its rules varied by seed, so that each encodes to its own bytes. */
static struct pp_unwind_table *synthetic(size_t n, int seed)
{
	struct pp_unwind_row *rows = calloc(n, sizeof(*rows));
	struct pp_unwind_table *t;

	if (!rows)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		rows[i].pc = 0x1000 + 16 * i;
		rows[i].cfa_rule = PP_CFA_RSP;
		rows[i].cfa_off = 8 + 8 * (int32_t)((i + (size_t)seed) % 7);
		rows[i].ra_rule = PP_REG_AT_CFA;
		rows[i].ra_off = -8;
	}
	t = pp_unwind_table_from_rows(rows, n);
	free(rows);
	return t;
}

static void digest_of_seed(int seed, uint8_t d[PP_UNWIND_DIGEST_SIZE])
{
	memset(d, 0, PP_UNWIND_DIGEST_SIZE);
	d[0] = (uint8_t)seed;
	d[31] = 0xa5;
}

static void name_of(const char *dir, int seed, char *out, size_t size)
{
	uint8_t d[PP_UNWIND_DIGEST_SIZE];
	size_t n;

	digest_of_seed(seed, d);
	n = (size_t)snprintf(out, size, "%s/", dir);
	for (int i = 0; i < PP_UNWIND_DIGEST_SIZE; i++)
		n += (size_t)snprintf(out + n, size - n, "%02x", d[i]);
	snprintf(out + n, size - n, ".uwt");
}

static int same_rows(const struct pp_unwind_table *a, const struct pp_unwind_table *b)
{
	size_t n = pp_unwind_table_count(a);

	if (!a || !b || n != pp_unwind_table_count(b))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (pp_unwind_table_row_pc(a, i) != pp_unwind_table_row_pc(b, i) ||
		    pp_unwind_table_row_rule(a, i) != pp_unwind_table_row_rule(b, i))
			return 0;
	return 1;
}

static int set_age(const char *path, int seconds_ago)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= seconds_ago;
	ts[1] = ts[0];
	return utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
}

TEST(kept_tables_come_back_and_damage_is_removed)
{
	char root[512], dir[600], path[700], target[700];
	struct pp_table_cache_stats st;
	struct pp_table_cache *c;
	struct pp_unwind_table *t = synthetic(1000, 1), *back;
	uint8_t d1[PP_UNWIND_DIGEST_SIZE], d2[PP_UNWIND_DIGEST_SIZE];
	struct stat sb;

	REQUIRE(t != NULL);
	REQUIRE(pp_test_scratch_dir(root, sizeof(root), "pp-table-cache") == 0);
	snprintf(dir, sizeof(dir), "%s/state/tables", root); /* its parent made too */
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir});
	REQUIRE(c != NULL);
	CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);
	digest_of_seed(1, d1);
	digest_of_seed(2, d2);
	CHECK(pp_table_cache_get(c, d1) == NULL);
	CHECK(pp_table_cache_put(c, d1, t) == 0);
	back = pp_table_cache_get(c, d1);
	CHECK(same_rows(t, back));
	pp_unwind_table_free(back);
	CHECK(pp_table_cache_get(c, d2) == NULL); /* another digest: a miss */

	/* torn: cut short */
	name_of(dir, 1, path, sizeof(path));
	REQUIRE(truncate(path, 100) == 0);
	CHECK(pp_table_cache_get(c, d1) == NULL);
	CHECK(access(path, F_OK) != 0);
	/* the right bytes under the wrong name: refused too (the digest is inside) */
	CHECK(pp_table_cache_put(c, d1, t) == 0);
	name_of(dir, 2, target, sizeof(target));
	REQUIRE(rename(path, target) == 0);
	CHECK(pp_table_cache_get(c, d2) == NULL);
	CHECK(access(target, F_OK) != 0);
	/* a link planted at a table's name: removed, what it pointed at untouched */
	snprintf(target, sizeof(target), "%s/elsewhere", root);
	REQUIRE(pp_test_sh("printf keep > '%s' && ln -s '%s' '%s'", target, target, path) == 0);
	CHECK(pp_table_cache_get(c, d1) == NULL);
	CHECK(access(path, F_OK) != 0 && access(target, F_OK) == 0);

	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.hits, 1);
	CHECK_EQ_U64(st.stored, 2);
	CHECK_EQ_U64(st.refused, 3);
	CHECK_EQ_U64(st.failed, 0);
	CHECK(st.misses >= 2);
	pp_table_cache_free(c);
	pp_unwind_table_free(t);
}

TEST(the_bound_removes_the_least_recently_used)
{
	char root[512], dir[600], path[700];
	struct pp_unwind_table *t[6];
	struct pp_table_cache_stats st;
	struct pp_table_cache *c;
	uint8_t d[PP_UNWIND_DIGEST_SIZE];
	uint64_t one;

	REQUIRE(pp_test_scratch_dir(root, sizeof(root), "pp-table-cache") == 0);
	snprintf(dir, sizeof(dir), "%s/tables", root);
	for (int i = 0; i < 6; i++)
		REQUIRE((t[i] = synthetic(10000, i)) != NULL);
	/* the size of one file: the bound holds four */
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir});
	REQUIRE(c != NULL);
	digest_of_seed(0, d);
	REQUIRE(pp_table_cache_put(c, d, t[0]) == 0);
	pp_table_cache_get_stats(c, &st);
	one = st.bytes;
	pp_table_cache_free(c);
	c = pp_table_cache_new(
	    &(struct pp_table_cache_opts){.dir = dir, .max_bytes = 4 * one + 10});
	REQUIRE(c != NULL);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.bytes, one); /* counted from the directory at start */
	for (int i = 1; i < 4; i++) {
		digest_of_seed(i, d);
		REQUIRE(pp_table_cache_put(c, d, t[i]) == 0);
	}
	/* ages 40, 30, 20, 10 s; then table 0, the oldest, is used */
	for (int i = 0; i < 4; i++) {
		name_of(dir, i, path, sizeof(path));
		REQUIRE(set_age(path, 40 - 10 * i) == 0);
	}
	digest_of_seed(0, d);
	pp_unwind_table_free(pp_table_cache_get(c, d));
	digest_of_seed(4, d);
	REQUIRE(pp_table_cache_put(c, d, t[4]) == 0);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.trimmed, 1);
	CHECK(st.bytes <= 4 * one + 10);
	for (int i = 0; i < 5; i++) {
		name_of(dir, i, path, sizeof(path));
		/* table 1 was the least recently used */
		CHECK((access(path, F_OK) == 0) == (i != 1));
	}
	pp_table_cache_free(c);

	/* a table over half the bound is not kept: it would push out most of the rest */
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .max_bytes = one + 10});
	REQUIRE(c != NULL);
	digest_of_seed(5, d);
	CHECK(pp_table_cache_put(c, d, t[5]) == -EFBIG);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.failed, 0);
	pp_table_cache_free(c);
	for (int i = 0; i < 6; i++)
		pp_unwind_table_free(t[i]);
}

TEST(a_directory_others_may_write_is_refused)
{
	char root[512], dir[600], link[600], tmp[700];
	struct pp_table_cache *c;

	REQUIRE(pp_test_scratch_dir(root, sizeof(root), "pp-table-cache") == 0);
	snprintf(dir, sizeof(dir), "%s/open", root);
	REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
	errno = 0;
	CHECK(pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir}) == NULL &&
	      errno == EPERM);
	REQUIRE(chmod(dir, 0700) == 0);
	snprintf(link, sizeof(link), "%s/link", root);
	REQUIRE(symlink(dir, link) == 0);
	CHECK(pp_table_cache_new(&(struct pp_table_cache_opts){.dir = link}) == NULL);
	CHECK(pp_table_cache_new(&(struct pp_table_cache_opts){.dir = ""}) == NULL &&
	      errno == EINVAL);

	/* a temporary file left 20 minutes ago goes at start, one being written now stays */
	snprintf(tmp, sizeof(tmp), "%s/tmp.1.0", dir);
	REQUIRE(pp_test_sh("printf x > '%s' && printf y > '%s/tmp.2.0'", tmp, dir) == 0);
	REQUIRE(set_age(tmp, 1200) == 0);
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir});
	REQUIRE(c != NULL);
	CHECK(access(tmp, F_OK) != 0);
	snprintf(tmp, sizeof(tmp), "%s/tmp.2.0", dir);
	CHECK(access(tmp, F_OK) == 0);
	pp_table_cache_free(c);
}

/* The stat of a file that last changed ago_s seconds ago, on device dev, inode ino. */
static struct stat file_stat(uint64_t dev, uint64_t ino, int64_t size, int ago_s)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_dev = (dev_t)dev;
	st.st_ino = (ino_t)ino;
	st.st_size = (off_t)size;
	st.st_ctim.tv_sec = time(NULL) - ago_s;
	st.st_ctim.tv_nsec = 123456789;
	return st;
}

/*
 * A file's digest noted at one start is known at the next (same boot, same compiler) while the
 * file is unchanged: any other ctime, size or inode is another file. A digest taken within
 * PP_TABLE_IDENTITY_SETTLED_S of the file's change is not trusted. Another boot's identities
 * are forgotten; damaged records are skipped, the others kept.
 */
TEST(identities_give_digests_back_at_the_next_start)
{
	char root[512], dir[600], path[700];
	struct pp_table_cache_stats st;
	struct pp_table_cache *c;
	uint8_t d1[PP_UNWIND_DIGEST_SIZE], d2[PP_UNWIND_DIGEST_SIZE], got[PP_UNWIND_DIGEST_SIZE];
	struct stat old = file_stat(0x801, 4242, 65536, 3600), fresh = file_stat(0x801, 77, 100, 0);
	struct stat other;

	REQUIRE(pp_test_scratch_dir(root, sizeof(root), "pp-table-ids") == 0);
	snprintf(dir, sizeof(dir), "%s/tables", root);
	snprintf(path, sizeof(path), "%s/identities", dir);
	digest_of_seed(1, d1);
	digest_of_seed(2, d2);
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-a"});
	REQUIRE(c != NULL);
	CHECK(pp_table_cache_digest_of(c, &old, got) == -ENOENT);
	pp_table_cache_note_digest(c, &old, d1);
	pp_table_cache_note_digest(c, &fresh, d2);
	CHECK(pp_table_cache_digest_of(c, &old, got) == 0 && !memcmp(got, d1, sizeof(got)));
	pp_table_cache_free(c);

	/* the next start */
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-a"});
	REQUIRE(c != NULL);
	memset(got, 0, sizeof(got));
	CHECK(pp_table_cache_digest_of(c, &old, got) == 0 && !memcmp(got, d1, sizeof(got)));
	CHECK(pp_table_cache_digest_of(c, &fresh, got) == -ENOENT); /* changed as it was read */
	other = old;
	other.st_ctim.tv_nsec++;
	CHECK(pp_table_cache_digest_of(c, &other, got) == -ENOENT);
	other = old;
	other.st_size++;
	CHECK(pp_table_cache_digest_of(c, &other, got) == -ENOENT);
	other = old;
	other.st_ino++;
	CHECK(pp_table_cache_digest_of(c, &other, got) == -ENOENT);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.identities, 2);
	CHECK_EQ_U64(st.identity_hits, 1);
	CHECK_EQ_U64(st.identity_unsettled, 1);
	pp_table_cache_free(c);

	/* a record altered on disk is skipped; the one after it is kept */
	REQUIRE(pp_test_sh("printf '\\377' | dd of='%s' bs=1 seek=%d conv=notrunc status=none",
			   path, PP_TABLE_IDENTITIES_HEADER_SIZE + 20) == 0);
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-a"});
	REQUIRE(c != NULL);
	CHECK(pp_table_cache_digest_of(c, &old, got) == -ENOENT);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.identities, 1);
	pp_table_cache_note_digest(c, &old, d1);
	pp_table_cache_free(c);

	/* another boot: inodes and device numbers mean other files now */
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-b"});
	REQUIRE(c != NULL);
	CHECK(pp_table_cache_digest_of(c, &old, got) == -ENOENT);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.identities, 0);
	pp_table_cache_free(c);
	{
		struct stat sb;

		CHECK(stat(path, &sb) == 0 && sb.st_size == PP_TABLE_IDENTITIES_HEADER_SIZE);
	}
}

/* Past PP_TABLE_IDENTITIES_MAX the identities start again, the file with them. */
TEST(identities_are_bounded)
{
	char root[512], dir[600], path[700];
	struct pp_table_cache_stats st;
	struct pp_table_cache *c;
	uint8_t d[PP_UNWIND_DIGEST_SIZE], got[PP_UNWIND_DIGEST_SIZE];
	struct stat sb;

	REQUIRE(pp_test_scratch_dir(root, sizeof(root), "pp-table-ids") == 0);
	snprintf(dir, sizeof(dir), "%s/tables", root);
	snprintf(path, sizeof(path), "%s/identities", dir);
	/*
	 * One ctime for all of them: noting 8,192 takes long enough under ASan on a busy machine
	 * for the clock to pass a second, and a file_stat taken after it is another file
	 */
	struct stat f = file_stat(1, 1000, 10, 60), first = f, one_more = f;

	one_more.st_ino = 1;
	digest_of_seed(3, d);
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-a"});
	REQUIRE(c != NULL);
	for (uint64_t i = 0; i < PP_TABLE_IDENTITIES_MAX; i++) {
		f.st_ino = (ino_t)(1000 + i);
		pp_table_cache_note_digest(c, &f, d);
	}
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.identities, PP_TABLE_IDENTITIES_MAX);
	CHECK(pp_table_cache_digest_of(c, &first, got) == 0);
	pp_table_cache_note_digest(c, &one_more, d);
	pp_table_cache_get_stats(c, &st);
	CHECK_EQ_U64(st.identities, 1);
	CHECK(pp_table_cache_digest_of(c, &first, got) == -ENOENT);
	CHECK(pp_table_cache_digest_of(c, &one_more, got) == 0);
	CHECK(stat(path, &sb) == 0 &&
	      sb.st_size == PP_TABLE_IDENTITIES_HEADER_SIZE + PP_TABLE_IDENTITY_RECORD_SIZE);
	pp_table_cache_free(c);
}

/*
 * The FDEs a partial table found, kept at one start, come back at the next for the very file
 * (same boot, same compiler); another file, a file changed too recently, another boot or
 * damaged bytes give none, and what cannot be used is removed.
 */
TEST(found_fdes_come_back_for_the_same_file)
{
	char root[512], dir[600];
	struct pp_table_cache *c;
	struct stat old = file_stat(0x801, 4242, 65536, 3600), fresh = file_stat(0x801, 77, 100, 0);
	struct stat other = old;
	uint64_t pcs[3] = {0x1000, 0x2345, 0xffffffff00}, *got;
	size_t n;

	REQUIRE(pp_test_scratch_dir(root, sizeof(root), "pp-table-found") == 0);
	snprintf(dir, sizeof(dir), "%s/tables", root);
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-a"});
	REQUIRE(c != NULL);
	CHECK(pp_table_cache_get_found(c, &old, &got, &n) == -ENOENT);
	CHECK(pp_table_cache_put_found(c, &old, pcs, 3) == 0);
	CHECK(pp_table_cache_put_found(c, &fresh, pcs, 3) == -EAGAIN);
	pp_table_cache_free(c);

	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-a"});
	REQUIRE(c != NULL);
	REQUIRE(pp_table_cache_get_found(c, &old, &got, &n) == 0);
	CHECK(n == 3 && !memcmp(got, pcs, sizeof(pcs)));
	free(got);
	other.st_ctim.tv_nsec++;
	CHECK(pp_table_cache_get_found(c, &other, &got, &n) == -ENOENT);
	CHECK(pp_table_cache_get_found(c, &fresh, &got, &n) == -ENOENT);
	pp_table_cache_free(c);

	/* another boot: the file is of no use, removed */
	c = pp_table_cache_new(&(struct pp_table_cache_opts){.dir = dir, .boot_id = "boot-b"});
	REQUIRE(c != NULL);
	CHECK(pp_table_cache_get_found(c, &old, &got, &n) == -ENOENT);
	CHECK(pp_test_sh("ls '%s' | grep -q 'fdes$'", dir) != 0);
	/* damaged: a count its size does not give */
	CHECK(pp_table_cache_put_found(c, &old, pcs, 3) == 0);
	REQUIRE(pp_test_sh("cd '%s' && f=$(ls *.fdes) && printf X >>\"$f\"", dir) == 0);
	CHECK(pp_table_cache_get_found(c, &old, &got, &n) == -ENOENT);
	CHECK(pp_test_sh("ls '%s' | grep -q 'fdes$'", dir) != 0);
	pp_table_cache_free(c);
}

TEST_LIST = {
    {"found_fdes_come_back_for_the_same_file", found_fdes_come_back_for_the_same_file},
    {"identities_give_digests_back_at_the_next_start",
     identities_give_digests_back_at_the_next_start},
    {"identities_are_bounded", identities_are_bounded},
    {"kept_tables_come_back_and_damage_is_removed", kept_tables_come_back_and_damage_is_removed},
    {"the_bound_removes_the_least_recently_used", the_bound_removes_the_least_recently_used},
    {"a_directory_others_may_write_is_refused", a_directory_others_may_write_is_refused},
};
TEST_MAIN()
