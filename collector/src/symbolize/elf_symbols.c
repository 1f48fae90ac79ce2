/*
 * Symbol tables of ELF files. The file is hostile input: base/elf_read checks its headers
 * before libelf sees them, and libelf then only walks the headers. Symbol entries and their
 * names are streamed through bounded buffers with pread (two passes: the entries, then the
 * names the kept ones point at, in string table order), so what a table costs is what it
 * keeps, checked against the caller's byte bound as it grows; a symbol table claiming 2 GiB
 * costs nothing until its entries are read, and those reads stop at the bound.
 */
#define _GNU_SOURCE /* qsort_r */
#include "elf_symbols.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/elf_read.h"
#include "base/fsutil.h"
#include "base/le.h"
#include "base/radix_sort.h"
#include "base/vec.h"
#include "go_pclntab.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

/* Longest symbol name kept; longer ones (absurd even for C++) are skipped as corrupt. */
#define MAX_NAME_LEN 8192
/* Nested symbols (one function's alias inside another) are looked for this far back. */
#define LOOKBACK 4

struct pp_elf_symbols {
	atomic_size_t refs; /* tables are shared across threads: the last reference frees */
	uint64_t serial;    /* pp_elf_symbols_serial */
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
	/* a table read back from the cache keeps its file mapped: names is then map's start */
	void *map;
	size_t map_len;
};

/* A new table, holding its one reference, with a serial no other table had. */
static struct pp_elf_symbols *symbols_alloc(void)
{
	static atomic_uint_fast64_t serials;
	struct pp_elf_symbols *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	atomic_init(&s->refs, 1);
	s->serial = atomic_fetch_add(&serials, 1) + 1;
	return s;
}

/* Per-section facts the symbol filters need, indexed by section number. */
struct sec_info {
	uint64_t addr;
	uint64_t size;
	uint64_t flags;
	bool valid;
};

/*
 * A symbol before sorting and deduplication. name is an offset: into the string table while
 * entries are read, into the table's own name arena once names are resolved.
 */
struct cand {
	uint64_t start;
	uint64_t size;
	uint64_t name;
	uint32_t name_len;
	uint32_t shndx;
	uint8_t type;
	uint8_t bind;
	uint8_t is_func;
};

struct cand_vec {
	struct cand *v;
	size_t n;
	size_t cap;
};

struct reader {
	Elf *elf;
	struct pp_elf_src src;
	uint64_t file_size;
	GElf_Ehdr ehdr;
	size_t shnum;
	struct sec_info *secs;
	unsigned int flags; /* PP_ELF_OPEN_* */
	size_t max_bytes;   /* the table's bound */
	uint64_t tls_vaddr;
	bool have_tls;
	char *arena; /* resolved names, NUL-terminated each */
	size_t arena_len, arena_cap;
};

static int cand_push(struct cand_vec *cv, const struct cand *c)
{
	int err = pp_vec_reserve((void **)&cv->v, &cv->cap, cv->n, sizeof(*cv->v), 256, 0);

	if (!err)
		cv->v[cv->n++] = *c;
	return err;
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

/* The ELF header, checked; the common first step of every reader (after the preflight). */
static int read_ehdr(struct reader *r)
{
	size_t phnum = 0, shnum = 0;

	if (elf_kind(r->elf) != ELF_K_ELF)
		return -ENOEXEC;
	if (!gelf_getehdr(r->elf, &r->ehdr))
		return -ENOEXEC;
	if (gelf_getclass(r->elf) != ELFCLASS32 && gelf_getclass(r->elf) != ELFCLASS64)
		return -ENOEXEC;
	if (elf_getphdrnum(r->elf, &phnum) != 0 || elf_getshdrnum(r->elf, &shnum) != 0)
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
			if (ph.p_filesz == 0 ||
			    pp_elf_range_check(&r->src, ph.p_offset, ph.p_filesz,
					       PP_ELF_MAX_NOTE_BYTES))
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
		if (pp_elf_range_check(&r->src, sh.sh_offset, sh.sh_size, PP_ELF_MAX_NOTE_BYTES))
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

/* .gnu_debuglink holds a file name and a CRC: never more than a few hundred bytes. */
#define MAX_DEBUGLINK_BYTES 4096

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

	if (sh->sh_type == SHT_NOBITS ||
	    pp_elf_range_check(&r->src, sh->sh_offset, sh->sh_size, MAX_DEBUGLINK_BYTES))
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

/* One symbol entry as read from the file, either class, either byte order. */
struct raw_sym {
	uint64_t name, value, size;
	uint32_t shndx;
	uint8_t type, bind;
};

static uint64_t rd_uint(const uint8_t *p, size_t n, bool big)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[big ? i : n - 1 - i] << (8 * (n - 1 - i));
	return v;
}

static void decode_sym(const struct reader *r, const uint8_t *b, struct raw_sym *out)
{
	bool big = r->ehdr.e_ident[EI_DATA] == ELFDATA2MSB;
	uint8_t info;

	out->name = rd_uint(b, 4, big);
	if (r->ehdr.e_ident[EI_CLASS] == ELFCLASS64) {
		info = b[4];
		out->shndx = (uint32_t)rd_uint(b + 6, 2, big);
		out->value = rd_uint(b + 8, 8, big);
		out->size = rd_uint(b + 16, 8, big);
	} else {
		out->value = rd_uint(b + 4, 4, big);
		out->size = rd_uint(b + 8, 4, big);
		info = b[12];
		out->shndx = (uint32_t)rd_uint(b + 14, 2, big);
	}
	out->type = (uint8_t)GELF_ST_TYPE(info);
	out->bind = (uint8_t)GELF_ST_BIND(info);
}

/* Entries read per pread, and the most one table may have (a 384 MiB .symtab of 64-bit ones). */
#define SYM_CHUNK 2048
#define MAX_SYMTAB_ENTRIES (16u << 20)

/*
 * Whether a symbol may be a function or a data object, from what its entry says. A STT_NOTYPE
 * symbol in code is a function unless its name says otherwise (checked with the name).
 */
static int classify(const struct reader *r, const struct raw_sym *sym, const struct sec_info *sec)
{
	if (sym->type == STT_FUNC || sym->type == STT_GNU_IFUNC)
		return 1;
	if (sym->type == STT_NOTYPE)
		return (sec->flags & SHF_EXECINSTR) && (sec->flags & SHF_ALLOC) ? 1 : 0;
	if (sym->type == STT_TLS)
		return (sec->flags & SHF_TLS) && r->have_tls && r->ehdr.e_type != ET_REL ? 2 : 0;
	if (sym->type == STT_OBJECT)
		return (sec->flags & SHF_ALLOC) && !(sec->flags & SHF_EXECINSTR) ? 2 : 0;
	return 0;
}

/* Candidates the table could keep: past this many it is over its bound whatever follows. */
static size_t max_cands(const struct reader *r)
{
	return r->max_bytes / sizeof(struct pp_elf_symbol) + 4096;
}

/*
 * One pass over a SHT_SYMTAB / SHT_DYNSYM section: the entries that can name a function or a
 * data object, counted (funcs NULL) or added as candidates holding their name's offset in the
 * string table.
 */
static int scan_symtab(struct reader *r, const GElf_Shdr *sh, uint64_t strtab_size,
		       struct cand_vec *funcs, struct cand_vec *data, size_t count[2])
{
	size_t entsize = r->ehdr.e_ident[EI_CLASS] == ELFCLASS64 ? 24 : 16;
	uint8_t buf[SYM_CHUNK * 24];
	uint64_t nsyms = sh->sh_size / entsize;
	int err;

	count[0] = count[1] = 0;
	for (uint64_t first = 0; first < nsyms; first += SYM_CHUNK) {
		size_t n = nsyms - first < SYM_CHUNK ? (size_t)(nsyms - first) : SYM_CHUNK;

		err = pp_elf_read_at(&r->src, sh->sh_offset + first * entsize, buf, n * entsize);
		if (err)
			return err;
		for (size_t k = 0; k < n; k++) {
			const struct sec_info *sec;
			struct raw_sym sym;
			struct cand c;
			int kind;

			if (first + k == 0)
				continue; /* entry 0 is reserved */
			decode_sym(r, buf + k * entsize, &sym);
			if (sym.shndx == SHN_UNDEF || sym.shndx >= SHN_LORESERVE ||
			    sym.shndx >= r->shnum || sym.name == 0 || sym.name >= strtab_size)
				continue;
			sec = &r->secs[sym.shndx];
			kind = sec->valid ? classify(r, &sym, sec) : 0;
			if (!kind)
				continue;
			if (++count[kind - 1] + count[2 - kind] > max_cands(r))
				return -EFBIG;
			if (!funcs)
				continue;
			c = (struct cand){
			    .start = sym.value,
			    .size = sym.size,
			    .name = sym.name,
			    .shndx = sym.shndx,
			    .type = sym.type,
			    .bind = sym.bind,
			    .is_func = kind == 1,
			};
			if (kind == 1 && r->ehdr.e_machine == EM_ARM)
				c.start &= ~(uint64_t)1; /* Thumb: the mode is in bit 0 */
			if (sym.type == STT_TLS)
				c.start +=
				    r->tls_vaddr; /* an offset in the TLS block: at its image */
			err = cand_push(kind == 1 ? funcs : data, &c);
			if (err)
				return err;
		}
	}
	return 0;
}

/*
 * The candidates of a symbol table: counted first, without keeping anything, so a table over
 * its bound costs one read of its entries and no memory; then read again into arrays of
 * exactly that size.
 */
static int read_symtab(struct reader *r, const GElf_Shdr *sh, uint64_t strtab_size,
		       struct cand_vec *funcs, struct cand_vec *data)
{
	size_t entsize = r->ehdr.e_ident[EI_CLASS] == ELFCLASS64 ? 24 : 16, n[2];
	uint64_t nsyms = sh->sh_size / entsize;
	int err;

	err = pp_elf_range_check(&r->src, sh->sh_offset, nsyms * entsize,
				 (uint64_t)MAX_SYMTAB_ENTRIES * entsize);
	if (!err)
		err = scan_symtab(r, sh, strtab_size, NULL, NULL, n);
	if (err || n[0] + n[1] == 0)
		return err;
	funcs->v = n[0] ? malloc(n[0] * sizeof(*funcs->v)) : NULL;
	data->v = n[1] ? malloc(n[1] * sizeof(*data->v)) : NULL;
	if ((n[0] && !funcs->v) || (n[1] && !data->v))
		return -ENOMEM;
	funcs->cap = n[0];
	data->cap = n[1];
	/* a file rewritten between the passes only grows the arrays, within max_cands */
	return scan_symtab(r, sh, strtab_size, funcs, data, n);
}

/* Room for len more bytes of names, within the table's bound. */
static int arena_reserve(struct reader *r, size_t len)
{
	size_t need = r->arena_len + len, cap;
	char *p;

	if (need > r->max_bytes)
		return -EFBIG;
	if (need <= r->arena_cap)
		return 0;
	for (cap = r->arena_cap ? r->arena_cap : 64 * 1024; cap < need; cap *= 2)
		;
	if (cap > r->max_bytes)
		cap = r->max_bytes;
	p = realloc(r->arena, cap);
	if (!p)
		return -ENOMEM;
	r->arena = p;
	r->arena_cap = cap;
	return 0;
}

/* The window names are read through; a name must end within it (MAX_NAME_LEN is less). */
#define NAME_CHUNK (64 * 1024)

/*
 * Pass two: the names of the candidates, read from the string table in offset order through
 * one bounded window, copied without their version into the arena. A name that does not end
 * within MAX_NAME_LEN bytes (or the table) leaves its candidate nameless: dropped later.
 */
static int resolve_names(struct reader *r, const GElf_Shdr *str, struct cand_vec *a,
			 struct cand_vec *b)
{
	size_t n = a->n + b->n, k = 0;
	/* each candidate's name offset and the candidate, in offset order */
	struct pp_sort_pair *refs = n ? malloc(2 * n * sizeof(*refs)) : NULL;
	char *win = NULL;
	uint64_t win_off = 0, win_len = 0, last_off = UINT64_MAX;
	size_t last_at = 0, last_len = 0;
	int err = 0;

	if (!n)
		return 0;
	win = malloc(NAME_CHUNK);
	if (!refs || !win) {
		free(refs);
		free(win);
		return -ENOMEM;
	}
	for (size_t i = 0; i < a->n; i++)
		refs[k++] = (struct pp_sort_pair){a->v[i].name, (uintptr_t)&a->v[i]};
	for (size_t i = 0; i < b->n; i++)
		refs[k++] = (struct pp_sort_pair){b->v[i].name, (uintptr_t)&b->v[i]};
	pp_radix_sort_pairs(refs, refs + n, n);
	for (size_t i = 0; i < n && !err; i++) {
		uint64_t off = refs[i].key;
		struct cand *ref = (struct cand *)(uintptr_t)refs[i].value;
		const char *name, *end;
		size_t len;

		if (off == last_off) { /* an alias sharing the string */
			ref->name = last_at;
			ref->name_len = (uint32_t)last_len;
			continue;
		}
		ref->name_len = 0;
		if (off < win_off || off + 1 > win_off + win_len ||
		    !memchr(win + (off - win_off), '\0', win_len - (off - win_off))) {
			uint64_t left = str->sh_size - off;

			win_off = off;
			win_len = left < NAME_CHUNK ? left : NAME_CHUNK;
			err = pp_elf_read_at(&r->src, str->sh_offset + win_off, win, win_len);
			if (err)
				break;
		}
		name = win + (off - win_off);
		end = memchr(name, '\0', win_len - (off - win_off));
		if (!end || (size_t)(end - name) > MAX_NAME_LEN || end == name)
			continue;
		len = unversioned_len(name, (size_t)(end - name));
		err = arena_reserve(r, len + 1);
		if (err)
			break;
		memcpy(r->arena + r->arena_len, name, len);
		r->arena[r->arena_len + len] = '\0';
		last_off = off;
		last_at = r->arena_len;
		last_len = len;
		ref->name = last_at;
		ref->name_len = (uint32_t)len;
		r->arena_len += len + 1;
	}
	free(refs);
	free(win);
	return err;
}

/* Candidates without a name, and code labels that name no function, leave. */
static void drop_nameless(const struct reader *r, struct cand_vec *cv)
{
	size_t kept = 0;

	for (size_t i = 0; i < cv->n; i++) {
		const struct cand *c = &cv->v[i];
		const char *name;

		if (!c->name_len)
			continue; /* its name offset still points into the file's string table */
		name = r->arena + c->name;
		/* assembler-local labels and ARM/AArch64 mapping symbols ($x, $d) */
		if (c->is_func && c->type == STT_NOTYPE && (name[0] == '.' || name[0] == '$'))
			continue;
		cv->v[kept++] = *c;
	}
	cv->n = kept;
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
static int cand_cmp(const void *pa, const void *pb, void *arena)
{
	const struct cand *a = pa, *b = pb;
	const char *na = (const char *)arena + a->name, *nb = (const char *)arena + b->name;
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
	ua = leading_underscores(na);
	ub = leading_underscores(nb);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	r = strcmp(na, nb);
	if (r)
		return r;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return 0;
}

/* Where a zero-size symbol must end at the latest: its section's end (TLS: anywhere). */
static uint64_t sec_end(const struct reader *r, const struct cand *c)
{
	const struct sec_info *sec = &r->secs[c->shndx];

	if (c->type == STT_TLS)
		return UINT64_MAX;
	return sec->addr + sec->size < sec->addr ? UINT64_MAX : sec->addr + sec->size;
}

/*
 * The candidates in cand_cmp's order: by address with a radix sort (stable), then each run of
 * aliases at one address by cand_cmp. As qsort_r with cand_cmp, a quarter of the time: the
 * comparisons were half of reading a large table (node's 120,000 symbols).
 */
static int sort_cands(const struct reader *r, struct cand_vec *cv)
{
	struct pp_sort_pair *keys = malloc(2 * cv->n * sizeof(*keys));
	struct cand *sorted = malloc(cv->n * sizeof(*sorted));

	if (!keys || !sorted) {
		free(keys);
		free(sorted);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cv->n; i++)
		keys[i] = (struct pp_sort_pair){cv->v[i].start, i};
	pp_radix_sort_pairs(keys, keys + cv->n, cv->n);
	for (size_t i = 0; i < cv->n; i++)
		sorted[i] = cv->v[keys[i].value];
	free(keys);
	for (size_t i = 0, j; i < cv->n; i = j) {
		for (j = i + 1; j < cv->n && sorted[j].start == sorted[i].start; j++)
			;
		if (j - i > 1)
			qsort_r(sorted + i, j - i, sizeof(*sorted), cand_cmp, r->arena);
	}
	free(cv->v);
	cv->v = sorted;
	cv->cap = cv->n;
	return 0;
}

/*
 * Sort, keep one symbol per address, drop zero-size labels inside a sized symbol, and give
 * zero-size symbols the extent up to the next symbol (or their section's end); names point
 * into the arena, which the table takes over.
 */
static int finish_table(const struct reader *r, struct cand_vec *cv, struct pp_elf_symbol **out,
			size_t *nout)
{
	size_t kept = 0;
	int err;
	uint64_t cover_end = 0;

	*out = NULL;
	*nout = 0;
	if (cv->n == 0)
		return 0;
	err = sort_cands(r, cv);
	if (err)
		return err;
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
		uint64_t end, limit = sec_end(r, c);

		if (c->size) {
			end = c->start + c->size < c->start ? UINT64_MAX : c->start + c->size;
		} else {
			end = i + 1 < cv->n ? cv->v[i + 1].start : UINT64_MAX;
			if (limit > c->start && limit < end)
				end = limit;
			if (end == UINT64_MAX)
				end = c->start; /* last, unbounded: cover nothing rather than all */
		}
		if (end <= c->start)
			continue;
		(*out)[*nout].start = c->start;
		(*out)[*nout].end = end;
		(*out)[*nout].name = (const char *)(uintptr_t)c->name; /* an offset until rebased */
		(*nout)++;
	}
	return 0;
}

/* Names hold arena offsets until the arena stops moving; then they become pointers. */
static void rebase_names(struct pp_elf_symbol *t, size_t n, const char *arena)
{
	for (size_t i = 0; i < n; i++)
		t[i].name = arena + (uintptr_t)t[i].name;
}

/* The string table a symbol table links to, checked: 0, or an error for the whole file. */
static int linked_strtab(struct reader *r, const GElf_Shdr *sh, GElf_Shdr *str)
{
	Elf_Scn *str_scn;

	if (sh->sh_link == 0 || sh->sh_link >= r->shnum)
		return -EINVAL;
	str_scn = elf_getscn(r->elf, sh->sh_link);
	if (!str_scn || !gelf_getshdr(str_scn, str) || str->sh_type == SHT_NOBITS)
		return -EINVAL;
	/* streamed, so no cap on its size; but every byte of it must be there */
	return pp_elf_range_check(&r->src, str->sh_offset, str->sh_size, UINT64_MAX);
}

/* A .gopclntab this large is not read (kubelet's is about 20 MiB). */
#define MAX_GOPCLNTAB_BYTES (256u << 20)

/*
 * Go's function table as the symbols of a Go binary without .symtab: its bytes read whole
 * (within MAX_GOPCLNTAB_BYTES, backed), each function a candidate whose name is resolved from
 * the table in memory. 0 (no usable table: nothing added), or an error for the whole file.
 */
static int read_gopclntab(struct reader *r, const GElf_Shdr *sh, struct cand_vec *funcs)
{
	struct pp_elf_shape shape = {.elf_class = r->ehdr.e_ident[EI_CLASS],
				     .big_endian = r->ehdr.e_ident[EI_DATA] == ELFDATA2MSB};
	struct pp_elf_src file = r->src;
	struct pp_gopcln t;
	GElf_Shdr names = {0};
	void *buf;
	size_t len;
	int err;

	err = pp_elf_section_read(&r->src, &shape, 0, 0, sh->sh_offset, sh->sh_size,
				  MAX_GOPCLNTAB_BYTES, &buf, &len);
	if (err)
		return err == -EFBIG || err == -ENXIO ? err : 0;
	if (pp_gopcln_open(&t, buf, len, shape.big_endian) || t.nfunc > max_cands(r)) {
		free(buf);
		return t.nfunc > max_cands(r) ? -EFBIG : 0;
	}
	for (uint64_t i = 0; i < t.nfunc && !err; i++) {
		uint64_t entry, end, name;

		if (pp_gopcln_func(&t, i, &entry, &end, &name))
			continue;
		err = cand_push(funcs, &(struct cand){.start = entry,
						      .size = end - entry,
						      .name = name,
						      .type = STT_FUNC,
						      .bind = STB_GLOBAL,
						      .is_func = 1});
	}
	/* names, NUL-terminated, read from the table in memory */
	names.sh_size = len;
	pp_elf_src_mem(&r->src, buf, len);
	if (!err)
		err = resolve_names(r, &names, funcs, &(struct cand_vec){0});
	r->src = file;
	free(buf);
	return err;
}

static int build_tables(struct reader *r, struct pp_elf_symbols *s)
{
	struct cand_vec funcs = {0}, data = {0};
	GElf_Shdr symtab = {0}, dynsym = {0}, gopcln = {0}, str;
	size_t shstrndx = 0;
	Elf_Scn *scn = NULL;
	bool have_shstr, have_dynsym = false, have_gopcln = false;
	int err = 0;

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
		if (sh.sh_type == SHT_SYMTAB && !s->has_symtab) {
			s->has_symtab = 1;
			symtab = sh;
		} else if (sh.sh_type == SHT_DYNSYM && !have_dynsym) {
			have_dynsym = true;
			dynsym = sh;
		}
	}
	scn = NULL;
	while (!s->has_symtab && have_shstr && (scn = elf_nextscn(r->elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(r->elf, shstrndx, sh.sh_name);
		if (name && strcmp(name, ".gnu_debuglink") == 0)
			read_debuglink(r, scn, &sh, s);
		if (name && strcmp(name, ".gopclntab") == 0) {
			gopcln = sh;
			have_gopcln = true;
		}
	}
	/* a stripped Go binary: its runtime's own table names every function */
	if (!(r->flags & PP_ELF_OPEN_NO_SYMBOLS) && !s->has_symtab && have_gopcln) {
		err = read_gopclntab(r, &gopcln, &funcs);
		if (!err && funcs.n) {
			s->source = PP_SYMBOLS_GOPCLNTAB;
			have_dynsym = false; /* its few C symbols add nothing to Go's */
		}
	}
	/* .symtab holds every symbol .dynsym does: one of them is read */
	if (!err && !(r->flags & PP_ELF_OPEN_NO_SYMBOLS) && (s->has_symtab || have_dynsym)) {
		const GElf_Shdr *tab = s->has_symtab ? &symtab : &dynsym;

		if (tab->sh_type != SHT_NOBITS && tab->sh_size) {
			err = linked_strtab(r, tab, &str);
			if (!err)
				err = read_symtab(r, tab, str.sh_size, &funcs, &data);
			if (!err)
				err = resolve_names(r, &str, &funcs, &data);
		}
	}
	if (!err) {
		drop_nameless(r, &funcs);
		drop_nameless(r, &data);
		err = finish_table(r, &funcs, &s->funcs, &s->nfuncs);
	}
	if (!err)
		err = finish_table(r, &data, &s->data, &s->ndata);
	/* what pp_elf_symbols_bytes will say, which the symbol cache bounds */
	if (!err && sizeof(*s) + s->nfuncs * sizeof(*s->funcs) + s->ndata * sizeof(*s->data) +
			    s->nsegs * sizeof(*s->segs) + r->arena_len >
			r->max_bytes)
		err = -EFBIG;
	if (!err) {
		/* the arena's slack goes back: tables live long */
		char *fit = r->arena_len ? realloc(r->arena, r->arena_len) : r->arena;

		if (fit)
			r->arena = fit;
		s->names = r->arena ? r->arena : malloc(1);
		s->names_len = r->arena_len;
		r->arena = NULL;
		if (!s->names)
			err = -ENOMEM;
		else {
			rebase_names(s->funcs, s->nfuncs, s->names);
			rebase_names(s->data, s->ndata, s->names);
		}
	}
	free(funcs.v);
	free(data.v);
	if (r->flags & PP_ELF_OPEN_NO_SYMBOLS)
		s->source = PP_SYMBOLS_NOT_READ;
	else if (s->source == PP_SYMBOLS_GOPCLNTAB)
		;
	else if (s->has_symtab)
		s->source = PP_SYMBOLS_SYMTAB;
	else if (s->nfuncs)
		s->source = PP_SYMBOLS_DYNSYM;
	else
		s->source = PP_SYMBOLS_NONE;
	return err;
}

static int build_from_elf(Elf *elf, const struct pp_elf_src *src, unsigned int flags,
			  size_t max_bytes, struct pp_elf_symbols **out)
{
	struct reader r = {.elf = elf, .src = *src, .file_size = src->size, .flags = flags};
	struct pp_elf_symbols *s;
	int err;

	r.max_bytes = max_bytes ? max_bytes : PP_ELF_SYMBOLS_MAX_BYTES_DEFAULT;
	*out = NULL;
	if (!elf)
		return -ENOEXEC;
	err = read_ehdr(&r);
	if (err)
		return err;
	s = symbols_alloc();
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
	free(r.arena);
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
	return pp_elf_symbols_open_fd_limited(fd, 0, 0);
}

struct pp_elf_symbols *pp_elf_symbols_open_fd_flags(int fd, unsigned int flags)
{
	return pp_elf_symbols_open_fd_limited(fd, flags, 0);
}

struct pp_elf_symbols *pp_elf_symbols_open_fd_limited(int fd, unsigned int flags, size_t max_bytes)
{
	struct pp_elf_symbols *s = NULL;
	struct pp_elf_src src;
	Elf *elf;
	int err;

	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	err = pp_elf_src_fd(&src, fd);
	if (err) {
		errno = err == -EINVAL ? ENOEXEC : -err;
		return NULL;
	}
	if (!libelf_ready()) {
		errno = ENOSYS;
		return NULL;
	}
	err = pp_elf_preflight(&src, NULL);
	if (err) {
		errno = -err;
		return NULL;
	}
	/* ELF_C_READ, not _MMAP: a file truncated under us must not turn into SIGBUS. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	err = build_from_elf(elf, &src, flags, max_bytes, &s);
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
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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
	struct pp_elf_src src;
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
	pp_elf_src_mem(&src, buf, len);
	err = pp_elf_preflight(&src, NULL);
	if (err) {
		errno = -err;
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
	err = build_from_elf(elf, &src, 0, 0, &s);
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
	int err;

	if (fd < 0 || !out || out_size == 0)
		return -EINVAL;
	err = pp_elf_src_fd(&r.src, fd);
	if (err)
		return err == -EINVAL ? -ENOEXEC : err;
	if (!libelf_ready())
		return -ENOSYS;
	err = pp_elf_preflight(&r.src, NULL);
	if (err)
		return err;
	r.elf = elf_begin(fd, ELF_C_READ, NULL);
	r.file_size = r.src.size;
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

struct pp_elf_symbols *pp_elf_symbols_ref(struct pp_elf_symbols *s)
{
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

static bool same_symbols(const struct pp_elf_symbol *a, const struct pp_elf_symbol *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].start != b[i].start || a[i].end != b[i].end ||
		    strcmp(a[i].name, b[i].name))
			return false;
	return true;
}

bool pp_elf_symbols_same(const struct pp_elf_symbols *a, const struct pp_elf_symbols *b)
{
	if (!a || !b)
		return false;
	if (strcmp(a->build_id, b->build_id) || strcmp(a->debuglink, b->debuglink) ||
	    a->has_debuglink_crc != b->has_debuglink_crc ||
	    (a->has_debuglink_crc && a->debuglink_crc != b->debuglink_crc) ||
	    a->source != b->source || a->elf_class != b->elf_class || a->elf_type != b->elf_type ||
	    a->has_symtab != b->has_symtab || a->nfuncs != b->nfuncs || a->ndata != b->ndata ||
	    a->nsegs != b->nsegs)
		return false;
	for (size_t i = 0; i < a->nsegs; i++)
		if (a->segs[i].vaddr != b->segs[i].vaddr || a->segs[i].memsz != b->segs[i].memsz ||
		    a->segs[i].offset != b->segs[i].offset ||
		    a->segs[i].filesz != b->segs[i].filesz || a->segs[i].flags != b->segs[i].flags)
			return false;
	return same_symbols(a->funcs, b->funcs, a->nfuncs) &&
	       same_symbols(a->data, b->data, a->ndata);
}

/* The names a table holds, malloc'ed or mapped. */
static void release_names(struct pp_elf_symbols *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	else
		free(s->names);
	s->names = NULL;
	s->map = NULL;
}

void pp_elf_symbols_free(struct pp_elf_symbols *s)
{
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(s->funcs);
	free(s->data);
	free(s->segs);
	release_names(s);
	free(s);
}

size_t pp_elf_symbols_bytes(const struct pp_elf_symbols *s)
{
	if (!s)
		return 0;
	return sizeof(*s) + (s->nfuncs + s->ndata) * sizeof(struct pp_elf_symbol) +
	       s->nsegs * sizeof(struct pp_elf_segment) + s->names_len;
}

uint64_t pp_elf_symbols_serial(const struct pp_elf_symbols *s)
{
	return s ? s->serial : 0;
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
	case PP_SYMBOLS_GOPCLNTAB:
		return "gopclntab";
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
	release_names(dst);
	dst->funcs = debug->funcs;
	dst->nfuncs = debug->nfuncs;
	dst->data = debug->data;
	dst->ndata = debug->ndata;
	dst->names = debug->names;
	dst->names_len = debug->names_len;
	dst->map = debug->map;
	dst->map_len = debug->map_len;
	dst->has_symtab = 1;
	dst->source = source;
	debug->funcs = NULL;
	debug->data = NULL;
	debug->names = NULL;
	debug->map = NULL;
	pp_elf_symbols_free(debug);
	return 0;
}

/* --- the symbol table cache's form of a table --- */

#define FILE_MAGIC "PPSYMT01"
#define FILE_SYM_BYTES 24 /* start, end, name offset */
#define FILE_SEG_BYTES 36 /* vaddr, memsz, offset, filesz, flags */
/* magic, source, class, type, flags, debuglink CRC, build id and debuglink lengths, counts */
#define FILE_HEAD_BYTES (8 + 5 * 4 + 1 + 2 + 4 * 8)

/* The little-endian u64 v at p (the hot loop of a table written: pp_le_put goes by bytes). */
static uint8_t *put_u64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
	return p + sizeof(v);
}

static bool names_own(const struct pp_elf_symbols *s, const struct pp_elf_symbol *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s->names || v[i].name < s->names || v[i].name >= s->names + s->names_len)
			return false;
	return true;
}

/*
 * Where a table's form goes: a buffer of its size, or a file through a chunk, so that a big
 * table is written without a second copy of it in memory (its names go from where they lie).
 */
struct sink {
	uint8_t *mem; /* NULL: to fd */
	int fd;
	uint8_t *chunk; /* SINK_CHUNK bytes */
	size_t used;
	int err;
};

#define SINK_CHUNK ((size_t)64 << 10)

static void sink_flush(struct sink *k)
{
	if (k->used && !k->err)
		k->err = pp_write_all(k->fd, k->chunk, k->used);
	k->used = 0;
}

static void sink_put(struct sink *k, const void *p, size_t n)
{
	if (k->mem) {
		if (n)
			memcpy(k->mem, p, n);
		k->mem += n;
		return;
	}
	if (n > SINK_CHUNK - k->used) {
		sink_flush(k);
		if (n >= SINK_CHUNK) {
			if (!k->err)
				k->err = pp_write_all(k->fd, p, n);
			return;
		}
	}
	memcpy(k->chunk + k->used, p, n);
	k->used += n;
}

static void sink_syms(struct sink *k, const struct pp_elf_symbol *v, size_t n, const char *names)
{
	uint8_t rec[FILE_SYM_BYTES];

	for (size_t i = 0; i < n; i++) {
		uint8_t *p = put_u64(rec, v[i].start);

		p = put_u64(p, v[i].end);
		put_u64(p, (uint64_t)(v[i].name - names));
		sink_put(k, rec, sizeof(rec));
	}
}

/*
 * The names come first, so that a table read back keeps its file's bytes up to their end as
 * its names, mapped (pp_elf_symbols_decode with a mapping).
 */
static void emit(const struct pp_elf_symbols *s, struct sink *k)
{
	size_t idlen = strlen(s->build_id), linklen = strlen(s->debuglink);
	uint8_t head[FILE_HEAD_BYTES], *p;

	memcpy(head, FILE_MAGIC, 8);
	p = head + 8;
	p = pp_le_put(p, (uint64_t)s->source, 4);
	p = pp_le_put(p, (uint64_t)s->elf_class, 4);
	p = pp_le_put(p, (uint64_t)s->elf_type, 4);
	p = pp_le_put(p, (s->has_symtab ? 1u : 0u) | (s->has_debuglink_crc ? 2u : 0u), 4);
	p = pp_le_put(p, s->debuglink_crc, 4);
	p = pp_le_put(p, idlen, 1);
	p = pp_le_put(p, linklen, 2);
	p = pp_le_put(p, s->nfuncs, 8);
	p = pp_le_put(p, s->ndata, 8);
	p = pp_le_put(p, s->nsegs, 8);
	pp_le_put(p, s->names_len, 8);
	sink_put(k, head, sizeof(head));
	sink_put(k, s->build_id, idlen);
	sink_put(k, s->debuglink, linklen);
	sink_put(k, s->names, s->names_len);
	sink_syms(k, s->funcs, s->nfuncs, s->names);
	sink_syms(k, s->data, s->ndata, s->names);
	for (size_t i = 0; i < s->nsegs; i++) {
		uint8_t seg[FILE_SEG_BYTES];

		p = pp_le_put(seg, s->segs[i].vaddr, 8);
		p = pp_le_put(p, s->segs[i].memsz, 8);
		p = pp_le_put(p, s->segs[i].offset, 8);
		p = pp_le_put(p, s->segs[i].filesz, 8);
		pp_le_put(p, s->segs[i].flags, 4);
		sink_put(k, seg, sizeof(seg));
	}
}

size_t pp_elf_symbols_encoded_len(const struct pp_elf_symbols *s)
{
	if (!names_own(s, s->funcs, s->nfuncs) || !names_own(s, s->data, s->ndata))
		return 0;
	return FILE_HEAD_BYTES + strlen(s->build_id) + strlen(s->debuglink) + s->names_len +
	       (s->nfuncs + s->ndata) * FILE_SYM_BYTES + s->nsegs * FILE_SEG_BYTES;
}

int pp_elf_symbols_encode(const struct pp_elf_symbols *s, void **out, size_t *len)
{
	size_t n = pp_elf_symbols_encoded_len(s);
	uint8_t *buf;

	if (!n)
		return -EINVAL;
	buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	emit(s, &(struct sink){.mem = buf});
	*out = buf;
	*len = n;
	return 0;
}

int pp_elf_symbols_write(const struct pp_elf_symbols *s, int fd)
{
	struct sink k = {.fd = fd};

	if (!pp_elf_symbols_encoded_len(s))
		return -EINVAL;
	k.chunk = malloc(SINK_CHUNK);
	if (!k.chunk)
		return -ENOMEM;
	emit(s, &k);
	sink_flush(&k);
	free(k.chunk);
	return k.err;
}

/* The little-endian u64 at p: the hot loop of a table read back (pp_le_get goes by bytes). */
static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* n symbols at p into v, named in names (names_len bytes, the last a NUL): false if bad. */
static bool get_syms(const uint8_t *p, struct pp_elf_symbol *v, size_t n, const char *names,
		     uint64_t names_len)
{
	for (size_t i = 0; i < n; i++, p += FILE_SYM_BYTES) {
		uint64_t start = get_u64(p), end = get_u64(p + 8), off = get_u64(p + 16);

		/* lookups search by start and look back over ends: both in order */
		if (end < start || off >= names_len || (i && start < v[i - 1].start))
			return false;
		v[i] = (struct pp_elf_symbol){.start = start, .end = end, .name = names + off};
	}
	return true;
}

static bool is_hex(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* What a table's header says, checked against the bytes there are. */
struct file_head {
	uint64_t source, cls, type, flags, crc, idlen, linklen, nf, nd, ns, names_len;
	const uint8_t *id, *link, *names, *syms, *segs;
};

static int read_head(const uint8_t *b, size_t len, struct file_head *h)
{
	const uint8_t *p = b + 8;
	uint64_t left;

	if (len < 8 || memcmp(b, FILE_MAGIC, 8))
		return len >= 8 && !memcmp(b, FILE_MAGIC, 6) ? -EPROTO : -EBADMSG;
	if (len < FILE_HEAD_BYTES)
		return -EBADMSG;
	h->source = pp_le_get(&p, 4);
	h->cls = pp_le_get(&p, 4);
	h->type = pp_le_get(&p, 4);
	h->flags = pp_le_get(&p, 4);
	h->crc = pp_le_get(&p, 4);
	h->idlen = pp_le_get(&p, 1);
	h->linklen = pp_le_get(&p, 2);
	h->nf = pp_le_get(&p, 8);
	h->nd = pp_le_get(&p, 8);
	h->ns = pp_le_get(&p, 8);
	h->names_len = pp_le_get(&p, 8);
	left = len - FILE_HEAD_BYTES;
	/* each count bounded by the bytes left first: no product below can overflow */
	if (h->source > PP_SYMBOLS_GOPCLNTAB || (h->cls != 1 && h->cls != 2) || h->type > 0xffff ||
	    h->flags > 3 || h->idlen >= PP_BUILD_ID_HEX_SIZE || h->linklen >= 256 || h->nf > left ||
	    h->nd > left || h->ns > left || h->names_len > left ||
	    h->idlen + h->linklen + h->names_len + (h->nf + h->nd) * FILE_SYM_BYTES +
		    h->ns * FILE_SEG_BYTES !=
		left)
		return -EBADMSG;
	h->id = p;
	h->link = h->id + h->idlen;
	h->names = h->link + h->linklen;
	h->syms = h->names + h->names_len;
	h->segs = h->syms + (h->nf + h->nd) * FILE_SYM_BYTES;
	/* names end in a NUL, so each one found by an offset inside ends there at the latest */
	if (((h->nf || h->nd) && (!h->names_len || h->names[h->names_len - 1] != '\0')) ||
	    !is_hex(h->id, h->idlen) || memchr(h->link, '/', h->linklen) ||
	    memchr(h->link, '\0', h->linklen))
		return -EBADMSG;
	return 0;
}

static int get_segs(const uint8_t *p, struct pp_elf_segment *v, size_t n)
{
	for (size_t i = 0; i < n; i++, p += FILE_SEG_BYTES) {
		const uint8_t *q = p + 32;
		struct pp_elf_segment *g = &v[i];

		g->vaddr = get_u64(p);
		g->memsz = get_u64(p + 8);
		g->offset = get_u64(p + 16);
		g->filesz = get_u64(p + 24);
		g->flags = (uint32_t)pp_le_get(&q, 4);
		if (g->flags > (PP_ELF_SEG_X | PP_ELF_SEG_W | PP_ELF_SEG_R) ||
		    g->offset + g->filesz < g->offset || g->vaddr + g->memsz < g->vaddr)
			return -EBADMSG;
	}
	return 0;
}

struct pp_elf_symbols *pp_elf_symbols_decode(const void *buf, size_t len, size_t max_bytes,
					     void *map, size_t map_len)
{
	const uint8_t *b = buf;
	struct file_head h;
	struct pp_elf_symbols *s = NULL;
	size_t names_at = 0;
	const char *names;
	int err = -read_head(b, len, &h);

	if (err)
		goto fail;
	if (map)
		names_at = (size_t)(h.names - (const uint8_t *)map);
	if (max_bytes && sizeof(*s) + (h.nf + h.nd) * sizeof(struct pp_elf_symbol) +
				 h.ns * sizeof(struct pp_elf_segment) + names_at + h.names_len >
			     max_bytes) {
		err = EFBIG;
		goto fail;
	}
	err = ENOMEM;
	s = symbols_alloc();
	if (!s)
		goto fail;
	s->source = (enum pp_symbol_source)h.source;
	s->elf_class = (int)h.cls;
	s->elf_type = (int)h.type;
	s->has_symtab = h.flags & 1;
	s->has_debuglink_crc = (h.flags & 2) != 0;
	s->debuglink_crc = (uint32_t)h.crc;
	memcpy(s->build_id, h.id, h.idlen);
	memcpy(s->debuglink, h.link, h.linklen);
	s->funcs = h.nf ? malloc(h.nf * sizeof(*s->funcs)) : NULL;
	s->data = h.nd ? malloc(h.nd * sizeof(*s->data)) : NULL;
	s->segs = h.ns ? malloc(h.ns * sizeof(*s->segs)) : NULL;
	if (!map)
		s->names = h.names_len ? malloc(h.names_len) : NULL;
	if ((h.nf && !s->funcs) || (h.nd && !s->data) || (h.ns && !s->segs) ||
	    (!map && h.names_len && !s->names))
		goto fail;
	if (map) {
		/* the bytes before the names are counted as the table's, as they are mapped */
		s->map = map;
		s->map_len = map_len;
		map = NULL; /* the table's now */
		s->names = s->map;
		s->names_len = names_at + h.names_len;
		names = s->names + names_at;
	} else {
		if (h.names_len)
			memcpy(s->names, h.names, h.names_len);
		s->names_len = h.names_len;
		names = s->names;
	}
	err = EBADMSG;
	if (!get_syms(h.syms, s->funcs, h.nf, names, h.names_len) ||
	    !get_syms(h.syms + h.nf * FILE_SYM_BYTES, s->data, h.nd, names, h.names_len) ||
	    get_segs(h.syms + (h.nf + h.nd) * FILE_SYM_BYTES, s->segs, h.ns))
		goto fail;
	s->nfuncs = h.nf;
	s->ndata = h.nd;
	s->nsegs = h.ns;
	return s;
fail:
	if (map) /* NULL once the table took it */
		munmap(map, map_len);
	pp_elf_symbols_free(s);
	errno = err;
	return NULL;
}
