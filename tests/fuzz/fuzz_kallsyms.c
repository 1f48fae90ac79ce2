/*
 * Fuzz target for the /proc/kallsyms parser: the bytes are kallsyms text; whatever parses is
 * looked up at each symbol's address and around it.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "symbolize/kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_kallsyms *k = pp_kallsyms_parse((const char *)data, size);
	const uint64_t probes[] = {0, 1, 0xffffffff81000000ull, 0xffffffffc0000000ull, UINT64_MAX};
	const char *mod, *name;
	uint64_t start;

	if (!k)
		return 0;
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		name = pp_kallsyms_lookup(k, probes[i], &start, &mod);
		if (name) {
			uint64_t again;

			/* A name found by address is found by name, at an address <= the probe. */
			if (start > probes[i] || pp_kallsyms_find(k, name, &again) != 0)
				__builtin_trap();
			(void)strlen(name);
			if (mod)
				(void)strlen(mod);
			(void)pp_kallsyms_lookup(k, start - 1, NULL, NULL);
		}
	}
	(void)pp_kallsyms_count(k);
	pp_kallsyms_free(k);
	return 0;
}
