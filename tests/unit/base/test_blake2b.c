/*
 * Tests for BLAKE2b: RFC 7693's example (BLAKE2b-512 of "abc"), and coreutils' b2sum on every
 * length across the block and padding boundaries and on a real file fed in uneven pieces, at
 * the 32-byte size the table cache uses.
 */
#include "check.h"
#include "base/blake2b.h"
#include "testsh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

/* b2sum -l BITS of path, or "" where there is no b2sum */
static void b2sum(const char *path, int bits, char *out, size_t size)
{
	char cmd[4200];
	FILE *p;

	out[0] = 0;
	snprintf(cmd, sizeof(cmd), "b2sum -l %d '%s' 2>/dev/null", bits, path);
	p = popen(cmd, "r");
	if (!p)
		return;
	if (!fgets(out, (int)size, p))
		out[0] = 0;
	pclose(p);
	out[strcspn(out, " \n")] = 0;
}

TEST(rfc7693_example)
{
	struct pp_blake2b s;
	uint8_t d[64];
	char out[129];

	pp_blake2b_init(&s, 64);
	pp_blake2b_update(&s, "abc", 3);
	pp_blake2b_final(&s, d);
	hex(d, 64, out);
	CHECK(!strcmp(out, "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
			   "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"));
}

/* Lengths 0..300 (a block is 128 bytes) whole and bytewise, against b2sum. */
TEST(lengths_match_b2sum)
{
	char dir[512], path[600], want[80], got[65];
	uint8_t buf[300];

	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-b2") == 0);
	snprintf(path, sizeof(path), "%s/in", dir);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + 11);
	for (size_t len = 0; len <= sizeof(buf); len += len < 260 ? 1 : 13) {
		struct pp_blake2b a, b;
		uint8_t da[32], db[32];
		FILE *f = fopen(path, "wb");

		REQUIRE(f);
		REQUIRE(fwrite(buf, 1, len, f) == len);
		fclose(f);
		b2sum(path, 256, want, sizeof(want));
		if (!want[0])
			SKIP("no b2sum");
		pp_blake2b_init(&a, 32);
		pp_blake2b_update(&a, buf, len);
		pp_blake2b_final(&a, da);
		pp_blake2b_init(&b, 32);
		for (size_t i = 0; i < len; i++)
			pp_blake2b_update(&b, buf + i, 1);
		pp_blake2b_final(&b, db);
		hex(da, 32, got);
		CHECK(!strcmp(got, want));
		CHECK(!memcmp(da, db, 32));
	}
}

/* This test's own executable, fed in pieces of uneven sizes. */
TEST(file_in_pieces_matches_b2sum)
{
	char path[4096], want[80], got[65];
	struct pp_blake2b s;
	uint8_t d[32], buf[4099];
	size_t n, step = 1;
	ssize_t len = readlink("/proc/self/exe", path, sizeof(path) - 1);
	FILE *f;

	REQUIRE(len > 0);
	path[len] = 0;
	b2sum(path, 256, want, sizeof(want));
	if (!want[0])
		SKIP("no b2sum");
	f = fopen(path, "rb");
	REQUIRE(f);
	pp_blake2b_init(&s, 32);
	while ((n = fread(buf, 1, step, f)) > 0) {
		pp_blake2b_update(&s, buf, n);
		step = step * 7 % sizeof(buf) + 1;
	}
	fclose(f);
	pp_blake2b_final(&s, d);
	hex(d, 32, got);
	CHECK(!strcmp(got, want));
}

TEST_LIST = {
    {"rfc7693_example", rfc7693_example},
    {"lengths_match_b2sum", lengths_match_b2sum},
    {"file_in_pieces_matches_b2sum", file_in_pieces_matches_b2sum},
};
TEST_MAIN()
