/*
 * Unit tests of the exporter's private "k=v,k2=v2" list parser (exporter/src/base/kvlist.c) with
 * rules of the test's own, so the offsets, the case rule, the bound and the hooks are checked
 * apart from the two public parsers built on it.
 */
#include "../../../exporter/src/base/kvlist.h"

#include "check.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Key and value away from offset 0, to catch a parser that ignores the offsets. */
struct item {
	int pad;
	const char *v;
	const char *k;
};

static char last_report[128];

static void report(char *err, size_t errlen, uint32_t pairno, const char *p, const char *pe,
		   const char *why)
{
	snprintf(err, errlen, "%u [%.*s] %s", pairno, (int)(pe - p), p, why);
	snprintf(last_report, sizeof(last_report), "%s", err);
}

static const char *no_x_key(const char *k, size_t klen)
{
	return memchr(k, 'x', klen) ? "x in key" : NULL;
}

static const char *no_y_value(const char *v, size_t vlen)
{
	return memchr(v, 'y', vlen) ? "y in value" : NULL;
}

static const struct pp_kvlist_rules rules = {
    .elem_size = sizeof(struct item),
    .key_off = offsetof(struct item, k),
    .val_off = offsetof(struct item, v),
    .max = 2,
    .too_many = "too many",
    .nocase_keys = true,
    .check_key = no_x_key,
    .check_value = no_y_value,
    .report = report,
};

static int parse(const char *s, struct item **out, uint32_t *n, char *err, size_t errlen)
{
	void *block = NULL;
	int ret = pp_kvlist_parse(s, strlen(s), &rules, &block, n, err, errlen);

	*out = block;
	return ret;
}

TEST(decodes_trims_and_dedupes_ignoring_case)
{
	struct item *it;
	uint32_t n;
	char err[128];

	REQUIRE(parse(" a%3Db = 1 ,, A%3DB=%41%2c ,c\t=\t", &it, &n, err, sizeof(err)) == 0);
	REQUIRE(n == 2);
	CHECK_STR(it[0].k, "a=b");
	CHECK_STR(it[0].v, "A,"); /* the last value of a repeated key wins */
	CHECK_STR(it[1].k, "c");
	CHECK_STR(it[1].v, "");
	CHECK_STR(err, "");
	free(it);
}

TEST(empty_and_blank_lists_give_nothing)
{
	struct item *it = (struct item *)&it;
	uint32_t n = 7;

	CHECK(parse("", &it, &n, NULL, 0) == 0);
	CHECK(it == NULL && n == 0);
	CHECK(parse(" , ,", &it, &n, NULL, 0) == 0);
	CHECK(it == NULL && n == 0);
}

TEST(errors_name_the_pair_counting_blank_ones)
{
	struct item *it;
	uint32_t n;
	char err[128];

	CHECK(parse("a=1,,b", &it, &n, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "3 [b] no '=' between key and value");
	CHECK(it == NULL && n == 0);
	CHECK(parse("a=%4", &it, &n, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "1 [a=%4] '%' is not followed by two hex digits");
	/* the key is checked before the value is decoded */
	CHECK(parse("x=%zz", &it, &n, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "1 [x=%zz] x in key");
	CHECK(parse("k=%79", &it, &n, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "1 [k=%79] y in value");
}

TEST(bound_is_on_distinct_keys)
{
	struct item *it;
	uint32_t n;
	char err[128];

	REQUIRE(parse("a=1,b=2,A=3,B=4", &it, &n, err, sizeof(err)) == 0);
	CHECK(n == 2);
	free(it);
	CHECK(parse("a=1,b=2,c=3", &it, &n, err, sizeof(err)) == -E2BIG);
	CHECK_STR(err, "3 [c=3] too many");
}

TEST(nul_is_kept_unless_refused)
{
	struct pp_kvlist_rules strict = rules;
	void *block = NULL;
	struct item *it;
	uint32_t n;
	char err[128];

	REQUIRE(parse("k=a%00b", &it, &n, err, sizeof(err)) == 0);
	CHECK(n == 1 && memcmp(it[0].v, "a\0b", 4) == 0);
	free(it);
	strict.reject_nul = true;
	CHECK(pp_kvlist_parse("k=%00%zz", 8, &strict, &block, &n, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "1 [k=%00%zz] it holds a NUL byte");
}

TEST(no_report_without_room)
{
	struct item *it;
	uint32_t n;

	last_report[0] = '\0';
	CHECK(parse("bad", &it, &n, NULL, 0) == -EINVAL);
	CHECK_STR(last_report, "");
}

TEST_LIST = {
    {"decodes_trims_and_dedupes_ignoring_case", decodes_trims_and_dedupes_ignoring_case},
    {"empty_and_blank_lists_give_nothing", empty_and_blank_lists_give_nothing},
    {"errors_name_the_pair_counting_blank_ones", errors_name_the_pair_counting_blank_ones},
    {"bound_is_on_distinct_keys", bound_is_on_distinct_keys},
    {"nul_is_kept_unless_refused", nul_is_kept_unless_refused},
    {"no_report_without_room", no_report_without_room},
};
TEST_MAIN()
