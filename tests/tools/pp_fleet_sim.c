/*
 * A fleet as Pyroscope sees it, for bench/bench_fleet.sh: one node's window built as the agent
 * builds it (pods as container resources, the node's own processes, kernel threads and idle;
 * samples over skewed stacks, threads and CPUs), for each profile type we send (cpu-clock, a
 * hardware event, a memory event), with --sample-labels applied as the session applies it,
 * cut by the real splitter and encoded by the real encoders for the chosen exporter. Measured
 * per node: series (distinct label sets under Pyroscope's rules), requests, bytes before and
 * after gzip, and the bytes Pyroscope's rate limiter counts (a request's profiles, each as the
 * pprof Pyroscope makes of it, summed), with the largest request's, which its burst bounds.
 * Nodes are alike but for their node name, so the fleet's figures are the node's times N.
 *
 * Usage: pp_fleet_sim [-n NODES] [-m PODS] [-d DEPLOYMENTS] [-u CPU_PER_POD] [-F HZ]
 *                     [-i SECONDS] [-t THREADS] [-c CPUS] [-L LABELS] [-e otlp|pyroscope]
 *                     [-S STACKS] [-z SKEW] [-B BURST_BYTES]
 * LABELS: none, or thread,pid,cpu,memory as --sample-labels takes them. STACKS: the distinct
 * stacks of a service (1500), SKEW: samples pick stack u^SKEW of them (3: a few hot stacks
 * and a long tail). BURST_BYTES: max-burst-bytes (2 MiB, as the agent's default; 0: requests
 * not packed within one). Prints key=value lines.
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>
#include <pebsprof/pyroscope.h>
#include <pebsprof/split.h>
#include <pebsprof/writers.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "rate_bytes.h"
#include "session.h"

struct sim {
	unsigned nodes, pods, deployments, threads, cpus, hz, interval;
	unsigned stacks; /* distinct stacks a service runs */
	double skew;	 /* how hot its hottest are: the pick is u^skew of the pool */
	double cpu_per_pod;
	/* --sample-labels: the CPU kept, the rest the session's PP_SESSION_DROP_* */
	bool cpu;
	unsigned drop;
	bool push;
	size_t burst; /* max-burst-bytes; 0: requests not packed within a burst */
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Skewed pick in [0, n): a few hot stacks, a long tail, as profiles are. */
static uint32_t skewed_pow(uint32_t n, double power)
{
	double u = (double)(next_rand() % 1000000) / 1e6;

	return (uint32_t)(pow(u, power) * n) % n;
}

static uint32_t skewed(uint32_t n)
{
	return skewed_pow(n, 3);
}

enum ptype { P_CPU, P_CYCLES, P_MEM, P_N };

static const char *const mem_levels[] = {"L1 hit", "LFB/MAB hit", "L2 hit",
					 "L3 hit", "RAM hit",	  "Remote RAM (1 hop) hit"};
static const char *const mem_tlb[] = {"L1 or L2 hit", "Walker hit", "Walker miss"};
static const char *const mem_snoop[] = {"None", "Hit", "Miss", "HitM"};
static const char *const mem_op[] = {"LOAD"};
static const char *const mem_lat[] = {"0-31", "32-63", "64-127", "128-255", "256-511", "512+"};

#define DEPTH 24

/* The stack of service svc, index k: frames shared by the service's pods, names as long as
 * C++ and Java give them. */
static int make_stack(struct pp_profile *p, uint32_t map, uint32_t svc, uint32_t k, uint32_t *locs,
		      uint32_t *n)
{
	char fn[160];
	uint32_t depth = 8 + k % (DEPTH - 8);

	for (uint32_t i = 0; i < depth; i++) {
		/* callers are shared by many stacks: frame i of stack k is function (k >> i) */
		uint32_t f = (k >> (i / 2)) + i * 7919;
		struct pp_location_info l = {.mapping_id = map,
					     .address = 0x400000 + 64 * (uint64_t)f + svc,
					     .function = fn,
					     .kind = PP_FRAME_NATIVE};

		snprintf(fn, sizeof(fn),
			 "com::example::svc%u::module%u::Handler%u::process(Request const&, "
			 "Context&)",
			 svc, f % 97, f);
		locs[i] = pp_profile_intern_location(p, &l);
		if (!locs[i])
			return -ENOMEM;
	}
	*n = depth;
	return 0;
}

struct who {
	const char *process, *path;
	uint32_t pid, kind, resource, service;
	double cpus; /* CPUs it uses */
	unsigned threads;
};

static int add_samples(struct pp_profile *p, const struct sim *s, enum ptype t, const struct who *w,
		       uint32_t map)
{
	uint64_t nsamples = (uint64_t)(w->cpus * s->hz * s->interval + 0.5);
	uint32_t locs[DEPTH];
	char tname[32];

	for (uint64_t i = 0; i < nsamples; i++) {
		uint32_t n = 0, th = (uint32_t)(next_rand() % w->threads);
		struct pp_label labels[5];
		struct pp_sample_info si = {.locations = locs,
					    .process_name = w->process,
					    .process_path = w->path,
					    .process_kind = w->kind,
					    .pid = w->pid,
					    .tid = w->pid + th,
					    .thread_name = tname,
					    .count = 1,
					    .value = 10101010,
					    .resource_id = w->resource,
					    .has_cpu = s->cpu,
					    .cpu = (uint32_t)(next_rand() % s->cpus)};
		int err = make_stack(p, map, w->service, skewed_pow(s->stacks, s->skew), locs, &n);

		if (err)
			return err;
		si.nlocations = n;
		/* thread pools: names repeat, ids do not */
		snprintf(tname, sizeof(tname), "worker-%u", th % 8);
		if (t == P_MEM) {
			uint32_t lv = skewed(6);

			labels[si.nlabels++] =
			    (struct pp_label){PP_LABEL_MEM_LEVEL, mem_levels[lv]};
			labels[si.nlabels++] = (struct pp_label){"memory.tlb", mem_tlb[skewed(3)]};
			labels[si.nlabels++] =
			    (struct pp_label){"memory.snoop", mem_snoop[skewed(4)]};
			labels[si.nlabels++] = (struct pp_label){"memory.op", mem_op[0]};
			labels[si.nlabels++] =
			    (struct pp_label){"memory.latency_bucket", mem_lat[lv]};
			si.labels = labels;
			si.latency = 40 + 60 * lv;
		}
		/* what --sample-labels leaves out, as the session leaves it out */
		pp_session_drop_dimensions(s->drop, &si, labels);
		err = pp_profile_add_sample(p, &si);
		if (err)
			return err;
	}
	return 0;
}

/* One node's window of profile type t. */
static struct pp_profile *node_window(const struct sim *s, enum ptype t, unsigned node)
{
	static const char *const daemons[] = {"kubelet", "containerd", "systemd-journald",
					      "node_exporter", "sshd"};
	struct pp_profile_desc d = {.event = t == P_CPU	     ? "cpu-clock"
					     : t == P_CYCLES ? "cycles"
							     : "mem-loads",
				    .value_type = t == P_CPU	  ? "cpu"
						  : t == P_CYCLES ? "cycles"
								  : "mem-loads",
				    .value_unit = t == P_CPU ? "nanoseconds" : "count",
				    .period = 10101010,
				    .start_unix_ns = 1790000000000000000ull,
				    .duration_ns = (uint64_t)s->interval * 1000000000ull,
				    .mem_latency = t == P_MEM};
	struct pp_mapping_info m = {
	    0x400000, 0x4000000, 0, "/app/bin/server", "0123456789abcdef0123456789abcdef01234567",
	    0x400000};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t map;

	if (!p)
		return NULL;
	map = pp_profile_intern_mapping(p, &m);
	for (unsigned i = 0; i < s->pods; i++) {
		unsigned dep = (node * s->pods + i) % s->deployments;
		char cid[72], pod[64], app[32], uid[64];
		struct pp_label attrs[7];
		struct who w = {.process = "server",
				.path = "/app/bin/server",
				.pid = 10000 + 100 * i,
				.service = dep,
				.cpus = s->cpu_per_pod,
				.threads = s->threads};

		snprintf(cid, sizeof(cid), "%016x%016x%016x%016x", node, i, dep, node ^ i);
		snprintf(pod, sizeof(pod), "app%u-7d9f8b6c5-%05x", dep, (node * 131 + i) & 0xfffff);
		snprintf(app, sizeof(app), "app%u", dep);
		snprintf(uid, sizeof(uid), "6b1f0a52-%04x-4e8a-9f2b-%012x", i, node);
		attrs[0] = (struct pp_label){"container.id", cid};
		attrs[1] = (struct pp_label){"k8s.pod.name", pod};
		attrs[2] = (struct pp_label){"k8s.pod.uid", uid};
		attrs[3] = (struct pp_label){"k8s.namespace.name", "shop"};
		attrs[4] = (struct pp_label){"k8s.container.name", app};
		attrs[5] = (struct pp_label){"k8s.deployment.name", app};
		attrs[6] = (struct pp_label){"service.name", app};
		w.resource = pp_profile_intern_resource(p, attrs, 7);
		if (!w.resource || add_samples(p, s, t, &w, map))
			goto fail;
	}
	for (unsigned i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++) {
		char path[64];
		struct who w = {.process = daemons[i],
				.path = path,
				.pid = 500 + i,
				.service = 100000 + i,
				.cpus = 0.05,
				.threads = 4};

		snprintf(path, sizeof(path), "/usr/bin/%s", daemons[i]);
		if (add_samples(p, s, t, &w, map))
			goto fail;
	}
	/* kernel threads: kworkers and ksoftirqd per CPU, the idle task */
	for (unsigned i = 0; i < 2 * s->cpus; i++) {
		char comm[48];
		struct who w = {.process = comm,
				.pid = 20 + i,
				.kind = PP_PROCESS_KERNEL_THREAD,
				.service = 200000,
				.cpus = 0.01,
				.threads = 1};

		snprintf(comm, sizeof(comm), i % 2 ? "[ksoftirqd/%u]" : "[kworker/%u:1-events]",
			 i / 2);
		if (add_samples(p, s, t, &w, map))
			goto fail;
	}
	if (t == P_CPU) {
		struct who w = {.process = "[idle]",
				.kind = PP_PROCESS_IDLE,
				.service = 300000,
				.cpus = 0.5 * s->cpus,
				.threads = 1};

		if (add_samples(p, s, t, &w, map))
			goto fail;
	}
	return p;
fail:
	pp_profile_free(p);
	return NULL;
}

static size_t gz_len(const uint8_t *buf, size_t len)
{
	uLongf out_len = compressBound((uLong)len);
	Bytef *out = malloc(out_len);
	size_t r = 0;

	if (out && compress2(out, &out_len, buf, (uLong)len, Z_DEFAULT_COMPRESSION) == Z_OK)
		r = out_len + 12; /* gzip's header and trailer instead of zlib's */
	free(out);
	return r;
}

/* A series: the label set Pyroscope files a sample under. */
static uint64_t series_key(const struct pp_profile *p, const struct pp_sample_info *si,
			   const char *service)
{
	uint64_t h = 1469598103934665603ull;
	const char *parts[4] = {service, si->process_name, si->thread_name, NULL};

	for (int i = 0; parts[i]; i++)
		for (const char *c = parts[i]; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
	h = (h ^ si->resource_id) * 1099511628211ull;
	if (!(si->hidden & PP_SAMPLE_HIDE_PID))
		h = (h ^ si->pid) * 1099511628211ull;
	if (!(si->hidden & PP_SAMPLE_HIDE_THREAD))
		h = (h ^ si->tid) * 1099511628211ull;
	if (si->has_cpu)
		h = (h ^ (si->cpu + 1)) * 1099511628211ull;
	for (uint32_t i = 0; i < si->nlabels; i++)
		for (const char *c = si->labels[i].value; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
	(void)p;
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

struct figures {
	uint64_t series, requests, raw_bytes, wire_bytes, rate_bytes, largest_rate_bytes;
	uint64_t samples, profiles_over;
};

static int measure(const struct sim *s, enum ptype t, struct figures *f)
{
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES,
				      pp_split_burst_budget(s->burst)};
	struct pp_profile *p = node_window(s, t, 1);
	struct pp_otlp_resource res = {.host_name = "node-0001", .node_name = "node-0001"};
	struct pp_split by_service, by_resource;
	uint64_t *keys;
	size_t n, nk = 0;
	int err;

	if (!p)
		return -ENOMEM;
	n = pp_profile_sample_count(p);
	f->samples += n;
	keys = calloc(n + 1, sizeof(*keys));
	err = keys ? pp_split_profile(p, PP_SPLIT_BY_SERVICE, NULL, &lim, &by_service) : -ENOMEM;
	if (err)
		goto out;
	/* What Pyroscope counts and files: each service's pprof, its series. */
	for (size_t i = 0; i < by_service.nparts; i++) {
		const struct pp_profile *part = by_service.parts[i].profile;
		uint8_t *body = NULL;
		size_t len = 0;

		err = pp_pprof_encode(part, &body, &len);
		if (err)
			break;
		if (s->push) { /* one profile a request, counted whole by the rate limiter */
			f->rate_bytes += len;
			if (len > f->largest_rate_bytes)
				f->largest_rate_bytes = len;
			f->requests++;
			f->raw_bytes += len;
			f->wire_bytes += gz_len(body, len);
		}
		free(body);
		for (size_t j = 0; j < pp_profile_sample_count(part); j++)
			keys[nk++] = series_key(part, pp_profile_get_sample(part, j),
						by_service.parts[i].service);
	}
	pp_split_fini(&by_service);
	if (!err && !s->push) {
		err = pp_split_profile(p, PP_SPLIT_BY_RESOURCE, NULL, &lim, &by_resource);
		for (size_t i = 0; !err && i < by_resource.nparts; i++) {
			const struct pp_profile *part = by_resource.parts[i].profile;
			uint8_t *body = NULL;
			size_t len = 0;

			uint64_t counted = 0;

			err = pp_otlp_encode(&part, 1, &res, &body, &len);
			if (!err) {
				f->requests++;
				f->raw_bytes += len;
				f->wire_bytes += gz_len(body, len);
				err = pp_test_request_rate_bytes(part, &counted);
			}
			free(body);
			f->rate_bytes += counted;
			if (counted > f->largest_rate_bytes)
				f->largest_rate_bytes = counted;
		}
		if (!err)
			pp_split_fini(&by_resource);
	}
	qsort(keys, nk, sizeof(*keys), cmp_u64);
	for (size_t i = 0; i < nk; i++)
		f->series += !i || keys[i] != keys[i - 1];
out:
	free(keys);
	pp_profile_free(p);
	return err;
}

static int parse_labels(struct sim *s, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "thread"))
			s->drop &= ~PP_SESSION_DROP_THREAD;
		else if (!strcmp(tok, "pid"))
			s->drop &= ~PP_SESSION_DROP_PID;
		else if (!strcmp(tok, "cpu"))
			s->cpu = true;
		else if (!strcmp(tok, "memory"))
			s->drop &= ~PP_SESSION_DROP_MEMORY_DETAIL;
		else if (strcmp(tok, "none")) {
			free(copy);
			return -EINVAL;
		}
	}
	free(copy);
	return 0;
}

int main(int argc, char **argv)
{
	struct sim s = {.nodes = 1000,
			.pods = 50,
			.deployments = 400,
			.threads = 16,
			.cpus = 64,
			.hz = 20,
			.interval = 10,
			.cpu_per_pod = 0.5,
			.stacks = 1500,
			.skew = 3,
			.burst = PP_PYROSCOPE_BURST_BYTES,
			.drop = PP_SESSION_DROP_THREAD | PP_SESSION_DROP_PID |
				PP_SESSION_DROP_MEMORY_DETAIL};
	static const char *const tname[P_N] = {"cpu", "cycles", "mem_loads"};
	struct figures total = {0};
	int c;

	while ((c = getopt(argc, argv, "n:m:d:u:F:i:t:c:L:e:S:z:B:")) != -1) {
		switch (c) {
		case 'n':
			s.nodes = (unsigned)atoi(optarg);
			break;
		case 'm':
			s.pods = (unsigned)atoi(optarg);
			break;
		case 'd':
			s.deployments = (unsigned)atoi(optarg);
			break;
		case 'u':
			s.cpu_per_pod = atof(optarg);
			break;
		case 'F':
			s.hz = (unsigned)atoi(optarg);
			break;
		case 'i':
			s.interval = (unsigned)atoi(optarg);
			break;
		case 't':
			s.threads = (unsigned)atoi(optarg);
			break;
		case 'c':
			s.cpus = (unsigned)atoi(optarg);
			break;
		case 'L':
			if (parse_labels(&s, optarg)) {
				fprintf(stderr, "pp_fleet_sim: bad -L '%s'\n", optarg);
				return 2;
			}
			break;
		case 'e':
			s.push = !strcmp(optarg, "pyroscope");
			break;
		case 'S':
			s.stacks = (unsigned)atoi(optarg);
			break;
		case 'B':
			s.burst = strtoul(optarg, NULL, 10);
			break;
		case 'z':
			s.skew = atof(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: pp_fleet_sim [-n NODES] [-m PODS] [-d DEPLOYMENTS] "
				"[-u CPU_PER_POD] [-F HZ] [-i SECONDS] [-t THREADS] [-c CPUS] "
				"[-L LABELS] [-e otlp|pyroscope] [-S STACKS] [-z SKEW] [-B "
				"BURST_BYTES]\n");
			return 2;
		}
	}
	if (!s.nodes || !s.pods || !s.deployments || !s.threads || !s.cpus || !s.hz ||
	    !s.interval || s.cpu_per_pod <= 0 || !s.stacks || s.skew < 1) {
		fprintf(stderr, "pp_fleet_sim: every figure must be > 0\n");
		return 2;
	}
	for (int t = 0; t < P_N; t++) {
		struct figures f = {0};
		int err = measure(&s, (enum ptype)t, &f);

		if (err) {
			fprintf(stderr, "pp_fleet_sim: %s: %s\n", tname[t], strerror(-err));
			return 1;
		}
		printf("node_series_%s=%llu\n", tname[t], (unsigned long long)f.series);
		total.series += f.series;
		total.requests += f.requests;
		total.raw_bytes += f.raw_bytes;
		total.wire_bytes += f.wire_bytes;
		total.rate_bytes += f.rate_bytes;
		total.samples += f.samples;
		if (f.largest_rate_bytes > total.largest_rate_bytes)
			total.largest_rate_bytes = f.largest_rate_bytes;
	}
	printf("node_series=%llu\n", (unsigned long long)total.series);
	printf("node_samples_per_window=%llu\n", (unsigned long long)total.samples);
	printf("node_requests_per_window=%llu\n", (unsigned long long)total.requests);
	printf("node_wire_bytes_per_window=%llu\n", (unsigned long long)total.wire_bytes);
	printf("node_body_bytes_per_window=%llu\n", (unsigned long long)total.raw_bytes);
	printf("largest_request_rate_bytes=%llu\n", (unsigned long long)total.largest_rate_bytes);
	printf("fleet_series=%llu\n", (unsigned long long)total.series * s.nodes);
	printf("fleet_requests_per_s=%.1f\n", (double)total.requests * s.nodes / s.interval);
	printf("fleet_wire_bytes_per_s=%.0f\n", (double)total.wire_bytes * s.nodes / s.interval);
	printf("fleet_wire_bytes_per_day=%.0f\n",
	       (double)total.wire_bytes * s.nodes / s.interval * 86400);
	printf("fleet_rate_limited_bytes_per_s=%.0f\n",
	       (double)total.rate_bytes * s.nodes / s.interval);
	return 0;
}
