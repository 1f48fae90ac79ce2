/*
 * Unit tests of the SVG flame graph: the output is parsed as XML by python3's xml.etree (an
 * independent parser), and frame count, widths, positions, colours, tooltips, truncation,
 * omission of sub-pixel frames and escaping of hostile names are checked.
 */
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include "check.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>

struct frame {
	char name[256], title[300], text[256];
	double x, y, w;
	int r, g, b;
};

struct svg {
	struct frame v[64];
	int n;
	char title[256];
	char samples_line[64];
};

static const char parse_py[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "ns = '{http://www.w3.org/2000/svg}'\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "assert root.tag == ns + 'svg' and root.get('width') == '1200', root.attrib\n"
    "texts = [t for t in root.findall(ns + 'text')]\n"
    "print('T\\x1f' + ''.join(texts[0].itertext()))\n"
    "print('S\\x1f' + ''.join(texts[1].itertext()))\n"
    "for g in root.iter(ns + 'g'):\n"
    "    r = g.find(ns + 'rect'); t = g.find(ns + 'text'); ti = g.find(ns + 'title')\n"
    "    print('F', g.get('data-name'), r.get('x'), r.get('y'), r.get('width'),\n"
    "          r.get('fill')[4:-1].replace(',', ' '), ti.text, t.text or '', sep='\\x1f')\n";

static struct pp_profile *profile(void)
{
	struct pp_profile_desc d = {.event = "cpu-clock"};

	return pp_profile_new(&d);
}

static uint32_t loc(struct pp_profile *p, uint64_t addr, const char *fn, enum pp_frame_kind kind)
{
	struct pp_location_info l = {.address = addr, .function = fn, .kind = kind};

	return pp_profile_intern_location(p, &l);
}

static int add(struct pp_profile *p, const uint32_t *locs, uint32_t n, uint64_t count)
{
	struct pp_sample_info s = {.locations = locs,
				   .nlocations = n,
				   .pid = 1,
				   .tid = 1,
				   .thread_name = "app", /* the comm: the root */
				   .process_name = "app-1.2",
				   .count = count,
				   .value = count};

	return pp_profile_add_sample(p, &s);
}

/* Copies the next \x1f-separated field of *s into out. */
static void field(char **s, char *out, size_t outsz)
{
	char *end = strchr(*s, '\x1f');
	size_t len = end ? (size_t)(end - *s) : strlen(*s);

	if (len >= outsz)
		len = outsz - 1;
	memcpy(out, *s, len);
	out[len] = '\0';
	*s = end ? end + 1 : *s + strlen(*s);
}

/* Writes the SVG, parses it with python3; returns 0, 77 when python3 is missing, or -1. */
static int render(const struct pp_profile *p, const char *title, struct svg *out)
{
	char path[] = "/tmp/pp_test_fg.XXXXXX", cmd[4096 + 64], line[2048];
	int fd = mkstemp(path), rc;
	FILE *f, *py;

	memset(out, 0, sizeof(*out));
	if (fd < 0)
		return -1;
	f = fdopen(fd, "w");
	if (!f || pp_flamegraph_write_svg(p, f, title) != 0) {
		if (f)
			fclose(f);
		unlink(path);
		return -1;
	}
	fclose(f);
	if (system("python3 -c 'import xml.etree.ElementTree' >/dev/null 2>&1") != 0) {
		unlink(path);
		return 77;
	}
	snprintf(cmd, sizeof(cmd), "python3 -c \"$PP_PARSE_PY\" %s", path);
	setenv("PP_PARSE_PY", parse_py, 1);
	py = popen(cmd, "r");
	if (!py) {
		unlink(path);
		return -1;
	}
	while (fgets(line, sizeof(line), py)) {
		char *s = line + 2, num[64], fill[64];

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == 'T') {
			field(&s, out->title, sizeof(out->title));
		} else if (line[0] == 'S') {
			field(&s, out->samples_line, sizeof(out->samples_line));
		} else if (line[0] == 'F' && out->n < 64) {
			struct frame *fr = &out->v[out->n++];

			field(&s, fr->name, sizeof(fr->name));
			field(&s, num, sizeof(num));
			fr->x = atof(num);
			field(&s, num, sizeof(num));
			fr->y = atof(num);
			field(&s, num, sizeof(num));
			fr->w = atof(num);
			field(&s, fill, sizeof(fill));
			sscanf(fill, "%d %d %d", &fr->r, &fr->g, &fr->b);
			field(&s, fr->title, sizeof(fr->title));
			field(&s, fr->text, sizeof(fr->text));
		}
	}
	rc = pclose(py);
	unlink(path);
	return rc == 0 ? 0 : -1;
}

static const struct frame *find(const struct svg *s, const char *name)
{
	for (int i = 0; i < s->n; i++) {
		if (strcmp(s->v[i].name, name) == 0)
			return &s->v[i];
	}
	return NULL;
}

#define NEAR(a, b) (fabs((a) - (b)) < 0.011)

TEST(known_graph)
{
	struct pp_profile *p = profile();
	const struct frame *all, *app, *m, *a, *b, *c, *k;
	struct svg s;
	int rc;

	REQUIRE(p);
	{
		uint32_t mi = loc(p, 0x10, "main", PP_FRAME_NATIVE), ai = loc(p, 0x20, "a", 1),
			 bi = loc(p, 0x30, "b", 1), ci = loc(p, 0x40, "c", 1),
			 ki = loc(p, 0xffff0000, "do_syscall_64", PP_FRAME_KERNEL);
		uint32_t s1[] = {bi, ai, mi}, s2[] = {ci, mi}, s3[] = {ki, ci, mi};

		REQUIRE(add(p, s1, 3, 60) == 0);
		REQUIRE(add(p, s2, 2, 30) == 0);
		REQUIRE(add(p, s3, 3, 10) == 0);
	}
	rc = render(p, "cpu profile", &s);
	if (rc == 77) {
		pp_profile_free(p);
		SKIP("python3 with xml.etree not available to parse the SVG");
	}
	REQUIRE(rc == 0);
	CHECK_STR(s.title, "cpu profile");
	CHECK_STR(s.samples_line, "Samples: 100");
	CHECK_EQ_U64(s.n, 7);
	all = find(&s, "all"), app = find(&s, "app"), m = find(&s, "main");
	a = find(&s, "a"), b = find(&s, "b"), c = find(&s, "c"), k = find(&s, "do_syscall_64");
	REQUIRE(all && app && m && a && b && c && k);
	/* Widths are proportional to samples over 1200 - 2 * 10 px. */
	CHECK(NEAR(all->w, 1180.0));
	CHECK(NEAR(app->w, 1180.0));
	CHECK(NEAR(m->w, 1180.0));
	CHECK(NEAR(a->w, 708.0));
	CHECK(NEAR(b->w, 708.0));
	CHECK(NEAR(c->w, 472.0));
	CHECK(NEAR(k->w, 118.0));
	/* Children in name order, left to right; a child starts within its parent. */
	CHECK(NEAR(a->x, 10.0));
	CHECK(NEAR(c->x, 718.0));
	CHECK(NEAR(k->x, c->x));
	/* Root at the bottom: deeper frames sit higher (smaller y), one row apart. */
	CHECK(all->y > app->y && app->y > m->y && m->y > a->y && a->y > b->y);
	CHECK(NEAR(all->y - app->y, 16.0));
	CHECK(NEAR(c->y, a->y) && NEAR(k->y, b->y));
	CHECK_STR(b->title, "b (60 samples, 60.00%)");
	CHECK_STR(k->title, "do_syscall_64 [kernel] (10 samples, 10.00%)");
	CHECK_STR(all->title, "all (100 samples, 100.00%)");
	CHECK_STR(b->text, "b");
	/* Native frames warm (red dominant), kernel frames blue. */
	CHECK(b->r > b->b && m->r > m->b);
	CHECK(k->b > k->r);
	pp_profile_free(p);
}

TEST(escaping)
{
	static const char hostile[] = "<tmpl&\"x'>";
	const struct frame *h;
	struct pp_profile *p = profile();
	uint32_t st[3];
	struct svg s;
	int rc;

	REQUIRE(p);
	st[0] = loc(p, 1, hostile, PP_FRAME_NATIVE);
	st[1] = loc(p, 2, "bad\xff\x01utf8 caf\xc3\xa9", PP_FRAME_NATIVE);
	st[2] = loc(p, 3, "]]></script>", PP_FRAME_NATIVE);
	REQUIRE(add(p, st, 3, 5) == 0);
	rc = render(p, "a & b <c>", &s);
	if (rc == 77) {
		pp_profile_free(p);
		SKIP("python3 with xml.etree not available to parse the SVG");
	}
	REQUIRE(rc == 0);
	CHECK_STR(s.title, "a & b <c>");
	h = find(&s, hostile);
	REQUIRE(h);
	CHECK_STR(h->title, "<tmpl&\"x'> (5 samples, 100.00%)");
	CHECK_STR(h->text, hostile);
	/* The profile cleaned what XML cannot carry, visibly; valid UTF-8 passes through. */
	CHECK(find(&s, "bad\xef\xbf\xbd\\x01utf8 caf\xc3\xa9") != NULL);
	CHECK(find(&s, "]]></script>") != NULL);
	pp_profile_free(p);
}

TEST(narrow_and_truncated)
{
	struct pp_profile *p = profile();
	const struct frame *lf;
	struct svg s;
	uint32_t big, tiny, longf;
	int rc;

	REQUIRE(p);
	big = loc(p, 1, "big", PP_FRAME_NATIVE);
	tiny = loc(p, 2, "tiny", PP_FRAME_NATIVE);
	longf = loc(p, 3, "a_rather_long_function_name_that_cannot_fit", PP_FRAME_DATA);
	REQUIRE(add(p, &big, 1, 89999) == 0);
	REQUIRE(add(p, &longf, 1, 10000) == 0);
	REQUIRE(add(p, &tiny, 1, 1) == 0); /* 1180 / 1e5 = 0.0118 px: omitted */
	rc = render(p, NULL, &s);
	if (rc == 77) {
		pp_profile_free(p);
		SKIP("python3 with xml.etree not available to parse the SVG");
	}
	REQUIRE(rc == 0);
	CHECK_STR(s.title, "Flame Graph");
	CHECK(find(&s, "tiny") == NULL);
	CHECK_EQ_U64(s.n, 4);
	lf = find(&s, "a_rather_long_function_name_that_cannot_fit");
	REQUIRE(lf);
	CHECK(NEAR(lf->w, 118.0));
	/* (118 - 6) / 7.08 = 15 characters: 13 of the name and "..". */
	CHECK_STR(lf->text, "a_rather_long..");
	/* Data frames get their own (green) hue. */
	CHECK(lf->g > lf->r && lf->g > lf->b);
	pp_profile_free(p);
}

TEST(empty_and_errors)
{
	struct pp_profile *p = profile();
	struct svg s;
	char dir[] = "/tmp/pp_test_fgdir.XXXXXX", path[256];
	int rc;

	REQUIRE(p);
	CHECK(pp_flamegraph_write_svg(NULL, stdout, "x") == -EINVAL);
	CHECK(pp_flamegraph_write_svg(p, NULL, "x") == -EINVAL);
	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/none/x.svg", dir);
	CHECK(pp_flamegraph_write_file(p, path, "x") == -ENOENT);
	snprintf(path, sizeof(path), "%s/x.svg", dir);
	CHECK(pp_flamegraph_write_file(p, path, "x") == 0);
	CHECK(access(path, R_OK) == 0);
	unlink(path);
	CHECK(rmdir(dir) == 0);
	rc = render(p, "empty", &s);
	if (rc == 77) {
		pp_profile_free(p);
		SKIP("python3 with xml.etree not available to parse the SVG");
	}
	CHECK(rc == 0);
	CHECK_EQ_U64(s.n, 0);
	CHECK_STR(s.samples_line, "Samples: 0");
	pp_profile_free(p);
}

TEST_LIST = {
    {"known_graph", known_graph},
    {"escaping", escaping},
    {"narrow_and_truncated", narrow_and_truncated},
    {"empty_and_errors", empty_and_errors},
};
TEST_MAIN()
