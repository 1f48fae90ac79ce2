/*
 * Writes a profile with known contents through the exporter, for the conformance tests that
 * read it back with independent tools (go tool pprof, protoc, flamegraph viewers):
 *   process "app" (pid 100), period 1 ms of cpu-clock, 100 samples in all:
 *     main -> a -> b                       60 (35 on tid 101 "worker", 25 on tid 102 "worker")
 *     main -> c                            30
 *     main -> c -> do_syscall_64 (kernel)  10
 * Usage: pp_make_profile FILE... where each FILE's extension picks the format: .pb.gz
 * (gzipped pprof), .pb (raw pprof), .folded, .svg, .txt (top-functions report).
 */
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int add(struct pp_profile *p, const uint32_t *locs, uint32_t n, uint32_t tid, uint64_t count)
{
	struct pp_label labels[1] = {{"service", "checkout"}};
	struct pp_sample_info s = {
	    .locations = locs,
	    .nlocations = n,
	    .pid = 100,
	    .tid = tid,
	    .thread_name = "worker",
	    .process_name = "app",
	    .labels = labels,
	    .nlabels = 1,
	    .count = count,
	    .value = count * 1000000,
	    .first_time_unix_ns = 1700000000000000000ULL,
	};

	return pp_profile_add_sample(p, &s);
}

static struct pp_profile *make_profile(void)
{
	struct pp_profile_desc d = {
	    .event = "cpu-clock",
	    .value_type = "cpu",
	    .value_unit = "nanoseconds",
	    .period = 1000000,
	    .start_unix_ns = 1700000000000000000ULL,
	    .duration_ns = 1000000000ULL,
	};
	struct pp_mapping_info m = {.start = 0x400000,
				    .limit = 0x500000,
				    .file_offset = 0,
				    .filename = "/usr/bin/app",
				    .build_id = "0123456789abcdef0123456789abcdef01234567"};
	struct pp_location_info l = {.kind = PP_FRAME_NATIVE};
	uint32_t map, main_id, a, b, c, k;
	struct pp_profile *p = pp_profile_new(&d);

	if (!p)
		return NULL;
	map = pp_profile_intern_mapping(p, &m);
	l.mapping_id = map;
	l.address = 0x401000, l.function = "main";
	main_id = pp_profile_intern_location(p, &l);
	l.address = 0x401100, l.function = "a";
	a = pp_profile_intern_location(p, &l);
	l.address = 0x401200, l.function = "b";
	b = pp_profile_intern_location(p, &l);
	l.address = 0x401300, l.function = "c";
	c = pp_profile_intern_location(p, &l);
	/* No kernel mapping given: the pprof encoder must supply "[kernel.kallsyms]". */
	l.mapping_id = 0, l.address = 0xffffffff81000100ULL, l.function = "do_syscall_64";
	l.kind = PP_FRAME_KERNEL;
	k = pp_profile_intern_location(p, &l);
	if (!map || !main_id || !a || !b || !c || !k)
		goto fail;

	{
		uint32_t s1[] = {b, a, main_id}, s2[] = {c, main_id}, s3[] = {k, c, main_id};

		if (add(p, s1, 3, 101, 35) || add(p, s1, 3, 102, 25) || add(p, s2, 2, 101, 30) ||
		    add(p, s3, 3, 101, 10))
			goto fail;
	}
	return p;
fail:
	pp_profile_free(p);
	return NULL;
}

int main(int argc, char **argv)
{
	struct pp_profile *p;
	int rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE.{pb.gz,pb,folded,svg,txt}...\n", argv[0]);
		return 2;
	}
	p = make_profile();
	if (!p) {
		fprintf(stderr, "pp_make_profile: cannot build the profile\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		const char *path = argv[i];
		int err;

		if (ends_with(path, ".pb.gz")) {
			err = pp_pprof_write_file(p, path);
		} else if (ends_with(path, ".pb")) {
			uint8_t *buf = NULL;
			size_t len = 0;
			FILE *f;

			err = pp_pprof_encode(p, &buf, &len);
			if (!err) {
				f = fopen(path, "wb");
				if (!f || fwrite(buf, 1, len, f) != len)
					err = -EIO;
				if (f && fclose(f) != 0)
					err = -EIO;
			}
			free(buf);
		} else if (ends_with(path, ".folded")) {
			err = pp_folded_write_file(p, path);
		} else if (ends_with(path, ".svg")) {
			err = pp_flamegraph_write_file(p, path, "pp_make_profile");
		} else if (ends_with(path, ".txt")) {
			FILE *f = fopen(path, "w");

			err = f ? 0 : -errno;
			if (f) {
				pp_report_print_top(p, f, 20);
				if (fclose(f) != 0)
					err = -EIO;
			}
		} else {
			fprintf(stderr, "pp_make_profile: %s: unknown extension\n", path);
			rc = 2;
			continue;
		}
		if (err) {
			fprintf(stderr, "pp_make_profile: %s: %s\n", path, strerror(-err));
			rc = 1;
		}
	}
	pp_profile_free(p);
	return rc;
}
