/*
 * Fuzz target for the mountinfo cgroup2 finder: any bytes give 0, -ENOENT or -ENAMETOOLONG
 * without reading past the buffer; a found path is NUL-terminated within outlen, and the
 * answer does not depend on the output size as long as the path fits (exactly-fitting and
 * one-byte-short buffers are tried too). The v1 finder walks the same lines, the super
 * block's options too: the same answers, a path NUL-terminated.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/cgroup_ids.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char big[4096], *exact;
	char *copy;
	size_t n;
	int rc, rc2;

	/* An exact-size copy so a read past size is caught by ASan. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	/* The hybrid-host check walks the same lines: 0 or 1, never past size. */
	if (pp_mountinfo_has_cgroup1(copy, size) > 1)
		abort();
	rc = pp_mountinfo_find_cgroup2(copy, size, big, sizeof(big));
	if (rc != 0 && rc != -ENOENT && rc != -ENAMETOOLONG)
		abort();
	if (rc == 0) {
		n = strnlen(big, sizeof(big));
		if (n >= sizeof(big))
			abort();
		exact = malloc(n + 1);
		if (!exact)
			abort();
		rc2 = pp_mountinfo_find_cgroup2(copy, size, exact, n + 1);
		if (rc2 != 0 || strcmp(exact, big) != 0)
			abort();
		if (n > 0 && pp_mountinfo_find_cgroup2(copy, size, exact, n) != -ENAMETOOLONG)
			abort();
		free(exact);
	} else if (rc == -ENOENT) {
		char one[1];

		if (pp_mountinfo_find_cgroup2(copy, size, one, sizeof(one)) != -ENOENT)
			abort();
	}
	rc = pp_mountinfo_find_cgroup1(copy, size, "memory", big, sizeof(big));
	if ((rc != 0 && rc != -ENOENT && rc != -ENAMETOOLONG) ||
	    (rc == 0 && strnlen(big, sizeof(big)) >= sizeof(big)))
		abort();
	free(copy);
	return 0;
}
