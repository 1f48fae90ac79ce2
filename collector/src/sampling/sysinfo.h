/*
 * What the running kernel and process can do for a profiler: kernel release, BTF, the BPF
 * features the shim depends on (ring buffer, perf_event programs, attach cookies,
 * bpf_cast_to_kern_ctx), the perf sysctls, capabilities, and the PMUs (pmu.h). Every root
 * (/sys, /proc) is configurable so tests can use recorded trees.
 */
#ifndef PP_COLLECTOR_SYSINFO_H
#define PP_COLLECTOR_SYSINFO_H

#include <stddef.h>
#include <stdint.h>

#include "pmu.h"

/* Tri-state feature answers. */
#define PP_FEAT_UNKNOWN (-1)
#define PP_FEAT_NO 0
#define PP_FEAT_YES 1

/* Sysctl values that could not be read. */
#define PP_SYSCTL_UNKNOWN INT64_MIN

#define PP_CAP_DAC_READ_SEARCH 2
#define PP_CAP_SYS_PTRACE 19
#define PP_CAP_SYS_ADMIN 21
#define PP_CAP_SYS_RESOURCE 24
#define PP_CAP_SYSLOG 34
#define PP_CAP_PERFMON 38
#define PP_CAP_BPF 39
#define PP_CAP_CHECKPOINT_RESTORE 40

struct pp_sys_opts {
	const char *sysfs_root;	    /* NULL = "/sys" */
	const char *procfs_root;    /* NULL = "/proc" */
	const char *kernel_release; /* NULL = uname(2) */
	int probe_bpf;		    /* run the libbpf feature probes (loads tiny programs) */
	/*
	 * Leave has_cast_to_kern_ctx UNKNOWN instead of parsing vmlinux BTF for it (about
	 * 12 ms): for callers that can tell from kallsyms, which they read anyway.
	 */
	int skip_kfunc_probe;
};

struct pp_sys {
	char sysfs_root[256];
	char procfs_root[256];
	char kernel_release[128];
	int kernel_major, kernel_minor; /* 0 when the release does not parse */

	int btf_vmlinux;	  /* <sysfs>/kernel/btf/vmlinux exists */
	int has_cast_to_kern_ctx; /* kfunc bpf_cast_to_kern_ctx in vmlinux BTF */
	int has_ringbuf;	  /* BPF_MAP_TYPE_RINGBUF (PP_FEAT_*; UNKNOWN without probe_bpf) */
	int has_perf_event_prog;  /* BPF_PROG_TYPE_PERF_EVENT */
	int has_attach_cookie;	  /* bpf_get_attach_cookie from perf_event programs */
	int has_unwind_tables;	  /* bpf_loop and bpf_task_pt_regs there: --user-unwind auto */
	/*
	 * Kprobes (CONFIG_KPROBES): off-CPU stacks are taken as a thread resumes, and only for
	 * waits of at least the threshold; without, as it leaves the CPU, for every switch.
	 */
	int has_kprobes;
	/*
	 * bpf() itself is refused with EPERM (no CAP_BPF, a seccomp profile or an LSM in the
	 * way, kernel.unprivileged_bpf_disabled): the feature probes above then say "no" for
	 * want of privilege, not of kernel support. 0 without probe_bpf.
	 */
	int bpf_eperm;

	int64_t perf_event_paranoid; /* PP_SYSCTL_UNKNOWN when unreadable */
	int64_t max_sample_rate;     /* perf_event_max_sample_rate */
	int64_t max_stack;	     /* perf_event_max_stack */
	int64_t kptr_restrict;

	/*
	 * The first CPU of <procfs>/cpuinfo: named precise events are encoded per
	 * microarchitecture, which the PMU's sysfs does not always say (hybrid parts, AMD).
	 */
	char cpu_vendor[16]; /* "GenuineIntel", "AuthenticAMD"; "" when unknown */
	int cpu_family;	     /* -1 when unknown */
	int cpu_model;	     /* -1 when unknown */

	uint64_t cap_eff; /* CapEff bits from <procfs>/self/status */
	int cap_eff_known;
	int is_root; /* effective uid 0 */

	struct pp_pmu_set *pmus; /* owned; never NULL after pp_sys_new */
};

/*
 * Gather everything. A missing PMU directory is not an error (an empty set is stored: the
 * machine has no perf events); unreadable sysctls become PP_SYSCTL_UNKNOWN. Returns NULL
 * and sets errno only on allocation failure. Free with pp_sys_free().
 */
struct pp_sys *pp_sys_new(const struct pp_sys_opts *opts);
/* Whether the kernel under sysfs_root has kprobes: the perf kprobe PMU (4.17+) or tracefs's
 * kprobe_events. PP_FEAT_YES or PP_FEAT_NO. */
int pp_sys_kprobes_at(const char *sysfs_root);
void pp_sys_free(struct pp_sys *sys);

/* Parse the CapEff line out of a /proc/<pid>/status buffer. Returns 0 or -ENOENT/-EINVAL. */
int pp_sys_parse_capeff(const char *buf, size_t len, uint64_t *cap_eff);

/*
 * Parse vendor_id, "cpu family" and "model" of the first processor block of a /proc/cpuinfo
 * buffer (x86 layout). Fields not found stay "" / -1. Returns 0 when vendor, family and model
 * were all found, -ENOENT otherwise.
 */
int pp_sys_parse_cpuinfo(const char *buf, size_t len, char *vendor, size_t vendor_len, int *family,
			 int *model);

/* Name of capability bit (e.g. "CAP_PERFMON"); NULL for unknown bits. */
const char *pp_cap_name(unsigned int bit);

/* Whether the process holds capability bit (0 when CapEff is unknown). */
int pp_sys_has_cap(const struct pp_sys *sys, unsigned int bit);

/*
 * Write the names of the set capabilities, comma separated, into buf ("none" when empty,
 * "unknown" when CapEff could not be read). Returns buf.
 */
char *pp_sys_caps_str(const struct pp_sys *sys, char *buf, size_t len);

/* "yes" / "no" / "unknown" for a PP_FEAT_* value. */
const char *pp_feat_str(int feat);

#endif /* PP_COLLECTOR_SYSINFO_H */
