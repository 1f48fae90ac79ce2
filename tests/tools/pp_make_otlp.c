/*
 * Writes a known set of profiles as one OTLP ExportProfilesServiceRequest (.otlp.pb), for
 * the conformance tests that read it back with protoc and the reference-schema Python
 * classes. Contents (window 2026-01-01T00:00:00Z + 1 s unless noted):
 *   cpu-clock, period 1 ms:
 *     process "app" (pid 100, /usr/bin/app, build id 0123...67):
 *       main -> a -> memcpy (libc)          40   tid 101 "worker", label service=checkout
 *       main -> a -> do_syscall_64 (kernel)  15   tid 102 "worker"
 *     process "db" (pid 200, /usr/bin/db, no build id):
 *       main -> memcpy (libc, same address)  30   tid 201 "db-main"
 *   cycles, period 100000: app only, main -> a  7  tid 101
 * Resource: service.name "shop", host.name "host-1", k8s.node.name "node-a", and
 * deployment.environment.name "test" as if from OTEL_RESOURCE_ATTRIBUTES.
 * Usage: pp_make_otlp FILE.otlp.pb
 */
#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>

#include <stdio.h>
#include <string.h>

#define T0 1767225600000000000ULL

static int add(struct pp_profile *p, const uint32_t *locs, uint32_t n, uint32_t pid, uint32_t tid,
	       const char *thread, const char *proc, const struct pp_label *labels,
	       uint32_t nlabels, uint64_t count)
{
	struct pp_sample_info s = {
	    .locations = locs,
	    .nlocations = n,
	    .pid = pid,
	    .tid = tid,
	    .thread_name = thread,
	    .process_name = proc,
	    .labels = labels,
	    .nlabels = nlabels,
	    .count = count,
	    .value = count * pp_profile_get_desc(p)->period,
	    .first_time_unix_ns = T0 + 1000,
	};

	return pp_profile_add_sample(p, &s);
}

static uint32_t loc(struct pp_profile *p, uint32_t map, uint64_t addr, const char *fn,
		    enum pp_frame_kind kind)
{
	struct pp_location_info l = {
	    .mapping_id = map, .address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

static int make(struct pp_profile *cpu, struct pp_profile *cyc)
{
	struct pp_mapping_info app = {0x555555554000,
				      0x555555600000,
				      0x1000,
				      "/usr/bin/app",
				      "0123456789abcdef0123456789abcdef01234567",
				      0x555555553000};
	struct pp_mapping_info db = {0x555555554000, 0x555555600000, 0x1000, "/usr/bin/db", "",
				     0x555555553000};
	struct pp_mapping_info libc = {0x7ffff7dc0000,
				       0x7ffff7f50000,
				       0x28000,
				       "/usr/lib/x86_64-linux-gnu/libc.so.6",
				       "c89b11207f6479603b0d49bf291c092c2b719293",
				       0x7ffff7d98000};
	struct pp_mapping_info kern = {0, UINT64_MAX, 0, "[kernel.kallsyms]", "", 0};
	struct pp_label svc[] = {{"service", "checkout"}};
	uint32_t m_app = pp_profile_intern_mapping(cpu, &app);
	uint32_t m_db = pp_profile_intern_mapping(cpu, &db);
	uint32_t m_libc = pp_profile_intern_mapping(cpu, &libc);
	uint32_t m_kern = pp_profile_intern_mapping(cpu, &kern);
	uint32_t main_app = loc(cpu, m_app, 0x1140, "main", PP_FRAME_NATIVE);
	uint32_t a = loc(cpu, m_app, 0x1200, "a", PP_FRAME_NATIVE);
	uint32_t mc = loc(cpu, m_libc, 0x9a0f0, "memcpy", PP_FRAME_NATIVE);
	uint32_t ks = loc(cpu, m_kern, 0xffffffff81000100ULL, "do_syscall_64", PP_FRAME_KERNEL);
	uint32_t main_db = loc(cpu, m_db, 0x1140, "main", PP_FRAME_NATIVE);

	if (!m_app || !m_db || !m_libc || !m_kern || !main_app || !a || !mc || !ks || !main_db)
		return -1;
	{
		uint32_t s1[] = {mc, a, main_app}, s2[] = {ks, a, main_app}, s3[] = {mc, main_db};

		if (add(cpu, s1, 3, 100, 101, "worker", "app", svc, 1, 40) ||
		    add(cpu, s2, 3, 100, 102, "worker", "app", NULL, 0, 15) ||
		    add(cpu, s3, 2, 200, 201, "db-main", "db", NULL, 0, 30))
			return -1;
	}
	m_app = pp_profile_intern_mapping(cyc, &app);
	main_app = loc(cyc, m_app, 0x1140, "main", PP_FRAME_NATIVE);
	a = loc(cyc, m_app, 0x1200, "a", PP_FRAME_NATIVE);
	if (!m_app || !main_app || !a)
		return -1;
	{
		uint32_t s1[] = {a, main_app};

		return add(cyc, s1, 2, 100, 101, "worker", "app", NULL, 0, 7);
	}
}

int main(int argc, char **argv)
{
	struct pp_profile_desc dc = {.event = "cpu-clock",
				     .value_type = "cpu",
				     .value_unit = "nanoseconds",
				     .period = 1000000,
				     .start_unix_ns = T0,
				     .duration_ns = 1000000000};
	struct pp_profile_desc dy = {.event = "cycles",
				     .value_type = "cycles",
				     .value_unit = "count",
				     .period = 100000,
				     .start_unix_ns = T0,
				     .duration_ns = 1000000000};
	struct pp_label extra[] = {{"deployment.environment.name", "test"}};
	struct pp_otlp_resource res = {.service_name = "shop",
				       .host_name = "host-1",
				       .node_name = "node-a",
				       .scope_version = "test",
				       .extra_attrs = extra,
				       .n_extra = 1};
	struct pp_profile *cpu, *cyc;
	int rc = 0, err;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE.otlp.pb\n", argv[0]);
		return 2;
	}
	cpu = pp_profile_new(&dc);
	cyc = pp_profile_new(&dy);
	if (!cpu || !cyc || make(cpu, cyc)) {
		fprintf(stderr, "pp_make_otlp: cannot build the profiles\n");
		rc = 1;
	} else {
		const struct pp_profile *profs[] = {cpu, cyc};

		err = pp_otlp_write_file(profs, 2, &res, argv[1]);
		if (err) {
			fprintf(stderr, "pp_make_otlp: %s: %s\n", argv[1], strerror(-err));
			rc = 1;
		}
	}
	pp_profile_free(cpu);
	pp_profile_free(cyc);
	return rc;
}
