/*
 * Tests of the strict JSON pull parser: walking documents, decoding strings, and rejecting
 * everything RFC 8259 does not allow (the PodList comes from the network).
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "metadata/json.h"

/* Skip the whole document and require the end: 0 for valid JSON, else the error. */
static int validate(const char *s, size_t len)
{
	struct pp_json j;
	int rc;

	pp_json_init(&j, s, len, 0);
	rc = pp_json_skip(&j);
	if (rc)
		return rc;
	return pp_json_finish(&j);
}

static int valid(const char *s)
{
	return validate(s, strlen(s));
}

TEST(accepts_valid_documents)
{
	static const char *const ok[] = {
	    "{}",
	    "[]",
	    " \t\r\n{ \"a\" : [ 1 , -0 , 0.5 , -12.25e+3 , 1E9 , 2e-2 ] } \n",
	    "\"just a string\"",
	    "0",
	    "-1",
	    "true",
	    "false",
	    "null",
	    "[[[[[]]]]]",
	    "{\"a\":{\"b\":{\"c\":[true,false,null,\"x\"]}}}",
	    "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"",
	    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
	    "{\"\":\"\"}",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int rc = valid(ok[i]);

		if (rc)
			fprintf(stderr, "  rejected: %s (%d)\n", ok[i], rc);
		CHECK(rc == 0);
	}
}

TEST(rejects_invalid_documents)
{
	static const char *const bad[] = {
	    "",
	    " ",
	    "{",
	    "}",
	    "[1,]",
	    "[,1]",
	    "{\"a\":1,}",
	    "{,\"a\":1}",
	    "{\"a\" 1}",
	    "{\"a\":1 \"b\":2}",
	    "{a:1}",
	    "{'a':1}",
	    "[01]",
	    "[1.]",
	    "[.5]",
	    "[+1]",
	    "[1e]",
	    "[-]",
	    "[NaN]",
	    "[tru]",
	    "[nul]",
	    "\"unterminated",
	    "\"bad \\x escape\"",
	    "\"\\u12\"",
	    "\"\\ud800\"",	    /* lone high surrogate */
	    "\"\\udc00\"",	    /* lone low surrogate */
	    "\"\\ud800\\u0041\"",   /* high surrogate + non-low */
	    "\"\xc0\x80\"",	    /* overlong NUL */
	    "\"\xed\xa0\x80\"",	    /* UTF-8 encoded surrogate */
	    "\"\xf5\x80\x80\x80\"", /* above U+10FFFF */
	    "\"\xe2\x82\"",	    /* truncated sequence */
	    "\"\x80\"",		    /* stray continuation */
	    "{} {}",
	    "[1] x",
	    "/* c */ {}",
	    "[1,2]]",
	    "{\"a\":1]",
	    "[1}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = valid(bad[i]);

		if (rc != -EPROTO)
			fprintf(stderr, "  accepted or wrong code: %s (%d)\n", bad[i], rc);
		CHECK(rc == -EPROTO);
	}
	/* A control character inside a string, and an embedded NUL byte. */
	CHECK(validate("\"a\tb\"", 5) == -EPROTO);
	CHECK(validate("\"a\0b\"", 5) == -EPROTO);
	CHECK(validate("[1]\0", 4) == -EPROTO);
}

TEST(depth_is_bounded)
{
	char buf[300];
	struct pp_json j;

	memset(buf, '[', 200);
	memset(buf + 200, ']', 100);
	CHECK(validate(buf, 200) == -E2BIG);
	/* 64 levels pass; 65 do not. */
	memset(buf, '[', 64);
	memset(buf + 64, ']', 64);
	CHECK(validate(buf, 128) == 0);
	memset(buf, '[', 65);
	memset(buf + 65, ']', 65);
	CHECK(validate(buf, 130) == -E2BIG);
	/* A caller's smaller bound. */
	pp_json_init(&j, "[[[1]]]", 7, 2);
	CHECK(pp_json_skip(&j) == -E2BIG);
}

TEST(walks_members_and_reads_strings)
{
	const char *doc = "{\"kind\":\"PodList\",\"n\":3,\"items\":[{\"name\":\"a\"},{\"name\":"
			  "\"b\\u002dc\"}],\"x\":{\"y\":[null]}}";
	struct pp_json j;
	struct pp_json_str k, v;
	char out[16];
	int rc, items = 0, members = 0;

	pp_json_init(&j, doc, strlen(doc), 0);
	REQUIRE(pp_json_peek(&j) == PP_JSON_OBJECT);
	REQUIRE(pp_json_enter_object(&j) == 0);
	while ((rc = pp_json_next_member(&j, &k)) == 1) {
		members++;
		if (pp_json_str_eq(&k, "kind")) {
			REQUIRE(pp_json_read_string(&j, &v) == 0);
			CHECK(pp_json_str_eq(&v, "PodList"));
			CHECK(!v.escaped);
		} else if (pp_json_str_eq(&k, "items")) {
			REQUIRE(pp_json_enter_array(&j) == 0);
			while (pp_json_next_element(&j) == 1) {
				REQUIRE(pp_json_enter_object(&j) == 0);
				REQUIRE(pp_json_next_member(&j, &k) == 1);
				CHECK(pp_json_str_eq(&k, "name"));
				REQUIRE(pp_json_read_string(&j, &v) == 0);
				CHECK(pp_json_str_decode(&v, out, sizeof(out)) > 0);
				CHECK_STR(out, items == 0 ? "a" : "b-c");
				CHECK(pp_json_next_member(&j, &k) == 0);
				items++;
			}
		} else {
			CHECK(pp_json_peek(&j) != PP_JSON_NONE);
			CHECK(pp_json_skip(&j) == 0);
		}
	}
	CHECK(rc == 0);
	CHECK(members == 4);
	CHECK(items == 2);
	CHECK(pp_json_finish(&j) == 0);
}

TEST(errors_are_sticky_and_misuse_is_caught)
{
	struct pp_json j;
	struct pp_json_str s;

	pp_json_init(&j, "[1,", 3, 0);
	CHECK(pp_json_enter_array(&j) == 0);
	CHECK(pp_json_next_element(&j) == 1);
	CHECK(pp_json_skip(&j) == 0);
	CHECK(pp_json_next_element(&j) == -EPROTO);
	CHECK(pp_json_peek(&j) == PP_JSON_NONE);
	CHECK(pp_json_skip(&j) == -EPROTO);
	CHECK(pp_json_finish(&j) == -EPROTO);

	/* Reading a number as a string, and members of an array. */
	pp_json_init(&j, "5", 1, 0);
	CHECK(pp_json_read_string(&j, &s) == -EPROTO);
	pp_json_init(&j, "[1]", 3, 0);
	CHECK(pp_json_enter_array(&j) == 0);
	CHECK(pp_json_next_member(&j, &s) == -EPROTO);
	/* No container entered. */
	pp_json_init(&j, "1", 1, 0);
	CHECK(pp_json_next_element(&j) == -EPROTO);
	/* NULL buffer is an empty document. */
	pp_json_init(&j, NULL, 10, 0);
	CHECK(pp_json_peek(&j) == PP_JSON_NONE);
}

TEST(decodes_escapes_and_bounds_output)
{
	const char *doc = "\"a\\n\\t\\\"\\\\\\/\\u00e9\\ud83d\\ude00z\"";
	struct pp_json j;
	struct pp_json_str s;
	char out[32], tiny[4];

	pp_json_init(&j, doc, strlen(doc), 0);
	REQUIRE(pp_json_read_string(&j, &s) == 0);
	CHECK(s.escaped);
	CHECK(pp_json_str_decode(&s, out, sizeof(out)) == 13);
	CHECK_STR(out, "a\n\t\"\\/\xc3\xa9\xf0\x9f\x98\x80z");
	CHECK(pp_json_str_decode(&s, tiny, sizeof(tiny)) == -E2BIG);
	CHECK(pp_json_str_decode(&s, out, 0) == -E2BIG);
	/* Exactly fitting: 3 bytes + NUL. */
	pp_json_init(&j, "\"abc\"", 5, 0);
	REQUIRE(pp_json_read_string(&j, &s) == 0);
	CHECK(pp_json_str_decode(&s, tiny, sizeof(tiny)) == 3);
	CHECK_STR(tiny, "abc");
	/* A NUL cannot go into a C string. */
	pp_json_init(&j, "\"a\\u0000b\"", 10, 0);
	REQUIRE(pp_json_read_string(&j, &s) == 0);
	CHECK(pp_json_str_decode(&s, out, sizeof(out)) == -EILSEQ);
	/* Escaped keys compare by their decoded value. */
	pp_json_init(&j, "\"k\\u0069nd\"", 11, 0);
	REQUIRE(pp_json_read_string(&j, &s) == 0);
	CHECK(pp_json_str_eq(&s, "kind"));
	CHECK(!pp_json_str_eq(&s, "kin"));
}

TEST_LIST = {
    {"accepts_valid_documents", accepts_valid_documents},
    {"rejects_invalid_documents", rejects_invalid_documents},
    {"depth_is_bounded", depth_is_bounded},
    {"walks_members_and_reads_strings", walks_members_and_reads_strings},
    {"errors_are_sticky_and_misuse_is_caught", errors_are_sticky_and_misuse_is_caught},
    {"decodes_escapes_and_bounds_output", decodes_escapes_and_bounds_output},
};
TEST_MAIN()
