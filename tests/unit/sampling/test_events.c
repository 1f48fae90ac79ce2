/*
 * The event ladder against recorded machines (tests/data/sysfs/<machine>) and scripted errno
 * sequences taken from the kernel facts (shared/reference/notes/kernel-pebs-bpf.md): every
 * attr passed to the opener is recorded and asserted, as are the chosen event and reason.
 * One live case runs the real perf_event_open on this machine.
 */
#include "check.h"
#include "sampling/events.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define MACHINE(m) PP_TEST_DATA_DIR "/sysfs/" m
#define MAX_CALLS 128

struct call {
	struct perf_event_attr attr;
	pid_t pid;
	int cpu, group_fd, ret;
	unsigned long flags;
};

/* A scripted opener: the first nr_script calls answer script[i] (0 = success); later calls
 * succeed unless they hit fail_cpu. Successful opens hand out real fds on /dev/null so the
 * set's close path is exercised for real. */
struct fake {
	struct call calls[MAX_CALLS];
	int n;
	int script[16];
	int nr_script;
	int fail_cpu, fail_errno;
	int fail_type_hw;     /* answer ENOENT for PERF_TYPE_HARDWARE/RAW-type events, like a VM */
	int no_weight_struct; /* EINVAL for PERF_SAMPLE_WEIGHT_STRUCT, like kernels before 5.12 */
	int fds[MAX_CALLS];
	int nr_fds;
};

static int fake_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		     unsigned long flags, void *ctx)
{
	struct fake *f = ctx;
	struct call *c;
	int r = 0;

	if (f->n >= MAX_CALLS)
		return -E2BIG;
	c = &f->calls[f->n];
	c->attr = *attr;
	c->pid = pid;
	c->cpu = cpu;
	c->group_fd = group_fd;
	c->flags = flags;
	if (f->n < f->nr_script)
		r = f->script[f->n];
	else if (f->fail_errno && cpu == f->fail_cpu)
		r = f->fail_errno;
	if (!r && f->fail_type_hw && attr->type != PERF_TYPE_SOFTWARE)
		r = -ENOENT;
	if (!r && f->no_weight_struct && (attr->sample_type & PERF_SAMPLE_WEIGHT_STRUCT))
		r = -EINVAL;
	f->n++;
	if (r) {
		c->ret = r;
		return r;
	}
	c->ret = open("/dev/null", O_RDONLY | O_CLOEXEC);
	f->fds[f->nr_fds++] = c->ret;
	return c->ret;
}

/* Every fd the fake handed out has been closed. */
static int all_closed(const struct fake *f)
{
	for (int i = 0; i < f->nr_fds; i++)
		if (fcntl(f->fds[i], F_GETFD) != -1)
			return 0;
	return 1;
}

static struct pp_sys *load(const char *machine_dir)
{
	char sysfs[512], procfs[512];
	struct pp_sys_opts o = {.sysfs_root = sysfs, .procfs_root = procfs};

	snprintf(sysfs, sizeof(sysfs), "%s/sys", machine_dir);
	snprintf(procfs, sizeof(procfs), "%s/proc", machine_dir);
	return pp_sys_new(&o);
}

static struct pp_event_request stack_req(const char *spec)
{
	struct pp_event_request r = {
	    .spec = spec,
	    .freq_hz = 997,
	    .stack_depth = 127,
	    .want_kstack = 1,
	    .want_ustack = 1,
	    .pid = -1,
	};
	return r;
}

#define ST_PRECISE_STACKS (PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN)
#define ST_MEM (PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT)

/* The attr facts every sampling event shares. */
static void check_common(const struct call *c, int stacks_expected)
{
	CHECK(c->attr.size == sizeof(struct perf_event_attr));
	CHECK(c->attr.disabled == 1);
	CHECK(c->attr.freq == 1);
	CHECK_EQ_U64(c->attr.sample_freq, 997);
	CHECK(c->attr.wakeup_events == 0);
	CHECK(c->attr.exclude_kernel == 0 && c->attr.exclude_user == 0);
	CHECK(c->attr.exclude_hv == 0 && c->attr.exclude_guest == 0 && c->attr.exclude_idle == 0);
	CHECK(c->attr.exclude_callchain_kernel == 0 && c->attr.exclude_callchain_user == 0);
	CHECK(c->flags == PERF_FLAG_FD_CLOEXEC);
	CHECK(c->pid == -1);
	CHECK(c->attr.inherit == 0);
	if (stacks_expected) {
		CHECK(c->attr.sample_type & PERF_SAMPLE_CALLCHAIN);
		CHECK(c->attr.sample_max_stack == 127);
	} else {
		CHECK(!(c->attr.sample_type & PERF_SAMPLE_CALLCHAIN));
	}
}

TEST(skylake_steps_down_on_eopnotsupp)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.script = {-EOPNOTSUPP}, .nr_script = 1};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 9); /* 3 refused on cpu 0, 2 on cpu 0, then cpus 1..7 */
	CHECK(f.calls[0].attr.precise_ip == 3 && f.calls[0].cpu == 0 &&
	      f.calls[0].ret == -EOPNOTSUPP);
	for (int i = 0; i < f.n; i++) {
		const struct call *c = &f.calls[i];

		CHECK(c->attr.type == PERF_TYPE_HARDWARE);
		CHECK_EQ_U64(c->attr.config, PERF_COUNT_HW_CPU_CYCLES);
		CHECK(c->group_fd == -1);
		CHECK_EQ_U64(c->attr.sample_type, ST_PRECISE_STACKS);
		check_common(c, 1);
		if (i > 0) {
			CHECK(c->attr.precise_ip == 2);
			CHECK(c->cpu == i - 1);
		}
	}
	REQUIRE(set && set->nr_events == 1);
	CHECK_STR(set->events[0].name, "cycles");
	CHECK_STR(set->events[0].pmu, "cpu");
	CHECK(set->events[0].precise_ip == 2);
	CHECK(set->events[0].max_precise == 3);
	CHECK(set->events[0].mem == 0);
	CHECK_STR(set->events[0].value_type, "cycles");
	CHECK_STR(set->events[0].value_unit, "count");
	CHECK(strstr(set->events[0].why, "cpu: max_precise=3") != NULL);
	CHECK(strstr(set->events[0].why, "opened cycles with precise_ip=2 after EOPNOTSUPP at 3") !=
	      NULL);
	CHECK(set->events[0].nr_cpus == 8);
	REQUIRE(set->nr_fds == 8);
	for (size_t i = 0; i < set->nr_fds; i++) {
		CHECK(set->fds[i].cpu == (int)i);
		CHECK(set->fds[i].cookie == 0);
		CHECK(set->fds[i].group_leader == 0);
		CHECK(fcntl(set->fds[i].fd, F_GETFD) != -1);
	}
	pp_event_set_free(set);
	CHECK(all_closed(&f));
	pp_sys_free(sys);
}

TEST(skylake_einval_at_3_steps_down)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.script = {-EINVAL}, .nr_script = 1};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set);
	CHECK(set->events[0].precise_ip == 2);
	CHECK(strstr(set->events[0].why, "after EINVAL at 3") != NULL);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(einval_below_3_is_an_error)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("cycles");
	struct fake f = {.script = {-EOPNOTSUPP, -EINVAL}, .nr_script = 2};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	/* EINVAL at 2 is not a precision problem: the ladder stops and says so */
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(set == NULL);
	CHECK(f.n == 2);
	CHECK(strstr(err, "cpu 0") != NULL && strstr(err, "EINVAL") != NULL);
	CHECK(all_closed(&f));
	pp_sys_free(sys);
}

TEST(non_precise_cycles_has_no_callchain)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.script = {-EOPNOTSUPP, -EOPNOTSUPP, -EOPNOTSUPP}, .nr_script = 3};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set);
	CHECK(set->events[0].precise_ip == 0);
	CHECK(f.calls[3].attr.precise_ip == 0);
	CHECK_EQ_U64(f.calls[3].attr.sample_type, PERF_SAMPLE_IP);
	check_common(&f.calls[3], 0);
	CHECK(strstr(set->events[0].why, "EOPNOTSUPP at 3, EOPNOTSUPP at 2, EOPNOTSUPP at 1") !=
	      NULL);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(icelake_precise3_period_and_offline_cpu)
{
	struct pp_sys *sys = load(MACHINE("icelake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";
	static const int want_cpus[] = {0, 1, 2, 3, 4, 5, 7};

	REQUIRE(sys);
	req.freq_hz = 0;
	req.period = 100003;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 7);
	for (int i = 0; i < f.n; i++) {
		const struct call *c = &f.calls[i];

		CHECK(c->cpu == want_cpus[i]);
		CHECK(c->attr.precise_ip == 3);
		/* rule 2: fixed period with wakeup_events=1 keeps PEBS single-record */
		CHECK(c->attr.freq == 0);
		CHECK_EQ_U64(c->attr.sample_period, 100003);
		CHECK(c->attr.wakeup_events == 1 && c->attr.watermark == 0);
		CHECK(c->attr.disabled == 1);
		CHECK_EQ_U64(c->attr.sample_type, ST_PRECISE_STACKS);
	}
	REQUIRE(set);
	CHECK(set->events[0].precise_ip == 3);
	CHECK_EQ_U64(set->events[0].period, 100003);
	CHECK(strstr(set->events[0].why, "opened cycles with precise_ip=3") != NULL);
	CHECK(strstr(set->events[0].why, "after") == NULL);
	CHECK(set->nr_fds == 7);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(vm_auto_picks_cpu_clock)
{
	struct pp_sys *sys = load(MACHINE("novm-pmu"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 2);
	for (int i = 0; i < 2; i++) {
		const struct call *c = &f.calls[i];

		CHECK(c->cpu == i);
		CHECK(c->attr.type == PERF_TYPE_SOFTWARE);
		CHECK_EQ_U64(c->attr.config, PERF_COUNT_SW_CPU_CLOCK);
		CHECK(c->attr.precise_ip == 0);
		CHECK_EQ_U64(c->attr.sample_type, PERF_SAMPLE_IP);
		check_common(c, 0);
	}
	REQUIRE(set && set->nr_events == 1);
	CHECK_STR(set->events[0].name, "cpu-clock");
	CHECK_STR(set->events[0].pmu, "software");
	CHECK_STR(set->events[0].value_type, "cpu");
	CHECK_STR(set->events[0].value_unit, "nanoseconds");
	CHECK_EQ_U64(set->events[0].period, 1000000000ULL / 997);
	CHECK(strstr(set->events[0].why, "no hardware PMU under ") != NULL);
	CHECK(strstr(set->events[0].why,
		     "novm-pmu/sys/bus/event_source/devices (virtual machine?): "
		     "sampling cpu-clock") != NULL);
	CHECK(set->nr_fds == 2);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(vm_explicit_hw_events_are_usage_errors)
{
	static const char *const specs[] = {"cycles", "instructions:p", "mem-loads", "mem-stores"};
	struct pp_sys *sys = load(MACHINE("novm-pmu"));

	REQUIRE(sys);
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct pp_event_request req = stack_req(specs[i]);
		struct fake f = {0};
		struct pp_event_set *set = NULL;
		char err[512] = "";

		CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
		CHECK(set == NULL);
		CHECK(f.n == 0);
		/* one line: what was asked, why not, what this machine can sample */
		CHECK(strncmp(err, "-e ", 3) == 0 && strstr(err, specs[i]) == err + 3);
		CHECK(strstr(err, "this machine has no hardware PMU (no cpu, cpu_core or ibs_op "
				  "under ") != NULL);
		CHECK(strstr(err, "novm-pmu/sys/bus/event_source/devices; a VM?)") != NULL);
		CHECK(strlen(err) > 36 &&
		      !strcmp(err + strlen(err) - 36, "; this machine can sample: cpu-clock"));
		CHECK(strchr(err, '\n') == NULL);
	}
	pp_sys_free(sys);
}

TEST(enoent_from_kernel_means_no_pmu)
{
	/* A cpu directory but the kernel answers ENOENT (notes §8): auto falls back, explicit
	 * cycles is told to use cpu-clock. */
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.fail_type_hw = 1};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set && set->nr_events == 1);
	CHECK(f.calls[0].attr.type == PERF_TYPE_HARDWARE && f.calls[0].ret == -ENOENT);
	CHECK(f.calls[1].attr.type == PERF_TYPE_SOFTWARE);
	CHECK_STR(set->events[0].name, "cpu-clock");
	CHECK(strstr(set->events[0].why, "ENOENT") != NULL);
	CHECK(set->nr_fds == 8);
	pp_event_set_free(set);
	CHECK(all_closed(&f));

	memset(&f, 0, sizeof(f));
	f.fail_type_hw = 1;
	req = stack_req("cycles");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err,
		  "-e cycles: the kernel has no PMU for cycles on cpu (ENOENT at precise_ip=0; "
		  "a VM?); this machine can sample: cpu-clock");
	CHECK(f.n == 1); /* ENOENT is not a precision answer: no step-down */
	pp_sys_free(sys);
}

TEST(amd_precise_cycles_goes_to_ibs_without_exclude_bits)
{
	struct pp_sys *sys = load(MACHINE("zen3"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 8);
	for (int i = 0; i < f.n; i++) {
		const struct call *c = &f.calls[i];

		CHECK(c->cpu == i);
		CHECK(c->attr.type == PERF_TYPE_HARDWARE);
		CHECK_EQ_U64(c->attr.config, PERF_COUNT_HW_CPU_CYCLES);
		/* max_precise is 0 on AMD; precise 2 is what forward_event_to_ibs accepts */
		CHECK(c->attr.precise_ip == 2);
		CHECK_EQ_U64(c->attr.sample_type, ST_PRECISE_STACKS);
		check_common(c, 1);
	}
	REQUIRE(set);
	CHECK_STR(set->events[0].pmu, "cpu");
	CHECK(strstr(set->events[0].why, "ibs_op present") != NULL);
	pp_event_set_free(set);

	/* :ppp is refused by IBS forwarding with EOPNOTSUPP; exact precision does not step */
	memset(&f, 0, sizeof(f));
	f.script[0] = -EOPNOTSUPP;
	f.nr_script = 1;
	req = stack_req("cycles:ppp");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(f.n == 1 && f.calls[0].attr.precise_ip == 3);
	CHECK(strstr(err, "precise_ip=3 not supported") != NULL);
	pp_sys_free(sys);
}

TEST(amd_instructions_step_down_on_enoent)
{
	struct pp_sys *sys = load(MACHINE("zen4"));
	struct pp_event_request req = stack_req("instructions");
	struct fake f = {.script = {-ENOENT, -ENOENT}, .nr_script = 2};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	/* forward_event_to_ibs answers ENOENT for events IBS cannot take */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.precise_ip == 2 && f.calls[1].attr.precise_ip == 1);
	CHECK(f.calls[2].attr.precise_ip == 0);
	CHECK_EQ_U64(f.calls[2].attr.config, PERF_COUNT_HW_INSTRUCTIONS);
	REQUIRE(set);
	CHECK(set->events[0].precise_ip == 0);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(eacces_is_a_privilege_error)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.script = {-EACCES}, .nr_script = 1};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EACCES);
	CHECK(set == NULL);
	CHECK(f.n == 1); /* neither a step-down nor the cpu-clock fallback */
	CHECK(strstr(err, "perf_event_paranoid=2") != NULL);
	CHECK(strstr(err, "CAP_PERFMON") != NULL);
	CHECK(strstr(err, "CAP_SYS_ADMIN") != NULL);

	/* the same on a later CPU, with the earlier fds closed */
	memset(&f, 0, sizeof(f));
	f.fail_cpu = 5;
	f.fail_errno = -EACCES;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EACCES);
	CHECK(strstr(err, "cpu 5") != NULL);
	CHECK(f.nr_fds == 5);
	CHECK(all_closed(&f));
	pp_sys_free(sys);
}

TEST(hybrid_one_event_per_core_pmu)
{
	struct pp_sys *sys = load(MACHINE("alderlake"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 16);
	/* decisions first: cpu_atom on its first CPU, then cpu_core on its first CPU */
	CHECK(f.calls[0].cpu == 8);
	CHECK_EQ_U64(f.calls[0].attr.config, (10ULL << 32) | PERF_COUNT_HW_CPU_CYCLES);
	CHECK(f.calls[1].cpu == 0);
	CHECK_EQ_U64(f.calls[1].attr.config, (4ULL << 32) | PERF_COUNT_HW_CPU_CYCLES);
	for (int i = 0; i < f.n; i++) {
		const struct call *c = &f.calls[i];
		uint64_t pmu_type = c->cpu >= 8 ? 10 : 4;

		CHECK(c->attr.type == PERF_TYPE_HARDWARE);
		CHECK_EQ_U64(c->attr.config >> 32, pmu_type);
		CHECK(c->attr.precise_ip == 3);
		check_common(c, 1);
	}
	REQUIRE(set && set->nr_events == 2);
	CHECK_STR(set->events[0].pmu, "cpu_atom");
	CHECK_STR(set->events[1].pmu, "cpu_core");
	REQUIRE(set->nr_fds == 16);
	for (size_t i = 0; i < set->nr_fds; i++)
		CHECK(set->fds[i].cookie == (set->fds[i].cpu >= 8 ? 0u : 1u));
	CHECK(set->events[0].nr_cpus == 8 && set->events[1].nr_cpus == 8);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(spr_mem_loads_behind_aux_leader)
{
	struct pp_sys *sys = load(MACHINE("sapphire-rapids"));
	struct pp_event_request req = stack_req("mem-loads");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	req.ldlat = 50;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 8); /* 4 CPUs x (leader + load event) */
	for (int i = 0; i < f.n; i += 2) {
		const struct call *aux = &f.calls[i], *ld = &f.calls[i + 1];

		CHECK(aux->cpu == i / 2 && ld->cpu == i / 2);
		CHECK(aux->attr.type == 4);
		CHECK_EQ_U64(aux->attr.config, 0x8203);
		CHECK(aux->attr.freq == 0 && aux->attr.sample_period == 0); /* counting */
		CHECK(aux->attr.precise_ip == 0);
		CHECK(aux->attr.disabled == 1);
		CHECK(aux->group_fd == -1);
		CHECK(ld->group_fd == aux->ret);
		CHECK(ld->attr.type == 4);
		CHECK_EQ_U64(ld->attr.config, 0x1cd);
		CHECK_EQ_U64(ld->attr.config1, 50);
		CHECK(ld->attr.precise_ip == 3);
		CHECK_EQ_U64(ld->attr.sample_type, ST_PRECISE_STACKS | ST_MEM);
		check_common(ld, 1);
	}
	REQUIRE(set && set->nr_events == 1);
	CHECK(set->events[0].mem && set->events[0].aux_leader);
	CHECK_STR(set->events[0].value_type, "mem-loads");
	REQUIRE(set->nr_fds == 8);
	CHECK(set->fds[0].group_leader == 1 && set->fds[1].group_leader == 0);
	pp_event_set_free(set);
	CHECK(all_closed(&f));
	pp_sys_free(sys);
}

TEST(skylake_mem_stores_and_default_ldlat)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("mem-stores");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	req.want_phys_addr = 1;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.n == 8);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x82d0);
	CHECK_EQ_U64(f.calls[0].attr.config1, 0);
	CHECK_EQ_U64(f.calls[0].attr.sample_type,
		     ST_PRECISE_STACKS | ST_MEM | PERF_SAMPLE_PHYS_ADDR);
	CHECK(f.calls[0].group_fd == -1);
	pp_event_set_free(set);

	memset(&f, 0, sizeof(f));
	req = stack_req("mem-loads:pp");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x1cd);
	CHECK_EQ_U64(f.calls[0].attr.config1, 30); /* perf's default, not sysfs' ldlat=3 */
	CHECK(f.calls[0].attr.precise_ip == 2);
	CHECK(f.calls[0].group_fd == -1); /* no mem-loads-aux on Skylake */
	pp_event_set_free(set);
	pp_sys_free(sys);
}

/*
 * Before 5.12 the kernel refuses PERF_SAMPLE_WEIGHT_STRUCT with EINVAL (seen on Debian 11's
 * 5.10 in tests/vm): memory events then ask for the u64 PERF_SAMPLE_WEIGHT, on every CPU.
 */
/*
 * With unwind tables the shim walks a precise event's user stack from the sample's own
 * registers: PEBS events record sp, bp and ip (PERF_SAMPLE_REGS_INTR); IBS cannot, so AMD's
 * precise events keep the perf callchain; a kernel refusing the registers gets the event
 * without them.
 */
TEST(precise_events_record_the_walks_registers_with_tables)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("cycles:pp");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	req.want_sample_regs = 1;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n > 0);
	for (int i = 0; i < f.n; i++) {
		CHECK_EQ_U64(f.calls[i].attr.sample_type,
			     ST_PRECISE_STACKS | PERF_SAMPLE_REGS_INTR);
		CHECK_EQ_U64(f.calls[i].attr.sample_regs_intr, (1ull << PERF_REG_X86_BP) |
								   (1ull << PERF_REG_X86_SP) |
								   (1ull << PERF_REG_X86_IP));
	}
	pp_event_set_free(set);

	/* refused (EINVAL): opened again without them */
	memset(&f, 0, sizeof(f));
	f.script[0] = -EINVAL;
	f.nr_script = 1;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.sample_type & PERF_SAMPLE_REGS_INTR);
	CHECK_EQ_U64(f.calls[1].attr.sample_type, ST_PRECISE_STACKS);
	CHECK(f.calls[1].ret >= 0);
	pp_event_set_free(set);

	/* without tables: no registers */
	memset(&f, 0, sizeof(f));
	req.want_sample_regs = 0;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, ST_PRECISE_STACKS);
	CHECK_EQ_U64(f.calls[0].attr.sample_regs_intr, 0);
	pp_event_set_free(set);
	pp_sys_free(sys);

	/* AMD: precise cycles is IBS's, which records no registers */
	sys = load(MACHINE("zen3"));
	REQUIRE(sys);
	memset(&f, 0, sizeof(f));
	req = stack_req("auto");
	req.want_sample_regs = 1;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.precise_ip == 2);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, ST_PRECISE_STACKS);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(mem_events_fall_back_to_u64_weight_before_5_12)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("mem-loads");
	struct fake f = {.no_weight_struct = 1};
	struct pp_event_set *set = NULL;
	char err[512] = "";
	int opened = 0;

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	for (int i = 0; i < f.n; i++) {
		if (f.calls[i].ret < 0) {
			CHECK(f.calls[i].attr.sample_type & PERF_SAMPLE_WEIGHT_STRUCT);
			continue;
		}
		opened++;
		CHECK_EQ_U64(f.calls[i].attr.sample_type &
				 (PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_WEIGHT),
			     PERF_SAMPLE_WEIGHT);
		CHECK(f.calls[i].attr.sample_type & PERF_SAMPLE_DATA_SRC);
	}
	CHECK(opened == (int)set->nr_fds && opened > 0);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(hybrid_mem_loads_uses_each_pmus_encoding)
{
	struct pp_sys *sys = load(MACHINE("alderlake"));
	struct pp_event_request req = stack_req("mem-loads");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	/* atom: no aux; core: aux leader + load */
	CHECK(f.calls[0].cpu == 8 && f.calls[0].attr.type == 10);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x5d0);
	CHECK_EQ_U64(f.calls[0].attr.config1, 30);
	CHECK(f.calls[1].cpu == 0 && f.calls[1].attr.type == 4);
	CHECK_EQ_U64(f.calls[1].attr.config, 0x8203);
	CHECK_EQ_U64(f.calls[2].attr.config, 0x1cd);
	CHECK(f.calls[2].group_fd == f.calls[1].ret);
	REQUIRE(set && set->nr_events == 2);
	CHECK(set->nr_fds == 8 + 16);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(amd_mem_loads_is_ibs_op)
{
	struct pp_sys *sys = load(MACHINE("zen4"));
	struct pp_event_request req = stack_req("mem-loads");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 8);
	CHECK(f.calls[0].attr.type == 11);
	CHECK_EQ_U64(f.calls[0].attr.config, 1ULL << 19); /* cnt_ctl=1: sample ops */
	CHECK(f.calls[0].attr.precise_ip == 0);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, PERF_SAMPLE_IP | ST_MEM);
	check_common(&f.calls[0], 0);
	REQUIRE(set);
	CHECK(set->events[0].mem == 1);
	CHECK_STR(set->events[0].pmu, "ibs_op");
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(raw_events)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("cpu/event=0xcd,umask=0x1,ldlat=50/pp");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.type == 4);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x1cd);
	CHECK_EQ_U64(f.calls[0].attr.config1, 50);
	CHECK(f.calls[0].attr.precise_ip == 2);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, ST_PRECISE_STACKS | ST_MEM);
	REQUIRE(set);
	CHECK_STR(set->events[0].name, "cpu/event=0xcd,umask=0x1,ldlat=50/");
	CHECK_STR(set->events[0].value_unit, "count");
	pp_event_set_free(set);

	req = stack_req("nope/event=1/");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "no PMU named 'nope'") != NULL);
	req = stack_req("cpu/foo=1/");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "unknown term 'foo'") != NULL);
	req = stack_req("uncore_imc_0/event=0x04,umask=0x03/");
	memset(&f, 0, sizeof(f));
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.n == 1 && f.calls[0].cpu == 0); /* the PMU's cpumask */
	CHECK(f.calls[0].attr.type == 13 && f.calls[0].attr.precise_ip == 0);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, PERF_SAMPLE_IP);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(sampling_rate_limits)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	req.freq_hz = 200000;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "-F 200000 exceeds kernel.perf_event_max_sample_rate=100000") != NULL);
	CHECK(f.n == 0);
	req.freq_hz = 100000; /* the limit itself is allowed */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	pp_event_set_free(set);
	req.period = 1000;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not both") != NULL);
	pp_sys_free(sys);
}

TEST(cpu_offline_between_scan_and_open)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.fail_cpu = 3, .fail_errno = -ENODEV};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set);
	CHECK(set->nr_fds == 7);
	CHECK(set->nr_cpus_skipped == 1 && set->events[0].nr_cpus_skipped == 1);
	for (size_t i = 0; i < set->nr_fds; i++)
		CHECK(set->fds[i].cpu != 3);
	pp_event_set_free(set);

	/* any other failure on a later CPU fails the whole set and names the CPU */
	memset(&f, 0, sizeof(f));
	f.fail_cpu = 3;
	f.fail_errno = -EBUSY;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EBUSY);
	CHECK(set == NULL);
	CHECK(strstr(err, "failed on cpu 3") != NULL);
	CHECK(all_closed(&f));
	pp_sys_free(sys);
}

TEST(dry_run_keeps_nothing_open)
{
	struct pp_sys *sys = load(MACHINE("alderlake"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {.script = {-EOPNOTSUPP}, .nr_script = 1};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	req.dry_run = 1;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.n == 3); /* atom: 3 refused, 2 ok; core: 3 ok */
	REQUIRE(set && set->nr_events == 2);
	CHECK(set->nr_fds == 0);
	CHECK(set->events[0].precise_ip == 2 && set->events[1].precise_ip == 3);
	CHECK(all_closed(&f));
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(pid_target_inherits)
{
	struct pp_sys *sys = load(MACHINE("novm-pmu"));
	struct pp_event_request req = stack_req("cpu-clock");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[512] = "";

	REQUIRE(sys);
	req.pid = 4242;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 2);
	CHECK(f.calls[0].pid == 4242 && f.calls[0].attr.inherit == 1);
	REQUIRE(set);
	CHECK_STR(set->events[0].why, "cpu-clock requested; opened cpu-clock with precise_ip=0");
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(spec_parsing)
{
	struct pp_event_spec s;
	char err[256];

	REQUIRE(pp_event_spec_parse("auto", 4, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_AUTO && s.precise == PP_PRECISE_UNSET);
	REQUIRE(pp_event_spec_parse("cycles:ppp", 10, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_CYCLES && s.precise == 3);
	REQUIRE(pp_event_spec_parse("mem-loads:P", 11, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_MEM_LOADS && s.precise == PP_PRECISE_MAX);
	REQUIRE(pp_event_spec_parse("cpu_core/event=0xcd,umask=0x1/p", 31, &s, err, sizeof(err)) ==
		0);
	CHECK(s.kind == PP_EVENT_RAW && s.precise == 1);
	CHECK_STR(s.pmu, "cpu_core");
	CHECK_STR(s.terms, "event=0xcd,umask=0x1");
	CHECK_STR(s.text, "cpu_core/event=0xcd,umask=0x1/");
	REQUIRE(pp_event_spec_parse("ibs_op/cnt_ctl=1/", 17, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_RAW && s.precise == PP_PRECISE_UNSET);

	CHECK(pp_event_spec_parse("cyclez", 6, &s, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "unknown event 'cyclez'") != NULL);
	CHECK(pp_event_spec_parse("cycles:pppp", 11, &s, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "bad modifier ':pppp'") != NULL);
	REQUIRE(pp_event_spec_parse("cycles:k", 8, &s, err, sizeof(err)) == 0);
	CHECK(s.exclude_user == 1 && s.exclude_kernel == 0 && s.precise == PP_PRECISE_UNSET);
	REQUIRE(pp_event_spec_parse("cycles:upp", 10, &s, err, sizeof(err)) == 0);
	CHECK(s.exclude_kernel == 1 && s.exclude_user == 0 && s.precise == 2);
	REQUIRE(pp_event_spec_parse("cycles:uk", 9, &s, err, sizeof(err)) == 0);
	CHECK(s.exclude_kernel == 0 && s.exclude_user == 0);
	REQUIRE(pp_event_spec_parse("cpu-clock:u", 11, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_CPU_CLOCK && s.exclude_kernel == 1);
	REQUIRE(pp_event_spec_parse("mem_load_retired.l3_miss:P", 26, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_NAMED && s.precise == PP_PRECISE_MAX);
	CHECK_STR(s.text, "mem_load_retired.l3_miss");
	REQUIRE(pp_event_spec_parse("INST_RETIRED.PREC_DIST", 22, &s, err, sizeof(err)) == 0);
	CHECK(s.kind == PP_EVENT_NAMED && s.precise == PP_PRECISE_UNSET);
	CHECK(pp_event_spec_parse("INST_RETIRED.", 13, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("INST..X", 7, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("1NST.X", 6, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("cycles:Pp", 9, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("cycles:uu", 9, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("cycles:x", 8, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("cpu-clock:p", 11, &s, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "cpu-clock") != NULL);
	CHECK(pp_event_spec_parse("cpu/event=1", 11, &s, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "missing closing '/'") != NULL);
	CHECK(pp_event_spec_parse("cpu//", 5, &s, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "empty term list") != NULL);
	CHECK(pp_event_spec_parse("/event=1/", 9, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("cpu/a/b/", 8, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("", 0, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse(":p", 2, &s, err, sizeof(err)) == -EINVAL);
	CHECK(pp_event_spec_parse("cy cles", 7, &s, err, sizeof(err)) == -EINVAL);
}

TEST(live_auto_on_this_machine)
{
	struct pp_sys_opts o = {0};
	struct pp_sys *sys;
	struct pp_event_request req = stack_req("auto");
	struct pp_event_set *set = NULL;
	const struct pp_pmu *core[8];
	char err[512] = "";
	int r;

	if (geteuid() != 0)
		SKIP("needs root to open perf events on every CPU");
	sys = pp_sys_new(&o);
	REQUIRE(sys);
	if (pp_pmu_core_pmus(sys->pmus, core, 8) > 0 || pp_pmu_find(sys->pmus, "ibs_op")) {
		pp_sys_free(sys);
		SKIP("this machine has a hardware PMU; the live case checks the PMU-less path");
	}
	req.freq_hz = 99;
	r = pp_events_open(&req, sys, NULL, NULL, &set, err, sizeof(err));
	if (r)
		fprintf(stderr, "  pp_events_open: %s\n", err);
	REQUIRE(r == 0);
	REQUIRE(set->nr_events == 1);
	CHECK_STR(set->events[0].name, "cpu-clock");
	CHECK(set->events[0].attr.type == PERF_TYPE_SOFTWARE);
	CHECK(set->nr_fds == sys->pmus->nr_online);
	for (size_t i = 0; i < set->nr_fds; i++) {
		CHECK(set->fds[i].cpu == sys->pmus->online[i]);
		CHECK(fcntl(set->fds[i].fd, F_GETFD) & FD_CLOEXEC);
	}
	pp_event_set_free(set);

	/* explicit cycles here is the usage error the CLI turns into exit 2 */
	req = stack_req("cycles");
	CHECK(pp_events_open(&req, sys, NULL, NULL, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "-e cycles: this machine has no hardware PMU") == err);
	CHECK(strstr(err, "; this machine can sample: cpu-clock") != NULL);
	pp_sys_free(sys);
}

static struct pp_sys *load_kernel(const char *machine_dir, const char *release)
{
	char sysfs[512], procfs[512];
	struct pp_sys_opts o = {
	    .sysfs_root = sysfs, .procfs_root = procfs, .kernel_release = release};

	snprintf(sysfs, sizeof(sysfs), "%s/sys", machine_dir);
	snprintf(procfs, sizeof(procfs), "%s/proc", machine_dir);
	return pp_sys_new(&o);
}

/* The message ends with what the machine can sample. */
static int ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);

	return a >= b && !strcmp(s + a - b, tail);
}

TEST(arrowlake_h_three_core_pmus)
{
	struct pp_sys *sys = load(MACHINE("arrowlake-h"));
	struct pp_event_request req = stack_req("auto");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[1024] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set && set->nr_events == 3);
	/* name order: cpu_atom (6-13, type 10), cpu_core (0-5, type 4), cpu_lowpower (14-15, 11) */
	CHECK_STR(set->events[0].pmu, "cpu_atom");
	CHECK_STR(set->events[1].pmu, "cpu_core");
	CHECK_STR(set->events[2].pmu, "cpu_lowpower");
	CHECK(set->events[0].nr_cpus == 8 && set->events[1].nr_cpus == 6 &&
	      set->events[2].nr_cpus == 2);
	REQUIRE(f.n == 16);
	for (int i = 0; i < f.n; i++) {
		const struct call *c = &f.calls[i];
		uint64_t t = c->cpu < 6 ? 4 : c->cpu < 14 ? 10 : 11;

		CHECK(c->attr.type == PERF_TYPE_HARDWARE);
		CHECK_EQ_U64(c->attr.config, (t << 32) | PERF_COUNT_HW_CPU_CYCLES);
		CHECK(c->attr.precise_ip == 3);
		check_common(c, 1);
	}
	pp_event_set_free(set);

	/* mem-loads: each PMU's own encoding, ldlat 30, and no aux leader anywhere (ARL-H does
	 * not set PMU_FL_MEM_LOADS_AUX) */
	memset(&f, 0, sizeof(f));
	req = stack_req("mem-loads");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 16 && set->nr_events == 3);
	for (int i = 0; i < f.n; i++) {
		const struct call *c = &f.calls[i];

		CHECK(c->group_fd == -1);
		CHECK(c->attr.type == (c->cpu < 6 ? 4u : c->cpu < 14 ? 10u : 11u));
		CHECK_EQ_U64(c->attr.config, c->cpu < 6 ? 0x1cd : 0x5d0);
		CHECK_EQ_U64(c->attr.config1, 30);
		CHECK_EQ_U64(c->attr.sample_type, ST_PRECISE_STACKS | ST_MEM);
		check_common(c, 1);
	}
	for (size_t i = 0; i < 3; i++)
		CHECK(set->events[i].mem == 1 && set->events[i].aux_leader == 0);
	pp_event_set_free(set);

	memset(&f, 0, sizeof(f));
	req = stack_req("mem-stores");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	for (int i = 0; i < f.n; i++) {
		CHECK_EQ_U64(f.calls[i].attr.config, f.calls[i].cpu < 6 ? 0x2cd : 0x6d0);
		CHECK_EQ_U64(f.calls[i].attr.config1, 0);
	}
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(named_precise_events_per_model)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("INST_RETIRED.PREC_DIST");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[2048] = "";

	REQUIRE(sys);
	CHECK(sys->cpu_family == 6 && sys->cpu_model == 0x55);
	/* Skylake: 0x01c0 on the cpu PMU's own type, best precision, no memory bits */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 8 && set->nr_events == 1);
	CHECK(f.calls[0].attr.type == 4);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x01c0);
	CHECK_EQ_U64(f.calls[0].attr.config1, 0);
	CHECK(f.calls[0].attr.precise_ip == 3);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, ST_PRECISE_STACKS);
	check_common(&f.calls[0], 1);
	CHECK_STR(set->events[0].name, "INST_RETIRED.PREC_DIST");
	CHECK_STR(set->events[0].value_type, "INST_RETIRED.PREC_DIST");
	CHECK(strstr(set->events[0].why,
		     "skylake INST_RETIRED.PREC_DIST = event=0xc0,umask=0x01") != NULL);
	pp_event_set_free(set);

	/* case-insensitive; a memory event samples addr/data_src/weight */
	memset(&f, 0, sizeof(f));
	req = stack_req("mem_load_retired.l3_miss:pp");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x20d1);
	CHECK(f.calls[0].attr.precise_ip == 2);
	CHECK_EQ_U64(f.calls[0].attr.sample_type, ST_PRECISE_STACKS | ST_MEM);
	CHECK(set->events[0].mem == 1);
	CHECK_STR(set->events[0].name, "MEM_LOAD_RETIRED.L3_MISS");
	pp_event_set_free(set);

	memset(&f, 0, sizeof(f));
	req = stack_req("BR_INST_RETIRED.NEAR_TAKEN");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x20c4);
	CHECK(set->events[0].mem == 0);
	pp_event_set_free(set);

	/* Ice Lake's name for conditional branches does not exist on Skylake: exit-2 message
	 * naming the model and listing what it can sample */
	memset(&f, 0, sizeof(f));
	req = stack_req("BR_INST_RETIRED.COND");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(f.n == 0 && set == NULL);
	CHECK(strstr(err, "-e BR_INST_RETIRED.COND: not a precise event of this machine's PMUs "
			  "(cpu: skylake; cpu family 6 model 85); this machine can sample: "
			  "cpu-clock, cycles, instructions, mem-loads, mem-stores, "
			  "INST_RETIRED.PREC_DIST, ") == err);
	CHECK(strstr(err, "BR_INST_RETIRED.CONDITIONAL") != NULL);
	CHECK(ends_with(err, ", cpu/<terms>/"));
	pp_sys_free(sys);

	/* Ice Lake and Sapphire Rapids: PREC_DIST is the fixed-counter-0 encoding 0x0100 */
	sys = load(MACHINE("icelake-sp"));
	REQUIRE(sys);
	memset(&f, 0, sizeof(f));
	req = stack_req("inst_retired.prec_dist");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x0100);
	pp_event_set_free(set);
	memset(&f, 0, sizeof(f));
	req = stack_req("BR_INST_RETIRED.COND");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x11c4);
	pp_event_set_free(set);
	pp_sys_free(sys);

	sys = load(MACHINE("sapphire-rapids"));
	REQUIRE(sys);
	memset(&f, 0, sizeof(f));
	req = stack_req("MEM_LOAD_RETIRED.L1_MISS");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 4);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x08d1);
	CHECK(f.calls[0].group_fd == -1); /* not the load-latency event: no aux leader */
	CHECK_EQ_U64(f.calls[0].attr.sample_type, ST_PRECISE_STACKS | ST_MEM);
	pp_event_set_free(set);
	pp_sys_free(sys);
}

TEST(named_precise_events_hybrid_and_amd)
{
	struct pp_sys *sys = load(MACHINE("alderlake"));
	struct pp_event_request req = stack_req("BR_INST_RETIRED.COND");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[2048] = "";

	REQUIRE(sys);
	/* both cores have it, with different encodings (Golden Cove 0x11, Gracemont 0x7e) */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set->nr_events == 2 && f.n == 16);
	for (int i = 0; i < f.n; i++) {
		CHECK(f.calls[i].attr.type == (f.calls[i].cpu >= 8 ? 10u : 4u));
		CHECK_EQ_U64(f.calls[i].attr.config, f.calls[i].cpu >= 8 ? 0x7ec4 : 0x11c4);
	}
	pp_event_set_free(set);

	/* PREC_DIST exists on the P-cores only: opened there, the atom CPUs are left out */
	memset(&f, 0, sizeof(f));
	req = stack_req("INST_RETIRED.PREC_DIST");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(set->nr_events == 1 && f.n == 8);
	CHECK_STR(set->events[0].pmu, "cpu_core");
	for (int i = 0; i < f.n; i++)
		CHECK(f.calls[i].cpu < 8 && f.calls[i].attr.type == 4);
	pp_event_set_free(set);
	pp_sys_free(sys);

	/* AMD: no Intel names; precise sampling there is IBS */
	sys = load(MACHINE("zen3"));
	REQUIRE(sys);
	memset(&f, 0, sizeof(f));
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(f.n == 0);
	CHECK_STR(err,
		  "-e INST_RETIRED.PREC_DIST: not a precise event of this machine's PMUs (cpu: "
		  "no named-event table; cpu family 25 model 1); this machine can sample: "
		  "cpu-clock, cycles, instructions, mem-loads, mem-stores, cpu/<terms>/, "
		  "ibs_op/<terms>/");
	pp_sys_free(sys);

	/* no PMU at all */
	sys = load(MACHINE("novm-pmu"));
	REQUIRE(sys);
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(ends_with(err, "; this machine can sample: cpu-clock"));
	pp_sys_free(sys);
}

TEST(user_kernel_filters_and_ibs)
{
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("cycles:upp");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[2048] = "";

	REQUIRE(sys);
	/* Intel takes the bits; the callchain bits stay clear (rule 3) */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.exclude_kernel == 1 && f.calls[0].attr.exclude_hv == 1);
	CHECK(f.calls[0].attr.exclude_user == 0 && f.calls[0].attr.exclude_guest == 0);
	CHECK(f.calls[0].attr.exclude_callchain_kernel == 0);
	CHECK(f.calls[0].attr.exclude_callchain_user == 0);
	CHECK(set->events[0].exclude_kernel == 1);
	CHECK(set->events[0].want_user_only == 0 && set->events[0].want_kernel_only == 0);
	pp_event_set_free(set);
	pp_sys_free(sys);

	/* IBS (6.x): no exclude bits at all, the program filters */
	sys = load(MACHINE("zen4"));
	REQUIRE(sys);
	memset(&f, 0, sizeof(f));
	req = stack_req("mem-loads:u");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	for (int i = 0; i < f.n; i++) {
		CHECK(f.calls[i].attr.exclude_kernel == 0 && f.calls[i].attr.exclude_user == 0);
		CHECK(f.calls[i].attr.exclude_hv == 0 && f.calls[i].attr.exclude_guest == 0);
		CHECK_EQ_U64(f.calls[i].attr.config2, 0);
	}
	CHECK(set->events[0].want_user_only == 1 && set->events[0].want_kernel_only == 0);
	pp_event_set_free(set);

	/* precise cycles on AMD's core PMU is forwarded to IBS: same rule */
	memset(&f, 0, sizeof(f));
	req = stack_req("cycles:k");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.precise_ip == 2);
	CHECK(f.calls[0].attr.exclude_user == 0 && f.calls[0].attr.exclude_kernel == 0);
	CHECK(set->events[0].want_kernel_only == 1);
	pp_event_set_free(set);

	/* --ldlat above IBS's minimum needs caps/ldlat, which Zen 4 lacks */
	memset(&f, 0, sizeof(f));
	req = stack_req("mem-loads");
	req.ldlat = 256;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(f.n == 0);
	CHECK(strstr(err, "-e mem-loads --ldlat 256: ibs_op has no load-latency filter here (no "
			  "caps/ldlat; Zen 5 and later); this machine can sample: ") == err);
	/* IBS has no precise_ip=3 */
	req = stack_req("mem-loads:ppp");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "no precise_ip=3") != NULL);
	pp_sys_free(sys);

	/* Zen 5 on 7.2: ldlat in config1 (128..2048), swfilt in config2 keeps the bits */
	sys = load(MACHINE("zen5"));
	REQUIRE(sys);
	memset(&f, 0, sizeof(f));
	req = stack_req("mem-loads:u");
	req.ldlat = 256;
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.type == 11);
	CHECK_EQ_U64(f.calls[0].attr.config, 1ULL << 19);
	CHECK_EQ_U64(f.calls[0].attr.config1, 256);
	CHECK_EQ_U64(f.calls[0].attr.config2, 1);
	CHECK(f.calls[0].attr.exclude_kernel == 1 && f.calls[0].attr.exclude_user == 0);
	CHECK(set->events[0].want_user_only == 0);
	CHECK(strstr(set->events[0].why, "loads of at least 256 cycles") != NULL);
	pp_event_set_free(set);
	memset(&f, 0, sizeof(f));
	req = stack_req("mem-loads");
	req.ldlat = 30; /* perf's default: below IBS's minimum, so no filter */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config1, 0);
	CHECK_EQ_U64(f.calls[0].attr.config2, 0);
	pp_event_set_free(set);
	req.ldlat = 4096;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "IBS takes 128..2048 cycles") != NULL);
	pp_sys_free(sys);
}

TEST(ibs_memory_fields_need_6_1)
{
	struct pp_sys *sys = load_kernel(MACHINE("zen3"), "5.10.0-30-amd64");
	struct pp_event_request req = stack_req("mem-stores");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[2048] = "";

	REQUIRE(sys);
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(f.n == 0);
	CHECK_STR(err, "-e mem-stores: ibs_op gives perf (and the program) addr, data_src and "
		       "weight only from kernel 6.1; this kernel is 5.10.0-30-amd64 (IBS data only "
		       "as raw MSR dumps); this machine can sample: cpu-clock, cycles, "
		       "instructions, cpu/<terms>/, ibs_op/<terms>/");
	pp_sys_free(sys);

	sys = load_kernel(MACHINE("zen3"), "6.1.0-30-amd64");
	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(set->events[0].mem == 1);
	pp_event_set_free(set);
	/* the AMD core PMU has no mem-stores alias: a raw spelling of it is a usage error */
	req = stack_req("cpu/mem-stores/");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "raw event 'cpu/mem-stores/': unknown term 'mem-stores' for PMU cpu (cpu "
			  "takes: cmask, edge, event, inv, umask, config, config1, config2 or one "
			  "of its events); this machine can sample: ") == err);
	pp_sys_free(sys);
}

TEST(enodata_retries_behind_aux_leader)
{
	/* A kernel that wants the aux leader although sysfs did not list it (rule 8) */
	struct pp_sys *sys = load(MACHINE("skylake-sp"));
	struct pp_event_request req = stack_req("mem-loads");
	struct fake f = {.script = {-ENODATA}, .nr_script = 1};
	struct pp_event_set *set = NULL;
	char err[2048] = "";

	REQUIRE(sys);
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK(f.calls[0].attr.precise_ip == 3 && f.calls[0].group_fd == -1);
	CHECK_EQ_U64(f.calls[1].attr.config, 0x8203); /* the leader, then the load event */
	CHECK(f.calls[1].attr.precise_ip == 0 && f.calls[1].attr.sample_type == 0);
	CHECK_EQ_U64(f.calls[2].attr.config, 0x1cd);
	CHECK(f.calls[2].attr.precise_ip == 3 && f.calls[2].group_fd == f.calls[1].ret);
	CHECK(set->events[0].aux_leader == 1);
	CHECK_EQ_U64(set->events[0].aux_config, 0x8203);
	CHECK(strstr(set->events[0].why, "after ENODATA at 3 (retried behind mem-loads-aux "
					 "event=0x03,umask=0x82)") != NULL);
	CHECK(set->nr_fds == 16);
	pp_event_set_free(set);
	CHECK(all_closed(&f));

	/* ENODATA again behind the leader: stop and say so */
	memset(&f, 0, sizeof(f));
	f.script[0] = -ENODATA;
	f.script[1] = 0;
	f.script[2] = -ENODATA;
	f.nr_script = 3;
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -ENODATA);
	CHECK(strstr(err, "ENODATA even behind a mem-loads-aux group leader (0x8203)") != NULL);
	CHECK(all_closed(&f));
	pp_sys_free(sys);
}

TEST(raw_sysfs_alias_and_aux)
{
	struct pp_sys *sys = load(MACHINE("sapphire-rapids"));
	struct pp_event_request req = stack_req("cpu/mem-loads,ldlat=50/");
	struct fake f = {0};
	struct pp_event_set *set = NULL;
	char err[2048] = "";

	REQUIRE(sys);
	/* the alias expands through format/, ldlat overrides its ldlat=3, the raw load-latency
	 * event gets the aux leader and, being a memory event, the best precision */
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	REQUIRE(f.n == 8);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x8203);
	CHECK_EQ_U64(f.calls[1].attr.config, 0x1cd);
	CHECK_EQ_U64(f.calls[1].attr.config1, 50);
	CHECK(f.calls[1].attr.precise_ip == 3 && f.calls[1].group_fd == f.calls[0].ret);
	CHECK_EQ_U64(f.calls[1].attr.sample_type, ST_PRECISE_STACKS | ST_MEM);
	CHECK(set->events[0].mem && set->events[0].aux_leader);
	pp_event_set_free(set);

	/* field ranges: config:0-7 event, config:8-15 umask, config:24-31 cmask, inv config:23,
	 * frontend config1:0-23 */
	memset(&f, 0, sizeof(f));
	req = stack_req("cpu/event=0xc0,umask=0x1,inv,cmask=16,frontend=0x400406/p");
	REQUIRE(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == 0);
	CHECK_EQ_U64(f.calls[0].attr.config, 0x108001c0);
	CHECK_EQ_U64(f.calls[0].attr.config1, 0x400406);
	CHECK(f.calls[0].attr.precise_ip == 1);
	CHECK(set->events[0].mem == 0 && f.calls[0].group_fd == -1);
	pp_event_set_free(set);

	req = stack_req("cpu/event=0x1ff/");
	CHECK(pp_events_open(&req, sys, fake_open, &f, &set, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "too wide") != NULL);
	pp_sys_free(sys);
}

TEST(can_sample_lists)
{
	static const struct {
		const char *machine, *prefix, *contains, *absent;
	} cases[] = {
	    {"novm-pmu", "cpu-clock", NULL, "cycles"},
	    {"skylake-sp", "cpu-clock, cycles, instructions, mem-loads, mem-stores, ",
	     "MEM_LOAD_RETIRED.L3_MISS", "BR_INST_RETIRED.COND,"},
	    {"sapphire-rapids", "cpu-clock, cycles, instructions, mem-loads, mem-stores, ",
	     "BR_INST_RETIRED.COND", "CONDITIONAL"},
	    {"arrowlake-h", "cpu-clock, cycles, instructions, mem-loads, mem-stores, cpu_atom/",
	     "cpu_lowpower/<terms>/", "PREC_DIST"},
	    {"zen4",
	     "cpu-clock, cycles, instructions, mem-loads, mem-stores, cpu/<terms>/, "
	     "ibs_op/<terms>/",
	     NULL, "PREC_DIST"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char dir[256], buf[2048];
		struct pp_sys *sys;

		snprintf(dir, sizeof(dir), "%s/%s", PP_TEST_DATA_DIR "/sysfs", cases[i].machine);
		sys = load(dir);
		REQUIRE(sys);
		pp_events_can_sample(sys, buf, sizeof(buf));
		if (strncmp(buf, cases[i].prefix, strlen(cases[i].prefix)))
			fprintf(stderr, "  %s: %s\n", cases[i].machine, buf);
		CHECK(strncmp(buf, cases[i].prefix, strlen(cases[i].prefix)) == 0);
		if (cases[i].contains)
			CHECK(strstr(buf, cases[i].contains) != NULL);
		CHECK(strstr(buf, cases[i].absent) == NULL);
		/* a short buffer truncates cleanly */
		pp_events_can_sample(sys, buf, 12);
		CHECK(strlen(buf) < 12);
		pp_sys_free(sys);
	}
}

TEST_LIST = {
    {"skylake_steps_down_on_eopnotsupp", skylake_steps_down_on_eopnotsupp},
    {"skylake_einval_at_3_steps_down", skylake_einval_at_3_steps_down},
    {"einval_below_3_is_an_error", einval_below_3_is_an_error},
    {"non_precise_cycles_has_no_callchain", non_precise_cycles_has_no_callchain},
    {"icelake_precise3_period_and_offline_cpu", icelake_precise3_period_and_offline_cpu},
    {"vm_auto_picks_cpu_clock", vm_auto_picks_cpu_clock},
    {"vm_explicit_hw_events_are_usage_errors", vm_explicit_hw_events_are_usage_errors},
    {"enoent_from_kernel_means_no_pmu", enoent_from_kernel_means_no_pmu},
    {"amd_precise_cycles_goes_to_ibs_without_exclude_bits",
     amd_precise_cycles_goes_to_ibs_without_exclude_bits},
    {"amd_instructions_step_down_on_enoent", amd_instructions_step_down_on_enoent},
    {"eacces_is_a_privilege_error", eacces_is_a_privilege_error},
    {"hybrid_one_event_per_core_pmu", hybrid_one_event_per_core_pmu},
    {"spr_mem_loads_behind_aux_leader", spr_mem_loads_behind_aux_leader},
    {"skylake_mem_stores_and_default_ldlat", skylake_mem_stores_and_default_ldlat},
    {"precise_events_record_the_walks_registers_with_tables",
     precise_events_record_the_walks_registers_with_tables},
    {"mem_events_fall_back_to_u64_weight_before_5_12",
     mem_events_fall_back_to_u64_weight_before_5_12},
    {"hybrid_mem_loads_uses_each_pmus_encoding", hybrid_mem_loads_uses_each_pmus_encoding},
    {"amd_mem_loads_is_ibs_op", amd_mem_loads_is_ibs_op},
    {"raw_events", raw_events},
    {"sampling_rate_limits", sampling_rate_limits},
    {"cpu_offline_between_scan_and_open", cpu_offline_between_scan_and_open},
    {"dry_run_keeps_nothing_open", dry_run_keeps_nothing_open},
    {"pid_target_inherits", pid_target_inherits},
    {"spec_parsing", spec_parsing},
    {"live_auto_on_this_machine", live_auto_on_this_machine},
    {"arrowlake_h_three_core_pmus", arrowlake_h_three_core_pmus},
    {"named_precise_events_per_model", named_precise_events_per_model},
    {"named_precise_events_hybrid_and_amd", named_precise_events_hybrid_and_amd},
    {"user_kernel_filters_and_ibs", user_kernel_filters_and_ibs},
    {"ibs_memory_fields_need_6_1", ibs_memory_fields_need_6_1},
    {"enodata_retries_behind_aux_leader", enodata_retries_behind_aux_leader},
    {"raw_sysfs_alias_and_aux", raw_sysfs_alias_and_aux},
    {"can_sample_lists", can_sample_lists},
};
TEST_MAIN()
