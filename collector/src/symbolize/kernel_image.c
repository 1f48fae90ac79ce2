/* Finding the running kernel's image with DWARF (see kernel_image.h). */
#include "kernel_image.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/elf_read.h"
#include "base/fsutil.h"
#include "base/root_open.h"
#include "debug_file.h"

#define NOTES_MAX 4096

int pp_kernel_notes_build_id(const uint8_t *buf, size_t n, char *out, size_t out_size)
{
	size_t off = 0;

	while (off + 12 <= n) {
		uint32_t namesz, descsz, type;
		size_t name_off = off + 12, desc_off;

		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		desc_off = name_off + ((namesz + 3u) & ~3u);
		if (namesz > n || descsz > n || desc_off + descsz > n)
			break;
		if (type == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 &&
		    !memcmp(buf + name_off, "GNU", 4) && descsz) {
			if (out_size < 2 * (size_t)descsz + 1)
				return -ENOSPC;
			for (uint32_t i = 0; i < descsz; i++)
				snprintf(out + 2 * i, 3, "%02x", buf[desc_off + i]);
			return 0;
		}
		off = desc_off + ((descsz + 3u) & ~3u);
	}
	return -ENOENT;
}

int pp_kernel_build_id(const char *sys_root, char *out, size_t out_size)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/kernel/notes", sys_root ? sys_root : "/sys");
	return pp_notes_file_build_id(path, out, out_size);
}

int pp_notes_file_build_id(const char *path, char *out, size_t out_size)
{
	uint8_t buf[NOTES_MAX];
	ssize_t got;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read(fd, buf, sizeof(buf));
	close(fd);
	if (got < 0)
		return -errno;
	return pp_kernel_notes_build_id(buf, (size_t)got, out, out_size);
}

/* The image's _stext (or _text) and whether it has DWARF and code: 0, or -ENODATA. */
static int image_shape(int fd, uint64_t *stext)
{
	struct pp_elf_src src;
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int has_dwarf = 0, has_code = 0, found = 0;

	if (pp_elf_src_fd(&src, fd) || pp_elf_preflight(&src, NULL))
		return -ENODATA;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx)) {
		elf_end(elf);
		return -ENODATA;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(name, ".debug_info") && sh.sh_type == SHT_PROGBITS && sh.sh_size)
			has_dwarf = 1;
		else if (!strcmp(name, ".text") && sh.sh_type == SHT_PROGBITS && sh.sh_size)
			has_code = 1;
		else if (sh.sh_type == SHT_SYMTAB && sh.sh_entsize) {
			Elf_Data *d = elf_getdata(scn, NULL);
			size_t count = d ? d->d_size / sh.sh_entsize : 0;

			for (size_t i = 0; i < count && found < 2; i++) {
				GElf_Sym sym;
				const char *s;

				if (!gelf_getsym(d, (int)i, &sym) ||
				    !(s = elf_strptr(elf, sh.sh_link, sym.st_name)))
					continue;
				/* _stext is what kallsyms shows on every kernel; _text the fallback
				 */
				if (!strcmp(s, "_stext")) {
					*stext = sym.st_value;
					found = 2;
				} else if (!strcmp(s, "_text") && !found) {
					*stext = sym.st_value;
					found = 1;
				}
			}
		}
	}
	elf_end(elf);
	return has_dwarf && has_code && found ? 0 : -ENODATA;
}

/*
 * Take the image open at fd (taken over, closed unless taken; -ENOENT for no fd) once its own
 * build id is want_id (a path, a directory or a server may hold anything; NULL: any), named
 * by the caller: 0; -ENOENT for another build, or -ENODATA without a build id (when want_id
 * is NULL), DWARF or code.
 */
static int take_fd(int fd, const char *want_id, struct pp_kernel_image *out)
{
	char id[PP_BUILD_ID_HEX_SIZE];
	int err;

	if (fd < 0)
		return -ENOENT;
	if (pp_elf_read_build_id_fd(fd, id, sizeof(id)) || (want_id && strcmp(id, want_id))) {
		close(fd);
		return want_id ? -ENOENT : -ENODATA;
	}
	err = image_shape(fd, &out->stext);
	if (err) {
		close(fd);
		return err;
	}
	out->fd = fd;
	snprintf(out->build_id, sizeof(out->build_id), "%s", id);
	return 0;
}

/* Take the candidate at path under root: 0, -ENOENT (absent or another build), -ENODATA. */
static int try_image(const char *root, const char *path, const char *want_id,
		     struct pp_kernel_image *out)
{
	int err = take_fd(pp_root_open(root, path, 0), want_id, out);

	if (!err)
		snprintf(out->path, sizeof(out->path), "%s%s", root && root[0] ? root : "", path);
	return err;
}

/* Take fd, found by the running build id where says: named "WHERE, build id ID". */
static int take_found(int fd, const char *running, const char *where, struct pp_kernel_image *out)
{
	int err = take_fd(fd, running, out);

	if (!err)
		snprintf(out->path, sizeof(out->path), "%s, build id %s", where, running);
	return err;
}

int pp_kernel_image_open(const struct pp_kernel_image_opts *o, struct pp_kernel_image *out,
			 char *why, size_t why_size)
{
	/* perf's places (tools/perf/util/symbol.c, vmlinux_path__init) */
	static const struct {
		const char *before, *after; /* the release between them */
	} places[] = {
	    {"/usr/lib/debug/boot/vmlinux-", ""},	{"/usr/lib/debug/lib/modules/", "/vmlinux"},
	    {"/usr/lib/debug/boot/vmlinux-", ".debug"}, {"/boot/vmlinux-", ""},
	    {"/lib/modules/", "/build/vmlinux"},	{"/usr/lib/modules/", "/build/vmlinux"},
	};
	char running[PP_BUILD_ID_HEX_SIZE], path[512];
	struct utsname uts;
	const char *release = o->release, *fetched = "";
	int err, nodata = 0;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	err = pp_kernel_build_id(o->sys_root, running, sizeof(running));
	if (err)
		running[0] = '\0';
	if (o->path) {
		if (!running[0]) {
			/* the running kernel does not say: the path is taken on the user's word */
			err = try_image(NULL, o->path, NULL, out);
		} else {
			err = try_image(NULL, o->path, running, out);
			if (err == -ENOENT && access(o->path, R_OK) == 0)
				err = -ESTALE;
		}
		snprintf(why, why_size, "%s: %s", o->path,
			 err == -ESTALE	   ? "not the running kernel's build"
			 : err == -ENODATA ? "no DWARF, code or _stext (a stripped or packed image)"
			 : err		   ? "cannot be opened"
					   : "ok");
		return err;
	}
	if (!running[0]) {
		snprintf(why, why_size,
			 "the running kernel's build id is unknown (%s/kernel/notes): give the "
			 "image's path",
			 o->sys_root ? o->sys_root : "/sys");
		return -ENOENT;
	}
	if (!release) {
		if (uname(&uts)) {
			snprintf(why, why_size, "uname: %s", strerror(errno));
			return -errno;
		}
		release = uts.release;
	}
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		pp_pathf(path, sizeof(path), "%s%s%s", places[i].before, release, places[i].after);
		err = try_image(o->root, path, running, out);
		if (!err)
			return 0;
		nodata |= err == -ENODATA;
	}
	if (o->debug_dirs) {
		struct pp_debug_target t = {
		    .root = o->root, .path = "/vmlinux", .build_id = running};
		int fd = pp_debug_file_open(o->debug_dirs, &t, NULL, 0);

		err = take_found(fd, running, "debug directory", out);
		if (!err)
			return 0;
		nodata |= err == -ENODATA;
	}
	if (o->fetch) {
		int fd = o->fetch(o->fetch_ctx, running);

		/* a failure (a server down) is asked again by the client, not given up */
		if (fd == -EAGAIN || fd == -EIO) {
			snprintf(
			    why, why_size, "none here for %s (build id %s): %s", release, running,
			    fd == -EAGAIN ? "asked the debuginfod servers"
					  : "asking the debuginfod servers failed; asked again "
					    "later");
			return -EINPROGRESS;
		}
		err = take_found(fd, running, "debuginfod", out);
		if (!err)
			return 0;
		fetched = err == -ENODATA ? "; the debuginfod servers' has no DWARF or code"
			  : fd >= 0	  ? "; the debuginfod servers' is another build"
					  : "; no debuginfod server has it";
		nodata |= err == -ENODATA;
	}
	snprintf(why, why_size,
		 "%s for %s (build id %s) in /usr/lib/debug/boot, /usr/lib/debug/lib/modules, "
		 "/boot, /lib/modules/%s/build or DIR/.build-id (Debian: linux-image-%s-dbg%s)%s",
		 nodata ? "no image with DWARF and code" : "no image", release, running, release,
		 release, o->fetch ? "" : "; or kernel-image debuginfod", fetched);
	return nodata ? -ENODATA : -ENOENT;
}
