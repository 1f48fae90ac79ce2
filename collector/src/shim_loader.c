/* Loading, attaching and draining the in-kernel shim; see shim_loader.h. */
#include "shim_loader.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_core.skel.h"
#include "shim_kctx.skel.h"

#define DEFAULT_RINGBUF_BYTES (4ull << 20)
#define MAX_LINKS_GROWTH 64

struct pp_shim {
	enum pp_shim_variant variant;
	struct shim_kctx *kctx;
	struct shim_core *core;
	struct bpf_object *obj;
	struct bpf_program *on_sample;
	struct bpf_map *events, *counters, *target_tgids;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nlinks, links_cap;
	int has_cookie;
	pp_shim_record_fn cb;
	void *cb_ctx;
};

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

static int kernel_has_attach_cookie(void)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_attach_cookie,
				       NULL) == 1;
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
		       uint64_t rb_bytes, int has_cookie)
{
	cfg->abi_version = PP_RECORD_ABI_VERSION;
	cfg->kstack_depth =
	    opts->kstack_depth > PP_MAX_STACK_DEPTH ? PP_MAX_STACK_DEPTH : opts->kstack_depth;
	cfg->ustack_depth =
	    opts->ustack_depth > PP_MAX_STACK_DEPTH ? PP_MAX_STACK_DEPTH : opts->ustack_depth;
	cfg->read_mem_fields = !!opts->read_mem_fields;
	cfg->filter_tgids = !!opts->filter_tgids;
	cfg->use_attach_cookie = !!has_cookie;
	cfg->wakeup_bytes = opts->wakeup_bytes ? opts->wakeup_bytes : rb_bytes / 4;
}

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct pp_shim *shim = ctx;

	return shim->cb(shim->cb_ctx, data, size);
}

struct pp_shim *pp_shim_load(const struct pp_shim_opts *opts, char *err, size_t errlen)
{
	struct pp_shim *shim;
	struct pp_shim_config *cfg;
	struct bpf_program *on_fork, *on_exec, *on_exit;
	uint64_t rb_bytes;
	int ret;

	shim = calloc(1, sizeof(*shim));
	if (!shim) {
		snprintf(err, errlen, "out of memory loading the BPF shim");
		errno = ENOMEM;
		return NULL;
	}
	ret = next_pow2_pages(opts->ringbuf_bytes ? opts->ringbuf_bytes : DEFAULT_RINGBUF_BYTES,
			      &rb_bytes);
	if (ret) {
		snprintf(err, errlen, "ring buffer size %llu is too large (max 2 GiB)",
			 (unsigned long long)opts->ringbuf_bytes);
		goto fail;
	}
	shim->variant = opts->variant;
	if (shim->variant == PP_SHIM_AUTO)
		shim->variant = pp_kernel_has_cast_to_kern_ctx() ? PP_SHIM_KCTX : PP_SHIM_CORE;
	shim->has_cookie = kernel_has_attach_cookie();

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
	set_config(cfg, opts, rb_bytes, shim->has_cookie);

	shim->on_sample = bpf_object__find_program_by_name(shim->obj, "on_sample");
	on_fork = bpf_object__find_program_by_name(shim->obj, "on_fork");
	on_exec = bpf_object__find_program_by_name(shim->obj, "on_exec");
	on_exit = bpf_object__find_program_by_name(shim->obj, "on_exit");
	shim->events = bpf_object__find_map_by_name(shim->obj, "events");
	shim->counters = bpf_object__find_map_by_name(shim->obj, "counters");
	shim->target_tgids = bpf_object__find_map_by_name(shim->obj, "target_tgids");
	if (!shim->on_sample || !on_fork || !on_exec || !on_exit || !shim->events ||
	    !shim->counters || !shim->target_tgids) {
		snprintf(err, errlen, "BPF shim object is incomplete (build mismatch)");
		ret = -ENOENT;
		goto fail;
	}
	bpf_program__set_autoload(on_fork, opts->filter_tgids);
	bpf_program__set_autoload(on_exec, opts->track_tasks);
	bpf_program__set_autoload(on_exit, opts->track_tasks || opts->filter_tgids);
	ret = bpf_map__set_max_entries(shim->events, (uint32_t)rb_bytes);
	if (ret) {
		snprintf(err, errlen, "cannot size the BPF ring buffer to %llu bytes: %s",
			 (unsigned long long)rb_bytes, strerror(-ret));
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
	if (on_fork && opts->filter_tgids && !bpf_program__attach(on_fork)) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the fork tracker: %s", strerror(-ret));
		goto fail;
	}
	if (opts->track_tasks && !bpf_program__attach(on_exec)) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the exec tracker: %s", strerror(-ret));
		goto fail;
	}
	if ((opts->track_tasks || opts->filter_tgids) && !bpf_program__attach(on_exit)) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach the exit tracker: %s", strerror(-ret));
		goto fail;
	}
	shim->rb = ring_buffer__new(bpf_map__fd(shim->events), ring_cb, shim, NULL);
	if (!shim->rb) {
		ret = -errno;
		snprintf(err, errlen, "cannot map the BPF ring buffer: %s", strerror(-ret));
		goto fail;
	}
	return shim;

open_failed:
	ret = -errno;
	snprintf(err, errlen, "cannot open the BPF shim: %s", strerror(-ret));
fail:
	pp_shim_free(shim);
	errno = ret < 0 ? -ret : EINVAL;
	return NULL;
}

void pp_shim_detach_all(struct pp_shim *shim)
{
	for (size_t i = 0; i < shim->nlinks; i++)
		bpf_link__destroy(shim->links[i]);
	shim->nlinks = 0;
}

void pp_shim_free(struct pp_shim *shim)
{
	if (!shim)
		return;
	pp_shim_detach_all(shim);
	free(shim->links);
	ring_buffer__free(shim->rb);
	/* Destroying the skeleton also destroys links the skeleton attached (none here). */
	if (shim->kctx)
		shim_kctx__destroy(shim->kctx);
	if (shim->core)
		shim_core__destroy(shim->core);
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

int pp_shim_add_target(struct pp_shim *shim, uint32_t tgid)
{
	uint8_t one = 1;

	return bpf_map__update_elem(shim->target_tgids, &tgid, sizeof(tgid), &one, sizeof(one),
				    BPF_ANY);
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

int pp_shim_poll(struct pp_shim *shim, int timeout_ms, pp_shim_record_fn cb, void *ctx)
{
	int polled, consumed;

	shim->cb = cb;
	shim->cb_ctx = ctx;
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
	free(vals);
	return ret;
}
