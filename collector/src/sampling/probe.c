/*
 * The probe report (see probe.h). It states facts and the reasons behind the auto choice;
 * the same fields appear in the text and JSON forms so scripts and people read one truth.
 */
#include "probe.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mem_events[] = {"mem-loads", "mem-stores", "mem-loads-aux"};
#define NR_MEM_EVENTS (sizeof(mem_events) / sizeof(mem_events[0]))

void pp_probe_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
		}
	}
	fputc('"', out);
}

char *pp_probe_cpulist_str(const int *cpus, size_t nr, char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < nr;) {
		size_t j = i;
		int n;

		while (j + 1 < nr && cpus[j + 1] == cpus[j] + 1)
			j++;
		if (j == i)
			n = snprintf(buf + off, len - off, "%s%d", off ? "," : "", cpus[i]);
		else
			n = snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", cpus[i],
				     cpus[j]);
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = '\0';
			break;
		}
		off += (size_t)n;
		i = j + 1;
	}
	return buf;
}

static int has_hw_pmu(const struct pp_sys *sys)
{
	const struct pp_pmu *core[8];

	return pp_pmu_core_pmus(sys->pmus, core, 8) > 0 || pp_pmu_find(sys->pmus, "ibs_op");
}

/* Who may load and attach the shim (notes §5.1): CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN;
 * paranoid 3 (Debian) needs CAP_SYS_ADMIN for any perf event. */
static const char *privilege_verdict(const struct pp_sys *sys)
{
	int admin = pp_sys_has_cap(sys, PP_CAP_SYS_ADMIN);
	int bpf = pp_sys_has_cap(sys, PP_CAP_BPF) || admin;
	int perfmon = pp_sys_has_cap(sys, PP_CAP_PERFMON) || admin;

	if (!sys->cap_eff_known)
		return "unknown (CapEff unreadable)";
	if (sys->perf_event_paranoid >= 3 && !admin)
		return "insufficient: perf_event_paranoid=3 requires CAP_SYS_ADMIN";
	if (!bpf || !perfmon)
		return "insufficient: loading perf_event BPF programs needs CAP_BPF and "
		       "CAP_PERFMON (or CAP_SYS_ADMIN)";
	/* the kernel's features then read "no" for want of privilege, not of support */
	if (sys->bpf_eperm)
		return "insufficient: bpf() is refused with EPERM despite the capabilities "
		       "(a seccomp profile, an LSM, or kernel.unprivileged_bpf_disabled)";
	return "sufficient";
}

/*
 * The capabilities the agent uses, each with what its absence costs. SYS_RESOURCE only
 * before 5.11 (BPF memory is charged to the cgroup since then, not to RLIMIT_MEMLOCK);
 * CHECKPOINT_RESTORE from 5.9, where it first exists (SYS_ADMIN grants the same).
 */
enum cap_kernels { CAP_ALWAYS, CAP_BEFORE_5_11, CAP_FROM_5_9 };
static const struct {
	unsigned int bit;
	const char *name;
	const char *cost;
	enum cap_kernels kernels;
} cap_costs[] = {
    {PP_CAP_BPF, "BPF", "no sampling: the shim cannot be loaded (unless SYS_ADMIN)", 0},
    {PP_CAP_PERFMON, "PERFMON", "no sampling: perf events cannot be opened (unless SYS_ADMIN)", 0},
    {PP_CAP_SYS_PTRACE, "SYS_PTRACE",
     "other processes' maps and binaries unreadable: their user frames unnamed", 0},
    {PP_CAP_DAC_READ_SEARCH, "DAC_READ_SEARCH",
     "binaries not readable by root's file modes stay unnamed", 0},
    {PP_CAP_SYSLOG, "SYSLOG",
     "kernel frames unnamed where they cannot be asked of the kernel through BPF (before "
     "5.16) and kallsyms hides addresses",
     0},
    {PP_CAP_SYS_RESOURCE, "SYS_RESOURCE", "BPF maps fail to load: RLIMIT_MEMLOCK too low",
     CAP_BEFORE_5_11},
    {PP_CAP_CHECKPOINT_RESTORE, "CHECKPOINT_RESTORE",
     "mapped files are not reached through /proc/PID/map_files but by their path, checked to "
     "be the mapped inode: deleted ones, and on overlayfs before Linux 6.8 all of a "
     "container's, stay unnamed (unless SYS_ADMIN)",
     CAP_FROM_5_9},
};

static int kernel_before(const struct pp_sys *sys, int major, int minor)
{
	return sys->kernel_major && (sys->kernel_major < major ||
				     (sys->kernel_major == major && sys->kernel_minor < minor));
}

static int needs_cap(const struct pp_sys *sys, size_t i)
{
	switch (cap_costs[i].kernels) {
	case CAP_BEFORE_5_11:
		return kernel_before(sys, 5, 11);
	case CAP_FROM_5_9:
		return !kernel_before(sys, 5, 9) && !pp_sys_has_cap(sys, PP_CAP_SYS_ADMIN);
	default:
		return 1;
	}
}

/* A BPF feature's answer; "no" is no answer when bpf() itself was refused for privilege. */
static const char *bpf_feat_str(const struct pp_sys *sys, int feat)
{
	if (sys->bpf_eperm && feat != PP_FEAT_YES)
		return "unknown (bpf() refused: EPERM, see privileges)";
	return pp_feat_str(feat);
}

static void sysctl_text(FILE *out, const char *name, int64_t v)
{
	if (v == PP_SYSCTL_UNKNOWN)
		fprintf(out, "  %-28s unknown\n", name);
	else
		fprintf(out, "  %-28s %lld\n", name, (long long)v);
}

static void sysctl_json(FILE *out, const char *name, int64_t v, int last)
{
	fprintf(out, "\"%s\":", name);
	if (v == PP_SYSCTL_UNKNOWN)
		fputs("null", out);
	else
		fprintf(out, "%lld", (long long)v);
	if (!last)
		fputc(',', out);
}

static void feat_json(FILE *out, const char *name, int feat, int last)
{
	fprintf(out, "\"%s\":%s%s", name,
		feat == PP_FEAT_YES  ? "true"
		: feat == PP_FEAT_NO ? "false"
				     : "null",
		last ? "" : ",");
}

static int run_auto(const struct pp_sys *sys, pp_perf_open_fn open_fn, void *open_ctx,
		    struct pp_event_set **set, char *err, size_t errlen)
{
	struct pp_event_request req = {
	    .spec = "auto",
	    .stack_depth = 127,
	    .want_kstack = 1,
	    .want_ustack = 1,
	    .pid = -1,
	    .dry_run = 1,
	};

	return pp_events_open(&req, sys, open_fn, open_ctx, set, err, errlen);
}

/* A format spec back in sysfs' words: "config1:0-15". */
static char *format_str(const struct pp_pmu_format *f, char *buf, size_t len)
{
	static const char *const words[] = {"config", "config1", "config2"};
	size_t off;
	int n = snprintf(buf, len, "%s:", words[f->word < 3 ? f->word : 0]);

	off = n > 0 ? (size_t)n : 0;
	for (int b = 0; b < 64 && off < len;) {
		int e = b;

		if (!((f->mask >> b) & 1)) {
			b++;
			continue;
		}
		while (e + 1 < 64 && ((f->mask >> (e + 1)) & 1))
			e++;
		if (e == b)
			n = snprintf(buf + off, len - off, "%s%d", buf[off - 1] == ':' ? "" : ",",
				     b);
		else
			n = snprintf(buf + off, len - off, "%s%d-%d",
				     buf[off - 1] == ':' ? "" : ",", b, e);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
		b = e + 1;
	}
	return buf;
}

/* What `-e mem-loads` / `-e mem-stores` would open here: the real ladder, dry-run. */
struct mem_plan {
	const char *spec;
	struct pp_event_set *set;
	int err;
	char msg[1024];
};

static const char *const mem_specs[] = {"mem-loads", "mem-stores"};
#define NR_MEM_SPECS (sizeof(mem_specs) / sizeof(mem_specs[0]))

static void plan_mem(const struct pp_sys *sys, pp_perf_open_fn open_fn, void *open_ctx,
		     struct mem_plan *mp)
{
	for (size_t i = 0; i < NR_MEM_SPECS; i++) {
		struct pp_event_request req = {
		    .spec = mem_specs[i],
		    .ldlat = PP_EVENTS_DEFAULT_LDLAT,
		    .stack_depth = 127,
		    .want_kstack = 1,
		    .want_ustack = 1,
		    .pid = -1,
		    .dry_run = 1,
		};

		mp[i].spec = mem_specs[i];
		mp[i].msg[0] = '\0';
		mp[i].err = pp_events_open(&req, sys, open_fn, open_ctx, &mp[i].set, mp[i].msg,
					   sizeof(mp[i].msg));
	}
}

static void ibs_caps_text(const struct pp_pmu *p, FILE *out)
{
	fprintf(out,
		"    ibs: cnt_ctl %s, l3missonly %s, ldlat filter %s, swfilt %s, "
		"zen4_ibs_extensions %s\n",
		pp_pmu_format(p, "cnt_ctl") ? "yes" : "no",
		pp_pmu_format(p, "l3missonly") ? "yes" : "no",
		pp_pmu_cap(p, "ldlat") && pp_pmu_format(p, "ldlat") ? "yes" : "no",
		pp_pmu_format(p, "swfilt") ? "yes" : "no",
		pp_pmu_cap(p, "zen4_ibs_extensions") ? "yes" : "no");
}

static void report_text(const struct pp_sys *sys, const struct pp_event_set *set, int auto_err,
			const char *err, const struct mem_plan *mp, FILE *out)
{
	const struct pp_pmu_set *pmus = sys->pmus;
	char buf[2048];

	fprintf(out, "kernel\n");
	fprintf(out, "  %-28s %s\n", "release", sys->kernel_release);
	fprintf(out, "  %-28s %s\n", "BTF (vmlinux)", pp_feat_str(sys->btf_vmlinux));
	fprintf(out, "  %-28s %s\n", "bpf_cast_to_kern_ctx",
		pp_feat_str(sys->has_cast_to_kern_ctx));
	fprintf(out, "  %-28s %s\n", "BPF ring buffer", bpf_feat_str(sys, sys->has_ringbuf));
	fprintf(out, "  %-28s %s\n", "perf_event BPF programs",
		bpf_feat_str(sys, sys->has_perf_event_prog));
	fprintf(out, "  %-28s %s\n", "bpf_get_attach_cookie",
		bpf_feat_str(sys, sys->has_attach_cookie));
	fprintf(out, "  %-28s %s\n", "unwind tables in BPF",
		bpf_feat_str(sys, sys->has_unwind_tables));
	fprintf(out, "  %-28s %s\n", "--user-unwind",
		sys->has_unwind_tables == PP_FEAT_YES
		    ? "auto (tables, frame pointers elsewhere), dwarf, fp, kernel"
		    : "auto, dwarf (tables in a bounded loop: no bpf_loop before 5.17, 32 "
		      "frames, user-mode samples), fp, kernel");
	fprintf(out, "  %-28s %s\n", "kprobes (off-CPU stacks)",
		sys->has_kprobes == PP_FEAT_YES
		    ? "yes: taken as a thread resumes, for waits of the threshold"
		    : "no: taken at every switch away from a CPU (sched_switch)");
	fprintf(out, "sysctl\n");
	sysctl_text(out, "perf_event_paranoid", sys->perf_event_paranoid);
	sysctl_text(out, "perf_event_max_sample_rate", sys->max_sample_rate);
	sysctl_text(out, "perf_event_max_stack", sys->max_stack);
	sysctl_text(out, "kptr_restrict", sys->kptr_restrict);
	fprintf(out, "privileges\n");
	fprintf(out, "  %-28s %s\n", "root", sys->is_root ? "yes" : "no");
	fprintf(out, "  %-28s %s\n", "bpf() refused (EPERM)", sys->bpf_eperm ? "yes" : "no");
	fprintf(out, "  %-28s %s\n", "capabilities", pp_sys_caps_str(sys, buf, sizeof(buf)));
	fprintf(out, "  %-28s %s\n", "for BPF perf sampling", privilege_verdict(sys));
	for (size_t i = 0; i < sizeof(cap_costs) / sizeof(cap_costs[0]); i++) {
		char key[40];

		if (!needs_cap(sys, i))
			continue;
		snprintf(key, sizeof(key), "CAP_%s", cap_costs[i].name);
		if (!sys->cap_eff_known)
			fprintf(out, "  %-28s unknown\n", key);
		else if (pp_sys_has_cap(sys, cap_costs[i].bit))
			fprintf(out, "  %-28s present\n", key);
		else
			fprintf(out, "  %-28s missing: %s\n", key, cap_costs[i].cost);
	}
	fprintf(out, "cpus\n  %-28s %s (%zu)\n", "online",
		pp_probe_cpulist_str(pmus->online, pmus->nr_online, buf, sizeof(buf)),
		pmus->nr_online);
	if (sys->cpu_vendor[0])
		fprintf(out, "  %-28s %s family %d model %d (0x%x)\n", "cpu", sys->cpu_vendor,
			sys->cpu_family, sys->cpu_model, (unsigned int)sys->cpu_model);
	else
		fprintf(out, "  %-28s unknown (no %s/cpuinfo)\n", "cpu", sys->procfs_root);
	fprintf(out, "pmus (%s/bus/event_source/devices)\n", sys->sysfs_root);
	for (size_t i = 0; i < pmus->nr_pmus; i++) {
		const struct pp_pmu *p = &pmus->pmus[i];

		fprintf(out, "  %s: type %u, %s", p->name, p->type, pp_pmu_kind_str(p->kind));
		if (p->nr_cpus)
			fprintf(out, ", cpus %s",
				pp_probe_cpulist_str(p->cpus, p->nr_cpus, buf, sizeof(buf)));
		if (p->max_precise >= 0)
			fprintf(out, ", max_precise %d", p->max_precise);
		if (p->pmu_name[0])
			fprintf(out, ", pmu_name %s", p->pmu_name);
		fputc('\n', out);
		if (p->kind == PP_PMU_INTEL_CORE || p->kind == PP_PMU_AMD_CORE) {
			const struct pp_pmu_format *ld = pp_pmu_format(p, "ldlat");
			const struct pp_named_event *t;
			const char *uarch = "";
			size_t nr;

			for (size_t m = 0; m < NR_MEM_EVENTS; m++) {
				const char *enc = pp_pmu_event(p, mem_events[m]);

				fprintf(out, "    %-14s %s\n", mem_events[m],
					enc ? enc : "(absent)");
			}
			fprintf(out, "    %-14s %s\n", "ldlat format",
				ld ? format_str(ld, buf, sizeof(buf)) : "(absent)");
			t = pp_named_events(sys, p, &nr, &uarch);
			fprintf(out, "    precise events%s%s%s:", uarch[0] ? " (" : "", uarch,
				uarch[0] ? ")" : "");
			if (!nr)
				fprintf(out, " none known for this %s",
					p->kind == PP_PMU_AMD_CORE ? "AMD core (precise = IBS)"
								   : "model");
			for (size_t k = 0; k < nr; k++)
				fprintf(out, "%s %s", k ? "," : "", t[k].name);
			fputc('\n', out);
		}
		if (p->kind == PP_PMU_AMD_IBS_OP)
			ibs_caps_text(p, out);
		if (p->kind == PP_PMU_AMD_IBS_OP || p->kind == PP_PMU_AMD_IBS_FETCH) {
			fprintf(out, "    formats:");
			for (size_t f = 0; f < p->nr_formats; f++)
				fprintf(out, " %s", p->formats[f].name);
			fprintf(out, "\n    caps:");
			for (size_t f = 0; f < p->nr_caps; f++)
				fprintf(out, " %s", p->caps[f].name);
			fputc('\n', out);
		}
	}
	if (!has_hw_pmu(sys))
		fprintf(out,
			"hardware PMU: none (no cpu, cpu_core, cpu_atom or ibs_op under "
			"%s/bus/event_source/devices; a virtual machine?): no precise sampling "
			"here, use -e cpu-clock\n",
			sys->sysfs_root);
	fprintf(out, "can sample: %s\n", pp_events_can_sample(sys, buf, sizeof(buf)));
	for (size_t m = 0; m < NR_MEM_SPECS; m++) {
		if (mp[m].err) {
			fprintf(out, "-e %s would open: nothing: %s\n", mp[m].spec, mp[m].msg);
			continue;
		}
		for (size_t i = 0; i < mp[m].set->nr_events; i++) {
			const struct pp_event_info *e = &mp[m].set->events[i];

			fprintf(out,
				"-e %s would open: %s on %s (type %u, config 0x%llx, config1 "
				"0x%llx, config2 0x%llx, precise_ip %d, sample_type 0x%llx",
				mp[m].spec, e->name, e->pmu, e->type, (unsigned long long)e->config,
				(unsigned long long)e->config1, (unsigned long long)e->config2,
				e->precise_ip, (unsigned long long)e->attr.sample_type);
			if (e->aux_leader)
				fprintf(out, ", behind mem-loads-aux leader 0x%llx",
					(unsigned long long)e->aux_config);
			fprintf(out, ")\n");
		}
	}
	if (auto_err) {
		fprintf(out, "auto would pick: nothing: %s\n", err);
		return;
	}
	for (size_t i = 0; i < set->nr_events; i++) {
		const struct pp_event_info *e = &set->events[i];

		fprintf(out,
			"auto would pick: %s on %s (type %u, config 0x%llx, precise_ip %d) "
			"because %s\n",
			e->name, e->pmu, e->type, (unsigned long long)e->config, e->precise_ip,
			e->why);
	}
}

static void json_cpus(FILE *out, const int *cpus, size_t nr)
{
	fputc('[', out);
	for (size_t i = 0; i < nr; i++)
		fprintf(out, "%s%d", i ? "," : "", cpus[i]);
	fputc(']', out);
}

static void json_bool(FILE *out, const char *name, int v, int last)
{
	fprintf(out, "\"%s\":%s%s", name, v ? "true" : "false", last ? "" : ",");
}

static void json_event(FILE *out, const struct pp_event_info *e)
{
	fputs("{\"event\":", out);
	pp_probe_json_string(out, e->name);
	fputs(",\"pmu\":", out);
	pp_probe_json_string(out, e->pmu);
	fprintf(out,
		",\"type\":%u,\"config\":%llu,\"config1\":%llu,\"config2\":%llu,"
		"\"precise_ip\":%d,\"memory\":%s,\"sample_type\":%llu,\"aux_leader\":",
		e->type, (unsigned long long)e->config, (unsigned long long)e->config1,
		(unsigned long long)e->config2, e->precise_ip, e->mem ? "true" : "false",
		(unsigned long long)e->attr.sample_type);
	if (e->aux_leader)
		fprintf(out, "%llu", (unsigned long long)e->aux_config);
	else
		fputs("null", out);
	fputc(',', out);
	json_bool(out, "want_user_only", e->want_user_only, 0);
	json_bool(out, "want_kernel_only", e->want_kernel_only, 0);
	fputs("\"value_type\":", out);
	pp_probe_json_string(out, e->value_type);
	fputs(",\"value_unit\":", out);
	pp_probe_json_string(out, e->value_unit);
	fputs(",\"why\":", out);
	pp_probe_json_string(out, e->why);
	fputc('}', out);
}

static void report_json(const struct pp_sys *sys, const struct pp_event_set *set, int auto_err,
			const char *err, const struct mem_plan *mp, FILE *out)
{
	const struct pp_pmu_set *pmus = sys->pmus;
	char buf[2048];
	int first = 1;

	fputs("{\"kernel\":{\"release\":", out);
	pp_probe_json_string(out, sys->kernel_release);
	fputc(',', out);
	feat_json(out, "btf", sys->btf_vmlinux, 0);
	feat_json(out, "cast_to_kern_ctx", sys->has_cast_to_kern_ctx, 0);
	feat_json(out, "ringbuf", sys->has_ringbuf, 0);
	feat_json(out, "perf_event_prog", sys->has_perf_event_prog, 0);
	feat_json(out, "attach_cookie", sys->has_attach_cookie, 0);
	feat_json(out, "unwind_tables", sys->has_unwind_tables, 0);
	feat_json(out, "kprobes", sys->has_kprobes, 1);
	fputs("},\"sysctl\":{", out);
	sysctl_json(out, "perf_event_paranoid", sys->perf_event_paranoid, 0);
	sysctl_json(out, "perf_event_max_sample_rate", sys->max_sample_rate, 0);
	sysctl_json(out, "perf_event_max_stack", sys->max_stack, 0);
	sysctl_json(out, "kptr_restrict", sys->kptr_restrict, 1);
	fprintf(out,
		"},\"privileges\":{\"root\":%s,\"capabilities\":", sys->is_root ? "true" : "false");
	if (!sys->cap_eff_known) {
		fputs("null", out);
	} else {
		fputc('[', out);
		for (unsigned int b = 0; b < 64; b++) {
			char name[32];

			if (!((sys->cap_eff >> b) & 1))
				continue;
			snprintf(name, sizeof(name), "%s", pp_cap_name(b) ? pp_cap_name(b) : "");
			if (!name[0])
				snprintf(name, sizeof(name), "cap_%u", b);
			if (!first)
				fputc(',', out);
			first = 0;
			pp_probe_json_string(out, name);
		}
		fputc(']', out);
	}
	fputs(",\"missing\":{", out);
	for (size_t i = 0, none = 1; i < sizeof(cap_costs) / sizeof(cap_costs[0]); i++) {
		char key[40];

		if (!needs_cap(sys, i) || !sys->cap_eff_known ||
		    pp_sys_has_cap(sys, cap_costs[i].bit))
			continue;
		snprintf(key, sizeof(key), "CAP_%s", cap_costs[i].name);
		if (!none)
			fputc(',', out);
		none = 0;
		pp_probe_json_string(out, key);
		fputc(':', out);
		pp_probe_json_string(out, cap_costs[i].cost);
	}
	fputc('}', out);
	fprintf(out, ",\"bpf_eperm\":%s,\"verdict\":", sys->bpf_eperm ? "true" : "false");
	pp_probe_json_string(out, privilege_verdict(sys));
	fputs("},\"cpu\":{\"vendor\":", out);
	if (sys->cpu_vendor[0])
		pp_probe_json_string(out, sys->cpu_vendor);
	else
		fputs("null", out);
	if (sys->cpu_family >= 0 && sys->cpu_model >= 0)
		fprintf(out, ",\"family\":%d,\"model\":%d}", sys->cpu_family, sys->cpu_model);
	else
		fputs(",\"family\":null,\"model\":null}", out);
	fputs(",\"online_cpus\":", out);
	json_cpus(out, pmus->online, pmus->nr_online);
	fputs(",\"pmus\":[", out);
	for (size_t i = 0; i < pmus->nr_pmus; i++) {
		const struct pp_pmu *p = &pmus->pmus[i];

		fputs(i ? ",{\"name\":" : "{\"name\":", out);
		pp_probe_json_string(out, p->name);
		fprintf(out, ",\"type\":%u,\"kind\":", p->type);
		pp_probe_json_string(out, pp_pmu_kind_str(p->kind));
		fputs(",\"cpus\":", out);
		if (p->nr_cpus)
			json_cpus(out, p->cpus, p->nr_cpus);
		else
			fputs("null", out);
		fputs(",\"max_precise\":", out);
		if (p->max_precise >= 0)
			fprintf(out, "%d", p->max_precise);
		else
			fputs("null", out);
		fputs(",\"pmu_name\":", out);
		if (p->pmu_name[0])
			pp_probe_json_string(out, p->pmu_name);
		else
			fputs("null", out);
		fputs(",\"memory_events\":{", out);
		for (size_t m = 0; m < NR_MEM_EVENTS; m++) {
			const char *enc = pp_pmu_event(p, mem_events[m]);

			fprintf(out, "%s\"%s\":", m ? "," : "", mem_events[m]);
			if (enc)
				pp_probe_json_string(out, enc);
			else
				fputs("null", out);
		}
		fputs("},\"formats\":[", out);
		for (size_t f = 0; f < p->nr_formats; f++) {
			if (f)
				fputc(',', out);
			pp_probe_json_string(out, p->formats[f].name);
		}
		fputs("],\"caps\":{", out);
		for (size_t f = 0; f < p->nr_caps; f++) {
			if (f)
				fputc(',', out);
			pp_probe_json_string(out, p->caps[f].name);
			fputc(':', out);
			pp_probe_json_string(out, p->caps[f].value);
		}
		fputs("},\"ldlat_format\":", out);
		if (pp_pmu_format(p, "ldlat"))
			pp_probe_json_string(
			    out, format_str(pp_pmu_format(p, "ldlat"), buf, sizeof(buf)));
		else
			fputs("null", out);
		if (p->kind == PP_PMU_INTEL_CORE || p->kind == PP_PMU_AMD_CORE) {
			const char *uarch = "";
			size_t nr;
			const struct pp_named_event *t = pp_named_events(sys, p, &nr, &uarch);

			fputs(",\"uarch\":", out);
			if (uarch[0])
				pp_probe_json_string(out, uarch);
			else
				fputs("null", out);
			fputs(",\"precise_events\":[", out);
			for (size_t k = 0; k < nr; k++) {
				if (k)
					fputc(',', out);
				pp_probe_json_string(out, t[k].name);
			}
			fputc(']', out);
		}
		if (p->kind == PP_PMU_AMD_IBS_OP) {
			fputs(",\"ibs\":{", out);
			json_bool(out, "cnt_ctl", pp_pmu_format(p, "cnt_ctl") != NULL, 0);
			json_bool(out, "l3missonly", pp_pmu_format(p, "l3missonly") != NULL, 0);
			json_bool(out, "ldlat", pp_pmu_cap(p, "ldlat") && pp_pmu_format(p, "ldlat"),
				  0);
			json_bool(out, "swfilt", pp_pmu_format(p, "swfilt") != NULL, 0);
			json_bool(out, "zen4_ibs_extensions",
				  pp_pmu_cap(p, "zen4_ibs_extensions") != NULL, 1);
			fputc('}', out);
		}
		fputc('}', out);
	}
	fputs("],\"can_sample\":", out);
	pp_probe_json_string(out, pp_events_can_sample(sys, buf, sizeof(buf)));
	fputs(",\"memory_events\":{", out);
	for (size_t m = 0; m < NR_MEM_SPECS; m++) {
		fprintf(out, "%s\"%s\":{\"error\":", m ? "," : "", mp[m].spec);
		if (mp[m].err)
			pp_probe_json_string(out, mp[m].msg);
		else
			fputs("null", out);
		fputs(",\"events\":[", out);
		for (size_t i = 0; !mp[m].err && i < mp[m].set->nr_events; i++) {
			if (i)
				fputc(',', out);
			json_event(out, &mp[m].set->events[i]);
		}
		fputs("]}", out);
	}
	fprintf(out,
		"},\"hardware_pmu\":%s,\"auto\":{\"error\":", has_hw_pmu(sys) ? "true" : "false");
	if (auto_err)
		pp_probe_json_string(out, err);
	else
		fputs("null", out);
	fputs(",\"events\":[", out);
	for (size_t i = 0; !auto_err && i < set->nr_events; i++) {
		if (i)
			fputc(',', out);
		json_event(out, &set->events[i]);
	}
	fputs("]}", out); /* the report's object is closed by pp_probe_report */
}

int pp_probe_report(const struct pp_sys *sys, pp_perf_open_fn open_fn, void *open_ctx, int json,
		    FILE *out, const struct pp_probe_extra *extra)
{
	struct pp_event_set *set = NULL;
	struct mem_plan mp[NR_MEM_SPECS];
	char err[1024] = "";
	int r = run_auto(sys, open_fn, open_ctx, &set, err, sizeof(err));

	plan_mem(sys, open_fn, open_ctx, mp);
	if (json) {
		report_json(sys, set, r, err, mp, out);
		if (extra && extra->json) {
			fputc(',', out);
			extra->json(out);
		}
		fputs("}\n", out);
	} else {
		report_text(sys, set, r, err, mp, out);
		if (extra && extra->text)
			extra->text(out);
	}
	pp_event_set_free(set);
	for (size_t m = 0; m < NR_MEM_SPECS; m++)
		pp_event_set_free(mp[m].set);
	if (fflush(out) != 0 || ferror(out))
		return -EIO;
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: pebsprof probe [--json] [--sysfs-root DIR] [--procfs-root DIR]\n"
		"\n"
		"Report what this machine can sample and why: kernel and BPF features, perf\n"
		"sysctls, privileges, PMUs with max_precise, memory events, precise events by\n"
		"name and IBS caps, what -e mem-loads / -e mem-stores would open, and the\n"
		"event `auto` would pick (each decided by opening and closing it on the first\n"
		"CPU of its PMU).\n"
		"\n"
		"  --json              print JSON instead of text\n"
		"  --sysfs-root DIR    read PMUs and BTF below DIR instead of /sys\n"
		"  --procfs-root DIR   read sysctls and capabilities below DIR instead of /proc\n"
		"  -h, --help          show this help\n"
		"\n"
		"Exit status: 0 report written, 1 runtime failure, 2 usage error.\n");
}

int pp_probe_run(int argc, char **argv, const struct pp_probe_extra *extra)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"sysfs-root", required_argument, NULL, 's'},
	    {"procfs-root", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct pp_sys_opts so = {.probe_bpf = 1};
	struct pp_sys *sys;
	int json = 0, c, r;

	optind = 0; /* glibc: full re-initialisation, so the subcommand can run more than once */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 's':
			so.sysfs_root = optarg;
			break;
		case 'p':
			so.procfs_root = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "pebsprof probe: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	sys = pp_sys_new(&so);
	if (!sys) {
		fprintf(stderr, "pebsprof probe: cannot gather system facts: %s\n",
			strerror(errno));
		return 1;
	}
	r = pp_probe_report(sys, NULL, NULL, json, stdout, extra);
	pp_sys_free(sys);
	if (r) {
		fprintf(stderr, "pebsprof probe: writing the report failed: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
