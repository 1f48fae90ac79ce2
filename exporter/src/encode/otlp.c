/*
 * OTLP profiles encoder: builds one ExportProfilesServiceRequest (opentelemetry-proto
 * v1.11.0) from profiles of the exporter's model, with a single deduplicated dictionary
 * shared by every process in the request. The rules it follows are listed in
 * include/pebsprof/otlp.h. Every message of the tree lives in one arena freed after the
 * encode; strings are borrowed from the profiles and the caller's resource description.
 */
#include <pebsprof/otlp.h>
#include <pebsprof/pyroscope.h>

#include "base/arena.h"
#include "base/fileio.h"
#include "base/htab.h"
#include "base/kvlist.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pbpack.h"
#include "base/strtab.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The generated names are long; these only paste the package prefix on. */
#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define PROF_FN(x) opentelemetry__proto__profiles__v1development__##x
#define COMMON(x) Opentelemetry__Proto__Common__V1__##x
#define COMMON_FN(x) opentelemetry__proto__common__v1__##x
#define VALUE_CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define SVC(x) Opentelemetry__Proto__Collector__Profiles__V1development__##x
#define SVC_FN(x) opentelemetry__proto__collector__profiles__v1development__##x

#define SCOPE_NAME "pebsprof"
#define KEY_BUILD_ID "process.executable.build_id.gnu"
#define KEY_FRAME_TYPE "profile.frame.type"

/* ---- growable tables of message pointers (the dictionary's repeated fields) ---- */

struct vec {
	void **v;
	uint32_t n, cap;
	struct pp_htab idx;
};

/* One request's state. */
/* The Profiles an input profile gives each process: its event's, latency's, off-CPU time's. */
enum view { VIEW_EVENT, VIEW_LATENCY, VIEW_OFF_CPU, VIEWS };

struct enc {
	struct pp_arena ar;
	int err;		       /* first failure, sticky */
	struct pp_label_budget budget; /* the label names left out (profile.h) */

	struct pp_strtab strs; /* string_table, borrowed */

	struct vec maps, locs, funcs, attrs, stacks, res;

	int32_t *scratch; /* one sample's location indices */
	uint32_t scratch_cap;

	const struct pp_otlp_resource *rdesc;
	size_t nprofiles;
	COMMON(KeyValue) * *common_kv; /* resource attributes every process shares */
	size_t n_common_kv;
	bool common_has_service;
	COMMON(InstrumentationScope) * scope;

	int32_t a_native, a_kernel; /* profile.frame.type attributes; -1 until first used */
};

/* A process, or a container with all its processes: one ResourceProfiles. */
struct res_entry {
	uint32_t pid;
	const char *name;
	const char *ckey; /* containers: their attributes as one string; NULL for a process */
	PROF(ResourceProfiles) * rp;
	PROF(ScopeProfiles) * sp;
	size_t cur_pi;	     /* output slot of the current Profile (VIEWS * input + view), + 1 */
	PROF(Profile) * cur; /* Profile of cur_pi being filled */
	size_t cur_count;    /* its samples, counted in the first pass */
};

static void fail(struct enc *e, int err)
{
	if (!e->err)
		e->err = err;
}

static void *alloc(struct enc *e, size_t size)
{
	void *r = pp_arena_alloc(&e->ar, size);

	if (!r)
		fail(e, -ENOMEM);
	return r;
}

/* Allocates n elements, checking the multiplication. */
static void *alloc_n(struct enc *e, size_t n, size_t size)
{
	if (n && size > SIZE_MAX / n) {
		fail(e, -ENOMEM);
		return NULL;
	}
	return alloc(e, n * size);
}

/* Appends p (findable under hash when indexed); returns its index, or -1 on failure. */
static int64_t vec_add(struct enc *e, struct vec *v, void *p, uint64_t hash, bool indexed)
{
	if (v->n >= INT32_MAX) {
		fail(e, -E2BIG);
		return -1;
	}
	if (v->n == v->cap) {
		uint32_t ncap = v->cap ? v->cap * 2 : 64;
		void **nv;

		if (v->cap >= (1u << 30))
			ncap = INT32_MAX;
		nv = realloc(v->v, (size_t)ncap * sizeof(*nv));
		if (!nv) {
			fail(e, -ENOMEM);
			return -1;
		}
		v->v = nv;
		v->cap = ncap;
	}
	if (indexed && pp_htab_insert(&v->idx, hash, v->n)) {
		fail(e, -ENOMEM);
		return -1;
	}
	v->v[v->n] = p;
	return v->n++;
}

static int64_t vec_push(struct enc *e, struct vec *v, void *p, uint64_t hash)
{
	return vec_add(e, v, p, hash, true);
}

static void vec_fini(struct vec *v)
{
	free(v->v);
	pp_htab_fini(&v->idx);
}

/* ---- strings ---- */

/* Index of s in string_table (added if new); 0 on failure, which e->err records. */
static int32_t S(struct enc *e, const char *s)
{
	int32_t i = pp_strtab_add(&e->strs, s);

	if (i < 0) {
		fail(e, i);
		return 0;
	}
	return i;
}

/* ---- attributes (KeyValueAndUnit, values inline) ---- */

struct attr_key {
	int32_t key;
	COMMON(AnyValue__ValueCase) kind;
	int64_t i;
	const char *s;
};

static bool attr_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const PROF(KeyValueAndUnit) *a = e->attrs.v[idx];
	const struct attr_key *k = key;

	if (a->key_strindex != k->key || a->value->value_case != k->kind)
		return false;
	if (k->kind == VALUE_CASE(INT_VALUE))
		return a->value->int_value == k->i;
	return strcmp(a->value->string_value, k->s) == 0;
}

static int32_t attr_intern(struct enc *e, const struct attr_key *k)
{
	uint64_t h = pp_hash_u64(pp_hash_u64(PP_HASH_SEED, (uint32_t)k->key), k->kind);
	PROF(KeyValueAndUnit) * a;
	COMMON(AnyValue) * v;
	uint32_t i;
	int64_t r;

	h = k->kind == VALUE_CASE(INT_VALUE) ? pp_hash_u64(h, (uint64_t)k->i)
					     : pp_hash_str(h, k->s);
	i = pp_htab_find(&e->attrs.idx, h, attr_eq, e, k);
	if (i != PP_HTAB_NONE)
		return (int32_t)i;
	a = alloc(e, sizeof(*a));
	v = alloc(e, sizeof(*v));
	if (!a || !v)
		return 0;
	PROF_FN(key_value_and_unit__init)(a);
	COMMON_FN(any_value__init)(v);
	a->key_strindex = k->key;
	a->value = v;
	v->value_case = k->kind;
	if (k->kind == VALUE_CASE(INT_VALUE))
		v->int_value = k->i;
	else
		v->string_value = (char *)k->s; /* protobuf-c only reads it */
	r = vec_push(e, &e->attrs, a, h);
	return r < 0 ? 0 : (int32_t)r;
}

static int32_t attr_str(struct enc *e, int32_t key, const char *val)
{
	struct attr_key k = {.key = key, .kind = VALUE_CASE(STRING_VALUE), .s = val};

	return attr_intern(e, &k);
}

static int32_t attr_int(struct enc *e, int32_t key, int64_t val)
{
	struct attr_key k = {.key = key, .kind = VALUE_CASE(INT_VALUE), .i = val};

	return attr_intern(e, &k);
}

/* One-element index list in the arena (attribute_indices of mappings and locations). */
static int32_t *one_index(struct enc *e, int32_t idx)
{
	int32_t *r = alloc(e, sizeof(*r));

	if (r)
		*r = idx;
	return r;
}

/* ---- mappings, functions, locations, stacks ---- */

struct map_key {
	uint64_t start, limit, offset;
	int32_t filename, build_id_attr;
};

static bool map_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const PROF(Mapping) *m = e->maps.v[idx];
	const struct map_key *k = key;
	int32_t battr = m->n_attribute_indices ? m->attribute_indices[0] : 0;

	return m->memory_start == k->start && m->memory_limit == k->limit &&
	       m->file_offset == k->offset && m->filename_strindex == k->filename &&
	       battr == k->build_id_attr;
}

static int32_t map_intern(struct enc *e, const struct pp_mapping_info *mi)
{
	/* In the ELF address space, as the locations' addresses (the OTel eBPF profiler's way):
	 * one binary mapped by many processes is one Mapping */
	struct map_key k = {.start = mi->start - mi->load_bias,
			    .limit = mi->limit - mi->load_bias,
			    .offset = mi->file_offset};
	PROF(Mapping) * m;
	uint64_t h;
	uint32_t i;
	int64_t r;

	k.filename = S(e, mi->filename);
	k.build_id_attr = mi->build_id[0] ? attr_str(e, S(e, KEY_BUILD_ID), mi->build_id) : 0;
	/* An all-zero mapping is mapping_table[0] itself. */
	if (!k.start && !k.limit && !k.offset && !k.filename && !k.build_id_attr)
		return 0;
	h = pp_hash_bytes(PP_HASH_SEED, &k, offsetof(struct map_key, filename));
	h = pp_hash_u64(h, ((uint64_t)(uint32_t)k.filename << 32) | (uint32_t)k.build_id_attr);
	i = pp_htab_find(&e->maps.idx, h, map_eq, e, &k);
	if (i != PP_HTAB_NONE)
		return (int32_t)i;
	m = alloc(e, sizeof(*m));
	if (!m)
		return 0;
	PROF_FN(mapping__init)(m);
	m->memory_start = k.start;
	m->memory_limit = k.limit;
	m->file_offset = k.offset;
	m->filename_strindex = k.filename;
	if (k.build_id_attr) {
		m->attribute_indices = one_index(e, k.build_id_attr);
		m->n_attribute_indices = 1;
	}
	r = vec_push(e, &e->maps, m, h);
	return r < 0 ? 0 : (int32_t)r;
}

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const PROF(Function) *f = e->funcs.v[idx];
	const int32_t *k = key;

	return f->name_strindex == k[0] && f->system_name_strindex == k[1];
}

/*
 * The function named name, spelled system_name in the binary (NULL: the same); 0 for an
 * empty name: a Function must name something.
 */
static int32_t func_intern(struct enc *e, const char *name, const char *system_name)
{
	int32_t k[2] = {S(e, name), 0};
	uint64_t h;
	PROF(Function) * f;
	uint32_t i;
	int64_t r;

	if (!k[0])
		return 0;
	k[1] = system_name && system_name[0] ? S(e, system_name) : k[0];
	h = pp_hash_u64(pp_hash_u64(PP_HASH_SEED, (uint32_t)k[0]), (uint32_t)k[1]);
	i = pp_htab_find(&e->funcs.idx, h, func_eq, e, k);
	if (i != PP_HTAB_NONE)
		return (int32_t)i;
	f = alloc(e, sizeof(*f));
	if (!f)
		return 0;
	PROF_FN(function__init)(f);
	/* filename is the source file, which the model does not know */
	f->name_strindex = k[0];
	f->system_name_strindex = k[1];
	r = vec_push(e, &e->funcs, f, h);
	return r < 0 ? 0 : (int32_t)r;
}

struct loc_key {
	uint64_t address;
	int32_t mapping, function, type_attr;
};

static bool loc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const PROF(Location) *l = e->locs.v[idx];
	const struct loc_key *k = key;
	int32_t fn = l->n_lines ? l->lines[0]->function_index : 0;
	int32_t ta = l->n_attribute_indices ? l->attribute_indices[0] : 0;

	return l->address == k->address && l->mapping_index == k->mapping && fn == k->function &&
	       ta == k->type_attr;
}

static int32_t loc_intern(struct enc *e, const struct loc_key *k)
{
	PROF(Location) * l;
	uint64_t h;
	uint32_t i;
	int64_t r;

	if (!k->address && !k->mapping && !k->function && !k->type_attr)
		return 0;
	h = pp_hash_u64(PP_HASH_SEED, k->address);
	h = pp_hash_u64(h, ((uint64_t)(uint32_t)k->mapping << 32) | (uint32_t)k->function);
	h = pp_hash_u64(h, (uint32_t)k->type_attr);
	i = pp_htab_find(&e->locs.idx, h, loc_eq, e, k);
	if (i != PP_HTAB_NONE)
		return (int32_t)i;
	l = alloc(e, sizeof(*l));
	if (!l)
		return 0;
	PROF_FN(location__init)(l);
	l->mapping_index = k->mapping;
	l->address = k->address;
	if (k->function) {
		PROF(Line) *line = alloc(e, sizeof(*line));
		PROF(Line) **lines = alloc(e, sizeof(*lines));

		if (!line || !lines)
			return 0;
		PROF_FN(line__init)(line);
		line->function_index = k->function;
		lines[0] = line;
		l->lines = lines;
		l->n_lines = 1;
	}
	if (k->type_attr) {
		l->attribute_indices = one_index(e, k->type_attr);
		l->n_attribute_indices = 1;
	}
	r = vec_push(e, &e->locs, l, h);
	return r < 0 ? 0 : (int32_t)r;
}

struct stack_key {
	const int32_t *idx;
	size_t n;
};

static bool stack_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const PROF(Stack) *s = e->stacks.v[idx];
	const struct stack_key *k = key;

	return s->n_location_indices == k->n &&
	       memcmp(s->location_indices, k->idx, k->n * sizeof(*k->idx)) == 0;
}

static int32_t stack_intern(struct enc *e, const int32_t *idx, size_t n)
{
	struct stack_key k = {.idx = idx, .n = n};
	PROF(Stack) * s;
	int32_t *copy;
	uint64_t h;
	uint32_t i;
	int64_t r;

	if (!n) /* stack_table[0] is the empty stack */
		return 0;
	h = pp_hash_bytes(PP_HASH_SEED, idx, n * sizeof(*idx));
	i = pp_htab_find(&e->stacks.idx, h, stack_eq, e, &k);
	if (i != PP_HTAB_NONE)
		return (int32_t)i;
	s = alloc(e, sizeof(*s));
	copy = alloc_n(e, n, sizeof(*copy));
	if (!s || !copy)
		return 0;
	PROF_FN(stack__init)(s);
	memcpy(copy, idx, n * sizeof(*idx));
	s->location_indices = copy;
	s->n_location_indices = n;
	r = vec_push(e, &e->stacks, s, h);
	return r < 0 ? 0 : (int32_t)r;
}

/* ---- per-profile translation of model ids to dictionary indexes ---- */

struct xlat {
	const struct pp_profile *p;
	int32_t *map; /* [mapping id] -> mapping_table index, -1 = not yet */
	int32_t *loc; /* [location id] -> location_table index, -1 = not yet */
};

static int32_t xlat_mapping(struct enc *e, struct xlat *x, uint32_t id)
{
	if (!id)
		return 0;
	if (x->map[id] < 0)
		x->map[id] = map_intern(e, pp_profile_get_mapping(x->p, id));
	return x->map[id];
}

static int32_t xlat_location(struct enc *e, struct xlat *x, uint32_t id)
{
	const struct pp_location_info *l;
	struct loc_key k = {0};

	if (x->loc[id] >= 0)
		return x->loc[id];
	l = pp_profile_get_location(x->p, id);
	k.address = l->address;
	k.mapping = xlat_mapping(e, x, l->mapping_id);
	/*
	 * A frame left to the backend goes without a Line: Pyroscope's symbolizer names exactly
	 * those (by the mapping's build id). One the agent could not name keeps its placeholder
	 * as the function, so a backend without a symbolizer still draws it.
	 */
	if (!(l->unnamed == PP_UNNAMED_FOR_BACKEND && l->mapping_id))
		k.function = func_intern(e, l->function, l->system_name);
	/* Interned on first use: the dictionary holds no entry nothing refers to. */
	if (l->kind == PP_FRAME_NATIVE) {
		if (e->a_native < 0)
			e->a_native = attr_str(e, S(e, KEY_FRAME_TYPE), "native");
		k.type_attr = e->a_native;
	} else if (l->kind == PP_FRAME_KERNEL) {
		if (e->a_kernel < 0)
			e->a_kernel = attr_str(e, S(e, KEY_FRAME_TYPE), "kernel");
		k.type_attr = e->a_kernel;
	}
	x->loc[id] = loc_intern(e, &k);
	return x->loc[id];
}

/* ---- resources (one per process) ---- */

static COMMON(KeyValue) * kv_new(struct enc *e, const char *key, const char *sval, int64_t ival)
{
	COMMON(KeyValue) *kv = alloc(e, sizeof(*kv));
	COMMON(AnyValue) *v = alloc(e, sizeof(*v));

	if (!kv || !v)
		return NULL;
	COMMON_FN(key_value__init)(kv);
	COMMON_FN(any_value__init)(v);
	kv->key = (char *)key;
	kv->value = v;
	if (sval) {
		v->value_case = VALUE_CASE(STRING_VALUE);
		v->string_value = (char *)sval;
	} else {
		v->value_case = VALUE_CASE(INT_VALUE);
		v->int_value = ival;
	}
	return kv;
}

static bool is_set(const char *s)
{
	return s && s[0];
}

/* The last extra attribute with the key, or NULL. */
static const char *extra_value(const struct pp_otlp_resource *r, const char *key)
{
	const char *v = NULL;

	for (uint32_t i = 0; r && i < r->n_extra; i++) {
		if (strcmp(r->extra_attrs[i].key, key) == 0)
			v = r->extra_attrs[i].value;
	}
	return v;
}

static bool is_fixed_key(const char *key)
{
	static const char *const fixed[] = {"service.name",
					    "host.name",
					    "k8s.node.name",
					    "process.pid",
					    "process.executable.name",
					    "process.executable.path"};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (strcmp(key, fixed[i]) == 0)
			return true;
	}
	return false;
}

/*
 * A label name as Pyroscope takes it on every version from 1.20 (pyroscope.h): its legacy
 * validation rejects the whole series otherwise. Dots stay: they are OpenTelemetry's, and
 * Pyroscope turns them into '_' itself.
 */
static const char *label_key(struct enc *e, const char *key)
{
	size_t n = strlen(key) + 2;
	char *out;

	if (pp_pyroscope_label_name_ok(key))
		return key;
	out = alloc(e, n);
	if (!out)
		return key;
	pp_pyroscope_label_name(key, out, n);
	return out;
}

void pp_otlp_plan_labels(const struct pp_profile *const *profiles, size_t n,
			 const struct pp_otlp_resource *r, struct pp_label_budget *b)
{
	bool has_cpu = false, has_path = false;

	memset(b, 0, sizeof(*b));

	pp_label_budget_offer(b, "service.name");
	if (r && (is_set(r->host_name) || extra_value(r, "host.name")))
		pp_label_budget_offer(b, "host.name");
	if (r && (is_set(r->node_name) || extra_value(r, "k8s.node.name")))
		pp_label_budget_offer(b, "k8s.node.name");
	for (uint32_t i = 0; r && r->extra_attrs && i < r->n_extra; i++)
		pp_label_budget_offer(b, r->extra_attrs[i].key);
	pp_label_budget_offer(b, "process.pid");
	pp_label_budget_offer(b, "process.executable.name");
	pp_label_budget_offer(b, "thread.id");
	pp_label_budget_offer(b, "thread.name");
	for (size_t i = 0; i < n; i++) {
		size_t ns = profiles[i] ? pp_profile_sample_count(profiles[i]) : 0;

		for (size_t j = 0; j < ns; j++) {
			const struct pp_sample_info *s = pp_profile_get_sample(profiles[i], j);

			has_cpu |= s->has_cpu != 0;
			has_path |= s->process_path && s->process_path[0];
		}
		if (profiles[i])
			pp_label_budget_offer_profile(b, profiles[i]);
	}
	if (has_cpu)
		pp_label_budget_offer(b, "cpu.logical_number");
	if (has_path)
		pp_label_budget_offer(b, "process.executable.path");
	pp_label_budget_plan(b, PP_LABEL_BUDGET);
}

/* Builds the resource attributes all processes share and the scope. */
static int build_common(struct enc *e)
{
	const struct pp_otlp_resource *r = e->rdesc;
	const char *service = NULL, *host = NULL, *node = NULL;
	size_t n = 0;

	if (r) {
		for (uint32_t i = 0; i < r->n_extra; i++) {
			if (!r->extra_attrs || !is_set(r->extra_attrs[i].key) ||
			    !r->extra_attrs[i].value)
				return -EINVAL;
		}
		service =
		    is_set(r->service_name) ? r->service_name : extra_value(r, "service.name");
		host = extra_value(r, "host.name");
		host = host ? host : r->host_name;
		node = extra_value(r, "k8s.node.name");
		node = node ? node : r->node_name;
	}
	e->common_kv = alloc_n(e, 3 + (r ? r->n_extra : 0), sizeof(*e->common_kv));
	e->scope = alloc(e, sizeof(*e->scope));
	if (!e->common_kv || !e->scope)
		return e->err;
	COMMON_FN(instrumentation_scope__init)(e->scope);
	e->scope->name = SCOPE_NAME;
	if (r && r->scope_version)
		e->scope->version = (char *)r->scope_version;

	if (is_set(service)) {
		e->common_kv[n++] = kv_new(e, "service.name", service, 0);
		e->common_has_service = true;
	}
	if (is_set(host) && !pp_label_budget_drops(&e->budget, "host.name"))
		e->common_kv[n++] = kv_new(e, "host.name", host, 0);
	if (is_set(node) && !pp_label_budget_drops(&e->budget, "k8s.node.name"))
		e->common_kv[n++] = kv_new(e, "k8s.node.name", node, 0);
	for (uint32_t i = 0; r && i < r->n_extra; i++) {
		const struct pp_label *a = &r->extra_attrs[i];

		/* Keys must be unique: only the last of repeated keys is written. */
		if (is_fixed_key(a->key) || extra_value(r, a->key) != a->value ||
		    pp_label_budget_drops(&e->budget, a->key))
			continue;
		e->common_kv[n++] = kv_new(e, label_key(e, a->key), a->value, 0);
	}
	e->n_common_kv = n;
	return e->err;
}

struct res_key {
	uint32_t pid;
	const char *name;
	const char *ckey;
};

static bool res_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const struct res_entry *r = e->res.v[idx];
	const struct res_key *k = key;

	if (k->ckey)
		return r->ckey && strcmp(r->ckey, k->ckey) == 0;
	return !r->ckey && r->pid == k->pid && strcmp(r->name, k->name) == 0;
}

/* A new ResourceProfiles with room for n attributes; its attributes are set by the caller. */
static struct res_entry *res_new(struct enc *e, size_t n, COMMON(KeyValue) * **kvs)
{
	struct res_entry *r = alloc(e, sizeof(*r));

	if (!r)
		return NULL;
	r->rp = alloc(e, sizeof(*r->rp));
	r->sp = alloc(e, sizeof(*r->sp));
	if (!r->rp || !r->sp)
		return NULL;
	PROF_FN(resource_profiles__init)(r->rp);
	PROF_FN(scope_profiles__init)(r->sp);
	r->rp->resource = alloc(e, sizeof(*r->rp->resource));
	r->rp->scope_profiles = alloc(e, sizeof(*r->rp->scope_profiles));
	/* Room for an event, a latency and an off-CPU Profile per input profile. */
	r->sp->profiles = alloc_n(e, VIEWS * e->nprofiles, sizeof(*r->sp->profiles));
	*kvs = alloc_n(e, n, sizeof(**kvs));
	if (!r->rp->resource || !r->rp->scope_profiles || !r->sp->profiles || !*kvs)
		return NULL;
	opentelemetry__proto__resource__v1__resource__init(r->rp->resource);
	r->rp->scope_profiles[0] = r->sp;
	r->rp->n_scope_profiles = 1;
	r->sp->scope = e->scope;
	return r;
}

static int res_finish(struct enc *e, struct res_entry *r, COMMON(KeyValue) * *kvs, size_t n,
		      uint64_t h)
{
	for (size_t j = 0; j < n; j++) {
		if (!kvs[j])
			return -ENOMEM;
	}
	r->rp->resource->attributes = kvs;
	r->rp->resource->n_attributes = n;
	return vec_push(e, &e->res, r, h) < 0 ? -ENOMEM : 0;
}

static bool kv_has(COMMON(KeyValue) * *kvs, size_t n, const char *key)
{
	for (size_t j = 0; j < n; j++)
		if (kvs[j] && strcmp(kvs[j]->key, key) == 0)
			return true;
	return false;
}

/*
 * The ResourceProfiles of the container (resource id s->resource_id of p): the container's
 * own attributes, its service.name first (else the configured one, else the executable of
 * the first process seen in it), then the attributes every resource shares. Processes
 * become sample attributes. Containers are matched across profiles by their attributes.
 */
static struct res_entry *res_get_container(struct enc *e, const struct pp_profile *p,
					   const struct pp_sample_info *s)
{
	uint32_t na = 0;
	const struct pp_label *attrs = pp_profile_get_resource(p, s->resource_id, &na);
	const char *service = NULL;
	COMMON(KeyValue) * *kvs;
	struct res_key k = {0};
	struct res_entry *r;
	size_t klen = 1, n = 0;
	char *ckey, *w;
	uint64_t h;
	uint32_t i;

	if (!attrs)
		return NULL;
	for (i = 0; i < na; i++)
		klen += strlen(attrs[i].key) + strlen(attrs[i].value) + 2;
	ckey = w = alloc(e, klen);
	if (!ckey)
		return NULL;
	for (i = 0; i < na; i++) {
		/* 0x1f and 0x1e cannot be confused with the text of a key or value we write. */
		w += sprintf(w, "%s\x1f%s\x1e", attrs[i].key, attrs[i].value);
		if (!strcmp(attrs[i].key, "service.name"))
			service = attrs[i].value;
	}
	k.ckey = ckey;
	h = pp_hash_str(PP_HASH_SEED ^ 0x5a5a, ckey);
	i = pp_htab_find(&e->res.idx, h, res_eq, e, &k);
	if (i != PP_HTAB_NONE)
		return e->res.v[i];
	r = res_new(e, 1 + e->n_common_kv + na, &kvs);
	if (!r)
		return NULL;
	r->ckey = ckey;
	r->name = s->process_name;
	if (is_set(service))
		kvs[n++] = kv_new(e, "service.name", service, 0);
	else if (!e->common_has_service)
		kvs[n++] = kv_new(e, "service.name",
				  s->process_name[0] ? s->process_name : "unknown_service", 0);
	for (size_t j = 0; j < e->n_common_kv; j++)
		if (!(is_set(service) && !strcmp(e->common_kv[j]->key, "service.name")))
			kvs[n++] = e->common_kv[j];
	for (i = 0; i < na; i++)
		if (!kv_has(kvs, n, attrs[i].key) &&
		    !pp_label_budget_drops(&e->budget, attrs[i].key))
			kvs[n++] = kv_new(e, label_key(e, attrs[i].key), attrs[i].value, 0);
	return res_finish(e, r, kvs, n, h) ? NULL : r;
}

/*
 * The resource of a process outside containers, by (pid, name); pid 0 with PP_SAMPLE_HIDE_PID
 * is every process of the executable, without a process.pid. Kernel threads and the idle
 * task have the services pyroscope.h states, not one per comm.
 */
static struct res_entry *res_get(struct enc *e, const struct pp_sample_info *s)
{
	uint32_t pid = s->pid;
	const char *name = s->process_name, *path = s->process_path;
	const char *service = pp_pyroscope_stated_service(s->process_kind);
	struct res_key k = {.pid = pid, .name = name};
	uint64_t h = pp_hash_str(pp_hash_u64(PP_HASH_SEED, pid), name);
	uint32_t i = pp_htab_find(&e->res.idx, h, res_eq, e, &k);
	COMMON(KeyValue) * *kvs;
	struct res_entry *r;
	size_t n;

	if (i != PP_HTAB_NONE)
		return e->res.v[i];
	r = res_new(e, e->n_common_kv + 4, &kvs);
	if (!r)
		return NULL;
	r->pid = pid;
	r->name = name;
	n = 0;
	/* service.name always: without it backends file the data under unknown_service. */
	if (!e->common_has_service)
		kvs[n++] = kv_new(e, "service.name",
				  service   ? service
				  : name[0] ? name
					    : PP_SERVICE_UNKNOWN,
				  0);
	memcpy(kvs + n, e->common_kv, e->n_common_kv * sizeof(*kvs));
	n += e->n_common_kv;
	if (!(s->hidden & PP_SAMPLE_HIDE_PID))
		kvs[n++] = kv_new(e, "process.pid", NULL, pid);
	kvs[n++] = kv_new(e, "process.executable.name", name, 0);
	if (path && path[0] && !pp_label_budget_drops(&e->budget, "process.executable.path"))
		kvs[n++] = kv_new(e, "process.executable.path", path, 0);
	return res_finish(e, r, kvs, n, h) ? NULL : r;
}

/* ---- samples ---- */

/* What a Profile's one value per sample holds (profile.h names the types). */
enum sample_value { VALUE_COUNT, VALUE_SUM, VALUE_LATENCY };

static int fill_sample(struct enc *e, struct xlat *x, const struct pp_profile_desc *d,
		       const struct pp_sample_info *s, enum sample_value what, PROF(Sample) * out)
{
	int32_t keys[7 + PP_SAMPLE_MAX_LABELS], attrs[7 + PP_SAMPLE_MAX_LABELS];
	size_t na = 0;

	if (s->nlocations > e->scratch_cap) {
		int32_t *n = realloc(e->scratch, (size_t)s->nlocations * sizeof(*n));

		if (!n)
			return -ENOMEM;
		e->scratch = n;
		e->scratch_cap = s->nlocations;
	}
	for (uint32_t i = 0; i < s->nlocations; i++)
		e->scratch[i] = xlat_location(e, x, s->locations[i]);
	PROF_FN(sample__init)(out);
	out->stack_index = stack_intern(e, e->scratch, s->nlocations);

	if (!(s->hidden & PP_SAMPLE_HIDE_THREAD)) {
		if (!pp_label_budget_drops(&e->budget, "thread.id")) {
			keys[na] = S(e, "thread.id");
			attrs[na] = attr_int(e, keys[na], s->tid);
			na++;
		}
		keys[na] = S(e, "thread.name");
		attrs[na] = attr_str(e, keys[na], s->thread_name);
		na++;
	}
	if (s->has_cpu && !pp_label_budget_drops(&e->budget, "cpu.logical_number")) {
		keys[na] = S(e, "cpu.logical_number");
		attrs[na] = attr_int(e, keys[na], s->cpu);
		na++;
	}
	if (s->resource_id) {
		/* A container's resource holds many processes: each sample names its own. */
		if (!(s->hidden & PP_SAMPLE_HIDE_PID)) {
			keys[na] = S(e, "process.pid");
			attrs[na] = attr_int(e, keys[na], s->pid);
			na++;
		}
		keys[na] = S(e, "process.executable.name");
		attrs[na] = attr_str(e, keys[na], s->process_name);
		na++;
		if (s->process_path && s->process_path[0] &&
		    !pp_label_budget_drops(&e->budget, "process.executable.path")) {
			keys[na] = S(e, "process.executable.path");
			attrs[na] = attr_str(e, keys[na], s->process_path);
			na++;
		}
	}
	if (s->wait) {
		keys[na] = S(e, PP_LABEL_OFF_CPU_STATE);
		attrs[na] = attr_str(e, keys[na], pp_wait_state_name(s->wait));
		na++;
	}
	for (uint32_t i = 0; i < s->nlabels && i < PP_SAMPLE_MAX_LABELS; i++) {
		int32_t k;
		size_t j;

		if (!s->labels[i].key[0] || pp_label_budget_drops(&e->budget, s->labels[i].key))
			continue;
		k = S(e, label_key(e, s->labels[i].key));
		for (j = 0; j < na && keys[j] != k; j++)
			;
		if (j < na) /* a referrer's attribute keys must be unique */
			continue;
		keys[na] = k;
		attrs[na++] = attr_str(e, k, s->labels[i].value);
	}
	out->attribute_indices = alloc_n(e, na, sizeof(*attrs));
	out->values = alloc(e, sizeof(*out->values));
	if (!out->attribute_indices || !out->values)
		return e->err;
	memcpy(out->attribute_indices, attrs, na * sizeof(*attrs));
	out->n_attribute_indices = na;
	/* One value per sample: Pyroscope rejects more than one when a period is set. */
	out->values[0] = (int64_t)(what == VALUE_COUNT ? s->count
				   : what == VALUE_SUM ? s->value
						       : s->latency);
	out->n_values = 1;
	if (s->first_time_unix_ns && s->first_time_unix_ns >= d->start_unix_ns &&
	    (!d->duration_ns || s->first_time_unix_ns - d->start_unix_ns < d->duration_ns)) {
		out->timestamps_unix_nano = alloc(e, sizeof(*out->timestamps_unix_nano));
		if (!out->timestamps_unix_nano)
			return e->err;
		out->timestamps_unix_nano[0] = s->first_time_unix_ns;
		out->n_timestamps_unix_nano = 1;
	}
	return e->err;
}

static PROF(ValueType) * value_type(struct enc *e, const char *type, const char *unit)
{
	PROF(ValueType) *vt = alloc(e, sizeof(*vt));

	if (!vt)
		return NULL;
	PROF_FN(value_type__init)(vt);
	vt->type_strindex = S(e, type);
	vt->unit_strindex = S(e, unit);
	return vt;
}

/* Whether a sample belongs to a view: off-CPU samples to theirs only. */
static bool in_view(const struct pp_sample_info *s, enum view v)
{
	return v == VIEW_OFF_CPU ? s->wait != 0 : !s->wait && (v != VIEW_LATENCY || s->latency);
}

/*
 * Adds the samples of input profile number pi to the Profiles of their processes, named and
 * valued as profile.h says: for cpu-clock (samples, count) over (cpu, nanoseconds), values the
 * sample counts, which Pyroscope multiplies by the period; for other events (N, count) over
 * (N, count), values the event counts, and with latency (memory events) a second Profile,
 * (latency, cycles) over (N, count), values the latency sums; samples without a latency are
 * left out of that one. Off-CPU samples make a third, (off_cpu, nanoseconds) with no period
 * (Pyroscope's off_cpu, as the OTel eBPF profiler sends it), values the nanoseconds waited.
 */
static int add_profile(struct enc *e, const struct pp_profile *p, size_t pi, enum view view)
{
	const struct pp_profile_desc *d = pp_profile_get_desc(p);
	size_t nsamples = pp_profile_sample_count(p);
	size_t nmaps = pp_profile_mapping_count(p), nlocs = pp_profile_location_count(p);
	size_t slot = VIEWS * pi + view + 1; /* which output Profile of a process, + 1 */
	bool latency = view == VIEW_LATENCY;
	struct xlat x = {.p = p};
	struct res_entry **rof = NULL;
	PROF(ValueType) * st, *pt;
	enum sample_value what;
	char *name;
	int err = 0;

	if (!nsamples || (latency && !pp_profile_total_latency(p)) ||
	    (view == VIEW_OFF_CPU && !pp_profile_off_cpu_waits(p)) ||
	    (view == VIEW_EVENT && !pp_profile_total_count(p)))
		return 0;
	if (view == VIEW_OFF_CPU) {
		what = VALUE_SUM;
		st = value_type(e, "off_cpu", "nanoseconds");
		pt = NULL;
	} else if (pp_profile_is_cpu(d)) {
		what = VALUE_COUNT;
		st = value_type(e, "samples", "count");
		pt = value_type(e, d->value_type, d->value_unit);
	} else {
		name = alloc(e, PP_PROFILE_TYPE_NAME_MAX); /* the string table borrows it */
		if (!name)
			return e->err;
		pp_profile_type_name(d, name, PP_PROFILE_TYPE_NAME_MAX);
		what = latency ? VALUE_LATENCY : VALUE_SUM;
		st = latency ? value_type(e, "latency", "cycles") : value_type(e, name, "count");
		pt = value_type(e, name, "count");
	}
	x.map = malloc((nmaps + 1) * sizeof(*x.map));
	x.loc = malloc((nlocs + 1) * sizeof(*x.loc));
	rof = malloc(nsamples * sizeof(*rof));
	if (!st || (!pt && view != VIEW_OFF_CPU) || !x.map || !x.loc || !rof) {
		err = -ENOMEM;
		goto out;
	}
	memset(x.map, 0xff, (nmaps + 1) * sizeof(*x.map));
	memset(x.loc, 0xff, (nlocs + 1) * sizeof(*x.loc));

	/* First pass: which process each sample belongs to, and how many each has. */
	for (size_t i = 0; i < nsamples; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		struct res_entry *r;

		rof[i] = NULL;
		if (!in_view(s, view))
			continue;
		r = s->resource_id ? res_get_container(e, p, s) : res_get(e, s);
		if (!r) {
			err = e->err ? e->err : -ENOMEM;
			goto out;
		}
		if (r->cur_pi != slot) {
			r->cur_pi = slot;
			r->cur = NULL;
			r->cur_count = 0;
		}
		r->cur_count++;
		rof[i] = r;
	}
	/* Second pass: one Profile per process, its samples in the profile's order. */
	for (size_t i = 0; i < nsamples; i++) {
		struct res_entry *r = rof[i];
		PROF(Profile) * pr;
		PROF(Sample) * s;

		if (!r)
			continue;
		pr = r->cur;
		if (!pr) {
			pr = alloc(e, sizeof(*pr));
			if (!pr)
				break;
			PROF_FN(profile__init)(pr);
			pr->samples = alloc_n(e, r->cur_count, sizeof(*pr->samples));
			if (!pr->samples)
				break;
			pr->sample_type = st;
			pr->period_type = pt;
			pr->period = pt ? (int64_t)pp_profile_period(p) : 0;
			if (view == VIEW_OFF_CPU) {
				/* values are scaled: say by how much (Pyroscope names it by types)
				 */
				pr->attribute_indices = one_index(
				    e, attr_int(e, S(e, PP_ATTR_OFF_CPU_EVERY),
						d->off_cpu_every > 1 ? d->off_cpu_every : 1));
				if (!pr->attribute_indices)
					break;
				pr->n_attribute_indices = 1;
			}
			pr->time_unix_nano = d->start_unix_ns;
			pr->duration_nano = d->duration_ns;
			r->cur = pr;
			r->sp->profiles[r->sp->n_profiles++] = pr;
		}
		s = alloc(e, sizeof(*s));
		if (!s)
			break;
		err = fill_sample(e, &x, d, pp_profile_get_sample(p, i), what, s);
		if (err)
			break;
		pr->samples[pr->n_samples++] = s;
	}
	if (!err)
		err = e->err;
out:
	free(x.map);
	free(x.loc);
	free(rof);
	return err;
}

/* ---- the request ---- */

static void enc_fini(struct enc *e)
{
	pp_arena_fini(&e->ar);
	pp_strtab_fini(&e->strs);
	vec_fini(&e->maps);
	vec_fini(&e->locs);
	vec_fini(&e->funcs);
	vec_fini(&e->attrs);
	vec_fini(&e->stacks);
	vec_fini(&e->res);
	free(e->scratch);
}

/* Index 0 of every table is its zero value, so that index 0 means "unset". */
static int add_zero_entries(struct enc *e)
{
	PROF(Mapping) *m = alloc(e, sizeof(*m));
	PROF(Location) *l = alloc(e, sizeof(*l));
	PROF(Function) *f = alloc(e, sizeof(*f));
	PROF(KeyValueAndUnit) *a = alloc(e, sizeof(*a));
	PROF(Stack) *s = alloc(e, sizeof(*s));
	int err = pp_strtab_init(&e->strs);

	if (err)
		fail(e, err);
	if (!m || !l || !f || !a || !s)
		return e->err;
	PROF_FN(mapping__init)(m);
	PROF_FN(location__init)(l);
	PROF_FN(function__init)(f);
	PROF_FN(key_value_and_unit__init)(a);
	PROF_FN(stack__init)(s);
	/* Not indexed: the interners map zero keys to 0 before any lookup. */
	vec_add(e, &e->maps, m, 0, false);
	vec_add(e, &e->locs, l, 0, false);
	vec_add(e, &e->funcs, f, 0, false);
	vec_add(e, &e->attrs, a, 0, false);
	vec_add(e, &e->stacks, s, 0, false);
	return e->err;
}

int pp_otlp_encode(const struct pp_profile *const *profiles, size_t nprofiles,
		   const struct pp_otlp_resource *res, uint8_t **out, size_t *out_len)
{
	static uint8_t zero_trace[16], zero_span[8];
	SVC(ExportProfilesServiceRequest) req;
	PROF(ProfilesDictionary) dict;
	PROF(Link) link0, *links[1] = {&link0};
	PROF(ResourceProfiles) * *rps;
	struct enc e;
	int err;

	if (!out || !out_len || (nprofiles && !profiles))
		return -EINVAL;
	*out = NULL;
	*out_len = 0;
	memset(&e, 0, sizeof(e));
	e.rdesc = res;
	e.nprofiles = nprofiles;

	err = add_zero_entries(&e);
	if (!err)
		pp_otlp_plan_labels(profiles, nprofiles, res, &e.budget);
	if (!err)
		err = build_common(&e);
	if (err)
		goto out;
	e.a_native = -1;
	e.a_kernel = -1;
	for (size_t i = 0; !e.err && i < nprofiles; i++) {
		if (profiles[i])
			err = add_profile(&e, profiles[i], i, VIEW_EVENT);
		if (!err && profiles[i] && pp_profile_get_desc(profiles[i])->mem_latency)
			err = add_profile(&e, profiles[i], i, VIEW_LATENCY);
		if (!err && profiles[i])
			err = add_profile(&e, profiles[i], i, VIEW_OFF_CPU);
		if (err)
			break;
	}
	if (!err)
		err = e.err;
	if (err)
		goto out;

	rps = alloc_n(&e, e.res.n, sizeof(*rps));
	if (!rps) {
		err = e.err;
		goto out;
	}
	for (uint32_t i = 0; i < e.res.n; i++)
		rps[i] = ((struct res_entry *)e.res.v[i])->rp;

	PROF_FN(link__init)(&link0);
	link0.trace_id = (ProtobufCBinaryData){sizeof(zero_trace), zero_trace};
	link0.span_id = (ProtobufCBinaryData){sizeof(zero_span), zero_span};
	PROF_FN(profiles_dictionary__init)(&dict);
	dict.mapping_table = (PROF(Mapping) **)e.maps.v;
	dict.n_mapping_table = e.maps.n;
	dict.location_table = (PROF(Location) **)e.locs.v;
	dict.n_location_table = e.locs.n;
	dict.function_table = (PROF(Function) **)e.funcs.v;
	dict.n_function_table = e.funcs.n;
	dict.link_table = links;
	dict.n_link_table = 1;
	dict.string_table = (char **)e.strs.strs; /* protobuf-c only reads them */
	dict.n_string_table = e.strs.n;
	dict.attribute_table = (PROF(KeyValueAndUnit) **)e.attrs.v;
	dict.n_attribute_table = e.attrs.n;
	dict.stack_table = (PROF(Stack) **)e.stacks.v;
	dict.n_stack_table = e.stacks.n;

	SVC_FN(export_profiles_service_request__init)(&req);
	req.resource_profiles = rps;
	req.n_resource_profiles = e.res.n;
	req.dictionary = &dict;

	err = pp_pb_pack(&req.base, out, out_len);
out:
	enc_fini(&e);
	return err;
}

int pp_otlp_write_file(const struct pp_profile *const *profiles, size_t nprofiles,
		       const struct pp_otlp_resource *res, const char *path)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int err;

	if (!path)
		return -EINVAL;
	err = pp_otlp_encode(profiles, nprofiles, res, &buf, &len);
	if (err)
		return err;
	err = pp_file_write_bytes(path, buf, len);
	free(buf);
	return err;
}

/* ---- OTEL_RESOURCE_ATTRIBUTES ---- */

#define PP_STR_(x) #x
#define PP_STR(x) PP_STR_(x)

static const char *check_attr_key(const char *k, size_t klen)
{
	(void)k;
	return klen ? NULL : "the key is empty";
}

static void attr_error(char *err, size_t errlen, uint32_t pairno, const char *p, const char *pe,
		       const char *why)
{
	snprintf(err, errlen, "OTEL_RESOURCE_ATTRIBUTES pair %u \"%.*s\": %s", pairno,
		 (int)(pe - p > 80 ? 80 : pe - p), p, why);
}

int pp_otlp_parse_resource_attributes(const char *buf, size_t len, struct pp_label **out,
				      uint32_t *n, char *err, size_t errlen)
{
	static const struct pp_kvlist_rules rules = {
	    .elem_size = sizeof(struct pp_label),
	    .key_off = offsetof(struct pp_label, key),
	    .val_off = offsetof(struct pp_label, value),
	    .max = PP_OTLP_MAX_RESOURCE_ATTRS,
	    .too_many = "more than " PP_STR(PP_OTLP_MAX_RESOURCE_ATTRS) " attributes",
	    .reject_nul = true,
	    .check_key = check_attr_key,
	    .report = attr_error,
	};
	void *labels = NULL;
	int ret;

	if ((!buf && len) || !out || !n)
		return -EINVAL;
	ret = pp_kvlist_parse(buf, len, &rules, &labels, n, err, errlen);
	*out = labels;
	return ret;
}

void pp_otlp_free_attributes(struct pp_label *attrs)
{
	free(attrs);
}
