/*
 * PMU discovery from sysfs (see pmu.h). The layout follows the kernel's perf sysfs ABI
 * (Documentation/ABI/testing/sysfs-bus-event_source-devices-*): <pmu>/type, <pmu>/cpus or
 * cpumask, and the caps, format and events directories of each PMU.
 */
#include "pmu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"

#define FILE_BUF 4096

/* Copy buf[0..len) without surrounding whitespace into dst (truncating to size). */
static void copy_trimmed(char *dst, size_t size, const char *buf, size_t len)
{
	while (len && isspace((unsigned char)buf[0])) {
		buf++;
		len--;
	}
	while (len && isspace((unsigned char)buf[len - 1]))
		len--;
	if (len >= size)
		len = size - 1;
	memcpy(dst, buf, len);
	dst[len] = '\0';
}

/* Parse an unsigned decimal number from buf[*pos..len). */
static int parse_uint(const char *buf, size_t len, size_t *pos, unsigned long *out)
{
	unsigned long v = 0;
	size_t i = *pos;

	if (i >= len || !isdigit((unsigned char)buf[i]))
		return -EINVAL;
	while (i < len && isdigit((unsigned char)buf[i])) {
		if (v > (ULONG_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (unsigned long)(buf[i] - '0');
		i++;
	}
	*pos = i;
	*out = v;
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

size_t pp_cpus_sort_unique(int *cpus, size_t n)
{
	size_t w = 1;

	if (n == 0)
		return 0;
	qsort(cpus, n, sizeof(*cpus), cmp_int);
	for (size_t i = 1; i < n; i++)
		if (cpus[i] != cpus[w - 1])
			cpus[w++] = cpus[i];
	return w;
}

int pp_cpulist_parse(const char *buf, size_t len, int **cpus, size_t *nr)
{
	int *out = NULL;
	size_t n = 0, cap = 0, pos = 0;
	int err;

	*cpus = NULL;
	*nr = 0;
	while (len && isspace((unsigned char)buf[len - 1]))
		len--;
	while (pos < len) {
		unsigned long lo, hi;

		err = parse_uint(buf, len, &pos, &lo);
		if (err)
			goto out_free;
		hi = lo;
		if (pos < len && buf[pos] == '-') {
			pos++;
			err = parse_uint(buf, len, &pos, &hi);
			if (err)
				goto out_free;
		}
		if (hi < lo || hi >= PP_CPULIST_MAX_CPUS) {
			err = hi < lo ? -EINVAL : -E2BIG;
			goto out_free;
		}
		for (unsigned long c = lo; c <= hi; c++) {
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				int *tmp;

				if (ncap > PP_CPULIST_MAX_CPUS)
					ncap = PP_CPULIST_MAX_CPUS;
				if (n >= ncap) {
					err = -E2BIG;
					goto out_free;
				}
				tmp = realloc(out, ncap * sizeof(*out));
				if (!tmp) {
					err = -ENOMEM;
					goto out_free;
				}
				out = tmp;
				cap = ncap;
			}
			out[n++] = (int)c;
		}
		if (pos < len) {
			if (buf[pos] != ',') {
				err = -EINVAL;
				goto out_free;
			}
			pos++;
			if (pos == len) {
				err = -EINVAL;
				goto out_free;
			}
		}
	}
	n = pp_cpus_sort_unique(out, n);
	*cpus = out;
	*nr = n;
	return 0;

out_free:
	free(out);
	return err;
}

int pp_pmu_format_parse(const char *buf, size_t len, struct pp_pmu_format *out)
{
	static const char *const words[] = {"config2", "config1", "config"};
	static const unsigned int word_idx[] = {2, 1, 0};
	size_t pos = 0;
	uint64_t mask = 0;
	int word = -1;

	while (len && isspace((unsigned char)buf[len - 1]))
		len--;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t wl = strlen(words[i]);

		if (len > wl && memcmp(buf, words[i], wl) == 0 && buf[wl] == ':') {
			word = (int)word_idx[i];
			pos = wl + 1;
			break;
		}
	}
	if (word < 0)
		return -EINVAL;
	if (pos == len)
		return -EINVAL;
	while (pos < len) {
		unsigned long lo, hi;

		if (parse_uint(buf, len, &pos, &lo))
			return -EINVAL;
		hi = lo;
		if (pos < len && buf[pos] == '-') {
			pos++;
			if (parse_uint(buf, len, &pos, &hi))
				return -EINVAL;
		}
		if (hi < lo || hi > 63)
			return -EINVAL;
		for (unsigned long b = lo; b <= hi; b++)
			mask |= 1ULL << b;
		if (pos < len) {
			if (buf[pos] != ',' || pos + 1 == len)
				return -EINVAL;
			pos++;
		}
	}
	out->word = (unsigned int)word;
	out->mask = mask;
	return 0;
}

enum pp_pmu_kind pp_pmu_classify(const char *name)
{
	if (!strcmp(name, "cpu") || !strcmp(name, "cpu_core") || !strcmp(name, "cpu_atom") ||
	    !strcmp(name, "cpu_lowpower"))
		return PP_PMU_INTEL_CORE;
	if (!strcmp(name, "ibs_op"))
		return PP_PMU_AMD_IBS_OP;
	if (!strcmp(name, "ibs_fetch"))
		return PP_PMU_AMD_IBS_FETCH;
	if (!strcmp(name, "software"))
		return PP_PMU_SOFTWARE;
	return PP_PMU_OTHER;
}

const char *pp_pmu_kind_str(enum pp_pmu_kind kind)
{
	switch (kind) {
	case PP_PMU_INTEL_CORE:
		return "intel-core";
	case PP_PMU_AMD_CORE:
		return "amd-core";
	case PP_PMU_AMD_IBS_OP:
		return "amd-ibs-op";
	case PP_PMU_AMD_IBS_FETCH:
		return "amd-ibs-fetch";
	case PP_PMU_SOFTWARE:
		return "software";
	case PP_PMU_OTHER:
		break;
	}
	return "other";
}

static void pmu_fini(struct pp_pmu *pmu)
{
	free(pmu->cpus);
	free(pmu->formats);
	free(pmu->events);
	free(pmu->caps);
}

void pp_pmu_set_free(struct pp_pmu_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->nr_pmus; i++)
		pmu_fini(&set->pmus[i]);
	free(set->pmus);
	free(set->online);
	free(set);
}

static int name_ok(const char *name)
{
	return name[0] != '.' && strlen(name) < PP_PMU_NAME_LEN;
}

/*
 * Sorted directory listing (names only), bounded by max; dropped entries are counted.
 * Returns NULL with *nr == 0 for empty or missing directories; *errp gets -errno if opendir
 * failed (may be NULL).
 */
static char **list_dir_err(const char *path, size_t max, size_t *nr, size_t *dropped, int *errp)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;

	*nr = 0;
	if (errp)
		*errp = 0;
	if (!d) {
		if (errp)
			*errp = -errno;
		return NULL;
	}
	while ((de = readdir(d))) {
		char **tmp;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!name_ok(de->d_name) || n >= max) {
			(*dropped)++;
			continue;
		}
		tmp = realloc(names, (n + 1) * sizeof(*names));
		if (!tmp)
			break;
		names = tmp;
		names[n] = strdup(de->d_name);
		if (!names[n])
			break;
		n++;
	}
	closedir(d);
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	*nr = n;
	return names;
}

static char **list_dir(const char *path, size_t max, size_t *nr, size_t *dropped)
{
	return list_dir_err(path, max, nr, dropped, NULL);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int load_formats(struct pp_pmu *pmu, const char *dir)
{
	char path[PATH_MAX], buf[FILE_BUF];
	size_t n;
	char **names = list_dir(dir, PP_PMU_MAX_FORMATS, &n, &pmu->nr_dropped);

	if (!n)
		return 0;
	pmu->formats = calloc(n, sizeof(*pmu->formats));
	if (!pmu->formats) {
		free_names(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct pp_pmu_format *f = &pmu->formats[pmu->nr_formats];
		ssize_t len;

		pp_pathf(path, sizeof(path), "%s/%s", dir, names[i]);
		len = pp_read_small_file(path, buf, sizeof(buf));
		if (len < 0 || pp_pmu_format_parse(buf, (size_t)len, f)) {
			pmu->nr_dropped++;
			continue;
		}
		snprintf(f->name, sizeof(f->name), "%s", names[i]);
		pmu->nr_formats++;
	}
	free_names(names, n);
	return 0;
}

static int load_events(struct pp_pmu *pmu, const char *dir)
{
	char path[PATH_MAX], buf[FILE_BUF];
	size_t n;
	char **names = list_dir(dir, PP_PMU_MAX_EVENTS, &n, &pmu->nr_dropped);

	if (!n)
		return 0;
	pmu->events = calloc(n, sizeof(*pmu->events));
	if (!pmu->events) {
		free_names(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct pp_pmu_event *e = &pmu->events[pmu->nr_events];
		ssize_t len;

		/* events/<name>.scale, .unit, .snapshot describe an event; they are not one */
		if (strchr(names[i], '.'))
			continue;
		pp_pathf(path, sizeof(path), "%s/%s", dir, names[i]);
		len = pp_read_small_file(path, buf, sizeof(buf));
		if (len < 0 || (size_t)len >= PP_PMU_EVENT_LEN) {
			pmu->nr_dropped++;
			continue;
		}
		snprintf(e->name, sizeof(e->name), "%s", names[i]);
		copy_trimmed(e->encoding, sizeof(e->encoding), buf, (size_t)len);
		pmu->nr_events++;
	}
	free_names(names, n);
	return 0;
}

static int load_caps(struct pp_pmu *pmu, const char *dir)
{
	char path[PATH_MAX], buf[FILE_BUF];
	size_t n;
	char **names = list_dir(dir, PP_PMU_MAX_CAPS, &n, &pmu->nr_dropped);

	if (!n)
		return 0;
	pmu->caps = calloc(n, sizeof(*pmu->caps));
	if (!pmu->caps) {
		free_names(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct pp_pmu_cap *c = &pmu->caps[pmu->nr_caps];
		ssize_t len;

		pp_pathf(path, sizeof(path), "%s/%s", dir, names[i]);
		len = pp_read_small_file(path, buf, sizeof(buf));
		if (len < 0) {
			pmu->nr_dropped++;
			continue;
		}
		snprintf(c->name, sizeof(c->name), "%s", names[i]);
		copy_trimmed(c->value, sizeof(c->value), buf, (size_t)len);
		pmu->nr_caps++;
	}
	free_names(names, n);
	return 0;
}

/* Fill pmu from <devices>/<name>. Returns 0, -errno for fatal errors, 1 to skip it. */
static int load_pmu(struct pp_pmu *pmu, const char *devices, const char *name)
{
	char dir[PATH_MAX], path[PATH_MAX], buf[FILE_BUF];
	size_t pos = 0;
	unsigned long type;
	ssize_t len;
	const char *v;
	int err;

	memset(pmu, 0, sizeof(*pmu));
	snprintf(pmu->name, sizeof(pmu->name), "%s", name);
	pmu->kind = pp_pmu_classify(name);
	pmu->max_precise = -1;
	pp_pathf(dir, sizeof(dir), "%s/%s", devices, name);

	pp_pathf(path, sizeof(path), "%s/type", dir);
	len = pp_read_small_file(path, buf, sizeof(buf));
	if (len < 0 || parse_uint(buf, (size_t)len, &pos, &type) || type > UINT32_MAX)
		return 1;
	pmu->type = (uint32_t)type;

	pp_pathf(path, sizeof(path), "%s/cpus", dir);
	len = pp_read_small_file(path, buf, sizeof(buf));
	if (len < 0) {
		pp_pathf(path, sizeof(path), "%s/cpumask", dir);
		len = pp_read_small_file(path, buf, sizeof(buf));
	}
	if (len >= 0) {
		err = pp_cpulist_parse(buf, (size_t)len, &pmu->cpus, &pmu->nr_cpus);
		if (err == -ENOMEM)
			return err;
		if (err)
			pmu->nr_dropped++;
	}

	pp_pathf(path, sizeof(path), "%s/format", dir);
	err = load_formats(pmu, path);
	if (!err) {
		pp_pathf(path, sizeof(path), "%s/events", dir);
		err = load_events(pmu, path);
	}
	if (!err) {
		pp_pathf(path, sizeof(path), "%s/caps", dir);
		err = load_caps(pmu, path);
	}
	if (err)
		return err;

	v = pp_pmu_cap(pmu, "max_precise");
	if (v && isdigit((unsigned char)v[0]))
		pmu->max_precise = atoi(v);
	v = pp_pmu_cap(pmu, "pmu_name");
	if (v)
		snprintf(pmu->pmu_name, sizeof(pmu->pmu_name), "%s", v);
	return 0;
}

struct pp_pmu_set *pp_pmu_scan(const char *sysfs_root)
{
	char devices[PATH_MAX], path[PATH_MAX], buf[FILE_BUF];
	struct pp_pmu_set *set;
	char **names;
	size_t n = 0;
	ssize_t len;
	int err = 0;

	if (!sysfs_root)
		sysfs_root = "/sys";
	set = calloc(1, sizeof(*set));
	if (!set)
		return NULL;
	pp_pathf(devices, sizeof(devices), "%s/bus/event_source/devices", sysfs_root);
	names = list_dir_err(devices, PP_PMU_MAX_PMUS, &n, &set->nr_dropped, &err);
	/* No event_source bus at all is a machine without perf events, not a scan failure. */
	if (err == -ENOENT)
		err = 0;
	if (err)
		goto out_free;
	if (n) {
		set->pmus = calloc(n, sizeof(*set->pmus));
		if (!set->pmus) {
			err = -ENOMEM;
			goto out_names;
		}
	}
	for (size_t i = 0; i < n; i++) {
		int r = load_pmu(&set->pmus[set->nr_pmus], devices, names[i]);

		if (r < 0) {
			pmu_fini(&set->pmus[set->nr_pmus]);
			err = r;
			goto out_names;
		}
		if (r > 0) {
			pmu_fini(&set->pmus[set->nr_pmus]);
			set->nr_dropped++;
			continue;
		}
		set->nr_pmus++;
	}
	/* AMD's core PMU is also called "cpu"; IBS beside it says which vendor this is. */
	if (pp_pmu_find(set, "ibs_op"))
		for (size_t i = 0; i < set->nr_pmus; i++)
			if (set->pmus[i].kind == PP_PMU_INTEL_CORE)
				set->pmus[i].kind = PP_PMU_AMD_CORE;

	pp_pathf(path, sizeof(path), "%s/devices/system/cpu/online", sysfs_root);
	len = pp_read_small_file(path, buf, sizeof(buf));
	if (len >= 0) {
		err = pp_cpulist_parse(buf, (size_t)len, &set->online, &set->nr_online);
		if (err)
			goto out_names;
	} else {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		/* Without the online list, trust sysconf: CPUs 0..n-1. */
		if (ncpu < 1)
			ncpu = 1;
		set->online = calloc((size_t)ncpu, sizeof(int));
		if (!set->online) {
			err = -ENOMEM;
			goto out_names;
		}
		for (long c = 0; c < ncpu; c++)
			set->online[c] = (int)c;
		set->nr_online = (size_t)ncpu;
	}
	free_names(names, n);
	return set;

out_names:
	free_names(names, n);
out_free:
	pp_pmu_set_free(set);
	errno = -err;
	return NULL;
}

const struct pp_pmu *pp_pmu_find(const struct pp_pmu_set *set, const char *name)
{
	for (size_t i = 0; set && i < set->nr_pmus; i++)
		if (!strcmp(set->pmus[i].name, name))
			return &set->pmus[i];
	return NULL;
}

const char *pp_pmu_event(const struct pp_pmu *pmu, const char *name)
{
	for (size_t i = 0; pmu && i < pmu->nr_events; i++)
		if (!strcmp(pmu->events[i].name, name))
			return pmu->events[i].encoding;
	return NULL;
}

const char *pp_pmu_cap(const struct pp_pmu *pmu, const char *name)
{
	for (size_t i = 0; pmu && i < pmu->nr_caps; i++)
		if (!strcmp(pmu->caps[i].name, name))
			return pmu->caps[i].value;
	return NULL;
}

const struct pp_pmu_format *pp_pmu_format(const struct pp_pmu *pmu, const char *name)
{
	for (size_t i = 0; pmu && i < pmu->nr_formats; i++)
		if (!strcmp(pmu->formats[i].name, name))
			return &pmu->formats[i];
	return NULL;
}

size_t pp_pmu_core_pmus(const struct pp_pmu_set *set, const struct pp_pmu **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; set && i < set->nr_pmus && n < max; i++)
		if (set->pmus[i].kind == PP_PMU_INTEL_CORE || set->pmus[i].kind == PP_PMU_AMD_CORE)
			out[n++] = &set->pmus[i];
	return n;
}

size_t pp_pmu_online_cpus(const struct pp_pmu_set *set, const struct pp_pmu *pmu, int *out)
{
	size_t n = 0;

	for (size_t i = 0; i < set->nr_online; i++) {
		int cpu = set->online[i], ok = !pmu || !pmu->nr_cpus;

		for (size_t j = 0; !ok && j < pmu->nr_cpus; j++)
			ok = pmu->cpus[j] == cpu;
		if (ok)
			out[n++] = cpu;
	}
	return n;
}

/* Spread value over the set bits of mask, lowest bit first (perf's pmu_format_value). */
static int spread(uint64_t mask, uint64_t value, uint64_t *out)
{
	uint64_t r = 0;
	int vbit = 0;

	for (int b = 0; b < 64; b++) {
		if (!(mask & (1ULL << b)))
			continue;
		if (vbit < 64 && (value >> vbit) & 1)
			r |= 1ULL << b;
		vbit++;
	}
	if (vbit < 64 && (value >> vbit))
		return -ERANGE;
	*out = r;
	return 0;
}

static int parse_value(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	int base = 10;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
	}
	if (i == len)
		return -EINVAL;
	for (; i < len; i++) {
		int d;
		char c = s[i];

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -ERANGE;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return 0;
}

static int encode_depth(const struct pp_pmu *pmu, const char *terms, size_t len, uint64_t config[3],
			char *err, size_t errlen, int depth)
{
	size_t pos = 0;

	while (pos < len) {
		size_t end = pos, eq, nlen;
		const struct pp_pmu_format *f = NULL;
		char name[PP_PMU_NAME_LEN];
		uint64_t value = 1, bits;
		const char *ev;
		int word = -1, r;

		while (end < len && terms[end] != ',')
			end++;
		for (eq = pos; eq < end && terms[eq] != '='; eq++)
			;
		nlen = eq - pos;
		if (nlen == 0 || nlen >= sizeof(name)) {
			snprintf(err, errlen, "empty or overlong term at offset %zu", pos);
			return -EINVAL;
		}
		memcpy(name, terms + pos, nlen);
		name[nlen] = '\0';
		if (eq < end) {
			r = parse_value(terms + eq + 1, end - eq - 1, &value);
			if (r) {
				snprintf(err, errlen, "term '%s': bad value '%.*s'", name,
					 (int)(end - eq - 1), terms + eq + 1);
				return -EINVAL;
			}
		}
		if (!strcmp(name, "config"))
			word = 0;
		else if (!strcmp(name, "config1"))
			word = 1;
		else if (!strcmp(name, "config2"))
			word = 2;
		if (word >= 0) {
			config[word] = value;
		} else if ((f = pp_pmu_format(pmu, name))) {
			r = spread(f->mask, value, &bits);
			if (r) {
				snprintf(err, errlen, "term '%s': value 0x%llx too wide for %s",
					 name, (unsigned long long)value, pmu->name);
				return -EINVAL;
			}
			config[f->word] = (config[f->word] & ~f->mask) | bits;
		} else if (eq == end && depth == 0 && (ev = pp_pmu_event(pmu, name))) {
			r = encode_depth(pmu, ev, strlen(ev), config, err, errlen, depth + 1);
			if (r)
				return r;
		} else {
			snprintf(err, errlen, "unknown term '%s' for PMU %s", name, pmu->name);
			return -EINVAL;
		}
		pos = end < len ? end + 1 : end;
		if (end < len && pos == len) {
			snprintf(err, errlen, "trailing ',' in '%.*s'", (int)len, terms);
			return -EINVAL;
		}
	}
	return 0;
}

int pp_pmu_encode(const struct pp_pmu *pmu, const char *terms, size_t len, uint64_t config[3],
		  char *err, size_t errlen)
{
	char dummy[1];

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	while (len && isspace((unsigned char)terms[len - 1]))
		len--;
	return encode_depth(pmu, terms, len, config, err, errlen, 0);
}
