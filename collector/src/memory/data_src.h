/*
 * Decoding of a sample's perf_mem_data_src value (PERF_SAMPLE_DATA_SRC) into perf's own
 * vocabulary: the strings match what `perf mem report` and `perf script` print for the same
 * bits (tools/perf/util/mem-events.c), so our profiles and perf's can be compared line for line.
 * Also gives a coarse, low-cardinality level class for use as a sample label.
 */
#ifndef PP_COLLECTOR_DATA_SRC_H
#define PP_COLLECTOR_DATA_SRC_H

#include <stddef.h>
#include <stdint.h>

/* union perf_mem_data_src, include/uapi/linux/perf_event.h (little-endian layout). */
#define PP_MEM_OP_NA 0x01
#define PP_MEM_OP_LOAD 0x02
#define PP_MEM_OP_STORE 0x04
#define PP_MEM_OP_PFETCH 0x08
#define PP_MEM_OP_EXEC 0x10
#define PP_MEM_OP_SHIFT 0

#define PP_MEM_LVL_NA 0x01
#define PP_MEM_LVL_HIT 0x02
#define PP_MEM_LVL_MISS 0x04
#define PP_MEM_LVL_L1 0x08
#define PP_MEM_LVL_LFB 0x10
#define PP_MEM_LVL_L2 0x20
#define PP_MEM_LVL_L3 0x40
#define PP_MEM_LVL_LOC_RAM 0x80
#define PP_MEM_LVL_REM_RAM1 0x100
#define PP_MEM_LVL_REM_RAM2 0x200
#define PP_MEM_LVL_REM_CCE1 0x400
#define PP_MEM_LVL_REM_CCE2 0x800
#define PP_MEM_LVL_IO 0x1000
#define PP_MEM_LVL_UNC 0x2000
#define PP_MEM_LVL_SHIFT 5

#define PP_MEM_SNOOP_NA 0x01
#define PP_MEM_SNOOP_NONE 0x02
#define PP_MEM_SNOOP_HIT 0x04
#define PP_MEM_SNOOP_MISS 0x08
#define PP_MEM_SNOOP_HITM 0x10
#define PP_MEM_SNOOP_SHIFT 19

#define PP_MEM_LOCK_NA 0x01
#define PP_MEM_LOCK_LOCKED 0x02
#define PP_MEM_LOCK_SHIFT 24

#define PP_MEM_TLB_NA 0x01
#define PP_MEM_TLB_HIT 0x02
#define PP_MEM_TLB_MISS 0x04
#define PP_MEM_TLB_L1 0x08
#define PP_MEM_TLB_L2 0x10
#define PP_MEM_TLB_WK 0x20
#define PP_MEM_TLB_OS 0x40
#define PP_MEM_TLB_SHIFT 26

#define PP_MEM_LVLNUM_L1 0x01
#define PP_MEM_LVLNUM_L2 0x02
#define PP_MEM_LVLNUM_L3 0x03
#define PP_MEM_LVLNUM_L4 0x04
#define PP_MEM_LVLNUM_L2_MHB 0x05
#define PP_MEM_LVLNUM_MSC 0x06
#define PP_MEM_LVLNUM_L0 0x07
#define PP_MEM_LVLNUM_UNC 0x08
#define PP_MEM_LVLNUM_CXL 0x09
#define PP_MEM_LVLNUM_IO 0x0a
#define PP_MEM_LVLNUM_ANY_CACHE 0x0b
#define PP_MEM_LVLNUM_LFB 0x0c
#define PP_MEM_LVLNUM_RAM 0x0d
#define PP_MEM_LVLNUM_PMEM 0x0e
#define PP_MEM_LVLNUM_NA 0x0f
#define PP_MEM_LVLNUM_SHIFT 33

#define PP_MEM_REMOTE_REMOTE 0x01
#define PP_MEM_REMOTE_SHIFT 37

#define PP_MEM_SNOOPX_FWD 0x01
#define PP_MEM_SNOOPX_PEER 0x02
#define PP_MEM_SNOOPX_SHIFT 38

#define PP_MEM_BLK_NA 0x01
#define PP_MEM_BLK_DATA 0x02
#define PP_MEM_BLK_ADDR 0x04
#define PP_MEM_BLK_SHIFT 40

#define PP_MEM_HOPS_0 0x01 /* remote core, same node */
#define PP_MEM_HOPS_1 0x02 /* remote node, same socket */
#define PP_MEM_HOPS_2 0x03 /* remote socket, same board */
#define PP_MEM_HOPS_3 0x04 /* remote board */
#define PP_MEM_HOPS_SHIFT 43

/* PP_MEM_S(LVL, HIT) == PERF_MEM_S(LVL, HIT): a field value moved to its place. */
#define PP_MEM_S(a, s) (((uint64_t)PP_MEM_##a##_##s) << PP_MEM_##a##_SHIFT)

/* What the kernel puts in data_src when it knows nothing (PERF_MEM_NA). */
#define PP_MEM_NA 0x1e05080021ULL
/* The same on older kernels, whose PERF_MEM_NA had no LVLNUM_NA (5.10: tests/vm). */
#define PP_MEM_NA_NO_LVLNUM 0x5080021ULL

/* Buffer sizes that hold any output of the string functions below without truncation. */
#define PP_DATA_SRC_STR_MAX 256
#define PP_DATA_SRC_SCRIPT_MAX 640

/* The fields of perf_mem_data_src, each right-aligned. */
struct pp_data_src {
	uint8_t op;	 /* PP_MEM_OP_* bits (5) */
	uint16_t lvl;	 /* PP_MEM_LVL_* bits (14) */
	uint8_t snoop;	 /* PP_MEM_SNOOP_* bits (5) */
	uint8_t lock;	 /* PP_MEM_LOCK_* bits (2) */
	uint8_t dtlb;	 /* PP_MEM_TLB_* bits (7) */
	uint8_t lvl_num; /* PP_MEM_LVLNUM_* value (4) */
	uint8_t remote;	 /* 0 or 1 */
	uint8_t snoopx;	 /* PP_MEM_SNOOPX_* bits (2) */
	uint8_t blk;	 /* PP_MEM_BLK_* bits (3) */
	uint8_t hops;	 /* PP_MEM_HOPS_* value (3) */
};

void pp_data_src_decode(uint64_t val, struct pp_data_src *out);

/*
 * The string functions write like the kernel's scnprintf: at most len - 1 characters and a NUL
 * (nothing when len is 0), and return the number of characters written, never more than
 * len - 1. With a buffer of PP_DATA_SRC_STR_MAX nothing is ever cut.
 */

/* perf_mem__lvl_scnprintf: "L1 hit", "Remote RAM hit", "Local RAM hit", "N/A", ... */
size_t pp_data_src_level_str(const struct pp_data_src *d, char *buf, size_t len);
/* perf_mem__snp_scnprintf: "None", "Hit", "HitM", "Fwd", "Hit or Fwd", "N/A", ... */
size_t pp_data_src_snoop_str(const struct pp_data_src *d, char *buf, size_t len);
/* perf_mem__tlb_scnprintf: "L1 or L2 hit", "L2 miss", "N/A", ... */
size_t pp_data_src_tlb_str(const struct pp_data_src *d, char *buf, size_t len);
/* perf_mem__blk_scnprintf, with perf's leading space: " N/A", " Data", " Data Addr". */
size_t pp_data_src_blk_str(const struct pp_data_src *d, char *buf, size_t len);
/* perf_mem__op_scnprintf: "N/A", "LOAD", "STORE", "PFETCH", "EXEC", or "No" when no bit is set. */
const char *pp_data_src_op_name(const struct pp_data_src *d);
/* perf_mem__lck_scnprintf: "N/A", "Yes", "No". */
const char *pp_data_src_lock_name(const struct pp_data_src *d);

/* perf_script__meminfo_scnprintf: "|OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A".
 */
size_t pp_data_src_format_script(uint64_t val, char *buf, size_t len);

/*
 * Where the data came from, as one of a dozen fixed strings suitable for a label: "L1", "LFB",
 * "L2", "L3", "local DRAM", "remote cache", "remote DRAM", "PMEM", "CXL", "I/O", "uncached",
 * "unknown". A miss, or no level information, is "unknown".
 */
const char *pp_data_src_level_class(const struct pp_data_src *d);

#endif /* PP_COLLECTOR_DATA_SRC_H */
