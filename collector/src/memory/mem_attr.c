/* Memory-sample fields, labels, object classes and the per-mapping cache. See mem_attr.h. */
#include "mem_attr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

#define DEFAULT_OBJ_CAPACITY 4096

int pp_mem_sample_get(const struct pp_sample *rec, struct pp_mem_sample *out)
{
	/* Without kernel sample_flags every field was requested: the values alone decide. */
	uint64_t sf = (rec->flags & PP_SF_HAS_SAMPLE_FLAGS) ? rec->sample_flags : ~0ull;
	uint32_t var1 = (uint32_t)rec->weight;

	memset(out, 0, sizeof(*out));
	if (!(rec->flags & PP_SF_MEM_FIELDS))
		return 0;
	if ((sf & PP_PERF_SAMPLE_ADDR) && rec->addr) {
		out->addr = rec->addr;
		out->has_addr = 1;
	}
	if ((sf & PP_PERF_SAMPLE_DATA_SRC) && rec->data_src && rec->data_src != PP_MEM_NA &&
	    rec->data_src != PP_MEM_NA_NO_LVLNUM) {
		out->data_src = rec->data_src;
		out->has_data_src = 1;
	}
	if ((sf & (PP_PERF_SAMPLE_WEIGHT | PP_PERF_SAMPLE_WEIGHT_STRUCT)) && var1) {
		out->latency = var1;
		out->has_latency = 1;
		/* var2_w exists only in the struct form; plain WEIGHT puts high bits there. */
		if (sf & PP_PERF_SAMPLE_WEIGHT_STRUCT)
			out->ins_latency = (uint16_t)(rec->weight >> 32);
	}
	return out->has_addr || out->has_data_src || out->has_latency;
}

static const char *const bucket_names[PP_MEM_LATENCY_BUCKETS] = {
    "0-31", "32-63", "64-127", "128-255", "256-511", "512-1023", ">=1024",
};

unsigned pp_mem_latency_bucket_index(uint32_t cycles)
{
	unsigned i = 0;

	for (uint32_t lim = 32; i < PP_MEM_LATENCY_BUCKETS - 1 && cycles >= lim; lim <<= 1)
		i++;
	return i;
}

const char *pp_mem_latency_bucket_name(unsigned index)
{
	return index < PP_MEM_LATENCY_BUCKETS ? bucket_names[index] : NULL;
}

/*
 * The data_src bits the labels show: op, lvl, snoop, dtlb, lvl_num, remote, snoopx, hops.
 * Lock (24-25) and blk (40-42) are left out so they do not split aggregates.
 */
#define LABEL_DSRC_MASK                                                                            \
	((((1ull << 24) - 1)) | (((1ull << 14) - 1) << 26) | (((1ull << 3) - 1) << 43))
#define KEY_HAS_DSRC (1ull << 62)
#define KEY_BUCKET_SHIFT 48 /* bucket + 1 in bits 48..51; data_src bits stop at 45 */

uint64_t pp_mem_label_key(const struct pp_mem_sample *m)
{
	uint64_t key = 0;

	if (m->has_data_src)
		key = (m->data_src & LABEL_DSRC_MASK) | KEY_HAS_DSRC;
	if (m->has_latency)
		key |= (uint64_t)(pp_mem_latency_bucket_index(m->latency) + 1) << KEY_BUCKET_SHIFT;
	return key;
}

static void add_label(struct pp_mem_labels *out, const char *key, const char *value)
{
	if (out->n < PP_MEM_MAX_LABELS && value && strcmp(value, "N/A") != 0) {
		out->labels[out->n].key = key;
		out->labels[out->n].value = value;
		out->n++;
	}
}

uint32_t pp_mem_labels_from_key(uint64_t key, struct pp_mem_labels *out)
{
	unsigned bucket = (unsigned)(key >> KEY_BUCKET_SHIFT) & 0xf;

	out->n = 0;
	if (key & KEY_HAS_DSRC) {
		struct pp_data_src d;
		const char *op;

		pp_data_src_decode(key & LABEL_DSRC_MASK, &d);
		pp_data_src_level_str(&d, out->level, sizeof(out->level));
		pp_data_src_tlb_str(&d, out->tlb, sizeof(out->tlb));
		pp_data_src_snoop_str(&d, out->snoop, sizeof(out->snoop));
		op = pp_data_src_op_name(&d);
		add_label(out, PP_LABEL_MEM_LEVEL, out->level);
		add_label(out, PP_LABEL_MEM_TLB, out->tlb);
		add_label(out, PP_LABEL_MEM_SNOOP, out->snoop);
		/* "No" is perf's word for an op field with no bit set: nothing to show. */
		if (strcmp(op, "No") != 0)
			add_label(out, PP_LABEL_MEM_OP, op);
	}
	if (bucket)
		add_label(out, PP_LABEL_MEM_LATENCY, pp_mem_latency_bucket_name(bucket - 1));
	return out->n;
}

const char *pp_mem_map_class(const struct pp_map_entry *m, char *buf, size_t len)
{
	const char *name;

	switch (m->kind) {
	case PP_MAP_KIND_HEAP:
		name = "[heap]";
		break;
	case PP_MAP_KIND_STACK:
		name = "[stack]";
		break;
	case PP_MAP_KIND_VDSO:
		name = "[vdso]";
		break;
	case PP_MAP_KIND_VVAR:
		name = "[vvar]";
		break;
	case PP_MAP_KIND_VSYSCALL:
		name = "[vsyscall]";
		break;
	case PP_MAP_KIND_FILE: {
		const char *slash = strrchr(m->path, '/');
		const char *base = slash && slash[1] ? slash + 1 : m->path;

		snprintf(buf, len, "[file] %s", base);
		return buf;
	}
	default: /* anonymous, and pseudo files such as anon_inode:... */
		name = "[anon]";
		break;
	}
	snprintf(buf, len, "%s", name);
	return buf;
}

const struct pp_map_entry *pp_mem_bss_owner(const struct pp_map_entry *entries, size_t n,
					    const struct pp_map_entry *m)
{
	const struct pp_map_entry *prev;

	if (!entries || !m || m <= entries || m >= entries + n || m->kind != PP_MAP_KIND_ANON ||
	    m->path[0])
		return NULL;
	prev = m - 1;
	if (prev->end != m->start || prev->kind != PP_MAP_KIND_FILE ||
	    !(prev->perms & PP_MAP_WRITE))
		return NULL;
	return prev;
}

struct pp_mem_objcache {
	struct pp_mem_obj *slots; /* open addressing, cap slots (power of two) */
	size_t cap, used, limit;
	struct pp_mem_objcache_stats stats;
};

struct pp_mem_objcache *pp_mem_objcache_new(size_t capacity)
{
	struct pp_mem_objcache *c = calloc(1, sizeof(*c));
	size_t cap = 16;

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->limit = capacity ? capacity : DEFAULT_OBJ_CAPACITY;
	/* At most 3/4 full, so probes stay short. */
	while (cap * 3 < c->limit * 4)
		cap <<= 1;
	c->slots = calloc(cap, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->cap = cap;
	return c;
}

void pp_mem_objcache_free(struct pp_mem_objcache *c)
{
	if (!c)
		return;
	free(c->slots);
	free(c);
}

static uint64_t key_hash(const struct pp_mem_obj_key *k)
{
	return pp_mix64(k->start ^ ((uint64_t)k->pid << 40) ^
			(k->generation * 0x9e3779b97f4a7c15ull));
}

static int key_eq(const struct pp_mem_obj_key *a, const struct pp_mem_obj_key *b)
{
	return a->start == b->start && a->pid == b->pid && a->generation == b->generation &&
	       a->end == b->end && a->offset == b->offset && a->inode == b->inode;
}

static struct pp_mem_obj *find_slot(struct pp_mem_objcache *c, const struct pp_mem_obj_key *key)
{
	size_t mask = c->cap - 1;

	for (size_t i = key_hash(key) & mask;; i = (i + 1) & mask) {
		struct pp_mem_obj *o = &c->slots[i];

		if (!o->used || key_eq(&o->key, key))
			return o;
	}
}

struct pp_mem_obj *pp_mem_objcache_get(struct pp_mem_objcache *c, const struct pp_mem_obj_key *key)
{
	struct pp_mem_obj *o = find_slot(c, key);

	if (o->used) {
		c->stats.hits++;
		return o;
	}
	c->stats.misses++;
	if (c->used >= c->limit) {
		/* Emptying beats LRU bookkeeping here: refilling costs one symbol-cache lookup
		 * each. */
		c->stats.evictions += c->used;
		pp_mem_objcache_reset(c);
		o = find_slot(c, key);
	}
	memset(o, 0, sizeof(*o));
	o->key = *key;
	o->used = 1;
	c->used++;
	return o;
}

void pp_mem_objcache_reset(struct pp_mem_objcache *c)
{
	memset(c->slots, 0, c->cap * sizeof(*c->slots));
	c->used = 0;
}

size_t pp_mem_objcache_bytes(const struct pp_mem_objcache *c)
{
	return c ? sizeof(*c) + c->cap * sizeof(*c->slots) : 0;
}

void pp_mem_objcache_get_stats(const struct pp_mem_objcache *c, struct pp_mem_objcache_stats *out)
{
	*out = c->stats;
}
