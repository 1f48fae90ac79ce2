/*
 * PMU discovery from sysfs: what perf event sources this machine has (core PMUs, AMD IBS,
 * software), their dynamic types, CPUs, precise-sampling capability, format fields and named
 * events, and an encoder that turns perf-style term lists ("event=0xcd,umask=0x1,ldlat=30")
 * into config/config1/config2 using a PMU's own format specs. Everything reads below a
 * configurable sysfs root so tests can point it at recorded trees of real machines; the
 * parsers take buffers so they can be fuzzed.
 */
#ifndef PP_COLLECTOR_PMU_H
#define PP_COLLECTOR_PMU_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on what one scan keeps; anything past them is dropped and counted. */
#define PP_PMU_MAX_PMUS 256
#define PP_PMU_MAX_FORMATS 64
#define PP_PMU_MAX_EVENTS 4096
#define PP_PMU_MAX_CAPS 64
#define PP_CPULIST_MAX_CPUS 8192
#define PP_PMU_NAME_LEN 64
#define PP_PMU_EVENT_LEN 256

enum pp_pmu_kind {
	PP_PMU_OTHER = 0,
	PP_PMU_INTEL_CORE, /* cpu, cpu_core, cpu_atom, cpu_lowpower on Intel */
	PP_PMU_AMD_CORE,   /* "cpu" on a machine that also has ibs_op: precise events go to IBS */
	PP_PMU_AMD_IBS_OP,
	PP_PMU_AMD_IBS_FETCH,
	PP_PMU_SOFTWARE,
};

/* A format field: which config word it lives in and which bits, e.g. "config1:0-15". */
struct pp_pmu_format {
	char name[PP_PMU_NAME_LEN];
	unsigned int word; /* 0 = config, 1 = config1, 2 = config2 */
	uint64_t mask;	   /* bits the value is spread over, lowest first (perf semantics) */
};

struct pp_pmu_event {
	char name[PP_PMU_NAME_LEN];
	char encoding[PP_PMU_EVENT_LEN]; /* "event=0xcd,umask=0x1,ldlat=3" (trimmed) */
};

struct pp_pmu_cap {
	char name[PP_PMU_NAME_LEN];
	char value[PP_PMU_NAME_LEN]; /* file contents, trimmed ("" for empty files) */
};

struct pp_pmu {
	char name[PP_PMU_NAME_LEN];
	uint32_t type;
	enum pp_pmu_kind kind;
	int *cpus; /* from "cpus" or "cpumask"; NULL/0 when neither exists (= all CPUs) */
	size_t nr_cpus;
	int max_precise;		/* caps/max_precise, -1 when absent */
	char pmu_name[PP_PMU_NAME_LEN]; /* caps/pmu_name, "" when absent */
	struct pp_pmu_format *formats;
	size_t nr_formats;
	struct pp_pmu_event *events;
	size_t nr_events;
	struct pp_pmu_cap *caps;
	size_t nr_caps;
	size_t nr_dropped; /* formats/events/caps past the bounds or unparsable */
};

struct pp_pmu_set {
	struct pp_pmu *pmus; /* sorted by name */
	size_t nr_pmus;
	int *online; /* online CPUs, ascending */
	size_t nr_online;
	size_t nr_dropped; /* PMU directories skipped (unreadable type, over the bound) */
};

/*
 * Parse a CPU list ("0-7,16", trailing newline allowed, "" = empty) into a malloc'ed ascending
 * array owned by the caller. Returns 0, -EINVAL on syntax errors, -E2BIG past
 * PP_CPULIST_MAX_CPUS, -ENOMEM.
 */
int pp_cpulist_parse(const char *buf, size_t len, int **cpus, size_t *nr);

/* Sorts n CPU ids ascending and drops repeats in place; returns how many remain. */
size_t pp_cpus_sort_unique(int *cpus, size_t n);

/* Parse a format spec ("config:0-7,32-35", "config1:0-15"); out->name is left untouched. */
int pp_pmu_format_parse(const char *buf, size_t len, struct pp_pmu_format *out);

/* Kind of a PMU from its directory name alone (AMD "cpu" is fixed up by pp_pmu_scan). */
enum pp_pmu_kind pp_pmu_classify(const char *name);
const char *pp_pmu_kind_str(enum pp_pmu_kind kind);

/*
 * Scan <sysfs_root>/bus/event_source/devices and <sysfs_root>/devices/system/cpu/online
 * (sysfs_root NULL = "/sys"). A missing devices directory gives an empty set (no perf events
 * at all). Returns NULL and sets errno when it cannot be read otherwise or on allocation
 * failure. The caller frees with pp_pmu_set_free().
 */
struct pp_pmu_set *pp_pmu_scan(const char *sysfs_root);
void pp_pmu_set_free(struct pp_pmu_set *set);

/* Lookups; returned pointers live as long as the set. NULL when absent. */
const struct pp_pmu *pp_pmu_find(const struct pp_pmu_set *set, const char *name);
const char *pp_pmu_event(const struct pp_pmu *pmu, const char *name);
const char *pp_pmu_cap(const struct pp_pmu *pmu, const char *name);
const struct pp_pmu_format *pp_pmu_format(const struct pp_pmu *pmu, const char *name);

/* Core PMUs (Intel or AMD "cpu"), in name order; returns how many were stored (<= max). */
size_t pp_pmu_core_pmus(const struct pp_pmu_set *set, const struct pp_pmu **out, size_t max);

/*
 * Encode a perf term list for pmu into config[0..2] (which the caller zeroes or pre-fills:
 * terms are OR-ed in after clearing their own bits, so later terms override earlier ones).
 * Terms: "name=value" (decimal or 0x hex), a bare "name" (= 1), "config=", "config1=",
 * "config2=" (whole words), or the name of one of the PMU's events, which expands to its
 * encoding. Unknown terms and values too wide for their field give -EINVAL with the term
 * named in err.
 */
int pp_pmu_encode(const struct pp_pmu *pmu, const char *terms, size_t len, uint64_t config[3],
		  char *err, size_t errlen);

/* Intersect pmu's CPU list with the online CPUs into out (caller-sized >= nr_online). */
size_t pp_pmu_online_cpus(const struct pp_pmu_set *set, const struct pp_pmu *pmu, int *out);

#endif /* PP_COLLECTOR_PMU_H */
