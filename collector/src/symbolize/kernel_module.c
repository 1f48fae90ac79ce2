/* A loaded kernel module's .ko laid out at the kernel's addresses (see kernel_module.h). */
#include "kernel_module.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/elf_read.h"
#include "base/fsutil.h"
#include "base/root_open.h"
#include "debug_file.h"
#include "kernel_image.h"

/* modules.dep: a few hundred KiB on a distribution kernel */
#define MODULES_DEP_MAX (16u << 20)

#ifndef R_X86_64_PLT32
#define R_X86_64_PLT32 4
#endif

static void rd_shdr(const uint8_t *buf, const Elf64_Ehdr *eh, size_t i, Elf64_Shdr *sh)
{
	memcpy(sh, buf + eh->e_shoff + i * sizeof(*sh), sizeof(*sh));
}

/* [off, off + size) inside len: the checks every table and target passes */
static bool inside(uint64_t off, uint64_t size, size_t len)
{
	return off <= len && size <= len - off;
}

/* The NUL-terminated name at off of the section name table, or NULL. */
static const char *sec_name(const uint8_t *buf, const Elf64_Shdr *strtab, uint32_t off)
{
	const char *s;

	if (off >= strtab->sh_size)
		return NULL;
	s = (const char *)buf + strtab->sh_offset + off; /* inside: the table's extent checked */
	return memchr(s, '\0', strtab->sh_size - off) ? s : NULL;
}

static const struct pp_kmod_section *live_section(const struct pp_kmod_section *secs, size_t n,
						  const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(secs[i].name, name))
			return &secs[i];
	return NULL;
}

struct rel_target {
	Elf64_Shdr *sh; /* the section relocated (its new address in sh_addr) */
	bool strict;	/* a debug section: every relocation applied, or the file refused */
};

/* S + A - P etc. written at off of the target, little-endian: 0 or -errno */
static int apply_one(uint8_t *buf, const struct rel_target *t, uint32_t type, uint64_t off,
		     uint64_t value, uint64_t place)
{
	unsigned width;
	uint8_t *at;
	uint64_t v;

	switch (type) {
	case R_X86_64_NONE:
		return 0;
	case R_X86_64_64:
		width = 8, v = value;
		break;
	case R_X86_64_PC64:
		width = 8, v = value - place;
		break;
	case R_X86_64_PC32:
	case R_X86_64_PLT32: {
		int64_t d = (int64_t)(value - place);

		if (d < INT32_MIN || d > INT32_MAX)
			return -ERANGE;
		width = 4, v = (uint64_t)d;
		break;
	}
	case R_X86_64_32:
		if (value > UINT32_MAX)
			return -ERANGE;
		width = 4, v = value;
		break;
	case R_X86_64_32S:
		if ((int64_t)value < INT32_MIN || (int64_t)value > INT32_MAX)
			return -ERANGE;
		width = 4, v = value;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (off > t->sh->sh_size || width > t->sh->sh_size - off)
		return -EINVAL;
	at = buf + t->sh->sh_offset + off; /* inside: the caller checked the section's extent */
	for (unsigned i = 0; i < width; i++)
		at[i] = (uint8_t)(v >> (8 * i));
	return 0;
}

static int apply_section(uint8_t *buf, size_t len, const Elf64_Shdr *shdrs, size_t shnum,
			 const Elf64_Shdr *rela, const struct rel_target *t,
			 struct pp_kmod_layout_stats *st)
{
	const Elf64_Shdr *symtab;
	uint64_t nrel, nsym;

	if (rela->sh_link >= shnum || rela->sh_entsize != sizeof(Elf64_Rela))
		return -EINVAL;
	symtab = &shdrs[rela->sh_link];
	if (symtab->sh_type != SHT_SYMTAB || symtab->sh_entsize != sizeof(Elf64_Sym) ||
	    !inside(symtab->sh_offset, symtab->sh_size, len) ||
	    !inside(rela->sh_offset, rela->sh_size, len))
		return -EINVAL;
	nrel = rela->sh_size / sizeof(Elf64_Rela);
	nsym = symtab->sh_size / sizeof(Elf64_Sym);
	for (uint64_t i = 0; i < nrel; i++) {
		Elf64_Rela r;
		Elf64_Sym sym;
		uint64_t sidx, value;
		bool defined = true;
		int err;

		memcpy(&r, buf + rela->sh_offset + i * sizeof(r), sizeof(r));
		sidx = ELF64_R_SYM(r.r_info);
		if (sidx >= nsym) {
			if (t->strict)
				return -EINVAL;
			st->skipped++;
			continue;
		}
		memcpy(&sym, buf + symtab->sh_offset + sidx * sizeof(sym), sizeof(sym));
		if (sym.st_shndx == SHN_ABS)
			value = sym.st_value;
		else if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= shnum)
			defined = false, value = 0;
		else
			value = sym.st_value + shdrs[sym.st_shndx].sh_addr;
		if (!defined && !t->strict) {
			st->skipped++; /* a call into the kernel: the bytes stay as built */
			continue;
		}
		value += (uint64_t)r.r_addend;
		err = apply_one(buf, t, (uint32_t)ELF64_R_TYPE(r.r_info), r.r_offset, value,
				t->sh->sh_addr + r.r_offset);
		if (err) {
			if (t->strict)
				return err;
			st->skipped++;
			continue;
		}
		st->relocations++;
	}
	return 0;
}

int pp_kmod_layout(uint8_t *buf, size_t len, const struct pp_kmod_section *secs, size_t nsecs,
		   struct pp_kmod_layout_stats *st)
{
	struct pp_kmod_layout_stats local;
	Elf64_Ehdr eh;
	Elf64_Shdr *shdrs, *strtab;
	int err = 0;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	if (len < sizeof(eh))
		return -ENOEXEC;
	memcpy(&eh, buf, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_REL || eh.e_machine != EM_X86_64)
		return -ENOEXEC;
	/* extended numbering (65,280 sections or more) is no module's */
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
	    eh.e_shstrndx >= eh.e_shnum ||
	    !inside(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), len))
		return -EINVAL;
	shdrs = calloc(eh.e_shnum, sizeof(*shdrs));
	if (!shdrs)
		return -ENOMEM;
	for (size_t i = 0; i < eh.e_shnum; i++)
		rd_shdr(buf, &eh, i, &shdrs[i]);
	strtab = &shdrs[eh.e_shstrndx];
	if (strtab->sh_type != SHT_STRTAB || !inside(strtab->sh_offset, strtab->sh_size, len)) {
		err = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < eh.e_shnum; i++) {
		const char *name = sec_name(buf, strtab, shdrs[i].sh_name);
		const struct pp_kmod_section *live = name && (shdrs[i].sh_flags & SHF_ALLOC)
							 ? live_section(secs, nsecs, name)
							 : NULL;

		shdrs[i].sh_addr = live ? live->addr : 0;
		st->placed += live != NULL;
	}
	for (size_t i = 0; i < eh.e_shnum && !err; i++) {
		const Elf64_Shdr *rela = &shdrs[i];
		struct rel_target t;
		const char *tname;

		if (rela->sh_type != SHT_RELA)
			continue;
		if (rela->sh_info >= eh.e_shnum || rela->sh_info == i) {
			err = -EINVAL;
			break;
		}
		t.sh = &shdrs[rela->sh_info];
		tname = sec_name(buf, strtab, t.sh->sh_name);
		t.strict = tname && !(t.sh->sh_flags & SHF_ALLOC) && !strncmp(tname, ".debug_", 7);
		if (!t.strict && !((t.sh->sh_flags & SHF_EXECINSTR) && t.sh->sh_addr))
			continue; /* data, tables: not what the resolver reads */
		if (t.sh->sh_type == SHT_NOBITS)
			continue; /* a debug file's stripped code: nothing to patch */
		if (t.sh->sh_flags & SHF_COMPRESSED) {
			if (t.strict)
				err = -EOPNOTSUPP;
			continue;
		}
		if (!inside(t.sh->sh_offset, t.sh->sh_size, len)) {
			err = -EINVAL;
			break;
		}
		err = apply_section(buf, len, shdrs, eh.e_shnum, rela, &t, st);
	}
	if (!err)
		for (size_t i = 0; i < eh.e_shnum; i++)
			memcpy(buf + eh.e_shoff + i * sizeof(Elf64_Shdr), &shdrs[i],
			       sizeof(Elf64_Shdr));
out:
	free(shdrs);
	return err;
}

int pp_kmod_symbol_section(const uint8_t *buf, size_t len, const char *symbol, char *section,
			   size_t section_size, uint64_t *value, uint64_t *size)
{
	Elf64_Ehdr eh;
	Elf64_Shdr strtab, symtab, names, sh;

	if (len < sizeof(eh))
		return -ENOEXEC;
	memcpy(&eh, buf, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_REL)
		return -ENOEXEC;
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
	    eh.e_shstrndx >= eh.e_shnum ||
	    !inside(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), len))
		return -EINVAL;
	rd_shdr(buf, &eh, eh.e_shstrndx, &strtab);
	if (!inside(strtab.sh_offset, strtab.sh_size, len))
		return -EINVAL;
	for (size_t i = 0; i < eh.e_shnum; i++) {
		rd_shdr(buf, &eh, i, &symtab);
		if (symtab.sh_type != SHT_SYMTAB)
			continue;
		if (symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_link >= eh.e_shnum ||
		    !inside(symtab.sh_offset, symtab.sh_size, len))
			return -EINVAL;
		rd_shdr(buf, &eh, symtab.sh_link, &names);
		if (!inside(names.sh_offset, names.sh_size, len))
			return -EINVAL;
		for (uint64_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); k++) {
			const char *nm, *sn;
			Elf64_Sym sym;

			memcpy(&sym, buf + symtab.sh_offset + k * sizeof(sym), sizeof(sym));
			if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= eh.e_shnum ||
			    !(nm = sec_name(buf, &names, sym.st_name)) || strcmp(nm, symbol))
				continue;
			rd_shdr(buf, &eh, sym.st_shndx, &sh);
			sn = sec_name(buf, &strtab, sh.sh_name);
			if (!sn || !(sh.sh_flags & SHF_ALLOC) || strlen(sn) >= section_size)
				continue;
			snprintf(section, section_size, "%s", sn);
			*value = sym.st_value;
			*size = sh.sh_size;
			return 0;
		}
		break; /* one symbol table in an object */
	}
	return -ENOENT;
}

int pp_kmod_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n >= PP_KMOD_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* name and the n bytes at s the same module name, '-' and '_' alike */
static bool same_module(const char *name, const char *s, size_t n)
{
	if (strlen(name) != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char a = name[i] == '-' ? '_' : name[i], b = s[i] == '-' ? '_' : s[i];

		if (a != b)
			return false;
	}
	return true;
}

int pp_kmod_dep_find(const char *buf, size_t n, const char *name, char *rel, size_t rel_size)
{
	const char *p = buf, *end = buf + n;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		const char *colon = memchr(p, ':', (size_t)(line_end - p));

		if (colon && colon > p) {
			const char *base = colon, *stem_end;
			size_t plen = (size_t)(colon - p);

			while (base > p && base[-1] != '/')
				base--;
			/* xfs.ko, xfs.ko.xz, xfs.ko.zst, xfs.ko.gz */
			stem_end = base;
			while (stem_end + 3 <= colon && memcmp(stem_end, ".ko", 3))
				stem_end++;
			if (stem_end + 3 <= colon &&
			    (stem_end + 3 == colon || stem_end[3] == '.') &&
			    same_module(name, base, (size_t)(stem_end - base))) {
				if (plen >= rel_size)
					return -ENAMETOOLONG;
				memcpy(rel, p, plen);
				rel[plen] = '\0';
				return 0;
			}
		}
		p = line_end + 1;
	}
	return -ENOENT;
}

/* A sysfs address file's hex value ("0xffffffffc0a01000\n"): 0, or -EINVAL */
static int read_addr(const char *path, uint64_t *addr)
{
	char buf[64], *end;
	ssize_t n = pp_read_small_file(path, buf, sizeof(buf));

	if (n <= 0)
		return n < 0 ? (int)n : -EINVAL;
	errno = 0;
	*addr = strtoull(buf, &end, 16);
	if (errno || end == buf)
		return -EINVAL;
	return 0;
}

int pp_kmod_text_addr(const char *sys_root, const char *name, uint64_t *addr)
{
	char path[512];

	if (!pp_kmod_name_valid(name))
		return -EINVAL;
	pp_pathf(path, sizeof(path), "%s/module/%s/sections/.text", sys_root ? sys_root : "/sys",
		 name);
	return read_addr(path, addr);
}

int pp_kmod_sections_read(const char *sys_root, const char *name, struct pp_kmod_section **out,
			  size_t *n)
{
	struct pp_kmod_section *secs = NULL;
	char dir[400], path[512];
	struct dirent *de;
	size_t cnt = 0, nonzero = 0;
	int err = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	if (!pp_kmod_name_valid(name))
		return -EINVAL;
	pp_pathf(dir, sizeof(dir), "%s/module/%s/sections", sys_root ? sys_root : "/sys", name);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? -ENOENT : -errno;
	while ((de = readdir(d))) {
		struct pp_kmod_section *s;

		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		if (strlen(de->d_name) >= sizeof(secs->name))
			continue;
		if (cnt == PP_KMOD_MAX_SECTIONS) {
			err = -E2BIG;
			break;
		}
		s = realloc(secs, (cnt + 1) * sizeof(*secs));
		if (!s) {
			err = -ENOMEM;
			break;
		}
		secs = s;
		s = &secs[cnt];
		snprintf(s->name, sizeof(s->name), "%s", de->d_name);
		pp_pathf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (read_addr(path, &s->addr))
			continue;
		nonzero += s->addr != 0;
		cnt++;
	}
	closedir(d);
	if (!err && cnt && !nonzero)
		err = -EACCES; /* kptr_restrict's zeros: not root */
	if (!err && !cnt)
		err = -ENOENT;
	if (err) {
		free(secs);
		return err;
	}
	*out = secs;
	*n = cnt;
	return 0;
}

/* The build id the kernel shows for module name: 0, or -errno */
static int module_build_id(const char *sys_root, const char *name, char *out, size_t out_size)
{
	char path[512];

	pp_pathf(path, sizeof(path), "%s/module/%s/notes/.note.gnu.build-id",
		 sys_root ? sys_root : "/sys", name);
	return pp_notes_file_build_id(path, out, out_size);
}

/* fd's whole content (taken over and closed), at most max bytes: 0, or -errno */
static int slurp(int fd, uint64_t max, uint8_t **out, size_t *len)
{
	void *buf = NULL;
	int err;

	if (fd < 0)
		return fd;
	err = pp_read_fd_whole(fd, max, &buf, len);
	close(fd);
	if (!err)
		*out = buf;
	return err;
}

/* The build id of the ELF at fd, and whether it has DWARF (a .debug_info with bytes) */
static int file_facts(int fd, char *id, size_t id_size, int *has_dwarf)
{
	struct pp_elf_shape shape;
	struct pp_elf_src src;
	Elf64_Ehdr eh;
	Elf64_Shdr strtab, sh;
	char *names;
	int err;

	*has_dwarf = 0;
	err = pp_elf_read_build_id_fd(fd, id, id_size);
	if (err)
		return err;
	/* the section table and its names only, checked by the preflight */
	if (pp_elf_src_fd(&src, fd) || pp_elf_preflight(&src, &shape) ||
	    shape.elf_class != ELFCLASS64 || shape.big_endian ||
	    pp_elf_read_at(&src, 0, &eh, sizeof(eh)) ||
	    pp_elf_read_at(&src, eh.e_shoff + shape.shstrndx * sizeof(sh), &strtab, sizeof(sh)))
		return -ENOEXEC;
	names = malloc(strtab.sh_size + 1);
	if (!names)
		return -ENOMEM;
	if (pp_elf_read_at(&src, strtab.sh_offset, names, strtab.sh_size)) {
		free(names);
		return -ENOEXEC;
	}
	names[strtab.sh_size] = '\0';
	for (uint64_t i = 0; i < shape.shnum && !*has_dwarf; i++)
		if (!pp_elf_read_at(&src, eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh)) &&
		    sh.sh_name < strtab.sh_size && !strcmp(names + sh.sh_name, ".debug_info") &&
		    sh.sh_type == SHT_PROGBITS && sh.sh_size)
			*has_dwarf = 1;
	free(names);
	return 0;
}

void pp_kmod_image_fini(struct pp_kmod_image *m)
{
	if (!m)
		return;
	if (m->dwarf != m->code)
		free(m->dwarf);
	free(m->code);
	m->code = m->dwarf = NULL;
	m->code_len = m->dwarf_len = 0;
}

/* The debug file of the module at rel, build id want: an fd, or -errno; where in found */
static int open_debug(const struct pp_kernel_image_opts *o, const char *release, const char *rel,
		      const char *want, char *found, size_t found_size)
{
	/* Debian's linux-image-*-dbg, then Fedora's kernel-debuginfo */
	static const char *const suffixes[] = {"", ".debug"};
	char path[1024], id[PP_BUILD_ID_HEX_SIZE];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		int fd, dw;

		pp_pathf(path, sizeof(path), "/usr/lib/debug/lib/modules/%s/%s%s", release, rel,
			 suffixes[i]);
		fd = pp_root_open(o->root, path, 0);
		if (fd < 0)
			continue;
		if (!file_facts(fd, id, sizeof(id), &dw) && !strcmp(id, want) && dw) {
			pp_pathf(found, found_size, "%s%s", o->root ? o->root : "", path);
			return fd;
		}
		close(fd);
	}
	if (o->debug_dirs) {
		struct pp_debug_target t = {.root = o->root, .path = path, .build_id = want};
		int fd, dw;

		pp_pathf(path, sizeof(path), "/lib/modules/%s/%s", release, rel);
		fd = pp_debug_file_open(o->debug_dirs, &t, found, found_size);

		if (fd >= 0 && !file_facts(fd, id, sizeof(id), &dw) && !strcmp(id, want) && dw)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	if (o->fetch) {
		int fd = o->fetch(o->fetch_ctx, want), dw;

		if (fd == -EAGAIN || fd == -EIO)
			return -EINPROGRESS;
		if (fd >= 0 && !file_facts(fd, id, sizeof(id), &dw) && !strcmp(id, want) && dw) {
			snprintf(found, found_size, "debuginfod, build id %s", want);
			return fd;
		}
		if (fd >= 0)
			close(fd);
	}
	return -ENOENT;
}

/* One section placed from anchor in the module's image code: 0, or -errno */
static int anchor_section(const struct pp_kmod_image *img, const struct pp_kmod_anchor *anchor,
			  struct pp_kmod_section **secs, size_t *nsecs, uint64_t *size)
{
	struct pp_kmod_section *s = calloc(1, sizeof(*s));
	uint64_t value;
	int err;

	if (!s)
		return -ENOMEM;
	err = pp_kmod_symbol_section(img->code, img->code_len, anchor->symbol, s->name,
				     sizeof(s->name), &value, size);
	if (err || value > anchor->addr) {
		free(s);
		return err ? err : -EINVAL;
	}
	s->addr = anchor->addr - value;
	*secs = s;
	*nsecs = 1;
	return 0;
}

int pp_kmod_image_open(const struct pp_kernel_image_opts *o, const char *name,
		       const struct pp_kmod_anchor *anchor, uint64_t max_bytes,
		       struct pp_kmod_image *out, char *why, size_t why_size)
{
	char path[1024], rel[512], id[PP_BUILD_ID_HEX_SIZE];
	struct pp_kmod_section *secs = NULL;
	const char *release = o->release;
	struct utsname uts;
	size_t nsecs = 0, dlen = 0, rlen;
	uint8_t *dep = NULL;
	int fd = -1, dfd = -1, err, has_dwarf;

	memset(out, 0, sizeof(*out));
	if (!pp_kmod_name_valid(name)) {
		snprintf(why, why_size, "not a module's name");
		return -EINVAL;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	err = module_build_id(o->sys_root, name, out->build_id, sizeof(out->build_id));
	if (err) {
		snprintf(why, why_size, "module %s: no build id in its notes (%s)", name,
			 strerror(-err));
		return -ENOENT;
	}
	err = pp_kmod_sections_read(o->sys_root, name, &secs, &nsecs);
	if (err == -EACCES && anchor && anchor->symbol && anchor->addr) {
		out->anchored = 1; /* placed from the anchor once the module is read, below */
	} else if (err) {
		snprintf(why, why_size, "module %s: its sections' addresses: %s", name,
			 err == -EACCES ? "hidden (no CAP_SYSLOG, and no symbol to place it by)"
					: strerror(-err));
		return err;
	}
	for (size_t i = 0; i < nsecs; i++)
		if (!strcmp(secs[i].name, ".text"))
			out->text_addr = secs[i].addr;
	if (!release) {
		if (uname(&uts)) {
			err = -errno;
			snprintf(why, why_size, "uname: %s", strerror(errno));
			goto out;
		}
		release = uts.release;
	}
	pp_pathf(path, sizeof(path), "/lib/modules/%s/modules.dep", release);
	err = slurp(pp_root_open(o->root, path, 0), MODULES_DEP_MAX, &dep, &dlen);
	if (!err)
		err = pp_kmod_dep_find((const char *)dep, dlen, name, rel, sizeof(rel));
	if (err) {
		snprintf(why, why_size, "module %s: not in /lib/modules/%s/modules.dep (%s)", name,
			 release, strerror(-err));
		err = -ENOENT;
		goto out;
	}
	rlen = strlen(rel);
	if (rlen < 3 || strcmp(rel + rlen - 3, ".ko")) {
		snprintf(why, why_size,
			 "module %s: %s is compressed (its code is read from the file as loaded)",
			 name, rel);
		err = -EOPNOTSUPP;
		goto out;
	}
	pp_pathf(path, sizeof(path), "/lib/modules/%s/%s", release, rel);
	fd = pp_root_open(o->root, path, 0);
	if (fd < 0 || file_facts(fd, id, sizeof(id), &has_dwarf) || strcmp(id, out->build_id)) {
		snprintf(why, why_size, "module %s: %s%s %s", name, o->root ? o->root : "", path,
			 fd < 0 ? "cannot be opened" : "is another build than the loaded one");
		err = -ENOENT;
		goto out;
	}
	if (!has_dwarf) {
		dfd = open_debug(o, release, rel, out->build_id, out->path, sizeof(out->path));
		if (dfd < 0) {
			err = dfd == -EINPROGRESS ? -EINPROGRESS : -ENODATA;
			snprintf(why, why_size,
				 "module %s (build id %s): %s in /usr/lib/debug/lib/modules/%s, "
				 "DIR/.build-id%s",
				 name, out->build_id,
				 err == -EINPROGRESS ? "asked the debuginfod servers; none yet"
						     : "no debug file",
				 release, o->fetch ? " or debuginfod" : "");
			goto out;
		}
	} else {
		pp_pathf(out->path, sizeof(out->path), "%s%s", o->root ? o->root : "", path);
	}
	err = slurp(fd, max_bytes, &out->code, &out->code_len);
	fd = -1;
	if (!err && dfd >= 0) {
		err = slurp(dfd, max_bytes, &out->dwarf, &out->dwarf_len);
		dfd = -1;
	} else if (!err) {
		out->dwarf = out->code;
		out->dwarf_len = out->code_len;
	}
	if (err) {
		snprintf(why, why_size, "module %s: reading %s: %s", name, out->path,
			 err == -EFBIG ? "over the size allowed" : strerror(-err));
		goto out;
	}
	if (out->anchored) {
		uint64_t size;

		err = anchor_section(out, anchor, &secs, &nsecs, &size);
		if (err) {
			snprintf(why, why_size,
				 "module %s: its sections' addresses hidden and %s not placed by "
				 "its file: %s",
				 name, anchor->symbol, strerror(-err));
			goto out;
		}
		out->anchored_lo = secs[0].addr;
		out->anchored_hi = secs[0].addr + size;
		if (!strcmp(secs[0].name, ".text"))
			out->text_addr = secs[0].addr;
	}
	err = pp_kmod_layout(out->code, out->code_len, secs, nsecs, &out->layout);
	if (!err && out->dwarf != out->code)
		err = pp_kmod_layout(out->dwarf, out->dwarf_len, secs, nsecs, NULL);
	if (err)
		snprintf(why, why_size, "module %s: %s cannot be laid out: %s", name, out->path,
			 strerror(-err));
	else
		snprintf(why, why_size, "module %s: %s (build id %s)", name, out->path,
			 out->build_id);
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(dep);
	free(secs);
	if (err)
		pp_kmod_image_fini(out);
	return err;
}
