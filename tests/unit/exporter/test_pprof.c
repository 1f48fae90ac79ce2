/*
 * Unit tests of the pprof encoder: decode what pp_pprof_encode produced with protobuf-c and
 * check structure (string table, ids, indexes), content (types, values, labels, mappings,
 * functions), the gzip file writer, and that failed writes leave nothing behind.
 */
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include "check.h"
#include "pprof/profile.pb-c.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile Profile;

static struct pp_profile *known(void)
{
	struct pp_profile_desc d = {.event = "cpu-clock",
				    .value_type = "cpu",
				    .value_unit = "nanoseconds",
				    .period = 1000000,
				    .start_unix_ns = 1700000000123456789ULL,
				    .duration_ns = 5000000000ULL};
	struct pp_mapping_info m = {.start = 0x400000,
				    .limit = 0x500000,
				    .file_offset = 0x1000,
				    .filename = "/usr/bin/app",
				    .build_id = "feedface"};
	struct pp_location_info l = {.kind = PP_FRAME_NATIVE};
	struct pp_label lab[1] = {{"container", "web"}};
	struct pp_profile *p = pp_profile_new(&d);
	uint32_t map, main_id, a, a2, b, k;
	struct pp_sample_info s = {.pid = 100,
				   .tid = 101,
				   .thread_name = "worker",
				   .process_name = "app",
				   .labels = lab,
				   .nlabels = 1};

	if (!p)
		return NULL;
	map = pp_profile_intern_mapping(p, &m);
	l.mapping_id = map;
	l.address = 0x401000, l.function = "main";
	main_id = pp_profile_intern_location(p, &l);
	l.address = 0x401100, l.function = "a";
	a = pp_profile_intern_location(p, &l);
	/* A second address in the same function: one Function, two Locations. */
	l.address = 0x401180, l.function = "a";
	a2 = pp_profile_intern_location(p, &l);
	l.address = 0x401200, l.function = "b";
	b = pp_profile_intern_location(p, &l);
	l.mapping_id = 0, l.address = 0xffffffff81000000ULL, l.function = "b";
	l.kind = PP_FRAME_KERNEL; /* same name in the kernel: a distinct Function */
	k = pp_profile_intern_location(p, &l);
	{
		uint32_t s1[] = {b, a, main_id}, s2[] = {k, a2, main_id};

		s.locations = s1, s.nlocations = 3, s.count = 6, s.value = 6000000;
		if (pp_profile_add_sample(p, &s))
			goto fail;
		s.locations = s2, s.tid = 102, s.thread_name = "io", s.count = 4, s.value = 4000000;
		s.nlabels = 0;
		if (pp_profile_add_sample(p, &s))
			goto fail;
	}
	return p;
fail:
	pp_profile_free(p);
	return NULL;
}

static const char *str(const Profile *pr, int64_t i)
{
	if (i < 0 || (size_t)i >= pr->n_string_table)
		return NULL;
	return pr->string_table[i];
}

static const Perftools__Profiles__Label *
label(const Profile *pr, const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++) {
		const char *k = str(pr, s->label[i]->key);

		if (k && strcmp(k, key) == 0)
			return s->label[i];
	}
	return NULL;
}

static const Perftools__Profiles__Location *location(const Profile *pr, uint64_t id)
{
	for (size_t i = 0; i < pr->n_location; i++) {
		if (pr->location[i]->id == id)
			return pr->location[i];
	}
	return NULL;
}

static const Perftools__Profiles__Function *function(const Profile *pr, uint64_t id)
{
	for (size_t i = 0; i < pr->n_function; i++) {
		if (pr->function[i]->id == id)
			return pr->function[i];
	}
	return NULL;
}

static const Perftools__Profiles__Mapping *mapping(const Profile *pr, uint64_t id)
{
	for (size_t i = 0; i < pr->n_mapping; i++) {
		if (pr->mapping[i]->id == id)
			return pr->mapping[i];
	}
	return NULL;
}

/* The leaf function name of sample s. */
static const char *leaf_name(const Profile *pr, const Perftools__Profiles__Sample *s)
{
	const Perftools__Profiles__Location *l;
	const Perftools__Profiles__Function *f;

	if (!s->n_location_id)
		return NULL;
	l = location(pr, s->location_id[0]);
	if (!l || l->n_line != 1)
		return NULL;
	f = function(pr, l->line[0]->function_id);
	return f ? str(pr, f->name) : NULL;
}

/* Every id and string index in range; ids unique and non-zero. Returns the failures. */
static int check_structure(const Profile *pr)
{
	int bad = 0;

	bad += pr->n_string_table == 0 || strcmp(pr->string_table[0], "") != 0;
	for (size_t i = 0; i < pr->n_sample_type; i++)
		bad += !str(pr, pr->sample_type[i]->type) || !str(pr, pr->sample_type[i]->unit);
	for (size_t i = 0; i < pr->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = pr->mapping[i];

		bad += m->id == 0 || mapping(pr, m->id) != m;
		bad += !str(pr, m->filename) || !str(pr, m->build_id);
	}
	for (size_t i = 0; i < pr->n_function; i++) {
		const Perftools__Profiles__Function *f = pr->function[i];

		bad += f->id == 0 || function(pr, f->id) != f;
		bad += !str(pr, f->name) || !str(pr, f->system_name) || !str(pr, f->filename);
	}
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];

		bad += l->id == 0 || location(pr, l->id) != l;
		bad += l->mapping_id != 0 && !mapping(pr, l->mapping_id);
		for (size_t j = 0; j < l->n_line; j++)
			bad += !function(pr, l->line[j]->function_id);
	}
	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];

		bad += s->n_value != pr->n_sample_type;
		for (size_t j = 0; j < s->n_location_id; j++)
			bad += !location(pr, s->location_id[j]);
		for (size_t j = 0; j < s->n_label; j++)
			bad += !str(pr, s->label[j]->key) || !str(pr, s->label[j]->str);
	}
	return bad;
}

static Profile *encode_decode(const struct pp_profile *p)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	Profile *pr;

	if (pp_pprof_encode(p, &buf, &len) != 0)
		return NULL;
	pr = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	return pr;
}

TEST(encode_known)
{
	struct pp_profile *p = known();
	const Perftools__Profiles__Sample *s0 = NULL, *s1 = NULL;
	const Perftools__Profiles__Mapping *km = NULL, *um;
	const Perftools__Profiles__Label *l;
	Profile *pr;
	int nb = 0;

	REQUIRE(p);
	pr = encode_decode(p);
	REQUIRE(pr);
	CHECK_EQ_U64(check_structure(pr), 0);
	CHECK_STR(pr->string_table[0], "");

	REQUIRE(pr->n_sample_type == 2);
	CHECK_STR(str(pr, pr->sample_type[0]->type), "samples");
	CHECK_STR(str(pr, pr->sample_type[0]->unit), "count");
	CHECK_STR(str(pr, pr->sample_type[1]->type), "cpu");
	CHECK_STR(str(pr, pr->sample_type[1]->unit), "nanoseconds");
	REQUIRE(pr->period_type);
	CHECK_STR(str(pr, pr->period_type->type), "cpu");
	CHECK_STR(str(pr, pr->period_type->unit), "nanoseconds");
	CHECK_EQ_U64(pr->period, 1000000);
	CHECK_EQ_U64(pr->time_nanos, 1700000000123456789ULL);
	CHECK_EQ_U64(pr->duration_nanos, 5000000000ULL);

	/* Mappings: ours, plus the kernel one the encoder supplies. */
	REQUIRE(pr->n_mapping == 2);
	um = mapping(pr, 1);
	REQUIRE(um);
	CHECK_EQ_U64(um->memory_start, 0x400000);
	CHECK_EQ_U64(um->memory_limit, 0x500000);
	CHECK_EQ_U64(um->file_offset, 0x1000);
	CHECK_STR(str(pr, um->filename), "/usr/bin/app");
	CHECK_STR(str(pr, um->build_id), "feedface");
	CHECK(um->has_functions);
	km = mapping(pr, 2);
	REQUIRE(km);
	CHECK_STR(str(pr, km->filename), "[kernel.kallsyms]");
	CHECK(km->memory_start <= 0xffffffff81000000ULL &&
	      km->memory_limit > 0xffffffff81000000ULL);

	CHECK_EQ_U64(pr->n_location, 5);
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *lo = pr->location[i];

		REQUIRE(lo->n_line == 1);
		if (lo->address == 0xffffffff81000000ULL)
			CHECK_EQ_U64(lo->mapping_id, 2);
		else
			CHECK_EQ_U64(lo->mapping_id, 1);
	}
	/* main, a, b (native), b (kernel): the two "a" locations share a Function. */
	CHECK_EQ_U64(pr->n_function, 4);
	for (size_t i = 0; i < pr->n_function; i++) {
		const Perftools__Profiles__Function *f = pr->function[i];

		CHECK_EQ_U64(f->id, i + 1);
		CHECK(f->name == f->system_name);
		if (strcmp(str(pr, f->name), "b") == 0)
			nb++;
		if (strcmp(str(pr, f->name), "main") == 0)
			CHECK_STR(str(pr, f->filename), "/usr/bin/app");
	}
	CHECK_EQ_U64(nb, 2);

	REQUIRE(pr->n_sample == 2);
	for (size_t i = 0; i < 2; i++) {
		if (pr->sample[i]->value[0] == 6)
			s0 = pr->sample[i];
		else
			s1 = pr->sample[i];
	}
	REQUIRE(s0 && s1);
	CHECK_EQ_U64(s0->value[1], 6000000);
	CHECK_EQ_U64(s1->value[0], 4);
	CHECK_EQ_U64(s1->value[1], 4000000);
	REQUIRE(s0->n_location_id == 3);
	CHECK_STR(leaf_name(pr, s0), "b");
	CHECK_EQ_U64(location(pr, s0->location_id[0])->address, 0x401200);
	CHECK_EQ_U64(location(pr, s0->location_id[2])->address, 0x401000);
	CHECK_EQ_U64(location(pr, s1->location_id[0])->mapping_id, 2);
	CHECK_EQ_U64(location(pr, s1->location_id[1])->line[0]->function_id,
		     location(pr, s0->location_id[1])->line[0]->function_id);

	l = label(pr, s0, "pid");
	REQUIRE(l);
	CHECK_EQ_U64(l->num, 100);
	CHECK_EQ_U64(l->str, 0);
	l = label(pr, s0, "tid");
	REQUIRE(l);
	CHECK_EQ_U64(l->num, 101);
	l = label(pr, s0, "thread_name");
	REQUIRE(l);
	CHECK_STR(str(pr, l->str), "worker");
	l = label(pr, s0, "process_name");
	REQUIRE(l);
	CHECK_STR(str(pr, l->str), "app");
	l = label(pr, s0, "container");
	REQUIRE(l);
	CHECK_STR(str(pr, l->str), "web");
	CHECK_EQ_U64(s0->n_label, 5);
	CHECK_EQ_U64(s1->n_label, 4);
	CHECK(label(pr, s1, "container") == NULL);
	l = label(pr, s1, "thread_name");
	REQUIRE(l);
	CHECK_STR(str(pr, l->str), "io");

	/* Strings are deduplicated. */
	for (size_t i = 0; i < pr->n_string_table; i++) {
		for (size_t j = i + 1; j < pr->n_string_table; j++)
			CHECK(strcmp(pr->string_table[i], pr->string_table[j]) != 0);
	}
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
}

TEST(encode_empty)
{
	struct pp_profile_desc d = {.event = "cycles", .period = 100003};
	struct pp_profile *p = pp_profile_new(&d);
	Profile *pr;

	REQUIRE(p);
	pr = encode_decode(p);
	REQUIRE(pr);
	CHECK_EQ_U64(check_structure(pr), 0);
	CHECK_EQ_U64(pr->n_sample, 0);
	CHECK_EQ_U64(pr->n_mapping, 0);
	/* A hardware event: one sample type, the event's count (profile.h). */
	REQUIRE(pr->n_sample_type == 1);
	CHECK_STR(str(pr, pr->sample_type[0]->type), "cycles");
	CHECK_STR(str(pr, pr->sample_type[0]->unit), "count");
	CHECK_STR(str(pr, pr->period_type->type), "cycles");
	CHECK_EQ_U64(pr->period, 100003);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
	CHECK(pp_pprof_encode(NULL, NULL, NULL) == -EINVAL);
}

/* A caller-given kernel mapping is used as is; no second one is made up. */
TEST(kernel_mapping_given)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_mapping_info km = {.start = 0xffffffff81000000ULL,
				     .limit = 0xffffffff82000000ULL,
				     .filename = "[kernel.kallsyms]"};
	struct pp_location_info l = {
	    .address = 0xffffffff81000010ULL, .function = "schedule", .kind = PP_FRAME_KERNEL};
	struct pp_sample_info s = {
	    .nlocations = 1, .thread_name = "t", .process_name = "p", .count = 1};
	uint32_t id;
	Profile *pr;

	REQUIRE(p);
	l.mapping_id = pp_profile_intern_mapping(p, &km);
	id = pp_profile_intern_location(p, &l);
	s.locations = &id;
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	pr = encode_decode(p);
	REQUIRE(pr);
	CHECK_EQ_U64(check_structure(pr), 0);
	CHECK_EQ_U64(pr->n_mapping, 1);
	REQUIRE(pr->n_location == 1);
	CHECK_EQ_U64(pr->location[0]->mapping_id, 1);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
}

static char tmpdir[256];

static int make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pp_test_pprof.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

/* Number of entries in dir other than . and .. */
static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	}
	closedir(d);
	return n;
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

TEST(write_file_gzip)
{
	struct pp_profile *p = known();
	uint8_t *raw = NULL, *gz, *inflated;
	size_t raw_len = 0, gz_len = 0;
	char path[512];
	z_stream zs;
	struct stat st;

	REQUIRE(p);
	REQUIRE(make_tmpdir() == 0);
	snprintf(path, sizeof(path), "%s/out.pb.gz", tmpdir);
	REQUIRE(pp_pprof_write_file(p, path) == 0);
	REQUIRE(stat(path, &st) == 0);
	CHECK((st.st_mode & 0777) == 0644);
	CHECK_EQ_U64(dir_entries(tmpdir), 1); /* no temporary left over */
	REQUIRE(pp_pprof_encode(p, &raw, &raw_len) == 0);
	gz = read_all(path, &gz_len);
	REQUIRE(gz && gz_len > 18);
	CHECK(gz[0] == 0x1f && gz[1] == 0x8b);

	inflated = malloc(raw_len + 16);
	REQUIRE(inflated);
	memset(&zs, 0, sizeof(zs));
	REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
	zs.next_in = gz;
	zs.avail_in = (uInt)gz_len;
	zs.next_out = inflated;
	zs.avail_out = (uInt)raw_len + 16;
	CHECK(inflate(&zs, Z_FINISH) == Z_STREAM_END);
	CHECK_EQ_U64(zs.total_out, raw_len);
	CHECK(memcmp(inflated, raw, raw_len) == 0);
	inflateEnd(&zs);

	/* Overwriting replaces the file whole. */
	REQUIRE(pp_pprof_write_file(p, path) == 0);
	CHECK_EQ_U64(dir_entries(tmpdir), 1);
	unlink(path);
	rmdir(tmpdir);
	free(inflated);
	free(gz);
	free(raw);
	pp_profile_free(p);
}

TEST(write_file_errors)
{
	struct pp_profile *p = known();
	char path[512];
	int err;

	REQUIRE(p);
	REQUIRE(make_tmpdir() == 0);
	snprintf(path, sizeof(path), "%s/missing/out.pb.gz", tmpdir);
	CHECK(pp_pprof_write_file(p, path) == -ENOENT);

	/* Failure after the temporary exists (rename onto a directory): nothing left behind. */
	snprintf(path, sizeof(path), "%s/adir", tmpdir);
	REQUIRE(mkdir(path, 0755) == 0);
	err = pp_pprof_write_file(p, path);
	CHECK(err == -EISDIR);
	CHECK_EQ_U64(dir_entries(tmpdir), 1);
	rmdir(path);

	/* Unwritable directory: as root only a read-only file system says no. */
	if (geteuid() != 0) {
		REQUIRE(chmod(tmpdir, 0555) == 0);
		snprintf(path, sizeof(path), "%s/out.pb.gz", tmpdir);
		CHECK(pp_pprof_write_file(p, path) == -EACCES);
		chmod(tmpdir, 0755);
	} else if (access("/sys/kernel", F_OK) == 0) {
		err = pp_pprof_write_file(p, "/sys/pp_test_unwritable.pb.gz");
		CHECK(err == -EACCES || err == -EROFS || err == -EPERM);
		CHECK(access("/sys/pp_test_unwritable.pb.gz", F_OK) != 0);
	}
	CHECK_EQ_U64(dir_entries(tmpdir), 0);
	CHECK(pp_pprof_write_file(p, "") == -EINVAL);
	CHECK(pp_pprof_write_file(NULL, "/tmp/x.pb.gz") == -EINVAL);
	rmdir(tmpdir);
	pp_profile_free(p);
}

/* A sample's container and pod arrive as string labels (pprof has no resources). */
TEST(resource_labels)
{
	struct pp_profile_desc d = {.event = "cpu-clock", .period = 1000000};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_label res[] = {{"container.id", "abcd"}, {"k8s.namespace.name", "shop"}};
	struct pp_location_info l = {.address = 0x1000, .function = "f", .kind = PP_FRAME_KERNEL};
	uint32_t loc_id;
	Profile *pr;

	REQUIRE(p);
	loc_id = pp_profile_intern_location(p, &l);
	struct pp_sample_info s = {.locations = &loc_id,
				   .nlocations = 1,
				   .pid = 7,
				   .tid = 7,
				   .thread_name = "t",
				   .process_name = "app",
				   .count = 3,
				   .value = 3000000,
				   .resource_id = pp_profile_intern_resource(p, res, 2)};
	REQUIRE(s.resource_id == 1);
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	s.resource_id = 0; /* the same stack outside the container: a sample of its own */
	REQUIRE(pp_profile_add_sample(p, &s) == 0);
	pr = encode_decode(p);
	REQUIRE(pr);
	CHECK_EQ_U64(check_structure(pr), 0);
	REQUIRE(pr->n_sample == 2);
	REQUIRE(label(pr, pr->sample[0], "container.id"));
	CHECK_STR(str(pr, label(pr, pr->sample[0], "container.id")->str), "abcd");
	CHECK_STR(str(pr, label(pr, pr->sample[0], "k8s.namespace.name")->str), "shop");
	CHECK(label(pr, pr->sample[1], "container.id") == NULL);
	CHECK(label(pr, pr->sample[1], "pid") != NULL);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
}

/* The first Mapping is the main executable of the process with the most samples. */
TEST(main_executable_is_the_first_mapping)
{
	struct pp_profile_desc d = {
	    .event = "cpu-clock", .value_type = "cpu", .value_unit = "nanoseconds", .period = 1};
	struct pp_profile *p = pp_profile_new(&d);
	const char *files[3] = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/small",
				"/usr/bin/big"};
	uint32_t locs[3];
	Profile *pr;

	REQUIRE(p);
	for (int i = 0; i < 3; i++) {
		struct pp_mapping_info m = {.start = 0x1000 * (i + 1),
					    .limit = 0x1000 * (i + 2),
					    .filename = files[i],
					    .build_id = ""};
		struct pp_location_info l = {.kind = PP_FRAME_NATIVE, .function = files[i]};

		l.mapping_id = pp_profile_intern_mapping(p, &m);
		l.address = 0x1000 * (i + 1);
		locs[i] = pp_profile_intern_location(p, &l);
		REQUIRE(locs[i]);
	}
	{
		/* small: 3 samples in libc and itself; big: 5 in libc and itself */
		uint32_t s1[2] = {locs[0], locs[1]}, s2[2] = {locs[0], locs[2]};
		struct pp_sample_info a = {.locations = s1,
					   .nlocations = 2,
					   .pid = 1,
					   .tid = 1,
					   .thread_name = "small",
					   .process_name = "small",
					   .process_path = "/usr/bin/small",
					   .count = 3,
					   .value = 3};
		struct pp_sample_info b = {.locations = s2,
					   .nlocations = 2,
					   .pid = 2,
					   .tid = 2,
					   .thread_name = "big",
					   .process_name = "big",
					   .process_path = "/usr/bin/big",
					   .count = 5,
					   .value = 5};

		REQUIRE(pp_profile_add_sample(p, &a) == 0);
		REQUIRE(pp_profile_add_sample(p, &b) == 0);
	}
	pr = encode_decode(p);
	REQUIRE(pr && pr->n_mapping == 3);
	CHECK_STR(str(pr, pr->mapping[0]->filename), "/usr/bin/big");
	CHECK_STR(str(pr, pr->mapping[1]->filename), "/usr/lib/x86_64-linux-gnu/libc.so.6");
	CHECK_STR(str(pr, pr->mapping[2]->filename), "/usr/bin/small");
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
}

/*
 * A position-independent binary: the model holds ELF addresses (as OTLP sends them); pprof
 * gets the process's, inside the Mapping, whose start and offset give the ELF address back.
 */
TEST(addresses_are_the_process)
{
	struct pp_profile_desc d = {
	    .event = "cpu-clock", .value_type = "cpu", .value_unit = "nanoseconds", .period = 1};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_mapping_info m = {.start = 0x7f0000001000,
				    .limit = 0x7f0000100000,
				    .file_offset = 0x1000,
				    .filename = "/usr/lib/libapp.so",
				    .build_id = "",
				    .load_bias = 0x7f0000000000};
	struct pp_location_info l = {.kind = PP_FRAME_NATIVE, .address = 0x1234, .function = "f"};
	uint32_t loc;
	struct pp_sample_info si = {.nlocations = 1,
				    .pid = 1,
				    .tid = 1,
				    .thread_name = "app",
				    .process_name = "app",
				    .count = 1,
				    .value = 1};
	Profile *pr;

	REQUIRE(p);
	l.mapping_id = pp_profile_intern_mapping(p, &m);
	loc = pp_profile_intern_location(p, &l);
	si.locations = &loc;
	REQUIRE(pp_profile_add_sample(p, &si) == 0);
	pr = encode_decode(p);
	REQUIRE(pr && pr->n_location == 1 && pr->n_mapping == 1);
	CHECK_EQ_U64(pr->location[0]->address, 0x7f0000001234);
	CHECK_EQ_U64(pr->mapping[0]->memory_start, 0x7f0000001000);
	CHECK_EQ_U64(pr->mapping[0]->memory_limit, 0x7f0000100000);
	/* the file offset, here the ELF address too (text at offset = address) */
	CHECK_EQ_U64(pr->location[0]->address - pr->mapping[0]->memory_start +
			 pr->mapping[0]->file_offset,
		     0x1234);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
}

/* An unnamed frame: the address alone (no Line), its Mapping not claiming to have functions. */
TEST(unnamed_frames_have_no_line)
{
	struct pp_profile_desc d = {
	    .event = "cpu-clock", .value_type = "cpu", .value_unit = "nanoseconds", .period = 1};
	struct pp_profile *p = pp_profile_new(&d);
	struct pp_mapping_info m1 = {.start = 0x7f0000001000,
				     .limit = 0x7f0000100000,
				     .file_offset = 0x1000,
				     .filename = "/usr/lib/libstripped.so",
				     .build_id = "aabb",
				     .load_bias = 0x7f0000000000};
	struct pp_mapping_info m2 = {
	    .start = 0x400000, .limit = 0x500000, .filename = "/usr/bin/app", .build_id = "ccdd"};
	struct pp_location_info un = {.kind = PP_FRAME_NATIVE,
				      .address = 0x1a2b,
				      .function = "libstripped.so+0x1a2b",
				      .unnamed = PP_UNNAMED_FOR_BACKEND};
	struct pp_location_info named = {
	    .kind = PP_FRAME_NATIVE, .address = 0x401000, .function = "main"};
	uint32_t locs[2];
	struct pp_sample_info si = {.nlocations = 2,
				    .pid = 1,
				    .tid = 1,
				    .thread_name = "app",
				    .process_name = "app",
				    .count = 1,
				    .value = 1};
	Profile *pr;

	REQUIRE(p);
	un.mapping_id = pp_profile_intern_mapping(p, &m1);
	named.mapping_id = pp_profile_intern_mapping(p, &m2);
	locs[0] = pp_profile_intern_location(p, &un);
	locs[1] = pp_profile_intern_location(p, &named);
	si.locations = locs;
	REQUIRE(pp_profile_add_sample(p, &si) == 0);
	pr = encode_decode(p);
	REQUIRE(pr && pr->n_location == 2 && pr->n_mapping == 2);
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];
		const Perftools__Profiles__Mapping *mp = NULL;

		for (size_t j = 0; j < pr->n_mapping; j++)
			if (pr->mapping[j]->id == l->mapping_id)
				mp = pr->mapping[j];
		REQUIRE(mp);
		if (!strcmp(pr->string_table[mp->filename], "/usr/lib/libstripped.so")) {
			CHECK_EQ_U64(l->n_line, 0);
			CHECK_EQ_U64(l->address, 0x7f0000001a2b);
			CHECK(!mp->has_functions);
			CHECK_STR(pr->string_table[mp->build_id], "aabb");
		} else {
			CHECK_EQ_U64(l->n_line, 1);
			CHECK(mp->has_functions);
		}
	}
	perftools__profiles__profile__free_unpacked(pr, NULL);
	pp_profile_free(p);
}

/* Off-CPU samples are not the event's: pprof leaves them out, or writes them alone. */
TEST(off_cpu_samples_left_out)
{
	struct pp_profile *p = known();
	Profile *pr;
	size_t before;

	REQUIRE(p);
	before = pp_profile_sample_count(p);
	{
		const struct pp_sample_info *s = pp_profile_get_sample(p, 0);
		struct pp_sample_info w = *s;

		w.wait = PP_WAIT_DISK;
		w.value = 123456789;
		REQUIRE(pp_profile_add_sample(p, &w) == 0);
	}
	REQUIRE(pp_profile_sample_count(p) == before + 1);
	pr = encode_decode(p);
	REQUIRE(pr);
	CHECK_EQ_U64(check_structure(pr), 0);
	CHECK_EQ_U64(pr->n_sample, before);
	for (size_t i = 0; i < pr->n_sample; i++)
		for (size_t v = 0; v < pr->sample[i]->n_value; v++)
			CHECK(pr->sample[i]->value[v] != 123456789);
	perftools__profiles__profile__free_unpacked(pr, NULL);

	/* ... and pp_pprof_encode_off_cpu writes them alone, as Pyroscope's off_cpu type */
	{
		uint8_t *buf = NULL;
		size_t len = 0;
		const char *state = NULL;

		REQUIRE(pp_pprof_encode_off_cpu(p, &buf, &len) == 0);
		pr = perftools__profiles__profile__unpack(NULL, len, buf);
		free(buf);
		REQUIRE(pr);
		CHECK_EQ_U64(check_structure(pr), 0);
		REQUIRE(pr->n_sample_type == 1);
		CHECK_STR(str(pr, pr->sample_type[0]->type), "off_cpu");
		CHECK_STR(str(pr, pr->sample_type[0]->unit), "nanoseconds");
		CHECK(pr->period_type == NULL);
		CHECK_EQ_U64(pr->period, 0);
		REQUIRE(pr->n_comment == 1);
		CHECK_STR(str(pr, pr->comment[0]),
			  "off-CPU: 1 in 1 context switches recorded, values scaled by 1");
		REQUIRE(pr->n_sample == 1);
		REQUIRE(pr->sample[0]->n_value == 1);
		CHECK_EQ_U64(pr->sample[0]->value[0], 123456789);
		for (size_t i = 0; i < pr->sample[0]->n_label; i++)
			if (strstr(str(pr, pr->sample[0]->label[i]->key), "off_cpu"))
				state = str(pr, pr->sample[0]->label[i]->str);
		CHECK_STR(state, "disk");
		perftools__profiles__profile__free_unpacked(pr, NULL);
	}
	pp_profile_free(p);
}

TEST_LIST = {
    {"off_cpu_samples_left_out", off_cpu_samples_left_out},
    {"encode_known", encode_known},
    {"encode_empty", encode_empty},
    {"kernel_mapping_given", kernel_mapping_given},
    {"write_file_gzip", write_file_gzip},
    {"write_file_errors", write_file_errors},
    {"resource_labels", resource_labels},
    {"main_executable_is_the_first_mapping", main_executable_is_the_first_mapping},
    {"addresses_are_the_process", addresses_are_the_process},
    {"unnamed_frames_have_no_line", unnamed_frames_have_no_line},
};
TEST_MAIN()
