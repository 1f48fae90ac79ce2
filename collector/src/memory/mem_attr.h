/*
 * Memory-sample attribution: which memory fields of a shim record the kernel really filled
 * (per kernel version), the low-cardinality labels a memory sample carries (data-source level,
 * TLB, snoop, op and a latency bucket, in perf's vocabulary, never addresses), the object
 * class of a data address's mapping ("[heap]", "[stack]", "[anon]", "[file] name",
 * "[kernel]", "[unknown]"), and a bounded per-(process, mapping) cache the session keeps its
 * data-object resolution in, so repeated samples cost one lookup.
 *
 * Label keys (documented for users in exporter/include/pebsprof/profile.h):
 *   memory.level          perf mem's level text: "L1 hit", "LFB/MAB hit", "L3 hit", "RAM hit",
 *                         "Remote RAM hit", "Local RAM hit", ...
 *   memory.tlb            "L1 or L2 hit", "L2 miss", "Walker hit", ...
 *   memory.snoop          "None", "Hit", "Miss", "HitM", "Fwd", ...
 *   memory.op             "LOAD", "STORE", "PFETCH", "EXEC"
 *   memory.latency_bucket "0-31", "32-63", "64-127", ..., "512-1023", ">=1024" (cycles)
 * A key is present only when the kernel gave the field and it is not "N/A".
 */
#ifndef PP_COLLECTOR_MEM_ATTR_H
#define PP_COLLECTOR_MEM_ATTR_H

#include <stddef.h>
#include <stdint.h>

#include <pebsprof/profile.h>
#include <pebsprof/record.h>

#include "data_src.h"
#include "process/procmaps.h"

/* PERF_SAMPLE_* bits as the kernel sets them in perf_sample_data.sample_flags. */
#define PP_PERF_SAMPLE_ADDR (1ull << 3)
#define PP_PERF_SAMPLE_WEIGHT (1ull << 14)
#define PP_PERF_SAMPLE_DATA_SRC (1ull << 15)
#define PP_PERF_SAMPLE_PHYS_ADDR (1ull << 19)
#define PP_PERF_SAMPLE_WEIGHT_STRUCT (1ull << 24)

/* The memory fields of one sample that carry real values. */
struct pp_mem_sample {
	uint64_t addr;	      /* data virtual address; valid with has_addr */
	uint64_t data_src;    /* perf_mem_data_src; valid with has_data_src */
	uint32_t latency;     /* weight.var1_dw: load latency in cycles; valid with has_latency */
	uint16_t ins_latency; /* weight.var2_w: instruction latency (ADL+), 0 when unknown */
	uint8_t has_addr, has_data_src, has_latency;
};

/*
 * Which memory fields of rec are real. With PP_SF_HAS_SAMPLE_FLAGS (6.1+) a field counts only
 * when its PERF_SAMPLE_* bit is in sample_flags (6.1-6.2: bits the PMU driver filled). Since
 * 6.3 every requested bit is set and unfilled fields hold defaults, and 5.x zeroes them, so
 * the values are checked as well: addr != 0, data_src neither 0 nor PERF_MEM_NA, latency != 0.
 * Records without PP_SF_MEM_FIELDS have none. Returns 1 when any field is real, else 0.
 */
int pp_mem_sample_get(const struct pp_sample *rec, struct pp_mem_sample *out);

/* Power-of-two latency buckets: index 0 is "0-31", 1 "32-63", ..., 5 "512-1023", 6 ">=1024". */
#define PP_MEM_LATENCY_BUCKETS 7
unsigned pp_mem_latency_bucket_index(uint32_t cycles);
/* The bucket's label value (a static string); NULL for an index out of range. */
const char *pp_mem_latency_bucket_name(unsigned index);

/*
 * A number that decides a sample's labels: samples with equal keys get equal labels, so an
 * aggregation table can key on it instead of on strings. 0 means no labels. Only the
 * data_src fields the labels show take part (lock and blocked bits do not).
 */
uint64_t pp_mem_label_key(const struct pp_mem_sample *m);

#define PP_MEM_MAX_LABELS 5

/* The labels of one key; the values point into this struct (or static strings). */
struct pp_mem_labels {
	struct pp_label labels[PP_MEM_MAX_LABELS];
	uint32_t n;
	char level[PP_DATA_SRC_STR_MAX];
	char tlb[PP_DATA_SRC_STR_MAX];
	char snoop[PP_DATA_SRC_STR_MAX];
};

/* Fills out with the labels of key (see pp_mem_label_key); returns out->n. */
uint32_t pp_mem_labels_from_key(uint64_t key, struct pp_mem_labels *out);

/* Whether addr lies in the kernel half of the address space (top bit set: x86-64, arm64). */
static inline int pp_mem_addr_is_kernel(uint64_t addr)
{
	return (addr >> 63) != 0;
}

/* Object names for data addresses that no symbol names. */
#define PP_MEM_OBJ_KERNEL "[kernel]"
#define PP_MEM_OBJ_UNKNOWN "[unknown]"

/*
 * The object class of mapping m for a data address without a symbol: "[heap]", "[stack]",
 * "[anon]" (anonymous memory, thread stacks, big malloc blocks), "[vdso]", "[vvar]",
 * "[vsyscall]", or "[file] <basename>" for file mappings. Written to buf (at most len - 1
 * characters and a NUL); returns buf.
 */
const char *pp_mem_map_class(const struct pp_map_entry *m, char *buf, size_t len);

/*
 * The file mapping whose ELF data segment covers the anonymous mapping m, or NULL: a .bss
 * larger than the rest of its page is mapped anonymously right after the file's writable
 * mapping, and its globals are named by that file. entries[0 .. n) are the process's sorted
 * mappings and m one of them.
 */
const struct pp_map_entry *pp_mem_bss_owner(const struct pp_map_entry *entries, size_t n,
					    const struct pp_map_entry *m);

/* One mapping of one process, as it was when the entry was made. */
struct pp_mem_obj_key {
	uint64_t generation; /* the process's: exec never reuses an entry */
	uint64_t start, end, offset, inode;
	uint32_t pid;
};

/* syms_state values */
#define PP_MEM_SYMS_UNKNOWN 0 /* the symbol table is asked for (the session keeps it) */
#define PP_MEM_SYMS_NONE 2    /* the file could not be read: classes only */

/* What the session remembers per (process, mapping). Zeroed when the entry is made. */
struct pp_mem_obj {
	struct pp_mem_obj_key key;
	uint32_t class_loc;	 /* profile location of the mapping's class; 0 until made */
	uint32_t last_loc;	 /* location of the data symbol resolved last ... */
	uint64_t last_sym_start; /* ... and that symbol's address */
	uint32_t syms_state;	 /* PP_MEM_SYMS_* */
	uint32_t used;		 /* nonzero for an occupied slot */
};

struct pp_mem_objcache_stats {
	uint64_t hits;	    /* lookups answered by an entry */
	uint64_t misses;    /* lookups that made a new entry */
	uint64_t evictions; /* entries dropped because the cache was full */
};

struct pp_mem_objcache;

/* A cache of at most capacity entries (0: 4096). NULL with errno ENOMEM. */
struct pp_mem_objcache *pp_mem_objcache_new(size_t capacity);
/* NULL is a no-op. */
void pp_mem_objcache_free(struct pp_mem_objcache *c);

/*
 * The entry of key, made (zeroed, key set) when absent. When the cache is full it is emptied
 * first (the evictions are counted). Never NULL. The pointer is valid until the next get or
 * reset.
 */
struct pp_mem_obj *pp_mem_objcache_get(struct pp_mem_objcache *c, const struct pp_mem_obj_key *key);
/* Drops every entry (location ids of a finished profile), without counting evictions. */
void pp_mem_objcache_reset(struct pp_mem_objcache *c);
/* Bytes the cache holds (a fixed table); 0 for NULL. */
size_t pp_mem_objcache_bytes(const struct pp_mem_objcache *c);
void pp_mem_objcache_get_stats(const struct pp_mem_objcache *c, struct pp_mem_objcache_stats *out);

#endif /* PP_COLLECTOR_MEM_ATTR_H */
