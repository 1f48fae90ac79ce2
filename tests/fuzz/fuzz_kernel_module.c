/*
 * Fuzz target for kernel modules' files (kernel_module.h): any bytes laid out as a module at a
 * kernel's addresses give 0 or an error, never a read or write outside them; an image laid out
 * is then read by the data-type resolver at the module's code, as the loader reads one; the
 * same bytes read as modules.dep name a path inside them or none, and a symbol's section is
 * found in them or not.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/data_type.h"
#include "symbolize/kernel_module.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct pp_kmod_section live[] = {
    {".text", 0xffffffffc0a01000ull},
    {".data", 0xffffffffc0a06000ull},
    {".bss", 0xffffffffc0a07000ull},
    {".init.text", 0xffffffffc0a90000ull},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_kmod_layout_stats st;
	char rel[256];
	uint8_t *img;

	if (pp_kmod_dep_find((const char *)data, size, "pp_kmod", rel, sizeof(rel)) == 0 &&
	    strlen(rel) >= size + 1)
		abort(); /* a path longer than its source */
	(void)pp_kmod_dep_find((const char *)data, size, "xhci_pci", rel, 8);
	{
		uint64_t value, sz;

		(void)pp_kmod_symbol_section(data, size, "task_prio", rel, sizeof(rel), &value,
					     &sz);
	}
	img = malloc(size ? size : 1);
	if (!img)
		return 0;
	memcpy(img, data, size);
	if (pp_kmod_layout(img, size, live, sizeof(live) / sizeof(live[0]), &st) == 0) {
		struct pp_data_type_resolver *r =
		    pp_data_type_resolver_open_mem(img, size, NULL, 0, NULL);

		if (r) {
			struct pp_data_type t;

			for (uint64_t off = 0; off < 0x60; off += 0x10)
				(void)pp_data_type_resolve(r, live[0].addr + off, 0, &t);
			pp_data_type_resolver_free(r);
		}
	}
	free(img);
	return 0;
}
