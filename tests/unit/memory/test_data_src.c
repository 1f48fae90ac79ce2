/*
 * Tests for data_src: values are built the way the kernel builds them (arch/x86/events/intel/ds.c
 * pebs_data_source[] and its SKL patch, pebs_set_tlb_lock; arch/x86/events/amd/ibs.c
 * perf_ibs_get_mem_lvl and friends), and each must render as perf renders it.
 */
#include "check.h"

#include "memory/data_src.h"

#define P(a, b) PP_MEM_S(a, b)
#define OP_LH (P(OP, LOAD) | P(LVL, HIT))
#define LEVEL(x) P(LVLNUM, x)
#define REM P(REMOTE, REMOTE)
#define SNOOP_NONE_MISS (P(SNOOP, NONE) | P(SNOOP, MISS))

/* Sandy Bridge and later, as modern kernels build it (with LVLNUM). */
static const uint64_t snb_table[16] = {
    P(OP, LOAD) | P(LVL, MISS) | LEVEL(L3) | P(SNOOP, NA),
    OP_LH | P(LVL, L1) | LEVEL(L1) | P(SNOOP, NONE),
    OP_LH | P(LVL, LFB) | LEVEL(LFB) | P(SNOOP, NONE),
    OP_LH | P(LVL, L2) | LEVEL(L2) | P(SNOOP, NONE),
    OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, NONE),
    OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, MISS),
    OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HIT),
    OP_LH | P(LVL, L3) | LEVEL(L3) | P(SNOOP, HITM),
    OP_LH | P(LVL, REM_CCE1) | REM | LEVEL(L3) | P(SNOOP, HIT),
    OP_LH | P(LVL, REM_CCE1) | REM | LEVEL(L3) | P(SNOOP, HITM),
    OP_LH | P(LVL, LOC_RAM) | LEVEL(RAM) | P(SNOOP, HIT),
    OP_LH | P(LVL, REM_RAM1) | REM | LEVEL(L3) | P(SNOOP, HIT),
    OP_LH | P(LVL, LOC_RAM) | LEVEL(RAM) | SNOOP_NONE_MISS,
    OP_LH | P(LVL, REM_RAM1) | LEVEL(RAM) | REM | SNOOP_NONE_MISS,
    OP_LH | P(LVL, IO) | LEVEL(NA) | P(SNOOP, NONE),
    OP_LH | P(LVL, UNC) | LEVEL(NA) | P(SNOOP, NONE),
};

static const char *const snb_level[16] = {
    "L3 miss", "L1 hit",	 "LFB/MAB hit",	  "L2 hit",	   "L3 hit",  "L3 hit",
    "L3 hit",  "L3 hit",	 "Remote L3 hit", "Remote L3 hit", "RAM hit", "Remote L3 hit",
    "RAM hit", "Remote RAM hit", "I/O hit",	  "Uncached hit",
};

static const char *const snb_snoop[16] = {
    "N/A", "None", "None", "None", "None",	   "Miss",	   "Hit",  "HitM",
    "Hit", "HitM", "Hit",  "Hit",  "None or Miss", "None or Miss", "None", "None",
};

/* __intel_pmu_pebs_data_source_skl(pmem, table) */
static void skl_patch(uint64_t *t, int pmem)
{
	uint64_t pmem_or_l4 = pmem ? LEVEL(PMEM) : LEVEL(L4);

	t[0x08] = OP_LH | pmem_or_l4 | P(SNOOP, HIT);
	t[0x09] = OP_LH | pmem_or_l4 | REM | P(SNOOP, HIT);
	t[0x0b] = OP_LH | LEVEL(RAM) | REM | P(SNOOP, NONE);
	t[0x0c] = OP_LH | LEVEL(ANY_CACHE) | REM | P(SNOOPX, FWD);
	t[0x0d] = OP_LH | LEVEL(ANY_CACHE) | REM | P(SNOOP, HITM);
}

/* load_latency_data() on a CPU with TLB/lock info and no block info (SNB..ICL). */
static uint64_t load_latency(uint64_t entry, int stlb_miss, int locked)
{
	uint64_t v = entry;

	if (stlb_miss)
		v |= P(TLB, MISS) | P(TLB, L2);
	else
		v |= P(TLB, HIT) | P(TLB, L1) | P(TLB, L2);
	if (locked)
		v |= P(LOCK, LOCKED);
	return v | P(BLK, NA);
}

static const char *level_of(uint64_t val, char *buf, size_t len)
{
	struct pp_data_src d;

	pp_data_src_decode(val, &d);
	pp_data_src_level_str(&d, buf, len);
	return buf;
}

static const char *snoop_of(uint64_t val, char *buf, size_t len)
{
	struct pp_data_src d;

	pp_data_src_decode(val, &d);
	pp_data_src_snoop_str(&d, buf, len);
	return buf;
}

static const char *class_of(uint64_t val)
{
	struct pp_data_src d;

	pp_data_src_decode(val, &d);
	return pp_data_src_level_class(&d);
}

static const char *script_of(uint64_t val, char *buf, size_t len)
{
	size_t n = pp_data_src_format_script(val, buf, len);

	CHECK_EQ_U64(n, strlen(buf));
	return buf;
}

TEST(decode_fields)
{
	struct pp_data_src d;
	uint64_t v = P(OP, STORE) | P(LVL, HIT) | P(LVL, L2) | P(SNOOP, HITM) | P(LOCK, LOCKED) |
		     P(TLB, WK) | LEVEL(PMEM) | REM | P(SNOOPX, PEER) | P(BLK, ADDR) | P(HOPS, 3);

	pp_data_src_decode(v, &d);
	CHECK_EQ_U64(d.op, PP_MEM_OP_STORE);
	CHECK_EQ_U64(d.lvl, PP_MEM_LVL_HIT | PP_MEM_LVL_L2);
	CHECK_EQ_U64(d.snoop, PP_MEM_SNOOP_HITM);
	CHECK_EQ_U64(d.lock, PP_MEM_LOCK_LOCKED);
	CHECK_EQ_U64(d.dtlb, PP_MEM_TLB_WK);
	CHECK_EQ_U64(d.lvl_num, PP_MEM_LVLNUM_PMEM);
	CHECK_EQ_U64(d.remote, 1);
	CHECK_EQ_U64(d.snoopx, PP_MEM_SNOOPX_PEER);
	CHECK_EQ_U64(d.blk, PP_MEM_BLK_ADDR);
	CHECK_EQ_U64(d.hops, PP_MEM_HOPS_3);

	/* Every field at its widest, and the bits above mem_hops ignored. */
	pp_data_src_decode(UINT64_MAX, &d);
	CHECK_EQ_U64(d.op, 0x1f);
	CHECK_EQ_U64(d.lvl, 0x3fff);
	CHECK_EQ_U64(d.snoop, 0x1f);
	CHECK_EQ_U64(d.lock, 0x3);
	CHECK_EQ_U64(d.dtlb, 0x7f);
	CHECK_EQ_U64(d.lvl_num, 0xf);
	CHECK_EQ_U64(d.remote, 1);
	CHECK_EQ_U64(d.snoopx, 0x3);
	CHECK_EQ_U64(d.blk, 0x7);
	CHECK_EQ_U64(d.hops, 0x7);
}

TEST(perf_mem_na)
{
	char buf[PP_DATA_SRC_SCRIPT_MAX];
	struct pp_data_src d;

	CHECK_EQ_U64(PP_MEM_NA,
		     P(OP, NA) | P(LVL, NA) | P(SNOOP, NA) | P(LOCK, NA) | P(TLB, NA) | LEVEL(NA));
	CHECK_STR(level_of(PP_MEM_NA, buf, sizeof(buf)), "N/A");
	CHECK_STR(script_of(PP_MEM_NA, buf, sizeof(buf)),
		  "|OP N/A|LVL N/A|SNP N/A|TLB N/A|LCK N/A|BLK  N/A");
	pp_data_src_decode(PP_MEM_NA, &d);
	CHECK_STR(pp_data_src_level_class(&d), "unknown");
	/* All zero: no field says anything. */
	CHECK_STR(script_of(0, buf, sizeof(buf)), "|OP No|LVL N/A|SNP N/A|TLB N/A|LCK No|BLK  N/A");
}

TEST(intel_snb_table)
{
	char buf[PP_DATA_SRC_STR_MAX];

	for (int i = 0; i < 16; i++) {
		if (strcmp(level_of(snb_table[i], buf, sizeof(buf)), snb_level[i]) != 0)
			fprintf(stderr, "  code 0x%02x\n", i);
		CHECK_STR(level_of(snb_table[i], buf, sizeof(buf)), snb_level[i]);
		if (strcmp(snoop_of(snb_table[i], buf, sizeof(buf)), snb_snoop[i]) != 0)
			fprintf(stderr, "  code 0x%02x\n", i);
		CHECK_STR(snoop_of(snb_table[i], buf, sizeof(buf)), snb_snoop[i]);
	}
}

TEST(intel_skl_table)
{
	char buf[PP_DATA_SRC_STR_MAX];
	uint64_t t[16];

	memcpy(t, snb_table, sizeof(t));
	skl_patch(t, 0);
	CHECK_STR(level_of(t[0x08], buf, sizeof(buf)), "L4 hit");
	CHECK_STR(level_of(t[0x09], buf, sizeof(buf)), "Remote L4 hit");
	CHECK_STR(level_of(t[0x0a], buf, sizeof(buf)), "RAM hit");
	CHECK_STR(level_of(t[0x0b], buf, sizeof(buf)), "Remote RAM hit");
	CHECK_STR(level_of(t[0x0c], buf, sizeof(buf)), "Remote Any cache hit");
	CHECK_STR(level_of(t[0x0d], buf, sizeof(buf)), "Remote Any cache hit");
	CHECK_STR(snoop_of(t[0x0b], buf, sizeof(buf)), "None");
	CHECK_STR(snoop_of(t[0x0c], buf, sizeof(buf)), "Fwd");
	CHECK_STR(snoop_of(t[0x0d], buf, sizeof(buf)), "HitM");
	/* Unchanged entries keep the base strings. */
	for (int i = 0; i < 8; i++)
		CHECK_STR(level_of(t[i], buf, sizeof(buf)), snb_level[i]);
	CHECK_STR(level_of(t[0x0e], buf, sizeof(buf)), "I/O hit");
	CHECK_STR(level_of(t[0x0f], buf, sizeof(buf)), "Uncached hit");

	skl_patch(t, 1);
	CHECK_STR(level_of(t[0x08], buf, sizeof(buf)), "PMEM hit");
	CHECK_STR(level_of(t[0x09], buf, sizeof(buf)), "Remote PMEM hit");
	CHECK_STR(class_of(t[0x08]), "PMEM");
	CHECK_STR(class_of(t[0x09]), "PMEM");
}

TEST(intel_script_lines)
{
	char buf[PP_DATA_SRC_SCRIPT_MAX];
	uint64_t t[16];

	memcpy(t, snb_table, sizeof(t));
	skl_patch(t, 0);
	CHECK_STR(script_of(load_latency(t[0x01], 0, 0), buf, sizeof(buf)),
		  "|OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A");
	CHECK_STR(script_of(load_latency(t[0x00], 1, 0), buf, sizeof(buf)),
		  "|OP LOAD|LVL L3 miss|SNP N/A|TLB L2 miss|LCK No|BLK  N/A");
	CHECK_STR(script_of(load_latency(t[0x07], 0, 1), buf, sizeof(buf)),
		  "|OP LOAD|LVL L3 hit|SNP HitM|TLB L1 or L2 hit|LCK Yes|BLK  N/A");
	CHECK_STR(script_of(load_latency(t[0x0c], 0, 0), buf, sizeof(buf)),
		  "|OP LOAD|LVL Remote Any cache hit|SNP Fwd|TLB L1 or L2 hit|LCK No|BLK  N/A");
	CHECK_STR(script_of(load_latency(snb_table[0x0d], 0, 0), buf, sizeof(buf)),
		  "|OP LOAD|LVL Remote RAM hit|SNP None or Miss|TLB L1 or L2 hit|LCK No|BLK  N/A");

	/* pebs_block CPUs: both block reasons, no NA. */
	CHECK_STR(
	    script_of(t[0x03] | P(TLB, HIT) | P(TLB, L1) | P(TLB, L2) | P(BLK, DATA) | P(BLK, ADDR),
		      buf, sizeof(buf)),
	    "|OP LOAD|LVL L2 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  Data Addr");

	/* store_latency_data(): the load table with mem_op overridden to STORE. */
	uint64_t st = load_latency(t[0x01], 0, 0) & ~P(OP, LOAD);
	CHECK_STR(script_of(st | P(OP, STORE), buf, sizeof(buf)),
		  "|OP STORE|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A");

	/* SNB precise_store_data(): no LVLNUM, L1 hit/miss only. */
	uint64_t snb_st = P(OP, STORE) | P(SNOOP, NA) | P(LVL, L1) | P(TLB, L2);
	CHECK_STR(script_of(snb_st | P(TLB, HIT) | P(LVL, HIT), buf, sizeof(buf)),
		  "|OP STORE|LVL L1 hit|SNP N/A|TLB L2 hit|LCK No|BLK  N/A");
	CHECK_STR(
	    script_of(snb_st | P(TLB, MISS) | P(LVL, MISS) | P(LOCK, LOCKED), buf, sizeof(buf)),
	    "|OP STORE|LVL L1 miss|SNP N/A|TLB L2 miss|LCK Yes|BLK  N/A");
}

/* AMD IBS (6.1+): data_src starts as PERF_MEM_NA and the driver overwrites fields. */
static uint64_t ibs(uint64_t lvl, uint64_t lvl_num, int remote, uint64_t hops, uint64_t snoop,
		    uint64_t dtlb, uint64_t lock)
{
	uint64_t v = PP_MEM_NA;

	v &= ~(0x1fULL << PP_MEM_OP_SHIFT);
	v |= P(OP, LOAD);
	v &= ~(0x3fffULL << PP_MEM_LVL_SHIFT);
	v |= lvl << PP_MEM_LVL_SHIFT;
	if (lvl_num) {
		v &= ~(0xfULL << PP_MEM_LVLNUM_SHIFT);
		v |= lvl_num << PP_MEM_LVLNUM_SHIFT;
	}
	if (remote)
		v |= REM;
	v |= hops << PP_MEM_HOPS_SHIFT;
	v &= ~(0x1fULL << PP_MEM_SNOOP_SHIFT);
	v |= snoop << PP_MEM_SNOOP_SHIFT;
	v &= ~(0x7fULL << PP_MEM_TLB_SHIFT);
	v |= dtlb << PP_MEM_TLB_SHIFT;
	v &= ~(0x3ULL << PP_MEM_LOCK_SHIFT);
	v |= lock << PP_MEM_LOCK_SHIFT;
	return v;
}

TEST(amd_ibs)
{
	char buf[PP_DATA_SRC_SCRIPT_MAX];
	const uint64_t tlb_l1 = PP_MEM_TLB_L1 | PP_MEM_TLB_HIT;
	uint64_t v;

	v = ibs(PP_MEM_LVL_L1 | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA, tlb_l1, PP_MEM_LOCK_NA);
	CHECK_STR(script_of(v, buf, sizeof(buf)),
		  "|OP LOAD|LVL L1 hit|SNP N/A|TLB L1 hit|LCK N/A|BLK  N/A");
	CHECK_STR(class_of(v), "L1");

	v = ibs(PP_MEM_LVL_L2 | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA,
		PP_MEM_TLB_L2 | PP_MEM_TLB_MISS, PP_MEM_LOCK_LOCKED);
	CHECK_STR(script_of(v, buf, sizeof(buf)),
		  "|OP LOAD|LVL L2 hit|SNP N/A|TLB L2 miss|LCK Yes|BLK  N/A");

	/* Zen 2/3 local cache: L3 or a peer CCX, snoop HITM when cache_hit_st is clear. */
	v = ibs(PP_MEM_LVL_L3 | PP_MEM_LVL_REM_CCE1 | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_HITM,
		tlb_l1, PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "L3 or Remote Cache (1 hop) hit");
	CHECK_STR(snoop_of(v, buf, sizeof(buf)), "HitM");
	CHECK_STR(class_of(v), "L3");

	v = ibs(PP_MEM_LVL_REM_CCE2 | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA, tlb_l1,
		PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "Remote Cache (2 hops) hit");
	CHECK_STR(class_of(v), "remote cache");

	v = ibs(PP_MEM_LVL_LOC_RAM | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA, tlb_l1,
		PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "Local RAM hit");
	CHECK_STR(class_of(v), "local DRAM");

	v = ibs(PP_MEM_LVL_REM_RAM1 | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA, tlb_l1,
		PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "Remote RAM (1 hop) hit");
	CHECK_STR(class_of(v), "remote DRAM");

	v = ibs(PP_MEM_LVL_LFB | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA, tlb_l1, PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "LFB/MAB hit");
	CHECK_STR(class_of(v), "LFB");

	v = ibs(PP_MEM_LVL_UNC | PP_MEM_LVL_HIT, 0, 0, 0, PP_MEM_SNOOP_NA, PP_MEM_TLB_NA,
		PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "Uncached hit");
	CHECK_STR(class_of(v), "uncached");

	/* Zen 4 PMEM on a remote node: mem_lvl is 0, so neither " hit" nor " miss" follows. */
	v = ibs(0, PP_MEM_LVLNUM_PMEM, 1, PP_MEM_HOPS_0, PP_MEM_SNOOP_NA, tlb_l1, PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "Remote core, same node PMEM ");
	CHECK_STR(class_of(v), "PMEM");

	/* I/O: mem_lvl IO without HIT, LVLNUM IO. */
	v = ibs(PP_MEM_LVL_IO, PP_MEM_LVLNUM_IO, 0, 0, PP_MEM_SNOOP_NA, tlb_l1, PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "I/O ");
	CHECK_STR(class_of(v), "I/O");

	/* No data source known: mem_lvl NA. */
	v = ibs(PP_MEM_LVL_NA, 0, 0, 0, PP_MEM_SNOOP_NA, PP_MEM_TLB_NA, PP_MEM_LOCK_NA);
	CHECK_STR(level_of(v, buf, sizeof(buf)), "N/A");
	CHECK_STR(class_of(v), "unknown");
}

TEST(old_style_mem_lvl)
{
	char buf[PP_DATA_SRC_STR_MAX];

	/* Kernels before LVLNUM: mem_lvl_num is 0. */
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, LOC_RAM), buf, sizeof(buf)), "Local RAM hit");
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, REM_CCE1), buf, sizeof(buf)),
		  "Remote Cache (1 hop) hit");
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, REM_RAM2), buf, sizeof(buf)),
		  "Remote RAM (2 hops) hit");
	CHECK_STR(level_of(P(LVL, MISS) | P(LVL, L3), buf, sizeof(buf)), "L3 miss");
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, IO), buf, sizeof(buf)), "I/O hit");
	/* HIT wins over MISS, as in perf. */
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, MISS) | P(LVL, L2), buf, sizeof(buf)), "L2 hit");
	/* A level bit without HIT or MISS keeps perf's trailing space. */
	CHECK_STR(level_of(P(LVL, L1), buf, sizeof(buf)), "L1 ");
	/* Only HIT, or NA with HIT: nothing to name. */
	CHECK_STR(level_of(P(LVL, HIT), buf, sizeof(buf)), "N/A");
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, NA), buf, sizeof(buf)), "N/A");
	/* Every level bit at once: the longest old-style string. */
	CHECK_STR(level_of(0x3fffULL << PP_MEM_LVL_SHIFT, buf, sizeof(buf)),
		  "L1 or LFB/MAB or L2 or L3 or Local RAM or Remote RAM (1 hop) or "
		  "Remote RAM (2 hops) or Remote Cache (1 hop) or Remote Cache (2 hops) or I/O or "
		  "Uncached hit");
}

TEST(hops_and_lvlnum)
{
	char buf[PP_DATA_SRC_STR_MAX];

	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(RAM) | REM | P(HOPS, 1), buf, sizeof(buf)),
		  "Remote node, same socket RAM hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(ANY_CACHE) | REM | P(HOPS, 0), buf, sizeof(buf)),
		  "Remote core, same node Any cache hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(RAM) | REM | P(HOPS, 2), buf, sizeof(buf)),
		  "Remote socket, same board RAM hit");
	CHECK_STR(level_of(P(LVL, MISS) | LEVEL(L3) | REM | P(HOPS, 3), buf, sizeof(buf)),
		  "Remote board L3 miss");
	/* perf prints hops even without the remote bit. */
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(L2) | P(HOPS, 0), buf, sizeof(buf)),
		  "core, same node L2 hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(CXL), buf, sizeof(buf)), "CXL hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(L2_MHB), buf, sizeof(buf)), "L2 MHB hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(MSC), buf, sizeof(buf)), "Memory-side Cache hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(UNC), buf, sizeof(buf)), "Uncached hit");
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(L0), buf, sizeof(buf)), "Unknown level 7 hit");
	/* LVLNUM takes precedence over the mem_lvl bits. */
	CHECK_STR(level_of(P(LVL, HIT) | P(LVL, LOC_RAM) | LEVEL(L2), buf, sizeof(buf)), "L2 hit");
	/* Hops past the uapi's table: named, not read out of bounds. */
	CHECK_STR(level_of(P(LVL, HIT) | LEVEL(RAM) | REM | (7ULL << PP_MEM_HOPS_SHIFT), buf,
			   sizeof(buf)),
		  "Remote Unknown hops 7 RAM hit");
}

TEST(tlb_snoop_blk_op_lock)
{
	char buf[PP_DATA_SRC_STR_MAX];
	struct pp_data_src d;

	pp_data_src_decode(P(TLB, WK) | P(TLB, OS) | P(TLB, MISS), &d);
	pp_data_src_tlb_str(&d, buf, sizeof(buf));
	CHECK_STR(buf, "Walker or Fault miss");
	pp_data_src_decode(P(TLB, HIT), &d);
	pp_data_src_tlb_str(&d, buf, sizeof(buf));
	CHECK_STR(buf, "N/A hit");
	pp_data_src_decode(P(TLB, L1) | P(TLB, HIT) | P(TLB, MISS), &d);
	pp_data_src_tlb_str(&d, buf, sizeof(buf));
	CHECK_STR(buf, "L1 hit miss");

	CHECK_STR(snoop_of(P(SNOOP, HIT) | P(SNOOPX, PEER), buf, sizeof(buf)), "Hit or Peer");
	CHECK_STR(snoop_of(P(SNOOPX, FWD) | P(SNOOPX, PEER), buf, sizeof(buf)), "Fwd or Peer");
	CHECK_STR(snoop_of(0, buf, sizeof(buf)), "N/A");

	pp_data_src_decode(P(BLK, DATA), &d);
	pp_data_src_blk_str(&d, buf, sizeof(buf));
	CHECK_STR(buf, " Data");
	pp_data_src_decode(P(BLK, NA) | P(BLK, DATA), &d);
	pp_data_src_blk_str(&d, buf, sizeof(buf));
	CHECK_STR(buf, " N/A");

	pp_data_src_decode(P(OP, PFETCH), &d);
	CHECK_STR(pp_data_src_op_name(&d), "PFETCH");
	pp_data_src_decode(P(OP, EXEC), &d);
	CHECK_STR(pp_data_src_op_name(&d), "EXEC");
	pp_data_src_decode(P(OP, LOAD) | P(OP, STORE), &d);
	CHECK_STR(pp_data_src_op_name(&d), "LOAD");
	pp_data_src_decode(P(OP, NA) | P(OP, LOAD), &d);
	CHECK_STR(pp_data_src_op_name(&d), "N/A");

	pp_data_src_decode(P(LOCK, LOCKED), &d);
	CHECK_STR(pp_data_src_lock_name(&d), "Yes");
	pp_data_src_decode(P(LOCK, NA) | P(LOCK, LOCKED), &d);
	CHECK_STR(pp_data_src_lock_name(&d), "N/A");
	pp_data_src_decode(0, &d);
	CHECK_STR(pp_data_src_lock_name(&d), "No");
}

TEST(level_classes)
{
	uint64_t t[16];

	memcpy(t, snb_table, sizeof(t));
	CHECK_STR(class_of(t[0x00]), "unknown");
	CHECK_STR(class_of(t[0x01]), "L1");
	CHECK_STR(class_of(t[0x02]), "LFB");
	CHECK_STR(class_of(t[0x03]), "L2");
	CHECK_STR(class_of(t[0x04]), "L3");
	CHECK_STR(class_of(t[0x08]), "remote cache");
	CHECK_STR(class_of(t[0x0a]), "local DRAM");
	CHECK_STR(class_of(t[0x0d]), "remote DRAM");
	CHECK_STR(class_of(t[0x0e]), "I/O");
	CHECK_STR(class_of(t[0x0f]), "uncached");
	skl_patch(t, 0);
	CHECK_STR(class_of(t[0x08]), "L3");
	CHECK_STR(class_of(t[0x09]), "remote cache");
	CHECK_STR(class_of(t[0x0b]), "remote DRAM");
	CHECK_STR(class_of(t[0x0c]), "remote cache");
	CHECK_STR(class_of(P(LVL, HIT) | LEVEL(CXL)), "CXL");
	CHECK_STR(class_of(P(LVL, HIT) | LEVEL(RAM) | P(HOPS, 2)), "remote DRAM");
	CHECK_STR(class_of(P(LVL, HIT) | LEVEL(UNC)), "uncached");
	CHECK_STR(class_of(0), "unknown");
}

TEST(truncation)
{
	char buf[PP_DATA_SRC_SCRIPT_MAX];
	char small[8];
	struct pp_data_src d;
	size_t full, n;

	pp_data_src_decode(snb_table[0x01], &d);
	memset(small, 'x', sizeof(small));
	CHECK_EQ_U64(pp_data_src_level_str(&d, small, 0), 0);
	CHECK(small[0] == 'x');
	CHECK_EQ_U64(pp_data_src_level_str(&d, small, 1), 0);
	CHECK_STR(small, "");
	CHECK_EQ_U64(pp_data_src_level_str(&d, small, 5), 4);
	CHECK_STR(small, "L1 h");

	full = pp_data_src_format_script(load_latency(snb_table[0x0d], 0, 0), buf, sizeof(buf));
	for (size_t len = 1; len < full + 2; len++) {
		char tmp[PP_DATA_SRC_SCRIPT_MAX];

		n = pp_data_src_format_script(load_latency(snb_table[0x0d], 0, 0), tmp, len);
		CHECK(n <= len - 1);
		CHECK_EQ_U64(strlen(tmp), n);
		CHECK(strncmp(tmp, buf, n) == 0);
	}
}

TEST_LIST = {
    {"decode_fields", decode_fields},
    {"perf_mem_na", perf_mem_na},
    {"intel_snb_table", intel_snb_table},
    {"intel_skl_table", intel_skl_table},
    {"intel_script_lines", intel_script_lines},
    {"amd_ibs", amd_ibs},
    {"old_style_mem_lvl", old_style_mem_lvl},
    {"hops_and_lvlnum", hops_and_lvlnum},
    {"tlb_snoop_blk_op_lock", tlb_snoop_blk_op_lock},
    {"level_classes", level_classes},
    {"truncation", truncation},
};
TEST_MAIN()
