/*
 * Tests for the shim's compact unwind tables: packed rows looked up as the shim looks them up
 * give the compiler's rule at every address, on hand-made tables (pages without rows, rules
 * carried across pages, two rows at one pc) and on the host's libraries; the rule dictionary
 * is shared, counted and bounded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sampling/shim_loader.h"
#include "symbolize/elf_symbols.h"
#include "testsh.h"
#include "unwind/unwind_pack.h"
#include "cfi/unwind_table.h"
#include "unwind_rows.h"

#define BASE 0x401000ull

static struct pp_unwind_row row(uint64_t pc, int cfa_rule, int32_t cfa_off)
{
	struct pp_unwind_row r;

	memset(&r, 0, sizeof(r));
	r.pc = pc;
	r.cfa_rule = (uint8_t)cfa_rule;
	r.cfa_off = cfa_off;
	r.ra_rule = cfa_rule == PP_CFA_NONE ? PP_REG_SAME : PP_REG_AT_CFA;
	r.ra_off = -8;
	return r;
}

/* Whether the dictionary's rule i is the row's (rule 0 standing for no CFI). */
static bool same_rule(const struct pp_unwind_rules *d, uint32_t i, const struct pp_unwind_row *r)
{
	const struct pp_bpf_unwind_rule *g = pp_unwind_rules_at(d, i);

	if (r->cfa_rule == PP_CFA_NONE)
		return i == 0;
	return i != 0 && g->cfa_rule == r->cfa_rule && g->cfa_off == r->cfa_off &&
	       g->rbp_rule == r->rbp_rule && g->rbp_off == r->rbp_off && g->ra_rule == r->ra_rule &&
	       g->ra_off == r->ra_off && g->flags == r->flags;
}

/*
 * Every address from the first row to the last (step bytes apart, and each row's first and
 * last byte) finds in the packed run the rule the table has there. The number of addresses
 * that disagree.
 */
static size_t disagreements(const struct pp_unwind_table *t, const struct pp_unwind_packed *pk,
			    const struct pp_unwind_rules *d, uint64_t step, size_t *checked)
{
	size_t n = pp_unwind_table_count(t), bad = 0;
	struct pp_unwind_row buf;
	uint64_t first = row_of(t, 0).pc, last = row_of(t, n - 1).pc;

	*checked = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t at[3] = {row_of(t, i).pc, i + 1 < n ? row_of(t, i + 1).pc - 1 : last, 0};

		for (uint64_t pc = at[0] + step; i + 1 < n && step && pc < at[1]; pc += step) {
			uint32_t rule;

			(*checked)++;
			if (!pp_unwind_packed_find(pk->words, pk->nwords, pk->nr_pages, pc - first,
						   &rule) ||
			    !same_rule(d, rule, lookup_row(t, pc, &buf)))
				bad++;
		}
		for (int j = 0; j < 2; j++) {
			uint32_t rule;

			(*checked)++;
			if (!pp_unwind_packed_find(pk->words, pk->nwords, pk->nr_pages,
						   at[j] - first, &rule) ||
			    !same_rule(d, rule, lookup_row(t, at[j], &buf)))
				bad++;
		}
	}
	return bad;
}

TEST(hand_made_tables_pack_byte_for_byte)
{
	/*
	 * Page 0 with rows, page 1 inside one row (carried), page 2 starting mid-row, a page with
	 * no CFI, two rows at one pc, equal neighbours merged, the last row ending the table.
	 */
	struct pp_unwind_row rows[] = {
	    row(BASE + 0x0, PP_CFA_RSP, 8),
	    row(BASE + 0x1, PP_CFA_RSP, 16),
	    row(BASE + 0x4, PP_CFA_RBP, 16),
	    row(BASE + 0x40, PP_CFA_RSP, 8),
	    row(BASE + 0x41, PP_CFA_NONE, 0),
	    row(BASE + 0x100, PP_CFA_PLT, 11),
	    row(BASE + 0x2fff0, PP_CFA_RSP, 8),
	    row(BASE + 0x2fff0, PP_CFA_RSP, 24),
	    row(BASE + 0x30010, PP_CFA_RSP, 24),
	    row(BASE + 0x30020, PP_CFA_NONE, 0),
	    row(BASE + 0x50000, PP_CFA_DEREF_RSP, 160),
	    row(BASE + 0x5ffff, PP_CFA_RSP, 8),
	    row(BASE + 0x60000, PP_CFA_NONE, 0),
	};
	struct pp_unwind_rules *d = pp_unwind_rules_new(PP_UW_MAX_RULES);
	struct pp_unwind_table *t;
	struct pp_unwind_packed pk;
	size_t checked;

	REQUIRE(d != NULL);
	t = pp_unwind_table_from_rows(rows, sizeof(rows) / sizeof(rows[0]));
	REQUIRE(t != NULL);
	REQUIRE(pp_unwind_pack(t, d, 0, &pk) == 0);
	CHECK_EQ_U64(pk.nr_pages, 7);
	CHECK_EQ_U64(pk.base_vaddr, BASE);
	CHECK_EQ_U64(pk.words[pk.nr_pages], pk.nwords);
	/* rsp+8, rsp+16, rbp+16, plt, rsp+24, deref: six rules, all new */
	CHECK_EQ_U64(pk.nrules, 6);
	CHECK_EQ_U64(pk.nnew, 6);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 7);
	CHECK_EQ_U64(disagreements(t, &pk, d, 1, &checked), 0);
	printf("  %zu rows: %u words in %u pages, %zu addresses agree\n", pp_unwind_table_count(t),
	       pk.nwords, pk.nr_pages, checked);
	CHECK(checked > 0x60000);
	/* outside the pages: no row, as the shim must find none */
	{
		uint32_t rule;

		CHECK(!pp_unwind_packed_find(pk.words, pk.nwords, pk.nr_pages, 7ull << 16, &rule));
		CHECK(!pp_unwind_packed_find(pk.words, pk.nwords, pk.nr_pages, 1ull << 40, &rule));
		CHECK(!pp_unwind_packed_find(pk.words, 3, pk.nr_pages, 0, &rule)); /* cut short */
	}
	pp_unwind_packed_release(&pk, d);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 1);
	pp_unwind_table_free(t);
	pp_unwind_rules_free(d);
}

TEST(the_dictionary_is_shared_counted_and_bounded)
{
	struct pp_unwind_row a[] = {row(BASE, PP_CFA_RSP, 8), row(BASE + 4, PP_CFA_RSP, 16),
				    row(BASE + 9, PP_CFA_NONE, 0)};
	struct pp_unwind_row b[] = {row(BASE, PP_CFA_RSP, 16), row(BASE + 4, PP_CFA_RSP, 32),
				    row(BASE + 9, PP_CFA_RSP, 40), row(BASE + 16, PP_CFA_NONE, 0)};
	struct pp_unwind_rules *d = pp_unwind_rules_new(4); /* rule 0 and three more */
	struct pp_unwind_table *ta = pp_unwind_table_from_rows(a, 3);
	struct pp_unwind_table *tb = pp_unwind_table_from_rows(b, 4);
	struct pp_unwind_packed pa, pa2, pb;

	REQUIRE(d && ta && tb);
	REQUIRE(pp_unwind_pack(ta, d, 0, &pa) == 0);
	CHECK_EQ_U64(pa.nnew, 2);
	/* the same rules again: held twice, stored once */
	REQUIRE(pp_unwind_pack(ta, d, 0, &pa2) == 0);
	CHECK_EQ_U64(pa2.nnew, 0);
	CHECK_EQ_U64(pa2.nrules, 2);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 3);
	/* b needs two rules the dictionary lacks, and it has room for one: refused, none held */
	CHECK_EQ_U64(pp_unwind_pack(tb, d, 0, &pb), -ENOSPC);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 3);
	CHECK(pb.words == NULL && pb.nrules == 0);
	/* a's rules stay while one table holds them; then b fits */
	pp_unwind_packed_release(&pa, d);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 3);
	CHECK_EQ_U64(pp_unwind_pack(tb, d, 0, &pb), -ENOSPC);
	pp_unwind_packed_release(&pa2, d);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 1);
	REQUIRE(pp_unwind_pack(tb, d, 0, &pb) == 0);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 4);
	/* more words than allowed: refused before anything is held */
	{
		struct pp_unwind_packed pc;

		pp_unwind_packed_release(&pb, d);
		CHECK_EQ_U64(pp_unwind_pack(tb, d, 4, &pc), -E2BIG);
		CHECK_EQ_U64(pp_unwind_rules_count(d), 1);
	}
	pp_unwind_table_free(ta);
	pp_unwind_table_free(tb);
	pp_unwind_rules_free(d);
}

TEST(code_spanning_4_gib_is_refused)
{
	/* A table holds its pcs as 32-bit offsets from the first, as the packer pages them: code
	 * spanning 4 GiB or more makes no table (the compiler refuses such a file, E2BIG). */
	struct pp_unwind_row far[] = {row(BASE, PP_CFA_RSP, 8),
				      row(BASE + (5ull << 30), PP_CFA_NONE, 0)};
	struct pp_unwind_row edge[] = {row(BASE, PP_CFA_RSP, 8),
				       row(BASE + UINT32_MAX, PP_CFA_RBP, 16)};
	struct pp_unwind_rules *d = pp_unwind_rules_new(16);
	struct pp_unwind_table *t;
	struct pp_unwind_packed pk;
	struct pp_unwind_row got;

	REQUIRE(d != NULL);
	errno = 0;
	CHECK(pp_unwind_table_from_rows(far, 2) == NULL && errno == EINVAL);
	t = pp_unwind_table_from_rows(edge, 2);
	REQUIRE(t != NULL);
	/* the last offset a table holds: found where it is, and past it */
	CHECK(pp_unwind_table_lookup(t, BASE + UINT32_MAX, &got) && got.cfa_rule == PP_CFA_RBP &&
	      got.pc == BASE + UINT32_MAX);
	CHECK(pp_unwind_table_lookup(t, BASE + (5ull << 30), &got) && got.cfa_rule == PP_CFA_RBP);
	CHECK(pp_unwind_table_lookup(t, BASE + UINT32_MAX - 1, &got) && got.cfa_rule == PP_CFA_RSP);
	CHECK(!pp_unwind_table_lookup(t, BASE - 1, &got));
	/* and it packs, its last row in the last of 65536 pages */
	REQUIRE(pp_unwind_pack(t, d, 0, &pk) == 0);
	CHECK_EQ_U64(pk.nr_pages, 65536);
	{
		uint32_t at_edge, before;

		CHECK(
		    pp_unwind_packed_find(pk.words, pk.nwords, pk.nr_pages, UINT32_MAX, &at_edge));
		CHECK(pp_unwind_packed_find(pk.words, pk.nwords, pk.nr_pages, UINT32_MAX - 1,
					    &before));
		CHECK(at_edge != before);
		CHECK(pp_unwind_rules_at(d, at_edge)->cfa_off == 16);
		CHECK(pp_unwind_rules_at(d, before)->cfa_off == 8);
	}
	pp_unwind_packed_release(&pk, d);
	CHECK_EQ_U64(pp_unwind_rules_count(d), 1);
	pp_unwind_table_free(t);
	pp_unwind_rules_free(d);
}

TEST(host_libraries_pack_to_the_same_rules)
{
	static const char *const libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6",
					   "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
	struct pp_unwind_rules *d = pp_unwind_rules_new(PP_UW_MAX_RULES);
	size_t done = 0;

	REQUIRE(d != NULL);
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		struct pp_unwind_packed pk;
		struct pp_unwind_table *t;
		size_t checked, n;
		int fd = open(libs[i], O_RDONLY | O_CLOEXEC);

		if (fd < 0) {
			fprintf(stderr, "  %s missing here\n", libs[i]);
			continue;
		}
		t = pp_unwind_table_open_fd(fd, 0);
		close(fd);
		REQUIRE(t != NULL);
		n = pp_unwind_table_count(t);
		REQUIRE(pp_unwind_pack(t, d, 0, &pk) == 0);
		/* every row's first and last byte, and every 7th byte between */
		CHECK_EQ_U64(disagreements(t, &pk, d, 7, &checked), 0);
		printf("  %s: %zu rows, %u words (%.2f bytes a row against 16), %u rules, %zu "
		       "addresses agree\n",
		       libs[i], n, pk.nwords, 4.0 * pk.nwords / (double)n, pk.nrules, checked);
		CHECK(pk.nwords < n + 2 * pk.nr_pages + 1);
		pp_unwind_packed_release(&pk, d);
		pp_unwind_table_free(t);
		done++;
	}
	CHECK_EQ_U64(pp_unwind_rules_count(d), 1);
	pp_unwind_rules_free(d);
	if (!done)
		SKIP("neither libc nor libstdc++ is here");
}

/*
 * The default table budget holds the 50 largest ELF files with tables that Debian packages
 * installed here (LLVM's and clang's libraries, gcc's compilers, node, the JVM where present),
 * all at once, with the rules they share: as a node running them all would need.
 */
TEST(the_largest_binaries_here_fit_the_default_budget)
{
	struct pp_unwind_rules *d = pp_unwind_rules_new(PP_UW_MAX_RULES);
	uint64_t words = 0, rows = 0, budget = pp_unwind_rows_for_bytes(0);
	char path[4096], (*ids)[128] = calloc(1024, sizeof(*ids));
	size_t files = 0, nids = 0, dup = 0;
	FILE *list;

	REQUIRE(d != NULL);
	list =
	    popen("cat /var/lib/dpkg/info/*.list 2>/dev/null | sort -u > /tmp/pp-deb-files.$$ && "
		  "find /usr -xdev -type f -size +1M -printf '%s %p\\n' 2>/dev/null | "
		  "sort -rn | cut -d' ' -f2- | grep -Fxf /tmp/pp-deb-files.$$; "
		  "rm -f /tmp/pp-deb-files.$$",
		  "r");
	REQUIRE(list != NULL);
	while (files < 50 && fgets(path, sizeof(path), list)) {
		struct pp_unwind_packed pk;
		struct pp_unwind_table *t;
		int fd;

		path[strcspn(path, "\n")] = '\0';
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* one table per build id, as the agent keeps them (hard links, copies) */
		if (pp_elf_read_build_id_fd(fd, ids[nids], sizeof(ids[nids])) == 0 &&
		    ids[nids][0]) {
			size_t i = 0;

			while (i < nids && strcmp(ids[i], ids[nids]))
				i++;
			if (i < nids) {
				dup++;
				close(fd);
				continue;
			}
			if (nids < 1023)
				nids++;
		}
		t = pp_unwind_table_open_fd(fd, 0);
		close(fd);
		if (!t)
			continue; /* not ELF, or no CFI */
		if (pp_unwind_pack(t, d, 0, &pk) == 0) {
			files++;
			rows += pp_unwind_table_count(t);
			words += pk.nwords;
			free(pk.words); /* the rules stay held: all the files at once */
			free(pk.rules);
			free(pk.new_rules);
		} else {
			CHECK(!"a table that cannot be packed");
		}
		pp_unwind_table_free(t);
	}
	pclose(list);
	printf("  %zu files (%zu more of the same build id): %" PRIu64 " rows in %" PRIu64
	       " words (%.1f MiB), %u rules; the default "
	       "budget holds %" PRIu64 " words (%.1f MiB); at 16 bytes a row they took %.1f MiB\n",
	       files, dup, rows, words, (double)words * 4 / (1 << 20), pp_unwind_rules_count(d),
	       budget, (double)budget * 4 / (1 << 20), (double)rows * 16 / (1 << 20));
	pp_unwind_rules_free(d);
	free(ids);
	if (files < 10)
		SKIP("fewer than 10 large ELF files with tables from Debian packages here");
	CHECK(words <= budget);
}

TEST_LIST = {
    {"hand_made_tables_pack_byte_for_byte", hand_made_tables_pack_byte_for_byte},
    {"the_dictionary_is_shared_counted_and_bounded", the_dictionary_is_shared_counted_and_bounded},
    {"code_spanning_4_gib_is_refused", code_spanning_4_gib_is_refused},
    {"host_libraries_pack_to_the_same_rules", host_libraries_pack_to_the_same_rules},
    {"the_largest_binaries_here_fit_the_default_budget",
     the_largest_binaries_here_fit_the_default_budget},
};
TEST_MAIN()
