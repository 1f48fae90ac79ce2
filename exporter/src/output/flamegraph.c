/*
 * A self-contained SVG flame graph in the manner of flamegraph.pl: root at the bottom, one
 * box per (stack prefix), width proportional to samples, children ordered by name, a tooltip
 * per box and a little inline script for click-to-zoom. No external resources, so the file
 * can be attached to a ticket and opened anywhere.
 */
#include <pebsprof/writers.h>

#include "base/fileio.h"
#include "base/htab.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FG_WIDTH 1200
#define FG_XPAD 10
#define FG_FRAME_H 16
#define FG_FONT 12
#define FG_CHAR_W (FG_FONT * 0.59)
#define FG_TOP (FG_FONT * 3)
#define FG_BOTTOM (FG_FONT * 2 + 10)
#define FG_MIN_W 0.1

enum node_kind { NODE_ROOT = 0 }; /* other nodes carry an enum pp_frame_kind */

struct node {
	const char *name; /* interned in the profile (or a literal for the root) */
	int kind;
	uint32_t parent;
	uint32_t depth;
	uint64_t count;
	uint64_t x; /* offset in samples from the left edge */
};

struct tree {
	struct node *v;
	uint32_t n, cap;
	struct pp_htab idx;
	uint32_t max_depth;
};

struct node_key {
	uint32_t parent;
	const char *name;
	int kind;
};

static bool node_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tree *t = ctx;
	const struct node_key *k = key;

	return t->v[idx].parent == k->parent && t->v[idx].name == k->name &&
	       t->v[idx].kind == k->kind;
}

/* Returns the child of parent with name and kind (created if new), or PP_HTAB_NONE. */
static uint32_t child(struct tree *t, uint32_t parent, const char *name, int kind)
{
	struct node_key k = {.parent = parent, .name = name, .kind = kind};
	uint64_t h = pp_hash_u64(pp_hash_u64(pp_hash_u64(PP_HASH_SEED, parent), (uintptr_t)name),
				 (uint64_t)kind);
	uint32_t i = pp_htab_find(&t->idx, h, node_eq, t, &k);

	if (i != PP_HTAB_NONE)
		return i;
	if (t->n == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 256;
		struct node *nv;

		if (t->cap >= (1u << 28))
			return PP_HTAB_NONE;
		nv = realloc(t->v, (size_t)ncap * sizeof(*nv));
		if (!nv)
			return PP_HTAB_NONE;
		t->v = nv;
		t->cap = ncap;
	}
	if (pp_htab_insert(&t->idx, h, t->n))
		return PP_HTAB_NONE;
	t->v[t->n] = (struct node){
	    .name = name, .kind = kind, .parent = parent, .depth = t->v[parent].depth + 1};
	if (t->v[t->n].depth > t->max_depth)
		t->max_depth = t->v[t->n].depth;
	return t->n++;
}

static int build_tree(const struct pp_profile *p, struct tree *t)
{
	size_t nsamples = pp_profile_sample_count(p);

	memset(t, 0, sizeof(*t));
	t->v = calloc(256, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	t->cap = 256;
	t->v[0] = (struct node){.name = "all", .kind = NODE_ROOT};
	t->n = 1;
	for (size_t i = 0; i < nsamples; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		uint64_t weight = pp_profile_view_weight(p, s);
		uint32_t cur;

		if (!weight)
			continue;
		t->v[0].count += weight;
		cur = child(t, 0, pp_sample_comm(s), PP_FRAME_NATIVE);
		if (cur == PP_HTAB_NONE)
			return -ENOMEM;
		t->v[cur].count += weight;
		for (uint32_t j = s->nlocations; j-- > 0;) {
			const struct pp_location_info *l =
			    pp_profile_get_location(p, s->locations[j]);

			cur = child(t, cur, l->function, l->kind);
			if (cur == PP_HTAB_NONE)
				return -ENOMEM;
			t->v[cur].count += weight;
		}
		if (s->wait) {
			cur = child(t, cur, pp_wait_frame_name(s->wait), PP_FRAME_NATIVE);
			if (cur == PP_HTAB_NONE)
				return -ENOMEM;
			t->v[cur].count += weight;
		}
	}
	return 0;
}

static const struct tree *sort_tree; /* qsort has no context argument */

static int child_cmp(const void *a, const void *b)
{
	const struct node *x = &sort_tree->v[*(const uint32_t *)a];
	const struct node *y = &sort_tree->v[*(const uint32_t *)b];
	int c = strcmp(x->name, y->name);

	return c ? c : x->kind - y->kind;
}

/*
 * Places children left to right in name order. Parents are created before their children,
 * so walking nodes by index sees every parent placed before its children.
 */
static int layout(struct tree *t)
{
	uint32_t *start = calloc((size_t)t->n + 1, sizeof(*start));
	uint32_t *kids = calloc(t->n ? t->n : 1, sizeof(*kids));
	uint32_t *fill = calloc((size_t)t->n + 1, sizeof(*fill));

	if (!start || !kids || !fill) {
		free(start);
		free(kids);
		free(fill);
		return -ENOMEM;
	}
	for (uint32_t i = 1; i < t->n; i++)
		start[t->v[i].parent + 1]++;
	for (uint32_t i = 0; i < t->n; i++)
		start[i + 1] += start[i];
	memcpy(fill, start, ((size_t)t->n + 1) * sizeof(*fill));
	for (uint32_t i = 1; i < t->n; i++)
		kids[fill[t->v[i].parent]++] = i;
	sort_tree = t;
	for (uint32_t i = 0; i < t->n; i++) {
		uint64_t x = t->v[i].x;

		if (start[i + 1] - start[i] > 1)
			qsort(&kids[start[i]], start[i + 1] - start[i], sizeof(*kids), child_cmp);
		for (uint32_t k = start[i]; k < start[i + 1]; k++) {
			t->v[kids[k]].x = x;
			x += t->v[kids[k]].count;
		}
	}
	sort_tree = NULL;
	free(start);
	free(kids);
	free(fill);
	return 0;
}

/* Length of a valid UTF-8 sequence XML accepts at s, or 0 if the byte must be replaced. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];

	if (c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f))
		return 1;
	if (c < 0x80 || c == 0x7f)
		return 0;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
			return 0; /* overlong, surrogate */
		if (c == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf))
			return 0; /* U+FFFE, U+FFFF are not XML characters */
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

static size_t char_count(const char *s)
{
	size_t n = 0;

	for (const unsigned char *u = (const unsigned char *)s; *u; n++) {
		size_t l = utf8_len(u);

		u += l ? l : 1;
	}
	return n;
}

/* Writes at most max_chars characters of s, XML-escaped; invalid bytes become '?'. */
static void put_xml(FILE *f, const char *s, size_t max_chars)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t n = 0; *u && n < max_chars; n++) {
		size_t l = utf8_len(u);

		switch (*u) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		case '\t':
		case '\n':
		case '\r':
			fputc(' ', f);
			break;
		default:
			if (l)
				fwrite(u, 1, l, f);
			else
				fputc('?', f);
		}
		u += l ? l : 1;
	}
}

static const char *display_name(const struct node *n)
{
	return *n->name ? n->name : "[unknown]";
}

static void colour(const struct node *n, int *r, int *g, int *b)
{
	uint64_t h = pp_hash_str(PP_HASH_SEED, n->name);
	double v1 = (double)(h & 0xffff) / 65535.0, v2 = (double)((h >> 16) & 0xffff) / 65535.0,
	       v3 = (double)((h >> 32) & 0xffff) / 65535.0;

	switch (n->kind) {
	case NODE_ROOT:
		*r = 200, *g = 200, *b = 200;
		break;
	case PP_FRAME_KERNEL: /* blue: time the kernel spent on the task's behalf */
		*r = 60 + (int)(50 * v1), *g = 130 + (int)(60 * v2), *b = 200 + (int)(55 * v3);
		break;
	case PP_FRAME_DATA: /* green: data objects, not code */
		*r = 70 + (int)(60 * v1), *g = 180 + (int)(60 * v2), *b = 70 + (int)(60 * v3);
		break;
	default: /* flamegraph.pl's warm palette for native code */
		*r = 205 + (int)(50 * v3), *g = (int)(230 * v1), *b = (int)(55 * v2);
		break;
	}
}

static const char zoom_script[] =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "\"use strict\";\n"
    "var W = 1200, P = 10, CW = 7.08, fr = [];\n"
    "function lbl(f, w) {\n"
    "  var n = Math.floor((w - 6) / CW);\n"
    "  if (n < 3) return \"\";\n"
    "  return f.n.length <= n ? f.n : f.n.substring(0, n - 2) + \"..\";\n"
    "}\n"
    "function zoom(z) {\n"
    "  var s = (W - 2 * P) / z.w;\n"
    "  for (var i = 0; i < fr.length; i++) {\n"
    "    var f = fr[i], a = Math.max(f.x, z.x), b = Math.min(f.x + f.w, z.x + z.w);\n"
    "    if (b - a <= 1e-6 || (f.y < z.y && (f.x < z.x - 1e-6 || f.x + f.w > z.x + z.w + "
    "1e-6))) {\n"
    "      f.g.style.display = \"none\"; continue;\n"
    "    }\n"
    "    var w = (b - a) * s;\n"
    "    f.g.style.display = \"\";\n"
    "    f.r.setAttribute(\"x\", P + (a - z.x) * s); f.r.setAttribute(\"width\", w);\n"
    "    f.t.setAttribute(\"x\", P + (a - z.x) * s + 3); f.t.textContent = lbl(f, w);\n"
    "  }\n"
    "}\n"
    "window.addEventListener(\"load\", function () {\n"
    "  var gs = document.getElementsByTagName(\"g\");\n"
    "  for (var i = 0; i < gs.length; i++) {\n"
    "    var g = gs[i], r = g.getElementsByTagName(\"rect\")[0];\n"
    "    if (!r || !g.getAttribute(\"data-name\")) continue;\n"
    "    var f = { g: g, r: r, t: g.getElementsByTagName(\"text\")[0],\n"
    "      x: +r.getAttribute(\"x\"), w: +r.getAttribute(\"width\"), y: "
    "+r.getAttribute(\"y\"),\n"
    "      n: g.getAttribute(\"data-name\") };\n"
    "    fr.push(f);\n"
    "    g.addEventListener(\"click\", zoom.bind(null, f));\n"
    "  }\n"
    "});\n"
    "]]></script>\n";

int pp_flamegraph_write_svg(const struct pp_profile *p, FILE *f, const char *title)
{
	const double usable = FG_WIDTH - 2 * FG_XPAD;
	struct tree t;
	double scale;
	int height, err, wall = pp_profile_is_wall_clock(p);

	if (!p || !f)
		return -EINVAL;
	if (!title)
		title = "Flame Graph";
	err = build_tree(p, &t);
	if (!err)
		err = layout(&t);
	if (err)
		goto out;

	height = (int)(FG_TOP + (t.max_depth + 1) * FG_FRAME_H + FG_BOTTOM);
	scale = t.v[0].count ? usable / (double)t.v[0].count : 0.0;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\">\n",
		FG_WIDTH, height, FG_WIDTH, height);
	fputs("<style type=\"text/css\">text { font-family: Verdana, sans-serif; font-size: 12px; "
	      "fill: #000; } g:hover rect { stroke: #000; stroke-width: 0.5; } g { cursor: "
	      "pointer; }</style>\n",
	      f);
	fputs(zoom_script, f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f0\"/>\n",
		FG_WIDTH, height);
	fprintf(f, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size: 17px\">",
		FG_WIDTH / 2);
	put_xml(f, title, SIZE_MAX);
	fputs("</text>\n", f);
	if (wall)
		fprintf(f,
			"<text x=\"%d\" y=\"%d\">Wall clock (on and off the CPU): %.1f ms</text>\n",
			FG_XPAD, height - FG_BOTTOM / 2 + 4, (double)t.v[0].count / 1e6);
	else
		fprintf(f, "<text x=\"%d\" y=\"%d\">Samples: %" PRIu64 "</text>\n", FG_XPAD,
			height - FG_BOTTOM / 2 + 4, t.v[0].count);

	for (uint32_t i = 0; t.v[0].count && i < t.n; i++) {
		const struct node *n = &t.v[i];
		double w = (double)n->count * scale, x = FG_XPAD + (double)n->x * scale;
		double y = height - FG_BOTTOM - (double)(n->depth + 1) * FG_FRAME_H;
		const char *name = display_name(n);
		size_t fit, len;
		int r, g, b;

		if (w < FG_MIN_W)
			continue;
		colour(n, &r, &g, &b);
		fputs("<g data-name=\"", f);
		put_xml(f, name, SIZE_MAX);
		fputs("\"><title>", f);
		put_xml(f, name, SIZE_MAX);
		if (n->kind == PP_FRAME_KERNEL)
			fputs(" [kernel]", f);
		else if (n->kind == PP_FRAME_DATA)
			fputs(" [data]", f);
		if (wall)
			fprintf(f, " (%.1f ms, %.2f%%)</title>", (double)n->count / 1e6,
				100.0 * (double)n->count / (double)t.v[0].count);
		else
			fprintf(f, " (%" PRIu64 " samples, %.2f%%)</title>", n->count,
				100.0 * (double)n->count / (double)t.v[0].count);
		fprintf(f,
			"<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
			"fill=\"rgb(%d,%d,%d)\" rx=\"2\" ry=\"2\"/>",
			x, y, w, FG_FRAME_H - 1, r, g, b);
		fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 10.5);
		fit = w > 6 ? (size_t)((w - 6) / FG_CHAR_W) : 0;
		len = char_count(name);
		if (fit >= 3) {
			if (len <= fit) {
				put_xml(f, name, SIZE_MAX);
			} else {
				put_xml(f, name, fit - 2);
				fputs("..", f);
			}
		}
		fputs("</text></g>\n", f);
	}
	fputs("</svg>\n", f);
	if (fflush(f) != 0 || ferror(f))
		err = errno ? -errno : -EIO;
out:
	free(t.v);
	pp_htab_fini(&t.idx);
	return err;
}

struct svg_arg {
	const struct pp_profile *p;
	const char *title;
};

static int fill_svg(FILE *f, void *arg)
{
	const struct svg_arg *a = arg;

	return pp_flamegraph_write_svg(a->p, f, a->title);
}

int pp_flamegraph_write_file(const struct pp_profile *p, const char *path, const char *title)
{
	struct svg_arg a = {.p = p, .title = title};

	if (!p || !path)
		return -EINVAL;
	return pp_file_write_atomic(path, fill_svg, &a);
}
