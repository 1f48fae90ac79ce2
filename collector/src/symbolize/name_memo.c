/* The names symbol tables gave for addresses, kept across windows (name_memo.h). */
#include "name_memo.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

#define MIN_SLOTS 64
#define MAX_NAME_BYTES (1u << 30) /* offsets are 32-bit */

struct slot {
	uint64_t table; /* 0: empty */
	uint64_t vaddr;
	uint32_t name; /* offset + 1 into names; 0: none */
	uint32_t system_name;
};

struct pp_name_memo {
	struct slot *slots;
	size_t mask, used;
	char *names;
	size_t names_used, names_cap;
	struct pp_name_memo_stats st;
};

struct pp_name_memo *pp_name_memo_new(size_t slots, size_t name_bytes)
{
	struct pp_name_memo *m = calloc(1, sizeof(*m));
	size_t n = MIN_SLOTS;

	if (!m)
		return NULL;
	while (n < slots && n < ((size_t)1 << 30))
		n <<= 1;
	m->names_cap = name_bytes < MAX_NAME_BYTES ? name_bytes : MAX_NAME_BYTES;
	/* calloc and malloc of this size map pages lazily: only what is used becomes resident */
	m->slots = calloc(n, sizeof(*m->slots));
	m->names = m->names_cap ? malloc(m->names_cap) : NULL;
	if (!m->slots || (m->names_cap && !m->names)) {
		pp_name_memo_free(m);
		errno = ENOMEM;
		return NULL;
	}
	m->mask = n - 1;
	return m;
}

void pp_name_memo_free(struct pp_name_memo *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m->names);
	free(m);
}

static struct slot *slot_of(const struct pp_name_memo *m, uint64_t table, uint64_t vaddr)
{
	size_t i = pp_mix64(vaddr ^ (table * 0x9e3779b97f4a7c15ull)) & m->mask;

	for (;;) {
		struct slot *s = &m->slots[i];

		if (!s->table || (s->table == table && s->vaddr == vaddr))
			return s;
		i = (i + 1) & m->mask;
	}
}

int pp_name_memo_get(struct pp_name_memo *m, uint64_t table, uint64_t vaddr, const char **name,
		     const char **system_name)
{
	const struct slot *s;

	if (!m || !table)
		return 0;
	s = slot_of(m, table, vaddr);
	if (!s->table) {
		m->st.misses++;
		return 0;
	}
	m->st.hits++;
	*name = s->name ? m->names + s->name - 1 : NULL;
	*system_name = s->system_name ? m->names + s->system_name - 1 : NULL;
	return 1;
}

static void start_over(struct pp_name_memo *m)
{
	memset(m->slots, 0, (m->mask + 1) * sizeof(*m->slots));
	m->used = 0;
	m->names_used = 0;
	m->st.resets++;
}

/* s copied into the arena: its offset + 1, or 0 where it does not fit */
static uint32_t keep_name(struct pp_name_memo *m, const char *s, size_t len)
{
	uint32_t at = (uint32_t)m->names_used + 1;

	memcpy(m->names + m->names_used, s, len + 1);
	m->names_used += len + 1;
	return at;
}

void pp_name_memo_put(struct pp_name_memo *m, uint64_t table, uint64_t vaddr, const char *name,
		      const char *system_name)
{
	size_t nlen = name ? strlen(name) : 0, slen = system_name ? strlen(system_name) : 0;
	bool same = name && system_name && nlen == slen && !memcmp(name, system_name, nlen);
	size_t need = (name ? nlen + 1 : 0) + (system_name && !same ? slen + 1 : 0);
	struct slot *s;

	if (!m || !table || need > m->names_cap)
		return;
	/* at most 3/4 of the slots taken, so probes stay short */
	if ((m->used + 1) * 4 > (m->mask + 1) * 3 || m->names_used + need > m->names_cap)
		start_over(m);
	s = slot_of(m, table, vaddr);
	if (s->table)
		return; /* kept already (the first answer stands: a table never changes) */
	s->table = table;
	s->vaddr = vaddr;
	s->name = name ? keep_name(m, name, nlen) : 0;
	s->system_name = same ? s->name : system_name ? keep_name(m, system_name, slen) : 0;
	m->used++;
}

void pp_name_memo_stats(const struct pp_name_memo *m, struct pp_name_memo_stats *out)
{
	*out = (struct pp_name_memo_stats){0};
	if (!m)
		return;
	*out = m->st;
	out->bytes = (m->mask + 1) * sizeof(*m->slots) + m->names_used;
}
