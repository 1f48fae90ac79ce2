/*
 * Fuzz target for the table cache's identities file parser (unwind/table_cache.h): any bytes
 * give records or -EBADMSG / -EPROTO, never a read past them; each input is tried as it is and
 * behind the header the stamp asks for, so that mutations reach the records. Every record kept
 * encodes back to bytes whose CRC matches, and there are never more than asked for, nor more
 * good and bad ones than the bytes can hold.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/table_cache.h"

#define MAX_OUT 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char g_stamp[PP_TABLE_IDENTITY_STAMP_SIZE] = "fuzz-compiler fuzz-boot";

static void one(const uint8_t *data, size_t size)
{
	struct pp_table_identity out[MAX_OUT];
	uint8_t *copy = malloc(size ? size : 1);
	size_t n = 0, bad = 0;
	int err;

	if (!copy)
		return;
	memcpy(copy, data, size); /* exactly size bytes: a read past them is a finding */
	err = pp_table_identities_parse(copy, size, g_stamp, out, MAX_OUT, &n, &bad);
	if (err && err != -EBADMSG && err != -EPROTO)
		__builtin_trap();
	if (err && (n || bad))
		__builtin_trap();
	if (!err) {
		size_t body = size - PP_TABLE_IDENTITIES_HEADER_SIZE;

		if (n > MAX_OUT || n + bad > body / PP_TABLE_IDENTITY_RECORD_SIZE + 1)
			__builtin_trap();
		for (size_t i = 0; i < n; i++) {
			uint8_t rec[PP_TABLE_IDENTITY_RECORD_SIZE];
			struct pp_table_identity back;
			size_t m = 0, b = 0;
			uint8_t
			    file[PP_TABLE_IDENTITIES_HEADER_SIZE + PP_TABLE_IDENTITY_RECORD_SIZE];

			pp_table_identity_encode(&out[i], rec);
			memcpy(file, copy, PP_TABLE_IDENTITIES_HEADER_SIZE);
			memcpy(file + PP_TABLE_IDENTITIES_HEADER_SIZE, rec, sizeof(rec));
			if (pp_table_identities_parse(file, sizeof(file), g_stamp, &back, 1, &m,
						      &b) ||
			    m != 1 || b || memcmp(&back, &out[i], sizeof(back)))
				__builtin_trap();
		}
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *framed = malloc(PP_TABLE_IDENTITIES_HEADER_SIZE + size);

	one(data, size);
	if (!framed)
		return 0;
	memcpy(framed, "PPUWID01", 8);
	memcpy(framed + 8, g_stamp, PP_TABLE_IDENTITY_STAMP_SIZE);
	memcpy(framed + PP_TABLE_IDENTITIES_HEADER_SIZE, data, size);
	one(framed, PP_TABLE_IDENTITIES_HEADER_SIZE + size);
	free(framed);
	return 0;
}
