/*
 * The agent's own vdso as the symbol table of every 64-bit process's vdso (see vdso.h).
 */
#include "vdso.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "base/fsutil.h"
#include "process/procmaps.h"

/* The 64-bit image lies above 4 GiB; a 32-bit (ia32, x32) process's lies below. */
#define LOW_4G 0x100000000ull
/* the agent's own maps: a few hundred lines */
#define MAX_OWN_MAPS_BYTES (1u << 20)

/* The length of the [vdso] mapping at base in a maps file: 0, or -errno. */
static int own_vdso_len(const char *maps_path, uint64_t base, uint64_t *vdso_len)
{
	const struct pp_map_entry *e;
	struct pp_maps maps;
	size_t len = 0;
	char *text;
	int ret = pp_read_text_whole(maps_path, MAX_OWN_MAPS_BYTES, &text, &len);

	if (ret)
		return ret;
	ret = pp_maps_parse(text, len, &maps);
	free(text);
	if (ret)
		return ret;
	/* where the kernel put it: not moved (mremap) since */
	e = pp_maps_find(&maps, base);
	ret = e && e->kind == PP_MAP_KIND_VDSO && e->start == base ? 0 : -ENOENT;
	if (!ret)
		*vdso_len = e->end - e->start;
	pp_maps_fini(&maps);
	return ret;
}

int pp_vdso_open_own(struct pp_vdso *v, const char *maps_path)
{
	uint64_t len = 0, base = getauxval(AT_SYSINFO_EHDR);
	int ret;

	memset(v, 0, sizeof(*v));
	if (!base)
		return -ENOENT;
	ret = own_vdso_len(maps_path, base, &len);
	if (ret)
		return ret;
	v->syms = pp_elf_symbols_open_mem((const void *)(uintptr_t)base, len);
	if (!v->syms)
		return -ENOEXEC;
	v->len = len;
	return 0;
}

bool pp_vdso_serves(const struct pp_vdso *v, uint64_t start, uint64_t end)
{
	return v && v->syms && start >= LOW_4G && end > start && end - start == v->len;
}

void pp_vdso_fini(struct pp_vdso *v)
{
	if (!v)
		return;
	pp_elf_symbols_free(v->syms);
	memset(v, 0, sizeof(*v));
}
