/*
 * Tests for the radix sort of (key, value) pairs: against a stable reference (qsort by key,
 * then original position) on random keys of every width, keys sharing their high bytes as a
 * file's addresses do, many equal keys (order kept), the extremes, and n of 0 and 1.
 */
#include "check.h"
#include "base/radix_sort.h"

#include <stdlib.h>
#include <string.h>

static int by_key_then_value(const void *pa, const void *pb)
{
	const struct pp_sort_pair *a = pa, *b = pb;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->value < b->value ? -1 : a->value > b->value;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* v's pairs (values their original positions) sorted as a stable sort would: 1, else 0. */
static int sorts_like_reference(struct pp_sort_pair *v, size_t n)
{
	struct pp_sort_pair *want = malloc((n + 1) * sizeof(*want)),
			    *tmp = malloc((n + 1) * sizeof(*tmp));
	int ok;

	if (!want || !tmp) {
		free(want);
		free(tmp);
		return 0;
	}
	memcpy(want, v, n * sizeof(*v));
	qsort(want, n, sizeof(*want), by_key_then_value);
	pp_radix_sort_pairs(v, tmp, n);
	ok = !memcmp(v, want, n * sizeof(*v));
	free(want);
	free(tmp);
	return ok;
}

TEST(random_keys_of_every_width)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	for (int bits = 1; bits <= 64; bits += 7) {
		size_t n = 5000;
		struct pp_sort_pair *v = malloc(n * sizeof(*v));

		REQUIRE(v != NULL);
		for (size_t i = 0; i < n; i++)
			v[i] = (struct pp_sort_pair){
			    bits == 64 ? rnd(&seed) : rnd(&seed) & ((1ull << bits) - 1), i};
		CHECK(sorts_like_reference(v, n));
		free(v);
	}
}

TEST(addresses_aliases_and_extremes)
{
	uint64_t seed = 42;
	size_t n = 20000;
	struct pp_sort_pair *v = malloc(n * sizeof(*v));

	REQUIRE(v != NULL);
	/* a library's addresses: high bytes shared, a few thousand aliases at one address */
	for (size_t i = 0; i < n; i++)
		v[i] = (struct pp_sort_pair){
		    0x7f3a12000000ull + (i % 3 ? rnd(&seed) % 0x400000 : 0x1000), i};
	CHECK(sorts_like_reference(v, n));
	for (size_t i = 0; i < n; i++)
		v[i] = (struct pp_sort_pair){i % 2 ? UINT64_MAX : 0, i};
	CHECK(sorts_like_reference(v, n));
	for (size_t i = 0; i < n; i++)
		v[i] = (struct pp_sort_pair){7, i}; /* all equal: nothing moves */
	CHECK(sorts_like_reference(v, n));
	for (size_t i = 0; i < n; i++)
		v[i] = (struct pp_sort_pair){n - i, i}; /* descending */
	CHECK(sorts_like_reference(v, n));
	v[0] = (struct pp_sort_pair){5, 0};
	CHECK(sorts_like_reference(v, 1));
	CHECK(sorts_like_reference(v, 0));
	free(v);
}

TEST_LIST = {
    {"random_keys_of_every_width", random_keys_of_every_width},
    {"addresses_aliases_and_extremes", addresses_aliases_and_extremes},
};
TEST_MAIN()
