/*
 * What `record` and `run` share to start sampling: inspect the system, open the events the
 * ladder picks, read kernel symbols, load the shim in the variant this kernel takes, and
 * attach it. Errors are logged here, once, and returned as the subcommand's exit status.
 */
#ifndef PP_SAMPLER_H
#define PP_SAMPLER_H

#include <stdint.h>
#include <time.h>

#include <pebsprof/profile.h>

#include "sampling/events.h"
#include "symbolize/kallsyms.h"
#include "session.h"
#include "sampling/shim_loader.h"
#include "sampling/sideband.h"
#include "sampling/sysinfo.h"
#include "unwind/table_cache.h"
#include "unwind/unwinder.h"

struct pp_sampler_opts {
	const char *sysfs_root; /* NULL: /sys */
	const char *proc_root;	/* NULL: /proc */
	/* The events (spec, rate, ldlat, stack depth, kernel stacks); pid is forced to -1. */
	struct pp_event_request req;
	int filter_tgids; /* only the processes added with pp_shim_add_target (and children) */
	/* only tasks in the cgroups added with pp_shim_add_cgroup (and below) */
	int filter_cgroups;
	const char *cgroup2_root;    /* for the cgroup filter; NULL: from mountinfo */
	uint32_t ustack_walk;	     /* PP_USTACK_* (record.h) */
	uint64_t unwind_table_bytes; /* the table budget (auto, dwarf); 0: the default */
	/* compiled tables kept across starts; NULL or PP_UNWIND_TABLE_CACHE_NONE: none */
	const char *unwind_table_cache;
	uint64_t unwind_table_cache_bytes;
	uint64_t unwind_partial_fdes; /* unwinder.h's partial_min_fdes; 0: none partial */
	/* off-CPU records (shim_loader.h): 0 none; N, of 1 in N switches; waits from min_ns */
	uint32_t off_cpu_every;
	uint64_t off_cpu_min_ns;
	enum pp_shim_off_cpu_stacks off_cpu_stacks; /* where their stacks are taken */
};

/*
 * The off-CPU threshold by default: waits shorter than this make no record. A wait of 1 ms
 * or more is what a latency investigation looks for (a lock, a disk read, a peer), and
 * shorter ones are most of a busy node's switches.
 */
#define PP_OFF_CPU_THRESHOLD_DEFAULT_NS 1000000ull

/* Everything owned here; pp_sampler_close releases it. */
struct pp_sampler {
	struct pp_sys *sys;
	struct pp_event_set *events;
	struct pp_kallsyms *ksyms; /* NULL when kallsyms could not be read */
	struct pp_shim *shim;
	/* --user-unwind auto, dwarf: the unwind tables and where they go; NULL otherwise */
	struct pp_unwinder_sink *unwind_sink;
	struct pp_unwinder *unwinder;
	struct pp_sideband *sideband;	   /* NULL where the kernel's process events are not read */
	bool filter_tgids, filter_cgroups; /* what the shim samples: targets, cgroups, or all */
	uint32_t ustack_walk;	/* the walker loaded: the asked one, or fp where tables cannot */
	uint32_t off_cpu_every; /* off-CPU records of 1 in N switches; 0: none */
};

/*
 * Checks privileges, BTF and BPF, opens the events and loads the shim (not attached yet).
 * Returns PP_EXIT_OK, PP_EXIT_USAGE (bad event) or PP_EXIT_RUNTIME; *s holds what was set
 * up either way and must be closed.
 */
/*
 * Whether this system can run the shim: privileges by effective capabilities (CAP_BPF and
 * CAP_PERFMON, or CAP_SYS_ADMIN; the uid only when CapEff is unreadable), bpf() not refused
 * with EPERM, BTF, ring buffers and perf_event programs. Writes the reason (or "ok") to msg;
 * returns PP_EXIT_OK or PP_EXIT_RUNTIME. Privilege problems are named before kernel ones.
 */
int pp_sampler_check_system(const struct pp_sys *sys, char *msg, size_t len);

/*
 * Why kernel symbol addresses cannot be read (kallsyms shows zeros), as the kernel decides:
 * kptr_restrict 2 hides them from everyone; 1, or 0 with perf_event_paranoid above 1, shows
 * them only with CAP_SYSLOG; otherwise err's text.
 */
void pp_sampler_kallsyms_advice(const struct pp_sys *sys, int err, char *msg, size_t len);

int pp_sampler_open(const struct pp_sampler_opts *opts, struct pp_sampler *s);
/* Attaches the shim to every opened event (and enables mem-loads-aux group leaders). */
int pp_sampler_attach(struct pp_sampler *s);
void pp_sampler_close(struct pp_sampler *s);

/* The profile description of the first event (name, value type and unit, period) and of the
 * off-CPU records' sampling. */
void pp_sampler_profile_desc(const struct pp_sampler *s, struct pp_profile_desc *desc);
/* Fills the session options the events decide: kallsyms, precise ip, clock offset. */
void pp_sampler_session_opts(const struct pp_sampler *s, struct pp_session_opts *sess);

#endif /* PP_SAMPLER_H */
