/*
 * PodList JSON -> compact pod and container records (see k8s_pods.h). The JSON syntax is
 * checked strictly (json.c); the schema leniently: a field of an unexpected type counts as
 * absent, since one odd pod must not cost the whole node its metadata. Only the top level is
 * strict (kind PodList, items an array of objects), so an error body (kind Status) or some
 * other document is never taken for an empty node.
 */
#include "k8s_pods.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* A PodList nests about 10 deep (items/pod/spec/containers/env/valueFrom/...). */
#define PODLIST_MAX_DEPTH 48

struct pod_tmp {
	char uid[PP_K8S_UID_LEN];
	char name[PP_K8S_NAME_LEN];
	char ns[PP_K8S_NS_LEN];
	char node[PP_K8S_NAME_LEN];
	char app[PP_K8S_LABEL_LEN];
	char hash[PP_K8S_LABEL_LEN];
	char owner_kind[32];
	char owner_name[PP_K8S_NAME_LEN];
	int owner_is_controller;
};

struct pp_k8s_podlist *pp_k8s_podlist_new(const struct pp_k8s_pods_limits *lim)
{
	struct pp_k8s_podlist *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	if (lim)
		l->lim = *lim;
	l->str_cap = 4096;
	l->str = malloc(l->str_cap);
	l->intern_cap = 256;
	l->intern = calloc(l->intern_cap, sizeof(*l->intern));
	if (!l->str || !l->intern) {
		pp_k8s_podlist_free(l);
		errno = ENOMEM;
		return NULL;
	}
	l->str[0] = '\0';
	l->str_len = 1;
	return l;
}

void pp_k8s_podlist_free(struct pp_k8s_podlist *l)
{
	if (!l)
		return;
	free(l->pods);
	free(l->ctrs);
	free(l->str);
	free(l->intern);
	free(l);
}

const char *pp_k8s_podlist_str(const struct pp_k8s_podlist *l, uint32_t off)
{
	if (!l || off >= l->str_len)
		return "";
	return l->str + off;
}

size_t pp_k8s_podlist_bytes(const struct pp_k8s_podlist *l)
{
	if (!l)
		return 0;
	return sizeof(*l) + l->cap_pods * sizeof(*l->pods) + l->cap_ctrs * sizeof(*l->ctrs) +
	       l->str_cap + l->intern_cap * sizeof(*l->intern);
}

static uint32_t fnv1a(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 16777619u;
	}
	return h;
}

static int intern_grow(struct pp_k8s_podlist *l)
{
	size_t cap = l->intern_cap * 2;
	uint32_t *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < l->intern_cap; i++) {
		uint32_t v = l->intern[i];
		const char *s;
		size_t k;

		if (!v)
			continue;
		s = l->str + v - 1;
		k = fnv1a(s, strlen(s)) & (cap - 1);
		while (t[k])
			k = (k + 1) & (cap - 1);
		t[k] = v;
	}
	free(l->intern);
	l->intern = t;
	l->intern_cap = cap;
	return 0;
}

int64_t pp_k8s_podlist_intern(struct pp_k8s_podlist *l, const char *s)
{
	size_t n = strlen(s), k;

	if (n == 0)
		return 0;
	/* Keep the load factor at most one half so probes stay short. */
	if ((l->n_strs + 1) * 2 > l->intern_cap && intern_grow(l))
		return -ENOMEM;
	k = fnv1a(s, n) & (l->intern_cap - 1);
	while (l->intern[k]) {
		const char *c = l->str + l->intern[k] - 1;

		if (strcmp(c, s) == 0)
			return l->intern[k] - 1;
		k = (k + 1) & (l->intern_cap - 1);
	}
	if (l->str_len + n + 1 >= UINT32_MAX)
		return -ENOMEM;
	if (l->str_len + n + 1 > l->str_cap) {
		size_t cap = l->str_cap * 2;
		char *p;

		while (cap < l->str_len + n + 1)
			cap *= 2;
		p = realloc(l->str, cap);
		if (!p)
			return -ENOMEM;
		l->str = p;
		l->str_cap = cap;
	}
	memcpy(l->str + l->str_len, s, n + 1);
	l->intern[k] = (uint32_t)l->str_len + 1;
	l->str_len += n + 1;
	l->n_strs++;
	return (int64_t)(l->intern[k] - 1);
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Hex digit values + 1 (0: not a digit), by byte: ids are parsed on every lookup. */
static const uint8_t hex1[256] = {
    ['0'] = 1,	['1'] = 2,  ['2'] = 3,	['3'] = 4,  ['4'] = 5,	['5'] = 6,  ['6'] = 7,	['7'] = 8,
    ['8'] = 9,	['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

int pp_k8s_container_id_from_hex(const char *hex, size_t len, uint8_t id[32])
{
	unsigned bad = 0;

	if (!hex || len != PP_K8S_CONTAINER_ID_HEX)
		return -EINVAL;
	for (size_t i = 0; i < 32; i++) {
		unsigned hi = hex1[(unsigned char)hex[2 * i]],
			 lo = hex1[(unsigned char)hex[2 * i + 1]];

		bad |= (hi == 0) | (lo == 0);
		id[i] = (uint8_t)((hi - 1) << 4 | ((lo - 1) & 15));
	}
	return bad ? -EINVAL : 0;
}

void pp_k8s_container_id_format(const uint8_t id[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[64] = '\0';
}

int pp_k8s_container_id_parse(const char *s, uint8_t id[32], enum pp_container_runtime *rt)
{
	const char *sep;
	size_t scheme_len;

	if (!s || !(sep = strstr(s, "://")) || sep == s)
		return -EINVAL;
	scheme_len = (size_t)(sep - s);
	for (size_t i = 0; i < scheme_len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		      c == '+'))
			return -EINVAL;
	}
	if (pp_k8s_container_id_from_hex(sep + 3, strlen(sep + 3), id))
		return -EINVAL;
	if (scheme_len == 10 && memcmp(s, "containerd", 10) == 0)
		*rt = PP_RUNTIME_CONTAINERD;
	else if (scheme_len == 5 && memcmp(s, "cri-o", 5) == 0)
		*rt = PP_RUNTIME_CRIO;
	else if (scheme_len == 6 && memcmp(s, "docker", 6) == 0)
		*rt = PP_RUNTIME_DOCKER;
	else if (scheme_len == 6 && memcmp(s, "podman", 6) == 0)
		*rt = PP_RUNTIME_PODMAN;
	else
		*rt = PP_RUNTIME_UNKNOWN;
	return 0;
}

int pp_k8s_deployment_of(const char *rs, const char *hash, char *out, size_t cap)
{
	size_t n, h;

	if (!rs || !hash || !hash[0])
		return 0;
	n = strlen(rs);
	h = strlen(hash);
	if (n < h + 2 || rs[n - h - 1] != '-' || strcmp(rs + n - h, hash) != 0)
		return 0;
	if (n - h - 1 >= cap)
		return 0;
	memcpy(out, rs, n - h - 1);
	out[n - h - 1] = '\0';
	return 1;
}

int pp_k8s_cronjob_of(const char *job, char *out, size_t cap)
{
	const char *dash;
	size_t digits;

	if (!job || !(dash = strrchr(job, '-')) || dash == job)
		return 0;
	digits = strlen(dash + 1);
	if (digits < 8)
		return 0;
	for (size_t i = 0; i < digits; i++)
		if (dash[1 + i] < '0' || dash[1 + i] > '9')
			return 0;
	if ((size_t)(dash - job) >= cap)
		return 0;
	memcpy(out, job, (size_t)(dash - job));
	out[dash - job] = '\0';
	return 1;
}

/*
 * Read a string value into out; a null, a value of another type, one too long for out or one
 * holding a NUL leaves out empty (the field counts as absent). Errors are JSON errors only.
 */
static int read_str(struct pp_json *j, char *out, size_t cap)
{
	struct pp_json_str s;
	enum pp_json_type t = pp_json_peek(j);

	out[0] = '\0';
	if (t != PP_JSON_STRING)
		return pp_json_skip(j);
	if (pp_json_read_string(j, &s))
		return j->err;
	if (pp_json_str_decode(&s, out, cap) < 0)
		out[0] = '\0';
	return 0;
}

/* Enter an object; 1 when entered, 0 when it was another type (skipped), or an error. */
static int enter_obj_or_skip(struct pp_json *j)
{
	if (pp_json_peek(j) != PP_JSON_OBJECT)
		return pp_json_skip(j) ? j->err : 0;
	return pp_json_enter_object(j) ? j->err : 1;
}

static int enter_arr_or_skip(struct pp_json *j)
{
	if (pp_json_peek(j) != PP_JSON_ARRAY)
		return pp_json_skip(j) ? j->err : 0;
	return pp_json_enter_array(j) ? j->err : 1;
}

static int parse_labels(struct pp_json *j, struct pod_tmp *p)
{
	struct pp_json_str k;
	int rc = enter_obj_or_skip(j);

	if (rc <= 0)
		return rc;
	while ((rc = pp_json_next_member(j, &k)) == 1) {
		if (pp_json_str_eq(&k, "app.kubernetes.io/name"))
			rc = read_str(j, p->app, sizeof(p->app));
		else if (pp_json_str_eq(&k, "pod-template-hash"))
			rc = read_str(j, p->hash, sizeof(p->hash));
		else
			rc = pp_json_skip(j);
		if (rc)
			return rc;
	}
	return rc;
}

static int parse_owner_refs(struct pp_json *j, struct pod_tmp *p)
{
	int rc = enter_arr_or_skip(j);

	if (rc <= 0)
		return rc;
	while ((rc = pp_json_next_element(j)) == 1) {
		char kind[sizeof(p->owner_kind)], name[PP_K8S_NAME_LEN];
		int controller = 0;
		struct pp_json_str k;

		kind[0] = name[0] = '\0';
		rc = enter_obj_or_skip(j);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		while ((rc = pp_json_next_member(j, &k)) == 1) {
			if (pp_json_str_eq(&k, "kind")) {
				rc = read_str(j, kind, sizeof(kind));
			} else if (pp_json_str_eq(&k, "name")) {
				rc = read_str(j, name, sizeof(name));
			} else if (pp_json_str_eq(&k, "controller")) {
				controller = pp_json_peek(j) == PP_JSON_TRUE;
				rc = pp_json_skip(j);
			} else {
				rc = pp_json_skip(j);
			}
			if (rc)
				return rc;
		}
		if (rc < 0)
			return rc;
		/* The controller reference wins; else the first one with a kind and name. */
		if (kind[0] && name[0] &&
		    (controller ? !p->owner_is_controller : !p->owner_kind[0])) {
			memcpy(p->owner_kind, kind, sizeof(kind));
			memcpy(p->owner_name, name, sizeof(name));
			p->owner_is_controller = controller;
		}
	}
	return rc;
}

static int parse_metadata(struct pp_json *j, struct pod_tmp *p)
{
	struct pp_json_str k;
	int rc = enter_obj_or_skip(j);

	if (rc <= 0)
		return rc;
	while ((rc = pp_json_next_member(j, &k)) == 1) {
		if (pp_json_str_eq(&k, "name"))
			rc = read_str(j, p->name, sizeof(p->name));
		else if (pp_json_str_eq(&k, "namespace"))
			rc = read_str(j, p->ns, sizeof(p->ns));
		else if (pp_json_str_eq(&k, "uid"))
			rc = read_str(j, p->uid, sizeof(p->uid));
		else if (pp_json_str_eq(&k, "labels"))
			rc = parse_labels(j, p);
		else if (pp_json_str_eq(&k, "ownerReferences"))
			rc = parse_owner_refs(j, p);
		else
			rc = pp_json_skip(j);
		if (rc)
			return rc;
	}
	return rc;
}

static int parse_spec(struct pp_json *j, struct pod_tmp *p)
{
	struct pp_json_str k;
	int rc = enter_obj_or_skip(j);

	if (rc <= 0)
		return rc;
	while ((rc = pp_json_next_member(j, &k)) == 1) {
		if (pp_json_str_eq(&k, "nodeName"))
			rc = read_str(j, p->node, sizeof(p->node));
		else
			rc = pp_json_skip(j);
		if (rc)
			return rc;
	}
	return rc;
}

/* One array of container statuses; each usable one is appended with pod index pod. */
static int parse_statuses(struct pp_json *j, struct pp_k8s_podlist *l, uint32_t pod,
			  enum pp_k8s_container_kind kind)
{
	int rc = enter_arr_or_skip(j);

	if (rc <= 0)
		return rc;
	while ((rc = pp_json_next_element(j)) == 1) {
		char name[PP_K8S_CNAME_LEN], cid[128];
		struct pp_k8s_container *c;
		enum pp_container_runtime rt;
		struct pp_json_str k;
		uint8_t id[32];
		int64_t off;

		name[0] = cid[0] = '\0';
		rc = enter_obj_or_skip(j);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			l->ctrs_skipped++;
			continue;
		}
		while ((rc = pp_json_next_member(j, &k)) == 1) {
			if (pp_json_str_eq(&k, "name"))
				rc = read_str(j, name, sizeof(name));
			else if (pp_json_str_eq(&k, "containerID"))
				rc = read_str(j, cid, sizeof(cid));
			else
				rc = pp_json_skip(j);
			if (rc)
				return rc;
		}
		if (rc < 0)
			return rc;
		/* Waiting containers have no containerID yet: nothing in a cgroup to match. */
		if (!name[0] || pp_k8s_container_id_parse(cid, id, &rt)) {
			l->ctrs_skipped++;
			continue;
		}
		if (l->lim.max_containers && l->n_ctrs >= l->lim.max_containers) {
			l->ctrs_over_limit++;
			continue;
		}
		off = pp_k8s_podlist_intern(l, name);
		if (off < 0 || grow((void **)&l->ctrs, &l->cap_ctrs, l->n_ctrs + 1, sizeof(*c)))
			return -ENOMEM;
		c = &l->ctrs[l->n_ctrs++];
		memset(c, 0, sizeof(*c));
		memcpy(c->id, id, sizeof(id));
		c->pod = pod;
		c->name = (uint32_t)off;
		c->runtime = (uint8_t)rt;
		c->kind = (uint8_t)kind;
	}
	return rc;
}

static int parse_status(struct pp_json *j, struct pp_k8s_podlist *l, uint32_t pod)
{
	struct pp_json_str k;
	int rc = enter_obj_or_skip(j);

	if (rc <= 0)
		return rc;
	while ((rc = pp_json_next_member(j, &k)) == 1) {
		if (pp_json_str_eq(&k, "containerStatuses"))
			rc = parse_statuses(j, l, pod, PP_K8S_CONTAINER);
		else if (pp_json_str_eq(&k, "initContainerStatuses"))
			rc = parse_statuses(j, l, pod, PP_K8S_CONTAINER_INIT);
		else if (pp_json_str_eq(&k, "ephemeralContainerStatuses"))
			rc = parse_statuses(j, l, pod, PP_K8S_CONTAINER_EPHEMERAL);
		else
			rc = pp_json_skip(j);
		if (rc)
			return rc;
	}
	return rc;
}

/* Interns each string of t into the pod record; -ENOMEM on failure. */
static int fill_pod(struct pp_k8s_podlist *l, struct pp_k8s_pod *pod, const struct pod_tmp *t)
{
	char wl[PP_K8S_NAME_LEN];
	const char *rs = "", *dep = "", *ds = "", *ss = "", *job = "", *cj = "";
	struct {
		uint32_t *dst;
		const char *s;
	} f[11];
	size_t n = 0;

	if (strcmp(t->owner_kind, "ReplicaSet") == 0) {
		rs = t->owner_name;
		if (pp_k8s_deployment_of(rs, t->hash, wl, sizeof(wl)))
			dep = wl;
	} else if (strcmp(t->owner_kind, "DaemonSet") == 0) {
		ds = t->owner_name;
	} else if (strcmp(t->owner_kind, "StatefulSet") == 0) {
		ss = t->owner_name;
	} else if (strcmp(t->owner_kind, "Job") == 0) {
		job = t->owner_name;
		if (pp_k8s_cronjob_of(job, wl, sizeof(wl)))
			cj = wl;
	}
	f[n].dst = &pod->uid, f[n++].s = t->uid;
	f[n].dst = &pod->name, f[n++].s = t->name;
	f[n].dst = &pod->ns, f[n++].s = t->ns;
	f[n].dst = &pod->node, f[n++].s = t->node;
	f[n].dst = &pod->app_name, f[n++].s = t->app;
	f[n].dst = &pod->replicaset, f[n++].s = rs;
	f[n].dst = &pod->deployment, f[n++].s = dep;
	f[n].dst = &pod->daemonset, f[n++].s = ds;
	f[n].dst = &pod->statefulset, f[n++].s = ss;
	f[n].dst = &pod->job, f[n++].s = job;
	f[n].dst = &pod->cronjob, f[n++].s = cj;
	for (size_t i = 0; i < n; i++) {
		int64_t off = pp_k8s_podlist_intern(l, f[i].s);

		if (off < 0)
			return -ENOMEM;
		*f[i].dst = (uint32_t)off;
	}
	return 0;
}

static int parse_pod(struct pp_json *j, struct pp_k8s_podlist *l)
{
	size_t ctr_start = l->n_ctrs;
	uint32_t idx = (uint32_t)l->n_pods;
	struct pp_json_str k;
	struct pod_tmp t;
	int rc;

	if (pp_json_peek(j) != PP_JSON_OBJECT)
		return j->err ? j->err : -EPROTO;
	if (pp_json_enter_object(j))
		return j->err;
	memset(&t, 0, sizeof(t));
	while ((rc = pp_json_next_member(j, &k)) == 1) {
		if (pp_json_str_eq(&k, "metadata"))
			rc = parse_metadata(j, &t);
		else if (pp_json_str_eq(&k, "spec"))
			rc = parse_spec(j, &t);
		else if (pp_json_str_eq(&k, "status"))
			rc = parse_status(j, l, idx);
		else
			rc = pp_json_skip(j);
		if (rc)
			return rc;
	}
	if (rc < 0)
		return rc;
	if (!t.uid[0] || !t.name[0] || !t.ns[0]) {
		l->pods_skipped++;
		l->n_ctrs = ctr_start;
		return 0;
	}
	if (l->lim.max_pods && l->n_pods >= l->lim.max_pods) {
		l->pods_over_limit++;
		l->ctrs_over_limit += l->n_ctrs - ctr_start;
		l->n_ctrs = ctr_start;
		return 0;
	}
	if (grow((void **)&l->pods, &l->cap_pods, l->n_pods + 1, sizeof(*l->pods)))
		return -ENOMEM;
	memset(&l->pods[idx], 0, sizeof(l->pods[idx]));
	if (fill_pod(l, &l->pods[idx], &t))
		return -ENOMEM;
	l->n_pods++;
	return 0;
}

int pp_k8s_pods_parse(const char *buf, size_t len, const struct pp_k8s_pods_limits *lim,
		      struct pp_k8s_podlist **out)
{
	struct pp_k8s_podlist *l;
	struct pp_json_str k;
	struct pp_json j;
	int rc, kind_ok = 0, seen_items = 0;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!buf && len)
		return -EINVAL;
	l = pp_k8s_podlist_new(lim);
	if (!l)
		return -ENOMEM;
	pp_json_init(&j, buf, len, PODLIST_MAX_DEPTH);
	if (pp_json_enter_object(&j)) {
		rc = j.err;
		goto err;
	}
	while ((rc = pp_json_next_member(&j, &k)) == 1) {
		if (pp_json_str_eq(&k, "kind")) {
			char kind[16];

			rc = read_str(&j, kind, sizeof(kind));
			kind_ok = strcmp(kind, "PodList") == 0;
		} else if (pp_json_str_eq(&k, "items") && !seen_items) {
			seen_items = 1;
			if (pp_json_peek(&j) == PP_JSON_NULL) {
				rc = pp_json_skip(&j);
			} else if (pp_json_enter_array(&j)) {
				rc = j.err;
			} else {
				while ((rc = pp_json_next_element(&j)) == 1)
					if ((rc = parse_pod(&j, l)) != 0)
						break;
			}
		} else {
			rc = pp_json_skip(&j);
		}
		if (rc)
			break;
	}
	if (rc == 0)
		rc = pp_json_finish(&j);
	if (rc == 0 && (!kind_ok || !seen_items))
		rc = -EPROTO;
	if (rc)
		goto err;
	*out = l;
	return 0;
err:
	pp_k8s_podlist_free(l);
	return rc;
}

int pp_k8s_podlist_copy_pod(struct pp_k8s_podlist *l, const struct pp_k8s_podlist *src, uint32_t p,
			    const uint32_t *ctr_idx, size_t n)
{
	const struct pp_k8s_pod *sp;
	struct pp_k8s_pod *dp;
	uint32_t idx = (uint32_t)l->n_pods;
	uint32_t *dst[11];
	const uint32_t *from[11];

	if (p >= src->n_pods)
		return -EINVAL;
	if ((l->lim.max_pods && l->n_pods >= l->lim.max_pods) ||
	    (l->lim.max_containers && l->n_ctrs + n > l->lim.max_containers))
		return -ENOSPC;
	if (grow((void **)&l->pods, &l->cap_pods, l->n_pods + 1, sizeof(*l->pods)) ||
	    grow((void **)&l->ctrs, &l->cap_ctrs, l->n_ctrs + n, sizeof(*l->ctrs)))
		return -ENOMEM;
	sp = &src->pods[p];
	dp = &l->pods[idx];
	memset(dp, 0, sizeof(*dp));
	dst[0] = &dp->uid, from[0] = &sp->uid;
	dst[1] = &dp->name, from[1] = &sp->name;
	dst[2] = &dp->ns, from[2] = &sp->ns;
	dst[3] = &dp->node, from[3] = &sp->node;
	dst[4] = &dp->app_name, from[4] = &sp->app_name;
	dst[5] = &dp->replicaset, from[5] = &sp->replicaset;
	dst[6] = &dp->deployment, from[6] = &sp->deployment;
	dst[7] = &dp->daemonset, from[7] = &sp->daemonset;
	dst[8] = &dp->statefulset, from[8] = &sp->statefulset;
	dst[9] = &dp->job, from[9] = &sp->job;
	dst[10] = &dp->cronjob, from[10] = &sp->cronjob;
	for (size_t i = 0; i < 11; i++) {
		int64_t off = pp_k8s_podlist_intern(l, pp_k8s_podlist_str(src, *from[i]));

		if (off < 0)
			return -ENOMEM;
		*dst[i] = (uint32_t)off;
	}
	for (size_t i = 0; i < n; i++) {
		const struct pp_k8s_container *sc;
		struct pp_k8s_container *dc = &l->ctrs[l->n_ctrs + i];
		int64_t off;

		if (ctr_idx[i] >= src->n_ctrs || src->ctrs[ctr_idx[i]].pod != p)
			return -EINVAL;
		sc = &src->ctrs[ctr_idx[i]];
		off = pp_k8s_podlist_intern(l, pp_k8s_podlist_str(src, sc->name));
		if (off < 0)
			return -ENOMEM;
		*dc = *sc;
		dc->pod = idx;
		dc->name = (uint32_t)off;
	}
	l->n_ctrs += n;
	l->n_pods++;
	return 0;
}
