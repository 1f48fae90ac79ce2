/*
 * Memory-access profiles end to end, without a PMU: shim records carrying data addresses,
 * latencies and data sources are encoded as the shim writes them and go through the real
 * decoder, session (this process's and a child's real /proc maps, the test binary's real ELF
 * data symbols), aggregator and exporters; the pprof bytes and the OTLP request are parsed
 * back with the protobuf-c generated code and the data objects, labels and latency sums
 * asserted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/otlp.h>
#include <pebsprof/writers.h>

#include "check.h"
#include "elf_symbol.h"
#include "kernel_notes.h"
#include "kmod_fixture.h"
#include "memory/mem_attr.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pprof/profile.pb-c.h"
#include "session.h"
#include "symbolize/data_type.h"
#include "symbolize/debug_file.h"
#include "symbolize/kallsyms.h"
#include "testsh.h"

#define PROF(x) Opentelemetry__Proto__Profiles__V1development__##x
#define REQ Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
#define REQ_FN(x) opentelemetry__proto__collector__profiles__v1development__##x
#define VALUE_CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

#if defined(__clang__)
#define MEM_FN __attribute__((noinline, used, optnone))
#else
#define MEM_FN __attribute__((noinline, noipa, used))
#endif

/* The data objects the records point at: named globals in .data and .bss. */
__attribute__((used)) static volatile uint64_t mem_data_table[512] = {1, 2, 3};
__attribute__((used)) static volatile uint8_t mem_bss_big[1 << 20];
static volatile uint64_t sink;

MEM_FN static uint64_t mem_touch_fn(uint64_t x)
{
	for (int i = 0; i < 5; i++)
		sink += mem_data_table[(x + (uint64_t)i) & 511] + mem_bss_big[x & 0xfffff];
	return sink;
}

#define FN_ADDR(f) ((uint64_t)(uintptr_t) & (f))
#define ADDR(p) ((uint64_t)(uintptr_t)(p))

#define DSRC_L1_HIT                                                                                \
	(PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, L1) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, NONE) |     \
	 PP_MEM_S(TLB, HIT) | PP_MEM_S(TLB, L1) | PP_MEM_S(TLB, L2) | PP_MEM_S(LOCK, NA) |         \
	 ((uint64_t)PP_MEM_LVLNUM_L1 << PP_MEM_LVLNUM_SHIFT))
/* Intel 0x0a on SKL+: local DRAM, snoop hit, with an STLB miss. */
#define DSRC_RAM_HIT                                                                               \
	(PP_MEM_S(OP, LOAD) | PP_MEM_S(LVL, LOC_RAM) | PP_MEM_S(LVL, HIT) | PP_MEM_S(SNOOP, HIT) | \
	 PP_MEM_S(TLB, MISS) | PP_MEM_S(TLB, L2) | PP_MEM_S(LOCK, NA) |                            \
	 ((uint64_t)PP_MEM_LVLNUM_RAM << PP_MEM_LVLNUM_SHIFT))

#define ALL_MEM_FLAGS                                                                              \
	(PP_PERF_SAMPLE_ADDR | PP_PERF_SAMPLE_DATA_SRC | PP_PERF_SAMPLE_WEIGHT_STRUCT | 0x101)
#define PERIOD 20011

/* One record as the shim writes it: a user sample whose only frame is mem_touch_fn. */
static size_t encode_mem(unsigned char *buf, uint32_t pid, uint64_t addr, uint64_t dsrc,
			 uint32_t latency, uint16_t flags)
{
	struct pp_sample s;
	uint64_t frame = FN_ADDR(mem_touch_fn) + 4;

	memset(&s, 0, sizeof(s));
	s.hdr.type = PP_REC_SAMPLE;
	s.hdr.version = PP_RECORD_ABI_VERSION;
	s.hdr.size = (uint32_t)(sizeof(s) + sizeof(frame));
	s.tgid = pid;
	s.tid = pid;
	s.time_ns = 1000;
	s.ip = frame;
	s.period = PERIOD;
	s.addr = addr;
	s.data_src = dsrc;
	s.weight = ((uint64_t)3 << 32) | latency; /* var2_w = 3: instruction latency */
	s.sample_flags = ALL_MEM_FLAGS;
	s.flags = flags;
	s.nr_ustack = 1;
	memcpy(s.comm, "memwork", 8);
	memcpy(buf, &s, sizeof(s));
	memcpy(buf + sizeof(s), &frame, sizeof(frame));
	return s.hdr.size;
}

struct fx {
	struct pp_profile *prof;
	struct pp_session *s;
};

/* The loader's budget for the data types' DWARF in fx_init_dirs' sessions (0: its default). */
static uint64_t g_type_bytes;

/* What the tests' memory profiles are: mem-loads events and their latency. */
static const struct pp_profile_desc mem_desc = {
    .event = "mem-loads",
    .value_type = "mem-loads",
    .value_unit = "count",
    .period = PERIOD,
    .mem_latency = 1,
};

/* A session writing into a fresh memory profile; dirs: where it looks for debug files. */
static int fx_init_dirs(struct fx *f, size_t raw_entries, int mem_event,
			const struct pp_debug_dirs *dirs)
{
	struct pp_session_opts opts = {
	    .raw_stack_entries = raw_entries,
	    .mem_event = mem_event,
	    .precise_ip = 1,
	    .symbol_wait_ms = 10000, /* every frame named as its sample arrives */
	    .debug_dirs = dirs,
	    .max_type_bytes = g_type_bytes,
	};

	memset(f, 0, sizeof(*f));
	f->prof = pp_profile_new(&mem_desc);
	f->s = f->prof ? pp_session_new(&opts, f->prof) : NULL;
	return f->s ? 0 : -1;
}

static int fx_init(struct fx *f, size_t raw_entries, int mem_event)
{
	return fx_init_dirs(f, raw_entries, mem_event, NULL);
}

static void fx_fini(struct fx *f)
{
	pp_session_free(f->s);
	pp_profile_free(f->prof);
}

static int feed(struct fx *f, uint32_t pid, uint64_t addr, uint64_t dsrc, uint32_t lat)
{
	unsigned char buf[256];
	size_t len =
	    encode_mem(buf, pid, addr, dsrc, lat, PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS);

	return pp_session_handle_record(f->s, buf, len);
}

static const char *label_of(const struct pp_sample_info *si, const char *key)
{
	for (uint32_t i = 0; i < si->nlabels; i++) {
		if (strcmp(si->labels[i].key, key) == 0)
			return si->labels[i].value;
	}
	return NULL;
}

/* Sums over the profile's samples whose data-object frame is named obj. */
struct agg {
	uint64_t count, value, latency;
	uint32_t nsamples;
	const struct pp_sample_info *last;
	int leaf_ok; /* every such sample: data frame, then mem_touch_fn */
};

static struct agg by_object(const struct pp_profile *p, const char *obj)
{
	struct agg a = {.leaf_ok = 1};

	for (size_t i = 0; i < pp_profile_sample_count(p); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(p, i);
		const struct pp_location_info *l0, *l1;

		if (si->nlocations < 1)
			continue;
		l0 = pp_profile_get_location(p, si->locations[0]);
		if (l0->kind != PP_FRAME_DATA || strcmp(l0->function, obj) != 0)
			continue;
		l1 = si->nlocations > 1 ? pp_profile_get_location(p, si->locations[1]) : NULL;
		if (!l1 || l1->kind != PP_FRAME_NATIVE || strcmp(l1->function, "mem_touch_fn") != 0)
			a.leaf_ok = 0;
		a.count += si->count;
		a.value += si->value;
		a.latency += si->latency;
		a.nsamples++;
		a.last = si;
	}
	return a;
}

/* A file mapping without symbols: a temporary non-ELF file, mapped read-only. */
struct filemap {
	char path[64];
	void *addr;
};

static int filemap_open(struct filemap *fm)
{
	char page[8192];
	int fd;

	snprintf(fm->path, sizeof(fm->path), "/tmp/pp-mem-test-XXXXXX");
	fd = mkstemp(fm->path);
	if (fd < 0)
		return -1;
	memset(page, 'x', sizeof(page));
	if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page)) {
		close(fd);
		return -1;
	}
	fm->addr = mmap(NULL, sizeof(page), PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	return fm->addr == MAP_FAILED ? -1 : 0;
}

static void filemap_close(struct filemap *fm)
{
	if (fm->addr && fm->addr != MAP_FAILED)
		munmap(fm->addr, 8192);
	unlink(fm->path);
}

/*
 * Every kind of object once or more, from this process: returns 0 and fills the file map, the
 * brk heap block and the anonymous block it used.
 */
struct objs {
	struct filemap fm;
	void *heap, *anon;
	uint64_t stack_addr;
};

static int objs_open(struct objs *o)
{
	volatile uint64_t local = 1;

	memset(o, 0, sizeof(*o));
	if (filemap_open(&o->fm))
		return -1;
	/* brk memory is "[heap]" whatever malloc (or a sanitizer's allocator) uses. */
	o->heap = sbrk(4096);
	o->anon = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	o->stack_addr = ADDR(&local);
	return o->heap == (void *)-1 || o->anon == MAP_FAILED ? -1 : 0;
}

static void objs_close(struct objs *o)
{
	filemap_close(&o->fm);
	if (o->anon && o->anon != MAP_FAILED)
		munmap(o->anon, 1 << 20);
}

/* Feeds the fixed scenario; returns the number of records that failed. */
static int feed_scenario(struct fx *f, const struct objs *o)
{
	uint32_t pid = (uint32_t)getpid();
	int bad = 0;

	/* 10 L1 hits in .data at different elements, latencies 40..49 (bucket 32-63). */
	for (uint32_t i = 0; i < 10; i++)
		bad += feed(f, pid, ADDR(&mem_data_table[i * 37]), DSRC_L1_HIT, 40 + i) != 0;
	/* 6 DRAM hits in the big .bss array, latency 300 (256-511), spread over 1 MiB. */
	for (uint32_t i = 0; i < 6; i++)
		bad += feed(f, pid, ADDR(&mem_bss_big[i * 150000]), DSRC_RAM_HIT, 300) != 0;
	bad += feed(f, pid, ADDR(o->heap) + 128, DSRC_L1_HIT, 33) != 0;
	bad += feed(f, pid, ADDR(o->anon) + 4096 * 7, DSRC_RAM_HIT, 1500) != 0;
	bad += feed(f, pid, o->stack_addr, DSRC_L1_HIT, 5) != 0;
	bad += feed(f, pid, ADDR(o->fm.addr) + 100, DSRC_L1_HIT, 6) != 0;
	bad += feed(f, pid, 0xffffffff81234560ull, DSRC_L1_HIT, 7) != 0;
	bad += feed(f, pid, 0x1000, DSRC_L1_HIT, 8) != 0; /* page 1: never mapped */
	return bad;
}

static void check_scenario(const struct pp_profile *p, const struct objs *o)
{
	struct agg a;
	char filecls[96];

	a = by_object(p, "mem_data_table");
	CHECK_EQ_U64(a.count, 10);
	CHECK_EQ_U64(a.value, 10 * PERIOD);
	CHECK_EQ_U64(a.latency, 40 * 10 + 45);
	CHECK_EQ_U64(a.nsamples, 1); /* one object, one label set: one aggregate */
	CHECK(a.leaf_ok);
	if (a.last) {
		CHECK_STR(label_of(a.last, "memory.level"), "L1 hit");
		CHECK_STR(label_of(a.last, "memory.tlb"), "L1 or L2 hit");
		CHECK_STR(label_of(a.last, "memory.snoop"), "None");
		CHECK_STR(label_of(a.last, "memory.op"), "LOAD");
		CHECK_STR(label_of(a.last, "memory.latency_bucket"), "32-63");
	}

	a = by_object(p, "mem_bss_big");
	CHECK_EQ_U64(a.count, 6);
	CHECK_EQ_U64(a.latency, 1800);
	CHECK_EQ_U64(a.nsamples, 1);
	CHECK(a.leaf_ok);
	if (a.last) {
		CHECK_STR(label_of(a.last, "memory.level"), "RAM hit");
		CHECK_STR(label_of(a.last, "memory.tlb"), "L2 miss");
		CHECK_STR(label_of(a.last, "memory.snoop"), "Hit");
		CHECK_STR(label_of(a.last, "memory.latency_bucket"), "256-511");
	}

	a = by_object(p, "[heap]");
	CHECK_EQ_U64(a.count, 1);
	CHECK_EQ_U64(a.latency, 33);
	a = by_object(p, "[anon]");
	CHECK_EQ_U64(a.count, 1);
	CHECK_EQ_U64(a.latency, 1500);
	if (a.last)
		CHECK_STR(label_of(a.last, "memory.latency_bucket"), ">=1024");
	a = by_object(p, "[stack]");
	CHECK_EQ_U64(a.count, 1);
	snprintf(filecls, sizeof(filecls), "[file] %s", strrchr(o->fm.path, '/') + 1);
	a = by_object(p, filecls);
	CHECK_EQ_U64(a.count, 1);
	a = by_object(p, "[kernel]");
	CHECK_EQ_U64(a.count, 1);
	a = by_object(p, "[unknown]");
	CHECK_EQ_U64(a.count, 1);
	CHECK_EQ_U64(pp_profile_total_count(p), 22);
	CHECK_EQ_U64(pp_profile_total_latency(p), 445 + 1800 + 33 + 1500 + 5 + 6 + 7 + 8);
	/* Never an address as a label: every label value is one of the fixed vocabularies. */
	for (size_t i = 0; i < pp_profile_sample_count(p); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(p, i);

		for (uint32_t j = 0; j < si->nlabels; j++)
			CHECK(strstr(si->labels[j].value, "0x") == NULL);
	}
}

TEST(objects_labels_and_latency_direct)
{
	struct fx f;
	struct objs o;
	struct pp_session_stats st;

	if (objs_open(&o)) {
		objs_close(&o);
		SKIP("cannot create the file, brk and anonymous mappings");
	}
	REQUIRE(fx_init(&f, 0, 1) == 0);
	CHECK(feed_scenario(&f, &o) == 0);
	check_scenario(f.prof, &o);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.mem_samples, 22);
	CHECK_EQ_U64(st.mem_latency_samples, 22);
	CHECK_EQ_U64(st.data_symbols, 16);
	CHECK_EQ_U64(st.data_kernel, 1);
	CHECK_EQ_U64(st.data_unmapped, 1);
	CHECK_EQ_U64(st.data_classes, 4);
	/* 10 + 6 samples hit the two mappings' entries after their first sample. */
	CHECK(st.mem_obj_hits >= 14);
	fx_fini(&f);
	objs_close(&o);
}

TEST(raw_stack_table_keys_on_objects_not_addresses)
{
	struct fx f;
	struct objs o;
	struct pp_session_stats st;

	if (objs_open(&o)) {
		objs_close(&o);
		SKIP("cannot create the file, brk and anonymous mappings");
	}
	REQUIRE(fx_init(&f, 1024, 1) == 0);
	CHECK(feed_scenario(&f, &o) == 0);
	pp_session_get_stats(f.s, &st);
	/* 8 distinct (object, labels) stacks: the other 14 samples were table hits. */
	CHECK_EQ_U64(st.raw_stack_hits, 14);
	CHECK(pp_session_flush(f.s) == 0);
	check_scenario(f.prof, &o);
	fx_fini(&f);
	objs_close(&o);
}

TEST(non_memory_session_ignores_memory_fields)
{
	struct fx f;

	REQUIRE(fx_init(&f, 0, 0) == 0);
	CHECK(feed(&f, (uint32_t)getpid(), ADDR(&mem_data_table[3]), DSRC_L1_HIT, 40) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	CHECK_EQ_U64(si->nlocations, 1);
	CHECK_EQ_U64(si->nlabels, 0);
	CHECK_EQ_U64(si->latency, 0);
	CHECK_STR(pp_profile_get_location(f.prof, si->locations[0])->function, "mem_touch_fn");
	fx_fini(&f);
}

/* What a kernel >= 6.3 sends for a non-memory precise event: defaults, so nothing. */
TEST(default_values_add_no_frame_and_no_labels)
{
	struct fx f;
	struct pp_session_stats st;

	REQUIRE(fx_init(&f, 0, 1) == 0);
	CHECK(feed(&f, (uint32_t)getpid(), 0, PP_MEM_NA, 0) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	CHECK_EQ_U64(si->nlocations, 1);
	CHECK_EQ_U64(si->nlabels, 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.mem_no_fields, 1);
	CHECK_EQ_U64(st.mem_samples, 0);
	fx_fini(&f);
}

/* The addresses come from another process: a child with its own brk heap. */
TEST(child_process_objects)
{
	int pfd[2];
	uint64_t addrs[2];
	pid_t child;
	struct fx f;

	REQUIRE(pipe(pfd) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		char *h = sbrk(8192);

		addrs[0] = ADDR(&mem_bss_big[777777]);
		addrs[1] = h == (void *)-1 ? 0 : ADDR(h) + 100;
		if (write(pfd[1], addrs, sizeof(addrs)) != (ssize_t)sizeof(addrs))
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], addrs, sizeof(addrs)) != (ssize_t)sizeof(addrs) || !addrs[1]) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		close(pfd[0]);
		REQUIRE(!"the child sent its addresses");
	}
	close(pfd[0]);
	if (fx_init(&f, 64, 1) == 0) {
		CHECK(feed(&f, (uint32_t)child, addrs[0], DSRC_RAM_HIT, 200) == 0);
		CHECK(feed(&f, (uint32_t)child, addrs[1], DSRC_L1_HIT, 20) == 0);
		CHECK(pp_session_flush(f.s) == 0);
		CHECK_EQ_U64(by_object(f.prof, "mem_bss_big").latency, 200);
		CHECK_EQ_U64(by_object(f.prof, "[heap]").latency, 20);
		for (size_t i = 0; i < pp_profile_sample_count(f.prof); i++)
			CHECK_EQ_U64(pp_profile_get_sample(f.prof, i)->pid, child);
	} else {
		CHECK(!"session");
	}
	fx_fini(&f);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

/* ---- exporters, parsed back ---- */

static const char *pp_str(const Perftools__Profiles__Profile *pr, int64_t i)
{
	return i >= 0 && (size_t)i < pr->n_string_table ? pr->string_table[i] : "";
}

static const char *pprof_leaf_name(const Perftools__Profiles__Profile *pr,
				   const Perftools__Profiles__Sample *s)
{
	if (!s->n_location_id)
		return "";
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];

		if (l->id != s->location_id[0] || !l->n_line)
			continue;
		for (size_t j = 0; j < pr->n_function; j++) {
			if (pr->function[j]->id == l->line[0]->function_id)
				return pp_str(pr, pr->function[j]->name);
		}
	}
	return "";
}

static const char *pprof_label(const Perftools__Profiles__Profile *pr,
			       const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++) {
		if (strcmp(pp_str(pr, s->label[i]->key), key) == 0)
			return pp_str(pr, s->label[i]->str);
	}
	return NULL;
}

TEST(pprof_has_a_latency_sample_type)
{
	struct fx f;
	struct objs o;
	uint8_t *buf = NULL;
	size_t len = 0;
	Perftools__Profiles__Profile *pr;
	int found = 0;
	uint64_t latency_total = 0;

	if (objs_open(&o)) {
		objs_close(&o);
		SKIP("cannot create the file, brk and anonymous mappings");
	}
	REQUIRE(fx_init(&f, 1024, 1) == 0);
	CHECK(feed_scenario(&f, &o) == 0);
	CHECK(pp_session_flush(f.s) == 0);
	REQUIRE(pp_pprof_encode(f.prof, &buf, &len) == 0);
	pr = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	REQUIRE(pr);
	/* Pyroscope's names (profile.h): the latency first, the event's own type last. */
	REQUIRE(pr->n_sample_type == 2);
	CHECK_STR(pp_str(pr, pr->sample_type[0]->type), "latency");
	CHECK_STR(pp_str(pr, pr->sample_type[0]->unit), "cycles");
	CHECK_STR(pp_str(pr, pr->sample_type[1]->type), "mem_loads");
	CHECK_STR(pp_str(pr, pr->sample_type[1]->unit), "count");
	CHECK_STR(pp_str(pr, pr->period_type->type), "mem_loads");
	CHECK_EQ_U64(pr->period, PERIOD);
	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];

		REQUIRE(s->n_value == 2);
		latency_total += (uint64_t)s->value[0];
		if (strcmp(pprof_leaf_name(pr, s), "mem_data_table") == 0) {
			found++;
			CHECK_EQ_U64(s->value[1], 10 * PERIOD);
			CHECK_EQ_U64(s->value[0], 445);
			CHECK_STR(pprof_label(pr, s, "memory.level"), "L1 hit");
			CHECK_STR(pprof_label(pr, s, "memory.latency_bucket"), "32-63");
		}
	}
	CHECK_EQ_U64(found, 1);
	CHECK_EQ_U64(latency_total, pp_profile_total_latency(f.prof));
	perftools__profiles__profile__free_unpacked(pr, NULL);
	fx_fini(&f);
	objs_close(&o);
}

static const char *ot_str(const PROF(ProfilesDictionary) * d, int32_t i)
{
	return i >= 0 && (size_t)i < d->n_string_table ? d->string_table[i] : "";
}

static const char *ot_leaf_name(const PROF(ProfilesDictionary) * d, const PROF(Sample) * s)
{
	const PROF(Stack) * st;
	const PROF(Location) * l;

	if (s->stack_index <= 0 || (size_t)s->stack_index >= d->n_stack_table)
		return "";
	st = d->stack_table[s->stack_index];
	if (!st->n_location_indices || st->location_indices[0] <= 0 ||
	    (size_t)st->location_indices[0] >= d->n_location_table)
		return "";
	l = d->location_table[st->location_indices[0]];
	if (!l->n_lines || l->lines[0]->function_index <= 0 ||
	    (size_t)l->lines[0]->function_index >= d->n_function_table)
		return "";
	return ot_str(d, d->function_table[l->lines[0]->function_index]->name_strindex);
}

static const char *ot_attr(const PROF(ProfilesDictionary) * d, const PROF(Sample) * s,
			   const char *key)
{
	for (size_t i = 0; i < s->n_attribute_indices; i++) {
		const PROF(KeyValueAndUnit) *a = d->attribute_table[s->attribute_indices[i]];

		if (strcmp(ot_str(d, a->key_strindex), key) == 0 && a->value &&
		    a->value->value_case == VALUE_CASE(STRING_VALUE))
			return a->value->string_value;
	}
	return NULL;
}

TEST(otlp_has_a_count_and_a_latency_profile)
{
	const struct pp_profile *profs[1];
	struct fx f;
	struct objs o;
	uint8_t *buf = NULL;
	size_t len = 0;
	REQ *req;
	const PROF(ProfilesDictionary) * d;
	const PROF(ScopeProfiles) * sp;
	const PROF(Profile) * cnt, *lat;
	uint64_t sum = 0, nsum = 0;
	int found = 0;

	if (objs_open(&o)) {
		objs_close(&o);
		SKIP("cannot create the file, brk and anonymous mappings");
	}
	REQUIRE(fx_init(&f, 1024, 1) == 0);
	CHECK(feed_scenario(&f, &o) == 0);
	CHECK(pp_session_flush(f.s) == 0);
	profs[0] = f.prof;
	REQUIRE(pp_otlp_encode(profs, 1, NULL, &buf, &len) == 0);
	req = REQ_FN(export_profiles_service_request__unpack)(NULL, len, buf);
	free(buf);
	REQUIRE(req && req->dictionary);
	d = req->dictionary;
	REQUIRE(req->n_resource_profiles == 1); /* one process */
	REQUIRE(req->resource_profiles[0]->n_scope_profiles == 1);
	sp = req->resource_profiles[0]->scope_profiles[0];
	REQUIRE(sp->n_profiles == 2);
	cnt = sp->profiles[0];
	lat = sp->profiles[1];
	CHECK_STR(ot_str(d, cnt->sample_type->type_strindex), "mem_loads");
	CHECK_STR(ot_str(d, cnt->period_type->type_strindex), "mem_loads");
	CHECK_EQ_U64(cnt->period, PERIOD);
	CHECK_STR(ot_str(d, lat->sample_type->type_strindex), "latency");
	CHECK_STR(ot_str(d, lat->sample_type->unit_strindex), "cycles");
	CHECK_STR(ot_str(d, lat->period_type->type_strindex), "mem_loads");
	CHECK_STR(ot_str(d, lat->period_type->unit_strindex), "count");
	CHECK_EQ_U64(lat->period, PERIOD);
	for (size_t i = 0; i < cnt->n_samples; i++) {
		REQUIRE(cnt->samples[i]->n_values == 1);
		nsum += (uint64_t)cnt->samples[i]->values[0];
	}
	CHECK_EQ_U64(nsum, 22 * PERIOD); /* event counts: 22 samples of PERIOD loads */
	for (size_t i = 0; i < lat->n_samples; i++) {
		const PROF(Sample) *s = lat->samples[i];

		REQUIRE(s->n_values == 1);
		sum += (uint64_t)s->values[0];
		if (strcmp(ot_leaf_name(d, s), "mem_bss_big") == 0) {
			found++;
			CHECK_EQ_U64(s->values[0], 1800);
			CHECK_STR(ot_attr(d, s, "memory.level"), "RAM hit");
			CHECK_STR(ot_attr(d, s, "memory.tlb"), "L2 miss");
			CHECK_STR(ot_attr(d, s, "memory.snoop"), "Hit");
			CHECK_STR(ot_attr(d, s, "memory.op"), "LOAD");
			CHECK_STR(ot_attr(d, s, "memory.latency_bucket"), "256-511");
		}
	}
	CHECK_EQ_U64(found, 1);
	CHECK_EQ_U64(sum, 445 + 1800 + 33 + 1500 + 5 + 6 + 7 + 8);
	REQ_FN(export_profiles_service_request__free_unpacked)(req, NULL);
	fx_fini(&f);
	objs_close(&o);
}

/*
 * The fixture's read_rx load: its link-time address, as the resolver names it from the code in
 * fd and the DWARF in dwarf_fd.
 */
static int fixture_load(int fd, int dwarf_fd, uint64_t *pc)
{
	struct pp_data_type_resolver *r = pp_data_type_resolver_new(fd, dwarf_fd);
	uint64_t start = pp_test_elf_symbol(fd, "read_rx", NULL);

	*pc = 0;
	for (uint64_t at = start; r && start && at < start + 16 && !*pc; at++) {
		struct pp_data_type t;

		if (pp_data_type_resolve(r, at, 0, &t) == PP_DT_RESOLVED)
			*pc = at;
	}
	pp_data_type_resolver_free(r);
	return *pc ? 0 : -1;
}

/* The file offset of link-time address pc (its PT_LOAD segment's). */
static int64_t file_offset_of(int fd, uint64_t pc)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t phnum = 0;
	int64_t off = -1;

	if (elf && elf_getphdrnum(elf, &phnum) == 0)
		for (size_t i = 0; i < phnum && off < 0; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    pc >= ph.p_vaddr && pc - ph.p_vaddr < ph.p_filesz)
				off = (int64_t)(pc - ph.p_vaddr + ph.p_offset);
		}
	elf_end(elf);
	return off;
}

/* What two samples with an exact IP at the fixture's read_rx load came out as. */
struct typed_run {
	struct pp_session_stats st;
	int typed; /* samples whose leaf is "struct conn.rx_bytes", type and function above */
	int well_stacked; /* of those, with the type and then read_rx above the leaf */
	int classed; /* samples that kept their data object's class (counted, not aggregated) */
};

/*
 * Two samples at the load of the binary at path (mapped here), found with the DWARF in dwarf_fd
 * (-1: the binary's own), through a session searching dirs for debug files. The first waits
 * for the loader and keeps its data object's class.
 */
static int run_typed(const char *path, int dwarf_fd, const struct pp_debug_dirs *dirs,
		     struct typed_run *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t *heap = malloc(64), pc = 0, frame;
	struct fx f = {0};
	void *map = MAP_FAILED;
	int64_t off = -1;
	int err = -1;

	memset(out, 0, sizeof(*out));
	if (fd >= 0 && heap && fixture_load(fd, dwarf_fd >= 0 ? dwarf_fd : fd, &pc) == 0)
		off = file_offset_of(fd, pc);
	if (off >= 0)
		map = mmap(NULL, (size_t)off + 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED || fx_init_dirs(&f, 0, 1, dirs))
		goto out;
	frame = ADDR(map) + (uint64_t)off;
	for (int i = 0; i < 2; i++) {
		unsigned char buf[256];
		struct pp_sample rec;
		size_t len = encode_mem(buf, (uint32_t)getpid(), ADDR(heap), DSRC_L1_HIT, 40,
					PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS | PP_SF_EXACT_IP);

		memcpy(&rec, buf, sizeof(rec));
		rec.ip = frame;
		memcpy(buf, &rec, sizeof(rec));
		memcpy(buf + sizeof(rec), &frame, sizeof(frame));
		if (pp_session_handle_record(f.s, buf, len) || pp_session_wait_symbols(f.s, 10000))
			goto out;
	}
	pp_session_flush(f.s);
	pp_session_get_stats(f.s, &out->st);
	for (size_t i = 0; i < pp_profile_sample_count(f.prof); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(f.prof, i);
		const struct pp_location_info *l[3];

		if (si->nlocations < 3)
			continue;
		for (int k = 0; k < 3; k++)
			l[k] = pp_profile_get_location(f.prof, si->locations[k]);
		if (l[0]->kind != PP_FRAME_DATA || strcmp(l[0]->function, "struct conn.rx_bytes"))
			continue;
		out->typed++;
		out->well_stacked += l[1]->kind == PP_FRAME_DATA &&
				     !strcmp(l[1]->function, "struct conn") &&
				     l[2]->kind == PP_FRAME_NATIVE && l[2]->function &&
				     !strcmp(l[2]->function, "read_rx") && si->latency == 40;
	}
	out->classed = (int)(by_object(f.prof, "[heap]").count + by_object(f.prof, "[anon]").count);
	err = 0;
out:
	fx_fini(&f);
	if (map != MAP_FAILED)
		munmap(map, (size_t)off + 4096);
	if (fd >= 0)
		close(fd);
	free(heap);
	return err;
}

/*
 * A sample with an exact IP at a field access of a real binary (the fixture, mapped here):
 * the first waits for the loader and keeps its data object's class; once the loader has
 * answered, the sample's leaf is the field, the type the frame above it, then the function.
 */
TEST(exact_ip_samples_name_the_data_type_and_field)
{
	struct typed_run run;

	elf_version(EV_CURRENT);
	REQUIRE(run_typed(PP_TEST_BUILD_DIR "/pp_data_access", -1, NULL, &run) == 0);
	CHECK_EQ_U64(run.st.data_type_pending, 1);
	CHECK_EQ_U64(run.st.data_typed, 1);
	CHECK(run.typed == 1 && run.well_stacked == 1);
	CHECK(run.classed == 1); /* the sample before the answer */
}

/*
 * The binary stripped of its DWARF, which is in a debug file under a debug directory by its
 * build id (as Debian's -dbgsym packages install them): the loader finds the debug file as
 * symbolization does, reads the instruction from the binary and the types from the debug file.
 * Without the directory the same binary says no_dwarf.
 */
TEST(a_stripped_binary_is_typed_from_its_debug_file)
{
	char dir[PATH_MAX], bin[PATH_MAX + 16], dbg[PATH_MAX + 192], id[128] = "";
	struct pp_debug_dirs *dirs = NULL;
	struct typed_run run;
	FILE *p;
	int dfd;

	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-dtype-dbg") == 0);
	snprintf(bin, sizeof(bin), "%s/pp_data_access", dir);
	p = popen("readelf -n " PP_TEST_BUILD_DIR "/pp_data_access", "r");
	REQUIRE(p != NULL);
	for (char line[256]; fgets(line, sizeof(line), p);)
		if (sscanf(line, " Build ID: %127[0-9a-f]", id) == 1)
			break;
	pclose(p);
	REQUIRE(strlen(id) > 2);
	snprintf(dbg, sizeof(dbg), "%s/debug/.build-id/%.2s/%s.debug", dir, id, id + 2);
	REQUIRE(pp_test_sh("mkdir -p '%s/debug/.build-id/%.2s' && cp '%s' '%s' && "
			   "objcopy --only-keep-debug '%s' '%s' && strip --strip-debug '%s'",
			   dir, id, PP_TEST_BUILD_DIR "/pp_data_access", bin, bin, dbg, bin) == 0);
	REQUIRE(pp_test_sh("readelf -S '%s' | grep -q debug_info", bin) != 0); /* no DWARF left */
	dfd = open(dbg, O_RDONLY | O_CLOEXEC);
	REQUIRE(dfd >= 0);
	elf_version(EV_CURRENT);

	REQUIRE(run_typed(bin, dfd, NULL, &run) == 0);
	CHECK(run.typed == 0 && run.classed == 2);
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_NO_DWARF], 1);

	snprintf(dbg, sizeof(dbg), "%s/debug", dir);
	dirs = pp_debug_dirs_new(dbg);
	REQUIRE(dirs != NULL);
	REQUIRE(run_typed(bin, dfd, dirs, &run) == 0);
	CHECK_EQ_U64(run.st.data_typed, 1);
	CHECK(run.typed == 1 && run.well_stacked == 1);
	pp_debug_dirs_free(dirs);
	close(dfd);
}

#define KIMAGE PP_TEST_BUILD_DIR "/pp_kernel_image"
/* KASLR's slide of the kernel-like image: its kallsyms are the link addresses plus this. */
#define KSLIDE 0x1a200000ull
#define KMODULE_FN 0xffffffffc0a01000ull

/*
 * kallsyms as the running kernel-like image would show it: each function of the image slid by
 * KSLIDE (nm, binutils, lists them), and a module's function.
 */
/*
 * kallsyms' lines of the text symbols nm lists in file, slid by slide: "ADDR T name", or of a
 * module's, "ADDR t name\t[module]"
 */
static size_t nm_kallsyms(const char *file, uint64_t slide, const char *module, char *text,
			  size_t size)
{
	char cmd[512], line[256];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s", file);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p) && n + 128 < size) {
		unsigned long long addr;
		char type, name[128];

		if (sscanf(line, "%llx %c %127s", &addr, &type, name) != 3 || (type | 0x20) != 't')
			continue;
		if (module)
			n += (size_t)snprintf(text + n, size - n, "%llx t %s\t[%s]\n", addr + slide,
					      name, module);
		else
			n +=
			    (size_t)snprintf(text + n, size - n, "%llx T %s\n", addr + slide, name);
	}
	pclose(p);
	return n;
}

static size_t kimage_lines(char *text, size_t size)
{
	return nm_kallsyms(KIMAGE, KSLIDE, NULL, text, size);
}

static struct pp_kallsyms *kimage_kallsyms(void)
{
	char text[8192];
	size_t n = kimage_lines(text, sizeof(text));

	n +=
	    (size_t)snprintf(text + n, sizeof(text) - n, "%llx t mod_poll\t[pp_mod]\n", KMODULE_FN);
	return pp_kallsyms_parse(text, n);
}

/* The link-time address of the first instruction of function fn of the image that loads. */
static uint64_t kimage_fn(const char *fn)
{
	int fd = open(KIMAGE, O_RDONLY | O_CLOEXEC);
	uint64_t addr = fd >= 0 ? pp_test_elf_symbol(fd, fn, NULL) : 0;

	if (fd >= 0)
		close(fd);
	return addr;
}

/* What kernel samples at the image's instructions came out as. */
struct kernel_run {
	struct pp_session_stats st;
	int image;	   /* pp_session_kernel_image */
	char why[768];	   /* ... and why */
	char leaf[4][192]; /* each sample's leaf, type above it, kernel function, user function */
	int nleaves;
};

/*
 * A kernel memory sample at ip (a runtime address) with an exact IP, from a process whose user
 * stack is mem_touch_fn, read once the loader has answered: 0, or -1.
 */
static int kernel_sample(struct pp_session *s, uint64_t ip)
{
	unsigned char buf[256];
	struct pp_sample rec;
	uint64_t frames[2] = {ip, FN_ADDR(mem_touch_fn) + 4};
	size_t len;

	encode_mem(buf, (uint32_t)getpid(), 0xffff888812345678ull, DSRC_L1_HIT, 40,
		   PP_SF_MEM_FIELDS | PP_SF_HAS_SAMPLE_FLAGS | PP_SF_EXACT_IP | PP_SF_KERNEL_IP);
	memcpy(&rec, buf, sizeof(rec));
	rec.ip = ip;
	rec.nr_kstack = 1;
	rec.nr_ustack = 1;
	rec.hdr.size = (uint32_t)(sizeof(rec) + sizeof(frames));
	len = rec.hdr.size;
	memcpy(buf, &rec, sizeof(rec));
	memcpy(buf + sizeof(rec), frames, sizeof(frames));
	return pp_session_handle_record(s, buf, len) || pp_session_wait_symbols(s, 10000) ? -1 : 0;
}

static void kernel_run_result(struct fx *f, struct kernel_run *out);

/* A memory session with exact IPs whose kernel accesses are typed from the image ko finds. */
static struct pp_session_opts kernel_session_opts(struct pp_kallsyms *ks,
						  const struct pp_kernel_image_opts *ko)
{
	return (struct pp_session_opts){
	    .mem_event = 1,
	    .precise_ip = 1,
	    .symbol_wait_ms = 10000,
	    .kallsyms = ks,
	    .kernel_image = ko,
	};
}

/*
 * Two samples at each kernel address of ips (runtime addresses, of the image or a module),
 * from a process whose user stack is mem_touch_fn, with the image's notes in a sysfs where
 * its build id is hex_id; the second of each pair is read once the loader has answered.
 */
static int run_kernel(const uint64_t *ips, int n, const char *hex_id, struct kernel_run *out)
{
	char dir[PATH_MAX], sys[PATH_MAX + 8];
	struct pp_kallsyms *ks = kimage_kallsyms();
	struct pp_kernel_image_opts ko = {.path = KIMAGE};
	struct pp_session_opts opts = kernel_session_opts(ks, &ko);
	struct fx f = {0};
	int err = -1;

	opts.type_answers = 2; /* the image's resolver made again after every second answer */
	memset(out, 0, sizeof(*out));
	if (!ks || pp_test_scratch_dir(dir, sizeof(dir), "pp-mem-kernel"))
		goto out;
	snprintf(sys, sizeof(sys), "%s/sys", dir);
	if (pp_test_write_kernel_notes(sys, hex_id))
		goto out;
	ko.sys_root = sys;
	f.prof = pp_profile_new(&mem_desc);
	f.s = f.prof ? pp_session_new(&opts, f.prof) : NULL;
	if (!f.s)
		goto out;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 2; k++)
			if (kernel_sample(f.s, ips[i]))
				goto out;
	kernel_run_result(&f, out);
	err = 0;
out:
	fx_fini(&f);
	pp_kallsyms_free(ks);
	return err;
}

/* The session's stats, its kernel image's search and the samples' leaves, into out. */
static void kernel_run_result(struct fx *f, struct kernel_run *out)
{
	pp_session_flush(f->s);
	pp_session_get_stats(f->s, &out->st);
	out->image = pp_session_kernel_image(f->s, out->why, sizeof(out->why));
	for (size_t i = 0; i < pp_profile_sample_count(f->prof) && out->nleaves < 4; i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(f->prof, i);
		const struct pp_location_info *l[4];

		if (si->nlocations < 4)
			continue;
		for (int k = 0; k < 4; k++)
			l[k] = pp_profile_get_location(f->prof, si->locations[k]);
		if (l[0]->kind != PP_FRAME_DATA || l[1]->kind != PP_FRAME_DATA || !l[2]->function ||
		    !l[3]->function)
			continue;
		snprintf(out->leaf[out->nleaves++], sizeof(out->leaf[0]), "%s;%s;%s;%s",
			 l[3]->function, l[2]->function, l[1]->function, l[0]->function);
	}
}

static int has_leaf(const struct kernel_run *r, const char *stack)
{
	for (int i = 0; i < r->nleaves; i++)
		if (!strcmp(r->leaf[i], stack))
			return 1;
	return 0;
}

/*
 * Kernel memory samples with an exact IP at field accesses of the kernel-like image (its
 * build id the running kernel's, its kallsyms slid by KASLR): named from the image's DWARF as
 * user code is, a pointer parameter's field, a nested struct's, and a global's (RIP-relative,
 * from the image's link address); a module's instruction is counted as such and keeps its
 * object.
 */
TEST(kernel_accesses_are_typed_from_the_kernel_image)
{
	char id[128];
	uint64_t ips[4] = {kimage_fn("task_prio") + KSLIDE, kimage_fn("task_wakeups") + KSLIDE,
			   kimage_fn("count_switch") + KSLIDE, KMODULE_FN + 0x10};
	struct kernel_run run;

	elf_version(EV_CURRENT);
	pp_test_sh_line("readelf -n " KIMAGE " | sed -n 's/.*Build ID: *//p'", id, sizeof(id));
	REQUIRE(strlen(id) == 40 && ips[0] > KSLIDE && ips[1] > KSLIDE && ips[2] > KSLIDE);
	REQUIRE(run_kernel(ips, 4, id, &run) == 0);
	CHECK(run.image == 1);
	CHECK(strstr(run.why, KIMAGE) != NULL);
	CHECK_EQ_U64(run.st.data_typed, 3);
	/* a module the node shows no files of: the first asks, the second is told */
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_KERNEL_MODULE], 1);
	CHECK(has_leaf(&run, "mem_touch_fn;task_prio;struct task;struct task.prio"));
	CHECK(has_leaf(&run, "mem_touch_fn;task_wakeups;struct task;struct task.rq.nr_wakeups"));
	CHECK(has_leaf(&run,
		       "mem_touch_fn;count_switch;struct rq_stats;struct rq_stats.nr_switches"));
	for (int i = 0; i < run.nleaves; i++)
		printf("  %s\n", run.leaf[i]);
}

#define KMODULE PP_TEST_BUILD_DIR "/pp_kernel_module.ko"
#define KMOD_TEXT 0xffffffffc0b02000ull
#define KMOD_RELEASE "6.1.0-99-amd64"

/* kallsyms' lines of pp_kmod's functions, loaded with its .text at KMOD_TEXT */
static size_t kmod_kallsyms(char *text, size_t size)
{
	return nm_kallsyms(KMODULE, KMOD_TEXT, "pp_kmod", text, size);
}

static uint64_t kmod_fn(const char *fn)
{
	char cmd[256], line[64];

	snprintf(cmd, sizeof(cmd), "nm " KMODULE " | awk '$3 == \"%s\" { print $1 }'", fn);
	pp_test_sh_line(cmd, line, sizeof(line));
	return line[0] ? KMOD_TEXT + strtoull(line, NULL, 16) : 0;
}

/*
 * Kernel memory samples at a loaded module's instructions (kallsyms names the module): typed
 * from the module's files found on the host (modules.dep, its debug file by Debian's path),
 * laid out where sysfs says the kernel loaded it; the same sample's type from the image and
 * the module side by side, and a module without files keeps its object.
 */
TEST(module_accesses_are_typed_from_the_modules_files)
{
	static const struct pp_test_kmod_section secs[] = {
	    {".text", KMOD_TEXT}, {".bss", KMOD_TEXT + 0x6000}, {".data", KMOD_TEXT + 0x5000}};
	char dir[PATH_MAX], root[PATH_MAX + 8], sys[PATH_MAX + 8], kid[128], mid[128], why[768];
	char text[16384];
	size_t n = 0;
	struct kernel_run run = {0};
	struct pp_kallsyms *ks;
	struct pp_kernel_image_opts ko = {.path = KIMAGE, .release = KMOD_RELEASE};
	struct pp_session_opts opts;
	uint64_t ips[4] = {kmod_fn("task_prio"), kmod_fn("count_switch"),
			   kimage_fn("task_wakeups") + KSLIDE, KMODULE_FN + 0x10};
	uint32_t typed = 0, untyped = 0;
	struct fx f = {0};

	elf_version(EV_CURRENT);
	REQUIRE(ips[0] && ips[1] && ips[2] > KSLIDE);
	pp_test_sh_line("readelf -n " KIMAGE " | sed -n 's/.*Build ID: *//p'", kid, sizeof(kid));
	pp_test_sh_line("readelf -n " KMODULE " | sed -n 's/.*Build ID: *//p'", mid, sizeof(mid));
	REQUIRE(strlen(kid) == 40 && strlen(mid) == 40);
	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-mem-kmod") == 0);
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(sys, sizeof(sys), "%s/sys", dir);
	REQUIRE(pp_test_write_kernel_notes(sys, kid) == 0);
	REQUIRE(pp_test_kmod_fixture(root, sys, KMODULE, KMOD_RELEASE, 1, mid, secs, 3) == 0);
	/* the image's functions slid, the module's, and pp_mod's (no files) */
	n = kimage_lines(text, sizeof(text));
	n += kmod_kallsyms(text + n, sizeof(text) - n);
	n +=
	    (size_t)snprintf(text + n, sizeof(text) - n, "%llx t mod_poll\t[pp_mod]\n", KMODULE_FN);
	ks = pp_kallsyms_parse(text, n);
	REQUIRE(ks != NULL);
	ko.root = root;
	ko.sys_root = sys;
	opts = kernel_session_opts(ks, &ko);
	f.prof = pp_profile_new(&mem_desc);
	f.s = f.prof ? pp_session_new(&opts, f.prof) : NULL;
	REQUIRE(f.s != NULL);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 2; k++)
			REQUIRE(kernel_sample(f.s, ips[i]) == 0);
	kernel_run_result(&f, &run);
	pp_session_kernel_modules(f.s, &typed, &untyped, why, sizeof(why));
	for (int i = 0; i < run.nleaves; i++)
		printf("  %s\n", run.leaf[i]);
	CHECK(has_leaf(&run, "mem_touch_fn;task_prio;struct task;struct task.prio"));
	CHECK(has_leaf(&run,
		       "mem_touch_fn;count_switch;struct rq_stats;struct rq_stats.nr_switches"));
	CHECK(has_leaf(&run, "mem_touch_fn;task_wakeups;struct task;struct task.rq.nr_wakeups"));
	CHECK_EQ_U64(run.st.data_typed, 3);
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_KERNEL_MODULE], 1);
	CHECK(typed == 1 && untyped == 1);
	CHECK(strstr(why, "pp_mod") != NULL);
	fx_fini(&f);

	/*
	 * Without CAP_SYSLOG sysfs shows the sections at 0: the module is placed by the
	 * function kallsyms names at the sample, and its pointer accesses are typed all the same
	 */
	REQUIRE(pp_test_kmod_sections(sys, secs, 3, 1) == 0);
	memset(&f, 0, sizeof(f));
	memset(&run, 0, sizeof(run));
	f.prof = pp_profile_new(&mem_desc);
	f.s = f.prof ? pp_session_new(&opts, f.prof) : NULL;
	REQUIRE(f.s != NULL);
	for (int k = 0; k < 2; k++)
		REQUIRE(kernel_sample(f.s, ips[0]) == 0);
	kernel_run_result(&f, &run);
	pp_session_kernel_modules(f.s, &typed, &untyped, why, sizeof(why));
	CHECK(has_leaf(&run, "mem_touch_fn;task_prio;struct task;struct task.prio"));
	CHECK_EQ_U64(run.st.data_typed, 1);
	CHECK(typed == 1 && untyped == 0);
	fx_fini(&f);
	pp_kallsyms_free(ks);
}

/* The image of another build of the kernel names nothing: its instructions are not these. */
TEST(another_kernel_build_types_nothing)
{
	uint64_t ips[1] = {kimage_fn("task_prio") + KSLIDE};
	struct kernel_run run;

	elf_version(EV_CURRENT);
	REQUIRE(ips[0] > KSLIDE);
	REQUIRE(run_kernel(ips, 1, "00112233445566778899aabbccddeeff00112233", &run) == 0);
	CHECK(run.image == -ESTALE);
	CHECK(strstr(run.why, "not the running kernel's build") != NULL);
	CHECK_EQ_U64(run.st.data_typed, 0);
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_NO_FILE], 1);
	CHECK(run.nleaves == 0);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A debuginfod client that fetches the image: -EAGAIN until the test says it arrived. */
struct slow_server {
	int arrived, asks;
};

static int slow_fetch(void *ctx, const char *build_id)
{
	struct slow_server *srv = ctx;

	(void)build_id;
	srv->asks++;
	return srv->arrived ? open(KIMAGE, O_RDONLY | O_CLOEXEC) : -EAGAIN;
}

/*
 * No image on the node, and the debuginfod servers still fetching it: kernel accesses wait,
 * counted as such; once it has arrived they are typed, the instruction asked about while it
 * was on its way included. The search runs again at most once a second, not per sample.
 */
TEST(kernel_accesses_wait_for_the_image_from_debuginfod)
{
	char dir[PATH_MAX], sys[PATH_MAX + 8], root[PATH_MAX + 8], id[128];
	struct pp_kallsyms *ks = kimage_kallsyms();
	struct slow_server srv = {0};
	struct pp_kernel_image_opts ko = {
	    .release = "6.1.0-99-amd64", .fetch = slow_fetch, .fetch_ctx = &srv};
	struct pp_session_opts opts = kernel_session_opts(ks, &ko);
	uint64_t ip = kimage_fn("task_prio") + KSLIDE;
	struct kernel_run run = {0};
	uint64_t t0, elapsed_ms;
	struct fx f = {0};
	int i;

	elf_version(EV_CURRENT);
	REQUIRE(ks != NULL && ip > KSLIDE);
	pp_test_sh_line("readelf -n " KIMAGE " | sed -n 's/.*Build ID: *//p'", id, sizeof(id));
	REQUIRE(strlen(id) == 40);
	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-mem-kernel-dbgd") == 0);
	snprintf(sys, sizeof(sys), "%s/sys", dir);
	snprintf(root, sizeof(root), "%s/root", dir); /* a host without the image */
	REQUIRE(pp_test_write_kernel_notes(sys, id) == 0);
	REQUIRE(pp_test_sh("mkdir -p '%s'", root) == 0);
	ko.sys_root = sys;
	ko.root = root;
	f.prof = pp_profile_new(&mem_desc);
	f.s = f.prof ? pp_session_new(&opts, f.prof) : NULL;
	REQUIRE(f.s != NULL);

	t0 = mono_ms();
	for (i = 0; i < 5; i++)
		REQUIRE(kernel_sample(f.s, ip) == 0);
	elapsed_ms = mono_ms() - t0;
	kernel_run_result(&f, &run);
	CHECK(run.image == -EINPROGRESS);
	CHECK(strstr(run.why, "asked the debuginfod servers") != NULL);
	CHECK_EQ_U64(run.st.data_typed, 0);
	CHECK_EQ_U64(run.st.data_type_pending, 5);
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_NO_FILE], 0);
	/* once, and again for each second that passed: not for every sample */
	CHECK(srv.asks >= 1 && (uint64_t)srv.asks <= 1 + elapsed_ms / 1000);

	srv.arrived = 1;
	/* the next search comes a second after the last: samples until then still wait */
	for (i = 0; i < 100; i++) {
		REQUIRE(kernel_sample(f.s, ip) == 0);
		kernel_run_result(&f, &run);
		if (run.st.data_typed)
			break;
		usleep(50 * 1000);
	}
	CHECK(run.image == 1);
	CHECK(strstr(run.why, "debuginfod, build id") != NULL);
	CHECK(run.st.data_typed >= 1);
	CHECK(has_leaf(&run, "mem_touch_fn;task_prio;struct task;struct task.prio"));
	fx_fini(&f);
	pp_kallsyms_free(ks);
}

/*
 * The DWARF the loader reads into memory for data types is bounded, all files together: a
 * binary whose debug sections alone are over the bound gets no type (too_big), and keeps its
 * data object's class; one within it is typed. The bound is set below and above the fixture's
 * own debug sections, as readelf sizes them.
 */
TEST(a_binary_with_more_dwarf_than_the_budget_gets_no_type)
{
	struct typed_run run;
	char line[64];
	uint64_t dwarf;

	elf_version(EV_CURRENT);
	/* the section sizes (hex) summed by the shell: awk may be mawk, without strtonum */
	pp_test_sh_line("s=0; for h in $(readelf -SW " PP_TEST_BUILD_DIR
			"/pp_data_access | sed 's/^ *\\[ *[0-9]*\\]//' | awk '$1 ~ "
			"/^\\.debug_/ { print $5 }'); do s=$((s + 0x$h)); done; echo $s",
			line, sizeof(line));
	dwarf = strtoull(line, NULL, 10);
	REQUIRE(dwarf > 1024);

	g_type_bytes = dwarf - 1;
	REQUIRE(run_typed(PP_TEST_BUILD_DIR "/pp_data_access", -1, NULL, &run) == 0);
	CHECK(run.typed == 0 && run.classed == 2);
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_TOO_BIG], 1);

	g_type_bytes = dwarf;
	REQUIRE(run_typed(PP_TEST_BUILD_DIR "/pp_data_access", -1, NULL, &run) == 0);
	CHECK(run.typed == 1 && run.well_stacked == 1);
	CHECK_EQ_U64(run.st.data_untyped[PP_DT_TOO_BIG], 0);
	g_type_bytes = 0;
}

TEST_LIST = {
    {"a_binary_with_more_dwarf_than_the_budget_gets_no_type",
     a_binary_with_more_dwarf_than_the_budget_gets_no_type},
    {"kernel_accesses_are_typed_from_the_kernel_image",
     kernel_accesses_are_typed_from_the_kernel_image},
    {"kernel_accesses_wait_for_the_image_from_debuginfod",
     kernel_accesses_wait_for_the_image_from_debuginfod},
    {"another_kernel_build_types_nothing", another_kernel_build_types_nothing},
    {"module_accesses_are_typed_from_the_modules_files",
     module_accesses_are_typed_from_the_modules_files},
    {"exact_ip_samples_name_the_data_type_and_field",
     exact_ip_samples_name_the_data_type_and_field},
    {"a_stripped_binary_is_typed_from_its_debug_file",
     a_stripped_binary_is_typed_from_its_debug_file},
    {"objects_labels_and_latency_direct", objects_labels_and_latency_direct},
    {"raw_stack_table_keys_on_objects_not_addresses",
     raw_stack_table_keys_on_objects_not_addresses},
    {"non_memory_session_ignores_memory_fields", non_memory_session_ignores_memory_fields},
    {"default_values_add_no_frame_and_no_labels", default_values_add_no_frame_and_no_labels},
    {"child_process_objects", child_process_objects},
    {"pprof_has_a_latency_sample_type", pprof_has_a_latency_sample_type},
    {"otlp_has_a_count_and_a_latency_profile", otlp_has_a_count_and_a_latency_profile},
};

TEST_MAIN()
