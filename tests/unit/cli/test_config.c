/*
 * Tests of the `pebsprof run` configuration: precedence of every layer for every key, the
 * OpenTelemetry endpoint variables, exact file:line error messages for each kind of mistake,
 * redaction of secrets in --dry-run and in errors, size suffixes, quoting, and the fixture
 * files in tests/data/config.
 */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "check.h"
#include "cli/config.h"

#include <pebsprof/otlp.h>

#define DATA PP_TEST_DATA_DIR "/config/"
#define MAX_ARGS 32

static char tmp_conf[256];

static const char *write_conf(const char *text)
{
	FILE *f;

	snprintf(tmp_conf, sizeof(tmp_conf), "%s/test_config.%d.conf", PP_TEST_BUILD_DIR,
		 (int)getpid());
	f = fopen(tmp_conf, "w");
	if (!f)
		return NULL;
	fputs(text, f);
	fclose(f);
	return tmp_conf;
}

/*
 * Loads with a config file holding conf (NULL: none), the NULL-terminated environment env and
 * the NULL-terminated flags.
 */
static int load(const char *conf, char **env, const char *const *flags, struct pp_run_config *c,
		struct pp_config_errors *e)
{
	char *argv[MAX_ARGS + 1];
	char *empty_env[] = {NULL};
	int argc = 0, ret;

	argv[argc++] = "run";
	if (conf) {
		const char *path = write_conf(conf);

		if (!path)
			return -EIO;
		argv[argc++] = "--config";
		argv[argc++] = (char *)path;
	}
	for (size_t i = 0; flags && flags[i] && argc < MAX_ARGS; i++)
		argv[argc++] = (char *)flags[i];
	argv[argc] = NULL;
	ret = pp_run_config_load(argc, argv, env ? env : empty_env, c, e);
	if (conf)
		unlink(tmp_conf);
	return ret;
}

static char *dump(const struct pp_run_config *c)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return NULL;
	pp_run_config_print(c, f);
	fclose(f);
	return buf;
}

/* The printed line of key, without its newline, into out. */
static const char *line_of(const struct pp_run_config *c, const char *key, char *out, size_t n)
{
	char *d = dump(c), *p;
	size_t kl = strlen(key);

	out[0] = '\0';
	for (p = d; p && *p;) {
		char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);

		if (ll > kl + 3 && !strncmp(p, key, kl) && !strncmp(p + kl, " = ", 3)) {
			snprintf(out, n, "%.*s", (int)ll, p);
			break;
		}
		p = nl ? nl + 1 : p + ll;
	}
	free(d);
	return out;
}

static int has_error(const struct pp_config_errors *e, const char *msg)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->msg[i], msg))
			return 1;
	fprintf(stderr, "  missing error: %s\n  have:\n", msg);
	for (size_t i = 0; i < e->n; i++)
		fprintf(stderr, "    %s\n", e->msg[i]);
	return 0;
}

TEST(defaults)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	struct utsname u;

	REQUIRE(load(NULL, NULL, NULL, &c, &e) == 0);
	CHECK_EQ_U64(e.n, 0);
	CHECK_STR(c.event, "auto");
	CHECK_EQ_U64(c.freq_hz, 99);
	CHECK_EQ_U64(c.period, 0);
	CHECK_EQ_U64(c.ldlat, 30);
	CHECK_EQ_U64(c.interval_ns, 10000000000ull);
	CHECK_STR(c.endpoint, "");
	CHECK_EQ_U64(c.headers.n, 0);
	CHECK(c.exporter == PP_EXPORTER_FILE); /* no endpoint: local files */
	CHECK_STR(c.output_dir, "/var/lib/pebsprof/profiles");
	CHECK_EQ_U64(c.keep, 60);
	CHECK_EQ_U64(c.queue_bytes, 64ull << 20);
	CHECK_EQ_U64(c.flush_timeout_ns, 10000000000ull);
	CHECK_EQ_U64(c.stack_depth, 127);
	CHECK_STR(c.service_name, "");
	CHECK_EQ_U64(c.resource_attributes.n, 0);
	REQUIRE(uname(&u) == 0);
	CHECK_STR(c.node_name, u.nodename);
	CHECK_STR(c.proc_root, "/proc");
	CHECK_STR(c.sysfs_root, "/sys");
	CHECK_STR(c.listen, "");
	CHECK_EQ_U64(c.stall_timeout_ns, 30000000000ull); /* two 10 s windows < 30 s */
	CHECK(c.k8s_source == PP_K8S_AUTO);
	CHECK_EQ_U64(c.verbose, 0);
	CHECK_STR(c.config, "");
	CHECK_EQ_U64(c.dry_run, 0);
	CHECK_EQ_U64(c.help, 0);
	for (int k = 0; k < PP_CFG_NKEYS; k++)
		CHECK(c.origin[k].src == PP_SRC_DEFAULT);
	pp_run_config_fini(&c);
	pp_run_config_fini(&c); /* twice is fine */
}

/* Three distinct valid values per key (file, env, flag) and how --dry-run prints each. */
struct layers {
	const char *key;
	const char *file, *env, *flag;
	const char *pfile, *penv, *pflag;
	const char *extra_flag; /* a flag some keys need to be valid (exporter: an endpoint) */
};

static const struct layers rows[] = {
    {"event", "cycles", "mem-loads", "cpu-clock", "cycles", "mem-loads", "cpu-clock", NULL},
    {"freq", "10", "20", "30", "10", "20", "30", NULL},
    {"period", "1000", "2000", "3000", "1000", "2000", "3000", NULL},
    {"ldlat", "3", "40", "500", "3", "40", "500", NULL},
    {"interval", "5", "2.5", "60", "5", "2.5", "60", NULL},
    {"endpoint", "http://a:1/p", "https://b/v1development/profiles", "http://[::1]:4318/x",
     "http://a:1/p", "https://b/v1development/profiles", "http://[::1]:4318/x", NULL},
    {"headers", "A=1", "B=2", "C=3,D=4", "A=<redacted>", "B=<redacted>",
     "C=<redacted>,D=<redacted>", NULL},
    {"exporter", "file", "otlp", "pyroscope", "file", "otlp", "pyroscope", "--endpoint=http://h/"},
    {"output-dir", "/f", "/e", "/g", "/f", "/e", "/g", NULL},
    {"keep", "1", "2", "3", "1", "2", "3", NULL},
    {"queue-bytes", "1 MiB", "2048KiB", "1g", "1MiB", "2MiB", "1GiB", NULL},
    {"max-profile-samples", "100", "200", "300", "100", "200", "300", NULL},
    {"max-profile-bytes", "64KiB", "1MiB", "2MiB", "64KiB", "1MiB", "2MiB", NULL},
    {"max-request-bytes", "64KiB", "8MiB", "32MiB", "64KiB", "8MiB", "32MiB", NULL},
    {"max-burst-bytes", "64KiB", "1MiB", "8MiB", "64KiB", "1MiB", "8MiB", NULL},
    {"symbol-cache-bytes", "2MiB", "8MiB", "1GiB", "2MiB", "8MiB", "1GiB", NULL},
    {"symbolize", "none", "local", "none", "none", "local", "none", NULL},
    {"debug-dirs", "/d1", "/d2:/d3", "/d4", "/d1", "/d2:/d3", "/d4", NULL},
    {"debuginfod", "http://a:1", "http://b:2 http://c:3", "http://d:4", "http://a:1",
     "\"http://b:2 http://c:3\"", "http://d:4", NULL},
    {"debuginfod-cache", "/c1", "/c2", "/c3", "/c1", "/c2", "/c3", NULL},
    {"debuginfod-cache-bytes", "2MiB", "8MiB", "1GiB", "2MiB", "8MiB", "1GiB", NULL},
    {"no-perf-maps", "yes", "on", NULL, "true", "true", "true", NULL},
    {"kernel-image", "none", "/usr/lib/debug/boot/vmlinux-6.1.0", "auto", "none",
     "/usr/lib/debug/boot/vmlinux-6.1.0", "auto", NULL},
    {"flush-timeout", "1", "0.25", "30", "1", "0.25", "30", NULL},
    {"stack-depth", "1", "16", "127", "1", "16", "127", NULL},
    {"user-unwind", "kernel", "shim", "dwarf", "kernel", "fp", "dwarf", NULL},
    {"unwind-table-bytes", "2MiB", "8MiB", "1GiB", "2MiB", "8MiB", "1GiB", NULL},
    {"unwind-table-cache", "/u1", "/u2", "/u3", "/u1", "/u2", "/u3", NULL},
    {"unwind-table-cache-bytes", "2MiB", "8MiB", "1GiB", "2MiB", "8MiB", "1GiB", NULL},
    {"unwind-partial-fdes", "1", "500", "0", "1", "500", "0", NULL},
    {"symbol-table-cache", "/s1", "/s2", "/s3", "/s1", "/s2", "/s3", NULL},
    {"symbol-table-cache-bytes", "2MiB", "8MiB", "1GiB", "2MiB", "8MiB", "1GiB", NULL},
    {"off-cpu", "yes", "on", NULL, "true", "true", "true", NULL},
    {"off-cpu-threshold", "2ms", "500us", "0", "2ms", "500us", "0", NULL},
    {"off-cpu-every", "1", "4", "100", "1", "4", "100", NULL},
    {"off-cpu-stacks", "switch", "auto", "switch", "switch", "auto", "switch", NULL},
    {"service-name", "svc file", "svc-env", "svc#flag", "\"svc file\"", "svc-env", "\"svc#flag\"",
     NULL},
    {"resource-attributes", "a=1", "b=x%20y", "c=3,d=4", "a=1", "b=x%20y", "c=3,d=4", NULL},
    {"sample-labels", "thread", "cpu,pid", "memory,thread", "thread", "pid,cpu", "thread,memory",
     NULL},
    {"node-name", "n1", "n2", "n3", "n1", "n2", "n3", NULL},
    {"proc-root", "/p1", "/p2", "/p3", "/p1", "/p2", "/p3", NULL},
    {"sysfs-root", "/s1", "/s2", "/s3", "/s1", "/s2", "/s3", NULL},
    {"listen", ":9090", "127.0.0.1:9091", "[::1]:9092", ":9090", "127.0.0.1:9091", "[::1]:9092",
     NULL},
    {"stall-timeout", "5", "2.5", "600", "5", "2.5", "600", NULL},
    {"k8s-source", "apiserver", "kubelet", "none", "apiserver", "kubelet", "none", NULL},
    {"k8s-api-url", "https://a:6443", "https://b", "https://[::1]:443", "https://a:6443",
     "https://b", "https://[::1]:443", NULL},
    {"k8s-kubelet-url", "https://k:10250", "https://l", "https://m", "https://k:10250", "https://l",
     "https://m", NULL},
    {"k8s-token-file", "/t1", "/t2", "/t3", "/t1", "/t2", "/t3", NULL},
    {"k8s-ca-file", "/c1", "/c2", "/c3", "/c1", "/c2", "/c3", NULL},
    {"k8s-kubelet-insecure", "yes", "on", NULL, "true", "true", "true", NULL},
    {"k8s-refresh", "30", "60", "5", "30", "60", "5", NULL},
    {"cgroup-root", "/g1", "/g2", "/g3", "/g1", "/g2", "/g3", NULL},
    {"cgroup", "/a.slice", "/b", "/c,/d", "/a.slice", "/b", "/c,/d", NULL},
    {"container-id", "0123456789ab", "abcdefabcdef", "a1b2c3d4e5f6", "0123456789ab", "abcdefabcdef",
     "a1b2c3d4e5f6", NULL},
    {"namespace", "shop", "db", "kube-system,default", "shop", "db", "kube-system,default", NULL},
    {"verbose", "yes", "on", NULL, "true", "true", "true", NULL},
};

TEST(every_key_has_a_precedence_row)
{
	/* keys a user can set in all three layers; config, dry-run and help are flag-only */
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		int found = k == PP_CFG_CONFIG || k == PP_CFG_DRY_RUN || k == PP_CFG_HELP;

		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
			found |= !strcmp(rows[r].key, pp_config_key_name(k));
		if (!found)
			fprintf(stderr, "  no row for key %s\n", pp_config_key_name(k));
		CHECK(found);
	}
}

TEST(precedence_defaults_file_env_flags)
{
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const struct layers *L = &rows[r];
		int k = pp_config_key_lookup(L->key);

		REQUIRE(k >= 0);
		/* bit 0: file, bit 1: env, bit 2: flag */
		for (int mask = 0; mask < 8; mask++) {
			struct pp_run_config c;
			struct pp_config_errors e;
			char conf[256], envbuf[256], flagbuf[256], got[1024], want[1024];
			char *env[3] = {NULL, NULL, NULL};
			const char *flags[4] = {NULL, NULL, NULL, NULL};
			const char *env_name = pp_config_key_env(k);
			int nf = 0;

			snprintf(conf, sizeof(conf), "%s = \"%s\"\n", L->key, L->file);
			if (mask & 2) {
				snprintf(envbuf, sizeof(envbuf), "%s=%s", env_name, L->env);
				env[0] = envbuf;
			}
			if (mask & 4) {
				if (L->flag)
					snprintf(flagbuf, sizeof(flagbuf), "--%s=%s", L->key,
						 L->flag);
				else
					snprintf(flagbuf, sizeof(flagbuf), "--%s", L->key);
				flags[nf++] = flagbuf;
			}
			if (L->extra_flag)
				flags[nf++] = L->extra_flag;
			if (load(mask & 1 ? conf : NULL, env, flags, &c, &e) != 0) {
				fprintf(stderr, "  key %s mask %d: %s\n", L->key, mask,
					e.n ? e.msg[0] : "?");
				CHECK(0);
				pp_run_config_fini(&c);
				continue;
			}
			if (mask & 4)
				snprintf(want, sizeof(want), "%s = %s   (from flag --%s)", L->key,
					 L->pflag, L->key);
			else if (mask & 2)
				snprintf(want, sizeof(want), "%s = %s   (from env %s)", L->key,
					 L->penv, env_name);
			else if (mask & 1)
				snprintf(want, sizeof(want), "%s = %s   (from file %s:1)", L->key,
					 L->pfile, tmp_conf);
			else
				want[0] = '\0';
			line_of(&c, L->key, got, sizeof(got));
			if (want[0]) {
				CHECK_STR(got, want);
			} else {
				CHECK(strstr(got, "   (default)") != NULL);
				CHECK(c.origin[k].src == PP_SRC_DEFAULT);
			}
			pp_run_config_fini(&c);
		}
	}
}

TEST(environment_names)
{
	static const struct {
		enum pp_config_key k;
		const char *env;
	} otel[] = {
	    {PP_CFG_ENDPOINT, "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"},
	    {PP_CFG_HEADERS, "OTEL_EXPORTER_OTLP_HEADERS"},
	    {PP_CFG_RESOURCE_ATTRIBUTES, "OTEL_RESOURCE_ATTRIBUTES"},
	    {PP_CFG_SERVICE_NAME, "OTEL_SERVICE_NAME"},
	    {PP_CFG_NODE_NAME, "NODE_NAME"},
	    {PP_CFG_DEBUGINFOD, "DEBUGINFOD_URLS"},
	    {PP_CFG_DRY_RUN, NULL},
	    {PP_CFG_HELP, NULL},
	};

	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const char *want = NULL;
		char pp[64];
		int special = 0;

		for (size_t i = 0; i < sizeof(otel) / sizeof(otel[0]); i++) {
			if (otel[i].k == (enum pp_config_key)k) {
				want = otel[i].env;
				special = 1;
			}
		}
		if (!special) {
			/* PEBSPROF_<KEY>, upper case, '-' as '_' */
			const char *n = pp_config_key_name(k);
			size_t o = (size_t)snprintf(pp, sizeof(pp), "PEBSPROF_");

			for (; *n; n++)
				pp[o++] =
				    *n == '-' ? '_' : (char)(*n - ('a' <= *n && *n <= 'z') * 32);
			pp[o] = '\0';
			want = pp;
		}
		if (!want) {
			CHECK(pp_config_key_env(k) == NULL);
		} else {
			CHECK_STR(pp_config_key_env(k), want);
		}
	}
	CHECK_STR(pp_config_key_env(PP_CFG_QUEUE_BYTES), "PEBSPROF_QUEUE_BYTES");
	CHECK_STR(pp_config_key_env(PP_CFG_K8S_SOURCE), "PEBSPROF_K8S_SOURCE");
	CHECK(pp_config_key_name(PP_CFG_NKEYS) == NULL);
	CHECK(pp_config_key_lookup("nope") == -1);
}

TEST(otlp_endpoint_variables)
{
	static const struct {
		const char *base, *profiles, *flag;
		const char *want, *from;
	} cases[] = {
	    {"http://c:4318", NULL, NULL, "http://c:4318/v1development/profiles",
	     "env OTEL_EXPORTER_OTLP_ENDPOINT"},
	    {"http://c:4318/", NULL, NULL, "http://c:4318/v1development/profiles",
	     "env OTEL_EXPORTER_OTLP_ENDPOINT"},
	    {"https://gw.example/otlp//", NULL, NULL,
	     "https://gw.example/otlp/v1development/profiles", "env OTEL_EXPORTER_OTLP_ENDPOINT"},
	    {NULL, "http://c:4318/custom", NULL, "http://c:4318/custom",
	     "env OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"},
	    /* the signal-specific variable wins and is used as is */
	    {"http://base:1", "http://full:2/x", NULL, "http://full:2/x",
	     "env OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"},
	    /* a flag wins over both; like the Collector's endpoint, a URL without a path is a
	     * base the signal path goes after, one with a path is used as is */
	    {"http://base:1", "http://full:2/x", "http://flag:3",
	     "http://flag:3/v1development/profiles", "flag --endpoint"},
	    {NULL, NULL, "http://flag:3/", "http://flag:3/v1development/profiles",
	     "flag --endpoint"},
	    {NULL, NULL, "http://[::1]:4318", "http://[::1]:4318/v1development/profiles",
	     "flag --endpoint"},
	    {NULL, NULL, "https://gw/otlp/v1development/profiles",
	     "https://gw/otlp/v1development/profiles", "flag --endpoint"},
	    {NULL, NULL, "http://flag:3/custom", "http://flag:3/custom", "flag --endpoint"},
	    /* the signal-specific variable is used as is, with no path too (the OTel rule) */
	    {NULL, "http://c:4318", NULL, "http://c:4318",
	     "env OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pp_run_config c;
		struct pp_config_errors e;
		char b[128], p[128], f[128], want[256], got[256];
		char *env[3] = {NULL, NULL, NULL};
		const char *flags[2] = {NULL, NULL};
		int ne = 0;

		if (cases[i].base) {
			snprintf(b, sizeof(b), "OTEL_EXPORTER_OTLP_ENDPOINT=%s", cases[i].base);
			env[ne++] = b;
		}
		if (cases[i].profiles) {
			snprintf(p, sizeof(p), "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT=%s",
				 cases[i].profiles);
			env[ne++] = p;
		}
		if (cases[i].flag) {
			snprintf(f, sizeof(f), "--endpoint=%s", cases[i].flag);
			flags[0] = f;
		}
		REQUIRE(load(NULL, env, flags, &c, &e) == 0);
		CHECK_STR(c.endpoint, cases[i].want);
		CHECK(c.exporter == PP_EXPORTER_OTLP); /* the default with an endpoint */
		snprintf(want, sizeof(want), "endpoint = %s   (from %s)", cases[i].want,
			 cases[i].from);
		CHECK_STR(line_of(&c, "endpoint", got, sizeof(got)), want);
		CHECK_STR(line_of(&c, "exporter", got, sizeof(got)), "exporter = otlp   (default)");
		pp_run_config_fini(&c);
	}
}

TEST(otlp_endpoint_errors_name_the_variable)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318", NULL};
	char *env2[] = {"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT=http://:4318/", NULL};
	char *env3[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=", NULL}; /* empty = unset */

	CHECK(load(NULL, env, NULL, &c, &e) == -EINVAL);
	CHECK_EQ_U64(e.n, 1);
	CHECK(has_error(&e, "environment OTEL_EXPORTER_OTLP_ENDPOINT ('endpoint'): bad URL "
			    "'collector:4318': the scheme must be http:// or https://"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, env2, NULL, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "environment OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT ('endpoint'): bad "
			    "URL 'http://:4318/': no host"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, env3, NULL, &c, &e) == 0);
	CHECK_STR(c.endpoint, "");
	CHECK(c.origin[PP_CFG_ENDPOINT].src == PP_SRC_DEFAULT);
	pp_run_config_fini(&c);
}

TEST(dry_run_prints_origins_and_redacts_secrets)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=https://user:pa55@gw.example:443",
		       "OTEL_EXPORTER_OTLP_HEADERS=X-Scope-OrgID=tenant-1, Authorization = "
		       "Basic%20czNjcjN0",
		       "OTEL_SERVICE_NAME=shop", NULL};
	const char *flags[] = {"--dry-run", "--interval", "30", NULL};
	char got[512], *d;

	REQUIRE(load(NULL, env, flags, &c, &e) == 0);
	CHECK_EQ_U64(c.dry_run, 1);
	REQUIRE(c.headers.n == 2);
	CHECK_STR(c.headers.items[0].key, "X-Scope-OrgID");
	CHECK_STR(c.headers.items[0].value, "tenant-1");
	CHECK_STR(c.headers.items[1].key, "Authorization");
	CHECK_STR(c.headers.items[1].value, "Basic czNjcjN0");
	CHECK_STR(line_of(&c, "headers", got, sizeof(got)),
		  "headers = X-Scope-OrgID=<redacted>,Authorization=<redacted>   (from env "
		  "OTEL_EXPORTER_OTLP_HEADERS)");
	CHECK_STR(line_of(&c, "endpoint", got, sizeof(got)),
		  "endpoint = https://<redacted>@gw.example:443/v1development/profiles   (from "
		  "env OTEL_EXPORTER_OTLP_ENDPOINT)");
	CHECK_STR(line_of(&c, "interval", got, sizeof(got)),
		  "interval = 30   (from flag --interval)");
	CHECK_STR(line_of(&c, "service-name", got, sizeof(got)),
		  "service-name = shop   (from env OTEL_SERVICE_NAME)");
	d = dump(&c);
	REQUIRE(d);
	CHECK(strstr(d, "czNjcjN0") == NULL);
	CHECK(strstr(d, "tenant-1") == NULL);
	CHECK(strstr(d, "pa55") == NULL);
	CHECK(strstr(d, "dry-run") == NULL); /* flags that are not configuration */
	CHECK(strstr(d, "\nhelp") == NULL);
	/* one line per printable key */
	size_t lines = 0;

	for (char *p = d; *p; p++)
		lines += *p == '\n';
	CHECK_EQ_U64(lines, PP_CFG_NKEYS - 2);
	free(d);
	pp_run_config_fini(&c);
}

TEST(secrets_stay_out_of_error_messages)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%zzs3cr3t", NULL};
	char *env2[] = {"OTEL_EXPORTER_OTLP_HEADERS=Authorization: Bearer s3cr3t", NULL};
	const char *flags[] = {"--endpoint", "http://u:s3cr3t@h:99999/", NULL};

	CHECK(load(NULL, env, NULL, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "environment OTEL_EXPORTER_OTLP_HEADERS ('headers'): bad header "
			    "syntax: item 1: the value of 'Authorization' holds a bad percent "
			    "escape (give %XX with two hex digits)"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, env2, NULL, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "environment OTEL_EXPORTER_OTLP_HEADERS ('headers'): bad header "
			    "syntax: item 1 has no '=' (give key=value pairs)"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, NULL, flags, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "--endpoint: bad URL 'http://<redacted>@h:99999/': bad port '99999' "
			    "(give 1..65535)"));
	pp_run_config_fini(&c);
}

TEST(error_fixture_reports_every_line)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *path = DATA "errors.conf";
	char *argv[] = {"run", "--config", (char *)path, NULL};
	char *env[] = {NULL};
	static const char *const want[] = {
	    "2: unknown key 'intervall'",
	    "3: 'freq': 'fast' is not a whole number in 1..1000000",
	    "5: 'endpoint': bad URL 'ftp://collector:4318': the scheme must be http:// or https://",
	    "6: 'headers': bad header syntax: item 1 has no '=' (give key=value pairs)",
	    "7: unknown key 'output_dir' (did you mean 'output-dir'?)",
	    "8: 'queue-bytes': bad size '64MB': say KiB, MiB or GiB (powers of 1024), not 'MB'",
	    "9: 'exporter': 'kafka' is not one of otlp, pyroscope, file",
	    "10: 'keep' is set twice (first at line 4)",
	    "11: 'service-name': an unterminated quote",
	    "12: expected 'key = value', got 'this line has no equals sign'",
	    "13: 'config' cannot be set in a config file (it is a flag)",
	    "14: 'listen': bad address '127.0.0.1': no port (give ADDR:PORT, e.g. :9090)",
	    ("15: 'flush-timeout': '0' is not a duration in seconds from 0.001 to 3600 (e.g. 10 or "
	     "2.5)"),
	};
	char msg[PP_CONFIG_ERROR_LEN];

	CHECK(pp_run_config_load(3, argv, env, &c, &e) == -EINVAL);
	CHECK_EQ_U64(e.n, sizeof(want) / sizeof(want[0]));
	CHECK_EQ_U64(e.dropped, 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(msg, sizeof(msg), "%s:%s", path, want[i]);
		CHECK(has_error(&e, msg));
	}
	/* the good line still counts */
	CHECK_EQ_U64(c.keep, 7);
	pp_run_config_fini(&c);
}

TEST(unreadable_config_file)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *argv[] = {"run", "--config", "/nonexistent/pebsprof.conf", NULL};
	char *argv2[] = {"run", NULL};
	char *env[] = {"PEBSPROF_CONFIG=" PP_TEST_DATA_DIR "/config", NULL};
	char msg[512];

	CHECK(pp_run_config_load(3, argv, NULL, &c, &e) == -EINVAL);
	CHECK_EQ_U64(e.n, 1);
	CHECK(has_error(&e, "cannot read config file '/nonexistent/pebsprof.conf': No such file "
			    "or directory (check --config or PEBSPROF_CONFIG)"));
	pp_run_config_fini(&c);
	/* a directory is refused; PEBSPROF_CONFIG names the file too */
	CHECK(pp_run_config_load(1, argv2, env, &c, &e) == -EINVAL);
	snprintf(msg, sizeof(msg),
		 "config file '%s/config' is not a regular file (a directory, FIFO, socket or "
		 "device); give the path of a file (check --config or PEBSPROF_CONFIG)",
		 PP_TEST_DATA_DIR);
	CHECK(has_error(&e, msg));
	pp_run_config_fini(&c);
}

/* A FIFO at the config path (nobody writing to it) is refused at once instead of blocking. */
TEST(config_fifo_is_refused_without_blocking)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char path[256], msg[512];
	char *argv[] = {"run", "--config", path, NULL};

	snprintf(path, sizeof(path), "%s/test_config.%d.fifo", PP_TEST_BUILD_DIR, (int)getpid());
	unlink(path);
	REQUIRE(mkfifo(path, 0600) == 0);
	alarm(10); /* the old open blocked here forever */
	CHECK(pp_run_config_load(3, argv, NULL, &c, &e) == -EINVAL);
	alarm(0);
	snprintf(msg, sizeof(msg),
		 "config file '%s' is not a regular file (a directory, FIFO, socket or device); "
		 "give the path of a file (check --config or PEBSPROF_CONFIG)",
		 path);
	CHECK(has_error(&e, msg));
	pp_run_config_fini(&c);
	unlink(path);
}

/* Values are text: a line break, a terminal escape or bytes that are not UTF-8 are errors. */
TEST(values_must_be_clean_text)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"NODE_NAME=node-1\nforged: line", "OTEL_SERVICE_NAME=shop\xff", NULL};
	const char *const flags[] = {"--resource-attributes", "team=\x1b[31mred", NULL};

	CHECK(load("service-name = caf\xc3\xa9\n", NULL, NULL, &c, &e) == 0);
	pp_run_config_fini(&c);
	CHECK(load("service-name = caf\xc3\n", env, flags, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "environment NODE_NAME ('node-name'): the value holds a control "
			    "character at byte 6 (0x0a); give plain UTF-8 text"));
	CHECK(has_error(&e, "environment OTEL_SERVICE_NAME ('service-name'): the value is not "
			    "valid UTF-8 at byte 4 (0xff); give plain UTF-8 text"));
	CHECK_EQ_U64(e.n, 4);
	pp_run_config_fini(&c);
}

TEST(full_fixture)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *argv[] = {"run", "--config", DATA "full.conf", NULL};
	char got[512];

	REQUIRE(pp_run_config_load(3, argv, NULL, &c, &e) == 0);
	CHECK_STR(c.event, "cycles:pp");
	CHECK_EQ_U64(c.freq_hz, 499);
	CHECK_EQ_U64(c.ldlat, 50);
	CHECK_EQ_U64(c.interval_ns, 15000000000ull);
	CHECK_STR(c.endpoint, "https://pyroscope.example:4040/v1development/profiles");
	REQUIRE(c.headers.n == 2);
	CHECK_STR(c.headers.items[0].value, "tenant 1");
	CHECK_STR(c.headers.items[1].value, "Bearer s3cr3t");
	CHECK(c.exporter == PP_EXPORTER_PYROSCOPE);
	CHECK_STR(c.output_dir, "/data/pebsprof windows");
	CHECK_EQ_U64(c.keep, 12);
	CHECK_EQ_U64(c.queue_bytes, 256ull << 20);
	CHECK_EQ_U64(c.flush_timeout_ns, 2500000000ull);
	CHECK_EQ_U64(c.stack_depth, 64);
	CHECK_STR(c.service_name, "checkout \"v2\"");
	REQUIRE(c.resource_attributes.n == 2);
	CHECK_STR(c.resource_attributes.items[0].key, "deployment.environment");
	CHECK_STR(c.resource_attributes.items[1].value, "eu-1");
	CHECK_STR(c.node_name, "node-7");
	CHECK_STR(c.proc_root, "/host/proc");
	CHECK_STR(c.sysfs_root, "/host/sys");
	CHECK_STR(c.listen, "[::1]:9090");
	CHECK(c.k8s_source == PP_K8S_KUBELET);
	CHECK_EQ_U64(c.verbose, 1);
	CHECK_STR(c.config, DATA "full.conf");
	CHECK(c.origin[PP_CFG_CONFIG].src == PP_SRC_FLAG);
	CHECK_STR(line_of(&c, "service-name", got, sizeof(got)),
		  "service-name = \"checkout \\\"v2\\\"\"   (from file " DATA "full.conf:14)");
	CHECK_STR(line_of(&c, "output-dir", got, sizeof(got)),
		  "output-dir = \"/data/pebsprof windows\"   (from file " DATA "full.conf:9)");
	CHECK_STR(line_of(&c, "queue-bytes", got, sizeof(got)),
		  "queue-bytes = 256MiB   (from file " DATA "full.conf:11)");
	CHECK_STR(line_of(&c, "config", got, sizeof(got)),
		  "config = " DATA "full.conf   (from flag --config)");
	pp_run_config_fini(&c);
}

TEST(minimal_fixture_blank_lines_comments_crlf)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *argv[] = {"run", NULL};
	char *env[] = {"PEBSPROF_CONFIG=" DATA "minimal.conf", NULL};

	REQUIRE(pp_run_config_load(1, argv, env, &c, &e) == 0);
	CHECK_EQ_U64(c.interval_ns, 30000000000ull);
	CHECK_EQ_U64(c.keep, 5);
	CHECK_STR(c.output_dir, "/tmp/pp");
	CHECK_STR(c.origin[PP_CFG_KEEP].where, DATA "minimal.conf:5");
	CHECK_STR(c.origin[PP_CFG_OUTPUT_DIR].where, DATA "minimal.conf:6");
	CHECK(c.origin[PP_CFG_CONFIG].src == PP_SRC_ENV);
	pp_run_config_fini(&c);
}

TEST(quotes_and_comments)
{
	static const struct {
		const char *line;
		const char *want; /* NULL: an error */
	} cases[] = {
	    {"service-name = plain", "plain"},
	    {"service-name = plain # comment", "plain"},
	    {"service-name = a#b", "a#b"}, /* '#' starts a comment only after whitespace */
	    {"service-name = \"a # b\"  # c", "a # b"},
	    {"service-name = 'it''", NULL},
	    {"service-name = 'back\\slash'", "back\\slash"},
	    {"service-name = \"q\\\"\\\\\"", "q\"\\"},
	    {"service-name = \"bad \\n\"", NULL},
	    {"service-name = \"x\" y", NULL},
	    {"service-name =", ""},
	    {"service-name = \"\"", ""},
	    {"   service-name=x   ", "x"},
	    {"service-name\t=\t  two words  ", "two words"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pp_run_config c;
		struct pp_config_errors e = {0};
		int ret;

		REQUIRE(pp_run_config_init(&c) == 0);
		ret = pp_config_file_parse(cases[i].line, strlen(cases[i].line), "t.conf", &c, &e);
		if (cases[i].want) {
			if (ret)
				fprintf(stderr, "  '%s': %s\n", cases[i].line, e.msg[0]);
			CHECK(ret == 0);
			CHECK_STR(c.service_name, cases[i].want);
			CHECK_STR(c.origin[PP_CFG_SERVICE_NAME].where, "t.conf:1");
		} else {
			CHECK(ret == -EINVAL);
			CHECK_EQ_U64(e.n, 1);
			CHECK(!strncmp(e.msg[0], "t.conf:1: 'service-name': ", 26));
			CHECK(c.origin[PP_CFG_SERVICE_NAME].src == PP_SRC_DEFAULT);
		}
		pp_run_config_fini(&c);
	}
}

TEST(file_syntax_errors_exact)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
	    {"= 5\n", "t.conf:1: expected 'key = value', got '= 5'"},
	    {"\n\n  keep 5\n", "t.conf:3: expected 'key = value', got 'keep 5'"},
	    {"keep = 5\0\n", "t.conf:1: a NUL byte (is this a text file?)"},
	    {"# c\nKEEP = 5\n", "t.conf:2: unknown key 'KEEP' (did you mean 'keep'?)"},
	    {"dry-run = true\n",
	     "t.conf:1: 'dry-run' cannot be set in a config file (it is a flag)"},
	    {"keep = 0\n", "t.conf:1: 'keep': '0' is not a whole number in 1..1000000"},
	    {"stack-depth = 128\n",
	     "t.conf:1: 'stack-depth': '128' is not a whole number in 1..127"},
	    {"event = bogus\n", NULL},
	    {"verbose = maybe\n",
	     "t.conf:1: 'verbose': 'maybe' is not a boolean (true/false, yes/no, on/off, 1/0)"},
	    {"k8s-source = etcd\n",
	     "t.conf:1: 'k8s-source': 'etcd' is not one of auto, apiserver, kubelet, none"},
	    {"user-unwind = frames\n",
	     "t.conf:1: 'user-unwind': 'frames' is not one of fp, kernel, auto, dwarf"},
	    {"sample-labels = thread,tid\n", "t.conf:1: 'sample-labels': 'tid' is not one of "
					     "thread, pid, cpu, memory (or none)"},
	    {"sample-labels = cpu,\n", "t.conf:1: 'sample-labels': '' is not one of "
				       "thread, pid, cpu, memory (or none)"},
	    {"output-dir = \"\"\n", "t.conf:1: 'output-dir': an empty path"},
	    {"interval = 0.01\n", "t.conf:1: 'interval': '0.01' is not a duration in seconds from "
				  "0.1 to 86400 (e.g. 10 or 2.5)"},
	    {"resource-attributes = a=1,b\n",
	     "t.conf:1: 'resource-attributes': bad attribute syntax: item 2 has no '=' (give "
	     "key=value pairs)"},
	    {"headers = bad key=1\n", "t.conf:1: 'headers': bad header syntax: item 1: key 'bad "
				      "key' holds a character a header name cannot have"},
	    {"headers = k=a%0D%0Ab\n", "t.conf:1: 'headers': bad header syntax: item 1: the value "
				       "of 'k' holds a control character (CR, LF, NUL...)"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pp_run_config c;
		struct pp_config_errors e = {0};
		size_t len = strlen(cases[i].text);

		if (strstr(cases[i].text, "keep = 5") == cases[i].text)
			len = sizeof("keep = 5\0\n") - 1; /* the embedded NUL */
		REQUIRE(pp_run_config_init(&c) == 0);
		CHECK(pp_config_file_parse(cases[i].text, len, "t.conf", &c, &e) == -EINVAL);
		CHECK_EQ_U64(e.n, 1);
		if (cases[i].msg) {
			CHECK_STR(e.msg[0], cases[i].msg);
		} else {
			CHECK(!strncmp(e.msg[0], "t.conf:1: 'event': bad event 'bogus': ", 38));
		}
		pp_run_config_fini(&c);
	}
}

TEST(errors_are_bounded_and_counted)
{
	struct pp_run_config c;
	struct pp_config_errors e = {0};
	char text[2048] = "";

	for (int i = 0; i < 40; i++)
		strcat(text, "nope = 1\n");
	REQUIRE(pp_run_config_init(&c) == 0);
	CHECK(pp_config_file_parse(text, strlen(text), "t.conf", &c, &e) == -EINVAL);
	CHECK_EQ_U64(e.n, PP_CONFIG_MAX_ERRORS);
	CHECK_EQ_U64(e.dropped, 40 - PP_CONFIG_MAX_ERRORS);
	CHECK_STR(e.msg[PP_CONFIG_MAX_ERRORS - 1], "t.conf:32: unknown key 'nope'");
	pp_run_config_fini(&c);
}

TEST(all_layers_report_errors_together)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"PEBSPROF_KEEP=-1", NULL};
	const char *flags[] = {"--stack-depth", "x", "--bogus", "-F", NULL};
	char *d;
	FILE *f;
	size_t n;

	CHECK(load("interval = never\n", env, flags, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "unknown option '--bogus'"));
	CHECK(has_error(&e, "option '-F' needs a value"));
	CHECK(has_error(&e, "environment PEBSPROF_KEEP ('keep'): '-1' is not a whole number in "
			    "1..1000000"));
	CHECK(has_error(&e, "--stack-depth: 'x' is not a whole number in 1..127"));
	CHECK_EQ_U64(e.n, 5);
	CHECK(e.n >= 1 && strstr(e.msg[2], ":1: 'interval': 'never' is not a duration") != NULL);
	pp_run_config_fini(&c);

	f = open_memstream(&d, &n);
	REQUIRE(f);
	pp_config_errors_print(&e, "pebsprof run", f);
	fclose(f);
	CHECK(!strncmp(d, "pebsprof run: unknown option '--bogus'\n", 39));
	free(d);
	f = open_memstream(&d, &n);
	REQUIRE(f);
	pp_config_errors_print(&e, "pebsprof run: ", f);
	fclose(f);
	CHECK(!strncmp(d, "pebsprof run: unknown option '--bogus'\n", 39));
	free(d);
}

TEST(flag_errors)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *f1[] = {"--verbose=1", NULL};
	const char *f2[] = {"stray", NULL};
	const char *f3[] = {"-x", NULL};
	const char *f4[] = {"--interval", NULL};

	CHECK(load(NULL, NULL, f1, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "--verbose takes no value"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, NULL, f2, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "unexpected argument 'stray': run takes options only"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, NULL, f3, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "unknown option '-x'"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, NULL, f4, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "option '--interval' needs a value"));
	pp_run_config_fini(&c);
}

TEST(kernel_image_is_auto_debuginfod_none_or_a_path)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *rel[] = {"--kernel-image", "vmlinux", NULL};
	const char *dbgd[] = {"--kernel-image", "debuginfod", NULL};
	char *env[] = {"PEBSPROF_KERNEL_IMAGE=/boot/vmlinux-6.1.0-99-amd64", NULL};
	char *urls[] = {"DEBUGINFOD_URLS=http://127.0.0.1:8002", NULL};

	CHECK(load(NULL, NULL, rel, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "kernel-image 'vmlinux' (flag --kernel-image): auto, debuginfod, "
			    "none or an absolute path"));
	pp_run_config_fini(&c);
	/* the servers' image: only with servers to ask */
	CHECK(load(NULL, NULL, dbgd, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "kernel-image debuginfod (flag --kernel-image) needs debuginfod "
			    "servers: give --debuginfod URLS, debuginfod in the config file or "
			    "DEBUGINFOD_URLS"));
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, urls, dbgd, &c, &e) == 0);
	CHECK_STR(c.kernel_image, "debuginfod");
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, env, NULL, &c, &e) == 0);
	CHECK_STR(c.kernel_image, "/boot/vmlinux-6.1.0-99-amd64");
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, NULL, NULL, &c, &e) == 0);
	CHECK_STR(c.kernel_image, "auto");
	pp_run_config_fini(&c);
}

TEST(short_flags_and_repeats)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *flags[] = {"-e", "cycles", "-F", "10", "-F", "20", "-v", NULL};

	REQUIRE(load(NULL, NULL, flags, &c, &e) == 0);
	CHECK_STR(c.event, "cycles");
	CHECK_EQ_U64(c.freq_hz, 20); /* the last flag wins */
	CHECK_EQ_U64(c.verbose, 1);
	CHECK_STR(c.origin[PP_CFG_FREQ].where, "--freq");
	pp_run_config_fini(&c);
}

TEST(freq_and_period)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env_period[] = {"PEBSPROF_PERIOD=100000", NULL};
	const char *flag_freq[] = {"-F", "999", NULL};
	const char *both[] = {"-F", "999", "-c", "5000", NULL};
	char msg[1024];

	/* a period in a higher layer replaces the file's frequency */
	REQUIRE(load("freq = 49\n", env_period, NULL, &c, &e) == 0);
	CHECK_EQ_U64(c.period, 100000);
	CHECK_EQ_U64(c.freq_hz, 0);
	pp_run_config_fini(&c);
	/* and a frequency flag replaces the environment's period */
	REQUIRE(load(NULL, env_period, flag_freq, &c, &e) == 0);
	CHECK_EQ_U64(c.period, 0);
	CHECK_EQ_U64(c.freq_hz, 999);
	pp_run_config_fini(&c);
	/* the same layer setting both is a mistake */
	CHECK(load(NULL, NULL, both, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "freq (flag --freq) and period (flag --period) exclude each other: "
			    "set one of them"));
	pp_run_config_fini(&c);
	CHECK(load("freq = 1\nperiod = 2\n", NULL, NULL, &c, &e) == -EINVAL);
	snprintf(msg, sizeof(msg),
		 "freq (file %s:1) and period (file %s:2) exclude each other: set one of them",
		 tmp_conf, tmp_conf);
	CHECK(has_error(&e, msg));
	pp_run_config_fini(&c);
}

TEST(exporter_needs_an_endpoint)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	char msg[1024];
	char *env[] = {"PEBSPROF_EXPORTER=pyroscope", NULL};
	char *env_ep[] = {"PEBSPROF_EXPORTER=pyroscope",
			  "OTEL_EXPORTER_OTLP_ENDPOINT=http://p:4040", NULL};
	const char *to_file[] = {"--exporter", "file", NULL};

	CHECK(load("# otlp needs somewhere to send\nexporter = otlp\n", NULL, NULL, &c, &e) ==
	      -EINVAL);
	snprintf(msg, sizeof(msg),
		 "exporter 'otlp' (file %s:2) needs an endpoint: give --endpoint URL, endpoint "
		 "in the config file or OTEL_EXPORTER_OTLP_ENDPOINT, or use exporter file",
		 tmp_conf);
	CHECK(has_error(&e, msg));
	pp_run_config_fini(&c);
	CHECK(load(NULL, env, NULL, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "exporter 'pyroscope' (env PEBSPROF_EXPORTER) needs an endpoint: give "
			    "--endpoint URL, endpoint in the config file or "
			    "OTEL_EXPORTER_OTLP_ENDPOINT, or use exporter file"));
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, env_ep, NULL, &c, &e) == 0);
	CHECK(c.exporter == PP_EXPORTER_PYROSCOPE);
	pp_run_config_fini(&c);
	/* file with an endpoint set (say, a cluster-wide OTEL variable) writes files */
	REQUIRE(load(NULL, env_ep + 1, to_file, &c, &e) == 0);
	CHECK(c.exporter == PP_EXPORTER_FILE);
	pp_run_config_fini(&c);
}

TEST(size_suffixes)
{
	static const struct {
		const char *s;
		int ok;
		uint64_t v;
	} cases[] = {
	    {"0", 1, 0},
	    {"1048576", 1, 1048576},
	    {"64MiB", 1, 64ull << 20},
	    {"64 MiB", 1, 64ull << 20},
	    {"64mib", 1, 64ull << 20},
	    {"64M", 1, 64ull << 20},
	    {"512KiB", 1, 512ull << 10},
	    {"512k", 1, 512ull << 10},
	    {"2GiB", 1, 2ull << 30},
	    {"3G", 1, 3ull << 30},
	    {"7B", 1, 7},
	    {"64MB", 0, 0},
	    {"64 kb", 0, 0},
	    {"64TiB", 0, 0},
	    {"MiB", 0, 0},
	    {"", 0, 0},
	    {"-1", 0, 0},
	    {"1.5GiB", 0, 0},
	    {"18446744073709551615", 1, UINT64_MAX},
	    {"18446744073709551616", 0, 0},
	    {"17179869184GiB", 0, 0},
	};
	char err[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int ret = pp_size_parse(cases[i].s, strlen(cases[i].s), &v, err, sizeof(err));

		if (cases[i].ok) {
			if (ret)
				fprintf(stderr, "  '%s': %s\n", cases[i].s, err);
			CHECK(ret == 0);
			CHECK_EQ_U64(v, cases[i].v);
		} else {
			if (!ret)
				fprintf(stderr, "  '%s' was accepted\n", cases[i].s);
			CHECK(ret == -EINVAL);
			CHECK_EQ_U64(v, 12345);
		}
	}
	/* and the range of queue-bytes applies after the suffix */
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *small[] = {"--queue-bytes", "1KiB", NULL};

	CHECK(load(NULL, NULL, small, &c, &e) == -EINVAL);
	CHECK(has_error(&e, "--queue-bytes: size '1KiB' is out of range 64KiB..16GiB"));
	pp_run_config_fini(&c);
}

TEST(url_syntax)
{
	static const struct {
		const char *u;
		const char *err; /* NULL: valid */
	} cases[] = {
	    {"http://h", NULL},
	    {"HTTPS://h.example:443/a/b?x=1", NULL},
	    {"http://10.0.0.1:4318/v1development/profiles", NULL},
	    {"http://[fe80::1]:4318/", NULL},
	    {"http://[::1]", NULL},
	    {"http://user:pw@h/", NULL},
	    {"http://h?q", NULL},
	    {"", "empty URL"},
	    {"h:4318", "the scheme must be http:// or https://"},
	    {"grpc://h:4317", "the scheme must be http:// or https://"},
	    {"http://", "the scheme must be http:// or https://"},
	    {"http:///path", "no host"},
	    {"http://u@/x", "no host"},
	    {"http://h:/", "bad port '' (give 1..65535)"},
	    {"http://h:0", "bad port '0' (give 1..65535)"},
	    {"http://h:65536", "bad port '65536' (give 1..65535)"},
	    {"http://h:12a", "bad port '12a' (give 1..65535)"},
	    {"http://h/a b", "a space, control or non-ASCII character"},
	    {"http://h/#frag", "a fragment ('#...') has no place in an endpoint"},
	    {"http://h_x!/", "bad character '!' in the host"},
	    {"http://[::1/", "unclosed '[' in the host"},
	    {"http://[]:1/", "empty IPv6 address in brackets"},
	    {"http://[::g]/", "bad character 'g' in an IPv6 address"},
	    {"http://[::1]x/", "text after ']' that is not ':PORT'"},
	    {"http://::1:80/", "no host"},
	    {"http://a:1:2/", "an IPv6 address goes in brackets, e.g. [::1]:9090"},
	};
	char err[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret;

		err[0] = '\0';
		ret = pp_url_check(cases[i].u, strlen(cases[i].u), err, sizeof(err));
		if (!cases[i].err) {
			if (ret)
				fprintf(stderr, "  '%s': %s\n", cases[i].u, err);
			CHECK(ret == 0);
		} else {
			CHECK(ret == -EINVAL);
			if (strcmp(err, cases[i].err))
				fprintf(stderr, "  '%s'\n", cases[i].u);
			CHECK_STR(err, cases[i].err);
		}
	}
}

TEST(listen_syntax)
{
	static const struct {
		const char *s;
		int ok;
	} cases[] = {
	    {"", 1},	      {":9090", 1}, {"0.0.0.0:9090", 1}, {"localhost:1", 1},
	    {"[::]:9090", 1}, {"9090", 0},  {"[::]", 0},	 {"::1:9090", 0},
	    {"h:70000", 0},   {"h:", 0},    {"h x:1", 0},	 {"[::1]:", 0},
	};
	char err[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret = pp_listen_check(cases[i].s, strlen(cases[i].s), err, sizeof(err));

		if ((ret == 0) != cases[i].ok)
			fprintf(stderr, "  '%s': %d\n", cases[i].s, ret);
		CHECK((ret == 0) == cases[i].ok);
	}
}

TEST(kv_lists)
{
	struct pp_kv_list l;
	char err[256];
	const char *s = " a = 1 ,b=x%3Dy%2C%20z,, c=%e2%82%ac ,d=,";

	REQUIRE(pp_kv_list_parse(s, strlen(s), true, &l, err, sizeof(err)) == 0);
	REQUIRE(l.n == 4);
	CHECK_STR(l.items[0].key, "a");
	CHECK_STR(l.items[0].value, "1");
	CHECK_STR(l.items[1].value, "x=y, z");
	CHECK_STR(l.items[2].value, "\xe2\x82\xac");
	CHECK_STR(l.items[3].key, "d");
	CHECK_STR(l.items[3].value, "");
	pp_kv_list_free(&l);
	pp_kv_list_free(&l);

	CHECK(pp_kv_list_parse("", 0, true, &l, err, sizeof(err)) == 0);
	CHECK_EQ_U64(l.n, 0);
	CHECK(pp_kv_list_parse("=v", 2, true, &l, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "item 1 has an empty key");
	CHECK(pp_kv_list_parse("a=%4", 4, true, &l, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "item 1: the value of 'a' holds a bad percent escape (give %XX with two hex "
		       "digits)");
	CHECK(pp_kv_list_parse("a=%00", 5, true, &l, err, sizeof(err)) == -EINVAL);
	/* reads stop at len: "a=1" of "a=1%" is fine */
	CHECK(pp_kv_list_parse("a=1%", 3, true, &l, err, sizeof(err)) == 0);
	CHECK_STR(l.items[0].value, "1");
	pp_kv_list_free(&l);

	/* a resource attribute value printed back is percent-encoded and parses again */
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"OTEL_RESOURCE_ATTRIBUTES=team=a%2Cb,host.name=x%20y", NULL};
	char got[256];

	REQUIRE(load(NULL, env, NULL, &c, &e) == 0);
	CHECK_STR(line_of(&c, "resource-attributes", got, sizeof(got)),
		  "resource-attributes = team=a%2Cb,host.name=x%20y   (from env "
		  "OTEL_RESOURCE_ATTRIBUTES)");
	pp_run_config_fini(&c);
}

/*
 * Resource attribute keys are any text, percent-decoded as the OTel spec's
 * OTEL_RESOURCE_ATTRIBUTES has them (Kubernetes-style keys hold '/'); header names stay
 * tokens.
 */
TEST(attribute_keys_are_not_header_names)
{
	const char *s = "app.kubernetes.io/part-of=shop,team%2Fname=a%20b,%F0%9F%90%9D=bee";
	struct pp_kv_list l;
	struct pp_run_config c;
	struct pp_config_errors e;
	char *env[] = {"OTEL_RESOURCE_ATTRIBUTES=app.kubernetes.io/part-of=shop,a%3Db=1", NULL};
	char *bad[] = {"OTEL_EXPORTER_OTLP_HEADERS=x/y=1", NULL};
	char err[256], got[256];

	REQUIRE(pp_kv_list_parse(s, strlen(s), false, &l, err, sizeof(err)) == 0);
	REQUIRE(l.n == 3);
	CHECK_STR(l.items[0].key, "app.kubernetes.io/part-of");
	CHECK_STR(l.items[0].value, "shop");
	CHECK_STR(l.items[1].key, "team/name");
	CHECK_STR(l.items[1].value, "a b");
	CHECK_STR(l.items[2].key, "\xf0\x9f\x90\x9d");
	pp_kv_list_free(&l);
	/* as header names, the same keys are refused */
	CHECK(pp_kv_list_parse(s, strlen(s), true, &l, err, sizeof(err)) == -EINVAL);
	/* a key that decodes to nothing, or to a control character */
	CHECK(pp_kv_list_parse("%20=1", 5, false, &l, err, sizeof(err)) == 0);
	CHECK_STR(l.items[0].key, " ");
	pp_kv_list_free(&l);
	CHECK(pp_kv_list_parse("a%0Ab=1", 7, false, &l, err, sizeof(err)) == -EINVAL);
	CHECK(pp_kv_list_parse("%zz=1", 5, false, &l, err, sizeof(err)) == -EINVAL);

	/* through the configuration: accepted, and printed back so that it parses again */
	REQUIRE(load(NULL, env, NULL, &c, &e) == 0);
	CHECK_STR(line_of(&c, "resource-attributes", got, sizeof(got)),
		  "resource-attributes = app.kubernetes.io/part-of=shop,a%3Db=1   (from env "
		  "OTEL_RESOURCE_ATTRIBUTES)");
	pp_run_config_fini(&c);
	CHECK(load(NULL, bad, NULL, &c, &e) != 0);
	pp_run_config_fini(&c);
}

/*
 * Resource attributes become labels of every series in Pyroscope, which refuses a push with
 * one name over 1024 bytes or one value over 2048: such attributes exit at start-up, naming
 * the attribute, rather than fail every push later. At the bounds they pass.
 */
TEST(resource_attributes_within_pyroscope_bounds)
{
	static char key_at[1024 + 8], key_over[1025 + 8], val_at[2048 + 8], val_over[2049 + 8];
	static char many[PP_OTLP_MAX_RESOURCE_ATTRS * 8 + 64];
	struct pp_run_config c;
	struct pp_config_errors e;
	size_t off = 0;

	memset(key_at, 'k', 1024);
	memcpy(key_at + 1024, "=v", 3);
	memset(key_over, 'k', 1025);
	memcpy(key_over + 1025, "=v", 3);
	memcpy(val_at, "a=", 2);
	memset(val_at + 2, 'v', 2048);
	memcpy(val_over, "a=", 2);
	memset(val_over + 2, 'v', 2049);
	for (int i = 0; i <= PP_OTLP_MAX_RESOURCE_ATTRS; i++)
		off += (size_t)snprintf(many + off, sizeof(many) - off, "%sk%d=v", i ? "," : "", i);

	REQUIRE(load(NULL, NULL, (const char *const[]){"--resource-attributes", key_at, NULL}, &c,
		     &e) == 0);
	CHECK(c.resource_attributes.n == 1 && strlen(c.resource_attributes.items[0].key) == 1024);
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, NULL, (const char *const[]){"--resource-attributes", val_at, NULL}, &c,
		     &e) == 0);
	CHECK(strlen(c.resource_attributes.items[0].value) == 2048);
	pp_run_config_fini(&c);

	CHECK(load(NULL, NULL, (const char *const[]){"--resource-attributes", val_over, NULL}, &c,
		   &e) == -EINVAL);
	CHECK(has_error(&e, "--resource-attributes: attribute a: a 2049-byte value; Pyroscope "
			    "refuses label values over 2048 bytes"));
	pp_run_config_fini(&c);
	CHECK(load(NULL, NULL, (const char *const[]){"--resource-attributes", key_over, NULL}, &c,
		   &e) == -EINVAL);
	CHECK(e.n == 1 && strstr(e.msg[0], "attribute 1: a 1025-byte key (\"kkkk") &&
	      strstr(e.msg[0], "Pyroscope refuses label names over 1024 bytes"));
	pp_run_config_fini(&c);
	/* one more than are sent: refused, not cut without a word */
	CHECK(load(NULL, NULL, (const char *const[]){"--resource-attributes", many, NULL}, &c,
		   &e) == -EINVAL);
	CHECK(has_error(&e, "--resource-attributes: bad attribute syntax: more than 64 items"));
	pp_run_config_fini(&c);
}

TEST(help_is_generated_from_the_table)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *flags[] = {"--help", "--bogus", NULL};
	char *u;
	size_t n;
	FILE *f;

	/* --help answers before anything else is looked at */
	REQUIRE(load(NULL, NULL, flags, &c, &e) == 0);
	CHECK_EQ_U64(c.help, 1);
	pp_run_config_fini(&c);

	f = open_memstream(&u, &n);
	REQUIRE(f);
	pp_run_config_usage(f);
	fclose(f);
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "--%s", pp_config_key_name(k));
		CHECK(strstr(u, flag) != NULL);
		if (pp_config_key_env(k))
			CHECK(strstr(u, pp_config_key_env(k)) != NULL);
	}
	CHECK(strstr(u, "OTEL_EXPORTER_OTLP_ENDPOINT") != NULL);
	CHECK(strstr(u, "default 64MiB; env PEBSPROF_QUEUE_BYTES\n") != NULL);
	CHECK(strstr(u, "  -e, --event EVENT") != NULL);
	/* the health rules are documented where the flags are */
	CHECK(strstr(u, "GET /healthz") != NULL);
	CHECK(strstr(u, "stall-timeout") != NULL);
	free(u);
}

/* The stall timeout follows the window unless set; a set value is kept as given. */
TEST(stall_timeout_default_follows_the_interval)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *long_window[] = {"--interval", "60", NULL};
	const char *both[] = {"--interval", "60", "--stall-timeout", "5", NULL};
	const char *too_small[] = {"--stall-timeout", "0.5", NULL};

	REQUIRE(load(NULL, NULL, long_window, &c, &e) == 0);
	CHECK_EQ_U64(c.stall_timeout_ns, 120000000000ull);
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, NULL, both, &c, &e) == 0);
	CHECK_EQ_U64(c.stall_timeout_ns, 5000000000ull);
	pp_run_config_fini(&c);
	CHECK(load(NULL, NULL, too_small, &c, &e) == -EINVAL);
	CHECK(e.n == 1 && strstr(e.msg[0], "stall-timeout") != NULL);
	pp_run_config_fini(&c);
}

TEST(load_twice_reinitialises_getopt)
{
	struct pp_run_config c;
	struct pp_config_errors e;
	const char *f1[] = {"-Fx", NULL};
	const char *f2[] = {"-F", "7", NULL};

	CHECK(load(NULL, NULL, f1, &c, &e) == -EINVAL);
	pp_run_config_fini(&c);
	REQUIRE(load(NULL, NULL, f2, &c, &e) == 0);
	CHECK_EQ_U64(c.freq_hz, 7);
	CHECK_EQ_U64(e.n, 0);
	pp_run_config_fini(&c);
}

/* record's view: the pod metadata keys from file, environment and flags; run's others unread. */
TEST(load_keys_takes_only_its_keys)
{
	const uint64_t keys =
	    PP_CONFIG_KEY_BIT(PP_CFG_K8S_SOURCE) | PP_CONFIG_KEY_BIT(PP_CFG_K8S_TOKEN_FILE) |
	    PP_CONFIG_KEY_BIT(PP_CFG_NODE_NAME) | PP_CONFIG_KEY_BIT(PP_CFG_CONFIG);
	const char *path =
	    write_conf("k8s-token-file = /t/token\nendpoint = not a url\nfreq = x\n");
	char conf_env[300];
	char *env[] = {conf_env, "PEBSPROF_K8S_SOURCE=kubelet", "NODE_NAME=n1", "PEBSPROF_FREQ=bad",
		       NULL};
	char *argv[] = {"record", "--k8s-source", "apiserver", NULL};
	char *bad_argv[] = {"record", "--freq", "7", NULL};
	char *bad_value_argv[] = {"record", "--k8s-source", "nowhere", NULL};
	struct pp_run_config c;
	struct pp_config_errors e;

	REQUIRE(path);
	snprintf(conf_env, sizeof(conf_env), "PEBSPROF_CONFIG=%s", path);
	REQUIRE(pp_run_config_load_keys(3, argv, env, keys, &c, &e) == 0);
	CHECK_EQ_U64(e.n, 0);
	CHECK_EQ_U64(c.k8s_source, PP_K8S_APISERVER); /* the flag over the environment */
	CHECK_EQ_U64(c.origin[PP_CFG_K8S_SOURCE].src, PP_SRC_FLAG);
	CHECK_STR(c.k8s_token_file, "/t/token"); /* from the file */
	CHECK_EQ_U64(c.origin[PP_CFG_K8S_TOKEN_FILE].src, PP_SRC_FILE);
	CHECK_STR(c.node_name, "n1");
	/* run's keys outside the set: defaults, their bad values neither read nor reported */
	CHECK_STR(c.endpoint, "");
	CHECK_EQ_U64(c.freq_hz, 99);
	CHECK_EQ_U64(c.origin[PP_CFG_FREQ].src, PP_SRC_DEFAULT);
	pp_run_config_fini(&c);

	CHECK(pp_run_config_load_keys(3, bad_argv, env, keys, &c, &e) == -EINVAL);
	CHECK(e.n == 1 && strstr(e.msg[0], "--freq is an option of run only"));
	pp_run_config_fini(&c);
	CHECK(pp_run_config_load_keys(3, bad_value_argv, env, keys, &c, &e) == -EINVAL);
	CHECK(e.n == 1 && strstr(e.msg[0], "--k8s-source") && strstr(e.msg[0], "nowhere"));
	pp_run_config_fini(&c);
	unlink(path);
}

TEST_LIST = {
    {"defaults", defaults},
    {"every_key_has_a_precedence_row", every_key_has_a_precedence_row},
    {"precedence_defaults_file_env_flags", precedence_defaults_file_env_flags},
    {"environment_names", environment_names},
    {"otlp_endpoint_variables", otlp_endpoint_variables},
    {"otlp_endpoint_errors_name_the_variable", otlp_endpoint_errors_name_the_variable},
    {"dry_run_prints_origins_and_redacts_secrets", dry_run_prints_origins_and_redacts_secrets},
    {"secrets_stay_out_of_error_messages", secrets_stay_out_of_error_messages},
    {"error_fixture_reports_every_line", error_fixture_reports_every_line},
    {"unreadable_config_file", unreadable_config_file},
    {"config_fifo_is_refused_without_blocking", config_fifo_is_refused_without_blocking},
    {"values_must_be_clean_text", values_must_be_clean_text},
    {"full_fixture", full_fixture},
    {"minimal_fixture_blank_lines_comments_crlf", minimal_fixture_blank_lines_comments_crlf},
    {"quotes_and_comments", quotes_and_comments},
    {"file_syntax_errors_exact", file_syntax_errors_exact},
    {"errors_are_bounded_and_counted", errors_are_bounded_and_counted},
    {"all_layers_report_errors_together", all_layers_report_errors_together},
    {"flag_errors", flag_errors},
    {"kernel_image_is_auto_debuginfod_none_or_a_path",
     kernel_image_is_auto_debuginfod_none_or_a_path},
    {"short_flags_and_repeats", short_flags_and_repeats},
    {"freq_and_period", freq_and_period},
    {"exporter_needs_an_endpoint", exporter_needs_an_endpoint},
    {"size_suffixes", size_suffixes},
    {"url_syntax", url_syntax},
    {"listen_syntax", listen_syntax},
    {"kv_lists", kv_lists},
    {"attribute_keys_are_not_header_names", attribute_keys_are_not_header_names},
    {"resource_attributes_within_pyroscope_bounds", resource_attributes_within_pyroscope_bounds},
    {"help_is_generated_from_the_table", help_is_generated_from_the_table},
    {"stall_timeout_default_follows_the_interval", stall_timeout_default_follows_the_interval},
    {"load_twice_reinitialises_getopt", load_twice_reinitialises_getopt},
    {"load_keys_takes_only_its_keys", load_keys_takes_only_its_keys},
};

TEST_MAIN()
