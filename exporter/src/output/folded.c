/*
 * Folded stacks, the input format of flamegraph.pl and speedscope: one line per distinct
 * stack, "process;root;...;leaf count", with perf's "_[k]" (kernel) and our "_[d]" (data)
 * suffixes so flamegraph.pl colours them apart. Lines are weighted by sample count, also for
 * memory events (whose leaf is the data object); their latency-weighted view is the pprof
 * sample type "<event>_latency" and the OTLP latency Profile.
 */
#include <pebsprof/writers.h>

#include "base/fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct line {
	char *text;
	uint64_t count;
};

struct sbuf {
	char *buf;
	size_t len, cap;
	int err;
};

static void sbuf_putc(struct sbuf *b, char c)
{
	if (b->err)
		return;
	if (b->len + 2 > b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 256;
		char *n = realloc(b->buf, ncap);

		if (!n) {
			b->err = -ENOMEM;
			return;
		}
		b->buf = n;
		b->cap = ncap;
	}
	b->buf[b->len++] = c;
	b->buf[b->len] = '\0';
}

static void sbuf_puts(struct sbuf *b, const char *s)
{
	while (*s)
		sbuf_putc(b, *s++);
}

/* ';' separates frames and '\n' lines, so neither may appear inside a name. */
static void put_frame(struct sbuf *b, const char *name, enum pp_frame_kind kind)
{
	if (!*name)
		name = "[unknown]";
	for (const char *c = name; *c; c++) {
		if (*c == ';')
			sbuf_putc(b, ':');
		else if (*c == '\n' || *c == '\r')
			sbuf_putc(b, ' ');
		else
			sbuf_putc(b, *c);
	}
	if (kind == PP_FRAME_KERNEL)
		sbuf_puts(b, "_[k]");
	else if (kind == PP_FRAME_DATA)
		sbuf_puts(b, "_[d]");
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

int pp_folded_write(const struct pp_profile *p, FILE *f)
{
	size_t n = 0, nsamples;
	struct line *lines;
	int err = 0;

	if (!p || !f)
		return -EINVAL;
	nsamples = pp_profile_sample_count(p);
	lines = calloc(nsamples ? nsamples : 1, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	for (size_t i = 0; i < nsamples; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		uint64_t weight = pp_profile_view_weight(p, s);
		struct sbuf b = {0};

		if (!weight)
			continue;
		put_frame(&b, pp_sample_comm(s), PP_FRAME_NATIVE);
		for (uint32_t j = s->nlocations; j-- > 0;) {
			const struct pp_location_info *l =
			    pp_profile_get_location(p, s->locations[j]);

			sbuf_putc(&b, ';');
			put_frame(&b, l->function, l->kind);
		}
		if (s->wait) {
			sbuf_putc(&b, ';');
			put_frame(&b, pp_wait_frame_name(s->wait), PP_FRAME_NATIVE);
		}
		if (b.err) {
			free(b.buf);
			err = b.err;
			goto out;
		}
		lines[n].text = b.buf;
		lines[n].count = weight;
		n++;
	}
	if (n > 1)
		qsort(lines, n, sizeof(*lines), line_cmp);
	for (size_t i = 0; i < n;) {
		uint64_t count = lines[i].count;
		size_t j = i + 1;

		/* Samples differing only in pid, tid or labels fold to the same line. */
		while (j < n && strcmp(lines[j].text, lines[i].text) == 0)
			count += lines[j++].count;
		if (fprintf(f, "%s %llu\n", lines[i].text, (unsigned long long)count) < 0) {
			err = errno ? -errno : -EIO;
			goto out;
		}
		i = j;
	}
	if (ferror(f))
		err = -EIO;
out:
	for (size_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	return err;
}

static int fill_folded(FILE *f, void *arg)
{
	return pp_folded_write(arg, f);
}

int pp_folded_write_file(const struct pp_profile *p, const char *path)
{
	if (!p || !path)
		return -EINVAL;
	return pp_file_write_atomic(path, fill_folded, (void *)p);
}
