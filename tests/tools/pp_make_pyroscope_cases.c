/*
 * Writes one profile of every kind pebsprof produces, through the real writers, for the
 * Pyroscope acceptance check (tests/conformance/test_pyroscope_accepts.sh): for each case
 * DIR/<case>.otlp.pb (what `run` sends over OTLP) and DIR/<case>.pb.gz (what it pushes to
 * /ingest), and DIR/cases.txt listing "<case> <expected profile type ids, sorted,
 * comma-separated>". Cases: cpu-clock; cycles with -F (no fixed period: periods vary per sample)
 * and with -c; mem-loads, mem-stores and IBS op (memory events with latencies and memory labels); a
 * named PEBS event; and "pod", mem-loads in a Kubernetes pod with six extra resource attributes.
 * Every stack holds a named frame, a frame without a symbol ("libc.so.6+0x...") and a kernel
 * frame. Usage: pp_make_pyroscope_cases DIR
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

struct pcase {
	const char *name;
	const char *value_type; /* as the event ladder sets it */
	uint64_t period;	/* 0: -F */
	int mem;
	int pod;
};

static const struct pcase cases[] = {
    {"cpu_clock", "cpu", 10101010, 0, 0},
    {"cycles_freq", "cycles", 0, 0, 0},
    {"cycles_period", "cycles", 100003, 0, 0},
    {"mem_loads", "mem-loads", 20011, 1, 0},
    {"mem_stores", "mem-stores", 20011, 1, 0},
    {"ibs_op", "ibs_op/cnt_ctl=1/", 65536, 1, 0},
    {"pebs_named", "mem_load_retired.l3_miss", 50021, 0, 0},
    {"pod", "mem-loads", 20011, 1, 1},
};

static const struct pp_label pod_attrs[] = {
    {"container.id", "3f1b6c2a9d8e7f60a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"},
    {"container.runtime", "containerd"},
    {"k8s.pod.uid", "6b1f0a52-3c1d-4e8a-9f2b-7c0d1e2f3a4b"},
    {"k8s.pod.name", "checkout-7d9f8b6c5-x2x9z"},
    {"k8s.namespace.name", "shop"},
    {"k8s.container.name", "checkout"},
    {"k8s.deployment.name", "checkout"},
    {"service.name", "checkout"},
};

/* As OTEL_RESOURCE_ATTRIBUTES would give them; the last key is one Pyroscope v1.21 rejects. */
static const struct pp_label extra_attrs[] = {
    {"deployment.environment.name", "prod"},
    {"cloud.region", "eu-west-1"},
    {"cloud.availability_zone", "eu-west-1a"},
    {"team", "payments"},
    {"host.arch", "amd64"},
    {"app.kubernetes.io/name", "checkout"},
};

static uint32_t loc(struct pp_profile *p, uint32_t map, uint64_t addr, const char *fn,
		    enum pp_frame_kind kind)
{
	struct pp_location_info l = {
	    .mapping_id = map, .address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

static int fill(struct pp_profile *p, const struct pcase *c, uint64_t t0)
{
	struct pp_mapping_info app = {0x555555554000,
				      0x555555600000,
				      0x1000,
				      "/usr/bin/app",
				      "0123456789abcdef0123456789abcdef01234567",
				      0x555555553000};
	struct pp_mapping_info libc = {0x7ffff7dc0000,
				       0x7ffff7f50000,
				       0x28000,
				       "/usr/lib/x86_64-linux-gnu/libc.so.6",
				       "89abcdef0123456789abcdef0123456789abcdef",
				       0x7ffff7d98000};
	uint32_t mapp = pp_profile_intern_mapping(p, &app);
	uint32_t mlibc = pp_profile_intern_mapping(p, &libc);
	uint32_t res = c->pod ? pp_profile_intern_resource(p, pod_attrs,
							   sizeof(pod_attrs) / sizeof(pod_attrs[0]))
			      : 0;
	uint32_t stacks[3][4] = {
	    {loc(p, mlibc, 0x9a2b0, "libc.so.6+0x9a2b0", PP_FRAME_NATIVE),
	     loc(p, mapp, 0x1200, "handle_request", PP_FRAME_NATIVE),
	     loc(p, mapp, 0x1100, "main", PP_FRAME_NATIVE)},
	    {loc(p, 0, 0xffffffff81000100ULL, "do_syscall_64", PP_FRAME_KERNEL),
	     loc(p, mlibc, 0x11e4a0, "write", PP_FRAME_NATIVE),
	     loc(p, mapp, 0x1200, "handle_request", PP_FRAME_NATIVE),
	     loc(p, mapp, 0x1100, "main", PP_FRAME_NATIVE)},
	    {loc(p, mapp, 0x1300, "parse", PP_FRAME_NATIVE),
	     loc(p, mapp, 0x1100, "main", PP_FRAME_NATIVE)},
	};
	uint32_t nframes[3] = {3, 4, 2};
	struct pp_label mem_labels[] = {{"memory.level", "L3 hit"},
					{"memory.tlb", "L1 or L2 hit"},
					{"memory.snoop", "None"},
					{"memory.op", "LOAD"},
					{"memory.latency_bucket", "64-127"}};

	if (!mapp || !mlibc || (c->pod && !res))
		return -1;
	for (uint32_t i = 0; i < 3; i++) {
		/* With -F the kernel adapts the period: each sample carries its own. */
		uint64_t count = 10 * (i + 1), period = c->period ? c->period : 90000 + 7000 * i;
		struct pp_sample_info s = {
		    .locations = stacks[i],
		    .nlocations = nframes[i],
		    .pid = 4242,
		    .tid = 4243 + i,
		    .thread_name = i ? "worker" : "app",
		    .process_name = "app",
		    .process_path = "/usr/bin/app",
		    .labels = c->mem ? mem_labels : NULL,
		    .nlabels = c->mem ? 5 : 0,
		    .count = count,
		    .value = count * period,
		    .first_time_unix_ns = t0 + 1000000 * (i + 1),
		    .has_cpu = 1,
		    .cpu = i,
		    .latency = c->mem ? count * 150 : 0,
		    .resource_id = res,
		};

		if (pp_profile_add_sample(p, &s))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	struct timespec now;
	FILE *list;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/cases.txt", argv[1]);
	list = fopen(path, "w");
	if (!list) {
		perror(path);
		return 1;
	}
	/* Pyroscope takes profiles of the last hour only: the window is now. */
	clock_gettime(CLOCK_REALTIME, &now);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct pcase *c = &cases[i];
		uint64_t t0 = (uint64_t)now.tv_sec * 1000000000ULL - 10000000000ULL;
		struct pp_profile_desc d = {
		    .event = c->value_type,
		    .value_type = c->value_type,
		    .value_unit = strcmp(c->value_type, "cpu") ? "count" : "nanoseconds",
		    .period = c->period,
		    .start_unix_ns = t0,
		    .duration_ns = 10000000000ULL,
		    .mem_latency = (uint32_t)c->mem};
		struct pp_otlp_resource r = {.service_name = "shop",
					     .host_name = "node-1",
					     .node_name = "node-1",
					     .scope_version = "test",
					     .extra_attrs = c->pod ? extra_attrs : NULL,
					     .n_extra = c->pod ? 6 : 0};
		struct pp_profile *p = pp_profile_new(&d);
		const struct pp_profile *ps[1] = {p};
		char name[PP_PROFILE_TYPE_NAME_MAX];
		int err = !p || fill(p, c, t0);

		pp_profile_type_name(&d, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s.otlp.pb", argv[1], c->name);
		err = err || pp_otlp_write_file(ps, 1, &r, path);
		snprintf(path, sizeof(path), "%s/%s.pb.gz", argv[1], c->name);
		err = err || pp_pprof_write_file(p, path);
		if (err) {
			fprintf(stderr, "%s: cannot write case %s\n", argv[0], c->name);
			pp_profile_free(p);
			fclose(list);
			return 1;
		}
		if (pp_profile_is_cpu(&d))
			fprintf(list, "%s process_cpu:cpu:nanoseconds:cpu:nanoseconds\n", c->name);
		else if (c->mem)
			fprintf(list, "%s %s:latency:cycles:%s:count,%s:%s:count:%s:count\n",
				c->name, name, name, name, name, name);
		else
			fprintf(list, "%s %s:%s:count:%s:count\n", c->name, name, name, name);
		pp_profile_free(p);
	}
	return fclose(list) ? 1 : 0;
}
