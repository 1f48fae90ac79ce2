/*
 * Structured fuzz target for the exporter: input bytes drive a sequence of intern/add calls
 * (valid and invalid ids, odd names, too many labels), then the profile is encoded to pprof,
 * unpacked with protobuf-c and checked to round-trip; the text writers run over it too, and
 * the profile is cut for tiny backend limits (every sample must land in exactly one part,
 * each part within the limits unless a single sample is over them).
 */
#include <pebsprof/profile.h>
#include <pebsprof/split.h>
#include <pebsprof/writers.h>

#include "pprof/profile.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"

/* A short string from the input; may hold any byte but NUL. */
static void str(struct input *in, char *out, size_t outsz)
{
	input_str(in, 12, out, outsz);
}

#define FAIL(why)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "fuzz_profile_encode: %s\n", why);                                 \
		abort();                                                                           \
	} while (0)

static void check_encoding(const struct pp_profile *p)
{
	Perftools__Profiles__Profile *pr;
	uint64_t count = 0;
	uint8_t *buf = NULL;
	size_t len = 0;

	if (pp_pprof_encode(p, &buf, &len) != 0)
		FAIL("encode failed");
	pr = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	if (!pr)
		FAIL("unpack failed");
	if (pr->n_string_table == 0 || pr->string_table[0][0] != '\0')
		FAIL("string_table[0] is not empty");
	if (pr->n_sample != pp_profile_sample_count(p) ||
	    pr->n_location != pp_profile_location_count(p))
		FAIL("sample or location count differs");
	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];

		if (s->n_value != 2)
			FAIL("sample without two values");
		count += (uint64_t)s->value[0];
		for (size_t j = 0; j < s->n_location_id; j++) {
			if (s->location_id[j] == 0 || s->location_id[j] > pr->n_location)
				FAIL("location id out of range");
		}
		for (size_t j = 0; j < s->n_label; j++) {
			if ((size_t)s->label[j]->key >= pr->n_string_table ||
			    (size_t)s->label[j]->str >= pr->n_string_table)
				FAIL("label string index out of range");
		}
	}
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];

		if (l->mapping_id > pr->n_mapping || l->n_line != 1 ||
		    l->line[0]->function_id == 0 || l->line[0]->function_id > pr->n_function)
			FAIL("location refers out of range");
	}
	for (size_t i = 0; i < pr->n_function; i++) {
		if ((size_t)pr->function[i]->name >= pr->n_string_table)
			FAIL("function name out of range");
	}
	if (count != pp_profile_total_count(p))
		FAIL("sample counts do not sum to the total");
	perftools__profiles__profile__free_unpacked(pr, NULL);
}

/*
 * The profile Pyroscope sees of one OTLP resource in part (the fuzzer makes no container
 * resources: a process, pid and executable name, as the encoder groups them): its samples
 * encoded alone, within the limits unless it is one sample.
 */
static void check_resource(const struct pp_profile *part, const struct pp_sample_info *of,
			   size_t max_samples, size_t max_bytes)
{
	size_t n = pp_profile_sample_count(part), m = 0, len = 0;
	size_t *idx = calloc(n + 1, sizeof(*idx));
	struct pp_profile *sub;
	uint8_t *buf = NULL;

	if (!idx)
		FAIL("out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(part, i);

		if (s->pid == of->pid && strcmp(s->process_name, of->process_name) == 0)
			idx[m++] = i;
	}
	sub = pp_profile_subset_new(part, idx, m);
	if (!sub || pp_pprof_encode(sub, &buf, &len))
		FAIL("a resource of a part does not encode");
	if (m > max_samples || (len > max_bytes && m > 1))
		FAIL("a resource of a part over the limits");
	free(buf);
	free(idx);
	pp_profile_free(sub);
}

static void check_split(const struct pp_profile *p, enum pp_split_by by, size_t max_samples,
			size_t max_bytes, size_t max_request)
{
	struct pp_split_limits lim = {max_samples, max_bytes, max_request};
	struct pp_split s;
	uint64_t count = 0;
	size_t samples = 0;

	if (pp_split_profile(p, by, "svc", &lim, &s))
		FAIL("split failed");
	for (size_t i = 0; i < s.nparts; i++) {
		const struct pp_profile *part = s.parts[i].profile;
		size_t n = pp_profile_sample_count(part);
		uint8_t *buf = NULL;
		size_t len = 0;

		samples += n;
		count += pp_profile_total_count(part);
		if (by == PP_SPLIT_BY_SERVICE && (n > max_samples || !s.parts[i].service))
			FAIL("a push part over the sample limit or without a service");
		if (pp_pprof_encode(part, &buf, &len))
			FAIL("a part does not encode");
		free(buf);
		if (by == PP_SPLIT_BY_SERVICE && n > 1 &&
		    (len > max_bytes || (max_request && len > max_request)))
			FAIL("a push part of several samples over the byte limit");
		if (len > pp_pprof_size_bound(part, NULL, n))
			FAIL("the size bound is below the encoded size");
		/* over OTLP the limits hold for each resource of a part */
		for (size_t j = 0; by == PP_SPLIT_BY_RESOURCE && j < n; j++)
			check_resource(part, pp_profile_get_sample(part, j), max_samples,
				       max_request && max_request < max_bytes ? max_request
									      : max_bytes);
	}
	if (samples != pp_profile_sample_count(p) || count != pp_profile_total_count(p))
		FAIL("the parts do not hold every sample once");
	pp_split_fini(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* As the event ladder describes cpu-clock (value type "cpu"): two values per sample. */
	struct pp_profile_desc d = {
	    .event = "cpu-clock", .value_type = "cpu", .value_unit = "nanoseconds", .period = 1000};
	struct input in = {.d = data, .n = size};
	struct pp_profile *p = pp_profile_new(&d);
	uint64_t expect_count = 0;
	FILE *null;

	if (!p)
		return 0;
	for (int ops = 0; in.i < in.n && ops < 4096; ops++) {
		char a[16], b[16];

		switch (byte(&in) % 4) {
		case 0: {
			struct pp_mapping_info m = {.filename = a, .build_id = b};

			m.start = u64(&in), m.limit = m.start + byte(&in) * 4096;
			str(&in, a, sizeof(a));
			str(&in, b, sizeof(b));
			if (!pp_profile_intern_mapping(p, &m))
				FAIL("intern_mapping failed");
			break;
		}
		case 1: {
			struct pp_location_info l = {.function = a};
			uint32_t id;

			l.mapping_id = byte(&in) % (pp_profile_mapping_count(p) + 2);
			l.kind = (enum pp_frame_kind)(byte(&in) % 4);
			l.address = u64(&in);
			str(&in, a, sizeof(a));
			id = pp_profile_intern_location(p, &l);
			if (!id != (l.mapping_id > pp_profile_mapping_count(p) || l.kind == 0))
				FAIL("intern_location accepted bad input or refused good");
			break;
		}
		case 2: {
			struct pp_label labels[PP_SAMPLE_MAX_LABELS + 2];
			char kv[PP_SAMPLE_MAX_LABELS + 2][2][8];
			uint32_t locs[8];
			uint8_t pt;
			struct pp_sample_info s = {
			    .locations = locs, .thread_name = a, .process_name = b};
			int bad = 0, err;

			s.nlocations = byte(&in) % 8;
			for (uint32_t j = 0; j < s.nlocations; j++) {
				locs[j] = byte(&in) % (pp_profile_location_count(p) + 2);
				bad |= locs[j] == 0 || locs[j] > pp_profile_location_count(p);
			}
			s.nlabels = byte(&in) % (PP_SAMPLE_MAX_LABELS + 2);
			bad |= s.nlabels > PP_SAMPLE_MAX_LABELS;
			for (uint32_t j = 0; j < s.nlabels; j++) {
				str(&in, kv[j][0], sizeof(kv[j][0]));
				str(&in, kv[j][1], sizeof(kv[j][1]));
				labels[j].key = kv[j][0];
				labels[j].value = kv[j][1];
			}
			s.labels = labels;
			/* the bytes' high bits: what ran and what the sample leaves out */
			pt = byte(&in);
			s.pid = pt % 4;
			s.process_kind = (pt >> 2) % 3;
			pt = byte(&in);
			s.tid = pt % 4;
			s.hidden = (pt >> 2) & (PP_SAMPLE_HIDE_THREAD | PP_SAMPLE_HIDE_PID);
			str(&in, a, sizeof(a));
			str(&in, b, sizeof(b));
			s.count = byte(&in);
			s.value = s.count * 1000;
			s.first_time_unix_ns = byte(&in);
			err = pp_profile_add_sample(p, &s);
			if (bad ? err != -EINVAL : err != 0)
				FAIL("add_sample result does not match the input's validity");
			if (!err)
				expect_count += s.count;
			break;
		}
		default:
			pp_profile_set_window(p, u64(&in), byte(&in));
			break;
		}
	}
	if (pp_profile_total_count(p) != expect_count)
		FAIL("total count differs from the sum of accepted samples");
	check_encoding(p);
	check_split(p, PP_SPLIT_BY_RESOURCE, 3, 1024, 0);
	check_split(p, PP_SPLIT_BY_SERVICE, 2, 700, 0);
	/* requests packed within a burst: a piece within it too */
	check_split(p, PP_SPLIT_BY_RESOURCE, 3, 4096, 900);
	check_split(p, PP_SPLIT_BY_SERVICE, 2, 4096, 600);
	null = fopen("/dev/null", "w");
	if (null) {
		if (pp_folded_write(p, null) || pp_flamegraph_write_svg(p, null, "fuzz"))
			FAIL("text writer failed");
		pp_report_print_top(p, null, 10);
		fclose(null);
	}
	pp_profile_free(p);
	return 0;
}
