/*
 * Cuts a window into the parts a backend accepts (split.h). Samples are sorted into groups
 * (the profiles the backend will see), each group is cut into pieces within the limits, and
 * the pieces are arranged into parts. The byte limit is checked with a bound computed
 * without encoding, and only a group whose bound is over the limit is encoded to be
 * measured, so a window far below the limits costs one pass over its samples.
 */
#include <pebsprof/pyroscope.h>
#include <pebsprof/split.h>
#include <pebsprof/writers.h>

#include "base/htab.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct member {
	size_t idx;	     /* sample index in the input */
	const char *service; /* BY_SERVICE: the group key */
	uint32_t resource_id, pid;
	const char *process; /* interned in the input: compared by pointer */
};

/* A piece: members [lo, hi) of the sorted array, the piece-th of its group. */
struct piece {
	size_t lo, hi;
	size_t piece;
	size_t bytes; /* its size as pprof, for packing requests: a bound, or what it encodes to */
	bool exact;   /* bytes is what it encodes to */
};

struct splitter {
	const struct pp_profile *p;
	enum pp_split_by by;
	const struct pp_split_limits *lim;
	struct member *m;
	size_t *idx; /* scratch: indexes of members */
	struct piece *pieces;
	size_t npieces, cap_pieces;
	size_t oversize;
	struct pp_htab name_idx; /* over out->names, by content */
};

const char *pp_split_service_of(const struct pp_profile *p, const struct pp_sample_info *s,
				const char *service, char *buf, size_t size)
{
	uint32_t n = 0;
	const struct pp_label *res = pp_profile_get_resource(p, s->resource_id, &n);
	const char *stated = pp_pyroscope_stated_service(s->process_kind);

	for (uint32_t i = 0; res && i < n; i++)
		if (strcmp(res[i].key, "service.name") == 0 && res[i].value[0])
			return pp_pyroscope_service_name(res[i].value, PP_SERVICE_CONFIGURED, buf,
							 size);
	if (service && service[0])
		return pp_pyroscope_service_name(service, PP_SERVICE_CONFIGURED, buf, size);
	if (stated)
		return stated;
	return pp_pyroscope_service_name(s->process_name, PP_SERVICE_PROCESS, buf, size);
}

static bool name_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pp_split *out = ctx;

	return strcmp(out->names[idx], key) == 0;
}

/* The split's own copy of a service name, shared by its members and parts; NULL: no memory. */
static const char *own_name(struct splitter *sp, struct pp_split *out, const char *name)
{
	uint64_t h = pp_hash_str(PP_HASH_SEED, name);
	uint32_t i = pp_htab_find(&sp->name_idx, h, name_eq, out, name);
	char **names;

	if (i != PP_HTAB_NONE)
		return out->names[i];
	names = realloc(out->names, (out->nnames + 1) * sizeof(*names));
	if (!names)
		return NULL;
	out->names = names;
	names[out->nnames] = strdup(name);
	if (!names[out->nnames] || pp_htab_insert(&sp->name_idx, h, (uint32_t)out->nnames)) {
		free(names[out->nnames]);
		return NULL;
	}
	return names[out->nnames++];
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static int cmp_size(const void *a, const void *b)
{
	return cmp_u64(*(const size_t *)a, *(const size_t *)b);
}

static int cmp_by_service(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = strcmp(x->service, y->service);

	return c ? c : cmp_u64(x->idx, y->idx);
}

/* The OTLP encoder's ResourceProfiles: a container resource, or a process (pid, name). */
static int same_resource(const struct member *x, const struct member *y)
{
	if (x->resource_id || y->resource_id)
		return x->resource_id == y->resource_id;
	return x->pid == y->pid && x->process == y->process;
}

static int cmp_by_resource(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = cmp_u64(x->resource_id, y->resource_id);

	if (!c && !x->resource_id)
		c = cmp_u64(x->pid, y->pid);
	if (!c && !x->resource_id)
		c = cmp_u64((uintptr_t)x->process, (uintptr_t)y->process);
	return c ? c : cmp_u64(x->idx, y->idx);
}

static bool same_group(const struct splitter *sp, const struct member *x, const struct member *y)
{
	return sp->by == PP_SPLIT_BY_SERVICE ? strcmp(x->service, y->service) == 0
					     : same_resource(x, y);
}

static int add_piece(struct splitter *sp, size_t lo, size_t hi, size_t piece, size_t bytes,
		     bool exact)
{
	if (sp->npieces == sp->cap_pieces) {
		size_t cap = sp->cap_pieces ? sp->cap_pieces * 2 : 16;
		struct piece *np = realloc(sp->pieces, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		sp->pieces = np;
		sp->cap_pieces = cap;
	}
	sp->pieces[sp->npieces++] = (struct piece){lo, hi, piece, bytes, exact};
	return 0;
}

/* The limit a piece must keep: a profile's, and a request's, which may hold it alone. */
static size_t piece_limit(const struct pp_split_limits *lim)
{
	size_t a = lim->max_profile_bytes, b = lim->max_request_bytes;

	return !a ? b : !b ? a : a < b ? a : b;
}

/*
 * Whether members [lo, hi) encode within piece_limit(); < 0 on error. *bytes: their bound as
 * pprof, or (*exact) what they encode to, where the bound was over the limit (0 without one).
 */
static int fits_bytes(struct splitter *sp, size_t lo, size_t hi, size_t *bytes, bool *exact)
{
	size_t n = hi - lo, limit = piece_limit(sp->lim);
	/* all of it is sent as it is (emit): measure that, unreferenced entries included */
	bool whole = n == pp_profile_sample_count(sp->p);
	struct pp_profile *part = NULL;
	uint8_t *buf = NULL;
	int err;

	*bytes = 0;
	*exact = false;
	if (!limit)
		return 1;
	for (size_t i = 0; !whole && i < n; i++)
		sp->idx[i] = sp->m[lo + i].idx;
	*bytes = pp_pprof_size_bound(sp->p, whole ? NULL : sp->idx, n);
	if (*bytes <= limit)
		return 1;
	if (!whole && !(part = pp_profile_subset_new(sp->p, sp->idx, n)))
		return -errno;
	err = pp_pprof_encode(whole ? sp->p : part, &buf, bytes);
	*exact = !err;
	pp_profile_free(part);
	free(buf);
	return err ? err : *bytes <= limit;
}

/*
 * Cuts members [lo, hi) of one group into pieces numbered from *next: first into equal
 * pieces under max_samples, then in halves while a piece is over the byte limit.
 */
static int cut(struct splitter *sp, size_t lo, size_t hi, size_t *next)
{
	size_t n = hi - lo, max = sp->lim->max_samples, bytes;
	bool exact;
	int fits, err;

	if (max && n > max) {
		size_t k = (n + max - 1) / max;

		for (size_t i = 0; i < k; i++) {
			err = cut(sp, lo + n * i / k, lo + n * (i + 1) / k, next);
			if (err)
				return err;
		}
		return 0;
	}
	fits = fits_bytes(sp, lo, hi, &bytes, &exact);
	if (fits < 0)
		return fits;
	if (!fits && n >= 2) {
		err = cut(sp, lo, lo + n / 2, next);
		return err ? err : cut(sp, lo + n / 2, hi, next);
	}
	if (!fits)
		sp->oversize++;
	return add_piece(sp, lo, hi, (*next)++, bytes, exact);
}

static int add_part(struct pp_split *out, const struct pp_profile *p, const char *service,
		    bool owned)
{
	struct pp_split_part *np = realloc(out->parts, (out->nparts + 1) * sizeof(*np));

	if (!np)
		return -ENOMEM;
	out->parts = np;
	if (owned) {
		struct pp_profile **no = realloc(out->owned, (out->nowned + 1) * sizeof(*no));

		if (!no)
			return -ENOMEM;
		out->owned = no;
		out->owned[out->nowned++] = (struct pp_profile *)p;
	}
	out->parts[out->nparts++] = (struct pp_split_part){p, service};
	return 0;
}

/* The part holding members listed by sp->idx[0..n), or the input when that is all of it. */
static int emit(struct splitter *sp, struct pp_split *out, size_t n, const char *service)
{
	struct pp_profile *part;
	int err;

	if (n == pp_profile_sample_count(sp->p))
		return add_part(out, sp->p, service, false);
	part = pp_profile_subset_new(sp->p, sp->idx, n);
	if (!part)
		return -errno;
	err = add_part(out, part, service, true);
	if (err)
		pp_profile_free(part);
	return err;
}

/* The part of members sp->idx[0..n), in the input's order. */
static int emit_sorted(struct splitter *sp, struct pp_split *out, size_t n)
{
	qsort(sp->idx, n, sizeof(*sp->idx), cmp_size);
	return emit(sp, out, n, NULL);
}

/*
 * Requests are packed by the pieces' sizes that cut() measured: bounds, which cost no
 * encoding. Where they do not fit in one request, each piece is measured by what it encodes
 * to (the bound of a few resources is about twice what they take, and would double the
 * requests).
 */
static int measure_pieces(struct splitter *sp)
{
	size_t total = 0;

	if (!sp->lim->max_request_bytes)
		return 0;
	for (size_t i = 0; i < sp->npieces; i++)
		total =
		    total + sp->pieces[i].bytes < total ? SIZE_MAX : total + sp->pieces[i].bytes;
	if (total <= sp->lim->max_request_bytes)
		return 0;
	for (size_t i = 0; i < sp->npieces; i++) {
		struct piece *pc = &sp->pieces[i];
		struct pp_profile *part;
		uint8_t *buf = NULL;
		int err;

		if (pc->exact)
			continue;
		for (size_t j = pc->lo; j < pc->hi; j++)
			sp->idx[j - pc->lo] = sp->m[j].idx;
		part = pp_profile_subset_new(sp->p, sp->idx, pc->hi - pc->lo);
		err = part ? pp_pprof_encode(part, &buf, &pc->bytes) : -errno;
		pp_profile_free(part);
		free(buf);
		if (err)
			return err;
		pc->exact = true;
	}
	return 0;
}

static int arrange(struct splitter *sp, struct pp_split *out)
{
	size_t maxpiece = 0;
	int err = 0;

	if (sp->by == PP_SPLIT_BY_SERVICE) {
		for (size_t i = 0; !err && i < sp->npieces; i++) {
			const struct piece *pc = &sp->pieces[i];

			for (size_t j = pc->lo; j < pc->hi; j++)
				sp->idx[j - pc->lo] = sp->m[j].idx;
			err = emit(sp, out, pc->hi - pc->lo, sp->m[pc->lo].service);
		}
		return err;
	}
	err = measure_pieces(sp);
	for (size_t i = 0; !err && i < sp->npieces; i++)
		if (sp->pieces[i].piece > maxpiece)
			maxpiece = sp->pieces[i].piece;
	/*
	 * Part k: piece k of every resource, in the order of the input's first samples; with
	 * max_request_bytes, as many of them as fit, and the next part the rest.
	 */
	for (size_t k = 0; !err && k <= maxpiece; k++) {
		size_t n = 0, bytes = 0;

		for (size_t i = 0; !err && i < sp->npieces; i++) {
			const struct piece *pc = &sp->pieces[i];

			if (pc->piece != k)
				continue;
			if (n && sp->lim->max_request_bytes &&
			    bytes + pc->bytes > sp->lim->max_request_bytes) {
				err = emit_sorted(sp, out, n);
				n = bytes = 0;
				out->packed++;
			}
			for (size_t j = pc->lo; j < pc->hi; j++)
				sp->idx[n++] = sp->m[j].idx;
			bytes += pc->bytes;
		}
		if (!err && n)
			err = emit_sorted(sp, out, n);
	}
	return err;
}

int pp_split_profile(const struct pp_profile *p, enum pp_split_by by, const char *service,
		     const struct pp_split_limits *lim, struct pp_split *out)
{
	struct splitter sp = {.p = p, .by = by, .lim = lim};
	size_t n = pp_profile_sample_count(p);
	int err = -ENOMEM;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!p || !lim || (by != PP_SPLIT_BY_RESOURCE && by != PP_SPLIT_BY_SERVICE))
		return -EINVAL;
	if (!n)
		return 0;
	sp.m = calloc(n, sizeof(*sp.m));
	sp.idx = calloc(n, sizeof(*sp.idx));
	if (!sp.m || !sp.idx || pp_htab_init(&sp.name_idx, 64))
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);

		sp.m[i] = (struct member){.idx = i,
					  .resource_id = s->resource_id,
					  .pid = s->pid,
					  .process = s->process_name};
		if (by == PP_SPLIT_BY_SERVICE) {
			char buf[PP_PYROSCOPE_NAME_MAX];

			sp.m[i].service = own_name(
			    &sp, out, pp_split_service_of(p, s, service, buf, sizeof(buf)));
			if (!sp.m[i].service)
				goto out;
		}
	}
	qsort(sp.m, n, sizeof(*sp.m), by == PP_SPLIT_BY_SERVICE ? cmp_by_service : cmp_by_resource);
	for (size_t lo = 0, hi; lo < n; lo = hi) {
		size_t next = 0;

		for (hi = lo + 1; hi < n && same_group(&sp, &sp.m[lo], &sp.m[hi]); hi++)
			;
		out->groups++;
		err = cut(&sp, lo, hi, &next);
		if (err)
			goto out;
		out->cut += next > 1;
	}
	out->oversize = sp.oversize;
	err = arrange(&sp, out);
out:
	free(sp.m);
	free(sp.idx);
	free(sp.pieces);
	pp_htab_fini(&sp.name_idx);
	if (err)
		pp_split_fini(out);
	return err;
}

void pp_split_fini(struct pp_split *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nowned; i++)
		pp_profile_free(s->owned[i]);
	free(s->owned);
	free(s->parts);
	for (size_t i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	memset(s, 0, sizeof(*s));
}
