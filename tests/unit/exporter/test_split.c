/*
 * Unit tests of cutting a window for a backend's limits: pp_profile_subset_new,
 * pp_pprof_size_bound (an upper bound of the real encoding, and not a loose one),
 * pp_split_profile at Pyroscope's real limits (16,000 samples, 4 MiB) over OTLP (by resource)
 * and over the push (by service), and pp_pprof_split of a pushed body. Every cut is checked
 * to keep every sample exactly once, with its stack, labels, resource and values.
 */
#include <pebsprof/profile.h>
#include <pebsprof/pyroscope.h>
#include <pebsprof/split.h>
#include <pebsprof/writers.h>

#include "check.h"
#include "rate_bytes.h"
#include "pprof/profile.pb-c.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gen {
	uint32_t procs;		/* processes outside containers */
	uint32_t containers;	/* container resources, one process each */
	uint32_t per_proc;	/* distinct samples per process */
	uint32_t depth;		/* frames per stack */
	uint32_t name_len;	/* length of function names */
	uint32_t funcs;		/* distinct functions per process */
	const char *service[4]; /* service.name of containers 0..3 (NULL = none) */
	const char *proc_name;	/* executable name of process i: proc_name + i */
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A window of deterministic pseudo-random stacks; every sample distinct (its tid). */
static struct pp_profile *make_window(const struct gen *g)
{
	struct pp_profile_desc d = {.event = "cycles",
				    .value_type = "cycles",
				    .value_unit = "count",
				    .start_unix_ns = 1700000000000000000ull,
				    .duration_ns = 10000000000ull};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t nproc = g->procs + g->containers;
	char *name = malloc(g->name_len + 32);
	uint32_t *locs = malloc(g->depth * sizeof(*locs));

	rng = 88172645463325252ull;
	if (!p || !name || !locs)
		goto fail;
	for (uint32_t pi = 0; pi < nproc; pi++) {
		char exe[64], path[96];
		struct pp_mapping_info m = {.start = 0x400000, .limit = 0x800000};
		struct pp_label res[2];
		uint32_t map, rid = 0, nres = 0;

		snprintf(exe, sizeof(exe), "%s%u", g->proc_name ? g->proc_name : "proc", pi);
		snprintf(path, sizeof(path), "/usr/bin/%s", exe);
		m.filename = path;
		m.build_id = "abcdef";
		map = pp_profile_intern_mapping(p, &m);
		if (pi >= g->procs) {
			uint32_t c = pi - g->procs;
			char cid[32];

			snprintf(cid, sizeof(cid), "c0ffee%02u", c);
			res[nres++] = (struct pp_label){"container.id", cid};
			if (c < 4 && g->service[c])
				res[nres++] = (struct pp_label){"service.name", g->service[c]};
			rid = pp_profile_intern_resource(p, res, nres);
			if (!rid)
				goto fail;
		}
		for (uint32_t si = 0; si < g->per_proc; si++) {
			struct pp_label lab = {"memory.level", si % 2 ? "L1 hit" : "RAM hit"};
			struct pp_sample_info s = {.locations = locs,
						   .nlocations = g->depth,
						   .pid = 1000 + pi,
						   .tid = 100000 + si,
						   .thread_name = "worker",
						   .process_name = exe,
						   .process_path = path,
						   .labels = &lab,
						   .nlabels = 1,
						   .count = 1 + si % 3,
						   .value = 1000 * (1 + si % 3),
						   .resource_id = rid};

			for (uint32_t k = 0; k < g->depth; k++) {
				struct pp_location_info l = {.mapping_id = map,
							     .kind = PP_FRAME_NATIVE};
				/* stacks of nearby samples share functions, as real ones do */
				uint32_t f = (uint32_t)(((uint64_t)si * g->funcs / g->per_proc +
							 next_rand() % 32) %
							g->funcs);

				memset(name, 'f', g->name_len);
				snprintf(name + g->name_len, 32, "_%u_%u", pi, f);
				l.function = name;
				l.address = 0x400000 + 16 * (uint64_t)f;
				locs[k] = pp_profile_intern_location(p, &l);
				if (!locs[k])
					goto fail;
			}
			if (pp_profile_add_sample(p, &s))
				goto fail;
		}
	}
	free(name);
	free(locs);
	return p;
fail:
	free(name);
	free(locs);
	pp_profile_free(p);
	return NULL;
}

/* One line per sample naming all it holds; sorted, so two profiles compare as multisets. */
static char **sample_keys(const struct pp_profile *p, size_t *n)
{
	size_t ns = pp_profile_sample_count(p);
	char **keys = calloc(ns + 1, sizeof(*keys));

	for (size_t i = 0; keys && i < ns; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		uint32_t nres = 0;
		const struct pp_label *res = pp_profile_get_resource(p, s->resource_id, &nres);
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		if (!f)
			break;
		fprintf(f, "%u/%u/%s/%s/%llu/%llu/%llu|", s->pid, s->tid, s->thread_name,
			s->process_name, (unsigned long long)s->count, (unsigned long long)s->value,
			(unsigned long long)s->first_time_unix_ns);
		for (uint32_t j = 0; j < s->nlocations; j++) {
			const struct pp_location_info *l =
			    pp_profile_get_location(p, s->locations[j]);
			const struct pp_mapping_info *m = pp_profile_get_mapping(p, l->mapping_id);

			fprintf(f, "%s@%llx:%s;", l->function, (unsigned long long)l->address,
				m ? m->filename : "-");
		}
		for (uint32_t j = 0; j < s->nlabels; j++)
			fprintf(f, "%s=%s,", s->labels[j].key, s->labels[j].value);
		for (uint32_t j = 0; res && j < nres; j++)
			fprintf(f, "R%s=%s,", res[j].key, res[j].value);
		fclose(f);
		keys[i] = buf;
	}
	*n = ns;
	return keys;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_keys(char **k, size_t n)
{
	for (size_t i = 0; k && i < n; i++)
		free(k[i]);
	free(k);
}

/* Whether the parts hold exactly the samples of whole, each once. */
static int same_samples(const struct pp_profile *whole, const struct pp_profile *const *parts,
			size_t nparts)
{
	size_t nw, total = 0, at = 0;
	char **w = sample_keys(whole, &nw), **all;
	int ok = 1;

	for (size_t i = 0; i < nparts; i++)
		total += pp_profile_sample_count(parts[i]);
	all = calloc(total + 1, sizeof(*all));
	if (!w || !all || total != nw) {
		fprintf(stderr, "  parts hold %zu samples, the whole %zu\n", total, nw);
		ok = 0;
	}
	for (size_t i = 0; ok && i < nparts; i++) {
		size_t n;
		char **k = sample_keys(parts[i], &n);

		for (size_t j = 0; k && j < n; j++)
			all[at++] = k[j];
		free(k);
	}
	if (ok) {
		qsort(w, nw, sizeof(*w), cmp_str);
		qsort(all, total, sizeof(*all), cmp_str);
		for (size_t i = 0; ok && i < nw; i++)
			ok = strcmp(w[i], all[i]) == 0;
	}
	free_keys(w, nw);
	free_keys(all, at);
	return ok;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Samples per OTLP resource (container resource, or pid) of a part: the largest. */
static size_t largest_resource(const struct pp_profile *p)
{
	size_t n = pp_profile_sample_count(p), best = 0, run = 0;
	uint64_t *keys = calloc(n + 1, sizeof(*keys));

	if (!keys)
		return SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);

		keys[i] = s->resource_id ? (uint64_t)s->resource_id << 32 : s->pid;
	}
	qsort(keys, n, sizeof(*keys), cmp_u64);
	for (size_t i = 0; i < n; i++) {
		run = i && keys[i] == keys[i - 1] ? run + 1 : 1;
		if (run > best)
			best = run;
	}
	free(keys);
	return best;
}

static size_t pprof_len(const struct pp_profile *p)
{
	uint8_t *buf = NULL;
	size_t len = 0;

	if (pp_pprof_encode(p, &buf, &len))
		return SIZE_MAX;
	free(buf);
	return len;
}

/* pp_test_request_rate_bytes(p) as a size: SIZE_MAX when it cannot be measured. */
static size_t request_bytes(const struct pp_profile *p)
{
	uint64_t v;

	return pp_test_request_rate_bytes(p, &v) ? SIZE_MAX : (size_t)v;
}

TEST(subset_keeps_what_its_samples_refer_to)
{
	struct gen g = {.procs = 2,
			.containers = 1,
			.per_proc = 30,
			.depth = 6,
			.name_len = 8,
			.funcs = 50,
			.service = {"cart"}};
	struct pp_profile *p = make_window(&g), *a, *b;
	size_t n, *first, *second, nf = 0, ns = 0;

	REQUIRE(p);
	n = pp_profile_sample_count(p);
	REQUIRE(n == 90);
	first = calloc(n, sizeof(*first));
	second = calloc(n, sizeof(*second));
	REQUIRE(first && second);
	/* the first process alone, and everything else */
	for (size_t i = 0; i < n; i++) {
		if (pp_profile_get_sample(p, i)->pid == 1000)
			first[nf++] = i;
		else
			second[ns++] = i;
	}
	a = pp_profile_subset_new(p, first, nf);
	b = pp_profile_subset_new(p, second, ns);
	REQUIRE(a && b);
	{
		const struct pp_profile *parts[2] = {a, b};

		CHECK(same_samples(p, parts, 2));
	}
	/* only the first process's mapping and functions, no resource */
	CHECK_EQ_U64(pp_profile_mapping_count(a), 1);
	CHECK_STR(pp_profile_get_mapping(a, 1)->filename, "/usr/bin/proc0");
	CHECK(pp_profile_location_count(a) <= 50);
	CHECK(pp_profile_location_count(a) < pp_profile_location_count(p));
	CHECK_EQ_U64(pp_profile_resource_count(a), 0);
	CHECK_EQ_U64(pp_profile_resource_count(b), 1);
	CHECK_EQ_U64(pp_profile_mapping_count(b), 2);
	/* totals, window and the window's period (the mean over all of it, with -F) */
	CHECK_EQ_U64(pp_profile_total_count(a) + pp_profile_total_count(b),
		     pp_profile_total_count(p));
	CHECK_EQ_U64(pp_profile_total_value(a) + pp_profile_total_value(b),
		     pp_profile_total_value(p));
	CHECK_EQ_U64(pp_profile_get_desc(a)->start_unix_ns, pp_profile_get_desc(p)->start_unix_ns);
	CHECK_EQ_U64(pp_profile_get_desc(a)->duration_ns, pp_profile_get_desc(p)->duration_ns);
	CHECK_EQ_U64(pp_profile_period(a), pp_profile_period(p));
	CHECK_EQ_U64(pp_profile_period(b), pp_profile_period(p));
	CHECK_STR(pp_profile_get_desc(a)->value_type, "cycles");
	/* a bad index is refused */
	{
		size_t bad = n;

		errno = 0;
		CHECK(pp_profile_subset_new(p, &bad, 1) == NULL && errno == EINVAL);
	}
	pp_profile_free(a);
	pp_profile_free(b);
	free(first);
	free(second);
	pp_profile_free(p);
}

/* The bound is above the real size for any subset, and within 3x of it. */
TEST(size_bound_is_an_upper_bound)
{
	struct gen shapes[] = {
	    {.procs = 3, .per_proc = 200, .depth = 12, .name_len = 20, .funcs = 300},
	    {.procs = 1,
	     .containers = 2,
	     .per_proc = 500,
	     .depth = 40,
	     .name_len = 4,
	     .funcs = 30,
	     .service = {"a", "b"}},
	    {.procs = 2, .per_proc = 50, .depth = 1, .name_len = 200, .funcs = 1000},
	    /* deep stacks of short names: the location ids are most of the bytes */
	    {.procs = 1, .per_proc = 300, .depth = 120, .name_len = 2, .funcs = 5000},
	};

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		struct pp_profile *p = make_window(&shapes[k]);
		size_t n = pp_profile_sample_count(p), *idx = calloc(n, sizeof(*idx));

		REQUIRE(p && idx);
		for (int round = 0; round < 8; round++) {
			size_t m = 0, bound, real;
			struct pp_profile *part;

			for (size_t i = 0; i < n; i++)
				if (round == 0 || next_rand() % 8 < (uint64_t)round)
					idx[m++] = i;
			bound = pp_pprof_size_bound(p, idx, m);
			part = pp_profile_subset_new(p, idx, m);
			REQUIRE(part);
			real = pprof_len(part);
			if (bound < real || bound > 3 * real + 2048)
				fprintf(stderr,
					"  shape %zu round %d: %zu samples, bound %zu, real %zu\n",
					k, round, m, bound, real);
			CHECK(bound >= real);
			CHECK(bound <= 3 * real + 2048);
			pp_profile_free(part);
		}
		/* idx NULL: the first n samples, i.e. all of them */
		CHECK(pp_pprof_size_bound(p, NULL, n) >= pprof_len(p));
		free(idx);
		pp_profile_free(p);
	}
}

TEST(window_within_limits_is_one_part_the_input_itself)
{
	struct gen g = {.procs = 3,
			.containers = 2,
			.per_proc = 100,
			.depth = 8,
			.name_len = 10,
			.funcs = 40,
			.service = {"cart", "shop"}};
	struct pp_profile *p = make_window(&g);
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_split s;

	REQUIRE(p);
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.nparts, 1);
	CHECK(s.nparts == 1 && s.parts[0].profile == p); /* no copy on the common path */
	CHECK_EQ_U64(s.groups, 5);
	CHECK_EQ_U64(s.cut, 0);
	CHECK_EQ_U64(s.oversize, 0);
	pp_split_fini(&s);
	pp_profile_free(p);
}

/* Pyroscope's 16,000 samples over OTLP: a big process is cut, part k has piece k of each. */
TEST(otlp_resource_over_the_sample_limit_is_cut)
{
	struct gen g = {.procs = 2, .per_proc = 0, .depth = 6, .name_len = 10, .funcs = 400};
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_profile *p, *small;
	struct pp_split s;
	size_t seen_small = 0;

	/* 40,000 samples of one process (two processes of 20,000 would each be cut in 2) */
	g.procs = 1, g.per_proc = 40000;
	p = make_window(&g);
	g.per_proc = 100, g.proc_name = "small";
	small = make_window(&g);
	REQUIRE(p && small);
	/* add the small process's samples to the big window through a subset-style copy */
	{
		size_t n = pp_profile_sample_count(small);

		for (size_t i = 0; i < n; i++) {
			const struct pp_sample_info *si = pp_profile_get_sample(small, i);
			struct pp_sample_info c = *si;
			uint32_t locs[6];

			for (uint32_t j = 0; j < si->nlocations; j++) {
				struct pp_location_info l =
				    *pp_profile_get_location(small, si->locations[j]);

				l.mapping_id = pp_profile_intern_mapping(
				    p, pp_profile_get_mapping(small, l.mapping_id));
				locs[j] = pp_profile_intern_location(p, &l);
			}
			c.locations = locs;
			c.pid = 7;
			REQUIRE(pp_profile_add_sample(p, &c) == 0);
		}
	}
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.groups, 2);
	CHECK_EQ_U64(s.cut, 1);
	CHECK_EQ_U64(s.nparts, 3); /* ceil(40000 / 16000) */
	{
		const struct pp_profile *parts[8];

		REQUIRE(s.nparts <= 8);
		for (size_t i = 0; i < s.nparts; i++) {
			parts[i] = s.parts[i].profile;
			CHECK(parts[i] != p);
			CHECK(largest_resource(parts[i]) <= PP_PYROSCOPE_MAX_SAMPLES);
			CHECK(pprof_len(parts[i]) <= PP_PYROSCOPE_MAX_PROFILE_BYTES);
			for (size_t j = 0; j < pp_profile_sample_count(parts[i]); j++)
				if (pp_profile_get_sample(parts[i], j)->pid == 7) {
					seen_small++;
					CHECK_EQ_U64(i, 0); /* a group that fits stays in part 0 */
				}
		}
		CHECK_EQ_U64(seen_small, 100);
		CHECK(same_samples(p, parts, s.nparts));
	}
	pp_split_fini(&s);
	pp_profile_free(small);
	pp_profile_free(p);
}

/* Pyroscope's 4 MiB: long names and deep stacks pass it below 16,000 samples. */
TEST(profile_over_the_byte_limit_is_cut)
{
	struct gen g = {.procs = 1, .per_proc = 6000, .depth = 64, .name_len = 600, .funcs = 6000};
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_profile *p = make_window(&g);
	struct pp_split s;
	const struct pp_profile *parts[16];

	REQUIRE(p);
	REQUIRE(pprof_len(p) > PP_PYROSCOPE_MAX_PROFILE_BYTES);
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_SERVICE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.groups, 1);
	CHECK_EQ_U64(s.cut, 1);
	CHECK(s.nparts >= 2);
	REQUIRE(s.nparts <= 16);
	for (size_t i = 0; i < s.nparts; i++) {
		size_t len = pprof_len(s.parts[i].profile);

		parts[i] = s.parts[i].profile;
		CHECK(len <= PP_PYROSCOPE_MAX_PROFILE_BYTES);
		/* halves, not slivers: each part is more than a quarter of the limit */
		CHECK(len > PP_PYROSCOPE_MAX_PROFILE_BYTES / 4);
		CHECK_STR(s.parts[i].service, "proc0");
	}
	CHECK(same_samples(p, parts, s.nparts));
	pp_split_fini(&s);
	pp_profile_free(p);
}

/*
 * Pyroscope's rate limiter counts a whole request against its burst: over OTLP, resources
 * that fit one by one are packed into requests whose profiles sum within max_request_bytes,
 * each resource whole, every sample once; without the bound the window is one request.
 */
TEST(otlp_requests_packed_within_the_burst)
{
	struct gen g = {.procs = 6, .per_proc = 300, .depth = 16, .name_len = 60, .funcs = 300};
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_profile *p = make_window(&g);
	const struct pp_profile *parts[8];
	struct pp_split s;
	size_t whole;

	REQUIRE(p);
	whole = request_bytes(p);
	REQUIRE(whole != SIZE_MAX);
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.nparts, 1);
	pp_split_fini(&s);

	/* room for about three resources a request: two requests, three where sizes vary */
	lim.max_request_bytes = whole / 2;
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	fprintf(stderr, "  6 resources, %zu bytes as pprof: %zu requests within %zu\n", whole,
		s.nparts, lim.max_request_bytes);
	CHECK(s.nparts >= 2 && s.nparts <= 3);
	CHECK_EQ_U64(s.groups, 6);
	CHECK_EQ_U64(s.cut, 0); /* each resource fits alone: none is cut */
	CHECK_EQ_U64(s.packed, s.nparts - 1);
	REQUIRE(s.nparts <= 8);
	for (size_t i = 0; i < s.nparts; i++) {
		parts[i] = s.parts[i].profile;
		CHECK(request_bytes(parts[i]) <= lim.max_request_bytes);
		CHECK(largest_resource(parts[i]) == 300); /* whole resources */
	}
	CHECK(same_samples(p, parts, s.nparts));
	pp_split_fini(&s);

	/* a bound below one resource cuts it, as a profile over max_profile_bytes would be */
	lim.max_request_bytes = whole / 12;
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.cut, 6);
	for (size_t i = 0; i < s.nparts; i++)
		CHECK(request_bytes(s.parts[i].profile) <= lim.max_request_bytes);
	pp_split_fini(&s);
	/* the push: one profile a request, within the bound too */
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_SERVICE, NULL, &lim, &s) == 0);
	for (size_t i = 0; i < s.nparts; i++)
		CHECK(pprof_len(s.parts[i].profile) <= lim.max_request_bytes);
	CHECK(s.nparts >= 12);
	pp_split_fini(&s);
	pp_profile_free(p);
}

/* One sample larger than the limit on its own: counted, and still sent (nothing helps it). */
TEST(single_sample_over_the_byte_limit_is_counted)
{
	struct gen g = {.procs = 1, .per_proc = 3, .depth = 40, .name_len = 200, .funcs = 1000};
	struct pp_split_limits lim = {.max_samples = 100, .max_profile_bytes = 4096};
	struct pp_profile *p = make_window(&g);
	struct pp_split s;

	REQUIRE(p);
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.nparts, 3);
	CHECK_EQ_U64(s.oversize, 3);
	for (size_t i = 0; i < s.nparts; i++)
		CHECK_EQ_U64(pp_profile_sample_count(s.parts[i].profile), 1);
	pp_split_fini(&s);
	pp_profile_free(p);
}

/*
 * The push: one part per service, named as OTLP names it: a container's service.name, else
 * the configured one, else the executable's name.
 */
TEST(push_parts_per_service)
{
	struct gen g = {.procs = 2,
			.containers = 3,
			.per_proc = 20,
			.depth = 4,
			.name_len = 6,
			.funcs = 20,
			.service = {"checkout", "cart", NULL}};
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_profile *p = make_window(&g);
	struct pp_split s;

	REQUIRE(p);
	for (int configured = 0; configured < 2; configured++) {
		const char *want[2][5] = {{"cart", "checkout", "proc0", "proc1", "proc4"},
					  {"cart", "checkout", "shop", NULL, NULL}};
		const struct pp_profile *parts[5];

		REQUIRE(pp_split_profile(p, PP_SPLIT_BY_SERVICE, configured ? "shop" : NULL, &lim,
					 &s) == 0);
		CHECK_EQ_U64(s.nparts, configured ? 3 : 5);
		CHECK_EQ_U64(s.groups, s.nparts);
		CHECK_EQ_U64(s.cut, 0);
		for (size_t i = 0; i < s.nparts && i < 5; i++) {
			const struct pp_profile *part = s.parts[i].profile;

			parts[i] = part;
			CHECK_STR(s.parts[i].service, want[configured][i]);
			for (size_t j = 0; j < pp_profile_sample_count(part); j++) {
				char buf[PP_PYROSCOPE_NAME_MAX];

				CHECK_STR(pp_split_service_of(part, pp_profile_get_sample(part, j),
							      configured ? "shop" : NULL, buf,
							      sizeof(buf)),
					  s.parts[i].service);
			}
		}
		CHECK(s.nparts <= 5 && same_samples(p, parts, s.nparts));
		pp_split_fini(&s);
	}
	pp_profile_free(p);
}

/*
 * The push names each part so that Pyroscope's /ingest takes it (pyroscope.h): kernel threads
 * and the idle task under their stated services, whatever their comm; executables whose
 * names Pyroscope refuses mapped, and two that map to one name sent as one service.
 */
TEST(push_parts_named_for_pyroscope)
{
	static const struct {
		const char *process;
		uint32_t pid;
		enum pp_process_kind kind;
	} procs[] = {
	    {"[kworker/0:2-virtio_vsock]", 40, PP_PROCESS_KERNEL_THREAD},
	    {"[ksoftirqd/0]", 14, PP_PROCESS_KERNEL_THREAD},
	    {"[idle]", 0, PP_PROCESS_IDLE},
	    {"x86_64-linux-gnu-g++-12", 900, PP_PROCESS_PROGRAM},
	    {"x86_64-linux-gnu-g__-12", 901, PP_PROCESS_PROGRAM},
	    {"[wc]", 902, PP_PROCESS_PROGRAM},
	    {"memfd:sealed-\xe2\x80\xa6", 903, PP_PROCESS_PROGRAM},
	    {"kernel/threads", 904, PP_PROCESS_PROGRAM}, /* a comm cannot take a stated name */
	};
	static const char *const want[] = {
	    "kernel/idle", "kernel/threads",	     "kernel_threads", "memfd_sealed-_",
	    "wc",	   "x86_64-linux-gnu-g__-12"};
	struct pp_profile_desc d = {
	    .event = "cpu-clock", .value_type = "cpu", .value_unit = "nanoseconds"};
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_location_info l = {
	    .function = "do_syscall_64", .address = 0xffffffff81000100ull, .kind = PP_FRAME_KERNEL};
	uint32_t loc;
	struct pp_split s;

	REQUIRE(p);
	loc = pp_profile_intern_location(p, &l);
	REQUIRE(loc);
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		struct pp_sample_info si = {.locations = &loc,
					    .nlocations = 1,
					    .pid = procs[i].pid,
					    .tid = procs[i].pid,
					    .thread_name = "t",
					    .process_name = procs[i].process,
					    .process_kind = procs[i].kind,
					    .count = 1,
					    .value = 10};

		REQUIRE(pp_profile_add_sample(p, &si) == 0);
	}
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_SERVICE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.nparts, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < s.nparts && i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_STR(s.parts[i].service, want[i]);
		CHECK(pp_pyroscope_service_name_ok(s.parts[i].service));
	}
	/* the two g++ names are one service; the kernel threads another */
	for (size_t i = 0; i < s.nparts; i++)
		if (!strcmp(s.parts[i].service, "x86_64-linux-gnu-g__-12") ||
		    !strcmp(s.parts[i].service, "kernel/threads"))
			CHECK_EQ_U64(pp_profile_sample_count(s.parts[i].profile), 2);
	pp_split_fini(&s);
	/* a configured name wins over all of them, and is mapped too */
	REQUIRE(pp_split_profile(p, PP_SPLIT_BY_SERVICE, "shop floor", &lim, &s) == 0);
	CHECK_EQ_U64(s.nparts, 1);
	if (s.nparts)
		CHECK_STR(s.parts[0].service, "shop_floor");
	pp_split_fini(&s);
	pp_profile_free(p);
}

TEST(split_bad_arguments)
{
	struct pp_split_limits lim = {1, 0, 0};
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *empty = pp_profile_new(&d);
	struct pp_split s;

	REQUIRE(empty);
	CHECK(pp_split_profile(NULL, PP_SPLIT_BY_SERVICE, NULL, &lim, &s) == -EINVAL);
	CHECK(pp_split_profile(empty, PP_SPLIT_BY_SERVICE, NULL, NULL, &s) == -EINVAL);
	CHECK(pp_split_profile(empty, (enum pp_split_by)7, NULL, &lim, &s) == -EINVAL);
	REQUIRE(pp_split_profile(empty, PP_SPLIT_BY_RESOURCE, NULL, &lim, &s) == 0);
	CHECK_EQ_U64(s.nparts, 0);
	pp_split_fini(&s);
	pp_profile_free(empty);
}

static Perftools__Profiles__Profile *unpack(const uint8_t *buf, size_t len)
{
	return perftools__profiles__profile__unpack(NULL, len, buf);
}

/* Every string index of a decoded profile is in range, every id it uses exists. */
static int consistent(const Perftools__Profiles__Profile *pr)
{
	for (size_t i = 0; i < pr->n_sample; i++)
		for (size_t j = 0; j < pr->sample[i]->n_location_id; j++) {
			int found = 0;

			for (size_t k = 0; k < pr->n_location && !found; k++)
				found = pr->location[k]->id == pr->sample[i]->location_id[j];
			if (!found)
				return 0;
		}
	for (size_t i = 0; i < pr->n_function; i++)
		if ((size_t)pr->function[i]->name >= pr->n_string_table)
			return 0;
	for (size_t i = 0; i < pr->n_mapping; i++)
		if ((size_t)pr->mapping[i]->filename >= pr->n_string_table)
			return 0;
	return pr->n_string_table > 0 && pr->string_table[0][0] == '\0';
}

/* The leaf function's name of each sample, with its values, one line each (sorted). */
static char **pprof_keys(const Perftools__Profiles__Profile *pr)
{
	char **k = calloc(pr->n_sample + 1, sizeof(*k));

	for (size_t i = 0; k && i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		for (size_t j = 0; f && j < s->n_location_id; j++)
			for (size_t l = 0; l < pr->n_location; l++)
				if (pr->location[l]->id == s->location_id[j])
					for (size_t fi = 0; fi < pr->n_function; fi++)
						if (pr->function[fi]->id ==
						    pr->location[l]->line[0]->function_id)
							fprintf(f, "%s;",
								pr->string_table[pr->function[fi]
										     ->name]);
		for (size_t j = 0; f && j < s->n_value; j++)
			fprintf(f, "=%lld", (long long)s->value[j]);
		for (size_t j = 0; f && j < s->n_label; j++)
			fprintf(f, ",%s:%s:%lld", pr->string_table[s->label[j]->key],
				pr->string_table[s->label[j]->str], (long long)s->label[j]->num);
		if (f)
			fclose(f);
		k[i] = buf;
	}
	return k;
}

TEST(pprof_body_split_in_halves)
{
	struct gen g = {.procs = 2, .per_proc = 301, .depth = 10, .name_len = 40, .funcs = 500};
	struct pp_profile *p = make_window(&g);
	uint8_t *buf = NULL, *a = NULL, *b = NULL;
	size_t len = 0, la = 0, lb = 0;
	Perftools__Profiles__Profile *whole, *ha, *hb;

	REQUIRE(p);
	REQUIRE(pp_pprof_encode(p, &buf, &len) == 0);
	REQUIRE(pp_pprof_split(buf, len, &a, &la, &b, &lb) == 0);
	whole = unpack(buf, len);
	ha = unpack(a, la);
	hb = unpack(b, lb);
	REQUIRE(whole && ha && hb);
	CHECK_EQ_U64(ha->n_sample, 301);
	CHECK_EQ_U64(hb->n_sample, 301);
	CHECK(consistent(ha) && consistent(hb));
	/* each half is smaller: the other process's functions and strings are gone */
	CHECK(la < len * 3 / 4 && lb < len * 3 / 4);
	CHECK(ha->n_function < whole->n_function && ha->n_string_table < whole->n_string_table);
	CHECK_EQ_U64(ha->n_mapping, 1);
	/* what is kept is as it was: types, period, times */
	CHECK_EQ_U64(ha->period, whole->period);
	CHECK_EQ_U64(hb->time_nanos, whole->time_nanos);
	CHECK_STR(ha->string_table[ha->period_type->type],
		  whole->string_table[whole->period_type->type]);
	CHECK_STR(hb->string_table[hb->sample_type[0]->type],
		  whole->string_table[whole->sample_type[0]->type]);
	/* every sample once, with its stack, values and labels */
	{
		char **kw = pprof_keys(whole), **ka = pprof_keys(ha), **kb = pprof_keys(hb);
		char **all = calloc(whole->n_sample, sizeof(*all));
		int same = kw && ka && kb && all;

		for (size_t i = 0; same && i < ha->n_sample; i++)
			all[i] = ka[i];
		for (size_t i = 0; same && i < hb->n_sample; i++)
			all[ha->n_sample + i] = kb[i];
		if (same) {
			qsort(kw, whole->n_sample, sizeof(*kw), cmp_str);
			qsort(all, whole->n_sample, sizeof(*all), cmp_str);
			for (size_t i = 0; same && i < whole->n_sample; i++)
				same = strcmp(kw[i], all[i]) == 0;
		}
		CHECK(same);
		free_keys(kw, whole->n_sample);
		free_keys(ka, ha->n_sample);
		free_keys(kb, hb->n_sample);
		free(all);
	}
	perftools__profiles__profile__free_unpacked(whole, NULL);
	perftools__profiles__profile__free_unpacked(ha, NULL);
	perftools__profiles__profile__free_unpacked(hb, NULL);
	free(a);
	free(b);
	/* what cannot be split: bytes that are not a profile, one sample */
	{
		uint8_t junk[] = {0xff, 0xff, 0xff};
		struct gen one = {.procs = 1, .per_proc = 1, .depth = 2, .name_len = 2, .funcs = 2};
		struct pp_profile *p1 = make_window(&one);
		uint8_t *b1 = NULL;
		size_t l1 = 0;

		CHECK(pp_pprof_split(junk, sizeof(junk), &a, &la, &b, &lb) == -EINVAL);
		REQUIRE(p1 && pp_pprof_encode(p1, &b1, &l1) == 0);
		CHECK(pp_pprof_split(b1, l1, &a, &la, &b, &lb) == -E2BIG);
		CHECK(a == NULL && b == NULL);
		free(b1);
		pp_profile_free(p1);
	}
	free(buf);
	pp_profile_free(p);
}

TEST_LIST = {
    {"subset_keeps_what_its_samples_refer_to", subset_keeps_what_its_samples_refer_to},
    {"size_bound_is_an_upper_bound", size_bound_is_an_upper_bound},
    {"window_within_limits_is_one_part_the_input_itself",
     window_within_limits_is_one_part_the_input_itself},
    {"otlp_resource_over_the_sample_limit_is_cut", otlp_resource_over_the_sample_limit_is_cut},
    {"profile_over_the_byte_limit_is_cut", profile_over_the_byte_limit_is_cut},
    {"otlp_requests_packed_within_the_burst", otlp_requests_packed_within_the_burst},
    {"single_sample_over_the_byte_limit_is_counted", single_sample_over_the_byte_limit_is_counted},
    {"push_parts_per_service", push_parts_per_service},
    {"push_parts_named_for_pyroscope", push_parts_named_for_pyroscope},
    {"split_bad_arguments", split_bad_arguments},
    {"pprof_body_split_in_halves", pprof_body_split_in_halves},
};

TEST_MAIN()
