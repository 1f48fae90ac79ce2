/*
 * Fuzz target for finding a path's mount in mountinfo text: the first line of the input is
 * the path, the rest the mountinfo a process may shape with its own mounts.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "process/mount_fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *nl = memchr(text, '\n', size);
	char path[512], type[64];
	size_t plen = nl ? (size_t)(nl - text) : size;

	if (plen >= sizeof(path))
		plen = sizeof(path) - 1;
	memcpy(path, text, plen);
	path[plen] = '\0';
	if (memchr(path, '\0', plen))
		return 0;
	if (nl) {
		size_t rest = size - (size_t)(nl + 1 - text);

		if (pp_mountinfo_fstype(nl + 1, rest, path, type, sizeof(type)) == 0 &&
		    strlen(type) >= sizeof(type))
			__builtin_trap();
	}
	(void)pp_mountinfo_fstype(text, size, "/tmp/perf-1.map", type, 1);
	return 0;
}
