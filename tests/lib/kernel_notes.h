/*
 * Test helper: a sysfs tree's kernel/notes as a kernel writes it (the Xen and Linux notes
 * around the GNU build id), for tests of what reads the running kernel's build id.
 */
#ifndef PP_TEST_KERNEL_NOTES_H
#define PP_TEST_KERNEL_NOTES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testsh.h"

static inline void pp_test_put32(FILE *f, uint32_t v)
{
	fwrite(&v, 4, 1, f);
}

/* One note: the name padded to 4 bytes, then the description padded likewise. */
static inline void pp_test_put_note(FILE *f, const char *name, uint32_t type, const void *desc,
				    uint32_t len)
{
	static const uint8_t zero[4];
	uint32_t namesz = (uint32_t)strlen(name) + 1;

	pp_test_put32(f, namesz);
	pp_test_put32(f, len);
	pp_test_put32(f, type);
	fwrite(name, 1, namesz, f);
	fwrite(zero, 1, (4 - namesz % 4) % 4, f);
	fwrite(desc, 1, len, f);
	fwrite(zero, 1, (4 - len % 4) % 4, f);
}

/* <sys>/kernel/notes holding the build id hex_id ("" for none): 0, or -1. */
static inline int pp_test_write_kernel_notes(const char *sys, const char *hex_id)
{
	char path[4200];
	uint8_t id[64], xen[4] = {1, 1, 0, 0};
	uint32_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/kernel", sys);
	if (pp_test_sh("mkdir -p '%s'", path))
		return -1;
	snprintf(path, sizeof(path), "%s/kernel/notes", sys);
	f = fopen(path, "w");
	if (!f)
		return -1;
	for (; hex_id[2 * n] && n < sizeof(id); n++)
		sscanf(hex_id + 2 * n, "%2hhx", &id[n]);
	pp_test_put_note(f, "Xen", 6, "linux", 6);
	pp_test_put_note(f, "Linux", 0x101, xen, 4);
	if (n)
		pp_test_put_note(f, "GNU", 3, id, n);
	pp_test_put_note(f, "Linux", 0x100, xen, 4);
	return fclose(f);
}

/* The first line of a shell command's output into out, "" when none (newline cut). */
static inline void pp_test_sh_line(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");

	out[0] = '\0';
	if (p && fgets(out, (int)size, p))
		out[strcspn(out, "\n")] = '\0';
	if (p)
		pclose(p);
}

#endif
