/*
 * Tests of the symbol loader's worker and how it is woken: a loader woken per request reads a
 * file as it is asked; one woken by its caller (the agent's poll loop) leaves what was queued
 * until pp_symloader_kick or a wait, and then reads all of it; a file a maps line names is
 * found again without an open. The file is this test's own executable, mapped as
 * /proc/self/maps says.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "process/procmaps.h"
#include "symbolize/symloader.h"

/* This program's first executable file mapping, from its maps (freed with pp_maps_fini). */
static const struct pp_map_entry *own_code(struct pp_maps *maps)
{
	static char buf[1 << 20];
	FILE *f = fopen("/proc/self/maps", "r");
	size_t n;
	char exe[4096];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (!f || el <= 0) {
		if (f)
			fclose(f);
		return NULL;
	}
	exe[el] = '\0';
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (pp_maps_parse(buf, n, maps) != 0)
		return NULL;
	for (size_t i = 0; i < maps->n; i++)
		if ((maps->entries[i].perms & PP_MAP_EXEC) && maps->entries[i].path &&
		    !strcmp(maps->entries[i].path, exe))
			return &maps->entries[i];
	return NULL;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Results taken until `want` came or 30 s passed, without a wait that would kick. */
static size_t take_polled(struct pp_symloader *l, size_t want)
{
	struct pp_symload_result r[4];
	uint64_t until = mono_ms() + 30000;
	size_t got = 0, n;

	while (got < want && mono_ms() < until) {
		n = pp_symloader_take(l, r, 4);
		for (size_t i = 0; i < n; i++) {
			CHECK(r[i].syms != NULL);
			CHECK_EQ_U64(r[i].err, 0);
			pp_elf_symbols_free(r[i].syms);
		}
		got += n;
		if (!n)
			usleep(2000);
	}
	return got;
}

static void drain(struct pp_symloader *l, size_t want)
{
	CHECK_EQ_U64(take_polled(l, want), want);
}

/* A loader, and this program's code mapping in *m (NULL: neither; pp_maps_fini(maps) after). */
static struct pp_symloader *loader_and_code(bool kick_by_caller, struct pp_maps *maps,
					    const struct pp_map_entry **m)
{
	struct pp_symloader_opts o = {
	    .max_files = 8, .max_bytes = 64u << 20, .kick_by_caller = kick_by_caller};

	*m = own_code(maps);
	return *m ? pp_symloader_new(&o) : NULL;
}

TEST(woken_per_request_without_kick_by_caller)
{
	struct pp_maps maps = {0};
	const struct pp_map_entry *m;
	struct pp_symloader *l = loader_and_code(false, &maps, &m);

	REQUIRE(l);
	CHECK_EQ_U64(pp_symloader_submit(l, 1, (uint32_t)getpid(), NULL, m), 0);
	drain(l, 1);
	pp_symloader_free(l);
	pp_maps_fini(&maps);
}

TEST(kicked_by_caller_reads_at_the_kick_or_a_wait)
{
	struct pp_symloader_stats st;
	struct pp_maps maps = {0};
	const struct pp_map_entry *m;
	struct pp_symloader *l = loader_and_code(true, &maps, &m);

	REQUIRE(l);
	/* a batch queued: nothing read before the kick (the worker sleeps, the queue holds it) */
	for (uint64_t tag = 1; tag <= 3; tag++)
		CHECK_EQ_U64(pp_symloader_submit(l, tag, (uint32_t)getpid(), NULL, m), 0);
	usleep(200 * 1000);
	pp_symloader_get_stats(l, &st);
	CHECK_EQ_U64(st.pending, 3);
	CHECK_EQ_U64(st.cache.opens, 0);
	CHECK(!pp_symloader_ready(l));
	/* one kick: the whole batch, the file read once */
	pp_symloader_kick(l);
	drain(l, 3);
	pp_symloader_get_stats(l, &st);
	CHECK_EQ_U64(st.pending, 0);
	CHECK_EQ_U64(st.cache.opens, 1);
	/* a kick with nothing queued wakes nothing and breaks nothing */
	pp_symloader_kick(l);
	/* a caller waiting for what it queued needs no kick of its own */
	CHECK_EQ_U64(pp_symloader_submit(l, 4, (uint32_t)getpid(), NULL, m), 0);
	CHECK_EQ_U64(pp_symloader_wait_result(l, 30000), 0);
	drain(l, 1);
	CHECK_EQ_U64(pp_symloader_submit(l, 5, (uint32_t)getpid(), NULL, m), 0);
	CHECK_EQ_U64(pp_symloader_wait_idle(l, 30000), 0);
	drain(l, 1);
	pp_symloader_free(l);
	pp_maps_fini(&maps);
}

/*
 * A file named by a maps line (a process read from /proc, as this one is) is found again by
 * that name without an open, as one the side-band named is; a deleted file's maps line names
 * nothing (a later file could take its inode), so it is opened each time.
 */
TEST(a_file_named_by_its_maps_line_is_found_again_without_an_open)
{
	struct pp_symloader_stats st;
	struct pp_maps maps = {0};
	const struct pp_map_entry *m;
	struct pp_map_entry deleted;
	struct pp_symload_result r;
	struct pp_symloader *l = loader_and_code(false, &maps, &m);

	REQUIRE(l);
	REQUIRE(!m->from_sideband && m->inode);
	CHECK_EQ_U64(pp_symloader_submit(l, 1, (uint32_t)getpid(), NULL, m), 0);
	drain(l, 1);
	pp_symloader_get_stats(l, &st);
	CHECK_EQ_U64(st.via_identity, 0);
	CHECK_EQ_U64(st.via_map_files + st.via_root, 1);
	CHECK_EQ_U64(pp_symloader_submit(l, 2, (uint32_t)getpid(), NULL, m), 0);
	drain(l, 1);
	pp_symloader_get_stats(l, &st);
	CHECK_EQ_U64(st.via_identity, 1);
	CHECK_EQ_U64(st.via_map_files + st.via_root, 1);

	/* opened through map_files, or refused without it (its path names another file) */
	deleted = *m;
	deleted.deleted = 1;
	CHECK_EQ_U64(pp_symloader_submit(l, 3, (uint32_t)getpid(), NULL, &deleted), 0);
	CHECK_EQ_U64(pp_symloader_wait_result(l, 30000), 0);
	REQUIRE(pp_symloader_take(l, &r, 1) == 1);
	pp_elf_symbols_free(r.syms);
	pp_symloader_get_stats(l, &st);
	CHECK_EQ_U64(st.via_identity, 1);
	pp_symloader_free(l);
	pp_maps_fini(&maps);
}

TEST_LIST = {
    {"a_file_named_by_its_maps_line_is_found_again_without_an_open",
     a_file_named_by_its_maps_line_is_found_again_without_an_open},
    {"woken_per_request_without_kick_by_caller", woken_per_request_without_kick_by_caller},
    {"kicked_by_caller_reads_at_the_kick_or_a_wait", kicked_by_caller_reads_at_the_kick_or_a_wait},
};

TEST_MAIN()
