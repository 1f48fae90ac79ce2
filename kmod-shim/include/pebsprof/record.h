/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record ABI between the in-kernel shim (kmod-shim/src/shim.bpf.c) and the collector.
 *
 * Rules: fixed-width fields only, explicit padding, a {type, version, size} header first, the
 * variable-length stack tail last. Fields are only ever appended; any layout change bumps
 * PP_RECORD_ABI_VERSION. The _Static_asserts below break both builds on drift.
 *
 * Included by the BPF program and by user space alike; it needs only the uapi types.
 */
#ifndef PEBSPROF_RECORD_H
#define PEBSPROF_RECORD_H

#include <linux/types.h>

#define PP_RECORD_ABI_VERSION 2 /* 2: the stack copy of PP_SF_USTACK_RAW */

/* Record types carried in pp_rec_hdr.type. */
#define PP_REC_SAMPLE 1 /* struct pp_sample */
#define PP_REC_TASK 2	/* struct pp_task_event */

/* Maximum frames per stack the shim can take (perf_event_max_stack default). */
#define PP_MAX_STACK_DEPTH 127

/* pp_sample.flags */
#define PP_SF_KERNEL_IP (1u << 0)	 /* ip is a kernel address */
#define PP_SF_MEM_FIELDS (1u << 1)	 /* addr/data_src/weight/phys_addr were read */
#define PP_SF_HAS_SAMPLE_FLAGS (1u << 2) /* sample_flags is the kernel's perf_sample_data one */
#define PP_SF_KSTACK_TRUNC (1u << 3)	 /* kernel stack hit the configured depth */
#define PP_SF_USTACK_TRUNC (1u << 4)	 /* user stack hit the configured depth */
#define PP_SF_KSTACK_ERR (1u << 5)	 /* bpf_get_stack failed for the kernel stack */
#define PP_SF_USTACK_ERR (1u << 6)	 /* bpf_get_stack failed for the user stack */
/*
 * ip is the exact instruction of the event, no skid: the kernel marked the sample registers
 * with PERF_EFLAGS_EXACT (x86: PEBS with precise_ip >= 2 on PEBS format >= 2 or adaptive
 * PEBS, AMD IBS op when IbsRipInvalid is clear). Never set for software events, for
 * precise_ip 0/1 (off-by-one or skid ip) or on other architectures. Added without a layout
 * change: older collectors ignore it, older shims never set it.
 */
#define PP_SF_EXACT_IP (1u << 7)
#define PP_SF_USTACK_TABLES (1u << 8)  /* the user stack was unwound with unwind tables */
#define PP_SF_USTACK_STOPPED (1u << 9) /* that walk ended early (PP_CNT_UNWIND_STOP_*) */
/*
 * An off-CPU record (pp_shim_config.off_cpu_every set): written when a task comes back onto a
 * CPU after at least off_cpu_min_ns off it, with the stacks it waited in (taken as it resumes:
 * the kernel stack from the scheduler down, the user stack where it entered the kernel).
 * period is the nanoseconds it was off the CPU times off_cpu_every (1 in N switches is kept,
 * so sums stay unbiased); weight is the state it left the CPU in (PP_OFF_CPU_*); time_ns is
 * when it came back. A woken task may wait for a CPU before it runs (perf sched timehist's
 * "sch delay": a busy CPU, a CPU quota): where that delay is at least off_cpu_min_ns, addr
 * holds it (ns times off_cpu_every, not part of period) and data_src the state it waited in
 * then (PP_OFF_CPU_RUNNABLE or PP_OFF_CPU_THROTTLED); else addr and data_src are 0 and the
 * delay is in period. phys_addr is 0. Added without a layout change: older collectors would
 * count the record as a sample.
 */
#define PP_SF_OFF_CPU (1u << 10)
/*
 * A sample of a process whose unwind tables the shim did not have yet (a new process: its
 * tables are built off the sample path): after the stack tail, a struct pp_raw_ustack and the
 * top of its user stack as the shim copied it, so that user space can walk it with the
 * tables once they are in, even after the process exited. The frames in the stack tail are
 * the shim's own walk of it (frame pointers), kept where the later walk cannot be done.
 */
#define PP_SF_USTACK_RAW (1u << 11)
/*
 * cgroup_id is a key of the task's cgroup in one cgroup v1 hierarchy
 * (pp_shim_config.cgroup_v1_subsys) and its v2 cgroup together, below PP_CGROUP_KEY_MASK, not
 * its v2 id: on a host with v1 hierarchies containers are told apart there (a hybrid host's
 * cgroup2 holds no controllers; without a cgroup2 mount every v2 cgroup is the root).
 */
#define PP_SF_CGROUP_V1 (1u << 12)
#define PP_CGROUP_KEY_MASK ((1ull << 62) - 1)
/*
 * An off-CPU record whose end the shim did not see (the kernel left the switch back
 * untraced, PP_CNT_OFF_CPU_ENDED_AT_WAKEUP): it ends where the shim estimated, at the wakeup
 * it saw plus the run-queue wait since, or from the thread's runtime since.
 */
#define PP_SF_OFF_CPU_END_ESTIMATED (1u << 13)

/*
 * The key of PP_SF_CGROUP_V1 from the v1 cgroup's id and the v2 cgroup's (0 where the loader
 * left v2 out): the shim's and the collector's, which checks a key against the cgroups a
 * process is in. splitmix64's finalizer: two pairs share a key by a 2^-62 chance.
 */
static inline __attribute__((always_inline)) __u64 pp_cgroup_key(__u64 v1, __u64 v2)
{
	__u64 h = v1 * 0x9e3779b97f4a7c15ull ^ v2;

	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	return (h ^ (h >> 31)) & PP_CGROUP_KEY_MASK;
}

/*
 * pp_shim_config.off_cpu_stacks_at: where the stacks of a wait are taken. A task's stacks are
 * the same as it leaves the CPU and as it resumes, so a probe that runs as it resumes, in its
 * context, walks them only for waits long enough to record; without one every switch walks
 * them as it leaves, and the record is held (off_cpu_records) until the task comes back.
 */
#define PP_OFF_CPU_AT_RESUME 0 /* a kprobe on the scheduler's finish_task_switch */
#define PP_OFF_CPU_AT_SWITCH 1 /* the switch tracepoint, every switch */
/*
 * fexit on schedule(), where the kernel has BPF trampolines and no kprobes: a task that
 * went to sleep through schedule() returns from it; a preempted one never called it, so its
 * stacks are taken at the switch (preempt set) and held.
 */
#define PP_OFF_CPU_AT_SCHEDULE_RETURN 2
/*
 * Neither, on 5.17+ x86-64 (task storage, bpf_task_pt_regs, bpf_loop): the switch tracepoint
 * notes the wait in the task's storage and walks nothing for a task with restartable
 * sequences (glibc registers them for every thread), whose way back to user mode after any
 * switch passes the rseq_update tracepoint in its context, before a user instruction: a wait
 * long enough to record takes its kernel stack as the traced switch brings the task back
 * (bpf_get_task_stack) and its user stack there, where its user registers are compared with
 * those it left with. Other waits (threads without rseq) take the user stack as they leave, held
 * in off_cpu_records, and the kernel stack as they come back.
 */
#define PP_OFF_CPU_AT_USER_RETURN 3

/* A thread's wait there, in its task storage (off_cpu_tasks). */
#define PP_OC_IDLE 0	/* no wait noted */
#define PP_OC_WAITING 1 /* off the CPU, or back on it through a switch no one traced */
#define PP_OC_PENDING                                                                              \
	2 /* ended, long enough: its record waits in off_cpu_records for its user                  \
	   * stack, at the system call's exit */

struct pp_off_cpu_task {
	__u64 time_ns;	 /* left the CPU */
	__u64 wake_ns;	 /* woken; 0: not (yet), or it never slept */
	__u64 run_delay; /* sched_info.run_delay as it left */
	__u64 runtime;	 /* se.sum_exec_runtime as it left */
	__u64 ip, sp;	 /* its user registers as it left */
	__u32 state;
	__u16 wake_state;
	__u8 phase; /* PP_OC_* */
	__u8 held;  /* its record, stacks and all, was taken as it left */
};

/* pp_sample.weight of an off-CPU record: why the task was off the CPU */
#define PP_OFF_CPU_RUNNABLE 0 /* preempted or still runnable: waited for a CPU (busy, quota) */
#define PP_OFF_CPU_SLEEPING 1 /* TASK_INTERRUPTIBLE: I/O, locks, timers; signals end it */
#define PP_OFF_CPU_DISK 2     /* TASK_UNINTERRUPTIBLE: the D state (disk, page faults) */
#define PP_OFF_CPU_STOPPED 3  /* stopped or traced */
/* runnable, but its cgroup (or one above) used up its CPU quota: CFS bandwidth throttling */
#define PP_OFF_CPU_THROTTLED 4
#define PP_OFF_CPU_STATES 5

struct pp_rec_hdr {
	__u16 type;    /* PP_REC_* */
	__u16 version; /* PP_RECORD_ABI_VERSION of the writer */
	__u32 size;    /* bytes of this record, header and stack tail included */
};

/*
 * One perf sample. tgid is the process id user space sees (getpid()), tid the thread id
 * (gettid()); the kernel calls them tgid and pid.
 */
struct pp_sample {
	struct pp_rec_hdr hdr;
	__u32 tgid;
	__u32 tid;
	__u64 time_ns;	    /* bpf_ktime_get_ns(): CLOCK_MONOTONIC at the PMI */
	__u64 cgroup_id;    /* cgroup v2 id of the task (kernfs inode number) */
	__u64 ip;	    /* precise ip from the sample registers */
	__u64 period;	    /* event period of this sample (data->period) */
	__u64 addr;	    /* data linear address (memory events) */
	__u64 data_src;	    /* union perf_mem_data_src value */
	__u64 weight;	    /* union perf_sample_weight value (var1_dw = load latency) */
	__u64 phys_addr;    /* data physical address, 0 where unknown */
	__u64 sample_flags; /* perf_sample_data.sample_flags (6.1+), see PP_SF_HAS_SAMPLE_FLAGS */
	__u32 cpu;
	__u32 event_cookie; /* bpf attach cookie: which opened event produced this sample */
	__u16 flags;	    /* PP_SF_* */
	__u16 nr_kstack;    /* kernel frames in stack[0 .. nr_kstack) */
	__u16 nr_ustack;    /* user frames in stack[nr_kstack .. nr_kstack + nr_ustack) */
	__u16 _pad0;
	char comm[16]; /* thread name at sample time */
	__u64 stack[]; /* leaf first; kernel frames then user frames */
};

_Static_assert(sizeof(struct pp_rec_hdr) == 8, "pp_rec_hdr layout");
_Static_assert(sizeof(struct pp_sample) == 120, "pp_sample layout");
_Static_assert(__builtin_offsetof(struct pp_sample, ip) == 32, "pp_sample.ip offset");
_Static_assert(__builtin_offsetof(struct pp_sample, data_src) == 56, "pp_sample.data_src offset");
_Static_assert(__builtin_offsetof(struct pp_sample, cpu) == 88, "pp_sample.cpu offset");
_Static_assert(__builtin_offsetof(struct pp_sample, nr_kstack) == 98, "pp_sample.nr_kstack offset");
_Static_assert(__builtin_offsetof(struct pp_sample, stack) == 120, "pp_sample.stack offset");

/* pp_task_event.kind */
#define PP_TASK_EXEC 1 /* the process replaced its image: cached maps are stale */
#define PP_TASK_EXIT 2 /* the process (its thread-group leader) exited */

/* A process life-cycle event, so the collector's process cache follows exec, exit, pid reuse. */
struct pp_task_event {
	struct pp_rec_hdr hdr;
	__u32 tgid;
	__u32 kind;    /* PP_TASK_* */
	__u64 time_ns; /* bpf_ktime_get_ns() */
};

_Static_assert(sizeof(struct pp_task_event) == 24, "pp_task_event layout");

/* Largest record the shim writes without a stack copy. */
#define PP_SAMPLE_MAX_SIZE (sizeof(struct pp_sample) + 2 * PP_MAX_STACK_DEPTH * sizeof(__u64))

/*
 * The stack copy of a PP_SF_USTACK_RAW sample, after its stack tail: the user registers the
 * walk starts from, and len bytes of user memory from sp (the shim's window: from sp to the
 * end of the page after sp's, or sp's page alone where the next cannot be read; then, where
 * the stack goes on, the 20 KiB above it, or the pages of them that are mapped).
 */
struct pp_raw_ustack {
	__u64 ip, sp, bp;
	__u32 len; /* bytes that follow, at most PP_RAW_USTACK_MAX */
	__u32 _pad;
};

_Static_assert(sizeof(struct pp_raw_ustack) == 32, "pp_raw_ustack layout");

/* 28 KiB: the record under construction (a per-CPU array's value) stays under 32 KiB */
#define PP_RAW_USTACK_MAX 28672
/* Largest record the shim writes. */
#define PP_SAMPLE_RAW_MAX_SIZE                                                                     \
	(PP_SAMPLE_MAX_SIZE + sizeof(struct pp_raw_ustack) + PP_RAW_USTACK_MAX)
_Static_assert(PP_SAMPLE_RAW_MAX_SIZE <= 32768, "a per-CPU array's value is 32 KiB at most");

/* Indexes of the per-CPU counter array map "counters". Never renumber; append only. */
enum pp_counter {
	PP_CNT_SAMPLES = 0,  /* program invocations */
	PP_CNT_EMITTED,	     /* records written to the ring buffer */
	PP_CNT_FILTERED,     /* samples dropped by the tgid filter */
	PP_CNT_RB_FULL,	     /* bpf_ringbuf_output failed: the CPU's ring full or contended */
	PP_CNT_KSTACK_TRUNC, /* kernel stack truncated at max depth */
	PP_CNT_USTACK_TRUNC, /* user stack truncated at max depth */
	PP_CNT_KSTACK_ERR,   /* kernel stack could not be taken */
	PP_CNT_USTACK_ERR,   /* user stack could not be taken */
	PP_CNT_SCRATCH_MISS, /* per-CPU scratch buffer unavailable */
	PP_CNT_FORK_TRACKED, /* child processes added to the tgid filter */
	PP_CNT_FILTER_FULL,  /* tgid filter map full: a child could not be tracked */
	PP_CNT_TASK_RB_FULL, /* a task event could not be written */
	/*
	 * Samples dropped by the cgroup filter (their task is in none of the selected cgroups nor
	 * below one), before any stack work. Where the kernel lacks the ancestor helper the
	 * loader filters in user space and adds the records it dropped here.
	 */
	PP_CNT_CGROUP_FILTERED,
	PP_CNT_IP_FILTERED,   /* samples dropped by pp_shim_config.ip_filter (user or kernel) */
	PP_CNT_USTACK_SHIM,   /* user stacks the shim walked itself (PP_USTACK_SHIM) */
	PP_CNT_USTACK_SWITCH, /* frame chains followed onto another stack (Go's systemstack) */
	/* unwinding with tables (PP_USTACK_AUTO, PP_USTACK_DWARF): frames by how they were found */
	PP_CNT_UNWIND_TABLE_FRAMES,
	PP_CNT_UNWIND_FP_FRAMES,
	PP_CNT_UNWIND_NO_PROC, /* samples of a process without a mapping table yet (new ones) */
	/* walks that ended before the outermost frame, by why (each sets PP_SF_USTACK_STOPPED) */
	PP_CNT_UNWIND_STOP_NO_CFI,	/* a pc no table row covers, or outside every mapping */
	PP_CNT_UNWIND_STOP_UNREADABLE,	/* stack memory the rule points at could not be read */
	PP_CNT_UNWIND_STOP_NOT_UP,	/* the next frame would not be above this one */
	PP_CNT_UNWIND_STOP_UNSUPPORTED, /* a row whose rule the shim does not follow */
	/*
	 * a table step that would land somewhere no caller can be: a frame larger than
	 * PP_UNWIND_MAX_FRAME_BYTES, or a return address outside user space
	 */
	PP_CNT_UNWIND_STOP_IMPLAUSIBLE,
	/* a frame-pointer step (auto) that could not go on: the chain went down or unreadable */
	PP_CNT_UNWIND_STOP_FP,
	/* off-CPU (pp_shim_config.off_cpu_every): switches away from the CPU the shim noted */
	PP_CNT_OFF_CPU_NOTED,
	PP_CNT_OFF_CPU_SHORT,	  /* ... that ended within off_cpu_min_ns: no record */
	PP_CNT_OFF_CPU_EMITTED,	  /* ... that became a record */
	PP_CNT_OFF_CPU_RB_FULL,	  /* ... whose record did not fit in the ring */
	PP_CNT_OFF_CPU_NOT_NOTED, /* switches not noted: off_cpu_waiting full */
	/* waits whose stacks taken at the switch (no kprobes) were evicted: more threads waited */
	PP_CNT_OFF_CPU_EVICTED,
	/*
	 * noted waits whose end the shim never saw: the thread ran again without a traced switch
	 * back to it (a kernel that leaves some switches untraced), found when it left the CPU
	 * again or exited. Not recorded: when it ended is not known.
	 */
	PP_CNT_OFF_CPU_UNSEEN_END,
	/*
	 * of those, the ones recorded all the same (and counted as emitted, short or evicted, not
	 * as unseen): a sleep whose wakeup the shim saw and whose stacks it held ended there, its
	 * wait for a CPU after it unknown and left out
	 */
	PP_CNT_OFF_CPU_ENDED_AT_WAKEUP,
	/* samples of a process without tables that carry a copy of their stack (PP_SF_USTACK_RAW)
	 */
	PP_CNT_USTACK_RAW,
	/* frames that met code of a partial table not reached before (PP_UW_CFA_DEFERRED) */
	PP_CNT_UNWIND_DEFERRED,
	/*
	 * frames in code outside every mapping of their process's list: mapped since the list
	 * was written (a library the dynamic loader just mapped); the sample carries its copy
	 */
	PP_CNT_UNWIND_UNLISTED,
	PP_CNT__MAX,
};

/*
 * Load-time configuration, a const volatile global in the shim's .rodata. The verifier
 * treats it as constant, so disabled branches (stacks, memory fields) cost nothing.
 */
struct pp_shim_config {
	__u32 abi_version;	 /* PP_RECORD_ABI_VERSION, checked by the loader */
	__u32 kstack_depth;	 /* 0 disables kernel stacks; <= PP_MAX_STACK_DEPTH */
	__u32 ustack_depth;	 /* 0 disables user stacks; <= PP_MAX_STACK_DEPTH */
	__u32 read_mem_fields;	 /* read addr/data_src/weight/phys_addr */
	__u32 filter_tgids;	 /* only emit samples of tgids in the target_tgids map */
	__u32 use_attach_cookie; /* kernel has bpf_get_attach_cookie for perf_event (5.15+) */
	__u64 wakeup_bytes;	 /* force a wake-up once this much data is pending in a ring */
	/*
	 * Only emit samples of tasks in (or below) a cgroup of the cgroup_filter map. Which
	 * hierarchy levels hold selected cgroups is in the cgroup_levels map, not here: cgroups
	 * (Kubernetes pods) are added while running, at levels not known at load time.
	 */
	__u32 filter_cgroups;
	/*
	 * PP_IP_FILTER_*: keep only user-mode or only kernel-mode samples, for events that
	 * cannot carry exclude_kernel/exclude_user (AMD IBS on kernels that reject them).
	 */
	__u32 ip_filter;
	/*
	 * PP_USTACK_*: how user stacks of samples without a perf callchain are taken. The
	 * callchain of a precise event (PERF_SAMPLE_CALLCHAIN) is always copied by bpf_get_stack.
	 */
	__u32 ustack_walk;
	/* Index of the ring a CPU without its own writes to (a CPU onlined after loading). */
	__u32 fallback_ring;
	/* Off-CPU records (PP_SF_OFF_CPU): 0 none; N, of 1 in N switches away from a CPU. */
	__u32 off_cpu_every;
	/* PP_OFF_CPU_AT_*: where the stacks of a wait are taken */
	__u32 off_cpu_stacks_at;
	__u64 off_cpu_min_ns; /* shorter waits make no record */
	/*
	 * 0: samples carry the task's cgroup v2 id. N: pp_cgroup_key of its cgroup in the v1
	 * hierarchy of the subsystem with index N - 1 (the kernel's enum cgroup_subsys_id, the
	 * order of /proc/cgroups) and, with cgroup_v1_with_v2, its v2 cgroup; and PP_SF_CGROUP_V1.
	 */
	__u32 cgroup_v1_subsys;
	__u32 cgroup_v1_with_v2;
};

/*
 * PP_USTACK_SHIM: the shim follows the frame-pointer chain of a sample taken in 64-bit user
 * mode itself and stops at the outermost frame (a zero frame pointer) without reading it; the
 * kernel's walker reads that frame too, a fault on address 0 per sample. Kernel-mode and
 * compat samples, and architectures other than x86-64 and arm64, use bpf_get_stack.
 */
#define PP_USTACK_SHIM 0
#define PP_USTACK_KERNEL 1 /* always bpf_get_stack (BPF_F_USER_STACK) */
/*
 * PP_USTACK_AUTO: the shim unwinds with the unwind tables user space puts in the unwind_rows
 * and unwind_procs maps, and takes a frame-pointer step in a mapping without a table (code
 * with frame pointers, JIT code, a process whose tables are not built yet). PP_USTACK_DWARF:
 * tables only; a frame in a mapping without one ends the stack. Both apply to user-mode
 * samples (their registers, a precise event's included) and to kernel-mode ones (the task's
 * user registers), and need bpf_loop (5.17+) and bpf_task_pt_regs (5.15+): a separate
 * program, on_sample_unwind, which the loader loads instead of on_sample.
 */
#define PP_USTACK_AUTO 2
#define PP_USTACK_DWARF 3

/*
 * Unwind tables in BPF maps (x86-64), 4 bytes a row. unwind_rows, an array of __u32 words,
 * holds every table as one run; unwind_rules holds the rules rows name (what the CFA is, where
 * the caller's rbp and return address are), each distinct rule once for all tables;
 * unwind_procs maps a tgid to its executable mappings, sorted by address, each naming its
 * table's run. A table covers its code in 64 KiB pages from its base (the address of its first
 * row in this process). Its run starts with nr_pages + 1 words, word p the index in the run
 * of page p's first row (word nr_pages: the run's length), then the rows, each
 * PP_UW_ROW(pc_lo, rule): from pc_lo (the offset in its page) to the next row's, the rule at
 * that index holds. Each page's rows start at pc_lo 0 (the rule in effect where the page
 * starts), so a pc's row is always in its own page. Rule 0 is "no CFI here".
 */
#define PP_UW_PAGE_SHIFT 16
#define PP_UW_ROW(pc_lo, rule) ((__u32)(rule) << 16 | (__u32)(pc_lo))
#define PP_UW_ROW_PC_LO(w) ((w)&0xffff)
#define PP_UW_ROW_RULE(w) ((w) >> 16)
#define PP_UW_MAX_RULES 65536		 /* rule indexes are 16 bits */
#define PP_UW_MAX_TABLE_WORDS (1u << 24) /* the shim searches at most this much of a run */

struct pp_bpf_unwind_rule {
	__s32 cfa_off;
	__s16 rbp_off;
	__s16 ra_off;
	__u8 cfa_rule; /* PP_UW_CFA_* */
	__u8 rbp_rule; /* PP_UW_REG_* */
	__u8 ra_rule;  /* PP_UW_REG_* */
	__u8 flags;    /* PP_UW_SIGNAL_FRAME */
};

#define PP_UW_CFA_NONE 0	/* no CFI here: stop */
#define PP_UW_CFA_RSP 1		/* rsp + cfa_off */
#define PP_UW_CFA_RBP 2		/* rbp + cfa_off */
#define PP_UW_CFA_PLT 3		/* rsp + 8, + 8 when (rip & 15) >= cfa_off */
#define PP_UW_CFA_DEREF_RSP 4	/* *(rsp + cfa_off): a signal frame */
#define PP_UW_CFA_UNSUPPORTED 5 /* stop */
/*
 * Code of a partial table (the unwinder's: its file's rows made as walks reach them) not
 * reached yet: a frame-pointer step or a stop as where no row is, and the sample takes its
 * stack copy (PP_SF_USTACK_RAW) for the unwinder to walk once it found the rows.
 */
#define PP_UW_CFA_DEFERRED 6
#define PP_UW_REG_SAME 0
#define PP_UW_REG_UNDEFINED 1 /* the return address: the outermost frame */
#define PP_UW_REG_AT_CFA 2    /* at CFA + off */
#define PP_UW_REG_AT_RSP 3    /* at rsp + off */
#define PP_UW_REG_UNSUPPORTED 4
#define PP_UW_SIGNAL_FRAME 0x1 /* the next pc is the interrupted one, not a return address */

struct pp_bpf_unwind_mapping {
	__u64 start, end; /* the executable mapping [start, end) */
	__u64 base;	  /* the table's page 0 starts at this address */
	__u32 first_word; /* the table's run in unwind_rows */
	__u32 nr_pages;	  /* 0: no table (frame pointers in PP_USTACK_AUTO) */
};

#define PP_UNWIND_MAX_MAPPINGS 256	      /* executable mappings in one process's list */
#define PP_UNWIND_MAX_FRAME_BYTES (16u << 20) /* one frame larger than this is a wrong step */
#define PP_UNWIND_MAX_PROCS 8192	      /* processes in unwind_procs */
/* entries of unwind_mappings, every process's list (8 MiB: 32 a process when all are in) */
#define PP_UNWIND_MAPPING_SLOTS (1u << 18)

/*
 * The list holds every executable mapping its process had when it was written (files with
 * a table or without, the vdso, JIT code): code outside it was mapped since, and a walk that
 * meets it takes the stack copy (PP_SF_USTACK_RAW). Without it (a list cut short, the agent's
 * own empty one) code outside the list is walked by frame pointers only.
 */
#define PP_UW_PROC_ALL_MAPPINGS 0x1

/*
 * unwind_procs' value: a process's list, its nr entries from index first of unwind_mappings
 * (one array for every list: a list written or dropped costs the kernel a small value, not a
 * list's worth of memory to allocate, copy and free).
 */
struct pp_bpf_unwind_proc {
	__u32 nr;
	__u32 flags; /* PP_UW_PROC_* */
	__u32 first;
	__u32 pad;
};

/* A process's list as the collector makes it: the entries it writes to unwind_mappings. */
struct pp_bpf_unwind_list {
	__u32 nr;
	__u32 flags; /* PP_UW_PROC_* */
	struct pp_bpf_unwind_mapping m[PP_UNWIND_MAX_MAPPINGS];
};

_Static_assert(sizeof(struct pp_bpf_unwind_rule) == 12, "pp_bpf_unwind_rule layout");
_Static_assert(sizeof(struct pp_bpf_unwind_mapping) == 32, "pp_bpf_unwind_mapping layout");
_Static_assert(sizeof(struct pp_bpf_unwind_proc) == 16, "pp_bpf_unwind_proc layout");

#define PP_IP_FILTER_NONE 0
#define PP_IP_FILTER_USER_ONLY 1   /* drop samples whose ip is a kernel address */
#define PP_IP_FILTER_KERNEL_ONLY 2 /* drop samples whose ip is a user address */

_Static_assert(sizeof(struct pp_shim_config) == 72, "pp_shim_config layout");
_Static_assert(__builtin_offsetof(struct pp_shim_config, filter_cgroups) == 32,
	       "pp_shim_config.filter_cgroups offset");

/*
 * cgroup filter: the cgroup_filter hash map is keyed by the cgroup v2 id (__u64) of each
 * selected cgroup (value __u8, unused); the single-entry array map cgroup_levels holds a
 * __u32 bit mask of the hierarchy levels (root = 0) those cgroups sit at. A sample passes when
 * bpf_get_current_ancestor_cgroup_id(level) is in cgroup_filter for some level in the mask.
 */
#define PP_CGROUP_MAX_LEVEL 31	  /* deepest level a selected cgroup may sit at */
#define PP_CGROUP_FILTER_MAX 1024 /* selected cgroups at most */

/*
 * Threads off a CPU at once whose switch the shim holds (off_cpu_waiting, 24 bytes each,
 * preallocated: tracing programs before 5.13 may use no other hash map). A switch finding it
 * full is counted (PP_CNT_OFF_CPU_NOT_NOTED), not recorded.
 */
#define PP_OFF_CPU_MAX_WAITING 32768
/*
 * Stacks taken at the switch (PP_OFF_CPU_AT_SWITCH, and preemptions at _SCHEDULE_RETURN):
 * records held for this many waiting threads at most (off_cpu_records, LRU,
 * PP_SAMPLE_MAX_SIZE each); the longest-waiting lose their stacks first
 * (PP_CNT_OFF_CPU_EVICTED).
 */
#define PP_OFF_CPU_HELD_RECORDS 4096

#endif /* PEBSPROF_RECORD_H */
