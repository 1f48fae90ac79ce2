/*
 * Fuzz target for the /proc/PID/cgroup parser: any bytes give
 * -EINVAL, 0 or 1 without reading past the buffer, and a container found has a 64-lowercase-hex id,
 * as a cgroup path would. The same bytes as /proc/cgroups text: -EINVAL, 0, or a subsystem's
 * index + 1, no more than the lines there are.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/cgroup_ids.h"
#include "metadata/container_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_container_ref ref;
	char *copy = malloc(size ? size : 1);
	int rc;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	rc = pp_proc_cgroup_parse(copy, size, &ref);
	if (rc != 0 && rc != 1 && rc != -EINVAL)
		abort();
	if (rc == 1) {
		if (strlen(ref.id) != 64)
			abort();
		for (size_t i = 0; i < 64; i++)
			if (!((ref.id[i] >= '0' && ref.id[i] <= '9') ||
			      (ref.id[i] >= 'a' && ref.id[i] <= 'f')))
				abort();
	}
	rc = pp_proc_cgroups_subsys(copy, size, NULL, 0);
	if ((rc < 0 && rc != -EINVAL) || (rc > 0 && (size_t)rc > size / 8 + 1))
		abort();
	free(copy);
	return 0;
}
