/*
 * Splitting an OTLP request for HTTP 413 (pp_otlp_split_request): known profiles are encoded
 * with pp_otlp_encode and split; both halves are unpacked with protobuf-c and every sample is
 * resolved through its half's dictionary (resource, profile metadata, stack down to function
 * names, mappings and build ids, values, timestamps, attributes) into one line, so the test
 * can assert that each sample of the request appears in exactly one half, unchanged. Each
 * half must also be valid on its own: index 0 of every table the zero value, every index in
 * range, no orphaned dictionary entries.
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

#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define PROF_FN(x) opentelemetry__proto__profiles__v1development__##x
#define COMMON(x) Opentelemetry__Proto__Common__V1__##x
#define VALUE_CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define REQ Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
#define REQ_FN(x) opentelemetry__proto__collector__profiles__v1development__##x

#define T0 UINT64_C(1767225600000000000) /* 2026-01-01T00:00:00Z */
#define BID_APP "0123456789abcdef0123456789abcdef01234567"

/* ---- profiles to split ---- */

static const struct pp_profile_desc cpu_desc = {.event = "cpu-clock",
						.value_type = "cpu",
						.value_unit = "nanoseconds",
						.period = 1000000,
						.start_unix_ns = T0,
						.duration_ns = 1000000000};
static const struct pp_profile_desc cycles_desc = {.event = "cycles",
						   .value_type = "cycles",
						   .value_unit = "count",
						   .period = 100000,
						   .start_unix_ns = T0 + 5,
						   .duration_ns = 2000000000};

/*
 * n samples of process pid, each with its own stack: main -> f<k> [-> memcpy | kernel], the
 * even ones labeled, count k + 1, timestamps inside the window.
 */
static int add_samples(struct pp_profile *p, uint32_t pid, const char *proc, int n, int salt)
{
	struct pp_mapping_info exe = {0x555555554000, 0x555555600000, 0x1000,
				      "/usr/bin/app", BID_APP,	      0x555555553000};
	struct pp_mapping_info libc = {
	    0x7ffff7dc0000, 0x7ffff7f50000, 0x28000, "/usr/lib/x86_64-linux-gnu/libc.so.6", "",
	    0x7ffff7d98000};
	struct pp_mapping_info kern = {0, UINT64_MAX, 0, "[kernel.kallsyms]", "", 0};
	uint32_t m_exe = pp_profile_intern_mapping(p, &exe);
	uint32_t m_libc = pp_profile_intern_mapping(p, &libc);
	uint32_t m_kern = pp_profile_intern_mapping(p, &kern);
	struct pp_location_info lmain = {
	    .mapping_id = m_exe, .address = 0x1140, .function = "main", .kind = PP_FRAME_NATIVE};
	struct pp_location_info lmem = {.mapping_id = m_libc,
					.address = 0x9a0f0,
					.function = "memcpy",
					.kind = PP_FRAME_NATIVE};
	struct pp_location_info lk = {.mapping_id = m_kern,
				      .address = 0xffffffff81000100ULL,
				      .function = "do_syscall_64",
				      .kind = PP_FRAME_KERNEL};
	uint32_t main_id = pp_profile_intern_location(p, &lmain);
	uint32_t mem_id = pp_profile_intern_location(p, &lmem);
	uint32_t k_id = pp_profile_intern_location(p, &lk);
	struct pp_label lab[] = {{"zone", "eu"}, {"shard", "7"}};

	for (int k = 0; k < n; k++) {
		char fn[32], tname[32];
		struct pp_location_info lf = {.mapping_id = m_exe,
					      .address = 0x2000 + 16 * (uint64_t)(k + salt),
					      .function = fn,
					      .kind = PP_FRAME_NATIVE};
		uint32_t stack[3];
		struct pp_sample_info s = {0};

		snprintf(fn, sizeof(fn), "f%d_%d", salt, k);
		snprintf(tname, sizeof(tname), "worker-%d", k % 3);
		stack[0] = k % 3 == 1 ? mem_id : k_id;
		stack[1] = pp_profile_intern_location(p, &lf);
		stack[2] = main_id;
		s.locations = k % 3 == 0 ? stack + 1 : stack;
		s.nlocations = k % 3 == 0 ? 2 : 3;
		s.pid = pid;
		s.tid = pid + 1 + (uint32_t)(k % 3);
		s.thread_name = tname;
		s.process_name = proc;
		s.labels = k % 2 ? NULL : lab;
		s.nlabels = k % 2 ? 0 : 2;
		s.count = (uint64_t)k + 1;
		s.value = s.count * 1000000;
		s.first_time_unix_ns = T0 + 1000 + (uint64_t)k;
		if (!stack[1] || pp_profile_add_sample(p, &s))
			return -1;
	}
	return 0;
}

static const struct pp_label extra[] = {{"deployment.environment", "prod"}, {"team", "perf"}};
static const struct pp_otlp_resource resource = {.service_name = "checkout",
						 .host_name = "node-1",
						 .node_name = "node-1",
						 .scope_version = "0.1.0",
						 .extra_attrs = extra,
						 .n_extra = 2};

/* Encodes the profiles with the test resource; returns the request bytes or NULL. */
static uint8_t *encode(struct pp_profile **profs, size_t n, size_t *len)
{
	uint8_t *buf = NULL;
	int err = pp_otlp_encode((const struct pp_profile *const *)profs, n, &resource, &buf, len);

	if (err)
		fprintf(stderr, "  pp_otlp_encode: %s\n", strerror(-err));
	return err ? NULL : buf;
}

static void free_profiles(struct pp_profile **profs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pp_profile_free(profs[i]);
}

/* ---- validity of one request, by the §8 index rules ---- */

struct validity {
	int problems;
	bool *used[7];
	size_t n[7];
};

enum { MAP, LOC, FN, LINK, STR, ATTR, STACK };
static const char *const table_names[] = {"mapping", "location",  "function", "link",
					  "string",  "attribute", "stack"};

static void use(struct validity *v, int t, int32_t i, bool zero_ok, const char *what)
{
	if (i < 0 || (size_t)i >= v->n[t] || (!zero_ok && i == 0)) {
		fprintf(stderr, "  %s: index %d out of range of the %s table (%zu)\n", what, i,
			table_names[t], v->n[t]);
		v->problems++;
		return;
	}
	v->used[t][i] = true;
}

static void use_value(struct validity *v, const COMMON(AnyValue) * val)
{
	if (val && val->value_case == VALUE_CASE(STRING_VALUE_STRINDEX))
		use(v, STR, val->string_value_strindex, true, "attribute value");
}

/* Returns the number of problems found (printed). */
static int check_valid(const REQ *req)
{
	const PROF(ProfilesDictionary) *d = req->dictionary;
	struct validity v = {0};
	size_t zero_size[7];

	if (!d) {
		fprintf(stderr, "  no dictionary\n");
		return 1;
	}
	v.n[MAP] = d->n_mapping_table;
	v.n[LOC] = d->n_location_table;
	v.n[FN] = d->n_function_table;
	v.n[LINK] = d->n_link_table;
	v.n[STR] = d->n_string_table;
	v.n[ATTR] = d->n_attribute_table;
	v.n[STACK] = d->n_stack_table;
	for (int t = 0; t < 7; t++) {
		if (!v.n[t]) {
			fprintf(stderr, "  %s table empty\n", table_names[t]);
			return 1;
		}
		v.used[t] = calloc(v.n[t], sizeof(bool));
		if (!v.used[t])
			return 1;
		v.used[t][0] = true;
	}
	zero_size[MAP] = protobuf_c_message_get_packed_size(&d->mapping_table[0]->base);
	zero_size[LOC] = protobuf_c_message_get_packed_size(&d->location_table[0]->base);
	zero_size[FN] = protobuf_c_message_get_packed_size(&d->function_table[0]->base);
	zero_size[LINK] = d->link_table[0]->trace_id.len == 16 &&
				  d->link_table[0]->span_id.len == 8 &&
				  !memcmp(d->link_table[0]->trace_id.data,
					  "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) &&
				  !memcmp(d->link_table[0]->span_id.data, "\0\0\0\0\0\0\0\0", 8)
			      ? 0
			      : 1;
	zero_size[STR] = strlen(d->string_table[0]);
	zero_size[ATTR] = protobuf_c_message_get_packed_size(&d->attribute_table[0]->base);
	zero_size[STACK] = protobuf_c_message_get_packed_size(&d->stack_table[0]->base);
	for (int t = 0; t < 7; t++)
		if (zero_size[t]) {
			fprintf(stderr, "  %s[0] is not the zero value\n", table_names[t]);
			v.problems++;
		}
	for (size_t i = 1; i < d->n_attribute_table; i++) {
		use(&v, STR, d->attribute_table[i]->key_strindex, false, "attribute key");
		use(&v, STR, d->attribute_table[i]->unit_strindex, true, "attribute unit");
		use_value(&v, d->attribute_table[i]->value);
	}
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		use(&v, STR, d->mapping_table[i]->filename_strindex, true, "mapping filename");
		for (size_t j = 0; j < d->mapping_table[i]->n_attribute_indices; j++)
			use(&v, ATTR, d->mapping_table[i]->attribute_indices[j], false, "mapping");
	}
	for (size_t i = 1; i < d->n_function_table; i++) {
		use(&v, STR, d->function_table[i]->name_strindex, true, "function name");
		use(&v, STR, d->function_table[i]->system_name_strindex, true, "function");
		use(&v, STR, d->function_table[i]->filename_strindex, true, "function file");
	}
	for (size_t i = 1; i < d->n_location_table; i++) {
		const PROF(Location) *l = d->location_table[i];

		use(&v, MAP, l->mapping_index, true, "location mapping");
		for (size_t j = 0; j < l->n_lines; j++)
			use(&v, FN, l->lines[j]->function_index, false, "location line");
		for (size_t j = 0; j < l->n_attribute_indices; j++)
			use(&v, ATTR, l->attribute_indices[j], false, "location");
	}
	for (size_t i = 1; i < d->n_stack_table; i++)
		for (size_t j = 0; j < d->stack_table[i]->n_location_indices; j++)
			use(&v, LOC, d->stack_table[i]->location_indices[j], false, "stack");
	for (size_t r = 0; r < req->n_resource_profiles; r++) {
		const PROF(ResourceProfiles) *rp = req->resource_profiles[r];

		for (size_t s = 0; s < rp->n_scope_profiles; s++) {
			const PROF(ScopeProfiles) *sp = rp->scope_profiles[s];

			for (size_t p = 0; p < sp->n_profiles; p++) {
				const PROF(Profile) *pr = sp->profiles[p];

				use(&v, STR, pr->sample_type->type_strindex, true, "sample_type");
				use(&v, STR, pr->sample_type->unit_strindex, true, "sample_type");
				use(&v, STR, pr->period_type->type_strindex, true, "period_type");
				use(&v, STR, pr->period_type->unit_strindex, true, "period_type");
				for (size_t i = 0; i < pr->n_samples; i++) {
					const PROF(Sample) *sm = pr->samples[i];

					use(&v, STACK, sm->stack_index, true, "sample stack");
					use(&v, LINK, sm->link_index, true, "sample link");
					for (size_t j = 0; j < sm->n_attribute_indices; j++)
						use(&v, ATTR, sm->attribute_indices[j], false,
						    "sample attribute");
				}
			}
		}
	}
	for (int t = 0; t < 7; t++) {
		for (size_t i = 1; i < v.n[t]; i++)
			if (t != LINK && !v.used[t][i]) {
				fprintf(stderr, "  %s[%zu] is referred to by nothing\n",
					table_names[t], i);
				v.problems++;
			}
		free(v.used[t]);
	}
	return v.problems;
}

/* ---- every sample as one resolved line ---- */

struct lines {
	char **v;
	size_t n, cap;
};

static const char *str(const PROF(ProfilesDictionary) * d, int32_t i)
{
	return i >= 0 && (size_t)i < d->n_string_table ? d->string_table[i] : "<bad string>";
}

static void put_value(FILE *f, const PROF(ProfilesDictionary) * d, const COMMON(AnyValue) * v)
{
	if (!v)
		fputs("<none>", f);
	else if (v->value_case == VALUE_CASE(STRING_VALUE))
		fprintf(f, "\"%s\"", v->string_value);
	else if (v->value_case == VALUE_CASE(STRING_VALUE_STRINDEX))
		fprintf(f, "\"%s\"", str(d, v->string_value_strindex));
	else if (v->value_case == VALUE_CASE(INT_VALUE))
		fprintf(f, "%lld", (long long)v->int_value);
	else
		fprintf(f, "<case %d>", (int)v->value_case);
}

static void put_attrs(FILE *f, const PROF(ProfilesDictionary) * d, const int32_t *idx, size_t n)
{
	fputc('{', f);
	for (size_t i = 0; i < n; i++) {
		const PROF(KeyValueAndUnit) *a = d->attribute_table[idx[i]];

		fprintf(f, "%s=", str(d, a->key_strindex));
		put_value(f, d, a->value);
		fprintf(f, "[%s];", str(d, a->unit_strindex));
	}
	fputc('}', f);
}

/* Appends one line per sample of req; false on a malformed reference. */
static bool resolve(const REQ *req, struct lines *out)
{
	const PROF(ProfilesDictionary) *d = req->dictionary;

	if (!d)
		return false;
	for (size_t r = 0; r < req->n_resource_profiles; r++) {
		const PROF(ResourceProfiles) *rp = req->resource_profiles[r];

		for (size_t s = 0; s < rp->n_scope_profiles; s++) {
			const PROF(ScopeProfiles) *sp = rp->scope_profiles[s];

			for (size_t p = 0; p < sp->n_profiles; p++) {
				const PROF(Profile) *pr = sp->profiles[p];

				for (size_t i = 0; i < pr->n_samples; i++) {
					const PROF(Sample) *sm = pr->samples[i];
					const PROF(Stack) * st;
					char *line = NULL;
					size_t len = 0;
					FILE *f = open_memstream(&line, &len);

					if (!f)
						return false;
					fputs("resource{", f);
					for (size_t a = 0;
					     rp->resource && a < rp->resource->n_attributes; a++) {
						fprintf(f, "%s=", rp->resource->attributes[a]->key);
						put_value(f, d, rp->resource->attributes[a]->value);
						fputc(';', f);
					}
					fprintf(f, "} scope=%s/%s",
						sp->scope ? sp->scope->name : "",
						sp->scope ? sp->scope->version : "");
					fprintf(f,
						" profile{%s/%s period %s/%s %lld t=%llu d=%llu "
						"pattrs=",
						str(d, pr->sample_type->type_strindex),
						str(d, pr->sample_type->unit_strindex),
						str(d, pr->period_type->type_strindex),
						str(d, pr->period_type->unit_strindex),
						(long long)pr->period,
						(unsigned long long)pr->time_unix_nano,
						(unsigned long long)pr->duration_nano);
					put_attrs(f, d, pr->attribute_indices,
						  pr->n_attribute_indices);
					fputs("} stack[", f);
					st = d->stack_table[sm->stack_index];
					for (size_t k = 0; k < st->n_location_indices; k++) {
						const PROF(Location) *l =
						    d->location_table[st->location_indices[k]];
						const PROF(Mapping) *m =
						    d->mapping_table[l->mapping_index];

						fprintf(f, "%#llx", (unsigned long long)l->address);
						for (size_t j = 0; j < l->n_lines; j++)
							fprintf(
							    f, " %s",
							    str(d, d->function_table
								       [l->lines[j]->function_index]
									   ->name_strindex));
						put_attrs(f, d, l->attribute_indices,
							  l->n_attribute_indices);
						fprintf(f, " in %s %#llx-%#llx+%#llx",
							str(d, m->filename_strindex),
							(unsigned long long)m->memory_start,
							(unsigned long long)m->memory_limit,
							(unsigned long long)m->file_offset);
						put_attrs(f, d, m->attribute_indices,
							  m->n_attribute_indices);
						fputs("; ", f);
					}
					fputs("] values", f);
					for (size_t k = 0; k < sm->n_values; k++)
						fprintf(f, " %lld", (long long)sm->values[k]);
					fputs(" ts", f);
					for (size_t k = 0; k < sm->n_timestamps_unix_nano; k++)
						fprintf(f, " %llu",
							(unsigned long long)
							    sm->timestamps_unix_nano[k]);
					fprintf(f, " link %d attrs", sm->link_index);
					put_attrs(f, d, sm->attribute_indices,
						  sm->n_attribute_indices);
					fclose(f);
					if (out->n == out->cap) {
						size_t cap = out->cap ? out->cap * 2 : 64;
						char **v = realloc(out->v, cap * sizeof(*v));

						if (!v) {
							free(line);
							return false;
						}
						out->v = v;
						out->cap = cap;
					}
					out->v[out->n++] = line;
				}
			}
		}
	}
	return true;
}

static void lines_free(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether a and b hold the same lines, as multisets (both get sorted). */
static bool same_lines(struct lines *a, struct lines *b)
{
	if (a->n != b->n) {
		fprintf(stderr, "  %zu samples vs %zu\n", a->n, b->n);
		return false;
	}
	qsort(a->v, a->n, sizeof(*a->v), cmp_str);
	qsort(b->v, b->n, sizeof(*b->v), cmp_str);
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i])) {
			fprintf(stderr, "  sample differs:\n    %s\n    %s\n", a->v[i], b->v[i]);
			return false;
		}
	return true;
}

static REQ *unpack(const uint8_t *buf, size_t len)
{
	return REQ_FN(export_profiles_service_request__unpack)(NULL, len, buf);
}

static void req_free(REQ *r)
{
	if (r)
		REQ_FN(export_profiles_service_request__free_unpacked)(r, NULL);
}

static size_t req_samples(const REQ *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n_resource_profiles; i++)
		for (size_t s = 0; s < r->resource_profiles[i]->n_scope_profiles; s++)
			for (size_t p = 0;
			     p < r->resource_profiles[i]->scope_profiles[s]->n_profiles; p++)
				n += r->resource_profiles[i]
					 ->scope_profiles[s]
					 ->profiles[p]
					 ->n_samples;
	return n;
}

/* Packed bytes of a resource, to compare two of them exactly. */
static bool same_resource(const PROF(ResourceProfiles) * a, const PROF(ResourceProfiles) * b)
{
	size_t la, lb;
	uint8_t *ba, *bb;
	bool same;

	if (!a->resource || !b->resource)
		return false;
	la = protobuf_c_message_get_packed_size(&a->resource->base);
	lb = protobuf_c_message_get_packed_size(&b->resource->base);
	if (la != lb || !la)
		return false;
	ba = malloc(la);
	bb = malloc(lb);
	same = ba && bb && protobuf_c_message_pack(&a->resource->base, ba) == la &&
	       protobuf_c_message_pack(&b->resource->base, bb) == lb && !memcmp(ba, bb, la);
	free(ba);
	free(bb);
	return same;
}

/*
 * Splits buf, checks both halves are valid and together hold exactly the samples of buf.
 * The halves are returned unpacked (freed by the caller) for further checks.
 */
static bool split_and_check(const uint8_t *buf, size_t len, REQ **h1, REQ **h2)
{
	uint8_t *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	struct lines orig = {0}, halves = {0};
	REQ *o = unpack(buf, len);
	bool ok = false;
	int ret = pp_otlp_split_request(buf, len, &a, &la, &b, &lb);

	*h1 = *h2 = NULL;
	if (ret || !o) {
		fprintf(stderr, "  split: %s\n", strerror(-ret));
		goto out;
	}
	*h1 = unpack(a, la);
	*h2 = unpack(b, lb);
	if (!*h1 || !*h2) {
		fprintf(stderr, "  a half does not unpack\n");
		goto out;
	}
	if (check_valid(*h1) || check_valid(*h2))
		goto out;
	if (!req_samples(*h1) || !req_samples(*h2)) {
		fprintf(stderr, "  a half has no samples\n");
		goto out;
	}
	ok = resolve(o, &orig) && resolve(*h1, &halves) && resolve(*h2, &halves) &&
	     same_lines(&orig, &halves);
out:
	req_free(o);
	free(a);
	free(b);
	lines_free(&orig);
	lines_free(&halves);
	return ok;
}

/* ---- cases ---- */

TEST(two_processes_split_by_resource)
{
	struct pp_profile *profs[2] = {pp_profile_new(&cpu_desc), pp_profile_new(&cycles_desc)};
	uint8_t *buf = NULL;
	size_t len = 0;
	REQ *o = NULL, *h1 = NULL, *h2 = NULL;

	REQUIRE(profs[0] && profs[1]);
	REQUIRE(add_samples(profs[0], 100, "app", 12, 0) == 0);
	REQUIRE(add_samples(profs[0], 200, "db", 7, 50) == 0);
	REQUIRE(add_samples(profs[1], 100, "app", 3, 90) == 0);
	buf = encode(profs, 2, &len);
	REQUIRE(buf);
	o = unpack(buf, len);
	REQUIRE(o);
	REQUIRE(o->n_resource_profiles == 2);
	CHECK_EQ_U64(check_valid(o), 0);
	CHECK(split_and_check(buf, len, &h1, &h2));
	if (h1 && h2) {
		/* one process each, whole, with its resource as it was */
		CHECK_EQ_U64(h1->n_resource_profiles, 1);
		CHECK_EQ_U64(h2->n_resource_profiles, 1);
		CHECK(same_resource(h1->resource_profiles[0], o->resource_profiles[0]));
		CHECK(same_resource(h2->resource_profiles[0], o->resource_profiles[1]));
		CHECK_EQ_U64(req_samples(h1), 15);
		CHECK_EQ_U64(req_samples(h2), 7);
		/* the app keeps both of its profiles; the db half has only cpu-clock */
		CHECK_EQ_U64(h1->resource_profiles[0]->scope_profiles[0]->n_profiles, 2);
		CHECK_EQ_U64(h2->resource_profiles[0]->scope_profiles[0]->n_profiles, 1);
		/* pruned: the db half names none of the app's functions */
		CHECK(h2->dictionary->n_string_table < o->dictionary->n_string_table);
		CHECK(h2->dictionary->n_stack_table == 8); /* 7 stacks + the zero one */
		CHECK(h1->dictionary->n_stack_table == 16);
	}
	req_free(o);
	req_free(h1);
	req_free(h2);
	free(buf);
	free_profiles(profs, 2);
}

TEST(one_process_split_by_samples)
{
	struct pp_profile *profs[2] = {pp_profile_new(&cpu_desc), pp_profile_new(&cycles_desc)};
	uint8_t *buf = NULL, *a = NULL, *b = NULL;
	size_t len = 0, la = 0, lb = 0;
	REQ *o = NULL, *h1 = NULL, *h2 = NULL;

	REQUIRE(profs[0] && profs[1]);
	REQUIRE(add_samples(profs[0], 300, "svc", 41, 0) == 0);
	REQUIRE(add_samples(profs[1], 300, "svc", 9, 100) == 0);
	buf = encode(profs, 2, &len);
	REQUIRE(buf);
	o = unpack(buf, len);
	REQUIRE(o);
	REQUIRE(o->n_resource_profiles == 1);
	REQUIRE(o->resource_profiles[0]->n_scope_profiles == 1);
	REQUIRE(o->resource_profiles[0]->scope_profiles[0]->n_profiles == 2);
	CHECK(split_and_check(buf, len, &h1, &h2));
	if (h1 && h2) {
		const PROF(ScopeProfiles) *s1 = h1->resource_profiles[0]->scope_profiles[0];
		const PROF(ScopeProfiles) *s2 = h2->resource_profiles[0]->scope_profiles[0];
		const PROF(Profile) *op = o->resource_profiles[0]->scope_profiles[0]->profiles[0];

		/* 50 samples: the first 25 of cpu-clock, then 16 of cpu-clock and 9 of cycles */
		CHECK_EQ_U64(req_samples(h1), 25);
		CHECK_EQ_U64(req_samples(h2), 25);
		REQUIRE(s1->n_profiles == 1 && s2->n_profiles == 2);
		CHECK_EQ_U64(s1->profiles[0]->n_samples, 25);
		CHECK_EQ_U64(s2->profiles[0]->n_samples, 16);
		CHECK_EQ_U64(s2->profiles[1]->n_samples, 9);
		/* both halves of the cpu-clock profile keep its metadata */
		CHECK_EQ_U64(s1->profiles[0]->time_unix_nano, op->time_unix_nano);
		CHECK_EQ_U64(s2->profiles[0]->duration_nano, op->duration_nano);
		CHECK_EQ_U64(s2->profiles[0]->period, op->period);
		CHECK_STR(h2->dictionary->string_table[s2->profiles[0]->period_type->type_strindex],
			  "cpu");
		CHECK_STR(h2->dictionary->string_table[s2->profiles[1]->period_type->type_strindex],
			  "cycles");
		CHECK(same_resource(h1->resource_profiles[0], o->resource_profiles[0]));
		CHECK(same_resource(h2->resource_profiles[0], o->resource_profiles[0]));
		CHECK_STR(s1->scope->name, "pebsprof");
		CHECK_STR(s2->scope->version, "0.1.0");
	}
	/* the halves are smaller than the request, each of them */
	REQUIRE(pp_otlp_split_request(buf, len, &a, &la, &b, &lb) == 0);
	CHECK(la < len && lb < len);
	CHECK(la + lb < len + len / 2); /* the dictionary is not sent twice whole */
	free(a);
	free(b);
	req_free(o);
	req_free(h1);
	req_free(h2);
	free(buf);
	free_profiles(profs, 2);
}

/* Split again and again, as repeated 413s would: it ends at single samples, none lost. */
TEST(split_down_to_single_samples)
{
	struct pp_profile *profs[2] = {pp_profile_new(&cpu_desc), pp_profile_new(&cycles_desc)};
	struct {
		uint8_t *buf;
		size_t len;
	} work[256];
	size_t nwork = 0, leaves = 0;
	struct lines orig = {0}, got = {0};
	uint8_t *buf = NULL;
	size_t len = 0;
	REQ *o;
	bool all_valid = true, leaf_single = true;

	REQUIRE(profs[0] && profs[1]);
	REQUIRE(add_samples(profs[0], 100, "app", 13, 0) == 0);
	REQUIRE(add_samples(profs[0], 200, "db", 5, 50) == 0);
	REQUIRE(add_samples(profs[0], 400, "cache", 1, 70) == 0);
	REQUIRE(add_samples(profs[1], 100, "app", 4, 90) == 0);
	buf = encode(profs, 2, &len);
	REQUIRE(buf);
	o = unpack(buf, len);
	REQUIRE(o && resolve(o, &orig));
	CHECK_EQ_U64(orig.n, 23);
	req_free(o);
	work[nwork].buf = buf;
	work[nwork++].len = len;
	while (nwork) {
		uint8_t *cur = work[nwork - 1].buf, *a = NULL, *b = NULL;
		size_t clen = work[nwork - 1].len, la = 0, lb = 0;
		int ret;

		nwork--;
		ret = pp_otlp_split_request(cur, clen, &a, &la, &b, &lb);
		if (ret == -E2BIG) {
			REQ *r = unpack(cur, clen);

			CHECK(a == NULL && b == NULL);
			leaves++;
			if (!r || check_valid(r) || !resolve(r, &got))
				all_valid = false;
			if (r && req_samples(r) != 1)
				leaf_single = false;
			req_free(r);
		} else {
			CHECK_EQ_U64(ret, 0);
			if (!ret && nwork + 2 <= sizeof(work) / sizeof(work[0])) {
				work[nwork].buf = a;
				work[nwork++].len = la;
				work[nwork].buf = b;
				work[nwork++].len = lb;
				a = b = NULL;
			}
			free(a);
			free(b);
		}
		free(cur);
	}
	CHECK(all_valid);
	CHECK(leaf_single);
	CHECK_EQ_U64(leaves, 23);
	CHECK(same_lines(&orig, &got));
	lines_free(&orig);
	lines_free(&got);
	free_profiles(profs, 2);
}

TEST(cannot_split_or_bad_input)
{
	struct pp_profile *p = pp_profile_new(&cpu_desc);
	struct pp_profile *profs[1] = {p};
	uint8_t *buf = NULL, *a = (uint8_t *)"x", *b = (uint8_t *)"y";
	size_t len = 0, la = 1, lb = 1;
	static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01};
	REQ *r;

	REQUIRE(p);
	REQUIRE(add_samples(p, 100, "app", 1, 0) == 0);
	buf = encode(profs, 1, &len);
	REQUIRE(buf);
	/* one sample: nothing smaller to send */
	CHECK_EQ_U64(pp_otlp_split_request(buf, len, &a, &la, &b, &lb), -E2BIG);
	CHECK(a == NULL && b == NULL && la == 0 && lb == 0);
	CHECK_EQ_U64(pp_otlp_split_request(garbage, sizeof(garbage), &a, &la, &b, &lb), -EINVAL);
	CHECK_EQ_U64(pp_otlp_split_request(NULL, 0, &a, &la, &b, &lb), -EINVAL);
	CHECK_EQ_U64(pp_otlp_split_request(buf, len, NULL, &la, &b, &lb), -EINVAL);
	/* an empty request (no resources) */
	CHECK_EQ_U64(pp_otlp_split_request((const uint8_t *)"", 0, &a, &la, &b, &lb), -E2BIG);
	free(buf);
	buf = NULL;

	/* a sample pointing past the stack table is refused, not followed */
	REQUIRE(add_samples(p, 100, "app", 4, 20) == 0);
	buf = encode(profs, 1, &len);
	REQUIRE(buf);
	r = unpack(buf, len);
	REQUIRE(r);
	r->resource_profiles[0]->scope_profiles[0]->profiles[0]->samples[3]->stack_index = 9999;
	free(buf);
	len = REQ_FN(export_profiles_service_request__get_packed_size)(r);
	buf = malloc(len);
	REQUIRE(buf);
	REQ_FN(export_profiles_service_request__pack)(r, buf);
	req_free(r);
	CHECK_EQ_U64(pp_otlp_split_request(buf, len, &a, &la, &b, &lb), -EINVAL);
	CHECK(a == NULL && b == NULL);
	free(buf);
	pp_profile_free(p);
}

TEST_LIST = {
    {"two_processes_split_by_resource", two_processes_split_by_resource},
    {"one_process_split_by_samples", one_process_split_by_samples},
    {"split_down_to_single_samples", split_down_to_single_samples},
    {"cannot_split_or_bad_input", cannot_split_or_bad_input},
};
TEST_MAIN()
