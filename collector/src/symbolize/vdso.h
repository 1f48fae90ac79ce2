/*
 * The vdso's names: the kernel maps one vdso image into every 64-bit process, so the agent's
 * own copy names the frames of theirs (perf does the same), where the profile would say only
 * "[vdso]". A 32-bit process maps another image, below 4 GiB: not named from this one.
 */
#ifndef PP_SYMBOLIZE_VDSO_H
#define PP_SYMBOLIZE_VDSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elf_symbols.h"

struct pp_vdso {
	struct pp_elf_symbols *syms; /* NULL: no vdso here, or it could not be read */
	uint64_t len;		     /* its mapping's length */
};

/*
 * Reads the agent's own vdso (its mapping in maps_path, normally /proc/self/maps, and its
 * image at AT_SYSINFO_EHDR). 0, or -errno with v left empty (frames stay "[vdso]").
 */
int pp_vdso_open_own(struct pp_vdso *v, const char *maps_path);

/* Whether a process's vdso mapping [start, end) is the image v holds. */
bool pp_vdso_serves(const struct pp_vdso *v, uint64_t start, uint64_t end);

void pp_vdso_fini(struct pp_vdso *v);

#endif
