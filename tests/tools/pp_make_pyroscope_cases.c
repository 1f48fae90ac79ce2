/*
 * Writes one profile of every kind pebsprof produces, through the real writers, for the
 * Pyroscope acceptance check (tests/conformance/test_pyroscope_accepts.sh): for each case
 * DIR/<case>.otlp.pb (what `run` sends over OTLP) and DIR/<case>.pb.gz (what it pushes to
 * /ingest), and DIR/cases.txt listing "<case> <expected profile type ids, sorted,
 * comma-separated>". Cases: cpu-clock; cycles with -F (no fixed period: periods vary per sample)
 * and with -c; mem-loads, mem-stores and IBS op (memory events with latencies and memory labels); a
 * named PEBS event; and "pod", mem-loads in a Kubernetes pod with six extra resource attributes.
 * Every stack holds a named frame, a frame without a symbol ("libc.so.6+0x...") and a kernel
 * frame. And the names a node gives (write_names): one window of samples of kernel threads, the
 * idle task, executables and comm Pyroscope's /ingest refuses as they are, and a pod whose
 * label names it refuses, cut by service as `run` pushes it: DIR/names_<i>.pb.gz with
 * DIR/names.txt listing "names_<i> <service>", and DIR/names_raw.txt the raw names.
 * Usage: pp_make_pyroscope_cases DIR
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>
#include <pebsprof/split.h>
#include <pebsprof/writers.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

static int fill(struct pp_profile *p, const struct pcase *c, uint64_t t0);

/*
 * A cpu-clock window with off-CPU samples (record and run --off-cpu): DIR/off_cpu.otlp.pb,
 * the event's push DIR/off_cpu.pb.gz and the off-CPU push DIR/off_cpu.off.pb.gz.
 */
static int write_off_cpu(const char *dir, uint64_t t0)
{
	static const struct pcase c = {"off_cpu", "cpu", 10101010, 0, 0};
	struct pp_profile_desc d = {.event = "cpu-clock",
				    .value_type = "cpu",
				    .value_unit = "nanoseconds",
				    .period = c.period,
				    .start_unix_ns = t0,
				    .duration_ns = 10000000000ULL};
	struct pp_otlp_resource r = {
	    .service_name = "shop", .host_name = "node-1", .node_name = "node-1"};
	struct pp_profile *p = pp_profile_new(&d);
	const struct pp_profile *ps[1] = {p};
	uint8_t *body = NULL;
	size_t len = 0;
	char path[4096];
	FILE *f;
	int err = !p || fill(p, &c, t0);

	/* each stack also waited, in two states */
	for (size_t i = 0; !err && i < pp_profile_sample_count(p) && i < 3; i++) {
		struct pp_sample_info w = *pp_profile_get_sample(p, i);

		w.wait = i ? PP_WAIT_SLEEPING : PP_WAIT_DISK;
		w.count = 2;
		w.value = 30000000 * (i + 1);
		err = pp_profile_add_sample(p, &w) != 0;
	}
	snprintf(path, sizeof(path), "%s/off_cpu.otlp.pb", dir);
	err = err || pp_otlp_write_file(ps, 1, &r, path);
	snprintf(path, sizeof(path), "%s/off_cpu.pb.gz", dir);
	err = err || pp_pprof_write_file(p, path);
	err = err || pp_pprof_encode_off_cpu(p, &body, &len);
	snprintf(path, sizeof(path), "%s/off_cpu.off.pb", dir);
	if (!err && (f = fopen(path, "wb"))) {
		err = fwrite(body, 1, len, f) != len;
		err |= fclose(f) != 0;
	} else {
		err = 1;
	}
	free(body);
	pp_profile_free(p);
	return err ? -1 : 0;
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

/* The name classes of a real node; the comments say what Pyroscope answered to them raw. */
static const struct {
	const char *process;
	uint32_t pid;
	enum pp_process_kind kind;
} node_names[] = {
    {"[kdamond.0]", 31, PP_PROCESS_KERNEL_THREAD},		  /* HTTP 400: '[' */
    {"[ksoftirqd/0]", 14, PP_PROCESS_KERNEL_THREAD},		  /* HTTP 400 */
    {"[kworker/0:2-virtio_vsock]", 40, PP_PROCESS_KERNEL_THREAD}, /* HTTP 400 */
    {"[idle]", 0, PP_PROCESS_IDLE},				  /* HTTP 400 */
    {"[wc]", 900, PP_PROCESS_PROGRAM},				  /* HTTP 400 */
    {"memfd:sealed-\xe2\x80\xa6", 901, PP_PROCESS_PROGRAM},	  /* HTTP 400: ':' */
    {"x86_64-linux-gnu-g++-12", 902, PP_PROCESS_PROGRAM},	  /* HTTP 400: '+' */
    {"evil{service_name=x,a=b}", 903, PP_PROCESS_PROGRAM},	  /* would set labels */
    {" ", 904, PP_PROCESS_PROGRAM},				  /* "service name is required" */
    {"python3.11", 905, PP_PROCESS_PROGRAM},			  /* accepted as it is */
};

/* A pod whose label names Pyroscope v1.21 refuses (or reads as one) as they are. */
static const struct pp_label odd_pod[] = {
    {"container.id", "5e7a0c1d2b3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b"},
    {"k8s.pod.name", "checkout-7d9f8b6c5-x2x9z"},
    {"k8s.pod.label.app.kubernetes.io/part-of", "shop"},
    {"k8s.pod.label.app.kubernetes.io_part-of", "other"},
    {"2fa", "on"},
    {"service.name", "checkout v2"},
};

static int write_names(const char *dir, uint64_t t0)
{
	struct pp_profile_desc d = {.event = "cpu-clock",
				    .value_type = "cpu",
				    .value_unit = "nanoseconds",
				    .period = 10101010,
				    .start_unix_ns = t0,
				    .duration_ns = 10000000000ULL};
	struct pp_split_limits lim = {PP_PYROSCOPE_MAX_SAMPLES, PP_PYROSCOPE_MAX_PROFILE_BYTES, 0};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t locs[2], res;
	struct pp_split split;
	char path[4096];
	FILE *list, *raw;
	int err = 0;

	if (!p)
		return -1;
	locs[0] = loc(p, 0, 0xffffffff81000100ULL, "do_syscall_64", PP_FRAME_KERNEL);
	locs[1] = loc(p, 0, 0xffffffff81000200ULL, "ret_from_fork", PP_FRAME_KERNEL);
	res = pp_profile_intern_resource(p, odd_pod, sizeof(odd_pod) / sizeof(odd_pod[0]));
	snprintf(path, sizeof(path), "%s/names_raw.txt", dir);
	raw = fopen(path, "w");
	snprintf(path, sizeof(path), "%s/names.txt", dir);
	list = fopen(path, "w");
	if (!locs[0] || !locs[1] || !res || !raw || !list)
		err = -1;
	for (size_t i = 0; !err && i <= sizeof(node_names) / sizeof(node_names[0]); i++) {
		bool pod = i == sizeof(node_names) / sizeof(node_names[0]);
		struct pp_sample_info s = {
		    .locations = locs,
		    .nlocations = 2,
		    .pid = pod ? 7000 : node_names[i].pid,
		    .tid = pod ? 7000 : node_names[i].pid,
		    .thread_name = pod ? "checkout" : node_names[i].process,
		    .process_name = pod ? "checkout" : node_names[i].process,
		    .process_kind = pod ? PP_PROCESS_PROGRAM : node_names[i].kind,
		    .count = 1 + i,
		    .value = (1 + i) * d.period,
		    .first_time_unix_ns = t0 + 1000,
		    .resource_id = pod ? res : 0,
		};

		err = pp_profile_add_sample(p, &s);
		if (!pod)
			fprintf(raw, "%s\n", node_names[i].process);
	}
	if (!err && pp_split_profile(p, PP_SPLIT_BY_SERVICE, NULL, &lim, &split) == 0) {
		for (size_t i = 0; !err && i < split.nparts; i++) {
			snprintf(path, sizeof(path), "%s/names_%zu.pb.gz", dir, i);
			err = pp_pprof_write_file(split.parts[i].profile, path);
			fprintf(list, "names_%zu %s\n", i, split.parts[i].service);
		}
		pp_split_fini(&split);
	} else {
		err = -1;
	}
	if (raw && fclose(raw))
		err = -1;
	if (list && fclose(list))
		err = -1;
	pp_profile_free(p);
	return err;
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
	if (write_off_cpu(argv[1], (uint64_t)now.tv_sec * 1000000000ULL - 10000000000ULL)) {
		fprintf(stderr, "%s: cannot write the off-CPU case\n", argv[0]);
		fclose(list);
		return 1;
	}
	if (write_names(argv[1], (uint64_t)now.tv_sec * 1000000000ULL - 10000000000ULL)) {
		fprintf(stderr, "%s: cannot write the names cases\n", argv[0]);
		fclose(list);
		return 1;
	}
	return fclose(list) ? 1 : 0;
}
