/*
 * Unit tests of the start-up check (pp_sampler_check_system): privileges are judged by the
 * effective capabilities, not the uid, so a root container without CAP_BPF and CAP_PERFMON
 * is told what it lacks, not that its kernel is too old; bpf() refused with EPERM is a
 * privilege problem too; kernel problems are named only when privileges are not in doubt.
 */
#include "check.h"
#include "cli/cli_util.h"
#include "cli/sampler.h"

#include <errno.h>
#include <string.h>

static struct pp_sys capable(void)
{
	struct pp_sys sys;

	memset(&sys, 0, sizeof(sys));
	snprintf(sys.sysfs_root, sizeof(sys.sysfs_root), "/sys");
	sys.btf_vmlinux = 1;
	sys.has_ringbuf = PP_FEAT_YES;
	sys.has_perf_event_prog = PP_FEAT_YES;
	sys.cap_eff_known = 1;
	sys.cap_eff = (1ull << PP_CAP_BPF) | (1ull << PP_CAP_PERFMON);
	return sys;
}

TEST(capabilities_not_uid)
{
	struct pp_sys sys = capable();
	char msg[512];

	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_OK);
	CHECK_STR(msg, "ok");
	/* root in a container that dropped BPF and PERFMON; probes then fail with EPERM */
	sys.is_root = 1;
	sys.cap_eff = 1ull << PP_CAP_SYS_PTRACE;
	sys.has_ringbuf = sys.has_perf_event_prog = PP_FEAT_NO;
	sys.bpf_eperm = 1;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_RUNTIME);
	CHECK(strstr(msg, "missing privileges") != NULL);
	CHECK(strstr(msg, "lacks CAP_BPF and CAP_PERFMON although it runs as uid 0") != NULL);
	CHECK(strstr(msg, "5.8") == NULL);
	/* one of the two */
	sys.cap_eff = 1ull << PP_CAP_BPF;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_RUNTIME);
	CHECK(strstr(msg, "lacks CAP_PERFMON although") != NULL);
	/* CAP_SYS_ADMIN covers both */
	sys = capable();
	sys.cap_eff = 1ull << PP_CAP_SYS_ADMIN;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_OK);
	/* capabilities unknown: the uid decides */
	sys = capable();
	sys.cap_eff_known = 0;
	sys.cap_eff = 0;
	sys.is_root = 1;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_OK);
	sys.is_root = 0;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_RUNTIME);
}

TEST(eperm_is_a_privilege_problem)
{
	struct pp_sys sys = capable();
	char msg[512];

	/* capabilities present, but bpf() refused (seccomp, LSM): not "needs Linux 5.8" */
	sys.has_ringbuf = PP_FEAT_NO;
	sys.bpf_eperm = 1;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_RUNTIME);
	CHECK(strstr(msg, "refuses bpf() with EPERM") != NULL);
	CHECK(strstr(msg, "seccomp") != NULL);
	/* a kernel without ring buffers, privileges in order */
	sys.bpf_eperm = 0;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_RUNTIME);
	CHECK(strstr(msg, "lacks BPF ring buffers: pebsprof needs Linux 5.8") != NULL);
	sys = capable();
	sys.btf_vmlinux = 0;
	CHECK(pp_sampler_check_system(&sys, msg, sizeof(msg)) == PP_EXIT_RUNTIME);
	CHECK(strstr(msg, "no BTF") != NULL);
}

/* The kallsyms message names the real cause, as the kernel's kallsyms_show_value() decides. */
TEST(kallsyms_advice_names_the_cause)
{
	struct pp_sys sys = capable();
	char msg[512];

	sys.kptr_restrict = 0;
	sys.perf_event_paranoid = 2;
	pp_sampler_kallsyms_advice(&sys, EPERM, msg, sizeof(msg));
	CHECK(strstr(msg, "lacks CAP_SYSLOG, which kernel.kptr_restrict=0 with "
			  "kernel.perf_event_paranoid=2 requires") != NULL);
	sys.kptr_restrict = 1;
	sys.perf_event_paranoid = 1;
	pp_sampler_kallsyms_advice(&sys, EPERM, msg, sizeof(msg));
	CHECK(strstr(msg, "lacks CAP_SYSLOG, which kernel.kptr_restrict=1") != NULL);
	sys.kptr_restrict = 2;
	pp_sampler_kallsyms_advice(&sys, EPERM, msg, sizeof(msg));
	CHECK(strstr(msg, "kernel.kptr_restrict=2 hides them from everyone") != NULL);
	/* with CAP_SYSLOG at kptr_restrict 1, or paranoid 1 at 0: something else */
	sys.kptr_restrict = 1;
	sys.cap_eff |= 1ull << PP_CAP_SYSLOG;
	pp_sampler_kallsyms_advice(&sys, ENOENT, msg, sizeof(msg));
	CHECK_STR(msg, strerror(ENOENT));
}

TEST_LIST = {
    {"capabilities_not_uid", capabilities_not_uid},
    {"eperm_is_a_privilege_problem", eperm_is_a_privilege_problem},
    {"kallsyms_advice_names_the_cause", kallsyms_advice_names_the_cause},
};

TEST_MAIN()
