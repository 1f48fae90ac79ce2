// SPDX-License-Identifier: GPL-2.0
/*
 * The in-kernel shim: a perf_event program that turns each sample into one pp_sample record
 * in a BPF ring buffer (ABI in include/pebsprof/record.h).
 *
 * Built twice from this source (see CMakeLists.txt):
 *   PP_SHIM_KCTX=1  reads perf_sample_data through bpf_cast_to_kern_ctx (kernel 6.2+);
 *   PP_SHIM_KCTX=0  reads it with BPF_CORE_READ on the kernel context (older kernels; needs
 *                   CAP_PERFMON for the verifier's allow_ptr_leaks).
 * Never a plain load through a cast ctx: the verifier rewrites it into a pt_regs read.
 *
 * Filters (each decided at load time through shim_config, so a disabled one costs nothing):
 * the tgid filter, then the cgroup filter; a sample must pass every enabled one, and is
 * dropped before any stack work otherwise.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_types.bpf.h"
#include <pebsprof/record.h>

#ifndef PP_SHIM_KCTX
#define PP_SHIM_KCTX 0
#endif

char LICENSE[] SEC("license") = "GPL";

const volatile struct pp_shim_config shim_config = {
    .abi_version = PP_RECORD_ABI_VERSION,
    .kstack_depth = PP_MAX_STACK_DEPTH,
    .ustack_depth = PP_MAX_STACK_DEPTH,
    .wakeup_bytes = 256 * 1024,
};

struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024); /* resized by the loader */
};

/*
 * One ring buffer per CPU, indexed by CPU id, created and inserted by the loader. A program
 * in NMI (PEBS, IBS) only try-locks a ring, so a ring that CPUs share loses records whenever
 * two of them write at once; and sharing one costs every sample the contention.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* resized by the loader: highest CPU id + 1 */
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

/* All counters of a CPU in one value: one map lookup per sample, not one per counter. */
struct pp_counters {
	__u64 v[PP_CNT__MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pp_counters);
} counters SEC(".maps");

/* One record under construction per CPU: too large for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[PP_SAMPLE_RAW_MAX_SIZE]);
} scratch SEC(".maps");

/* Processes to profile when shim_config.filter_tgids is set; children are added on fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} target_tgids SEC(".maps");

/* Selected cgroups when shim_config.filter_cgroups is set (layout in record.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_CGROUP_FILTER_MAX);
	__type(key, __u64);
	__type(value, __u8);
} cgroup_filter SEC(".maps");

/*
 * Bit mask of the levels holding selected cgroups. A map, not rodata: cgroups are added while
 * sampling (the Kubernetes namespace filter adds each new pod), possibly at new levels.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_levels SEC(".maps");

#if PP_SHIM_KCTX
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
#endif

/* This CPU's ring, or the loader's fallback for a CPU that came online after it ran. */
static __always_inline void *cpu_ring(void)
{
	__u32 cpu = bpf_get_smp_processor_id(), fallback = shim_config.fallback_ring;
	void *ring = bpf_map_lookup_elem(&rings, &cpu);

	return ring ? ring : bpf_map_lookup_elem(&rings, &fallback);
}

static __always_inline struct pp_counters *cpu_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline void count_in(struct pp_counters *c, __u32 idx)
{
	if (c && idx < PP_CNT__MAX)
		c->v[idx] += 1;
}

static __always_inline void count(__u32 idx)
{
	count_in(cpu_counters(), idx);
}

static __always_inline void read_mem_fields(struct bpf_perf_event_data *ctx, struct pp_sample *rec)
{
#if PP_SHIM_KCTX
	struct bpf_perf_event_data_kern *kctx = bpf_cast_to_kern_ctx(ctx);
	struct perf_sample_data *data = kctx->data;

	rec->addr = data->addr;
	rec->data_src = data->data_src.val;
	rec->weight = data->weight.full;
	if (bpf_core_field_exists(data->phys_addr))
		rec->phys_addr = data->phys_addr;
	if (bpf_core_field_exists(data->sample_flags)) {
		rec->sample_flags = data->sample_flags;
		rec->flags |= PP_SF_HAS_SAMPLE_FLAGS;
	}
#else
	struct bpf_perf_event_data_kern *kctx = (void *)ctx;
	struct perf_sample_data *data = BPF_CORE_READ(kctx, data);

	rec->addr = BPF_CORE_READ(data, addr);
	rec->data_src = BPF_CORE_READ(data, data_src.val);
	if (bpf_core_type_exists(union perf_sample_weight)) {
		rec->weight = BPF_CORE_READ(data, weight.full);
	} else {
		struct perf_sample_data___u64_weight *old = (void *)data;

		rec->weight = BPF_CORE_READ(old, weight);
	}
	if (bpf_core_field_exists(data->phys_addr))
		rec->phys_addr = BPF_CORE_READ(data, phys_addr);
	if (bpf_core_field_exists(data->sample_flags)) {
		rec->sample_flags = BPF_CORE_READ(data, sample_flags);
		rec->flags |= PP_SF_HAS_SAMPLE_FLAGS;
	}
#endif
	rec->flags |= PP_SF_MEM_FIELDS;
}

/*
 * Whether the current task is in a selected cgroup or below one: its ancestor at each level
 * of the mask is looked up. Pods sit at one or two levels, so this is a lookup or two.
 */
static __always_inline int cgroup_selected(void)
{
	__u32 zero = 0, mask, *maskp;

	maskp = bpf_map_lookup_elem(&cgroup_levels, &zero);
	if (!maskp)
		return 0;
	mask = *maskp;
	for (int level = 0; level <= PP_CGROUP_MAX_LEVEL; level++) {
		__u64 id;

		if (!(mask >> level))
			break;
		if (!(mask & (1u << level)))
			continue;
		id = bpf_get_current_ancestor_cgroup_id(level);
		if (id && bpf_map_lookup_elem(&cgroup_filter, &id))
			return 1;
	}
	return 0;
}

/*
 * The id of the current task's cgroup in the v1 hierarchy of subsystem subsys: on a host
 * with v1 hierarchies they tell containers apart, and the v2 cgroup mostly does not (the root,
 * or the runtime's service, for every container). 0 where the task has none.
 */
static __always_inline __u64 current_v1_cgroup_id(__u32 subsys)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	__u32 n = bpf_core_field_size(struct css_set, subsys) / sizeof(void *);
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cs = BPF_CORE_READ(t, cgroups);

	if (!cs || subsys >= n || subsys >= 64)
		return 0;
	if (bpf_probe_read_kernel(&css, sizeof(css),
				  (char *)cs + bpf_core_field_offset(struct css_set, subsys) +
				      subsys * sizeof(void *)) ||
	    !css)
		return 0;
	return BPF_CORE_READ(css, cgroup, kn, id);
}

/*
 * The sample's cgroup: its v2 id, or, where the loader asked for v1 (cgroup_v1_subsys), one
 * key of its v1 and v2 cgroups together (PP_SF_CGROUP_V1): the collector reads a container's
 * /proc/PID/cgroup once per key, not once per process, and names by it the samples of
 * processes gone before their files could be read.
 */
static __always_inline __u64 sample_cgroup(__u16 *flags)
{
	__u64 v2 = bpf_get_current_cgroup_id(), v1;

	if (!shim_config.cgroup_v1_subsys)
		return v2;
	v1 = current_v1_cgroup_id(shim_config.cgroup_v1_subsys - 1);
	if (!v1)
		return v2;
	*flags |= PP_SF_CGROUP_V1;
	return pp_cgroup_key(v1, shim_config.cgroup_v1_with_v2 ? v2 : 0);
}

/*
 * x86 marks a skid-free ip with PERF_EFLAGS_EXACT in the sample registers' flags (a reserved
 * EFLAGS bit, so an interrupted context never has it set by hardware). Plain ctx load: the
 * registers are the uapi part of the context.
 */
#define PP_PERF_EFLAGS_EXACT (1ul << 3)

static __always_inline __u16 exact_ip_flag(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs___pp *regs = (void *)&ctx->regs;

	return (regs->flags & PP_PERF_EFLAGS_EXACT) ? PP_SF_EXACT_IP : 0;
#else
	return 0;
#endif
}

/* Returns the number of frames written to dst, and flags truncation or failure. */
static __always_inline __u32 take_stack(void *ctx, __u64 *dst, __u32 depth, __u64 stack_flags,
					struct pp_sample *rec, __u16 trunc_flag, __u16 err_flag,
					struct pp_counters *cnt, __u32 trunc_counter,
					__u32 err_counter)
{
	long n;

	if (depth == 0)
		return 0;
	if (depth > PP_MAX_STACK_DEPTH)
		depth = PP_MAX_STACK_DEPTH;
	n = bpf_get_stack(ctx, dst, depth * sizeof(__u64), stack_flags);
	if (n < 0) {
		rec->flags |= err_flag;
		count_in(cnt, err_counter);
		return 0;
	}
	n /= sizeof(__u64);
	if (n >= depth) {
		rec->flags |= trunc_flag;
		count_in(cnt, trunc_counter);
	}
	return n;
}

/*
 * Whether perf collected the sample's callchain (precise events request it; see events.c):
 * then bpf_get_stack copies it, and the registers in ctx may be a PEBS record's.
 */
#define PP_PERF_SAMPLE_CALLCHAIN (1ull << 5)  /* uapi PERF_SAMPLE_CALLCHAIN */
#define PP_PERF_SAMPLE_REGS_INTR (1ull << 18) /* uapi PERF_SAMPLE_REGS_INTR */

static __always_inline __u64 event_sample_type(struct bpf_perf_event_data *ctx)
{
#if PP_SHIM_KCTX
	struct bpf_perf_event_data_kern *kctx = bpf_cast_to_kern_ctx(ctx);

	return kctx->event->attr.sample_type;
#else
	struct bpf_perf_event_data_kern *kctx = (void *)ctx;

	return BPF_CORE_READ(kctx, event, attr.sample_type);
#endif
}

static __always_inline int has_perf_callchain(struct bpf_perf_event_data *ctx)
{
	return !!(event_sample_type(ctx) & PP_PERF_SAMPLE_CALLCHAIN);
}

/*
 * Whether ctx's registers can start a walk: not for a precise event (which requests the
 * perf callchain) unless its record holds the registers (PERF_SAMPLE_REGS_INTR, which the
 * collector asks for with tables): otherwise only its ip is the sampled instruction's, sp and
 * bp the interrupt's (notes rule 7).
 */
static __always_inline int sample_regs_walkable(struct bpf_perf_event_data *ctx)
{
	__u64 st = event_sample_type(ctx);

	return !(st & PP_PERF_SAMPLE_CALLCHAIN) || (st & PP_PERF_SAMPLE_REGS_INTR);
}

/* Whether ctx holds the registers of a 64-bit user-mode context this shim can unwind. */
static __always_inline int user_regs_walkable(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* __USER_CS; compat (__USER32_CS) and paravirt code segments go to the kernel walker. */
	return (ctx->regs.cs & 0xffff) == 0x33;
#elif defined(__TARGET_ARCH_arm64)
	return !(ctx->regs.pstate & 0x10); /* PSR_MODE32_BIT: an AArch32 task */
#else
	return 0;
#endif
}

/* The frame-pointer ABI's frame record (x86-64 and arm64): caller's frame pointer, return. */
struct frame_record {
	__u64 next_fp;
	__u64 ret;
};

/*
 * The lower of two user addresses (below 2^63) without a branch: a branch would give each path
 * its own range for a and b, and the verifier could not merge the paths of a loop.
 */
static __always_inline __u64 lower_of(__u64 a, __u64 b)
{
	__u64 b_below = (b - a) >> 63;

	barrier_var(b_below); /* keeps the compiler from turning the product into a branch */
	return a - (a - b) * b_below;
}

/*
 * The user stack of a sample taken in 64-bit user mode, by following frame pointers from the
 * sample registers: the ip, then one return address per frame record. The walk ends at a
 * zero, misaligned or unreadable frame pointer or a zero return address. A frame pointer
 * moves towards the stack base; one that moves back is followed only as a switch to another
 * stack (Go's systemstack and mcall, whose g0 frames name the goroutine's; coroutines):
 * below the sample's stack pointer, where nothing live of this stack lies, and below every
 * frame walked, so a walk never comes back to a frame it passed and cycles end. Writes the
 * frames to dst and their number to rec->nr_ustack.
 */
static __always_inline void walk_user_fp(struct bpf_perf_event_data *ctx, __u64 *dst, __u32 depth,
					 struct pp_sample *rec, struct pp_counters *cnt)
{
	__u64 fp = PT_REGS_FP(&ctx->regs);
	__u64 lowest = PT_REGS_SP(&ctx->regs), switches = 0;
	__u32 n = 0;

	if (depth > 0) {
		count_in(cnt, PP_CNT_USTACK_SHIM);
		dst[0] = PT_REGS_IP(&ctx->regs);
		n = 1;
	}
	lowest = lower_of(lowest, fp);
	/* i reaches PP_MAX_STACK_DEPTH, so the full depth too sees whether a frame follows. */
	for (__u32 i = 1; n && i <= PP_MAX_STACK_DEPTH; i++) {
		struct frame_record fr;
		__u64 up, down;

		if (!fp || (fp & 7))
			break;
		if (i >= depth) {
			/* A frame record follows that the depth leaves out. */
			rec->flags |= PP_SF_USTACK_TRUNC;
			count_in(cnt, PP_CNT_USTACK_TRUNC);
			break;
		}
		if (bpf_probe_read_user(&fr, sizeof(fr), (const void *)fp) || !fr.ret)
			break;
		dst[i] = fr.ret;
		n = i + 1;
		/* by arithmetic, as in lower_of, so one state goes on */
		up = (fp - fr.next_fp) >> 63;	    /* towards the stack base */
		down = (fr.next_fp - lowest) >> 63; /* onto another stack */
		if (!(up | down))
			break;
		lowest = lower_of(lowest, fr.next_fp);
		switches += down;
		fp = fr.next_fp;
	}
	rec->nr_ustack = n;
	if (cnt)
		cnt->v[PP_CNT_USTACK_SWITCH] += switches;
}

/* Unwind tables (PP_USTACK_AUTO, PP_USTACK_DWARF; layout in record.h), written by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); /* user space writes a table's pages with memcpy */
	__uint(max_entries, 1);		   /* resized by the loader: the budget / 8 */
	__type(key, __u32);
	__type(value, __u64); /* two words: an array's values are 8-byte aligned */
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PP_UW_MAX_RULES);
	__type(key, __u32);
	__type(value, struct pp_bpf_unwind_rule);
} unwind_rules SEC(".maps");

/* Preallocated: 16-byte values, and a perf_event program may use no other hash before 5.13. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_UNWIND_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pp_bpf_unwind_proc);
} unwind_procs SEC(".maps");

/* Every process's list of mappings, each a run the collector writes through an mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PP_UNWIND_MAPPING_SLOTS); /* 1 without tables (the loader) */
	__type(key, __u32);
	__type(value, struct pp_bpf_unwind_mapping);
} unwind_mappings SEC(".maps");

/*
 * The registers a walk is at, in a per-CPU map rather than on the stack: the verifier tracks
 * no value in map memory, so each bpf_loop step starts from the same state and its
 * verification converges at once, where values it tracks differ from step to step and 6.12
 * verified the step again for each (118k instructions).
 */
struct uw_regs {
	__u64 ip, sp, bp;
	__u64 exact;		  /* ip is where the thread stopped, not a return address */
	__u64 last_mapping;	  /* the index of the mapping the last frame was in */
	__u64 win_base;		  /* the user address the stack window starts at */
	__u64 win_len;		  /* the bytes copied there (0: none) */
	__u64 start_ip, start_bp; /* where the walk started (its sp is win_base) */
};

/*
 * The top of the user stack, copied once per sample: the frames' reads come from it, not a
 * bpf_probe_read_user each (about 50 ns apiece here, most of a frame's cost). It ends at a
 * page boundary one page past the stack pointer's, so the copy does not reach past the stack;
 * where it would (the last page), it is the stack pointer's page only.
 */
#define UW_WINDOW 8192
/* A stack copy's bytes above the window (PP_RAW_USTACK_MAX: the two together). */
#define UW_RAW_ABOVE (PP_RAW_USTACK_MAX - UW_WINDOW)

struct uw_window {
	__u8 b[UW_WINDOW];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uw_window);
} uw_window_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uw_regs);
} uw_regs_map SEC(".maps");

/* The walk's state between bpf_loop steps, on the program's stack: pointers and bounds. */
struct uw_state {
	struct uw_regs *r;
	struct uw_window *win;
	struct pp_sample *rec;
	struct pp_bpf_unwind_proc *proc;
	struct pp_counters *cnt;
	__u32 nk, depth;
	__u32 keep_raw; /* the sample may carry its stack copy (PP_SF_USTACK_RAW) */
};

#define UW_CONTINUE 0
#define UW_LOOP_FRAMES 32
#define UW_DONE 1
/* the end of x86-64 user space (47-bit addresses): no return address lies above it */
#define UW_USER_END 0x00007ffffffff000ull

/* The walk ended early: flagged on the record, counted by why. */
static __always_inline long uw_stop(struct uw_state *s, __u32 counter)
{
	s->rec->flags |= PP_SF_USTACK_STOPPED;
	s->cnt->v[counter]++;
	return UW_DONE;
}

/*
 * The binary searches below are branch-free, as lower_of: a branch per step would double
 * the verifier's paths at every step, where this is one path, with a way out once the range
 * is one entry (log2 n steps, not the bound's). The answer stays in [base, base + n); each
 * step halves n and moves base up by arithmetic when the key is not below the probed entry
 * (below = 0).
 */
static __always_inline __u32 bsearch_step(__u32 base, __u32 half, __u64 below)
{
	barrier_var(below);
	return base + half * (__u32)(1 - below);
}

/* Entry i of a process's list, or NULL past its end (the entries after are another's). */
static __always_inline struct pp_bpf_unwind_mapping *uw_list_entry(struct pp_bpf_unwind_proc *proc,
								   __u32 i)
{
	__u32 key = proc->first + (i & (PP_UNWIND_MAX_MAPPINGS - 1));

	if (i >= proc->nr)
		return NULL;
	return bpf_map_lookup_elem(&unwind_mappings, &key);
}

/* The mapping holding pc (*idx: its entry): binary search of the process's sorted list. */
static __always_inline struct pp_bpf_unwind_mapping *
uw_mapping(struct pp_bpf_unwind_proc *proc, __u64 pc, const int fixed, __u32 *idx)
{
	__u32 base = 0, n = proc->nr;
	struct pp_bpf_unwind_mapping *m;

	if (n == 0 || n > PP_UNWIND_MAX_MAPPINGS)
		return NULL;
	for (int i = 0; i < 8; i++) { /* log2(PP_UNWIND_MAX_MAPPINGS) */
		__u32 half = n / 2;

		if (!fixed && !half) /* found: a way out of the loop, not a fork of it */
			break;
		m = uw_list_entry(proc, base + half);
		if (!m)
			return NULL;
		base = bsearch_step(base, half, (pc - m->start) >> 63);
		n -= half;
	}
	m = uw_list_entry(proc, base);
	*idx = base;
	return m && m->start <= pc && pc < m->end ? m : NULL;
}

/*
 * Word idx of the row array, or -1 (little-endian: the low half of value idx / 2 is word
 * idx & ~1).
 */
static __always_inline __s64 uw_word(__u32 idx)
{
	__u32 key = idx >> 1;
	__u64 *v = bpf_map_lookup_elem(&unwind_rows, &key);

	return v ? (__s64)(__u32)(*v >> ((idx & 1) * 32)) : -1;
}

/*
 * The rule covering rel in the table's run (layout in record.h): the page's bounds, then a
 * binary search of its rows, one array lookup per step; NULL where the run has no row. The
 * search always takes its 16 steps (steps past the row found look at it again): a loop that
 * may end early verifies once per way out, 139k instructions where this is 12k.
 */
static __always_inline struct pp_bpf_unwind_rule *uw_rule(const struct pp_bpf_unwind_mapping *m,
							  __u64 rel)
{
	__u32 first = m->first_word, page, n, base = 0, key;
	__s64 lo, hi, w;

	if (rel >> 32 || (rel >> PP_UW_PAGE_SHIFT) >= m->nr_pages)
		return NULL;
	page = (__u32)(rel >> PP_UW_PAGE_SHIFT);
	key = (__u32)rel & ((1u << PP_UW_PAGE_SHIFT) - 1);
	lo = uw_word(first + page);
	hi = uw_word(first + page + 1);
	if (lo < 0 || hi <= lo || hi - lo > (1u << PP_UW_PAGE_SHIFT))
		return NULL;
	n = (__u32)(hi - lo);
	first += (__u32)lo;
	for (int i = 0; i < PP_UW_PAGE_SHIFT; i++) { /* a page holds at most 2^16 rows */
		__u32 half = n / 2;

		w = uw_word(first + base + half);
		if (w < 0)
			return NULL;
		base = bsearch_step(base, half, ((__u64)key - PP_UW_ROW_PC_LO(w)) >> 63);
		n -= half;
	}
	w = uw_word(first + base);
	if (w < 0 || PP_UW_ROW_PC_LO(w) > key)
		return NULL;
	key = (__u32)PP_UW_ROW_RULE(w);
	return bpf_map_lookup_elem(&unwind_rules, &key);
}

/* size bytes of user memory at addr: from the window where it holds them. 0 or -1. */
static __always_inline int uw_read(struct uw_state *s, __u64 addr, void *dst, const __u32 size)
{
	__u64 off = addr - s->r->win_base, len = s->r->win_len;

	if (len >= size && off <= len - size) {
		off &= UW_WINDOW - 1; /* for the verifier: the bound it can see */
		if (off <= UW_WINDOW - size) {
			__builtin_memcpy(dst, &s->win->b[off], size);
			return 0;
		}
	}
	return bpf_probe_read_user(dst, size, (const void *)addr) ? -1 : 0;
}

/* Where a register rule says a value is: 0 with *val set, or -1 (unreadable, unsupported). */
static __always_inline int uw_read_reg(struct uw_state *s, __u8 rule, __s16 off, __u64 cfa,
				       __u64 *val)
{
	__u64 at;

	if (rule == PP_UW_REG_AT_CFA)
		at = cfa + off;
	else if (rule == PP_UW_REG_AT_RSP)
		at = s->r->sp + off;
	else
		return -1;
	return uw_read(s, at, val, sizeof(*val));
}

static __always_inline long uw_fp_step(struct uw_state *s)
{
	struct frame_record fr;

	/* a zero frame pointer is the outermost frame: a whole stack, not a stop */
	if (!s->r->bp || (s->r->bp & 7))
		return UW_DONE;
	/* counted apart from the tables' stops: code without frame pointers ends here */
	if (s->r->bp < s->r->sp || uw_read(s, s->r->bp, &fr, sizeof(fr)))
		return uw_stop(s, PP_CNT_UNWIND_STOP_FP);
	s->r->sp = s->r->bp + 16;
	s->r->bp = fr.next_fp;
	s->r->ip = fr.ret;
	s->r->exact = 0;
	s->cnt->v[PP_CNT_UNWIND_FP_FRAMES]++;
	return fr.ret ? UW_CONTINUE : UW_DONE;
}

/*
 * One frame: record the pc, then step to the caller with its table row or frame pointer.
 * fixed: the searches run all their steps (one path each), for the bounded loop, where the
 * verifier walks every frame's step; bpf_loop's step is verified once and ends them early.
 */
static __always_inline long uw_step_body(__u32 i, struct uw_state *s, const int fixed)
{
	struct pp_bpf_unwind_mapping *m;
	struct pp_bpf_unwind_rule *row;
	/*
	 * The frame's index is bpf_loop's i, not a count kept in *s: the verifier takes i as
	 * any value below the loop's bound, so the step's states converge; a count it would
	 * track exactly, one verification of the step per value.
	 */
	__u64 pc, rel, cfa, ra, bp, idx = (__u64)s->nk + i;

	if (i >= s->depth) {
		s->rec->flags |= PP_SF_USTACK_TRUNC;
		s->cnt->v[PP_CNT_USTACK_TRUNC]++;
		return UW_DONE;
	}
	if (idx >= 2 * PP_MAX_STACK_DEPTH)
		return UW_DONE;
	s->rec->stack[idx] = s->r->ip;
	s->rec->nr_ustack = (__u16)(i + 1);
	pc = s->r->exact ? s->r->ip : s->r->ip - 1;
	m = NULL;
	if (s->proc) {
		/* callers are mostly in the mapping of the frame before: look there first */
		__u32 idx = 0;

		m = uw_list_entry(s->proc, s->r->last_mapping);
		if (!m || !(m->start <= pc && pc < m->end)) {
			m = uw_mapping(s->proc, pc, fixed, &idx);
			if (m)
				s->r->last_mapping = idx;
		}
	}
	if (!m && s->proc && (s->proc->flags & PP_UW_PROC_ALL_MAPPINGS)) {
		/*
		 * Code outside a list of every executable mapping was mapped since it was
		 * written (ld.so loads a library before the collector has read of it). The copy
		 * goes with the sample, to be walked behind the list that has it; this walk goes
		 * on with frame pointers.
		 */
		if (s->keep_raw && s->r->win_len)
			s->rec->flags |= PP_SF_USTACK_RAW;
		s->cnt->v[PP_CNT_UNWIND_UNLISTED]++;
	}
	if (!m || !m->nr_pages) {
		if (shim_config.ustack_walk == PP_USTACK_DWARF)
			return uw_stop(s, PP_CNT_UNWIND_STOP_NO_CFI);
		return uw_fp_step(s);
	}
	rel = pc - m->base;
	row = uw_rule(m, rel);
	if (row && row->cfa_rule == PP_UW_CFA_DEFERRED) {
		/*
		 * Code of a partial table that no walk reached before: the copy of the stack goes
		 * with the sample, for the unwinder to walk once it found the rows (from then on
		 * they are here); this walk goes on as where no row is.
		 */
		if (s->keep_raw && s->r->win_len)
			s->rec->flags |= PP_SF_USTACK_RAW;
		s->cnt->v[PP_CNT_UNWIND_DEFERRED]++;
		row = NULL;
	}
	if (!row || row->cfa_rule == PP_UW_CFA_NONE) {
		/*
		 * Code the file's table does not cover (V8's builtins in node's .text, hand-written
		 * assembly): in auto, a frame-pointer step, as in a file without a table.
		 */
		if (shim_config.ustack_walk == PP_USTACK_DWARF)
			return uw_stop(s, PP_CNT_UNWIND_STOP_NO_CFI);
		return uw_fp_step(s);
	}
	switch (row->cfa_rule) {
	case PP_UW_CFA_RSP:
		cfa = s->r->sp + row->cfa_off;
		break;
	case PP_UW_CFA_RBP:
		cfa = s->r->bp + row->cfa_off;
		break;
	case PP_UW_CFA_PLT:
		cfa = s->r->sp + 8 + (((s->r->ip & 15) >= (__u64)row->cfa_off) ? 8 : 0);
		break;
	case PP_UW_CFA_DEREF_RSP:
		if (uw_read(s, s->r->sp + row->cfa_off, &cfa, sizeof(cfa)))
			return uw_stop(s, PP_CNT_UNWIND_STOP_UNREADABLE);
		break;
	default:
		return uw_stop(s, PP_CNT_UNWIND_STOP_UNSUPPORTED);
	}
	if (row->ra_rule == PP_UW_REG_UNDEFINED)
		return UW_DONE; /* the outermost frame (_start, thread starts) */
	if (row->ra_rule != PP_UW_REG_AT_CFA && row->ra_rule != PP_UW_REG_AT_RSP)
		return uw_stop(s, PP_CNT_UNWIND_STOP_UNSUPPORTED);
	bp = s->r->bp;
	if (row->ra_rule == PP_UW_REG_AT_CFA && row->rbp_rule == PP_UW_REG_AT_CFA &&
	    row->rbp_off == row->ra_off - 8) {
		/* the usual frame, rbp pushed below the return address: one read for both */
		struct frame_record fr;

		if (uw_read(s, cfa + row->rbp_off, &fr, sizeof(fr)))
			return uw_stop(s, PP_CNT_UNWIND_STOP_UNREADABLE);
		bp = fr.next_fp;
		ra = fr.ret;
	} else {
		if (uw_read_reg(s, row->ra_rule, row->ra_off, cfa, &ra))
			return uw_stop(s, PP_CNT_UNWIND_STOP_UNREADABLE);
		if (row->rbp_rule == PP_UW_REG_UNDEFINED)
			bp = 0;
		else if (row->rbp_rule != PP_UW_REG_SAME &&
			 uw_read_reg(s, row->rbp_rule, row->rbp_off, cfa, &bp))
			return uw_stop(s, PP_CNT_UNWIND_STOP_UNREADABLE);
	}
	if (cfa <= s->r->sp)
		return uw_stop(s, PP_CNT_UNWIND_STOP_NOT_UP);
	/* a wrong row (a table placed at the wrong address) lands far away: stop, never invent */
	if (cfa - s->r->sp > PP_UNWIND_MAX_FRAME_BYTES || ra >= UW_USER_END)
		return uw_stop(s, PP_CNT_UNWIND_STOP_IMPLAUSIBLE);
	s->r->exact = row->flags & PP_UW_SIGNAL_FRAME;
	s->r->ip = ra;
	s->r->sp = cfa;
	s->r->bp = bp;
	s->rec->flags |= PP_SF_USTACK_TABLES;
	s->cnt->v[PP_CNT_UNWIND_TABLE_FRAMES]++;
	return ra ? UW_CONTINUE : UW_DONE;
}

static long uw_step(__u32 i, void *data)
{
	return uw_step_body(i, data, 0);
}

/*
 * The user stack with unwind tables from the user registers regs (the sample's, or the task's
 * for a sample taken in the kernel): written after the nk kernel frames. The loop is
 * bpf_loop's, so the verifier checks one step, not PP_MAX_STACK_DEPTH of them. keep_raw: a
 * process without tables yet gets PP_SF_USTACK_RAW, its window kept for attach_raw_ustack.
 */
static __always_inline __u32 walk_user_tables(struct pp_sample *rec, __u32 nk, __u64 ip, __u64 sp,
					      __u64 bp, __u32 depth, struct pp_counters *cnt,
					      const int loop, const int keep_raw)
{
	struct uw_state s = {
	    .rec = rec,
	    .nk = nk,
	};
	__u32 tgid = rec->tgid, zero = 0;
	struct uw_regs *r = bpf_map_lookup_elem(&uw_regs_map, &zero);
	struct uw_window *win = bpf_map_lookup_elem(&uw_window_map, &zero);
	__u64 len;

	/* the per-CPU values always exist; the steps use them without a check */
	if (!cnt || !r || !win)
		return 0;
	len = UW_WINDOW - (sp & 4095);
	if (bpf_probe_read_user(win->b, len, (const void *)sp)) {
		len = 4096 - (sp & 4095);
		if (bpf_probe_read_user(win->b, len, (const void *)sp))
			len = 0;
	}
	r->win_base = sp;
	r->win_len = len;
	s.win = win;
	r->ip = ip;
	r->sp = sp;
	r->bp = bp;
	r->start_ip = ip;
	r->start_bp = bp;
	r->exact = 1;
	r->last_mapping = 0;
	s.r = r;
	s.cnt = cnt;
	s.depth = depth > PP_MAX_STACK_DEPTH ? PP_MAX_STACK_DEPTH : depth;
	s.keep_raw = keep_raw;
	s.proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	if (!s.proc) {
		cnt->v[PP_CNT_UNWIND_NO_PROC]++;
		if (keep_raw && len)
			rec->flags |= PP_SF_USTACK_RAW;
	}
	rec->nr_ustack = 0;
	if (loop) {
		/* before 5.17: a bounded loop the verifier walks step by step */
		for (__u32 i = 0; i < UW_LOOP_FRAMES; i++)
			if (uw_step_body(i, &s, 1))
				break;
	} else {
		bpf_loop(PP_MAX_STACK_DEPTH + 1, uw_step, &s, 0);
	}
	/* read back from the record, as after the frame-pointer walk: one state goes on */
	asm volatile("" ::: "memory");
	return rec->nr_ustack;
}

#define PP_X86_USER_CS 0x33

/* The user registers of task t as it entered the kernel: 0, or -1. */
static __always_inline int task_user_regs_of(struct task_struct *t, __u64 *ip, __u64 *sp, __u64 *bp)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	struct pt_regs r;

	if (!regs || bpf_probe_read_kernel(&r, sizeof(r), regs))
		return -1;
	if ((r.cs & 0xffff) != PP_X86_USER_CS) /* a kernel thread, or a compat task */
		return -1;
	*ip = PT_REGS_IP(&r);
	*sp = PT_REGS_SP(&r);
	*bp = PT_REGS_FP(&r);
	return 0;
#else
	return -1;
#endif
}

/* The user registers of the current task, for a sample taken in the kernel: 0, or -1. */
static __always_inline int task_user_regs(__u64 *ip, __u64 *sp, __u64 *bp)
{
	return task_user_regs_of(bpf_get_current_task_btf(), ip, sp, bp);
}

/*
 * The stack copy of a PP_SF_USTACK_RAW sample after its nk + nu frames: the registers the
 * walk started from, its window and the stack above it (struct pp_raw_ustack). The copy's
 * bytes, or 0 where the flag is not set or is taken back (nothing to copy).
 */
static __always_inline __u64 attach_raw_ustack(struct pp_sample *rec, __u64 nk, __u64 nu,
					       struct pp_counters *cnt)
{
	__u32 zero = 0;
	struct uw_regs *r = bpf_map_lookup_elem(&uw_regs_map, &zero);
	struct uw_window *win = bpf_map_lookup_elem(&uw_window_map, &zero);
	struct pp_raw_ustack *h;
	__u64 len, more = 0, whole;
	__u8 *above;

	if (!(rec->flags & PP_SF_USTACK_RAW))
		return 0;
	rec->flags &= ~PP_SF_USTACK_RAW;
	if (!r || !win || nk > PP_MAX_STACK_DEPTH || nu > PP_MAX_STACK_DEPTH)
		return 0;
	len = r->win_len;
	whole = len == UW_WINDOW - (r->win_base & 4095); /* the window reached its second page */
	if (len == 0 || len > UW_WINDOW)
		return 0;
	h = (struct pp_raw_ustack *)&rec->stack[nk + nu];
	h->ip = r->start_ip;
	h->sp = r->win_base;
	h->bp = r->start_bp;
	h->_pad = 0;
	if (bpf_probe_read_kernel(h + 1, len, win->b))
		return 0;
	/*
	 * The callers' frames above the window, where the stack goes on: a deep stack (a
	 * compiler's, an interpreter's) is walked further. Only the samples carrying a copy pay
	 * for these reads. len is checked again: 5.10's verifier may forget a bound across a call
	 * (write_record bounds what is returned).
	 */
	if (whole && len <= UW_WINDOW) {
		const __u8 *from = (const __u8 *)(r->win_base + len);

		above = (__u8 *)(h + 1) + len;
		if (!bpf_probe_read_user(above, UW_RAW_ABOVE, from)) {
			more = UW_RAW_ABOVE;
		} else {
			/* the stack's mapping ends sooner: its pages up to there, one at a time */
#pragma unroll
			for (int i = 0; i < UW_RAW_ABOVE / 4096 - 1; i++) {
				if (bpf_probe_read_user(above + i * 4096, 4096, from + i * 4096))
					break;
				more += 4096;
			}
		}
	}
	h->len = (__u32)(len + more);
	rec->flags |= PP_SF_USTACK_RAW;
	count_in(cnt, PP_CNT_USTACK_RAW);
	return sizeof(*h) + len + more;
}

/*
 * Writes rec to this CPU's ring, its size from its frame counts (nr_kstack, nr_ustack) and
 * the stack copy's bytes (raw), bounded after the last call before the write: 5.10's verifier
 * forgets the bounds of a scalar spilled across a call (seen: the size of a record held in a
 * map, checked, then spilled around the ring query). Counts full_counter or written_counter.
 * Batched wake-ups: the consumer also polls on a timeout, so nothing waits forever.
 */
static __always_inline void write_record(struct pp_sample *rec, struct pp_counters *cnt,
					 __u32 full_counter, __u32 written_counter, __u64 raw)
{
	void *ring = cpu_ring();
	__u64 nk, nu, size, flags;

	if (!ring) {
		count_in(cnt, full_counter);
		return;
	}
	flags = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >= shim_config.wakeup_bytes
		    ? BPF_RB_FORCE_WAKEUP
		    : BPF_RB_NO_WAKEUP;
	nk = rec->nr_kstack;
	nu = rec->nr_ustack;
	if (nk > PP_MAX_STACK_DEPTH || nu > PP_MAX_STACK_DEPTH ||
	    raw > sizeof(struct pp_raw_ustack) + PP_RAW_USTACK_MAX)
		return;
	size = sizeof(*rec) + (nk + nu) * sizeof(__u64) + raw;
	rec->hdr.size = size;
	if (bpf_ringbuf_output(ring, rec, size, flags)) {
		count_in(cnt, full_counter);
		return;
	}
	count_in(cnt, written_counter);
}

static __always_inline int handle_sample(struct bpf_perf_event_data *ctx, const int tables)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct pp_sample *rec;
	struct pp_counters *cnt = cpu_counters();
	__u32 zero = 0;
	__u64 nk, nu; /* 64-bit: a bound checked on a 32-bit copy would not hold for them */

	count_in(cnt, PP_CNT_SAMPLES);
	if (shim_config.filter_tgids && !bpf_map_lookup_elem(&target_tgids, &tgid)) {
		count_in(cnt, PP_CNT_FILTERED);
		return 0;
	}
	if (shim_config.filter_cgroups && !cgroup_selected()) {
		count_in(cnt, PP_CNT_CGROUP_FILTERED);
		return 0;
	}
	if (shim_config.ip_filter) {
		int in_kernel = (__s64)PT_REGS_IP(&ctx->regs) < 0;

		if (in_kernel == (shim_config.ip_filter == PP_IP_FILTER_USER_ONLY)) {
			count_in(cnt, PP_CNT_IP_FILTERED);
			return 0;
		}
	}
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec) {
		count_in(cnt, PP_CNT_SCRATCH_MISS);
		return 0;
	}

	rec->hdr.type = PP_REC_SAMPLE;
	rec->hdr.version = PP_RECORD_ABI_VERSION;
	rec->tgid = tgid;
	rec->tid = (__u32)pid_tgid;
	rec->time_ns = bpf_ktime_get_ns();
	rec->ip = PT_REGS_IP(&ctx->regs);
	rec->period = ctx->sample_period;
	rec->addr = 0;
	rec->data_src = 0;
	rec->weight = 0;
	rec->phys_addr = 0;
	rec->sample_flags = 0;
	rec->cpu = bpf_get_smp_processor_id();
	rec->event_cookie = shim_config.use_attach_cookie ? (__u32)bpf_get_attach_cookie(ctx) : 0;
	rec->flags = ((__s64)rec->ip < 0 ? PP_SF_KERNEL_IP : 0) | exact_ip_flag(ctx);
	rec->cgroup_id = sample_cgroup(&rec->flags);
	rec->_pad0 = 0;
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));

	if (shim_config.read_mem_fields)
		read_mem_fields(ctx, rec);

	/*
	 * With PERF_SAMPLE_CALLCHAIN requested these come from data->callchain (PMI registers).
	 * A sample taken in user mode has no kernel frames: skip the helper call.
	 */
	nk = 0;
	if (rec->flags & PP_SF_KERNEL_IP)
		nk = take_stack(ctx, rec->stack, shim_config.kstack_depth, 0, rec,
				PP_SF_KSTACK_TRUNC, PP_SF_KSTACK_ERR, cnt, PP_CNT_KSTACK_TRUNC,
				PP_CNT_KSTACK_ERR);
	if (nk > PP_MAX_STACK_DEPTH)
		nk = PP_MAX_STACK_DEPTH;
	/* a kernel-mode sample needs the task's user registers: bpf_task_pt_regs, 5.15+ */
	if (tables && shim_config.ustack_depth &&
	    ((rec->flags & PP_SF_KERNEL_IP) ? tables == 1 : sample_regs_walkable(ctx))) {
		__u64 ip = 0, sp = 0, bp = 0;
		int ok;

		if (tables == 1 && (rec->flags & PP_SF_KERNEL_IP)) {
			/* the registers the task entered the kernel with: whole, consistent */
			ok = task_user_regs(&ip, &sp, &bp) == 0;
		} else {
			ok = user_regs_walkable(ctx);
			ip = PT_REGS_IP(&ctx->regs);
			sp = PT_REGS_SP(&ctx->regs);
			bp = PT_REGS_FP(&ctx->regs);
		}
		nu = 0;
		if (ok) {
			count_in(cnt, PP_CNT_USTACK_SHIM);
			nu = walk_user_tables(rec, (__u32)nk, ip, sp, bp, shim_config.ustack_depth,
					      cnt, tables == 2, 1);
		}
	} else if (shim_config.ustack_walk == PP_USTACK_SHIM && !(rec->flags & PP_SF_KERNEL_IP) &&
		   user_regs_walkable(ctx) && !has_perf_callchain(ctx)) {
		walk_user_fp(ctx, rec->stack + nk, shim_config.ustack_depth, rec, cnt);
		/*
		 * Read back from the record, not carried in a register: the verifier tracks no
		 * value through map memory, so the walk's 127 ways out continue as one state
		 * instead of one verification of the rest of the program each.
		 */
		asm volatile("" ::: "memory");
		nu = rec->nr_ustack;
	} else {
		nu = take_stack(ctx, rec->stack + nk, shim_config.ustack_depth, BPF_F_USER_STACK,
				rec, PP_SF_USTACK_TRUNC, PP_SF_USTACK_ERR, cnt, PP_CNT_USTACK_TRUNC,
				PP_CNT_USTACK_ERR);
	}
	if (nu > PP_MAX_STACK_DEPTH)
		nu = PP_MAX_STACK_DEPTH;
	rec->nr_kstack = nk;
	rec->nr_ustack = nu;
	/* only the table walks take stack copies: the other variants verify none of it */
	write_record(rec, cnt, PP_CNT_RB_FULL, PP_CNT_EMITTED,
		     tables ? attach_raw_ustack(rec, nk, nu, cnt) : 0);
	return 0; /* 0: no perf output of its own, no perf mmap buffer needed */
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return handle_sample(ctx, 0);
}

/* PP_USTACK_AUTO and PP_USTACK_DWARF: user stacks with unwind tables (5.17+: bpf_loop). */
SEC("perf_event")
int on_sample_unwind(struct bpf_perf_event_data *ctx)
{
	return handle_sample(ctx, 1);
}

/* The same before 5.17, with a bounded loop of UW_LOOP_FRAMES frames. */
SEC("perf_event")
int on_sample_unwind_loop(struct bpf_perf_event_data *ctx)
{
	return handle_sample(ctx, 2);
}

/* ---- off-CPU: where threads wait (pp_shim_config.off_cpu_every) ---- */

#define PP_PF_EXITING 0x00000004 /* task_struct.flags: in do_exit */
#define PP_PF_KTHREAD 0x00200000 /* task_struct.flags: a kernel thread */
#define PP_TASK_INTERRUPTIBLE 0x1
#define PP_TASK_UNINTERRUPTIBLE 0x2
#define PP_TASK_STOPPED_OR_TRACED 0xc /* __TASK_STOPPED | __TASK_TRACED */
#define PP_TASK_DEAD 0x80

/*
 * A thread off its CPU: since when, in which state it left (PP_OFF_CPU_*), and when it was
 * woken: from then on it waited for a CPU, not for what it slept on.
 */
struct off_cpu_since {
	__u64 time_ns;
	__u64 wake_ns;	 /* 0: not woken (yet), or it never slept (preempted) */
	__u64 run_delay; /* the task's sched_info.run_delay as it left */
	__u32 state;
	__u16 wake_state; /* PP_OFF_CPU_RUNNABLE or _THROTTLED, as it was woken */
	__u16 held;	  /* its record, stacks and all, is held in off_cpu_records */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PP_OFF_CPU_MAX_WAITING);
	__type(key, __u32); /* thread id */
	__type(value, struct off_cpu_since);
} off_cpu_waiting SEC(".maps");

/* Whether a runnable task waits because its group ran out of CPU quota (throttled). */
static __always_inline __u32 runnable_state(struct task_struct *prev)
{
	struct cfs_rq *cfs_rq;

	if (!bpf_core_field_exists(prev->se.cfs_rq) ||
	    !bpf_core_field_exists(((struct cfs_rq *)0)->throttle_count))
		return PP_OFF_CPU_RUNNABLE;
	cfs_rq = BPF_CORE_READ(prev, se.cfs_rq);
	return cfs_rq && BPF_CORE_READ(cfs_rq, throttle_count) > 0 ? PP_OFF_CPU_THROTTLED
								   : PP_OFF_CPU_RUNNABLE;
}

static __always_inline __u32 off_cpu_state(struct task_struct *prev, int preempt)
{
	__u64 st;

	if (preempt)
		return runnable_state(prev);
	if (bpf_core_field_exists(prev->__state))
		st = BPF_CORE_READ(prev, __state);
	else
		st = BPF_CORE_READ((struct task_struct___pre514 *)prev, state);
	if (st & PP_TASK_DEAD)
		return PP_OFF_CPU_STATES; /* exiting: it never comes back */
	if (st & PP_TASK_UNINTERRUPTIBLE)
		return PP_OFF_CPU_DISK;
	if (st & PP_TASK_INTERRUPTIBLE)
		return PP_OFF_CPU_SLEEPING;
	if (st & PP_TASK_STOPPED_OR_TRACED)
		return PP_OFF_CPU_STOPPED;
	return runnable_state(prev);
}

/* The time task t has waited on run queues, summed as it got a CPU (CONFIG_SCHED_INFO); 0. */
static __always_inline __u64 run_delay_of(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->sched_info))
		return 0;
	return BPF_CORE_READ(t, sched_info.run_delay);
}

/*
 * When a wait of t that no traced switch ended did end: t ran again and is running now (it
 * leaves the CPU again, returns from a system call, or exits). As a task gets a CPU the kernel
 * adds the time it waited on the run queue to its run_delay: after its wakeup for a sleep, from
 * the preemption for a task that never slept. So the wait ended at the wakeup plus what
 * run_delay grew by since the task left (plus nothing where the kernel keeps no run_delay).
 * 0 where the end is not known: a sleep whose wakeup was not seen, a preemption without
 * run_delay.
 */
static __always_inline __u64 unseen_end_ns(struct task_struct *t, __u64 left_ns, __u64 wake_ns,
					   __u64 run_delay_then)
{
	__u64 grew = run_delay_of(t) - run_delay_then;

	if ((__s64)grew < 0 || grew > bpf_ktime_get_ns() - left_ns)
		grew = 0;
	if (wake_ns > left_ns)
		return wake_ns + grew;
	return grew ? left_ns + grew : 0;
}

/*
 * Where unseen_end_ns knows nothing (seen: a sleep whose wakeup and run-queue wait the kernel
 * never reported, about 1 in 100,000 waits on the development VM): t is running now, and has
 * run for what its sum_exec_runtime grew by since it left, at least; so it came back at most
 * that long before now. Exact at a switch (the scheduler has just brought the sum up to
 * date); elsewhere it counts up to the last tick, and the wait may read up to a tick long.
 */
static __always_inline __u64 running_since_ns(struct task_struct *t, __u64 left_ns,
					      __u64 runtime_then)
{
	__u64 now = bpf_ktime_get_ns(), ran = BPF_CORE_READ(t, se.sum_exec_runtime) - runtime_then;

	if ((__s64)ran < 0 || ran >= now - left_ns)
		return 0;
	return now - ran;
}

/*
 * The state prev leaves the CPU in where its wait is noted: a user thread, 1 in off_cpu_every,
 * passing the filters (prev is current); PP_OFF_CPU_STATES where it is not.
 */
static __always_inline __u32 off_cpu_noted_state(struct task_struct *prev, int preempt)
{
	__u32 tgid = prev->tgid;

	if (!prev->pid || (prev->flags & PP_PF_KTHREAD))
		return PP_OFF_CPU_STATES;
	if (shim_config.off_cpu_every > 1 && bpf_get_prandom_u32() % shim_config.off_cpu_every)
		return PP_OFF_CPU_STATES;
	if (shim_config.filter_tgids && !bpf_map_lookup_elem(&target_tgids, &tgid))
		return PP_OFF_CPU_STATES;
	if (shim_config.filter_cgroups && !cgroup_selected())
		return PP_OFF_CPU_STATES;
	return off_cpu_state(prev, preempt);
}

/* Stacks taken at the switch: the record of each waiting thread, taken as it left. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PP_OFF_CPU_HELD_RECORDS); /* 1 where the kprobe takes them all */
	__type(key, __u32);			      /* thread id */
	__type(value, __u8[PP_SAMPLE_MAX_SIZE]);
} off_cpu_records SEC(".maps");

/* The fields every off-CPU record of tgid/tid sets alike; comm and stacks are the caller's. */
static __always_inline void off_cpu_header(struct pp_sample *rec, __u32 tgid, __u32 tid,
					   __u64 cgroup_id)
{
	rec->hdr.type = PP_REC_SAMPLE;
	rec->hdr.version = PP_RECORD_ABI_VERSION;
	rec->tgid = tgid;
	rec->tid = tid;
	rec->cgroup_id = cgroup_id;
	rec->addr = 0;
	rec->data_src = 0;
	rec->phys_addr = 0;
	rec->sample_flags = 0;
	rec->event_cookie = 0;
	rec->flags = PP_SF_OFF_CPU | PP_SF_KERNEL_IP;
	rec->_pad0 = 0;
}

/*
 * A pp_sample of the current task in scratch, its stacks taken from ctx (a kprobe's registers
 * or a tracepoint's): the kernel stack less its first kskip frames, and the user stack where
 * it entered the kernel, with tables where `tables` says (bpf_loop, bpf_task_pt_regs) or by
 * the kernel's walker.
 */
static __always_inline struct pp_sample *off_cpu_record_of(void *ctx, struct pp_counters *cnt,
							   const int tables, const __u64 kskip,
							   const int kernel)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	struct pp_sample *rec = bpf_map_lookup_elem(&scratch, &zero);
	__u64 nk, nu;

	if (!rec) {
		count_in(cnt, PP_CNT_SCRATCH_MISS);
		return NULL;
	}
	off_cpu_header(rec, pid_tgid >> 32, (__u32)pid_tgid, bpf_get_current_cgroup_id());
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));

	nk = !kernel ? 0
		     : take_stack(ctx, rec->stack, shim_config.kstack_depth,
				  kskip & BPF_F_SKIP_FIELD_MASK, rec, PP_SF_KSTACK_TRUNC,
				  PP_SF_KSTACK_ERR, cnt, PP_CNT_KSTACK_TRUNC, PP_CNT_KSTACK_ERR);
	if (nk > PP_MAX_STACK_DEPTH)
		nk = PP_MAX_STACK_DEPTH;
	rec->ip = nk ? rec->stack[0] : 0;
	if (tables && shim_config.ustack_depth) {
		__u64 ip = 0, sp = 0, bp = 0;

		nu = 0;
		if (task_user_regs(&ip, &sp, &bp) == 0) {
			count_in(cnt, PP_CNT_USTACK_SHIM);
			nu = walk_user_tables(rec, (__u32)nk, ip, sp, bp, shim_config.ustack_depth,
					      cnt, 0, 0);
		}
	} else {
		nu = take_stack(ctx, rec->stack + nk, shim_config.ustack_depth, BPF_F_USER_STACK,
				rec, PP_SF_USTACK_TRUNC, PP_SF_USTACK_ERR, cnt, PP_CNT_USTACK_TRUNC,
				PP_CNT_USTACK_ERR);
	}
	if (nu > PP_MAX_STACK_DEPTH)
		nu = PP_MAX_STACK_DEPTH;
	rec->nr_kstack = nk;
	rec->nr_ustack = nu;
	return rec;
}

static __always_inline struct pp_sample *off_cpu_record(void *ctx, struct pp_counters *cnt,
							const int tables, const __u64 kskip)
{
	return off_cpu_record_of(ctx, cnt, tables, kskip, 1);
}

/*
 * The part of a wait from left_ns to end_ns after its wakeup at wake_ns (the wait for a CPU,
 * shown apart: perf sched's "sch delay"), where it is at least the threshold; else 0.
 */
static __always_inline __u64 woken_delay_ns(__u64 left_ns, __u64 wake_ns, __u64 end_ns)
{
	__u64 delay = wake_ns > left_ns && wake_ns < end_ns ? end_ns - wake_ns : 0;

	return delay >= shim_config.off_cpu_min_ns ? delay : 0;
}

/* How a wait ends: its state, and the part after the wakeup shown apart (sch delay). */
struct off_cpu_end_info {
	__u32 state;
	__u32 delay_state;
	__u64 delay_ns; /* 0: not woken, or woken less than off_cpu_min_ns ago */
	__u32 held;	/* its record is in off_cpu_records */
};

/*
 * The wait of thread tid ends now: how long it was (0 when it was not noted, or too short to
 * record, both forgotten here), the state it waited in, and how long of that it waited for a
 * CPU after it was woken, where that is at least the threshold too. held_only: only a wait
 * whose record is held ends here (the switch tracepoint, where a probe ends the others).
 */
static __always_inline __u64 off_cpu_end(__u32 tid, __u64 now, struct off_cpu_end_info *end,
					 struct pp_counters *cnt, int held_only)
{
	struct off_cpu_since *since = bpf_map_lookup_elem(&off_cpu_waiting, &tid);
	__u64 off_ns, wake_ns;

	if (!since || (held_only && !since->held))
		return 0;
	off_ns = now - since->time_ns;
	wake_ns = since->wake_ns;
	end->state = since->state;
	end->delay_state = since->wake_state;
	end->delay_ns = woken_delay_ns(since->time_ns, wake_ns, now);
	end->held = since->held;
	bpf_map_delete_elem(&off_cpu_waiting, &tid);
	if (off_ns < shim_config.off_cpu_min_ns || (__s64)off_ns <= 0) {
		count_in(cnt, PP_CNT_OFF_CPU_SHORT);
		if (end->held)
			bpf_map_delete_elem(&off_cpu_records, &tid);
		return 0;
	}
	return off_ns;
}

static __always_inline void off_cpu_value(struct pp_sample *rec, __u64 now, __u64 off_ns,
					  const struct off_cpu_end_info *end)
{
	__u64 every = shim_config.off_cpu_every ? shim_config.off_cpu_every : 1;

	rec->time_ns = now;
	rec->period = (off_ns - end->delay_ns) * every;
	rec->weight = end->state;
	rec->addr = end->delay_ns * every;
	rec->data_src = end->delay_ns ? end->delay_state : 0;
	rec->cpu = bpf_get_smp_processor_id();
}

/*
 * A noted wait of task t (current) whose end was not traced (the thread ran again, and now
 * leaves the CPU again or exits): forgotten, and where its stacks are held and its end is
 * known (unseen_end_ns), recorded as ending there.
 */
static __always_inline void off_cpu_unseen_end(struct task_struct *t, __u32 tid,
					       const struct off_cpu_since *old,
					       struct pp_counters *cnt)
{
	struct off_cpu_end_info end = {.state = old->state, .delay_state = old->wake_state};
	__u64 end_ns = unseen_end_ns(t, old->time_ns, old->wake_ns, old->run_delay);
	__u64 off_ns = end_ns - old->time_ns;
	struct pp_sample *rec;

	if (!old->held || end_ns <= old->time_ns) {
		if (old->held)
			bpf_map_delete_elem(&off_cpu_records, &tid);
		count_in(cnt, PP_CNT_OFF_CPU_UNSEEN_END);
		return;
	}
	count_in(cnt, PP_CNT_OFF_CPU_ENDED_AT_WAKEUP);
	if (off_ns < shim_config.off_cpu_min_ns) {
		bpf_map_delete_elem(&off_cpu_records, &tid);
		count_in(cnt, PP_CNT_OFF_CPU_SHORT);
		return;
	}
	rec = bpf_map_lookup_elem(&off_cpu_records, &tid);
	if (!rec) {
		count_in(cnt, PP_CNT_OFF_CPU_EVICTED);
		return;
	}
	end.delay_ns = woken_delay_ns(old->time_ns, old->wake_ns, end_ns);
	off_cpu_value(rec, end_ns, off_ns, &end);
	rec->flags |= PP_SF_OFF_CPU_END_ESTIMATED;
	write_record(rec, cnt, PP_CNT_OFF_CPU_RB_FULL, PP_CNT_OFF_CPU_EMITTED, 0);
	bpf_map_delete_elem(&off_cpu_records, &tid);
}

/*
 * Runs as prev leaves the CPU, in its context (current is still prev): notes when and how it
 * left, for 1 in off_cpu_every user threads that pass the filters. Where a probe takes the
 * stacks as the task resumes, nothing more: only waits long enough to record cost a walk.
 * Where none will run for this switch (PP_OFF_CPU_AT_*), the record is taken here and held,
 * and such a held wait of next's ends here too.
 */
static __always_inline int handle_switch(void *ctx, int preempt, struct task_struct *prev,
					 struct task_struct *next, const int tables)
{
	struct off_cpu_since since, *old;
	__u32 tid = prev->pid, at = shim_config.off_cpu_stacks_at;
	struct pp_counters *cnt = cpu_counters();
	struct pp_sample *rec;
	long err;

	if (!shim_config.off_cpu_every)
		return 0;
	if (at != PP_OFF_CPU_AT_RESUME) {
		struct off_cpu_end_info end = {};
		__u32 next_tid = next->pid;
		__u64 now = bpf_ktime_get_ns(), off_ns = off_cpu_end(next_tid, now, &end, cnt, 1);

		if (off_ns) {
			rec = bpf_map_lookup_elem(&off_cpu_records, &next_tid);
			if (rec) {
				off_cpu_value(rec, now, off_ns, &end);
				write_record(rec, cnt, PP_CNT_OFF_CPU_RB_FULL,
					     PP_CNT_OFF_CPU_EMITTED, 0);
				bpf_map_delete_elem(&off_cpu_records, &next_tid);
			} else {
				count_in(cnt, PP_CNT_OFF_CPU_EVICTED);
			}
		}
	}
	since.state = off_cpu_noted_state(prev, preempt);
	if (since.state >= PP_OFF_CPU_STATES)
		return 0;
	/* a note still there: the thread came back to a CPU through a switch no one traced;
	 * ended before its held record is taken over by this wait's */
	old = bpf_map_lookup_elem(&off_cpu_waiting, &tid);
	if (old) {
		off_cpu_unseen_end(prev, tid, old, cnt);
		bpf_map_delete_elem(&off_cpu_waiting, &tid);
	}
	/* schedule() calls the scheduler without preempt; preemption does not return there */
	since.held = at == PP_OFF_CPU_AT_SWITCH || (at == PP_OFF_CPU_AT_SCHEDULE_RETURN && preempt);
	if (since.held) {
		rec = off_cpu_record(ctx, cnt, tables, 0);
		if (!rec || bpf_map_update_elem(&off_cpu_records, &tid, rec, BPF_ANY)) {
			count_in(cnt, PP_CNT_OFF_CPU_NOT_NOTED);
			return 0;
		}
	}
	since.time_ns = bpf_ktime_get_ns();
	since.run_delay = run_delay_of(prev);
	since.wake_ns = 0;
	since.wake_state = 0;
	/* a note made meanwhile (a race with the lookup above): not recorded */
	err = bpf_map_update_elem(&off_cpu_waiting, &tid, &since, BPF_NOEXIST);
	/*
	 * Compared in 32 bits: before 6.4 the JIT calls the map's update directly, and its int
	 * comes back with the upper half of the register zero (-EEXIST reads 0xffffffef).
	 */
	if ((int)err == -EEXIST) {
		count_in(cnt, PP_CNT_OFF_CPU_UNSEEN_END);
		err = bpf_map_update_elem(&off_cpu_waiting, &tid, &since, BPF_ANY);
	}
	count_in(cnt, err ? PP_CNT_OFF_CPU_NOT_NOTED : PP_CNT_OFF_CPU_NOTED);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, int preempt, struct task_struct *prev, struct task_struct *next)
{
	return handle_switch(ctx, preempt, prev, next, 0);
}

/* Stacks at the switch, user stacks with unwind tables (5.17+: bpf_loop; bpf_task_pt_regs). */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_unwind, int preempt, struct task_struct *prev, struct task_struct *next)
{
	return handle_switch(ctx, preempt, prev, next, 1);
}

/*
 * Runs as a task resumes (a kprobe on the scheduler's finish_task_switch, which the loader
 * finds by name: compilers rename it finish_task_switch.isra.0; or fexit on schedule()), in
 * its context: a noted wait of at least off_cpu_min_ns becomes a record whose stacks are the
 * ones it waited in.
 */
static __always_inline int handle_switch_in(void *ctx, const int tables, const __u64 kskip)
{
	struct pp_counters *cnt = cpu_counters();
	struct off_cpu_end_info end = {};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), off_ns = off_cpu_end(tid, now, &end, cnt, 0);
	struct pp_sample *rec;

	if (!off_ns)
		return 0;
	/* a held wait ends at the switch that brings its task back, before it runs this */
	if (end.held)
		bpf_map_delete_elem(&off_cpu_records, &tid);
	rec = off_cpu_record(ctx, cnt, tables, kskip);
	if (!rec)
		return 0;
	off_cpu_value(rec, now, off_ns, &end);
	write_record(rec, cnt, PP_CNT_OFF_CPU_RB_FULL, PP_CNT_OFF_CPU_EMITTED, 0);
	return 0;
}

SEC("kprobe")
int on_switch_in(struct pt_regs *ctx)
{
	return handle_switch_in(ctx, 0, 0);
}

/* User stacks with unwind tables (5.17+: bpf_loop; bpf_task_pt_regs). */
SEC("kprobe")
int on_switch_in_unwind(struct pt_regs *ctx)
{
	return handle_switch_in(ctx, 1, 0);
}

/*
 * Where the kernel has no kprobes but BPF trampolines: as schedule() returns to the task that
 * called it (PP_OFF_CPU_AT_SCHEDULE_RETURN). The kernel stack's first frames, this program and
 * the trampoline (bpf_trampoline_<id>, unnamed before 5.12), are left out: it starts at
 * schedule, called by what waited.
 */
#define PP_FEXIT_FRAMES 2

SEC("fexit/schedule")
int BPF_PROG(on_schedule_return)
{
	return handle_switch_in(ctx, 0, PP_FEXIT_FRAMES);
}

SEC("fexit/schedule")
int BPF_PROG(on_schedule_return_unwind)
{
	return handle_switch_in(ctx, 1, PP_FEXIT_FRAMES);
}

/*
 * A thread is woken: if its wait is noted, from now on it waits for a CPU (the scheduler's
 * delay, which a busy machine or a CPU quota makes long), not for what it slept on. The first
 * wakeup of a wait counts; a woken thread may be woken again before it runs.
 */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	__u32 tid = p->pid;
	struct off_cpu_since *since = bpf_map_lookup_elem(&off_cpu_waiting, &tid);

	if (since && !since->wake_ns) {
		since->wake_state = runnable_state(p);
		since->wake_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/*
 * PP_OFF_CPU_AT_USER_RETURN (record.h): a wait noted in the task's own storage; its stacks
 * taken as it comes back (kernel) and on its way back to user mode (user), or, for a task
 * without restartable sequences, the user one as it leaves.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pp_off_cpu_task);
} off_cpu_tasks SEC(".maps");

#define PP_X86_SYSCALL_INSN_LEN 2 /* 0f 05 */

/*
 * Whether t registered restartable sequences (glibc does for every thread from 2.35): then
 * every switch away from the CPU marks it, and the kernel updates its rseq area, with the
 * rseq_update tracepoint, in its context on its way back to user mode, before any user
 * instruction: where its user stack is still the one it waited in.
 */
static __always_inline int task_has_rseq(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->rseq))
		return 0;
	return BPF_CORE_READ(t, rseq) != NULL;
}

/*
 * The record in scratch of t's wait, which ends now at a traced switch back to it: its kernel
 * stack as it waited (t is not running: the kernel walks its saved stack), then the user
 * frames held (taken as it left), if any. NULL where scratch is missing.
 */
static __always_inline struct pp_sample *
off_cpu_resumed_record(struct task_struct *t, const struct pp_sample *held, struct pp_counters *cnt)
{
	__u32 zero = 0, tid = t->pid;
	struct pp_sample *rec = bpf_map_lookup_elem(&scratch, &zero);
	__u32 depth = shim_config.kstack_depth;
	__u64 nu = 0;
	long n = 0;

	if (!rec) {
		count_in(cnt, PP_CNT_SCRATCH_MISS);
		return NULL;
	}
	off_cpu_header(rec, t->tgid, tid, BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id));
	bpf_probe_read_kernel(rec->comm, sizeof(rec->comm), t->comm);
	if (depth > PP_MAX_STACK_DEPTH)
		depth = PP_MAX_STACK_DEPTH;
	if (depth) {
		n = bpf_get_task_stack(t, rec->stack, depth * sizeof(__u64), 0);
		if (n < 0) {
			rec->flags |= PP_SF_KSTACK_ERR;
			count_in(cnt, PP_CNT_KSTACK_ERR);
			n = 0;
		}
		n /= sizeof(__u64);
		if (n >= depth) {
			rec->flags |= PP_SF_KSTACK_TRUNC;
			count_in(cnt, PP_CNT_KSTACK_TRUNC);
		}
	}
	if (n > PP_MAX_STACK_DEPTH)
		n = PP_MAX_STACK_DEPTH;
	rec->nr_kstack = n;
	rec->ip = n ? rec->stack[0] : 0;
	if (held) {
		nu = held->nr_ustack;
		if (nu > PP_MAX_STACK_DEPTH)
			nu = 0;
		rec->flags |= held->flags & ~(PP_SF_KSTACK_TRUNC | PP_SF_KSTACK_ERR);
		/* masked too: the compiler may test a copy of the bound the verifier never sees */
		if (nu && bpf_probe_read_kernel(&rec->stack[n & PP_MAX_STACK_DEPTH],
						(nu * sizeof(__u64)) & 1023, held->stack))
			nu = 0;
	}
	rec->nr_ustack = nu;
	return rec;
}

/*
 * Whether a wait of off_ns that ended at end_ns is long enough to record: if so, its part
 * after the wakeup (the wait for a CPU) where that is long enough too; if not, counted short
 * and its held record dropped.
 */
static __always_inline int off_cpu_task_recorded(const struct pp_off_cpu_task *w, __u32 tid,
						 __u64 end_ns, __u64 off_ns,
						 struct off_cpu_end_info *end,
						 struct pp_counters *cnt)
{
	if ((__s64)off_ns < (__s64)shim_config.off_cpu_min_ns || (__s64)off_ns <= 0) {
		count_in(cnt, PP_CNT_OFF_CPU_SHORT);
		if (w->held)
			bpf_map_delete_elem(&off_cpu_records, &tid);
		return 0;
	}
	end->delay_ns = woken_delay_ns(w->time_ns, w->wake_ns, end_ns);
	return 1;
}

/* The wait of t (not running) ends at now, at a traced switch back to it. */
static __always_inline void off_cpu_task_ends(struct task_struct *t, struct pp_off_cpu_task *w,
					      __u64 now, struct pp_counters *cnt)
{
	struct off_cpu_end_info end = {.state = w->state, .delay_state = w->wake_state};
	__u64 off_ns = now - w->time_ns;
	__u32 tid = t->pid;
	struct pp_sample *rec, *held;

	w->phase = PP_OC_IDLE;
	if (!off_cpu_task_recorded(w, tid, now, off_ns, &end, cnt))
		return;
	if (!w->held) {
		/* its user stack on its way back to user mode */
		rec = off_cpu_resumed_record(t, NULL, cnt);
		if (!rec)
			return;
		off_cpu_value(rec, now, off_ns, &end);
		if (bpf_map_update_elem(&off_cpu_records, &tid, rec, BPF_ANY)) {
			count_in(cnt, PP_CNT_OFF_CPU_EVICTED);
			return;
		}
		w->phase = PP_OC_PENDING;
		return;
	}
	held = bpf_map_lookup_elem(&off_cpu_records, &tid);
	if (!held) {
		count_in(cnt, PP_CNT_OFF_CPU_EVICTED);
		return;
	}
	rec = off_cpu_resumed_record(t, held, cnt);
	bpf_map_delete_elem(&off_cpu_records, &tid);
	if (!rec)
		return;
	off_cpu_value(rec, now, off_ns, &end);
	write_record(rec, cnt, PP_CNT_OFF_CPU_RB_FULL, PP_CNT_OFF_CPU_EMITTED, 0);
}

/*
 * The current task t, running, still has a wait noted: finished here. A pending one (its end
 * traced) gets its user stack where its user registers are the ones it left with; one whose
 * end no switch showed ended at unseen_end_ns, and is recorded from what it holds: its user
 * stack where it was held, else as above, and no kernel stack (the one it waited in is gone).
 */
static __always_inline void off_cpu_task_finish(void *ctx, struct task_struct *t,
						struct pp_off_cpu_task *w, struct pp_counters *cnt)
{
	struct off_cpu_end_info end = {.state = w->state, .delay_state = w->wake_state};
	__u32 zero = 0, tid = t->pid;
	__u64 ip = 0, sp = 0, bp = 0, end_ns, off_ns, nk = 0, nu = 0;
	struct pp_sample *rec, *held;
	int same_call;

	/*
	 * still on its way back from where it waited: it has not run a user instruction since
	 * (rseq_update would have finished the wait), so its user registers are unchanged (a
	 * signal's frame is set up after rseq_update), but for a system call the kernel will
	 * restart after a signal handler: its ip moved back onto the 2-byte syscall instruction,
	 * in the same frame. An exec or a debugger moves them.
	 */
	same_call = task_user_regs_of(t, &ip, &sp, &bp) == 0 && sp == w->sp &&
		    (ip == w->ip || ip + PP_X86_SYSCALL_INSN_LEN == w->ip);
	if (w->phase == PP_OC_WAITING) {
		end_ns = unseen_end_ns(t, w->time_ns, w->wake_ns, w->run_delay);
		if (end_ns <= w->time_ns)
			end_ns = running_since_ns(t, w->time_ns, w->runtime);
		off_ns = end_ns - w->time_ns;
		w->phase = PP_OC_IDLE;
		if (end_ns <= w->time_ns) {
			count_in(cnt, PP_CNT_OFF_CPU_UNSEEN_END);
			if (w->held)
				bpf_map_delete_elem(&off_cpu_records, &tid);
			return;
		}
		count_in(cnt, PP_CNT_OFF_CPU_ENDED_AT_WAKEUP);
		if (!off_cpu_task_recorded(w, tid, end_ns, off_ns, &end, cnt))
			return;
		if (w->held) {
			held = bpf_map_lookup_elem(&off_cpu_records, &tid);
			if (!held) {
				count_in(cnt, PP_CNT_OFF_CPU_EVICTED);
				return;
			}
			/* its kernel stack was to be taken as it came back */
			held->flags |= PP_SF_KSTACK_ERR | PP_SF_OFF_CPU_END_ESTIMATED;
			count_in(cnt, PP_CNT_KSTACK_ERR);
			off_cpu_value(held, end_ns, off_ns, &end);
			write_record(held, cnt, PP_CNT_OFF_CPU_RB_FULL, PP_CNT_OFF_CPU_EMITTED, 0);
			bpf_map_delete_elem(&off_cpu_records, &tid);
			return;
		}
		/* the kernel stack is this moment's: left out; the user one where it is the same */
		rec = off_cpu_record_of(ctx, cnt, 1, 0, 0);
		if (!rec)
			return;
		rec->flags |= PP_SF_KSTACK_ERR | PP_SF_OFF_CPU_END_ESTIMATED;
		count_in(cnt, PP_CNT_KSTACK_ERR);
		if (!same_call) {
			rec->nr_ustack = 0;
			rec->flags |= PP_SF_USTACK_ERR;
			count_in(cnt, PP_CNT_USTACK_ERR);
		}
		rec->ip = 0;
		rec->flags &= ~PP_SF_KERNEL_IP;
		off_cpu_value(rec, end_ns, off_ns, &end);
		write_record(rec, cnt, PP_CNT_OFF_CPU_RB_FULL, PP_CNT_OFF_CPU_EMITTED, 0);
		return;
	}
	w->phase = PP_OC_IDLE;
	held = bpf_map_lookup_elem(&off_cpu_records, &tid);
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!held) {
		count_in(cnt, PP_CNT_OFF_CPU_EVICTED);
		return;
	}
	if (!rec) {
		count_in(cnt, PP_CNT_SCRATCH_MISS);
		bpf_map_delete_elem(&off_cpu_records, &tid);
		return;
	}
	bpf_probe_read_kernel(rec, PP_SAMPLE_MAX_SIZE, held);
	bpf_map_delete_elem(&off_cpu_records, &tid);
	nk = rec->nr_kstack;
	if (nk > PP_MAX_STACK_DEPTH)
		return;
	if (!same_call) {
		rec->flags |= PP_SF_USTACK_ERR;
		count_in(cnt, PP_CNT_USTACK_ERR);
	} else if (shim_config.ustack_depth) {
		__u64 uip = 0, usp = 0, ubp = 0;

		if (task_user_regs(&uip, &usp, &ubp) == 0) {
			count_in(cnt, PP_CNT_USTACK_SHIM);
			nu = walk_user_tables(rec, (__u32)nk, uip, usp, ubp,
					      shim_config.ustack_depth, cnt, 0, 0);
		}
	}
	if (nu > PP_MAX_STACK_DEPTH)
		nu = PP_MAX_STACK_DEPTH;
	rec->nr_ustack = nu;
	write_record(rec, cnt, PP_CNT_OFF_CPU_RB_FULL, PP_CNT_OFF_CPU_EMITTED, 0);
}

/*
 * The switch tracepoint of PP_OFF_CPU_AT_USER_RETURN: next's noted wait ends; prev's is
 * noted, with its user stack only where no rseq_update will come before its next user
 * instruction.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_deferred, int preempt, struct task_struct *prev, struct task_struct *next)
{
	struct pp_counters *cnt = cpu_counters();
	__u32 tid = prev->pid, state;
	__u64 now = bpf_ktime_get_ns(), ip = 0, sp = 0, bp = 0;
	struct pp_off_cpu_task *w;
	struct pp_sample *rec;
	int deferred;

	if (!shim_config.off_cpu_every)
		return 0;
	w = bpf_task_storage_get(&off_cpu_tasks, next, 0, 0);
	if (w && w->phase == PP_OC_WAITING)
		off_cpu_task_ends(next, w, now, cnt);
	state = off_cpu_noted_state(prev, preempt);
	if (state >= PP_OFF_CPU_STATES)
		return 0;
	w = bpf_task_storage_get(&off_cpu_tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w) {
		count_in(cnt, PP_CNT_OFF_CPU_NOT_NOTED);
		return 0;
	}
	/* a wait still noted: its thread came back unseen, or has not reached user mode since */
	if (w->phase != PP_OC_IDLE)
		off_cpu_task_finish(ctx, prev, w, cnt);
	/*
	 * not on the state: a branch on it makes the verifier walk what follows once for each
	 * state (ten times the load time); a stopped task's debugger that moves its registers
	 * costs the record its user stack, and it says so. A thread in its exit never returns to
	 * user mode (past sched_process_exit nothing would finish a deferred wait): held.
	 */
	deferred = task_user_regs_of(prev, &ip, &sp, &bp) == 0 && task_has_rseq(prev) &&
		   !(prev->flags & PP_PF_EXITING);
	w->held = !deferred;
	if (w->held) {
		/* its user stack now; the kernel one as it comes back, if that is long enough */
		rec = off_cpu_record_of(ctx, cnt, 1, 0, 0);
		if (!rec || bpf_map_update_elem(&off_cpu_records, &tid, rec, BPF_ANY)) {
			count_in(cnt, PP_CNT_OFF_CPU_NOT_NOTED);
			return 0;
		}
	}
	w->time_ns = now;
	w->wake_ns = 0;
	w->wake_state = 0;
	w->run_delay = run_delay_of(prev);
	w->runtime = BPF_CORE_READ(prev, se.sum_exec_runtime);
	w->ip = ip;
	w->sp = sp;
	w->state = state;
	w->phase = PP_OC_WAITING;
	count_in(cnt, PP_CNT_OFF_CPU_NOTED);
	return 0;
}

/* t, the current task, runs: a wait it still has noted is finished. */
static __always_inline int off_cpu_task_runs(void *ctx, struct task_struct *t)
{
	struct pp_off_cpu_task *w = bpf_task_storage_get(&off_cpu_tasks, t, 0, 0);

	if (w && w->phase != PP_OC_IDLE)
		off_cpu_task_finish(ctx, t, w, cpu_counters());
	return 0;
}

/* A task with restartable sequences returns to user mode after a switch: in its context. */
SEC("tp_btf/rseq_update")
int BPF_PROG(on_rseq_update_deferred, struct task_struct *t)
{
	return off_cpu_task_runs(ctx, t);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup_deferred, struct task_struct *p)
{
	struct pp_off_cpu_task *w = bpf_task_storage_get(&off_cpu_tasks, p, 0, 0);

	if (w && w->phase == PP_OC_WAITING && !w->wake_ns) {
		w->wake_state = runnable_state(p);
		w->wake_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* A thread exits with a wait noted (running: its end was not traced, or it is pending). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit_deferred, struct task_struct *task)
{
	return off_cpu_task_runs(ctx, task);
}

/* Keeps the tgid filter following `record -- CMD` and `-p PID` into their child processes. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = parent->tgid;
	__u32 child_tgid = child->tgid;
	__u8 one = 1;

	if (!shim_config.filter_tgids || parent_tgid == child_tgid)
		return 0;
	if (!bpf_map_lookup_elem(&target_tgids, &parent_tgid))
		return 0;
	if (bpf_map_update_elem(&target_tgids, &child_tgid, &one, BPF_ANY))
		count(PP_CNT_FILTER_FULL);
	else
		count(PP_CNT_FORK_TRACKED);
	return 0;
}

static __always_inline void emit_task_event(__u32 tgid, __u32 kind)
{
	struct pp_task_event ev = {
	    .hdr = {.type = PP_REC_TASK, .version = PP_RECORD_ABI_VERSION, .size = sizeof(ev)},
	    .tgid = tgid,
	    .kind = kind,
	    .time_ns = bpf_ktime_get_ns(),
	};
	void *ring;

	if (shim_config.filter_tgids && !bpf_map_lookup_elem(&target_tgids, &tgid))
		return;
	ring = cpu_ring();
	if (!ring || bpf_ringbuf_output(ring, &ev, sizeof(ev), BPF_RB_NO_WAKEUP))
		count(PP_CNT_TASK_RB_FULL);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task)
{
	__u32 tgid = task->tgid;

	/*
	 * The process's list of mappings is the old image's (or, in a forked child, its
	 * parent's) until the collector writes the new one: its samples carry stack copies
	 * meanwhile, where the old list would send the new image's walks through tables at the
	 * wrong addresses or frame pointers its code does not keep.
	 */
	bpf_map_delete_elem(&unwind_procs, &tgid);
	emit_task_event(tgid, PP_TASK_EXEC);
	return 0;
}

/* Fires per thread; only the thread-group leader's exit ends the process. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	__u32 tid = task->pid, tgid = task->tgid;
	struct off_cpu_since *old;

	/* an exiting thread is running: a wait still noted ended where no switch was seen */
	if (shim_config.off_cpu_every && (old = bpf_map_lookup_elem(&off_cpu_waiting, &tid))) {
		off_cpu_unseen_end(task, tid, old, cpu_counters());
		bpf_map_delete_elem(&off_cpu_waiting, &tid);
	}
	if (tid != tgid)
		return 0;
	emit_task_event(tgid, PP_TASK_EXIT);
	/* The pid may be reused by an unrelated process. */
	if (shim_config.filter_tgids)
		bpf_map_delete_elem(&target_tgids, &tgid);
	return 0;
}
