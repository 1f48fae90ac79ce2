/*
 * Tests for the free runs of a range of slots: first fit, no slot handed out twice, runs given
 * back merged with both neighbours so a large run fits again, and a run too large refused.
 */
#include "check.h"
#include "unwind/extents.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

TEST(runs_given_back_merge_so_a_large_run_fits_again)
{
	struct pp_extents x;
	uint32_t a, b, c, d;

	REQUIRE(pp_extents_init(&x, 100) == 0);
	REQUIRE(pp_extents_alloc(&x, 30, &a) == 0);
	REQUIRE(pp_extents_alloc(&x, 30, &b) == 0);
	REQUIRE(pp_extents_alloc(&x, 30, &c) == 0);
	CHECK(a == 0 && b == 30 && c == 60);
	CHECK(x.used == 90);
	CHECK(pp_extents_alloc(&x, 11, &d) == -ENOSPC);
	CHECK(x.used == 90);

	/* a hole between two runs: first fit takes it, not the tail */
	pp_extents_free(&x, b, 30);
	REQUIRE(pp_extents_alloc(&x, 10, &d) == 0);
	CHECK(d == 30);
	pp_extents_free(&x, d, 10);

	/* the hole's 10 merge with the run after, c with the runs on both sides, a with after */
	pp_extents_free(&x, c, 30); /* 30..60, c, 90..100: one run 30..100 */
	pp_extents_free(&x, a, 30); /* 0..30 and 30..100 */
	CHECK(x.used == 0);
	CHECK(x.nruns == 1 && x.runs[0].first == 0 && x.runs[0].n == 100);
	CHECK(x.frees == 4);
	REQUIRE(pp_extents_alloc(&x, 100, &d) == 0);
	CHECK(d == 0);
	pp_extents_fini(&x);
}

/* Random runs against a slot-by-slot mirror: never a slot twice, and every free slot usable. */
TEST(random_runs_never_overlap)
{
	enum { SLOTS = 4096 };
	struct pp_extents x;
	struct {
		uint32_t first, n;
	} held[512];
	uint8_t *owner = calloc(SLOTS, 1);
	uint64_t r = 0x9e3779b97f4a7c15ull;
	int nheld = 0;

	REQUIRE(owner != NULL);
	REQUIRE(pp_extents_init(&x, SLOTS) == 0);
	for (int step = 0; step < 20000; step++) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		if (nheld < 512 && (r & 1)) {
			uint32_t n = (uint32_t)(r >> 8) % 64 + 1, first;

			if (pp_extents_alloc(&x, n, &first) == 0) {
				REQUIRE(first + n <= SLOTS);
				for (uint32_t i = 0; i < n; i++) {
					CHECK(!owner[first + i]);
					owner[first + i] = 1;
				}
				held[nheld].first = first;
				held[nheld++].n = n;
			}
		} else if (nheld) {
			int k = (int)((r >> 16) % (uint64_t)nheld);

			for (uint32_t i = 0; i < held[k].n; i++)
				owner[held[k].first + i] = 0;
			pp_extents_free(&x, held[k].first, held[k].n);
			held[k] = held[--nheld];
		}
	}
	while (nheld) {
		nheld--;
		pp_extents_free(&x, held[nheld].first, held[nheld].n);
	}
	CHECK(x.used == 0);
	CHECK(x.nruns == 1 && x.runs[0].n == SLOTS);
	pp_extents_fini(&x);
	free(owner);
}

TEST_LIST = {
    {"runs_given_back_merge_so_a_large_run_fits_again",
     runs_given_back_merge_so_a_large_run_fits_again},
    {"random_runs_never_overlap", random_runs_never_overlap},
};
TEST_MAIN()
