/*
 * Tests of the name memo (symbolize/name_memo.h): what a table named an address comes back
 * for that table and address only, "nothing there" included; a name equal to its symbol is
 * kept once; names too long for the arena are not kept; a full memo starts over and stays
 * within its slots and bytes; the serials that key it are never shared by two tables, also
 * when one is freed and another takes its memory.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/name_memo.h"

TEST(a_name_comes_back_for_its_table_and_address_only)
{
	struct pp_name_memo *m = pp_name_memo_new(64, 4096);
	const char *name = "x", *raw = "x";

	CHECK(m != NULL);
	CHECK(pp_name_memo_get(m, 7, 0x1000, &name, &raw) == 0);
	pp_name_memo_put(m, 7, 0x1000, "ns::run", "_ZN2ns3runEv");
	pp_name_memo_put(m, 7, 0x1010, NULL, NULL); /* the table names nothing there */
	CHECK(pp_name_memo_get(m, 7, 0x1000, &name, &raw) == 1);
	CHECK_STR(name, "ns::run");
	CHECK_STR(raw, "_ZN2ns3runEv");
	CHECK(pp_name_memo_get(m, 7, 0x1010, &name, &raw) == 1);
	CHECK(name == NULL && raw == NULL);
	/* another table at the same address, the same table at another */
	CHECK(pp_name_memo_get(m, 8, 0x1000, &name, &raw) == 0);
	CHECK(pp_name_memo_get(m, 7, 0x1001, &name, &raw) == 0);
	/* table 0 is none: never kept, never found */
	pp_name_memo_put(m, 0, 0x2000, "f", "f");
	CHECK(pp_name_memo_get(m, 0, 0x2000, &name, &raw) == 0);
	/* the first answer stands */
	pp_name_memo_put(m, 7, 0x1000, "other", "other");
	CHECK(pp_name_memo_get(m, 7, 0x1000, &name, &raw) == 1);
	CHECK_STR(name, "ns::run");

	struct pp_name_memo_stats st;

	pp_name_memo_stats(m, &st);
	CHECK_EQ_U64(st.hits, 3);
	CHECK_EQ_U64(st.misses, 3);
	CHECK_EQ_U64(st.resets, 0);
	pp_name_memo_free(m);
}

TEST(a_c_name_is_kept_once)
{
	struct pp_name_memo *m = pp_name_memo_new(64, 4096);
	struct pp_name_memo_stats before, after;
	const char *name, *raw;

	CHECK(m != NULL);
	pp_name_memo_stats(m, &before);
	pp_name_memo_put(m, 1, 0x40, "main", "main");
	pp_name_memo_stats(m, &after);
	CHECK_EQ_U64(after.bytes - before.bytes, strlen("main") + 1);
	CHECK(pp_name_memo_get(m, 1, 0x40, &name, &raw) == 1);
	CHECK(name == raw);
	CHECK_STR(name, "main");
	pp_name_memo_free(m);
}

TEST(a_full_memo_starts_over_within_its_bounds)
{
	struct pp_name_memo *m = pp_name_memo_new(64, 256);
	struct pp_name_memo_stats st;
	const char *name, *raw;
	char big[300];
	size_t bound;

	CHECK(m != NULL);
	pp_name_memo_stats(m, &st);
	bound = st.bytes + 256;
	/* longer than the whole arena: not kept, and nothing else lost */
	pp_name_memo_put(m, 3, 0x10, "kept", "kept");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	pp_name_memo_put(m, 3, 0x20, big, big);
	CHECK(pp_name_memo_get(m, 3, 0x20, &name, &raw) == 0);
	CHECK(pp_name_memo_get(m, 3, 0x10, &name, &raw) == 1);
	/* 64 slots take 48 before starting over; the arena 256 bytes (8 a name here) */
	for (uint64_t a = 0; a < 1000; a++) {
		char n[16];

		snprintf(n, sizeof(n), "f%06llu", (unsigned long long)a);
		pp_name_memo_put(m, 4, a, n, n);
		pp_name_memo_stats(m, &st);
		CHECK(st.bytes <= bound);
		CHECK(pp_name_memo_get(m, 4, a, &name, &raw) == 1);
		CHECK_STR(name, n);
	}
	pp_name_memo_stats(m, &st);
	CHECK(st.resets >= 1000 / 32 - 1);
	/* what was there before the last start over is gone, not wrong */
	CHECK(pp_name_memo_get(m, 4, 0, &name, &raw) == 0);
	pp_name_memo_free(m);
}

TEST(no_two_tables_share_a_serial)
{
	struct pp_elf_symbols *a, *b;
	uint64_t first;

	a = pp_elf_symbols_open_path("/proc/self/exe");
	CHECK(a != NULL);
	first = pp_elf_symbols_serial(a);
	CHECK(first != 0);
	pp_elf_symbols_free(a);
	/* the next table may take the freed one's memory, never its serial */
	b = pp_elf_symbols_open_path("/proc/self/exe");
	CHECK(b != NULL);
	CHECK(pp_elf_symbols_serial(b) > first);
	CHECK_EQ_U64(pp_elf_symbols_serial(NULL), 0);
	pp_elf_symbols_free(b);
}

TEST_LIST = {
    {"a_name_comes_back_for_its_table_and_address_only",
     a_name_comes_back_for_its_table_and_address_only},
    {"a_c_name_is_kept_once", a_c_name_is_kept_once},
    {"a_full_memo_starts_over_within_its_bounds", a_full_memo_starts_over_within_its_bounds},
    {"no_two_tables_share_a_serial", no_two_tables_share_a_serial},
};
TEST_MAIN()
