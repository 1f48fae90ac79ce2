/*
 * A small test harness: each test file defines its cases with TEST(name), lists them in
 * TEST_LIST, and the harness runs all, prints one line per case and a summary, and exits
 * non-zero on any failure. CHECK records a failure and continues; REQUIRE stops the case.
 */
#ifndef PP_TEST_CHECK_H
#define PP_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pp_test_case {
	const char *name;
	void (*fn)(void);
};

extern int pp_test_failed_checks;

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			pp_test_failed_checks++;                                                   \
		}                                                                                  \
	} while (0)

#define REQUIRE(cond)                                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			pp_test_failed_checks++;                                                   \
			return;                                                                    \
		}                                                                                  \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                   \
		if (a_ != b_) {                                                                    \
			fprintf(stderr,                                                            \
				"  %s:%d: CHECK_EQ failed: %s == %s (0x%" PRIx64 " != 0x%" PRIx64  \
				")\n",                                                             \
				__FILE__, __LINE__, #a, #b, a_, b_);                               \
			pp_test_failed_checks++;                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                           \
			fprintf(                                                                   \
			    stderr, "  %s:%d: CHECK_STR failed: %s == %s (\"%s\" != \"%s\")\n",    \
			    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");   \
			pp_test_failed_checks++;                                                   \
		}                                                                                  \
	} while (0)

/* Print why a case cannot run; the case counts as skipped, not passed. */
#define SKIP(why)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "  skipped: %s\n", why);                                           \
		pp_test_skipped = 1;                                                               \
		return;                                                                            \
	} while (0)

extern int pp_test_skipped;

#define TEST_LIST static const struct pp_test_case pp_test_cases[]

#define TEST_MAIN()                                                                                \
	int pp_test_failed_checks;                                                                 \
	int pp_test_skipped;                                                                       \
	int main(void)                                                                             \
	{                                                                                          \
		size_t n = sizeof(pp_test_cases) / sizeof(pp_test_cases[0]);                       \
		int passed = 0, failed = 0, skipped = 0;                                           \
		const char *only = getenv("PP_TEST_ONLY"); /* one test by name */                  \
		for (size_t i = 0; i < n; i++) {                                                   \
			int before = pp_test_failed_checks;                                        \
			if (only && strcmp(only, pp_test_cases[i].name) != 0)                      \
				continue;                                                          \
			pp_test_skipped = 0;                                                       \
			pp_test_cases[i].fn();                                                     \
			if (pp_test_failed_checks != before) {                                     \
				failed++;                                                          \
				printf("FAIL %s\n", pp_test_cases[i].name);                        \
			} else if (pp_test_skipped) {                                              \
				skipped++;                                                         \
				printf("SKIP %s\n", pp_test_cases[i].name);                        \
			} else {                                                                   \
				passed++;                                                          \
				printf("ok   %s\n", pp_test_cases[i].name);                        \
			}                                                                          \
		}                                                                                  \
		printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);             \
		if (failed)                                                                        \
			return 1;                                                                  \
		return passed == 0 && skipped > 0 ? 77 : 0;                                        \
	}

#endif /* PP_TEST_CHECK_H */
