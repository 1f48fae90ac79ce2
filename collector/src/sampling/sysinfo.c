/*
 * Kernel, BPF, sysctl and capability facts for the probe report and the event ladder (see
 * sysinfo.h). BPF features are asked of the kernel through libbpf's probes, because version
 * numbers lie on distribution kernels with backports.
 */
#include "sysinfo.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/fsutil.h"

static const char *const cap_names[] = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

const char *pp_cap_name(unsigned int bit)
{
	if (bit >= sizeof(cap_names) / sizeof(cap_names[0]))
		return NULL;
	return cap_names[bit];
}

const char *pp_feat_str(int feat)
{
	if (feat == PP_FEAT_YES)
		return "yes";
	if (feat == PP_FEAT_NO)
		return "no";
	return "unknown";
}

int pp_sys_parse_capeff(const char *buf, size_t len, uint64_t *cap_eff)
{
	static const char key[] = "CapEff:";
	size_t klen = sizeof(key) - 1;

	for (size_t pos = 0; pos < len;) {
		size_t end = pos;

		while (end < len && buf[end] != '\n')
			end++;
		if (end - pos > klen && memcmp(buf + pos, key, klen) == 0) {
			uint64_t v = 0;
			size_t i = pos + klen, digits = 0;

			while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
				i++;
			for (; i < end && isxdigit((unsigned char)buf[i]); i++, digits++) {
				char c = (char)tolower((unsigned char)buf[i]);

				if (digits >= 16)
					return -EINVAL;
				v = (v << 4) | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
			}
			if (!digits || (i < end && !isspace((unsigned char)buf[i])))
				return -EINVAL;
			*cap_eff = v;
			return 0;
		}
		pos = end + 1;
	}
	return -ENOENT;
}

/* The value after "key<spaces/tabs>:" on a line, or NULL when the line has another key. */
static const char *cpuinfo_value(const char *line, size_t n, const char *key, size_t *vlen)
{
	size_t klen = strlen(key), i;

	if (n < klen || memcmp(line, key, klen) != 0)
		return NULL;
	for (i = klen; i < n && (line[i] == ' ' || line[i] == '\t'); i++)
		;
	if (i == n || line[i] != ':')
		return NULL;
	for (i++; i < n && (line[i] == ' ' || line[i] == '\t'); i++)
		;
	*vlen = n - i;
	return line + i;
}

static int cpuinfo_int(const char *v, size_t n)
{
	int x = 0;

	if (!n || n > 6)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)v[i]))
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x;
}

int pp_sys_parse_cpuinfo(const char *buf, size_t len, char *vendor, size_t vendor_len, int *family,
			 int *model)
{
	size_t pos = 0;

	if (vendor && vendor_len)
		vendor[0] = '\0';
	*family = *model = -1;
	while (pos < len) {
		size_t end = pos, vlen;
		const char *v;

		while (end < len && buf[end] != '\n')
			end++;
		/* a blank line ends the first processor's block */
		if (end == pos)
			break;
		if ((v = cpuinfo_value(buf + pos, end - pos, "vendor_id", &vlen))) {
			if (vendor && vendor_len) {
				if (vlen >= vendor_len)
					vlen = vendor_len - 1;
				memcpy(vendor, v, vlen);
				vendor[vlen] = '\0';
			}
		} else if ((v = cpuinfo_value(buf + pos, end - pos, "cpu family", &vlen))) {
			*family = cpuinfo_int(v, vlen);
		} else if ((v = cpuinfo_value(buf + pos, end - pos, "model", &vlen))) {
			*model = cpuinfo_int(v, vlen);
		}
		pos = end + 1;
	}
	return vendor && vendor[0] && *family >= 0 && *model >= 0 ? 0 : -ENOENT;
}

int pp_sys_has_cap(const struct pp_sys *sys, unsigned int bit)
{
	return sys->cap_eff_known && bit < 64 && (sys->cap_eff >> bit) & 1;
}

char *pp_sys_caps_str(const struct pp_sys *sys, char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	if (!sys->cap_eff_known) {
		snprintf(buf, len, "unknown");
		return buf;
	}
	for (unsigned int b = 0; b < 64; b++) {
		const char *name;
		int n;

		if (!((sys->cap_eff >> b) & 1))
			continue;
		name = pp_cap_name(b);
		if (name)
			n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", name);
		else
			n = snprintf(buf + off, len - off, "%scap_%u", off ? "," : "", b);
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = '\0';
			break;
		}
		off += (size_t)n;
	}
	if (!off)
		snprintf(buf, len, "none");
	return buf;
}

static int64_t read_sysctl(const struct pp_sys *sys, const char *name)
{
	char path[PATH_MAX], buf[64], *end;
	long long v;

	pp_pathf(path, sizeof(path), "%s/sys/kernel/%s", sys->procfs_root, name);
	if (pp_read_small_file(path, buf, sizeof(buf)) <= 0)
		return PP_SYSCTL_UNKNOWN;
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || end == buf)
		return PP_SYSCTL_UNKNOWN;
	return v;
}

/* libbpf probes answer 1 / 0 / -errno; a refusal for lack of privilege is "unknown". */
static int feat_from_probe(int r)
{
	if (r == 1)
		return PP_FEAT_YES;
	if (r == 0)
		return PP_FEAT_NO;
	return PP_FEAT_UNKNOWN;
}

static int silent_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static void probe_bpf(struct pp_sys *sys)
{
	libbpf_print_fn_t old = libbpf_set_print(silent_print);

	sys->has_ringbuf = feat_from_probe(libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL));
	sys->has_perf_event_prog =
	    feat_from_probe(libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL));
	if (sys->has_perf_event_prog == PP_FEAT_YES) {
		sys->has_attach_cookie = feat_from_probe(libbpf_probe_bpf_helper(
		    BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_attach_cookie, NULL));
		/* the table walker: bpf_loop (5.17) and the task's user registers (5.15) */
		sys->has_unwind_tables = feat_from_probe(
		    libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL));
		if (sys->has_unwind_tables == PP_FEAT_YES)
			sys->has_unwind_tables = feat_from_probe(libbpf_probe_bpf_helper(
			    BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL));
	}
	/* libbpf's probes answer "no" for EPERM too: ask with the oldest map there is */
	if (sys->has_ringbuf != PP_FEAT_YES || sys->has_perf_event_prog != PP_FEAT_YES) {
		int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 4, 1, NULL);

		if (fd >= 0)
			close(fd);
		else
			sys->bpf_eperm = errno == EPERM;
	}
	libbpf_set_print(old);
}

static void probe_btf(struct pp_sys *sys, int skip_kfunc_probe)
{
	char path[PATH_MAX];
	struct btf *btf;

	pp_pathf(path, sizeof(path), "%s/kernel/btf/vmlinux", sys->sysfs_root);
	if (access(path, R_OK) != 0) {
		sys->btf_vmlinux = PP_FEAT_NO;
		sys->has_cast_to_kern_ctx = PP_FEAT_NO;
		return;
	}
	sys->btf_vmlinux = PP_FEAT_YES;
	if (skip_kfunc_probe) {
		sys->has_cast_to_kern_ctx = PP_FEAT_UNKNOWN;
		return;
	}
	btf = btf__parse(path, NULL);
	if (!btf) {
		sys->has_cast_to_kern_ctx = PP_FEAT_UNKNOWN;
		return;
	}
	sys->has_cast_to_kern_ctx =
	    btf__find_by_name_kind(btf, "bpf_cast_to_kern_ctx", BTF_KIND_FUNC) >= 0 ? PP_FEAT_YES
										    : PP_FEAT_NO;
	btf__free(btf);
}

int pp_sys_kprobes_at(const char *sysfs_root)
{
	static const char *const where[] = {"bus/event_source/devices/kprobe/type",
					    "kernel/tracing/kprobe_events",
					    "kernel/debug/tracing/kprobe_events"};
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		pp_pathf(path, sizeof(path), "%s/%s", sysfs_root, where[i]);
		if (access(path, F_OK) == 0)
			return PP_FEAT_YES;
	}
	return PP_FEAT_NO;
}

struct pp_sys *pp_sys_new(const struct pp_sys_opts *opts)
{
	struct pp_sys_opts none = {0};
	char path[PATH_MAX], buf[8192];
	struct pp_sys *sys;
	ssize_t len;

	if (!opts)
		opts = &none;
	sys = calloc(1, sizeof(*sys));
	if (!sys)
		return NULL;
	snprintf(sys->sysfs_root, sizeof(sys->sysfs_root), "%s",
		 opts->sysfs_root ? opts->sysfs_root : "/sys");
	snprintf(sys->procfs_root, sizeof(sys->procfs_root), "%s",
		 opts->procfs_root ? opts->procfs_root : "/proc");

	if (opts->kernel_release) {
		snprintf(sys->kernel_release, sizeof(sys->kernel_release), "%s",
			 opts->kernel_release);
	} else {
		struct utsname u;

		if (uname(&u) == 0)
			snprintf(sys->kernel_release, sizeof(sys->kernel_release), "%s", u.release);
	}
	if (sscanf(sys->kernel_release, "%d.%d", &sys->kernel_major, &sys->kernel_minor) != 2)
		sys->kernel_major = sys->kernel_minor = 0;

	sys->has_ringbuf = sys->has_perf_event_prog = sys->has_attach_cookie = PP_FEAT_UNKNOWN;
	sys->has_unwind_tables = PP_FEAT_UNKNOWN;
	sys->has_kprobes = pp_sys_kprobes_at(sys->sysfs_root);
	probe_btf(sys, opts->skip_kfunc_probe);
	if (opts->probe_bpf)
		probe_bpf(sys);

	sys->perf_event_paranoid = read_sysctl(sys, "perf_event_paranoid");
	sys->max_sample_rate = read_sysctl(sys, "perf_event_max_sample_rate");
	sys->max_stack = read_sysctl(sys, "perf_event_max_stack");
	sys->kptr_restrict = read_sysctl(sys, "kptr_restrict");

	pp_pathf(path, sizeof(path), "%s/self/status", sys->procfs_root);
	len = pp_read_small_file(path, buf, sizeof(buf));
	if (len > 0 && pp_sys_parse_capeff(buf, (size_t)len, &sys->cap_eff) == 0)
		sys->cap_eff_known = 1;
	sys->is_root = geteuid() == 0;

	pp_pathf(path, sizeof(path), "%s/cpuinfo", sys->procfs_root);
	len = pp_read_small_file(path, buf, sizeof(buf));
	sys->cpu_family = sys->cpu_model = -1;
	if (len > 0)
		pp_sys_parse_cpuinfo(buf, (size_t)len, sys->cpu_vendor, sizeof(sys->cpu_vendor),
				     &sys->cpu_family, &sys->cpu_model);

	sys->pmus = pp_pmu_scan(sys->sysfs_root);
	if (!sys->pmus) {
		if (errno == ENOMEM) {
			pp_sys_free(sys);
			errno = ENOMEM;
			return NULL;
		}
		/* No event_source bus: a machine with no perf events at all. */
		sys->pmus = calloc(1, sizeof(*sys->pmus));
		if (!sys->pmus) {
			pp_sys_free(sys);
			errno = ENOMEM;
			return NULL;
		}
	}
	return sys;
}

void pp_sys_free(struct pp_sys *sys)
{
	if (!sys)
		return;
	pp_pmu_set_free(sys->pmus);
	free(sys);
}
