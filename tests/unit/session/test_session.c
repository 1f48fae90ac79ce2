/*
 * Tests of the sample pipeline (session.c): synthetic shim records whose user frames are real
 * addresses of functions in this very binary, so the real /proc/self/maps, the real ELF symbol
 * table and build id of the test executable are what gets used; kernel frames resolve through
 * a small fixture kallsyms. Assertions go through the profile's read API.
 */
#define _GNU_SOURCE /* gettid, dl_iterate_phdr */
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "symbolize/demangle.h"
#include "symbolize/kallsyms.h"
#include "base/fsutil.h"
#include "process/procmaps.h"
#include "symbolize/vdso.h"
#include "session.h"
#include "unwind/unwinder.h"

/*
 * Functions whose addresses the records carry. noipa keeps GCC from cloning (foo.isra.0),
 * folding identical bodies or inferring anything across the call, so the names in .symtab are
 * exactly these and the call in sess_caller_outer stays a real call.
 */
#if defined(__clang__)
#define SESS_FN __attribute__((noinline, used, optnone))
#else
#define SESS_FN __attribute__((noinline, noipa, used))
#endif

static volatile uint64_t sink;
static volatile uintptr_t captured_ret;

SESS_FN static uint64_t sess_leaf_alpha(uint64_t x)
{
	for (int i = 0; i < 7; i++)
		sink += x * 3 + (uint64_t)i;
	return sink;
}

SESS_FN static uint64_t sess_leaf_beta(uint64_t x)
{
	for (int i = 0; i < 11; i++)
		sink ^= x * 5 + (uint64_t)i;
	return sink;
}

SESS_FN static uint64_t sess_mid_gamma(uint64_t x)
{
	for (int i = 0; i < 13; i++)
		sink -= x * 7 + (uint64_t)i;
	return sink;
}

SESS_FN static uint64_t sess_root_delta(uint64_t x)
{
	for (int i = 0; i < 17; i++)
		sink += x * 11 ^ (uint64_t)i;
	return sink;
}

SESS_FN static void sess_capture_ret(void)
{
	captured_ret = (uintptr_t)__builtin_return_address(0);
	sink += 1;
}

/* Work after the call keeps it from being a tail call: the return address is inside. */
SESS_FN static uint64_t sess_caller_outer(uint64_t x)
{
	sink += x;
	sess_capture_ret();
	sink *= 3;
	return sink + x;
}

/* A C function under a C++ (Itanium) mangled symbol name: shop::Cart::total(int). */
SESS_FN uint64_t sess_mangled(uint64_t x) __asm__("_ZN4shop4Cart5totalEi");
SESS_FN uint64_t sess_mangled(uint64_t x)
{
	for (int i = 0; i < 5; i++)
		sink += x ^ (uint64_t)i;
	return sink;
}

#define FN_ADDR(f) ((uint64_t)(uintptr_t) & (f))

/* Fixture kernel: three text symbols after _stext. */
#define K_STEXT 0xffffffff81000000ull
#define K_ALPHA 0xffffffff81001000ull
#define K_BETA 0xffffffff81002000ull
#define K_GAMMA 0xffffffff81003000ull
#define K_TRACE_RUN 0xffffffff81004000ull
#define K_TRAMPOLINE 0xffffffff81005000ull
static const char fixture_kallsyms[] = "ffffffff81000000 T _stext\n"
				       "ffffffff81001000 T sess_kfunc_alpha\n"
				       "ffffffff81002000 t sess_kfunc_beta\n"
				       "ffffffff81003000 T sess_kfunc_gamma\n"
				       "ffffffff81004000 T bpf_trace_run3\n"
				       "ffffffff81005000 t bpf_trampoline_6442545134\t[bpf]\n"
				       "ffffffff81006000 T sess_kfunc_delta\n";

#define NO_SUCH_PID 0x3ffffff0u
#define TIME_NS 5000000000ull
#define MONO_TO_WALL 1700000000000000000ll

/* A decoded sample and the stack tail it points into. Not to be copied once built. */
struct rec {
	unsigned char stack[2 * PP_MAX_STACK_DEPTH * sizeof(uint64_t)];
	struct pp_decoded d; /* last: its sample ends in a flexible array */
};

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * A sample of tgid/tid with kernel frames then user frames, leaf first. It counts as taken in
 * the kernel when it has kernel frames; ip is the leaf-most frame.
 */
static void make_sample(struct rec *r, uint32_t tgid, uint32_t tid, uint64_t period,
			const uint64_t *kf, uint16_t nk, const uint64_t *uf, uint16_t nu)
{
	memset(r, 0, sizeof(*r));
	r->d.kind = PP_DECODED_SAMPLE;
	r->d.sample.hdr.type = PP_REC_SAMPLE;
	r->d.sample.hdr.version = PP_RECORD_ABI_VERSION;
	r->d.sample.hdr.size =
	    (uint32_t)(sizeof(struct pp_sample) + ((size_t)nk + nu) * sizeof(uint64_t));
	r->d.sample.tgid = tgid;
	r->d.sample.tid = tid;
	r->d.sample.time_ns = TIME_NS;
	r->d.sample.period = period;
	r->d.sample.cpu = 1;
	r->d.sample.nr_kstack = nk;
	r->d.sample.nr_ustack = nu;
	r->d.sample.flags = nk ? PP_SF_KERNEL_IP : 0;
	r->d.sample.ip = nk ? kf[0] : nu ? uf[0] : 0;
	snprintf(r->d.sample.comm, sizeof(r->d.sample.comm), "sess-worker");
	for (uint16_t i = 0; i < nk; i++)
		put_le64(r->stack + (size_t)i * 8, kf[i]);
	for (uint16_t i = 0; i < nu; i++)
		put_le64(r->stack + ((size_t)nk + i) * 8, uf[i]);
	r->d.stack_bytes = r->stack;
}

static struct pp_profile *new_profile(void)
{
	struct pp_profile_desc desc = {
	    .event = "cpu-clock",
	    .value_type = "cpu",
	    .value_unit = "nanoseconds",
	    .period = 1000000,
	};

	return pp_profile_new(&desc);
}

static uint32_t own_pid(void)
{
	return (uint32_t)getpid();
}

static uint32_t own_tid(void)
{
	return (uint32_t)gettid();
}

static const char *loc_name(const struct pp_profile *p, uint32_t id)
{
	const struct pp_location_info *l = pp_profile_get_location(p, id);

	return l ? l->function : NULL;
}

/* The aggregated sample of tid, or NULL. */
static const struct pp_sample_info *sample_of_tid(const struct pp_profile *p, uint32_t tid)
{
	for (size_t i = 0; i < pp_profile_sample_count(p); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(p, i);

		if (si->tid == tid)
			return si;
	}
	return NULL;
}

static int bias_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uint64_t *)data = (uint64_t)info->dlpi_addr;
	return 1; /* the first object is the executable */
}

/* Runtime address minus this is the ELF virtual address in the test executable. */
static uint64_t load_bias(void)
{
	uint64_t bias = 0;

	dl_iterate_phdr(bias_cb, &bias);
	return bias;
}

static int exe_path(char *out, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 1);

	if (n <= 0)
		return -1;
	out[n] = '\0';
	return 0;
}

/* The fixture leaves the sample path never waiting for symbol tables, as the agent runs. */
static int g_async;

struct sess_fixture {
	struct pp_profile *prof;
	struct pp_session *s;
	struct pp_kallsyms *ks;
};

static int fixture_init(struct sess_fixture *f, struct pp_session_opts *opts, int with_kallsyms)
{
	memset(f, 0, sizeof(*f));
	if (with_kallsyms) {
		f->ks = pp_kallsyms_parse(fixture_kallsyms, strlen(fixture_kallsyms));
		if (!f->ks)
			return -1;
		opts->kallsyms = f->ks;
	}
	opts->mono_to_wall_ns = MONO_TO_WALL;
	/* these cases check names as each sample arrives (the async path has its own case) */
	if (!opts->symbol_wait_ms && !g_async)
		opts->symbol_wait_ms = 10000;
	f->prof = new_profile();
	if (!f->prof)
		return -1;
	f->s = pp_session_new(opts, f->prof);
	return f->s ? 0 : -1;
}

/* The fixture as the agent runs: the sample path never waits for symbol tables. */
static int async_fixture_init(struct sess_fixture *f, struct pp_session_opts *opts)
{
	int ret;

	g_async = 1;
	ret = fixture_init(f, opts, 0);
	g_async = 0;
	return ret;
}

static void fixture_fini(struct sess_fixture *f)
{
	pp_session_free(f->s);
	pp_profile_free(f->prof);
	pp_kallsyms_free(f->ks);
}

TEST(user_stack_resolves_leaf_first)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	uint64_t bias = load_bias();
	uint64_t uf[3] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_mid_gamma) + 8,
			  FN_ADDR(sess_root_delta) + 8};
	char exe[PATH_MAX];
	const char *base;

	REQUIRE(exe_path(exe, sizeof(exe)) == 0);
	base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 3);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_mid_gamma");
	CHECK_STR(loc_name(f.prof, si->locations[2]), "sess_root_delta");
	/* Locations hold ELF virtual addresses; callers the call instruction's (ret - 1). */
	CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[0])->address, uf[0] - bias);
	CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[1])->address, uf[1] - 1 - bias);
	CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[2])->address, uf[2] - 1 - bias);
	for (uint32_t i = 0; i < 3; i++) {
		CHECK(pp_profile_get_location(f.prof, si->locations[i])->kind == PP_FRAME_NATIVE);
		CHECK(pp_profile_get_location(f.prof, si->locations[i])->mapping_id != 0);
	}
	CHECK_EQ_U64(si->pid, own_pid());
	CHECK_EQ_U64(si->tid, own_tid());
	CHECK_EQ_U64(si->count, 1);
	CHECK_EQ_U64(si->value, 1000);
	CHECK_EQ_U64(si->first_time_unix_ns, TIME_NS + (uint64_t)MONO_TO_WALL);
	CHECK_STR(si->thread_name, "sess-worker");
	CHECK_STR(si->process_name, base);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples, 1);
	CHECK_EQ_U64(st.frames, 3);
	CHECK_EQ_U64(st.frames_unmapped, 0);
	CHECK_EQ_U64(st.frames_no_symbol, 0);
	CHECK_EQ_U64(st.frames_no_file, 0);
	CHECK_EQ_U64(st.samples_no_process, 0);
	fixture_fini(&f);
}

TEST(return_address_resolves_to_caller)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct rec r;

	captured_ret = 0;
	sess_caller_outer(5);
	REQUIRE(captured_ret > FN_ADDR(sess_caller_outer));
	REQUIRE(fixture_init(&f, &opts, 0) == 0);

	/* A real return address taken by __builtin_return_address inside the callee. */
	uint64_t uf[2] = {FN_ADDR(sess_capture_ret) + 4, (uint64_t)captured_ret};
	make_sample(&r, own_pid(), 1, 1, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);

	/*
	 * A caller frame exactly at a function's start is the return address of a call that
	 * ended the function before it: it must not be attributed to the one that starts there.
	 * As a leaf the same address is that function.
	 */
	uint64_t uf2[2] = {FN_ADDR(sess_leaf_beta), FN_ADDR(sess_leaf_beta)};
	make_sample(&r, own_pid(), 2, 1, NULL, 0, uf2, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);

	const struct pp_sample_info *a = sample_of_tid(f.prof, 1);
	const struct pp_sample_info *b = sample_of_tid(f.prof, 2);
	REQUIRE(a && b);
	REQUIRE(a->nlocations == 2 && b->nlocations == 2);
	CHECK_STR(loc_name(f.prof, a->locations[0]), "sess_capture_ret");
	CHECK_STR(loc_name(f.prof, a->locations[1]), "sess_caller_outer");
	CHECK_STR(loc_name(f.prof, b->locations[0]), "sess_leaf_beta");
	REQUIRE(loc_name(f.prof, b->locations[1]) != NULL);
	CHECK(strcmp(loc_name(f.prof, b->locations[1]), "sess_leaf_beta") != 0);
	fixture_fini(&f);
}

TEST(identical_stacks_aggregate_tids_stay_apart)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	uint64_t uf[3] = {FN_ADDR(sess_leaf_beta) + 4, FN_ADDR(sess_mid_gamma) + 8,
			  FN_ADDR(sess_root_delta) + 8};

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), 100, 1000, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_cached, 0);

	make_sample(&r, own_pid(), 100, 2500, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	/* The second sample's frames all come from the frame cache. */
	CHECK_EQ_U64(st.frames, 6);
	CHECK_EQ_U64(st.frames_cached, 3);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	CHECK_EQ_U64(si->count, 2);
	CHECK_EQ_U64(si->value, 3500);
	CHECK_EQ_U64(pp_profile_location_count(f.prof), 3);

	make_sample(&r, own_pid(), 101, 700, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	CHECK_EQ_U64(pp_profile_sample_count(f.prof), 2);
	const struct pp_sample_info *a = sample_of_tid(f.prof, 100);
	const struct pp_sample_info *b = sample_of_tid(f.prof, 101);
	REQUIRE(a && b);
	CHECK_EQ_U64(a->count, 2);
	CHECK_EQ_U64(a->value, 3500);
	CHECK_EQ_U64(b->count, 1);
	CHECK_EQ_U64(b->value, 700);
	/* Same stack, same location ids. */
	REQUIRE(b->nlocations == 3);
	for (uint32_t i = 0; i < 3; i++)
		CHECK_EQ_U64(a->locations[i], b->locations[i]);
	CHECK_EQ_U64(pp_profile_total_count(f.prof), 3);
	CHECK_EQ_U64(pp_profile_total_value(f.prof), 4200);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples, 3);
	fixture_fini(&f);
}

/* The build id readelf reports for path: 1 found, 0 none, -1 readelf could not run. */
static int readelf_build_id(const char *path, char *out, size_t len)
{
	char cmd[PATH_MAX + 64], line[512];
	int found = 0, status;
	FILE *fp;

	if (strchr(path, '\''))
		return -1;
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
	fp = popen(cmd, "r");
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		const char *p = strstr(line, "Build ID:");

		if (!p || found)
			continue;
		p += strlen("Build ID:");
		while (*p == ' ')
			p++;
		snprintf(out, len, "%s", p);
		out[strcspn(out, " \r\n")] = '\0';
		found = 1;
	}
	status = pclose(fp);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return found;
}

TEST(mapping_is_the_test_binary_with_its_build_id)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct rec r;
	uint64_t uf[1] = {FN_ADDR(sess_leaf_alpha) + 4};
	char exe[PATH_MAX], want[256] = "";
	int have;

	REQUIRE(exe_path(exe, sizeof(exe)) == 0);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 1);
	const struct pp_location_info *loc = pp_profile_get_location(f.prof, si->locations[0]);
	REQUIRE(loc && loc->mapping_id);
	const struct pp_mapping_info *m = pp_profile_get_mapping(f.prof, loc->mapping_id);
	REQUIRE(m);
	CHECK_STR(m->filename, exe);
	CHECK(m->start <= uf[0] && uf[0] < m->limit);
	CHECK_EQ_U64(pp_profile_mapping_count(f.prof), 1);

	have = readelf_build_id(exe, want, sizeof(want));
	if (have < 0) {
		fixture_fini(&f);
		SKIP("readelf -n could not run on the test binary; build id not cross-checked");
	}
	/* No note: the profile must say "" rather than invent one. */
	CHECK_STR(m->build_id, have ? want : "");
	if (have)
		CHECK(strlen(m->build_id) >= 16);
	fixture_fini(&f);
}

/*
 * A frame in the process's vdso is named from the agent's own vdso (the same image in every
 * 64-bit process), its mapping "[vdso]" with the image's build id, where it was "[vdso]".
 */
TEST(vdso_frames_are_named)
{
	struct pp_session_opts opts = {0};
	uint64_t base = getauxval(AT_SYSINFO_EHDR), at = 0;
	const struct pp_location_info *l;
	const struct pp_mapping_info *mi;
	const struct pp_sample_info *si;
	struct sess_fixture f;
	struct pp_vdso v;
	struct rec r;

	if (!base)
		SKIP("no vdso in this process (AT_SYSINFO_EHDR is 0)");
	REQUIRE(pp_vdso_open_own(&v, "/proc/self/maps") == 0);
	for (size_t i = 0; i < pp_elf_symbols_count(v.syms) && !at; i++) {
		const struct pp_elf_symbol *sym = pp_elf_symbols_get(v.syms, i);

		if (sym->name && strstr(sym->name, "clock_gettime"))
			at = sym->start;
	}
	REQUIRE(at != 0);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	/* the vdso is linked at 0: its symbols' addresses are offsets into the mapping */
	uint64_t uf[2] = {base + at + 4, FN_ADDR(sess_mid_gamma) + 8};
	make_sample(&r, own_pid(), 30, 1, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, 30);
	REQUIRE(si && si->nlocations == 2);
	l = pp_profile_get_location(f.prof, si->locations[0]);
	REQUIRE(l && l->function);
	CHECK(strstr(l->function, "clock_gettime") != NULL);
	CHECK_EQ_U64(l->address, at + 4);
	mi = pp_profile_get_mapping(f.prof, l->mapping_id);
	REQUIRE(mi != NULL);
	CHECK_STR(mi->filename, "[vdso]");
	CHECK_STR(mi->build_id, pp_elf_symbols_build_id(v.syms));
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_mid_gamma");
	fixture_fini(&f);
	pp_vdso_fini(&v);
}

TEST(kernel_frames_resolve_through_kallsyms)
{
	struct pp_session_opts opts = {.kernel_build_id = "0123456789abcdef"};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	uint64_t kf[2] = {K_ALPHA + 0x10, K_BETA + 0x20};
	uint64_t uf[1] = {FN_ADDR(sess_leaf_alpha) + 4};

	REQUIRE(fixture_init(&f, &opts, 1) == 0);
	make_sample(&r, own_pid(), 10, 1, kf, 2, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	const struct pp_sample_info *si = sample_of_tid(f.prof, 10);
	REQUIRE(si && si->nlocations == 3);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_kfunc_alpha");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_kfunc_beta");
	CHECK_STR(loc_name(f.prof, si->locations[2]), "sess_leaf_alpha");
	const struct pp_location_info *k0 = pp_profile_get_location(f.prof, si->locations[0]);
	const struct pp_location_info *k1 = pp_profile_get_location(f.prof, si->locations[1]);
	const struct pp_location_info *u0 = pp_profile_get_location(f.prof, si->locations[2]);
	CHECK(k0->kind == PP_FRAME_KERNEL);
	CHECK(k1->kind == PP_FRAME_KERNEL);
	CHECK(u0->kind == PP_FRAME_NATIVE);
	CHECK_EQ_U64(k0->address, kf[0]);
	/* the user frame under a kernel stack is where user code stopped: not adjusted */
	CHECK_EQ_U64(u0->address, uf[0] - load_bias());
	REQUIRE(k0->mapping_id && k0->mapping_id == k1->mapping_id);
	CHECK(u0->mapping_id != k0->mapping_id);
	const struct pp_mapping_info *km = pp_profile_get_mapping(f.prof, k0->mapping_id);
	REQUIRE(km);
	CHECK_STR(km->filename, "[kernel.kallsyms]");
	CHECK_STR(km->build_id, "0123456789abcdef");

	/* The same stack again: kernel and user frames alike come from the frame cache. */
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_cached, 3);
	CHECK_EQ_U64(sample_of_tid(f.prof, 10)->count, 2);
	CHECK_EQ_U64(pp_profile_location_count(f.prof), 3);

	/* A fault at a function's first instruction (a process's first touch of _start's page) */
	uint64_t uf_fault[1] = {FN_ADDR(sess_leaf_beta)};
	make_sample(&r, own_pid(), 12, 1, kf, 2, uf_fault, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, 12);
	REQUIRE(si && si->nlocations == 3);
	CHECK_STR(loc_name(f.prof, si->locations[2]), "sess_leaf_beta");

	/* Below the first symbol: no name, a placeholder and a count. */
	uint64_t kf2[1] = {K_STEXT - 0x100000};
	make_sample(&r, own_pid(), 11, 1, kf2, 1, NULL, 0);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, 11);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "[kernel]");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_no_symbol, 1);

	/* In the kernel without a kernel stack: the ip is the one frame. */
	make_sample(&r, 0, 0, 1, NULL, 0, NULL, 0);
	r.d.sample.flags = PP_SF_KERNEL_IP;
	r.d.sample.ip = K_GAMMA + 0x40;
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, 0);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_kfunc_gamma");
	CHECK_STR(si->process_name, "[idle]");
	fixture_fini(&f);
}

/*
 * An off-CPU record's kernel stack starts where the thread waited: the shim's program, the
 * tracepoint's caller or a trampoline at its leaf are left out, and unnamed frames among them
 * (5.10 names no BPF program), but not an unnamed frame with no tracing frame behind it, nor
 * any frame of an on-CPU sample.
 */
TEST(off_cpu_stacks_leave_the_tracing_frames_out)
{
	static const struct {
		uint64_t kf[4];
		uint32_t nk, off_cpu;
		const char *want[4];
	} cases[] = {
	    {{K_STEXT - 0x100000, K_TRACE_RUN + 0x10, K_ALPHA + 0x10, K_BETA + 0x10},
	     4,
	     1,
	     {"sess_kfunc_alpha", "sess_kfunc_beta"}},
	    {{K_TRAMPOLINE + 0x10, K_ALPHA + 0x10, K_BETA + 0x10},
	     3,
	     1,
	     {"sess_kfunc_alpha", "sess_kfunc_beta"}},
	    {{K_STEXT - 0x100000, K_ALPHA + 0x10, K_BETA + 0x10},
	     3,
	     1,
	     {"[kernel]", "sess_kfunc_alpha", "sess_kfunc_beta"}},
	    {{K_TRACE_RUN + 0x10, K_ALPHA + 0x10}, 2, 0, {"bpf_trace_run3", "sess_kfunc_alpha"}},
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct pp_session_opts opts = {0};
		struct sess_fixture f;
		struct rec r;
		const struct pp_sample_info *si;
		uint32_t want = 0;

		REQUIRE(fixture_init(&f, &opts, 1) == 0);
		make_sample(&r, 0, 20, 2000000, cases[c].kf, cases[c].nk, NULL, 0);
		if (cases[c].off_cpu) {
			r.d.sample.flags |= PP_SF_OFF_CPU;
			r.d.sample.weight = PP_OFF_CPU_SLEEPING;
		}
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		CHECK(pp_session_flush(f.s) == 0);
		si = sample_of_tid(f.prof, 20);
		REQUIRE(si);
		while (want < 4 && cases[c].want[want])
			want++;
		CHECK_EQ_U64(si->nlocations, want);
		for (uint32_t i = 0; i < want && i < si->nlocations; i++)
			CHECK_STR(loc_name(f.prof, si->locations[i]), cases[c].want[i]);
		fixture_fini(&f);
	}
}

TEST(kernel_frames_without_kallsyms_are_placeholders)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct rec r;
	uint64_t kf[1] = {K_ALPHA + 0x10};

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), 12, 1, kf, 1, NULL, 0);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	const struct pp_sample_info *si = sample_of_tid(f.prof, 12);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "[kernel]");
	CHECK(pp_profile_get_location(f.prof, si->locations[0])->kind == PP_FRAME_KERNEL);
	const struct pp_mapping_info *km = pp_profile_get_mapping(
	    f.prof, pp_profile_get_location(f.prof, si->locations[0])->mapping_id);
	REQUIRE(km);
	CHECK_STR(km->build_id, "");
	fixture_fini(&f);
}

TEST(sample_of_vanished_process_is_kept)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	uint64_t uf[2] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_mid_gamma) + 8};

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, NO_SUCH_PID, NO_SUCH_PID, 300, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 2);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "[unknown]");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "[unknown]");
	CHECK_EQ_U64(si->pid, NO_SUCH_PID);
	CHECK_EQ_U64(si->value, 300);
	/* With no process to read, the thread's comm names it. */
	CHECK_STR(si->process_name, "sess-worker");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_no_process, 1);
	CHECK_EQ_U64(st.samples, 1);
	fixture_fini(&f);
}

/*
 * This test's executable: its path, stat and the mapping of /proc/self/maps holding addr (in
 * maps, which the caller finishes): 0, or -1 where they cannot be read.
 */
static int own_code(uint64_t addr, char exe[PATH_MAX], struct stat *sb, struct pp_maps *maps,
		    const struct pp_map_entry **code)
{
	char *text = NULL;
	size_t len;
	int ret;

	if (exe_path(exe, PATH_MAX) || stat(exe, sb) ||
	    pp_read_text_whole("/proc/self/maps", 1 << 24, &text, &len))
		return -1;
	ret = pp_maps_parse(text, len, maps);
	free(text);
	if (ret)
		return -1;
	*code = pp_maps_find(maps, addr);
	return *code && (*code)->inode == sb->st_ino ? 0 : -1;
}

/* The kernel's report of an exec of pid (comm) and of its mapping of this test's code at addr. */
/* The kernel's report of pid's exec at time_ns. */
static void sideband_exec(struct pp_session *s, uint32_t pid, uint64_t time_ns, const char *comm)
{
	struct pp_sb_event ev = {
	    .kind = PP_SB_COMM, .pid = pid, .tid = pid, .exec = true, .time_ns = time_ns};

	snprintf(ev.comm, sizeof(ev.comm), "%s", comm);
	pp_session_handle_sideband(s, &ev);
}

/* ... of pid's mapping of code (from path) at time_ns. */
static void sideband_map(struct pp_session *s, uint32_t pid, uint64_t time_ns,
			 const struct pp_map_entry *code, const char *path, const struct stat *st)
{
	struct pp_sb_event ev;
	char name[PATH_MAX];

	snprintf(name, sizeof(name), "%s", path);
	ev = (struct pp_sb_event){
	    .kind = PP_SB_MMAP,
	    .pid = pid,
	    .tid = pid,
	    .time_ns = time_ns,
	    .start = code->start,
	    .len = code->end - code->start,
	    .pgoff = code->offset,
	    .dev_major = major(st->st_dev),
	    .dev_minor = minor(st->st_dev),
	    .inode = st->st_ino,
	    .prot = PROT_READ | PROT_EXEC,
	    .flags = MAP_PRIVATE,
	    .path = name,
	};
	pp_session_handle_sideband(s, &ev);
}

/* A sample of tid in process NO_SUCH_PID taken at time_ns, handled: its aggregate, or NULL. */
static const struct pp_sample_info *gone_sample_at(struct sess_fixture *f, uint32_t tid,
						   uint64_t time_ns, const uint64_t *kf,
						   uint16_t nk, const uint64_t *uf, uint16_t nu)
{
	struct rec r;

	make_sample(&r, NO_SUCH_PID, tid, 1, kf, nk, uf, nu);
	r.d.sample.time_ns = time_ns;
	if (pp_session_handle_decoded(f->s, &r.d))
		return NULL;
	return sample_of_tid(f->prof, tid);
}

static void sideband_exec_and_map(struct pp_session *s, uint32_t pid, const char *comm,
				  const struct pp_map_entry *code, const char *path,
				  const struct stat *st)
{
	sideband_exec(s, pid, TIME_NS - 1000, comm);
	sideband_map(s, pid, TIME_NS - 500, code, path, st);
}

/*
 * A frame in a file the kernel reported is the same in every process that maps the file, and
 * is kept once for all of them; but not when the process it was first seen in had exited and
 * its file could not be opened for it: the next process mapping the file, alive, has its
 * frame named (a CI run's stripped program lost every stack's libc names so).
 */
TEST(a_file_unopened_for_a_gone_process_is_named_for_the_next)
{
	struct pp_session_opts opts = {0};
	const struct pp_map_entry *code;
	const struct pp_sample_info *si;
	struct pp_session_stats st;
	struct sess_fixture f;
	struct pp_maps maps = {0};
	char exe[PATH_MAX];
	uint64_t uf[1] = {FN_ADDR(sess_leaf_alpha) + 4};
	struct stat sb;
	struct rec r;

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(own_code(uf[0], exe, &sb, &maps, &code) == 0);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);

	/* gone before its file was opened: no map_files, no root to open it through */
	sideband_exec_and_map(f.s, NO_SUCH_PID, "sess-gone", code, exe, &sb);
	make_sample(&r, NO_SUCH_PID, NO_SUCH_PID, 1, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, NO_SUCH_PID);
	REQUIRE(si && si->nlocations == 1);
	CHECK(strstr(loc_name(f.prof, si->locations[0]), "+0x") != NULL);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_no_file, 1);

	/* this process, the same file at the same place: named */
	sideband_exec_and_map(f.s, own_pid(), "sess-alive", code, exe, &sb);
	make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, own_tid());
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_no_file, 1);

	/* and a third process's frame there is the named one, from the files' frames */
	sideband_exec_and_map(f.s, NO_SUCH_PID - 1, "sess-third", code, exe, &sb);
	make_sample(&r, NO_SUCH_PID - 1, NO_SUCH_PID - 1, 1, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, NO_SUCH_PID - 1);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");
	pp_maps_fini(&maps);
	fixture_fini(&f);
}

/*
 * A frame made while its file was read is, once named, the frame of every process that maps
 * the file there: the next process's sample finds it named at once, with no request of its
 * own (under churn most frames were made so, and each process asked for its files again).
 */
TEST(frames_finished_from_a_file_serve_the_next_process)
{
	struct pp_session_opts opts = {.symbols_kicked_per_turn = true};
	const struct pp_map_entry *code;
	const struct pp_sample_info *si;
	struct pp_session_stats st;
	struct sess_fixture f;
	struct pp_maps maps = {0};
	char exe[PATH_MAX];
	uint64_t uf[2] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_mid_gamma) + 8};
	struct stat sb;
	struct rec r;

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(own_code(uf[0], exe, &sb, &maps, &code) == 0);
	REQUIRE(pp_maps_find(&maps, uf[1]) == code);
	REQUIRE(async_fixture_init(&f, &opts) == 0);

	sideband_exec_and_map(f.s, own_pid(), "sess-first", code, exe, &sb);
	make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_pending, 2);
	CHECK(pp_session_wait_symbols(f.s, 10000) == 0);
	si = sample_of_tid(f.prof, own_tid());
	REQUIRE(si && si->nlocations == 2);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");

	/* another process, gone already: its frames named at once, nothing asked or waited for */
	sideband_exec_and_map(f.s, NO_SUCH_PID, "sess-next", code, exe, &sb);
	make_sample(&r, NO_SUCH_PID, NO_SUCH_PID, 1, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, NO_SUCH_PID);
	REQUIRE(si && si->nlocations == 2);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_mid_gamma");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_pending, 2);
	CHECK_EQ_U64(st.frames_no_file, 0);
	pp_maps_fini(&maps);
	fixture_fini(&f);
}

/*
 * A file whose table the loader brought lately, by the identity its mapping names (device,
 * inode, generation): the next process mapping it has a frame there that no process had
 * before named at once, with no request and no placeholder; a mapping naming another
 * identity at the same path is asked for as ever.
 */
TEST(a_file_known_by_its_identity_names_a_new_processs_frames_at_once)
{
	struct pp_session_opts opts = {.symbols_kicked_per_turn = true};
	const struct pp_map_entry *code;
	const struct pp_sample_info *si;
	struct pp_session_stats st;
	struct sess_fixture f;
	struct pp_maps maps = {0};
	char exe[PATH_MAX];
	uint64_t first[1] = {FN_ADDR(sess_leaf_alpha) + 4}, next[1] = {FN_ADDR(sess_mid_gamma) + 8};
	struct stat sb, other;
	struct rec r;

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(own_code(first[0], exe, &sb, &maps, &code) == 0);
	REQUIRE(pp_maps_find(&maps, next[0]) == code);
	REQUIRE(async_fixture_init(&f, &opts) == 0);

	sideband_exec_and_map(f.s, own_pid(), "sess-first", code, exe, &sb);
	make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, first, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	CHECK(pp_session_wait_symbols(f.s, 10000) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_pending, 1);
	CHECK_EQ_U64(st.symbol_tables_at_once, 0);

	/* gone already, a function the first never ran: named at once, nothing waited for */
	sideband_exec_and_map(f.s, NO_SUCH_PID, "sess-next", code, exe, &sb);
	make_sample(&r, NO_SUCH_PID, NO_SUCH_PID, 1, NULL, 0, next, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = sample_of_tid(f.prof, NO_SUCH_PID);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_mid_gamma");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.symbol_tables_at_once, 1);
	CHECK_EQ_U64(st.frames_pending, 1);

	/* the same path as another file (another inode): not that table; asked, and not found */
	other = sb;
	other.st_ino ^= 0x5a5a5a;
	sideband_exec_and_map(f.s, NO_SUCH_PID - 1, "sess-other", code, exe, &other);
	make_sample(&r, NO_SUCH_PID - 1, NO_SUCH_PID - 1, 1, NULL, 0, next, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	CHECK(pp_session_wait_symbols(f.s, 10000) == 0);
	si = sample_of_tid(f.prof, NO_SUCH_PID - 1);
	REQUIRE(si && si->nlocations == 1);
	CHECK(strcmp(loc_name(f.prof, si->locations[0]), "sess_mid_gamma") != 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.symbol_tables_at_once, 1);
	CHECK_EQ_U64(st.frames_pending, 2);
	pp_maps_fini(&maps);
	fixture_fini(&f);
}

TEST(unmapped_address_is_unknown)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	/* Page zero is never mapped (vm.mmap_min_addr). */
	uint64_t uf[2] = {0x10, FN_ADDR(sess_root_delta) + 8};

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 2);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "[unknown]");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_root_delta");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.frames_unmapped, 1);
	CHECK_EQ_U64(st.samples_no_process, 0);
	fixture_fini(&f);
}

/* Feeds one sample to a fresh session and returns the leaf's name in buf. */
static int leaf_name(int precise, struct rec *r, char *buf, size_t len)
{
	struct pp_session_opts opts = {.precise_ip = precise};
	struct sess_fixture f;
	int ret = -1;

	if (fixture_init(&f, &opts, 1) == 0 && pp_session_handle_decoded(f.s, &r->d) == 0 &&
	    pp_profile_sample_count(f.prof) == 1) {
		const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);

		if (si->nlocations >= 2) {
			snprintf(buf, len, "%s", loc_name(f.prof, si->locations[0]));
			ret = (int)si->nlocations;
		}
	}
	fixture_fini(&f);
	return ret;
}

TEST(precise_ip_replaces_the_leaf)
{
	struct rec r;
	char name[128];
	uint64_t uf[2] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_mid_gamma) + 8};
	uint64_t kf[2] = {K_ALPHA + 8, K_BETA + 8};

	/* User leaf: the PMI ip says alpha, the precise ip says beta. */
	make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, uf, 2);
	r.d.sample.ip = FN_ADDR(sess_leaf_beta) + 4;
	CHECK(leaf_name(0, &r, name, sizeof(name)) == 2);
	CHECK_STR(name, "sess_leaf_alpha");
	CHECK(leaf_name(1, &r, name, sizeof(name)) == 2);
	CHECK_STR(name, "sess_leaf_beta");

	/* Kernel leaf likewise; the user frames after it are callers, not replaced. */
	make_sample(&r, own_pid(), own_tid(), 1, kf, 2, uf, 2);
	r.d.sample.ip = K_GAMMA + 8;
	CHECK(leaf_name(0, &r, name, sizeof(name)) == 4);
	CHECK_STR(name, "sess_kfunc_alpha");
	CHECK(leaf_name(1, &r, name, sizeof(name)) == 4);
	CHECK_STR(name, "sess_kfunc_gamma");
}

/* A decoded task record: tgid exec'ed (PP_TASK_EXEC) or exited at time_ns. */
static void make_task(struct pp_decoded *d, uint32_t tgid, uint32_t kind, uint64_t time_ns)
{
	memset(d, 0, sizeof(*d));
	d->kind = PP_DECODED_TASK;
	d->task.hdr.type = PP_REC_TASK;
	d->task.hdr.version = PP_RECORD_ABI_VERSION;
	d->task.hdr.size = sizeof(d->task);
	d->task.tgid = tgid;
	d->task.kind = kind;
	d->task.time_ns = time_ns;
}

static void encode_task(unsigned char *buf, uint32_t tgid, uint32_t kind)
{
	struct pp_task_event t;

	memset(&t, 0, sizeof(t));
	t.hdr.type = PP_REC_TASK;
	t.hdr.version = PP_RECORD_ABI_VERSION;
	t.hdr.size = sizeof(t);
	t.tgid = tgid;
	t.kind = kind;
	t.time_ns = TIME_NS;
	memcpy(buf, &t, sizeof(t));
}

TEST(task_records_are_counted)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct pp_decoded d;
	struct rec r;
	unsigned char raw[sizeof(struct pp_task_event)];
	uint64_t uf[1] = {FN_ADDR(sess_leaf_beta) + 4};

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	/* Cache the process, then say it exec'ed: the reload must still resolve our frames. */
	make_sample(&r, own_pid(), 20, 1, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);

	make_task(&d, own_pid(), PP_TASK_EXEC, 0);
	CHECK(pp_session_handle_decoded(f.s, &d) == 0);
	make_task(&d, NO_SUCH_PID, PP_TASK_EXIT, 0);
	CHECK(pp_session_handle_decoded(f.s, &d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.task_events, 2);

	encode_task(raw, NO_SUCH_PID, PP_TASK_EXIT);
	CHECK(pp_session_handle_record(f.s, raw, sizeof(raw)) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.task_events, 3);
	CHECK_EQ_U64(st.decode.tasks, 1);

	make_sample(&r, own_pid(), 21, 1, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	const struct pp_sample_info *si = sample_of_tid(f.prof, 21);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_beta");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples, 2);
	fixture_fini(&f);
}

/* A raw sample record as the shim writes it; returns its size. */
static size_t encode_sample(unsigned char *buf, uint32_t tgid, uint32_t tid, const uint64_t *uf,
			    uint16_t nu)
{
	struct pp_sample s;

	memset(&s, 0, sizeof(s));
	s.hdr.type = PP_REC_SAMPLE;
	s.hdr.version = PP_RECORD_ABI_VERSION;
	s.hdr.size = (uint32_t)(sizeof(s) + nu * sizeof(uint64_t));
	s.tgid = tgid;
	s.tid = tid;
	s.ip = uf[0];
	s.period = 42;
	s.nr_ustack = nu;
	memcpy(s.comm, "raw-record-comm!", 16); /* not terminated: the decoder must end it */
	memcpy(buf, &s, sizeof(s));
	for (uint16_t i = 0; i < nu; i++)
		put_le64(buf + sizeof(s) + (size_t)i * 8, uf[i]);
	return s.hdr.size;
}

TEST(garbage_records_are_rejected_and_counted)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	unsigned char buf[PP_SAMPLE_MAX_SIZE];
	struct pp_rec_hdr h;
	uint64_t uf[2] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_root_delta) + 8};
	size_t len;

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	CHECK(pp_session_handle_record(f.s, "abc", 3) < 0);
	memset(buf, 0xa5, 64);
	CHECK(pp_session_handle_record(f.s, buf, 64) < 0);
	h = (struct pp_rec_hdr){.type = 99, .version = PP_RECORD_ABI_VERSION, .size = 16};
	memcpy(buf, &h, sizeof(h));
	CHECK(pp_session_handle_record(f.s, buf, 16) == -EOPNOTSUPP);
	len = encode_sample(buf, own_pid(), own_tid(), uf, 2);
	buf[2] = PP_RECORD_ABI_VERSION + 1; /* hdr.version, low byte */
	CHECK(pp_session_handle_record(f.s, buf, len) < 0);
	len = encode_sample(buf, own_pid(), own_tid(), uf, 2);
	CHECK(pp_session_handle_record(f.s, buf, len - 8) < 0); /* cut short of its size */
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.decode.too_short, 1);
	CHECK_EQ_U64(st.decode.bad_size, 2);
	CHECK_EQ_U64(st.decode.bad_type, 1);
	CHECK_EQ_U64(st.decode.bad_version, 1);
	CHECK_EQ_U64(st.samples, 0);
	CHECK_EQ_U64(pp_profile_sample_count(f.prof), 0);

	/* The raw path end to end. */
	CHECK(pp_session_handle_record(f.s, buf, len) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 2);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_root_delta");
	CHECK_STR(si->thread_name, "raw-record-comm");
	CHECK_EQ_U64(si->value, 42);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.decode.samples, 1);
	CHECK_EQ_U64(st.samples, 1);
	fixture_fini(&f);
}

#define CACHE_SAMPLES 64

TEST(small_frame_cache_resets_and_names_stay_right)
{
	struct pp_session_opts opts = {.max_cached_frames = 16};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	static const char *const names[4] = {"sess_leaf_alpha", "sess_leaf_beta", "sess_mid_gamma",
					     "sess_root_delta"};
	const uint64_t fns[4] = {FN_ADDR(sess_leaf_alpha), FN_ADDR(sess_leaf_beta),
				 FN_ADDR(sess_mid_gamma), FN_ADDR(sess_root_delta)};

	REQUIRE(fixture_init(&f, &opts, 1) == 0);
	/* 64 distinct kernel addresses, all in sess_kfunc_alpha, over 4 user callers. */
	for (uint32_t i = 0; i < CACHE_SAMPLES; i++) {
		uint64_t kf[1] = {K_ALPHA + i};
		uint64_t uf[1] = {fns[i % 4] + 4};

		make_sample(&r, own_pid(), 1000 + i, 1, kf, 1, uf, 1);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	}
	pp_session_get_stats(f.s, &st);
	CHECK(st.frame_cache_resets > 0);
	CHECK_EQ_U64(st.frames, 2 * CACHE_SAMPLES);
	CHECK_EQ_U64(pp_profile_sample_count(f.prof), CACHE_SAMPLES);
	for (uint32_t i = 0; i < CACHE_SAMPLES; i++) {
		const struct pp_sample_info *si = sample_of_tid(f.prof, 1000 + i);

		REQUIRE(si && si->nlocations == 2);
		CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_kfunc_alpha");
		CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[0])->address,
			     K_ALPHA + i);
		CHECK_STR(loc_name(f.prof, si->locations[1]), names[i % 4]);
	}
	/* Evicted frames come back as the same interned locations, not duplicates. */
	CHECK_EQ_U64(pp_profile_location_count(f.prof), CACHE_SAMPLES + 4);
	{
		uint64_t kf[1] = {K_ALPHA};
		uint64_t uf[1] = {fns[0] + 4};

		make_sample(&r, own_pid(), 1000, 1, kf, 1, uf, 1);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	}
	CHECK_EQ_U64(pp_profile_location_count(f.prof), CACHE_SAMPLES + 4);
	CHECK_EQ_U64(pp_profile_sample_count(f.prof), CACHE_SAMPLES);
	CHECK_EQ_U64(sample_of_tid(f.prof, 1000)->count, 2);
	fixture_fini(&f);
}

TEST(new_profile_drops_cached_ids)
{
	struct pp_session_opts opts = {0};
	struct pp_session_stats st;
	struct sess_fixture f;
	struct pp_profile *p2;
	struct rec r;
	uint64_t kf[1] = {K_BETA + 4};
	uint64_t uf[2] = {FN_ADDR(sess_leaf_beta) + 4, FN_ADDR(sess_root_delta) + 8};

	REQUIRE(fixture_init(&f, &opts, 1) == 0);
	/* Fill the first profile with other locations so stale ids would point elsewhere. */
	for (uint32_t i = 0; i < 8; i++) {
		uint64_t other[1] = {K_GAMMA + i};

		make_sample(&r, own_pid(), 1, 1, other, 1, NULL, 0);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	}
	make_sample(&r, own_pid(), 2, 1, kf, 1, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.names_memoized, 0);

	p2 = new_profile();
	REQUIRE(p2);
	pp_session_set_profile(f.s, p2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	/* the user frames are named again from what the symbol table said the window before */
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.names_memoized, 2);
	REQUIRE(pp_profile_sample_count(p2) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(p2, 0);
	REQUIRE(si->nlocations == 3);
	CHECK_STR(loc_name(p2, si->locations[0]), "sess_kfunc_beta");
	CHECK_STR(loc_name(p2, si->locations[1]), "sess_leaf_beta");
	CHECK_STR(loc_name(p2, si->locations[2]), "sess_root_delta");
	CHECK_EQ_U64(pp_profile_location_count(p2), 3);
	/* The kernel mapping is interned again in the new profile. */
	const struct pp_location_info *k = pp_profile_get_location(p2, si->locations[0]);
	REQUIRE(k && pp_profile_get_mapping(p2, k->mapping_id));
	CHECK_STR(pp_profile_get_mapping(p2, k->mapping_id)->filename, "[kernel.kallsyms]");
	pp_session_free(f.s);
	f.s = NULL; /* fixture_fini frees NULL: a no-op */
	pp_profile_free(p2);
	fixture_fini(&f);
}

/*
 * Raw-stack aggregation: repeats of a raw stack are counted without symbolizing again, a
 * full table flushes, and after pp_session_flush the profile holds exactly what direct mode
 * gives for the same samples.
 */
static void feed_mixed(struct pp_session *s)
{
	uint64_t a[3] = {FN_ADDR(sess_leaf_alpha) + 2, FN_ADDR(sess_mid_gamma) + 5,
			 FN_ADDR(sess_root_delta) + 5};
	uint64_t b[3] = {FN_ADDR(sess_leaf_beta) + 2, FN_ADDR(sess_mid_gamma) + 5,
			 FN_ADDR(sess_root_delta) + 5};
	struct rec r;

	for (int i = 0; i < 5; i++) {
		make_sample(&r, own_pid(), own_tid(), 100, NULL, 0, a, 3);
		pp_session_handle_decoded(s, &r.d);
	}
	for (int i = 0; i < 3; i++) {
		make_sample(&r, own_pid(), own_tid() + 1, 10, NULL, 0, b, 3);
		pp_session_handle_decoded(s, &r.d);
	}
	/* Distinct leaf addresses inside one function: raw stacks differ, names do not. */
	for (uint64_t off = 0; off < 12; off++) {
		a[0] = FN_ADDR(sess_leaf_alpha) + off;
		make_sample(&r, own_pid(), own_tid(), 1, NULL, 0, a, 3);
		pp_session_handle_decoded(s, &r.d);
	}
}

static uint64_t value_of_leaf(const struct pp_profile *p, const char *leaf, uint64_t *count)
{
	uint64_t v = 0;

	*count = 0;
	for (size_t i = 0; i < pp_profile_sample_count(p); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(p, i);

		if (si->nlocations && !strcmp(loc_name(p, si->locations[0]), leaf)) {
			v += si->value;
			*count += si->count;
		}
	}
	return v;
}

TEST(raw_stack_aggregation_matches_direct_mode)
{
	struct pp_session_opts direct_opts = {0}, raw_opts = {.raw_stack_entries = 4};
	struct sess_fixture direct, raw;
	struct pp_session_stats st;
	uint64_t dc, rc;

	REQUIRE(fixture_init(&direct, &direct_opts, 0) == 0);
	REQUIRE(fixture_init(&raw, &raw_opts, 0) == 0);
	feed_mixed(direct.s);
	feed_mixed(raw.s);
	pp_session_get_stats(raw.s, &st);
	/* 4 repeats of stack a and 2 of stack b were counted without symbolizing. */
	CHECK(st.raw_stack_hits >= 6);
	/* 14 distinct raw stacks through a 4-stack table: it had to flush on its own. */
	CHECK(st.raw_stack_flushes >= 1);
	CHECK_EQ_U64(st.samples, 20);
	CHECK(pp_session_flush(raw.s) == 0);
	CHECK_EQ_U64(pp_profile_total_count(raw.prof), 20);
	CHECK_EQ_U64(pp_profile_total_count(raw.prof), pp_profile_total_count(direct.prof));
	CHECK_EQ_U64(pp_profile_total_value(raw.prof), pp_profile_total_value(direct.prof));
	CHECK_EQ_U64(value_of_leaf(raw.prof, "sess_leaf_alpha", &rc),
		     value_of_leaf(direct.prof, "sess_leaf_alpha", &dc));
	CHECK_EQ_U64(rc, dc);
	CHECK_EQ_U64(rc, 17);
	CHECK_EQ_U64(value_of_leaf(raw.prof, "sess_leaf_beta", &rc), 30);
	CHECK_EQ_U64(rc, 3);
	CHECK_EQ_U64(pp_profile_sample_count(raw.prof), pp_profile_sample_count(direct.prof));
	fixture_fini(&direct);
	fixture_fini(&raw);
}

/* The sample of a wait state, or NULL. */
static const struct pp_sample_info *sample_of_wait(const struct pp_profile *p, uint32_t wait)
{
	for (size_t i = 0; i < pp_profile_sample_count(p); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(p, i);

		if (si->wait == wait)
			return si;
	}
	return NULL;
}

/*
 * An off-CPU record whose thread waited for a CPU once woken (addr: that delay, data_src: its
 * state) is two samples on the same stack, the sleep and the delay; one record in the counts.
 * Without a delay it is one sample; a state the shim never writes reads as runnable.
 */
static void woken_wait_split(size_t raw_entries)
{
	struct pp_session_opts opts = {.raw_stack_entries = raw_entries};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	const struct pp_sample_info *sleep, *delay;
	uint64_t uf[2] = {FN_ADDR(sess_leaf_beta) + 4, FN_ADDR(sess_root_delta) + 8};
	static const struct {
		uint64_t data_src;
		uint32_t wait;
	} delays[] = {{PP_OFF_CPU_RUNNABLE, PP_WAIT_RUNNABLE},
		      {PP_OFF_CPU_THROTTLED, PP_WAIT_THROTTLED},
		      {77, PP_WAIT_RUNNABLE}};

	for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
		REQUIRE(fixture_init(&f, &opts, 0) == 0);
		make_sample(&r, own_pid(), 300, 5000000, NULL, 0, uf, 2);
		r.d.sample.flags |= PP_SF_OFF_CPU;
		r.d.sample.weight = PP_OFF_CPU_SLEEPING;
		r.d.sample.addr = 20000000;
		r.d.sample.data_src = delays[i].data_src;
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		CHECK(pp_session_flush(f.s) == 0);
		REQUIRE(pp_profile_sample_count(f.prof) == 2);
		sleep = sample_of_wait(f.prof, PP_WAIT_SLEEPING);
		delay = sample_of_wait(f.prof, delays[i].wait);
		REQUIRE(sleep && delay);
		CHECK_EQ_U64(sleep->value, 5000000);
		CHECK_EQ_U64(delay->value, 20000000);
		CHECK_EQ_U64(sleep->count, 1);
		CHECK_EQ_U64(delay->count, 1);
		REQUIRE(sleep->nlocations == 2 && delay->nlocations == 2);
		CHECK_EQ_U64(sleep->locations[0], delay->locations[0]);
		CHECK_EQ_U64(sleep->locations[1], delay->locations[1]);
		CHECK_STR(loc_name(f.prof, delay->locations[0]), "sess_leaf_beta");
		pp_session_get_stats(f.s, &st);
		CHECK_EQ_U64(st.samples, 1);
		CHECK_EQ_U64(st.off_cpu_samples, 1);
		CHECK_EQ_U64(st.off_cpu_woken_late, 1);
		fixture_fini(&f);
	}

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), 300, 5000000, NULL, 0, uf, 2);
	r.d.sample.flags |= PP_SF_OFF_CPU;
	r.d.sample.weight = PP_OFF_CPU_SLEEPING;
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	CHECK(pp_session_flush(f.s) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	CHECK_EQ_U64(pp_profile_get_sample(f.prof, 0)->wait, PP_WAIT_SLEEPING);
	CHECK_EQ_U64(pp_profile_get_sample(f.prof, 0)->value, 5000000);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.off_cpu_woken_late, 0);
	fixture_fini(&f);
}

/*
 * record's command before its exec is the launcher, this process's fork: its wait on the pipe
 * (begun before it was let go), and its records on the way to the exec, which still carry
 * this process's name, are left out and counted; after the exec's record, a record of that
 * name newer than the exec is the command's (one of the same name), and other processes of
 * that name are never left out.
 */
TEST(the_launchers_records_before_the_exec_are_left_out)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct pp_decoded task;
	struct rec r;
	char ours[16] = "";
	uint64_t uf[1] = {FN_ADDR(sess_leaf_beta) + 4};
	const uint64_t ms = 1000000;
	static const struct {
		int off_cpu, our_name, other_pid;
		uint64_t time, period; /* an off-CPU record's period is the wait: it began before */
		int kept;
	} recs[] = {
	    {1, 0, 0, TIME_NS + 2 * ms, 5 * ms, 0}, /* held on the pipe: began before go */
	    {1, 1, 0, TIME_NS + 5 * ms, 1 * ms, 0}, /* preempted on the way to the exec */
	    {0, 1, 0, TIME_NS + 6 * ms, 1, 0},	    /* sampled on the way */
	    {0, 1, 1, TIME_NS + 6 * ms, 1, 1},	    /* another process of our name */
	};
	static const struct {
		int our_name;
		uint64_t time;
		int kept;
	} after[] = {
	    {1, TIME_NS + 8 * ms, 0},  /* read after the exec's record, but older than the exec */
	    {1, TIME_NS + 20 * ms, 1}, /* a command of our name */
	    {0, TIME_NS + 20 * ms, 1},
	};
	uint64_t kept = 0, left = 0;

	REQUIRE(prctl(PR_GET_NAME, ours) == 0 && ours[0]);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	pp_session_skip_launcher(f.s, own_pid(), TIME_NS);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		make_sample(&r, recs[i].other_pid ? NO_SUCH_PID : own_pid(), 40, recs[i].period,
			    NULL, 0, uf, 1);
		r.d.sample.time_ns = recs[i].time;
		if (recs[i].off_cpu) {
			r.d.sample.flags |= PP_SF_OFF_CPU;
			r.d.sample.weight = PP_OFF_CPU_SLEEPING;
		}
		if (recs[i].our_name)
			memcpy(r.d.sample.comm, ours, sizeof(ours));
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		kept += recs[i].kept;
		left += !recs[i].kept;
	}
	make_task(&task, own_pid(), PP_TASK_EXEC, TIME_NS + 10 * ms);
	CHECK(pp_session_handle_decoded(f.s, &task) == 0);
	for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
		make_sample(&r, own_pid(), 41, 1, NULL, 0, uf, 1);
		r.d.sample.time_ns = after[i].time;
		if (after[i].our_name)
			memcpy(r.d.sample.comm, ours, sizeof(ours));
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		kept += after[i].kept;
		left += !after[i].kept;
	}
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.launcher_records, left);
	CHECK_EQ_U64(st.samples, kept);
	fixture_fini(&f);
}

TEST(woken_wait_is_the_sleep_and_the_delay)
{
	woken_wait_split(0);
}

TEST(woken_wait_is_the_sleep_and_the_delay_raw_table)
{
	woken_wait_split(16);
}

/* With per_cpu the CPU is part of the sample, in direct and raw-stack mode alike. */
TEST(per_cpu_samples_keep_their_cpu)
{
	for (int rawmode = 0; rawmode < 2; rawmode++) {
		struct pp_session_opts opts = {.per_cpu = 1, .raw_stack_entries = rawmode ? 64 : 0};
		uint64_t u[2] = {FN_ADDR(sess_leaf_alpha) + 2, FN_ADDR(sess_root_delta) + 5};
		struct sess_fixture f;
		struct rec r;
		int seen[2] = {0, 0};

		REQUIRE(fixture_init(&f, &opts, 0) == 0);
		for (uint32_t i = 0; i < 5; i++) {
			make_sample(&r, own_pid(), own_tid(), 10, NULL, 0, u, 2);
			r.d.sample.cpu = i % 2;
			CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		}
		CHECK(pp_session_flush(f.s) == 0);
		REQUIRE(pp_profile_sample_count(f.prof) == 2);
		for (size_t i = 0; i < 2; i++) {
			const struct pp_sample_info *si = pp_profile_get_sample(f.prof, i);

			CHECK(si->has_cpu);
			if (si->cpu < 2) {
				seen[si->cpu] = 1;
				CHECK_EQ_U64(si->count, si->cpu == 0 ? 3 : 2);
			}
		}
		CHECK(seen[0] && seen[1]);
		fixture_fini(&f);
	}
}

/*
 * Container attribution, direct and through the raw-stack table: samples of one stack in two
 * container cgroups (a directory tree laid out as a kubelet lays them out stands in for the
 * cgroup2 mount: ids are inode numbers) and on the host become three samples, the first two
 * with resources naming their container, runtime and pod.
 */
static void container_attribution(size_t raw_entries)
{
	static const char cid_a[] =
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	static const char cid_b[] =
	    "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
	char root[128], a[512], b[512];
	struct pp_session_opts opts = {.raw_stack_entries = raw_entries};
	struct pp_container_meta_opts co = {.max_entries = 64};
	struct pp_session_stats st;
	struct sess_fixture f;
	uint64_t id_a, id_b;
	struct rec r;
	uint64_t uf[2] = {FN_ADDR(sess_leaf_beta) + 4, FN_ADDR(sess_root_delta) + 8};

	snprintf(root, sizeof(root), "/tmp/pp_test_sess_cg_%d", (int)getpid());
	snprintf(a, sizeof(a),
		 "kubepods.slice/kubepods-besteffort.slice/"
		 "kubepods-besteffort-pod11111111_2222_4333_8444_555555555555.slice/"
		 "cri-containerd-%s.scope",
		 cid_a);
	snprintf(b, sizeof(b), "system.slice/docker-%s.scope", cid_b);
	id_a = pp_test_mkdirs(root, a);
	id_b = pp_test_mkdirs(root, b);
	REQUIRE(id_a && id_b);
	co.cgroup2_root = root;
	opts.containers = pp_container_meta_new(&co);
	REQUIRE(opts.containers);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);

	for (int i = 0; i < 3; i++) {
		make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 2);
		r.d.sample.cgroup_id = id_a;
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	}
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 2);
	r.d.sample.cgroup_id = id_b;
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 2);
	r.d.sample.cgroup_id = 1; /* the root cgroup: no container */
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	CHECK(pp_session_flush(f.s) == 0);

	REQUIRE(pp_profile_sample_count(f.prof) == 3);
	CHECK_EQ_U64(pp_profile_resource_count(f.prof), 2);
	for (size_t i = 0; i < 3; i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(f.prof, i);
		uint32_t n = 0;
		const struct pp_label *l = pp_profile_get_resource(f.prof, si->resource_id, &n);

		if (!si->resource_id) {
			CHECK_EQ_U64(si->count, 1);
			continue;
		}
		REQUIRE(l && n >= 2);
		CHECK_STR(l[0].key, "container.id");
		if (!strcmp(l[0].value, cid_a)) {
			CHECK_EQ_U64(si->count, 3);
			REQUIRE(n == 3);
			CHECK_STR(l[1].value, "containerd");
			CHECK_STR(l[2].key, "k8s.pod.uid");
			CHECK_STR(l[2].value, "11111111-2222-4333-8444-555555555555");
		} else {
			CHECK_STR(l[0].value, cid_b);
			CHECK_STR(l[1].value, "docker");
			CHECK_EQ_U64(si->count, 1);
		}
	}
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.container_samples, 4);
	fixture_fini(&f);
	pp_container_meta_free(opts.containers);
	CHECK(pp_test_rm_tree(root) == 0);
}

TEST(containers_become_resources)
{
	container_attribution(0);
}

TEST(containers_become_resources_raw_table)
{
	container_attribution(1024);
}

/*
 * A C++ symbol is named as perf and pprof name it, without its parameters; the mangled name
 * stays the location's system name, for pprof's and OTLP's Function.system_name.
 */
TEST(cxx_symbols_are_demangled)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct rec r;
	uint64_t uf[2] = {FN_ADDR(sess_mangled) + 4, FN_ADDR(sess_root_delta) + 8};

	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 2);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	const struct pp_sample_info *si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 2);
	CHECK_STR(loc_name(f.prof, si->locations[0]), "shop::Cart::total");
	CHECK_STR(pp_profile_get_location(f.prof, si->locations[0])->system_name,
		  "_ZN4shop4Cart5totalEi");
	CHECK_STR(loc_name(f.prof, si->locations[1]), "sess_root_delta");
	CHECK_STR(pp_profile_get_location(f.prof, si->locations[1])->system_name,
		  "sess_root_delta");
	fixture_fini(&f);
}

/*
 * Code runs only from executable mappings: a return address in the heap or a stack is an
 * unwinding error, which ends the walk with a marker frame (not "[anonymous code]"), and is
 * counted; an executable anonymous mapping is JIT code and stays "[anonymous code]+0xADDR".
 */
TEST(return_address_outside_code_ends_the_walk)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	long pg = sysconf(_SC_PAGESIZE);
	char *heap = malloc(4096), *jit;
	int on_stack = 0;

	REQUIRE(heap);
	jit = mmap(NULL, (size_t)pg, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(jit != MAP_FAILED);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	{
		/* leaf, a caller in JIT code, then a "caller" in the heap, then more */
		uint64_t uf[5] = {FN_ADDR(sess_leaf_alpha) + 4, (uint64_t)(uintptr_t)jit + 16,
				  (uint64_t)(uintptr_t)heap + 64, FN_ADDR(sess_mid_gamma) + 8,
				  FN_ADDR(sess_root_delta) + 8};
		const struct pp_sample_info *si;

		make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 5);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		REQUIRE(pp_profile_sample_count(f.prof) == 1);
		si = pp_profile_get_sample(f.prof, 0);
		REQUIRE(si->nlocations == 3);
		CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_leaf_alpha");
		{
			/* JIT code keeps its address: frames of different code never merge */
			char want[64];

			snprintf(want, sizeof(want), "[anonymous code]+0x%llx",
				 (unsigned long long)(uintptr_t)jit + 15);
			CHECK_STR(loc_name(f.prof, si->locations[1]), want);
		}
		CHECK_STR(loc_name(f.prof, si->locations[2]), PP_FRAME_NOT_CODE);
	}
	{
		/* a return address on the stack: the same */
		uint64_t uf[3] = {FN_ADDR(sess_leaf_alpha) + 4, (uint64_t)(uintptr_t)&on_stack,
				  FN_ADDR(sess_root_delta) + 8};
		const struct pp_sample_info *si;

		make_sample(&r, own_pid(), own_tid() + 1, 1000, NULL, 0, uf, 3);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
		REQUIRE(pp_profile_sample_count(f.prof) == 2);
		si = pp_profile_get_sample(f.prof, 1);
		REQUIRE(si->nlocations == 2);
		CHECK_STR(loc_name(f.prof, si->locations[1]), PP_FRAME_NOT_CODE);
	}
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_walk_ended, 2);
	fixture_fini(&f);
	munmap(jit, (size_t)pg);
	free(heap);
}

/*
 * A process that is there but whose maps cannot be read (another user's, without
 * CAP_SYS_PTRACE; an LSM): counted apart from processes that are gone, since its frames are
 * bare for a reason the operator can fix.
 */
TEST(unreadable_maps_are_counted)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	char root[64], cmd[512];
	const uint64_t uf[1] = {0x401000};

	snprintf(root, sizeof(root), "/tmp/pp-sess-maps-XXXXXX");
	REQUIRE(mkdtemp(root));
	/* pid 777 of the fixture, with its maps a directory: reading it fails (EISDIR) */
	snprintf(cmd, sizeof(cmd),
		 "cp -r '%s/proc/basic/777' '%s/777' && rm '%s/777/maps' && mkdir '%s/777/maps'",
		 PP_TEST_DATA_DIR, root, root, root);
	REQUIRE(system(cmd) == 0);
	opts.proc_root = root;
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	make_sample(&r, 777, 777, 1000, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	make_sample(&r, NO_SUCH_PID, 1, 1000, NULL, 0, uf, 1);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_unreadable, 1);
	CHECK_EQ_U64(st.samples_no_process, 1);
	CHECK_EQ_U64(st.samples, 2);
	fixture_fini(&f);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK(system(cmd) == 0);
}

/* The tids of p's samples, as a bit set (tids below 64). */
static uint64_t tids_of(const struct pp_profile *p)
{
	uint64_t set = 0;

	for (size_t i = 0; i < pp_profile_sample_count(p); i++)
		set |= 1ull << (pp_profile_get_sample(p, i)->tid & 63);
	return set;
}

/*
 * Windows of 1 s: records read in a window's grace go into the window they were taken in, a
 * record of the window after next (the loop stalled a whole window) is held again for it,
 * and one read after its window closed is counted late in the next.
 */
TEST(grace_puts_samples_in_the_window_they_were_taken_in)
{
	for (int raw = 0; raw < 2; raw++) {
		struct pp_session_opts opts = {.proc_root = "/nonexistent",
					       .raw_stack_entries = raw ? 1024 : 0};
		struct sess_fixture f;
		struct pp_profile *next, *after;
		struct pp_session_stats st;
		unsigned char buf[sizeof(struct pp_sample) + 16];
		const uint64_t uf[1] = {0x401000};
		const uint64_t s = 1000000000ull;
		struct {
			uint32_t tid;
			uint64_t t;
		} in_grace[] = {
		    {2, 10 * s + 900000000}, {3, 11 * s + 50000000}, {4, 11 * s}, {6, 12 * s + 1}};

		REQUIRE(fixture_init(&f, &opts, 0) == 0);
		pp_profile_set_window(f.prof, (uint64_t)MONO_TO_WALL + 10 * s, 0);
		encode_sample(buf, NO_SUCH_PID, 1, uf, 1);
		((struct pp_sample *)buf)->time_ns = 10 * s + 500000000;
		CHECK(pp_session_handle_record(f.s, buf, sizeof(struct pp_sample) + 8) == 0);
		/* the window ends at 11 s; its grace begins */
		pp_session_hold_from(f.s, 11 * s);
		for (size_t i = 0; i < sizeof(in_grace) / sizeof(in_grace[0]); i++) {
			encode_sample(buf, NO_SUCH_PID, in_grace[i].tid, uf, 1);
			((struct pp_sample *)buf)->time_ns = in_grace[i].t;
			CHECK(pp_session_handle_record(f.s, buf, sizeof(struct pp_sample) + 8) ==
			      0);
		}
		/* close: the next window (to 12 s) takes over, the held records go into it */
		next = new_profile();
		REQUIRE(next);
		pp_profile_set_window(next, (uint64_t)MONO_TO_WALL + 11 * s, 0);
		pp_session_set_profile(f.s, next);
		CHECK(pp_session_release_held(f.s, 12 * s) == 0);
		/* read after the close although taken before it: late */
		encode_sample(buf, NO_SUCH_PID, 5, uf, 1);
		((struct pp_sample *)buf)->time_ns = 10 * s + 990000000;
		CHECK(pp_session_handle_record(f.s, buf, sizeof(struct pp_sample) + 8) == 0);
		/* the window after: the record of 12 s held for it, nothing held any more */
		after = new_profile();
		REQUIRE(after);
		pp_profile_set_window(after, (uint64_t)MONO_TO_WALL + 12 * s, 0);
		pp_session_set_profile(f.s, after);
		CHECK(pp_session_release_held(f.s, 0) == 0);
		encode_sample(buf, NO_SUCH_PID, 7, uf, 1);
		((struct pp_sample *)buf)->time_ns = 14 * s;
		CHECK(pp_session_handle_record(f.s, buf, sizeof(struct pp_sample) + 8) == 0);
		pp_session_flush(f.s);
		CHECK_EQ_U64(tids_of(f.prof), (1u << 1) | (1u << 2));
		CHECK_EQ_U64(tids_of(next), (1u << 3) | (1u << 4) | (1u << 5));
		CHECK_EQ_U64(tids_of(after), (1u << 6) | (1u << 7));
		pp_session_get_stats(f.s, &st);
		CHECK_EQ_U64(st.samples_held, 3);
		CHECK_EQ_U64(st.samples_late, 1);
		CHECK_EQ_U64(st.samples, 7);
		fixture_fini(&f);
		pp_profile_free(next);
		pp_profile_free(after);
	}
}

/*
 * As the agent runs: the sample path never waits for a file. The first sample's frames are
 * placeholders while the loader reads the file; when its table comes they become the named
 * frames in place (ELF address, mapping with build id), and samples already holding them
 * follow.
 */
TEST(frames_made_while_the_file_is_read_are_finished_in_place)
{
	/* the loader woken by the session's wait, as the agent's poll loop wakes it: nothing is
	 * read before that, so the second sample below finds the placeholders still waiting */
	struct pp_session_opts opts = {.symbols_kicked_per_turn = true};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	uint64_t bias = load_bias();
	uint64_t uf[3] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_mid_gamma) + 8,
			  FN_ADDR(sess_root_delta) + 8};
	static const char *const names[3] = {"sess_leaf_alpha", "sess_mid_gamma",
					     "sess_root_delta"};
	const struct pp_sample_info *si;
	uint32_t ids[3];
	uint64_t waited;

	REQUIRE(async_fixture_init(&f, &opts) == 0);
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	si = pp_profile_get_sample(f.prof, 0);
	REQUIRE(si->nlocations == 3);
	for (int i = 0; i < 3; i++) {
		ids[i] = si->locations[i];
		CHECK(pp_profile_get_location(f.prof, ids[i])->unnamed == PP_UNNAMED_DRAWN);
		CHECK(strstr(loc_name(f.prof, ids[i]), "+0x") != NULL);
	}
	/* the same stack again while its file is still to be read: the same placeholders, not
	 * waiting again */
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	REQUIRE(pp_profile_sample_count(f.prof) == 1); /* one stack: its frames the same */
	pp_session_get_stats(f.s, &st);
	waited = st.frames_pending;
	CHECK_EQ_U64(waited, 3);
	CHECK_EQ_U64(st.frames_resolved, 0);
	CHECK(pp_session_wait_symbols(f.s, 10000) == 0);
	si = pp_profile_get_sample(f.prof, 0);
	for (int i = 0; i < 3; i++) {
		const struct pp_location_info *l = pp_profile_get_location(f.prof, ids[i]);
		const struct pp_mapping_info *m = pp_profile_get_mapping(f.prof, l->mapping_id);

		CHECK_EQ_U64(si->locations[i], ids[i]);
		CHECK_STR(l->function, names[i]);
		CHECK_EQ_U64(l->unnamed, 0);
		CHECK_EQ_U64(l->address, uf[i] - (i ? 1 : 0) - bias);
		CHECK(m && m->build_id[0]);
	}
	/* the placeholders' mapping became the file's: no mapping without its build id is left */
	for (uint32_t id = 1; id <= pp_profile_mapping_count(f.prof); id++)
		CHECK(pp_profile_get_mapping(f.prof, id)->build_id[0]);
	/* the next sample of the stack finds the finished frames */
	make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 3);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	si = pp_profile_get_sample(f.prof, pp_profile_sample_count(f.prof) - 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_U64(si->locations[i], ids[i]);
	pp_session_get_stats(f.s, &st);
	/* every frame that waited is named */
	CHECK_EQ_U64(st.frames_pending, waited);
	CHECK_EQ_U64(st.frames_resolved, waited);
	CHECK_EQ_U64(st.unnamed, 0);
	CHECK_EQ_U64(st.named[PP_NAMED_SYMTAB], 3);
	CHECK_EQ_U64(st.frames_no_file, 0);
	fixture_fini(&f);
}

/*
 * JIT code seen before its runtime wrote the perf map (a JVM writes it when told, jcmd
 * Compiler.perfmap): the frame keeps its address, and once the map has the code the frame
 * already in the profile is named in place, at the next retry or flush.
 */
TEST(jit_frames_are_named_when_the_perf_map_comes)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct rec r;
	long pg = sysconf(_SC_PAGESIZE);
	char map_path[64], want[64];
	char *jit;
	uint32_t id;
	FILE *m;

	jit = mmap(NULL, (size_t)pg, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(jit != MAP_FAILED);
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", (int)getpid());
	unlink(map_path);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	{
		uint64_t uf[3] = {(uint64_t)(uintptr_t)jit + 32, FN_ADDR(sess_mid_gamma) + 8,
				  FN_ADDR(sess_root_delta) + 8};

		make_sample(&r, own_pid(), own_tid(), 1000, NULL, 0, uf, 3);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	}
	REQUIRE(pp_profile_sample_count(f.prof) == 1);
	id = pp_profile_get_sample(f.prof, 0)->locations[0];
	snprintf(want, sizeof(want), "[anonymous code]+0x%llx",
		 (unsigned long long)(uintptr_t)jit + 32);
	CHECK_STR(loc_name(f.prof, id), want);
	/* the runtime writes its map; the reader looks again after its recheck interval */
	m = fopen(map_path, "w");
	REQUIRE(m);
	fprintf(m, "%llx 40 Lcom/shop/Cart;::total\n", (unsigned long long)(uintptr_t)jit);
	fclose(m);
	usleep(1100 * 1000);
	CHECK(pp_session_flush(f.s) == 0);
	CHECK_STR(loc_name(f.prof, id), "Lcom/shop/Cart;::total");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.named_late, 1);
	CHECK_EQ_U64(st.named[PP_NAMED_PERF_MAP], 1);
	unlink(map_path);
	fixture_fini(&f);
	munmap(jit, (size_t)pg);
}

/*
 * Anonymous code of a process that exited before its runtime wrote a map: asked once more
 * after the exit, then left as it is. Its map could only be opened through the process's
 * /proc entry, so asking again every second would only read /proc for nothing.
 */
TEST(jit_frames_of_an_exited_process_are_not_asked_again)
{
	struct pp_session_opts opts = {0};
	struct sess_fixture f;
	struct pp_session_stats st;
	struct pp_decoded task;
	struct rec r;
	uint64_t jit_addr = 0, misses;
	int to_parent[2], to_child[2], status;
	pid_t child;
	char c = 0;

	REQUIRE(pipe(to_parent) == 0 && pipe(to_child) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		void *jit =
		    mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t a = jit == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)jit;

		if (write(to_parent[1], &a, sizeof(a)) != (ssize_t)sizeof(a) ||
		    read(to_child[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	REQUIRE(read(to_parent[0], &jit_addr, sizeof(jit_addr)) == (ssize_t)sizeof(jit_addr));
	REQUIRE(jit_addr != 0);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	{
		uint64_t uf[2] = {jit_addr + 64, FN_ADDR(sess_root_delta) + 8};

		make_sample(&r, (uint32_t)child, (uint32_t)child, 1000, NULL, 0, uf, 2);
		CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	}
	CHECK(pp_profile_sample_count(f.prof) == 1);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.perf_map_misses, 1); /* asked when the frame was first seen */
	/* alive: asked again at a flush, once the reader's recheck interval passed */
	usleep(1100 * 1000);
	CHECK(pp_session_flush(f.s) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.perf_map_misses, 2);
	CHECK_EQ_U64(st.jit_given_up, 0);

	CHECK(write(to_child[1], &c, 1) == 1);
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	make_task(&task, (uint32_t)child, PP_TASK_EXIT, TIME_NS + 1);
	CHECK(pp_session_handle_decoded(f.s, &task) == 0);
	usleep(1100 * 1000);
	CHECK(pp_session_flush(f.s) == 0); /* the last time: the map is not there */
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.jit_given_up, 1);
	misses = st.perf_map_misses;
	CHECK(misses == 3);
	usleep(1100 * 1000);
	CHECK(pp_session_flush(f.s) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.perf_map_misses, misses);
	CHECK_EQ_U64(st.named_late, 0);
	fixture_fini(&f);
	close(to_parent[0]);
	close(to_parent[1]);
	close(to_child[0]);
	close(to_child[1]);
}

/* An unwinder whose sink takes every write and reads no row: its copies wait, unwalked. */
static int sink_take_rows(void *ctx, uint32_t first, const uint32_t *words, uint32_t n)
{
	(void)ctx, (void)first, (void)words, (void)n;
	return 0;
}

static int sink_take_rule(void *ctx, uint32_t i, const struct pp_bpf_unwind_rule *rule)
{
	(void)ctx, (void)i, (void)rule;
	return 0;
}

static int sink_take_proc(void *ctx, uint32_t tgid, const struct pp_bpf_unwind_list *p,
			  uint64_t *at)
{
	(void)ctx, (void)tgid, (void)p, (void)at;
	return 0;
}

static void sink_drop_proc(void *ctx, uint32_t tgid, uint64_t at)
{
	(void)ctx, (void)tgid, (void)at;
}

static int sink_read_none(void *ctx, uint32_t first, uint32_t n, uint32_t *out)
{
	(void)ctx, (void)first, (void)n, (void)out;
	return -EIO;
}

/* A sample of tgid at time_ns whose stack the shim copied: 64 bytes from sp. */
static void make_copied_sample(struct rec *r, uint32_t tgid, uint64_t time_ns, uint64_t ip,
			       const unsigned char *copy)
{
	make_sample(r, tgid, tgid, 1, NULL, 0, &ip, 1);
	r->d.sample.time_ns = time_ns;
	r->d.sample.flags |= PP_SF_USTACK_RAW;
	r->d.raw = (struct pp_raw_ustack){.ip = ip, .sp = 0x7ffd0000f000ull, .bp = 0, .len = 64};
	r->d.raw_bytes = copy;
}

/*
 * A wrapper chain (a shell, env, a version manager's shims) execs several times before the
 * kernel's reports are read: each sample is given the image it was taken in, its name and
 * its mappings, never the next one's; past the images kept, a sample is left without a
 * process rather than given another program's.
 */
TEST(samples_of_a_wrapper_chain_are_given_the_image_they_ran_in)
{
	struct pp_session_opts opts = {0};
	uint64_t uf[1] = {FN_ADDR(sess_leaf_alpha) + 4};
	const struct pp_location_info *loc;
	const struct pp_map_entry *code;
	const struct pp_sample_info *si;
	struct pp_session_stats st;
	struct pp_maps maps = {0};
	struct sess_fixture f;
	char exe[PATH_MAX];
	struct stat sb;

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(own_code(uf[0], exe, &sb, &maps, &code) == 0);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	/* the wrapper maps its code; the program and the next exec, nothing yet */
	sideband_exec_and_map(f.s, NO_SUCH_PID, "sess-wrapper", code, exe, &sb);
	sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 1000, "sess-program");
	sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 3000, "sess-next");
	/* a thread of each image, sampled in it, read after the last exec */
	si = gone_sample_at(&f, NO_SUCH_PID + 1, TIME_NS, NULL, 0, uf, 1);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(si->process_name, strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe);
	loc = pp_profile_get_location(f.prof, si->locations[0]);
	REQUIRE(loc != NULL);
	CHECK(loc->mapping_id != 0); /* placed in the wrapper's file */
	si = gone_sample_at(&f, NO_SUCH_PID + 2, TIME_NS + 2500, NULL, 0, uf, 1);
	REQUIRE(si && si->nlocations == 1);
	CHECK_STR(si->process_name, "[sess-program]");
	CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[0])->mapping_id, 0);
	si = gone_sample_at(&f, NO_SUCH_PID + 3, TIME_NS + 3500, NULL, 0, uf, 1);
	REQUIRE(si != NULL);
	CHECK_STR(si->process_name, "[sess-next]");
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_of_replaced_images, 2);
	CHECK_EQ_U64(st.samples_of_images_not_kept, 0);
	/* eight execs more: the wrapper's image is no longer kept */
	for (uint64_t i = 0; i < 8; i++)
		sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 4000 + 100 * i, "sess-shim");
	si = gone_sample_at(&f, NO_SUCH_PID + 4, TIME_NS, NULL, 0, uf, 1);
	REQUIRE(si && si->nlocations == 1);
	CHECK(strcmp(si->process_name, "[sess-shim]") != 0);
	CHECK(strcmp(si->process_name, "[sess-next]") != 0);
	CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[0])->mapping_id, 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_of_images_not_kept, 1);
	CHECK_EQ_U64(st.samples_of_replaced_images, 2);
	pp_maps_fini(&maps);
	fixture_fini(&f);
}

/*
 * A sample taken in an exec, in the kernel after the exec was reported and before the new
 * program ran (loading it): its user registers are still the image's that called exec, while
 * its memory is the new one's. Its user pc is named in the image that called exec, and the
 * frames above it, read from the new memory, are not kept; once the program runs, its pcs are
 * its own.
 */
TEST(a_sample_in_an_exec_names_its_user_frame_in_the_image_that_called_it)
{
	struct pp_session_opts opts = {0};
	uint64_t kf[1] = {K_ALPHA + 0x10};
	uint64_t uf[3] = {FN_ADDR(sess_leaf_alpha) + 4, FN_ADDR(sess_mid_gamma) + 8,
			  FN_ADDR(sess_root_delta) + 8};
	const struct pp_location_info *u0;
	const struct pp_map_entry *code;
	const struct pp_sample_info *si;
	struct pp_session_stats st;
	struct pp_maps maps = {0};
	struct sess_fixture f;
	char exe[PATH_MAX];
	struct stat sb;

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(own_code(uf[0], exe, &sb, &maps, &code) == 0);
	REQUIRE(fixture_init(&f, &opts, 1) == 0);
	sideband_exec_and_map(f.s, NO_SUCH_PID, "sess-caller", code, exe, &sb);
	sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 1000, "sess-program");
	si = gone_sample_at(&f, NO_SUCH_PID + 1, TIME_NS + 1500, kf, 1, uf, 3);
	REQUIRE(si && si->nlocations == 2);
	CHECK_STR(si->process_name, "[sess-program]");
	CHECK_STR(loc_name(f.prof, si->locations[0]), "sess_kfunc_alpha");
	u0 = pp_profile_get_location(f.prof, si->locations[1]);
	REQUIRE(u0 != NULL);
	CHECK(u0->kind == PP_FRAME_NATIVE);
	CHECK(u0->mapping_id != 0); /* placed in the caller's file */
	CHECK_EQ_U64(u0->address, uf[0] - load_bias());
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_in_exec, 1);
	/* the program runs, mapped where the caller was: its own pcs, its whole stack */
	sideband_map(f.s, NO_SUCH_PID, TIME_NS + 1700, code, exe, &sb);
	si = gone_sample_at(&f, NO_SUCH_PID + 2, TIME_NS + 2000, kf, 1, uf, 3);
	REQUIRE(si && si->nlocations == 4);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_in_exec, 1);
	/* a user pc in neither image: as it was, unplaced, the stack kept */
	uf[0] = 0x10000;
	si = gone_sample_at(&f, NO_SUCH_PID + 3, TIME_NS + 2000, kf, 1, uf, 3);
	REQUIRE(si != NULL);
	CHECK(si->nlocations >= 2);
	CHECK_EQ_U64(pp_profile_get_location(f.prof, si->locations[1])->mapping_id, 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.samples_in_exec, 1);
	pp_maps_fini(&maps);
	fixture_fini(&f);
}

/*
 * A copy taken in an image its process has replaced by an exec since (a wrapper's, a shell's
 * before the program it starts) goes to the unwinder with that image's mappings, not to be
 * walked with its process's list, which is the next image's; the new image's copies go with
 * none.
 */
TEST(copies_of_an_image_replaced_by_exec_go_with_that_images_mappings)
{
	const struct pp_unwinder_sink taker = {.write_rows = sink_take_rows,
					       .write_rule = sink_take_rule,
					       .set_proc = sink_take_proc,
					       .del_proc = sink_drop_proc,
					       .read_rows = sink_read_none,
					       .nr_rows = 1024};
	struct pp_unwinder *u = pp_unwinder_new(&taker, &(struct pp_unwinder_opts){0});
	struct pp_session_opts opts = {.unwinder = u};
	uint64_t uf[1] = {FN_ADDR(sess_leaf_alpha) + 4};
	unsigned char copy[64] = {0};
	const struct pp_map_entry *code;
	struct pp_unwinder_stats ust;
	struct pp_session_stats st;
	struct pp_maps maps = {0};
	struct sess_fixture f;
	char exe[PATH_MAX];
	struct stat sb;
	struct rec r;

	if (kill((pid_t)NO_SUCH_PID, 0) == 0 || errno != ESRCH)
		SKIP("pid 0x3ffffff0 exists on this machine");
	REQUIRE(u != NULL);
	REQUIRE(own_code(uf[0], exe, &sb, &maps, &code) == 0);
	REQUIRE(fixture_init(&f, &opts, 0) == 0);
	/* the wrapper's image, then its exec of the program */
	sideband_exec_and_map(f.s, NO_SUCH_PID, "sess-wrapper", code, exe, &sb);
	sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 1000, "sess-program");
	/* a copy the wrapper's image took, come after the exec */
	make_copied_sample(&r, NO_SUCH_PID, TIME_NS, uf[0], copy);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.ustack_copies, 1);
	CHECK_EQ_U64(st.copies_of_replaced_images, 1);
	CHECK_EQ_U64(st.copies_refused, 0);
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), 1);
	/* the program's own copy goes with none */
	make_copied_sample(&r, NO_SUCH_PID, TIME_NS + 2000, uf[0], copy);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.ustack_copies, 2);
	CHECK_EQ_U64(st.copies_of_replaced_images, 1);
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), 2);
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &ust);
	CHECK_EQ_U64(ust.walks_done, 2);
	CHECK_EQ_U64(ust.walks_of_images, 1);
	/*
	 * The program maps its code and execs again, and the wrapper's and the program's
	 * copies come after: each goes with its own image's mappings (the program's was taken
	 * for the wrapper's, the image before the last exec, and walked with none).
	 */
	sideband_map(f.s, NO_SUCH_PID, TIME_NS + 1500, code, exe, &sb);
	sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 3000, "sess-next");
	make_copied_sample(&r, NO_SUCH_PID, TIME_NS + 2500, uf[0], copy);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	make_copied_sample(&r, NO_SUCH_PID, TIME_NS, uf[0], copy);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.copies_of_replaced_images, 3);
	CHECK_EQ_U64(st.copies_refused, 0);
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), 4); /* two walked, not taken back */
	pp_unwinder_drain(u);
	pp_unwinder_get_stats(u, &ust);
	CHECK_EQ_U64(ust.walks_of_images, 3);
	CHECK_EQ_U64(ust.walks_done, 4);
	/*
	 * Eight execs more: the wrapper's image is no longer kept. Its copy is not walked with
	 * another program's mappings, and its sample is kept without a process.
	 */
	for (uint64_t i = 0; i < 8; i++)
		sideband_exec(f.s, NO_SUCH_PID, TIME_NS + 4000 + 100 * i, "sess-shim");
	make_copied_sample(&r, NO_SUCH_PID, TIME_NS, uf[0], copy);
	CHECK(pp_session_handle_decoded(f.s, &r.d) == 0);
	pp_session_get_stats(f.s, &st);
	CHECK_EQ_U64(st.copies_refused, 1);
	CHECK_EQ_U64(st.copies_of_replaced_images, 3);
	CHECK_EQ_U64(st.samples_of_images_not_kept, 1);
	CHECK_EQ_U64(pp_unwinder_walks_waiting(u), 4);
	pp_maps_fini(&maps);
	fixture_fini(&f);
	pp_unwinder_free(u);
}

TEST_LIST = {
    {"samples_of_a_wrapper_chain_are_given_the_image_they_ran_in",
     samples_of_a_wrapper_chain_are_given_the_image_they_ran_in},
    {"a_sample_in_an_exec_names_its_user_frame_in_the_image_that_called_it",
     a_sample_in_an_exec_names_its_user_frame_in_the_image_that_called_it},
    {"copies_of_an_image_replaced_by_exec_go_with_that_images_mappings",
     copies_of_an_image_replaced_by_exec_go_with_that_images_mappings},
    {"jit_frames_of_an_exited_process_are_not_asked_again",
     jit_frames_of_an_exited_process_are_not_asked_again},
    {"the_launchers_records_before_the_exec_are_left_out",
     the_launchers_records_before_the_exec_are_left_out},
    {"jit_frames_are_named_when_the_perf_map_comes", jit_frames_are_named_when_the_perf_map_comes},
    {"frames_made_while_the_file_is_read_are_finished_in_place",
     frames_made_while_the_file_is_read_are_finished_in_place},
    {"cxx_symbols_are_demangled", cxx_symbols_are_demangled},
    {"containers_become_resources", containers_become_resources},
    {"containers_become_resources_raw_table", containers_become_resources_raw_table},
    {"user_stack_resolves_leaf_first", user_stack_resolves_leaf_first},
    {"return_address_resolves_to_caller", return_address_resolves_to_caller},
    {"identical_stacks_aggregate_tids_stay_apart", identical_stacks_aggregate_tids_stay_apart},
    {"mapping_is_the_test_binary_with_its_build_id", mapping_is_the_test_binary_with_its_build_id},
    {"vdso_frames_are_named", vdso_frames_are_named},
    {"a_file_unopened_for_a_gone_process_is_named_for_the_next",
     a_file_unopened_for_a_gone_process_is_named_for_the_next},
    {"a_file_known_by_its_identity_names_a_new_processs_frames_at_once",
     a_file_known_by_its_identity_names_a_new_processs_frames_at_once},
    {"frames_finished_from_a_file_serve_the_next_process",
     frames_finished_from_a_file_serve_the_next_process},
    {"kernel_frames_resolve_through_kallsyms", kernel_frames_resolve_through_kallsyms},
    {"kernel_frames_without_kallsyms_are_placeholders",
     kernel_frames_without_kallsyms_are_placeholders},
    {"off_cpu_stacks_leave_the_tracing_frames_out", off_cpu_stacks_leave_the_tracing_frames_out},
    {"sample_of_vanished_process_is_kept", sample_of_vanished_process_is_kept},
    {"unmapped_address_is_unknown", unmapped_address_is_unknown},
    {"precise_ip_replaces_the_leaf", precise_ip_replaces_the_leaf},
    {"task_records_are_counted", task_records_are_counted},
    {"garbage_records_are_rejected_and_counted", garbage_records_are_rejected_and_counted},
    {"small_frame_cache_resets_and_names_stay_right",
     small_frame_cache_resets_and_names_stay_right},
    {"new_profile_drops_cached_ids", new_profile_drops_cached_ids},
    {"raw_stack_aggregation_matches_direct_mode", raw_stack_aggregation_matches_direct_mode},
    {"per_cpu_samples_keep_their_cpu", per_cpu_samples_keep_their_cpu},
    {"return_address_outside_code_ends_the_walk", return_address_outside_code_ends_the_walk},
    {"unreadable_maps_are_counted", unreadable_maps_are_counted},
    {"grace_puts_samples_in_the_window_they_were_taken_in",
     grace_puts_samples_in_the_window_they_were_taken_in},
    {"woken_wait_is_the_sleep_and_the_delay", woken_wait_is_the_sleep_and_the_delay},
    {"woken_wait_is_the_sleep_and_the_delay_raw_table",
     woken_wait_is_the_sleep_and_the_delay_raw_table},
};

TEST_MAIN()
