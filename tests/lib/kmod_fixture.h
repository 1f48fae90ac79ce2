/*
 * Test helper: a host with kernel module pp_kmod installed as Debian installs modules (stripped
 * of their DWARF, named in modules.dep) and, where asked, its debug file as linux-image-*-dbg
 * installs it (objcopy --only-keep-debug), and a sysfs tree showing it loaded: its build id in
 * module/pp_kmod/notes, its sections' addresses in module/pp_kmod/sections.
 */
#ifndef PP_TEST_KMOD_FIXTURE_H
#define PP_TEST_KMOD_FIXTURE_H

#include <stdint.h>
#include <stdio.h>

#include "kernel_notes.h"
#include "testsh.h"

struct pp_test_kmod_section {
	const char *name;
	uint64_t addr;
};

/* <sys>/module/pp_kmod/notes/.note.gnu.build-id holding hex_id: 0, or -1 */
static inline int pp_test_kmod_notes(const char *sys, const char *hex_id)
{
	char path[4400];
	uint8_t id[64];
	uint32_t n = 0;
	FILE *fp;

	if (pp_test_sh("mkdir -p '%s/module/pp_kmod/notes'", sys))
		return -1;
	snprintf(path, sizeof(path), "%s/module/pp_kmod/notes/.note.gnu.build-id", sys);
	fp = fopen(path, "w");
	if (!fp)
		return -1;
	for (; hex_id[2 * n] && n < sizeof(id); n++)
		sscanf(hex_id + 2 * n, "%2hhx", &id[n]);
	pp_test_put_note(fp, "GNU", 3, id, n);
	return fclose(fp);
}

/* <sys>/module/pp_kmod/sections/NAME holding each address (0 for all where hidden): 0, or -1 */
static inline int pp_test_kmod_sections(const char *sys, const struct pp_test_kmod_section *secs,
					size_t n, int hidden)
{
	char path[4800];

	if (pp_test_sh("mkdir -p '%s/module/pp_kmod/sections'", sys))
		return -1;
	for (size_t i = 0; i < n; i++) {
		FILE *fp;

		snprintf(path, sizeof(path), "%s/module/pp_kmod/sections/%s", sys, secs[i].name);
		fp = fopen(path, "w");
		if (!fp)
			return -1;
		fprintf(fp, "0x%016llx\n", hidden ? 0ull : (unsigned long long)secs[i].addr);
		if (fclose(fp))
			return -1;
	}
	return 0;
}

/*
 * The host root at root and sysfs at sys for the module built at ko, of kernel release, its
 * build id hex_id: 0, or -1.
 */
static inline int pp_test_kmod_fixture(const char *root, const char *sys, const char *ko,
				       const char *release, int with_debug, const char *hex_id,
				       const struct pp_test_kmod_section *secs, size_t n)
{
	if (pp_test_sh("mkdir -p '%s/lib/modules/%s/kernel/drivers/pp' "
		       "'%s/usr/lib/debug/lib/modules/%s/kernel/drivers/pp'",
		       root, release, root, release) ||
	    pp_test_sh("printf 'kernel/fs/xfs/xfs.ko:\\nkernel/drivers/pp/pp_kmod.ko: "
		       "kernel/fs/xfs/xfs.ko\\n' > '%s/lib/modules/%s/modules.dep'",
		       root, release) ||
	    pp_test_sh(
		"objcopy --strip-debug '%s' '%s/lib/modules/%s/kernel/drivers/pp/pp_kmod.ko'", ko,
		root, release))
		return -1;
	if (with_debug &&
	    pp_test_sh("objcopy --only-keep-debug '%s' "
		       "'%s/usr/lib/debug/lib/modules/%s/kernel/drivers/pp/pp_kmod.ko'",
		       ko, root, release))
		return -1;
	if (pp_test_kmod_notes(sys, hex_id) || pp_test_kmod_sections(sys, secs, n, 0))
		return -1;
	return 0;
}

#endif
