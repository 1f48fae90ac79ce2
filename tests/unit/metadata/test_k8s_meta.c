/*
 * Tests of the pod metadata store: lookups on fixture pod lists (every attribute, service.name
 * rules, pod-UID fallback), snapshots and generations, bounds and the grace period, and the
 * fetch path against a real plain-HTTP server on 127.0.0.1 run by this test: bearer token,
 * token re-read on rotation and on 401, failures that keep the last snapshot, the response
 * bound, the source and URL rules, and refreshes asked by misses (rate-limited, once per id).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "metadata/k8s_meta.h"

#define K8S_DATA PP_TEST_DATA_DIR "/k8s/"
#define ID_CHECKOUT_APP "6dd6cf154425d58c7bdbef93750269e248335fcf325d9236c98151c3e8cfc841"
#define ID_CHECKOUT_INIT "cc29f701a1b01ab6aaca2aab09d076ec326c3ec71450f59dbea9cde10397436a"
#define ID_NODE_EXPORTER "6869e2ddc0775082b343fc685c67b2ad780fd3bea7abcd426775c38547cd99d1"
#define ID_REPORT "1948541e4b6653d2c7828765e41d46c41614bb8c4297688d4f94aca96ba6e04a"
#define ID_COREDNS "c3fb9eb1a0e33249e44aa4f6fa081e7a96b960ea116ffc0f730b5a6178a4904b"
#define ID_UNKNOWN "00000000000000000000000000000000000000000000000000000000000000ff"
#define UID_CHECKOUT "af82255f-05f1-2293-d0b8-3f1e2fc6d124"

static char *fixture(const char *name, size_t *len)
{
	char path[512];

	snprintf(path, sizeof(path), K8S_DATA "%s", name);
	return pp_test_read_file(path, len);
}

/* --- a scripted HTTP/1.1 server on 127.0.0.1, one request per connection --- */

struct server {
	int fd;
	int port;
	pthread_t thread;
	pthread_mutex_t lock;
	int stop;
	/* the answer */
	int status;
	char *body;
	size_t body_len;
	const char *require_token; /* 401 unless "Bearer <this>" came */
	int no_length;		   /* no Content-Length: the body ends at close */
	/* what came */
	int requests;
	char last_auth[256];
	char last_path[512];
};

static void *server_main(void *arg)
{
	struct server *s = arg;

	for (;;) {
		struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
		char req[16384], hdr[256], *p, *auth;
		size_t got = 0;
		int c, status;

		pthread_mutex_lock(&s->lock);
		if (s->stop) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		pthread_mutex_unlock(&s->lock);
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		c = accept(s->fd, NULL, NULL);
		if (c < 0)
			continue;
		while (got < sizeof(req) - 1) {
			ssize_t n = read(c, req + got, sizeof(req) - 1 - got);

			if (n <= 0)
				break;
			got += (size_t)n;
			req[got] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[got] = '\0';
		pthread_mutex_lock(&s->lock);
		s->requests++;
		s->last_auth[0] = '\0';
		auth = strstr(req, "\r\nAuthorization: ");
		if (auth) {
			auth += 17;
			p = strstr(auth, "\r\n");
			snprintf(s->last_auth, sizeof(s->last_auth), "%.*s",
				 (int)(p ? p - auth : 0), auth);
		}
		p = strchr(req, ' ');
		if (p) {
			char *e = strchr(p + 1, ' ');

			snprintf(s->last_path, sizeof(s->last_path), "%.*s",
				 (int)(e ? e - p - 1 : 0), p + 1);
		}
		status = s->status;
		if (s->require_token) {
			char want[256];

			snprintf(want, sizeof(want), "Bearer %s", s->require_token);
			if (strcmp(want, s->last_auth) != 0)
				status = 401;
		}
		if (s->no_length)
			snprintf(hdr, sizeof(hdr),
				 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
				 "Connection: close\r\n\r\n",
				 status);
		else
			snprintf(hdr, sizeof(hdr),
				 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
				 status, status == 200 ? s->body_len : 2);
		if (write(c, hdr, strlen(hdr)) < 0 ||
		    write(c, status == 200 ? s->body : "{}", status == 200 ? s->body_len : 2) < 0)
			fprintf(stderr, "  server: write failed\n");
		pthread_mutex_unlock(&s->lock);
		close(c);
	}
	return NULL;
}

static int server_start(struct server *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	memset(s, 0, sizeof(*s));
	s->status = 200;
	pthread_mutex_init(&s->lock, NULL);
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof(a)) || listen(s->fd, 16) ||
	    getsockname(s->fd, (struct sockaddr *)&a, &al))
		return -1;
	s->port = ntohs(a.sin_port);
	return pthread_create(&s->thread, NULL, server_main, s) ? -1 : 0;
}

static void server_set(struct server *s, int status, const char *fixture_name)
{
	size_t len = 0;
	char *b = fixture_name ? fixture(fixture_name, &len) : NULL;

	pthread_mutex_lock(&s->lock);
	free(s->body);
	s->body = b;
	s->body_len = b ? len : 0;
	s->status = status;
	pthread_mutex_unlock(&s->lock);
}

static void server_stop(struct server *s)
{
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	close(s->fd);
	free(s->body);
	pthread_mutex_destroy(&s->lock);
}

static int server_requests(struct server *s, char *auth, size_t cap)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = s->requests;
	if (auth)
		snprintf(auth, cap, "%s", s->last_auth);
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* A port nothing listens on: bound, then closed. */
static int dead_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &al))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* --- tests --- */

TEST(source_names_and_auto)
{
	struct pp_k8s_meta_opts o = {.source = PP_K8S_AUTO};
	struct pp_k8s_container_meta out;
	struct pp_k8s_meta_stats st;
	enum pp_k8s_source s;
	struct pp_k8s_meta *m;

	CHECK(pp_k8s_source_parse("auto", &s) == 0 && s == PP_K8S_AUTO);
	CHECK(pp_k8s_source_parse("apiserver", &s) == 0 && s == PP_K8S_APISERVER);
	CHECK(pp_k8s_source_parse("kubelet", &s) == 0 && s == PP_K8S_KUBELET);
	CHECK(pp_k8s_source_parse("none", &s) == 0 && s == PP_K8S_NONE);
	CHECK(pp_k8s_source_parse("etcd", &s) == -EINVAL);
	CHECK(pp_k8s_source_parse(NULL, &s) == -EINVAL);
	CHECK_STR(pp_k8s_source_name(PP_K8S_KUBELET), "kubelet");
	CHECK_STR(pp_k8s_state_name(PP_K8S_STATE_FAILING), "failing");

	/* auto outside a cluster: none; nothing fetched, lookups miss, no thread. */
	unsetenv("KUBERNETES_SERVICE_HOST");
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.source == PP_K8S_NONE);
	CHECK(st.state == PP_K8S_STATE_OFF);
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, UID_CHECKOUT, &out) == -ENOENT);
	CHECK(pp_k8s_meta_refresh_now(m) == -ENOENT);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.refresh_requests, 0);
	pp_k8s_meta_free(m);
	pp_k8s_meta_free(NULL);
	CHECK(pp_k8s_meta_lookup(NULL, ID_CHECKOUT_APP, NULL, &out) == -ENOENT);
	CHECK_EQ_U64(pp_k8s_meta_generation(NULL), 0);

	o.source = (enum pp_k8s_source)42;
	errno = 0;
	CHECK(pp_k8s_meta_new(&o) == NULL && errno == EINVAL);
}

TEST(urls_from_environment)
{
	struct pp_k8s_meta_opts o = {.source = PP_K8S_AUTO, .no_thread = 1};
	struct pp_k8s_meta_stats st;
	struct pp_k8s_meta *m;

	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	setenv("NODE_NAME", "worker-1.example.internal", 1);
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.source == PP_K8S_APISERVER);
	CHECK(st.state == PP_K8S_STATE_STARTING);
	CHECK_STR(st.url, "https://[fd00:10:96::1]:6443/api/v1/pods?fieldSelector=spec.nodeName%3D"
			  "worker-1.example.internal&resourceVersion=0");
	pp_k8s_meta_free(m);

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	unsetenv("KUBERNETES_SERVICE_PORT");
	o.node_name = "n 1"; /* the option wins over NODE_NAME, and is escaped */
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_STR(st.url, "https://10.96.0.1:443/api/v1/pods?fieldSelector=spec.nodeName%3D"
			  "n%201&resourceVersion=0");
	pp_k8s_meta_free(m);

	/* No node name: the API server source stays up and says why it cannot fetch. */
	unsetenv("NODE_NAME");
	o.node_name = NULL;
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	CHECK(pp_k8s_meta_refresh_now(m) == -ENODATA);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.state == PP_K8S_STATE_FAILING);
	CHECK(strstr(st.last_error, "NODE_NAME") != NULL);
	pp_k8s_meta_free(m);
	unsetenv("KUBERNETES_SERVICE_HOST");

	/* Kubelet: NODE_IP (IPv6 in brackets), else 127.0.0.1; the option wins. */
	o.source = PP_K8S_KUBELET;
	setenv("NODE_IP", "2001:db8::7", 1);
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_STR(st.url, "https://[2001:db8::7]:10250/pods");
	pp_k8s_meta_free(m);
	unsetenv("NODE_IP");
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_STR(st.url, "https://127.0.0.1:10250/pods");
	pp_k8s_meta_free(m);
	o.kubelet_url = "https://10.0.3.17:10250/";
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_STR(st.url, "https://10.0.3.17:10250/pods");
	pp_k8s_meta_free(m);
}

static struct pp_k8s_meta *loaded(const char *name, const struct pp_k8s_meta_opts *extra)
{
	struct pp_k8s_meta_opts o = {
	    .source = PP_K8S_KUBELET, .kubelet_url = "http://127.0.0.1:1", .no_thread = 1};
	struct pp_k8s_meta *m;
	size_t len = 0;
	char *buf;
	int rc;

	if (extra)
		o = *extra;
	m = pp_k8s_meta_new(&o);
	buf = fixture(name, &len);
	if (!m || !buf) {
		free(buf);
		pp_k8s_meta_free(m);
		return NULL;
	}
	rc = pp_k8s_meta_load_buffer(m, buf, len);
	free(buf);
	if (rc) {
		pp_k8s_meta_free(m);
		return NULL;
	}
	return m;
}

TEST(lookup_every_attribute)
{
	struct pp_k8s_container_meta out;
	struct pp_k8s_meta_stats st;
	struct pp_k8s_meta *m = loaded("podlist_apiserver.json", NULL);

	REQUIRE(m != NULL);
	CHECK_EQ_U64(pp_k8s_meta_generation(m), 1);
	REQUIRE(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == 0);
	CHECK_STR(out.container_id, ID_CHECKOUT_APP);
	CHECK(out.runtime == PP_RUNTIME_CONTAINERD);
	CHECK(out.kind == PP_K8S_CONTAINER);
	CHECK_STR(out.container_name, "app");
	CHECK_STR(out.pod_uid, UID_CHECKOUT);
	CHECK_STR(out.pod_name, "checkout-7d9f8b6c5d-x2k9p");
	CHECK_STR(out.namespace_name, "shop");
	CHECK_STR(out.node_name, "worker-1.example.internal");
	CHECK_STR(out.replicaset_name, "checkout-7d9f8b6c5d");
	CHECK_STR(out.deployment_name, "checkout");
	CHECK_STR(out.daemonset_name, "");
	CHECK_STR(out.statefulset_name, "");
	CHECK_STR(out.job_name, "");
	CHECK_STR(out.cronjob_name, "");
	CHECK_STR(out.service_name, "checkout");
	CHECK(!out.by_pod_uid);

	/* The init container of the same pod; the pod UID passed along changes nothing. */
	REQUIRE(pp_k8s_meta_lookup(m, ID_CHECKOUT_INIT, UID_CHECKOUT, &out) == 0);
	CHECK(out.kind == PP_K8S_CONTAINER_INIT);
	CHECK_STR(out.container_name, "istio-init");
	CHECK_STR(out.service_name, "checkout");

	/* No app.kubernetes.io/name label: service.name is the container name. */
	REQUIRE(pp_k8s_meta_lookup(m, ID_NODE_EXPORTER, NULL, &out) == 0);
	CHECK(out.runtime == PP_RUNTIME_CRIO);
	CHECK_STR(out.daemonset_name, "node-exporter");
	CHECK_STR(out.service_name, "node-exporter");
	REQUIRE(pp_k8s_meta_lookup(m, ID_REPORT, NULL, &out) == 0);
	CHECK_STR(out.job_name, "nightly-report-28934520");
	CHECK_STR(out.cronjob_name, "nightly-report");
	CHECK_STR(out.service_name, "report");

	/* Upper-case hex from a caller is the same id. */
	CHECK(pp_k8s_meta_lookup(m,
				 "6DD6CF154425D58C7BDBEF93750269E248335FCF325D9236C98151C3E8CFC841",
				 NULL, &out) == 0);
	CHECK_STR(out.container_name, "app");

	/* By pod UID alone (a pod-level cgroup): found, and no refresh asked for. */
	REQUIRE(pp_k8s_meta_lookup(m, NULL, UID_CHECKOUT, &out) == 0);
	CHECK(out.by_pod_uid);
	CHECK_STR(out.container_name, "");
	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.refresh_requests, 0);

	/* Unknown container of a known pod: the pod's answer, flagged; a refresh is asked. */
	REQUIRE(pp_k8s_meta_lookup(m, ID_UNKNOWN, UID_CHECKOUT, &out) == 0);
	CHECK(out.by_pod_uid);
	CHECK_STR(out.pod_name, "checkout-7d9f8b6c5d-x2k9p");
	CHECK_STR(out.deployment_name, "checkout");
	CHECK_STR(out.container_name, "");
	CHECK_STR(out.container_id, "");
	CHECK_STR(out.service_name, "checkout");
	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.refresh_requests, 1);

	/* Misses: unknown id and uid, malformed id, nothing given. */
	CHECK(pp_k8s_meta_lookup(m, ID_UNKNOWN, NULL, &out) == -ENOENT);
	CHECK(pp_k8s_meta_lookup(m, ID_UNKNOWN, "11111111-2222-3333-4444-555555555555", &out) ==
	      -ENOENT);
	CHECK(pp_k8s_meta_lookup(m, "6dd6cf15", NULL, &out) == -ENOENT);
	CHECK(pp_k8s_meta_lookup(m, NULL, NULL, &out) == -ENOENT);
	CHECK(pp_k8s_meta_lookup(m, "", "", &out) == -ENOENT);
	CHECK_STR(out.pod_name, "");

	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.pods, 10);
	CHECK_EQ_U64(st.containers, 14);
	CHECK(st.bytes > 0 && st.bytes < 256 * 1024);
	CHECK(st.state == PP_K8S_STATE_OK);
	CHECK_EQ_U64(st.hits, 5);
	pp_k8s_meta_free(m);
}

TEST(snapshots_generation_bounds_and_grace)
{
	struct pp_k8s_meta_opts o = {.source = PP_K8S_KUBELET,
				     .kubelet_url = "http://127.0.0.1:1",
				     .no_thread = 1,
				     .grace_ms = 60000};
	struct pp_k8s_container_meta out;
	struct pp_k8s_meta_stats st;
	struct pp_k8s_meta *m = loaded("podlist_apiserver.json", &o);
	size_t len = 0;
	char *kubelet = fixture("podlist_kubelet.json", &len), *bad;

	REQUIRE(m != NULL && kubelet != NULL);
	/* A new list: its containers resolve, and the old ones stay within the grace period. */
	REQUIRE(pp_k8s_meta_load_buffer(m, kubelet, len) == 0);
	CHECK_EQ_U64(pp_k8s_meta_generation(m), 2);
	CHECK(pp_k8s_meta_lookup(m, ID_COREDNS, NULL, &out) == 0);
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == 0);
	CHECK_STR(out.deployment_name, "checkout");
	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.kept_containers, 14);
	CHECK_EQ_U64(st.containers, 16);

	/* A malformed list changes nothing. */
	bad = strndup(kubelet, len / 2);
	REQUIRE(bad != NULL);
	CHECK(pp_k8s_meta_load_buffer(m, bad, strlen(bad)) == -EPROTO);
	free(bad);
	CHECK_EQ_U64(pp_k8s_meta_generation(m), 2);
	CHECK(pp_k8s_meta_lookup(m, ID_COREDNS, NULL, &out) == 0);
	pp_k8s_meta_free(m);

	/* Grace over: gone after the next list. */
	o.grace_ms = 1;
	m = loaded("podlist_apiserver.json", &o);
	REQUIRE(m != NULL);
	sleep_ms(5);
	REQUIRE(pp_k8s_meta_load_buffer(m, kubelet, len) == 0);
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == -ENOENT);
	CHECK(pp_k8s_meta_lookup(m, ID_COREDNS, NULL, &out) == 0);
	pp_k8s_meta_free(m);

	/* Bounds: 3 pods, 5 containers; what does not fit is counted; carried-over entries are
	 * evicted before listed ones. */
	o.grace_ms = 60000;
	o.max_pods = 3;
	o.max_containers = 5;
	m = loaded("podlist_apiserver.json", &o);
	REQUIRE(m != NULL);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.pods, 3);
	CHECK(st.containers <= 5);
	CHECK_EQ_U64(st.evicted_pods, 7);
	CHECK_EQ_U64(st.containers + st.evicted_containers, 14);
	REQUIRE(pp_k8s_meta_load_buffer(m, kubelet, len) == 0);
	CHECK(pp_k8s_meta_lookup(m, ID_COREDNS, NULL, &out) == 0);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.pods <= 3 && st.containers <= 5);
	CHECK(st.kept_containers >= 1);
	pp_k8s_meta_free(m);
	free(kubelet);
}

TEST(fetch_token_and_failures)
{
	char tok_path[] = "/tmp/pp-k8s-token.XXXXXX", url[64], auth[256];
	struct pp_k8s_meta_opts o = {.source = PP_K8S_APISERVER,
				     .node_name = "worker-1.example.internal",
				     .ca_path = "/nonexistent/ca.crt",
				     .timeout_ms = 3000,
				     .token_ttl_ms = 600000,
				     .no_thread = 1};
	struct pp_k8s_container_meta out;
	struct pp_k8s_meta_stats st;
	struct pp_k8s_meta *m;
	struct server srv;
	int fd, n0;

	fd = mkstemp(tok_path);
	REQUIRE(fd >= 0);
	close(fd);
	write_file(tok_path, "tok-1\n");
	REQUIRE(server_start(&srv) == 0);
	server_set(&srv, 200, "podlist_apiserver.json");
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	o.api_url = url;
	o.token_path = tok_path;
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);

	/* Lookups before the first list miss; nothing blocks. */
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == -ENOENT);
	CHECK(pp_k8s_meta_refresh_now(m) == 0);
	CHECK(server_requests(&srv, auth, sizeof(auth)) == 1);
	CHECK_STR(auth, "Bearer tok-1");
	CHECK_STR(srv.last_path, "/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-1.example."
				 "internal&resourceVersion=0");
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == 0);
	CHECK_STR(out.pod_name, "checkout-7d9f8b6c5d-x2k9p");

	/* The token rotates; the server starts refusing the old one: re-read on 401, retry. */
	write_file(tok_path, "tok-2");
	pthread_mutex_lock(&srv.lock);
	srv.require_token = "tok-2";
	pthread_mutex_unlock(&srv.lock);
	n0 = server_requests(&srv, NULL, 0);
	CHECK(pp_k8s_meta_refresh_now(m) == 0);
	CHECK(server_requests(&srv, auth, sizeof(auth)) == n0 + 2);
	CHECK_STR(auth, "Bearer tok-2");
	CHECK_EQ_U64(pp_k8s_meta_generation(m), 2);

	/* 401 with no new token: failing, the last snapshot stays. */
	pthread_mutex_lock(&srv.lock);
	srv.require_token = "tok-3";
	pthread_mutex_unlock(&srv.lock);
	CHECK(pp_k8s_meta_refresh_now(m) == -EACCES);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.state == PP_K8S_STATE_FAILING);
	CHECK(strstr(st.last_error, "401") != NULL);
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == 0);
	CHECK_EQ_U64(pp_k8s_meta_generation(m), 2);

	/* Other failures, each keeping the snapshot. */
	pthread_mutex_lock(&srv.lock);
	srv.require_token = NULL;
	pthread_mutex_unlock(&srv.lock);
	server_set(&srv, 500, "podlist_apiserver.json");
	CHECK(pp_k8s_meta_refresh_now(m) == -EIO);
	server_set(&srv, 200, "malformed_truncated.json");
	CHECK(pp_k8s_meta_refresh_now(m) == -EPROTO);
	server_set(&srv, 200, "status_401.json");
	CHECK(pp_k8s_meta_refresh_now(m) == -EPROTO);
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == 0);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(strstr(st.last_error, "PodList") != NULL);
	CHECK_EQ_U64(st.fetch_ok, 2);
	CHECK_EQ_U64(st.fetch_fail, 4);

	/* Recovery with a token re-read on its period (ttl 1 ms now). */
	pp_k8s_meta_free(m);
	o.token_ttl_ms = 1;
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	server_set(&srv, 200, "podlist_kubelet.json");
	CHECK(pp_k8s_meta_refresh_now(m) == 0);
	write_file(tok_path, "tok-4\n");
	sleep_ms(3);
	CHECK(pp_k8s_meta_refresh_now(m) == 0);
	server_requests(&srv, auth, sizeof(auth));
	CHECK_STR(auth, "Bearer tok-4");
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.state == PP_K8S_STATE_OK);
	CHECK(st.token_reads >= 2);
	pp_k8s_meta_free(m);

	/* The response bound. */
	o.max_response_bytes = 1000;
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	CHECK(pp_k8s_meta_refresh_now(m) == -EFBIG);
	/* Without a Content-Length the bound is enforced while the body streams in. */
	pthread_mutex_lock(&srv.lock);
	srv.no_length = 1;
	pthread_mutex_unlock(&srv.lock);
	CHECK(pp_k8s_meta_refresh_now(m) == -EFBIG);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(strstr(st.last_error, "larger than 1000") != NULL);
	pp_k8s_meta_free(m);
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	CHECK(pp_k8s_meta_refresh_now(m) == -EFBIG);
	pp_k8s_meta_free(m);
	o.max_response_bytes = 0;
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	CHECK(pp_k8s_meta_refresh_now(m) == 0); /* and without the bound it is read whole */
	pp_k8s_meta_free(m);
	pthread_mutex_lock(&srv.lock);
	srv.no_length = 0;
	pthread_mutex_unlock(&srv.lock);
	o.max_response_bytes = 0;

	/* Server down: a transport error, fast, nothing crashes. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", dead_port());
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	CHECK(pp_k8s_meta_refresh_now(m) == -EHOSTUNREACH);
	CHECK(pp_k8s_meta_lookup(m, ID_COREDNS, NULL, &out) == -ENOENT);
	pp_k8s_meta_get_stats(m, &st);
	CHECK(st.state == PP_K8S_STATE_FAILING);
	CHECK(st.last_error[0] != '\0');
	pp_k8s_meta_free(m);

	server_stop(&srv);
	unlink(tok_path);
}

static int wait_generation(struct pp_k8s_meta *m, uint64_t above, long ms)
{
	for (long t = 0; t < ms; t += 10) {
		if (pp_k8s_meta_generation(m) > above)
			return 1;
		sleep_ms(10);
	}
	return 0;
}

TEST(thread_refreshes_on_miss)
{
	struct pp_k8s_meta_opts o = {.source = PP_K8S_KUBELET,
				     .token_path = "",
				     .refresh_ms = 600000,
				     .miss_refresh_ms = 100,
				     .timeout_ms = 3000};
	struct pp_k8s_container_meta out;
	struct pp_k8s_meta_stats st;
	struct pp_k8s_meta *m;
	struct server srv;
	char url[64], auth[256];
	uint64_t gen, req;

	REQUIRE(server_start(&srv) == 0);
	server_set(&srv, 200, "podlist_kubelet.json");
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", srv.port);
	o.kubelet_url = url;
	m = pp_k8s_meta_new(&o);
	REQUIRE(m != NULL);
	/* The first list comes at once, not after the (10 min) period. */
	REQUIRE(wait_generation(m, 0, 5000));
	CHECK_STR(srv.last_path, "/pods");
	server_requests(&srv, auth, sizeof(auth));
	CHECK_STR(auth, ""); /* no token configured: none sent */
	CHECK(pp_k8s_meta_lookup(m, ID_COREDNS, NULL, &out) == 0);

	/* A new pod starts: its first sample misses and brings a refresh. */
	server_set(&srv, 200, "podlist_apiserver.json");
	gen = pp_k8s_meta_generation(m);
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == -ENOENT);
	REQUIRE(wait_generation(m, gen, 5000));
	CHECK(pp_k8s_meta_lookup(m, ID_CHECKOUT_APP, NULL, &out) == 0);
	CHECK_STR(out.service_name, "checkout");

	/* An id no list has (a container outside Kubernetes): one refresh, then no more. */
	gen = pp_k8s_meta_generation(m);
	CHECK(pp_k8s_meta_lookup(m, ID_UNKNOWN, NULL, &out) == -ENOENT);
	REQUIRE(wait_generation(m, gen, 5000));
	pp_k8s_meta_get_stats(m, &st);
	req = st.refresh_requests;
	for (int i = 0; i < 20; i++)
		CHECK(pp_k8s_meta_lookup(m, ID_UNKNOWN, NULL, &out) == -ENOENT);
	sleep_ms(300);
	pp_k8s_meta_get_stats(m, &st);
	CHECK_EQ_U64(st.refresh_requests, req);
	CHECK_EQ_U64(st.generation, gen + 1);
	pp_k8s_meta_free(m);
	server_stop(&srv);
}

TEST_LIST = {
    {"source_names_and_auto", source_names_and_auto},
    {"urls_from_environment", urls_from_environment},
    {"lookup_every_attribute", lookup_every_attribute},
    {"snapshots_generation_bounds_and_grace", snapshots_generation_bounds_and_grace},
    {"fetch_token_and_failures", fetch_token_and_failures},
    {"thread_refreshes_on_miss", thread_refreshes_on_miss},
};
TEST_MAIN()
