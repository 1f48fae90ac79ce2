/*
 * The profile model: interned mappings, locations and strings, and samples aggregated by
 * (stack, pid, tid, thread name, process name, labels). Every string is copied once into a
 * string intern table, so keys compare by pointer and the writers can group by pointer.
 * Elements are allocated one by one (not in a growing array of structs) because pointers
 * handed out must stay valid while the profile grows.
 */
#include <pebsprof/profile.h>
#include <pebsprof/text.h>

#include "base/htab.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sample_node {
	struct pp_sample_info info;
	/* locations and labels follow in the same allocation */
};

/* A resource's attributes; strings interned, so lists compare by pointer. */
struct resource {
	uint32_t nattrs;
	struct pp_label attrs[];
};

struct pp_profile {
	struct pp_profile_desc desc;

	char **strs; /* interned strings */
	uint32_t nstrs, cap_strs;
	struct pp_htab str_idx;

	struct pp_mapping_info **maps;
	uint32_t nmaps, cap_maps;
	struct pp_htab map_idx;

	struct pp_location_info **locs;
	uint32_t nlocs, cap_locs;
	struct pp_htab loc_idx;

	struct resource **resources;
	uint32_t nresources, cap_resources;
	struct pp_htab resource_idx;

	struct sample_node **samples;
	uint32_t nsamples, cap_samples;
	struct pp_htab sample_idx;

	uint64_t total_count;
	uint64_t total_value;
	uint64_t off_cpu_waits, off_cpu_ns; /* samples with a wait state */
	uint64_t total_latency;
	uint64_t strings_cleaned; /* interned strings that were not clean text */
};

/* Grows a pointer array (doubling) so index n fits; evaluates to 0 or -ENOMEM. */
#define RESERVE(arr, cap, n)                                                                       \
	({                                                                                         \
		int r_ = 0;                                                                        \
		if ((n) >= (cap)) {                                                                \
			uint32_t nc_ = (cap) ? (cap)*2 : 64;                                       \
			__typeof__(arr) na_ = (cap) >= (1u << 30)                                  \
						  ? NULL                                           \
						  : realloc((arr), (size_t)nc_ * sizeof(*(arr)));  \
			if (na_) {                                                                 \
				(arr) = na_;                                                       \
				(cap) = nc_;                                                       \
			} else {                                                                   \
				r_ = -ENOMEM;                                                      \
			}                                                                          \
		}                                                                                  \
		r_;                                                                                \
	})

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_profile *p = ctx;

	return strcmp(p->strs[idx], key) == 0;
}

/*
 * Returns the profile's own copy of s, cleaned (pebsprof/text.h) when it is not valid UTF-8
 * free of control characters, or NULL on allocation failure. Every string of every output
 * comes through here, so one process's bytes cannot make a whole file or request undecodable
 * or reach a terminal raw.
 */
static const char *intern_str(struct pp_profile *p, const char *s)
{
	char *cleaned = NULL, *copy;
	uint64_t h;
	uint32_t idx;

	if (!pp_text_is_clean(s)) {
		cleaned = pp_text_clean_dup(s);
		if (!cleaned)
			return NULL;
		s = cleaned;
		p->strings_cleaned++;
	}
	h = pp_hash_str(PP_HASH_SEED, s);
	idx = pp_htab_find(&p->str_idx, h, str_eq, p, s);
	if (idx != PP_HTAB_NONE) {
		free(cleaned);
		return p->strs[idx];
	}
	copy = cleaned ? cleaned : strdup(s);
	if (!copy || RESERVE(p->strs, p->cap_strs, p->nstrs)) {
		free(copy);
		return NULL;
	}
	if (pp_htab_insert(&p->str_idx, h, p->nstrs)) {
		free(copy);
		return NULL;
	}
	p->strs[p->nstrs++] = copy;
	return copy;
}

struct pp_profile *pp_profile_new(const struct pp_profile_desc *desc)
{
	struct pp_profile *p;

	if (!desc || !desc->event) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->desc = *desc;
	p->desc.event = intern_str(p, desc->event);
	p->desc.value_type = intern_str(p, desc->value_type ? desc->value_type : desc->event);
	p->desc.value_unit = intern_str(p, desc->value_unit ? desc->value_unit : "count");
	if (!p->desc.event || !p->desc.value_type || !p->desc.value_unit) {
		pp_profile_free(p);
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void pp_profile_free(struct pp_profile *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nsamples; i++)
		free(p->samples[i]);
	free(p->samples);
	pp_htab_fini(&p->sample_idx);
	for (uint32_t i = 0; i < p->nresources; i++)
		free(p->resources[i]);
	free(p->resources);
	pp_htab_fini(&p->resource_idx);
	for (uint32_t i = 0; i < p->nlocs; i++)
		free(p->locs[i]);
	free(p->locs);
	pp_htab_fini(&p->loc_idx);
	for (uint32_t i = 0; i < p->nmaps; i++)
		free(p->maps[i]);
	free(p->maps);
	pp_htab_fini(&p->map_idx);
	for (uint32_t i = 0; i < p->nstrs; i++)
		free(p->strs[i]);
	free(p->strs);
	pp_htab_fini(&p->str_idx);
	free(p);
}

const struct pp_profile_desc *pp_profile_get_desc(const struct pp_profile *p)
{
	return p ? &p->desc : NULL;
}

void pp_profile_set_window(struct pp_profile *p, uint64_t start_unix_ns, uint64_t duration_ns)
{
	if (!p)
		return;
	p->desc.start_unix_ns = start_unix_ns;
	p->desc.duration_ns = duration_ns;
}

/* Mapping keys hold interned strings, so pointer equality is string equality. */
static uint64_t hash_mapping(const struct pp_mapping_info *m)
{
	uint64_t h = PP_HASH_SEED;

	h = pp_hash_u64(h, m->start);
	h = pp_hash_u64(h, m->limit);
	h = pp_hash_u64(h, m->file_offset);
	h = pp_hash_u64(h, m->load_bias);
	h = pp_hash_u64(h, (uintptr_t)m->filename);
	return pp_hash_u64(h, (uintptr_t)m->build_id);
}

static bool mapping_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_profile *p = ctx;
	const struct pp_mapping_info *a = p->maps[idx], *b = key;

	return a->start == b->start && a->limit == b->limit && a->file_offset == b->file_offset &&
	       a->load_bias == b->load_bias && a->filename == b->filename &&
	       a->build_id == b->build_id;
}

uint32_t pp_profile_intern_mapping(struct pp_profile *p, const struct pp_mapping_info *m)
{
	struct pp_mapping_info key, *copy;
	uint32_t idx;
	uint64_t h;

	if (!p || !m) {
		errno = EINVAL;
		return 0;
	}
	key = *m;
	key.filename = intern_str(p, m->filename ? m->filename : "");
	key.build_id = intern_str(p, m->build_id ? m->build_id : "");
	if (!key.filename || !key.build_id)
		goto nomem;
	h = hash_mapping(&key);
	idx = pp_htab_find(&p->map_idx, h, mapping_eq, p, &key);
	if (idx != PP_HTAB_NONE)
		return idx + 1;
	if (RESERVE(p->maps, p->cap_maps, p->nmaps))
		goto nomem;
	copy = malloc(sizeof(*copy));
	if (!copy)
		goto nomem;
	*copy = key;
	if (pp_htab_insert(&p->map_idx, h, p->nmaps)) {
		free(copy);
		goto nomem;
	}
	p->maps[p->nmaps++] = copy;
	return p->nmaps;
nomem:
	errno = ENOMEM;
	return 0;
}

uint32_t pp_profile_resolve_mapping(struct pp_profile *p, uint32_t id,
				    const struct pp_mapping_info *m)
{
	struct pp_mapping_info key;
	uint32_t idx;
	uint64_t h;

	if (!p || !m || id == 0 || id > p->nmaps) {
		errno = EINVAL;
		return 0;
	}
	key = *m;
	key.filename = intern_str(p, m->filename ? m->filename : "");
	key.build_id = intern_str(p, m->build_id ? m->build_id : "");
	if (!key.filename || !key.build_id)
		goto nomem;
	h = hash_mapping(&key);
	idx = pp_htab_find(&p->map_idx, h, mapping_eq, p, &key);
	if (idx != PP_HTAB_NONE)
		return idx + 1; /* already there (perhaps id itself) */
	*p->maps[id - 1] = key;
	/* found again under its new key; the old key's slot just no longer matches */
	if (pp_htab_insert(&p->map_idx, h, id - 1))
		goto nomem;
	return id;
nomem:
	errno = ENOMEM;
	return 0;
}

static uint64_t hash_location(const struct pp_location_info *l)
{
	uint64_t h = PP_HASH_SEED;

	h = pp_hash_u64(h, l->mapping_id);
	h = pp_hash_u64(h, l->address);
	h = pp_hash_u64(h, (uintptr_t)l->function);
	return pp_hash_u64(h, (uint64_t)l->kind);
}

static bool location_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_profile *p = ctx;
	const struct pp_location_info *a = p->locs[idx], *b = key;

	return a->mapping_id == b->mapping_id && a->address == b->address &&
	       a->function == b->function && a->kind == b->kind;
}

uint32_t pp_profile_intern_location(struct pp_profile *p, const struct pp_location_info *loc)
{
	struct pp_location_info key, *copy;
	uint32_t idx;
	uint64_t h;

	if (!p || !loc || !loc->function || loc->mapping_id > p->nmaps ||
	    (loc->kind != PP_FRAME_NATIVE && loc->kind != PP_FRAME_KERNEL &&
	     loc->kind != PP_FRAME_DATA)) {
		errno = EINVAL;
		return 0;
	}
	key = *loc;
	key.function = intern_str(p, loc->function);
	key.system_name =
	    loc->system_name && loc->system_name[0] && strcmp(loc->system_name, loc->function)
		? intern_str(p, loc->system_name)
		: key.function;
	if (!key.function || !key.system_name)
		goto nomem;
	h = hash_location(&key);
	idx = pp_htab_find(&p->loc_idx, h, location_eq, p, &key);
	if (idx != PP_HTAB_NONE)
		return idx + 1;
	if (RESERVE(p->locs, p->cap_locs, p->nlocs))
		goto nomem;
	copy = malloc(sizeof(*copy));
	if (!copy)
		goto nomem;
	*copy = key;
	if (pp_htab_insert(&p->loc_idx, h, p->nlocs)) {
		free(copy);
		goto nomem;
	}
	p->locs[p->nlocs++] = copy;
	return p->nlocs;
nomem:
	errno = ENOMEM;
	return 0;
}

int pp_profile_name_location(struct pp_profile *p, uint32_t id, const char *name,
			     const char *system_name)
{
	struct pp_location_info *l;
	const char *fn, *sn;

	if (!p || !name || !name[0] || id == 0 || id > p->nlocs)
		return -EINVAL;
	fn = intern_str(p, name);
	sn = system_name && system_name[0] ? intern_str(p, system_name) : fn;
	if (!fn || !sn)
		return -ENOMEM;
	l = p->locs[id - 1];
	l->function = fn;
	l->system_name = sn;
	l->unnamed = 0;
	/* found again under its new key; the old key's slot just no longer matches */
	if (pp_htab_insert(&p->loc_idx, hash_location(l), id - 1))
		return -ENOMEM;
	return 0;
}

int pp_profile_resolve_location(struct pp_profile *p, uint32_t id,
				const struct pp_location_info *loc)
{
	struct pp_location_info *l;
	const char *fn, *sn;

	if (!p || !loc || !loc->function || id == 0 || id > p->nlocs ||
	    loc->mapping_id > p->nmaps || loc->kind != p->locs[id - 1]->kind)
		return -EINVAL;
	fn = intern_str(p, loc->function);
	sn = loc->system_name && loc->system_name[0] ? intern_str(p, loc->system_name) : fn;
	if (!fn || !sn)
		return -ENOMEM;
	l = p->locs[id - 1];
	*l = *loc;
	l->function = fn;
	l->system_name = sn;
	if (pp_htab_insert(&p->loc_idx, hash_location(l), id - 1))
		return -ENOMEM;
	return 0;
}

static uint64_t hash_labels(const struct pp_label *l, uint32_t n)
{
	uint64_t h = PP_HASH_SEED;

	for (uint32_t i = 0; i < n; i++) {
		h = pp_hash_u64(h, (uintptr_t)l[i].key);
		h = pp_hash_u64(h, (uintptr_t)l[i].value);
	}
	return pp_hash_u64(h, n);
}

struct resource_key {
	const struct pp_label *attrs;
	uint32_t n;
};

static bool resource_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_profile *p = ctx;
	const struct resource *r = p->resources[idx];
	const struct resource_key *k = key;

	if (r->nattrs != k->n)
		return false;
	for (uint32_t i = 0; i < k->n; i++)
		if (r->attrs[i].key != k->attrs[i].key || r->attrs[i].value != k->attrs[i].value)
			return false;
	return true;
}

uint32_t pp_profile_intern_resource(struct pp_profile *p, const struct pp_label *attrs,
				    uint32_t nattrs)
{
	struct pp_label interned[PP_RESOURCE_MAX_ATTRS];
	struct resource_key key = {interned, nattrs};
	struct resource *r;
	uint32_t idx;
	uint64_t h;

	if (!p || !attrs || !nattrs || nattrs > PP_RESOURCE_MAX_ATTRS) {
		errno = EINVAL;
		return 0;
	}
	for (uint32_t i = 0; i < nattrs; i++) {
		if (!attrs[i].key || !attrs[i].value) {
			errno = EINVAL;
			return 0;
		}
		interned[i].key = intern_str(p, attrs[i].key);
		interned[i].value = intern_str(p, attrs[i].value);
		if (!interned[i].key || !interned[i].value)
			goto nomem;
	}
	h = hash_labels(interned, nattrs);
	idx = pp_htab_find(&p->resource_idx, h, resource_eq, p, &key);
	if (idx != PP_HTAB_NONE)
		return idx + 1;
	if (RESERVE(p->resources, p->cap_resources, p->nresources))
		goto nomem;
	r = malloc(sizeof(*r) + nattrs * sizeof(r->attrs[0]));
	if (!r)
		goto nomem;
	r->nattrs = nattrs;
	memcpy(r->attrs, interned, nattrs * sizeof(r->attrs[0]));
	if (pp_htab_insert(&p->resource_idx, h, p->nresources)) {
		free(r);
		goto nomem;
	}
	p->resources[p->nresources++] = r;
	return p->nresources;
nomem:
	errno = ENOMEM;
	return 0;
}

size_t pp_profile_resource_count(const struct pp_profile *p)
{
	return p ? p->nresources : 0;
}

const struct pp_label *pp_profile_get_resource(const struct pp_profile *p, uint32_t id,
					       uint32_t *nattrs)
{
	if (!p || id == 0 || id > p->nresources)
		return NULL;
	if (nattrs)
		*nattrs = p->resources[id - 1]->nattrs;
	return p->resources[id - 1]->attrs;
}

const char *pp_sample_comm(const struct pp_sample_info *s)
{
	if (s->process_kind == PP_PROCESS_IDLE ||
	    (s->pid == 0 && !(s->hidden & PP_SAMPLE_HIDE_PID)))
		return "swapper";
	return s->hidden & PP_SAMPLE_HIDE_THREAD ? s->process_name : s->thread_name;
}

static uint64_t hash_sample(const struct pp_sample_info *s)
{
	uint64_t h = PP_HASH_SEED;

	h = pp_hash_bytes(h, s->locations, (size_t)s->nlocations * sizeof(*s->locations));
	h = pp_hash_u64(h, ((uint64_t)s->pid << 32) | s->tid);
	h = pp_hash_u64(h, s->has_cpu ? (uint64_t)s->cpu + 1 : 0);
	h = pp_hash_u64(h, s->resource_id);
	h = pp_hash_u64(h, s->process_kind | (uint64_t)s->hidden << 32);
	h = pp_hash_u64(h, s->wait);
	h = pp_hash_u64(h, (uintptr_t)s->thread_name);
	h = pp_hash_u64(h, (uintptr_t)s->process_name);
	h = pp_hash_u64(h, (uintptr_t)s->process_path);
	for (uint32_t i = 0; i < s->nlabels; i++) {
		h = pp_hash_u64(h, (uintptr_t)s->labels[i].key);
		h = pp_hash_u64(h, (uintptr_t)s->labels[i].value);
	}
	return h;
}

static bool sample_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_profile *p = ctx;
	const struct pp_sample_info *a = &p->samples[idx]->info, *b = key;

	if (a->nlocations != b->nlocations || a->pid != b->pid || a->tid != b->tid ||
	    a->thread_name != b->thread_name || a->process_name != b->process_name ||
	    a->process_path != b->process_path || a->nlabels != b->nlabels ||
	    !a->has_cpu != !b->has_cpu || (a->has_cpu && a->cpu != b->cpu) ||
	    a->resource_id != b->resource_id || a->process_kind != b->process_kind ||
	    a->hidden != b->hidden || a->wait != b->wait)
		return false;
	for (uint32_t i = 0; i < a->nlabels; i++) {
		if (a->labels[i].key != b->labels[i].key ||
		    a->labels[i].value != b->labels[i].value)
			return false;
	}
	return !a->nlocations ||
	       memcmp(a->locations, b->locations, (size_t)a->nlocations * sizeof(uint32_t)) == 0;
}

static int label_cmp(const struct pp_label *a, const struct pp_label *b)
{
	int c = strcmp(a->key, b->key);

	return c ? c : strcmp(a->value, b->value);
}

/* Allocates a stored copy of a sample whose strings are already interned. */
static struct sample_node *sample_node_new(const struct pp_sample_info *s)
{
	size_t locs_sz = (size_t)s->nlocations * sizeof(uint32_t);
	size_t labels_off = sizeof(struct sample_node) + locs_sz;
	struct sample_node *n;
	uint32_t *locs;

	labels_off =
	    (labels_off + _Alignof(struct pp_label) - 1) & ~(size_t)(_Alignof(struct pp_label) - 1);
	n = malloc(labels_off + (size_t)s->nlabels * sizeof(struct pp_label));
	if (!n)
		return NULL;
	n->info = *s;
	locs = (uint32_t *)(n + 1);
	if (locs_sz)
		memcpy(locs, s->locations, locs_sz);
	n->info.locations = s->nlocations ? locs : NULL;
	if (s->nlabels) {
		struct pp_label *labels = (struct pp_label *)((char *)n + labels_off);

		memcpy(labels, s->labels, (size_t)s->nlabels * sizeof(*labels));
		n->info.labels = labels;
	} else {
		n->info.labels = NULL;
	}
	return n;
}

int pp_profile_add_sample(struct pp_profile *p, const struct pp_sample_info *s)
{
	struct pp_label labels[PP_SAMPLE_MAX_LABELS];
	struct pp_sample_info key;
	struct sample_node *n;
	uint32_t idx;
	uint64_t h;

	if (!p || !s || !s->thread_name || !s->process_name || s->nlabels > PP_SAMPLE_MAX_LABELS ||
	    (s->nlocations && !s->locations) || (s->nlabels && !s->labels))
		return -EINVAL;
	if (s->nlocations > (1u << 24) || s->resource_id > p->nresources ||
	    s->wait >= PP_WAIT_STATES)
		return -EINVAL;
	for (uint32_t i = 0; i < s->nlocations; i++) {
		if (s->locations[i] == 0 || s->locations[i] > p->nlocs)
			return -EINVAL;
	}
	key = *s;
	key.thread_name = intern_str(p, s->thread_name);
	key.process_name = intern_str(p, s->process_name);
	key.process_path = intern_str(p, s->process_path ? s->process_path : "");
	if (!key.thread_name || !key.process_name || !key.process_path)
		return -ENOMEM;
	/* Labels are kept sorted so the same set given in another order aggregates. */
	for (uint32_t i = 0; i < s->nlabels; i++) {
		struct pp_label l;
		uint32_t j;

		if (!s->labels[i].key || !s->labels[i].value)
			return -EINVAL;
		l.key = intern_str(p, s->labels[i].key);
		l.value = intern_str(p, s->labels[i].value);
		if (!l.key || !l.value)
			return -ENOMEM;
		for (j = i; j > 0 && label_cmp(&labels[j - 1], &l) > 0; j--)
			labels[j] = labels[j - 1];
		labels[j] = l;
	}
	key.labels = labels;

	h = hash_sample(&key);
	idx = pp_htab_find(&p->sample_idx, h, sample_eq, p, &key);
	if (idx != PP_HTAB_NONE) {
		struct pp_sample_info *agg = &p->samples[idx]->info;

		agg->count += s->count;
		agg->value += s->value;
		agg->latency += s->latency;
		/* 0 means the caller did not know the time; it must not win the minimum. */
		if (s->first_time_unix_ns &&
		    (!agg->first_time_unix_ns || s->first_time_unix_ns < agg->first_time_unix_ns))
			agg->first_time_unix_ns = s->first_time_unix_ns;
	} else {
		if (RESERVE(p->samples, p->cap_samples, p->nsamples))
			return -ENOMEM;
		n = sample_node_new(&key);
		if (!n)
			return -ENOMEM;
		if (pp_htab_insert(&p->sample_idx, h, p->nsamples)) {
			free(n);
			return -ENOMEM;
		}
		p->samples[p->nsamples++] = n;
	}
	if (s->wait) {
		p->off_cpu_waits += s->count;
		p->off_cpu_ns += s->value;
		return 0;
	}
	p->total_count += s->count;
	p->total_value += s->value;
	p->total_latency += s->latency;
	return 0;
}

size_t pp_profile_sample_count(const struct pp_profile *p)
{
	return p ? p->nsamples : 0;
}

const struct pp_sample_info *pp_profile_get_sample(const struct pp_profile *p, size_t i)
{
	if (!p || i >= p->nsamples)
		return NULL;
	return &p->samples[i]->info;
}

size_t pp_profile_location_count(const struct pp_profile *p)
{
	return p ? p->nlocs : 0;
}

const struct pp_location_info *pp_profile_get_location(const struct pp_profile *p, uint32_t id)
{
	if (!p || id == 0 || id > p->nlocs)
		return NULL;
	return p->locs[id - 1];
}

size_t pp_profile_mapping_count(const struct pp_profile *p)
{
	return p ? p->nmaps : 0;
}

const struct pp_mapping_info *pp_profile_get_mapping(const struct pp_profile *p, uint32_t id)
{
	if (!p || id == 0 || id > p->nmaps)
		return NULL;
	return p->maps[id - 1];
}

uint64_t pp_profile_total_count(const struct pp_profile *p)
{
	return p ? p->total_count : 0;
}

uint64_t pp_profile_total_value(const struct pp_profile *p)
{
	return p ? p->total_value : 0;
}

uint64_t pp_profile_off_cpu_waits(const struct pp_profile *p)
{
	return p ? p->off_cpu_waits : 0;
}

uint64_t pp_profile_off_cpu_ns(const struct pp_profile *p)
{
	return p ? p->off_cpu_ns : 0;
}

int pp_profile_is_wall_clock(const struct pp_profile *p)
{
	return p && p->off_cpu_waits;
}

uint64_t pp_profile_view_weight(const struct pp_profile *p, const struct pp_sample_info *s)
{
	if (!pp_profile_is_wall_clock(p))
		return s->count;
	return s->wait || pp_profile_is_cpu(&p->desc) ? s->value : 0;
}

const char *pp_wait_frame_name(uint32_t wait)
{
	static const char *const names[PP_WAIT_STATES] = {
	    [PP_WAIT_RUNNABLE] = "[off-CPU: runnable]",
	    [PP_WAIT_SLEEPING] = "[off-CPU: sleeping]",
	    [PP_WAIT_DISK] = "[off-CPU: disk]",
	    [PP_WAIT_STOPPED] = "[off-CPU: stopped]",
	    [PP_WAIT_THROTTLED] = "[off-CPU: throttled]",
	};

	return wait < PP_WAIT_STATES && names[wait] ? names[wait] : "[off-CPU]";
}

const char *pp_wait_state_name(uint32_t wait)
{
	static const char *const names[PP_WAIT_STATES] = {
	    [PP_WAIT_RUNNABLE] = "runnable",   [PP_WAIT_SLEEPING] = "sleeping",
	    [PP_WAIT_DISK] = "disk",	       [PP_WAIT_STOPPED] = "stopped",
	    [PP_WAIT_THROTTLED] = "throttled",
	};

	return wait < PP_WAIT_STATES && names[wait] ? names[wait] : "";
}

uint64_t pp_profile_total_latency(const struct pp_profile *p)
{
	return p ? p->total_latency : 0;
}

uint64_t pp_profile_strings_cleaned(const struct pp_profile *p)
{
	return p ? p->strings_cleaned : 0;
}

int pp_profile_is_cpu(const struct pp_profile_desc *d)
{
	return d && d->value_type && strcmp(d->value_type, "cpu") == 0;
}

/* Pyroscope's /ingest takes a name holding one of these for another kind of profile. */
static const char *const pyroscope_kind_words[] = {"cpu",    "alloc_",	  "inuse_", "mutex_",
						   "block_", "goroutine", "wall"};
static const char *const pyroscope_mapped_types[] = {"samples", "contentions", "delay", "space",
						     "objects"};

const char *pp_profile_type_name(const struct pp_profile_desc *d, char *buf, size_t len)
{
	static const char *const core_pmus[] = {"cpu/", "cpu_core/", "cpu_atom/"};
	const char *v = d && d->value_type ? d->value_type : "";
	size_t n = 0, cap;

	if (!buf || !len)
		return "";
	cap = len < PP_PROFILE_TYPE_NAME_MAX ? len : PP_PROFILE_TYPE_NAME_MAX;
	if (pp_profile_is_cpu(d)) {
		snprintf(buf, cap, "process_cpu");
		return buf;
	}
	for (size_t i = 0; i < sizeof(core_pmus) / sizeof(core_pmus[0]); i++) {
		size_t pl = strlen(core_pmus[i]);

		if (strncmp(v, core_pmus[i], pl) == 0 && v[pl]) {
			v += pl;
			break;
		}
	}
	if (*v >= '0' && *v <= '9') {
		snprintf(buf, cap, "event_");
		n = strlen(buf);
	}
	for (; *v && n + 1 < cap; v++) {
		char c = *v;
		bool alnum =
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (alnum)
			buf[n++] = c;
		else if (n && buf[n - 1] != '_')
			buf[n++] = '_';
	}
	while (n && buf[n - 1] == '_')
		n--;
	buf[n] = '\0';
	if (!n)
		snprintf(buf, cap, "event");
	/* Sample types Pyroscope's /ingest maps by their exact name. */
	for (size_t i = 0; i < sizeof(pyroscope_mapped_types) / sizeof(pyroscope_mapped_types[0]);
	     i++)
		if (strcmp(buf, pyroscope_mapped_types[i]) == 0)
			snprintf(buf + n, cap - n, "_events");
	for (size_t i = 0; i < sizeof(pyroscope_kind_words) / sizeof(pyroscope_kind_words[0]);
	     i++) {
		size_t wl = strlen(pyroscope_kind_words[i]);

		for (char *hit = strstr(buf, pyroscope_kind_words[i]); hit;
		     hit = strstr(hit + wl, pyroscope_kind_words[i]))
			for (size_t j = 0; j < wl; j++)
				if (hit[j] >= 'a' && hit[j] <= 'z')
					hit[j] = (char)(hit[j] - 'a' + 'A');
	}
	return buf;
}

uint64_t pp_profile_period(const struct pp_profile *p)
{
	const struct pp_profile_desc *d = pp_profile_get_desc(p);
	uint64_t count, mean;

	if (!d)
		return 0;
	if (d->period)
		return d->period;
	count = pp_profile_total_count(p);
	mean = count ? pp_profile_total_value(p) / count : 0;
	return mean ? mean : 1;
}

void pp_label_budget_offer(struct pp_label_budget *b, const char *key)
{
	if (!b || !key || !key[0])
		return;
	for (uint32_t i = 0; i < b->nkeys; i++)
		if (strcmp(b->keys[i], key) == 0)
			return;
	/* Past the table, a name is kept uncounted: 64 distinct names exceed any series. */
	if (b->nkeys < PP_LABEL_BUDGET_MAX_KEYS)
		b->keys[b->nkeys++] = key;
}

void pp_label_budget_offer_profile(struct pp_label_budget *b, const struct pp_profile *p)
{
	size_t n = pp_profile_sample_count(p);

	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		uint32_t nres = 0;
		const struct pp_label *res = pp_profile_get_resource(p, s->resource_id, &nres);

		for (uint32_t j = 0; j < s->nlabels; j++)
			pp_label_budget_offer(b, s->labels[j].key);
		for (uint32_t j = 0; res && j < nres; j++)
			pp_label_budget_offer(b, res[j].key);
	}
}

uint32_t pp_label_budget_plan(struct pp_label_budget *b, uint32_t room)
{
	static const char *const order[] = {"cpu.logical_number", "process.executable.path",
					    "thread.id",	  "memory.snoop",
					    "memory.tlb",	  "memory.op",
					    "container.runtime",  "k8s.pod.uid",
					    "host.name"};
	static const char *const kept[] = {
	    "service.name",  "k8s.pod.name", "k8s.namespace.name",   "k8s.container.name",
	    "k8s.node.name", "container.id", "process.pid",	     "process.executable.name",
	    "thread.name",   "memory.level", "memory.latency_bucket"};
	uint32_t left;

	if (!b)
		return 0;
	memset(b->dropped, 0, sizeof(b->dropped));
	b->ndropped = 0;
	left = b->nkeys;
	for (size_t o = 0; left > room && o < sizeof(order) / sizeof(order[0]); o++)
		for (uint32_t i = 0; i < b->nkeys; i++)
			if (!b->dropped[i] && strcmp(b->keys[i], order[o]) == 0) {
				b->dropped[i] = 1;
				left--;
			}
	for (uint32_t i = b->nkeys; left > room && i-- > 0;) {
		bool keep = b->dropped[i] != 0;

		for (size_t k = 0; !keep && k < sizeof(kept) / sizeof(kept[0]); k++)
			keep =
			    strcmp(b->keys[i], kept[k]) == 0 || strncmp(b->keys[i], "k8s.", 4) == 0;
		if (!keep) {
			b->dropped[i] = 1;
			left--;
		}
	}
	b->ndropped = b->nkeys - left;
	return b->ndropped;
}

int pp_label_budget_drops(const struct pp_label_budget *b, const char *key)
{
	if (!b || !b->ndropped || !key)
		return 0;
	for (uint32_t i = 0; i < b->nkeys; i++)
		if (b->dropped[i] && strcmp(b->keys[i], key) == 0)
			return 1;
	return 0;
}

/* Copies location id `id` of p into q (with its mapping) once; map[] remembers the copies. */
static uint32_t copy_location(struct pp_profile *q, const struct pp_profile *p, uint32_t id,
			      uint32_t *loc_map, uint32_t *map_map)
{
	const struct pp_location_info *l = p->locs[id - 1];
	struct pp_location_info nl = *l;

	if (loc_map[id])
		return loc_map[id];
	if (l->mapping_id) {
		if (!map_map[l->mapping_id])
			map_map[l->mapping_id] =
			    pp_profile_intern_mapping(q, p->maps[l->mapping_id - 1]);
		nl.mapping_id = map_map[l->mapping_id];
		if (!nl.mapping_id)
			return 0;
	}
	loc_map[id] = pp_profile_intern_location(q, &nl);
	return loc_map[id];
}

size_t pp_label_budget_describe(const struct pp_label_budget *b, char *buf, size_t len)
{
	size_t w = 0;

	if (!len)
		return 0;
	buf[0] = '\0';
	for (uint32_t i = 0; b && i < b->nkeys && w < len; i++)
		if (b->dropped[i])
			w += (size_t)snprintf(buf + w, len - w, "%s%s", w ? ", " : "", b->keys[i]);
	return w < len ? w : len - 1;
}

struct pp_profile *pp_profile_subset_new(const struct pp_profile *p, const size_t *idx, size_t n)
{
	uint32_t *loc_map = NULL, *map_map = NULL, *res_map = NULL, *locs = NULL;
	uint32_t depth = 1;
	struct pp_profile_desc d;
	struct pp_profile *q;
	int err = -ENOMEM;

	if (!p || (n && !idx)) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (idx[i] >= p->nsamples) {
			errno = EINVAL;
			return NULL;
		}
		if (p->samples[idx[i]]->info.nlocations > depth)
			depth = p->samples[idx[i]]->info.nlocations;
	}
	d = p->desc;
	d.period = pp_profile_period(p); /* every part of a window states the window's period */
	q = pp_profile_new(&d);
	if (!q)
		return NULL;
	loc_map = calloc(p->nlocs + 1, sizeof(*loc_map));
	map_map = calloc(p->nmaps + 1, sizeof(*map_map));
	res_map = calloc(p->nresources + 1, sizeof(*res_map));
	locs = malloc(depth * sizeof(*locs));
	if (!loc_map || !map_map || !res_map || !locs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s;
		struct pp_sample_info c;

		s = &p->samples[idx[i]]->info;
		c = *s;
		err = -ENOMEM;
		for (uint32_t j = 0; j < s->nlocations; j++)
			if (!(locs[j] = copy_location(q, p, s->locations[j], loc_map, map_map)))
				goto out;
		c.locations = locs;
		if (s->resource_id) {
			const struct resource *r = p->resources[s->resource_id - 1];

			if (!res_map[s->resource_id])
				res_map[s->resource_id] =
				    pp_profile_intern_resource(q, r->attrs, r->nattrs);
			if (!(c.resource_id = res_map[s->resource_id]))
				goto out;
		}
		err = pp_profile_add_sample(q, &c);
		if (err)
			goto out;
	}
	err = 0;
out:
	free(loc_map);
	free(map_map);
	free(res_map);
	free(locs);
	if (err) {
		pp_profile_free(q);
		errno = -err;
		return NULL;
	}
	return q;
}
