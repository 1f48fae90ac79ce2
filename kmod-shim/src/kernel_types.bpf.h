/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The few kernel-internal types the shim reads, declared CO-RE relocatable instead of a
 * multi-megabyte vmlinux.h: libbpf matches them by name and field name against the running
 * kernel's BTF, so offsets are right on every kernel. The "___" flavours describe layouts of
 * older kernels; libbpf strips the suffix when matching.
 */
#ifndef PEBSPROF_KERNEL_TYPES_BPF_H
#define PEBSPROF_KERNEL_TYPES_BPF_H

#include <linux/types.h>

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* 5.12+: weight is a union; var1_dw holds the load latency. */
union perf_sample_weight {
	__u64 full;
	struct {
		__u32 var1_dw;
		__u16 var2_w;
		__u16 var3_w;
	};
};

union perf_mem_data_src {
	__u64 val;
};

struct perf_sample_data {
	__u64 sample_flags; /* 6.1+ */
	__u64 period;
	__u64 addr;
	union perf_sample_weight weight;
	union perf_mem_data_src data_src;
	__u64 phys_addr; /* visible to BPF from 6.3, when perf_prepare_sample runs first */
};

/* Before 5.12 weight was a plain u64. */
struct perf_sample_data___u64_weight {
	__u64 weight;
};

/* The uapi struct, read through perf_event.attr; only the field the shim needs. */
struct perf_event_attr___pp {
	__u64 sample_type;
};

struct perf_event {
	struct perf_event_attr___pp attr;
};

struct bpf_perf_event_data_kern {
	void *regs;
	struct perf_sample_data *data;
	struct perf_event *event;
};

/* CONFIG_CFS_BANDWIDTH: above 0 while this group or one above it is throttled */
struct cfs_rq {
	int throttle_count;
};

struct sched_entity {
	struct cfs_rq *cfs_rq; /* CONFIG_FAIR_GROUP_SCHED: the queue the entity is on */
	unsigned long long sum_exec_runtime; /* ns on a CPU, brought up to date at each switch */
};

/* CONFIG_SCHED_INFO: the time the task waited on a run queue, summed as it got a CPU */
struct sched_info {
	unsigned long long run_delay;
};

struct kernfs_node {
	__u64 id; /* 5.5+: the cgroup id bpf_get_current_cgroup_id() gives */
};

struct cgroup {
	struct kernfs_node *kn;
};

struct cgroup_subsys_state {
	struct cgroup *cgroup;
};

struct css_set {
	/* CGROUP_SUBSYS_COUNT entries, a number of the kernel's config: read by its size */
	struct cgroup_subsys_state *subsys[1];
	struct cgroup *dfl_cgrp;
};

struct task_struct {
	unsigned int __state; /* 5.14+ */
	unsigned int flags;   /* PF_* */
	int pid;
	int tgid;
	struct sched_entity se;
	struct sched_info sched_info;
	char comm[16];
	struct css_set *cgroups;
	void *rseq; /* CONFIG_RSEQ: the thread's registered struct rseq (user), or NULL */
};

/* Before 5.14 the state was a long named state. */
struct task_struct___pre514 {
	long state;
};

/*
 * The x86 sample registers' flags word (the kernel's pt_regs.flags, the uapi's eflags). Read
 * by CO-RE so a layout change around it (FRED widened cs) moves the offset, not the meaning.
 */
struct pt_regs___pp {
	unsigned long flags;
};

#pragma clang attribute pop

#endif /* PEBSPROF_KERNEL_TYPES_BPF_H */
