/*
 * The running kernel's image with its DWARF (a vmlinux, as a distribution's debug package
 * installs it: Debian's linux-image-RELEASE-dbg, Fedora's kernel-debuginfo), for the data types
 * of kernel memory accesses. Found the way perf finds it (an explicit path, then the usual
 * places for the running release, then DIR/.build-id/ of each debug directory, then, where asked
 * for, the debuginfod servers) and taken only when its build id is the running kernel's
 * (/sys/kernel/notes): an image of another build would name the wrong instructions.
 */
#ifndef PP_COLLECTOR_KERNEL_IMAGE_H
#define PP_COLLECTOR_KERNEL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "elf_symbols.h"

struct pp_debug_dirs;

struct pp_kernel_image_opts {
	const char *path;     /* an image to take (its build id still checked); NULL: search */
	const char *root;     /* the host's root as the agent sees it (NULL: "/") */
	const char *sys_root; /* NULL: "/sys" */
	const char *release;  /* NULL: the running kernel's (uname -r) */
	const struct pp_debug_dirs *debug_dirs; /* NULL: /usr/lib/debug only */
	/*
	 * Where none of those has it: the image by the running kernel's build id from a
	 * debuginfod client that never blocks (pp_debuginfod_fetch: an fd, -EAGAIN while it is
	 * fetched, -ENOENT or -EIO), or NULL. Opt-in: a vmlinux is hundreds of MiB a node.
	 */
	int (*fetch)(void *ctx, const char *build_id);
	void *fetch_ctx;
};

struct pp_kernel_image {
	int fd; /* the image, read-only; the caller closes it */
	char path[512];
	char build_id[PP_BUILD_ID_HEX_SIZE];
	/* the link-time address of _stext (where kallsyms' _stext is after KASLR's slide) */
	uint64_t stext;
};

/*
 * The running kernel's build id from <sys_root>/kernel/notes: 0 with the lower-case hex id in
 * out, -ENOENT when the notes hold none, -ENOSPC when out is too small, or -errno of the read.
 */
int pp_kernel_build_id(const char *sys_root, char *out, size_t out_size);
/* The same from a notes file the kernel writes (sysfs: kernel/notes, module/NAME/notes/...). */
int pp_notes_file_build_id(const char *path, char *out, size_t out_size);
/* The same from the notes' n bytes in buf (ELF notes, 4-byte aligned, as the kernel gives). */
int pp_kernel_notes_build_id(const uint8_t *buf, size_t n, char *out, size_t out_size);

/*
 * Open the running kernel's image with DWARF: 0 with out filled, or -errno with what was tried
 * and why it failed in why (for one log line):
 *   -ENOENT  no candidate exists, or none has the running kernel's build id;
 *   -ENODATA the image found has no DWARF or no code (a stripped or compressed image);
 *   -ESTALE  an explicit path whose build id is not the running kernel's;
 *   -EINPROGRESS  none here, and o->fetch is fetching it, or asking failed (a server down;
 *                 the client asks again): ask again later.
 * Without the running kernel's build id (no notes readable) only an explicit path is taken.
 */
int pp_kernel_image_open(const struct pp_kernel_image_opts *o, struct pp_kernel_image *out,
			 char *why, size_t why_size);

#endif /* PP_COLLECTOR_KERNEL_IMAGE_H */
