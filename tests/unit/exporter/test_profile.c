/*
 * Unit tests of the profile model: interning, sample aggregation, label handling, string
 * ownership, pointer stability, error cases, and that 1e5 samples aggregate quickly.
 */
#include <pebsprof/profile.h>

#include "check.h"

#include <errno.h>
#include <time.h>

static const struct pp_profile_desc desc = {
    .event = "cpu-clock",
    .value_type = "cpu",
    .value_unit = "nanoseconds",
    .period = 1000000,
    .start_unix_ns = 1700000000000000000ULL,
    .duration_ns = 10000000000ULL,
};

static uint32_t loc(struct pp_profile *p, uint32_t map, uint64_t addr, const char *fn,
		    enum pp_frame_kind kind)
{
	struct pp_location_info l = {
	    .mapping_id = map, .address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

static struct pp_sample_info sample(const uint32_t *locs, uint32_t n, uint32_t tid, uint64_t count)
{
	struct pp_sample_info s = {
	    .locations = locs,
	    .nlocations = n,
	    .pid = 100,
	    .tid = tid,
	    .thread_name = "worker",
	    .process_name = "app",
	    .count = count,
	    .value = count * 1000000,
	};
	return s;
}

TEST(new_copies_desc)
{
	char event[] = "cycles";
	struct pp_profile_desc d = {.event = event, .period = 5};
	struct pp_profile *p = pp_profile_new(&d);
	const struct pp_profile_desc *got;

	REQUIRE(p);
	event[0] = 'X';
	got = pp_profile_get_desc(p);
	CHECK_STR(got->event, "cycles");
	/* Defaults documented in profile.h: value type is the event, unit "count". */
	CHECK_STR(got->value_type, "cycles");
	CHECK_STR(got->value_unit, "count");
	CHECK_EQ_U64(got->period, 5);
	pp_profile_set_window(p, 42, 7);
	CHECK_EQ_U64(pp_profile_get_desc(p)->start_unix_ns, 42);
	CHECK_EQ_U64(pp_profile_get_desc(p)->duration_ns, 7);
	CHECK_EQ_U64(pp_profile_sample_count(p), 0);
	CHECK_EQ_U64(pp_profile_total_count(p), 0);
	pp_profile_free(p);
	pp_profile_free(NULL);

	errno = 0;
	CHECK(pp_profile_new(NULL) == NULL);
	CHECK(errno == EINVAL);
}

TEST(mapping_interning)
{
	struct pp_profile *p = pp_profile_new(&desc);
	char name[] = "/usr/bin/app";
	struct pp_mapping_info m = {.start = 0x400000,
				    .limit = 0x500000,
				    .file_offset = 0,
				    .filename = name,
				    .build_id = "abc123"};
	uint32_t a, b, c, d;

	REQUIRE(p);
	a = pp_profile_intern_mapping(p, &m);
	b = pp_profile_intern_mapping(p, &m);
	CHECK_EQ_U64(a, 1);
	CHECK_EQ_U64(b, 1);
	m.build_id = "abc124";
	c = pp_profile_intern_mapping(p, &m);
	CHECK_EQ_U64(c, 2);
	m.build_id = "abc123";
	m.file_offset = 0x1000;
	d = pp_profile_intern_mapping(p, &m);
	CHECK_EQ_U64(d, 3);
	CHECK_EQ_U64(pp_profile_mapping_count(p), 3);
	/* The profile owns its copy of the filename. */
	name[1] = 'X';
	CHECK_STR(pp_profile_get_mapping(p, 1)->filename, "/usr/bin/app");
	CHECK_STR(pp_profile_get_mapping(p, 2)->build_id, "abc124");
	CHECK_EQ_U64(pp_profile_get_mapping(p, 3)->file_offset, 0x1000);
	CHECK(pp_profile_get_mapping(p, 0) == NULL);
	CHECK(pp_profile_get_mapping(p, 4) == NULL);
	/* A NULL build id is the same as "". */
	m.build_id = NULL;
	a = pp_profile_intern_mapping(p, &m);
	m.build_id = "";
	CHECK_EQ_U64(pp_profile_intern_mapping(p, &m), a);
	pp_profile_free(p);
}

TEST(location_interning)
{
	struct pp_profile *p = pp_profile_new(&desc);
	struct pp_mapping_info m = {.start = 0x400000, .limit = 0x500000, .filename = "/bin/x"};
	char fn[] = "main";
	uint32_t map, a, b;

	REQUIRE(p);
	map = pp_profile_intern_mapping(p, &m);
	REQUIRE(map == 1);
	a = loc(p, map, 0x401000, fn, PP_FRAME_NATIVE);
	b = loc(p, map, 0x401000, "main", PP_FRAME_NATIVE);
	CHECK_EQ_U64(a, 1);
	CHECK_EQ_U64(b, 1);
	CHECK_EQ_U64(loc(p, map, 0x401001, "main", PP_FRAME_NATIVE), 2);
	CHECK_EQ_U64(loc(p, map, 0x401000, "main", PP_FRAME_KERNEL), 3);
	CHECK_EQ_U64(loc(p, 0, 0x401000, "main", PP_FRAME_NATIVE), 4);
	CHECK_EQ_U64(loc(p, map, 0x401000, "main2", PP_FRAME_NATIVE), 5);
	CHECK_EQ_U64(pp_profile_location_count(p), 5);
	fn[0] = 'X';
	CHECK_STR(pp_profile_get_location(p, 1)->function, "main");
	CHECK(pp_profile_get_location(p, 3)->kind == PP_FRAME_KERNEL);
	CHECK_EQ_U64(pp_profile_get_location(p, 2)->address, 0x401001);
	/* Function names are interned: equal names share one copy. */
	CHECK(pp_profile_get_location(p, 1)->function == pp_profile_get_location(p, 4)->function);

	/* Bad input: unknown mapping, no function name, unknown kind. */
	errno = 0;
	CHECK_EQ_U64(loc(p, 2, 0x1, "f", PP_FRAME_NATIVE), 0);
	CHECK(errno == EINVAL);
	errno = 0;
	CHECK_EQ_U64(loc(p, 1, 0x1, NULL, PP_FRAME_NATIVE), 0);
	CHECK(errno == EINVAL);
	errno = 0;
	CHECK_EQ_U64(loc(p, 1, 0x1, "f", (enum pp_frame_kind)9), 0);
	CHECK(errno == EINVAL);
	CHECK_EQ_U64(pp_profile_location_count(p), 5);
	pp_profile_free(p);
}

TEST(aggregation)
{
	struct pp_profile *p = pp_profile_new(&desc);
	uint32_t stack[3];
	struct pp_sample_info s;
	const struct pp_sample_info *got;

	REQUIRE(p);
	stack[0] = loc(p, 0, 0x30, "b", PP_FRAME_NATIVE);
	stack[1] = loc(p, 0, 0x20, "a", PP_FRAME_NATIVE);
	stack[2] = loc(p, 0, 0x10, "main", PP_FRAME_NATIVE);
	s = sample(stack, 3, 101, 1);
	s.first_time_unix_ns = 500;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.first_time_unix_ns = 300;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.first_time_unix_ns = 0; /* unknown time must not become the minimum */
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	CHECK_EQ_U64(pp_profile_sample_count(p), 1);
	got = pp_profile_get_sample(p, 0);
	REQUIRE(got);
	CHECK_EQ_U64(got->count, 3);
	CHECK_EQ_U64(got->value, 3000000);
	CHECK_EQ_U64(got->first_time_unix_ns, 300);
	CHECK_EQ_U64(got->nlocations, 3);
	CHECK_EQ_U64(got->locations[0], stack[0]);
	CHECK_EQ_U64(got->locations[2], stack[2]);

	/* Another tid, thread name, process name or a shorter stack: distinct samples. */
	s = sample(stack, 3, 102, 2);
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.thread_name = "other";
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.process_name = "other";
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s = sample(stack + 1, 2, 101, 4);
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.pid = 7;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	CHECK_EQ_U64(pp_profile_sample_count(p), 6);
	CHECK_EQ_U64(pp_profile_total_count(p), 3 + 2 + 2 + 2 + 4 + 4);
	CHECK_EQ_U64(pp_profile_total_value(p), (3 + 2 + 2 + 2 + 4 + 4) * 1000000ULL);
	CHECK(pp_profile_get_sample(p, 6) == NULL);
	pp_profile_free(p);
}

TEST(labels)
{
	struct pp_profile *p = pp_profile_new(&desc);
	struct pp_label l1[2] = {{"container", "web"}, {"pod", "web-1"}};
	struct pp_label l2[2] = {{"pod", "web-1"}, {"container", "web"}};
	struct pp_label l3[2] = {{"pod", "web-2"}, {"container", "web"}};
	char key[] = "zone", val[] = "a";
	struct pp_label l4[1] = {{key, val}};
	struct pp_label many[PP_SAMPLE_MAX_LABELS + 1];
	uint32_t st[1];
	struct pp_sample_info s;
	const struct pp_sample_info *got;

	REQUIRE(p);
	st[0] = loc(p, 0, 0x10, "main", PP_FRAME_NATIVE);
	s = sample(st, 1, 1, 1);
	s.labels = l1;
	s.nlabels = 2;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	/* The same label set in another order aggregates. */
	s.labels = l2;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	CHECK_EQ_U64(pp_profile_sample_count(p), 1);
	CHECK_EQ_U64(pp_profile_get_sample(p, 0)->count, 2);
	s.labels = l3;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.nlabels = 1; /* only the first: a subset is a different key */
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.nlabels = 0;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	CHECK_EQ_U64(pp_profile_sample_count(p), 4);
	s.labels = l4;
	s.nlabels = 1;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	key[0] = 'X';
	val[0] = 'X';
	got = pp_profile_get_sample(p, 4);
	REQUIRE(got && got->nlabels == 1);
	CHECK_STR(got->labels[0].key, "zone");
	CHECK_STR(got->labels[0].value, "a");
	got = pp_profile_get_sample(p, 0);
	REQUIRE(got->nlabels == 2);
	CHECK_STR(got->labels[0].key, "container");
	CHECK_STR(got->labels[1].value, "web-1");

	for (int i = 0; i <= PP_SAMPLE_MAX_LABELS; i++)
		many[i] = (struct pp_label){"k", "v"};
	s.labels = many;
	s.nlabels = PP_SAMPLE_MAX_LABELS + 1;
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	s.nlabels = PP_SAMPLE_MAX_LABELS;
	CHECK(pp_profile_add_sample(p, &s) == 0);
	many[0].value = NULL;
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	pp_profile_free(p);
}

TEST(bad_samples)
{
	struct pp_profile *p = pp_profile_new(&desc);
	uint32_t st[2];
	struct pp_sample_info s;

	REQUIRE(p);
	st[0] = loc(p, 0, 0x10, "main", PP_FRAME_NATIVE);
	st[1] = 2; /* not interned */
	s = sample(st, 2, 1, 1);
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	st[1] = 0;
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	s = sample(st, 1, 1, 1);
	s.thread_name = NULL;
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	s = sample(st, 1, 1, 1);
	s.process_name = NULL;
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	s = sample(NULL, 1, 1, 1);
	CHECK(pp_profile_add_sample(p, &s) == -EINVAL);
	CHECK(pp_profile_add_sample(p, NULL) == -EINVAL);
	CHECK(pp_profile_add_sample(NULL, &s) == -EINVAL);
	CHECK_EQ_U64(pp_profile_sample_count(p), 0);
	CHECK_EQ_U64(pp_profile_total_count(p), 0);
	/* An empty stack is allowed (pprof has samples without locations). */
	s = sample(NULL, 0, 1, 1);
	CHECK(pp_profile_add_sample(p, &s) == 0);
	CHECK_EQ_U64(pp_profile_sample_count(p), 1);
	pp_profile_free(p);
}

static double now_s(void)
{
	struct timespec ts;

	/* CPU time: a busy machine (the kernel matrix beside the tests) must not fail it */
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 2e4 distinct stacks of depth 8 over 2e3 functions, 2e5 adds: must stay fast and exact. */
TEST(many_samples)
{
	enum { NFUNC = 2000, NSTACK = 20000, NADD = 200000, DEPTH = 8 };
	struct pp_profile *p = pp_profile_new(&desc);
	static uint32_t ids[NFUNC];
	const struct pp_sample_info *first;
	double t0, t;
	char name[32];

	REQUIRE(p);
	for (int i = 0; i < NFUNC; i++) {
		snprintf(name, sizeof(name), "func_%d", i);
		ids[i] = loc(p, 0, 0x1000 + (uint64_t)i * 16, name, PP_FRAME_NATIVE);
		REQUIRE(ids[i] == (uint32_t)i + 1);
	}
	t0 = now_s();
	first = NULL;
	for (int i = 0; i < NADD; i++) {
		uint32_t st[DEPTH];
		int k = i % NSTACK;
		struct pp_sample_info s;

		for (int d = 0; d < DEPTH; d++)
			st[d] = ids[(k * 7 + d * 131 + k / 97) % NFUNC];
		st[0] = ids[k % NFUNC];
		st[1] = ids[(k / NFUNC) % NFUNC];
		s = sample(st, DEPTH, 1, 1);
		REQUIRE(pp_profile_add_sample(p, &s) == 0);
		if (i == 0)
			first = pp_profile_get_sample(p, 0);
	}
	t = now_s() - t0;
	CHECK_EQ_U64(pp_profile_sample_count(p), NSTACK);
	CHECK_EQ_U64(pp_profile_total_count(p), NADD);
	/* Earlier pointers stay valid while the profile grows. */
	CHECK(first == pp_profile_get_sample(p, 0));
	CHECK_EQ_U64(first->count, NADD / NSTACK);
	printf("  %d adds, %d distinct stacks: %.3f s of CPU\n", NADD, NSTACK, t);
	/* Linear takes about 1 s under the sanitizers; quadratic would take minutes. */
	CHECK(t < 30.0);
	pp_profile_free(p);
}

/* Memory events: latency sums aggregate like values, and count in the profile's total. */
TEST(latency_sums)
{
	struct pp_profile *p = pp_profile_new(&desc);
	uint32_t obj, fn, locs[2];
	struct pp_sample_info s;

	REQUIRE(p);
	obj = loc(p, 0, 0x4010, "table", PP_FRAME_DATA);
	fn = loc(p, 0, 0x1000, "f", PP_FRAME_NATIVE);
	REQUIRE(obj && fn);
	locs[0] = obj;
	locs[1] = fn;
	s = sample(locs, 2, 1, 1);
	s.latency = 120;
	CHECK(pp_profile_add_sample(p, &s) == 0);
	s.latency = 80;
	CHECK(pp_profile_add_sample(p, &s) == 0);
	s.latency = 0; /* a sample the kernel gave no latency for */
	CHECK(pp_profile_add_sample(p, &s) == 0);
	REQUIRE(pp_profile_sample_count(p) == 1);
	CHECK_EQ_U64(pp_profile_get_sample(p, 0)->count, 3);
	CHECK_EQ_U64(pp_profile_get_sample(p, 0)->latency, 200);
	CHECK_EQ_U64(pp_profile_total_latency(p), 200);
	CHECK_EQ_U64(pp_profile_total_latency(NULL), 0);
	pp_profile_free(p);
}

static const char *type_name_of(const char *value_type, char *buf, size_t len)
{
	struct pp_profile_desc d = {.event = value_type, .value_type = value_type};

	return pp_profile_type_name(&d, buf, len);
}

/* The names Pyroscope gets (profile.h): [a-zA-Z0-9_], and never one it files as another kind. */
TEST(type_names_for_pyroscope)
{
	static const struct {
		const char *value_type, *name;
	} cases[] = {
	    {"cpu", "process_cpu"},
	    {"cycles", "cycles"},
	    {"mem-loads", "mem_loads"},
	    {"mem-stores", "mem_stores"},
	    {"instructions", "instructions"},
	    {"cpu/event=0x3c,umask=0x0/", "event_0x3c_umask_0x0"},
	    {"cpu_core/mem-loads,ldlat=30/", "mem_loads_ldlat_30"},
	    {"cpu_atom/cycles/", "cycles"},
	    {"ibs_op/cnt_ctl=1/", "ibs_op_cnt_ctl_1"},
	    {"mem_load_retired.l3_miss", "mem_load_retired_l3_miss"},
	    {"cpu-cycles", "CPU_cycles"},     /* "cpu" would make it process_cpu */
	    {"cpu/", "CPU"},		      /* a PMU prefix with nothing after it */
	    {"l2_block_x", "l2_BLOCK_x"},     /* /ingest's block_ rule */
	    {"3rd-event", "event_3rd_event"}, /* no leading digit */
	    {"samples", "samples_events"},    /* /ingest maps this exact name */
	    {"--", "event"},
	    {"", "event"},
	};
	char buf[PP_PROFILE_TYPE_NAME_MAX], small[8];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_STR(type_name_of(cases[i].value_type, buf, sizeof(buf)), cases[i].name);
	/* Bounded by the buffer, still NUL-terminated. */
	CHECK_STR(type_name_of("mem-loads", small, sizeof(small)), "mem_loa");
	CHECK_STR(pp_profile_type_name(NULL, buf, sizeof(buf)), "event");
}

/* A fixed period is stated as is; with -F (no period) the window's mean, never 0. */
TEST(period_fixed_or_mean)
{
	struct pp_profile_desc d = {.event = "cycles", .value_type = "cycles", .period = 0};
	struct pp_location_info l = {.address = 0x10, .function = "f", .kind = PP_FRAME_NATIVE};
	uint32_t loc;
	struct pp_sample_info s = {
	    .nlocations = 1, .pid = 1, .tid = 1, .thread_name = "t", .process_name = "p"};
	struct pp_profile *p = pp_profile_new(&d);

	REQUIRE(p);
	CHECK_EQ_U64(pp_profile_period(p), 1); /* nothing sampled yet */
	loc = pp_profile_intern_location(p, &l);
	s.locations = &loc;
	s.count = 3;
	s.value = 3 * 200003;
	CHECK(pp_profile_add_sample(p, &s) == 0);
	s.tid = 2;
	s.count = 1;
	s.value = 400001;
	CHECK(pp_profile_add_sample(p, &s) == 0);
	CHECK_EQ_U64(pp_profile_period(p), (3 * 200003 + 400001) / 4);
	pp_profile_free(p);
	d.period = 100003;
	p = pp_profile_new(&d);
	REQUIRE(p);
	CHECK_EQ_U64(pp_profile_period(p), 100003);
	CHECK(pp_profile_is_cpu(&d) == 0);
	d.value_type = "cpu";
	CHECK(pp_profile_is_cpu(&d) == 1);
	pp_profile_free(p);
}

TEST_LIST = {
    {"type_names_for_pyroscope", type_names_for_pyroscope},
    {"period_fixed_or_mean", period_fixed_or_mean},
    {"latency_sums", latency_sums},
    {"new_copies_desc", new_copies_desc},
    {"mapping_interning", mapping_interning},
    {"location_interning", location_interning},
    {"aggregation", aggregation},
    {"labels", labels},
    {"bad_samples", bad_samples},
    {"many_samples", many_samples},
};
TEST_MAIN()
