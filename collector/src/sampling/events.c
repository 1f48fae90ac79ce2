/*
 * The event ladder (see events.h). Which attr bits matter and which errno means what is
 * decided by the kernel facts in shared/reference/notes/kernel-pebs-bpf.md; the rule numbers
 * quoted below refer to that file.
 */
#include "events.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_PLANS 8 /* core PMUs on one machine: cpu_core, cpu_atom, cpu_lowpower */

const char *pp_event_kind_str(enum pp_event_kind kind)
{
	switch (kind) {
	case PP_EVENT_AUTO:
		return "auto";
	case PP_EVENT_CPU_CLOCK:
		return "cpu-clock";
	case PP_EVENT_CYCLES:
		return "cycles";
	case PP_EVENT_INSTRUCTIONS:
		return "instructions";
	case PP_EVENT_MEM_LOADS:
		return "mem-loads";
	case PP_EVENT_MEM_STORES:
		return "mem-stores";
	case PP_EVENT_RAW:
		return "raw";
	case PP_EVENT_NAMED:
		return "named";
	}
	return "?";
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* perf's modifier letters we honour: p/pp/ppp or P (precision), u or k (privilege level). */
static int parse_modifiers(const char *m, size_t len, struct pp_event_spec *out)
{
	int np = 0, big = 0, u = 0, k = 0;

	if (!len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		switch (m[i]) {
		case 'p':
			np++;
			break;
		case 'P':
			big++;
			break;
		case 'u':
			u++;
			break;
		case 'k':
			k++;
			break;
		default:
			return -EINVAL;
		}
	}
	if (np > 3 || big > 1 || (np && big) || u > 1 || k > 1)
		return -EINVAL;
	if (big)
		out->precise = PP_PRECISE_MAX;
	else if (np)
		out->precise = np;
	/* ":uk" is both levels, i.e. no exclusion, as in perf */
	out->exclude_kernel = u && !k;
	out->exclude_user = k && !u;
	return 0;
}

/* INST_RETIRED.PREC_DIST style: letters, digits, '_' and at least one inner '.'. */
static int named_syntax(const char *s)
{
	int dot = 0;

	if (!isalpha((unsigned char)s[0]))
		return 0;
	for (const char *p = s; *p; p++) {
		if (*p == '.') {
			if (p[1] == '\0' || p[1] == '.')
				return 0;
			dot = 1;
		} else if (!isalnum((unsigned char)*p) && *p != '_') {
			return 0;
		}
	}
	return dot;
}

static const char *rfind(const char *buf, char ch, size_t len)
{
	while (len--)
		if (buf[len] == ch)
			return buf + len;
	return NULL;
}

int pp_event_spec_parse(const char *buf, size_t len, struct pp_event_spec *out, char *err,
			size_t errlen)
{
	static const struct {
		const char *name;
		enum pp_event_kind kind;
	} named[] = {
	    {"auto", PP_EVENT_AUTO},
	    {"cpu-clock", PP_EVENT_CPU_CLOCK},
	    {"cycles", PP_EVENT_CYCLES},
	    {"cpu-cycles", PP_EVENT_CYCLES},
	    {"instructions", PP_EVENT_INSTRUCTIONS},
	    {"mem-loads", PP_EVENT_MEM_LOADS},
	    {"mem-stores", PP_EVENT_MEM_STORES},
	};
	size_t base_len = len, mod_start;
	int found = 0;

	memset(out, 0, sizeof(*out));
	out->precise = PP_PRECISE_UNSET;
	while (len && isspace((unsigned char)buf[len - 1]))
		len--;
	while (len && isspace((unsigned char)buf[0])) {
		buf++;
		len--;
	}
	if (!len) {
		seterr(err, errlen, "empty event spec");
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char)buf[i]) || buf[i] == ' ') {
			seterr(err, errlen, "event spec: invalid character at offset %zu", i);
			return -EINVAL;
		}

	/* Modifiers follow ':' on named events; on raw events they follow the closing '/',
	 * with or without ':' (perf writes "cpu/mem-loads,ldlat=30/P"). */
	base_len = len;
	mod_start = len;
	if (buf[len - 1] != '/') {
		const char *colon = rfind(buf, ':', len);
		const char *slash = rfind(buf, '/', len);

		/* a lone '/' is a raw event missing its closing slash, not a modifier split */
		if (slash && !memchr(buf, '/', (size_t)(slash - buf)))
			slash = NULL;
		if (slash && (!colon || colon < slash)) {
			base_len = (size_t)(slash - buf) + 1;
			mod_start = base_len;
		} else if (colon) {
			base_len = (size_t)(colon - buf);
			mod_start = base_len + 1;
		}
		if (slash && colon == slash + 1) {
			base_len = (size_t)(slash - buf) + 1;
			mod_start = base_len + 1;
		}
	}
	if (mod_start < len || (mod_start == len && base_len < len)) {
		const char *m = buf + mod_start;
		size_t mlen = len - mod_start;

		if (parse_modifiers(m, mlen, out)) {
			seterr(
			    err, errlen,
			    "event spec: bad modifier ':%.*s' (use p, pp, ppp or P for precision, "
			    "u or k for user or kernel only)",
			    (int)mlen, m);
			return -EINVAL;
		}
	}
	if (!base_len) {
		seterr(err, errlen, "event spec: missing event name before ':'");
		return -EINVAL;
	}
	if (base_len >= sizeof(out->text)) {
		seterr(err, errlen, "event spec: too long (%zu bytes, at most %zu)", base_len,
		       sizeof(out->text) - 1);
		return -EINVAL;
	}
	memcpy(out->text, buf, base_len);
	out->text[base_len] = '\0';

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (!strcmp(out->text, named[i].name)) {
			out->kind = named[i].kind;
			found = 1;
			break;
		}
	if (!found) {
		const char *slash = memchr(buf, '/', base_len);
		size_t plen, tlen;

		if (!slash && named_syntax(out->text)) {
			out->kind = PP_EVENT_NAMED;
			goto check;
		}
		if (!slash) {
			seterr(
			    err, errlen,
			    "unknown event '%s' (expected auto, cpu-clock, cycles, instructions, "
			    "mem-loads, mem-stores, pmu/term=value,.../ or a precise event name "
			    "such as MEM_LOAD_RETIRED.L3_MISS)",
			    out->text);
			return -EINVAL;
		}
		plen = (size_t)(slash - buf);
		if (buf[base_len - 1] != '/' || base_len - plen < 2) {
			seterr(err, errlen, "raw event '%s': missing closing '/'", out->text);
			return -EINVAL;
		}
		tlen = base_len - plen - 2;
		if (!plen || plen >= sizeof(out->pmu)) {
			seterr(err, errlen, "raw event '%s': bad PMU name before '/'", out->text);
			return -EINVAL;
		}
		if (!tlen) {
			seterr(err, errlen, "raw event '%s': empty term list", out->text);
			return -EINVAL;
		}
		if (memchr(slash + 1, '/', tlen)) {
			seterr(err, errlen, "raw event '%s': '/' inside the term list", out->text);
			return -EINVAL;
		}
		for (size_t i = 0; i < plen; i++)
			if (!isalnum((unsigned char)buf[i]) && buf[i] != '_' && buf[i] != '-' &&
			    buf[i] != '.') {
				seterr(err, errlen, "raw event '%s': bad character in PMU name",
				       out->text);
				return -EINVAL;
			}
		memcpy(out->pmu, buf, plen);
		out->pmu[plen] = '\0';
		memcpy(out->terms, slash + 1, tlen);
		out->terms[tlen] = '\0';
		out->kind = PP_EVENT_RAW;
	}
check:
	if ((out->kind == PP_EVENT_AUTO || out->kind == PP_EVENT_CPU_CLOCK) &&
	    out->precise != PP_PRECISE_UNSET) {
		seterr(err, errlen, "event '%s' takes no precision modifier", out->text);
		return -EINVAL;
	}
	return 0;
}

int pp_perf_open_syscall(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
			 unsigned long flags, void *ctx)
{
	long fd;

	(void)ctx;
	fd = syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
	return fd < 0 ? -errno : (int)fd;
}

/*
 * Precise events by name. Encodings (event | umask << 8) are Intel's event lists as shipped
 * with perf (tools/perf/pmu-events/arch/x86/<uarch>/{pipeline,cache}.json, mapfile.csv for
 * the family/model keys); which of them the kernel treats as PEBS and as carrying a data
 * address is arch/x86/events/intel/ds.c (intel_{skl,icl,glc}_pebs_event_constraints:
 * INST_RETIRED.PREC_DIST 0x01c0 on PMC1 for Skylake, 0x0100 = fixed counter 0 from Ice Lake
 * on; MEM_LOAD_RETIRED.* 0xd1 and MEM_INST_RETIRED.* 0xd0 are DATALA_LD/ST constraints, so
 * addr and data_src mean something for them). Only events the lists mark PEBS-capable.
 */
static const struct pp_named_event skl_events[] = {
    {"INST_RETIRED.PREC_DIST", 0x01c0, 0},
    /* umask 0 is not PEBS-capable on Skylake; its precise form is ALL_BRANCHES_PEBS */
    {"BR_INST_RETIRED.ALL_BRANCHES", 0x04c4, 0},
    {"BR_INST_RETIRED.ALL_BRANCHES_PEBS", 0x04c4, 0},
    {"BR_INST_RETIRED.CONDITIONAL", 0x01c4, 0},
    {"BR_INST_RETIRED.NEAR_CALL", 0x02c4, 0},
    {"BR_INST_RETIRED.NEAR_RETURN", 0x08c4, 0},
    {"BR_INST_RETIRED.NEAR_TAKEN", 0x20c4, 0},
    {"MEM_LOAD_RETIRED.L1_HIT", 0x01d1, 1},
    {"MEM_LOAD_RETIRED.L2_HIT", 0x02d1, 1},
    {"MEM_LOAD_RETIRED.L3_HIT", 0x04d1, 1},
    {"MEM_LOAD_RETIRED.L1_MISS", 0x08d1, 1},
    {"MEM_LOAD_RETIRED.L2_MISS", 0x10d1, 1},
    {"MEM_LOAD_RETIRED.L3_MISS", 0x20d1, 1},
    {"MEM_LOAD_RETIRED.FB_HIT", 0x40d1, 1},
    {"MEM_INST_RETIRED.ALL_LOADS", 0x81d0, 1},
    {"MEM_INST_RETIRED.ALL_STORES", 0x82d0, 1},
};

/* Ice Lake (Sunny Cove) and Golden Cove (Sapphire/Emerald Rapids, Alder/Raptor Lake P-cores)
 * share these encodings. */
static const struct pp_named_event icl_events[] = {
    {"INST_RETIRED.PREC_DIST", 0x0100, 0},     {"BR_INST_RETIRED.ALL_BRANCHES", 0x00c4, 0},
    {"BR_INST_RETIRED.COND", 0x11c4, 0},       {"BR_INST_RETIRED.COND_TAKEN", 0x01c4, 0},
    {"BR_INST_RETIRED.NEAR_CALL", 0x02c4, 0},  {"BR_INST_RETIRED.NEAR_RETURN", 0x08c4, 0},
    {"BR_INST_RETIRED.NEAR_TAKEN", 0x20c4, 0}, {"MEM_LOAD_RETIRED.L1_HIT", 0x01d1, 1},
    {"MEM_LOAD_RETIRED.L2_HIT", 0x02d1, 1},    {"MEM_LOAD_RETIRED.L3_HIT", 0x04d1, 1},
    {"MEM_LOAD_RETIRED.L1_MISS", 0x08d1, 1},   {"MEM_LOAD_RETIRED.L2_MISS", 0x10d1, 1},
    {"MEM_LOAD_RETIRED.L3_MISS", 0x20d1, 1},   {"MEM_LOAD_RETIRED.FB_HIT", 0x40d1, 1},
    {"MEM_INST_RETIRED.ALL_LOADS", 0x81d0, 1}, {"MEM_INST_RETIRED.ALL_STORES", 0x82d0, 1},
};

/* Gracemont (Alder/Raptor Lake E-cores, cpu_atom): alderlake/pipeline.json "Unit":
 * "cpu_atom"; no PREC_DIST and no MEM_LOAD_RETIRED on this core. */
static const struct pp_named_event grt_events[] = {
    {"INST_RETIRED.ANY_P", 0x00c0, 0},		{"BR_INST_RETIRED.ALL_BRANCHES", 0x00c4, 0},
    {"BR_INST_RETIRED.COND", 0x7ec4, 0},	{"BR_INST_RETIRED.COND_TAKEN", 0xfec4, 0},
    {"BR_INST_RETIRED.FAR_BRANCH", 0xbfc4, 0},	{"BR_INST_RETIRED.INDIRECT", 0xebc4, 0},
    {"BR_INST_RETIRED.NEAR_RETURN", 0xf7c4, 0}, {"BR_INST_RETIRED.REL_CALL", 0xfdc4, 0},
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

enum uarch { UA_NONE, UA_SKL, UA_ICL, UA_GLC, UA_GRT };

static enum uarch uarch_of(const struct pp_sys *sys, const struct pp_pmu *pmu)
{
	int atom = !strcmp(pmu->name, "cpu_atom");

	if (pmu->kind != PP_PMU_INTEL_CORE || !strcmp(pmu->name, "cpu_lowpower"))
		return UA_NONE;
	if (!strcmp(sys->cpu_vendor, "GenuineIntel") && sys->cpu_family == 6) {
		switch (sys->cpu_model) {
		case 0x4e: /* Skylake client, Kaby/Coffee/Comet Lake: mapfile skylake */
		case 0x5e:
		case 0x8e:
		case 0x9e:
		case 0xa5:
		case 0xa6:
		case 0x55: /* Skylake-SP, Cascade Lake, Cooper Lake */
			return UA_SKL;
		case 0x6a: /* Ice Lake-SP and -D: icelakex */
		case 0x6c:
		case 0x7d: /* Ice Lake client: icelake */
		case 0x7e:
			return UA_ICL;
		case 0x8f: /* Sapphire Rapids */
		case 0xcf: /* Emerald Rapids */
			return UA_GLC;
		case 0x97: /* Alder Lake */
		case 0x9a:
		case 0xb7: /* Raptor Lake */
		case 0xba:
		case 0xbf:
			if (!strcmp(pmu->name, "cpu_core"))
				return UA_GLC;
			return atom ? UA_GRT : UA_NONE;
		default:
			return UA_NONE;
		}
	}
	if (sys->cpu_vendor[0])
		return UA_NONE;
	/* No cpuinfo: caps/pmu_name names the core for the non-hybrid ones. */
	if (!strcmp(pmu->pmu_name, "skylake"))
		return UA_SKL;
	if (!strcmp(pmu->pmu_name, "icelake"))
		return UA_ICL;
	if (!strcmp(pmu->pmu_name, "sapphire_rapids"))
		return UA_GLC;
	if (!strcmp(pmu->pmu_name, "alderlake_hybrid"))
		return atom ? UA_GRT : UA_GLC;
	return UA_NONE;
}

const struct pp_named_event *pp_named_events(const struct pp_sys *sys, const struct pp_pmu *pmu,
					     size_t *nr, const char **uarch)
{
	const struct pp_named_event *t = NULL;
	const char *name = "";

	*nr = 0;
	switch (uarch_of(sys, pmu)) {
	case UA_SKL:
		t = skl_events, *nr = NELEM(skl_events), name = "skylake";
		break;
	case UA_ICL:
		t = icl_events, *nr = NELEM(icl_events), name = "icelake";
		break;
	case UA_GLC:
		t = icl_events, *nr = NELEM(icl_events), name = "golden_cove";
		break;
	case UA_GRT:
		t = grt_events, *nr = NELEM(grt_events), name = "gracemont";
		break;
	case UA_NONE:
		break;
	}
	if (uarch)
		*uarch = name;
	return t;
}

/* IBS hands data_src/addr/weight to perf (and so to BPF) only from 6.1 (notes §9). */
static int ibs_has_mem_data(const struct pp_sys *sys)
{
	return !sys->kernel_major || sys->kernel_major > 6 ||
	       (sys->kernel_major == 6 && sys->kernel_minor >= 1);
}

struct strlist {
	char *buf;
	size_t len, off;
};

static void sl_add(struct strlist *l, const char *item)
{
	size_t n = strlen(item);
	int r;

	/* dedupe whole items: ", item," or a leading "item," match */
	for (const char *p = l->buf; (p = strstr(p, item)); p += n)
		if ((p == l->buf || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
			return;
	if (l->off >= l->len)
		return;
	r = snprintf(l->buf + l->off, l->len - l->off, "%s%s", l->off ? ", " : "", item);
	if (r > 0)
		l->off = (size_t)r >= l->len - l->off ? l->len - 1 : l->off + (size_t)r;
}

char *pp_events_can_sample(const struct pp_sys *sys, char *buf, size_t len)
{
	const struct pp_pmu *core[MAX_PLANS];
	size_t ncore = pp_pmu_core_pmus(sys->pmus, core, MAX_PLANS);
	const struct pp_pmu *ibs = pp_pmu_find(sys->pmus, "ibs_op");
	struct strlist l = {.buf = buf, .len = len, .off = 0};
	static const char *const mem[] = {"mem-loads", "mem-stores"};
	char item[PP_PMU_NAME_LEN + 32];

	if (!len)
		return buf;
	buf[0] = '\0';
	sl_add(&l, "cpu-clock");
	if (!ncore && !ibs)
		return buf;
	sl_add(&l, "cycles");
	sl_add(&l, "instructions");
	for (size_t m = 0; m < 2; m++) {
		int ok = ibs && ibs_has_mem_data(sys);

		for (size_t i = 0; !ibs && i < ncore; i++)
			ok |= core[i]->max_precise > 0 && pp_pmu_event(core[i], mem[m]) != NULL;
		if (ok)
			sl_add(&l, mem[m]);
	}
	for (size_t i = 0; i < ncore; i++) {
		const struct pp_named_event *t;
		size_t nr;

		if (core[i]->max_precise <= 0)
			continue;
		t = pp_named_events(sys, core[i], &nr, NULL);
		for (size_t j = 0; j < nr; j++)
			sl_add(&l, t[j].name);
	}
	for (size_t i = 0; i < ncore; i++) {
		snprintf(item, sizeof(item), "%s/<terms>/", core[i]->name);
		sl_add(&l, item);
	}
	if (ibs)
		sl_add(&l, "ibs_op/<terms>/");
	return buf;
}

/* One event to decide and open on one PMU's CPUs. */
struct plan {
	char name[PP_EVENT_NAME_LEN];
	const struct pp_pmu *pmu; /* whose CPUs; NULL = every online CPU */
	const char *pmu_label;
	uint32_t type;
	uint64_t config[3];
	int precise_start, precise_min;
	int exact;    /* the user asked for exactly this precision */
	int amd_core; /* precise cycles is forwarded to IBS; ENOENT at precise>0 steps down */
	int mem;
	int aux; /* needs the mem-loads-aux group leader (SPR/EMR, ADL P-cores) */
	uint64_t aux_config;
	int software; /* cpu-clock */
	int ibs;      /* the ibs_op PMU itself: no exclude_* bits unless it has swfilt */
	char note[512];
};

struct ctx {
	const struct pp_event_request *req;
	const struct pp_sys *sys;
	pp_perf_open_fn open_fn;
	void *open_ctx;
	char *err;
	size_t errlen;
	int stacks;
	uint32_t sample_max_stack;
	int exclude_user, exclude_kernel; /* from the spec's :k / :u */
	const char *spec_text;		  /* the -e argument, for messages */
};

#define MEM_LOADS_AUX_CONFIG 0x8203ULL /* event=0x03,umask=0x82 (notes rule 8) */

/*
 * IBS refuses every exclude_* bit (PERF_PMU_CAP_NO_EXCLUDE up to 6.12, notes rule 10); so
 * does a precise event on AMD's core PMU, which the kernel forwards to IBS. The program
 * filters by privilege level instead. An ibs_op with the swfilt format (7.2) filters in the
 * kernel: the plan then carries swfilt=1 in config2 and keeps the bits.
 */
static int plan_no_exclude(const struct plan *p, int precise)
{
	return (p->ibs && !p->config[2]) || (p->amd_core && precise > 0);
}

/* A request this machine cannot honour: say why, then what it can sample. Returns -EINVAL. */
static int cannot(const struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int cannot(const struct ctx *c, const char *fmt, ...)
{
	char why[512], can[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	seterr(c->err, c->errlen, "%s; this machine can sample: %s", why,
	       pp_events_can_sample(c->sys, can, sizeof(can)));
	return -EINVAL;
}

static void build_attr(const struct ctx *c, const struct plan *p, int precise,
		       struct perf_event_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = p->type;
	attr->config = p->config[0];
	attr->config1 = p->config[1];
	attr->config2 = p->config[2];
	attr->precise_ip = (unsigned int)precise & 3;
	/* Rule 2: freq=1, or a fixed period with wakeup_events=1, keeps PEBS single-record so
	 * every sample reaches the program. */
	if (c->req->period) {
		attr->sample_period = c->req->period;
		attr->wakeup_events = 1;
		attr->watermark = 0;
	} else {
		attr->freq = 1;
		attr->sample_freq = c->req->freq_hz ? c->req->freq_hz : PP_EVENTS_DEFAULT_FREQ_HZ;
	}
	/* Rule 4 and 13: request only what the program reads; it reads through ctx. */
	attr->sample_type = PERF_SAMPLE_IP;
	if (precise > 0 && c->stacks) {
		/* Rule 3: bpf_get_stack on a precise event needs the perf callchain, or attach
		 * fails with EPROTO. */
		attr->sample_type |= PERF_SAMPLE_CALLCHAIN;
		attr->exclude_callchain_kernel = 0;
		attr->exclude_callchain_user = 0;
		attr->sample_max_stack = (uint16_t)c->sample_max_stack;
		/*
		 * IBS records no registers: its ip is the op's, the rest the interrupt's, which
		 * cannot start a walk; AMD's precise core events are IBS's.
		 */
		if (c->req->want_sample_regs && PP_SAMPLE_REGS_UNWIND != 0 && !p->ibs &&
		    !p->amd_core) {
			attr->sample_type |= PERF_SAMPLE_REGS_INTR;
			attr->sample_regs_intr = PP_SAMPLE_REGS_UNWIND;
		}
	}
	if (p->mem) {
		attr->sample_type |=
		    PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT_STRUCT;
		if (c->req->want_phys_addr)
			attr->sample_type |= PERF_SAMPLE_PHYS_ADDR;
	}
	if (!plan_no_exclude(p, precise)) {
		attr->exclude_kernel = (unsigned int)c->exclude_kernel;
		attr->exclude_hv = (unsigned int)c->exclude_kernel; /* perf's :u */
		attr->exclude_user = (unsigned int)c->exclude_user;
	}
	attr->disabled = 1;
	attr->inherit = c->req->pid >= 0;
}

/* The mem-loads-aux leader only has to be scheduled with the load event: a counting event. */
static void build_aux_attr(const struct ctx *c, const struct plan *p, struct perf_event_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = p->type;
	attr->config = p->aux_config;
	attr->exclude_kernel = (unsigned int)c->exclude_kernel;
	attr->exclude_hv = (unsigned int)c->exclude_kernel;
	attr->exclude_user = (unsigned int)c->exclude_user;
	attr->disabled = 1;
	attr->inherit = c->req->pid >= 0;
}

/* Open the plan's event (and aux leader) on one CPU. Returns 0 or -errno; fds in fd[2]. */
static int open_one(const struct ctx *c, const struct plan *p, const struct perf_event_attr *a,
		    int cpu, int fd[2])
{
	struct perf_event_attr attr = *a, aux;
	int leader = -1, r;

	fd[0] = fd[1] = -1;
	if (p->aux) {
		build_aux_attr(c, p, &aux);
		leader = c->open_fn(&aux, c->req->pid, cpu, -1, PERF_FLAG_FD_CLOEXEC, c->open_ctx);
		if (leader < 0)
			return leader;
	}
	r = c->open_fn(&attr, c->req->pid, cpu, leader, PERF_FLAG_FD_CLOEXEC, c->open_ctx);
	if (r == -EINVAL && (attr.sample_type & PERF_SAMPLE_WEIGHT_STRUCT)) {
		/*
		 * PERF_SAMPLE_WEIGHT_STRUCT is new in 5.12; before, the load latency comes as the
		 * u64 PERF_SAMPLE_WEIGHT (its low 32 bits), and the shim reads either layout.
		 */
		attr.sample_type =
		    (attr.sample_type & ~(uint64_t)PERF_SAMPLE_WEIGHT_STRUCT) | PERF_SAMPLE_WEIGHT;
		r = c->open_fn(&attr, c->req->pid, cpu, leader, PERF_FLAG_FD_CLOEXEC, c->open_ctx);
	}
	if (r == -EINVAL && (attr.sample_type & PERF_SAMPLE_REGS_INTR)) {
		/* a PMU that cannot record registers: the shim walks the perf callchain then */
		attr.sample_type &= ~(uint64_t)PERF_SAMPLE_REGS_INTR;
		attr.sample_regs_intr = 0;
		r = c->open_fn(&attr, c->req->pid, cpu, leader, PERF_FLAG_FD_CLOEXEC, c->open_ctx);
	}
	if (r < 0) {
		if (leader >= 0)
			close(leader);
		return r;
	}
	fd[0] = leader;
	fd[1] = r;
	return 0;
}

static const char *errname(int e)
{
	switch (e) {
	case ENOENT:
		return "ENOENT";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case EINVAL:
		return "EINVAL";
	case EACCES:
		return "EACCES";
	case EPERM:
		return "EPERM";
	case ENODEV:
		return "ENODEV";
	case ENODATA:
		return "ENODATA";
	case EBUSY:
		return "EBUSY";
	default:
		return "error";
	}
}

static int privilege_error(const struct ctx *c, const struct plan *p, int cpu, int e)
{
	char par[32];

	if (c->sys->perf_event_paranoid == PP_SYSCTL_UNKNOWN)
		snprintf(par, sizeof(par), "unknown");
	else
		snprintf(par, sizeof(par), "%lld", (long long)c->sys->perf_event_paranoid);
	seterr(c->err, c->errlen,
	       "perf_event_open(%s on %s, cpu %d): %s: not permitted with "
	       "kernel.perf_event_paranoid=%s; run as root, or grant CAP_PERFMON (and CAP_BPF) "
	       "- with perf_event_paranoid=3 (Debian) CAP_SYS_ADMIN is required - or lower "
	       "/proc/sys/kernel/perf_event_paranoid",
	       p->name, p->pmu_label, cpu, strerror(e), par);
	return -EACCES;
}

static int no_pmu_error(const struct ctx *c)
{
	return cannot(c,
		      "-e %s: this machine has no hardware PMU (no cpu, cpu_core or ibs_op under "
		      "%s/bus/event_source/devices; a VM?)",
		      c->spec_text, c->sys->sysfs_root);
}

enum step { STEP_OK, STEP_NEXT, STEP_FAIL };

/*
 * Walk the precision ladder on the plan's first CPU. On success *precise_out holds the level
 * and fd[] the open fds; the reason is appended to why. Returns 0 or -errno (the kernel's
 * answer at the last step; err is set by the caller).
 */
static int decide(const struct ctx *c, struct plan *p, int cpu, int *precise_out, int fd[2],
		  char *why, size_t whylen, int *last_tried)
{
	char tried[256] = "";
	size_t tlen = 0;
	int r = -EINVAL;

	for (int prec = p->precise_start; prec >= p->precise_min; prec--) {
		struct perf_event_attr attr;
		enum step st = STEP_FAIL;

		build_attr(c, p, prec, &attr);
		*last_tried = prec;
		r = open_one(c, p, &attr, cpu, fd);
		if (r >= 0) {
			*precise_out = prec;
			if (tlen)
				seterr(why, whylen, "opened %s with precise_ip=%d after %s",
				       p->name, prec, tried);
			else
				seterr(why, whylen, "opened %s with precise_ip=%d", p->name, prec);
			return 0;
		}
		if (r == -EACCES || r == -EPERM)
			return r;
		if (r == -ENODATA && p->mem && !p->aux && (p->config[0] & 0xffff) == 0x01cd) {
			/* Rule 8: the kernel wants the load-latency event behind mem-loads-aux
			 * even though sysfs did not list it: retry once as that group. */
			p->aux = 1;
			p->aux_config = MEM_LOADS_AUX_CONFIG;
			if (tlen < sizeof(tried)) {
				int n = snprintf(tried + tlen, sizeof(tried) - tlen,
						 "%sENODATA at %d (retried behind mem-loads-aux "
						 "event=0x03,umask=0x82)",
						 tlen ? ", " : "", prec);

				if (n > 0)
					tlen += (size_t)n;
			}
			prec++;
			continue;
		}
		if (!p->exact && prec > p->precise_min) {
			/* Rules 11 and 14: EOPNOTSUPP = above max_precise; EINVAL only at 3 (PDIST
			 * counter constraints); AMD ENOENT = not forwardable to IBS. */
			if (r == -EOPNOTSUPP || (r == -EINVAL && prec == 3) ||
			    (r == -ENOENT && p->amd_core))
				st = STEP_NEXT;
		}
		if (st != STEP_NEXT)
			return r;
		if (tlen < sizeof(tried)) {
			int n = snprintf(tried + tlen, sizeof(tried) - tlen, "%s%s at %d",
					 tlen ? ", " : "", errname(-r), prec);

			if (n > 0)
				tlen += (size_t)n;
		}
	}
	return r;
}

static void plan_init(struct plan *p, const char *name, const struct pp_pmu *pmu, const char *label)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->pmu = pmu;
	p->pmu_label = label;
}

/* Precise range for a named hardware event on a core PMU. */
static int precise_range(const struct pp_event_spec *spec, const struct pp_pmu *pmu, int min,
			 struct plan *p)
{
	int max = pmu->kind == PP_PMU_AMD_CORE ? 2 : (pmu->max_precise < 0 ? 0 : pmu->max_precise);

	if (spec->precise > 0) {
		p->precise_start = p->precise_min = spec->precise;
		p->exact = 1;
		return 0;
	}
	p->precise_start = max;
	p->precise_min = min;
	return max >= min ? 0 : -EOPNOTSUPP;
}

static void plan_cpu_clock(struct plan *p, const char *note)
{
	plan_init(p, "cpu-clock", NULL, "software");
	p->type = PERF_TYPE_SOFTWARE;
	p->config[0] = PERF_COUNT_SW_CPU_CLOCK;
	p->software = 1;
	seterr(p->note, sizeof(p->note), "%s", note);
}

static int plan_generic(const struct ctx *c, const struct pp_event_spec *spec,
			const struct pp_pmu *pmu, struct plan *p)
{
	uint64_t id = spec->kind == PP_EVENT_INSTRUCTIONS ? PERF_COUNT_HW_INSTRUCTIONS
							  : PERF_COUNT_HW_CPU_CYCLES;
	int hybrid = pmu->kind == PP_PMU_INTEL_CORE && strcmp(pmu->name, "cpu") != 0;

	plan_init(p, spec->kind == PP_EVENT_INSTRUCTIONS ? "instructions" : "cycles", pmu,
		  pmu->name);
	p->type = PERF_TYPE_HARDWARE;
	/* Rule 9: on hybrid parts the PMU type goes in config[63:32]. */
	p->config[0] = hybrid ? ((uint64_t)pmu->type << PERF_PMU_TYPE_SHIFT) | id : id;
	p->amd_core = pmu->kind == PP_PMU_AMD_CORE;
	if (precise_range(spec, pmu, 0, p))
		return -EOPNOTSUPP;
	if (p->amd_core)
		seterr(p->note, sizeof(p->note),
		       "ibs_op present: the kernel forwards precise %s to IBS op sampling "
		       "(precise_ip at most 2, no exclude_* bits since IBS rejects them)",
		       p->name);
	else
		seterr(p->note, sizeof(p->note), "%s: max_precise=%d%s%s", pmu->name,
		       pmu->max_precise, pmu->pmu_name[0] ? ", pmu_name=" : "", pmu->pmu_name);
	(void)c;
	return 0;
}

static int plan_intel_mem(const struct ctx *c, const struct pp_event_spec *spec,
			  const struct pp_pmu *pmu, struct plan *p)
{
	const char *evname = spec->kind == PP_EVENT_MEM_LOADS ? "mem-loads" : "mem-stores";
	const char *enc = pp_pmu_event(pmu, evname), *aux;
	char e[256], term[32];
	int r;

	if (!enc)
		return -ENOENT;
	plan_init(p, evname, pmu, pmu->name);
	p->type = pmu->type;
	p->mem = 1;
	r = pp_pmu_encode(pmu, enc, strlen(enc), p->config, e, sizeof(e));
	if (r) {
		seterr(c->err, c->errlen, "%s/events/%s: %s", pmu->name, evname, e);
		return -EPROTO;
	}
	if (spec->kind == PP_EVENT_MEM_LOADS && pp_pmu_format(pmu, "ldlat")) {
		uint32_t ldlat = c->req->ldlat ? c->req->ldlat : PP_EVENTS_DEFAULT_LDLAT;

		snprintf(term, sizeof(term), "ldlat=%u", ldlat);
		r = pp_pmu_encode(pmu, term, strlen(term), p->config, e, sizeof(e));
		if (r) {
			seterr(c->err, c->errlen, "--ldlat %u: %s", ldlat, e);
			return -EINVAL;
		}
	}
	aux = pp_pmu_event(pmu, "mem-loads-aux");
	if (spec->kind == PP_EVENT_MEM_LOADS && aux) {
		uint64_t cfg[3] = {0, 0, 0};

		/* Rule 8: SPR/EMR and ADL P-cores refuse mem-loads with DATA_SRC (ENODATA)
		 * unless mem-loads-aux leads the group. */
		r = pp_pmu_encode(pmu, aux, strlen(aux), cfg, e, sizeof(e));
		if (r) {
			seterr(c->err, c->errlen, "%s/events/mem-loads-aux: %s", pmu->name, e);
			return -EPROTO;
		}
		p->aux = 1;
		p->aux_config = cfg[0];
	}
	if (precise_range(spec, pmu, 1, p))
		return cannot(
		    c,
		    "-e %s: %s needs precise sampling (PEBS) but %s has max_precise=%d (a "
		    "VM without guest PEBS?)",
		    c->spec_text, evname, pmu->name, pmu->max_precise);
	seterr(p->note, sizeof(p->note), "%s: max_precise=%d%s%s, %s = %s%s", pmu->name,
	       pmu->max_precise, pmu->pmu_name[0] ? ", pmu_name=" : "", pmu->pmu_name, evname, enc,
	       p->aux ? " behind mem-loads-aux group leader" : "");
	return 0;
}

static int plan_amd_mem(const struct ctx *c, const struct pp_event_spec *spec,
			const struct pp_pmu *ibs, struct plan *p)
{
	const char *evname = spec->kind == PP_EVENT_MEM_LOADS ? "mem-loads" : "mem-stores";
	char e[256], term[32], lat[128] = "";
	int ops = pp_pmu_format(ibs, "cnt_ctl") != NULL;
	uint32_t ldlat = c->req->ldlat;

	if (!ibs_has_mem_data(c->sys))
		return cannot(
		    c,
		    "-e %s: ibs_op gives perf (and the program) addr, data_src and weight "
		    "only from kernel 6.1; this kernel is %s (IBS data only as raw MSR "
		    "dumps)",
		    c->spec_text, c->sys->kernel_release);
	if (spec->precise == 3)
		return cannot(c, "-e %s: IBS has no precise_ip=3 (EOPNOTSUPP, notes rule 10)",
			      c->spec_text);
	plan_init(p, evname, ibs, ibs->name);
	p->type = ibs->type;
	p->mem = 1;
	p->ibs = 1;
	if (ops && pp_pmu_encode(ibs, "cnt_ctl=1", 9, p->config, e, sizeof(e))) {
		seterr(c->err, c->errlen, "ibs_op: %s", e);
		return -EPROTO;
	}
	/*
	 * Load-latency filtering exists only with caps/ldlat (Zen 5): 128..2048 cycles, and the
	 * kernel then also sets L3MISSONLY (notes §4.2). Below 128 (perf's default of 30
	 * included) IBS just samples every load.
	 */
	if (spec->kind == PP_EVENT_MEM_LOADS && ldlat >= 128) {
		if (!pp_pmu_cap(ibs, "ldlat") || !pp_pmu_format(ibs, "ldlat"))
			return cannot(
			    c,
			    "-e %s --ldlat %u: ibs_op has no load-latency filter here (no "
			    "caps/ldlat; Zen 5 and later)",
			    c->spec_text, ldlat);
		if (ldlat > 2048)
			return cannot(c, "-e %s --ldlat %u: IBS takes 128..2048 cycles",
				      c->spec_text, ldlat);
		snprintf(term, sizeof(term), "ldlat=%u", ldlat);
		if (pp_pmu_encode(ibs, term, strlen(term), p->config, e, sizeof(e)))
			return cannot(c, "-e %s: ibs_op: %s", c->spec_text, e);
		snprintf(lat, sizeof(lat), ", loads of at least %u cycles (ldlat, L3 misses only)",
			 ldlat);
	} else if (spec->kind == PP_EVENT_MEM_LOADS && pp_pmu_cap(ibs, "ldlat")) {
		snprintf(lat, sizeof(lat), ", every load (ldlat %u is below IBS's minimum 128)",
			 ldlat);
	}
	/* 7.2's software filter (config2:0) lets the kernel drop the other level */
	if ((c->exclude_user || c->exclude_kernel) && pp_pmu_format(ibs, "swfilt"))
		pp_pmu_encode(ibs, "swfilt=1", 8, p->config, e, sizeof(e));
	/* IBS samples every op type; the program keeps loads or stores by data_src.mem_op. */
	seterr(p->note, sizeof(p->note),
	       "ibs_op (type %u) samples %s%s; %s are selected by data_src.mem_op; IBS drops the "
	       "low 4 bits of the period and %s",
	       ibs->type, ops ? "dispatched ops (cnt_ctl=1)" : "cycles", lat, evname,
	       p->config[2] ? "filters user/kernel by swfilt"
			    : "takes no exclude_* bits (user/kernel filtered in BPF)");
	return 0;
}

/* A precise event by name on one Intel core PMU; -ENOENT when its table lacks the name. */
static int plan_named(const struct ctx *c, const struct pp_event_spec *spec,
		      const struct pp_pmu *pmu, struct plan *p)
{
	const struct pp_named_event *t, *ev = NULL;
	const char *uarch;
	size_t nr;

	t = pp_named_events(c->sys, pmu, &nr, &uarch);
	for (size_t i = 0; i < nr && !ev; i++)
		if (!strcasecmp(t[i].name, spec->text))
			ev = &t[i];
	if (!ev)
		return -ENOENT;
	plan_init(p, ev->name, pmu, pmu->name);
	p->type = pmu->type;
	p->config[0] = ev->config;
	p->mem = ev->mem;
	if (precise_range(spec, pmu, 1, p))
		return cannot(c,
			      "-e %s: a precise event needs PEBS but %s has max_precise=%d (a VM "
			      "without guest PEBS?)",
			      c->spec_text, pmu->name, pmu->max_precise);
	seterr(p->note, sizeof(p->note),
	       "%s: max_precise=%d, %s %s = event=0x%02llx,umask=0x%02llx (Intel event list)",
	       pmu->name, pmu->max_precise, uarch, ev->name,
	       (unsigned long long)(ev->config & 0xff),
	       (unsigned long long)((ev->config >> 8) & 0xff));
	return 0;
}

static int plan_raw(const struct ctx *c, const struct pp_event_spec *spec, struct plan *p)
{
	const struct pp_pmu *pmu = pp_pmu_find(c->sys->pmus, spec->pmu);
	const char *ld, *st, *aux = NULL;
	char e[256];
	int r;

	if (!pmu)
		return cannot(c,
			      "raw event '%s': no PMU named '%s' under %s/bus/event_source/devices",
			      spec->text, spec->pmu, c->sys->sysfs_root);
	plan_init(p, spec->text, pmu, pmu->name);
	p->type = pmu->type;
	r = pp_pmu_encode(pmu, spec->terms, strlen(spec->terms), p->config, e, sizeof(e));
	if (r) {
		char takes[512];
		struct strlist l = {.buf = takes, .len = sizeof(takes), .off = 0};

		takes[0] = '\0';
		for (size_t i = 0; i < pmu->nr_formats; i++)
			sl_add(&l, pmu->formats[i].name);
		return cannot(
		    c,
		    "raw event '%s': %s (%s takes: %s%sconfig, config1, config2 or one of "
		    "its events)",
		    spec->text, e, pmu->name, takes, takes[0] ? ", " : "");
	}
	p->ibs = pmu->kind == PP_PMU_AMD_IBS_OP || pmu->kind == PP_PMU_AMD_IBS_FETCH;
	if (spec->precise == PP_PRECISE_MAX) {
		p->precise_start = pmu->max_precise > 0 ? pmu->max_precise : 0;
		p->precise_min = 0;
	} else if (spec->precise > 0) {
		p->precise_start = p->precise_min = spec->precise;
		p->exact = 1;
	}
	p->mem = pmu->kind == PP_PMU_AMD_IBS_OP;
	ld = pp_pmu_event(pmu, "mem-loads");
	st = pp_pmu_event(pmu, "mem-stores");
	for (int i = 0; i < 2 && !p->mem; i++) {
		const char *enc = i ? st : ld;
		uint64_t cfg[3] = {0, 0, 0};

		/* Same event/umask as a memory event: the data fields mean something. */
		if (enc && !pp_pmu_encode(pmu, enc, strlen(enc), cfg, NULL, 0) &&
		    (cfg[0] & 0xffff) == (p->config[0] & 0xffff)) {
			p->mem = 1;
			aux = i == 0 ? pp_pmu_event(pmu, "mem-loads-aux") : NULL;
		}
	}
	if (aux) {
		uint64_t cfg[3] = {0, 0, 0};

		/* Rule 8 applies to the raw spelling of the load-latency event too. */
		if (!pp_pmu_encode(pmu, aux, strlen(aux), cfg, NULL, 0)) {
			p->aux = 1;
			p->aux_config = cfg[0];
		}
	}
	if (p->mem && pmu->kind == PP_PMU_INTEL_CORE && spec->precise == PP_PRECISE_UNSET) {
		/* A memory event without PEBS has no data address: take the best precision. */
		if (pmu->max_precise <= 0)
			return cannot(
			    c,
			    "raw event '%s' is a memory event, which needs PEBS, but %s has "
			    "max_precise=%d",
			    spec->text, pmu->name, pmu->max_precise);
		p->precise_start = pmu->max_precise;
		p->precise_min = 1;
	}
	seterr(p->note, sizeof(p->note), "raw event on %s (type %u)%s", pmu->name, pmu->type,
	       p->aux ? " behind mem-loads-aux group leader" : "");
	return 0;
}

static int add_fd(struct pp_event_set *set, size_t *cap, int fd, int cpu, uint32_t cookie,
		  int leader)
{
	if (set->nr_fds == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct pp_event_fd *tmp = realloc(set->fds, ncap * sizeof(*tmp));

		if (!tmp)
			return -ENOMEM;
		set->fds = tmp;
		*cap = ncap;
	}
	set->fds[set->nr_fds++] =
	    (struct pp_event_fd){.fd = fd, .cpu = cpu, .cookie = cookie, .group_leader = leader};
	return 0;
}

static int add_pair(struct pp_event_set *set, size_t *cap, const int fd[2], int cpu,
		    uint32_t cookie)
{
	int r;

	if (fd[0] >= 0) {
		r = add_fd(set, cap, fd[0], cpu, cookie, 1);
		if (r) {
			close(fd[0]);
			close(fd[1]);
			return r;
		}
	}
	r = add_fd(set, cap, fd[1], cpu, cookie, 0);
	if (r)
		close(fd[1]); /* the leader, if any, is in the set and closes with it */
	return r;
}

static void close_pair(const int fd[2])
{
	if (fd[0] >= 0)
		close(fd[0]);
	if (fd[1] >= 0)
		close(fd[1]);
}

static void fill_info(const struct ctx *c, const struct plan *p, int precise, const char *how,
		      struct pp_event_info *info)
{
	uint64_t hz = c->req->freq_hz ? c->req->freq_hz : PP_EVENTS_DEFAULT_FREQ_HZ;

	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", p->name);
	snprintf(info->pmu, sizeof(info->pmu), "%s", p->pmu_label);
	info->type = p->type;
	info->config = p->config[0];
	info->config1 = p->config[1];
	info->config2 = p->config[2];
	info->precise_ip = precise;
	info->max_precise = p->pmu ? p->pmu->max_precise : -1;
	info->mem = p->mem;
	info->aux_leader = p->aux;
	info->aux_config = p->aux ? p->aux_config : 0;
	info->exclude_user = c->exclude_user;
	info->exclude_kernel = c->exclude_kernel;
	info->want_user_only = plan_no_exclude(p, precise) && c->exclude_kernel;
	info->want_kernel_only = plan_no_exclude(p, precise) && c->exclude_user;
	if (p->software) {
		snprintf(info->value_type, sizeof(info->value_type), "cpu");
		snprintf(info->value_unit, sizeof(info->value_unit), "nanoseconds");
		/* cpu-clock periods are nanoseconds; the kernel turns -F into 1e9/HZ. */
		info->period = c->req->period ? c->req->period : 1000000000ULL / hz;
	} else {
		snprintf(info->value_type, sizeof(info->value_type), "%s", p->name);
		snprintf(info->value_unit, sizeof(info->value_unit), "count");
		info->period = c->req->period;
	}
	if (p->note[0])
		seterr(info->why, sizeof(info->why), "%s; %s", p->note, how);
	else
		seterr(info->why, sizeof(info->why), "%s", how);
	build_attr(c, p, precise, &info->attr);
}

/* Open a decided plan on the rest of its CPUs. */
static int open_rest(const struct ctx *c, const struct plan *p, struct pp_event_info *info,
		     const int *cpus, size_t nr, uint32_t cookie, struct pp_event_set *set,
		     size_t *cap)
{
	for (size_t i = 1; i < nr; i++) {
		int fd[2], r = open_one(c, p, &info->attr, cpus[i], fd);

		if (r == -ENODEV) {
			/* Went offline between the scan and the open. */
			info->nr_cpus_skipped++;
			set->nr_cpus_skipped++;
			continue;
		}
		if (r == -EACCES || r == -EPERM)
			return privilege_error(c, p, cpus[i], -r);
		if (r < 0) {
			seterr(c->err, c->errlen,
			       "perf_event_open(%s on %s, precise_ip=%d) failed on cpu %d: %s (%s) "
			       "after cpu %d succeeded",
			       p->name, p->pmu_label, info->precise_ip, cpus[i], strerror(-r),
			       errname(-r), cpus[0]);
			return r;
		}
		r = add_pair(set, cap, fd, cpus[i], cookie);
		if (r)
			return r;
		info->nr_cpus++;
	}
	return 0;
}

/* Build the plans for spec. Returns the number of plans or -errno (err set). */
static int make_plans(const struct ctx *c, const struct pp_event_spec *spec, struct plan *plans,
		      int *fallback_ok)
{
	const struct pp_pmu_set *set = c->sys->pmus;
	const struct pp_pmu *core[MAX_PLANS];
	size_t ncore = pp_pmu_core_pmus(set, core, MAX_PLANS);
	const struct pp_pmu *ibs = pp_pmu_find(set, "ibs_op");
	int n = 0, r;

	*fallback_ok = 0;
	switch (spec->kind) {
	case PP_EVENT_AUTO:
		if (!ncore) {
			char note[400];

			seterr(note, sizeof(note),
			       "no hardware PMU under %s/bus/event_source/devices (virtual "
			       "machine?): sampling cpu-clock",
			       c->sys->sysfs_root);
			plan_cpu_clock(&plans[0], note);
			return 1;
		}
		*fallback_ok = 1;
		for (size_t i = 0; i < ncore; i++) {
			struct pp_event_spec cyc = *spec;

			cyc.kind = PP_EVENT_CYCLES;
			cyc.precise = PP_PRECISE_UNSET;
			r = plan_generic(c, &cyc, core[i], &plans[n]);
			if (r)
				return r;
			n++;
		}
		return n;
	case PP_EVENT_CPU_CLOCK:
		plan_cpu_clock(&plans[0], "cpu-clock requested");
		return 1;
	case PP_EVENT_CYCLES:
	case PP_EVENT_INSTRUCTIONS:
		if (!ncore)
			return no_pmu_error(c);
		for (size_t i = 0; i < ncore; i++) {
			r = plan_generic(c, spec, core[i], &plans[n]);
			if (r)
				return r;
			n++;
		}
		return n;
	case PP_EVENT_MEM_LOADS:
	case PP_EVENT_MEM_STORES:
		if (ibs) {
			r = plan_amd_mem(c, spec, ibs, &plans[0]);
			return r ? r : 1;
		}
		if (!ncore)
			return no_pmu_error(c);
		for (size_t i = 0; i < ncore; i++) {
			r = plan_intel_mem(c, spec, core[i], &plans[n]);
			if (r == -ENOENT)
				continue; /* e.g. a hybrid PMU without this event */
			if (r)
				return r;
			n++;
		}
		if (!n)
			return cannot(c,
				      "-e %s: no core PMU under %s/bus/event_source/devices lists "
				      "events/%s (%s, pmu_name %s)",
				      c->spec_text, c->sys->sysfs_root,
				      pp_event_kind_str(spec->kind), core[0]->name,
				      core[0]->pmu_name[0] ? core[0]->pmu_name : "unknown");
		return n;
	case PP_EVENT_RAW:
		r = plan_raw(c, spec, &plans[0]);
		return r ? r : 1;
	case PP_EVENT_NAMED: {
		char have[256];
		struct strlist l = {.buf = have, .len = sizeof(have), .off = 0};

		if (!ncore && !ibs)
			return no_pmu_error(c);
		have[0] = '\0';
		for (size_t i = 0; i < ncore; i++) {
			const char *uarch = "";
			size_t nr;
			char item[PP_PMU_NAME_LEN * 2];

			pp_named_events(c->sys, core[i], &nr, &uarch);
			snprintf(item, sizeof(item), "%s: %s", core[i]->name,
				 uarch[0] ? uarch : "no named-event table");
			sl_add(&l, item);
			r = plan_named(c, spec, core[i], &plans[n]);
			if (r == -ENOENT)
				continue; /* e.g. PREC_DIST on a hybrid part's atom cores */
			if (r)
				return r;
			n++;
		}
		if (!n)
			return cannot(c,
				      "-e %s: not a precise event of this machine's PMUs (%s; cpu "
				      "family %d model %d)",
				      c->spec_text, ncore ? have : "AMD: precise sampling is IBS",
				      c->sys->cpu_family, c->sys->cpu_model);
		return n;
	}
	}
	seterr(c->err, c->errlen, "unknown event kind");
	return -EINVAL;
}

/* Map a failed decision to the error the caller reports. */
static int decision_error(const struct ctx *c, const struct pp_event_spec *spec,
			  const struct plan *p, int cpu, int r)
{
	if (r == -EACCES || r == -EPERM)
		return privilege_error(c, p, cpu, -r);
	if (r == -ENOENT && !p->software && spec->kind != PP_EVENT_RAW &&
	    (!p->pmu || p->pmu->kind == PP_PMU_INTEL_CORE || p->pmu->kind == PP_PMU_AMD_CORE)) {
		/* sysfs lists a PMU the kernel does not drive (notes §8): only software works */
		seterr(
		    c->err, c->errlen,
		    "-e %s: the kernel has no PMU for %s on %s (ENOENT at precise_ip=%d; a VM?); "
		    "this machine can sample: cpu-clock",
		    c->spec_text, p->name, p->pmu_label, p->precise_min);
		return -EINVAL;
	}
	if (r == -ENODATA) {
		seterr(c->err, c->errlen,
		       "%s on %s: ENODATA even behind a mem-loads-aux group leader (0x%llx): the "
		       "kernel will not give data_src for this load-latency event",
		       p->name, p->pmu_label, (unsigned long long)p->aux_config);
		return r;
	}
	if (r == -EOPNOTSUPP && p->exact) {
		seterr(c->err, c->errlen,
		       "%s on %s: precise_ip=%d not supported (max_precise=%d); use fewer 'p' "
		       "modifiers or :P",
		       p->name, p->pmu_label, p->precise_start, p->pmu ? p->pmu->max_precise : -1);
		return -EINVAL;
	}
	seterr(c->err, c->errlen,
	       "perf_event_open(%s on %s, type %u, config 0x%llx, precise_ip=%d..%d) failed on "
	       "cpu %d: %s (%s)",
	       p->name, p->pmu_label, p->type, (unsigned long long)p->config[0], p->precise_start,
	       p->precise_min, cpu, strerror(-r), errname(-r));
	return r;
}

void pp_event_set_close(struct pp_event_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->nr_fds; i++)
		if (set->fds[i].fd >= 0)
			close(set->fds[i].fd);
	set->nr_fds = 0;
}

void pp_event_set_free(struct pp_event_set *set)
{
	if (!set)
		return;
	pp_event_set_close(set);
	free(set->fds);
	free(set->events);
	free(set);
}

/* Decide and open all plans. Returns 0 or -errno; on failure nothing stays open. */
static int run_plans(struct ctx *c, const struct pp_event_spec *spec, struct plan *plans, int n,
		     struct pp_event_set *set, int *failed_plan, int *failed_errno,
		     int *failed_precise)
{
	const struct pp_pmu_set *pmus = c->sys->pmus;
	size_t cap = 0;
	int *cpus = NULL, r = 0;

	*failed_plan = -1;
	*failed_errno = 0;
	set->events = calloc((size_t)n, sizeof(*set->events));
	cpus = calloc(pmus->nr_online ? pmus->nr_online : 1, sizeof(*cpus));
	if (!set->events || !cpus) {
		r = -ENOMEM;
		goto out;
	}
	/* Decide every PMU first: a failure on one (hybrid) may send auto to cpu-clock. */
	for (int i = 0; i < n; i++) {
		struct pp_event_info *info = &set->events[set->nr_events];
		size_t nr = pp_pmu_online_cpus(pmus, plans[i].pmu, cpus);
		int fd[2], precise = 0;
		char how[256];

		if (!nr) {
			seterr(c->err, c->errlen, "%s on %s: none of its CPUs is online",
			       plans[i].name, plans[i].pmu_label);
			r = -ENODEV;
			goto out;
		}
		r = decide(c, &plans[i], cpus[0], &precise, fd, how, sizeof(how), failed_precise);
		if (r < 0) {
			*failed_plan = i;
			*failed_errno = r;
			r = decision_error(c, spec, &plans[i], cpus[0], r);
			goto out;
		}
		fill_info(c, &plans[i], precise, how, info);
		if (c->req->dry_run) {
			close_pair(fd);
		} else {
			r = add_pair(set, &cap, fd, cpus[0], (uint32_t)set->nr_events);
			if (r)
				goto out;
		}
		info->nr_cpus = 1;
		set->nr_events++;
	}
	if (c->req->dry_run)
		goto out;
	for (size_t i = 0; i < set->nr_events; i++) {
		size_t nr = pp_pmu_online_cpus(pmus, plans[i].pmu, cpus);

		r = open_rest(c, &plans[i], &set->events[i], cpus, nr, (uint32_t)i, set, &cap);
		if (r)
			goto out;
	}
out:
	free(cpus);
	if (r)
		pp_event_set_close(set);
	return r;
}

int pp_events_open(const struct pp_event_request *req, const struct pp_sys *sys,
		   pp_perf_open_fn open_fn, void *open_ctx, struct pp_event_set **out, char *err,
		   size_t errlen)
{
	const char *spec_str = req->spec ? req->spec : "auto";
	struct ctx c = {.req = req,
			.sys = sys,
			.open_fn = open_fn ? open_fn : pp_perf_open_syscall,
			.open_ctx = open_ctx,
			.err = err,
			.errlen = errlen};
	struct plan plans[MAX_PLANS];
	struct pp_event_spec spec;
	struct pp_event_set *set;
	int n, r, fallback_ok, failed_plan, failed_errno, failed_precise = 0;
	char e[256];

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	r = pp_event_spec_parse(spec_str, strlen(spec_str), &spec, e, sizeof(e));
	if (r) {
		seterr(err, errlen, "-e %s: %s", spec_str, e);
		return r;
	}
	if (req->freq_hz && req->period) {
		seterr(err, errlen,
		       "-F %llu and -c %llu both given: sample by frequency or by "
		       "period, not both",
		       (unsigned long long)req->freq_hz, (unsigned long long)req->period);
		return -EINVAL;
	}
	if (req->period >> 63) {
		seterr(err, errlen, "-c %llu: period too large", (unsigned long long)req->period);
		return -EINVAL;
	}
	if (!req->period) {
		uint64_t hz = req->freq_hz ? req->freq_hz : PP_EVENTS_DEFAULT_FREQ_HZ;

		if (sys->max_sample_rate != PP_SYSCTL_UNKNOWN && sys->max_sample_rate >= 0 &&
		    hz > (uint64_t)sys->max_sample_rate) {
			seterr(
			    err, errlen,
			    "-F %llu exceeds kernel.perf_event_max_sample_rate=%lld (%s/sys/kernel/"
			    "perf_event_max_sample_rate); lower -F or raise the sysctl",
			    (unsigned long long)hz, (long long)sys->max_sample_rate,
			    sys->procfs_root);
			return -EINVAL;
		}
	}
	c.exclude_user = spec.exclude_user;
	c.exclude_kernel = spec.exclude_kernel;
	c.spec_text = spec_str;
	c.stacks = req->stack_depth > 0 && (req->want_kstack || req->want_ustack);
	c.sample_max_stack = req->stack_depth;
	if (sys->max_stack != PP_SYSCTL_UNKNOWN && sys->max_stack > 0 &&
	    c.sample_max_stack > (uint64_t)sys->max_stack)
		c.sample_max_stack = (uint32_t)sys->max_stack; /* above it the open fails */
	if (c.sample_max_stack > UINT16_MAX)
		c.sample_max_stack = UINT16_MAX;

	set = calloc(1, sizeof(*set));
	if (!set) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n = make_plans(&c, &spec, plans, &fallback_ok);
	if (n < 0) {
		free(set);
		return n;
	}
	r = run_plans(&c, &spec, plans, n, set, &failed_plan, &failed_errno, &failed_precise);
	if (r && fallback_ok && failed_plan >= 0 && failed_errno != -EACCES &&
	    failed_errno != -EPERM) {
		/* auto: no precise or plain cycles here; sample time instead, and say why. */
		char note[400];

		seterr(note, sizeof(note),
		       "%s: cycles could not be opened (%s at precise_ip=%d): "
		       "sampling cpu-clock",
		       plans[failed_plan].pmu_label, errname(-failed_errno), failed_precise);
		free(set->events);
		free(set->fds);
		memset(set, 0, sizeof(*set));
		plan_cpu_clock(&plans[0], note);
		if (err && errlen)
			err[0] = '\0';
		r = run_plans(&c, &spec, plans, 1, set, &failed_plan, &failed_errno,
			      &failed_precise);
	}
	if (r) {
		if (r == -ENOMEM && err && errlen && !err[0])
			seterr(err, errlen, "out of memory");
		pp_event_set_free(set);
		return r;
	}
	*out = set;
	return 0;
}
