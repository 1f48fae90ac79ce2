/*
 * Structured fuzz target for the OTLP encoder: input bytes drive a small build of one to
 * three profiles (mappings, locations, samples over a few pids with odd names and labels)
 * and an OTEL_RESOURCE_ATTRIBUTES string; the profiles are encoded, unpacked with
 * protobuf-c and checked: index 0 zero entries, every index in range, one value per
 * sample, the values summing to the profiles' totals, service.name on every resource.
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"

#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define VALUE_CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define REQ Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
#define REQ_FN(x) opentelemetry__proto__collector__profiles__v1development__##x

/* A short string from the input; may hold any byte but NUL. */
static void str(struct input *in, char *out, size_t outsz)
{
	input_str(in, 16, out, outsz);
}

#define FAIL(why)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "fuzz_otlp_encode: %s\n", why);                                    \
		abort();                                                                           \
	} while (0)

#define IN(i, n) ((i) >= 0 && (size_t)(i) < (n))

static void build(struct input *in, struct pp_profile *p)
{
	for (int ops = 0; in->i < in->n && ops < 256; ops++) {
		char a[16], b[16];
		uint8_t op = byte(in);

		if (op == 0xff) /* next profile */
			return;
		switch (op % 3) {
		case 0: {
			struct pp_mapping_info m = {.filename = a, .build_id = b};

			m.start = byte(in) ? u64(in) : 0;
			m.limit = m.start + byte(in) * 4096u;
			m.file_offset = byte(in) * 4096u;
			str(in, a, sizeof(a));
			str(in, b, sizeof(b));
			if (!pp_profile_intern_mapping(p, &m))
				FAIL("intern_mapping failed");
			break;
		}
		case 1: {
			struct pp_location_info l = {.function = a};

			l.mapping_id = byte(in) % (pp_profile_mapping_count(p) + 1);
			l.kind = (enum pp_frame_kind)(1 + byte(in) % 3);
			l.address = byte(in) & 1 ? u64(in) : byte(in);
			str(in, a, sizeof(a));
			if (byte(in) & 1)
				a[0] = '['; /* placeholders take another path */
			if (!pp_profile_intern_location(p, &l))
				FAIL("intern_location failed");
			break;
		}
		default: {
			struct pp_label labels[PP_SAMPLE_MAX_LABELS];
			char kv[PP_SAMPLE_MAX_LABELS][2][16];
			uint32_t locs[8];
			uint8_t pt;
			struct pp_sample_info s = {
			    .locations = locs, .thread_name = a, .process_name = b};
			size_t nlocs = pp_profile_location_count(p);

			s.nlocations = nlocs ? byte(in) % 8 : 0;
			for (uint32_t j = 0; j < s.nlocations; j++)
				locs[j] = 1 + byte(in) % (uint32_t)nlocs;
			s.nlabels = byte(in) % (PP_SAMPLE_MAX_LABELS + 1);
			for (uint32_t j = 0; j < s.nlabels; j++) {
				str(in, kv[j][0], sizeof(kv[j][0]));
				str(in, kv[j][1], sizeof(kv[j][1]));
				labels[j].key = kv[j][0];
				labels[j].value = kv[j][1];
			}
			s.labels = labels;
			/* the bytes' high bits: what ran and what the sample leaves out */
			pt = byte(in);
			s.pid = pt % 4;
			s.process_kind = (pt >> 2) % 3;
			pt = byte(in);
			s.tid = pt % 4;
			s.hidden = (pt >> 2) & (PP_SAMPLE_HIDE_THREAD | PP_SAMPLE_HIDE_PID);
			str(in, a, sizeof(a));
			str(in, b, sizeof(b));
			s.count = byte(in);
			s.value = s.count * 1000;
			s.first_time_unix_ns = byte(in) & 1 ? u64(in) : 0;
			if (pp_profile_add_sample(p, &s))
				FAIL("add_sample failed");
			break;
		}
		}
	}
}

static void check(const REQ *r, uint64_t want_total)
{
	const PROF(ProfilesDictionary) *d = r->dictionary;
	uint64_t total = 0;

	if (!d || !d->n_string_table || !d->n_mapping_table || !d->n_location_table ||
	    !d->n_function_table || !d->n_link_table || !d->n_attribute_table || !d->n_stack_table)
		FAIL("a dictionary table lacks its zero entry");
	if (d->string_table[0][0] || d->mapping_table[0]->filename_strindex ||
	    d->mapping_table[0]->memory_limit || d->location_table[0]->address ||
	    d->location_table[0]->n_lines || d->function_table[0]->name_strindex ||
	    d->attribute_table[0]->value || d->stack_table[0]->n_location_indices)
		FAIL("index 0 is not the zero value");
	for (size_t i = 1; i < d->n_attribute_table; i++) {
		const PROF(KeyValueAndUnit) *a = d->attribute_table[i];

		if (!IN(a->key_strindex, d->n_string_table) || !a->key_strindex || !a->value ||
		    (a->value->value_case != VALUE_CASE(STRING_VALUE) &&
		     a->value->value_case != VALUE_CASE(INT_VALUE)))
			FAIL("bad attribute");
	}
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		const PROF(Mapping) *m = d->mapping_table[i];

		if (!IN(m->filename_strindex, d->n_string_table))
			FAIL("mapping filename out of range");
		for (size_t k = 0; k < m->n_attribute_indices; k++)
			if (!IN(m->attribute_indices[k], d->n_attribute_table) ||
			    !m->attribute_indices[k])
				FAIL("mapping attribute out of range");
	}
	for (size_t i = 1; i < d->n_function_table; i++)
		if (!IN(d->function_table[i]->name_strindex, d->n_string_table) ||
		    !d->function_table[i]->name_strindex)
			FAIL("function name out of range");
	for (size_t i = 1; i < d->n_location_table; i++) {
		const PROF(Location) *l = d->location_table[i];

		if (!IN(l->mapping_index, d->n_mapping_table))
			FAIL("location mapping out of range");
		for (size_t k = 0; k < l->n_lines; k++)
			if (!IN(l->lines[k]->function_index, d->n_function_table) ||
			    !l->lines[k]->function_index)
				FAIL("location function out of range");
		for (size_t k = 0; k < l->n_attribute_indices; k++)
			if (!IN(l->attribute_indices[k], d->n_attribute_table))
				FAIL("location attribute out of range");
	}
	for (size_t i = 1; i < d->n_stack_table; i++) {
		const PROF(Stack) *s = d->stack_table[i];

		if (!s->n_location_indices)
			FAIL("empty stack past index 0");
		for (size_t k = 0; k < s->n_location_indices; k++)
			if (!IN(s->location_indices[k], d->n_location_table))
				FAIL("stack location out of range");
	}
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const PROF(ResourceProfiles) *rp = r->resource_profiles[i];
		int service = 0;

		for (size_t k = 0; rp->resource && k < rp->resource->n_attributes; k++) {
			const Opentelemetry__Proto__Common__V1__KeyValue *kv =
			    rp->resource->attributes[k];

			if (!kv->key[0] || kv->key_strindex || !kv->value)
				FAIL("resource attribute not inline");
			service += !strcmp(kv->key, "service.name");
		}
		if (service != 1)
			FAIL("resource without exactly one service.name");
		for (size_t s = 0; s < rp->n_scope_profiles; s++) {
			const PROF(ScopeProfiles) *sp = rp->scope_profiles[s];

			for (size_t p = 0; p < sp->n_profiles; p++) {
				const PROF(Profile) *pr = sp->profiles[p];

				if (!pr->sample_type || !pr->period_type || !pr->n_samples)
					FAIL("profile without types or samples");
				for (size_t k = 0; k < pr->n_samples; k++) {
					const PROF(Sample) *sm = pr->samples[k];

					if (sm->n_values != 1 || sm->n_timestamps_unix_nano > 1)
						FAIL("sample without exactly one value");
					if (!IN(sm->stack_index, d->n_stack_table) ||
					    !IN(sm->link_index, d->n_link_table))
						FAIL("sample index out of range");
					for (size_t a = 0; a < sm->n_attribute_indices; a++)
						if (!IN(sm->attribute_indices[a],
							d->n_attribute_table) ||
						    !sm->attribute_indices[a])
							FAIL("sample attribute out of range");
					total += (uint64_t)sm->values[0];
				}
			}
		}
	}
	if (total != want_total)
		FAIL("sample values do not sum to the profiles' totals");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const events[][3] = {
	    {"cpu-clock", "cpu", "nanoseconds"}, {"cycles", "cycles", "count"}, {"x", "", ""}};
	struct input in = {.d = data, .n = size};
	struct pp_profile *profs[3] = {0};
	struct pp_otlp_resource res = {0};
	struct pp_label *attrs = NULL;
	size_t nprofs = 1 + byte(&in) % 3, alen = byte(&in) % 48;
	uint64_t total = 0;
	uint8_t *buf = NULL;
	size_t len = 0;
	uint32_t nattrs = 0;
	char err[96], svc[16];
	REQ *r;
	int rc;

	/* OTEL_RESOURCE_ATTRIBUTES from the input; on error the encoder goes without. */
	if (alen > in.n - in.i)
		alen = in.n - in.i;
	rc = pp_otlp_parse_resource_attributes((const char *)in.d + in.i, alen, &attrs, &nattrs,
					       err, sizeof(err));
	in.i += alen;
	if (rc && (attrs || nattrs || !err[0]))
		FAIL("parser failed without a message or left a result");
	for (uint32_t i = 0; i < nattrs; i++)
		if (!attrs[i].key[0])
			FAIL("parser returned an empty key");
	res.extra_attrs = attrs;
	res.n_extra = nattrs;
	str(&in, svc, sizeof(svc));
	res.service_name = svc;
	res.host_name = byte(&in) & 1 ? "host" : NULL;

	for (size_t i = 0; i < nprofs; i++) {
		uint8_t e = byte(&in) % 3;
		struct pp_profile_desc d = {
		    .event = events[e][0], .value_type = events[e][1], .value_unit = events[e][2]};

		/* One statement each: the order of initializer evaluation is unspecified. */
		d.period = byte(&in);
		d.start_unix_ns = u64(&in);
		d.duration_ns = byte(&in);
		profs[i] = pp_profile_new(&d);
		if (!profs[i])
			FAIL("profile_new failed");
		build(&in, profs[i]);
		/* A CPU profile's values are sample counts; another event's, event counts. */
		total += pp_profile_is_cpu(&d) ? pp_profile_total_count(profs[i])
					       : pp_profile_total_value(profs[i]);
	}
	rc = pp_otlp_encode((const struct pp_profile *const *)profs, nprofs, &res, &buf, &len);
	if (rc)
		FAIL("encode failed");
	r = REQ_FN(export_profiles_service_request__unpack)(NULL, len, buf);
	if (!r)
		FAIL("unpack failed");
	check(r, total);
	REQ_FN(export_profiles_service_request__free_unpacked)(r, NULL);
	free(buf);
	pp_otlp_free_attributes(attrs);
	for (size_t i = 0; i < nprofs; i++)
		pp_profile_free(profs[i]);
	return 0;
}
