/*
 * Fuzz target for the CFI compiler: the bytes are an ELF file whose .eh_frame_hdr and
 * .eh_frame may be anything. Whatever compiles must be a sorted table whose lookups land on
 * rows at or below the address asked. The same bytes are then read as a file that, when the
 * last byte is odd, grows to 8 GiB of holes past them: sections claimed there are refused
 * without being read.
 */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfi/unwind_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same bytes as a file, perhaps with 8 GiB of holes after them. */
static void from_file(const uint8_t *data, size_t size)
{
	int fd = memfd_create("pp-fuzz-unwind", MFD_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, data, size) == (ssize_t)size) {
		if (data[size - 1] & 1)
			(void)ftruncate(fd, (off_t)8 << 30);
		pp_unwind_table_free(pp_unwind_table_open_fd(fd, 1u << 16));
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_unwind_table *t = pp_unwind_table_open_mem(data, size, 1u << 16);
	size_t n;

	if (size)
		from_file(data, size);
	if (!t)
		return 0;
	n = pp_unwind_table_count(t);
	for (size_t i = 0; i < n; i++) {
		struct pp_unwind_row r, l, prev;

		if (!pp_unwind_table_get(t, i, &r))
			__builtin_trap();
		if (i && (!pp_unwind_table_get(t, i - 1, &prev) || prev.pc > r.pc))
			__builtin_trap();
		if (!pp_unwind_table_lookup(t, r.pc, &l) || l.pc > r.pc)
			__builtin_trap();
		(void)pp_cfa_rule_name((enum pp_cfa_rule)r.cfa_rule);
		(void)pp_reg_rule_name((enum pp_reg_rule)r.ra_rule);
	}
	{
		struct pp_unwind_row r;

		(void)pp_unwind_table_lookup(t, 0, &r);
		(void)pp_unwind_table_lookup(t, UINT64_MAX, &r);
		if (n && pp_unwind_table_get(t, n, &r))
			__builtin_trap();
	}
	(void)pp_unwind_table_bytes(t);
	pp_unwind_table_free(t);
	return 0;
}
