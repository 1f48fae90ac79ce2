/*
 * Fuzz target for the unwind table file decoder (the agent's on-disk table cache): any bytes
 * give a table or NULL with EBADMSG, EPROTO or ENOMEM, never a read past them; a table given
 * holds sorted rows whose lookups land at or below the address asked, and encodes back to the
 * very bytes it came from (the form has one encoding, so nothing unchecked rides along). Each
 * input is tried as it is and with its checksum made right, so that mutations reach the checks
 * of the content behind it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cfi/unwind_table.h"
#include "cfi/unwind_table_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *sealed;

	one(data, size);
	if (size < 4 || !(sealed = malloc(size)))
		return 0;
	memcpy(sealed, data, size);
	{
		uint32_t crc = (uint32_t)crc32(0, sealed, (uInt)(size - 4));

		for (int i = 0; i < 4; i++)
			sealed[size - 4 + i] = (uint8_t)(crc >> (8 * i));
	}
	one(sealed, size);
	free(sealed);
	return 0;
}

static void one(const uint8_t *data, size_t size)
{
	uint8_t digest[PP_UNWIND_DIGEST_SIZE];
	uint8_t *copy = malloc(size ? size : 1);
	struct pp_unwind_table *t;
	size_t n, len;
	void *again;

	if (!copy)
		return;
	memcpy(copy, data, size); /* exactly size bytes: a read past them is a finding */
	errno = 0;
	t = pp_unwind_table_decode(copy, size, 0, digest); /* copy is the table's (or freed) */
	if (!t) {
		if (errno != EBADMSG && errno != EPROTO && errno != ENOMEM)
			__builtin_trap();
		return;
	}
	n = pp_unwind_table_count(t);
	for (size_t i = 0; i < n; i++) {
		struct pp_unwind_row r, l, prev;

		if (!pp_unwind_table_get(t, i, &r) || r.cfa_rule > PP_CFA_UNSUPPORTED ||
		    r.ra_rule > PP_REG_UNSUPPORTED || r.rbp_rule > PP_REG_UNSUPPORTED)
			__builtin_trap();
		if (i && (!pp_unwind_table_get(t, i - 1, &prev) || prev.pc > r.pc))
			__builtin_trap();
		if (!pp_unwind_table_lookup(t, r.pc, &l) || l.pc > r.pc)
			__builtin_trap();
	}
	if (pp_unwind_table_encode(t, digest, &again, &len) == 0) {
		if (len != size || memcmp(again, data, size))
			__builtin_trap();
		free(again);
	}
	pp_unwind_table_free(t);
}
