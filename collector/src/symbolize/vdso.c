/*
 * The agent's own vdso as the symbol table of every 64-bit process's vdso (see vdso.h).
 */
#include "vdso.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

/* The 64-bit image lies above 4 GiB; a 32-bit (ia32, x32) process's lies below. */
#define LOW_4G 0x100000000ull

/* The [vdso] line's range in a maps file: 0, or -ENOENT. */
static int own_vdso_range(const char *maps_path, uint64_t *start, uint64_t *end)
{
	char line[512];
	FILE *f = fopen(maps_path, "re");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uint64_t lo, hi;
		size_t n = strlen(line);

		while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
			line[--n] = '\0';
		if (n < 6 || strcmp(line + n - 6, "[vdso]") != 0 ||
		    sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) != 2 || hi <= lo)
			continue;
		*start = lo;
		*end = hi;
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

int pp_vdso_open_own(struct pp_vdso *v, const char *maps_path)
{
	uint64_t start = 0, end = 0, base = getauxval(AT_SYSINFO_EHDR);
	int ret;

	memset(v, 0, sizeof(*v));
	if (!base)
		return -ENOENT;
	ret = own_vdso_range(maps_path, &start, &end);
	if (ret)
		return ret;
	if (base != start)
		return -ENOENT; /* moved (mremap) since the kernel told where it was */
	v->syms = pp_elf_symbols_open_mem((const void *)(uintptr_t)start, end - start);
	if (!v->syms)
		return -ENOEXEC;
	v->len = end - start;
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
