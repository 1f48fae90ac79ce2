/*
 * Unit tests of the top-functions report: self/total attribution (data frames skipped,
 * recursion counted once), ordering, truncation to max, and the exact printed table.
 */
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include "check.h"

#include <errno.h>

static uint32_t loc(struct pp_profile *p, uint64_t addr, const char *fn, enum pp_frame_kind kind)
{
	struct pp_location_info l = {.address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

static int add(struct pp_profile *p, const uint32_t *locs, uint32_t n, uint32_t tid, uint64_t count)
{
	struct pp_sample_info s = {.locations = locs,
				   .nlocations = n,
				   .pid = 1,
				   .tid = tid,
				   .thread_name = "t",
				   .process_name = "app",
				   .count = count,
				   .value = count};

	return pp_profile_add_sample(p, &s);
}

static struct pp_profile *known(void)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t m, a, b, c, k;

	if (!p)
		return NULL;
	m = loc(p, 0x10, "main", PP_FRAME_NATIVE);
	a = loc(p, 0x20, "a", PP_FRAME_NATIVE);
	b = loc(p, 0x30, "b", PP_FRAME_NATIVE);
	c = loc(p, 0x40, "c", PP_FRAME_NATIVE);
	k = loc(p, 0xffff0000, "do_syscall_64", PP_FRAME_KERNEL);
	{
		uint32_t s1[] = {b, a, m}, s2[] = {c, m}, s3[] = {k, c, m};

		if (add(p, s1, 3, 101, 35) || add(p, s1, 3, 102, 25) || add(p, s2, 2, 101, 30) ||
		    add(p, s3, 3, 101, 10))
			goto fail;
	}
	return p;
fail:
	pp_profile_free(p);
	return NULL;
}

static char *report(const struct pp_profile *p, size_t max)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	pp_report_print_top(p, f, max);
	fclose(f);
	return buf;
}

TEST(top_functions)
{
	struct pp_profile *p = known();
	struct pp_top_entry top[8];
	size_t n = 0;

	REQUIRE(p);
	REQUIRE(pp_profile_top_functions(p, NULL, 0, &n) == 0);
	CHECK_EQ_U64(n, 5);
	REQUIRE(pp_profile_top_functions(p, top, 8, &n) == 0);
	REQUIRE(n == 5);
	CHECK_STR(top[0].function, "b");
	CHECK_EQ_U64(top[0].self, 60);
	CHECK_EQ_U64(top[0].total, 60);
	CHECK_STR(top[1].function, "c");
	CHECK_EQ_U64(top[1].self, 30);
	CHECK_EQ_U64(top[1].total, 40);
	CHECK_STR(top[2].function, "do_syscall_64");
	CHECK_EQ_U64(top[2].self, 10);
	CHECK_STR(top[3].function, "main");
	CHECK_EQ_U64(top[3].self, 0);
	CHECK_EQ_U64(top[3].total, 100);
	CHECK_STR(top[4].function, "a");
	CHECK_EQ_U64(top[4].total, 60);
	REQUIRE(pp_profile_top_functions(p, top, 2, &n) == 0);
	CHECK_EQ_U64(n, 2);
	CHECK_STR(top[1].function, "c");
	CHECK(pp_profile_top_functions(p, top, 2, NULL) == -EINVAL);
	CHECK(pp_profile_top_functions(NULL, top, 2, &n) == -EINVAL);
	pp_profile_free(p);
}

TEST(recursion_and_data)
{
	struct pp_profile_desc d = {.event = "mem-loads"};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_top_entry top[4];
	uint32_t f, g, dt;
	size_t n = 0;

	REQUIRE(p);
	f = loc(p, 0x10, "fib", PP_FRAME_NATIVE);
	g = loc(p, 0x20, "main", PP_FRAME_NATIVE);
	dt = loc(p, 0x7000, "table", PP_FRAME_DATA);
	{
		/* fib recursing three deep, then a memory sample on "table" from fib. */
		uint32_t s1[] = {f, f, f, g}, s2[] = {dt, f, f, g};

		REQUIRE(add(p, s1, 4, 1, 7) == 0);
		REQUIRE(add(p, s2, 4, 1, 3) == 0);
	}
	REQUIRE(pp_profile_top_functions(p, top, 4, &n) == 0);
	REQUIRE(n == 2); /* data objects are not functions */
	CHECK_STR(top[0].function, "fib");
	CHECK_EQ_U64(top[0].self, 10);
	CHECK_EQ_U64(top[0].total, 10);
	CHECK_STR(top[1].function, "main");
	CHECK_EQ_U64(top[1].self, 0);
	CHECK_EQ_U64(top[1].total, 10);
	pp_profile_free(p);
}

TEST(printed_table)
{
	struct pp_profile *p = known();
	char *text;

	REQUIRE(p);
	text = report(p, 20);
	REQUIRE(text);
	CHECK_STR(text, "  self%  total%  samples  function\n"
			" 60.00%  60.00%       60  b\n"
			" 30.00%  40.00%       30  c\n"
			" 10.00%  10.00%       10  do_syscall_64\n"
			"  0.00% 100.00%        0  main\n"
			"  0.00%  60.00%        0  a\n");
	free(text);
	text = report(p, 1);
	REQUIRE(text);
	CHECK_STR(text, "  self%  total%  samples  function\n"
			" 60.00%  60.00%       60  b\n");
	free(text);
	pp_profile_free(p);
}

/* Thirds do not divide evenly: percentages are rounded, and wide counts widen the column. */
TEST(rounding_and_width)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t x, y;
	char *text;

	REQUIRE(p);
	x = loc(p, 0x10, "x", PP_FRAME_NATIVE);
	y = loc(p, 0x20, "y", PP_FRAME_NATIVE);
	REQUIRE(add(p, &x, 1, 1, 200000000) == 0);
	REQUIRE(add(p, &y, 1, 1, 100000000) == 0);
	text = report(p, 10);
	REQUIRE(text);
	CHECK_STR(text, "  self%  total%    samples  function\n"
			" 66.67%  66.67%  200000000  x\n"
			" 33.33%  33.33%  100000000  y\n");
	free(text);
	pp_profile_free(p);

	p = pp_profile_new(&d);
	REQUIRE(p);
	text = report(p, 10);
	REQUIRE(text);
	CHECK_STR(text, "  self%  total%  samples  function\n");
	free(text);
	pp_profile_free(p);
}

static int add_mem(struct pp_profile *p, const uint32_t *locs, uint32_t n, uint64_t count,
		   uint64_t latency, const char *level)
{
	struct pp_label label = {.key = "memory.level", .value = level};
	struct pp_sample_info s = {.locations = locs,
				   .nlocations = n,
				   .pid = 1,
				   .tid = 1,
				   .thread_name = "t",
				   .process_name = "app",
				   .count = count,
				   .value = count,
				   .latency = latency,
				   .labels = &label,
				   .nlabels = 1};

	return pp_profile_add_sample(p, &s);
}

/* Fields of types: share of all samples, average latency, levels; untyped samples only count. */
TEST(data_types_table)
{
	struct pp_profile_desc d = {.event = "mem-loads", .mem_latency = 1};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t rx[3], len[3], heap[2];
	char *buf = NULL;
	size_t n = 0;
	FILE *f;

	REQUIRE(p);
	rx[0] = loc(p, 0, "struct conn.rx_bytes", PP_FRAME_DATA);
	rx[1] = loc(p, 0, "struct conn", PP_FRAME_DATA);
	rx[2] = loc(p, 0x1000, "read_rx", PP_FRAME_NATIVE);
	len[0] = loc(p, 0, "struct conn.hdr.len", PP_FRAME_DATA);
	len[1] = rx[1];
	len[2] = loc(p, 0x2000, "read_hdr_len", PP_FRAME_NATIVE);
	heap[0] = loc(p, 0, "[heap]", PP_FRAME_DATA);
	heap[1] = rx[2];
	CHECK(add_mem(p, rx, 3, 2, 20, "L1 hit") == 0);
	CHECK(add_mem(p, rx, 3, 1, 300, "Local RAM hit") == 0);
	CHECK(add_mem(p, len, 3, 1, 40, "L3 hit") == 0);
	CHECK(add_mem(p, heap, 2, 4, 400, "L2 hit") == 0);
	f = open_memstream(&buf, &n);
	REQUIRE(f);
	pp_report_print_data_types(p, f, 10);
	fclose(f);
	CHECK_STR(buf, "  share  samples  latency    L1    L2    L3  RAM+  type.field\n"
		       " 37.50%        3    106.7   67%    0%    0%   33%  struct conn.rx_bytes\n"
		       " 12.50%        1     40.0    0%    0%  100%    0%  struct conn.hdr.len\n");
	free(buf);
	/* one row shown of two */
	buf = NULL;
	f = open_memstream(&buf, &n);
	REQUIRE(f);
	pp_report_print_data_types(p, f, 1);
	fclose(f);
	CHECK(strstr(buf, "struct conn.rx_bytes\n  (1 more fields)\n") != NULL);
	free(buf);
	pp_profile_free(p);
	/* no typed sample: nothing */
	p = pp_profile_new(&d);
	REQUIRE(p);
	heap[0] = loc(p, 0, "[heap]", PP_FRAME_DATA);
	heap[1] = loc(p, 0x1000, "read_rx", PP_FRAME_NATIVE);
	CHECK(add_mem(p, heap, 2, 4, 400, "L2 hit") == 0);
	buf = NULL;
	f = open_memstream(&buf, &n);
	REQUIRE(f);
	pp_report_print_data_types(p, f, 10);
	fclose(f);
	CHECK_STR(buf, "");
	free(buf);
	pp_profile_free(p);
}

TEST_LIST = {
    {"data_types_table", data_types_table},	{"top_functions", top_functions},
    {"recursion_and_data", recursion_and_data}, {"printed_table", printed_table},
    {"rounding_and_width", rounding_and_width},
};
TEST_MAIN()
