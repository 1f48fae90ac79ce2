/*
 * Unit tests of the folded-stacks writer: exact text for known profiles, merging of lines
 * that differ only in pid/tid/labels, kernel and data suffixes, and name sanitizing.
 */
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include "check.h"

#include <errno.h>
#include <unistd.h>

static uint32_t loc(struct pp_profile *p, uint64_t addr, const char *fn, enum pp_frame_kind kind)
{
	struct pp_location_info l = {.address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

/* A sample of a task whose comm is comm; its executable's name is not the root. */
static int add(struct pp_profile *p, const uint32_t *locs, uint32_t n, const char *comm,
	       uint32_t tid, uint64_t count)
{
	struct pp_sample_info s = {.locations = locs,
				   .nlocations = n,
				   .pid = 1,
				   .tid = tid,
				   .thread_name = comm,
				   .process_name = "not-the-comm",
				   .count = count,
				   .value = count};

	return pp_profile_add_sample(p, &s);
}

/* Renders the folded text into a malloc'ed string. */
static char *folded(const struct pp_profile *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (pp_folded_write(p, f) != 0) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

static struct pp_profile *known(void)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t m, a, b, c, k, dt;

	if (!p)
		return NULL;
	m = loc(p, 0x10, "main", PP_FRAME_NATIVE);
	a = loc(p, 0x20, "a", PP_FRAME_NATIVE);
	b = loc(p, 0x30, "b", PP_FRAME_NATIVE);
	c = loc(p, 0x40, "c", PP_FRAME_NATIVE);
	k = loc(p, 0xffff0000, "do_syscall_64", PP_FRAME_KERNEL);
	dt = loc(p, 0x7000, "heap:malloc", PP_FRAME_DATA);
	{
		uint32_t s1[] = {b, a, m}, s2[] = {c, m}, s3[] = {k, c, m}, s4[] = {dt, b, a, m};

		if (add(p, s1, 3, "app", 101, 35) || add(p, s1, 3, "app", 102, 25) ||
		    add(p, s2, 2, "app", 101, 30) || add(p, s3, 3, "app", 101, 10) ||
		    add(p, s4, 4, "app", 101, 5) || add(p, s2, 2, "db", 7, 2))
			goto fail;
	}
	return p;
fail:
	pp_profile_free(p);
	return NULL;
}

TEST(known_text)
{
	struct pp_profile *p = known();
	char *text;

	REQUIRE(p);
	text = folded(p);
	REQUIRE(text);
	CHECK_STR(text, "app;main;a;b 60\n"
			"app;main;a;b;heap:malloc_[d] 5\n"
			"app;main;c 30\n"
			"app;main;c;do_syscall_64_[k] 10\n"
			"db;main;c 2\n");
	free(text);
	pp_profile_free(p);
}

TEST(empty_profile)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *p = pp_profile_new(&d);
	char *text;

	REQUIRE(p);
	text = folded(p);
	REQUIRE(text);
	CHECK_STR(text, "");
	free(text);
	CHECK(pp_folded_write(NULL, stdout) == -EINVAL);
	CHECK(pp_folded_write(p, NULL) == -EINVAL);
	pp_profile_free(p);
}

TEST(sanitize_names)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t s[3];
	char *text;

	REQUIRE(p);
	s[0] = loc(p, 1, "operator;weird\nname", PP_FRAME_NATIVE);
	s[1] = loc(p, 2, "", PP_FRAME_NATIVE);
	s[2] = loc(p, 3, "std::vector<int> f(int, char)", PP_FRAME_NATIVE);
	REQUIRE(add(p, s, 3, "my;proc\r", 1, 3) == 0);
	text = folded(p);
	REQUIRE(text);
	/* the profile cleaned the control bytes (pebsprof/text.h); the writer maps ';' */
	CHECK_STR(
	    text,
	    "my:proc\\x0d;std::vector<int> f(int, char);[unknown];operator:weird\\x0aname 3\n");
	free(text);
	pp_profile_free(p);
}

TEST(write_file)
{
	struct pp_profile *p = known();
	char dir[] = "/tmp/pp_test_folded.XXXXXX", path[256], line[256];
	FILE *f;
	int n = 0;

	REQUIRE(p);
	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/x.folded", dir);
	REQUIRE(pp_folded_write_file(p, path) == 0);
	f = fopen(path, "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	CHECK_EQ_U64(n, 5);
	unlink(path);
	snprintf(path, sizeof(path), "%s/no/x.folded", dir);
	CHECK(pp_folded_write_file(p, path) == -ENOENT);
	CHECK(rmdir(dir) == 0); /* empty: nothing left behind */
	pp_profile_free(p);
}

/* The root is perf's: the comm (python3, not the executable python3.11), swapper for idle. */
TEST(root_is_perf_comm)
{
	struct pp_profile_desc d = {.event = "cpu-clock", .value_type = "cpu", .period = 1};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_location_info l = {.function = "f", .kind = PP_FRAME_NATIVE};
	struct pp_sample_info py = {.nlocations = 1,
				    .pid = 5,
				    .tid = 5,
				    .thread_name = "python3",
				    .process_name = "python3.11",
				    .count = 2,
				    .value = 2};
	struct pp_sample_info idle = {.nlocations = 1,
				      .pid = 0,
				      .tid = 0,
				      .thread_name = "swapper/1",
				      .process_name = "[idle]",
				      .count = 1,
				      .value = 1};
	uint32_t loc;
	char *text;

	REQUIRE(p);
	loc = pp_profile_intern_location(p, &l);
	py.locations = idle.locations = &loc;
	REQUIRE(pp_profile_add_sample(p, &py) == 0 && pp_profile_add_sample(p, &idle) == 0);
	text = folded(p);
	REQUIRE(text);
	CHECK_STR(text, "python3;f 2\nswapper;f 1\n");
	free(text);
	pp_profile_free(p);
}

/*
 * With off-CPU samples the folded stacks are a wall clock in nanoseconds: a cpu-clock sample
 * weighs its time on the CPU, a wait its time off it, under a leaf naming its state; samples
 * of an event that is not time weigh nothing there.
 */
TEST(off_cpu_makes_a_wall_clock)
{
	struct pp_profile_desc dc = {.event = "cpu-clock", .value_type = "cpu", .period = 1000000};
	struct pp_profile_desc dy = {.event = "cycles", .value_type = "cycles", .period = 1000};
	struct pp_profile *cpu = pp_profile_new(&dc), *cyc = pp_profile_new(&dy);
	struct pp_location_info lm = {.function = "main", .kind = PP_FRAME_NATIVE};
	struct pp_location_info lw = {.function = "wait_here", .kind = PP_FRAME_NATIVE};
	struct pp_sample_info on = {.nlocations = 1,
				    .pid = 5,
				    .tid = 5,
				    .thread_name = "app",
				    .process_name = "app",
				    .count = 3,
				    .value = 3000000};
	struct pp_sample_info off = on;
	uint32_t stack[2];
	char *text;

	REQUIRE(cpu && cyc);
	for (int i = 0; i < 2; i++) {
		struct pp_profile *p = i ? cyc : cpu;

		stack[1] = pp_profile_intern_location(p, &lm);
		stack[0] = pp_profile_intern_location(p, &lw);
		on.locations = &stack[1];
		off.locations = stack;
		off.nlocations = 2;
		off.count = 2;
		off.value = 40000000;
		off.wait = PP_WAIT_SLEEPING;
		REQUIRE(pp_profile_add_sample(p, &on) == 0);
		text = folded(p);
		REQUIRE(text);
		/* without waits: sample counts, as ever */
		CHECK_STR(text, "app;main 3\n");
		free(text);
		REQUIRE(pp_profile_add_sample(p, &off) == 0);
		CHECK(pp_profile_is_wall_clock(p));
	}
	text = folded(cpu);
	REQUIRE(text);
	CHECK_STR(text, "app;main 3000000\napp;main;wait_here;[off-CPU: sleeping] 40000000\n");
	free(text);
	text = folded(cyc);
	REQUIRE(text);
	CHECK_STR(text, "app;main;wait_here;[off-CPU: sleeping] 40000000\n");
	free(text);
	pp_profile_free(cpu);
	pp_profile_free(cyc);
}

TEST_LIST = {
    {"root_is_perf_comm", root_is_perf_comm},
    {"known_text", known_text},
    {"empty_profile", empty_profile},
    {"sanitize_names", sanitize_names},
    {"write_file", write_file},
    {"off_cpu_makes_a_wall_clock", off_cpu_makes_a_wall_clock},
};
TEST_MAIN()
