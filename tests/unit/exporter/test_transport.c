/*
 * Tests of the HTTP transport against a real HTTP/1.1 server on 127.0.0.1
 * (tests/tools/pp_http_sink.py) that fails on purpose: which requests arrive (none lost
 * where the rules say retry, none twice), their headers and bodies, the backoff times read
 * from an injected clock, Retry-After, drops, 413 split, transport failures, partial
 * success, queue overflow, Pyroscope ingest; plus the header and endpoint parsers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/transport.h>

#include "check.h"

#define PYTHON "/usr/bin/python3"
#define SINK_PY PP_TEST_DATA_DIR "/../tools/pp_http_sink.py"
#define UA "pebsprof/" PP_VERSION

/* ---- the sink process ---- */

struct sink {
	pid_t pid;
	int port;
	char dir[64];
};

static int sink_start(struct sink *s, const char *script)
{
	char line[64];
	int pfd[2];
	size_t n = 0;

	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/pp_sink_XXXXXX");
	if (!mkdtemp(s->dir) || pipe(pfd))
		return -1;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		/* the sink dies with the test, even when a REQUIRE left it running */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(PYTHON, PYTHON, SINK_PY, "--port", "0", "--dir", s->dir, "--script", script,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	/* "PORT n\n", within 30 s: CI runs this beside the kernel matrix's guests, where an
	 * interpreter's start was seen to take over 10 */
	while (n < sizeof(line) - 1) {
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 30000) <= 0)
			break;
		r = read(pfd[0], line + n, 1);
		if (r <= 0)
			break;
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	close(pfd[0]);
	if (sscanf(line, "PORT %d", &s->port) != 1 || s->port <= 0) {
		fprintf(stderr, "  sink did not start (got \"%s\")\n", line);
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
		return -1;
	}
	return 0;
}

static void sink_stop(struct sink *s)
{
	DIR *d;
	struct dirent *de;
	char path[512];

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
	d = opendir(s->dir);
	if (d) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.') {
				snprintf(path, sizeof(path), "%s/%s", s->dir, de->d_name);
				unlink(path);
			}
		closedir(d);
		rmdir(s->dir);
	}
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 4097 > cap) {
			char *nb = realloc(buf, cap = cap * 2 + 8192);

			if (!nb)
				break;
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);

		if (!r)
			break;
		n += r;
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

/* Requests the sink has recorded (req-0000 ... consecutive). */
static int sink_count(const struct sink *s)
{
	char path[512];
	int n = 0;

	for (;; n++) {
		snprintf(path, sizeof(path), "%s/req-%04d.hdr", s->dir, n);
		if (access(path, F_OK))
			return n;
	}
}

/* The header file of request n (first line "METHOD PATH"). */
static char *sink_hdr(const struct sink *s, int n)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/req-%04d.hdr", s->dir, n);
	return slurp(path, NULL);
}

static char *sink_body(const struct sink *s, int n, size_t *len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/req-%04d.body", s->dir, n);
	return slurp(path, len);
}

/* Value of header name in request n (exact-case match of the line start), malloc'ed. */
static char *sink_header(const struct sink *s, int n, const char *name)
{
	char *h = sink_hdr(s, n), *line, *save = NULL, *out = NULL;
	size_t nl = strlen(name);

	if (!h)
		return NULL;
	for (line = strtok_r(h, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncasecmp(line, name, nl) && line[nl] == ':') {
			out = strdup(line + nl + 2);
			break;
		}
	free(h);
	return out;
}

static char *sink_reqline(const struct sink *s, int n)
{
	char *h = sink_hdr(s, n), *nl;

	if (h && (nl = strchr(h, '\n')))
		*nl = '\0';
	return h;
}

static int header_count(const struct sink *s, int n, const char *name)
{
	char *h = sink_hdr(s, n), *line, *save = NULL;
	size_t nl = strlen(name);
	int c = 0;

	if (!h)
		return -1;
	for (line = strtok_r(h, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		c += !strncasecmp(line, name, nl) && line[nl] == ':';
	free(h);
	return c;
}

/* ---- the transport under test ---- */

static uint64_t fake_now;

static uint64_t fake_clock(void *ctx)
{
	(void)ctx;
	return fake_now;
}

#define MAX_RESULTS 32

struct capture {
	char log[8192];
	size_t loglen;
	struct pp_send_result res[MAX_RESULTS];
	int nres;
};

static void cap_log(void *ctx, enum pp_transport_log_level lvl, const char *msg)
{
	struct capture *c = ctx;
	int n =
	    snprintf(c->log + c->loglen, sizeof(c->log) - c->loglen, "[%d] %s\n", (int)lvl, msg);

	if (n > 0 && c->loglen + (size_t)n < sizeof(c->log))
		c->loglen += (size_t)n;
}

static void cap_result(void *ctx, const struct pp_send_result *r)
{
	struct capture *c = ctx;

	if (c->nres < MAX_RESULTS)
		c->res[c->nres++] = *r;
}

static void base_cfg(struct pp_transport_config *cfg, const char *url, struct capture *cap)
{
	pp_transport_config_init(cfg);
	cfg->endpoint = url;
	cfg->user_agent = UA;
	cfg->headers = "X-Scope-OrgID=tenant%201 , Authorization=Basic%20YWxhZGRpbjpvcGVu";
	cfg->timeout_ms = 3000;
	cfg->backoff_initial_ms = 100;
	cfg->backoff_max_ms = 1000;
	cfg->max_elapsed_ms = 60000;
	cfg->jitter = 0;
	cfg->clock_ms = fake_clock;
	cfg->log = cap_log;
	cfg->log_ctx = cap;
	cfg->on_result = cap_result;
	cfg->result_ctx = cap;
	memset(cap, 0, sizeof(*cap));
	fake_now = 1000000;
}

/* A deterministic body of len bytes unique to seed. */
static uint8_t *payload(size_t len, unsigned seed)
{
	uint8_t *b = malloc(len);
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; b && i < len; i++) {
		x = x * 1103515245u + 12345u;
		/* half text-like so gzip has something to do */
		b[i] = i % 2 ? (uint8_t)('a' + seed % 26) : (uint8_t)(x >> 24);
	}
	return b;
}

static int push(struct pp_transport *t, size_t len, unsigned seed)
{
	struct pp_send_meta m = {.kind = PP_SEND_OTLP, .tag = seed};

	return pp_transport_push(t, payload(len, seed), len, &m);
}

/* Whether request n's body is exactly payload(len, seed). */
static bool body_is(const struct sink *s, int n, size_t len, unsigned seed)
{
	size_t got = 0;
	char *b = sink_body(s, n, &got);
	uint8_t *want = payload(len, seed);
	bool ok = b && want && got == len && memcmp(b, want, len) == 0;

	free(b);
	free(want);
	return ok;
}

static bool have_python(void)
{
	return access(PYTHON, X_OK) == 0;
}

#define START_SINK(s, script)                                                                      \
	do {                                                                                       \
		if (!have_python())                                                                \
			SKIP(PYTHON " is missing: no HTTP sink to test against");                  \
		REQUIRE(sink_start(s, script) == 0);                                               \
	} while (0)

static char *sink_url(const struct sink *s, const char *suffix)
{
	static char url[128];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", s->port, suffix);
	return url;
}

/* ---- parsers and arithmetic ---- */

TEST(headers_parse_ok)
{
	struct pp_http_header *h = NULL;
	uint32_t n = 9;
	char err[256];
	const char *in = " X-Scope-OrgID = tenant%201,,Authorization=Basic%20abc%3D%3D,"
			 "x-scope-orgid=t2 ,Empty=,k%2Dx=%E2%82%AC,";

	CHECK_EQ_U64(pp_otlp_parse_headers(in, strlen(in), &h, &n, err, sizeof(err)), 0);
	REQUIRE(h);
	REQUIRE(n == 4);
	CHECK_STR(h[0].name, "X-Scope-OrgID");
	CHECK_STR(h[0].value, "t2"); /* the last of a repeated (case-insensitive) name */
	CHECK_STR(h[1].name, "Authorization");
	CHECK_STR(h[1].value, "Basic abc==");
	CHECK_STR(h[2].name, "Empty");
	CHECK_STR(h[2].value, "");
	CHECK_STR(h[3].name, "k-x");
	CHECK_STR(h[3].value, "\xE2\x82\xAC");
	CHECK_STR(err, "");
	pp_otlp_free_headers(h);

	CHECK_EQ_U64(pp_otlp_parse_headers("", 0, &h, &n, err, sizeof(err)), 0);
	CHECK(h == NULL && n == 0);
	CHECK_EQ_U64(pp_otlp_parse_headers(" , ,", 4, &h, &n, err, sizeof(err)), 0);
	CHECK(h == NULL && n == 0);
	/* only len bytes are read */
	CHECK_EQ_U64(pp_otlp_parse_headers("a=1,b=2", 3, &h, &n, NULL, 0), 0);
	REQUIRE(h && n == 1);
	CHECK_STR(h[0].value, "1");
	pp_otlp_free_headers(h);
	pp_otlp_free_headers(NULL);
}

static void expect_header_error(const char *in, int want, const char *msg_part,
				const char *must_not_contain)
{
	struct pp_http_header *h = (void *)1;
	uint32_t n = 9;
	char err[256] = "x";
	int ret = pp_otlp_parse_headers(in, strlen(in), &h, &n, err, sizeof(err));

	if (ret != want || h != NULL || n != 0 || !strstr(err, msg_part) ||
	    (must_not_contain && strstr(err, must_not_contain))) {
		fprintf(stderr, "  input \"%s\": ret %d, err \"%s\" (want %d, \"%s\")\n", in, ret,
			err, want, msg_part);
		pp_test_failed_checks++;
	}
}

TEST(headers_parse_errors)
{
	char many[64 * 8 + 16];
	size_t o = 0;

	expect_header_error("a=1,Authorization Bearer secret", -EINVAL,
			    "pair 2 (\"Authorization Be...\"): no '='", "secret");
	expect_header_error("a=1,=v", -EINVAL, "pair 2 (key \"\"): the key is empty", NULL);
	expect_header_error("Bad Name=v", -EINVAL, "pair 1 (key \"Bad Name\"): the key is not",
			    NULL);
	expect_header_error("X-A=ok%0d%0aInjected: yes", -EINVAL,
			    "pair 1 (key \"X-A\"): the value holds a control", "Injected");
	expect_header_error("X-A=a%00b", -EINVAL, "control character", NULL);
	expect_header_error("X-A=%zz", -EINVAL, "pair 1 (key \"X-A\"): '%' is not followed", NULL);
	expect_header_error("X-A=%4", -EINVAL, "'%' is not followed", NULL);
	expect_header_error("x=1,content-type=text/plain", -EINVAL,
			    "pair 2 (key \"content-type\"): this header is set by the exporter",
			    NULL);
	expect_header_error("Host=evil", -EINVAL, "set by the exporter", NULL);
	for (int i = 0; i < 65; i++)
		o += (size_t)snprintf(many + o, sizeof(many) - o, "h%d=v,", i);
	expect_header_error(many, -E2BIG, "pair 65 (key \"h64\"): more than 64 headers", NULL);
}

TEST(endpoint_check)
{
	char err[512];

	CHECK_EQ_U64(pp_transport_check_endpoint("http://localhost:4318", false, err, sizeof(err)),
		     0);
	CHECK_EQ_U64(
	    pp_transport_check_endpoint("https://pyro.example:4040/base/", false, err, sizeof(err)),
	    0);
	CHECK_EQ_U64(pp_transport_check_endpoint("http://[::1]:4318", false, err, sizeof(err)), 0);
	CHECK_EQ_U64(pp_transport_check_endpoint("http://h:4318/v1development/profiles?x=1", true,
						 err, sizeof(err)),
		     0);

	CHECK(pp_transport_check_endpoint("localhost:4318", false, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "has no scheme") != NULL);
	CHECK(pp_transport_check_endpoint("ftp://h/", false, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "scheme \"ftp\" is not http or https") != NULL);
	CHECK(pp_transport_check_endpoint("http://", false, err, sizeof(err)) == -EINVAL);
	CHECK(err[0] != '\0');
	CHECK(pp_transport_check_endpoint("http:///path", false, err, sizeof(err)) == -EINVAL);
	CHECK(err[0] != '\0');
	CHECK(pp_transport_check_endpoint("http://ho st:1/", false, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not a valid URL") != NULL);
	CHECK(pp_transport_check_endpoint("http://h:99999/", false, err, sizeof(err)) == -EINVAL);
	CHECK(pp_transport_check_endpoint("http://h/#frag", false, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "fragment") != NULL);
	CHECK(pp_transport_check_endpoint("http://h/?q=1", false, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "query") != NULL);
	CHECK(pp_transport_check_endpoint("", false, err, sizeof(err)) == -EINVAL);
	CHECK(pp_transport_check_endpoint(NULL, false, err, sizeof(err)) == -EINVAL);
}

TEST(config_errors)
{
	struct pp_transport_config cfg;
	struct capture cap;
	char err[256];

	base_cfg(&cfg, "gopher://h:70", &cap);
	errno = 0;
	CHECK(pp_transport_new(&cfg, err, sizeof(err)) == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	CHECK(strstr(err, "gopher") != NULL);

	base_cfg(&cfg, "http://127.0.0.1:1", &cap);
	cfg.headers = "X-Ok=1,bad";
	CHECK(pp_transport_new(&cfg, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "OTEL_EXPORTER_OTLP_HEADERS pair 2") != NULL);

	base_cfg(&cfg, "http://127.0.0.1:1", &cap);
	cfg.jitter = 1.5;
	CHECK(pp_transport_new(&cfg, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "jitter") != NULL);

	base_cfg(&cfg, "http://127.0.0.1:1", &cap);
	cfg.backoff_max_ms = 10;
	CHECK(pp_transport_new(&cfg, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "max interval") != NULL);

	base_cfg(&cfg, "http://127.0.0.1:1", &cap);
	cfg.protocol = PP_TRANSPORT_PYROSCOPE_INGEST;
	CHECK(pp_transport_new(&cfg, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "application name") != NULL);
	pp_transport_free(NULL);
}

TEST(backoff_and_retry_after_math)
{
	struct pp_transport_config cfg;

	pp_transport_config_init(&cfg);
	/* defaults: 5 s, x1.5, 30 s cap, +-50 % */
	CHECK_EQ_U64(cfg.backoff_initial_ms, 5000);
	CHECK_EQ_U64(cfg.backoff_max_ms, 30000);
	CHECK_EQ_U64(cfg.max_elapsed_ms, 300000);
	CHECK_EQ_U64(cfg.timeout_ms, 10000);
	CHECK_EQ_U64(cfg.queue_bytes, 64u << 20);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 0, 0.5), 5000);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 1, 0.5), 7500);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 2, 0.5), 11250);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 5, 0.5), 30000); /* 37969 capped */
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 1000, 0.5), 30000);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 0, 0.0), 2500);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 5, 0.0), 15000);
	CHECK_EQ_U64(pp_transport_backoff_ms(&cfg, 5, 0.999999), 45000);

	CHECK_EQ_U64(pp_transport_parse_retry_after("7", 0), 7000);
	CHECK_EQ_U64(pp_transport_parse_retry_after(" 0 ", 0), 0);
	CHECK(pp_transport_parse_retry_after("-3", 0) == -1);
	CHECK(pp_transport_parse_retry_after("soon", 0) == -1);
	CHECK(pp_transport_parse_retry_after("", 0) == -1);
	CHECK(pp_transport_parse_retry_after("12abc", 0) == -1);
	/* Sun, 06 Nov 1994 08:49:37 GMT = 784111777 */
	CHECK_EQ_U64(pp_transport_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111770),
		     7000);
	CHECK_EQ_U64(pp_transport_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111800), 0);
}

TEST(split_helper)
{
	size_t a = 0, b = 0;

	CHECK_EQ_U64(pp_send_split(2, &a, &b), 0);
	CHECK(a == 1 && b == 1);
	CHECK_EQ_U64(pp_send_split(7, &a, &b), 0);
	CHECK(a == 3 && b == 4);
	CHECK(pp_send_split(1, &a, &b) == -E2BIG);
	CHECK(pp_send_split(0, &a, &b) == -E2BIG);
}

/* ---- against the sink ---- */

TEST(delivers_with_headers_and_reuses_connection)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;
	char err[256], *v, *peer0, *peer1;

	START_SINK(&s, "[]");
	base_cfg(&cfg, sink_url(&s, "/"), &cap);
	t = pp_transport_new(&cfg, err, sizeof(err));
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 5000, 1), 0);
	CHECK_EQ_U64(push(t, 70000, 2), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 2);
	CHECK(next == UINT64_MAX);
	CHECK_EQ_U64(sink_count(&s), 2);
	for (int i = 0; i < 2; i++) {
		v = sink_reqline(&s, i);
		CHECK_STR(v, "POST /v1development/profiles");
		free(v);
		v = sink_header(&s, i, "Content-Type");
		CHECK_STR(v, "application/x-protobuf");
		free(v);
		CHECK_EQ_U64(header_count(&s, i, "Content-Type"), 1);
		v = sink_header(&s, i, "Content-Encoding");
		CHECK_STR(v, "gzip");
		free(v);
		v = sink_header(&s, i, "User-Agent");
		CHECK_STR(v, UA);
		free(v);
		v = sink_header(&s, i, "X-Scope-OrgID");
		CHECK_STR(v, "tenant 1");
		free(v);
		v = sink_header(&s, i, "Authorization");
		CHECK_STR(v, "Basic YWxhZGRpbjpvcGVu");
		free(v);
		CHECK_EQ_U64(header_count(&s, i, "Expect"), 0);
	}
	CHECK(body_is(&s, 0, 5000, 1));
	CHECK(body_is(&s, 1, 70000, 2));
	/* one kept-alive connection for both */
	peer0 = sink_header(&s, 0, "X-Sink-Peer");
	peer1 = sink_header(&s, 1, "X-Sink-Peer");
	CHECK_STR(peer0, peer1);
	free(peer0);
	free(peer1);

	REQUIRE(cap.nres == 2);
	CHECK(cap.res[0].tag == 1 && cap.res[0].outcome == PP_SEND_DELIVERED);
	CHECK(cap.res[1].tag == 2 && cap.res[1].outcome == PP_SEND_DELIVERED);
	CHECK_EQ_U64(cap.res[0].attempts, 1);
	CHECK_EQ_U64(cap.res[0].http_status, 200);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.sent, 2);
	CHECK_EQ_U64(st.attempts, 2);
	CHECK_EQ_U64(st.sent_raw_bytes, 75000);
	CHECK(st.sent_bytes > 0 && st.sent_bytes < 75000); /* compressed */
	CHECK_EQ_U64(st.retried, 0);
	CHECK_EQ_U64(st.queue.items, 0);
	/* nothing left: another poll sends nothing */
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(sink_count(&s), 2);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(retries_503_three_times_then_delivers_once)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0, t0;
	const uint64_t want_delay[3] = {100, 150, 225}; /* 100 ms x1.5, no jitter */

	START_SINK(&s, "[{\"status\":503,\"body\":\"busy\"},{\"status\":503},{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 3000, 11), 0);
	CHECK_EQ_U64(push(t, 2000, 12), 0);
	t0 = fake_now;
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
		CHECK_EQ_U64(sink_count(&s), i + 1);
		CHECK_EQ_U64(next, fake_now + want_delay[i]);
		/* not due yet: polling again sends nothing */
		fake_now = next - 1;
		CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
		CHECK_EQ_U64(sink_count(&s), i + 1);
		fake_now = next;
	}
	CHECK_EQ_U64(fake_now - t0, 475);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 2);
	CHECK(next == UINT64_MAX);
	/* 11 four times (3 failures, 1 success), then 12 once: none lost, none twice */
	REQUIRE(sink_count(&s) == 5);
	for (int i = 0; i < 4; i++)
		CHECK(body_is(&s, i, 3000, 11));
	CHECK(body_is(&s, 4, 2000, 12));
	REQUIRE(cap.nres == 2);
	CHECK(cap.res[0].tag == 11 && cap.res[0].outcome == PP_SEND_DELIVERED);
	CHECK_EQ_U64(cap.res[0].attempts, 4);
	CHECK(cap.res[1].tag == 12 && cap.res[1].attempts == 1);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.sent, 2);
	CHECK_EQ_U64(st.retried, 3);
	CHECK_EQ_U64(st.attempts, 5);
	CHECK_EQ_U64(st.dropped_5xx + st.dropped_give_up, 0);
	pp_transport_free(t);
	sink_stop(&s);
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* An outage is said when its first attempt fails, once per change of reason, once when over. */
TEST(outage_said_at_start_on_change_and_at_end)
{
	struct pp_transport_config cfg;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":503},{\"status\":503},{\"status\":429},{\"status\":429},"
		       "{\"status\":200},{\"status\":503},{\"status\":200}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	/* said at the first failed attempt, long before the request would be given up */
	CHECK_EQ_U64(count_of(cap.log, "is failing: HTTP 503"), 1);
	for (int i = 0; i < 4; i++) {
		fake_now = next;
		pp_transport_poll(t, &next);
	}
	CHECK_EQ_U64(sink_count(&s), 5);
	CHECK_EQ_U64(count_of(cap.log, "is failing: HTTP 503"), 1);
	CHECK_EQ_U64(count_of(cap.log, "is still failing, now: HTTP 429 (was: HTTP 503)"), 1);
	CHECK_EQ_U64(count_of(cap.log, "works again"), 1);
	CHECK(strstr(cap.log, "works again, after ") != NULL);
	/* a second outage is a new one */
	CHECK_EQ_U64(push(t, 100, 2), 0);
	pp_transport_poll(t, &next);
	fake_now = next;
	pp_transport_poll(t, &next);
	CHECK_EQ_U64(count_of(cap.log, "is failing: HTTP 503"), 2);
	CHECK_EQ_U64(count_of(cap.log, "works again"), 2);
	CHECK_EQ_U64(count_of(cap.log, "failing"), 3); /* two starts, one change */
	pp_transport_free(t);
	sink_stop(&s);
}

/* The age of the oldest request not yet resolved, for the agent's health rule. */
TEST(oldest_queued_age)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":503},{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.oldest_queued_age_ms, 0);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	fake_now += 40;
	CHECK_EQ_U64(push(t, 100, 2), 0);
	fake_now += 10;
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.oldest_queued_age_ms, 50); /* request 1, queued */
	pp_transport_poll(t, &next);		   /* 1 in hand, waiting for its retry */
	fake_now = next;
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.oldest_queued_age_ms, 50 + 100);
	pp_transport_poll(t, &next); /* 503 again */
	fake_now = next;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 2); /* both delivered */
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.oldest_queued_age_ms, 0);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(jittered_delays_stay_in_bounds)
{
	struct pp_transport_config cfg;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0, d[3];

	START_SINK(&s, "[{\"status\":502},{\"status\":504},{\"status\":429}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.jitter = 0.5;
	cfg.seed = 12345;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
		d[i] = next - fake_now;
		fake_now = next;
	}
	CHECK(d[0] >= 50 && d[0] <= 150);
	CHECK(d[1] >= 75 && d[1] <= 225);
	CHECK(d[2] >= 112 && d[2] <= 338);
	CHECK(!(d[0] == 100 && d[1] == 150 && d[2] == 225)); /* jitter did something */
	CHECK_EQ_U64(pp_transport_poll(t, &next), 1);
	CHECK_EQ_U64(sink_count(&s), 4);
	REQUIRE(cap.nres == 1);
	CHECK(cap.res[0].outcome == PP_SEND_DELIVERED);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(retry_after_seconds_and_date_honoured)
{
	struct pp_transport_config cfg;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":429,\"headers\":{\"Retry-After\":\"7\"}},"
		       "{\"status\":503,\"retry_after_date_in\":5},"
		       "{\"status\":503,\"headers\":{\"Retry-After\":\"0\"}}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(next - fake_now, 7000); /* max(100 ms backoff, 7 s) */
	fake_now = next;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	/* an HTTP-date 5 s ahead (whole seconds, so 4-6 s) beats the 150 ms backoff */
	CHECK(next - fake_now >= 3900 && next - fake_now <= 6000);
	fake_now = next;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(next - fake_now, 225); /* Retry-After 0 never shortens the backoff */
	fake_now = next;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 1);
	CHECK_EQ_U64(sink_count(&s), 4);
	REQUIRE(cap.nres == 1);
	CHECK_EQ_U64(cap.res[0].attempts, 4);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(non_retryable_statuses_dropped_and_counted)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":400,\"body\":\"bad sample values\"},{\"status\":404},"
		       "{\"status\":500,\"body\":\"internal\"},{\"status\":401},{\"status\":200}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	for (unsigned i = 1; i <= 5; i++)
		CHECK_EQ_U64(push(t, 100 * i, i), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 5);
	CHECK(next == UINT64_MAX);
	/* each sent once, in order: nothing retried */
	REQUIRE(sink_count(&s) == 5);
	for (int i = 0; i < 5; i++)
		CHECK(body_is(&s, i, 100 * (size_t)(i + 1), (unsigned)i + 1));
	REQUIRE(cap.nres == 5);
	CHECK(cap.res[0].outcome == PP_SEND_DROPPED_4XX && cap.res[0].http_status == 400);
	CHECK(cap.res[1].outcome == PP_SEND_DROPPED_4XX && cap.res[1].http_status == 404);
	CHECK(cap.res[2].outcome == PP_SEND_DROPPED_5XX && cap.res[2].http_status == 500);
	CHECK(cap.res[3].outcome == PP_SEND_DROPPED_4XX);
	CHECK(cap.res[4].outcome == PP_SEND_DELIVERED);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.dropped_4xx, 3);
	CHECK_EQ_U64(st.dropped_5xx, 1);
	CHECK_EQ_U64(st.dropped_bytes, 100 + 200 + 300 + 400);
	CHECK_EQ_U64(st.sent, 1);
	CHECK_EQ_U64(st.retried, 0);
	CHECK(strstr(cap.log, "HTTP 400") && strstr(cap.log, "bad sample values"));
	CHECK(strstr(cap.log, "HTTP 500") && strstr(cap.log, "internal"));
	fake_now += 1000000;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(sink_count(&s), 5);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(status_413_reported_as_split)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;
	size_t a, b;

	START_SINK(&s, "[{\"status\":413,\"body\":\"request too large\"}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 4000, 77), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 1);
	REQUIRE(cap.nres == 1);
	CHECK(cap.res[0].outcome == PP_SEND_SPLIT);
	CHECK_EQ_U64(cap.res[0].tag, 77);
	CHECK_EQ_U64(cap.res[0].http_status, 413);
	CHECK_EQ_U64(cap.res[0].len, 4000);
	CHECK_STR(pp_send_outcome_name(cap.res[0].outcome), "split-needed");
	/* the body comes back to the caller, as pushed (not the gzip'ed copy sent) */
	{
		uint8_t *want = payload(4000, 77);

		REQUIRE(cap.res[0].body);
		CHECK(want && memcmp(cap.res[0].body, want, 4000) == 0);
		free(want);
		free(cap.res[0].body);
	}
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.split_needed, 1);
	CHECK_EQ_U64(st.retried, 0);
	CHECK_EQ_U64(st.dropped_bytes, 0);
	CHECK_EQ_U64(sink_count(&s), 1);
	/* the caller re-encodes its profiles in two halves and pushes them */
	REQUIRE(pp_send_split(4, &a, &b) == 0);
	CHECK_EQ_U64(push(t, 2000, 78), 0);
	CHECK_EQ_U64(push(t, 2000, 79), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 2);
	REQUIRE(sink_count(&s) == 3);
	CHECK(body_is(&s, 1, 2000, 78));
	CHECK(body_is(&s, 2, 2000, 79));
	pp_transport_free(t);
	sink_stop(&s);
}

/*
 * A Collector answers a body over max_request_body_size with 400 "http: request body too
 * large" (in its Status message), Pyroscope a profile over its limits with 400 "... exceeds
 * the size limit" or "exceeds the samples count limit": all three are handed back to be
 * split like a 413. Any other 400 is dropped.
 */
TEST(status_400_too_large_reported_as_split)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s,
		   "[{\"status\":400,\"body\":\"\\u0008\\u0003\\u0012\\u001chttp: request body "
		   "too large\"},{\"status\":400,\"body\":\"the profile with labels '{}' "
		   "exceeds the size limit (max_profile_size_byte, actual: 5000000, limit: "
		   "4194304)\"},{\"status\":400,\"body\":\"the profile with labels '{}' exceeds "
		   "the samples count limit (max_profile_stacktrace_samples, actual: 20000, "
		   "limit: 16000)\"},{\"status\":400,\"body\":\"invalid metric name\"}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	for (unsigned i = 1; i <= 4; i++)
		CHECK_EQ_U64(push(t, 1000 * i, i), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 4);
	REQUIRE(cap.nres == 4);
	for (int i = 0; i < 3; i++) {
		CHECK(cap.res[i].outcome == PP_SEND_SPLIT);
		CHECK_EQ_U64(cap.res[i].http_status, 400);
		CHECK(cap.res[i].body != NULL);
		free(cap.res[i].body);
	}
	CHECK(cap.res[3].outcome == PP_SEND_DROPPED_4XX && cap.res[3].body == NULL);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.split_needed, 3);
	CHECK_EQ_U64(st.dropped_4xx, 1);
	CHECK_EQ_U64(st.dropped_bytes, 4000);
	pp_transport_free(t);
	sink_stop(&s);
}

/* Without gzip the body in hand is also the bytes sent: it is handed back once, not freed. */
TEST(status_413_hands_back_plain_body)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":413}, {\"status\":200}, {\"status\":413}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.gzip = false;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 3000, 5), 0);
	CHECK_EQ_U64(push(t, 1000, 6), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 2);
	REQUIRE(cap.nres == 2);
	CHECK(cap.res[0].outcome == PP_SEND_SPLIT);
	CHECK_EQ_U64(cap.res[0].tag, 5);
	CHECK(cap.res[1].outcome == PP_SEND_DELIVERED);
	CHECK(cap.res[1].body == NULL); /* only a split hands the body back */
	REQUIRE(cap.res[0].body);
	{
		uint8_t *want = payload(3000, 5);

		CHECK(want && memcmp(cap.res[0].body, want, 3000) == 0);
		free(want);
	}
	CHECK(body_is(&s, 0, 3000, 5));
	/* pushed again (here whole; a caller splits it first), it is sent again */
	{
		struct pp_send_meta m = {.kind = PP_SEND_OTLP, .tag = 7};

		CHECK_EQ_U64(pp_transport_push(t, cap.res[0].body, 3000, &m), 0);
	}
	pp_transport_free(t);
	/* without on_result the transport frees the body itself (ASan would see a leak) */
	cfg.on_result = NULL;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 500, 8), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 1);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.split_needed, 1);
	CHECK_EQ_U64(sink_count(&s), 3);
	CHECK(body_is(&s, 2, 500, 8));
	pp_transport_free(t);
	sink_stop(&s);
}

static void transport_failure_case(const char *script, uint32_t timeout_ms, uint64_t max_wall_ms)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;
	struct timespec a, b;
	uint64_t wall;

	START_SINK(&s, script);
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.timeout_ms = timeout_ms;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 20000, 5), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	wall =
	    (uint64_t)((int64_t)(b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000);
	if (wall > max_wall_ms) {
		fprintf(stderr, "  attempt took %llu ms\n", (unsigned long long)wall);
		pp_test_failed_checks++;
	}
	CHECK_EQ_U64(next - fake_now, 100); /* retried like a 503 */
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.transport_errors, 1);
	CHECK_EQ_U64(st.last_status, 0);
	fake_now = next;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 1);
	REQUIRE(sink_count(&s) == 2);
	CHECK(body_is(&s, 1, 20000, 5));
	REQUIRE(cap.nres == 1);
	CHECK(cap.res[0].outcome == PP_SEND_DELIVERED);
	CHECK_EQ_U64(cap.res[0].attempts, 2);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.retried, 1);
	CHECK_EQ_U64(st.sent, 1);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(connection_closed_mid_request_retried)
{
	transport_failure_case("[{\"close\":true}]", 3000, 2500);
}

TEST(connection_reset_retried)
{
	transport_failure_case("[{\"reset\":true}]", 3000, 2500);
}

TEST(stall_past_timeout_retried)
{
	/* the server answers after 3 s; the attempt ends at 300 ms */
	transport_failure_case("[{\"stall\":3}]", 300, 1500);
}

TEST(connection_refused_retried_then_given_up)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	socklen_t sl = sizeof(sa);
	struct capture cap;
	struct pp_transport *t;
	uint64_t next = 0;
	char url[64];
	int fd, attempts = 0;

	/* a port that was just free: bound, never listened on, so connect is refused */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(fd >= 0);
	REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
	base_cfg(&cfg, url, &cap);
	cfg.max_elapsed_ms = 1000;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 3), 0);
	/* 100, 150, 225, 338 ms: at 813 ms the next (506 ms) would pass 1000 ms: give up */
	while (attempts < 20) {
		int r = pp_transport_poll(t, &next);

		attempts++;
		if (r)
			break;
		fake_now = next;
	}
	CHECK_EQ_U64(attempts, 5);
	REQUIRE(cap.nres == 1);
	CHECK(cap.res[0].outcome == PP_SEND_GAVE_UP);
	CHECK_EQ_U64(cap.res[0].attempts, 5);
	CHECK_EQ_U64(cap.res[0].http_status, 0);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.transport_errors, 5);
	CHECK_EQ_U64(st.retried, 4);
	CHECK_EQ_U64(st.dropped_give_up, 1);
	CHECK_EQ_U64(st.dropped_bytes, 100);
	CHECK(strstr(cap.log, "giving up on a request of 100 bytes after 5 attempts over 813 ms "
			      "(last: no response: ") != NULL);
	pp_transport_free(t);
	close(fd);
}

TEST(always_503_gives_up_after_max_elapsed)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;
	int polls = 0;

	START_SINK(&s, "[{\"status\":503},{\"status\":503},{\"status\":503},{\"status\":503},"
		       "{\"status\":503},{\"status\":503},{\"status\":503},{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.max_elapsed_ms = 1000;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	CHECK_EQ_U64(push(t, 100, 2), 0);
	while (polls < 20 && cap.nres == 0) {
		pp_transport_poll(t, &next);
		polls++;
		fake_now = next;
	}
	/* request 1: 5 attempts, then given up; request 2 took the next action (503) */
	REQUIRE(cap.nres >= 1);
	CHECK(cap.res[0].tag == 1 && cap.res[0].outcome == PP_SEND_GAVE_UP);
	CHECK_EQ_U64(cap.res[0].attempts, 5);
	CHECK_EQ_U64(cap.res[0].http_status, 503);
	CHECK_EQ_U64(sink_count(&s), 6);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.dropped_give_up, 1);
	CHECK(strstr(cap.log, "after 5 attempts over 813 ms (last: HTTP 503)") != NULL);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(partial_success_counted_not_retried)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":200,\"partial_success\":{\"rejected\":3,"
		       "\"message\":\"3 samples had no stack\"}},"
		       "{\"status\":200,\"partial_success\":{\"rejected\":0,"
		       "\"message\":\"heads up\"}},"
		       "{\"status\":200}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 500, 1), 0);
	CHECK_EQ_U64(push(t, 500, 2), 0);
	CHECK_EQ_U64(push(t, 500, 3), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 3);
	CHECK(next == UINT64_MAX);
	REQUIRE(cap.nres == 3);
	CHECK(cap.res[0].outcome == PP_SEND_DELIVERED && cap.res[0].rejected == 3);
	CHECK(cap.res[1].outcome == PP_SEND_DELIVERED && cap.res[1].rejected == 0);
	CHECK(cap.res[2].rejected == 0);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.partial_success, 2);
	CHECK_EQ_U64(st.rejected_profiles, 3);
	CHECK_EQ_U64(st.sent, 3);
	CHECK_EQ_U64(st.retried, 0);
	CHECK(strstr(cap.log, "rejected 3 profiles: 3 samples had no stack") != NULL);
	CHECK(strstr(cap.log, "warns: heads up") != NULL);
	fake_now += 10000000;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(sink_count(&s), 3);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(queue_overflow_drops_oldest_unsent)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.queue_bytes = 10000;
	cfg.max_request_bytes = 8000;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	/* the network is not touched while pushing: 5 x 3000 into 10000 bytes */
	for (unsigned i = 1; i <= 5; i++)
		CHECK_EQ_U64(push(t, 3000, i), 0);
	CHECK(push(t, 9000, 9) == -EMSGSIZE);
	CHECK_EQ_U64(sink_count(&s), 0);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.queue.dropped_overflow, 2);
	CHECK_EQ_U64(st.queue.dropped_overflow_bytes, 6000);
	CHECK_EQ_U64(st.queue.items, 3);
	CHECK_EQ_U64(st.dropped_too_big, 1);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 3);
	REQUIRE(sink_count(&s) == 3);
	CHECK(body_is(&s, 0, 3000, 3));
	CHECK(body_is(&s, 1, 3000, 4));
	CHECK(body_is(&s, 2, 3000, 5));
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(poll_never_sleeps_through_backoff)
{
	struct pp_transport_config cfg;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;
	struct timespec a, b;

	START_SINK(&s, "[{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.clock_ms = NULL; /* the real clock, default 5 s backoff */
	cfg.backoff_initial_ms = 5000;
	cfg.backoff_max_ms = 30000;
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(push(t, 100, 2), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 2000);
	CHECK(next != UINT64_MAX);
	CHECK_EQ_U64(sink_count(&s), 1);
	/* a push does not cut a backoff wait short */
	CHECK(pp_transport_wait(t, 50) == -ETIMEDOUT);
	pp_transport_wake(t);
	CHECK_EQ_U64(pp_transport_wait(t, 5000), 0);
	pp_transport_free(t); /* frees the held and queued requests without results */
	CHECK_EQ_U64(cap.nres, 0);
	sink_stop(&s);
}

TEST(flush_attempts_each_once_without_backoff)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	uint64_t next = 0;

	START_SINK(&s, "[{\"status\":503},{\"status\":503},{\"status\":200},{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 100, 1), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0); /* 1: 503, waits */
	CHECK_EQ_U64(push(t, 100, 2), 0);
	CHECK_EQ_U64(push(t, 100, 3), 0);
	/* 1: 503 -> dropped; 2: 200; 3: 503 -> dropped; the clock never moved */
	CHECK_EQ_U64(pp_transport_flush(t), 3);
	REQUIRE(cap.nres == 3);
	CHECK(cap.res[0].tag == 1 && cap.res[0].outcome == PP_SEND_DROPPED_SHUTDOWN);
	CHECK(cap.res[1].tag == 2 && cap.res[1].outcome == PP_SEND_DELIVERED);
	CHECK(cap.res[2].tag == 3 && cap.res[2].outcome == PP_SEND_DROPPED_SHUTDOWN);
	CHECK_EQ_U64(sink_count(&s), 4);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.dropped_shutdown, 2);
	CHECK_EQ_U64(st.sent, 1);
	pp_transport_free(t);
	sink_stop(&s);
}

TEST(endpoint_paths)
{
	struct pp_transport_config cfg;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	char *v;

	START_SINK(&s, "[]");
	base_cfg(&cfg, sink_url(&s, "/prefix//"), &cap);
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 10, 1), 0);
	CHECK_EQ_U64(pp_transport_poll(t, NULL), 1);
	pp_transport_free(t);

	base_cfg(&cfg, sink_url(&s, "/custom/profiles?tenant=a"), &cap);
	cfg.endpoint_verbatim = true;
	cfg.gzip = false;
	cfg.headers = "User-Agent=custom-agent/2";
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(push(t, 10, 2), 0);
	CHECK_EQ_U64(pp_transport_poll(t, NULL), 1);
	pp_transport_free(t);

	REQUIRE(sink_count(&s) == 2);
	v = sink_reqline(&s, 0);
	CHECK_STR(v, "POST /prefix/v1development/profiles");
	free(v);
	v = sink_reqline(&s, 1);
	CHECK_STR(v, "POST /custom/profiles?tenant=a");
	free(v);
	CHECK_EQ_U64(header_count(&s, 1, "Content-Encoding"), 0);
	CHECK(body_is(&s, 1, 10, 2));
	v = sink_header(&s, 1, "User-Agent");
	CHECK_STR(v, "custom-agent/2");
	free(v);
	CHECK_EQ_U64(header_count(&s, 1, "User-Agent"), 1);
	sink_stop(&s);
}

TEST(pyroscope_ingest_push)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct pp_transport *t;
	struct pp_send_meta m = {
	    .kind = PP_SEND_PYROSCOPE, .tag = 4, .from_s = 1700000000, .until_s = 1700000010};
	uint64_t next = 0;
	char *v;

	START_SINK(&s, "[{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.protocol = PP_TRANSPORT_PYROSCOPE_INGEST;
	cfg.app_name = "my-app{env=prod}";
	t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(t);
	CHECK_EQ_U64(pp_transport_push(t, payload(3000, 9), 3000, &m), 0);
	/* a request naming its own service (one per service of a window) */
	snprintf(m.app_name, sizeof(m.app_name), "checkout");
	m.tag = 5;
	CHECK_EQ_U64(pp_transport_push(t, payload(3000, 9), 3000, &m), 0);
	/* an OTLP request does not belong on this transport */
	CHECK_EQ_U64(push(t, 10, 10), 0);
	CHECK_EQ_U64(pp_transport_poll(t, &next), 0);
	CHECK_EQ_U64(next - fake_now, 100);
	fake_now = next;
	CHECK_EQ_U64(pp_transport_poll(t, &next), 3);
	REQUIRE(sink_count(&s) == 3);
	for (int i = 0; i < 3; i++) {
		v = sink_reqline(&s, i);
		if (i < 2)
			CHECK_STR(v,
				  "POST /ingest?name=my-app%7Benv%3Dprod%7D&from=1700000000&until="
				  "1700000010&format=pprof");
		else
			CHECK_STR(v, "POST /ingest?name=checkout&from=1700000000&until="
				     "1700000010&format=pprof");
		free(v);
		CHECK(body_is(&s, i, 3000, 9)); /* the pprof bytes as queued */
		CHECK_EQ_U64(header_count(&s, i, "Content-Encoding"), 0);
		v = sink_header(&s, i, "X-Scope-OrgID");
		CHECK_STR(v, "tenant 1");
		free(v);
		v = sink_header(&s, i, "User-Agent");
		CHECK_STR(v, UA);
		free(v);
	}
	REQUIRE(cap.nres == 3);
	CHECK(cap.res[0].tag == 4 && cap.res[0].outcome == PP_SEND_DELIVERED);
	CHECK_EQ_U64(cap.res[0].attempts, 2);
	CHECK(cap.res[1].tag == 5 && cap.res[1].outcome == PP_SEND_DELIVERED);
	CHECK(cap.res[2].tag == 10 && cap.res[2].outcome == PP_SEND_DROPPED_OTHER);
	pp_transport_stats(t, &st);
	CHECK_EQ_U64(st.sent, 2);
	CHECK_EQ_U64(st.retried, 1);
	CHECK_EQ_U64(st.dropped_other, 1);
	pp_transport_free(t);
	sink_stop(&s);
}

struct sender {
	struct pp_transport *t;
	volatile int stop;
};

static void *sender_main(void *arg)
{
	struct sender *sd = arg;

	while (!sd->stop) {
		uint64_t next, now;
		struct timespec ts;

		pp_transport_poll(sd->t, &next);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		pp_transport_wait(sd->t, next == UINT64_MAX ? 10000 : next > now ? next - now : 0);
	}
	return NULL;
}

TEST(sender_thread_delivers_pushes)
{
	struct pp_transport_config cfg;
	struct pp_transport_stats st;
	struct capture cap;
	struct sink s;
	struct sender sd = {0};
	pthread_t th;
	int waited = 0;

	START_SINK(&s, "[{\"status\":503}]");
	base_cfg(&cfg, sink_url(&s, ""), &cap);
	cfg.clock_ms = NULL;
	cfg.backoff_initial_ms = 50;
	cfg.on_result = NULL; /* the capture is not shared across threads */
	cfg.log = NULL;
	sd.t = pp_transport_new(&cfg, NULL, 0);
	REQUIRE(sd.t);
	REQUIRE(pthread_create(&th, NULL, sender_main, &sd) == 0);
	for (unsigned i = 1; i <= 3; i++) {
		CHECK_EQ_U64(push(sd.t, 1000, i), 0);
		usleep(20000);
	}
	do {
		usleep(20000);
		pp_transport_stats(sd.t, &st);
	} while (st.sent < 3 && ++waited < 250);
	sd.stop = 1;
	pp_transport_wake(sd.t);
	pthread_join(th, NULL);
	CHECK_EQ_U64(st.sent, 3);
	CHECK_EQ_U64(st.retried, 1);
	REQUIRE(sink_count(&s) == 4);
	CHECK(body_is(&s, 0, 1000, 1));
	CHECK(body_is(&s, 1, 1000, 1));
	CHECK(body_is(&s, 2, 1000, 2));
	CHECK(body_is(&s, 3, 1000, 3));
	pp_transport_free(sd.t);
	sink_stop(&s);
}

TEST_LIST = {
    {"headers_parse_ok", headers_parse_ok},
    {"headers_parse_errors", headers_parse_errors},
    {"endpoint_check", endpoint_check},
    {"config_errors", config_errors},
    {"backoff_and_retry_after_math", backoff_and_retry_after_math},
    {"split_helper", split_helper},
    {"delivers_with_headers_and_reuses_connection", delivers_with_headers_and_reuses_connection},
    {"retries_503_three_times_then_delivers_once", retries_503_three_times_then_delivers_once},
    {"jittered_delays_stay_in_bounds", jittered_delays_stay_in_bounds},
    {"retry_after_seconds_and_date_honoured", retry_after_seconds_and_date_honoured},
    {"non_retryable_statuses_dropped_and_counted", non_retryable_statuses_dropped_and_counted},
    {"status_413_reported_as_split", status_413_reported_as_split},
    {"status_413_hands_back_plain_body", status_413_hands_back_plain_body},
    {"status_400_too_large_reported_as_split", status_400_too_large_reported_as_split},
    {"outage_said_at_start_on_change_and_at_end", outage_said_at_start_on_change_and_at_end},
    {"oldest_queued_age", oldest_queued_age},
    {"connection_closed_mid_request_retried", connection_closed_mid_request_retried},
    {"connection_reset_retried", connection_reset_retried},
    {"stall_past_timeout_retried", stall_past_timeout_retried},
    {"connection_refused_retried_then_given_up", connection_refused_retried_then_given_up},
    {"always_503_gives_up_after_max_elapsed", always_503_gives_up_after_max_elapsed},
    {"partial_success_counted_not_retried", partial_success_counted_not_retried},
    {"queue_overflow_drops_oldest_unsent", queue_overflow_drops_oldest_unsent},
    {"poll_never_sleeps_through_backoff", poll_never_sleeps_through_backoff},
    {"flush_attempts_each_once_without_backoff", flush_attempts_each_once_without_backoff},
    {"endpoint_paths", endpoint_paths},
    {"pyroscope_ingest_push", pyroscope_ingest_push},
    {"sender_thread_delivers_pushes", sender_thread_delivers_pushes},
};
TEST_MAIN()
