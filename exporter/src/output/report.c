/*
 * The top-functions report printed at the end of `pebsprof record`: self and total sample
 * shares per function name, like `perf report --children` reduced to one table.
 */
#include <pebsprof/writers.h>

#include "base/htab.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct fstat {
	const char *name; /* interned in the profile: pointer equality is name equality */
	uint64_t self, total;
	size_t last_sample; /* sample index + 1 that last counted total, for once-per-sample */
};

struct fstats {
	struct fstat *v;
	uint32_t n, cap;
	struct pp_htab idx;
};

static bool fstat_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct fstats *fs = ctx;

	return fs->v[idx].name == key;
}

static struct fstat *fstat_get(struct fstats *fs, const char *name)
{
	uint64_t h = pp_hash_u64(PP_HASH_SEED, (uintptr_t)name);
	uint32_t i = pp_htab_find(&fs->idx, h, fstat_eq, fs, name);

	if (i != PP_HTAB_NONE)
		return &fs->v[i];
	if (fs->n == fs->cap) {
		uint32_t ncap = fs->cap ? fs->cap * 2 : 64;
		struct fstat *n = realloc(fs->v, (size_t)ncap * sizeof(*n));

		if (!n)
			return NULL;
		fs->v = n;
		fs->cap = ncap;
	}
	if (pp_htab_insert(&fs->idx, h, fs->n))
		return NULL;
	fs->v[fs->n] = (struct fstat){.name = name};
	return &fs->v[fs->n++];
}

static int fstat_cmp(const void *a, const void *b)
{
	const struct fstat *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Fills fs with one sorted entry per function name (data frames are not functions). */
static int collect(const struct pp_profile *p, struct fstats *fs)
{
	size_t nsamples = pp_profile_sample_count(p);

	memset(fs, 0, sizeof(*fs));
	for (size_t i = 0; i < nsamples; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		bool leaf_done = false;

		if (s->wait)
			continue; /* time off the CPU: not the event's samples */
		for (uint32_t j = 0; j < s->nlocations; j++) {
			const struct pp_location_info *l =
			    pp_profile_get_location(p, s->locations[j]);
			struct fstat *st;

			if (l->kind == PP_FRAME_DATA)
				continue;
			st = fstat_get(fs, l->function);
			if (!st)
				return -ENOMEM;
			if (!leaf_done) {
				st->self += s->count;
				leaf_done = true;
			}
			/* Recursion puts a function in a stack many times; count the sample once.
			 */
			if (st->last_sample != i + 1) {
				st->total += s->count;
				st->last_sample = i + 1;
			}
		}
	}
	if (fs->n)
		qsort(fs->v, fs->n, sizeof(*fs->v), fstat_cmp);
	return 0;
}

static void fstats_fini(struct fstats *fs)
{
	free(fs->v);
	pp_htab_fini(&fs->idx);
}

int pp_profile_top_functions(const struct pp_profile *p, struct pp_top_entry *out, size_t max,
			     size_t *n)
{
	struct fstats fs;
	int err;

	if (!p || !n)
		return -EINVAL;
	err = collect(p, &fs);
	if (err) {
		fstats_fini(&fs);
		return err;
	}
	if (!out) {
		*n = fs.n;
	} else {
		*n = fs.n < max ? fs.n : max;
		for (size_t i = 0; i < *n; i++) {
			out[i].function = fs.v[i].name;
			out[i].self = fs.v[i].self;
			out[i].total = fs.v[i].total;
		}
	}
	fstats_fini(&fs);
	return 0;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

void pp_report_print_top(const struct pp_profile *p, FILE *f, size_t max)
{
	uint64_t total, widest = 0;
	struct pp_top_entry *top;
	int width = 7; /* strlen("samples") */
	size_t n = 0;

	if (!p || !f)
		return;
	total = pp_profile_total_count(p);
	if (pp_profile_top_functions(p, NULL, 0, &n) != 0)
		return;
	if (n > max)
		n = max;
	top = calloc(n ? n : 1, sizeof(*top));
	if (!top || pp_profile_top_functions(p, top, n, &n) != 0) {
		free(top);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (top[i].self > widest)
			widest = top[i].self;
	}
	for (; widest >= 10000000; widest /= 10)
		width++;
	fprintf(f, "  self%%  total%%  %*s  function\n", width, "samples");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%6.2f%% %6.2f%%  %*" PRIu64 "  %s\n", pct(top[i].self, total),
			pct(top[i].total, total), width, top[i].self, top[i].function);
	free(top);
}

/* The rows kept at most; samples of further fields are counted apart. */
#define DATA_TYPE_ROWS 1024

struct data_type_row {
	uint32_t field_loc;
	uint64_t count, latency;
	uint64_t levels[4]; /* L1 or LFB, L2, L3, the rest */
};

static int level_index(const char *level)
{
	if (!level)
		return 3;
	if (strstr(level, "L1") || strstr(level, "LFB"))
		return 0;
	if (strstr(level, "L2"))
		return 1;
	if (strstr(level, "L3"))
		return 2;
	return 3;
}

static int row_by_count(const void *a, const void *b)
{
	const struct data_type_row *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->field_loc < y->field_loc ? -1 : x->field_loc > y->field_loc;
}

void pp_report_print_data_types(const struct pp_profile *p, FILE *f, size_t max)
{
	struct data_type_row *rows = calloc(DATA_TYPE_ROWS, sizeof(*rows));
	size_t nrows = 0, shown;
	uint64_t total = 0, uncounted = 0;

	if (!rows)
		return;
	for (size_t i = 0; i < pp_profile_sample_count(p); i++) {
		const struct pp_sample_info *si = pp_profile_get_sample(p, i);
		const struct pp_location_info *l0, *l1;
		const char *level = NULL;
		size_t r;

		total += si->count;
		if (si->nlocations < 2)
			continue;
		l0 = pp_profile_get_location(p, si->locations[0]);
		l1 = pp_profile_get_location(p, si->locations[1]);
		if (l0->kind != PP_FRAME_DATA || l1->kind != PP_FRAME_DATA)
			continue;
		for (r = 0; r < nrows && rows[r].field_loc != si->locations[0]; r++)
			;
		if (r == nrows) {
			if (nrows == DATA_TYPE_ROWS) {
				uncounted += si->count;
				continue;
			}
			rows[nrows++].field_loc = si->locations[0];
		}
		for (uint32_t k = 0; k < si->nlabels; k++)
			if (!strcmp(si->labels[k].key, "memory.level"))
				level = si->labels[k].value;
		rows[r].count += si->count;
		rows[r].latency += si->latency;
		rows[r].levels[level_index(level)] += si->count;
	}
	if (nrows) {
		qsort(rows, nrows, sizeof(*rows), row_by_count);
		shown = nrows < max ? nrows : max;
		fprintf(f, "  share  samples  latency    L1    L2    L3  RAM+  type.field\n");
		for (size_t r = 0; r < shown; r++) {
			const struct data_type_row *w = &rows[r];
			double c = (double)w->count;

			fprintf(f,
				"%6.2f%% %8" PRIu64 " %8.1f %4.0f%% %4.0f%% %4.0f%% %4.0f%%  %s\n",
				total ? 100.0 * c / (double)total : 0.0, w->count,
				(double)w->latency / c, 100.0 * (double)w->levels[0] / c,
				100.0 * (double)w->levels[1] / c, 100.0 * (double)w->levels[2] / c,
				100.0 * (double)w->levels[3] / c,
				pp_profile_get_location(p, w->field_loc)->function);
		}
		if (nrows > shown || uncounted)
			fprintf(f, "  (%zu more fields%s)\n", nrows - shown,
				uncounted ? "; more not counted" : "");
	}
	free(rows);
}
