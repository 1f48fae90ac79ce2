/*
 * The protoc-c code generated from proto/opentelemetry/ links and round-trips an OTLP profiles
 * export request, and writes the v1.10/v1.11 field layout (checked against hand-encoded bytes,
 * since a renumbered Sample decodes silently wrong at the receiver).
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

/* The generated names are long; these only paste the package prefix on. */
#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define PROF_INIT(x) OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__##x##__INIT
#define COMMON(x) Opentelemetry__Proto__Common__V1__##x
#define COMMON_INIT(x) OPENTELEMETRY__PROTO__COMMON__V1__##x##__INIT
#define SVC(x) Opentelemetry__Proto__Collector__Profiles__V1development__##x
#define SVC_FN(x) opentelemetry__proto__collector__profiles__v1development__##x

#define TS0 UINT64_C(1767225600000000000) /* 2026-01-01T00:00:00Z */

static char *strings[] = {"",	  "samples",	  "count",     "cpu",	       "nanoseconds",
			  "main", "/usr/bin/app", "thread.id", "service.name", "app"};

/* Builds a minimal but complete request on the stack and packs it into a malloc'd buffer. */
static uint8_t *pack_request(size_t *len)
{
	/* Dictionary: every table has its zero entry at index 0. */
	PROF(Mapping) map0 = PROF_INIT(MAPPING), map1 = PROF_INIT(MAPPING);
	map1.memory_start = 0x400000;
	map1.memory_limit = 0x500000;
	map1.file_offset = 0x1000;
	map1.filename_strindex = 6;
	PROF(Mapping) * maps[] = {&map0, &map1};

	PROF(Function) fn0 = PROF_INIT(FUNCTION), fn1 = PROF_INIT(FUNCTION);
	fn1.name_strindex = 5;
	fn1.system_name_strindex = 5;
	fn1.filename_strindex = 6;
	fn1.start_line = 10;
	PROF(Function) * fns[] = {&fn0, &fn1};

	PROF(Line) line = PROF_INIT(LINE);
	line.function_index = 1;
	line.line = 12;
	line.column = 3;
	PROF(Line) * lines[] = {&line};
	PROF(Location) loc0 = PROF_INIT(LOCATION), loc1 = PROF_INIT(LOCATION);
	loc1.mapping_index = 1;
	loc1.address = 0x401234;
	loc1.n_lines = 1;
	loc1.lines = lines;
	PROF(Location) * locs[] = {&loc0, &loc1};

	static uint8_t zero_trace[16], zero_span[8];
	PROF(Link) link0 = PROF_INIT(LINK);
	link0.trace_id = (ProtobufCBinaryData){sizeof(zero_trace), zero_trace};
	link0.span_id = (ProtobufCBinaryData){sizeof(zero_span), zero_span};
	PROF(Link) * links[] = {&link0};

	COMMON(AnyValue) tid = COMMON_INIT(ANY_VALUE);
	tid.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	tid.int_value = 4242;
	PROF(KeyValueAndUnit)
	attr0 = PROF_INIT(KEY_VALUE_AND_UNIT), attr1 = PROF_INIT(KEY_VALUE_AND_UNIT);
	attr1.key_strindex = 7;
	attr1.value = &tid;
	PROF(KeyValueAndUnit) * attrs[] = {&attr0, &attr1};

	int32_t stack1_locs[] = {1};
	PROF(Stack) stack0 = PROF_INIT(STACK), stack1 = PROF_INIT(STACK);
	stack1.n_location_indices = 1;
	stack1.location_indices = stack1_locs;
	PROF(Stack) * stacks[] = {&stack0, &stack1};

	PROF(ProfilesDictionary) dict = PROF_INIT(PROFILES_DICTIONARY);
	dict.n_mapping_table = 2;
	dict.mapping_table = maps;
	dict.n_location_table = 2;
	dict.location_table = locs;
	dict.n_function_table = 2;
	dict.function_table = fns;
	dict.n_link_table = 1;
	dict.link_table = links;
	dict.n_string_table = sizeof(strings) / sizeof(strings[0]);
	dict.string_table = strings;
	dict.n_attribute_table = 2;
	dict.attribute_table = attrs;
	dict.n_stack_table = 2;
	dict.stack_table = stacks;

	/* One sample: stack 1, thread.id attribute, timestamps with per-event values. */
	int32_t sample_attrs[] = {1};
	int64_t values[] = {1, 3};
	uint64_t stamps[] = {TS0 + 100, TS0 + 200};
	PROF(Sample) sample = PROF_INIT(SAMPLE);
	sample.stack_index = 1;
	sample.n_attribute_indices = 1;
	sample.attribute_indices = sample_attrs;
	sample.n_values = 2;
	sample.values = values;
	sample.n_timestamps_unix_nano = 2;
	sample.timestamps_unix_nano = stamps;
	PROF(Sample) * samples[] = {&sample};

	PROF(ValueType) st = PROF_INIT(VALUE_TYPE), pt = PROF_INIT(VALUE_TYPE);
	st.type_strindex = 1;
	st.unit_strindex = 2;
	pt.type_strindex = 3;
	pt.unit_strindex = 4;
	static uint8_t pid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	PROF(Profile) prof = PROF_INIT(PROFILE);
	prof.sample_type = &st;
	prof.n_samples = 1;
	prof.samples = samples;
	prof.time_unix_nano = TS0;
	prof.duration_nano = 10000000000ull;
	prof.period_type = &pt;
	prof.period = 10000000;
	prof.profile_id = (ProtobufCBinaryData){sizeof(pid), pid};
	PROF(Profile) * profs[] = {&prof};

	COMMON(InstrumentationScope) scope = COMMON_INIT(INSTRUMENTATION_SCOPE);
	scope.name = "pebsprof";
	scope.version = "0.1";
	PROF(ScopeProfiles) sp = PROF_INIT(SCOPE_PROFILES);
	sp.scope = &scope;
	sp.n_profiles = 1;
	sp.profiles = profs;
	PROF(ScopeProfiles) * sps[] = {&sp};

	COMMON(AnyValue) svc = COMMON_INIT(ANY_VALUE);
	svc.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	svc.string_value = "app";
	COMMON(KeyValue) kv = COMMON_INIT(KEY_VALUE);
	kv.key = "service.name";
	kv.value = &svc;
	COMMON(KeyValue) * kvs[] = {&kv};
	Opentelemetry__Proto__Resource__V1__Resource res =
	    OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	res.n_attributes = 1;
	res.attributes = kvs;

	PROF(ResourceProfiles) rp = PROF_INIT(RESOURCE_PROFILES);
	rp.resource = &res;
	rp.n_scope_profiles = 1;
	rp.scope_profiles = sps;
	rp.schema_url = "https://opentelemetry.io/schemas/1.44.0";
	PROF(ResourceProfiles) * rps[] = {&rp};

	SVC(ExportProfilesServiceRequest)
	req =
	    OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	req.n_resource_profiles = 1;
	req.resource_profiles = rps;
	req.dictionary = &dict;

	*len = SVC_FN(export_profiles_service_request__get_packed_size)(&req);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (buf && SVC_FN(export_profiles_service_request__pack)(&req, buf) != *len) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

TEST(request_round_trips)
{
	size_t len;
	uint8_t *buf = pack_request(&len);
	REQUIRE(buf);
	CHECK(len > 0);
	/* Field 1 (resource_profiles), length-delimited, comes first. */
	CHECK_EQ_U64(buf[0], 0x0a);

	SVC(ExportProfilesServiceRequest) *req =
	    SVC_FN(export_profiles_service_request__unpack)(NULL, len, buf);
	free(buf);
	REQUIRE(req);

	REQUIRE(req->dictionary);
	PROF(ProfilesDictionary) *d = req->dictionary;
	CHECK_EQ_U64(d->n_string_table, sizeof(strings) / sizeof(strings[0]));
	REQUIRE(d->n_string_table >= 10);
	CHECK_STR(d->string_table[0], "");
	CHECK_STR(d->string_table[5], "main");
	CHECK_STR(d->string_table[9], "app");

	REQUIRE(d->n_mapping_table == 2);
	CHECK_EQ_U64(d->mapping_table[0]->memory_start, 0);
	CHECK_EQ_U64(d->mapping_table[1]->memory_start, 0x400000);
	CHECK_EQ_U64(d->mapping_table[1]->memory_limit, 0x500000);
	CHECK_EQ_U64(d->mapping_table[1]->file_offset, 0x1000);
	CHECK_EQ_U64(d->mapping_table[1]->filename_strindex, 6);

	REQUIRE(d->n_location_table == 2);
	CHECK_EQ_U64(d->location_table[0]->n_lines, 0);
	PROF(Location) *loc = d->location_table[1];
	CHECK_EQ_U64(loc->mapping_index, 1);
	CHECK_EQ_U64(loc->address, 0x401234);
	REQUIRE(loc->n_lines == 1);
	CHECK_EQ_U64(loc->lines[0]->function_index, 1);
	CHECK_EQ_U64(loc->lines[0]->line, 12);
	CHECK_EQ_U64(loc->lines[0]->column, 3);

	REQUIRE(d->n_function_table == 2);
	CHECK_EQ_U64(d->function_table[1]->name_strindex, 5);
	CHECK_EQ_U64(d->function_table[1]->filename_strindex, 6);
	CHECK_EQ_U64(d->function_table[1]->start_line, 10);

	REQUIRE(d->n_link_table == 1);
	CHECK_EQ_U64(d->link_table[0]->trace_id.len, 16);
	CHECK_EQ_U64(d->link_table[0]->span_id.len, 8);

	REQUIRE(d->n_attribute_table == 2);
	CHECK(d->attribute_table[0]->value == NULL);
	CHECK_EQ_U64(d->attribute_table[1]->key_strindex, 7);
	REQUIRE(d->attribute_table[1]->value);
	CHECK_EQ_U64(d->attribute_table[1]->value->value_case,
		     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE);
	CHECK_EQ_U64(d->attribute_table[1]->value->int_value, 4242);

	REQUIRE(d->n_stack_table == 2);
	CHECK_EQ_U64(d->stack_table[0]->n_location_indices, 0);
	REQUIRE(d->stack_table[1]->n_location_indices == 1);
	CHECK_EQ_U64(d->stack_table[1]->location_indices[0], 1);

	REQUIRE(req->n_resource_profiles == 1);
	PROF(ResourceProfiles) *rp = req->resource_profiles[0];
	CHECK_STR(rp->schema_url, "https://opentelemetry.io/schemas/1.44.0");
	REQUIRE(rp->resource && rp->resource->n_attributes == 1);
	CHECK_STR(rp->resource->attributes[0]->key, "service.name");
	REQUIRE(rp->resource->attributes[0]->value);
	CHECK_EQ_U64(rp->resource->attributes[0]->value->value_case,
		     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
	CHECK_STR(rp->resource->attributes[0]->value->string_value, "app");

	REQUIRE(rp->n_scope_profiles == 1);
	PROF(ScopeProfiles) *sp = rp->scope_profiles[0];
	REQUIRE(sp->scope);
	CHECK_STR(sp->scope->name, "pebsprof");
	CHECK_STR(sp->scope->version, "0.1");
	REQUIRE(sp->n_profiles == 1);

	PROF(Profile) *p = sp->profiles[0];
	REQUIRE(p->sample_type && p->period_type);
	CHECK_EQ_U64(p->sample_type->type_strindex, 1);
	CHECK_EQ_U64(p->sample_type->unit_strindex, 2);
	CHECK_EQ_U64(p->period_type->type_strindex, 3);
	CHECK_EQ_U64(p->period_type->unit_strindex, 4);
	CHECK_EQ_U64(p->period, 10000000);
	CHECK_EQ_U64(p->time_unix_nano, TS0);
	CHECK_EQ_U64(p->duration_nano, 10000000000ull);
	REQUIRE(p->profile_id.len == 16);
	CHECK_EQ_U64(p->profile_id.data[0], 1);
	CHECK_EQ_U64(p->profile_id.data[15], 16);

	REQUIRE(p->n_samples == 1);
	PROF(Sample) *s = p->samples[0];
	CHECK_EQ_U64(s->stack_index, 1);
	CHECK_EQ_U64(s->link_index, 0);
	REQUIRE(s->n_attribute_indices == 1);
	CHECK_EQ_U64(s->attribute_indices[0], 1);
	REQUIRE(s->n_values == 2 && s->n_timestamps_unix_nano == 2);
	CHECK_EQ_U64(s->values[0], 1);
	CHECK_EQ_U64(s->values[1], 3);
	CHECK_EQ_U64(s->timestamps_unix_nano[0], TS0 + 100);
	CHECK_EQ_U64(s->timestamps_unix_nano[1], TS0 + 200);

	SVC_FN(export_profiles_service_request__free_unpacked)(req, NULL);
}

/* Truncated input must be rejected, not half-decoded. */
TEST(truncated_request_rejected)
{
	size_t len;
	uint8_t *buf = pack_request(&len);
	REQUIRE(buf);
	REQUIRE(len > 1);
	SVC(ExportProfilesServiceRequest) *req =
	    SVC_FN(export_profiles_service_request__unpack)(NULL, len - 1, buf);
	CHECK(req == NULL);
	if (req)
		SVC_FN(export_profiles_service_request__free_unpacked)(req, NULL);
	free(buf);
}

/*
 * Sample's exact bytes: stack_index=1 (field 1), attribute_indices=[2] (field 2, packed),
 * link_index=3 (field 3), values=[5] (field 4, packed), timestamps=[0x0102030405060708]
 * (field 5, packed fixed64). This is the v1.10 layout; v1.9 had values at 2.
 */
TEST(sample_wire_layout)
{
	static const uint8_t want[] = {0x08, 0x01, 0x12, 0x01, 0x02, 0x18, 0x03, 0x22, 0x01, 0x05,
				       0x2a, 0x08, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
	int32_t attrs[] = {2};
	int64_t values[] = {5};
	uint64_t stamps[] = {0x0102030405060708ull};
	PROF(Sample) s = PROF_INIT(SAMPLE);
	s.stack_index = 1;
	s.n_attribute_indices = 1;
	s.attribute_indices = attrs;
	s.link_index = 3;
	s.n_values = 1;
	s.values = values;
	s.n_timestamps_unix_nano = 1;
	s.timestamps_unix_nano = stamps;

	uint8_t got[64];
	size_t n = opentelemetry__proto__profiles__v1development__sample__get_packed_size(&s);
	REQUIRE(n == sizeof(want));
	CHECK_EQ_U64(opentelemetry__proto__profiles__v1development__sample__pack(&s, got), n);
	CHECK(memcmp(got, want, sizeof(want)) == 0);

	/* Profile.time_unix_nano is fixed64 at field 3 (tag 0x19), attribute_indices packed at 11.
	 */
	int32_t pattrs[] = {1};
	PROF(Profile) p = PROF_INIT(PROFILE);
	p.time_unix_nano = 1;
	p.n_attribute_indices = 1;
	p.attribute_indices = pattrs;
	static const uint8_t pwant[] = {0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x5a, 0x01, 0x01};
	n = opentelemetry__proto__profiles__v1development__profile__get_packed_size(&p);
	REQUIRE(n == sizeof(pwant));
	opentelemetry__proto__profiles__v1development__profile__pack(&p, got);
	CHECK(memcmp(got, pwant, sizeof(pwant)) == 0);
}

/* A receiver's partial-success answer, hand-encoded: {partial_success{3, "bad"}}. */
TEST(response_decodes)
{
	static const uint8_t body[] = {0x0a, 0x07, 0x08, 0x03, 0x12, 0x03, 'b', 'a', 'd'};
	SVC(ExportProfilesServiceResponse) *resp =
	    SVC_FN(export_profiles_service_response__unpack)(NULL, sizeof(body), body);
	REQUIRE(resp);
	if (resp->partial_success) {
		CHECK_EQ_U64(resp->partial_success->rejected_profiles, 3);
		CHECK_STR(resp->partial_success->error_message, "bad");
	} else {
		CHECK(resp->partial_success != NULL);
	}
	SVC_FN(export_profiles_service_response__free_unpacked)(resp, NULL);

	/* An empty body is a full success: no partial_success. */
	resp = SVC_FN(export_profiles_service_response__unpack)(NULL, 0, body);
	REQUIRE(resp);
	CHECK(resp->partial_success == NULL);
	SVC_FN(export_profiles_service_response__free_unpacked)(resp, NULL);
}

TEST_LIST = {
    {"request_round_trips", request_round_trips},
    {"truncated_request_rejected", truncated_request_rejected},
    {"sample_wire_layout", sample_wire_layout},
    {"response_decodes", response_decodes},
};
TEST_MAIN()
