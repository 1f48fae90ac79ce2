/*
 * Unit tests of text cleaning: what is clean, what each fault becomes, cuts at character
 * boundaries, and that a profile turns hostile names into clean text in every writer.
 */
#include <pebsprof/profile.h>
#include <pebsprof/text.h>
#include <pebsprof/writers.h>

#include "check.h"

#include <stdlib.h>

static char *cleaned(const char *s, size_t len)
{
	size_t need = pp_text_clean(s, len, NULL, 0);
	char *out = malloc(need + 1);

	if (out)
		CHECK_EQ_U64(pp_text_clean(s, len, out, need + 1), need);
	return out;
}

TEST(clean_text_passes)
{
	static const char *const ok[] = {"",
					 "main",
					 "std::vector<int>::push_back",
					 "caf\xc3\xa9",
					 "\xe6\x97\xa5\xe6\x9c\xac",
					 "\xf0\x9f\x94\xa5 hot",
					 "\xef\xbf\xbd"};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK(pp_text_is_clean(ok[i]));
		CHECK_EQ_U64(pp_text_check(ok[i], strlen(ok[i]), NULL), PP_TEXT_CLEAN);
	}
	CHECK(pp_text_is_clean(NULL));
}

TEST(faults_found_where_they_are)
{
	static const struct {
		const char *s;
		enum pp_text_fault fault;
		size_t at;
	} cases[] = {
	    {"ab\xff", PP_TEXT_BAD_UTF8, 2},
	    {"\xc0\xaf", PP_TEXT_BAD_UTF8, 0},	       /* overlong '/' */
	    {"x\xe0\x80\xaf", PP_TEXT_BAD_UTF8, 1},    /* overlong, 3 bytes */
	    {"\xed\xa0\x80", PP_TEXT_BAD_UTF8, 0},     /* a surrogate */
	    {"\xf4\x90\x80\x80", PP_TEXT_BAD_UTF8, 0}, /* past U+10FFFF */
	    {"caf\xc3", PP_TEXT_BAD_UTF8, 3},	       /* cut sequence */
	    {"\x1b]0;PWNED\x07", PP_TEXT_CONTROL, 0},  /* OSC title */
	    {"a\nb", PP_TEXT_CONTROL, 1},	       /* a forged line */
	    {"del\x7f", PP_TEXT_CONTROL, 3},	       /* DEL */
	    {"csi\xc2\x9b"
	     "31m",
	     PP_TEXT_CONTROL, 3}, /* C1 CSI */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t at = 99;

		CHECK_EQ_U64(pp_text_check(cases[i].s, strlen(cases[i].s), &at), cases[i].fault);
		CHECK_EQ_U64(at, cases[i].at);
		CHECK(!pp_text_is_clean(cases[i].s));
	}
}

TEST(cleaning_replaces_visibly)
{
	char *c;

	c = cleaned("\x1b]0;PWNED\x07", 10);
	CHECK_STR(c, "\\x1b]0;PWNED\\x07");
	free(c);
	c = cleaned("ab\xff\xfe"
		    "cd",
		    6);
	CHECK_STR(c, "ab\xef\xbf\xbd\xef\xbf\xbd"
		     "cd");
	free(c);
	c = cleaned("csi\xc2\x9b"
		    "31m",
		    8);
	CHECK_STR(c, "csi\\u009b31m");
	free(c);
	c = cleaned("a\0b", 3); /* a NUL inside a length-given string is a control too */
	CHECK_STR(c, "a\\x00b");
	free(c);
	c = cleaned("caf\xc3\xa9", 5); /* clean text is unchanged */
	CHECK_STR(c, "caf\xc3\xa9");
	free(c);
	/* the result is always clean */
	for (unsigned b = 0; b < 256; b++) {
		char in[3] = {(char)b, (char)(b ^ 0x80), 'z'};

		c = cleaned(in, sizeof(in));
		REQUIRE(c);
		CHECK(pp_text_is_clean(c));
		free(c);
	}
}

TEST(cuts_keep_whole_characters)
{
	char out[6];
	size_t n;

	/* "\x1b" becomes 4 bytes: only "ab" fits before it in 5 + NUL */
	n = pp_text_clean("ab\x1b"
			  "cd",
			  5, out, sizeof(out));
	CHECK_EQ_U64(n, 8);
	CHECK_STR(out, "ab");
	n = pp_text_clean("\xe6\x97\xa5\xe6\x9c\xac", 6, out, 5); /* two 3-byte characters */
	CHECK_EQ_U64(n, 6);
	CHECK_STR(out, "\xe6\x97\xa5");
	CHECK(pp_text_is_clean(out));
	n = pp_text_clean("abc", 3, out, 1);
	CHECK_EQ_U64(n, 3);
	CHECK_STR(out, "");
}

/* Every string a profile hands its writers is clean, whatever the samples named. */
TEST(profile_cleans_every_string)
{
	struct pp_profile_desc d = {.event = "cpu-clock", .period = 1};
	struct pp_profile *p = pp_profile_new(&d);
	static const char *const hostile[] = {"\x1b]0;PWNED\x07", "bad\xff\xfe", "two\nlines",
					      "\x1b[31mred"};
	struct pp_mapping_info m = {
	    .start = 0x1000, .limit = 0x2000, .filename = "/tmp/\xff\x1b.so", .build_id = ""};
	struct pp_label attr = {.key = "k8s.pod.name", .value = "pod\xc0\xaf"};
	uint32_t locs[4], res;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	REQUIRE(p);
	for (int i = 0; i < 4; i++) {
		struct pp_location_info l = {.address = 0x1000u + (uint64_t)i,
					     .function = hostile[i],
					     .kind = PP_FRAME_NATIVE};

		if (i == 0)
			l.mapping_id = pp_profile_intern_mapping(p, &m);
		locs[i] = pp_profile_intern_location(p, &l);
		REQUIRE(locs[i]);
	}
	res = pp_profile_intern_resource(p, &attr, 1);
	REQUIRE(res);
	{
		struct pp_sample_info s = {.locations = locs,
					   .nlocations = 4,
					   .pid = 7,
					   .tid = 7,
					   .thread_name = "\x1b[2Jcomm",
					   .process_name = "exe\xff",
					   .resource_id = res,
					   .count = 3,
					   .value = 3};

		REQUIRE(pp_profile_add_sample(p, &s) == 0);
	}
	CHECK(pp_profile_strings_cleaned(p) >= 8);
	for (uint32_t id = 1; id <= pp_profile_location_count(p); id++)
		CHECK(pp_text_is_clean(pp_profile_get_location(p, id)->function));
	CHECK(pp_text_is_clean(pp_profile_get_mapping(p, 1)->filename));
	CHECK(pp_text_is_clean(pp_profile_get_sample(p, 0)->thread_name));
	CHECK(pp_text_is_clean(pp_profile_get_sample(p, 0)->process_name));
	/* the folded text, the report and the SVG: no control byte at all but their own newlines */
	f = open_memstream(&buf, &len);
	REQUIRE(f);
	CHECK(pp_folded_write(p, f) == 0);
	pp_report_print_top(p, f, 10);
	CHECK(pp_flamegraph_write_svg(p, f, "title\x1b[31m") == 0);
	fclose(f);
	REQUIRE(buf);
	for (size_t i = 0; i < len; i++)
		CHECK(buf[i] == '\n' || ((unsigned char)buf[i] >= 0x20 && buf[i] != 0x7f));
	CHECK(strstr(buf, "\\x1b]0;PWNED\\x07") != NULL);
	free(buf);
	pp_profile_free(p);
}

TEST_LIST = {
    {"clean_text_passes", clean_text_passes},
    {"faults_found_where_they_are", faults_found_where_they_are},
    {"cleaning_replaces_visibly", cleaning_replaces_visibly},
    {"cuts_keep_whole_characters", cuts_keep_whole_characters},
    {"profile_cleans_every_string", profile_cleans_every_string},
};

TEST_MAIN()
