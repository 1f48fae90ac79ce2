/*
 * pprof encoder: turns the profile model into a perftools.profiles.Profile with protobuf-c,
 * and writes it gzipped (what `go tool pprof` and Pyroscope read). The message tree borrows
 * the profile's strings and lives only for the duration of one encode.
 */
#include <pebsprof/pyroscope.h>
#include <pebsprof/writers.h>

#include "base/arena.h"
#include "base/fileio.h"
#include "base/htab.h"
#include "pbpack.h"
#include "pprof/profile.pb-c.h"
#include "base/strtab.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define KERNEL_MAPPING_NAME "[kernel.kallsyms]"

/* A pprof Function is one (name, kind): the same symbol in kernel and user space differs. */
struct func_key {
	const char *name;
	const char *system_name; /* the mangled name; overloads shown alike stay apart */
	enum pp_frame_kind kind;
};

struct enc {
	const struct pp_profile *p;
	struct pp_strtab st;
	bool failed;
	bool off_cpu; /* the off-CPU samples only, as their own profile */

	struct func_key *fkeys;
	uint32_t nfuncs;
	struct pp_htab fidx;

	Perftools__Profiles__ValueType vt[4];
	Perftools__Profiles__ValueType *vtp[3];
	uint32_t nvalues; /* sample types: 2 for cpu-clock, 1 or 2 (with latency) for events */
	enum { VALUE_COUNT, VALUE_SUM, VALUE_LATENCY } value_of[3]; /* what each value holds */
	char type_name[PP_PROFILE_TYPE_NAME_MAX]; /* the string table borrows it */
	char comment[96];			  /* ... and this */
	int64_t comment_idx;
	Perftools__Profiles__Mapping *maps;
	Perftools__Profiles__Mapping **mapp;
	Perftools__Profiles__Location *locs;
	Perftools__Profiles__Location **locp;
	Perftools__Profiles__Line *lines;
	Perftools__Profiles__Line **linep;
	Perftools__Profiles__Function *funcs;
	Perftools__Profiles__Function **funcp;
	Perftools__Profiles__Sample *samples;
	Perftools__Profiles__Sample **samplep;
	uint64_t *loc_ids;
	int64_t *values;
	Perftools__Profiles__Label *labels;
	Perftools__Profiles__Label **labelp;
	/* Label names left out for Pyroscope's limit (profile.h); numeric labels never count. */
	struct pp_label_budget budget;
	struct pp_arena ar; /* label names as Pyroscope takes them */
	struct {
		const char *key; /* interned in the profile: compared by pointer */
		int64_t idx;
	} names[16]; /* the label names mapped so far, most of a profile's few */
	uint32_t nnames;
};

/* Index of s in string_table; 0 on failure, which e->failed records. */
static int64_t S(struct enc *e, const char *s)
{
	int32_t i = pp_strtab_add(&e->st, s);

	if (i < 0) {
		e->failed = true;
		return 0;
	}
	return i;
}

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct enc *e = ctx;
	const struct func_key *k = key;

	return e->fkeys[idx].name == k->name && e->fkeys[idx].system_name == k->system_name &&
	       e->fkeys[idx].kind == k->kind;
}

static void enc_fini(struct enc *e)
{
	pp_arena_fini(&e->ar);
	pp_strtab_fini(&e->st);
	free(e->fkeys);
	pp_htab_fini(&e->fidx);
	free(e->maps);
	free(e->mapp);
	free(e->locs);
	free(e->locp);
	free(e->lines);
	free(e->linep);
	free(e->funcs);
	free(e->funcp);
	free(e->samples);
	free(e->samplep);
	free(e->loc_ids);
	free(e->values);
	free(e->labels);
	free(e->labelp);
}

static void *xcalloc(struct enc *e, size_t n, size_t sz)
{
	void *r = calloc(n ? n : 1, sz);

	if (!r)
		e->failed = true;
	return r;
}

/*
 * Index of a label name as every Pyroscope version takes it (pyroscope.h): names other
 * programs chose (pod labels, OTEL_RESOURCE_ATTRIBUTES keys) are mapped, ours pass as they are.
 */
static int64_t label_name(struct enc *e, const char *key)
{
	size_t n = strlen(key) + 2;
	uint32_t slot = e->nnames % 16;
	char *clean;

	for (uint32_t i = 0; i < e->nnames && i < 16; i++)
		if (e->names[i].key == key)
			return e->names[i].idx;
	if (pp_pyroscope_label_name_ok(key))
		return S(e, key);
	clean = pp_arena_alloc(&e->ar, n);
	if (!clean) {
		e->failed = true;
		return 0;
	}
	pp_pyroscope_label_name(key, clean, n);
	e->names[slot].key = key;
	e->names[slot].idx = S(e, clean);
	e->nnames++;
	return e->names[slot].idx;
}

/* Whether a label named like string key (v1.21 folds '.' into '_') is in sl[0..n). */
static bool label_taken(const struct enc *e, Perftools__Profiles__Label *const *sl, size_t n,
			int64_t key)
{
	for (size_t i = 0; i < n; i++)
		if (sl[i]->key == key ||
		    pp_pyroscope_label_names_clash(e->st.strs[sl[i]->key], e->st.strs[key]))
			return true;
	return false;
}

struct exe_weight {
	const char *path; /* interned in the profile: equal paths are equal pointers */
	uint64_t count;
};

static int cmp_exe(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct exe_weight *)a)->path;
	uintptr_t y = (uintptr_t)((const struct exe_weight *)b)->path;

	return (x > y) - (x < y);
}

/* The executable path of the process with the most samples; NULL when none is known. */
static const char *heaviest_executable(const struct pp_profile *p)
{
	size_t n = pp_profile_sample_count(p), m = 0;
	struct exe_weight *w = calloc(n ? n : 1, sizeof(*w));
	const char *best = NULL;
	uint64_t best_count = 0;

	if (!w)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);

		if (s->process_path && s->process_path[0] && !s->wait)
			w[m++] = (struct exe_weight){s->process_path, s->count};
	}
	if (m > 1)
		qsort(w, m, sizeof(*w), cmp_exe);
	for (size_t i = 0; i < m;) {
		size_t j = i;
		uint64_t c = 0;

		while (j < m && w[j].path == w[i].path)
			c += w[j++].count;
		if (c > best_count) {
			best_count = c;
			best = w[i].path;
		}
		i = j;
	}
	free(w);
	return best;
}

static int build_mappings(struct enc *e, Perftools__Profiles__Profile *msg, uint32_t *kmap_id)
{
	const struct pp_profile *p = e->p;
	size_t nmaps = pp_profile_mapping_count(p), nlocs = pp_profile_location_count(p);
	uint64_t kmin = UINT64_MAX, kmax = 0;
	bool need_kmap = false;

	for (uint32_t id = 1; id <= nlocs; id++) {
		const struct pp_location_info *l = pp_profile_get_location(p, id);

		if (l->kind == PP_FRAME_KERNEL && l->mapping_id == 0) {
			need_kmap = true;
			if (l->address < kmin)
				kmin = l->address;
			if (l->address > kmax)
				kmax = l->address;
		}
	}
	msg->n_mapping = nmaps + need_kmap;
	e->maps = xcalloc(e, msg->n_mapping, sizeof(*e->maps));
	e->mapp = xcalloc(e, msg->n_mapping, sizeof(*e->mapp));
	if (e->failed)
		return -ENOMEM;
	for (size_t i = 0; i < nmaps; i++) {
		const struct pp_mapping_info *m = pp_profile_get_mapping(p, (uint32_t)i + 1);
		Perftools__Profiles__Mapping *pm = &e->maps[i];

		perftools__profiles__mapping__init(pm);
		pm->id = i + 1;
		pm->memory_start = m->start;
		pm->memory_limit = m->limit;
		pm->file_offset = m->file_offset;
		pm->filename = S(e, m->filename);
		pm->build_id = S(e, m->build_id);
		pm->has_functions = 1;
		e->mapp[i] = pm;
	}
	/* a mapping with a frame left unnamed is one a symbolizer should still look at */
	for (uint32_t id = 1; id <= nlocs; id++) {
		const struct pp_location_info *l = pp_profile_get_location(p, id);

		if (l->unnamed && l->mapping_id)
			e->maps[l->mapping_id - 1].has_functions = 0;
	}
	*kmap_id = 0;
	if (need_kmap) {
		Perftools__Profiles__Mapping *pm = &e->maps[nmaps];

		/* The collector normally names the kernel mapping; this covers callers that don't.
		 */
		perftools__profiles__mapping__init(pm);
		pm->id = nmaps + 1;
		pm->memory_start = kmin;
		pm->memory_limit = kmax == UINT64_MAX ? kmax : kmax + 1;
		pm->filename = S(e, KERNEL_MAPPING_NAME);
		pm->build_id = S(e, "");
		pm->has_functions = 1;
		e->mapp[nmaps] = pm;
		*kmap_id = (uint32_t)pm->id;
	}
	/*
	 * pprof treats the first mapping as the main binary (`go tool pprof` prints it as the
	 * profile's File), so the executable of the process with the most samples goes first,
	 * then the other file mappings, and pseudo ones such as "[kernel.kallsyms]" last; ids
	 * stay.
	 */
	{
		const char *main_exe = heaviest_executable(p);
		size_t w = 0;

		for (int pass = 0; pass < 3; pass++) {
			for (size_t i = 0; i < msg->n_mapping; i++) {
				const char *name =
				    i < nmaps ? pp_profile_get_mapping(p, (uint32_t)i + 1)->filename
					      : KERNEL_MAPPING_NAME;
				int rank = name[0] == '[' || name[0] == '\0'	     ? 2
					   : main_exe && strcmp(name, main_exe) == 0 ? 0
										     : 1;

				if (rank == pass)
					e->mapp[w++] = &e->maps[i];
			}
		}
	}
	msg->mapping = e->mapp;
	return e->failed ? -ENOMEM : 0;
}

static int build_locations(struct enc *e, Perftools__Profiles__Profile *msg, uint32_t kmap_id)
{
	const struct pp_profile *p = e->p;
	size_t nlocs = pp_profile_location_count(p);

	e->locs = xcalloc(e, nlocs, sizeof(*e->locs));
	e->locp = xcalloc(e, nlocs, sizeof(*e->locp));
	e->lines = xcalloc(e, nlocs, sizeof(*e->lines));
	e->linep = xcalloc(e, nlocs, sizeof(*e->linep));
	/* At most one function per location. */
	e->funcs = xcalloc(e, nlocs, sizeof(*e->funcs));
	e->funcp = xcalloc(e, nlocs, sizeof(*e->funcp));
	e->fkeys = xcalloc(e, nlocs, sizeof(*e->fkeys));
	if (e->failed || pp_htab_init(&e->fidx, (uint32_t)nlocs))
		return -ENOMEM;

	for (size_t i = 0; i < nlocs; i++) {
		const struct pp_location_info *l = pp_profile_get_location(p, (uint32_t)i + 1);
		Perftools__Profiles__Location *pl = &e->locs[i];
		struct func_key k = {.name = l->function,
				     .system_name = l->system_name ? l->system_name : l->function,
				     .kind = l->kind};
		uint64_t h = pp_hash_u64(pp_hash_u64(pp_hash_u64(PP_HASH_SEED, (uintptr_t)k.name),
						     (uintptr_t)k.system_name),
					 k.kind);
		uint32_t mapping_id = l->mapping_id;
		uint32_t fi = pp_htab_find(&e->fidx, h, func_eq, e, &k);

		if (!mapping_id && l->kind == PP_FRAME_KERNEL)
			mapping_id = kmap_id;
		if (fi == PP_HTAB_NONE) {
			Perftools__Profiles__Function *pf = &e->funcs[e->nfuncs];
			const struct pp_mapping_info *m = pp_profile_get_mapping(p, mapping_id);

			fi = e->nfuncs;
			if (pp_htab_insert(&e->fidx, h, fi))
				return -ENOMEM;
			e->fkeys[fi] = k;
			perftools__profiles__function__init(pf);
			pf->id = fi + 1;
			pf->name = S(e, l->function);
			pf->system_name = S(e, k.system_name);
			if (m)
				pf->filename = S(e, m->filename);
			else if (l->kind == PP_FRAME_KERNEL)
				pf->filename = S(e, KERNEL_MAPPING_NAME);
			e->funcp[fi] = pf;
			e->nfuncs++;
		}
		perftools__profiles__line__init(&e->lines[i]);
		e->lines[i].function_id = fi + 1;
		e->linep[i] = &e->lines[i];

		perftools__profiles__location__init(pl);
		pl->id = i + 1;
		pl->mapping_id = mapping_id;
		pl->address = l->address;
		/* pprof's address is the process's: inside the Mapping, which gives the file
		 * offset (address - memory_start + file_offset) and so the ELF address */
		if (l->mapping_id)
			pl->address += pp_profile_get_mapping(p, l->mapping_id)->load_bias;
		/* left to the backend: the address alone, as pprof writes what it has not
		 * symbolized */
		if (!(l->unnamed == PP_UNNAMED_FOR_BACKEND && l->mapping_id)) {
			pl->n_line = 1;
			pl->line = &e->linep[i];
		}
		e->locp[i] = pl;
	}
	msg->n_location = nlocs;
	msg->location = e->locp;
	msg->n_function = e->nfuncs;
	msg->function = e->funcp;
	return e->failed ? -ENOMEM : 0;
}

static int build_samples(struct enc *e, Perftools__Profiles__Profile *msg)
{
	const struct pp_profile *p = e->p;
	size_t nsamples = pp_profile_sample_count(p), nlocids = 0, nlabels = 0;
	size_t li = 0, lab = 0, nout = 0;
	int64_t k_pid, k_tid, k_thread, k_process;

	for (size_t i = 0; i < nsamples; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);

		uint32_t nres = 0;

		pp_profile_get_resource(p, s->resource_id, &nres);
		nlocids += s->nlocations;
		nlabels += 4 + s->nlabels + !!s->has_cpu + nres + 1; /* + 1: off_cpu.state */
	}
	e->samples = xcalloc(e, nsamples, sizeof(*e->samples));
	e->samplep = xcalloc(e, nsamples, sizeof(*e->samplep));
	e->loc_ids = xcalloc(e, nlocids, sizeof(*e->loc_ids));
	e->values = xcalloc(e, nsamples * e->nvalues, sizeof(*e->values));
	e->labels = xcalloc(e, nlabels, sizeof(*e->labels));
	e->labelp = xcalloc(e, nlabels, sizeof(*e->labelp));
	if (e->failed)
		return -ENOMEM;

	k_pid = S(e, "pid");
	k_tid = S(e, "tid");
	k_thread = S(e, "thread_name");
	k_process = S(e, "process_name");
	for (size_t i = 0; i < nsamples; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, i);
		Perftools__Profiles__Sample *ps = &e->samples[nout];
		Perftools__Profiles__Label **sl = &e->labelp[lab];
		uint32_t nres = 0;
		/* The container and pod become labels: pprof has no resources. */
		const struct pp_label *res = pp_profile_get_resource(p, s->resource_id, &nres);
		uint32_t nl = 4 + s->nlabels + !!s->has_cpu;

		if (!s->wait != !e->off_cpu)
			continue; /* off-CPU time is not the event's, and the event's not it */
		perftools__profiles__sample__init(ps);
		ps->n_location_id = s->nlocations;
		ps->location_id = s->nlocations ? &e->loc_ids[li] : NULL;
		for (uint32_t j = 0; j < s->nlocations; j++)
			e->loc_ids[li++] = s->locations[j];
		ps->n_value = e->nvalues;
		ps->value = &e->values[nout * e->nvalues];
		for (uint32_t v = 0; v < e->nvalues; v++)
			ps->value[v] = (int64_t)(e->value_of[v] == VALUE_COUNT ? s->count
						 : e->value_of[v] == VALUE_SUM ? s->value
									       : s->latency);

		for (uint32_t j = 0; j < nl + nres; j++) {
			Perftools__Profiles__Label *pl = &e->labels[lab];

			perftools__profiles__label__init(pl);
			if (j >= nl) {
				const char *k = res[j - nl].key;

				/*
				 * Pyroscope's /ingest takes service_name from the request; a second
				 * one from a label with another value is a duplicate it rejects.
				 */
				if (strcmp(k, "service.name") == 0 ||
				    pp_label_budget_drops(&e->budget, k))
					continue;
				pl->key = label_name(e, k);
				/* two names that Pyroscope reads as one: the first given stays */
				if (label_taken(e, sl, (size_t)(&e->labelp[lab] - sl), pl->key))
					continue;
				pl->str = S(e, res[j - nl].value);
				e->labelp[lab++] = pl;
				continue;
			}
			if ((j == 0 && (s->hidden & PP_SAMPLE_HIDE_PID)) ||
			    ((j == 1 || j == 2) && (s->hidden & PP_SAMPLE_HIDE_THREAD)))
				continue;
			switch (j) {
			case 0:
				pl->key = k_pid;
				pl->num = s->pid;
				break;
			case 1:
				pl->key = k_tid;
				pl->num = s->tid;
				break;
			case 2:
				pl->key = k_thread;
				pl->str = S(e, s->thread_name);
				break;
			case 3:
				pl->key = k_process;
				pl->str = S(e, s->process_name);
				break;
			default:
				if (j == 4 + s->nlabels) { /* has_cpu */
					pl->key = S(e, "cpu");
					pl->num = s->cpu;
					break;
				}
				if (pp_label_budget_drops(&e->budget, s->labels[j - 4].key))
					continue;
				pl->key = label_name(e, s->labels[j - 4].key);
				if (label_taken(e, sl, (size_t)(&e->labelp[lab] - sl), pl->key))
					continue;
				pl->str = S(e, s->labels[j - 4].value);
				break;
			}
			e->labelp[lab++] = pl;
		}
		if (e->off_cpu) {
			Perftools__Profiles__Label *pl = &e->labels[lab];

			perftools__profiles__label__init(pl);
			pl->key = label_name(e, PP_LABEL_OFF_CPU_STATE);
			pl->str = S(e, pp_wait_state_name(s->wait));
			e->labelp[lab++] = pl;
		}
		ps->n_label = (size_t)(&e->labelp[lab] - sl);
		ps->label = sl;
		e->samplep[nout++] = ps;
	}
	msg->n_sample = nout;
	msg->sample = e->samplep;
	return e->failed ? -ENOMEM : 0;
}

void pp_pprof_plan_labels(const struct pp_profile *p, struct pp_label_budget *b)
{
	memset(b, 0, sizeof(*b));
	pp_label_budget_offer(b, "thread_name");
	pp_label_budget_offer(b, "process_name");
	pp_label_budget_offer_profile(b, p);
	pp_label_budget_plan(b, PP_LABEL_BUDGET);
}

/* Bytes of a varint holding v. */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/*
 * Upper bounds of encoded pieces: a length-delimited field's tag and length prefix (a
 * message under 2 MiB), a varint field of any value. A Label is under 128 bytes: one byte of
 * tag and one of length, then its key's index and its str's index or its num (at most a
 * u32 here: pids, tids, cpus).
 */
#define LEN_FIELD 4
#define VARINT_FIELD 11
#define NUM_LABEL(v) (2 + (1 + (v)) + (1 + 5))
#define STR_LABEL(v) (2 + 2 * (1 + (v)))

static size_t str_bound(const char *s, size_t *nstr)
{
	(*nstr)++;
	return 1 + varint_len(strlen(s)) + strlen(s);
}

struct bound {
	const struct pp_profile *p;
	uint8_t *seen_loc, *seen_map;
	size_t nlocs, nmaps, nstr, bytes;
};

/* A Location with its Line, a Function of its own with its name, and its Mapping once. */
static void bound_location(struct bound *b, uint32_t id)
{
	const struct pp_location_info *l;
	const struct pp_mapping_info *m;

	if (id > b->nlocs || b->seen_loc[id])
		return;
	b->seen_loc[id] = 1;
	l = pp_profile_get_location(b->p, id);
	b->bytes += 2 * LEN_FIELD + 4 * VARINT_FIELD;
	b->bytes += LEN_FIELD + 4 * VARINT_FIELD + str_bound(l->function, &b->nstr);
	if (l->system_name && l->system_name != l->function)
		b->bytes += str_bound(l->system_name, &b->nstr);
	if (l->mapping_id > b->nmaps || b->seen_map[l->mapping_id])
		return;
	b->seen_map[l->mapping_id] = 1;
	m = pp_profile_get_mapping(b->p, l->mapping_id);
	if (m)
		b->bytes += LEN_FIELD + 10 * VARINT_FIELD + str_bound(m->filename, &b->nstr) +
			    str_bound(m->build_id, &b->nstr);
}

size_t pp_pprof_size_bound(const struct pp_profile *p, const size_t *idx, size_t n)
{
	/* sample and period types, period, times, the kernel mapping, the label keys */
	struct bound b = {.p = p,
			  .nlocs = pp_profile_location_count(p),
			  .nmaps = pp_profile_mapping_count(p),
			  .nstr = 16,
			  .bytes = 1024};
	size_t loc_id = varint_len(b.nlocs + 1), num_labels = 0, str_labels = 0, v;
	const char *last_thread = NULL, *last_process = NULL;

	b.seen_loc = calloc(b.nlocs + 1, 1);
	b.seen_map = calloc(b.nmaps + 1, 1);
	if (!b.seen_loc || !b.seen_map) {
		free(b.seen_loc);
		free(b.seen_map);
		return SIZE_MAX;
	}
	for (size_t i = 0; i < n; i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(p, idx ? idx[i] : i);
		uint32_t nres = 0;
		const struct pp_label *res;

		if (!s)
			continue;
		res = pp_profile_get_resource(p, s->resource_id, &nres);
		/* the Sample: packed location ids, at most three values, its labels */
		b.bytes += 2 * LEN_FIELD + (size_t)s->nlocations * loc_id + LEN_FIELD + 3 * 10;
		num_labels += 3; /* pid, tid, cpu */
		str_labels += 2 + (size_t)s->nlabels + nres;
		/* label strings, counted again unless the previous sample had the same (interned)
		 */
		if (s->thread_name != last_thread)
			b.bytes += str_bound(s->thread_name, &b.nstr);
		if (s->process_name != last_process)
			b.bytes += str_bound(s->process_name, &b.nstr);
		last_thread = s->thread_name;
		last_process = s->process_name;
		for (uint32_t j = 0; j < s->nlabels; j++)
			b.bytes += str_bound(s->labels[j].key, &b.nstr) +
				   str_bound(s->labels[j].value, &b.nstr);
		for (uint32_t j = 0; res && j < nres; j++)
			b.bytes +=
			    str_bound(res[j].key, &b.nstr) + str_bound(res[j].value, &b.nstr);
		for (uint32_t j = 0; j < s->nlocations; j++)
			bound_location(&b, s->locations[j]);
	}
	/* the whole profile: pp_pprof_encode writes every location, referred to or not */
	if (!idx && n == pp_profile_sample_count(p))
		for (uint32_t id = 1; id <= b.nlocs; id++)
			bound_location(&b, id);
	free(b.seen_loc);
	free(b.seen_map);
	/* every string written is one counted above (or a fixed one), so nstr bounds an index */
	v = varint_len(b.nstr);
	return b.bytes + num_labels * NUM_LABEL(v) + str_labels * STR_LABEL(v);
}

static int encode(const struct pp_profile *p, bool off_cpu, uint8_t **out, size_t *out_len)
{
	Perftools__Profiles__Profile msg;
	const struct pp_profile_desc *d;
	struct enc e;
	uint32_t kmap_id = 0;
	int err;

	if (!p || !out || !out_len)
		return -EINVAL;
	*out = NULL;
	*out_len = 0;
	d = pp_profile_get_desc(p);
	memset(&e, 0, sizeof(e));
	e.p = p;
	e.off_cpu = off_cpu;
	perftools__profiles__profile__init(&msg);

	/* pprof requires string_table[0] == "", which the table starts with. */
	if (pp_strtab_init(&e.st))
		e.failed = true;
	for (int i = 0; i < 4; i++)
		perftools__profiles__value_type__init(&e.vt[i]);
	/* The names and values of profile.h: the same as the OTLP encoder writes. */
	if (off_cpu) {
		/* Pyroscope names a pprof of (off_cpu, nanoseconds) alone off_cpu */
		e.vt[0].type = S(&e, "off_cpu");
		e.vt[0].unit = S(&e, "nanoseconds");
		e.value_of[0] = VALUE_SUM;
		e.nvalues = 1;
	} else if (pp_profile_is_cpu(d)) {
		e.vt[0].type = S(&e, "samples");
		e.vt[0].unit = S(&e, "count");
		e.vt[1].type = S(&e, d->value_type);
		e.vt[1].unit = S(&e, d->value_unit);
		e.vt[3] = e.vt[1];
		e.value_of[0] = VALUE_COUNT;
		e.value_of[1] = VALUE_SUM;
		e.nvalues = 2;
	} else {
		/*
		 * Pyroscope's /ingest names a pprof after its last sample type when no other rule
		 * matches, so the event's own type goes last and "samples" (its CPU rule) is out.
		 */
		pp_profile_type_name(d, e.type_name, sizeof(e.type_name));
		if (d->mem_latency) {
			e.vt[e.nvalues].type = S(&e, "latency");
			e.vt[e.nvalues].unit = S(&e, "cycles");
			e.value_of[e.nvalues++] = VALUE_LATENCY;
		}
		e.vt[e.nvalues].type = S(&e, e.type_name);
		e.vt[e.nvalues].unit = S(&e, "count");
		e.vt[3] = e.vt[e.nvalues];
		e.value_of[e.nvalues++] = VALUE_SUM;
	}
	for (uint32_t i = 0; i < e.nvalues; i++)
		e.vtp[i] = &e.vt[i];
	if (off_cpu) {
		/* the values are scaled by the switches not recorded: say so */
		snprintf(e.comment, sizeof(e.comment),
			 "off-CPU: 1 in %u context switches recorded, values scaled by %u",
			 d->off_cpu_every > 1 ? d->off_cpu_every : 1,
			 d->off_cpu_every > 1 ? d->off_cpu_every : 1);
		e.comment_idx = S(&e, e.comment);
		msg.n_comment = 1;
		msg.comment = &e.comment_idx;
	}
	msg.n_sample_type = e.nvalues;
	msg.sample_type = e.vtp;
	msg.period_type = off_cpu ? NULL : &e.vt[3];
	msg.period = off_cpu ? 0 : (int64_t)pp_profile_period(p);
	msg.time_nanos = (int64_t)d->start_unix_ns;
	msg.duration_nanos = (int64_t)d->duration_ns;

	pp_pprof_plan_labels(p, &e.budget);
	err = build_mappings(&e, &msg, &kmap_id);
	if (!err)
		err = build_locations(&e, &msg, kmap_id);
	if (!err)
		err = build_samples(&e, &msg);
	if (!err && e.failed)
		err = -ENOMEM;
	if (err)
		goto out;

	/* protobuf-c wants char **; it only reads the strings. */
	msg.n_string_table = e.st.n;
	msg.string_table = (char **)e.st.strs;
	err = pp_pb_pack(&msg.base, out, out_len);
out:
	enc_fini(&e);
	return err;
}

int pp_pprof_encode(const struct pp_profile *p, uint8_t **out, size_t *out_len)
{
	return encode(p, false, out, out_len);
}

int pp_pprof_encode_off_cpu(const struct pp_profile *p, uint8_t **out, size_t *out_len)
{
	return encode(p, true, out, out_len);
}

/* Deflates with a gzip wrapper (windowBits 15 + 16). *gz is malloc'ed. */
static int gzip_bytes(const uint8_t *in, size_t in_len, uint8_t **gz, size_t *gz_len)
{
	z_stream zs;
	uLong bound;
	uint8_t *buf;
	int zr;

	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	if (in_len > UINT32_MAX) {
		deflateEnd(&zs);
		return -EFBIG;
	}
	bound = deflateBound(&zs, (uLong)in_len) + 32;
	buf = malloc(bound);
	if (!buf) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)in_len;
	zs.next_out = buf;
	zs.avail_out = (uInt)bound;
	zr = deflate(&zs, Z_FINISH);
	if (zr != Z_STREAM_END) {
		deflateEnd(&zs);
		free(buf);
		return -EIO;
	}
	*gz_len = zs.total_out;
	deflateEnd(&zs);
	*gz = buf;
	return 0;
}

int pp_pprof_write_file(const struct pp_profile *p, const char *path)
{
	uint8_t *raw = NULL, *gz = NULL;
	size_t raw_len = 0, gz_len = 0;
	int err;

	if (!p || !path)
		return -EINVAL;
	err = pp_pprof_encode(p, &raw, &raw_len);
	if (err)
		return err;
	err = gzip_bytes(raw, raw_len, &gz, &gz_len);
	free(raw);
	if (err)
		return err;
	err = pp_file_write_bytes(path, gz, gz_len);
	free(gz);
	return err;
}
