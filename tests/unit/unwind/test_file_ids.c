/*
 * Tests for the names files were found under: every name of a table found again, a name that
 * names another table since gives the new one, a name too long or never noted is not found,
 * and a full set loses the name confirmed longest ago while the others stay.
 */
#include "check.h"
#include "unwind/file_ids.h"

#include <stdio.h>
#include <string.h>

static bool finds(const struct pp_file_ids *ids, const char *key, uint32_t table, uint32_t serial)
{
	struct pp_file_id id;

	return pp_file_ids_find(ids, key, &id) && id.table == table && id.serial == serial;
}

TEST(many_names_of_one_table_are_each_found)
{
	struct pp_file_ids *ids = pp_file_ids_new(64);
	struct pp_file_id id = {.table = 3, .serial = 9, .confirmed_ms = 100};
	struct pp_file_id later = {.table = 5, .serial = 12, .confirmed_ms = 200};
	char long_key[PP_FILE_ID_KEY_MAX + 8];

	REQUIRE(ids != NULL);
	pp_file_ids_note(ids, "d:fe:0:11305172:2218418610", &id);
	pp_file_ids_note(ids, "d:fe:0:11305173:2122765663", &id);
	pp_file_ids_note(ids, "s:fe00:11305172:1795945707.887048689:16056", &id);
	CHECK(finds(ids, "d:fe:0:11305172:2218418610", 3, 9));
	CHECK(finds(ids, "d:fe:0:11305173:2122765663", 3, 9));
	CHECK(finds(ids, "s:fe00:11305172:1795945707.887048689:16056", 3, 9));
	CHECK(!finds(ids, "d:fe:0:11305174:1", 3, 9));
	CHECK(!pp_file_ids_find(ids, "", &id));

	/* a name confirmed again for another table: the new one */
	pp_file_ids_note(ids, "d:fe:0:11305173:2122765663", &later);
	CHECK(finds(ids, "d:fe:0:11305173:2122765663", 5, 12));
	CHECK(finds(ids, "d:fe:0:11305172:2218418610", 3, 9));

	memset(long_key, 'x', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	pp_file_ids_note(ids, long_key, &id);
	CHECK(!pp_file_ids_find(ids, long_key, &id));
	pp_file_ids_free(ids);
}

TEST(a_full_set_loses_the_name_confirmed_longest_ago)
{
	struct pp_file_ids *ids = pp_file_ids_new(64);
	char key[64];
	unsigned kept = 0, oldest_kept = 0;

	REQUIRE(ids != NULL);
	/* far more names than room: each noted later than the one before */
	for (uint32_t i = 0; i < 4096; i++) {
		struct pp_file_id id = {.table = i, .serial = i + 1, .confirmed_ms = 1000 + i};

		snprintf(key, sizeof(key), "m:8:1:%u:%016x", i, i * 2654435761u);
		pp_file_ids_note(ids, key, &id);
	}
	for (uint32_t i = 0; i < 4096; i++) {
		snprintf(key, sizeof(key), "m:8:1:%u:%016x", i, i * 2654435761u);
		if (finds(ids, key, i, i + 1)) {
			kept++;
			oldest_kept += i < 2048;
		}
	}
	/* 64 names' room, taken by the latest: none of the first half outlives the second's */
	CHECK(kept >= 32 && kept <= 64);
	CHECK_EQ_U64(oldest_kept, 0);
	/* the last noted is always there */
	CHECK(finds(ids, key, 4095, 4096));
	pp_file_ids_free(ids);
}

TEST_LIST = {
    {"many_names_of_one_table_are_each_found", many_names_of_one_table_are_each_found},
    {"a_full_set_loses_the_name_confirmed_longest_ago",
     a_full_set_loses_the_name_confirmed_longest_ago},
};
TEST_MAIN()
