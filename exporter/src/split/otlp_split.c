/*
 * Splits an OTLP ExportProfilesServiceRequest in two, for the rule "HTTP 413: the request is
 * too large, send it again in halves" (reference/notes/reliability-k8s-deploy.md §A6.5).
 *
 * Each half is unpacked from the original bytes into its own arena, cut down in place (half
 * of the ResourceProfiles, or half of the samples of the only one), and its dictionary is
 * garbage-collected: the entries nothing in the half refers to are removed and every index
 * is renumbered. Pruning is what makes the halves smaller at all when the dictionary is most
 * of the bytes (one process, many stacks), and it keeps them free of orphaned entries, which
 * reference/notes/otlp.md §2.1 says SHOULD NOT exist. Index 0 of every table stays where it
 * is, so each half follows the same §8 rules the original did.
 */
#include <pebsprof/otlp.h>
#include <pebsprof/transport.h>

#include "base/arena.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "encode/pbpack.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define COMMON(x) Opentelemetry__Proto__Common__V1__##x
#define VALUE_CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define SVC(x) Opentelemetry__Proto__Collector__Profiles__V1development__##x
#define SVC_FN(x) opentelemetry__proto__collector__profiles__v1development__##x

/* AnyValue nests (arrays, kvlists); deeper than this is refused rather than recursed into. */
#define MAX_VALUE_DEPTH 32

/* ---- garbage collection of the dictionary ---- */

enum table { T_MAPPING, T_LOCATION, T_FUNCTION, T_LINK, T_STRING, T_ATTRIBUTE, T_STACK, T__N };

/*
 * One walker serves both passes: while marking, map[t][i] becomes 1 for each entry referred
 * to; while renumbering, each index is replaced by map[t][i], its position after compaction.
 */
struct gc {
	size_t n[T__N];
	int32_t *map[T__N];
	bool renumber;
	int err;
};

static void ref(struct gc *g, enum table t, int32_t *idx)
{
	if (*idx == 0) /* the zero value, "unset": kept at 0 in every half */
		return;
	if (*idx < 0 || (size_t)*idx >= g->n[t]) {
		g->err = -EINVAL;
		return;
	}
	if (g->renumber)
		*idx = g->map[t][*idx];
	else
		g->map[t][*idx] = 1;
}

static void ref_list(struct gc *g, enum table t, int32_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ref(g, t, &idx[i]);
}

static void walk_keyvalue(struct gc *g, COMMON(KeyValue) * kv, int depth);

static void walk_anyvalue(struct gc *g, COMMON(AnyValue) * v, int depth)
{
	if (!v)
		return;
	if (depth > MAX_VALUE_DEPTH) {
		g->err = -EINVAL;
		return;
	}
	switch (v->value_case) {
	case VALUE_CASE(STRING_VALUE_STRINDEX):
		ref(g, T_STRING, &v->string_value_strindex);
		break;
	case VALUE_CASE(ARRAY_VALUE):
		for (size_t i = 0; v->array_value && i < v->array_value->n_values; i++)
			walk_anyvalue(g, v->array_value->values[i], depth + 1);
		break;
	case VALUE_CASE(KVLIST_VALUE):
		for (size_t i = 0; v->kvlist_value && i < v->kvlist_value->n_values; i++)
			walk_keyvalue(g, v->kvlist_value->values[i], depth + 1);
		break;
	default:
		break;
	}
}

static void walk_keyvalue(struct gc *g, COMMON(KeyValue) * kv, int depth)
{
	ref(g, T_STRING, &kv->key_strindex);
	walk_anyvalue(g, kv->value, depth);
}

static void walk_value_type(struct gc *g, PROF(ValueType) * vt)
{
	if (!vt)
		return;
	ref(g, T_STRING, &vt->type_strindex);
	ref(g, T_STRING, &vt->unit_strindex);
}

/* What the request's messages refer to outside the dictionary. */
static void walk_roots(struct gc *g, SVC(ExportProfilesServiceRequest) * req)
{
	for (size_t r = 0; r < req->n_resource_profiles; r++) {
		PROF(ResourceProfiles) *rp = req->resource_profiles[r];

		for (size_t i = 0; rp->resource && i < rp->resource->n_attributes; i++)
			walk_keyvalue(g, rp->resource->attributes[i], 0);
		for (size_t s = 0; s < rp->n_scope_profiles; s++) {
			PROF(ScopeProfiles) *sp = rp->scope_profiles[s];

			for (size_t i = 0; sp->scope && i < sp->scope->n_attributes; i++)
				walk_keyvalue(g, sp->scope->attributes[i], 0);
			for (size_t p = 0; p < sp->n_profiles; p++) {
				PROF(Profile) *pr = sp->profiles[p];

				walk_value_type(g, pr->sample_type);
				walk_value_type(g, pr->period_type);
				ref_list(g, T_ATTRIBUTE, pr->attribute_indices,
					 pr->n_attribute_indices);
				for (size_t i = 0; i < pr->n_samples; i++) {
					PROF(Sample) *sm = pr->samples[i];

					ref(g, T_STACK, &sm->stack_index);
					ref(g, T_LINK, &sm->link_index);
					ref_list(g, T_ATTRIBUTE, sm->attribute_indices,
						 sm->n_attribute_indices);
				}
			}
		}
	}
}

/*
 * The dictionary's references to itself. Tables only point at tables later in this order
 * (stack -> location -> mapping, function -> attribute -> string), so one pass over them in
 * this order marks the whole closure.
 */
static void walk_stack(struct gc *g, PROF(Stack) * s)
{
	ref_list(g, T_LOCATION, s->location_indices, s->n_location_indices);
}

static void walk_location(struct gc *g, PROF(Location) * l)
{
	ref(g, T_MAPPING, &l->mapping_index);
	for (size_t i = 0; i < l->n_lines; i++)
		ref(g, T_FUNCTION, &l->lines[i]->function_index);
	ref_list(g, T_ATTRIBUTE, l->attribute_indices, l->n_attribute_indices);
}

static void walk_mapping(struct gc *g, PROF(Mapping) * m)
{
	ref(g, T_STRING, &m->filename_strindex);
	ref_list(g, T_ATTRIBUTE, m->attribute_indices, m->n_attribute_indices);
}

static void walk_function(struct gc *g, PROF(Function) * f)
{
	ref(g, T_STRING, &f->name_strindex);
	ref(g, T_STRING, &f->system_name_strindex);
	ref(g, T_STRING, &f->filename_strindex);
}

static void walk_attribute(struct gc *g, PROF(KeyValueAndUnit) * a)
{
	ref(g, T_STRING, &a->key_strindex);
	ref(g, T_STRING, &a->unit_strindex);
	walk_anyvalue(g, a->value, 0);
}

static void walk_dictionary(struct gc *g, PROF(ProfilesDictionary) * d)
{
	/* marking visits only what is marked; renumbering, what is left after compaction */
#define KEPT(t, i) (g->renumber || g->map[t][i])
	for (size_t i = 0; i < d->n_stack_table; i++)
		if (KEPT(T_STACK, i))
			walk_stack(g, d->stack_table[i]);
	for (size_t i = 0; i < d->n_location_table; i++)
		if (KEPT(T_LOCATION, i))
			walk_location(g, d->location_table[i]);
	for (size_t i = 0; i < d->n_mapping_table; i++)
		if (KEPT(T_MAPPING, i))
			walk_mapping(g, d->mapping_table[i]);
	for (size_t i = 0; i < d->n_function_table; i++)
		if (KEPT(T_FUNCTION, i))
			walk_function(g, d->function_table[i]);
	for (size_t i = 0; i < d->n_attribute_table; i++)
		if (KEPT(T_ATTRIBUTE, i))
			walk_attribute(g, d->attribute_table[i]);
#undef KEPT
}

/*
 * Keeps the marked entries of one table, in order; map[i] becomes the new position. A macro
 * because each table has its own element type.
 */
#define COMPACT(g, t, table, n)                                                                    \
	do {                                                                                       \
		size_t k_ = 0;                                                                     \
		for (size_t i_ = 0; i_ < (n); i_++) {                                              \
			if (!(g)->map[t][i_])                                                      \
				continue;                                                          \
			(table)[k_] = (table)[i_];                                                 \
			(g)->map[t][i_] = (int32_t)k_++;                                           \
		}                                                                                  \
		(n) = k_;                                                                          \
	} while (0)

static int prune_dictionary(struct pp_arena *a, SVC(ExportProfilesServiceRequest) * req)
{
	PROF(ProfilesDictionary) *d = req->dictionary;
	struct gc g = {0};

	if (!d)
		return 0; /* nothing to prune; the half is as valid as the request was */
	g.n[T_MAPPING] = d->n_mapping_table;
	g.n[T_LOCATION] = d->n_location_table;
	g.n[T_FUNCTION] = d->n_function_table;
	g.n[T_LINK] = d->n_link_table;
	g.n[T_STRING] = d->n_string_table;
	g.n[T_ATTRIBUTE] = d->n_attribute_table;
	g.n[T_STACK] = d->n_stack_table;
	for (int t = 0; t < T__N; t++) {
		if (g.n[t] > INT32_MAX)
			return -EINVAL;
		g.map[t] = pp_arena_alloc(a, (g.n[t] ? g.n[t] : 1) * sizeof(int32_t));
		if (!g.map[t])
			return -ENOMEM;
		memset(g.map[t], 0, g.n[t] * sizeof(int32_t));
		if (g.n[t])
			g.map[t][0] = 1; /* index 0 holds the zero value in every half */
	}
	walk_roots(&g, req);
	walk_dictionary(&g, d);
	if (g.err)
		return g.err;
	COMPACT(&g, T_MAPPING, d->mapping_table, d->n_mapping_table);
	COMPACT(&g, T_LOCATION, d->location_table, d->n_location_table);
	COMPACT(&g, T_FUNCTION, d->function_table, d->n_function_table);
	COMPACT(&g, T_LINK, d->link_table, d->n_link_table);
	COMPACT(&g, T_STRING, d->string_table, d->n_string_table);
	COMPACT(&g, T_ATTRIBUTE, d->attribute_table, d->n_attribute_table);
	COMPACT(&g, T_STACK, d->stack_table, d->n_stack_table);
	g.renumber = true;
	walk_roots(&g, req);
	walk_dictionary(&g, d);
	return g.err;
}

/* ---- choosing the halves ---- */

struct plan {
	bool by_resource; /* else: the samples of the only ResourceProfiles */
	size_t cut;	  /* resources, or samples in walk order, in the first half */
	size_t total;
};

static size_t samples_of(const PROF(ResourceProfiles) * rp)
{
	size_t n = 0;

	for (size_t s = 0; s < rp->n_scope_profiles; s++)
		for (size_t p = 0; p < rp->scope_profiles[s]->n_profiles; p++)
			n += rp->scope_profiles[s]->profiles[p]->n_samples;
	return n;
}

/*
 * Keeps samples [lo, hi) of the walk order. A profile left without samples goes (it had
 * some, and they are in the other half); one that had none from the start stays in the first
 * half only, so nothing is sent twice. Scopes are treated alike.
 */
static void keep_samples(PROF(ResourceProfiles) * rp, size_t lo, size_t hi, bool first)
{
	size_t base = 0, ns = 0;

	for (size_t s = 0; s < rp->n_scope_profiles; s++) {
		PROF(ScopeProfiles) *sp = rp->scope_profiles[s];
		size_t np = 0, had = sp->n_profiles;

		for (size_t p = 0; p < sp->n_profiles; p++) {
			PROF(Profile) *pr = sp->profiles[p];
			size_t n = pr->n_samples;
			size_t from = lo > base ? lo : base, to = hi < base + n ? hi : base + n;
			bool keep;

			if (!n) {
				keep = first;
			} else if (to > from) {
				pr->samples += from - base;
				pr->n_samples = to - from;
				keep = true;
			} else {
				keep = false;
			}
			base += n;
			if (keep)
				sp->profiles[np++] = pr;
		}
		sp->n_profiles = np;
		if (np || (!had && first))
			rp->scope_profiles[ns++] = sp;
	}
	rp->n_scope_profiles = ns;
}

static int make_half(const uint8_t *buf, size_t len, const struct plan *pl, bool first,
		     uint8_t **out, size_t *out_len)
{
	struct pp_arena a = {0};
	ProtobufCAllocator alloc = pp_arena_pb_allocator(&a);
	SVC(ExportProfilesServiceRequest) * req;
	int ret;

	req = SVC_FN(export_profiles_service_request__unpack)(&alloc, len, buf);
	if (!req) {
		ret = a.failed ? -ENOMEM : -EINVAL;
		pp_arena_fini(&a);
		return ret;
	}
	if (pl->by_resource) {
		/* the arena outlives the pack, so the array may be cut from either end */
		if (first) {
			req->n_resource_profiles = pl->cut;
		} else {
			req->resource_profiles += pl->cut;
			req->n_resource_profiles -= pl->cut;
		}
	} else if (first) {
		keep_samples(req->resource_profiles[0], 0, pl->cut, true);
	} else {
		keep_samples(req->resource_profiles[0], pl->cut, pl->total, false);
	}
	ret = prune_dictionary(&a, req);
	if (!ret)
		ret = pp_pb_pack(&req->base, out, out_len);
	pp_arena_fini(&a);
	return ret;
}

int pp_otlp_split_request(const uint8_t *buf, size_t len, uint8_t **first, size_t *first_len,
			  uint8_t **second, size_t *second_len)
{
	struct pp_arena a = {0};
	ProtobufCAllocator alloc = pp_arena_pb_allocator(&a);
	SVC(ExportProfilesServiceRequest) * req;
	struct plan pl = {0};
	size_t second_part;
	int ret;

	if (!buf || !first || !first_len || !second || !second_len)
		return -EINVAL;
	*first = *second = NULL;
	*first_len = *second_len = 0;
	req = SVC_FN(export_profiles_service_request__unpack)(&alloc, len, buf);
	if (!req) {
		ret = a.failed ? -ENOMEM : -EINVAL;
		pp_arena_fini(&a);
		return ret;
	}
	if (req->n_resource_profiles >= 2) {
		pl.by_resource = true;
		pl.total = req->n_resource_profiles;
	} else if (req->n_resource_profiles == 1) {
		pl.total = samples_of(req->resource_profiles[0]);
	}
	pp_arena_fini(&a);
	/* one resource with one sample, or nothing at all: there is no smaller request */
	if (pp_send_split(pl.total, &pl.cut, &second_part))
		return -E2BIG;
	ret = make_half(buf, len, &pl, true, first, first_len);
	if (!ret)
		ret = make_half(buf, len, &pl, false, second, second_len);
	if (ret) {
		free(*first);
		*first = NULL;
		*first_len = 0;
	}
	return ret;
}
