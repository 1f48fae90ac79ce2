/*
 * HTTP transport of the exporter (see pebsprof/transport.h): one libcurl easy handle, so
 * the connection is kept alive between requests, one request in flight at a time, and the
 * OTLP retry rules applied per attempt. Backoff is a due time compared with the caller's
 * clock, never a sleep, so the daemon decides where the waiting happens.
 */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <zlib.h>

#include <pebsprof/transport.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

/* An error body is logged only this far: enough to say why, not a flood. */
#define PP_LOG_BODY_MAX 200

struct pp_transport {
	struct pp_transport_config cfg;
	char *url;     /* OTLP: the full URL; Pyroscope: up to /ingest, query added per request */
	char *log_url; /* the URL without credentials, for messages */
	char *app_name;
	struct pp_http_header *hdrs;
	uint32_t nhdrs;
	struct curl_slist *req_hdrs; /* for this protocol */
	CURL *curl;
	char errbuf[CURL_ERROR_SIZE];
	struct pp_send_queue *q;
	uint64_t rng;

	pthread_mutex_t stats_lock;
	struct pp_transport_stats st;

	/* The request in hand (only the polling thread touches these). */
	struct pp_send_item *cur;
	uint8_t *wire; /* the bytes sent: gzip'ed copy or cur->body */
	size_t wire_len;
	char *cur_url; /* Pyroscope: url with this request's query */
	uint64_t first_ms, due_ms;
	uint32_t attempts, retries;

	/* The response of the last attempt. */
	uint8_t *resp;
	size_t resp_len, resp_cap;
	bool resp_overflow;
	char retry_after[64];
	char content_type[128];
	char last_fail[CURL_ERROR_SIZE + 32]; /* why the last attempt failed, for messages */
	/* The outage, said once when it starts, once per change of its reason (the class of
	 * failure: "HTTP 503", "no response: Couldn't connect to server"), once when it ends. */
	char last_class[128];
	char outage_class[128];
	bool outage;
	uint64_t outage_since_ms;
	/* meta.queued_ms of the request in hand (0: none), read by pp_transport_stats */
	_Atomic uint64_t cur_queued_ms;
};

enum attempt_class {
	A_OK,
	A_RETRY,
	A_SPLIT,
	A_DROP_4XX,
	A_DROP_5XX,
	A_DROP_OTHER,
};

const char *pp_send_outcome_name(enum pp_send_outcome o)
{
	switch (o) {
	case PP_SEND_DELIVERED:
		return "delivered";
	case PP_SEND_SPLIT:
		return "split-needed";
	case PP_SEND_DROPPED_4XX:
		return "dropped-4xx";
	case PP_SEND_DROPPED_5XX:
		return "dropped-5xx";
	case PP_SEND_GAVE_UP:
		return "gave-up";
	case PP_SEND_DROPPED_OTHER:
		return "dropped-other";
	case PP_SEND_DROPPED_SHUTDOWN:
		return "dropped-shutdown";
	}
	return "unknown";
}

__attribute__((format(printf, 3, 4))) static void
tlog(struct pp_transport *t, enum pp_transport_log_level lvl, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!t->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	t->cfg.log(t->cfg.log_ctx, lvl, msg);
}

/* Copies up to max bytes of untrusted text into out, replacing what is not printable. */
static void sanitize(const void *buf, size_t len, char *out, size_t outlen, size_t max)
{
	const unsigned char *s = buf;
	size_t i, o = 0;

	if (!outlen)
		return;
	for (i = 0; i < len && i < max && o + 1 < outlen; i++)
		out[o++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '.';
	out[o] = '\0';
	if (i < len && o + 4 < outlen)
		strcpy(out + o, "...");
}

static uint64_t mono_ms(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ms(struct pp_transport *t)
{
	return t->cfg.clock_ms(t->cfg.clock_ctx);
}

/* xorshift64*: a uniform double in [0, 1) for jitter; no need for more. */
static double rand_unit(struct pp_transport *t)
{
	uint64_t x = t->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

void pp_transport_config_init(struct pp_transport_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->protocol = PP_TRANSPORT_OTLP_HTTP;
	cfg->gzip = true;
	cfg->timeout_ms = 10000;
	cfg->backoff_initial_ms = 5000;
	cfg->backoff_multiplier = 1.5;
	cfg->backoff_max_ms = 30000;
	cfg->max_elapsed_ms = 300000;
	cfg->jitter = 0.5;
	cfg->queue_bytes = PP_SEND_QUEUE_DEFAULT_BYTES;
	cfg->max_request_bytes = PP_TRANSPORT_MAX_REQUEST_BYTES;
}

uint64_t pp_transport_backoff_ms(const struct pp_transport_config *cfg, uint32_t retry, double u)
{
	double d = cfg->backoff_initial_ms, cap = cfg->backoff_max_ms;

	for (uint32_t i = 0; i < retry && d < cap; i++)
		d *= cfg->backoff_multiplier;
	if (d > cap)
		d = cap;
	d *= 1.0 + cfg->jitter * (2.0 * u - 1.0);
	return d <= 0 ? 0 : (uint64_t)(d + 0.5);
}

int64_t pp_transport_parse_retry_after(const char *value, int64_t now_unix)
{
	const char *s = value, *e;
	int64_t secs = 0;
	time_t when;

	if (!value)
		return -1;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		e--;
	if (s == e)
		return -1;
	if (*s >= '0' && *s <= '9') {
		const char *p;

		for (p = s; p < e && *p >= '0' && *p <= '9'; p++)
			if (secs < 100000000) /* past three years it no longer matters */
				secs = secs * 10 + (*p - '0');
		if (p == e)
			return secs * 1000;
	}
	{
		char date[64];
		size_t n = (size_t)(e - s);

		if (n >= sizeof(date))
			return -1;
		memcpy(date, s, n);
		date[n] = '\0';
		when = curl_getdate(date, NULL);
	}
	if (when == (time_t)-1)
		return -1;
	if (when <= now_unix)
		return 0;
	/* far-future dates: the delay only has to be longer than any give-up time */
	return ((int64_t)when - now_unix > 100000000 ? 100000000 : (int64_t)when - now_unix) * 1000;
}

int pp_send_split(size_t n, size_t *first, size_t *second)
{
	if (n < 2)
		return -E2BIG;
	if (first)
		*first = n / 2;
	if (second)
		*second = n - n / 2;
	return 0;
}

/* ---- endpoint ---- */

/* Parses url into h; fills err on failure. */
static int parse_url(CURLU *h, const char *url, bool verbatim, char *err, size_t errlen)
{
	char *scheme = NULL, *host = NULL, *query = NULL, *frag = NULL;
	CURLUcode uc;
	int ret = -EINVAL;

	if (!url || !url[0]) {
		snprintf(err, errlen, "endpoint is empty: give a URL such as http://host:4318");
		return -EINVAL;
	}
	if (!strstr(url, "://")) {
		snprintf(err, errlen,
			 "endpoint \"%.200s\" has no scheme: write http://%.200s or "
			 "https://%.200s",
			 url, url, url);
		return -EINVAL;
	}
	/* libcurl would read "http:///x" as host "x" */
	if (strstr(url, "://")[3] == '/' || !strstr(url, "://")[3]) {
		snprintf(err, errlen, "endpoint \"%.200s\" has no host", url);
		return -EINVAL;
	}
	uc = curl_url_set(h, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
	if (uc != CURLUE_OK) {
		snprintf(err, errlen, "endpoint \"%.200s\" is not a valid URL: %s", url,
			 curl_url_strerror(uc));
		return -EINVAL;
	}
	curl_url_get(h, CURLUPART_SCHEME, &scheme, 0);
	curl_url_get(h, CURLUPART_HOST, &host, 0);
	curl_url_get(h, CURLUPART_QUERY, &query, 0);
	curl_url_get(h, CURLUPART_FRAGMENT, &frag, 0);
	if (!scheme || (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0))
		snprintf(err, errlen, "endpoint \"%.200s\": scheme \"%s\" is not http or https",
			 url, scheme ? scheme : "");
	else if (!host || !host[0])
		snprintf(err, errlen, "endpoint \"%.200s\" has no host", url);
	else if (frag)
		snprintf(err, errlen, "endpoint \"%.200s\" has a #fragment: remove it", url);
	else if (query && !verbatim)
		snprintf(err, errlen,
			 "endpoint \"%.200s\" has a ?query, but a path is appended to it: give "
			 "the base URL",
			 url);
	else
		ret = 0;
	curl_free(scheme);
	curl_free(host);
	curl_free(query);
	curl_free(frag);
	return ret;
}

int pp_transport_check_endpoint(const char *url, bool verbatim, char *err, size_t errlen)
{
	char dummy[1];
	CURLU *h = curl_url();
	int ret;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!h)
		return -ENOMEM;
	ret = parse_url(h, url, verbatim, err, errlen);
	curl_url_cleanup(h);
	return ret;
}

/* Builds t->url (base path + suffix unless verbatim) and t->log_url (no credentials). */
static int build_urls(struct pp_transport *t, const struct pp_transport_config *c, char *err,
		      size_t errlen)
{
	bool verbatim = c->endpoint_verbatim && c->protocol == PP_TRANSPORT_OTLP_HTTP;
	const char *suffix = c->protocol == PP_TRANSPORT_OTLP_HTTP ? PP_TRANSPORT_OTLP_PATH
								   : PP_TRANSPORT_PYROSCOPE_PATH;
	char *path = NULL, *full = NULL;
	CURLU *h = curl_url();
	int ret;

	if (!h)
		return -ENOMEM;
	ret = parse_url(h, c->endpoint, verbatim, err, errlen);
	if (ret)
		goto out;
	ret = -ENOMEM;
	if (!verbatim) {
		size_t n;
		char *np;

		if (curl_url_get(h, CURLUPART_PATH, &path, 0) != CURLUE_OK)
			goto out;
		n = strlen(path);
		while (n && path[n - 1] == '/') /* "http://h:4318/" is the base "http://h:4318" */
			n--;
		np = malloc(n + strlen(suffix) + 1);
		if (!np)
			goto out;
		memcpy(np, path, n);
		strcpy(np + n, suffix);
		if (curl_url_set(h, CURLUPART_PATH, np, 0) != CURLUE_OK) {
			free(np);
			goto out;
		}
		free(np);
	}
	if (curl_url_get(h, CURLUPART_URL, &full, 0) != CURLUE_OK)
		goto out;
	t->url = strdup(full);
	curl_free(full);
	full = NULL;
	curl_url_set(h, CURLUPART_USER, NULL, 0);
	curl_url_set(h, CURLUPART_PASSWORD, NULL, 0);
	curl_url_set(h, CURLUPART_QUERY, NULL, 0);
	if (curl_url_get(h, CURLUPART_URL, &full, 0) != CURLUE_OK)
		goto out;
	t->log_url = strdup(full);
	ret = t->url && t->log_url ? 0 : -ENOMEM;
out:
	curl_free(path);
	curl_free(full);
	curl_url_cleanup(h);
	return ret;
}

/* ---- curl callbacks ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct pp_transport *t = ctx;
	size_t n = size * nmemb;

	if (t->resp_len + n > PP_TRANSPORT_MAX_RESPONSE_BYTES) {
		t->resp_overflow = true;
		return 0; /* CURLE_WRITE_ERROR: the OTLP client reads at most 4 MiB */
	}
	if (t->resp_len + n > t->resp_cap) {
		size_t cap = t->resp_cap ? t->resp_cap : 4096;
		uint8_t *nb;

		while (cap < t->resp_len + n)
			cap *= 2;
		nb = realloc(t->resp, cap);
		if (!nb)
			return 0;
		t->resp = nb;
		t->resp_cap = cap;
	}
	memcpy(t->resp + t->resp_len, data, n);
	t->resp_len += n;
	return n;
}

/* Copies header value [v, e) into out, trimmed. */
static void header_value(const char *v, const char *e, char *out, size_t outlen)
{
	size_t n;

	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
		e--;
	n = (size_t)(e - v);
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, v, n);
	out[n] = '\0';
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct pp_transport *t = ctx;
	size_t n = size * nmemb;
	const char *e = data + n;

	/* A status line starts a new response (after a 100 Continue): forget the old one. */
	if (n >= 5 && !strncmp(data, "HTTP/", 5)) {
		t->retry_after[0] = '\0';
		t->content_type[0] = '\0';
	} else if (n > 12 && !strncasecmp(data, "Retry-After:", 12)) {
		header_value(data + 12, e, t->retry_after, sizeof(t->retry_after));
	} else if (n > 13 && !strncasecmp(data, "Content-Type:", 13)) {
		header_value(data + 13, e, t->content_type, sizeof(t->content_type));
	}
	return n;
}

/* ---- construction ---- */

static int add_header(struct curl_slist **l, const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 3;
	struct curl_slist *nl;
	char *line = malloc(n);

	if (!line)
		return -ENOMEM;
	/* "Name;" is how libcurl sends a header with an empty value. */
	if (value[0])
		snprintf(line, n, "%s: %s", name, value);
	else
		snprintf(line, n, "%s;", name);
	nl = curl_slist_append(*l, line);
	free(line);
	if (!nl)
		return -ENOMEM;
	*l = nl;
	return 0;
}

static int build_headers(struct pp_transport *t, const struct pp_transport_config *c)
{
	bool user_ua = false;
	int ret = 0;

	for (uint32_t i = 0; i < t->nhdrs; i++)
		user_ua |= !strcasecmp(t->hdrs[i].name, "User-Agent");
	if (c->protocol == PP_TRANSPORT_OTLP_HTTP) {
		ret = add_header(&t->req_hdrs, "Content-Type", "application/x-protobuf");
		if (!ret && c->gzip)
			ret = add_header(&t->req_hdrs, "Content-Encoding", "gzip");
	} else {
		/* Pyroscope tells gzip'ed pprof from plain by the magic bytes. */
		ret = add_header(&t->req_hdrs, "Content-Type", "application/octet-stream");
	}
	if (!ret && !user_ua)
		ret = add_header(&t->req_hdrs, "User-Agent",
				 c->user_agent && c->user_agent[0] ? c->user_agent : "pebsprof");
	/* No "Expect: 100-continue": it costs a round trip (or a 1 s stall) per request. */
	if (!ret) {
		struct curl_slist *nl = curl_slist_append(t->req_hdrs, "Expect:"); /* = remove */

		ret = nl ? 0 : -ENOMEM;
		t->req_hdrs = nl ? nl : t->req_hdrs;
	}
	for (uint32_t i = 0; !ret && i < t->nhdrs; i++)
		ret = add_header(&t->req_hdrs, t->hdrs[i].name, t->hdrs[i].value);
	return ret;
}

static int check_numbers(const struct pp_transport_config *c, char *err, size_t errlen)
{
	if (!c->timeout_ms)
		snprintf(err, errlen, "transport timeout must be > 0 ms");
	else if (!c->backoff_initial_ms)
		snprintf(err, errlen, "retry initial interval must be > 0 ms");
	else if (!(c->backoff_multiplier >= 1.0 && c->backoff_multiplier <= 100.0))
		snprintf(err, errlen, "retry multiplier %g must be in [1, 100]",
			 c->backoff_multiplier);
	else if (c->backoff_max_ms < c->backoff_initial_ms)
		snprintf(err, errlen, "retry max interval %u ms is below the initial %u ms",
			 c->backoff_max_ms, c->backoff_initial_ms);
	else if (c->max_elapsed_ms && c->max_elapsed_ms < c->backoff_initial_ms)
		snprintf(err, errlen, "retry max elapsed time %u ms is below the initial %u ms",
			 c->max_elapsed_ms, c->backoff_initial_ms);
	else if (!(c->jitter >= 0.0 && c->jitter < 1.0))
		snprintf(err, errlen, "retry jitter %g must be in [0, 1)", c->jitter);
	else if (c->protocol != PP_TRANSPORT_OTLP_HTTP &&
		 c->protocol != PP_TRANSPORT_PYROSCOPE_INGEST)
		snprintf(err, errlen, "unknown transport protocol %d", (int)c->protocol);
	else if (c->protocol == PP_TRANSPORT_PYROSCOPE_INGEST && (!c->app_name || !c->app_name[0]))
		snprintf(err, errlen, "Pyroscope ingest needs an application name (name=)");
	else
		return 0;
	return -EINVAL;
}

struct pp_transport *pp_transport_new(const struct pp_transport_config *cfg, char *err,
				      size_t errlen)
{
	char dummy[1];
	struct pp_transport *t;
	int ret;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!cfg) {
		errno = EINVAL;
		return NULL;
	}
	ret = check_numbers(cfg, err, errlen);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	/* Reference-counted by libcurl; thread-safe in the 7.84+ builds we use. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	pthread_mutex_init(&t->stats_lock, NULL);
	t->cfg = *cfg;
	t->cfg.endpoint = NULL; /* strings are not kept: t->url, t->app_name hold what is used */
	t->cfg.headers = NULL;
	t->cfg.user_agent = NULL;
	t->cfg.app_name = NULL;
	if (!t->cfg.clock_ms)
		t->cfg.clock_ms = mono_ms;
	if (!t->cfg.max_request_bytes)
		t->cfg.max_request_bytes = PP_TRANSPORT_MAX_REQUEST_BYTES;
	t->rng = cfg->seed ? cfg->seed
			   : ((uint64_t)time(NULL) << 20 ^ (uint64_t)getpid() ^ mono_ms(NULL));
	if (!t->rng)
		t->rng = 0x9E3779B97F4A7C15ULL;

	ret = build_urls(t, cfg, err, errlen);
	if (ret)
		goto fail;
	if (cfg->headers) {
		ret = pp_otlp_parse_headers(cfg->headers, strlen(cfg->headers), &t->hdrs, &t->nhdrs,
					    err, errlen);
		if (ret)
			goto fail;
	}
	ret = -ENOMEM;
	if (cfg->app_name && !(t->app_name = strdup(cfg->app_name)))
		goto fail;
	if (build_headers(t, cfg))
		goto fail;
	t->q = pp_send_queue_new(cfg->queue_bytes);
	t->curl = curl_easy_init();
	if (!t->q || !t->curl)
		goto fail;

	curl_easy_setopt(t->curl, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS */
	curl_easy_setopt(t->curl, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(t->curl, CURLOPT_TIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(t->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(t->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(t->curl, CURLOPT_HTTPHEADER, t->req_hdrs);
	curl_easy_setopt(t->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(t->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(t->curl, CURLOPT_ACCEPT_ENCODING, ""); /* whatever libcurl decodes */
	curl_easy_setopt(t->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(t->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(t->curl, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(t->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(t->curl, CURLOPT_HEADERDATA, t);
	if (cfg->protocol == PP_TRANSPORT_OTLP_HTTP)
		curl_easy_setopt(t->curl, CURLOPT_URL, t->url);
	return t;
fail:
	if (ret == -ENOMEM && !err[0])
		snprintf(err, errlen, "out of memory setting up the transport");
	pp_transport_free(t);
	errno = -ret;
	return NULL;
}

/* Drops the request in hand without a result (teardown). */
static void release_cur(struct pp_transport *t)
{
	atomic_store(&t->cur_queued_ms, 0);
	if (t->wire != (t->cur ? t->cur->body : NULL))
		free(t->wire);
	t->wire = NULL;
	t->wire_len = 0;
	pp_send_item_free(t->cur);
	t->cur = NULL;
	free(t->cur_url);
	t->cur_url = NULL;
}

void pp_transport_free(struct pp_transport *t)
{
	if (!t)
		return;
	release_cur(t);
	if (t->curl)
		curl_easy_cleanup(t->curl);
	curl_slist_free_all(t->req_hdrs);
	pp_send_queue_free(t->q);
	pp_otlp_free_headers(t->hdrs);
	free(t->app_name);
	free(t->url);
	free(t->log_url);
	free(t->resp);
	pthread_mutex_destroy(&t->stats_lock);
	free(t);
	curl_global_cleanup();
}

int pp_transport_push(struct pp_transport *t, uint8_t *body, size_t len,
		      const struct pp_send_meta *meta)
{
	if (!t) {
		free(body);
		return -EINVAL;
	}
	if (len > t->cfg.max_request_bytes) {
		pthread_mutex_lock(&t->stats_lock);
		t->st.dropped_too_big++;
		t->st.dropped_bytes += len;
		pthread_mutex_unlock(&t->stats_lock);
		free(body);
		return -EMSGSIZE;
	}
	if (meta && !meta->queued_ms) {
		struct pp_send_meta m = *meta;

		m.queued_ms = now_ms(t);
		if (!m.queued_ms)
			m.queued_ms = 1; /* 0 means "not set" */
		return pp_send_queue_push(t->q, body, len, &m);
	}
	return pp_send_queue_push(t->q, body, len, meta);
}

void pp_transport_stats(struct pp_transport *t, struct pp_transport_stats *out)
{
	if (!t || !out)
		return;
	pthread_mutex_lock(&t->stats_lock);
	*out = t->st;
	pthread_mutex_unlock(&t->stats_lock);
	pp_send_queue_stats(t->q, &out->queue);
	/* the request in hand is older than any queued one */
	{
		uint64_t held = atomic_load(&t->cur_queued_ms);
		uint64_t oldest = held ? held : out->queue.oldest_queued_ms;
		uint64_t now = now_ms(t);

		out->oldest_queued_age_ms = oldest && now > oldest ? now - oldest : 0;
	}
}

/* ---- sending ---- */

static int gzip_body(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	z_stream zs;
	uLong bound;
	uint8_t *buf;
	int zr;

	memset(&zs, 0, sizeof(zs));
	if (len > UINT32_MAX)
		return -E2BIG;
	/*
	 * Fastest: a 10 s window of the churn bench (161 KB of OTLP) takes 1.7 ms to 67 KB, where
	 * level 6 took 4.4 ms to 61 KB; every node pays the CPU, the backend the 10% more bytes.
	 */
	if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	bound = deflateBound(&zs, (uLong)len);
	buf = malloc(bound);
	if (!buf) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	zs.next_out = buf;
	zs.avail_out = (uInt)bound;
	zr = deflate(&zs, Z_FINISH);
	*out_len = zs.total_out;
	deflateEnd(&zs);
	if (zr != Z_STREAM_END) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	return 0;
}

/* Ends the request in hand: counts it, tells the caller, frees it. */
static void finish(struct pp_transport *t, enum pp_send_outcome o, long status, int64_t rejected)
{
	struct pp_send_result r = {
	    .tag = t->cur->meta.tag,
	    .kind = t->cur->meta.kind,
	    .outcome = o,
	    .http_status = status,
	    .attempts = t->attempts,
	    .rejected = rejected,
	    .len = t->cur->len,
	    .meta = &t->cur->meta,
	};

	pthread_mutex_lock(&t->stats_lock);
	switch (o) {
	case PP_SEND_DELIVERED:
		t->st.sent++;
		t->st.sent_bytes += t->wire_len;
		t->st.sent_raw_bytes += t->cur->len;
		break;
	case PP_SEND_SPLIT:
		t->st.split_needed++;
		break;
	case PP_SEND_DROPPED_4XX:
		t->st.dropped_4xx++;
		break;
	case PP_SEND_DROPPED_5XX:
		t->st.dropped_5xx++;
		break;
	case PP_SEND_GAVE_UP:
		t->st.dropped_give_up++;
		break;
	case PP_SEND_DROPPED_OTHER:
		t->st.dropped_other++;
		break;
	case PP_SEND_DROPPED_SHUTDOWN:
		t->st.dropped_shutdown++;
		break;
	}
	if (o != PP_SEND_DELIVERED && o != PP_SEND_SPLIT)
		t->st.dropped_bytes += t->cur->len;
	pthread_mutex_unlock(&t->stats_lock);
	if (o == PP_SEND_SPLIT) {
		/* The body goes to the caller, who splits it; the item must not free it. */
		r.body = t->cur->body;
		if (t->wire == t->cur->body)
			t->wire = NULL;
		t->cur->body = NULL;
	}
	if (t->cfg.on_result)
		t->cfg.on_result(t->cfg.result_ctx, &r);
	else
		free(r.body);
	release_cur(t);
}

/* Takes the next request from the queue and readies its bytes; false when there is none. */
static bool take_next(struct pp_transport *t, int *resolved)
{
	for (;;) {
		struct pp_send_item *it = pp_send_queue_pop(t->q);
		int ret = 0;

		if (!it)
			return false;
		t->cur = it;
		atomic_store(&t->cur_queued_ms, it->meta.queued_ms);
		t->attempts = t->retries = 0;
		t->first_ms = t->due_ms = now_ms(t);
		if (it->meta.kind == PP_SEND_OTLP && t->cfg.protocol == PP_TRANSPORT_OTLP_HTTP) {
			if (t->cfg.gzip) {
				ret = gzip_body(it->body, it->len, &t->wire, &t->wire_len);
			} else {
				t->wire = it->body;
				t->wire_len = it->len;
			}
		} else if (it->meta.kind == PP_SEND_PYROSCOPE &&
			   t->cfg.protocol == PP_TRANSPORT_PYROSCOPE_INGEST) {
			char *name = curl_easy_escape(
			    t->curl, it->meta.app_name[0] ? it->meta.app_name : t->app_name, 0);
			size_t n = name ? strlen(name) + 96 : 0;

			t->wire = it->body;
			t->wire_len = it->len;
			t->cur_url = name ? malloc(strlen(t->url) + n) : NULL;
			if (t->cur_url && (it->meta.from_s || it->meta.until_s))
				sprintf(t->cur_url, "%s?name=%s&from=%lld&until=%lld&format=pprof",
					t->url, name, (long long)it->meta.from_s,
					(long long)it->meta.until_s);
			else if (t->cur_url)
				sprintf(t->cur_url, "%s?name=%s&format=pprof", t->url, name);
			curl_free(name);
			ret = t->cur_url ? 0 : -ENOMEM;
		} else {
			ret = -EPROTOTYPE;
		}
		if (!ret)
			return true;
		tlog(t, PP_TRANSPORT_LOG_ERROR,
		     "export to %s: request %llu (%zu bytes) dropped before sending: %s",
		     t->log_url, (unsigned long long)it->meta.tag, it->len,
		     ret == -EPROTOTYPE ? "its kind does not match the transport's protocol"
					: strerror(-ret));
		finish(t, PP_SEND_DROPPED_OTHER, 0, 0);
		(*resolved)++;
	}
}

static bool retryable_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_WRITE_ERROR: /* our response cap */
	case CURLE_OUT_OF_MEMORY:
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_BAD_FUNCTION_ARGUMENT:
	case CURLE_FAILED_INIT:
	case CURLE_NOT_BUILT_IN:
	case CURLE_ABORTED_BY_CALLBACK:
		return false;
	default:
		return true; /* refused, reset, no reply, timeout, DNS, TLS handshake... */
	}
}

/* Reads partial_success from a 2xx OTLP response; returns the rejected count. */
static int64_t check_partial_success(struct pp_transport *t)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *r;
	const Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess
	    *ps;
	char msg[256];
	int64_t rejected = 0;

	if (!t->resp_len || strstr(t->content_type, "json") || strstr(t->content_type, "text"))
		return 0; /* empty = full success; not protobuf: nothing we can read */
	r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
	    NULL, t->resp_len, t->resp);
	if (!r) {
		tlog(t, PP_TRANSPORT_LOG_WARN,
		     "export to %s: HTTP %ld response body (%zu bytes) is not an "
		     "ExportProfilesServiceResponse; the request counts as delivered",
		     t->log_url, t->st.last_status, t->resp_len);
		return 0;
	}
	ps = r->partial_success;
	if (ps && (ps->rejected_profiles || (ps->error_message && ps->error_message[0]))) {
		rejected = ps->rejected_profiles > 0 ? ps->rejected_profiles : 0;
		sanitize(ps->error_message ? ps->error_message : "",
			 ps->error_message ? strlen(ps->error_message) : 0, msg, sizeof(msg),
			 sizeof(msg) - 4);
		pthread_mutex_lock(&t->stats_lock);
		t->st.partial_success++;
		t->st.rejected_profiles += (uint64_t)rejected;
		pthread_mutex_unlock(&t->stats_lock);
		if (rejected)
			tlog(t, PP_TRANSPORT_LOG_WARN,
			     "export to %s: partial success, the server rejected %lld profiles: "
			     "%s (not retried)",
			     t->log_url, (long long)rejected, msg[0] ? msg : "(no message)");
		else
			tlog(t, PP_TRANSPORT_LOG_WARN, "export to %s: the server warns: %s",
			     t->log_url, msg);
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
	    r, NULL);
	return rejected;
}

/*
 * Whether a 400's body says the request was too large: the Collector answers a body over its
 * max_request_body_size with 400 "http: request body too large" (Go's MaxBytesReader), and
 * Pyroscope a profile over its limits with 400 "... exceeds the size limit" or "exceeds the
 * samples count limit" (pkg/validation/validate.go). Smaller requests fix both.
 */
static bool says_too_large(const char *body)
{
	static const char *const phrases[] = {"too large", "exceeds the size limit",
					      "exceeds the samples count limit"};

	for (size_t i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++)
		if (strcasestr(body, phrases[i]))
			return true;
	return false;
}

/* One HTTP attempt of the request in hand. */
static enum attempt_class attempt(struct pp_transport *t, long *status, int64_t *retry_after_ms)
{
	char body[PP_LOG_BODY_MAX + 8];
	CURLcode rc;

	*status = 0;
	*retry_after_ms = -1;
	t->resp_len = 0;
	t->resp_overflow = false;
	t->retry_after[0] = '\0';
	t->content_type[0] = '\0';
	t->errbuf[0] = '\0';
	if (t->cur_url)
		curl_easy_setopt(t->curl, CURLOPT_URL, t->cur_url);
	curl_easy_setopt(t->curl, CURLOPT_POSTFIELDS, (const char *)t->wire);
	curl_easy_setopt(t->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->wire_len);
	t->attempts++;
	pthread_mutex_lock(&t->stats_lock);
	t->st.attempts++;
	pthread_mutex_unlock(&t->stats_lock);

	rc = curl_easy_perform(t->curl);
	curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, status);
	pthread_mutex_lock(&t->stats_lock);
	t->st.last_status = *status;
	if (rc != CURLE_OK && !*status)
		t->st.transport_errors++;
	pthread_mutex_unlock(&t->stats_lock);

	if (rc != CURLE_OK) {
		if (t->resp_overflow && *status >= 200 && *status < 300) {
			tlog(t, PP_TRANSPORT_LOG_WARN,
			     "export to %s: HTTP %ld with a response over %u bytes, left unread",
			     t->log_url, *status, PP_TRANSPORT_MAX_RESPONSE_BYTES);
			return A_OK;
		}
		if (retryable_curl(rc) && !t->resp_overflow) {
			*status = 0;
			snprintf(t->last_class, sizeof(t->last_class), "no response: %s",
				 curl_easy_strerror(rc));
			snprintf(t->last_fail, sizeof(t->last_fail), "no response: %s",
				 t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
			tlog(t, PP_TRANSPORT_LOG_DEBUG, "export to %s: attempt %u failed: %s",
			     t->log_url, t->attempts,
			     t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
			return A_RETRY;
		}
		snprintf(t->last_class, sizeof(t->last_class), "%s",
			 t->resp_overflow ? "response over the 4 MiB limit"
					  : curl_easy_strerror(rc));
		tlog(t, PP_TRANSPORT_LOG_ERROR, "export to %s: request of %zu bytes dropped: %s%s",
		     t->log_url, t->cur->len,
		     t->resp_overflow ? "response over the 4 MiB limit: " : "",
		     t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
		return A_DROP_OTHER;
	}
	if (*status >= 200 && *status < 300)
		return A_OK;
	if (*status == 429 || *status == 502 || *status == 503 || *status == 504) {
		if (t->retry_after[0])
			*retry_after_ms =
			    pp_transport_parse_retry_after(t->retry_after, time(NULL));
		snprintf(t->last_fail, sizeof(t->last_fail), "HTTP %ld", *status);
		return A_RETRY;
	}
	sanitize(t->resp, t->resp_len, body, sizeof(body), PP_LOG_BODY_MAX);
	if (*status == 413 || (*status == 400 && says_too_large(body))) {
		tlog(t, PP_TRANSPORT_LOG_WARN,
		     "export to %s: HTTP %ld, request of %zu bytes (%zu sent) is too large for "
		     "the server; handed back to be split: %s",
		     t->log_url, *status, t->cur->len, t->wire_len, body);
		return A_SPLIT;
	}
	tlog(t, PP_TRANSPORT_LOG_ERROR,
	     "export to %s: HTTP %ld, request of %zu bytes dropped (not retryable): %s", t->log_url,
	     *status, t->cur->len, body[0] ? body : "(empty body)");
	if (*status >= 400 && *status < 500)
		return A_DROP_4XX;
	if (*status >= 500 && *status < 600)
		return A_DROP_5XX;
	return A_DROP_OTHER;
}

/*
 * An attempt failed (retried or dropped): the first failure starts an outage and says so
 * with its reason, at once rather than when a request is finally given up; a failure of
 * another class says the new reason; more of the same say nothing.
 */
static void outage_failure(struct pp_transport *t, long status)
{
	char cls[sizeof(t->outage_class)];

	if (status)
		snprintf(cls, sizeof(cls), "HTTP %ld", status);
	else
		snprintf(cls, sizeof(cls), "%s", t->last_class[0] ? t->last_class : "no response");
	if (!t->outage) {
		t->outage = true;
		t->outage_since_ms = now_ms(t);
		memcpy(t->outage_class, cls, sizeof(cls));
		tlog(t, PP_TRANSPORT_LOG_WARN,
		     "export to %s is failing: %s; requests are retried and queued (up to %zu "
		     "bytes), sampling goes on",
		     t->log_url, cls, t->cfg.queue_bytes);
	} else if (strcmp(cls, t->outage_class) != 0) {
		tlog(t, PP_TRANSPORT_LOG_WARN, "export to %s is still failing, now: %s (was: %s)",
		     t->log_url, cls, t->outage_class);
		memcpy(t->outage_class, cls, sizeof(cls));
	}
}

static void outage_over(struct pp_transport *t)
{
	if (!t->outage)
		return;
	t->outage = false;
	tlog(t, PP_TRANSPORT_LOG_INFO, "export to %s works again, after %.1f s of failures (%s)",
	     t->log_url, (double)(now_ms(t) - t->outage_since_ms) / 1000.0, t->outage_class);
}

/* Attempts the request in hand and resolves it or schedules its retry; true if resolved. */
static bool run_attempt(struct pp_transport *t, bool final)
{
	int64_t ra, rejected = 0;
	uint64_t now, delay;
	long status;
	enum attempt_class a = attempt(t, &status, &ra);

	if (a == A_OK)
		outage_over(t);
	else if (a != A_SPLIT)
		outage_failure(t, status);
	switch (a) {
	case A_OK:
		if (t->cur->meta.kind == PP_SEND_OTLP)
			rejected = check_partial_success(t);
		finish(t, PP_SEND_DELIVERED, status, rejected);
		return true;
	case A_SPLIT:
		finish(t, PP_SEND_SPLIT, status, 0);
		return true;
	case A_DROP_4XX:
		finish(t, PP_SEND_DROPPED_4XX, status, 0);
		return true;
	case A_DROP_5XX:
		finish(t, PP_SEND_DROPPED_5XX, status, 0);
		return true;
	case A_DROP_OTHER:
		finish(t, PP_SEND_DROPPED_OTHER, status, 0);
		return true;
	case A_RETRY:
		break;
	}
	if (final) {
		tlog(t, PP_TRANSPORT_LOG_WARN,
		     "export to %s: shutting down, request of %zu bytes dropped after %u attempts "
		     "(last: %s)",
		     t->log_url, t->cur->len, t->attempts, t->last_fail);
		finish(t, PP_SEND_DROPPED_SHUTDOWN, status, 0);
		return true;
	}
	delay = pp_transport_backoff_ms(&t->cfg, t->retries, rand_unit(t));
	if (ra > 0 && (uint64_t)ra > delay) /* Retry-After may lengthen the wait only */
		delay = (uint64_t)ra;
	now = now_ms(t);
	if (t->cfg.max_elapsed_ms && now + delay - t->first_ms > t->cfg.max_elapsed_ms) {
		tlog(
		    t, PP_TRANSPORT_LOG_ERROR,
		    "export to %s: giving up on a request of %zu bytes after %u attempts over %llu "
		    "ms (last: %s); check that the endpoint is up and reachable",
		    t->log_url, t->cur->len, t->attempts, (unsigned long long)(now - t->first_ms),
		    t->last_fail);
		finish(t, PP_SEND_GAVE_UP, status, 0);
		return true;
	}
	t->due_ms = now + delay;
	t->retries++;
	pthread_mutex_lock(&t->stats_lock);
	t->st.retried++;
	pthread_mutex_unlock(&t->stats_lock);
	tlog(t, PP_TRANSPORT_LOG_DEBUG, "export to %s: %s, retry %u in %llu ms", t->log_url,
	     t->last_fail, t->retries, (unsigned long long)delay);
	return false;
}

int pp_transport_poll(struct pp_transport *t, uint64_t *next_due_ms)
{
	int resolved = 0;

	if (next_due_ms)
		*next_due_ms = UINT64_MAX;
	if (!t)
		return 0;
	for (;;) {
		if (!t->cur && !take_next(t, &resolved))
			return resolved;
		if (t->due_ms > now_ms(t)) {
			if (next_due_ms)
				*next_due_ms = t->due_ms;
			return resolved;
		}
		if (run_attempt(t, false))
			resolved++;
	}
}

int pp_transport_flush(struct pp_transport *t)
{
	int resolved = 0;

	if (!t)
		return 0;
	for (;;) {
		if (!t->cur && !take_next(t, &resolved))
			return resolved;
		run_attempt(t, true);
		resolved++;
	}
}

int pp_transport_wait(struct pp_transport *t, uint64_t timeout_ms)
{
	if (!t)
		return -EINVAL;
	/* A request waiting out its backoff goes first: new pushes need not wake us. */
	return pp_send_queue_wait(t->q, timeout_ms, t->cur == NULL);
}

void pp_transport_wake(struct pp_transport *t)
{
	if (t)
		pp_send_queue_wake(t->q);
}
