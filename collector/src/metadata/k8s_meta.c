/*
 * Pod metadata store and its fetch thread (see k8s_meta.h).
 *
 * Locking: `lock` guards the current snapshot, the counters and the refresh request; lookups
 * hold it only to copy one answer out. `fetch_lock` serialises fetches (the thread's and
 * pp_k8s_meta_refresh_now's) and guards the curl handle and the token. Only a fetch replaces
 * the snapshot, so a fetch may read the current snapshot without `lock` while it builds the
 * next one; it takes `lock` for the swap alone.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "k8s_meta.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/deadline.h"
#include "base/log.h"

#define DEF_REFRESH_MS 45000u
#define DEF_MISS_REFRESH_MS 5000u
#define DEF_TOKEN_TTL_MS 60000u
#define DEF_TIMEOUT_MS 10000u
#define DEF_MAX_RESPONSE ((size_t)64 << 20)
#define DEF_MAX_PODS 1024u
#define DEF_MAX_CONTAINERS 8192u
#define DEF_GRACE_MS 120000u
#define MAX_TOKEN_BYTES 65536
/* Ids that missed, remembered so one unknown id (a container outside Kubernetes) costs one
 * refresh, not one every few seconds forever. Direct-mapped: a collision only forgets. */
#define MISS_SLOTS 256

struct snapshot {
	struct pp_k8s_podlist *l;
	uint32_t *ctr_tab; /* container index + 1; 0 empty */
	size_t ctr_cap;
	uint32_t *pod_tab; /* pod index + 1 */
	size_t pod_cap;
};

struct miss_slot {
	uint8_t key[PP_K8S_UID_LEN]; /* a container id's bytes, or a pod UID */
	size_t len;		     /* 0: unused */
	uint64_t gen;		     /* generation at the miss that asked for a refresh */
};

struct pp_k8s_meta {
	enum pp_k8s_source source;
	char *url;
	char *node;
	char *token_path;
	char *ca_path;
	int insecure;
	uint32_t refresh_ms, miss_refresh_ms, token_ttl_ms, timeout_ms, grace_ms;
	size_t max_response;
	struct pp_k8s_pods_limits lim;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct snapshot *snap;
	uint64_t generation;
	int refresh_wanted;
	int stop;
	struct miss_slot miss[MISS_SLOTS];
	struct pp_k8s_meta_stats st; /* counters; snapshot sizes filled on read */
	enum pp_k8s_state state;

	pthread_mutex_t fetch_lock;
	CURL *curl;
	struct curl_slist *hdrs;
	char errbuf[CURL_ERROR_SIZE];
	char *token;
	uint64_t token_read_ns;
	char *resp;
	size_t resp_len, resp_cap;
	int resp_too_big;

	pthread_t thread;
	int thread_started;
	unsigned int seed;
};

static const char *const source_names[] = {
    [PP_K8S_AUTO] = "auto",
    [PP_K8S_APISERVER] = "apiserver",
    [PP_K8S_KUBELET] = "kubelet",
    [PP_K8S_NONE] = "none",
};

int pp_k8s_source_parse(const char *s, enum pp_k8s_source *out)
{
	for (size_t i = 0; s && i < sizeof(source_names) / sizeof(source_names[0]); i++) {
		if (strcmp(s, source_names[i]) == 0) {
			*out = (enum pp_k8s_source)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *pp_k8s_source_name(enum pp_k8s_source s)
{
	if ((unsigned)s < sizeof(source_names) / sizeof(source_names[0]))
		return source_names[s];
	return "unknown";
}

const char *pp_k8s_state_name(enum pp_k8s_state s)
{
	switch (s) {
	case PP_K8S_STATE_OFF:
		return "off";
	case PP_K8S_STATE_STARTING:
		return "starting";
	case PP_K8S_STATE_OK:
		return "ok";
	case PP_K8S_STATE_FAILING:
		return "failing";
	}
	return "unknown";
}

/* --- snapshots --- */

static uint32_t id_hash(const uint8_t id[32])
{
	uint32_t h;

	/* Container ids are random (sha256): their first bytes are a fine hash already. */
	memcpy(&h, id, sizeof(h));
	return h;
}

static uint32_t str_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 16777619u;
	}
	return h;
}

static size_t table_cap(size_t n)
{
	size_t cap = 16;

	while (cap < n * 2)
		cap *= 2;
	return cap;
}

static void snapshot_free(struct snapshot *s)
{
	if (!s)
		return;
	pp_k8s_podlist_free(s->l);
	free(s->ctr_tab);
	free(s->pod_tab);
	free(s);
}

static size_t snapshot_bytes(const struct snapshot *s)
{
	if (!s)
		return 0;
	return sizeof(*s) + pp_k8s_podlist_bytes(s->l) +
	       (s->ctr_cap + s->pod_cap) * sizeof(uint32_t);
}

static int64_t find_ctr(const struct snapshot *s, const uint8_t id[32])
{
	size_t k;

	if (!s || !s->ctr_cap)
		return -1;
	k = id_hash(id) & (s->ctr_cap - 1);
	while (s->ctr_tab[k]) {
		uint32_t i = s->ctr_tab[k] - 1;

		if (memcmp(s->l->ctrs[i].id, id, 32) == 0)
			return i;
		k = (k + 1) & (s->ctr_cap - 1);
	}
	return -1;
}

static int64_t find_pod(const struct snapshot *s, const char *uid)
{
	size_t k;

	if (!s || !s->pod_cap)
		return -1;
	k = str_hash(uid) & (s->pod_cap - 1);
	while (s->pod_tab[k]) {
		uint32_t i = s->pod_tab[k] - 1;

		if (strcmp(pp_k8s_podlist_str(s->l, s->l->pods[i].uid), uid) == 0)
			return i;
		k = (k + 1) & (s->pod_cap - 1);
	}
	return -1;
}

/* (Re)build both indexes over s->l; the first of duplicates wins. */
static int snapshot_index(struct snapshot *s)
{
	const struct pp_k8s_podlist *l = s->l;

	free(s->ctr_tab);
	free(s->pod_tab);
	s->ctr_cap = table_cap(l->n_ctrs);
	s->pod_cap = table_cap(l->n_pods);
	s->ctr_tab = calloc(s->ctr_cap, sizeof(uint32_t));
	s->pod_tab = calloc(s->pod_cap, sizeof(uint32_t));
	if (!s->ctr_tab || !s->pod_tab)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_ctrs; i++) {
		size_t k = id_hash(l->ctrs[i].id) & (s->ctr_cap - 1);

		if (find_ctr(s, l->ctrs[i].id) >= 0)
			continue;
		while (s->ctr_tab[k])
			k = (k + 1) & (s->ctr_cap - 1);
		s->ctr_tab[k] = (uint32_t)i + 1;
	}
	for (size_t i = 0; i < l->n_pods; i++) {
		const char *uid = pp_k8s_podlist_str(l, l->pods[i].uid);
		size_t k = str_hash(uid) & (s->pod_cap - 1);

		if (find_pod(s, uid) >= 0)
			continue;
		while (s->pod_tab[k])
			k = (k + 1) & (s->pod_cap - 1);
		s->pod_tab[k] = (uint32_t)i + 1;
	}
	return 0;
}

/*
 * Containers of the old snapshot missing from the new list, seen within grace_ms, are copied
 * into it (their pod with them), so samples of a container that just exited still resolve.
 * They come after the listed ones, so the bounds evict them first. Counts what it keeps and
 * what the bounds drop.
 */
static int carry_over(struct pp_k8s_meta *m, struct snapshot *ns, const struct snapshot *old,
		      uint64_t now, uint64_t *kept, uint64_t *ev_pods, uint64_t *ev_ctrs)
{
	const struct pp_k8s_podlist *ol;
	uint64_t grace = (uint64_t)m->grace_ms * 1000000ull;
	uint32_t *run;
	size_t i = 0;
	int rc = 0;

	if (!old || !old->l->n_ctrs || !grace)
		return 0;
	ol = old->l;
	run = malloc(ol->n_ctrs * sizeof(*run));
	if (!run)
		return -ENOMEM;
	while (i < ol->n_ctrs) {
		uint32_t pod = ol->ctrs[i].pod;
		size_t n = 0;

		/* A list's containers are stored grouped by pod. */
		for (; i < ol->n_ctrs && ol->ctrs[i].pod == pod; i++) {
			const struct pp_k8s_container *c = &ol->ctrs[i];

			if (c->seen_ns + grace > now && find_ctr(ns, c->id) < 0)
				run[n++] = (uint32_t)i;
		}
		if (!n)
			continue;
		rc = pp_k8s_podlist_copy_pod(ns->l, ol, pod, run, n);
		if (rc == -ENOSPC) {
			(*ev_pods)++;
			*ev_ctrs += n;
			rc = 0;
			continue;
		}
		if (rc)
			break;
		*kept += n;
	}
	free(run);
	return rc;
}

/* Log a change of state once; called with the new state, under fetch_lock. */
static void set_state(struct pp_k8s_meta *m, enum pp_k8s_state st, const char *reason, size_t pods,
		      size_t ctrs)
{
	enum pp_k8s_state prev;

	pthread_mutex_lock(&m->lock);
	prev = m->state;
	m->state = st;
	if (st == PP_K8S_STATE_FAILING) {
		snprintf(m->st.last_error, sizeof(m->st.last_error), "%s", reason);
		m->st.fetch_fail++;
	} else {
		m->st.fetch_ok++;
	}
	pthread_mutex_unlock(&m->lock);
	if (prev == st)
		return;
	if (st == PP_K8S_STATE_OK)
		pp_info("pod metadata: %s %s: %s, %zu pods, %zu containers",
			pp_k8s_source_name(m->source), m->url ? m->url : "",
			prev == PP_K8S_STATE_FAILING ? "recovered" : "ok", pods, ctrs);
	else if (st == PP_K8S_STATE_FAILING)
		pp_warn("pod metadata: %s %s: failing: %s; samples keep the cgroup's ids and the "
			"last good pod list (%zu pods)",
			pp_k8s_source_name(m->source), m->url ? m->url : "(no URL)", reason, pods);
}

/* Install list l (owned) as the new snapshot. Under fetch_lock. */
static int install(struct pp_k8s_meta *m, struct pp_k8s_podlist *l)
{
	struct snapshot *ns = calloc(1, sizeof(*ns)), *old = m->snap;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC), kept = 0, ev_pods, ev_ctrs;
	int rc;

	if (!ns) {
		pp_k8s_podlist_free(l);
		return -ENOMEM;
	}
	ns->l = l;
	ev_pods = l->pods_over_limit;
	ev_ctrs = l->ctrs_over_limit;
	for (size_t i = 0; i < l->n_ctrs; i++)
		l->ctrs[i].seen_ns = now;
	rc = snapshot_index(ns);
	if (!rc)
		rc = carry_over(m, ns, old, now, &kept, &ev_pods, &ev_ctrs);
	if (!rc && kept)
		rc = snapshot_index(ns);
	if (rc) {
		snapshot_free(ns);
		return rc;
	}
	pthread_mutex_lock(&m->lock);
	m->snap = ns;
	__atomic_store_n(&m->generation, m->generation + 1, __ATOMIC_RELEASE);
	m->st.evicted_pods += ev_pods;
	m->st.evicted_containers += ev_ctrs;
	m->st.kept_containers += kept;
	m->st.last_error[0] = '\0';
	pthread_mutex_unlock(&m->lock);
	snapshot_free(old);
	set_state(m, PP_K8S_STATE_OK, "", l->n_pods, l->n_ctrs);
	return 0;
}

/* --- fetching --- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
	struct pp_k8s_meta *m = user;
	size_t n = size * nmemb;

	if (m->resp_len + n + 1 > m->max_response) {
		m->resp_too_big = 1;
		return 0; /* aborts the transfer */
	}
	if (m->resp_len + n + 1 > m->resp_cap) {
		size_t cap = m->resp_cap ? m->resp_cap : 65536;
		char *p;

		while (cap < m->resp_len + n + 1)
			cap *= 2;
		if (cap > m->max_response)
			cap = m->max_response;
		p = realloc(m->resp, cap);
		if (!p)
			return 0;
		m->resp = p;
		m->resp_cap = cap;
	}
	memcpy(m->resp + m->resp_len, data, n);
	m->resp_len += n;
	return n;
}

static int on_progress(void *user, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
	struct pp_k8s_meta *m = user;

	(void)dlt, (void)dln, (void)ult, (void)uln;
	return __atomic_load_n(&m->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

/*
 * Read the token file; rebuild the Authorization header when it changed. Returns 1 when the
 * token changed, 0 when not, negative errno when unreadable (the old token stays in use).
 */
static int read_token(struct pp_k8s_meta *m)
{
	char *buf, *tok;
	struct curl_slist *h;
	size_t n = 0;
	FILE *f;
	int changed;

	m->token_read_ns = pp_clock_ns(CLOCK_MONOTONIC);
	if (!m->token_path[0])
		return 0;
	f = fopen(m->token_path, "re");
	if (!f)
		return -errno;
	buf = malloc(MAX_TOKEN_BYTES + 1);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(buf, 1, MAX_TOKEN_BYTES + 1, f);
	fclose(f);
	if (n > MAX_TOKEN_BYTES) {
		free(buf);
		return -EFBIG;
	}
	while (n && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = '\0';
	tok = buf;
	while (*tok && isspace((unsigned char)*tok))
		tok++;
	for (const char *p = tok; *p; p++) {
		/* A header cannot carry these; a token never holds them. */
		if ((unsigned char)*p < 0x21 || *p == 0x7f) {
			free(buf);
			return -EINVAL;
		}
	}
	pthread_mutex_lock(&m->lock);
	m->st.token_reads++;
	pthread_mutex_unlock(&m->lock);
	changed = !m->token || strcmp(m->token, tok) != 0;
	if (!changed) {
		free(buf);
		return 0;
	}
	free(m->token);
	m->token = NULL;
	curl_slist_free_all(m->hdrs);
	m->hdrs = curl_slist_append(NULL, "Accept: application/json");
	if (*tok && m->hdrs) {
		size_t len = strlen(tok) + sizeof("Authorization: Bearer ");
		char *hdr = malloc(len);

		if (hdr) {
			snprintf(hdr, len, "Authorization: Bearer %s", tok);
			h = curl_slist_append(m->hdrs, hdr);
			/* Scrub: the header copy is all that is needed. */
			memset(hdr, 0, len);
			free(hdr);
			if (h)
				m->hdrs = h;
		}
		m->token = strdup(tok);
	}
	memset(buf, 0, n);
	free(buf);
	return 1;
}

/* One GET; 0 with the body in m->resp, or negative errno with reason written. */
static int http_get(struct pp_k8s_meta *m, long *status, char *reason, size_t rlen)
{
	CURLcode cc;

	m->resp_len = 0;
	m->resp_too_big = 0;
	m->errbuf[0] = '\0';
	*status = 0;
	curl_easy_setopt(m->curl, CURLOPT_HTTPHEADER, m->hdrs);
	cc = curl_easy_perform(m->curl);
	if (cc != CURLE_OK) {
		if (m->resp_too_big || cc == CURLE_FILESIZE_EXCEEDED) {
			snprintf(reason, rlen, "response larger than %zu bytes", m->max_response);
			return -EFBIG;
		}
		snprintf(reason, rlen, "%s", m->errbuf[0] ? m->errbuf : curl_easy_strerror(cc));
		return -EHOSTUNREACH;
	}
	curl_easy_getinfo(m->curl, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

static int fetch_locked(struct pp_k8s_meta *m)
{
	struct pp_k8s_podlist *l = NULL;
	char reason[256];
	long status = 0;
	size_t pods;
	int rc;

	if (m->source == PP_K8S_NONE)
		return -ENOENT;
	if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED))
		return -ECANCELED;
	if (!m->url) {
		rc = -ENODATA;
		snprintf(reason, sizeof(reason),
			 "node name unknown: set NODE_NAME (downward API "
			 "spec.nodeName) or node-name");
		goto fail;
	}
	if (!m->token || pp_clock_ns(CLOCK_MONOTONIC) - m->token_read_ns >=
			     (uint64_t)m->token_ttl_ms * 1000000ull)
		read_token(m); /* unreadable: keep the old one; a 401 will say so */
	rc = http_get(m, &status, reason, sizeof(reason));
	if (rc == 0 && status == 401 && read_token(m) == 1)
		rc = http_get(m, &status, reason, sizeof(reason)); /* rotated under us? */
	if (rc)
		goto fail;
	if (status != 200) {
		rc = status == 401 || status == 403 ? -EACCES : -EIO;
		snprintf(reason, sizeof(reason), "HTTP %ld%s", status,
			 status == 401	 ? " (token rejected)"
			 : status == 403 ? " (forbidden: RBAC needs pods list)"
					 : "");
		goto fail;
	}
	rc = pp_k8s_pods_parse(m->resp, m->resp_len, &m->lim, &l);
	if (rc) {
		snprintf(reason, sizeof(reason), "not a PodList (%zu bytes): %s", m->resp_len,
			 strerror(-rc));
		goto fail;
	}
	rc = install(m, l);
	if (rc) {
		snprintf(reason, sizeof(reason), "%s", strerror(-rc));
		goto fail;
	}
	goto out;
fail:
	pods = m->snap ? m->snap->l->n_pods : 0;
	set_state(m, PP_K8S_STATE_FAILING, reason, pods, 0);
out:
	/* A big list's buffer is not kept between fetches: it would double what we hold. */
	free(m->resp);
	m->resp = NULL;
	m->resp_cap = m->resp_len = 0;
	return rc;
}

int pp_k8s_meta_refresh_now(struct pp_k8s_meta *m)
{
	int rc;

	if (!m)
		return -EINVAL;
	if (m->source == PP_K8S_NONE)
		return -ENOENT;
	pthread_mutex_lock(&m->fetch_lock);
	rc = fetch_locked(m);
	pthread_mutex_unlock(&m->fetch_lock);
	return rc;
}

int pp_k8s_meta_load_buffer(struct pp_k8s_meta *m, const char *buf, size_t len)
{
	struct pp_k8s_podlist *l;
	int rc;

	if (!m)
		return -EINVAL;
	rc = pp_k8s_pods_parse(buf, len, &m->lim, &l);
	if (rc)
		return rc;
	pthread_mutex_lock(&m->fetch_lock);
	rc = install(m, l);
	pthread_mutex_unlock(&m->fetch_lock);
	return rc;
}

static uint64_t jittered_ns(struct pp_k8s_meta *m)
{
	uint64_t base = (uint64_t)m->refresh_ms * 1000000ull;
	uint64_t span = base * 2 / 3;

	/* [2/3, 4/3] of the period: agents started together do not list together. */
	return base - span / 2 + (span ? (uint64_t)rand_r(&m->seed) % span : 0);
}

static void *fetch_main(void *arg)
{
	struct pp_k8s_meta *m = arg;
	uint64_t next = 0, last = 0;

	pthread_mutex_lock(&m->lock);
	while (!m->stop) {
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC), due = next;
		struct timespec ts;

		if (m->refresh_wanted) {
			uint64_t soon = last + (uint64_t)m->miss_refresh_ms * 1000000ull;

			if (soon < due)
				due = soon;
		}
		if (now >= due) {
			m->refresh_wanted = 0;
			pthread_mutex_unlock(&m->lock);
			pp_k8s_meta_refresh_now(m);
			pthread_mutex_lock(&m->lock);
			last = now;
			next = pp_clock_ns(CLOCK_MONOTONIC) + jittered_ns(m);
			continue;
		}
		ts.tv_sec = (time_t)(due / 1000000000ull);
		ts.tv_nsec = (long)(due % 1000000000ull);
		pthread_cond_timedwait(&m->cond, &m->lock, &ts);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* --- construction --- */

static char *dup_or(const char *s, const char *def)
{
	return strdup(s ? s : def);
}

/* Base URL without trailing slashes + path; NULL on ENOMEM. */
static char *join_url(const char *base, const char *path)
{
	size_t n = strlen(base);
	char *u;

	while (n && base[n - 1] == '/')
		n--;
	u = malloc(n + strlen(path) + 1);
	if (!u)
		return NULL;
	memcpy(u, base, n);
	strcpy(u + n, path);
	return u;
}

/* https://HOST:PORT, brackets around an IPv6 literal. */
static char *host_url(const char *host, const char *port)
{
	int v6 = strchr(host, ':') && host[0] != '[';
	size_t n = strlen(host) + strlen(port) + 16;
	char *u = malloc(n);

	if (u)
		snprintf(u, n, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
	return u;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

static int build_url(struct pp_k8s_meta *m, const struct pp_k8s_meta_opts *o)
{
	char *base = NULL;
	const char *e;

	if (m->source == PP_K8S_APISERVER) {
		char *q, *p;

		if (o->api_url && o->api_url[0])
			base = strdup(o->api_url);
		else if ((e = env_nonempty("KUBERNETES_SERVICE_HOST")))
			base = host_url(e, env_nonempty("KUBERNETES_SERVICE_PORT")
					       ? env_nonempty("KUBERNETES_SERVICE_PORT")
					       : "443");
		else
			base = strdup("https://kubernetes.default.svc");
		if (!base)
			return -ENOMEM;
		if (!m->node[0]) {
			/* Listing every pod of the cluster is not an option; fetches fail until
			 * restarted with a node name. */
			free(base);
			return 0;
		}
		q = malloc(strlen(m->node) * 3 + 96);
		if (!q) {
			free(base);
			return -ENOMEM;
		}
		p = q + sprintf(q, "/api/v1/pods?fieldSelector=spec.nodeName%%3D");
		for (const char *s = m->node; *s; s++) {
			unsigned char c = (unsigned char)*s;

			if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
				*p++ = (char)c;
			else
				p += sprintf(p, "%%%02X", c);
		}
		/* resourceVersion=0: served from the API server's cache, not etcd. */
		strcpy(p, "&resourceVersion=0");
		m->url = join_url(base, q);
		free(q);
	} else {
		if (o->kubelet_url && o->kubelet_url[0]) {
			base = strdup(o->kubelet_url);
		} else {
			char port[16];

			snprintf(port, sizeof(port), "%d", PP_K8S_KUBELET_PORT);
			e = env_nonempty("NODE_IP");
			if (!e)
				e = env_nonempty("HOST_IP");
			base = host_url(e ? e : "127.0.0.1", port);
		}
		if (!base)
			return -ENOMEM;
		m->url = join_url(base, "/pods");
	}
	free(base);
	return m->url ? 0 : -ENOMEM;
}

static int setup_curl(struct pp_k8s_meta *m)
{
	m->curl = curl_easy_init();
	m->hdrs = curl_slist_append(NULL, "Accept: application/json");
	if (!m->curl || !m->hdrs)
		return -ENOMEM;
	curl_easy_setopt(m->curl, CURLOPT_URL, m->url ? m->url : "");
	curl_easy_setopt(m->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(m->curl, CURLOPT_ERRORBUFFER, m->errbuf);
	curl_easy_setopt(m->curl, CURLOPT_TIMEOUT_MS, (long)m->timeout_ms);
	curl_easy_setopt(m->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)m->timeout_ms);
	curl_easy_setopt(m->curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(m->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(m->curl, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(m->curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(m->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(m->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(m->curl, CURLOPT_WRITEDATA, m);
	curl_easy_setopt(m->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(m->curl, CURLOPT_XFERINFODATA, m);
	curl_easy_setopt(m->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(m->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)m->max_response);
	if (m->source == PP_K8S_KUBELET && m->insecure) {
		curl_easy_setopt(m->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(m->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (m->ca_path[0] && access(m->ca_path, R_OK) == 0) {
		curl_easy_setopt(m->curl, CURLOPT_CAINFO, m->ca_path);
	}
	return 0;
}

struct pp_k8s_meta *pp_k8s_meta_new(const struct pp_k8s_meta_opts *opts)
{
	struct pp_k8s_meta_opts def = {0};
	const struct pp_k8s_meta_opts *o = opts ? opts : &def;
	struct pp_k8s_meta *m;
	pthread_condattr_t ca;
	int rc;

	if ((unsigned)o->source > PP_K8S_NONE) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->source = o->source;
	if (m->source == PP_K8S_AUTO)
		m->source = (o->api_url && o->api_url[0]) || env_nonempty("KUBERNETES_SERVICE_HOST")
				? PP_K8S_APISERVER
				: PP_K8S_NONE;
	m->node = dup_or(o->node_name && o->node_name[0] ? o->node_name : NULL,
			 env_nonempty("NODE_NAME") ? env_nonempty("NODE_NAME") : "");
	m->token_path = dup_or(o->token_path, PP_K8S_DEFAULT_TOKEN_PATH);
	m->ca_path = dup_or(o->ca_path, PP_K8S_DEFAULT_CA_PATH);
	m->insecure = o->kubelet_insecure;
	m->refresh_ms = o->refresh_ms ? o->refresh_ms : DEF_REFRESH_MS;
	m->miss_refresh_ms = o->miss_refresh_ms ? o->miss_refresh_ms : DEF_MISS_REFRESH_MS;
	m->token_ttl_ms = o->token_ttl_ms ? o->token_ttl_ms : DEF_TOKEN_TTL_MS;
	m->timeout_ms = o->timeout_ms ? o->timeout_ms : DEF_TIMEOUT_MS;
	m->grace_ms = o->grace_ms ? o->grace_ms : DEF_GRACE_MS;
	m->max_response = o->max_response_bytes ? o->max_response_bytes : DEF_MAX_RESPONSE;
	m->lim.max_pods = o->max_pods ? o->max_pods : DEF_MAX_PODS;
	m->lim.max_containers = o->max_containers ? o->max_containers : DEF_MAX_CONTAINERS;
	m->seed = (unsigned)(pp_clock_ns(CLOCK_MONOTONIC) ^ (uint64_t)getpid());
	m->state = m->source == PP_K8S_NONE ? PP_K8S_STATE_OFF : PP_K8S_STATE_STARTING;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->fetch_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!m->node || !m->token_path || !m->ca_path)
		goto nomem;
	if (m->source == PP_K8S_NONE)
		return m;
	if (build_url(m, o))
		goto nomem;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (setup_curl(m))
		goto nomem;
	if (o->no_thread)
		return m;
	rc = pthread_create(&m->thread, NULL, fetch_main, m);
	if (rc) {
		pp_k8s_meta_free(m);
		errno = rc;
		return NULL;
	}
	pthread_setname_np(m->thread, "pp-k8s-meta"); /* top -H, perf: which thread */
	m->thread_started = 1;
	return m;
nomem:
	pp_k8s_meta_free(m);
	errno = ENOMEM;
	return NULL;
}

void pp_k8s_meta_free(struct pp_k8s_meta *m)
{
	if (!m)
		return;
	if (m->thread_started) {
		pthread_mutex_lock(&m->lock);
		__atomic_store_n(&m->stop, 1, __ATOMIC_RELAXED);
		pthread_cond_signal(&m->cond);
		pthread_mutex_unlock(&m->lock);
		pthread_join(m->thread, NULL);
	}
	if (m->curl) {
		curl_easy_cleanup(m->curl);
		curl_global_cleanup();
	}
	curl_slist_free_all(m->hdrs);
	if (m->token) {
		memset(m->token, 0, strlen(m->token));
		free(m->token);
	}
	free(m->resp);
	snapshot_free(m->snap);
	free(m->url);
	free(m->node);
	free(m->token_path);
	free(m->ca_path);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->fetch_lock);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* --- lookups --- */

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1; /* the parser bounds every field to its array; defensive only */
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void fill_out(const struct pp_k8s_podlist *l, const struct pp_k8s_pod *p,
		     const struct pp_k8s_container *c, struct pp_k8s_container_meta *out)
{
#define S(field, off) copy_str(out->field, sizeof(out->field), pp_k8s_podlist_str(l, off))
	S(pod_uid, p->uid);
	S(pod_name, p->name);
	S(namespace_name, p->ns);
	S(node_name, p->node);
	S(replicaset_name, p->replicaset);
	S(deployment_name, p->deployment);
	S(daemonset_name, p->daemonset);
	S(statefulset_name, p->statefulset);
	S(job_name, p->job);
	S(cronjob_name, p->cronjob);
	S(service_name, p->app_name);
	if (c) {
		pp_k8s_container_id_format(c->id, out->container_id);
		out->runtime = (enum pp_container_runtime)c->runtime;
		out->kind = (enum pp_k8s_container_kind)c->kind;
		S(container_name, c->name);
		if (!out->service_name[0])
			S(service_name, c->name);
	}
#undef S
}

/* Under lock: should this miss ask for a refresh? Remembers the key. */
static int miss_wants_refresh(struct pp_k8s_meta *m, const void *key, size_t len)
{
	struct miss_slot *s;
	uint32_t h = 2166136261u;

	if (len > sizeof(s->key))
		len = sizeof(s->key);
	for (size_t i = 0; i < len; i++) {
		h ^= ((const uint8_t *)key)[i];
		h *= 16777619u;
	}
	s = &m->miss[h % MISS_SLOTS];
	if (s->len == len && memcmp(s->key, key, len) == 0) {
		if (s->gen < m->generation)
			return 0; /* a list fetched after its first miss did not have it either */
		return 1;
	}
	memcpy(s->key, key, len);
	s->len = len;
	s->gen = m->generation;
	return 1;
}

int pp_k8s_meta_pods_in_namespace(struct pp_k8s_meta *m, const char *ns,
				  int (*fn)(void *ctx, const char *pod_uid), void *ctx)
{
	int n = 0;

	if (!m || !ns || !fn)
		return 0;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; m->snap && i < m->snap->l->n_pods; i++) {
		const struct pp_k8s_podlist *l = m->snap->l;
		int rc;

		if (strcmp(pp_k8s_podlist_str(l, l->pods[i].ns), ns))
			continue;
		rc = fn(ctx, pp_k8s_podlist_str(l, l->pods[i].uid));
		if (rc) {
			n = rc;
			break;
		}
		n++;
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

int pp_k8s_meta_lookup(struct pp_k8s_meta *m, const char *container_id, const char *pod_uid,
		       struct pp_k8s_container_meta *out)
{
	int have_id = 0, rc = -ENOENT, ask = 0;
	uint8_t id[32];

	if (!m || !out)
		return -ENOENT;
	if (container_id && container_id[0])
		have_id = pp_k8s_container_id_from_hex(container_id, strlen(container_id), id) == 0;
	if (!have_id && !(pod_uid && pod_uid[0]))
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&m->lock);
	m->st.lookups++;
	if (m->snap) {
		int64_t ci = have_id ? find_ctr(m->snap, id) : -1;
		const struct pp_k8s_podlist *l = m->snap->l;

		if (ci >= 0) {
			fill_out(l, &l->pods[l->ctrs[ci].pod], &l->ctrs[ci], out);
			rc = 0;
		} else if (pod_uid && pod_uid[0]) {
			int64_t pi = find_pod(m->snap, pod_uid);

			if (pi >= 0) {
				fill_out(l, &l->pods[pi], NULL, out);
				out->by_pod_uid = 1;
				rc = 0;
			}
		}
	}
	if (rc == 0 && !out->by_pod_uid)
		m->st.hits++;
	else
		m->st.misses++;
	/* Ask when the container is unknown, or, asked by pod UID alone, the pod is. */
	if (m->source != PP_K8S_NONE && (have_id ? rc || out->by_pod_uid : rc) &&
	    (have_id ? miss_wants_refresh(m, id, sizeof(id))
		     : miss_wants_refresh(m, pod_uid, strlen(pod_uid)))) {
		ask = !m->refresh_wanted;
		m->refresh_wanted = 1;
		if (ask) {
			m->st.refresh_requests++;
			pthread_cond_signal(&m->cond);
		}
	}
	pthread_mutex_unlock(&m->lock);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

uint64_t pp_k8s_meta_generation(const struct pp_k8s_meta *m)
{
	return m ? __atomic_load_n(&m->generation, __ATOMIC_ACQUIRE) : 0;
}

void pp_k8s_meta_get_stats(struct pp_k8s_meta *m, struct pp_k8s_meta_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	*out = m->st;
	out->source = m->source;
	out->state = m->state;
	out->generation = m->generation;
	if (m->snap) {
		out->pods = m->snap->l->n_pods;
		out->containers = m->snap->l->n_ctrs;
	}
	out->bytes = sizeof(*m) + snapshot_bytes(m->snap);
	snprintf(out->url, sizeof(out->url), "%s", m->url ? m->url : "");
	pthread_mutex_unlock(&m->lock);
}
