/*
 * The probe report and the system facts behind it: sysctls and capabilities from recorded
 * procfs trees, the text and JSON reports for every recorded machine (the JSON is checked
 * by a strict parser here), escaping, and the subcommand's exit codes. Live cases read this
 * machine's real /sys and /proc.
 */
#include "check.h"
#include "sampling/probe.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define MACHINE(m) PP_TEST_DATA_DIR "/sysfs/" m

static const char *const machines[] = {"novm-pmu",  "skylake-sp",  "icelake-sp", "sapphire-rapids",
				       "alderlake", "arrowlake-h", "zen3",	 "zen4",
				       "zen5"};

/* ---- a strict JSON validator (RFC 8259 grammar, no extensions) ---- */
static int j_value(const char **p, int depth);

static void j_ws(const char **p)
{
	while (**p == ' ' || **p == '\n' || **p == '\r' || **p == '\t')
		(*p)++;
}

static int j_string(const char **p)
{
	if (**p != '"')
		return 0;
	(*p)++;
	while (**p != '"') {
		unsigned char c = (unsigned char)**p;

		if (c == '\0' || c < 0x20)
			return 0;
		if (c == '\\') {
			(*p)++;
			if (**p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)(*p)[i]))
						return 0;
				*p += 4;
			} else if (!strchr("\"\\/bfnrt", **p) || **p == '\0') {
				return 0;
			}
		}
		(*p)++;
	}
	(*p)++;
	return 1;
}

static int j_number(const char **p)
{
	const char *s = *p;

	if (**p == '-')
		(*p)++;
	if (**p == '0')
		(*p)++;
	else if (isdigit((unsigned char)**p))
		while (isdigit((unsigned char)**p))
			(*p)++;
	else
		return 0;
	if (**p == '.') {
		(*p)++;
		if (!isdigit((unsigned char)**p))
			return 0;
		while (isdigit((unsigned char)**p))
			(*p)++;
	}
	return *p > s;
}

static int j_value(const char **p, int depth)
{
	if (depth > 64)
		return 0;
	j_ws(p);
	if (**p == '{' || **p == '[') {
		char close = **p == '{' ? '}' : ']';
		int obj = **p == '{';

		(*p)++;
		j_ws(p);
		if (**p == close) {
			(*p)++;
			return 1;
		}
		for (;;) {
			if (obj) {
				j_ws(p);
				if (!j_string(p))
					return 0;
				j_ws(p);
				if (**p != ':')
					return 0;
				(*p)++;
			}
			if (!j_value(p, depth + 1))
				return 0;
			j_ws(p);
			if (**p == ',') {
				(*p)++;
				continue;
			}
			if (**p != close)
				return 0;
			(*p)++;
			return 1;
		}
	}
	if (**p == '"')
		return j_string(p);
	if (!strncmp(*p, "true", 4) || !strncmp(*p, "null", 4)) {
		*p += 4;
		return 1;
	}
	if (!strncmp(*p, "false", 5)) {
		*p += 5;
		return 1;
	}
	return j_number(p);
}

static int json_valid(const char *s)
{
	if (!j_value(&s, 0))
		return 0;
	j_ws(&s);
	return *s == '\0';
}

/* ---- helpers ---- */
static int ok_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		   unsigned long flags, void *ctx)
{
	(void)attr, (void)pid, (void)cpu, (void)group_fd, (void)flags, (void)ctx;
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static int eacces_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		       unsigned long flags, void *ctx)
{
	(void)attr, (void)pid, (void)cpu, (void)group_fd, (void)flags, (void)ctx;
	return -EACCES;
}

static struct pp_sys *load(const char *machine)
{
	char sysfs[512], procfs[512];
	struct pp_sys_opts o = {
	    .sysfs_root = sysfs, .procfs_root = procfs, .kernel_release = "6.12.117-amd64"};

	snprintf(sysfs, sizeof(sysfs), "%s/%s/sys", PP_TEST_DATA_DIR "/sysfs", machine);
	snprintf(procfs, sizeof(procfs), "%s/%s/proc", PP_TEST_DATA_DIR "/sysfs", machine);
	return pp_sys_new(&o);
}

/* Run the report into a malloc'ed string (caller frees). */
static char *report(const struct pp_sys *sys, pp_perf_open_fn fn, int json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return NULL;
	if (pp_probe_report(sys, fn, NULL, json, out, NULL) != 0) {
		fclose(out);
		free(buf);
		return NULL;
	}
	fclose(out);
	return buf;
}

/* ---- sysinfo ---- */
TEST(capeff_parse)
{
	const char *st = "Name:\tx\nCapPrm:\t0000000000000001\nCapEff:\t000001fffeffffff\n";
	uint64_t v = 0;

	REQUIRE(pp_sys_parse_capeff(st, strlen(st), &v) == 0);
	CHECK_EQ_U64(v, 0x1fffeffffffULL);
	CHECK(pp_sys_parse_capeff("CapPrm:\t1\n", 10, &v) == -ENOENT);
	CHECK(pp_sys_parse_capeff("CapEff:\tzz\n", 11, &v) == -EINVAL);
	CHECK(pp_sys_parse_capeff("CapEff:\t11111111111111111\n", 26, &v) == -EINVAL);
	/* the length bounds the parse */
	CHECK(pp_sys_parse_capeff(st, 20, &v) == -ENOENT);
	CHECK_STR(pp_cap_name(PP_CAP_PERFMON), "CAP_PERFMON");
	CHECK_STR(pp_cap_name(PP_CAP_BPF), "CAP_BPF");
	CHECK_STR(pp_cap_name(PP_CAP_SYS_ADMIN), "CAP_SYS_ADMIN");
	CHECK(pp_cap_name(63) == NULL);
}

TEST(sysinfo_from_recorded_trees)
{
	struct pp_sys *sys = load("novm-pmu");
	char caps[2048];

	REQUIRE(sys);
	CHECK(sys->perf_event_paranoid == 2);
	CHECK(sys->max_sample_rate == 100000);
	CHECK(sys->max_stack == 127);
	CHECK(sys->kptr_restrict == 0);
	CHECK(sys->cap_eff_known);
	CHECK(pp_sys_has_cap(sys, PP_CAP_SYS_ADMIN));
	CHECK(pp_sys_has_cap(sys, PP_CAP_BPF) && pp_sys_has_cap(sys, PP_CAP_PERFMON));
	CHECK(!pp_sys_has_cap(sys, PP_CAP_SYS_RESOURCE)); /* bit 24 clear in this VM's CapEff */
	pp_sys_caps_str(sys, caps, sizeof(caps));
	CHECK(strstr(caps, "CAP_SYS_PTRACE,") != NULL);
	CHECK(strstr(caps, "CAP_SYS_RESOURCE") == NULL);
	CHECK(strstr(caps, "CAP_PERFMON,CAP_BPF") != NULL);
	CHECK_STR(sys->kernel_release, "6.12.117-amd64");
	CHECK(sys->kernel_major == 6 && sys->kernel_minor == 12);
	CHECK(sys->btf_vmlinux == PP_FEAT_NO);	    /* fixtures carry no BTF */
	CHECK(sys->has_ringbuf == PP_FEAT_UNKNOWN); /* BPF probes were not asked for */
	CHECK(sys->pmus && sys->pmus->nr_pmus == 5);
	/* this VM's kernel has no kprobes (no kprobe PMU in its tree); a Zen 5 host's has */
	CHECK(sys->has_kprobes == PP_FEAT_NO);
	pp_sys_free(sys);
	pp_sys_free(NULL);
	sys = load("zen5");
	REQUIRE(sys);
	CHECK(sys->has_kprobes == PP_FEAT_YES);
	pp_sys_free(sys);
}

TEST(cpuinfo_parse)
{
	const char *ci = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
			 "model\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\n"
			 "processor\t: 1\nvendor_id\t: Other\nmodel\t\t: 1\n";
	char vendor[16];
	int fam, model;

	REQUIRE(pp_sys_parse_cpuinfo(ci, strlen(ci), vendor, sizeof(vendor), &fam, &model) == 0);
	CHECK_STR(vendor, "GenuineIntel");
	CHECK(fam == 6 && model == 143); /* "model name" is not "model"; block 2 is ignored */
	/* truncated before the model line */
	CHECK(pp_sys_parse_cpuinfo(ci, (size_t)(strstr(ci, "model\t") - ci), vendor, sizeof(vendor),
				   &fam, &model) == -ENOENT);
	CHECK(fam == 6 && model == -1);
	/* a short vendor buffer truncates; non-numeric values stay unknown */
	ci = "vendor_id : AuthenticAMD\ncpu family : x\nmodel : 1\n";
	CHECK(pp_sys_parse_cpuinfo(ci, strlen(ci), vendor, 5, &fam, &model) == -ENOENT);
	CHECK_STR(vendor, "Auth");
	CHECK(fam == -1 && model == 1);
	CHECK(pp_sys_parse_cpuinfo("", 0, vendor, sizeof(vendor), &fam, &model) == -ENOENT);
}

TEST(sysinfo_missing_proc)
{
	struct pp_sys_opts o = {.sysfs_root = PP_TEST_DATA_DIR "/sysfs/none",
				.procfs_root = PP_TEST_DATA_DIR "/sysfs/none"};
	struct pp_sys *sys = pp_sys_new(&o);
	char caps[64];

	REQUIRE(sys);
	CHECK(sys->perf_event_paranoid == PP_SYSCTL_UNKNOWN);
	CHECK(sys->max_sample_rate == PP_SYSCTL_UNKNOWN);
	CHECK(!sys->cap_eff_known);
	CHECK_STR(pp_sys_caps_str(sys, caps, sizeof(caps)), "unknown");
	CHECK(sys->pmus->nr_pmus == 0);
	pp_sys_free(sys);
}

TEST(sysinfo_live)
{
	struct pp_sys_opts o = {.probe_bpf = 1};
	struct pp_sys *sys = pp_sys_new(&o);

	REQUIRE(sys);
	CHECK(sys->kernel_release[0] != '\0');
	CHECK(sys->kernel_major >= 4);
	CHECK(sys->perf_event_paranoid != PP_SYSCTL_UNKNOWN);
	CHECK(sys->cap_eff_known);
	CHECK(sys->is_root == (geteuid() == 0));
	if (access("/sys/kernel/btf/vmlinux", R_OK) == 0) {
		CHECK(sys->btf_vmlinux == PP_FEAT_YES);
		/* the kfunc exists from 6.2 on */
		if (sys->kernel_major > 6 || (sys->kernel_major == 6 && sys->kernel_minor >= 2))
			CHECK(sys->has_cast_to_kern_ctx == PP_FEAT_YES);
	}
	if (geteuid() == 0) {
		CHECK(sys->has_ringbuf == PP_FEAT_YES);
		CHECK(sys->has_perf_event_prog == PP_FEAT_YES);
		CHECK(sys->has_attach_cookie == PP_FEAT_YES);
	}
	pp_sys_free(sys);
}

/* ---- report ---- */
TEST(json_escaping)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	REQUIRE(out);
	pp_probe_json_string(out, "a\"b\\c\nd\x01\x7f");
	fclose(out);
	CHECK_STR(buf, "\"a\\\"b\\\\c\\nd\\u0001\\u007f\"");
	CHECK(json_valid(buf));
	free(buf);
}

TEST(cpulist_format)
{
	static const int cpus[] = {0, 1, 2, 3, 5, 7, 8};
	char buf[64];

	CHECK_STR(pp_probe_cpulist_str(cpus, 7, buf, sizeof(buf)), "0-3,5,7-8");
	CHECK_STR(pp_probe_cpulist_str(cpus, 0, buf, sizeof(buf)), "");
	CHECK_STR(pp_probe_cpulist_str(cpus + 4, 1, buf, sizeof(buf)), "5");
}

TEST(text_report_vm)
{
	struct pp_sys *sys = load("novm-pmu");
	char *t;

	REQUIRE(sys);
	t = report(sys, ok_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "release                      6.12.117-amd64") != NULL);
	CHECK(strstr(t, "perf_event_paranoid          2") != NULL);
	CHECK(strstr(t, "msr: type 9, other") != NULL);
	CHECK(strstr(t, "software: type 1, software") != NULL);
	CHECK(strstr(t, "hardware PMU: none") != NULL);
	CHECK(strstr(t, "use -e cpu-clock") != NULL);
	CHECK(strstr(t, "\ncan sample: cpu-clock\n") != NULL);
	CHECK(strstr(t, "-e mem-loads would open: nothing: -e mem-loads: this machine has no "
			"hardware PMU") != NULL);
	CHECK(strstr(t, "-e mem-stores would open: nothing: ") != NULL);
	CHECK(strstr(t, "auto would pick: cpu-clock on software (type 1, config 0x0, precise_ip 0) "
			"because no hardware PMU under ") != NULL);
	CHECK(strstr(t, "online                       0-1 (2)") != NULL);
	free(t);
	pp_sys_free(sys);
}

TEST(text_report_skylake)
{
	struct pp_sys *sys = load("skylake-sp");
	char *t;

	REQUIRE(sys);
	t = report(sys, ok_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "cpu: type 4, intel-core, max_precise 3, pmu_name skylake\n") != NULL);
	CHECK(strstr(t, "    mem-loads      event=0xcd,umask=0x1,ldlat=3\n") != NULL);
	CHECK(strstr(t, "    mem-stores     event=0xd0,umask=0x82\n") != NULL);
	CHECK(strstr(t, "    mem-loads-aux  (absent)\n") != NULL);
	CHECK(strstr(t, "    ldlat format   config1:0-15\n") != NULL);
	CHECK(strstr(t, "    precise events (skylake): INST_RETIRED.PREC_DIST, "
			"BR_INST_RETIRED.ALL_BRANCHES, ") != NULL);
	CHECK(strstr(t, "  cpu                          GenuineIntel family 6 model 85 (0x55)\n") !=
	      NULL);
	CHECK(strstr(t, "can sample: cpu-clock, cycles, instructions, mem-loads, mem-stores, ") !=
	      NULL);
	/* sample_type = IP | CALLCHAIN | ADDR | DATA_SRC | WEIGHT_STRUCT; config1 = ldlat 30 */
	CHECK(strstr(t, "-e mem-loads would open: mem-loads on cpu (type 4, config 0x1cd, config1 "
			"0x1e, config2 0x0, precise_ip 3, sample_type 0x1008029)\n") != NULL);
	CHECK(strstr(t,
		     "-e mem-stores would open: mem-stores on cpu (type 4, config 0x82d0, "
		     "config1 0x0, config2 0x0, precise_ip 3, sample_type 0x1008029)\n") != NULL);
	CHECK(strstr(t, "uncore_imc_0: type 13, other, cpus 0\n") != NULL);
	CHECK(strstr(t, "hardware PMU: none") == NULL);
	CHECK(strstr(t, "auto would pick: cycles on cpu (type 0, config 0x0, precise_ip 3) because "
			"cpu: max_precise=3") != NULL);
	free(t);
	pp_sys_free(sys);
}

TEST(text_report_hybrid_and_amd)
{
	struct pp_sys *sys = load("alderlake");
	char *t;

	REQUIRE(sys);
	t = report(sys, ok_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "cpu_atom: type 10, intel-core, cpus 8-15, max_precise 3") != NULL);
	CHECK(strstr(t, "auto would pick: cycles on cpu_atom (type 0, config 0xa00000000") != NULL);
	CHECK(strstr(t, "auto would pick: cycles on cpu_core (type 0, config 0x400000000") != NULL);
	CHECK(strstr(t, "precise events (gracemont): INST_RETIRED.ANY_P, ") != NULL);
	CHECK(strstr(t, "precise events (golden_cove): INST_RETIRED.PREC_DIST, ") != NULL);
	CHECK(strstr(t,
		     "-e mem-loads would open: mem-loads on cpu_atom (type 10, config 0x5d0, "
		     "config1 0x1e, config2 0x0, precise_ip 3, sample_type 0x1008029)\n") != NULL);
	CHECK(strstr(t, "-e mem-loads would open: mem-loads on cpu_core (type 4, config 0x1cd, "
			"config1 0x1e, config2 0x0, precise_ip 3, sample_type 0x1008029, behind "
			"mem-loads-aux leader 0x8203)\n") != NULL);
	free(t);
	pp_sys_free(sys);

	sys = load("arrowlake-h");
	REQUIRE(sys);
	t = report(sys, ok_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "cpu_lowpower: type 11, intel-core, cpus 14-15, max_precise 3, pmu_name "
			"arrowlake_h_hybrid\n") != NULL);
	CHECK(strstr(t, "-e mem-stores would open: mem-stores on cpu_lowpower (type 11, config "
			"0x6d0, ") != NULL);
	CHECK(strstr(t, "auto would pick: cycles on cpu_lowpower (type 0, config 0xb00000000") !=
	      NULL);
	CHECK(strstr(t, "mem-loads-aux leader") == NULL);
	free(t);
	pp_sys_free(sys);

	sys = load("zen5");
	REQUIRE(sys);
	t = report(sys, ok_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "    ibs: cnt_ctl yes, l3missonly yes, ldlat filter yes, swfilt yes, "
			"zen4_ibs_extensions yes\n") != NULL);
	CHECK(strstr(t, "  cpu                          AuthenticAMD family 26 model 2 (0x2)\n") !=
	      NULL);
	free(t);
	pp_sys_free(sys);

	sys = load("zen4");
	REQUIRE(sys);
	t = report(sys, ok_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "cpu: type 4, amd-core, max_precise 0\n") != NULL);
	CHECK(strstr(t, "ibs_op: type 11, amd-ibs-op\n    ibs: cnt_ctl yes, l3missonly yes, ldlat "
			"filter no, swfilt no, zen4_ibs_extensions yes\n    formats: cnt_ctl "
			"l3missonly\n    caps: zen4_ibs_extensions\n") != NULL);
	CHECK(strstr(t, "    precise events: none known for this AMD core (precise = IBS)\n") !=
	      NULL);
	CHECK(strstr(t,
		     "-e mem-stores would open: mem-stores on ibs_op (type 11, config 0x80000, "
		     "config1 0x0, config2 0x0, precise_ip 0, sample_type 0x1008009)\n") != NULL);
	CHECK(strstr(t, "precise_ip 2) because ibs_op present") != NULL);
	free(t);
	pp_sys_free(sys);
}

TEST(report_privilege_failure)
{
	struct pp_sys *sys = load("skylake-sp");
	char *t;

	REQUIRE(sys);
	t = report(sys, eacces_open, 0);
	REQUIRE(t);
	CHECK(strstr(t, "auto would pick: nothing: ") != NULL);
	CHECK(strstr(t, "perf_event_paranoid=2") != NULL);
	free(t);
	t = report(sys, eacces_open, 1);
	REQUIRE(t);
	CHECK(json_valid(t));
	CHECK(strstr(t, "\"auto\":{\"error\":\"perf_event_open(") != NULL);
	CHECK(strstr(t, "\"events\":[]") != NULL);
	free(t);
	pp_sys_free(sys);
}

TEST(json_report_every_machine)
{
	for (size_t i = 0; i < sizeof(machines) / sizeof(machines[0]); i++) {
		struct pp_sys *sys = load(machines[i]);
		char *t;

		REQUIRE(sys);
		t = report(sys, ok_open, 1);
		REQUIRE(t);
		if (!json_valid(t))
			fprintf(stderr, "  invalid JSON for %s:\n%s\n", machines[i], t);
		CHECK(json_valid(t));
		CHECK(strstr(t, "\"auto\":{\"error\":null,\"events\":[{\"event\":") != NULL);
		CHECK(strstr(t, "\"release\":\"6.12.117-amd64\"") != NULL);
		if (!strcmp(machines[i], "novm-pmu")) {
			CHECK(strstr(t, "\"hardware_pmu\":false") != NULL);
			CHECK(strstr(t, "\"event\":\"cpu-clock\"") != NULL);
			CHECK(strstr(t, "\"value_unit\":\"nanoseconds\"") != NULL);
		} else {
			CHECK(strstr(t, "\"hardware_pmu\":true") != NULL);
		}
		CHECK(strstr(t, "\"can_sample\":\"cpu-clock") != NULL);
		CHECK(strstr(t, "\"memory_events\":{\"mem-loads\":{\"error\":") != NULL);
		CHECK(strstr(t, "},\"mem-stores\":{\"error\":") != NULL);
		if (!strcmp(machines[i], "sapphire-rapids")) {
			CHECK(strstr(t, "\"mem-loads-aux\":\"event=0x03,umask=0x82\"") != NULL);
			/* the load event behind the 0x8203 leader, ldlat 30, 0x1008029 bits */
			CHECK(strstr(t, "\"mem-loads\":{\"error\":null,\"events\":[{\"event\":"
					"\"mem-loads\",\"pmu\":\"cpu\",\"type\":4,\"config\":461,"
					"\"config1\":30,\"config2\":0,\"precise_ip\":3,\"memory\":"
					"true,\"sample_type\":16810025,\"aux_leader\":33283,") !=
			      NULL);
			CHECK(strstr(t, "\"uarch\":\"golden_cove\"") != NULL);
		}
		if (!strcmp(machines[i], "novm-pmu")) {
			CHECK(strstr(t, "\"can_sample\":\"cpu-clock\"") != NULL);
			CHECK(strstr(t, "\"mem-loads\":{\"error\":\"-e mem-loads: this machine has "
					"no hardware PMU") != NULL);
			CHECK(strstr(t, "\"cpu\":{\"vendor\":\"AuthenticAMD\",\"family\":25,"
					"\"model\":17}") != NULL);
		}
		if (!strcmp(machines[i], "zen4"))
			CHECK(strstr(t, "\"ibs\":{\"cnt_ctl\":true,\"l3missonly\":true,\"ldlat\":"
					"false,\"swfilt\":false,\"zen4_ibs_extensions\":true}") !=
			      NULL);
		if (!strcmp(machines[i], "zen5"))
			CHECK(strstr(t,
				     "\"ibs\":{\"cnt_ctl\":true,\"l3missonly\":true,\"ldlat\":"
				     "true,\"swfilt\":true,\"zen4_ibs_extensions\":true}") != NULL);
		if (!strcmp(machines[i], "zen3"))
			CHECK(strstr(t, "\"name\":\"cpu\",\"type\":4,\"kind\":\"amd-core\"") !=
			      NULL);
		if (!strcmp(machines[i], "skylake-sp")) {
			CHECK(strstr(t, "\"ldlat_format\":\"config1:0-15\",\"uarch\":\"skylake\","
					"\"precise_events\":[\"INST_RETIRED.PREC_DIST\",") != NULL);
			CHECK(strstr(t, "\"want_user_only\":false,\"want_kernel_only\":false") !=
			      NULL);
			CHECK(strstr(t,
				     "\"name\":\"cpu\",\"type\":4,\"kind\":\"intel-core\",\"cpus\":"
				     "null,\"max_precise\":3,\"pmu_name\":\"skylake\"") != NULL);
			CHECK(strstr(t, "\"perf_event_paranoid\":2") != NULL);
		}
		free(t);
		pp_sys_free(sys);
	}
}

/* Run pp_probe_run with stdout captured into a file; returns the exit code. */
static int run_captured(int argc, char **argv, char **text)
{
	char path[] = "/tmp/pp_probe_outXXXXXX";
	int fd = mkstemp(path), saved, rc;
	FILE *f;
	long len;

	*text = NULL;
	if (fd < 0)
		return -1;
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	dup2(fd, STDOUT_FILENO);
	rc = pp_probe_run(argc, argv, NULL);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(fd);
	f = fopen(path, "r");
	unlink(path);
	if (!f)
		return rc;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	*text = calloc(1, (size_t)len + 1);
	if (*text && len > 0 && fread(*text, 1, (size_t)len, f) != (size_t)len)
		(*text)[0] = '\0';
	fclose(f);
	return rc;
}

TEST(subcommand_exit_codes)
{
	char *help[] = {"probe", "--help", NULL};
	char *bad[] = {"probe", "--bogus", NULL};
	char *extra[] = {"probe", "extra", NULL};
	char *json[] = {"probe",
			"--json",
			"--sysfs-root",
			MACHINE("novm-pmu") "/sys",
			"--procfs-root",
			MACHINE("novm-pmu") "/proc",
			NULL};
	char *t;

	CHECK(run_captured(2, help, &t) == 0);
	CHECK(t && strstr(t, "usage: pebsprof probe") != NULL);
	free(t);
	CHECK(run_captured(2, bad, &t) == 2);
	free(t);
	CHECK(run_captured(2, extra, &t) == 2);
	free(t);
	/* the real opener in dry-run mode on a recorded PMU-less tree: cpu-clock on CPU 0 */
	if (geteuid() != 0)
		SKIP("opening cpu-clock with the real syscall needs root here");
	CHECK(run_captured(6, json, &t) == 0);
	REQUIRE(t);
	CHECK(json_valid(t));
	CHECK(strstr(t, "\"event\":\"cpu-clock\"") != NULL);
	free(t);
}

TEST(live_report_this_machine)
{
	char *argv[] = {"probe", NULL};
	char *jargv[] = {"probe", "--json", NULL};
	char *t;

	CHECK(run_captured(1, argv, &t) == 0);
	REQUIRE(t);
	CHECK(strstr(t, "auto would pick: ") != NULL);
	if (access("/sys/bus/event_source/devices/cpu", F_OK) != 0 &&
	    access("/sys/bus/event_source/devices/cpu_core", F_OK) != 0 &&
	    access("/sys/bus/event_source/devices/ibs_op", F_OK) != 0) {
		CHECK(strstr(t, "hardware PMU: none") != NULL);
		if (geteuid() == 0)
			CHECK(strstr(t, "auto would pick: cpu-clock") != NULL);
	}
	free(t);
	CHECK(run_captured(2, jargv, &t) == 0);
	REQUIRE(t);
	CHECK(json_valid(t));
	free(t);
}

TEST_LIST = {
    {"capeff_parse", capeff_parse},
    {"sysinfo_from_recorded_trees", sysinfo_from_recorded_trees},
    {"cpuinfo_parse", cpuinfo_parse},
    {"sysinfo_missing_proc", sysinfo_missing_proc},
    {"sysinfo_live", sysinfo_live},
    {"json_escaping", json_escaping},
    {"cpulist_format", cpulist_format},
    {"text_report_vm", text_report_vm},
    {"text_report_skylake", text_report_skylake},
    {"text_report_hybrid_and_amd", text_report_hybrid_and_amd},
    {"report_privilege_failure", report_privilege_failure},
    {"json_report_every_machine", json_report_every_machine},
    {"subcommand_exit_codes", subcommand_exit_codes},
    {"live_report_this_machine", live_report_this_machine},
};
TEST_MAIN()
