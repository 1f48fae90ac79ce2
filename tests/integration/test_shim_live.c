/*
 * The shim on this kernel, for real: every program variant (kctx, core) in every
 * configuration passes the verifier, attaches to cpu-clock events, and the records it writes
 * decode to this process's samples with sane fields. Needs root and BPF; skips otherwise.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "record_decode.h"
#include "shim_loader.h"

#define PERF_MEM_NA_VALUE 0x1e05080021ull /* PERF_MEM_S(OP,NA)|LVL NA|SNOOP NA|LOCK NA|TLB NA */

struct collected {
	struct pp_decode_stats stats;
	unsigned long own_samples, with_ustack, with_kstack, kernel_ip, mem_na, bad_cpu;
	unsigned long bad_cookie, task_events;
	uint32_t expected_cookie;
};

static int on_record(void *ctx, const void *data, size_t len)
{
	struct collected *c = ctx;
	struct pp_decoded d;

	if (pp_record_decode(data, len, &d, &c->stats))
		return 0;
	if (d.kind == PP_DECODED_TASK) {
		c->task_events++;
		return 0;
	}
	if (d.sample.tgid != (uint32_t)getpid())
		return 0;
	c->own_samples++;
	if (d.sample.nr_ustack)
		c->with_ustack++;
	if (d.sample.nr_kstack)
		c->with_kstack++;
	if (d.sample.flags & PP_SF_KERNEL_IP)
		c->kernel_ip++;
	if ((d.sample.flags & PP_SF_MEM_FIELDS) && d.sample.data_src == PERF_MEM_NA_VALUE &&
	    d.sample.addr == 0)
		c->mem_na++;
	if (d.sample.cpu >= 1024)
		c->bad_cpu++;
	if (d.sample.event_cookie != c->expected_cookie)
		c->bad_cookie++;
	return 0;
}

static int open_cpu_clock(int cpu, int mem_bits)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = 2000;
	attr.sample_type = PERF_SAMPLE_IP;
	if (mem_bits)
		attr.sample_type |=
		    PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT;
	attr.disabled = 1;
	return (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void spin_ms(long ms)
{
	struct timespec a, b;
	volatile unsigned long x = 0;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		/* Some time in the kernel too, so kernel stacks are exercised. */
		getppid();
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static int can_run(void)
{
	if (geteuid() != 0) {
		printf("skipped: needs root (BPF and perf events)\n");
		return 0;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		printf("skipped: no kernel BTF at /sys/kernel/btf/vmlinux\n");
		return 0;
	}
	return 1;
}

static void run_variant(enum pp_shim_variant variant, int stacks, int mem, int filter)
{
	struct pp_shim_opts opts = {
	    .variant = variant,
	    .kstack_depth = stacks ? PP_MAX_STACK_DEPTH : 0,
	    .ustack_depth = stacks ? 32 : 0,
	    .read_mem_fields = mem,
	    .filter_tgids = filter,
	    .track_tasks = 1,
	    .ringbuf_bytes = 1 << 20,
	};
	struct collected c = {.expected_cookie = 7};
	char err[512] = "";
	struct pp_shim *shim;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), fds[256], nfd = 0;

	fprintf(stderr, "variant=%s stacks=%d mem=%d filter=%d\n", pp_shim_variant_name(variant),
		stacks, mem, filter);
	shim = pp_shim_load(&opts, err, sizeof(err));
	if (!shim)
		fprintf(stderr, "  load failed: %s\n", err);
	REQUIRE(shim != NULL);
	CHECK(pp_shim_loaded_variant(shim) == variant);
	if (filter)
		CHECK(pp_shim_add_target(shim, (uint32_t)getpid()) == 0);
	if (!pp_shim_has_cookie(shim))
		c.expected_cookie = 0;
	for (int cpu = 0; cpu < ncpu && nfd < 256; cpu++) {
		int fd = open_cpu_clock(cpu, mem);

		if (fd < 0)
			continue;
		fds[nfd++] = fd;
		CHECK(pp_shim_attach(shim, fd, 7) == 0);
	}
	REQUIRE(nfd > 0);
	spin_ms(400);
	for (int i = 0; i < 20; i++)
		if (pp_shim_poll(shim, 50, on_record, &c) < 0)
			break;
	pp_shim_detach_all(shim);
	while (pp_shim_poll(shim, 0, on_record, &c) > 0)
		;

	uint64_t counters[PP_CNT__MAX];
	CHECK(pp_shim_read_counters(shim, counters) == 0);
	fprintf(stderr, "  own=%lu ustack=%lu kstack=%lu kip=%lu memna=%lu emitted=%llu\n",
		c.own_samples, c.with_ustack, c.with_kstack, c.kernel_ip, c.mem_na,
		(unsigned long long)counters[PP_CNT_EMITTED]);
	/* 400 ms at 2 kHz on the CPU this spins on: hundreds of samples. */
	CHECK(c.own_samples >= 100);
	CHECK(c.stats.bad_size + c.stats.bad_stack + c.stats.bad_type + c.stats.bad_version +
		  c.stats.too_short ==
	      0);
	CHECK(c.bad_cpu == 0);
	CHECK(c.bad_cookie == 0);
	CHECK(counters[PP_CNT_EMITTED] >= c.own_samples);
	CHECK(counters[PP_CNT_SAMPLES] >= counters[PP_CNT_EMITTED]);
	if (stacks) {
		CHECK(c.with_ustack >= c.own_samples * 9 / 10);
		if (c.kernel_ip)
			CHECK(c.with_kstack >= c.kernel_ip);
	} else {
		CHECK(c.with_ustack == 0 && c.with_kstack == 0);
	}
	/* On 6.3+ perf_prepare_sample fills requested fields before the program runs. */
	if (mem)
		CHECK(c.mem_na == c.own_samples);
	if (filter)
		CHECK(counters[PP_CNT_FILTERED] + counters[PP_CNT_EMITTED] ==
		      counters[PP_CNT_SAMPLES]);
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	pp_shim_free(shim);
}

TEST(kctx_variants)
{
	if (!can_run())
		SKIP("needs root, BPF and BTF");
	if (!pp_kernel_has_cast_to_kern_ctx())
		SKIP("kernel has no bpf_cast_to_kern_ctx (before 6.2): kctx variant not loadable");
	run_variant(PP_SHIM_KCTX, 1, 0, 0);
	run_variant(PP_SHIM_KCTX, 1, 1, 1);
	run_variant(PP_SHIM_KCTX, 0, 1, 0);
}

TEST(core_variants)
{
	if (!can_run())
		SKIP("needs root, BPF and BTF");
	run_variant(PP_SHIM_CORE, 1, 0, 0);
	run_variant(PP_SHIM_CORE, 1, 1, 1);
	run_variant(PP_SHIM_CORE, 0, 1, 0);
}

TEST(decoder_rejects_foreign_records)
{
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	unsigned char buf[256] = {0};
	struct pp_rec_hdr h = {.type = 99, .version = PP_RECORD_ABI_VERSION, .size = 16};

	memcpy(buf, &h, sizeof(h));
	CHECK(pp_record_decode(buf, 16, &d, &st) == -EOPNOTSUPP);
	CHECK(st.bad_type == 1);
}

TEST_LIST = {
    {"kctx_variants", kctx_variants},
    {"core_variants", core_variants},
    {"decoder_rejects_foreign_records", decoder_rejects_foreign_records},
};
TEST_MAIN()
