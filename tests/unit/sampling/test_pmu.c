/*
 * PMU discovery against recorded sysfs trees of real machines (tests/data/sysfs/<machine>),
 * and the cpulist / format / term-encoding parsers on exact inputs.
 */
#include "check.h"
#include "sampling/pmu.h"

#include <errno.h>
#include <linux/perf_event.h>

#define ROOT(m) PP_TEST_DATA_DIR "/sysfs/" m "/sys"

TEST(cpulist_ranges)
{
	int *cpus;
	size_t n;

	REQUIRE(pp_cpulist_parse("0-7,16\n", 7, &cpus, &n) == 0);
	REQUIRE(n == 9);
	CHECK(cpus[0] == 0 && cpus[7] == 7 && cpus[8] == 16);
	free(cpus);

	REQUIRE(pp_cpulist_parse("5,1,3-4,1", 9, &cpus, &n) == 0);
	REQUIRE(n == 4); /* sorted, duplicates folded */
	CHECK(cpus[0] == 1 && cpus[1] == 3 && cpus[2] == 4 && cpus[3] == 5);
	free(cpus);

	REQUIRE(pp_cpulist_parse("\n", 1, &cpus, &n) == 0);
	CHECK(n == 0 && cpus == NULL);
}

TEST(cpulist_errors)
{
	int *cpus = (int *)1;
	size_t n = 99;

	CHECK(pp_cpulist_parse("0-", 2, &cpus, &n) == -EINVAL);
	CHECK(cpus == NULL && n == 0);
	CHECK(pp_cpulist_parse("3-1", 3, &cpus, &n) == -EINVAL);
	CHECK(pp_cpulist_parse("0,,1", 4, &cpus, &n) == -EINVAL);
	CHECK(pp_cpulist_parse("0,", 2, &cpus, &n) == -EINVAL);
	CHECK(pp_cpulist_parse("a", 1, &cpus, &n) == -EINVAL);
	CHECK(pp_cpulist_parse("0-99999", 7, &cpus, &n) == -E2BIG);
	/* the length bounds the parse: "0-3" cut to "0-" is an error */
	CHECK(pp_cpulist_parse("0-3", 2, &cpus, &n) == -EINVAL);
}

TEST(format_specs)
{
	struct pp_pmu_format f;

	REQUIRE(pp_pmu_format_parse("config:0-7\n", 11, &f) == 0);
	CHECK(f.word == 0);
	CHECK_EQ_U64(f.mask, 0xff);
	REQUIRE(pp_pmu_format_parse("config1:0-15", 12, &f) == 0);
	CHECK(f.word == 1);
	CHECK_EQ_U64(f.mask, 0xffff);
	REQUIRE(pp_pmu_format_parse("config:0-7,32-35", 16, &f) == 0);
	CHECK_EQ_U64(f.mask, 0xf000000ffULL);
	REQUIRE(pp_pmu_format_parse("config2:0", 9, &f) == 0);
	CHECK(f.word == 2);
	CHECK_EQ_U64(f.mask, 1);
	REQUIRE(pp_pmu_format_parse("config:0-63", 11, &f) == 0);
	CHECK_EQ_U64(f.mask, UINT64_MAX);

	CHECK(pp_pmu_format_parse("config3:0", 9, &f) == -EINVAL);
	CHECK(pp_pmu_format_parse("config:64", 9, &f) == -EINVAL);
	CHECK(pp_pmu_format_parse("config:", 7, &f) == -EINVAL);
	CHECK(pp_pmu_format_parse("config:7-0", 10, &f) == -EINVAL);
	CHECK(pp_pmu_format_parse("config:0-7,", 11, &f) == -EINVAL);
	CHECK(pp_pmu_format_parse("umask:8", 7, &f) == -EINVAL);
}

TEST(classify)
{
	CHECK(pp_pmu_classify("cpu") == PP_PMU_INTEL_CORE);
	CHECK(pp_pmu_classify("cpu_core") == PP_PMU_INTEL_CORE);
	CHECK(pp_pmu_classify("cpu_atom") == PP_PMU_INTEL_CORE);
	CHECK(pp_pmu_classify("cpu_lowpower") == PP_PMU_INTEL_CORE);
	CHECK(pp_pmu_classify("ibs_op") == PP_PMU_AMD_IBS_OP);
	CHECK(pp_pmu_classify("ibs_fetch") == PP_PMU_AMD_IBS_FETCH);
	CHECK(pp_pmu_classify("software") == PP_PMU_SOFTWARE);
	CHECK(pp_pmu_classify("cpufreq") == PP_PMU_OTHER);
	CHECK(pp_pmu_classify("uncore_imc_0") == PP_PMU_OTHER);
}

TEST(scan_skylake)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("skylake-sp"));
	const struct pp_pmu *cpu, *power, *imc, *core[4];
	const struct pp_pmu_format *f;

	REQUIRE(set);
	CHECK(set->nr_online == 8);
	cpu = pp_pmu_find(set, "cpu");
	REQUIRE(cpu);
	CHECK(cpu->type == 4);
	CHECK(cpu->kind == PP_PMU_INTEL_CORE);
	CHECK(cpu->max_precise == 3);
	CHECK_STR(cpu->pmu_name, "skylake");
	CHECK(cpu->nr_cpus == 0); /* non-hybrid cpu PMU has no cpus file */
	CHECK_STR(pp_pmu_event(cpu, "mem-loads"), "event=0xcd,umask=0x1,ldlat=3");
	CHECK_STR(pp_pmu_event(cpu, "mem-stores"), "event=0xd0,umask=0x82");
	CHECK(pp_pmu_event(cpu, "mem-loads-aux") == NULL);
	CHECK_STR(pp_pmu_cap(cpu, "branches"), "32");
	f = pp_pmu_format(cpu, "ldlat");
	REQUIRE(f);
	CHECK(f->word == 1);
	CHECK_EQ_U64(f->mask, 0xffff);
	CHECK(cpu->nr_formats == 12);
	CHECK(pp_pmu_core_pmus(set, core, 4) == 1);

	power = pp_pmu_find(set, "power");
	REQUIRE(power);
	CHECK(pp_pmu_event(power, "energy-pkg") != NULL);
	CHECK(pp_pmu_event(power, "energy-pkg.scale") == NULL); /* describes, is not, an event */
	CHECK(power->nr_events == 1);
	imc = pp_pmu_find(set, "uncore_imc_0");
	REQUIRE(imc);
	CHECK(imc->nr_cpus == 1 && imc->cpus[0] == 0);
	CHECK(pp_pmu_find(set, "ibs_op") == NULL);
	pp_pmu_set_free(set);
}

TEST(scan_vm_without_pmu)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("novm-pmu"));
	const struct pp_pmu *core[4], *sw, *msr;

	REQUIRE(set);
	CHECK(set->nr_pmus == 5);
	CHECK(pp_pmu_core_pmus(set, core, 4) == 0);
	sw = pp_pmu_find(set, "software");
	REQUIRE(sw);
	CHECK(sw->type == PERF_TYPE_SOFTWARE && sw->kind == PP_PMU_SOFTWARE);
	CHECK(sw->max_precise == -1);
	msr = pp_pmu_find(set, "msr");
	REQUIRE(msr);
	CHECK(msr->type == 9);
	CHECK_STR(pp_pmu_event(msr, "tsc"), "event=0x00");
	CHECK(set->nr_online == 2 && set->online[0] == 0 && set->online[1] == 1);
	pp_pmu_set_free(set);
}

TEST(scan_amd_fixes_vendor)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("zen3"));
	const struct pp_pmu *cpu, *op, *fetch, *core[4];

	REQUIRE(set);
	cpu = pp_pmu_find(set, "cpu");
	op = pp_pmu_find(set, "ibs_op");
	fetch = pp_pmu_find(set, "ibs_fetch");
	REQUIRE(cpu && op && fetch);
	CHECK(cpu->kind == PP_PMU_AMD_CORE);
	CHECK(cpu->max_precise == 0);
	CHECK_STR(cpu->pmu_name, "");
	CHECK(op->kind == PP_PMU_AMD_IBS_OP && op->type == 11);
	CHECK(fetch->kind == PP_PMU_AMD_IBS_FETCH && fetch->type == 10);
	CHECK(pp_pmu_cap(op, "zen4_ibs_extensions") == NULL);
	CHECK(pp_pmu_core_pmus(set, core, 4) == 1);
	pp_pmu_set_free(set);

	set = pp_pmu_scan(ROOT("zen4"));
	REQUIRE(set);
	op = pp_pmu_find(set, "ibs_op");
	REQUIRE(op);
	CHECK_STR(pp_pmu_cap(op, "zen4_ibs_extensions"), "1");
	REQUIRE(pp_pmu_format(op, "l3missonly"));
	CHECK_EQ_U64(pp_pmu_format(op, "l3missonly")->mask, 1ULL << 16);
	pp_pmu_set_free(set);
}

TEST(scan_hybrid)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("alderlake"));
	const struct pp_pmu *core[4];
	int cpus[64];

	REQUIRE(set);
	REQUIRE(pp_pmu_core_pmus(set, core, 4) == 2);
	CHECK_STR(core[0]->name, "cpu_atom");
	CHECK_STR(core[1]->name, "cpu_core");
	CHECK(core[0]->type == 10 && core[1]->type == 4);
	CHECK(core[0]->nr_cpus == 8 && core[0]->cpus[0] == 8 && core[0]->cpus[7] == 15);
	CHECK(core[1]->nr_cpus == 8 && core[1]->cpus[0] == 0);
	CHECK_STR(pp_pmu_event(core[0], "mem-loads"), "event=0xd0,umask=0x5,ldlat=3");
	CHECK_STR(pp_pmu_event(core[1], "mem-loads-aux"), "event=0x03,umask=0x82");
	CHECK(pp_pmu_online_cpus(set, core[0], cpus) == 8 && cpus[0] == 8);
	pp_pmu_set_free(set);
}

TEST(scan_hybrid_three_pmus)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("arrowlake-h"));
	const struct pp_pmu *core[4];
	int cpus[64];

	REQUIRE(set);
	REQUIRE(pp_pmu_core_pmus(set, core, 4) == 3);
	CHECK_STR(core[2]->name, "cpu_lowpower");
	CHECK(core[2]->kind == PP_PMU_INTEL_CORE && core[2]->type == 11);
	CHECK(core[2]->nr_cpus == 2 && core[2]->cpus[0] == 14 && core[2]->cpus[1] == 15);
	CHECK_STR(core[2]->pmu_name, "arrowlake_h_hybrid");
	CHECK_STR(pp_pmu_event(core[2], "mem-loads"), "event=0xd0,umask=0x5,ldlat=3");
	CHECK_STR(pp_pmu_event(core[2], "mem-stores"), "event=0xd0,umask=0x6");
	CHECK(pp_pmu_event(core[1], "mem-loads-aux") == NULL); /* no PMU_FL_MEM_LOADS_AUX */
	CHECK(pp_pmu_format(core[2], "frontend") == NULL);     /* hybrid_big only */
	CHECK(pp_pmu_format(core[1], "frontend") != NULL);
	CHECK(pp_pmu_online_cpus(set, core[2], cpus) == 2 && cpus[0] == 14);
	pp_pmu_set_free(set);
}

TEST(online_cpus_skip_offline)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("icelake-sp"));
	int cpus[64];
	size_t n;

	REQUIRE(set);
	n = pp_pmu_online_cpus(set, pp_pmu_find(set, "cpu"), cpus);
	REQUIRE(n == 7);
	CHECK(cpus[5] == 5 && cpus[6] == 7);
	pp_pmu_set_free(set);
}

TEST(scan_missing_root_is_empty)
{
	struct pp_pmu_set *set = pp_pmu_scan(PP_TEST_DATA_DIR "/sysfs/does-not-exist");

	REQUIRE(set);
	CHECK(set->nr_pmus == 0);
	CHECK(set->nr_online >= 1); /* falls back to sysconf */
	pp_pmu_set_free(set);
}

TEST(encode_intel_terms)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("skylake-sp"));
	const struct pp_pmu *cpu;
	uint64_t cfg[3];
	char err[256];
	const char *t;

	REQUIRE(set);
	cpu = pp_pmu_find(set, "cpu");
	REQUIRE(cpu);

	memset(cfg, 0, sizeof(cfg));
	t = "event=0xcd,umask=0x1,ldlat=30";
	REQUIRE(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == 0);
	CHECK_EQ_U64(cfg[0], 0x1cd);
	CHECK_EQ_U64(cfg[1], 30);
	CHECK_EQ_U64(cfg[2], 0);

	/* an event name expands; a later term overrides its ldlat=3 */
	memset(cfg, 0, sizeof(cfg));
	t = "mem-loads,ldlat=30";
	REQUIRE(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == 0);
	CHECK_EQ_U64(cfg[0], 0x1cd);
	CHECK_EQ_U64(cfg[1], 30);

	/* the kernel's precise-cycles alias INST_RETIRED.ANY_P inv=1,cmask=16 = 0x108000c0 */
	memset(cfg, 0, sizeof(cfg));
	t = "event=0xc0,inv,cmask=16";
	REQUIRE(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == 0);
	CHECK_EQ_U64(cfg[0], 0x108000c0);

	memset(cfg, 0, sizeof(cfg));
	t = "config=0x1234,config1=5,config2=0x7";
	REQUIRE(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == 0);
	CHECK_EQ_U64(cfg[0], 0x1234);
	CHECK_EQ_U64(cfg[1], 5);
	CHECK_EQ_U64(cfg[2], 7);

	t = "event=0xcd,foo=1";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "'foo'") != NULL);
	t = "umask=0x100";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "umask") != NULL && strstr(err, "too wide") != NULL);
	t = "event=0xzz";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "event") != NULL);
	t = "event=1,";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);
	t = "=1";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);
	t = "event=99999999999999999999999";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);
	pp_pmu_set_free(set);
}

TEST(encode_split_fields)
{
	struct pp_pmu_set *set = pp_pmu_scan(ROOT("zen4"));
	const struct pp_pmu *cpu, *op;
	uint64_t cfg[3] = {0, 0, 0};
	char err[256];
	const char *t;

	REQUIRE(set);
	cpu = pp_pmu_find(set, "cpu");
	op = pp_pmu_find(set, "ibs_op");
	REQUIRE(cpu && op);
	/* AMD event select is config:0-7,32-35: bit 8 of the value lands in bit 32 */
	t = "event=0x1c1";
	REQUIRE(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == 0);
	CHECK_EQ_U64(cfg[0], 0x1000000c1ULL);
	t = "event=0x1000";
	CHECK(pp_pmu_encode(cpu, t, strlen(t), cfg, err, sizeof(err)) == -EINVAL);

	memset(cfg, 0, sizeof(cfg));
	t = "cnt_ctl=1,l3missonly=1";
	REQUIRE(pp_pmu_encode(op, t, strlen(t), cfg, err, sizeof(err)) == 0);
	CHECK_EQ_U64(cfg[0], (1ULL << 19) | (1ULL << 16));
	pp_pmu_set_free(set);
}

TEST_LIST = {
    {"cpulist_ranges", cpulist_ranges},
    {"cpulist_errors", cpulist_errors},
    {"format_specs", format_specs},
    {"classify", classify},
    {"scan_skylake", scan_skylake},
    {"scan_vm_without_pmu", scan_vm_without_pmu},
    {"scan_amd_fixes_vendor", scan_amd_fixes_vendor},
    {"scan_hybrid", scan_hybrid},
    {"scan_hybrid_three_pmus", scan_hybrid_three_pmus},
    {"online_cpus_skip_offline", online_cpus_skip_offline},
    {"scan_missing_root_is_empty", scan_missing_root_is_empty},
    {"encode_intel_terms", encode_intel_terms},
    {"encode_split_fields", encode_split_fields},
};
TEST_MAIN()
