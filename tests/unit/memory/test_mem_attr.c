/*
 * Tests of mem_attr.c: which memory fields count as real under each kernel's rules (5.x
 * without sample_flags, 6.1-6.2 with driver-set flags, 6.3+ with every requested flag and
 * default values), the latency buckets, the labels derived from real perf_mem_data_src bit
 * patterns (built with the uapi field macros), mapping classes, the .bss owner rule and the
 * bounded (pid, mapping) cache.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "memory/mem_attr.h"

/* An Intel SNB+ L1 load hit with the TLB bits pebs_set_tlb_lock adds for an STLB hit. */
#define DSRC_L1_HIT                                                                                \
	(PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, L1) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, NONE) |     \
	 PP_MEM_S(TLB, HIT) | PP_MEM_S(TLB, L1) | PP_MEM_S(TLB, L2) | PP_MEM_S(LOCK, NA) |         \
	 ((uint64_t)PP_MEM_LVLNUM_L1 << PP_MEM_LVLNUM_SHIFT))
/* The old (no lvl_num) encoding of a remote DRAM hit, as 6.1-era IBS and SNB tables give. */
#define DSRC_REM_RAM1                                                                              \
	(PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, REM_RAM1) | PP_MEM_S(LVL, HIT) |                       \
	 PP_MEM_S(SNOOP, HITM) | PP_MEM_S(TLB, MISS) | PP_MEM_S(TLB, WK))
/* SNB precise_store_data: a store that missed L1; nothing else is known. */
#define DSRC_STORE_L1_MISS                                                                         \
	(PP_MEM_S(OP, STORE) | PP_MEM_S(LVL, L1) | PP_MEM_S(LVL, MISS) | PP_MEM_S(SNOOP, NA) |     \
	 PP_MEM_S(TLB, NA) | PP_MEM_S(LOCK, NA))

static void mem_rec(struct pp_sample *r, uint16_t flags, uint64_t sample_flags, uint64_t addr,
		    uint64_t dsrc, uint64_t weight)
{
	memset(r, 0, sizeof(*r));
	r->flags = flags;
	r->sample_flags = sample_flags;
	r->addr = addr;
	r->data_src = dsrc;
	r->weight = weight;
}

#define ALL_MEM_FLAGS                                                                              \
	(PP_PERF_SAMPLE_ADDR | PP_PERF_SAMPLE_DATA_SRC | PP_PERF_SAMPLE_WEIGHT_STRUCT |            \
	 PP_PERF_SAMPLE_PHYS_ADDR)

TEST(no_mem_fields_flag_means_nothing)
{
	struct pp_sample r;
	struct pp_mem_sample m;

	mem_rec(&r, 0, 0, 0x1000, DSRC_L1_HIT, 40);
	CHECK(pp_mem_sample_get(&r, &m) == 0);
	CHECK(!m.has_addr && !m.has_data_src && !m.has_latency);
}

/* >= 6.3: every requested bit is set, unfilled fields hold defaults (cycles:pp, software). */
TEST(kernel_6_3_defaults_are_not_values)
{
	struct pp_sample r;
	struct pp_mem_sample m;

	mem_rec(&r, PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS, ALL_MEM_FLAGS | 0x101, 0, PP_MEM_NA,
		0);
	CHECK(pp_mem_sample_get(&r, &m) == 0);
	CHECK(!m.has_addr && !m.has_data_src && !m.has_latency);
	CHECK_EQ_U64(pp_mem_label_key(&m), 0);

	mem_rec(&r, PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS, ALL_MEM_FLAGS, 0x7f0012345678,
		DSRC_L1_HIT, ((uint64_t)9 << 32) | 57);
	CHECK(pp_mem_sample_get(&r, &m) == 1);
	CHECK(m.has_addr && m.has_data_src && m.has_latency);
	CHECK_EQ_U64(m.addr, 0x7f0012345678);
	CHECK_EQ_U64(m.data_src, DSRC_L1_HIT);
	CHECK_EQ_U64(m.latency, 57);
	CHECK_EQ_U64(m.ins_latency, 9);
}

/* 6.1-6.2: only the bits the PMU driver set are real, whatever the other fields hold. */
TEST(kernel_6_1_sample_flags_decide)
{
	struct pp_sample r;
	struct pp_mem_sample m;

	mem_rec(&r, PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS, PP_PERF_SAMPLE_ADDR, 0x601040,
		0xffffffff81104110ull, 0xdeadbeef);
	CHECK(pp_mem_sample_get(&r, &m) == 1);
	CHECK(m.has_addr);
	CHECK(!m.has_data_src);
	CHECK(!m.has_latency);

	/* Plain WEIGHT (not the struct): var1_dw is the latency, no instruction latency. */
	mem_rec(&r, PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS,
		PP_PERF_SAMPLE_DATA_SRC | PP_PERF_SAMPLE_WEIGHT, 0, DSRC_L1_HIT, 300);
	CHECK(pp_mem_sample_get(&r, &m) == 1);
	CHECK(!m.has_addr && m.has_data_src && m.has_latency);
	CHECK_EQ_U64(m.latency, 300);
	CHECK_EQ_U64(m.ins_latency, 0);
}

/* 5.x: no sample_flags; perf_sample_data_init zeroed addr/weight and set data_src = NA. */
TEST(kernel_5_x_values_decide)
{
	struct pp_sample r;
	struct pp_mem_sample m;

	mem_rec(&r, PP_SF_MEM_FIELDS, 0xffff /* garbage: not the kernel's */, 0, PP_MEM_NA, 0);
	CHECK(pp_mem_sample_get(&r, &m) == 0);
	/* 5.10's PERF_MEM_NA has no LVLNUM_NA: still nothing (seen in tests/vm) */
	mem_rec(&r, PP_SF_MEM_FIELDS, 0, 0, PP_MEM_NA_NO_LVLNUM, 0);
	CHECK(pp_mem_sample_get(&r, &m) == 0);
	mem_rec(&r, PP_SF_MEM_FIELDS, 0, 0x1000, DSRC_REM_RAM1, 0);
	CHECK(pp_mem_sample_get(&r, &m) == 1);
	CHECK(m.has_addr && m.has_data_src && !m.has_latency);
	/* data_src 0 is no value either (a shim that read nothing). */
	mem_rec(&r, PP_SF_MEM_FIELDS, 0, 0, 0, 0);
	CHECK(pp_mem_sample_get(&r, &m) == 0);
}

TEST(latency_buckets_are_powers_of_two)
{
	static const struct {
		uint32_t cycles;
		const char *name;
	} cases[] = {
	    {0, "0-31"},	{1, "0-31"},	  {31, "0-31"},	     {32, "32-63"},
	    {63, "32-63"},	{64, "64-127"},	  {127, "64-127"},   {128, "128-255"},
	    {255, "128-255"},	{256, "256-511"}, {511, "256-511"},  {512, "512-1023"},
	    {1023, "512-1023"}, {1024, ">=1024"}, {70000, ">=1024"}, {UINT32_MAX, ">=1024"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned b = pp_mem_latency_bucket_index(cases[i].cycles);

		CHECK(b < PP_MEM_LATENCY_BUCKETS);
		CHECK_STR(pp_mem_latency_bucket_name(b), cases[i].name);
	}
	CHECK(pp_mem_latency_bucket_name(PP_MEM_LATENCY_BUCKETS) == NULL);
}

static const char *label(const struct pp_mem_labels *l, const char *key)
{
	for (uint32_t i = 0; i < l->n; i++) {
		if (strcmp(l->labels[i].key, key) == 0)
			return l->labels[i].value;
	}
	return NULL;
}

static uint64_t key_of(uint64_t dsrc, uint32_t lat)
{
	struct pp_sample r;
	struct pp_mem_sample m;

	mem_rec(&r, PP_SF_MEM_FIELDS, 0, 0x1000, dsrc, lat);
	pp_mem_sample_get(&r, &m);
	return pp_mem_label_key(&m);
}

TEST(labels_speak_perfs_vocabulary)
{
	struct pp_mem_labels l;

	CHECK(pp_mem_labels_from_key(key_of(DSRC_L1_HIT, 40), &l) == 5);
	CHECK_STR(label(&l, "memory.level"), "L1 hit");
	CHECK_STR(label(&l, "memory.tlb"), "L1 or L2 hit");
	CHECK_STR(label(&l, "memory.snoop"), "None");
	CHECK_STR(label(&l, "memory.op"), "LOAD");
	CHECK_STR(label(&l, "memory.latency_bucket"), "32-63");

	CHECK(pp_mem_labels_from_key(key_of(DSRC_REM_RAM1, 700), &l) == 5);
	CHECK_STR(label(&l, "memory.level"), "Remote RAM (1 hop) hit");
	CHECK_STR(label(&l, "memory.tlb"), "Walker miss");
	CHECK_STR(label(&l, "memory.snoop"), "HitM");
	CHECK_STR(label(&l, "memory.latency_bucket"), "512-1023");

	/* A store with only L1 miss known: no TLB, snoop or latency labels ("N/A" is dropped). */
	CHECK(pp_mem_labels_from_key(key_of(DSRC_STORE_L1_MISS, 0), &l) == 2);
	CHECK_STR(label(&l, "memory.level"), "L1 miss");
	CHECK_STR(label(&l, "memory.op"), "STORE");
	CHECK(label(&l, "memory.tlb") == NULL);
	CHECK(label(&l, "memory.snoop") == NULL);
	CHECK(label(&l, "memory.latency_bucket") == NULL);

	/* Latency without a data source (IBS on some ops): the bucket alone. */
	CHECK(pp_mem_labels_from_key(key_of(PP_MEM_NA, 2000), &l) == 1);
	CHECK_STR(label(&l, "memory.latency_bucket"), ">=1024");
	CHECK(pp_mem_labels_from_key(0, &l) == 0);
}

TEST(label_key_ignores_lock_blk_and_exact_latency)
{
	uint64_t base = key_of(DSRC_L1_HIT, 40);

	CHECK(base != 0);
	CHECK_EQ_U64(key_of(DSRC_L1_HIT | PP_MEM_S(LOCK, LOCKED), 40), base);
	CHECK_EQ_U64(key_of(DSRC_L1_HIT | PP_MEM_S(BLK, DATA), 40), base);
	CHECK_EQ_U64(key_of(DSRC_L1_HIT, 63), base); /* same bucket */
	CHECK(key_of(DSRC_L1_HIT, 64) != base);
	CHECK(key_of(DSRC_L1_HIT, 0) != base);
	CHECK(key_of(DSRC_REM_RAM1, 40) != base);
	CHECK(key_of(DSRC_L1_HIT & ~PP_MEM_S(SNOOP, NONE), 40) != base);
}

TEST(mapping_classes)
{
	struct pp_map_entry m = {.start = 0x1000, .end = 0x2000, .path = ""};
	char buf[64];

	m.kind = PP_MAP_KIND_HEAP;
	CHECK_STR(pp_mem_map_class(&m, buf, sizeof(buf)), "[heap]");
	m.kind = PP_MAP_KIND_STACK;
	CHECK_STR(pp_mem_map_class(&m, buf, sizeof(buf)), "[stack]");
	m.kind = PP_MAP_KIND_ANON;
	CHECK_STR(pp_mem_map_class(&m, buf, sizeof(buf)), "[anon]");
	m.kind = PP_MAP_KIND_OTHER;
	m.path = "anon_inode:[io_uring]";
	CHECK_STR(pp_mem_map_class(&m, buf, sizeof(buf)), "[anon]");
	m.kind = PP_MAP_KIND_VDSO;
	CHECK_STR(pp_mem_map_class(&m, buf, sizeof(buf)), "[vdso]");
	m.kind = PP_MAP_KIND_FILE;
	m.path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	CHECK_STR(pp_mem_map_class(&m, buf, sizeof(buf)), "[file] libc.so.6");
	/* Cut, never overrun. */
	CHECK_STR(pp_mem_map_class(&m, buf, 10), "[file] li");
}

TEST(bss_owner_is_the_writable_file_mapping_just_before)
{
	struct pp_map_entry e[4] = {
	    {.start = 0x400000,
	     .end = 0x401000,
	     .kind = PP_MAP_KIND_FILE,
	     .perms = PP_MAP_READ,
	     .path = "/bin/app"},
	    {.start = 0x401000,
	     .end = 0x402000,
	     .kind = PP_MAP_KIND_FILE,
	     .perms = PP_MAP_READ | PP_MAP_WRITE,
	     .path = "/bin/app"},
	    {.start = 0x402000, .end = 0x500000, .kind = PP_MAP_KIND_ANON, .path = ""},
	    {.start = 0x600000, .end = 0x601000, .kind = PP_MAP_KIND_ANON, .path = ""},
	};

	CHECK(pp_mem_bss_owner(e, 4, &e[2]) == &e[1]);
	CHECK(pp_mem_bss_owner(e, 4, &e[3]) == NULL); /* a gap before it */
	CHECK(pp_mem_bss_owner(e, 4, &e[1]) == NULL); /* not anonymous */
	CHECK(pp_mem_bss_owner(e, 4, &e[0]) == NULL);
	e[1].perms = PP_MAP_READ; /* read-only data is never followed by a .bss */
	CHECK(pp_mem_bss_owner(e, 4, &e[2]) == NULL);
}

TEST(objcache_is_bounded_and_counts_evictions)
{
	struct pp_mem_objcache *c = pp_mem_objcache_new(4);
	struct pp_mem_objcache_stats st;
	struct pp_mem_obj_key k = {.pid = 7, .generation = 1, .end = 0x1000};
	struct pp_mem_obj *o;

	REQUIRE(c);
	for (uint64_t i = 0; i < 4; i++) {
		k.start = i * 0x1000;
		k.end = k.start + 0x1000;
		o = pp_mem_objcache_get(c, &k);
		REQUIRE(o);
		CHECK(o->class_loc == 0 && o->syms_state == PP_MEM_SYMS_UNKNOWN);
		o->class_loc = (uint32_t)i + 10;
	}
	k.start = 0x2000;
	k.end = 0x3000;
	o = pp_mem_objcache_get(c, &k);
	CHECK_EQ_U64(o->class_loc, 12);
	/* Another generation (exec) of the same pid is another entry. */
	k.generation = 2;
	o = pp_mem_objcache_get(c, &k);
	CHECK_EQ_U64(o->class_loc, 0);
	pp_mem_objcache_get_stats(c, &st);
	CHECK_EQ_U64(st.hits, 1);
	CHECK_EQ_U64(st.misses, 5);
	CHECK_EQ_U64(st.evictions, 4);
	pp_mem_objcache_reset(c);
	k.generation = 1;
	o = pp_mem_objcache_get(c, &k);
	CHECK_EQ_U64(o->class_loc, 0);
	pp_mem_objcache_free(c);
	pp_mem_objcache_free(NULL);
}

TEST_LIST = {
    {"no_mem_fields_flag_means_nothing", no_mem_fields_flag_means_nothing},
    {"kernel_6_3_defaults_are_not_values", kernel_6_3_defaults_are_not_values},
    {"kernel_6_1_sample_flags_decide", kernel_6_1_sample_flags_decide},
    {"kernel_5_x_values_decide", kernel_5_x_values_decide},
    {"latency_buckets_are_powers_of_two", latency_buckets_are_powers_of_two},
    {"labels_speak_perfs_vocabulary", labels_speak_perfs_vocabulary},
    {"label_key_ignores_lock_blk_and_exact_latency", label_key_ignores_lock_blk_and_exact_latency},
    {"mapping_classes", mapping_classes},
    {"bss_owner_is_the_writable_file_mapping_just_before",
     bss_owner_is_the_writable_file_mapping_just_before},
    {"objcache_is_bounded_and_counts_evictions", objcache_is_bounded_and_counts_evictions},
};
TEST_MAIN()
