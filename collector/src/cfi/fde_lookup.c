/*
 * FDEs found and compiled one at a time (see fde_lookup.h). The search is .eh_frame_hdr's
 * table, checked sorted when read; an FDE and its CIE are read with pread, each at most
 * MAX_ENTRY_BYTES and inside .eh_frame, and compiled by the whole file's compiler
 * (pp_cfi_compile_entry), so a row found here is the row the whole table holds.
 */
#include "fde_lookup.h"
#include "unwind_table_priv.h"

#include "base/elf_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One CIE or FDE: instructions are at most 16 KiB (the compiler's cap) and a header. */
#define MAX_ENTRY_BYTES (32u << 10)
/* CIEs kept read: a file's FDEs share a few (one per compiler and options, mostly). */
#define CIE_SLOTS 16

struct cie_slot {
	uint64_t off;
	uint8_t *bytes; /* NULL: empty */
	size_t len;
};

struct pp_fde_lookup {
	struct pp_elf_src src;
	int fd;	   /* owned, or -1 */
	void *mem; /* owned copy, or NULL */
	struct pp_cfi_hdr h;
	struct cie_slot cies[CIE_SLOTS];
	struct pp_unwind_table *scratch; /* one FDE's rows while compiling */
	struct pp_fde_lookup_stats st;
};

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static struct pp_fde_lookup *finish_open(struct pp_fde_lookup *l)
{
	int err = pp_cfi_hdr_read(&l->src, &l->h);

	if (err) {
		pp_fde_lookup_free(l);
		errno = -err;
		return NULL;
	}
	return l;
}

struct pp_fde_lookup *pp_fde_lookup_open_fd(int fd)
{
	struct pp_fde_lookup *l = calloc(1, sizeof(*l));
	int err;

	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l->fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (l->fd < 0) {
		err = fd < 0 ? EBADF : errno;
		free(l);
		errno = err;
		return NULL;
	}
	err = pp_elf_src_fd(&l->src, l->fd);
	if (err) {
		pp_fde_lookup_free(l);
		errno = err == -EINVAL ? ENOEXEC : -err;
		return NULL;
	}
	return finish_open(l);
}

struct pp_fde_lookup *pp_fde_lookup_open_mem(const void *buf, size_t len)
{
	struct pp_fde_lookup *l = calloc(1, sizeof(*l));

	if (!l || !buf) {
		free(l);
		errno = l ? EINVAL : ENOMEM;
		return NULL;
	}
	l->fd = -1;
	l->mem = malloc(len ? len : 1);
	if (!l->mem) {
		free(l);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(l->mem, buf, len);
	pp_elf_src_mem(&l->src, l->mem, len);
	return finish_open(l);
}

void pp_fde_lookup_free(struct pp_fde_lookup *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < CIE_SLOTS; i++)
		free(l->cies[i].bytes);
	pp_unwind_table_free(l->scratch);
	free(l->h.table);
	free(l->mem);
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}

int pp_fde_lookup_fd(const struct pp_fde_lookup *l)
{
	return l ? l->fd : -1;
}

uint32_t pp_fde_lookup_count(const struct pp_fde_lookup *l)
{
	return l ? l->h.nfde : 0;
}

size_t pp_fde_lookup_get_loads(const struct pp_fde_lookup *l, struct pp_unwind_load *out)
{
	if (!l)
		return 0;
	memcpy(out, l->h.loads, l->h.nloads * sizeof(*out));
	return l->h.nloads;
}

void pp_fde_lookup_get_stats(const struct pp_fde_lookup *l, struct pp_fde_lookup_stats *out)
{
	if (l)
		*out = l->st;
	else
		memset(out, 0, sizeof(*out));
}

/* The entry at .eh_frame offset off, read whole into *buf (malloc'ed): 0 or -errno. */
static int read_entry(struct pp_fde_lookup *l, uint64_t off, uint8_t **buf, size_t *len)
{
	uint8_t head[4];
	uint32_t n;
	int err;

	*buf = NULL;
	if (off > l->h.eh_size || l->h.eh_size - off < 8)
		return -EBADMSG;
	err = pp_elf_read_at(&l->src, l->h.eh_offset + off, head, sizeof(head));
	if (err)
		return err;
	n = le32(head);
	if (n < 4 || n > MAX_ENTRY_BYTES - 4 || n > l->h.eh_size - off - 4)
		return -EBADMSG;
	*buf = malloc((size_t)n + 4);
	if (!*buf)
		return -ENOMEM;
	err = pp_elf_read_at(&l->src, l->h.eh_offset + off, *buf, (size_t)n + 4);
	if (err || le32(*buf) != n) { /* changed under us */
		free(*buf);
		*buf = NULL;
		return err ? err : -EBADMSG;
	}
	*len = (size_t)n + 4;
	l->st.entries_read++;
	return 0;
}

static const struct cie_slot *cie_at(struct pp_fde_lookup *l, uint64_t off)
{
	struct cie_slot *s = &l->cies[(off >> 2) % CIE_SLOTS];
	uint8_t *bytes;
	size_t len;

	if (s->bytes && s->off == off)
		return s;
	if (read_entry(l, off, &bytes, &len))
		return NULL;
	free(s->bytes);
	*s = (struct cie_slot){.off = off, .bytes = bytes, .len = len};
	return s;
}

/* Table entry i: an FDE's start and its offset in .eh_frame. */
static void entry(const struct pp_fde_lookup *l, uint32_t i, uint64_t *pc, uint64_t *off)
{
	const uint8_t *p = l->h.table + 12 + 8 * (size_t)i;

	*pc = l->h.hdr_vaddr + (uint64_t)(int64_t)(int32_t)le32(p);
	*off = l->h.hdr_vaddr + (uint64_t)(int64_t)(int32_t)le32(p + 4) - l->h.eh_vaddr;
}

/* The FDE's rows compiled into l->scratch: 0, or -EBADMSG and the like where refused. */
static int compile_at(struct pp_fde_lookup *l, uint64_t off, uint64_t start, uint64_t limit)
{
	const struct cie_slot *cie;
	uint8_t *fde;
	size_t len;
	uint32_t id;
	int err = read_entry(l, off, &fde, &len);

	if (err)
		return err;
	id = le32(fde + 4); /* the CIE pointer: back from this field to the CIE */
	cie = id && id <= off + 4 ? cie_at(l, off + 4 - id) : NULL;
	err = cie ? pp_cfi_compile_entry(cie->bytes, cie->len, fde, len, start, limit, l->scratch)
		  : -EBADMSG;
	free(fde);
	return err;
}

int pp_fde_lookup_rows(struct pp_fde_lookup *l, uint64_t pc, struct pp_unwind_row *rows, size_t *n,
		       uint64_t *start, uint64_t *limit)
{
	uint32_t lo = 0, hi = l->h.nfde;
	uint64_t loc, off;
	size_t count;
	int err;

	l->st.lookups++;
	*n = 0;
	*start = 0;
	*limit = UINT64_MAX;
	while (lo < hi) { /* the first entry starting above pc */
		uint32_t mid = lo + (hi - lo) / 2;

		entry(l, mid, &loc, &off);
		if (loc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < l->h.nfde)
		entry(l, lo, limit, &off);
	if (!lo)
		return 0;
	entry(l, lo - 1, start, &off);
	pp_unwind_table_free(l->scratch);
	l->scratch = calloc(1, sizeof(*l->scratch));
	if (!l->scratch)
		return -ENOMEM;
	l->scratch->max_rows = PP_FDE_MAX_ROWS;
	err = compile_at(l, off, *start, *limit);
	if (err == -ENOMEM)
		return err;
	if (err || !pp_unwind_table_count(l->scratch)) {
		/* as the whole compile: a refused FDE is a row without CFI, where walks stop */
		l->st.refused += err != 0;
		rows[0] = (struct pp_unwind_row){.pc = *start, .cfa_rule = PP_CFA_NONE};
		*n = 1;
		return 1;
	}
	count = pp_unwind_table_count(l->scratch);
	for (size_t i = 0; i < count && i < PP_FDE_MAX_ROWS; i++)
		pp_unwind_table_get(l->scratch, i, &rows[i]);
	*n = count < PP_FDE_MAX_ROWS ? count : PP_FDE_MAX_ROWS;
	return 1;
}
