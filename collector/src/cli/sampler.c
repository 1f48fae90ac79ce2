/* Starting the sampling path, shared by `record` and `run`; see sampler.h. */
#include "sampler.h"

#include <errno.h>
#include <stdlib.h>
#include <linux/perf_event.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cli_util.h"
#include "base/deadline.h"
#include "base/log.h"
#include "metadata/cgroup_ids.h"

/* The CPUs the events were opened on, ascending, once each (malloc'ed; NULL: no memory). */
static int *event_cpus(const struct pp_event_set *set, size_t *nr)
{
	int *cpus = calloc(set->nr_fds ? set->nr_fds : 1, sizeof(*cpus));

	if (!cpus)
		return NULL;
	for (size_t i = 0; i < set->nr_fds; i++)
		cpus[i] = set->fds[i].cpu;
	*nr = pp_cpus_sort_unique(cpus, set->nr_fds);
	return cpus;
}

/* Whether dir is a procfs mount (the host's /proc mounted elsewhere), not a fixture tree. */
static int is_procfs(const char *dir)
{
	struct statfs st;

	return statfs(dir, &st) == 0 && st.f_type == PROC_SUPER_MAGIC;
}

void pp_sampler_kallsyms_advice(const struct pp_sys *sys, int err, char *msg, size_t len)
{
	int syslog = pp_sys_has_cap(sys, PP_CAP_SYSLOG);

	/* the kernel's kallsyms_show_value(): who sees the addresses */
	if (sys->kptr_restrict >= 2)
		snprintf(msg, len,
			 "kernel.kptr_restrict=%lld hides them from everyone; set it to 1 (and "
			 "give CAP_SYSLOG) or 0",
			 (long long)sys->kptr_restrict);
	else if (!syslog && sys->cap_eff_known &&
		 (sys->kptr_restrict == 1 || sys->perf_event_paranoid > 1))
		snprintf(msg, len,
			 "this process lacks CAP_SYSLOG, which kernel.kptr_restrict=%lld with "
			 "kernel.perf_event_paranoid=%lld requires; add SYSLOG to the "
			 "capabilities, or use a kernel of 5.16+ where they are asked of the "
			 "kernel through BPF",
			 (long long)sys->kptr_restrict, (long long)sys->perf_event_paranoid);
	else
		snprintf(msg, len, "%s", strerror(err ? err : EIO));
}

int pp_sampler_check_system(const struct pp_sys *sys, char *msg, size_t len)
{
	char caps[256];

	/*
	 * Capabilities, not the uid: a root container without CAP_BPF and CAP_PERFMON is as
	 * unprivileged as any user, and would otherwise be told its kernel is too old.
	 */
	if (sys->cap_eff_known
		? !(pp_sys_has_cap(sys, PP_CAP_BPF) && pp_sys_has_cap(sys, PP_CAP_PERFMON)) &&
		      !pp_sys_has_cap(sys, PP_CAP_SYS_ADMIN)
		: !sys->is_root) {
		int no_bpf = !pp_sys_has_cap(sys, PP_CAP_BPF),
		    no_perfmon = !pp_sys_has_cap(sys, PP_CAP_PERFMON);

		snprintf(msg, len,
			 "missing privileges: loading the BPF shim needs CAP_BPF and CAP_PERFMON "
			 "(or CAP_SYS_ADMIN), and this process lacks %s%s%s%s; run with sudo, or "
			 "add BPF and PERFMON to the container's capabilities",
			 no_bpf ? "CAP_BPF" : "", no_bpf && no_perfmon ? " and " : "",
			 no_perfmon ? "CAP_PERFMON" : "",
			 sys->is_root ? " although it runs as uid 0" : "");
		return PP_EXIT_RUNTIME;
	}
	if (sys->bpf_eperm) {
		snprintf(msg, len,
			 "missing privileges: the kernel refuses bpf() with EPERM although this "
			 "process has %s: a seccomp profile (use seccompProfile Unconfined or one "
			 "that allows bpf and perf_event_open), an LSM, or "
			 "kernel.unprivileged_bpf_disabled is in the way",
			 pp_sys_caps_str(sys, caps, sizeof(caps)));
		return PP_EXIT_RUNTIME;
	}
	if (!sys->btf_vmlinux) {
		snprintf(msg, len,
			 "this kernel has no BTF (%s/kernel/btf/vmlinux missing): pebsprof needs a "
			 "kernel built with CONFIG_DEBUG_INFO_BTF=y (5.8+ distro kernels have it)",
			 sys->sysfs_root);
		return PP_EXIT_RUNTIME;
	}
	if (sys->has_perf_event_prog == PP_FEAT_NO || sys->has_ringbuf == PP_FEAT_NO) {
		snprintf(msg, len, "this kernel lacks BPF %s: pebsprof needs Linux 5.8 or newer",
			 sys->has_ringbuf == PP_FEAT_NO ? "ring buffers" : "perf_event programs");
		return PP_EXIT_RUNTIME;
	}
	snprintf(msg, len, "ok");
	return PP_EXIT_OK;
}

/* The unwind tables' manager, writing into the loaded shim's maps. */
static int open_unwinder(struct pp_sampler *s, const struct pp_sampler_opts *opts)
{
	struct pp_unwinder_opts uo = {
	    .proc_root = opts->proc_root,
	    .worker = true,
	    .table_cache_dir = opts->unwind_table_cache &&
				       strcmp(opts->unwind_table_cache, PP_UNWIND_TABLE_CACHE_NONE)
				   ? opts->unwind_table_cache
				   : NULL,
	    .table_cache_bytes = opts->unwind_table_cache_bytes,
	    .partial_min_fdes = !opts->unwind_partial_fdes ? UINT32_MAX
				: opts->unwind_partial_fdes >= UINT32_MAX
				    ? UINT32_MAX - 1
				    : (uint32_t)opts->unwind_partial_fdes,
	    .mmap_reports = s->sideband != NULL,
	    .kick_by_caller = true,
	    .tables_only = opts->ustack_walk == PP_USTACK_DWARF,
	    .max_frames = opts->req.stack_depth};
	struct pp_bpf_unwind_list *none;
	uint32_t nr_rows, nr_slots;
	int rows_fd = pp_shim_unwind_rows_fd(s->shim, &nr_rows);
	int mappings_fd = pp_shim_unwind_mappings_fd(s->shim, &nr_slots);

	s->unwind_sink =
	    pp_unwinder_bpf_sink_new(rows_fd, nr_rows, pp_shim_unwind_rules_fd(s->shim),
				     pp_shim_unwind_procs_fd(s->shim), mappings_fd, nr_slots);
	if (!s->unwind_sink) {
		pp_error("cannot use the shim's unwind table maps (%u rows): %s", nr_rows,
			 strerror(errno));
		return PP_EXIT_RUNTIME;
	}
	s->unwinder = pp_unwinder_new(s->unwind_sink, &uo);
	if (!s->unwinder) {
		pp_error("cannot start the unwind table worker: %s", strerror(errno));
		return PP_EXIT_RUNTIME;
	}
	/*
	 * The agent is not installed (its samples walk frame pointers): an empty list, not of
	 * all its mappings, tells the shim so, which otherwise takes it for a new process and
	 * copies its stacks.
	 */
	none = calloc(1, sizeof(*none));
	if (none)
		(void)s->unwind_sink->set_proc(s->unwind_sink->ctx, (uint32_t)getpid(), none,
					       &(uint64_t){0}); /* empty: it lies nowhere */
	free(none);
	return PP_EXIT_OK;
}

int pp_sampler_open(const struct pp_sampler_opts *opts, struct pp_sampler *s)
{
	struct pp_sys_opts sys_opts = {
	    .sysfs_root = opts->sysfs_root,
	    .procfs_root = opts->proc_root,
	    .probe_bpf = 1,
	    .skip_kfunc_probe = 1, /* decided from kallsyms below */
	};
	struct pp_event_request req = opts->req;
	const char *proc_root = opts->proc_root ? opts->proc_root : "/proc";
	struct pp_shim_opts sopts = {.track_tasks = 1,
				     .filter_tgids = opts->filter_tgids,
				     .filter_cgroups = opts->filter_cgroups,
				     .cgroup2_root = opts->cgroup2_root};
	char err[1024] = "";
	uint64_t kfunc;
	int *ring_cpus;
	int ret;

	memset(s, 0, sizeof(*s));
	s->sys = pp_sys_new(&sys_opts);
	if (!s->sys) {
		pp_error("cannot inspect this system: %s", strerror(errno));
		return PP_EXIT_RUNTIME;
	}
	ret = pp_sampler_check_system(s->sys, err, sizeof(err));
	if (ret) {
		pp_error("%s", err);
		return ret;
	}
	/* Sampling works without these, but names do not: said once, here, not per frame. */
	if (s->sys->cap_eff_known && !pp_sys_has_cap(s->sys, PP_CAP_SYS_PTRACE))
		pp_warn("without CAP_SYS_PTRACE the maps and binaries of other users' processes "
			"cannot be read: their user frames stay unnamed (add SYS_PTRACE to the "
			"capabilities)");
	if (s->sys->cap_eff_known && !pp_sys_has_cap(s->sys, PP_CAP_DAC_READ_SEARCH))
		pp_warn("without CAP_DAC_READ_SEARCH binaries that root cannot read by their file "
			"modes stay unnamed (add DAC_READ_SEARCH to the capabilities)");

	/* Events first: a bad event is a usage error and nothing is loaded for it. */
	req.pid = -1;
	/* precise events then record the registers the table walk starts from */
	req.want_sample_regs =
	    opts->ustack_walk == PP_USTACK_AUTO || opts->ustack_walk == PP_USTACK_DWARF;
	ret = pp_events_open(&req, s->sys, NULL, NULL, &s->events, err, sizeof(err));
	if (ret) {
		pp_error("%s", err);
		return ret == -EINVAL ? PP_EXIT_USAGE : PP_EXIT_RUNTIME;
	}

	/*
	 * On demand where the kernel allows it: a capture names a few thousand kernel addresses
	 * at most, and reading all of /proc/kallsyms costs the kernel tens of ms. Only for the
	 * host's own /proc: another root may be a fixture whose symbols are the point.
	 */
	if (!opts->proc_root || strcmp(opts->proc_root, "/proc") == 0 ||
	    is_procfs(opts->proc_root)) {
		s->ksyms = pp_kallsyms_open_lazy(opts->proc_root, 0);
		if (!s->ksyms)
			pp_debug("kernel symbols on demand unavailable (%s): reading %s/kallsyms",
				 strerror(errno), proc_root);
	}
	if (!s->ksyms)
		s->ksyms = pp_kallsyms_load(opts->proc_root);
	if (!s->ksyms && req.want_kstack) {
		char why[400];

		pp_sampler_kallsyms_advice(s->sys, errno, why, sizeof(why));
		pp_warn("kernel frames stay unnamed: cannot read %s/kallsyms addresses: %s",
			proc_root, why);
	}
	/*
	 * bpf_cast_to_kern_ctx (6.2+) is a kernel function, so kallsyms tells whether the kctx
	 * variant loads; without kallsyms the loader asks vmlinux BTF itself.
	 */
	if (s->ksyms)
		sopts.variant = pp_kallsyms_find(s->ksyms, "bpf_cast_to_kern_ctx", &kfunc) == 0
				    ? PP_SHIM_KCTX
				    : PP_SHIM_CORE;
	sopts.kstack_depth = req.want_kstack ? req.stack_depth : 0;
	sopts.ustack_depth = req.stack_depth;
	sopts.read_mem_fields = s->events->events[0].mem;
	sopts.ustack_walk = opts->ustack_walk;
	sopts.unwind_table_bytes = opts->unwind_table_bytes;
	sopts.off_cpu_every = opts->off_cpu_every;
	s->off_cpu_every = opts->off_cpu_every;
	sopts.off_cpu_min_ns = opts->off_cpu_min_ns;
	sopts.off_cpu_stacks = opts->off_cpu_stacks;
	/*
	 * Where v1 hierarchies are mounted (alone, or hybrid: cgroup2 beside them without
	 * controllers) they tell containers apart, and the v2 cgroup mostly does not: samples are
	 * keyed by both, so that a container's /proc/PID/cgroup is read once per cgroup, not
	 * once per process, and its processes gone before theirs could be read are named too.
	 * Not with the user-space cgroup filter: it compares v2 ids.
	 */
	if (!opts->filter_cgroups) {
		struct pp_cgroup_v1_key key;

		if (pp_cgroup_v1_key_choose(proc_root, &key) == 0 && key.subsys) {
			sopts.cgroup_v1_subsys = key.subsys;
			sopts.cgroup_v1_with_v2 = key.with_v2;
		}
	}
	/* without bpf_loop (before 5.17) the loader takes the bounded-loop table walker */
	s->ustack_walk = sopts.ustack_walk;
	/* Events that cannot exclude a mode in the PMU (IBS) exclude it in the shim. */
	if (s->events->events[0].want_user_only)
		sopts.ip_filter = PP_IP_FILTER_USER_ONLY;
	else if (s->events->events[0].want_kernel_only)
		sopts.ip_filter = PP_IP_FILTER_KERNEL_ONLY;
	/* A ring per CPU that samples. */
	ring_cpus = event_cpus(s->events, &sopts.nr_ring_cpus);
	if (!ring_cpus) {
		pp_error("out of memory for %zu CPUs' ring buffers", s->events->nr_fds);
		return PP_EXIT_RUNTIME;
	}
	sopts.ring_cpus = sopts.nr_ring_cpus ? ring_cpus : NULL;
	s->shim = pp_shim_load(&sopts, err, sizeof(err));
	free(ring_cpus);
	if (!s->shim) {
		pp_error("%s", err);
		return PP_EXIT_RUNTIME;
	}
	/*
	 * What processes map, exec and fork, as the kernel reports it: for the host's own
	 * processes only (another proc root is a fixture the reports would not describe).
	 */
	if (!opts->proc_root || strcmp(opts->proc_root, "/proc") == 0 ||
	    is_procfs(opts->proc_root)) {
		struct pp_sideband_opts sbo = {.mmap_data = s->events->events[0].mem != 0};

		s->filter_tgids = opts->filter_tgids != 0;
		s->filter_cgroups = opts->filter_cgroups != 0;
		s->sideband = pp_sideband_open(&sbo);
		if (s->sideband) {
			size_t n;
			const int *fds = pp_sideband_fds(s->sideband, &n);

			for (size_t i = 0; i < n; i++) {
				int werr = pp_shim_add_wake_fd(s->shim, fds[i]);

				if (werr)
					pp_debug("process events: no wake-ups (%s): read at each "
						 "poll",
						 strerror(-werr));
			}
		}
		if (!s->sideband)
			pp_warn("process events unavailable (%s): processes are read from /proc "
				"when sampled, and one gone by then stays unnamed",
				strerror(errno));
	}
	if (s->ustack_walk == PP_USTACK_AUTO || s->ustack_walk == PP_USTACK_DWARF)
		return open_unwinder(s, opts);
	return PP_EXIT_OK;
}

int pp_sampler_attach(struct pp_sampler *s)
{
	for (size_t i = 0; i < s->events->nr_fds; i++) {
		const struct pp_event_fd *efd = &s->events->fds[i];
		int ret;

		if (efd->group_leader) {
			/* mem-loads-aux leaders carry no program; enabling them starts the group.
			 */
			if (ioctl(efd->fd, PERF_EVENT_IOC_ENABLE, 0)) {
				pp_error("cannot enable the event group on CPU %d: %s", efd->cpu,
					 strerror(errno));
				return PP_EXIT_RUNTIME;
			}
			continue;
		}
		ret = pp_shim_attach(s->shim, efd->fd, efd->cookie);
		if (ret) {
			pp_error("cannot attach the BPF shim to %s on CPU %d: %s%s",
				 s->events->events[efd->cookie].name, efd->cpu, strerror(-ret),
				 ret == -EPROTO ? " (precise event without a full callchain)" : "");
			return PP_EXIT_RUNTIME;
		}
	}
	return PP_EXIT_OK;
}

void pp_sampler_close(struct pp_sampler *s)
{
	pp_unwinder_free(s->unwinder); /* its worker writes to the shim's maps: first */
	pp_unwinder_bpf_sink_free(s->unwind_sink);
	pp_shim_free(s->shim);
	pp_sideband_free(s->sideband);
	pp_event_set_free(s->events);
	pp_kallsyms_free(s->ksyms);
	pp_sys_free(s->sys);
	memset(s, 0, sizeof(*s));
}

void pp_sampler_profile_desc(const struct pp_sampler *s, struct pp_profile_desc *desc)
{
	const struct pp_event_info *ev = &s->events->events[0];

	desc->event = ev->name;
	desc->value_type = ev->value_type;
	desc->value_unit = ev->value_unit;
	desc->period = ev->period;
	desc->mem_latency = (uint32_t)ev->mem;
	desc->off_cpu_every = s->off_cpu_every;
}

static int is_target(void *ctx, uint32_t pid)
{
	return pp_shim_is_target(ctx, pid);
}

void pp_sampler_session_opts(const struct pp_sampler *s, struct pp_session_opts *sess)
{
	sess->kallsyms = s->ksyms;
	sess->precise_ip = s->events->events[0].precise_ip > 0;
	sess->mem_event = s->events->events[0].mem;
	sess->unwinder = s->unwinder;
	sess->sideband = s->sideband;
	/* the poll loop reads the side-band once per turn: the symbol loader is woken there */
	sess->symbols_kicked_per_turn = true;
	/* the processes the shim samples get their lists early: all, or the targets */
	sess->eager_unwind = s->sideband && s->unwinder && !s->filter_cgroups;
	if (s->filter_tgids) {
		sess->profiled = is_target;
		sess->profiled_ctx = s->shim;
	}
	sess->mono_to_wall_ns =
	    (int64_t)pp_clock_ns(CLOCK_REALTIME) - (int64_t)pp_clock_ns(CLOCK_MONOTONIC);
}
