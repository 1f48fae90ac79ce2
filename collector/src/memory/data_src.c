/*
 * perf_mem_data_src decoding and perf-compatible rendering. The rules and strings follow
 * tools/perf/util/mem-events.c (perf_mem__*_scnprintf) exactly, oddities included (a level
 * with neither HIT nor MISS keeps its trailing space, an op with no bit prints "No"), because
 * the point is that our text equals perf's for the same value.
 */
#include "data_src.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void pp_data_src_decode(uint64_t val, struct pp_data_src *out)
{
	out->op = (uint8_t)((val >> PP_MEM_OP_SHIFT) & 0x1f);
	out->lvl = (uint16_t)((val >> PP_MEM_LVL_SHIFT) & 0x3fff);
	out->snoop = (uint8_t)((val >> PP_MEM_SNOOP_SHIFT) & 0x1f);
	out->lock = (uint8_t)((val >> PP_MEM_LOCK_SHIFT) & 0x3);
	out->dtlb = (uint8_t)((val >> PP_MEM_TLB_SHIFT) & 0x7f);
	out->lvl_num = (uint8_t)((val >> PP_MEM_LVLNUM_SHIFT) & 0xf);
	out->remote = (uint8_t)((val >> PP_MEM_REMOTE_SHIFT) & 0x1);
	out->snoopx = (uint8_t)((val >> PP_MEM_SNOOPX_SHIFT) & 0x3);
	out->blk = (uint8_t)((val >> PP_MEM_BLK_SHIFT) & 0x7);
	out->hops = (uint8_t)((val >> PP_MEM_HOPS_SHIFT) & 0x7);
}

/* A bounded writer with scnprintf semantics: pos never exceeds len - 1, the text stays
 * NUL-terminated. */
struct out {
	char *buf;
	size_t len;
	size_t pos;
};

static void out_init(struct out *o, char *buf, size_t len)
{
	o->buf = buf;
	o->len = len;
	o->pos = 0;
	if (len)
		buf[0] = '\0';
}

static void out_str(struct out *o, const char *s)
{
	size_t n = strlen(s);

	if (o->len == 0 || o->pos >= o->len - 1)
		return;
	if (n > o->len - 1 - o->pos)
		n = o->len - 1 - o->pos;
	memcpy(o->buf + o->pos, s, n);
	o->pos += n;
	o->buf[o->pos] = '\0';
}

__attribute__((format(printf, 2, 3))) static void out_fmt(struct out *o, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	out_str(o, tmp);
}

/* Writes the names of the set bits of m, lowest first, joined by " or "; returns how many. */
static int out_bits(struct out *o, unsigned m, const char *const *names, size_t n, int printed)
{
	for (size_t i = 0; m && i < n; i++, m >>= 1) {
		if (!(m & 1) || !names[i])
			continue;
		if (printed++)
			out_str(o, " or ");
		out_str(o, names[i]);
	}
	return printed;
}

static const char *const mem_lvl[] = {
    "N/A",
    "HIT",
    "MISS",
    "L1",
    "LFB/MAB",
    "L2",
    "L3",
    "Local RAM",
    "Remote RAM (1 hop)",
    "Remote RAM (2 hops)",
    "Remote Cache (1 hop)",
    "Remote Cache (2 hops)",
    "I/O",
    "Uncached",
};

static const char *const mem_lvlnum[16] = {
    [PP_MEM_LVLNUM_L1] = "L1",	       [PP_MEM_LVLNUM_L2] = "L2",
    [PP_MEM_LVLNUM_L3] = "L3",	       [PP_MEM_LVLNUM_L4] = "L4",
    [PP_MEM_LVLNUM_L2_MHB] = "L2 MHB", [PP_MEM_LVLNUM_MSC] = "Memory-side Cache",
    [PP_MEM_LVLNUM_UNC] = "Uncached",  [PP_MEM_LVLNUM_CXL] = "CXL",
    [PP_MEM_LVLNUM_IO] = "I/O",	       [PP_MEM_LVLNUM_ANY_CACHE] = "Any cache",
    [PP_MEM_LVLNUM_LFB] = "LFB/MAB",   [PP_MEM_LVLNUM_RAM] = "RAM",
    [PP_MEM_LVLNUM_PMEM] = "PMEM",     [PP_MEM_LVLNUM_NA] = "N/A",
};

/* Printed after "Remote " when remote is set. */
static const char *const mem_hops[] = {
    "N/A", "core, same node", "node, same socket", "socket, same board", "board",
};

size_t pp_data_src_level_str(const struct pp_data_src *d, char *buf, size_t len)
{
	const char *hit_miss = "";
	struct out o;
	unsigned lvl;

	out_init(&o, buf, len);
	if (d->lvl & PP_MEM_LVL_HIT)
		hit_miss = "hit";
	else if (d->lvl & PP_MEM_LVL_MISS)
		hit_miss = "miss";

	if (d->lvl_num && d->lvl_num != PP_MEM_LVLNUM_NA) {
		if (d->remote)
			out_str(&o, "Remote ");
		/*
		 * perf indexes mem_hops[] unchecked; values 5..7 are not defined by the uapi, so
		 * name them rather than read past the table.
		 */
		if (d->hops && d->hops < sizeof(mem_hops) / sizeof(mem_hops[0]))
			out_fmt(&o, "%s ", mem_hops[d->hops]);
		else if (d->hops)
			out_fmt(&o, "Unknown hops %u ", (unsigned)d->hops);
		if (mem_lvlnum[d->lvl_num])
			out_str(&o, mem_lvlnum[d->lvl_num]);
		else
			out_fmt(&o, "Unknown level %u", (unsigned)d->lvl_num);
		out_fmt(&o, " %s", hit_miss);
		return o.pos;
	}

	lvl = d->lvl & ~(unsigned)(PP_MEM_LVL_NA | PP_MEM_LVL_HIT | PP_MEM_LVL_MISS);
	if (lvl && out_bits(&o, lvl, mem_lvl, sizeof(mem_lvl) / sizeof(mem_lvl[0]), 0)) {
		out_fmt(&o, " %s", hit_miss);
		return o.pos;
	}
	out_init(&o, buf, len);
	out_str(&o, "N/A");
	return o.pos;
}

static const char *const snoop_access[] = {"N/A", "None", "Hit", "Miss", "HitM"};
static const char *const snoopx_access[] = {"Fwd", "Peer"};

size_t pp_data_src_snoop_str(const struct pp_data_src *d, char *buf, size_t len)
{
	struct out o;
	int printed;

	out_init(&o, buf, len);
	printed = out_bits(&o, d->snoop, snoop_access, 5, 0);
	printed = out_bits(&o, d->snoopx, snoopx_access, 2, printed);
	if (!printed)
		out_str(&o, "N/A");
	return o.pos;
}

/* HIT and MISS are left NULL: they become the " hit"/" miss" suffix instead. */
static const char *const tlb_access[] = {"N/A", NULL, NULL, "L1", "L2", "Walker", "Fault"};

size_t pp_data_src_tlb_str(const struct pp_data_src *d, char *buf, size_t len)
{
	struct out o;

	out_init(&o, buf, len);
	if (!out_bits(&o, d->dtlb, tlb_access, 7, 0))
		out_str(&o, "N/A");
	if (d->dtlb & PP_MEM_TLB_HIT)
		out_str(&o, " hit");
	if (d->dtlb & PP_MEM_TLB_MISS)
		out_str(&o, " miss");
	return o.pos;
}

size_t pp_data_src_blk_str(const struct pp_data_src *d, char *buf, size_t len)
{
	struct out o;

	out_init(&o, buf, len);
	if (!d->blk || (d->blk & PP_MEM_BLK_NA)) {
		out_str(&o, " N/A");
		return o.pos;
	}
	if (d->blk & PP_MEM_BLK_DATA)
		out_str(&o, " Data");
	if (d->blk & PP_MEM_BLK_ADDR)
		out_str(&o, " Addr");
	return o.pos;
}

const char *pp_data_src_op_name(const struct pp_data_src *d)
{
	if (d->op & PP_MEM_OP_NA)
		return "N/A";
	if (d->op & PP_MEM_OP_LOAD)
		return "LOAD";
	if (d->op & PP_MEM_OP_STORE)
		return "STORE";
	if (d->op & PP_MEM_OP_PFETCH)
		return "PFETCH";
	if (d->op & PP_MEM_OP_EXEC)
		return "EXEC";
	return "No";
}

const char *pp_data_src_lock_name(const struct pp_data_src *d)
{
	if (d->lock & PP_MEM_LOCK_NA)
		return "N/A";
	if (d->lock & PP_MEM_LOCK_LOCKED)
		return "Yes";
	return "No";
}

size_t pp_data_src_format_script(uint64_t val, char *buf, size_t len)
{
	char tmp[PP_DATA_SRC_STR_MAX];
	struct pp_data_src d;
	struct out o;

	pp_data_src_decode(val, &d);
	out_init(&o, buf, len);
	out_str(&o, "|OP ");
	out_str(&o, pp_data_src_op_name(&d));
	out_str(&o, "|LVL ");
	pp_data_src_level_str(&d, tmp, sizeof(tmp));
	out_str(&o, tmp);
	out_str(&o, "|SNP ");
	pp_data_src_snoop_str(&d, tmp, sizeof(tmp));
	out_str(&o, tmp);
	out_str(&o, "|TLB ");
	pp_data_src_tlb_str(&d, tmp, sizeof(tmp));
	out_str(&o, tmp);
	out_str(&o, "|LCK ");
	out_str(&o, pp_data_src_lock_name(&d));
	out_str(&o, "|BLK ");
	pp_data_src_blk_str(&d, tmp, sizeof(tmp));
	out_str(&o, tmp);
	return o.pos;
}

/* Class of a level given as mem_lvl_num (the modern encoding). */
static const char *lvlnum_class(unsigned lvl_num, int remote)
{
	switch (lvl_num) {
	case PP_MEM_LVLNUM_RAM:
		return remote ? "remote DRAM" : "local DRAM";
	case PP_MEM_LVLNUM_PMEM:
		return "PMEM";
	case PP_MEM_LVLNUM_CXL:
		return "CXL";
	case PP_MEM_LVLNUM_IO:
		return "I/O";
	case PP_MEM_LVLNUM_UNC:
		return "uncached";
	default:
		break;
	}
	if (remote)
		return "remote cache";
	switch (lvl_num) {
	case PP_MEM_LVLNUM_L0:
	case PP_MEM_LVLNUM_L1:
		return "L1";
	case PP_MEM_LVLNUM_LFB:
		return "LFB";
	case PP_MEM_LVLNUM_L2:
	case PP_MEM_LVLNUM_L2_MHB:
		return "L2";
	/*
	 * L4 and memory-side caches sit between the LLC and DRAM; a label set this small has no
	 * slot of their own, and they behave like a (slower) last-level cache. A local
	 * "any cache" hit is a peer core's cache found through the LLC's snoop filter.
	 */
	case PP_MEM_LVLNUM_L3:
	case PP_MEM_LVLNUM_L4:
	case PP_MEM_LVLNUM_MSC:
	case PP_MEM_LVLNUM_ANY_CACHE:
		return "L3";
	default:
		return "unknown";
	}
}

const char *pp_data_src_level_class(const struct pp_data_src *d)
{
	unsigned lvl = d->lvl;

	/* A miss says only where the data was not. */
	if (!(lvl & PP_MEM_LVL_HIT) && (lvl & PP_MEM_LVL_MISS))
		return "unknown";
	if (d->lvl_num && d->lvl_num != PP_MEM_LVLNUM_NA)
		return lvlnum_class(d->lvl_num, d->remote || d->hops);

	/* Old encoding: the nearest level named wins ("L3 or Remote Cache (1 hop)" is L3). */
	if (lvl & PP_MEM_LVL_L1)
		return "L1";
	if (lvl & PP_MEM_LVL_LFB)
		return "LFB";
	if (lvl & PP_MEM_LVL_L2)
		return "L2";
	if (lvl & PP_MEM_LVL_L3)
		return "L3";
	if (lvl & PP_MEM_LVL_LOC_RAM)
		return "local DRAM";
	if (lvl & (PP_MEM_LVL_REM_CCE1 | PP_MEM_LVL_REM_CCE2))
		return "remote cache";
	if (lvl & (PP_MEM_LVL_REM_RAM1 | PP_MEM_LVL_REM_RAM2))
		return "remote DRAM";
	if (lvl & PP_MEM_LVL_IO)
		return "I/O";
	if (lvl & PP_MEM_LVL_UNC)
		return "uncached";
	return "unknown";
}
