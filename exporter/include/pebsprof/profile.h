/*
 * The exporter's profile model: resolved, aggregated samples of one event over one time
 * window, with deduplicated mappings, locations and function names. The collector fills it;
 * the writers (pprof, folded, flame graph, OTLP) read it. Knows nothing of BPF or /proc.
 *
 * Ownership: the profile copies every string it is given; pointers it returns stay valid
 * until pp_profile_free(). Ids are 1-based; 0 means "none".
 */
#ifndef PEBSPROF_PROFILE_H
#define PEBSPROF_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum pp_frame_kind {
	PP_FRAME_NATIVE = 1, /* user-space machine code; address is the ELF virtual address */
	PP_FRAME_KERNEL = 2, /* kernel; address is the kernel virtual address */
	PP_FRAME_DATA = 3,   /* data object touched by a memory sample (leaf-most, synthetic) */
};

struct pp_profile_desc {
	const char *event;	/* event name as the user asked for it, e.g. "cpu-clock" */
	const char *value_type; /* second sample type: "cpu" for cpu-clock, else the event */
	const char *value_unit; /* "nanoseconds" for cpu-clock, else "count" */
	uint64_t period;	/* nominal sampling period in value_unit */
	uint64_t start_unix_ns; /* wall-clock start of the window */
	uint64_t duration_ns;	/* wall-clock length of the window */
	/*
	 * A memory event (mem-loads, mem-stores, IBS op): samples also carry a latency sum
	 * (pp_sample_info.latency, cycles) and the writers add a latency-weighted view: pprof a
	 * third sample type "<value_type>_latency"/"cycles", OTLP a second Profile per process.
	 */
	uint32_t mem_latency;
	/*
	 * Off-CPU samples (pp_sample_info.wait) are of 1 in off_cpu_every switches (0 or 1: all),
	 * their values already scaled by it; the writers state it (OTLP: the off_cpu Profile's
	 * attribute off_cpu.sampled_every; pprof: a comment).
	 */
	uint32_t off_cpu_every;
};

/* The attribute of an OTLP off_cpu Profile: 1 in how many switches were recorded. */
#define PP_ATTR_OFF_CPU_EVERY "off_cpu.sampled_every"

/* Sample label keys of memory samples (set only when the kernel gave the field). */
#define PP_LABEL_MEM_LEVEL "memory.level"	     /* perf mem's level: "L1 hit", "RAM hit" */
#define PP_LABEL_MEM_TLB "memory.tlb"		     /* "L1 or L2 hit", "Walker hit", ... */
#define PP_LABEL_MEM_SNOOP "memory.snoop"	     /* "None", "Hit", "HitM", ... */
#define PP_LABEL_MEM_OP "memory.op"		     /* "LOAD", "STORE", ... */
#define PP_LABEL_MEM_LATENCY "memory.latency_bucket" /* "0-31", "32-63", ..., ">=1024" */

struct pp_mapping_info {
	uint64_t start;	      /* runtime start address */
	uint64_t limit;	      /* runtime end address (exclusive) */
	uint64_t file_offset; /* file offset of start */
	const char *filename; /* path as the process sees it, or "[kernel.kallsyms]" */
	const char *build_id; /* lower-case hex GNU build id, or "" */
	/*
	 * Runtime address minus ELF virtual address in this mapping (the load bias; for a
	 * file not read, start - file_offset). Locations hold ELF addresses, as OTLP sends them;
	 * pprof adds this to send process addresses inside [start, limit).
	 */
	uint64_t load_bias;
};

struct pp_location_info {
	uint32_t mapping_id;  /* 0 for none */
	uint64_t address;     /* ELF virtual address (native: + the mapping's load_bias at run
			       * time), kernel address (kernel) */
	const char *function; /* symbol name, or "[unknown]"-style placeholder; never NULL */
	enum pp_frame_kind kind;
	/*
	 * Nothing named this frame of a file: function is a placeholder ("libfoo.so+0x1a2b") and
	 * the address and mapping (file name, build id) keep its identity. Not part of the
	 * location's identity. PP_UNNAMED_* says how pprof and OTLP send it.
	 */
	uint32_t unnamed;
	/*
	 * The name as the binary spells it, where function is its demangled form
	 * ("_ZN3foo3barEv" for "foo::bar"): pprof's and OTLP's Function.system_name. NULL: the
	 * same as function. Not part of the location's identity (function and address are).
	 */
	const char *system_name;
};

/*
 * pp_location_info.unnamed. DRAWN (the agent tried to name it): sent with the placeholder as
 * its function so backends draw it, and pprof's Mapping says has_functions false so pprof's
 * own symbolizer looks at it again. FOR_BACKEND (--symbolize none): sent with no Line, the
 * way Pyroscope's symbolizer (by the mapping's build id) and the OTel eBPF profiler expect it.
 */
#define PP_UNNAMED_DRAWN 1
#define PP_UNNAMED_FOR_BACKEND 2

#define PP_SAMPLE_MAX_LABELS 8

/* A string label attached to a sample (low cardinality only: never raw addresses). */
struct pp_label {
	const char *key;
	const char *value;
};

/* What a sample's process is; kernel threads and idle have no program to name them. */
enum pp_process_kind {
	PP_PROCESS_PROGRAM = 0,
	PP_PROCESS_KERNEL_THREAD = 1,
	PP_PROCESS_IDLE = 2, /* the idle task, pid 0 */
};

/*
 * Dimensions a sample leaves out (pp_sample_info.hidden), so that a backend that makes a
 * series of every label set sees few: its writers then write no such label. The caller
 * zeroes the hidden fields (pid, tid, thread_name "") so that samples differing only there
 * aggregate.
 */
#define PP_SAMPLE_HIDE_THREAD 0x1 /* thread id and name */
#define PP_SAMPLE_HIDE_PID 0x2	  /* process id: processes of one executable are one */

struct pp_sample_info {
	const uint32_t *locations; /* location ids, leaf first */
	uint32_t nlocations;
	uint32_t pid;		  /* process id (tgid) */
	uint32_t tid;		  /* thread id */
	const char *thread_name;  /* comm of the thread; never NULL */
	const char *process_name; /* executable name of the process; never NULL */
	const char *process_path; /* absolute path of the executable; NULL or "" if unknown */
	uint32_t process_kind;	  /* enum pp_process_kind: what ran, when not a program */
	uint32_t hidden;	  /* PP_SAMPLE_HIDE_*; 0: every dimension is written */
	const struct pp_label *labels;
	uint32_t nlabels;
	uint64_t count;		     /* number of samples aggregated here */
	uint64_t value;		     /* sum of their periods, in desc.value_unit */
	uint64_t first_time_unix_ns; /* wall-clock time of the first aggregated sample */
	/*
	 * The logical CPU the samples were taken on, when the caller keeps that dimension
	 * (has_cpu != 0; a zeroed struct keeps none). Part of the aggregation key.
	 */
	uint32_t has_cpu;
	uint32_t cpu;
	/* Memory events: sum of the aggregated samples' load latencies in cycles (0: unknown). */
	uint64_t latency;
	/*
	 * Where the samples ran, when that is more than a process: a resource id from
	 * pp_profile_intern_resource() (a container and its pod), 0 for none. Part of the
	 * aggregation key. OTLP gives each resource its own ResourceProfiles; pprof turns its
	 * attributes into sample labels.
	 */
	uint32_t resource_id;
	/*
	 * enum pp_wait_state: 0 for samples of the profile's event; else time the threads spent
	 * off the CPU, waiting in that state (off-CPU profiling): count is the waits, value their
	 * nanoseconds. Part of the aggregation key. The event's views (its totals, pprof, OTLP's
	 * Profile of the event) leave these out; OTLP gives them a Profile of their own
	 * (off_cpu, nanoseconds), and the wall-clock views (folded, flame graph) add both.
	 */
	uint32_t wait;
};

/* pp_sample_info.wait: the state a thread was off the CPU in. */
enum pp_wait_state {
	PP_WAIT_NONE = 0,  /* on the CPU: a sample of the event */
	PP_WAIT_RUNNABLE,  /* preempted or runnable: waited for a CPU (contention, a quota) */
	PP_WAIT_SLEEPING,  /* an interruptible sleep: I/O, locks, timers, a peer */
	PP_WAIT_DISK,	   /* uninterruptible (the D state): disk, page faults */
	PP_WAIT_STOPPED,   /* stopped or traced */
	PP_WAIT_THROTTLED, /* runnable, its cgroup out of CPU quota (CFS bandwidth) */
	PP_WAIT_STATES,
};

/* "runnable", "sleeping", "disk", "stopped", "throttled"; "" for PP_WAIT_NONE and unknown. */
const char *pp_wait_state_name(uint32_t wait);

/* Sample attribute (OTLP) of off-CPU samples: pp_wait_state_name(). */
#define PP_LABEL_OFF_CPU_STATE "off_cpu.state"

/* The leaf frame the wall-clock views give off-CPU samples: "[off-CPU: sleeping]". */
const char *pp_wait_frame_name(uint32_t wait);

/* Most attributes one resource may have. */
#define PP_RESOURCE_MAX_ATTRS 16

struct pp_profile;

/* Returns NULL with errno set on failure. Copies desc's strings. */
struct pp_profile *pp_profile_new(const struct pp_profile_desc *desc);
void pp_profile_free(struct pp_profile *p);

const struct pp_profile_desc *pp_profile_get_desc(const struct pp_profile *p);
void pp_profile_set_window(struct pp_profile *p, uint64_t start_unix_ns, uint64_t duration_ns);

/* Interns a mapping; the same fields (strings by content) return the same id.
 * Returns 0 on allocation failure. */
uint32_t pp_profile_intern_mapping(struct pp_profile *p, const struct pp_mapping_info *m);

/* Interns a location; same (mapping_id, address, function, kind) returns the same id.
 * Returns 0 on allocation failure. */
uint32_t pp_profile_intern_location(struct pp_profile *p, const struct pp_location_info *loc);

/*
 * Name location id after the fact (its file's debug symbols arrived later): function becomes
 * name (system_name its mangled form, NULL: the same) and unnamed is cleared, so every sample
 * that already refers to it is named. Returns 0, -EINVAL for a bad id or name, -ENOMEM.
 */
int pp_profile_name_location(struct pp_profile *p, uint32_t id, const char *name,
			     const char *system_name);
/*
 * Give location id all of loc's fields (mapping, address, function, unnamed; the kind must
 * stay): a frame made while its file was still being read gets its ELF address, its mapping
 * with the build id, and its name, and every sample that refers to it follows. Returns 0,
 * -EINVAL, -ENOMEM.
 */
int pp_profile_resolve_location(struct pp_profile *p, uint32_t id,
				const struct pp_location_info *loc);
/*
 * Give mapping id m's fields (a mapping made while its file was being read learns its build
 * id and load bias), unless a mapping equal to m exists already: its id is returned then, for
 * the caller to point its locations at. 0 with errno EINVAL or ENOMEM.
 */
uint32_t pp_profile_resolve_mapping(struct pp_profile *p, uint32_t id,
				    const struct pp_mapping_info *m);

/*
 * Interns a resource: an ordered list of attributes (e.g. container.id, k8s.pod.name), keys
 * unique. The same list returns the same id. Returns the 1-based id, or 0 with errno set
 * (EINVAL: no attributes, too many, a NULL key or value; ENOMEM).
 */
uint32_t pp_profile_intern_resource(struct pp_profile *p, const struct pp_label *attrs,
				    uint32_t nattrs);
size_t pp_profile_resource_count(const struct pp_profile *p);
/* The attributes of resource id (1-based); NULL for an unknown id. */
const struct pp_label *pp_profile_get_resource(const struct pp_profile *p, uint32_t id,
					       uint32_t *nattrs);

/*
 * Adds count samples with the given summed value (and latency). Samples with identical
 * locations, pid, tid, thread name, process name, labels, cpu and resource are aggregated
 * into one. Returns 0 or -errno (-EINVAL for an unknown location or resource id or too many
 * labels, -ENOMEM).
 */
int pp_profile_add_sample(struct pp_profile *p, const struct pp_sample_info *s);

/*
 * A new profile holding only samples idx[0..n) of p (0-based, each at most once), with the
 * mappings, locations and resources they refer to and nothing else: one part of a window
 * cut for a backend's limits. The part keeps p's window and states p's period
 * (pp_profile_period of the whole), so every part of a window reads alike. Returns NULL
 * with errno set (EINVAL: bad index; ENOMEM).
 */
struct pp_profile *pp_profile_subset_new(const struct pp_profile *p, const size_t *idx, size_t n);

/* Read access for the writers. Indexes are 0-based; ids 1-based. */
size_t pp_profile_sample_count(const struct pp_profile *p);
const struct pp_sample_info *pp_profile_get_sample(const struct pp_profile *p, size_t i);
size_t pp_profile_location_count(const struct pp_profile *p);
const struct pp_location_info *pp_profile_get_location(const struct pp_profile *p, uint32_t id);
size_t pp_profile_mapping_count(const struct pp_profile *p);
const struct pp_mapping_info *pp_profile_get_mapping(const struct pp_profile *p, uint32_t id);
uint64_t pp_profile_total_count(const struct pp_profile *p);
uint64_t pp_profile_total_value(const struct pp_profile *p);
/* Off-CPU samples (pp_sample_info.wait set): the waits, and their nanoseconds. */
uint64_t pp_profile_off_cpu_waits(const struct pp_profile *p);
uint64_t pp_profile_off_cpu_ns(const struct pp_profile *p);
/*
 * What sample s weighs in the views that draw stacks (folded, flame graph). Without off-CPU
 * samples, its count. With them, a wall clock in nanoseconds: an off-CPU sample's time waited,
 * a cpu-clock sample's time on the CPU, and 0 for other events' samples (not time).
 */
uint64_t pp_profile_view_weight(const struct pp_profile *p, const struct pp_sample_info *s);
/* Whether the stack views weigh in nanoseconds of wall clock (pp_profile_view_weight). */
int pp_profile_is_wall_clock(const struct pp_profile *p);
uint64_t pp_profile_total_latency(const struct pp_profile *p);
/* Strings interned that were not clean text (pebsprof/text.h) and went in cleaned. */
uint64_t pp_profile_strings_cleaned(const struct pp_profile *p);

/*
 * How a profile is named and valued for the backends (deploy/README.md lists the results).
 * Pyroscope names an OTLP profile after its period type and a pushed pprof after its sample
 * types, accepts only [a-zA-Z0-9_] in sample types, and files everything whose name holds
 * "cpu" as a CPU profile; so every writer takes the names from here:
 *
 * - cpu-clock (value_type "cpu"): sample types (samples, count) and (cpu, nanoseconds),
 *   period type (cpu, nanoseconds): Pyroscope's process_cpu.
 * - any other event: one profile type name N (pp_profile_type_name), sample type (N, count)
 *   whose values are event counts already scaled (the sum of the periods the kernel
 *   reported for the samples, so -F and -c read alike), and for memory events a second,
 *   (latency, cycles), the samples' summed load latency; period type (N, count) with the
 *   period of pp_profile_period. Pyroscope shows them as N:N:count:N:count and
 *   N:latency:cycles:N:count, over OTLP and over /ingest alike.
 */
#define PP_PROFILE_TYPE_NAME_MAX 96

/* Whether d describes CPU time (cpu-clock) rather than counts of a hardware event. */
int pp_profile_is_cpu(const struct pp_profile_desc *d);
/*
 * N for a hardware event: value_type with a core PMU prefix ("cpu/", "cpu_core/",
 * "cpu_atom/") dropped, every run of characters outside [a-zA-Z0-9] turned into one '_',
 * no '_' at either end, "event_" before a leading digit, and the words Pyroscope reads as
 * another profile kind (cpu, alloc_, inuse_, mutex_, block_, goroutine, wall) written in
 * capitals. "mem-loads" -> "mem_loads", "cpu/event=0x3c,umask=0x0/" -> "event_0x3c_umask_0x0".
 * "process_cpu" for cpu-clock. Writes at most PP_PROFILE_TYPE_NAME_MAX bytes; returns buf.
 */
/*
 * The name perf gives a sample's task, the root frame of folded stacks and flame graphs: the
 * thread's comm ("swapper" for the idle task), so both line up with perf script's; the
 * process's name when the thread is hidden.
 */
const char *pp_sample_comm(const struct pp_sample_info *s);

const char *pp_profile_type_name(const struct pp_profile_desc *d, char *buf, size_t len);
/*
 * The period a writer states: desc.period when fixed (-c, cpu-clock), else (-F) the mean
 * period of the window's samples (total value / total count), at least 1.
 */
uint64_t pp_profile_period(const struct pp_profile *p);

/*
 * Pyroscope keeps at most 30 label names per series, counting resource attributes and the
 * string labels of samples, and adds four of its own (__name__, service_name, __delta__ and
 * __otel__ or pyroscope_spy); a series over the limit is rejected whole. So a profile's label
 * names are budgeted: past PP_LABEL_BUDGET, names are left out in this order, least useful
 * first: cpu.logical_number, process.executable.path, thread.id, memory.snoop, memory.tlb,
 * memory.op, container.runtime, k8s.pod.uid, host.name, then any other name (the extra
 * resource attributes) from the last given to the first. service.name, the Kubernetes
 * names, container.id, process.pid and .executable.name, thread.name, memory.level and
 * memory.latency_bucket stay.
 */
#define PP_LABEL_BUDGET (30 - 4)
#define PP_LABEL_BUDGET_MAX_KEYS 64

struct pp_label_budget {
	const char *keys[PP_LABEL_BUDGET_MAX_KEYS]; /* every name offered, borrowed */
	uint32_t nkeys;
	uint8_t dropped[PP_LABEL_BUDGET_MAX_KEYS];
	uint32_t ndropped; /* names left out */
};

/* Offers a name a series may carry (repeats are counted once). */
void pp_label_budget_offer(struct pp_label_budget *b, const char *key);
/* Offers the names the samples and resources of p carry beyond the writer's own. */
void pp_label_budget_offer_profile(struct pp_label_budget *b, const struct pp_profile *p);
/* Decides what is left out so that at most room names remain; returns how many are. */
uint32_t pp_label_budget_plan(struct pp_label_budget *b, uint32_t room);
/* Whether key is left out by the plan. */
int pp_label_budget_drops(const struct pp_label_budget *b, const char *key);
/* Writes the names left out, "a, b, c" in offer order, truncated to len; returns the length. */
size_t pp_label_budget_describe(const struct pp_label_budget *b, char *buf, size_t len);

#endif /* PEBSPROF_PROFILE_H */
