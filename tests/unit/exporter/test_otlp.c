/*
 * The OTLP profiles encoder: known profiles (two processes sharing a library, kernel frames,
 * labels, a hardware-event profile) are encoded, unpacked with protobuf-c, and checked
 * against the rules of reference/notes/otlp.md §8: one dictionary, zero values at index 0,
 * every index in range, nothing duplicated, inline resource attributes, sample and period
 * types, one value per sample, attributes on samples, mappings and locations. Also the
 * OTEL_RESOURCE_ATTRIBUTES parser.
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>

#include "check.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define COMMON(x) Opentelemetry__Proto__Common__V1__##x
#define VALUE_CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define REQ Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
#define REQ_FN(x) opentelemetry__proto__collector__profiles__v1development__##x

#define T0 UINT64_C(1767225600000000000) /* 2026-01-01T00:00:00Z */
#define BID_APP "0123456789abcdef0123456789abcdef01234567"
#define BID_LIBC "c89b11207f6479603b0d49bf291c092c2b719293"

/* ---- the known profiles ---- */

struct known {
	struct pp_profile *cpu, *cycles;
};

static uint32_t loc(struct pp_profile *p, uint32_t map, uint64_t addr, const char *fn,
		    enum pp_frame_kind kind)
{
	struct pp_location_info l = {
	    .mapping_id = map, .address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

static int add(struct pp_profile *p, const uint32_t *locs, uint32_t n, uint32_t pid, uint32_t tid,
	       const char *proc, const struct pp_label *labels, uint32_t nlabels, uint64_t count,
	       uint64_t t)
{
	struct pp_sample_info s = {
	    .locations = locs,
	    .nlocations = n,
	    .pid = pid,
	    .tid = tid,
	    .thread_name = "worker",
	    .process_name = proc,
	    .labels = labels,
	    .nlabels = nlabels,
	    .count = count,
	    .value = count * 1000000,
	    .first_time_unix_ns = t,
	};

	return pp_profile_add_sample(p, &s);
}

/*
 * cpu-clock, 1 ms, window [T0, T0+1s):
 *   app (pid 100): main -> a -> memcpy (libc)           40  tid 101, label service=checkout
 *                  main -> [app] (placeholder)           5   tid 101, first time outside window
 *                  main -> a -> do_syscall_64 (kernel)   15  tid 102
 *   db  (pid 200): main -> memcpy (libc, same address)   30  tid 201, labels thread.name=x
 *                                                             (clashes) and zone=eu
 * cycles, period 100000 (own window), app only: main -> a  7
 */
static int make_known(struct known *k)
{
	struct pp_profile_desc dc = {.event = "cpu-clock",
				     .value_type = "cpu",
				     .value_unit = "nanoseconds",
				     .period = 1000000,
				     .start_unix_ns = T0,
				     .duration_ns = 1000000000};
	struct pp_profile_desc dy = {.event = "cycles",
				     .value_type = "cycles",
				     .value_unit = "count",
				     .period = 100000,
				     .start_unix_ns = T0 + 5,
				     .duration_ns = 2000000000};
	/* PIE text at ELF 0x1000, libc's at 0x28000: the load biases the maps give */
	struct pp_mapping_info app = {0x555555554000, 0x555555600000, 0x1000,
				      "/usr/bin/app", BID_APP,	      0x555555553000};
	struct pp_mapping_info db = {0x555555554000, 0x555555600000, 0x1000, "/usr/bin/db", "",
				     0x555555553000};
	struct pp_mapping_info libc = {0x7ffff7dc0000, 0x7ffff7f50000,
				       0x28000,	       "/usr/lib/x86_64-linux-gnu/libc.so.6",
				       BID_LIBC,       0x7ffff7d98000};
	struct pp_mapping_info kern = {0, UINT64_MAX, 0, "[kernel.kallsyms]", "", 0};
	struct pp_label l1[] = {{"service", "checkout"}};
	struct pp_label l2[] = {{"thread.name", "x"}, {"zone", "eu"}};
	struct pp_profile *p;
	uint32_t m_app, m_db, m_libc, m_kern, main_app, a, memcpy1, ph, ks, main_db, memcpy2;

	k->cpu = p = pp_profile_new(&dc);
	k->cycles = pp_profile_new(&dy);
	if (!p || !k->cycles)
		return -1;
	/* Interned in an order unlike the cycles profile's, so ids differ between them. */
	m_kern = pp_profile_intern_mapping(p, &kern);
	m_app = pp_profile_intern_mapping(p, &app);
	m_libc = pp_profile_intern_mapping(p, &libc);
	m_db = pp_profile_intern_mapping(p, &db);
	main_app = loc(p, m_app, 0x1140, "main", PP_FRAME_NATIVE);
	a = loc(p, m_app, 0x1200, "a", PP_FRAME_NATIVE);
	memcpy1 = loc(p, m_libc, 0x9a0f0, "memcpy", PP_FRAME_NATIVE);
	ph = loc(p, m_app, 0x1300, "[app]", PP_FRAME_NATIVE);
	ks = loc(p, m_kern, 0xffffffff81000100ULL, "do_syscall_64", PP_FRAME_KERNEL);
	main_db = loc(p, m_db, 0x1140, "main", PP_FRAME_NATIVE);
	memcpy2 = memcpy1; /* same library, same address: one location for both processes */
	{
		uint32_t s1[] = {memcpy1, a, main_app}, s2[] = {ph, main_app},
			 s3[] = {ks, a, main_app}, s4[] = {memcpy2, main_db};

		if (add(p, s1, 3, 100, 101, "app", l1, 1, 40, T0 + 10) ||
		    add(p, s2, 2, 100, 101, "app", NULL, 0, 5, T0 + 2000000000) ||
		    add(p, s3, 3, 100, 102, "app", NULL, 0, 15, T0 + 20) ||
		    add(p, s4, 2, 200, 201, "db", l2, 2, 30, T0 + 30))
			return -1;
	}
	p = k->cycles;
	m_app = pp_profile_intern_mapping(p, &app);
	a = loc(p, m_app, 0x1200, "a", PP_FRAME_NATIVE);
	main_app = loc(p, m_app, 0x1140, "main", PP_FRAME_NATIVE);
	{
		uint32_t s1[] = {a, main_app};

		if (add(p, s1, 2, 100, 101, "app", NULL, 0, 7, T0 + 100))
			return -1;
	}
	return 0;
}

static void free_known(struct known *k)
{
	pp_profile_free(k->cpu);
	pp_profile_free(k->cycles);
}

static REQ *encode(const struct pp_profile *const *profs, size_t n,
		   const struct pp_otlp_resource *res)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	REQ *req;
	int err = pp_otlp_encode(profs, n, res, &buf, &len);

	if (err) {
		fprintf(stderr, "  pp_otlp_encode: %s\n", strerror(-err));
		return NULL;
	}
	req = REQ_FN(export_profiles_service_request__unpack)(NULL, len, buf);
	free(buf);
	return req;
}

static void req_free(REQ *r)
{
	if (r)
		REQ_FN(export_profiles_service_request__free_unpacked)(r, NULL);
}

/* ---- lookups ---- */

static const char *str(const PROF(ProfilesDictionary) * d, int32_t i)
{
	return i >= 0 && (size_t)i < d->n_string_table ? d->string_table[i] : NULL;
}

/* The attribute among idx[0..n) whose key is key, or NULL. */
static const PROF(KeyValueAndUnit) *
    find_attr(const PROF(ProfilesDictionary) * d, const int32_t *idx, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const PROF(KeyValueAndUnit) * a;

		if (idx[i] <= 0 || (size_t)idx[i] >= d->n_attribute_table)
			return NULL;
		a = d->attribute_table[idx[i]];
		if (str(d, a->key_strindex) && strcmp(str(d, a->key_strindex), key) == 0)
			return a;
	}
	return NULL;
}

static const char *attr_sval(const PROF(KeyValueAndUnit) * a)
{
	return a && a->value && a->value->value_case == VALUE_CASE(STRING_VALUE)
		   ? a->value->string_value
		   : NULL;
}

static const COMMON(AnyValue) * res_attr(const PROF(ResourceProfiles) * rp, const char *key)
{
	const COMMON(AnyValue) *v = NULL;
	int seen = 0;

	for (size_t i = 0; rp->resource && i < rp->resource->n_attributes; i++) {
		const COMMON(KeyValue) *kv = rp->resource->attributes[i];

		if (strcmp(kv->key, key) == 0) {
			v = kv->value;
			seen++;
		}
	}
	return seen == 1 ? v : NULL; /* keys must be unique */
}

static const char *res_str(const PROF(ResourceProfiles) * rp, const char *key)
{
	const COMMON(AnyValue) *v = res_attr(rp, key);

	return v && v->value_case == VALUE_CASE(STRING_VALUE) ? v->string_value : NULL;
}

static const PROF(ResourceProfiles) * res_by_pid(const REQ *r, int64_t pid)
{
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const COMMON(AnyValue) *v = res_attr(r->resource_profiles[i], "process.pid");

		if (v && v->value_case == VALUE_CASE(INT_VALUE) && v->int_value == pid)
			return r->resource_profiles[i];
	}
	return NULL;
}

static int32_t func_by_name(const PROF(ProfilesDictionary) * d, const char *name, int *count)
{
	int32_t r = -1;

	*count = 0;
	for (size_t i = 1; i < d->n_function_table; i++) {
		const char *s = str(d, d->function_table[i]->name_strindex);

		if (s && strcmp(s, name) == 0) {
			r = (int32_t)i;
			(*count)++;
		}
	}
	return r;
}

/* The function name of a location's single line, or NULL when it has no line. */
static const char *loc_fn(const PROF(ProfilesDictionary) * d, const PROF(Location) * l)
{
	if (l->n_lines != 1)
		return NULL;
	return str(d, d->function_table[l->lines[0]->function_index]->name_strindex);
}

/*
 * The structural rules every request must keep, whatever it holds: returns the number of
 * violations (each printed).
 */
#define RULE(cond, ...)                                                                            \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  rule broken: " __VA_ARGS__);                            \
			fputc('\n', stderr);                                                       \
			bad++;                                                                     \
		}                                                                                  \
	} while (0)
#define IN(i, n) ((i) >= 0 && (size_t)(i) < (n))

static int check_rules(const REQ *r)
{
	const PROF(ProfilesDictionary) *d = r->dictionary;
	int bad = 0;

	if (!d) {
		fprintf(stderr, "  rule broken: no dictionary\n");
		return 1;
	}
	/* Index 0: the zero value of every table. */
	RULE(d->n_string_table > 0 && d->string_table[0][0] == '\0', "string_table[0] != \"\"");
	RULE(d->n_mapping_table > 0 && !d->mapping_table[0]->memory_start &&
		 !d->mapping_table[0]->memory_limit && !d->mapping_table[0]->file_offset &&
		 !d->mapping_table[0]->filename_strindex &&
		 !d->mapping_table[0]->n_attribute_indices,
	     "mapping_table[0] not zero");
	RULE(d->n_location_table > 0 && !d->location_table[0]->mapping_index &&
		 !d->location_table[0]->address && !d->location_table[0]->n_lines &&
		 !d->location_table[0]->n_attribute_indices,
	     "location_table[0] not zero");
	RULE(d->n_function_table > 0 && !d->function_table[0]->name_strindex &&
		 !d->function_table[0]->system_name_strindex &&
		 !d->function_table[0]->filename_strindex && !d->function_table[0]->start_line,
	     "function_table[0] not zero");
	RULE(d->n_link_table > 0 && d->link_table[0]->trace_id.len == 16 &&
		 d->link_table[0]->span_id.len == 8,
	     "link_table[0] not 16+8 bytes");
	if (d->n_link_table > 0 && d->link_table[0]->trace_id.len == 16 &&
	    d->link_table[0]->span_id.len == 8) {
		static const uint8_t z[16];

		RULE(!memcmp(d->link_table[0]->trace_id.data, z, 16) &&
			 !memcmp(d->link_table[0]->span_id.data, z, 8),
		     "link_table[0] not zero bytes");
	}
	RULE(d->n_attribute_table > 0 && !d->attribute_table[0]->key_strindex &&
		 !d->attribute_table[0]->value && !d->attribute_table[0]->unit_strindex,
	     "attribute_table[0] not zero");
	RULE(d->n_stack_table > 0 && !d->stack_table[0]->n_location_indices,
	     "stack_table[0] not empty");

	/* No duplicates. */
	for (size_t i = 0; i < d->n_string_table; i++)
		for (size_t j = i + 1; j < d->n_string_table; j++)
			RULE(strcmp(d->string_table[i], d->string_table[j]) != 0,
			     "string \"%s\" at %zu and %zu", d->string_table[i], i, j);
	for (size_t i = 1; i < d->n_function_table; i++)
		for (size_t j = i + 1; j < d->n_function_table; j++)
			RULE(d->function_table[i]->name_strindex !=
				 d->function_table[j]->name_strindex,
			     "function %zu and %zu equal", i, j);
	for (size_t i = 1; i < d->n_stack_table; i++) {
		const PROF(Stack) *a = d->stack_table[i];

		RULE(a->n_location_indices > 0, "stack %zu empty", i);
		for (size_t j = i + 1; j < d->n_stack_table; j++) {
			const PROF(Stack) *b = d->stack_table[j];

			RULE(a->n_location_indices != b->n_location_indices ||
				 memcmp(a->location_indices, b->location_indices,
					a->n_location_indices * sizeof(int32_t)),
			     "stack %zu and %zu equal", i, j);
		}
		for (size_t k = 0; k < a->n_location_indices; k++)
			RULE(IN(a->location_indices[k], d->n_location_table) &&
				 a->location_indices[k] > 0,
			     "stack %zu location index %d", i, a->location_indices[k]);
	}
	for (size_t i = 1; i < d->n_attribute_table; i++) {
		const PROF(KeyValueAndUnit) *a = d->attribute_table[i];

		RULE(IN(a->key_strindex, d->n_string_table) && a->key_strindex > 0,
		     "attribute %zu key", i);
		RULE(a->value && (a->value->value_case == VALUE_CASE(STRING_VALUE) ||
				  a->value->value_case == VALUE_CASE(INT_VALUE)),
		     "attribute %zu value not inline string/int", i);
		for (size_t j = i + 1; j < d->n_attribute_table; j++) {
			const PROF(KeyValueAndUnit) *b = d->attribute_table[j];

			if (a->key_strindex != b->key_strindex || !a->value || !b->value ||
			    a->value->value_case != b->value->value_case)
				continue;
			RULE(a->value->value_case == VALUE_CASE(INT_VALUE)
				 ? a->value->int_value != b->value->int_value
				 : strcmp(a->value->string_value, b->value->string_value) != 0,
			     "attribute %zu and %zu equal", i, j);
		}
	}
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		const PROF(Mapping) *m = d->mapping_table[i];

		RULE(IN(m->filename_strindex, d->n_string_table), "mapping %zu filename", i);
		for (size_t k = 0; k < m->n_attribute_indices; k++)
			RULE(IN(m->attribute_indices[k], d->n_attribute_table) &&
				 m->attribute_indices[k] > 0,
			     "mapping %zu attribute", i);
		for (size_t j = i + 1; j < d->n_mapping_table; j++) {
			const PROF(Mapping) *o = d->mapping_table[j];

			RULE(m->memory_start != o->memory_start ||
				 m->memory_limit != o->memory_limit ||
				 m->file_offset != o->file_offset ||
				 m->filename_strindex != o->filename_strindex ||
				 m->n_attribute_indices != o->n_attribute_indices,
			     "mapping %zu and %zu equal", i, j);
		}
	}
	for (size_t i = 1; i < d->n_location_table; i++) {
		const PROF(Location) *l = d->location_table[i];

		RULE(IN(l->mapping_index, d->n_mapping_table), "location %zu mapping", i);
		for (size_t k = 0; k < l->n_lines; k++)
			RULE(IN(l->lines[k]->function_index, d->n_function_table) &&
				 l->lines[k]->function_index > 0,
			     "location %zu function", i);
		for (size_t k = 0; k < l->n_attribute_indices; k++)
			RULE(IN(l->attribute_indices[k], d->n_attribute_table) &&
				 l->attribute_indices[k] > 0,
			     "location %zu attribute", i);
		for (size_t j = i + 1; j < d->n_location_table; j++) {
			const PROF(Location) *o = d->location_table[j];

			RULE(l->address != o->address || l->mapping_index != o->mapping_index ||
				 l->n_lines != o->n_lines ||
				 (l->n_lines &&
				  l->lines[0]->function_index != o->lines[0]->function_index) ||
				 l->n_attribute_indices != o->n_attribute_indices ||
				 (l->n_attribute_indices &&
				  l->attribute_indices[0] != o->attribute_indices[0]),
			     "location %zu and %zu equal", i, j);
		}
	}
	for (size_t i = 1; i < d->n_function_table; i++) {
		const PROF(Function) *f = d->function_table[i];

		RULE(IN(f->name_strindex, d->n_string_table) && f->name_strindex > 0,
		     "function %zu name", i);
		RULE(IN(f->system_name_strindex, d->n_string_table) &&
			 IN(f->filename_strindex, d->n_string_table),
		     "function %zu strings", i);
	}

	/* Resources: inline attributes with service.name; profiles and samples in range. */
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const PROF(ResourceProfiles) *rp = r->resource_profiles[i];

		RULE(rp->resource != NULL, "resource %zu missing", i);
		if (!rp->resource)
			continue;
		for (size_t k = 0; k < rp->resource->n_attributes; k++) {
			const COMMON(KeyValue) *kv = rp->resource->attributes[k];

			RULE(kv->key[0] && kv->key_strindex == 0, "resource %zu: key not inline",
			     i);
			RULE(kv->value &&
				 kv->value->value_case != VALUE_CASE(STRING_VALUE_STRINDEX),
			     "resource %zu: value of %s not inline", i, kv->key);
		}
		RULE(res_str(rp, "service.name") && res_str(rp, "service.name")[0],
		     "resource %zu: no service.name", i);
		for (size_t s = 0; s < rp->n_scope_profiles; s++) {
			const PROF(ScopeProfiles) *sp = rp->scope_profiles[s];

			for (size_t p = 0; p < sp->n_profiles; p++) {
				const PROF(Profile) *pr = sp->profiles[p];

				/* off-CPU time has no period: Pyroscope names it off_cpu */
				RULE(pr->sample_type &&
					 (pr->period_type ||
					  strcmp(str(d, pr->sample_type->type_strindex),
						 "off_cpu") == 0),
				     "profile without types");
				RULE(pr->n_samples > 0, "profile without samples");
				for (size_t k = 0; k < pr->n_samples; k++) {
					const PROF(Sample) *sm = pr->samples[k];

					RULE(sm->n_values == 1, "sample with %zu values",
					     sm->n_values);
					RULE(sm->n_timestamps_unix_nano <= 1, "sample timestamps");
					RULE(IN(sm->stack_index, d->n_stack_table),
					     "sample stack index");
					RULE(IN(sm->link_index, d->n_link_table),
					     "sample link index");
					for (size_t a = 0; a < sm->n_attribute_indices; a++)
						RULE(IN(sm->attribute_indices[a],
							d->n_attribute_table) &&
							 sm->attribute_indices[a] > 0,
						     "sample attribute index");
					for (size_t a = 0; a < sm->n_attribute_indices; a++)
						for (size_t b = a + 1; b < sm->n_attribute_indices;
						     b++)
							RULE(d->attribute_table
								     [sm->attribute_indices[a]]
									 ->key_strindex !=
								 d->attribute_table
								     [sm->attribute_indices[b]]
									 ->key_strindex,
							     "sample attribute keys repeat");
				}
			}
		}
	}
	return bad;
}

/* ---- tests ---- */

static const struct pp_label extras[] = {
    {"deployment.environment.name", "prod"},
    {"process.pid", "999"}, /* never replaces the real pid */
    {"host.name", "override-host"},
};

TEST(known_profiles_follow_rules)
{
	struct known k = {0};
	struct pp_otlp_resource res = {.service_name = "checkout-svc",
				       .host_name = "host-1",
				       .node_name = "node-a",
				       .scope_version = "0.1.0"};
	const struct pp_profile *profs[2];
	const PROF(ProfilesDictionary) * d;
	const PROF(ResourceProfiles) * app, *db;
	REQ *r;

	REQUIRE(make_known(&k) == 0);
	profs[0] = k.cpu;
	profs[1] = k.cycles;
	r = encode(profs, 2, &res);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	d = r->dictionary;
	CHECK_EQ_U64(r->n_resource_profiles, 2);
	app = res_by_pid(r, 100);
	db = res_by_pid(r, 200);
	REQUIRE(app && db);
	CHECK(app == r->resource_profiles[0]); /* first seen first */
	CHECK_STR(res_str(app, "service.name"), "checkout-svc");
	CHECK_STR(res_str(db, "service.name"), "checkout-svc");
	CHECK_STR(res_str(app, "host.name"), "host-1");
	CHECK_STR(res_str(app, "k8s.node.name"), "node-a");
	CHECK_STR(res_str(app, "process.executable.name"), "app");
	CHECK_STR(res_str(db, "process.executable.name"), "db");
	REQUIRE(app->n_scope_profiles == 1 && db->n_scope_profiles == 1);
	CHECK_STR(app->scope_profiles[0]->scope->name, "pebsprof");
	CHECK_STR(app->scope_profiles[0]->scope->version, "0.1.0");
	CHECK_EQ_U64(app->scope_profiles[0]->n_profiles, 2);
	CHECK_EQ_U64(db->scope_profiles[0]->n_profiles, 1);
	/* Both processes share one dictionary: the libc memcpy location and function once. */
	{
		int n;
		int32_t fmemcpy = func_by_name(d, "memcpy", &n), fmain;
		int32_t lmemcpy = -1;
		size_t nmemcpy_locs = 0;

		CHECK(fmemcpy > 0 && n == 1);
		fmain = func_by_name(d, "main", &n);
		CHECK(fmain > 0 && n == 1); /* "main" of app and of db: one Function */
		for (size_t i = 1; i < d->n_location_table; i++) {
			if (d->location_table[i]->n_lines &&
			    d->location_table[i]->lines[0]->function_index == fmemcpy) {
				lmemcpy = (int32_t)i;
				nmemcpy_locs++;
			}
		}
		CHECK_EQ_U64(nmemcpy_locs, 1);
		REQUIRE(lmemcpy > 0);
		CHECK_EQ_U64(d->location_table[lmemcpy]->address, 0x9a0f0);
		/* The leaf of db's only stack is that same location. */
		{
			const PROF(Profile) *pr = db->scope_profiles[0]->profiles[0];
			const PROF(Stack) * st;

			REQUIRE(pr->n_samples == 1);
			st = d->stack_table[pr->samples[0]->stack_index];
			REQUIRE(st->n_location_indices == 2);
			CHECK_EQ_U64(st->location_indices[0], lmemcpy);
			CHECK_STR(loc_fn(d, d->location_table[st->location_indices[1]]), "main");
		}
	}
	/* Locations: 6 in the cpu profile (the cycles one adds none), plus the zero entry. */
	CHECK_EQ_U64(d->n_location_table, 7);
	/* Mappings: app, libc, db, kernel, plus the zero entry; cycles' app mapping is app's. */
	CHECK_EQ_U64(d->n_mapping_table, 5);
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		const PROF(Mapping) *m = d->mapping_table[i];
		const char *fname = str(d, m->filename_strindex);
		const char *bid =
		    attr_sval(find_attr(d, m->attribute_indices, m->n_attribute_indices,
					"process.executable.build_id.gnu"));

		REQUIRE(fname);
		if (!strcmp(fname, "/usr/bin/app")) {
			CHECK_STR(bid, BID_APP);
			/* in the ELF address space of the locations, as the OTel eBPF profiler */
			CHECK_EQ_U64(m->memory_start, 0x1000);
			CHECK_EQ_U64(m->memory_limit, 0x555555600000 - 0x555555553000);
			CHECK_EQ_U64(m->file_offset, 0x1000);
		} else if (!strcmp(fname, "/usr/lib/x86_64-linux-gnu/libc.so.6")) {
			CHECK_STR(bid, BID_LIBC);
			CHECK_EQ_U64(m->memory_start, 0x28000);
			CHECK_EQ_U64(m->memory_limit, 0x7ffff7f50000 - 0x7ffff7d98000);
		} else {
			/* db and the kernel have no build id: no attribute at all. */
			CHECK(m->n_attribute_indices == 0);
		}
	}
	/* Locations: frame types, lines, addresses. */
	for (size_t i = 1; i < d->n_location_table; i++) {
		const PROF(Location) *l = d->location_table[i];
		const char *ft = attr_sval(find_attr(d, l->attribute_indices,
						     l->n_attribute_indices, "profile.frame.type"));
		const char *fn = loc_fn(d, l);
		const char *mname = str(d, d->mapping_table[l->mapping_index]->filename_strindex);

		CHECK(l->mapping_index > 0);
		if (l->address == 0xffffffff81000100ULL) {
			CHECK_STR(ft, "kernel");
			CHECK_STR(fn, "do_syscall_64");
			CHECK_STR(mname, "[kernel.kallsyms]");
		} else if (l->address == 0x1300) {
			/* A frame without a symbol keeps its name: Pyroscope draws no frame
			 * without one. */
			CHECK_STR(ft, "native");
			REQUIRE(l->n_lines == 1);
			CHECK_STR(fn, "[app]");
			CHECK_STR(mname, "/usr/bin/app");
		} else {
			CHECK_STR(ft, "native");
			CHECK(fn != NULL);
		}
	}
	pp_profile_free(k.cpu);
	pp_profile_free(k.cycles);
	req_free(r);
}

TEST(profile_types_values_and_times)
{
	struct known k = {0};
	const struct pp_profile *profs[2];
	const PROF(ProfilesDictionary) * d;
	const PROF(ResourceProfiles) * app;
	const PROF(Profile) * cpu, *cyc;
	uint64_t sum = 0, with_ts = 0;
	REQ *r;

	REQUIRE(make_known(&k) == 0);
	profs[0] = k.cpu;
	profs[1] = k.cycles;
	r = encode(profs, 2, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	d = r->dictionary;
	app = res_by_pid(r, 100);
	REQUIRE(app && app->scope_profiles[0]->n_profiles == 2);
	cpu = app->scope_profiles[0]->profiles[0];
	cyc = app->scope_profiles[0]->profiles[1];
	/* CPU: samples/count sampled every period of cpu/nanoseconds. */
	CHECK_STR(str(d, cpu->sample_type->type_strindex), "samples");
	CHECK_STR(str(d, cpu->sample_type->unit_strindex), "count");
	CHECK_STR(str(d, cpu->period_type->type_strindex), "cpu");
	CHECK_STR(str(d, cpu->period_type->unit_strindex), "nanoseconds");
	CHECK_EQ_U64(cpu->period, 1000000);
	CHECK_EQ_U64(cpu->time_unix_nano, T0);
	CHECK_EQ_U64(cpu->duration_nano, 1000000000);
	/*
	 * Hardware event: sample and period type <event>/count, which Pyroscope names the
	 * profile after; values are the event counts the model holds (the samples' summed
	 * periods: make_known gives 7 samples 1000000 each), not sample counts.
	 */
	CHECK_STR(str(d, cyc->sample_type->type_strindex), "cycles");
	CHECK_STR(str(d, cyc->sample_type->unit_strindex), "count");
	CHECK_STR(str(d, cyc->period_type->type_strindex), "cycles");
	CHECK_STR(str(d, cyc->period_type->unit_strindex), "count");
	CHECK_EQ_U64(cyc->period, 100000);
	CHECK_EQ_U64(cyc->time_unix_nano, T0 + 5);
	CHECK_EQ_U64(cyc->duration_nano, 2000000000);
	REQUIRE(cyc->n_samples == 1 && cyc->samples[0]->n_values == 1);
	CHECK_EQ_U64(cyc->samples[0]->values[0], 7000000);

	/* app's cpu samples: 40 + 5 + 15, one value each; the 5 lie outside the window. */
	CHECK_EQ_U64(cpu->n_samples, 3);
	for (size_t i = 0; i < cpu->n_samples; i++) {
		const PROF(Sample) *s = cpu->samples[i];

		REQUIRE(s->n_values == 1);
		sum += (uint64_t)s->values[0];
		if (s->n_timestamps_unix_nano) {
			with_ts++;
			CHECK(s->timestamps_unix_nano[0] >= cpu->time_unix_nano &&
			      s->timestamps_unix_nano[0] <
				  cpu->time_unix_nano + cpu->duration_nano);
			if (s->values[0] == 40)
				CHECK_EQ_U64(s->timestamps_unix_nano[0], T0 + 10);
		} else {
			CHECK_EQ_U64(s->values[0], 5);
		}
	}
	CHECK_EQ_U64(sum, 60);
	CHECK_EQ_U64(with_ts, 2);
	/* Without a service name, each process is its own service. */
	CHECK_STR(res_str(app, "service.name"), "app");
	CHECK_STR(res_str(res_by_pid(r, 200), "service.name"), "db");
	CHECK(res_attr(app, "host.name") == NULL);
	CHECK(res_attr(app, "k8s.node.name") == NULL);
	free_known(&k);
	req_free(r);
}

TEST(sample_attributes)
{
	struct known k = {0};
	const struct pp_profile *profs[1];
	const PROF(ProfilesDictionary) * d;
	const PROF(Profile) * cpu, *dbp;
	int seen = 0;
	REQ *r;

	REQUIRE(make_known(&k) == 0);
	profs[0] = k.cpu;
	r = encode(profs, 1, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	d = r->dictionary;
	REQUIRE(res_by_pid(r, 100) && res_by_pid(r, 200));
	cpu = res_by_pid(r, 100)->scope_profiles[0]->profiles[0];
	for (size_t i = 0; i < cpu->n_samples; i++) {
		const PROF(Sample) *s = cpu->samples[i];
		const PROF(KeyValueAndUnit) *tid =
		    find_attr(d, s->attribute_indices, s->n_attribute_indices, "thread.id");

		REQUIRE(tid && tid->value);
		CHECK(tid->value->value_case == VALUE_CASE(INT_VALUE));
		CHECK(tid->value->int_value == 101 || tid->value->int_value == 102);
		CHECK_STR(attr_sval(find_attr(d, s->attribute_indices, s->n_attribute_indices,
					      "thread.name")),
			  "worker");
		if (s->values[0] == 40) {
			CHECK_STR(attr_sval(find_attr(d, s->attribute_indices,
						      s->n_attribute_indices, "service")),
				  "checkout");
			CHECK_EQ_U64(s->n_attribute_indices, 3);
			seen++;
		} else {
			CHECK_EQ_U64(s->n_attribute_indices, 2);
		}
	}
	CHECK_EQ_U64(seen, 1);
	/* db's label thread.name=x clashes with the thread's name: keys stay unique. */
	dbp = res_by_pid(r, 200)->scope_profiles[0]->profiles[0];
	REQUIRE(dbp->n_samples == 1);
	{
		const PROF(Sample) *s = dbp->samples[0];

		CHECK_EQ_U64(s->n_attribute_indices, 3);
		CHECK_STR(attr_sval(find_attr(d, s->attribute_indices, s->n_attribute_indices,
					      "thread.name")),
			  "worker");
		CHECK_STR(
		    attr_sval(find_attr(d, s->attribute_indices, s->n_attribute_indices, "zone")),
		    "eu");
	}
	free_known(&k);
	req_free(r);
}

TEST(resource_attribute_precedence)
{
	struct known k = {0};
	const struct pp_profile *profs[1];
	struct pp_label ex[4];
	struct pp_otlp_resource res = {.host_name = "host-1", .extra_attrs = ex};
	const PROF(ResourceProfiles) * app;
	const COMMON(AnyValue) * pid;
	REQ *r;

	REQUIRE(make_known(&k) == 0);
	profs[0] = k.cpu;
	memcpy(ex, extras, sizeof(extras));
	ex[3] = (struct pp_label){"service.name", "from-env"};
	res.n_extra = 4;
	r = encode(profs, 1, &res);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	app = res_by_pid(r, 100);
	REQUIRE(app);
	CHECK_STR(res_str(app, "service.name"), "from-env");
	CHECK_STR(res_str(app, "host.name"), "override-host");
	CHECK_STR(res_str(app, "deployment.environment.name"), "prod");
	pid = res_attr(app, "process.pid");
	REQUIRE(pid);
	CHECK(pid->value_case == VALUE_CASE(INT_VALUE) && pid->int_value == 100);
	/* service.name, host.name, the environment, process.pid, process.executable.name */
	CHECK_EQ_U64(app->resource->n_attributes, 5);
	req_free(r);

	/* The explicit service name (OTEL_SERVICE_NAME) beats the one in the attributes. */
	res.service_name = "explicit";
	r = encode(profs, 1, &res);
	REQUIRE(r);
	CHECK_STR(res_str(res_by_pid(r, 200), "service.name"), "explicit");
	req_free(r);

	/* A bad extra attribute is refused, not written. */
	{
		uint8_t *buf = NULL;
		size_t len = 0;

		ex[0].key = "";
		CHECK(pp_otlp_encode(profs, 1, &res, &buf, &len) == -EINVAL);
		CHECK(buf == NULL && len == 0);
	}
	free_known(&k);
}

TEST(empty_and_bad_arguments)
{
	struct pp_profile_desc d = {.event = "cpu-clock", .period = 1};
	struct pp_profile *p = pp_profile_new(&d);
	const struct pp_profile *profs[2] = {p, NULL};
	uint8_t *buf = NULL;
	size_t len = 0;
	REQ *r;

	REQUIRE(p);
	/* No samples: no resources, but the dictionary with its zero entries is there. */
	r = encode(profs, 2, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	CHECK_EQ_U64(r->n_resource_profiles, 0);
	req_free(r);
	r = encode(NULL, 0, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	req_free(r);
	CHECK(pp_otlp_encode(profs, 1, NULL, NULL, &len) == -EINVAL);
	CHECK(pp_otlp_encode(profs, 1, NULL, &buf, NULL) == -EINVAL);
	CHECK(pp_otlp_encode(NULL, 1, NULL, &buf, &len) == -EINVAL);
	CHECK(pp_otlp_write_file(profs, 1, NULL, NULL) == -EINVAL);
	pp_profile_free(p);
}

TEST(write_file_matches_encode)
{
	struct known k = {0};
	const struct pp_profile *profs[2];
	char path[] = "/tmp/pp_test_otlp_XXXXXX";
	uint8_t *buf = NULL, *got;
	size_t len = 0, n;
	FILE *f;
	int fd;

	REQUIRE(make_known(&k) == 0);
	profs[0] = k.cpu;
	profs[1] = k.cycles;
	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	CHECK(pp_otlp_write_file(profs, 2, NULL, path) == 0);
	REQUIRE(pp_otlp_encode(profs, 2, NULL, &buf, &len) == 0);
	got = malloc(len + 1);
	f = fopen(path, "rb");
	REQUIRE(got && f);
	n = fread(got, 1, len + 1, f);
	fclose(f);
	unlink(path);
	/* Deterministic: the file holds exactly the encoded request. */
	CHECK_EQ_U64(n, len);
	CHECK(n == len && memcmp(got, buf, len) == 0);
	/* A directory that does not exist: an error, and nothing left behind. */
	CHECK(pp_otlp_write_file(profs, 2, NULL, "/nonexistent-dir/x.otlp.pb") < 0);
	free(got);
	free(buf);
	free_known(&k);
}

static int parse(const char *s, struct pp_label **out, uint32_t *n, char *err)
{
	return pp_otlp_parse_resource_attributes(s, strlen(s), out, n, err, 256);
}

TEST(resource_attributes_parser)
{
	struct pp_label *a = NULL;
	char err[256];
	uint32_t n = 99;

	CHECK(parse("", &a, &n, err) == 0);
	CHECK(a == NULL && n == 0);
	CHECK(parse(" , ,", &a, &n, err) == 0);
	CHECK(a == NULL && n == 0);

	REQUIRE(parse("service.name=checkout,deployment.environment.name=prod", &a, &n, err) == 0);
	REQUIRE(n == 2);
	CHECK_STR(a[0].key, "service.name");
	CHECK_STR(a[0].value, "checkout");
	CHECK_STR(a[1].key, "deployment.environment.name");
	CHECK_STR(a[1].value, "prod");
	pp_otlp_free_attributes(a);

	/* Percent-decoding, blanks trimmed, empty values, a trailing comma, '=' in values. */
	REQUIRE(parse(" team = a%2Cb%3Dc , note=x%20y%25,empty=, k%41=v=w,", &a, &n, err) == 0);
	REQUIRE(n == 4);
	CHECK_STR(a[0].key, "team");
	CHECK_STR(a[0].value, "a,b=c");
	CHECK_STR(a[1].key, "note");
	CHECK_STR(a[1].value, "x y%");
	CHECK_STR(a[2].key, "empty");
	CHECK_STR(a[2].value, "");
	CHECK_STR(a[3].key, "kA");
	CHECK_STR(a[3].value, "v=w");
	pp_otlp_free_attributes(a);

	/* A repeated key keeps its last value. */
	REQUIRE(parse("a=1,b=2,a=3", &a, &n, err) == 0);
	REQUIRE(n == 2);
	CHECK_STR(a[0].key, "a");
	CHECK_STR(a[0].value, "3");
	pp_otlp_free_attributes(a);

	/* Errors name the pair and what is wrong; nothing is returned. */
	a = (struct pp_label *)1;
	CHECK(parse("a=1,justakey,c=3", &a, &n, err) == -EINVAL);
	CHECK(a == NULL && n == 0);
	CHECK(strstr(err, "pair 2") && strstr(err, "\"justakey\"") && strstr(err, "'='"));
	CHECK(parse("a=1, =v", &a, &n, err) == -EINVAL);
	CHECK(strstr(err, "pair 2") && strstr(err, "key is empty"));
	CHECK(parse("a=%zz", &a, &n, err) == -EINVAL);
	CHECK(strstr(err, "pair 1") && strstr(err, "\"a=%zz\"") && strstr(err, "hex"));
	CHECK(parse("a=50%", &a, &n, err) == -EINVAL);
	CHECK(strstr(err, "hex"));
	CHECK(parse("a=x%00y", &a, &n, err) == -EINVAL);
	CHECK(strstr(err, "NUL"));
	CHECK(parse("%3D=v", &a, &n, err) == 0); /* an encoded '=' in a key is just a char */
	CHECK(n == 1 && a && strcmp(a[0].key, "=") == 0);
	pp_otlp_free_attributes(a);

	/* Bounded: PP_OTLP_MAX_RESOURCE_ATTRS pairs pass, one more does not. */
	{
		char big[PP_OTLP_MAX_RESOURCE_ATTRS * 12 + 32];
		size_t off = 0;

		for (int i = 0; i < PP_OTLP_MAX_RESOURCE_ATTRS; i++)
			off += (size_t)snprintf(big + off, sizeof(big) - off, "k%d=v,", i);
		CHECK(parse(big, &a, &n, err) == 0);
		CHECK_EQ_U64(n, PP_OTLP_MAX_RESOURCE_ATTRS);
		pp_otlp_free_attributes(a);
		snprintf(big + off, sizeof(big) - off, "last=v");
		CHECK(parse(big, &a, &n, err) == -E2BIG);
		CHECK(a == NULL && strstr(err, "\"last=v\""));
	}
	/* Buffers are taken by length: bytes past len are not read. */
	CHECK(pp_otlp_parse_resource_attributes("a=1,b=2", 3, &a, &n, err, sizeof(err)) == 0);
	CHECK(n == 1 && a && strcmp(a[0].value, "1") == 0);
	pp_otlp_free_attributes(a);
	CHECK(pp_otlp_parse_resource_attributes(NULL, 0, &a, &n, err, sizeof(err)) == 0);
	CHECK(pp_otlp_parse_resource_attributes("a", 1, NULL, &n, err, sizeof(err)) == -EINVAL);
	pp_otlp_free_attributes(NULL);
}

TEST(parsed_attributes_reach_the_request)
{
	struct known k = {0};
	const struct pp_profile *profs[1];
	struct pp_otlp_resource res = {0};
	struct pp_label *a = NULL;
	char err[128];
	uint32_t n = 0;
	REQ *r;

	REQUIRE(make_known(&k) == 0);
	profs[0] = k.cpu;
	REQUIRE(parse("service.name=shop,k8s.namespace.name=team%2Fa", &a, &n, err) == 0);
	res.extra_attrs = a;
	res.n_extra = n;
	r = encode(profs, 1, &res);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		CHECK_STR(res_str(r->resource_profiles[i], "service.name"), "shop");
		CHECK_STR(res_str(r->resource_profiles[i], "k8s.namespace.name"), "team/a");
	}
	req_free(r);
	pp_otlp_free_attributes(a);
	free_known(&k);
}

/* A sample that keeps its CPU carries cpu.logical_number; the same stack on two CPUs is two. */
TEST(cpu_logical_number)
{
	struct pp_profile_desc desc = {.event = "cpu-clock",
				       .value_type = "cpu",
				       .value_unit = "nanoseconds",
				       .period = 1000000};
	struct pp_profile *p = pp_profile_new(&desc);
	const struct pp_profile *profs[1] = {p};
	uint32_t l;
	int found[2] = {0, 0};
	REQ *r;

	REQUIRE(p);
	l = loc(p, 0, 0x1000, "spin", PP_FRAME_NATIVE);
	REQUIRE(l);
	for (uint32_t cpu = 0; cpu < 2; cpu++) {
		struct pp_sample_info s = {.locations = &l,
					   .nlocations = 1,
					   .pid = 7,
					   .tid = 7,
					   .thread_name = "t",
					   .process_name = "p",
					   .process_path = "/opt/app/bin/p",
					   .count = 3 + cpu,
					   .value = 1,
					   .has_cpu = 1,
					   .cpu = cpu};

		CHECK(pp_profile_add_sample(p, &s) == 0);
	}
	CHECK_EQ_U64(pp_profile_sample_count(p), 2);
	r = encode(profs, 1, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	{
		const PROF(Profile) *prof = res_by_pid(r, 7)->scope_profiles[0]->profiles[0];

		REQUIRE(prof->n_samples == 2);
		for (size_t i = 0; i < prof->n_samples; i++) {
			const PROF(Sample) *s = prof->samples[i];
			const PROF(KeyValueAndUnit) *a =
			    find_attr(r->dictionary, s->attribute_indices, s->n_attribute_indices,
				      "cpu.logical_number");

			REQUIRE(a && a->value);
			CHECK(a->value->value_case == VALUE_CASE(INT_VALUE));
			if (a->value->int_value >= 0 && a->value->int_value < 2) {
				found[a->value->int_value]++;
				CHECK_EQ_U64(s->values[0], 3 + a->value->int_value);
			}
		}
	}
	CHECK(found[0] == 1 && found[1] == 1);
	CHECK_STR(res_str(res_by_pid(r, 7), "process.executable.path"), "/opt/app/bin/p");
	req_free(r);
	pp_profile_free(p);
}

/*
 * A memory event next to cpu-clock: its process gets a count Profile and a latency Profile
 * (samples without a latency left out of it); another process without latencies gets none.
 */
TEST(memory_profile_has_a_latency_twin)
{
	struct known k = {0};
	struct pp_profile_desc dm = {.event = "mem-loads",
				     .value_type = "mem-loads",
				     .value_unit = "count",
				     .period = 20011,
				     .start_unix_ns = T0,
				     .duration_ns = 1000000000,
				     .mem_latency = 1};
	struct pp_mapping_info app = {0x555555554000, 0x555555600000, 0x1000,
				      "/usr/bin/app", BID_APP,	      0x555555553000};
	struct pp_label lab[] = {{"memory.level", "L3 hit"}, {"memory.latency_bucket", "64-127"}};
	const struct pp_profile *profs[2];
	const PROF(ProfilesDictionary) * d;
	const PROF(ScopeProfiles) * sp;
	const PROF(Profile) * lat;
	struct pp_profile *m = NULL;
	uint32_t fn, obj;
	REQ *r = NULL;

	REQUIRE(make_known(&k) == 0);
	m = pp_profile_new(&dm);
	REQUIRE(m);
	fn = loc(m, pp_profile_intern_mapping(m, &app), 0x1200, "a", PP_FRAME_NATIVE);
	obj = loc(m, 0, 0x4010, "table", PP_FRAME_DATA);
	{
		uint32_t st[] = {obj, fn};
		struct pp_sample_info s1 = {.locations = st,
					    .nlocations = 2,
					    .pid = 100,
					    .tid = 101,
					    .thread_name = "worker",
					    .process_name = "app",
					    .labels = lab,
					    .nlabels = 2,
					    .count = 3,
					    .value = 60033,
					    .latency = 300};
		struct pp_sample_info s2 = s1, s3 = s1;

		s2.labels = NULL; /* a sample without latency */
		s2.nlabels = 0;
		s2.count = 2;
		s2.latency = 0;
		s3.pid = 300; /* a process with no latency at all */
		s3.process_name = "cache";
		s3.latency = 0;
		REQUIRE(pp_profile_add_sample(m, &s1) == 0);
		REQUIRE(pp_profile_add_sample(m, &s2) == 0);
		REQUIRE(pp_profile_add_sample(m, &s3) == 0);
	}
	profs[0] = k.cpu;
	profs[1] = m;
	r = encode(profs, 2, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	d = r->dictionary;
	REQUIRE(res_by_pid(r, 100));
	sp = res_by_pid(r, 100)->scope_profiles[0];
	REQUIRE(sp->n_profiles == 3); /* cpu, mem_loads counts, mem_loads latency */
	CHECK_STR(str(d, sp->profiles[0]->period_type->type_strindex), "cpu");
	/* Both memory Profiles are one Pyroscope profile, mem_loads, with two sample types. */
	CHECK_STR(str(d, sp->profiles[1]->period_type->type_strindex), "mem_loads");
	CHECK_STR(str(d, sp->profiles[1]->sample_type->type_strindex), "mem_loads");
	CHECK_EQ_U64(sp->profiles[1]->period, 20011);
	CHECK_EQ_U64(sp->profiles[1]->n_samples, 2);
	CHECK_EQ_U64(sp->profiles[1]->samples[0]->values[0], 60033);
	lat = sp->profiles[2];
	CHECK_STR(str(d, lat->sample_type->type_strindex), "latency");
	CHECK_STR(str(d, lat->sample_type->unit_strindex), "cycles");
	CHECK_STR(str(d, lat->period_type->type_strindex), "mem_loads");
	CHECK_STR(str(d, lat->period_type->unit_strindex), "count");
	CHECK_EQ_U64(lat->period, 20011);
	REQUIRE(lat->n_samples == 1 && lat->samples[0]->n_values == 1);
	CHECK_EQ_U64(lat->samples[0]->values[0], 300);
	CHECK_STR(attr_sval(find_attr(d, lat->samples[0]->attribute_indices,
				      lat->samples[0]->n_attribute_indices, "memory.level")),
		  "L3 hit");
	REQUIRE(res_by_pid(r, 300));
	CHECK_EQ_U64(res_by_pid(r, 300)->scope_profiles[0]->n_profiles, 1);
	pp_profile_free(m);
	free_known(&k);
	req_free(r);
}

static const PROF(ResourceProfiles) * res_by_container(const REQ *r, const char *id)
{
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const char *v = res_str(r->resource_profiles[i], "container.id");

		if (v && strcmp(v, id) == 0)
			return r->resource_profiles[i];
	}
	return NULL;
}

/* Samples of rp's first profile whose process.pid sample attribute is pid. */
static size_t samples_of_pid(const REQ *r, const PROF(ResourceProfiles) * rp, int64_t pid)
{
	const PROF(Profile) *pr = rp->scope_profiles[0]->profiles[0];
	size_t n = 0;

	for (size_t i = 0; i < pr->n_samples; i++) {
		const PROF(KeyValueAndUnit) *a =
		    find_attr(r->dictionary, pr->samples[i]->attribute_indices,
			      pr->samples[i]->n_attribute_indices, "process.pid");

		if (a && a->value->value_case == VALUE_CASE(INT_VALUE) &&
		    a->value->int_value == pid)
			n++;
	}
	return n;
}

/*
 * Two processes in one container, a second container in another profile, a host process:
 * one ResourceProfiles per container holding both its processes (process.pid and
 * process.executable.name on the samples), the container's own service.name before the
 * configured one, the same container in two profiles under one resource; the host process
 * keeps its per-process resource.
 */
TEST(one_resource_per_container)
{
	struct pp_profile_desc dc = {.event = "cpu-clock",
				     .value_type = "cpu",
				     .value_unit = "nanoseconds",
				     .period = 1000000,
				     .start_unix_ns = T0,
				     .duration_ns = 1000000000};
	struct pp_profile_desc dy = dc;
	struct pp_label ctr_a[] = {{"container.id", "aaaa"},
				   {"container.runtime", "containerd"},
				   {"k8s.pod.name", "checkout-1"},
				   {"service.name", "checkout"}};
	struct pp_label ctr_b[] = {{"container.id", "bbbb"}, {"k8s.pod.uid", "u-1"}};
	struct pp_otlp_resource res = {.service_name = "node-agent", .host_name = "n1"};
	struct pp_profile *p1, *p2;
	const struct pp_profile *profs[2];
	const PROF(ResourceProfiles) * ra, *rb;
	uint32_t f, ra_id, rb_id, rb2_id;
	REQ *r;

	dy.event = dy.value_type = "cycles";
	dy.value_unit = "count";
	p1 = pp_profile_new(&dc);
	p2 = pp_profile_new(&dy);
	REQUIRE(p1 && p2);
	f = loc(p1, 0, 0xffffffff81000000ull, "schedule", PP_FRAME_KERNEL);
	ra_id = pp_profile_intern_resource(p1, ctr_a, 4);
	rb_id = pp_profile_intern_resource(p1, ctr_b, 2);
	CHECK(ra_id == 1 && rb_id == 2);
	CHECK_EQ_U64(pp_profile_intern_resource(p1, ctr_a, 4), ra_id);
	{
		struct pp_sample_info s = {.locations = &f,
					   .nlocations = 1,
					   .pid = 10,
					   .tid = 10,
					   .thread_name = "java",
					   .process_name = "java",
					   .count = 5,
					   .value = 5000000,
					   .resource_id = ra_id};

		REQUIRE(pp_profile_add_sample(p1, &s) == 0);
		s.pid = s.tid = 11;
		s.process_name = s.thread_name = "envoy";
		s.count = 2;
		REQUIRE(pp_profile_add_sample(p1, &s) == 0);
		s.pid = s.tid = 12;
		s.process_name = s.thread_name = "redis";
		s.resource_id = rb_id;
		REQUIRE(pp_profile_add_sample(p1, &s) == 0);
		s.pid = s.tid = 13;
		s.process_name = s.thread_name = "sshd";
		s.resource_id = 0;
		REQUIRE(pp_profile_add_sample(p1, &s) == 0);
		s.resource_id = 9; /* unknown id */
		CHECK_EQ_U64(pp_profile_add_sample(p1, &s), (uint64_t)-EINVAL);

		f = loc(p2, 0, 0xffffffff81000000ull, "schedule", PP_FRAME_KERNEL);
		s.locations = &f;
		rb2_id = pp_profile_intern_resource(p2, ctr_b, 2);
		s.pid = s.tid = 12;
		s.process_name = s.thread_name = "redis";
		s.resource_id = rb2_id;
		REQUIRE(pp_profile_add_sample(p2, &s) == 0);
	}
	profs[0] = p1;
	profs[1] = p2;
	r = encode(profs, 2, &res);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	CHECK_EQ_U64(r->n_resource_profiles, 3); /* container a, container b, sshd */
	ra = res_by_container(r, "aaaa");
	rb = res_by_container(r, "bbbb");
	REQUIRE(ra && rb);
	CHECK_STR(res_str(ra, "service.name"), "checkout");
	CHECK_STR(res_str(ra, "container.runtime"), "containerd");
	CHECK_STR(res_str(ra, "k8s.pod.name"), "checkout-1");
	CHECK_STR(res_str(ra, "host.name"), "n1");
	CHECK(res_attr(ra, "process.pid") == NULL);
	CHECK_EQ_U64(ra->scope_profiles[0]->n_profiles, 1);
	CHECK_EQ_U64(samples_of_pid(r, ra, 10), 1);
	CHECK_EQ_U64(samples_of_pid(r, ra, 11), 1);
	CHECK_EQ_U64(samples_of_pid(r, ra, 12), 0);
	/* No service.name of its own: the configured one. */
	CHECK_STR(res_str(rb, "service.name"), "node-agent");
	CHECK_STR(res_str(rb, "k8s.pod.uid"), "u-1");
	CHECK_EQ_U64(rb->scope_profiles[0]->n_profiles, 2); /* cpu-clock and cycles */
	CHECK_EQ_U64(samples_of_pid(r, rb, 12), 1);
	REQUIRE(res_by_pid(r, 13));
	CHECK(res_attr(res_by_pid(r, 13), "container.id") == NULL);
	req_free(r);
	pp_profile_free(p1);
	pp_profile_free(p2);
}

/*
 * A frame no symbol named keeps its identity for a backend symbolizer: its Location has the
 * ELF address and no Line, its Mapping the file name and build id; a named frame of the same
 * file keeps its Line. Named later (pp_profile_name_location), it gets its Line.
 */
TEST(unnamed_frames_carry_address_mapping_and_build_id)
{
	struct pp_profile_desc desc = {.event = "cpu-clock",
				       .value_type = "cpu",
				       .value_unit = "nanoseconds",
				       .period = 1000000};
	struct pp_profile *p = pp_profile_new(&desc);
	const struct pp_profile *profs[1] = {p};
	struct pp_mapping_info m = {.start = 0x7f0000001000,
				    .limit = 0x7f0000100000,
				    .file_offset = 0x1000,
				    .filename = "/usr/lib/libstripped.so",
				    .build_id = "00112233445566778899aabbccddeeff00112233",
				    .load_bias = 0x7f0000000000};
	struct pp_location_info un = {.address = 0x1a2b,
				      .function = "libstripped.so+0x1a2b",
				      .kind = PP_FRAME_NATIVE,
				      .unnamed = PP_UNNAMED_FOR_BACKEND};
	uint32_t locs[2];
	REQ *r;

	REQUIRE(p);
	un.mapping_id = pp_profile_intern_mapping(p, &m);
	locs[0] = pp_profile_intern_location(p, &un);
	locs[1] = loc(p, un.mapping_id, 0x1100, "named_caller", PP_FRAME_NATIVE);
	REQUIRE(locs[0] && locs[1]);
	REQUIRE(add(p, locs, 2, 9, 9, "app", NULL, 0, 1, 0) == 0);
	r = encode(profs, 1, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	{
		const PROF(ProfilesDictionary) *d = r->dictionary;
		const PROF(Profile) *prof = res_by_pid(r, 9)->scope_profiles[0]->profiles[0];
		const PROF(Stack) *st = d->stack_table[prof->samples[0]->stack_index];
		const PROF(Location) * l0, *l1;
		const PROF(Mapping) * mp;

		REQUIRE(st->n_location_indices == 2);
		l0 = d->location_table[st->location_indices[0]];
		l1 = d->location_table[st->location_indices[1]];
		CHECK_EQ_U64(l0->n_lines, 0);
		CHECK_EQ_U64(l0->address, 0x1a2b);
		CHECK_STR(loc_fn(d, l1), "named_caller");
		REQUIRE(l0->mapping_index > 0);
		mp = d->mapping_table[l0->mapping_index];
		CHECK_STR(str(d, mp->filename_strindex), "/usr/lib/libstripped.so");
		CHECK_STR(attr_sval(find_attr(d, mp->attribute_indices, mp->n_attribute_indices,
					      "process.executable.build_id.gnu")),
			  "00112233445566778899aabbccddeeff00112233");
		/* the placeholder is no function of the dictionary */
		for (size_t i = 0; i < d->n_function_table; i++)
			CHECK(!str(d, d->function_table[i]->name_strindex) ||
			      strcmp(str(d, d->function_table[i]->name_strindex),
				     "libstripped.so+0x1a2b") != 0);
	}
	req_free(r);
	{
		/* one the agent tried to name: drawn, with its placeholder as the function */
		struct pp_location_info drawn = un;
		uint32_t dl;

		drawn.address = 0x2a2b;
		drawn.function = "libstripped.so+0x2a2b";
		drawn.unnamed = PP_UNNAMED_DRAWN;
		dl = pp_profile_intern_location(p, &drawn);
		REQUIRE(dl && add(p, &dl, 1, 9, 9, "app", NULL, 0, 1, 0) == 0);
		r = encode(profs, 1, NULL);
		REQUIRE(r);
		{
			const PROF(ProfilesDictionary) *d = r->dictionary;
			int seen = 0;

			for (size_t i = 1; i < d->n_location_table; i++)
				if (d->location_table[i]->address == 0x2a2b) {
					CHECK_STR(loc_fn(d, d->location_table[i]),
						  "libstripped.so+0x2a2b");
					seen++;
				}
			CHECK(seen == 1);
		}
		req_free(r);
	}
	CHECK(pp_profile_name_location(p, locs[0], "late_name", NULL) == 0);
	CHECK(pp_profile_name_location(p, 99, "x", NULL) == -EINVAL);
	CHECK(pp_profile_get_location(p, locs[0])->unnamed == 0);
	/* the same frame interned again is the named location */
	un.function = "late_name";
	un.unnamed = 0;
	CHECK_EQ_U64(pp_profile_intern_location(p, &un), locs[0]);
	r = encode(profs, 1, NULL);
	REQUIRE(r);
	{
		const PROF(ProfilesDictionary) *d = r->dictionary;
		const PROF(Profile) *prof = res_by_pid(r, 9)->scope_profiles[0]->profiles[0];
		const PROF(Stack) *st = d->stack_table[prof->samples[0]->stack_index];

		CHECK_STR(loc_fn(d, d->location_table[st->location_indices[0]]), "late_name");
	}
	req_free(r);
	pp_profile_free(p);
}

/*
 * Off-CPU samples (wait set) of a cpu-clock profile: each process gets the event's Profile
 * without them and an (off_cpu, nanoseconds) Profile with no period of them alone, each of
 * its samples naming its state; the event's samples carry no state.
 */
TEST(off_cpu_samples_get_their_own_profile)
{
	struct pp_profile_desc dc = {.event = "cpu-clock",
				     .value_type = "cpu",
				     .value_unit = "nanoseconds",
				     .period = 10000000,
				     .start_unix_ns = T0,
				     .duration_ns = 1000000000,
				     .off_cpu_every = 4};
	struct pp_mapping_info app = {0x555555554000, 0x555555600000, 0x1000,
				      "/usr/bin/app", BID_APP,	      0x555555553000};
	const PROF(ProfilesDictionary) * d;
	const PROF(ScopeProfiles) * sp;
	const PROF(Profile) * ev, *off;
	struct pp_profile *p = pp_profile_new(&dc);
	const struct pp_profile *profs[1];
	uint32_t fn;
	REQ *r = NULL;

	REQUIRE(p);
	fn = loc(p, pp_profile_intern_mapping(p, &app), 0x1200, "wait_here", PP_FRAME_NATIVE);
	{
		uint32_t st[] = {fn};
		struct pp_sample_info on = {.locations = st,
					    .nlocations = 1,
					    .pid = 100,
					    .tid = 101,
					    .thread_name = "worker",
					    .process_name = "app",
					    .count = 4,
					    .value = 40000000};
		struct pp_sample_info sleeping = on, disk = on;

		sleeping.count = 2;
		sleeping.value = 250000000;
		sleeping.wait = PP_WAIT_SLEEPING;
		disk.count = 1;
		disk.value = 7000000;
		disk.wait = PP_WAIT_DISK;
		REQUIRE(pp_profile_add_sample(p, &on) == 0);
		REQUIRE(pp_profile_add_sample(p, &sleeping) == 0);
		REQUIRE(pp_profile_add_sample(p, &disk) == 0);
		CHECK(pp_profile_add_sample(p, &(struct pp_sample_info){.locations = st,
									.nlocations = 1,
									.thread_name = "t",
									.process_name = "app",
									.count = 1,
									.wait = PP_WAIT_STATES}) ==
		      -EINVAL);
	}
	/* the same stack in three states: three samples; the event's totals are its own */
	CHECK_EQ_U64(pp_profile_sample_count(p), 3);
	CHECK_EQ_U64(pp_profile_total_count(p), 4);
	CHECK_EQ_U64(pp_profile_total_value(p), 40000000);
	CHECK_EQ_U64(pp_profile_off_cpu_waits(p), 3);
	CHECK_EQ_U64(pp_profile_off_cpu_ns(p), 257000000);
	profs[0] = p;
	r = encode(profs, 1, NULL);
	REQUIRE(r);
	CHECK(check_rules(r) == 0);
	d = r->dictionary;
	REQUIRE(res_by_pid(r, 100));
	sp = res_by_pid(r, 100)->scope_profiles[0];
	REQUIRE(sp->n_profiles == 2);
	ev = sp->profiles[0];
	off = sp->profiles[1];
	CHECK_STR(str(d, ev->sample_type->type_strindex), "samples");
	CHECK_STR(str(d, ev->period_type->type_strindex), "cpu");
	REQUIRE(ev->n_samples == 1);
	CHECK_EQ_U64(ev->samples[0]->values[0], 4);
	CHECK(!find_attr(d, ev->samples[0]->attribute_indices, ev->samples[0]->n_attribute_indices,
			 PP_LABEL_OFF_CPU_STATE));
	/* Pyroscope names a Profile of (off_cpu, nanoseconds) without a period off_cpu */
	CHECK_STR(str(d, off->sample_type->type_strindex), "off_cpu");
	CHECK_STR(str(d, off->sample_type->unit_strindex), "nanoseconds");
	CHECK(off->period_type == NULL);
	CHECK_EQ_U64(off->period, 0);
	/* the sampling of switches, stated (1 in 4: values already scaled) */
	{
		const PROF(KeyValueAndUnit) *every = find_attr(
		    d, off->attribute_indices, off->n_attribute_indices, PP_ATTR_OFF_CPU_EVERY);

		REQUIRE(every && every->value->value_case == VALUE_CASE(INT_VALUE));
		CHECK_EQ_U64(every->value->int_value, 4);
	}
	REQUIRE(off->n_samples == 2);
	for (size_t i = 0; i < 2; i++) {
		const PROF(Sample) *smp = off->samples[i];
		const char *state = attr_sval(find_attr(
		    d, smp->attribute_indices, smp->n_attribute_indices, PP_LABEL_OFF_CPU_STATE));

		REQUIRE(state);
		CHECK_EQ_U64(smp->values[0], strcmp(state, "sleeping") == 0 ? 250000000 : 7000000);
		CHECK(strcmp(state, "sleeping") == 0 || strcmp(state, "disk") == 0);
		CHECK(smp->stack_index == ev->samples[0]->stack_index);
	}
	req_free(r);
	pp_profile_free(p);
}

TEST_LIST = {
    {"unnamed_frames_carry_address_mapping_and_build_id",
     unnamed_frames_carry_address_mapping_and_build_id},
    {"known_profiles_follow_rules", known_profiles_follow_rules},
    {"off_cpu_samples_get_their_own_profile", off_cpu_samples_get_their_own_profile},
    {"profile_types_values_and_times", profile_types_values_and_times},
    {"sample_attributes", sample_attributes},
    {"resource_attribute_precedence", resource_attribute_precedence},
    {"empty_and_bad_arguments", empty_and_bad_arguments},
    {"write_file_matches_encode", write_file_matches_encode},
    {"resource_attributes_parser", resource_attributes_parser},
    {"parsed_attributes_reach_the_request", parsed_attributes_reach_the_request},
    {"cpu_logical_number", cpu_logical_number},
    {"memory_profile_has_a_latency_twin", memory_profile_has_a_latency_twin},
    {"one_resource_per_container", one_resource_per_container},
};
TEST_MAIN()
