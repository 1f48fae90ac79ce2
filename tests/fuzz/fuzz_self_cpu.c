/*
 * Fuzz target for the text base/self_cpu reads per thread: any bytes as a schedstat file give
 * 0 with the leading decimal number, or -EINVAL, never reading past the buffer; any bytes as a
 * comm give a name of [a-z0-9_-] only, never empty, never longer than its buffer, which is
 * safe as a Prometheus label value.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/self_cpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact-size copy, so a read past size is caught by ASan */
	char *copy = malloc(size ? size : 1), name[PP_SELF_CPU_NAME_MAX];
	uint64_t ns = 0, digits = 0;
	size_t n = 0;
	int rc;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	rc = pp_schedstat_run_ns(copy, size, &ns);
	if (rc != 0 && rc != -EINVAL)
		abort();
	while (n < size && copy[n] >= '0' && copy[n] <= '9')
		digits = digits * 10 + (uint64_t)(copy[n++] - '0');
	if (rc == 0 && (n == 0 || digits != ns || (n < size && copy[n] != ' ' && copy[n] != '\n')))
		abort();
	for (int main_thread = 0; main_thread < 2; main_thread++) {
		size_t len;

		pp_self_cpu_name(copy, size, main_thread, name, sizeof(name));
		len = strnlen(name, sizeof(name));
		if (len == 0 || len == sizeof(name))
			abort();
		for (size_t i = 0; i < len; i++)
			if (!((name[i] >= 'a' && name[i] <= 'z') ||
			      (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
			      name[i] == '_'))
				abort();
	}
	free(copy);
	return 0;
}
