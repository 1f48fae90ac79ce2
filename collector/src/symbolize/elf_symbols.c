/*
 * Symbol tables of ELF files, built with libelf's gelf_ API so 32- and 64-bit files of either
 * byte order read the same. Every offset and size taken from the file is checked against the
 * file's length before libelf is asked to read it, so a truncated or corrupt file yields
 * -EINVAL instead of a read past the end; names are copied out, so the table outlives the Elf.
 */
#include "elf_symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

/* Longest symbol name kept; longer ones (absurd even for C++) are skipped as corrupt. */
#define MAX_NAME_LEN 8192
/* Nested symbols (one function's alias inside another) are looked for this far back. */
#define LOOKBACK 4

struct pp_elf_symbols {
	char build_id[PP_BUILD_ID_HEX_SIZE];
	char debuglink[256];
	uint32_t debuglink_crc;
	int has_debuglink_crc;
	enum pp_symbol_source source;
	int elf_class;
	int elf_type;
	int has_symtab;
	struct pp_elf_symbol *funcs;
	size_t nfuncs;
	struct pp_elf_symbol *data;
	size_t ndata;
	struct pp_elf_segment *segs;
	size_t nsegs;
	char *names; /* owns every symbol name */
	size_t names_len;
};

/* Per-section facts the symbol filters need, indexed by section number. */
struct sec_info {
	uint64_t addr;
	uint64_t size;
	uint64_t flags;
	bool valid;
};

/* A symbol before sorting and deduplication; name points into libelf's string table. */
struct cand {
	uint64_t start;
	uint64_t size;
	uint64_t sec_end;
	const char *name;
	uint32_t name_len;
	uint8_t type;
	uint8_t bind;
};

struct cand_vec {
	struct cand *v;
	size_t n;
	size_t cap;
};

struct reader {
	Elf *elf;
	uint64_t file_size;
	GElf_Ehdr ehdr;
	size_t shnum;
	struct sec_info *secs;
	unsigned int flags; /* PP_ELF_OPEN_* */
	uint64_t tls_vaddr;
	bool have_tls;
};

static bool in_file(uint64_t off, uint64_t size, uint64_t file_size)
{
	return off <= file_size && size <= file_size - off;
}

static int cand_push(struct cand_vec *cv, const struct cand *c)
{
	if (cv->n == cv->cap) {
		size_t ncap = cv->cap ? cv->cap * 2 : 256;
		struct cand *nv = realloc(cv->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		cv->v = nv;
		cv->cap = ncap;
	}
	cv->v[cv->n++] = *c;
	return 0;
}

static void hex_encode(const unsigned char *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 0xf];
	}
	out[2 * n] = '\0';
}

/* Scan one block of notes for NT_GNU_BUILD_ID; returns true when found (out filled). */
static bool build_id_in_notes(Elf_Data *d, char *out)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!d || !d->d_buf)
		return false;
	while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const char *base = d->d_buf;

		/* gelf_getnote checked that name and desc lie inside d. */
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(base + name_off, "GNU", 4) == 0 && nh.n_descsz > 0) {
			size_t n = nh.n_descsz;

			if (n > PP_BUILD_ID_MAX_BYTES)
				n = PP_BUILD_ID_MAX_BYTES;
			hex_encode((const unsigned char *)base + desc_off, n, out);
			return true;
		}
		if (next <= off)
			break;
		off = next;
	}
	return false;
}

/* The ELF header, checked; the common first step of every reader. */
static int read_ehdr(struct reader *r)
{
	size_t phnum = 0, shnum = 0;

	if (elf_kind(r->elf) != ELF_K_ELF)
		return -ENOEXEC;
	if (!gelf_getehdr(r->elf, &r->ehdr))
		return -ENOEXEC;
	if (gelf_getclass(r->elf) != ELFCLASS32 && gelf_getclass(r->elf) != ELFCLASS64)
		return -ENOEXEC;
	/*
	 * The raw header counts first: libelf quietly reports no sections when the section
	 * header table lies past the end of a memory image, which would hide truncation.
	 */
	if (r->ehdr.e_shoff &&
	    !in_file(
		r->ehdr.e_shoff,
		gelf_fsize(r->elf, ELF_T_SHDR, r->ehdr.e_shnum ? r->ehdr.e_shnum : 1, EV_CURRENT),
		r->file_size))
		return -EINVAL;
	if (r->ehdr.e_phoff &&
	    !in_file(r->ehdr.e_phoff, gelf_fsize(r->elf, ELF_T_PHDR, r->ehdr.e_phnum, EV_CURRENT),
		     r->file_size))
		return -EINVAL;
	if (elf_getphdrnum(r->elf, &phnum) != 0 || elf_getshdrnum(r->elf, &shnum) != 0)
		return -EINVAL;
	if (phnum && !in_file(r->ehdr.e_phoff, gelf_fsize(r->elf, ELF_T_PHDR, phnum, EV_CURRENT),
			      r->file_size))
		return -EINVAL;
	if (shnum && !in_file(r->ehdr.e_shoff, gelf_fsize(r->elf, ELF_T_SHDR, shnum, EV_CURRENT),
			      r->file_size))
		return -EINVAL;
	r->shnum = shnum;
	return 0;
}

/* The build id from PT_NOTE segments, else from SHT_NOTE sections (files without phdrs). */
static void find_build_id(struct reader *r, char *out)
{
	size_t phnum = 0;
	Elf_Scn *scn = NULL;

	out[0] = '\0';
	if (elf_getphdrnum(r->elf, &phnum) == 0) {
		for (size_t i = 0; i < phnum; i++) {
			GElf_Phdr ph;
			Elf_Data *d;

			if (!gelf_getphdr(r->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			if (!in_file(ph.p_offset, ph.p_filesz, r->file_size) || ph.p_filesz == 0)
				continue;
			d = elf_getdata_rawchunk(r->elf, (int64_t)ph.p_offset, ph.p_filesz,
						 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
			if (build_id_in_notes(d, out))
				return;
		}
	}
	while ((scn = elf_nextscn(r->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		if (!in_file(sh.sh_offset, sh.sh_size, r->file_size))
			continue;
		if (build_id_in_notes(elf_getdata(scn, NULL), out))
			return;
	}
}

static int read_segments(struct reader *r, struct pp_elf_symbols *s)
{
	size_t phnum = 0;

	if (elf_getphdrnum(r->elf, &phnum) != 0)
		return -EINVAL;
	if (phnum == 0)
		return 0;
	s->segs = calloc(phnum, sizeof(*s->segs));
	if (!s->segs)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(r->elf, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type == PT_TLS) {
			r->tls_vaddr = ph.p_vaddr;
			r->have_tls = true;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		s->segs[s->nsegs++] = (struct pp_elf_segment){
		    .vaddr = ph.p_vaddr,
		    .memsz = ph.p_memsz,
		    .offset = ph.p_offset,
		    .filesz = ph.p_filesz,
		    .flags = ph.p_flags & (PF_X | PF_W | PF_R),
		};
	}
	return 0;
}

/*
 * .gnu_debuglink: the debug file's name, NUL, padding to 4 bytes, then the CRC-32 of the
 * whole debug file in the file's byte order (binutils' layout).
 */
static void read_debuglink(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh,
			   struct pp_elf_symbols *s)
{
	const unsigned char *c;
	Elf_Data *d;
	const char *p;
	size_t len, crc_off;

	if (sh->sh_type == SHT_NOBITS || !in_file(sh->sh_offset, sh->sh_size, r->file_size))
		return;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size == 0)
		return;
	p = d->d_buf;
	len = strnlen(p, d->d_size);
	if (len == d->d_size || len == 0 || len >= sizeof(s->debuglink) || memchr(p, '/', len))
		return;
	memcpy(s->debuglink, p, len + 1);
	crc_off = (len + 1 + 3) & ~(size_t)3;
	if (crc_off > d->d_size || d->d_size - crc_off < 4)
		return;
	c = (const unsigned char *)p + crc_off;
	if (r->ehdr.e_ident[EI_DATA] == ELFDATA2MSB)
		s->debuglink_crc =
		    (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
	else
		s->debuglink_crc =
		    (uint32_t)c[3] << 24 | (uint32_t)c[2] << 16 | (uint32_t)c[1] << 8 | c[0];
	s->has_debuglink_crc = 1;
}

/*
 * The length of name without a symbol version: glibc's .symtab holds "clock_gettime@@GLIBC_2.17"
 * for what .dynsym and perf call clock_gettime. A name that is only "@..." is kept whole.
 */
static size_t unversioned_len(const char *name, size_t len)
{
	const char *at = memchr(name, '@', len);

	return at && at > name ? (size_t)(at - name) : len;
}

static bool func_candidate(const GElf_Sym *sym, const char *name, const struct sec_info *sec)
{
	int type = GELF_ST_TYPE(sym->st_info);

	if (type == STT_FUNC || type == STT_GNU_IFUNC)
		return true;
	if (type != STT_NOTYPE || !(sec->flags & SHF_EXECINSTR) || !(sec->flags & SHF_ALLOC))
		return false;
	/* Assembler-local labels and ARM/AArch64 mapping symbols ($x, $d) name no function. */
	return name[0] != '.' && name[0] != '$';
}

static bool data_candidate(const GElf_Sym *sym, const struct sec_info *sec)
{
	int type = GELF_ST_TYPE(sym->st_info);

	if (type == STT_TLS)
		return (sec->flags & SHF_TLS) != 0;
	return type == STT_OBJECT && (sec->flags & SHF_ALLOC) && !(sec->flags & SHF_EXECINSTR);
}

/* Add the function and data symbols of one SHT_SYMTAB / SHT_DYNSYM section. */
static int read_symtab(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh, struct cand_vec *funcs,
		       struct cand_vec *data)
{
	size_t entsize = gelf_fsize(r->elf, ELF_T_SYM, 1, EV_CURRENT);
	Elf_Scn *str_scn;
	GElf_Shdr str_sh;
	Elf_Data *d, *sd;
	size_t nsyms;

	if (sh->sh_type == SHT_NOBITS || sh->sh_size == 0)
		return 0;
	if (!in_file(sh->sh_offset, sh->sh_size, r->file_size))
		return -EINVAL;
	if (sh->sh_link == 0 || sh->sh_link >= r->shnum)
		return -EINVAL;
	str_scn = elf_getscn(r->elf, sh->sh_link);
	if (!str_scn || !gelf_getshdr(str_scn, &str_sh) || str_sh.sh_type == SHT_NOBITS)
		return -EINVAL;
	if (!in_file(str_sh.sh_offset, str_sh.sh_size, r->file_size))
		return -EINVAL;
	d = elf_getdata(scn, NULL);
	sd = elf_getdata(str_scn, NULL);
	if (!d || !sd || !sd->d_buf || entsize == 0)
		return -EINVAL;
	nsyms = d->d_size / entsize;
	for (size_t i = 1; i < nsyms; i++) {
		GElf_Sym sym;
		const struct sec_info *sec;
		const char *name;
		size_t len;
		struct cand c;
		int err;

		if (!gelf_getsym(d, (int)i, &sym))
			break;
		if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE ||
		    sym.st_shndx >= r->shnum || sym.st_name >= sd->d_size)
			continue;
		sec = &r->secs[sym.st_shndx];
		if (!sec->valid)
			continue;
		name = (const char *)sd->d_buf + sym.st_name;
		len = strnlen(name, sd->d_size - sym.st_name);
		if (len == 0 || len == sd->d_size - sym.st_name || len > MAX_NAME_LEN)
			continue;
		len = unversioned_len(name, len);
		c = (struct cand){
		    .start = sym.st_value,
		    .size = sym.st_size,
		    .sec_end =
			sec->addr + sec->size < sec->addr ? UINT64_MAX : sec->addr + sec->size,
		    .name = name,
		    .name_len = (uint32_t)len,
		    .type = (uint8_t)GELF_ST_TYPE(sym.st_info),
		    .bind = (uint8_t)GELF_ST_BIND(sym.st_info),
		};
		if (func_candidate(&sym, name, sec)) {
			/* Thumb functions carry the mode in bit 0 of their address. */
			if (r->ehdr.e_machine == EM_ARM)
				c.start &= ~(uint64_t)1;
			err = cand_push(funcs, &c);
		} else if (data_candidate(&sym, sec)) {
			if (c.type == STT_TLS) {
				if (!r->have_tls || r->ehdr.e_type == ET_REL)
					continue;
				/* st_value is an offset in the TLS block; place it at its image. */
				c.start += r->tls_vaddr;
				c.sec_end = UINT64_MAX;
			}
			err = cand_push(data, &c);
		} else {
			continue;
		}
		if (err)
			return err;
	}
	return 0;
}

static int bind_rank(uint8_t bind)
{
	switch (bind) {
	case STB_GLOBAL:
		return 0;
	case STB_WEAK:
		return 1;
	default:
		return 2;
	}
}

static size_t leading_underscores(const char *name)
{
	size_t n = 0;

	while (name[n] == '_')
		n++;
	return n;
}

/*
 * By address, then best name first among aliases at one address: a sized symbol, a typed one,
 * global before weak before local, fewer leading underscores ("malloc" over "__libc_malloc"),
 * the shorter, then by bytes so the choice does not depend on the table order.
 */
static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	size_t ua, ub;
	int r;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if ((a->size == 0) != (b->size == 0))
		return a->size == 0 ? 1 : -1;
	if ((a->type == STT_NOTYPE) != (b->type == STT_NOTYPE))
		return a->type == STT_NOTYPE ? 1 : -1;
	if (bind_rank(a->bind) != bind_rank(b->bind))
		return bind_rank(a->bind) - bind_rank(b->bind);
	ua = leading_underscores(a->name);
	ub = leading_underscores(b->name);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	r = strcmp(a->name, b->name);
	if (r)
		return r;
	/* Same name and address from .symtab and .dynsym: the larger size covers more. */
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return 0;
}

/*
 * Sort, keep one symbol per address, drop zero-size labels inside a sized symbol, and give
 * zero-size symbols the extent up to the next symbol (or their section's end). On return
 * (*out)[k] corresponds to cv->v[k] for k < *nout; names are filled in by copy_names.
 */
static int finish_table(struct cand_vec *cv, struct pp_elf_symbol **out, size_t *nout)
{
	size_t kept = 0;
	uint64_t cover_end = 0;

	*out = NULL;
	*nout = 0;
	if (cv->n == 0)
		return 0;
	qsort(cv->v, cv->n, sizeof(*cv->v), cand_cmp);
	/* Dedup and drop labels covered by a sized symbol, compacting cv in place. */
	for (size_t i = 0; i < cv->n; i++) {
		struct cand *c = &cv->v[i];

		if (kept && cv->v[kept - 1].start == c->start)
			continue;
		if (c->size == 0 && c->start < cover_end)
			continue;
		if (c->size) {
			uint64_t end =
			    c->start + c->size < c->start ? UINT64_MAX : c->start + c->size;

			if (end > cover_end)
				cover_end = end;
		}
		cv->v[kept++] = *c;
	}
	cv->n = kept;
	*out = calloc(kept, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < cv->n; i++) {
		const struct cand *c = &cv->v[i];
		uint64_t end;

		if (c->size) {
			end = c->start + c->size < c->start ? UINT64_MAX : c->start + c->size;
		} else {
			end = i + 1 < cv->n ? cv->v[i + 1].start : UINT64_MAX;
			if (c->sec_end > c->start && c->sec_end < end)
				end = c->sec_end;
			if (end == UINT64_MAX)
				end = c->start; /* last, unbounded: cover nothing rather than all */
		}
		if (end <= c->start)
			continue;
		(*out)[*nout].start = c->start;
		(*out)[*nout].end = end;
		/* Writes only at or below i, so cv->v[i + 1] is still unread. */
		cv->v[*nout] = *c;
		(*nout)++;
	}
	cv->n = *nout;
	return 0;
}

static size_t names_size(const struct cand_vec *cv)
{
	size_t total = 0;

	for (size_t i = 0; i < cv->n; i++)
		total += cv->v[i].name_len + 1;
	return total;
}

static char *copy_names(const struct cand_vec *cv, struct pp_elf_symbol *t, size_t n, char *p)
{
	for (size_t i = 0; i < n; i++) {
		const struct cand *c = &cv->v[i];

		memcpy(p, c->name, c->name_len);
		p[c->name_len] = '\0';
		t[i].name = p;
		p += c->name_len + 1;
	}
	return p;
}

static int build_tables(struct reader *r, struct pp_elf_symbols *s)
{
	struct cand_vec funcs = {0}, data = {0};
	size_t shstrndx = 0;
	Elf_Scn *scn = NULL;
	bool have_shstr;
	int err;

	if (r->shnum) {
		r->secs = calloc(r->shnum, sizeof(*r->secs));
		if (!r->secs)
			return -ENOMEM;
	}
	have_shstr = elf_getshdrstrndx(r->elf, &shstrndx) == 0 && shstrndx < r->shnum;
	while ((scn = elf_nextscn(r->elf, scn))) {
		size_t idx = elf_ndxscn(scn);
		GElf_Shdr sh;

		if (idx >= r->shnum || !gelf_getshdr(scn, &sh))
			return -EINVAL;
		r->secs[idx] = (struct sec_info){
		    .addr = sh.sh_addr,
		    .size = sh.sh_size,
		    .flags = sh.sh_flags,
		    .valid = true,
		};
		if (sh.sh_type == SHT_SYMTAB)
			s->has_symtab = 1;
	}
	err = 0;
	scn = NULL;
	while (!err && (scn = elf_nextscn(r->elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
			if (!(r->flags & PP_ELF_OPEN_NO_SYMBOLS))
				err = read_symtab(r, scn, &sh, &funcs, &data);
		} else if (!s->has_symtab && have_shstr && sh.sh_type == SHT_PROGBITS) {
			name = elf_strptr(r->elf, shstrndx, sh.sh_name);
			if (name && strcmp(name, ".gnu_debuglink") == 0)
				read_debuglink(r, scn, &sh, s);
		}
	}
	if (!err)
		err = finish_table(&funcs, &s->funcs, &s->nfuncs);
	if (!err)
		err = finish_table(&data, &s->data, &s->ndata);
	if (!err) {
		size_t total = names_size(&funcs) + names_size(&data);

		s->names = malloc(total ? total : 1);
		s->names_len = total;
		if (!s->names) {
			err = -ENOMEM;
		} else {
			char *p = copy_names(&funcs, s->funcs, s->nfuncs, s->names);

			copy_names(&data, s->data, s->ndata, p);
		}
	}
	free(funcs.v);
	free(data.v);
	if (r->flags & PP_ELF_OPEN_NO_SYMBOLS)
		s->source = PP_SYMBOLS_NOT_READ;
	else if (s->has_symtab)
		s->source = PP_SYMBOLS_SYMTAB;
	else if (s->nfuncs)
		s->source = PP_SYMBOLS_DYNSYM;
	else
		s->source = PP_SYMBOLS_NONE;
	return err;
}

static int build_from_elf(Elf *elf, uint64_t file_size, unsigned int flags,
			  struct pp_elf_symbols **out)
{
	struct reader r = {.elf = elf, .file_size = file_size, .flags = flags};
	struct pp_elf_symbols *s;
	int err;

	*out = NULL;
	if (!elf)
		return -ENOEXEC;
	err = read_ehdr(&r);
	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->elf_class = gelf_getclass(elf);
	s->elf_type = r.ehdr.e_type;
	err = read_segments(&r, s);
	if (!err) {
		find_build_id(&r, s->build_id);
		err = build_tables(&r, s);
	}
	free(r.secs);
	if (err) {
		pp_elf_symbols_free(s);
		return err;
	}
	*out = s;
	return 0;
}

static bool libelf_ready(void)
{
	return elf_version(EV_CURRENT) != EV_NONE;
}

struct pp_elf_symbols *pp_elf_symbols_open_fd(int fd)
{
	return pp_elf_symbols_open_fd_flags(fd, 0);
}

struct pp_elf_symbols *pp_elf_symbols_open_fd_flags(int fd, unsigned int flags)
{
	struct pp_elf_symbols *s = NULL;
	struct stat st;
	Elf *elf;
	int err;

	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	if (fstat(fd, &st) != 0)
		return NULL;
	if (!S_ISREG(st.st_mode)) {
		errno = ENOEXEC;
		return NULL;
	}
	if (!libelf_ready()) {
		errno = ENOSYS;
		return NULL;
	}
	/* ELF_C_READ, not _MMAP: a file truncated under us must not turn into SIGBUS. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	err = build_from_elf(elf, (uint64_t)st.st_size, flags, &s);
	elf_end(elf);
	if (err) {
		errno = -err;
		return NULL;
	}
	return s;
}

struct pp_elf_symbols *pp_elf_symbols_open_path(const char *path)
{
	struct pp_elf_symbols *s;
	int fd, saved;

	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	s = pp_elf_symbols_open_fd(fd);
	saved = errno;
	close(fd);
	errno = saved;
	return s;
}

struct pp_elf_symbols *pp_elf_symbols_open_mem(const void *buf, size_t len)
{
	struct pp_elf_symbols *s = NULL;
	char *copy;
	Elf *elf;
	int err;

	if (!buf && len) {
		errno = EINVAL;
		return NULL;
	}
	if (len < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0) {
		errno = ENOEXEC;
		return NULL;
	}
	if (!libelf_ready()) {
		errno = ENOSYS;
		return NULL;
	}
	/* elf_memory wants a writable image; the caller's bytes stay untouched. */
	copy = malloc(len);
	if (!copy) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(copy, buf, len);
	elf = elf_memory(copy, len);
	err = build_from_elf(elf, len, 0, &s);
	elf_end(elf);
	free(copy);
	if (err) {
		errno = -err;
		return NULL;
	}
	return s;
}

int pp_elf_read_build_id_fd(int fd, char *out, size_t out_size)
{
	char id[PP_BUILD_ID_HEX_SIZE];
	struct reader r = {0};
	struct stat st;
	int err;

	if (fd < 0 || !out || out_size == 0)
		return -EINVAL;
	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	if (!libelf_ready())
		return -ENOSYS;
	r.elf = elf_begin(fd, ELF_C_READ, NULL);
	r.file_size = (uint64_t)st.st_size;
	if (!r.elf)
		return -ENOEXEC;
	err = read_ehdr(&r);
	if (!err) {
		find_build_id(&r, id);
		if (strlen(id) >= out_size)
			err = -ENOSPC;
		else
			memcpy(out, id, strlen(id) + 1);
	}
	elf_end(r.elf);
	return err;
}

void pp_elf_symbols_free(struct pp_elf_symbols *s)
{
	if (!s)
		return;
	free(s->funcs);
	free(s->data);
	free(s->segs);
	free(s->names);
	free(s);
}

size_t pp_elf_symbols_bytes(const struct pp_elf_symbols *s)
{
	if (!s)
		return 0;
	return sizeof(*s) + (s->nfuncs + s->ndata) * sizeof(struct pp_elf_symbol) +
	       s->nsegs * sizeof(struct pp_elf_segment) + s->names_len;
}

const char *pp_elf_symbols_build_id(const struct pp_elf_symbols *s)
{
	return s ? s->build_id : "";
}

static const char *table_lookup(const struct pp_elf_symbol *t, size_t n, uint64_t vaddr,
				uint64_t *sym_start)
{
	size_t lo = 0, hi = n;

	/* The first symbol starting above vaddr; candidates are just before it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, steps = 0; i > 0 && steps < LOOKBACK; i--, steps++) {
		const struct pp_elf_symbol *sym = &t[i - 1];

		if (vaddr < sym->end) {
			if (sym_start)
				*sym_start = sym->start;
			return sym->name;
		}
	}
	return NULL;
}

const char *pp_elf_symbols_lookup(const struct pp_elf_symbols *s, uint64_t vaddr,
				  uint64_t *sym_start)
{
	if (!s)
		return NULL;
	return table_lookup(s->funcs, s->nfuncs, vaddr, sym_start);
}

const char *pp_elf_symbols_lookup_data(const struct pp_elf_symbols *s, uint64_t vaddr,
				       uint64_t *sym_start)
{
	if (!s)
		return NULL;
	return table_lookup(s->data, s->ndata, vaddr, sym_start);
}

int pp_elf_file_offset_to_vaddr(const struct pp_elf_symbols *s, uint64_t file_offset,
				uint64_t *vaddr)
{
	const struct pp_elf_segment *best = NULL;

	if (!s || !vaddr)
		return -EINVAL;
	for (int pass = 0; pass < 2 && !best; pass++) {
		for (size_t i = 0; i < s->nsegs; i++) {
			const struct pp_elf_segment *g = &s->segs[i];
			/* Pass 1 also accepts the zero-filled tail (.bss in a file-backed page). */
			uint64_t len = pass == 0 ? g->filesz : g->memsz;

			if (file_offset < g->offset || file_offset - g->offset >= len)
				continue;
			if (!best || ((g->flags & PP_ELF_SEG_X) && !(best->flags & PP_ELF_SEG_X)))
				best = g;
		}
	}
	if (!best)
		return -ENOENT;
	*vaddr = file_offset - best->offset + best->vaddr;
	return 0;
}

int pp_elf_symbols_map_addr(const struct pp_elf_symbols *s, uint64_t addr, uint64_t map_start,
			    uint64_t map_offset, uint64_t *vaddr)
{
	if (addr < map_start)
		return -ERANGE;
	return pp_elf_file_offset_to_vaddr(s, addr - map_start + map_offset, vaddr);
}

size_t pp_elf_symbols_count(const struct pp_elf_symbols *s)
{
	return s ? s->nfuncs : 0;
}

const struct pp_elf_symbol *pp_elf_symbols_get(const struct pp_elf_symbols *s, size_t i)
{
	return s && i < s->nfuncs ? &s->funcs[i] : NULL;
}

size_t pp_elf_symbols_data_count(const struct pp_elf_symbols *s)
{
	return s ? s->ndata : 0;
}

const struct pp_elf_symbol *pp_elf_symbols_data_get(const struct pp_elf_symbols *s, size_t i)
{
	return s && i < s->ndata ? &s->data[i] : NULL;
}

size_t pp_elf_symbols_segment_count(const struct pp_elf_symbols *s)
{
	return s ? s->nsegs : 0;
}

const struct pp_elf_segment *pp_elf_symbols_segment(const struct pp_elf_symbols *s, size_t i)
{
	return s && i < s->nsegs ? &s->segs[i] : NULL;
}

int pp_elf_symbols_class(const struct pp_elf_symbols *s)
{
	return s ? s->elf_class : 0;
}

int pp_elf_symbols_type(const struct pp_elf_symbols *s)
{
	return s ? s->elf_type : 0;
}

int pp_elf_symbols_has_symtab(const struct pp_elf_symbols *s)
{
	return s ? s->has_symtab : 0;
}

const char *pp_elf_symbols_debuglink(const struct pp_elf_symbols *s)
{
	return s ? s->debuglink : "";
}

int pp_elf_symbols_debuglink_crc(const struct pp_elf_symbols *s, uint32_t *crc)
{
	if (!s || !s->debuglink[0] || !s->has_debuglink_crc)
		return -ENOENT;
	*crc = s->debuglink_crc;
	return 0;
}

enum pp_symbol_source pp_elf_symbols_source(const struct pp_elf_symbols *s)
{
	return s ? s->source : PP_SYMBOLS_NONE;
}

const char *pp_symbol_source_name(enum pp_symbol_source src)
{
	switch (src) {
	case PP_SYMBOLS_SYMTAB:
		return "symtab";
	case PP_SYMBOLS_DYNSYM:
		return "dynsym";
	case PP_SYMBOLS_DEBUG_FILE:
		return "debug_file";
	case PP_SYMBOLS_DEBUGINFOD:
		return "debuginfod";
	case PP_SYMBOLS_NOT_READ:
		return "not_read";
	case PP_SYMBOLS_NONE:
		break;
	}
	return "none";
}

int pp_elf_symbols_adopt(struct pp_elf_symbols *dst, struct pp_elf_symbols *debug,
			 enum pp_symbol_source source)
{
	if (!dst || !debug)
		return -EINVAL;
	if (dst->build_id[0] && debug->build_id[0] && strcmp(dst->build_id, debug->build_id) != 0)
		return -ESTALE;
	if (!debug->has_symtab)
		return -ENOENT;
	free(dst->funcs);
	free(dst->data);
	free(dst->names);
	dst->funcs = debug->funcs;
	dst->nfuncs = debug->nfuncs;
	dst->data = debug->data;
	dst->ndata = debug->ndata;
	dst->names = debug->names;
	dst->names_len = debug->names_len;
	dst->has_symtab = 1;
	dst->source = source;
	debug->funcs = NULL;
	debug->data = NULL;
	debug->names = NULL;
	pp_elf_symbols_free(debug);
	return 0;
}
