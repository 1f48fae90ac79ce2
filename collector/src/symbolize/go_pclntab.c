/* Go's function table, read from the section's bytes (go_pclntab.h). */
#include "go_pclntab.h"

#include <errno.h>
#include <string.h>

static uint64_t rd(const uint8_t *p, size_t n, bool big)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[big ? i : n - 1 - i] << (8 * (n - 1 - i));
	return v;
}

/* n bytes at off as a number, when they lie inside: 0, or -EINVAL. */
static int word(const struct pp_gopcln *t, uint64_t off, size_t n, uint64_t *v)
{
	if (off > t->len || n > t->len - off)
		return -EINVAL;
	*v = rd(t->b + off, n, t->big_endian);
	return 0;
}

int pp_gopcln_open(struct pp_gopcln *t, const uint8_t *b, size_t len, bool big_endian)
{
	uint64_t magic, hw[8];
	size_t nwords;

	memset(t, 0, sizeof(*t));
	t->b = b;
	t->len = len;
	t->big_endian = big_endian;
	if (len < 16 || word(t, 0, 4, &magic))
		return -ENOEXEC;
	switch (magic) {
	case 0xfffffffb:
		t->version = 12;
		nwords = 1;
		break;
	case 0xfffffffa:
		t->version = 116;
		nwords = 7;
		break;
	case 0xfffffff0:
	case 0xfffffff1:
		t->version = magic == 0xfffffff0 ? 118 : 120;
		nwords = 8;
		break;
	default:
		return -ENOEXEC;
	}
	t->ptrsize = b[7];
	if (b[4] != 0 || b[5] != 0 || (t->ptrsize != 4 && t->ptrsize != 8))
		return -EINVAL;
	for (size_t i = 0; i < nwords; i++)
		if (word(t, 8 + i * t->ptrsize, t->ptrsize, &hw[i]))
			return -EINVAL;
	t->nfunc = hw[0];
	if (t->version == 12) {
		t->funcname_off = 0; /* names are at offsets from the section start */
		t->functab_off = 8 + t->ptrsize;
	} else if (t->version == 116) {
		t->funcname_off = hw[2];
		t->functab_off = hw[6];
	} else {
		t->text_start = hw[2];
		t->funcname_off = hw[3];
		t->functab_off = hw[7];
	}
	if (t->nfunc == 0 || t->nfunc > PP_GOPCLN_MAX_FUNCS || t->funcname_off >= len ||
	    t->functab_off >= len)
		return -EINVAL;
	return 0;
}

int pp_gopcln_func(const struct pp_gopcln *t, uint64_t i, uint64_t *entry, uint64_t *end,
		   uint64_t *name_off)
{
	/* a functab entry: (entry, offset of the _func record); 1.18 on, two uint32 */
	size_t esz = t->version >= 118 ? 4 : t->ptrsize;
	uint64_t at = t->functab_off + i * 2 * esz, funcoff, next, name;
	uint64_t base = t->version == 12 ? 0 : t->functab_off; /* what funcoff counts from */

	if (i >= t->nfunc || word(t, at, esz, entry) || word(t, at + esz, esz, &funcoff) ||
	    word(t, at + 2 * esz, esz, &next))
		return -EINVAL;
	/* _func: the entry again (uint32 from 1.18, else a pointer), then int32 nameoff */
	if (word(t, base + funcoff + (t->version >= 118 ? 4 : t->ptrsize), 4, &name))
		return -EINVAL;
	if (t->version >= 118) {
		*entry += t->text_start;
		next += t->text_start;
	}
	if (next <= *entry || (int32_t)name < 0 || t->funcname_off + name >= t->len)
		return -EINVAL;
	*end = next;
	*name_off = t->funcname_off + name;
	return 0;
}
