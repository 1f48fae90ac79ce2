/*
 * Loads the in-kernel shim, attaches it to opened perf events and drains its ring buffer.
 *
 * Two builds of the shim exist (kmod-shim/CMakeLists.txt): "kctx" reads sample data through
 * bpf_cast_to_kern_ctx (6.2+), "core" through BPF_CORE_READ on the kernel context. The loader
 * picks kctx where the running kernel's BTF has the kfunc.
 */
#ifndef PP_SHIM_LOADER_H
#define PP_SHIM_LOADER_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <pebsprof/record.h>

enum pp_shim_variant {
	PP_SHIM_AUTO = 0,
	PP_SHIM_KCTX,
	PP_SHIM_CORE,
};

/* Where the cgroup filter runs (pp_shim_cgroup_filter_mode). */
enum pp_shim_cgroup_mode {
	PP_SHIM_CGROUP_OFF = 0,
	PP_SHIM_CGROUP_KERNEL, /* in the shim, before any stack work */
	PP_SHIM_CGROUP_USER,   /* in pp_shim_poll: the kernel lacks the helper (before 5.14) */
};

/*
 * The names users give the PP_USTACK_* walkers (record.h), indexed by them, NULL-terminated:
 * "fp" (the shim's frame-pointer walk, also accepted as "shim"), "kernel", "auto", "dwarf".
 */
extern const char *const pp_ustack_walk_names[];
/* The PP_USTACK_* value a name gives, or -1. */
int pp_ustack_walk_parse(const char *name);

/*
 * Where the stacks of off-CPU waits are taken. A task's stacks are the same as it leaves the
 * CPU and as it resumes: a probe that runs as it resumes walks them only for the waits long
 * enough to record; the switch tracepoint alone walks them at every switch.
 */
enum pp_shim_off_cpu_stacks {
	/* the kprobe where the kernel has kprobes, else fexit where it can, else the switch */
	PP_SHIM_OFF_CPU_AUTO,
	PP_SHIM_OFF_CPU_KPROBE, /* a kprobe on finish_task_switch, as every task resumes */
	/*
	 * fexit on schedule(), as a task that slept returns from it; a preempted task, which
	 * never called it, has its stacks taken at the switch
	 */
	PP_SHIM_OFF_CPU_FEXIT,
	PP_SHIM_OFF_CPU_SWITCH, /* at every switch, no probe on the scheduler */
};
/* Their names, by value, NULL-terminated (--off-cpu-stacks). */
extern const char *const pp_off_cpu_stacks_names[];

struct pp_shim_opts {
	enum pp_shim_variant variant;
	uint32_t kstack_depth; /* 0 disables kernel stacks */
	uint32_t ustack_depth; /* 0 disables user stacks */
	int read_mem_fields;
	int filter_tgids;
	int track_tasks; /* exec/exit/fork programs (needed with filter_tgids) */
	/*
	 * Records go to a ring buffer per CPU: these CPUs (ascending ids; the CPUs events are
	 * opened on), or NULL for every possible CPU. A CPU without a ring (onlined later)
	 * writes to the first one's.
	 */
	const int *ring_cpus;
	size_t nr_ring_cpus;
	/* over all rings; each gets a power of two of at least 64 KiB; 0 = default (4 MiB) */
	uint64_t ringbuf_bytes;
	uint64_t wakeup_bytes; /* per ring; 0 = half a ring */
	/*
	 * Only samples of tasks in (or below) the cgroups added with pp_shim_add_cgroup; none
	 * pass until one is added. With filter_tgids too, a sample must pass both.
	 */
	int filter_cgroups;
	/* Filter cgroups in user space even where the kernel could (tests, comparisons). */
	int cgroup_filter_in_user_space;
	const char *cgroup2_root; /* for user-space filtering; NULL: from /proc/self/mountinfo */
	/*
	 * 0: samples carry the task's cgroup v2 id. N: the id of its cgroup in the v1 hierarchy
	 * of subsystem N - 1 (pp_shim_config.cgroup_v1_subsys), for hosts without cgroup2.
	 */
	uint32_t cgroup_v1_subsys;
	int cgroup_v1_with_v2; /* the key holds the v2 cgroup too (cgroup2 is mounted) */
	/* PP_IP_FILTER_*: user-only or kernel-only sampling done in the shim (IBS) */
	uint32_t ip_filter;
	/*
	 * PP_USTACK_*: who follows user frame pointers. Kernel-mode, compat and precise-event
	 * samples take the kernel's walker either way (PP_USTACK_SHIM in record.h).
	 */
	uint32_t ustack_walk;
	/* PP_USTACK_AUTO, _DWARF: bytes of unwind table rows in the kernel; 0 = the default */
	uint64_t unwind_table_bytes;
	/*
	 * The table walker's loop: bpf_loop where the kernel has it (5.17+), else a bounded
	 * loop of 64 frames (user-mode samples only: kernel-mode ones need bpf_task_pt_regs).
	 * Set: the bounded loop whatever the kernel (tests).
	 */
	int unwind_bounded_loop;
	/*
	 * Off-CPU records (PP_SF_OFF_CPU in record.h): 0 none; N, of 1 in N switches away from a
	 * CPU, waits of at least off_cpu_min_ns. They follow the filters and stack depths above;
	 * user stacks are unwound with tables where ustack_walk asks for them and the kernel has
	 * bpf_loop (5.17+), else by the kernel's frame-pointer walker.
	 */
	uint32_t off_cpu_every;
	uint64_t off_cpu_min_ns;
	/* Where off-CPU stacks are taken (PP_SHIM_OFF_CPU_*). */
	enum pp_shim_off_cpu_stacks off_cpu_stacks;
};

#define PP_UNWIND_TABLE_BYTES_DEFAULT (64ull << 20) /* a Debian node's 50 largest take 43 MiB */

struct pp_shim;

/* Callback per record; returning non-zero stops the current poll. */
typedef int (*pp_shim_record_fn)(void *ctx, const void *data, size_t len);

/*
 * Opens, configures and loads the shim (the verifier runs here). Returns NULL with errno set
 * and a one-line explanation in err on failure.
 */
struct pp_shim *pp_shim_load(const struct pp_shim_opts *opts, char *err, size_t errlen);
void pp_shim_free(struct pp_shim *shim);

enum pp_shim_variant pp_shim_loaded_variant(const struct pp_shim *shim);
/* Instructions the verifier processed for the sample program (0 before 5.16: not reported). */
uint32_t pp_shim_verified_insns(const struct pp_shim *shim);
/* How long pp_shim_load took (BPF object, verifier, maps), ns. */
uint64_t pp_shim_load_ns(const struct pp_shim *shim);
const char *pp_shim_variant_name(enum pp_shim_variant v);
/*
 * Where off-CPU stacks are taken: the kernel function the switch-in kprobe is on (as a task
 * resumes), or "sched_switch" where the kernel has no kprobes (as it leaves the CPU). NULL
 * without off-CPU records.
 */
const char *pp_shim_switch_in_at(const struct pp_shim *shim);
/* Whether records carry the attach cookie (kernel supports bpf_get_attach_cookie here). */
int pp_shim_has_cookie(const struct pp_shim *shim);

/* Adds a process to the tgid filter. Returns 0 or -errno. */
int pp_shim_add_target(struct pp_shim *shim, uint32_t tgid);
/*
 * The threads whose off-CPU wait is noted and not ended now (up to max of their ids in tids);
 * returns how many there are, or -errno. For checks and diagnostics: each one is a map read.
 * Where waits are in task storage (PP_OFF_CPU_AT_USER_RETURN), the calling process's only.
 */
int pp_shim_off_cpu_waiting(const struct pp_shim *shim, uint32_t *tids, size_t max);
/* Takes a process out of the tgid filter (its children stay). Returns 0 or -errno. */
int pp_shim_remove_target(struct pp_shim *shim, uint32_t tgid);
/* Whether tgid is in the target set (the shim's filter follows forks into it). */
bool pp_shim_is_target(struct pp_shim *shim, uint32_t tgid);

/*
 * Selects a cgroup v2 (id and level as pp_cgroup_id_level gives them) for the cgroup filter:
 * samples of tasks in it or in any cgroup below it pass. May be called while sampling.
 * Returns 0, -ENOTCONN (the filter was not enabled at load), -ERANGE (level above
 * PP_CGROUP_MAX_LEVEL), -E2BIG (PP_CGROUP_FILTER_MAX cgroups already selected) or -errno.
 */
int pp_shim_add_cgroup(struct pp_shim *shim, uint64_t cgroup_id, uint32_t level);

/*
 * Where the cgroup filter runs. PP_SHIM_CGROUP_USER means the kernel has no
 * bpf_get_current_ancestor_cgroup_id for perf_event programs (5.14+) or user-space filtering
 * was asked for: every sample crosses the ring buffer, and pp_shim_poll drops the others
 * (counted as PP_CNT_CGROUP_FILTERED). The caller says so in its log.
 */
enum pp_shim_cgroup_mode pp_shim_cgroup_filter_mode(const struct pp_shim *shim);

/* How many ring buffers (one per CPU) the shim writes to. */
size_t pp_shim_nr_rings(const struct pp_shim *shim);

/* The fd of the loaded sample program (for bpf_prog_info: run time and count). */
int pp_shim_sample_prog_fd(const struct pp_shim *shim);

/*
 * The unwind table maps (PP_USTACK_AUTO, _DWARF; layout in record.h): the row array (its
 * size in 4-byte words in *nr_rows), the rule array, the per-process hash of lists and the
 * array of their entries (its size in *nr_slots). Without tables the maps exist with one
 * entry.
 */
int pp_shim_unwind_rows_fd(const struct pp_shim *shim, uint32_t *nr_rows);
int pp_shim_unwind_rules_fd(const struct pp_shim *shim);
int pp_shim_unwind_procs_fd(const struct pp_shim *shim);
int pp_shim_unwind_mappings_fd(const struct pp_shim *shim, uint32_t *nr_slots);
/* Whether the table walker loaded is the bounded-loop one (64 frames, user-mode samples). */
int pp_shim_table_walker_bounded(const struct pp_shim *shim);
/* The 4-byte rows a table budget in bytes buys (0: PP_UNWIND_TABLE_BYTES_DEFAULT). */
uint32_t pp_unwind_rows_for_bytes(uint64_t bytes);

/* Attaches the sample program to an opened (disabled) perf event fd and enables it. */
int pp_shim_attach(struct pp_shim *shim, int perf_fd, uint32_t cookie);
/*
 * Detaches every perf event and the off-CPU programs (sampling stops); records already written
 * can still be drained.
 */
void pp_shim_detach_all(struct pp_shim *shim);

/*
 * Consumes records with cb, waiting up to timeout_ms for data. Returns the number of records
 * consumed or -errno (-EINTR when a signal interrupted the wait).
 */
int pp_shim_poll(struct pp_shim *shim, int timeout_ms, pp_shim_record_fn cb, void *ctx);

#define PP_SHIM_POLL_PROMPT_MS 200
#define PP_SHIM_POLL_QUIET_MS 1000
/*
 * The longest the next pp_shim_poll should wait, in ms. The shim wakes the poll itself when a
 * ring is half full, so the timeout only bounds how long a few records wait. Each wake-up costs
 * the agent tens of microseconds whether it finds records or not (the bulk of an idle node's
 * cost), so: PP_SHIM_POLL_PROMPT_MS while the kernel's process reports (the wake fds) fired in
 * the last 2 s, since records of a process that has just started are best read while it lives
 * (its files opened through it, its cgroup read); PP_SHIM_POLL_QUIET_MS when nothing started,
 * mapped or exited meanwhile (such processes' reports wake the poll at once), and
 * PP_SHIM_POLL_PROMPT_MS always where no process reports are watched (those are read from
 * /proc when sampled, the sooner the better).
 */
int pp_shim_poll_interval_ms(const struct pp_shim *shim);
/*
 * pp_shim_poll also returns when fd is readable (the side-band), so its caller reads it at
 * once: 0 or -errno.
 */
int pp_shim_add_wake_fd(struct pp_shim *shim, int fd);

/*
 * Sums the per-CPU counters into out[PP_CNT__MAX]; with user-space cgroup filtering the
 * records pp_shim_poll dropped are added to PP_CNT_CGROUP_FILTERED.
 */
int pp_shim_read_counters(const struct pp_shim *shim, uint64_t out[PP_CNT__MAX]);
const char *pp_counter_name(enum pp_counter c);

/* Whether the running kernel's BTF has the bpf_cast_to_kern_ctx kfunc (6.2+). */
int pp_kernel_has_cast_to_kern_ctx(void);

/*
 * Whether a BPF trampoline attaches to the kernel function `func` (fexit): the kernel has
 * them for this architecture (x86-64 5.5+, arm64 6.0+), the function is in its BTF, and
 * ftrace and the security policy let it be patched (a kernel locked down against tracing
 * refuses the load: -EPERM). Tried with an empty program, attached and detached at once.
 * 0 when it does, else -errno.
 */
int pp_kernel_can_fexit(const char *func);

#endif /* PP_SHIM_LOADER_H */
