/* Loading, attaching and draining the in-kernel shim; see shim_loader.h. */
#define _GNU_SOURCE /* open_by_handle_at */
#include "shim_loader.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "metadata/cgroup_ids.h"
#include "metadata/cgroup_level.h"
#include "sysinfo.h"
#include "shim_core.skel.h"
#include "shim_kctx.skel.h"

#define DEFAULT_RINGBUF_BYTES (4ull << 20) /* over all rings */
#define MIN_RING_BYTES (64ull << 10)	   /* per CPU */
#define MAX_LINKS_GROWTH 64
#define VERDICT_SLOTS 1024  /* cgroup ids whose user-space verdict is remembered */
#define MAX_CGROUP_DEPTH 64 /* parent steps before a walk gives up */

/*
 * The cgroup filter in user space, for kernels without bpf_get_current_ancestor_cgroup_id in
 * perf_event programs. A sample's cgroup id is opened by file handle on the cgroup2 mount and
 * its parents are walked up to the root; the verdict is remembered per id in a bounded
 * direct-mapped table (a collision replaces the older entry and counts an eviction).
 */
struct user_cgroup_filter {
	int mount_fd;
	int handle_type; /* of cgroup2 file handles (FILEID_KERNFS) */
	uint64_t root_id;
	uint64_t selected[PP_CGROUP_FILTER_MAX];
	size_t nselected;
	struct {
		uint64_t id;
		uint8_t used, pass;
	} verdicts[VERDICT_SLOTS];
	uint64_t evictions;
};

struct pp_shim {
	enum pp_shim_variant variant;
	struct shim_kctx *kctx;
	struct shim_core *core;
	struct bpf_object *obj;
	struct bpf_program *on_sample;
	struct bpf_map *rings, *counters, *target_tgids, *cgroup_filter, *cgroup_levels;
	struct bpf_map *unwind_rows, *unwind_rules, *unwind_procs, *unwind_mappings; /* tables */
	int table_loop; /* the table walker with a bounded loop (no bpf_loop) */
	struct ring_buffer *rb;
	int wake_epfd; /* -1, or an epoll of rb's and the fds of pp_shim_add_wake_fd */
	uint64_t wake_quiet_until_ns; /* CLOCK_MONOTONIC: the rings alone are watched until then */
	uint64_t source_woke_ns;      /* CLOCK_MONOTONIC: a wake fd (not a ring) last woke a poll */
	int *ring_fds; /* one ring buffer per CPU in opts->ring_cpus, in that order */
	size_t nr_rings;
	struct bpf_link **links; /* perf events */
	size_t nlinks, links_cap;
	struct bpf_link *task_links[3];	   /* fork, exec, exit trackers */
	struct bpf_link *off_cpu_links[4]; /* switch out, switch in, wakeup, exit */
	struct bpf_map *off_cpu_waiting, *off_cpu_records, *off_cpu_tasks;
	uint32_t off_cpu_at;   /* PP_OFF_CPU_AT_*: where the stacks of waits are taken */
	char switch_in_at[64]; /* the kernel function the switch-in probe is on */
	int has_cookie;
	enum pp_shim_cgroup_mode cg_mode;
	struct user_cgroup_filter *ucg; /* PP_SHIM_CGROUP_USER only */
	uint64_t user_cgroup_filtered;
	pp_shim_record_fn cb;
	void *cb_ctx;
	uint64_t load_ns; /* pp_shim_load's own time: open, verifier, maps */
};

const char *const pp_ustack_walk_names[] = {
    [PP_USTACK_SHIM] = "fp",
    [PP_USTACK_KERNEL] = "kernel",
    [PP_USTACK_AUTO] = "auto",
    [PP_USTACK_DWARF] = "dwarf",
    NULL,
};

const char *const pp_off_cpu_stacks_names[] = {
    [PP_SHIM_OFF_CPU_AUTO] = "auto",
    [PP_SHIM_OFF_CPU_KPROBE] = "kprobe",
    [PP_SHIM_OFF_CPU_FEXIT] = "fexit",
    [PP_SHIM_OFF_CPU_SWITCH] = "switch",
    NULL,
};

int pp_ustack_walk_parse(const char *name)
{
	if (!strcmp(name, "shim")) /* its name before there were tables */
		return PP_USTACK_SHIM;
	for (int i = 0; pp_ustack_walk_names[i]; i++)
		if (!strcmp(name, pp_ustack_walk_names[i]))
			return i;
	return -1;
}

/*
 * The 4-byte rows the table budget buys, the rule array's fixed part of it taken out: at least
 * 64 KiB of rows, at most what an array map may hold; even (the map holds them in pairs).
 */
static uint32_t unwind_rows_for(uint64_t bytes)
{
	uint64_t rules = (uint64_t)PP_UW_MAX_RULES * sizeof(struct pp_bpf_unwind_rule), rows;

	bytes = bytes ? bytes : PP_UNWIND_TABLE_BYTES_DEFAULT;
	rows = (bytes > rules ? bytes - rules : 0) / sizeof(__u32);
	rows = rows < (1u << 14) ? (1u << 14) : rows > (1u << 28) ? (1u << 28) : rows;
	return (uint32_t)rows & ~1u;
}

static const char *const counter_names[PP_CNT__MAX] = {
    [PP_CNT_SAMPLES] = "samples",
    [PP_CNT_EMITTED] = "emitted",
    [PP_CNT_FILTERED] = "filtered",
    [PP_CNT_RB_FULL] = "ringbuf_full",
    [PP_CNT_KSTACK_TRUNC] = "kstack_truncated",
    [PP_CNT_USTACK_TRUNC] = "ustack_truncated",
    [PP_CNT_KSTACK_ERR] = "kstack_error",
    [PP_CNT_USTACK_ERR] = "ustack_error",
    [PP_CNT_SCRATCH_MISS] = "scratch_miss",
    [PP_CNT_FORK_TRACKED] = "forks_tracked",
    [PP_CNT_FILTER_FULL] = "filter_full",
    [PP_CNT_TASK_RB_FULL] = "task_ringbuf_full",
    [PP_CNT_CGROUP_FILTERED] = "cgroup_filtered",
    [PP_CNT_IP_FILTERED] = "ip_filtered",
    [PP_CNT_USTACK_SHIM] = "ustack_shim_walked",
    [PP_CNT_USTACK_SWITCH] = "ustack_stack_switches",
    [PP_CNT_UNWIND_TABLE_FRAMES] = "unwind_table_frames",
    [PP_CNT_UNWIND_FP_FRAMES] = "unwind_fp_frames",
    [PP_CNT_UNWIND_NO_PROC] = "unwind_no_proc",
    [PP_CNT_UNWIND_STOP_NO_CFI] = "unwind_stop_no_cfi",
    [PP_CNT_UNWIND_STOP_UNREADABLE] = "unwind_stop_unreadable",
    [PP_CNT_UNWIND_STOP_NOT_UP] = "unwind_stop_cfa_not_up",
    [PP_CNT_UNWIND_STOP_UNSUPPORTED] = "unwind_stop_unsupported",
    [PP_CNT_UNWIND_STOP_IMPLAUSIBLE] = "unwind_stop_implausible",
    [PP_CNT_UNWIND_STOP_FP] = "unwind_stop_frame_pointer",
    [PP_CNT_OFF_CPU_NOTED] = "off_cpu_noted",
    [PP_CNT_OFF_CPU_SHORT] = "off_cpu_short",
    [PP_CNT_OFF_CPU_EMITTED] = "off_cpu_emitted",
    [PP_CNT_OFF_CPU_RB_FULL] = "off_cpu_ringbuf_full",
    [PP_CNT_OFF_CPU_NOT_NOTED] = "off_cpu_not_noted",
    [PP_CNT_OFF_CPU_EVICTED] = "off_cpu_evicted",
    [PP_CNT_OFF_CPU_UNSEEN_END] = "off_cpu_unseen_end",
    [PP_CNT_OFF_CPU_ENDED_AT_WAKEUP] = "off_cpu_ended_at_wakeup",
    [PP_CNT_USTACK_RAW] = "ustack_raw",
    [PP_CNT_UNWIND_DEFERRED] = "unwind_deferred",
    [PP_CNT_UNWIND_UNLISTED] = "unwind_unlisted",
};

const char *pp_counter_name(enum pp_counter c)
{
	return (unsigned)c < PP_CNT__MAX && counter_names[c] ? counter_names[c] : "unknown";
}

const char *pp_shim_variant_name(enum pp_shim_variant v)
{
	switch (v) {
	case PP_SHIM_KCTX:
		return "kctx (bpf_cast_to_kern_ctx)";
	case PP_SHIM_CORE:
		return "core (BPF_CORE_READ on the kernel context)";
	default:
		return "auto";
	}
}

int pp_kernel_has_cast_to_kern_ctx(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int found;

	if (!btf)
		return 0;
	found = btf__find_by_name_kind(btf, "bpf_cast_to_kern_ctx", BTF_KIND_FUNC) > 0;
	btf__free(btf);
	return found;
}

int pp_kernel_can_fexit(const char *func)
{
	const struct bpf_insn ret0[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	struct btf *btf = btf__load_vmlinux_btf();
	int id, prog_fd, link_fd, ret;

	if (!btf)
		return -ENOENT;
	id = btf__find_by_name_kind(btf, func, BTF_KIND_FUNC);
	btf__free(btf);
	if (id <= 0)
		return -ENOENT;
	LIBBPF_OPTS(bpf_prog_load_opts, lopts, .expected_attach_type = BPF_TRACE_FEXIT,
		    .attach_btf_id = (uint32_t)id);
	prog_fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "pp_fexit_probe", "GPL", ret0, 2, &lopts);
	if (prog_fd < 0)
		return -errno;
	link_fd = bpf_raw_tracepoint_open(NULL, prog_fd);
	ret = link_fd < 0 ? -errno : 0;
	close(prog_fd);
	if (link_fd >= 0)
		close(link_fd);
	return ret;
}

/*
 * Whether the switch tracepoint can leave the stacks of waits to the task's way back to user
 * mode (PP_OFF_CPU_AT_USER_RETURN): x86-64, task storage (5.11+), the table walker's bpf_loop
 * (5.17+, which brings bpf_task_pt_regs) and the rseq_update tracepoint with task_struct.rseq
 * a pointer (CONFIG_RSEQ, as from 4.18 to at least 6.18).
 */
static bool kernel_can_defer_off_cpu_stacks(bool table_walker_loop)
{
#if defined(__x86_64__)
	struct btf *btf;
	bool found = false;
	int task;

	if (!table_walker_loop || libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) != 1)
		return false;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return false;
	task = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	if (task > 0 &&
	    btf__find_by_name_kind(btf, "btf_trace_rseq_update", BTF_KIND_TYPEDEF) > 0) {
		const struct btf_type *t = btf__type_by_id(btf, (uint32_t)task);
		const struct btf_member *m = btf_members(t);

		for (uint16_t i = 0; i < btf_vlen(t) && !found; i++, m++) {
			const char *name = btf__name_by_offset(btf, m->name_off);
			const struct btf_type *mt = btf__type_by_id(btf, m->type);

			found = name && !strcmp(name, "rseq") && mt && btf_is_ptr(mt);
		}
	}
	btf__free(btf);
	return found;
#else
	(void)table_walker_loop;
	return false;
#endif
}

/*
 * The switch tracepoint's way on this kernel: its stacks left to the way back to user mode,
 * or taken at the switch. Asked only where the switch is the way: the probe parses the
 * kernel's BTF, start-up work a kernel with kprobes does not need.
 */
static uint32_t off_cpu_at_switch(bool table_walker_loop)
{
	return kernel_can_defer_off_cpu_stacks(table_walker_loop) ? PP_OFF_CPU_AT_USER_RETURN
								  : PP_OFF_CPU_AT_SWITCH;
}

/* PP_OFF_CPU_AT_* for what was asked and what this kernel has. */
static uint32_t off_cpu_stacks_at(enum pp_shim_off_cpu_stacks asked, bool table_walker_loop)
{
	switch (asked) {
	case PP_SHIM_OFF_CPU_KPROBE:
		return PP_OFF_CPU_AT_RESUME;
	case PP_SHIM_OFF_CPU_FEXIT:
		return PP_OFF_CPU_AT_SCHEDULE_RETURN;
	case PP_SHIM_OFF_CPU_SWITCH:
		return off_cpu_at_switch(table_walker_loop);
	case PP_SHIM_OFF_CPU_AUTO:
	default:
		if (pp_sys_kprobes_at("/sys") == PP_FEAT_YES)
			return PP_OFF_CPU_AT_RESUME;
		return pp_kernel_can_fexit("schedule") == 0 ? PP_OFF_CPU_AT_SCHEDULE_RETURN
							    : off_cpu_at_switch(table_walker_loop);
	}
}

static int kernel_has_attach_cookie(void)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_attach_cookie,
				       NULL) == 1;
}

/* Added to perf_event programs' helpers in 5.14 (commit 95b861a7935b). */
static int kernel_has_ancestor_cgroup_id(void)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT,
				       BPF_FUNC_get_current_ancestor_cgroup_id, NULL) == 1;
}

static void user_cgroup_filter_free(struct user_cgroup_filter *f)
{
	if (!f)
		return;
	if (f->mount_fd >= 0)
		close(f->mount_fd);
	free(f);
}

static struct user_cgroup_filter *user_cgroup_filter_new(const char *cgroup2_root, int *err)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + 64];
	} h;
	char mnt[PATH_MAX];
	struct user_cgroup_filter *f;
	int mount_id;

	*err = 0;
	if (!cgroup2_root) {
		*err = pp_cgroup2_mount(NULL, mnt, sizeof(mnt));
		if (*err)
			return NULL;
		cgroup2_root = mnt;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		*err = -ENOMEM;
		return NULL;
	}
	f->mount_fd = open(cgroup2_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->mount_fd < 0) {
		*err = -errno;
		goto out_free;
	}
	memset(&h, 0, sizeof(h));
	h.fh.handle_bytes = 64;
	if (name_to_handle_at(f->mount_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH)) {
		*err = -errno;
		goto out_free;
	}
	f->handle_type = h.fh.handle_type;
	*err = pp_cgroup_fd_id(f->mount_fd, &f->root_id);
	if (*err)
		goto out_free;
	return f;

out_free:
	user_cgroup_filter_free(f);
	return NULL;
}

static int cgroup_is_selected(const struct user_cgroup_filter *f, uint64_t id)
{
	for (size_t i = 0; i < f->nselected; i++)
		if (f->selected[i] == id)
			return 1;
	return 0;
}

/* Walks from the cgroup up to the root; a cgroup that cannot be opened (gone) fails. */
static int cgroup_walk_passes(const struct user_cgroup_filter *f, uint64_t id)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + sizeof(uint64_t)];
	} h;
	int fd, pass = 0;

	memset(&h, 0, sizeof(h));
	h.fh.handle_bytes = sizeof(id);
	h.fh.handle_type = f->handle_type;
	memcpy(h.fh.f_handle, &id, sizeof(id));
	fd = open_by_handle_at(f->mount_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int depth = 0; fd >= 0 && depth < MAX_CGROUP_DEPTH; depth++) {
		uint64_t cur;
		int parent;

		if (pp_cgroup_fd_id(fd, &cur))
			break;
		if (cgroup_is_selected(f, cur)) {
			pass = 1;
			break;
		}
		if (cur == f->root_id)
			break;
		parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = parent;
	}
	if (fd >= 0)
		close(fd);
	return pass;
}

static int user_cgroup_passes(struct user_cgroup_filter *f, uint64_t id)
{
	size_t slot = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 54) & (VERDICT_SLOTS - 1);

	if (f->verdicts[slot].used && f->verdicts[slot].id == id)
		return f->verdicts[slot].pass;
	if (f->verdicts[slot].used)
		f->evictions++;
	f->verdicts[slot].id = id;
	f->verdicts[slot].used = 1;
	f->verdicts[slot].pass = (uint8_t)cgroup_walk_passes(f, id);
	return f->verdicts[slot].pass;
}

static int next_pow2_pages(uint64_t bytes, uint64_t *out)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), v = page;

	if (bytes < page)
		bytes = page;
	while (v < bytes && v < (1ull << 31))
		v <<= 1;
	if (v < bytes)
		return -EINVAL;
	*out = v;
	return 0;
}

static void set_config(struct pp_shim_config *cfg, const struct pp_shim_opts *opts,
		       uint64_t ring_bytes, int has_cookie, enum pp_shim_cgroup_mode cg_mode)
{
	cfg->abi_version = PP_RECORD_ABI_VERSION;
	cfg->kstack_depth =
	    opts->kstack_depth > PP_MAX_STACK_DEPTH ? PP_MAX_STACK_DEPTH : opts->kstack_depth;
	cfg->ustack_depth =
	    opts->ustack_depth > PP_MAX_STACK_DEPTH ? PP_MAX_STACK_DEPTH : opts->ustack_depth;
	cfg->read_mem_fields = !!opts->read_mem_fields;
	cfg->filter_tgids = !!opts->filter_tgids;
	cfg->use_attach_cookie = !!has_cookie;
	/*
	 * The consumer polls every ring on a timeout too, so a forced wake-up only has to come
	 * before a ring fills: at half, the other half absorbs the consumer's latency. With a
	 * ring per CPU, an earlier mark would wake the consumer once per CPU as often.
	 */
	cfg->wakeup_bytes = opts->wakeup_bytes ? opts->wakeup_bytes : ring_bytes / 2;
	cfg->filter_cgroups = cg_mode == PP_SHIM_CGROUP_KERNEL;
	cfg->ip_filter = opts->ip_filter;
	cfg->ustack_walk = opts->ustack_walk;
	cfg->off_cpu_every = opts->off_cpu_every;
	cfg->off_cpu_min_ns = opts->off_cpu_min_ns;
	cfg->cgroup_v1_subsys = opts->cgroup_v1_subsys;
	cfg->cgroup_v1_with_v2 = !!opts->cgroup_v1_with_v2;
}

/*
 * Attaches the switch-in program to the scheduler's finish_task_switch, which compilers often
 * rename (finish_task_switch.isra.0): the usual names first, else the one /proc/kallsyms has.
 */
static struct bpf_link *attach_switch_in(struct bpf_program *prog, char *name, size_t len)
{
	static const char *const usual[] = {"finish_task_switch.isra.0", "finish_task_switch"};
	struct bpf_link *link;
	char line[512];
	FILE *f;

	for (size_t i = 0; i < sizeof(usual) / sizeof(usual[0]); i++) {
		link = bpf_program__attach_kprobe(prog, false, usual[i]);
		if (link) {
			snprintf(name, len, "%s", usual[i]);
			return link;
		}
	}
	f = fopen("/proc/kallsyms", "re");
	if (!f)
		return NULL;
	link = NULL;
	while (!link && fgets(line, sizeof(line), f)) {
		char sym[64], type;

		if (sscanf(line, "%*x %c %63s", &type, sym) != 2 ||
		    strncmp(sym, "finish_task_switch", 18) != 0 || (sym[18] && sym[18] != '.'))
			continue;
		link = bpf_program__attach_kprobe(prog, false, sym);
		if (link)
			snprintf(name, len, "%s", sym);
	}
	fclose(f);
	if (!link)
		errno = ENOENT;
	return link;
}

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct pp_shim *shim = ctx;

	if (shim->ucg && size >= sizeof(struct pp_sample)) {
		struct pp_rec_hdr hdr;
		uint64_t cgroup_id;

		memcpy(&hdr, data, sizeof(hdr));
		memcpy(&cgroup_id, (const char *)data + offsetof(struct pp_sample, cgroup_id),
		       sizeof(cgroup_id));
		if (hdr.type == PP_REC_SAMPLE && !user_cgroup_passes(shim->ucg, cgroup_id)) {
			shim->user_cgroup_filtered++;
			return 0;
		}
	}
	return shim->cb(shim->cb_ctx, data, size);
}

/*
 * The CPUs that get a ring: opts->ring_cpus, or every possible CPU. Returns a malloc'ed array
 * of ascending ids, or NULL with *err set.
 */
static int *ring_cpus_of(const struct pp_shim_opts *opts, size_t *nr, int *err)
{
	size_t n = opts->ring_cpus ? opts->nr_ring_cpus : 0;
	int *cpus;

	if (!opts->ring_cpus) {
		int possible = libbpf_num_possible_cpus();

		if (possible <= 0) {
			*err = possible < 0 ? possible : -EINVAL;
			return NULL;
		}
		n = (size_t)possible;
	}
	if (n == 0) {
		*err = -EINVAL;
		return NULL;
	}
	cpus = calloc(n, sizeof(*cpus));
	if (!cpus) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		cpus[i] = opts->ring_cpus ? opts->ring_cpus[i] : (int)i;
		if (cpus[i] < 0 || (i > 0 && cpus[i] <= cpus[i - 1])) {
			free(cpus);
			*err = -EINVAL;
			return NULL;
		}
	}
	*nr = n;
	return cpus;
}

/* Creates a ring buffer per CPU (before loading: the first is the inner-map template). */
static int create_rings(struct pp_shim *shim, const int *cpus, uint64_t ring_bytes, char *err,
			size_t errlen)
{
	shim->ring_fds = calloc(shim->nr_rings, sizeof(*shim->ring_fds));
	if (!shim->ring_fds)
		return -ENOMEM;
	for (size_t i = 0; i < shim->nr_rings; i++)
		shim->ring_fds[i] = -1;
	for (size_t i = 0; i < shim->nr_rings; i++) {
		int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "pp_ring", 0, 0, (uint32_t)ring_bytes,
					NULL);

		if (fd < 0) {
			int ret = -errno;

			snprintf(err, errlen,
				 "cannot create the BPF ring buffer of CPU %d (%llu bytes): %s",
				 cpus[i], (unsigned long long)ring_bytes, strerror(-ret));
			return ret;
		}
		shim->ring_fds[i] = fd;
	}
	return 0;
}

/*
 * Puts the CPUs' rings in the rings map, under their CPU ids. Each update of a map of maps
 * waits for an RCU grace period (6-12 ms each on the development VM, seconds on a 192-CPU
 * node at start-up); one batch update waits once where the kernel does batches of them
 * (6.9+), element by element elsewhere.
 */
static int fill_rings_map(struct pp_shim *shim, const int *cpus, char *err, size_t errlen)
{
	int rings_fd = bpf_map__fd(shim->rings), ret = 0;
	uint32_t *keys = calloc(shim->nr_rings, sizeof(*keys)), count = (uint32_t)shim->nr_rings;

	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < shim->nr_rings; i++)
		keys[i] = (uint32_t)cpus[i];
	{
		LIBBPF_OPTS(bpf_map_batch_opts, opts);

		if (bpf_map_update_batch(rings_fd, keys, shim->ring_fds, &count, &opts) == 0 &&
		    count == shim->nr_rings) {
			free(keys);
			return 0;
		}
	}
	for (size_t i = 0; i < shim->nr_rings && !ret; i++) {
		if (bpf_map_update_elem(rings_fd, &keys[i], &shim->ring_fds[i], BPF_ANY)) {
			ret = -errno;
			snprintf(err, errlen, "cannot install the ring buffer of CPU %d: %s",
				 cpus[i], strerror(-ret));
		}
	}
	free(keys);
	return ret;
}

/* Puts each CPU's ring in the rings map under its CPU id and maps them all for reading. */
static int install_rings(struct pp_shim *shim, const int *cpus, char *err, size_t errlen)
{
	int ret = fill_rings_map(shim, cpus, err, errlen);

	if (ret)
		return ret;
	for (size_t i = 0; i < shim->nr_rings; i++) {
		int fd = shim->ring_fds[i];

		if (i == 0) {
			shim->rb = ring_buffer__new(fd, ring_cb, shim, NULL);
			ret = shim->rb ? 0 : -errno;
		} else {
			ret = ring_buffer__add(shim->rb, fd, ring_cb, shim);
		}
		if (ret) {
			snprintf(err, errlen, "cannot map the BPF ring buffer of CPU %d: %s",
				 cpus[i], strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/*
 * Switch out, and switch in by kprobe or fexit; each plain, then with the table walker; then
 * PP_OFF_CPU_AT_USER_RETURN's switch and rseq_update (the table walker's only).
 */
static const char *const switch_prog_names[] = {"on_switch",	      "on_switch_unwind",
						"on_switch_in",	      "on_switch_in_unwind",
						"on_schedule_return", "on_schedule_return_unwind",
						"on_switch_deferred", "on_rseq_update_deferred"};
#define NR_SWITCH_PROGS (sizeof(switch_prog_names) / sizeof(switch_prog_names[0]))

/* The switch tracepoint last: a wait is noted only once its wakeup and end can be seen. */
static int attach_off_cpu(struct pp_shim *shim, struct bpf_program *out, struct bpf_program *in,
			  struct bpf_program *wakeup, struct bpf_program *exit, char *err,
			  size_t errlen)
{
	int ret;

	shim->off_cpu_links[2] = bpf_program__attach(wakeup);
	if (!shim->off_cpu_links[2]) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the off-CPU tracepoint sched_wakeup: %s",
			 strerror(-ret));
		return ret;
	}
	if (exit && !(shim->off_cpu_links[3] = bpf_program__attach(exit))) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the off-CPU tracepoint sched_process_exit: %s",
			 strerror(-ret));
		return ret;
	}
	if (shim->off_cpu_at == PP_OFF_CPU_AT_USER_RETURN) {
		shim->off_cpu_links[1] = bpf_program__attach(in);
		if (!shim->off_cpu_links[1]) {
			ret = -errno;
			snprintf(err, errlen,
				 "cannot attach the off-CPU tracepoint rseq_update: %s",
				 strerror(-ret));
			return ret;
		}
		snprintf(shim->switch_in_at, sizeof(shim->switch_in_at),
			 "sched_switch+rseq_update");
	} else if (!in) {
		snprintf(shim->switch_in_at, sizeof(shim->switch_in_at), "sched_switch");
	} else if (shim->off_cpu_at == PP_OFF_CPU_AT_SCHEDULE_RETURN) {
		shim->off_cpu_links[1] = bpf_program__attach_trace(in);
		if (!shim->off_cpu_links[1]) {
			ret = -errno;
			snprintf(err, errlen,
				 "cannot attach the off-CPU program to the return of schedule(): "
				 "%s",
				 strerror(-ret));
			return ret;
		}
		snprintf(shim->switch_in_at, sizeof(shim->switch_in_at), "fexit:schedule");
	} else if (!(shim->off_cpu_links[1] =
			 attach_switch_in(in, shim->switch_in_at, sizeof(shim->switch_in_at)))) {
		ret = -errno;
		snprintf(err, errlen,
			 "cannot attach the off-CPU probe to the scheduler's finish_task_switch: "
			 "%s",
			 strerror(-ret));
		return ret;
	}
	shim->off_cpu_links[0] = bpf_program__attach(out);
	if (!shim->off_cpu_links[0]) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the off-CPU tracepoint sched_switch: %s",
			 strerror(-ret));
		return ret;
	}
	return 0;
}

struct pp_shim *pp_shim_load(const struct pp_shim_opts *opts, char *err, size_t errlen)
{
	struct pp_shim *shim;
	struct pp_shim_config *cfg;
	static const char *const sample_progs[] = {"on_sample", "on_sample_unwind",
						   "on_sample_unwind_loop"};
	struct bpf_program *on_fork, *on_exec, *on_exit, *switch_progs[NR_SWITCH_PROGS],
	    *switch_out, *switch_in, *on_wakeup, *on_wakeup_deferred, *on_exit_deferred;
	int pick, all_progs;
	bool tables, deferred;
	uint64_t total_bytes, ring_bytes;
	int *cpus = NULL;
	size_t ncpus = 0;
	struct timespec t0, t1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	shim = calloc(1, sizeof(*shim));
	if (!shim) {
		snprintf(err, errlen, "out of memory loading the BPF shim");
		errno = ENOMEM;
		return NULL;
	}
	shim->wake_epfd = -1;
	cpus = ring_cpus_of(opts, &ncpus, &ret);
	if (!cpus) {
		snprintf(err, errlen, "no CPUs to give ring buffers: %s", strerror(-ret));
		goto fail;
	}
	shim->nr_rings = ncpus;
	total_bytes = opts->ringbuf_bytes ? opts->ringbuf_bytes : DEFAULT_RINGBUF_BYTES;
	ret = next_pow2_pages(total_bytes / ncpus < MIN_RING_BYTES ? MIN_RING_BYTES
								   : total_bytes / ncpus,
			      &ring_bytes);
	if (ret) {
		snprintf(err, errlen, "ring buffer size %llu is too large (max 2 GiB per CPU)",
			 (unsigned long long)total_bytes);
		goto fail;
	}
	shim->variant = opts->variant;
	if (shim->variant == PP_SHIM_AUTO)
		shim->variant = pp_kernel_has_cast_to_kern_ctx() ? PP_SHIM_KCTX : PP_SHIM_CORE;
	shim->has_cookie = kernel_has_attach_cookie();
	if (opts->filter_cgroups) {
		shim->cg_mode =
		    !opts->cgroup_filter_in_user_space && kernel_has_ancestor_cgroup_id()
			? PP_SHIM_CGROUP_KERNEL
			: PP_SHIM_CGROUP_USER;
	}
	if (shim->cg_mode == PP_SHIM_CGROUP_USER) {
		shim->ucg = user_cgroup_filter_new(opts->cgroup2_root, &ret);
		if (!shim->ucg) {
			snprintf(err, errlen,
				 "cannot filter cgroups in user space (no cgroup2 mount to open: "
				 "%s)",
				 strerror(-ret));
			goto fail;
		}
	}

	if (shim->variant == PP_SHIM_KCTX) {
		shim->kctx = shim_kctx__open();
		if (!shim->kctx)
			goto open_failed;
		shim->obj = shim->kctx->obj;
		cfg = (struct pp_shim_config *)&shim->kctx->rodata->shim_config;
	} else {
		shim->core = shim_core__open();
		if (!shim->core)
			goto open_failed;
		shim->obj = shim->core->obj;
		cfg = (struct pp_shim_config *)&shim->core->rodata->shim_config;
	}
	set_config(cfg, opts, ring_bytes, shim->has_cookie, shim->cg_mode);
	cfg->fallback_ring = (uint32_t)cpus[0];

	tables = opts->ustack_walk == PP_USTACK_AUTO || opts->ustack_walk == PP_USTACK_DWARF;
	/* one sample program: the frame-pointer one, or the table walker with bpf_loop (5.17+)
	 * or with a bounded loop (before, or when asked) */
	pick = !tables ? 0
	       : opts->unwind_bounded_loop ||
		       libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) <= 0
		   ? 2
		   : 1;
	all_progs = 1;
	for (int i = 0; i < 3; i++) {
		struct bpf_program *p =
		    bpf_object__find_program_by_name(shim->obj, sample_progs[i]);

		all_progs &= p != NULL;
		if (i == pick)
			shim->on_sample = p;
		else if (p)
			bpf_program__set_autoload(p, false);
	}
	shim->table_loop = pick == 2;
	shim->unwind_rows = bpf_object__find_map_by_name(shim->obj, "unwind_rows");
	shim->unwind_rules = bpf_object__find_map_by_name(shim->obj, "unwind_rules");
	shim->unwind_procs = bpf_object__find_map_by_name(shim->obj, "unwind_procs");
	shim->unwind_mappings = bpf_object__find_map_by_name(shim->obj, "unwind_mappings");
	on_fork = bpf_object__find_program_by_name(shim->obj, "on_fork");
	on_exec = bpf_object__find_program_by_name(shim->obj, "on_exec");
	on_exit = bpf_object__find_program_by_name(shim->obj, "on_exit");
	on_wakeup = bpf_object__find_program_by_name(shim->obj, "on_wakeup");
	on_wakeup_deferred = bpf_object__find_program_by_name(shim->obj, "on_wakeup_deferred");
	on_exit_deferred = bpf_object__find_program_by_name(shim->obj, "on_exit_deferred");
	for (size_t i = 0; i < NR_SWITCH_PROGS; i++) {
		switch_progs[i] = bpf_object__find_program_by_name(shim->obj, switch_prog_names[i]);
		all_progs &= switch_progs[i] != NULL;
	}
	shim->off_cpu_waiting = bpf_object__find_map_by_name(shim->obj, "off_cpu_waiting");
	shim->off_cpu_records = bpf_object__find_map_by_name(shim->obj, "off_cpu_records");
	shim->off_cpu_tasks = bpf_object__find_map_by_name(shim->obj, "off_cpu_tasks");
	shim->rings = bpf_object__find_map_by_name(shim->obj, "rings");
	shim->counters = bpf_object__find_map_by_name(shim->obj, "counters");
	shim->target_tgids = bpf_object__find_map_by_name(shim->obj, "target_tgids");
	shim->cgroup_filter = bpf_object__find_map_by_name(shim->obj, "cgroup_filter");
	shim->cgroup_levels = bpf_object__find_map_by_name(shim->obj, "cgroup_levels");
	if (!shim->on_sample || !on_fork || !on_exec || !on_exit || !on_wakeup || !shim->rings ||
	    !shim->counters || !shim->target_tgids || !shim->cgroup_filter ||
	    !shim->cgroup_levels || !all_progs || !shim->unwind_rows || !shim->unwind_rules ||
	    !shim->unwind_procs || !shim->unwind_mappings || !shim->off_cpu_waiting ||
	    !shim->off_cpu_records || !shim->off_cpu_tasks || !on_wakeup_deferred ||
	    !on_exit_deferred) {
		snprintf(err, errlen, "BPF shim object is incomplete (build mismatch)");
		ret = -ENOENT;
		goto fail;
	}
	/* the table budget: rows in one array map; without tables no memory for them */
	bpf_map__set_max_entries(shim->unwind_rows,
				 tables ? unwind_rows_for(opts->unwind_table_bytes) / 2 : 1);
	if (!tables) {
		bpf_map__set_max_entries(shim->unwind_rules, 1);
		bpf_map__set_max_entries(shim->unwind_procs, 1);
		bpf_map__set_max_entries(shim->unwind_mappings, 1);
	}
	/*
	 * off-CPU: the switch tracepoint, and the program that runs as a task resumes (where
	 * there is none, the tracepoint takes the stacks); the table walker's where the sample
	 * program is bpf_loop's
	 */
	shim->off_cpu_at = opts->off_cpu_every ? off_cpu_stacks_at(opts->off_cpu_stacks, pick == 1)
					       : PP_OFF_CPU_AT_RESUME;
	if (shim->off_cpu_at == PP_OFF_CPU_AT_SCHEDULE_RETURN &&
	    opts->off_cpu_stacks == PP_SHIM_OFF_CPU_FEXIT &&
	    (ret = pp_kernel_can_fexit("schedule")) != 0) {
		snprintf(err, errlen,
			 "off-CPU stacks at schedule's return: this kernel lets no BPF trampoline "
			 "(fexit) attach to schedule(): %s",
			 strerror(-ret));
		goto fail;
	}
	deferred = shim->off_cpu_at == PP_OFF_CPU_AT_USER_RETURN;
	switch_out = deferred ? switch_progs[6]
			      : switch_progs[shim->off_cpu_at != PP_OFF_CPU_AT_RESUME && pick == 1];
	switch_in = shim->off_cpu_at == PP_OFF_CPU_AT_RESUME ? switch_progs[2 + (pick == 1)]
		    : shim->off_cpu_at == PP_OFF_CPU_AT_SCHEDULE_RETURN
			? switch_progs[4 + (pick == 1)]
		    : deferred ? switch_progs[7]
			       : NULL;
	for (size_t i = 0; i < NR_SWITCH_PROGS; i++)
		bpf_program__set_autoload(switch_progs[i],
					  opts->off_cpu_every && (switch_progs[i] == switch_out ||
								  switch_progs[i] == switch_in));
	bpf_program__set_autoload(on_wakeup, opts->off_cpu_every != 0 && !deferred);
	bpf_program__set_autoload(on_wakeup_deferred, opts->off_cpu_every != 0 && deferred);
	bpf_program__set_autoload(on_exit_deferred, opts->off_cpu_every != 0 && deferred);
	/* task storage is 5.11's: a kernel that cannot defer never creates it */
	bpf_map__set_autocreate(shim->off_cpu_tasks, opts->off_cpu_every != 0 && deferred);
	cfg->off_cpu_stacks_at = shim->off_cpu_at;
	if (!opts->off_cpu_every || deferred)
		bpf_map__set_max_entries(shim->off_cpu_waiting, 1);
	if (shim->off_cpu_at == PP_OFF_CPU_AT_RESUME)
		bpf_map__set_max_entries(shim->off_cpu_records, 1);
	bpf_program__set_autoload(on_fork, opts->filter_tgids);
	bpf_program__set_autoload(on_exec, opts->track_tasks);
	bpf_program__set_autoload(on_exit, opts->track_tasks || opts->filter_tgids);
	/* An unused filter map need not hold its preallocated entries. */
	if (shim->cg_mode != PP_SHIM_CGROUP_KERNEL)
		bpf_map__set_max_entries(shim->cgroup_filter, 1);
	ret = create_rings(shim, cpus, ring_bytes, err, errlen);
	if (ret)
		goto fail;
	/* Inner maps must match the template: one of the rings is it. */
	ret = bpf_map__set_inner_map_fd(shim->rings, shim->ring_fds[0]);
	if (!ret)
		ret = bpf_map__set_max_entries(shim->rings, (uint32_t)cpus[ncpus - 1] + 1);
	if (ret) {
		snprintf(err, errlen, "cannot set up the map of per-CPU ring buffers: %s",
			 strerror(-ret));
		goto fail;
	}

	ret = bpf_object__load(shim->obj);
	if (ret) {
		snprintf(err, errlen,
			 "the kernel rejected the BPF shim (%s variant): %s; needs kernel BTF, "
			 "CAP_BPF and CAP_PERFMON (or root); rerun with -v for the verifier log",
			 shim->variant == PP_SHIM_KCTX ? "kctx" : "core", strerror(-ret));
		goto fail;
	}
	if (opts->filter_tgids && !(shim->task_links[0] = bpf_program__attach(on_fork))) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the fork tracker: %s", strerror(-ret));
		goto fail;
	}
	if (opts->track_tasks && !(shim->task_links[1] = bpf_program__attach(on_exec))) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the exec tracker: %s", strerror(-ret));
		goto fail;
	}
	if ((opts->track_tasks || opts->filter_tgids) &&
	    !(shim->task_links[2] = bpf_program__attach(on_exit))) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the exit tracker: %s", strerror(-ret));
		goto fail;
	}
	ret = install_rings(shim, cpus, err, errlen);
	if (ret)
		goto fail;
	if (opts->off_cpu_every) {
		ret = attach_off_cpu(shim, switch_out, switch_in,
				     deferred ? on_wakeup_deferred : on_wakeup,
				     deferred ? on_exit_deferred : NULL, err, errlen);
		if (ret)
			goto fail;
	}
	free(cpus);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	shim->load_ns =
	    (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
	return shim;

open_failed:
	ret = -errno;
	snprintf(err, errlen, "cannot open the BPF shim: %s", strerror(-ret));
fail:
	free(cpus);
	pp_shim_free(shim);
	errno = ret < 0 ? -ret : EINVAL;
	return NULL;
}

void pp_shim_detach_all(struct pp_shim *shim)
{
	for (size_t i = 0; i < shim->nlinks; i++)
		bpf_link__destroy(shim->links[i]);
	shim->nlinks = 0;
	for (size_t i = 0; i < sizeof(shim->off_cpu_links) / sizeof(shim->off_cpu_links[0]); i++) {
		bpf_link__destroy(shim->off_cpu_links[i]);
		shim->off_cpu_links[i] = NULL;
	}
}

const char *pp_shim_switch_in_at(const struct pp_shim *shim)
{
	return shim->switch_in_at[0] ? shim->switch_in_at : NULL;
}

void pp_shim_free(struct pp_shim *shim)
{
	if (!shim)
		return;
	pp_shim_detach_all(shim);
	free(shim->links);
	for (size_t i = 0; i < sizeof(shim->task_links) / sizeof(shim->task_links[0]); i++)
		bpf_link__destroy(shim->task_links[i]);
	ring_buffer__free(shim->rb);
	if (shim->wake_epfd >= 0)
		close(shim->wake_epfd);
	for (size_t i = 0; shim->ring_fds && i < shim->nr_rings; i++)
		if (shim->ring_fds[i] >= 0)
			close(shim->ring_fds[i]);
	free(shim->ring_fds);
	/* Destroying the skeleton also destroys links the skeleton attached (none here). */
	if (shim->kctx)
		shim_kctx__destroy(shim->kctx);
	if (shim->core)
		shim_core__destroy(shim->core);
	user_cgroup_filter_free(shim->ucg);
	free(shim);
}

enum pp_shim_variant pp_shim_loaded_variant(const struct pp_shim *shim)
{
	return shim->variant;
}

int pp_shim_has_cookie(const struct pp_shim *shim)
{
	return shim->has_cookie;
}

size_t pp_shim_nr_rings(const struct pp_shim *shim)
{
	return shim->nr_rings;
}

int pp_shim_sample_prog_fd(const struct pp_shim *shim)
{
	return bpf_program__fd(shim->on_sample);
}

int pp_shim_unwind_rows_fd(const struct pp_shim *shim, uint32_t *nr_rows)
{
	if (nr_rows)
		*nr_rows = bpf_map__max_entries(shim->unwind_rows) * 2; /* words, in pairs */
	return bpf_map__fd(shim->unwind_rows);
}

int pp_shim_unwind_rules_fd(const struct pp_shim *shim)
{
	return bpf_map__fd(shim->unwind_rules);
}

int pp_shim_table_walker_bounded(const struct pp_shim *shim)
{
	return shim->table_loop;
}

int pp_shim_unwind_procs_fd(const struct pp_shim *shim)
{
	return bpf_map__fd(shim->unwind_procs);
}

int pp_shim_unwind_mappings_fd(const struct pp_shim *shim, uint32_t *nr_slots)
{
	if (nr_slots)
		*nr_slots = bpf_map__max_entries(shim->unwind_mappings);
	return bpf_map__fd(shim->unwind_mappings);
}

uint32_t pp_unwind_rows_for_bytes(uint64_t bytes)
{
	return unwind_rows_for(bytes);
}

int pp_shim_add_target(struct pp_shim *shim, uint32_t tgid)
{
	uint8_t one = 1;

	return bpf_map__update_elem(shim->target_tgids, &tgid, sizeof(tgid), &one, sizeof(one),
				    BPF_ANY);
}

/*
 * Task storage has no keys to walk: the calling process's threads are looked up by pidfd
 * (a thread's own from 6.9: PIDFD_THREAD; before, the main thread's only).
 */
static int off_cpu_tasks_waiting(const struct pp_shim *shim, uint32_t *tids, size_t max)
{
	struct dirent *de;
	DIR *dir = opendir("/proc/self/task");
	int n = 0;

	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		struct pp_off_cpu_task w;
		long tid = strtol(de->d_name, NULL, 10);
		int fd, err;

		if (tid <= 0)
			continue;
		fd = (int)syscall(SYS_pidfd_open, (pid_t)tid, tid == getpid() ? 0 : O_EXCL);
		if (fd < 0)
			continue;
		err = bpf_map__lookup_elem(shim->off_cpu_tasks, &fd, sizeof(fd), &w, sizeof(w), 0);
		close(fd);
		if (err || w.phase == PP_OC_IDLE)
			continue;
		if ((size_t)n < max)
			tids[n] = (uint32_t)tid;
		n++;
	}
	closedir(dir);
	return n;
}

int pp_shim_off_cpu_waiting(const struct pp_shim *shim, uint32_t *tids, size_t max)
{
	uint32_t key, next;
	int n = 0, err;

	if (shim->off_cpu_at == PP_OFF_CPU_AT_USER_RETURN)
		return off_cpu_tasks_waiting(shim, tids, max);

	for (err = bpf_map__get_next_key(shim->off_cpu_waiting, NULL, &next, sizeof(next)); !err;
	     err = bpf_map__get_next_key(shim->off_cpu_waiting, &key, &next, sizeof(next))) {
		if ((size_t)n < max)
			tids[n] = next;
		n++;
		key = next;
	}
	return err == -ENOENT ? n : err;
}

int pp_shim_remove_target(struct pp_shim *shim, uint32_t tgid)
{
	return bpf_map__delete_elem(shim->target_tgids, &tgid, sizeof(tgid), 0);
}

bool pp_shim_is_target(struct pp_shim *shim, uint32_t tgid)
{
	uint8_t one;

	return bpf_map__lookup_elem(shim->target_tgids, &tgid, sizeof(tgid), &one, sizeof(one),
				    0) == 0;
}

int pp_shim_add_cgroup(struct pp_shim *shim, uint64_t cgroup_id, uint32_t level)
{
	uint32_t zero = 0, mask = 0;
	uint8_t one = 1;
	int ret;

	if (shim->cg_mode == PP_SHIM_CGROUP_OFF)
		return -ENOTCONN;
	if (level > PP_CGROUP_MAX_LEVEL)
		return -ERANGE;
	if (shim->cg_mode == PP_SHIM_CGROUP_USER) {
		struct user_cgroup_filter *f = shim->ucg;

		if (cgroup_is_selected(f, cgroup_id))
			return 0;
		if (f->nselected == PP_CGROUP_FILTER_MAX)
			return -E2BIG;
		f->selected[f->nselected++] = cgroup_id;
		/* Remembered verdicts were taken without this cgroup. */
		memset(f->verdicts, 0, sizeof(f->verdicts));
		return 0;
	}
	/* The id first: a sample that sees the new level finds its cgroup too. */
	ret = bpf_map__update_elem(shim->cgroup_filter, &cgroup_id, sizeof(cgroup_id), &one,
				   sizeof(one), BPF_ANY);
	if (ret)
		return ret;
	ret =
	    bpf_map__lookup_elem(shim->cgroup_levels, &zero, sizeof(zero), &mask, sizeof(mask), 0);
	if (ret)
		return ret;
	mask |= 1u << level;
	return bpf_map__update_elem(shim->cgroup_levels, &zero, sizeof(zero), &mask, sizeof(mask),
				    BPF_ANY);
}

enum pp_shim_cgroup_mode pp_shim_cgroup_filter_mode(const struct pp_shim *shim)
{
	return shim->cg_mode;
}

int pp_shim_attach(struct pp_shim *shim, int perf_fd, uint32_t cookie)
{
	LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = shim->has_cookie ? cookie : 0);
	struct bpf_link *link;

	if (shim->nlinks == shim->links_cap) {
		size_t cap = shim->links_cap + MAX_LINKS_GROWTH;
		struct bpf_link **links = realloc(shim->links, cap * sizeof(*links));

		if (!links)
			return -ENOMEM;
		shim->links = links;
		shim->links_cap = cap;
	}
	/* libbpf enables the event once the program is attached. */
	link = bpf_program__attach_perf_event_opts(shim->on_sample, perf_fd, &opts);
	if (!link)
		return -errno;
	shim->links[shim->nlinks++] = link;
	return 0;
}

/*
 * 200, not 5, 20, 50 or 100: a process's list is written up to 200 ms later, and the samples
 * it takes meanwhile carry a copy of their stack, walked once it is (PP_SF_USTACK_RAW), so
 * they lose no frames. Under a loop starting 100 programs a second (bench_churn.sh) 20 took a
 * quarter less CPU than 5, and 50 a fifth less than 20 at 20 Hz (a seventh at 99 Hz, where a
 * sixth more samples came as copies). 100 against 50, side by side (bench/ab_churn.sh, 5
 * rounds): 0.76 of the CPU at 20 Hz, 0.78 at 99 Hz, for a sixth more copies again, of which
 * 1.5-1.8% of the samples (against 0.9-1.2%) ended before their stack did. 200 against 100:
 * 0.94 at 99 Hz (4 rounds), for copies again. Later, with the poll's timeout 200 ms too
 * (PP_SHIM_POLL_PROMPT_MS, the loop woke at most 1000 / 100 times a second either way):
 * 0.83-0.86 at 99 Hz (3 rounds), a quarter more samples before their process's list (2,146-
 * 2,165 -> 2,679-2,804 a capture), their copies as often whole (96.3%).
 */
#define WAKE_QUIET_MS 200
/* A wake fd that fired this recently keeps the polls prompt (pp_shim_poll_interval_ms). */
#define SOURCE_ACTIVE_MS 2000

int pp_shim_add_wake_fd(struct pp_shim *shim, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN};

	if (shim->wake_epfd < 0) {
		int epfd = epoll_create1(EPOLL_CLOEXEC);

		if (epfd < 0)
			return -errno;
		/* libbpf's own epoll (its events name its rings: no foreign fd goes there) */
		ev.data.fd = ring_buffer__epoll_fd(shim->rb);
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, ev.data.fd, &ev)) {
			int err = -errno;

			close(epfd);
			return err;
		}
		shim->wake_epfd = epfd;
	}
	ev.data.fd = fd;
	return epoll_ctl(shim->wake_epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int pp_shim_poll_interval_ms(const struct pp_shim *shim)
{
	if (shim->wake_epfd < 0)
		return PP_SHIM_POLL_PROMPT_MS;
	if (pp_clock_ns(CLOCK_MONOTONIC) - shim->source_woke_ns < SOURCE_ACTIVE_MS * 1000000ull)
		return PP_SHIM_POLL_PROMPT_MS;
	return PP_SHIM_POLL_QUIET_MS;
}

int pp_shim_poll(struct pp_shim *shim, int timeout_ms, pp_shim_record_fn cb, void *ctx)
{
	int polled = 0, consumed;
	bool waited = false;

	shim->cb = cb;
	shim->cb_ctx = ctx;
	if (shim->wake_epfd >= 0 && timeout_ms) {
		struct epoll_event evs[8];
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		int n;

		if (now >= shim->wake_quiet_until_ns) {
			/* woken by the rings or another source; either way the rings are read */
			n = epoll_wait(shim->wake_epfd, evs, 8, timeout_ms);
			if (n < 0 && errno != EINTR)
				return -errno;
			/*
			 * The other sources are not watched for a while after waking: what they
			 * report meanwhile (a process's mappings, one after another) is read in
			 * one go, and a node starting hundreds of programs a second wakes the
			 * collector at most 1000 / WAKE_QUIET_MS times a second for them.
			 */
			if (n > 0)
				shim->wake_quiet_until_ns = now + WAKE_QUIET_MS * 1000000ull;
			for (int i = 0; i < n; i++)
				if (evs[i].data.fd != ring_buffer__epoll_fd(shim->rb))
					shim->source_woke_ns = now;
			waited = true;
		} else {
			int left = (int)((shim->wake_quiet_until_ns - now + 999999) / 1000000);

			timeout_ms = timeout_ms < 0 || left < timeout_ms ? left : timeout_ms;
		}
	}
	/* woken through the epoll holding the rings': no second wait, the rings are read below */
	if (!waited)
		polled = ring_buffer__poll(shim->rb, timeout_ms);
	if (polled < 0)
		return polled;
	/*
	 * The shim suppresses wake-ups until a fill level (batching), so records written since
	 * the last forced wake-up are only found by consuming without a notification.
	 */
	consumed = ring_buffer__consume(shim->rb);
	if (consumed < 0)
		return consumed;
	return polled + consumed;
}

int pp_shim_read_counters(const struct pp_shim *shim, uint64_t out[PP_CNT__MAX])
{
	int ncpus = libbpf_num_possible_cpus();
	size_t per_cpu = PP_CNT__MAX * sizeof(uint64_t);
	uint32_t zero = 0;
	uint64_t *vals;
	int ret;

	if (ncpus <= 0)
		return ncpus < 0 ? ncpus : -EINVAL;
	/* One value per CPU holding every counter (see the shim's struct pp_counters). */
	vals = calloc((size_t)ncpus, per_cpu);
	if (!vals)
		return -ENOMEM;
	ret = bpf_map__lookup_elem(shim->counters, &zero, sizeof(zero), vals,
				   (size_t)ncpus * per_cpu, 0);
	for (uint32_t k = 0; k < PP_CNT__MAX; k++) {
		out[k] = 0;
		for (int c = 0; !ret && c < ncpus; c++)
			out[k] += vals[(size_t)c * PP_CNT__MAX + k];
	}
	out[PP_CNT_CGROUP_FILTERED] += shim->user_cgroup_filtered;
	free(vals);
	return ret;
}

uint32_t pp_shim_verified_insns(const struct pp_shim *shim)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (!shim || bpf_obj_get_info_by_fd(pp_shim_sample_prog_fd(shim), &info, &len) != 0)
		return 0;
	return info.verified_insns;
}

uint64_t pp_shim_load_ns(const struct pp_shim *shim)
{
	return shim ? shim->load_ns : 0;
}
