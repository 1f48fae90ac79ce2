/*
 * Event specs and the event ladder: parse what the user asked for (-e), decide which perf
 * event this machine can really sample (precise cycles on PEBS/IBS, stepping down on the
 * kernel's errno answers, else cpu-clock), build the perf_event_attr the BPF shim needs
 * (single-record PEBS, callchain for bpf_get_stack on precise events, memory sample bits)
 * and open it on every CPU. Opening goes through an injectable function so the ladder can
 * be tested against recorded machines and errno sequences. The rules come from
 * shared/reference/notes/kernel-pebs-bpf.md (rules 1-15, sections 4 and 5).
 */
#ifndef PP_COLLECTOR_EVENTS_H
#define PP_COLLECTOR_EVENTS_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pmu.h"
#include "sysinfo.h"

#define PP_EVENTS_DEFAULT_FREQ_HZ 99
#define PP_EVENTS_DEFAULT_LDLAT 30 /* perf mem's default; sysfs lists ldlat=3 */
#define PP_EVENT_NAME_LEN 128

enum pp_event_kind {
	PP_EVENT_AUTO = 0,
	PP_EVENT_CPU_CLOCK,
	PP_EVENT_CYCLES,
	PP_EVENT_INSTRUCTIONS,
	PP_EVENT_MEM_LOADS,
	PP_EVENT_MEM_STORES,
	PP_EVENT_RAW,
	PP_EVENT_NAMED, /* a precise event by Intel's name, e.g. MEM_LOAD_RETIRED.L3_MISS */
};

#define PP_PRECISE_UNSET (-1) /* no modifier: named events take the best the PMU gives */
#define PP_PRECISE_MAX (-2)   /* ":P": start at caps/max_precise and step down */

struct pp_event_spec {
	enum pp_event_kind kind;
	int precise;		      /* 1..3 from :p/:pp/:ppp, or PP_PRECISE_* */
	char pmu[PP_PMU_NAME_LEN];    /* raw events: PMU directory name */
	char terms[PP_PMU_EVENT_LEN]; /* raw events: the term list between the slashes */
	char text[PP_EVENT_NAME_LEN]; /* the spec without modifiers, for names and messages */
	int exclude_user;	      /* ":k": kernel only */
	int exclude_kernel;	      /* ":u": user only */
};

/*
 * Parse "auto", "cpu-clock", "cycles", "instructions", "mem-loads", "mem-stores",
 * "pmu/term=val,.../" or a named precise event ("INST_RETIRED.PREC_DIST", any case), each
 * optionally followed by modifiers: "p", "pp", "ppp" or "P" (not on auto or cpu-clock),
 * and "u" (user only) or "k" (kernel only), e.g. "cycles:upp". Returns 0 or -EINVAL with
 * the bad part named in err.
 */
int pp_event_spec_parse(const char *buf, size_t len, struct pp_event_spec *out, char *err,
			size_t errlen);

/* Opens one perf event; returns an fd or -errno. The default calls perf_event_open(2). */
typedef int (*pp_perf_open_fn)(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
			       unsigned long flags, void *ctx);
int pp_perf_open_syscall(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
			 unsigned long flags, void *ctx);

/* The registers a walk starts from, as perf_event_attr.sample_regs_intr bits. */
#if defined(__x86_64__)
#include <asm/perf_regs.h>
#define PP_SAMPLE_REGS_UNWIND                                                                      \
	((1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP))
#else
#define PP_SAMPLE_REGS_UNWIND 0ull /* arm64: x29, sp, pc, lr once the walk exists there */
#endif

struct pp_event_request {
	const char *spec;     /* NULL = "auto" */
	uint64_t freq_hz;     /* -F; freq_hz == period == 0 means PP_EVENTS_DEFAULT_FREQ_HZ */
	uint64_t period;      /* -c; exclusive with freq_hz */
	uint32_t ldlat;	      /* mem-loads latency threshold (cycles); 0 = default 30 */
	uint32_t stack_depth; /* frames per stack the program takes; 0 = no stacks */
	int want_kstack, want_ustack;
	int want_phys_addr; /* add PERF_SAMPLE_PHYS_ADDR to memory events */
	/*
	 * The shim unwinds with tables (--user-unwind auto, dwarf): precise Intel events also
	 * record sp, bp and ip in the PEBS record (PERF_SAMPLE_REGS_INTR), so the walk starts
	 * from the sampled instruction's own registers, not the interrupt's (notes rule 7).
	 */
	int want_sample_regs;
	int pid;     /* -1 = every process; else per-CPU events on that pid (inherit=1) */
	int dry_run; /* decide the ladder on the first CPU of each PMU, close, keep no fds */
};

/* One chosen event (one per core PMU on hybrid parts); its index is the BPF attach cookie. */
struct pp_event_info {
	char name[PP_EVENT_NAME_LEN]; /* "cycles", "cpu-clock", "mem-loads", "cpu/event=.../" */
	char pmu[PP_PMU_NAME_LEN];    /* PMU whose CPUs it runs on ("software" for cpu-clock) */
	uint32_t type;		      /* attr.type */
	uint64_t config, config1, config2;
	int precise_ip;			    /* achieved */
	int max_precise;		    /* caps/max_precise of the PMU, -1 when absent */
	int mem;			    /* wants addr / data_src / weight */
	int aux_leader;			    /* opened behind a mem-loads-aux group leader */
	char value_type[PP_EVENT_NAME_LEN]; /* profile sample type: "cpu" or the event name */
	char value_unit[32];		    /* "nanoseconds" or "count" */
	uint64_t period;		    /* value of one sample in value_unit; 0 = per sample */
	char why[512];			    /* the human reason this event was chosen */
	struct perf_event_attr attr;	    /* what every CPU was opened with */
	size_t nr_cpus;			    /* CPUs opened */
	size_t nr_cpus_skipped;		    /* CPUs that went offline between scan and open */
	int exclude_user, exclude_kernel;   /* asked for with :k / :u */
	/*
	 * The PMU takes no exclude_* bits (AMD IBS up to 6.12, notes rule 10), so the attr
	 * has none and the program must drop the other privilege level itself: kernel
	 * samples when want_user_only, user samples when want_kernel_only.
	 */
	int want_user_only, want_kernel_only;
	uint64_t aux_config; /* config of the mem-loads-aux leader when aux_leader */
};

struct pp_event_fd {
	int fd;
	int cpu;
	uint32_t cookie;  /* index into events[] */
	int group_leader; /* a mem-loads-aux leader: enable it, but attach no program to it */
};

/*
 * The opened events. All fds are disabled (attr.disabled=1): the loader attaches the program
 * to every fd that is not a group_leader, passing cookie as the attach cookie, then enables
 * every fd (leaders included).
 */
struct pp_event_set {
	struct pp_event_info *events;
	size_t nr_events;
	struct pp_event_fd *fds;
	size_t nr_fds;
	size_t nr_cpus_skipped; /* total over events */
};

/*
 * Decide and open the events for req on the machine sys describes. open_fn NULL means
 * pp_perf_open_syscall. On success *out owns the fds (pp_event_set_free closes them).
 * Returns 0; -EINVAL for requests this machine cannot honour as asked (bad spec, event not
 * available, no PMU, -F above the kernel limit: a usage error, exit 2); other -errno for
 * runtime failures (-EACCES: privileges). err always explains failures.
 */
int pp_events_open(const struct pp_event_request *req, const struct pp_sys *sys,
		   pp_perf_open_fn open_fn, void *open_ctx, struct pp_event_set **out, char *err,
		   size_t errlen);

/*
 * Precise events by name (Intel's event lists, see the table in events.c), keyed by the
 * microarchitecture of a core PMU: from <procfs>/cpuinfo family/model, and on hybrid parts
 * the PMU (cpu_core / cpu_atom). config is the raw config for attr.type = pmu->type; mem
 * events have a data linear address (kernel DATALA constraint), so addr/data_src are sampled.
 */
struct pp_named_event {
	const char *name;
	uint64_t config;
	int mem;
};

/*
 * The named events pmu supports on sys (static storage; *nr = 0 and NULL when none) and the
 * microarchitecture's name ("skylake", "icelake", "golden_cove", "gracemont"; "" if unknown)
 * in *uarch when uarch is not NULL.
 */
const struct pp_named_event *pp_named_events(const struct pp_sys *sys, const struct pp_pmu *pmu,
					     size_t *nr, const char **uarch);

/*
 * Write what this machine can sample, as -e arguments separated by ", " ("cpu-clock" on a
 * machine without a hardware PMU), into buf. Decided from sysfs alone. Returns buf.
 */
char *pp_events_can_sample(const struct pp_sys *sys, char *buf, size_t len);

/* Close every fd (set->fds becomes empty); the decisions stay readable. */
void pp_event_set_close(struct pp_event_set *set);
void pp_event_set_free(struct pp_event_set *set);

const char *pp_event_kind_str(enum pp_event_kind kind);

#endif /* PP_COLLECTOR_EVENTS_H */
