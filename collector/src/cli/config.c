/*
 * Configuration of `pebsprof run`. The option table below is the only list of keys: the
 * defaults are parsed from it through the same code as user input, and --help, the
 * environment names, the config-file keys, getopt_long's options and the --dry-run printout
 * are all generated from it, so a key cannot exist in one place and be missing in another.
 */
#define _GNU_SOURCE /* strndup */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <pebsprof/record.h>
#include <pebsprof/text.h>

#include "cli_util.h"
#include "sampling/events.h"
#include "agent/health.h"
#include "sampling/shim_loader.h"
#include "base/log.h"
#include "symbolize/debug_file.h"
#include "symbolize/debuginfod_fetch.h"

enum opt_type {
	T_STR,	  /* any text */
	T_PATH,	  /* non-empty text */
	T_EVENT,  /* an event spec */
	T_URL,	  /* "" or an http(s) URL */
	T_KV,	  /* k=v,... with percent-encoded values */
	T_U64,	  /* decimal in [min, max] */
	T_SECS,	  /* seconds, fractions allowed, stored in ns, in [min, max] ns */
	T_SIZE,	  /* bytes with suffixes, in [min, max] */
	T_ENUM,	  /* one of names[], stored as int */
	T_BOOL,	  /* true/false..., stored as int; a flag without a value */
	T_LISTEN, /* "" or ADDR:PORT */
};

#define F_SECRET 0x1  /* values never printed */
#define F_NO_FILE 0x2 /* not a config-file key */
#define F_NO_PRINT 0x4

struct option_def {
	const char *name; /* long flag and config-file key */
	char short_flag;
	const char *env;      /* environment variable, NULL: none */
	const char *env_base; /* a base URL variable the profiles path is appended to */
	enum opt_type type;
	size_t offset;	 /* into struct pp_run_config */
	const char *def; /* default as text, NULL: zero / computed */
	uint64_t min, max;
	const char *const *names; /* T_ENUM */
	const char *metavar;
	const char *help;
	unsigned flags;
};

#define NS_PER_S 1000000000ull
#define KIB 1024ull
#define MIB (1024ull * 1024)
#define GIB (1024ull * 1024 * 1024)
#define OFF(f) offsetof(struct pp_run_config, f)
#define MAX_KV_ITEMS 64
#define MAX_VALUE_LEN 4096
#define ECHO_LEN 80 /* how much of a bad value a message repeats */
#define DEFAULT_STALL_NS (30 * NS_PER_S)

static const char *const exporter_names[] = {"otlp", "pyroscope", "file", NULL};
static const char *const symbolize_names[] = {"local", "none", NULL};
static const char *const k8s_names[] = {"auto", "apiserver", "kubelet", "none", NULL};

static const struct option_def table[PP_CFG_NKEYS] = {
    [PP_CFG_EVENT] = {.name = "event",
		      .short_flag = 'e',
		      .env = "PEBSPROF_EVENT",
		      .type = T_EVENT,
		      .offset = OFF(event),
		      .def = "auto",
		      .metavar = "EVENT",
		      .help = "auto (best precise source, else cpu-clock), cpu-clock,\n"
			      "cycles, instructions, mem-loads, mem-stores, or pmu/config=.../"},
    [PP_CFG_FREQ] = {.name = "freq",
		     .short_flag = 'F',
		     .env = "PEBSPROF_FREQ",
		     .type = T_U64,
		     .offset = OFF(freq_hz),
		     .def = "99",
		     .min = 1,
		     .max = 1000000,
		     .metavar = "HZ",
		     .help = "samples per second per CPU"},
    [PP_CFG_PERIOD] = {.name = "period",
		       .short_flag = 'c',
		       .env = "PEBSPROF_PERIOD",
		       .type = T_U64,
		       .offset = OFF(period),
		       .min = 1,
		       .max = 1ull << 62,
		       .metavar = "N",
		       .help = "sample every N events instead of a frequency (default: off)"},
    [PP_CFG_LDLAT] = {.name = "ldlat",
		      .env = "PEBSPROF_LDLAT",
		      .type = T_U64,
		      .offset = OFF(ldlat),
		      .def = "30",
		      .min = 1,
		      .max = 65535,
		      .metavar = "CYCLES",
		      .help = "load-latency threshold of mem-loads"},
    [PP_CFG_INTERVAL] = {.name = "interval",
			 .env = "PEBSPROF_INTERVAL",
			 .type = T_SECS,
			 .offset = OFF(interval_ns),
			 .def = "10",
			 .min = NS_PER_S / 10,
			 .max = 86400 * NS_PER_S,
			 .metavar = "SECONDS",
			 .help = "window length; windows are aligned to multiples of it and\n"
				 "uploads are jittered within the next window"},
    [PP_CFG_ENDPOINT] = {.name = "endpoint",
			 .env = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
			 .env_base = "OTEL_EXPORTER_OTLP_ENDPOINT",
			 .type = T_URL,
			 .offset = OFF(endpoint),
			 .def = "",
			 .metavar = "URL",
			 .help = "where profiles go: a base URL (http://collector:4318, the\n"
				 "path " PP_OTLP_PROFILES_PATH " is appended) or one with\n"
				 "a path, used as is (none: write each window to output-dir)"},
    [PP_CFG_HEADERS] = {.name = "headers",
			.env = "OTEL_EXPORTER_OTLP_HEADERS",
			.type = T_KV,
			.offset = OFF(headers),
			.def = "",
			.metavar = "K=V,...",
			.help = "HTTP headers of every upload, values percent-encoded\n"
				"(secret: --dry-run prints no values)",
			.flags = F_SECRET},
    [PP_CFG_EXPORTER] = {.name = "exporter",
			 .env = "PEBSPROF_EXPORTER",
			 .type = T_ENUM,
			 .offset = OFF(exporter),
			 .names = exporter_names,
			 .metavar = "KIND",
			 .help = "otlp, pyroscope or file (default: otlp with an endpoint,\n"
				 "file without)"},
    [PP_CFG_OUTPUT_DIR] = {.name = "output-dir",
			   .env = "PEBSPROF_OUTPUT_DIR",
			   .type = T_PATH,
			   .offset = OFF(output_dir),
			   .def = "/var/lib/pebsprof/profiles",
			   .metavar = "DIR",
			   .help = "where the file exporter writes each window, OTLP and pprof"},
    [PP_CFG_KEEP] = {.name = "keep",
		     .env = "PEBSPROF_KEEP",
		     .type = T_U64,
		     .offset = OFF(keep),
		     .def = "60",
		     .min = 1,
		     .max = 1000000,
		     .metavar = "N",
		     .help = "window files kept in output-dir; the oldest go first"},
    [PP_CFG_QUEUE_BYTES] = {.name = "queue-bytes",
			    .env = "PEBSPROF_QUEUE_BYTES",
			    .type = T_SIZE,
			    .offset = OFF(queue_bytes),
			    .def = "64MiB",
			    .min = 64 * KIB,
			    .max = 16 * GIB,
			    .metavar = "SIZE",
			    .help = "bound of the upload queue; suffixes KiB, MiB, GiB"},
    [PP_CFG_MAX_PROFILE_SAMPLES] = {.name = "max-profile-samples",
				    .env = "PEBSPROF_MAX_PROFILE_SAMPLES",
				    .type = T_U64,
				    .offset = OFF(max_profile_samples),
				    .def = "16000",
				    .min = 1,
				    .max = 100000000,
				    .metavar = "N",
				    .help =
					"samples per profile sent, at most (Pyroscope's limit);\n"
					"a larger window is cut before it is sent"},
    [PP_CFG_MAX_PROFILE_BYTES] = {.name = "max-profile-bytes",
				  .env = "PEBSPROF_MAX_PROFILE_BYTES",
				  .type = T_SIZE,
				  .offset = OFF(max_profile_bytes),
				  .def = "4MiB",
				  .min = 4 * KIB,
				  .max = 1 * GIB,
				  .metavar = "SIZE",
				  .help = "bytes per profile sent, as pprof (Pyroscope's limit)"},
    [PP_CFG_MAX_REQUEST_BYTES] = {.name = "max-request-bytes",
				  .env = "PEBSPROF_MAX_REQUEST_BYTES",
				  .type = T_SIZE,
				  .offset = OFF(max_request_bytes),
				  .def = "16MiB",
				  .min = 1 * KIB,
				  .max = 64 * MIB,
				  .metavar = "SIZE",
				  .help = "bytes per OTLP request before compression (a Collector\n"
					  "refuses more than 20 MiB)"},
    [PP_CFG_SYMBOL_CACHE_BYTES] = {.name = "symbol-cache-bytes",
				   .env = "PEBSPROF_SYMBOL_CACHE_BYTES",
				   .type = T_SIZE,
				   .offset = OFF(symbol_cache_bytes),
				   .def = "24MiB",
				   .min = 1 * MIB,
				   .max = 16 * GIB,
				   .metavar = "SIZE",
				   .help =
				       "bound of the ELF symbol tables kept; the least recently\n"
				       "used go first (with the other caches, 64 MiB by default)"},
    [PP_CFG_SYMBOLIZE] = {.name = "symbolize",
			  .env = "PEBSPROF_SYMBOLIZE",
			  .type = T_ENUM,
			  .offset = OFF(symbolize),
			  .def = "local",
			  .names = symbolize_names,
			  .metavar = "local|none",
			  .help = "name frames here (local), or send addresses and build ids\n"
				  "only, for the backend to name (none)"},
    [PP_CFG_DEBUG_DIRS] = {.name = "debug-dirs",
			   .env = "PEBSPROF_DEBUG_DIRS",
			   .type = T_STR,
			   .offset = OFF(debug_dirs),
			   .def = "",
			   .metavar = "DIR:...",
			   .help = "more directories of separate debug files, searched after\n"
				   "/usr/lib/debug (inside each process's root, then the host's)"},
    [PP_CFG_DEBUGINFOD] = {.name = "debuginfod",
			   .env = "DEBUGINFOD_URLS",
			   .type = T_STR,
			   .offset = OFF(debuginfod),
			   .def = "",
			   .metavar = "URLS",
			   .help = "debuginfod servers (space-separated) asked in the background\n"
				   "for stripped files' debug files (empty: off)"},
    [PP_CFG_DEBUGINFOD_CACHE] = {.name = "debuginfod-cache",
				 .env = "PEBSPROF_DEBUGINFOD_CACHE",
				 .type = T_PATH,
				 .offset = OFF(debuginfod_cache),
				 .def = PP_DEBUGINFOD_CACHE_DIR_DEFAULT,
				 .metavar = "DIR",
				 .help = "where debug files from debuginfod are kept"},
    [PP_CFG_DEBUGINFOD_CACHE_BYTES] = {.name = "debuginfod-cache-bytes",
				       .env = "PEBSPROF_DEBUGINFOD_CACHE_BYTES",
				       .type = T_SIZE,
				       .offset = OFF(debuginfod_cache_bytes),
				       .def = "128MiB",
				       .min = 1 * MIB,
				       .max = 1024 * GIB,
				       .metavar = "SIZE",
				       .help =
					   "bound of that directory; the oldest files go first"},
    [PP_CFG_NO_PERF_MAPS] = {.name = "no-perf-maps",
			     .env = "PEBSPROF_NO_PERF_MAPS",
			     .type = T_BOOL,
			     .offset = OFF(no_perf_maps),
			     .def = "false",
			     .help = "do not read JIT runtimes' /tmp/perf-PID.map files"},
    [PP_CFG_FLUSH_TIMEOUT] = {.name = "flush-timeout",
			      .env = "PEBSPROF_FLUSH_TIMEOUT",
			      .type = T_SECS,
			      .offset = OFF(flush_timeout_ns),
			      .def = "10",
			      .min = NS_PER_S / 1000,
			      .max = 3600 * NS_PER_S,
			      .metavar = "SECONDS",
			      .help = "how long shutdown waits for queued uploads"},
    [PP_CFG_STACK_DEPTH] = {.name = "stack-depth",
			    .env = "PEBSPROF_STACK_DEPTH",
			    .type = T_U64,
			    .offset = OFF(stack_depth),
			    .def = "127",
			    .min = 1,
			    .max = PP_MAX_STACK_DEPTH,
			    .metavar = "N",
			    .help = "frames per stack"},
    [PP_CFG_USER_UNWIND] = {.name = "user-unwind",
			    .env = "PEBSPROF_USER_UNWIND",
			    .type = T_ENUM,
			    .offset = OFF(user_unwind),
			    .def = "auto",
			    .names = pp_ustack_walk_names,
			    .metavar = "auto|dwarf|fp|kernel",
			    .help =
				"how user stacks are unwound: auto (unwind tables where a file\n"
				"has them, frame pointers elsewhere), dwarf (tables only), fp\n"
				"(the shim follows frame pointers) or kernel (bpf_get_stack)"},
    [PP_CFG_UNWIND_TABLE_BYTES] =
	{.name = "unwind-table-bytes",
	 .env = "PEBSPROF_UNWIND_TABLE_BYTES",
	 .type = T_SIZE,
	 .offset = OFF(unwind_table_bytes),
	 .def = "64MiB",
	 .min = 1 * MIB,
	 .max = 4 * GIB,
	 .metavar = "SIZE",
	 .help = "kernel memory for unwind tables (user-unwind auto, dwarf);\n"
		 "the least recently used unused tables make room"},
    [PP_CFG_SERVICE_NAME] = {.name = "service-name",
			     .env = "OTEL_SERVICE_NAME",
			     .type = T_STR,
			     .offset = OFF(service_name),
			     .def = "",
			     .metavar = "NAME",
			     .help = "service.name of processes whose container or pod names\n"
				     "none (default: the executable's name)"},
    [PP_CFG_RESOURCE_ATTRIBUTES] = {.name = "resource-attributes",
				    .env = "OTEL_RESOURCE_ATTRIBUTES",
				    .type = T_KV,
				    .offset = OFF(resource_attributes),
				    .def = "",
				    .metavar = "K=V,...",
				    .help = "resource attributes added to every profile"},
    [PP_CFG_NODE_NAME] = {.name = "node-name",
			  .env = "NODE_NAME",
			  .type = T_STR,
			  .offset = OFF(node_name),
			  .metavar = "NAME",
			  .help = "this node's name, for pod metadata (default: the host name)"},
    [PP_CFG_PROC_ROOT] = {.name = "proc-root",
			  .env = "PEBSPROF_PROC_ROOT",
			  .type = T_PATH,
			  .offset = OFF(proc_root),
			  .def = "/proc",
			  .metavar = "DIR",
			  .help = "where /proc is (the host's, in a container)"},
    [PP_CFG_SYSFS_ROOT] = {.name = "sysfs-root",
			   .env = "PEBSPROF_SYSFS_ROOT",
			   .type = T_PATH,
			   .offset = OFF(sysfs_root),
			   .def = "/sys",
			   .metavar = "DIR",
			   .help = "where /sys is: PMUs, BTF"},
    [PP_CFG_LISTEN] = {.name = "listen",
		       .env = "PEBSPROF_LISTEN",
		       .type = T_LISTEN,
		       .offset = OFF(listen),
		       .def = "",
		       .metavar = "ADDR:PORT",
		       .help = "serve /healthz and /metrics over HTTP here, e.g. :9090\n"
			       "(every interface), 127.0.0.1:9090 or [::1]:9090 (empty: off)"},
    [PP_CFG_STALL_TIMEOUT] = {.name = "stall-timeout",
			      .env = "PEBSPROF_STALL_TIMEOUT",
			      .type = T_SECS,
			      .offset = OFF(stall_timeout_ns),
			      .min = NS_PER_S,
			      .max = 86400 * NS_PER_S,
			      .metavar = "SECONDS",
			      .help = "/healthz fails when sampling made no progress this long\n"
				      "(default: two windows, at least 30)"},
    [PP_CFG_K8S_SOURCE] = {.name = "k8s-source",
			   .env = "PEBSPROF_K8S_SOURCE",
			   .type = T_ENUM,
			   .offset = OFF(k8s_source),
			   .def = "auto",
			   .names = k8s_names,
			   .metavar = "SOURCE",
			   .help = "pod metadata from: auto (the API server when\n"
				   "KUBERNETES_SERVICE_HOST is set, else none), apiserver,\n"
				   "kubelet or none"},
    [PP_CFG_K8S_API_URL] = {.name = "k8s-api-url",
			    .env = "PEBSPROF_K8S_API_URL",
			    .type = T_STR,
			    .offset = OFF(k8s_api_url),
			    .def = "",
			    .metavar = "URL",
			    .help = "API server (default: https://$KUBERNETES_SERVICE_HOST:\n"
				    "$KUBERNETES_SERVICE_PORT)"},
    [PP_CFG_K8S_KUBELET_URL] = {.name = "k8s-kubelet-url",
				.env = "PEBSPROF_K8S_KUBELET_URL",
				.type = T_STR,
				.offset = OFF(k8s_kubelet_url),
				.def = "",
				.metavar = "URL",
				.help = "kubelet (default: https://$NODE_IP:10250)"},
    [PP_CFG_K8S_TOKEN_FILE] = {.name = "k8s-token-file",
			       .env = "PEBSPROF_K8S_TOKEN_FILE",
			       .type = T_STR,
			       .offset = OFF(k8s_token_file),
			       .def = "/var/run/secrets/kubernetes.io/serviceaccount/token",
			       .metavar = "FILE",
			       .help = "service-account token, re-read every minute and on 401"},
    [PP_CFG_K8S_CA_FILE] = {.name = "k8s-ca-file",
			    .env = "PEBSPROF_K8S_CA_FILE",
			    .type = T_STR,
			    .offset = OFF(k8s_ca_file),
			    .def = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
			    .metavar = "FILE",
			    .help = "CA bundle that signed the API server's certificate"},
    [PP_CFG_K8S_KUBELET_INSECURE] = {.name = "k8s-kubelet-insecure",
				     .env = "PEBSPROF_K8S_KUBELET_INSECURE",
				     .type = T_BOOL,
				     .offset = OFF(k8s_kubelet_insecure),
				     .def = "false",
				     .help =
					 "accept the kubelet's self-signed serving certificate"},
    [PP_CFG_K8S_REFRESH] = {.name = "k8s-refresh",
			    .env = "PEBSPROF_K8S_REFRESH",
			    .type = T_SECS,
			    .offset = OFF(k8s_refresh_ns),
			    .def = "45",
			    .min = 5 * NS_PER_S,
			    .max = 3600 * NS_PER_S,
			    .metavar = "SECONDS",
			    .help = "pod list refresh period (jittered by a third)"},
    [PP_CFG_CGROUP_ROOT] = {.name = "cgroup-root",
			    .env = "PEBSPROF_CGROUP_ROOT",
			    .type = T_STR,
			    .offset = OFF(cgroup_root),
			    .def = "",
			    .metavar = "DIR",
			    .help = "the host's cgroup v2 mount (default: from mountinfo)"},
    [PP_CFG_CGROUP] = {.name = "cgroup",
		       .env = "PEBSPROF_CGROUP",
		       .type = T_STR,
		       .offset = OFF(cgroup),
		       .def = "",
		       .metavar = "PATH,...",
		       .help = "profile only tasks in these cgroups (paths under the\n"
			       "cgroup v2 mount) and below"},
    [PP_CFG_CONTAINER_ID] = {.name = "container-id",
			     .env = "PEBSPROF_CONTAINER_ID",
			     .type = T_STR,
			     .offset = OFF(container_id),
			     .def = "",
			     .metavar = "ID,...",
			     .help = "profile only these containers (ids or 12+ digit prefixes)"},
    [PP_CFG_NAMESPACE] = {.name = "namespace",
			  .env = "PEBSPROF_NAMESPACE",
			  .type = T_STR,
			  .offset = OFF(namespace_),
			  .def = "",
			  .metavar = "NS,...",
			  .help = "profile only pods of these Kubernetes namespaces\n"
				  "(needs pod metadata)"},
    [PP_CFG_VERBOSE] = {.name = "verbose",
			.short_flag = 'v',
			.env = "PEBSPROF_VERBOSE",
			.type = T_BOOL,
			.offset = OFF(verbose),
			.def = "false",
			.help = "debug logging"},
    [PP_CFG_CONFIG] = {.name = "config",
		       .env = "PEBSPROF_CONFIG",
		       .type = T_STR,
		       .offset = OFF(config),
		       .def = "",
		       .metavar = "FILE",
		       .help = "read `key = value` lines from FILE (keys: the long flags)",
		       .flags = F_NO_FILE},
    [PP_CFG_DRY_RUN] = {.name = "dry-run",
			.type = T_BOOL,
			.offset = OFF(dry_run),
			.def = "false",
			.help = "print the configuration in effect, redacted, and exit",
			.flags = F_NO_FILE | F_NO_PRINT},
    [PP_CFG_HELP] = {.name = "help",
		     .short_flag = 'h',
		     .type = T_BOOL,
		     .offset = OFF(help),
		     .def = "false",
		     .help = "this text",
		     .flags = F_NO_FILE | F_NO_PRINT},
};

_Static_assert(sizeof(table) / sizeof(table[0]) == PP_CFG_NKEYS, "one table row per key");

/* ---- errors ---------------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static void err_add(struct pp_config_errors *e,
							  const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	if (e->n >= PP_CONFIG_MAX_ERRORS) {
		e->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(e->msg[e->n], PP_CONFIG_ERROR_LEN, fmt, ap);
	va_end(ap);
	e->n++;
}

__attribute__((format(printf, 3, 4))) static int set_err(char *err, size_t errlen, const char *fmt,
							 ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

void pp_config_errors_print(const struct pp_config_errors *e, const char *prefix, FILE *f)
{
	size_t pl = strlen(prefix);
	/* "pebsprof run" and "pebsprof run: " both read as "pebsprof run: message" */
	const char *sep = pl && (prefix[pl - 1] == ':' ||
				 (pl > 1 && prefix[pl - 2] == ':' && prefix[pl - 1] == ' '))
			      ? (prefix[pl - 1] == ':' ? " " : "")
			      : ": ";

	for (size_t i = 0; i < e->n; i++)
		fprintf(f, "%s%s%s\n", prefix, sep, e->msg[i]);
	if (e->dropped)
		fprintf(f, "%s%s... and %zu more errors\n", prefix, sep, e->dropped);
}

/* ---- leaf parsers ------------------------------------------------------------------------ */

static bool is_ows(char ch)
{
	return ch == ' ' || ch == '\t';
}

static bool is_tchar(unsigned char ch)
{
	/* RFC 9110 token characters: what a header name may hold. */
	return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (unsigned char)tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

void pp_kv_list_free(struct pp_kv_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].key);
		free(l->items[i].value);
	}
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

/* Percent-decodes [s, s+len) into a new string; rejects control characters after decoding. */
static int kv_decode(const char *s, size_t len, char **out, const char **why)
{
	char *v = malloc(len + 1);
	size_t o = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '%') {
			int hi = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
			int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				free(v);
				*why = "a bad percent escape (give %XX with two hex digits)";
				return -EINVAL;
			}
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			free(v);
			*why = "a control character (CR, LF, NUL...)";
			return -EINVAL;
		}
		v[o++] = (char)ch;
	}
	v[o] = '\0';
	*out = v;
	return 0;
}

int pp_kv_list_parse(const char *buf, size_t len, struct pp_kv_list *out, char *err, size_t errlen)
{
	struct pp_kv_list l = {NULL, 0};
	size_t pos = 0, item = 0;
	int ret = 0;

	while (pos <= len && ret == 0) {
		const char *s = buf + pos, *e = memchr(s, ',', len - pos);
		size_t n = e ? (size_t)(e - s) : len - pos;
		const char *eq, *k, *v;
		size_t kl, vl;

		pos += n + 1;
		item++;
		while (n && is_ows(*s)) {
			s++;
			n--;
		}
		while (n && is_ows(s[n - 1]))
			n--;
		if (!n)
			continue; /* "a=1,,b=2" and a trailing comma are harmless */
		eq = memchr(s, '=', n);
		if (!eq) {
			ret = set_err(err, errlen, "item %zu has no '=' (give key=value pairs)",
				      item);
			break;
		}
		k = s;
		kl = (size_t)(eq - s);
		while (kl && is_ows(k[kl - 1]))
			kl--;
		v = eq + 1;
		vl = n - (size_t)(v - s);
		while (vl && is_ows(*v)) {
			v++;
			vl--;
		}
		if (!kl) {
			ret = set_err(err, errlen, "item %zu has an empty key", item);
			break;
		}
		for (size_t i = 0; i < kl; i++) {
			if (!is_tchar((unsigned char)k[i])) {
				ret = set_err(err, errlen,
					      "item %zu: key '%.*s' holds a character a header "
					      "name cannot have",
					      item, (int)(kl > ECHO_LEN ? ECHO_LEN : kl), k);
				break;
			}
		}
		if (ret)
			break;
		if (l.n == MAX_KV_ITEMS) {
			ret = set_err(err, errlen, "more than %d items", MAX_KV_ITEMS);
			break;
		}
		struct pp_kv *grown = realloc(l.items, (l.n + 1) * sizeof(*grown));
		const char *why = NULL;

		if (!grown) {
			ret = -ENOMEM;
			break;
		}
		l.items = grown;
		l.items[l.n].key = strndup(k, kl);
		l.items[l.n].value = NULL;
		if (!l.items[l.n].key) {
			ret = -ENOMEM;
			break;
		}
		l.n++;
		ret = kv_decode(v, vl, &l.items[l.n - 1].value, &why);
		if (ret == -EINVAL)
			set_err(err, errlen, "item %zu: the value of '%.*s' holds %s", item,
				(int)(kl > ECHO_LEN ? ECHO_LEN : kl), k, why);
		else if (ret == -ENOMEM)
			set_err(err, errlen, "out of memory");
	}
	if (ret) {
		pp_kv_list_free(&l);
		return ret;
	}
	*out = l;
	return 0;
}

static int check_port(const char *p, size_t n, char *err, size_t errlen)
{
	unsigned long port = 0;

	if (!n || n > 5)
		return set_err(err, errlen, "bad port '%.*s' (give 1..65535)", (int)n, p);
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return set_err(err, errlen, "bad port '%.*s' (give 1..65535)", (int)n, p);
		port = port * 10 + (unsigned long)(p[i] - '0');
	}
	if (port < 1 || port > 65535)
		return set_err(err, errlen, "bad port '%.*s' (give 1..65535)", (int)n, p);
	return 0;
}

/* host[:port] where host is a name, IPv4, or [IPv6]; empty host only when allowed. */
static int check_hostport(const char *s, size_t n, bool need_host, bool need_port, char *err,
			  size_t errlen)
{
	const char *colon;
	size_t hl;

	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return set_err(err, errlen, "unclosed '[' in the host");
		hl = (size_t)(close - s);
		if (hl < 3)
			return set_err(err, errlen, "empty IPv6 address in brackets");
		for (size_t i = 1; i < hl; i++) {
			unsigned char ch = (unsigned char)s[i];

			if (!isxdigit(ch) && ch != ':' && ch != '.')
				return set_err(err, errlen, "bad character '%c' in an IPv6 address",
					       ch);
		}
		colon = close + 1;
		if (colon == s + n) {
			if (need_port)
				return set_err(err, errlen, "no port (give ADDR:PORT)");
			return 0;
		}
		if (*colon != ':')
			return set_err(err, errlen, "text after ']' that is not ':PORT'");
		return check_port(colon + 1, n - (size_t)(colon + 1 - s), err, errlen);
	}
	colon = memchr(s, ':', n);
	hl = colon ? (size_t)(colon - s) : n;
	if (!hl && need_host)
		return set_err(err, errlen, "no host");
	for (size_t i = 0; i < hl; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_')
			return set_err(err, errlen, "bad character '%c' in the host", ch);
	}
	if (!colon) {
		if (need_port)
			return set_err(err, errlen, "no port (give ADDR:PORT, e.g. :9090)");
		return 0;
	}
	if (memchr(colon + 1, ':', n - hl - 1))
		return set_err(err, errlen, "an IPv6 address goes in brackets, e.g. [::1]:9090");
	return check_port(colon + 1, n - hl - 1, err, errlen);
}

int pp_url_check(const char *buf, size_t len, char *err, size_t errlen)
{
	const char *auth, *end = buf + len, *p, *at;
	size_t i;

	if (!len)
		return set_err(err, errlen, "empty URL");
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch <= 0x20 || ch >= 0x7f)
			return set_err(err, errlen, "a space, control or non-ASCII character");
	}
	if (len > 7 && !strncasecmp(buf, "http://", 7))
		auth = buf + 7;
	else if (len > 8 && !strncasecmp(buf, "https://", 8))
		auth = buf + 8;
	else
		return set_err(err, errlen, "the scheme must be http:// or https://");
	if (memchr(buf, '#', len))
		return set_err(err, errlen, "a fragment ('#...') has no place in an endpoint");
	for (p = auth; p < end && *p != '/' && *p != '?'; p++)
		;
	/* userinfo, if any, ends at the last '@' of the authority */
	at = NULL;
	for (const char *q = auth; q < p; q++)
		if (*q == '@')
			at = q;
	if (at)
		auth = at + 1;
	if (auth == p)
		return set_err(err, errlen, "no host");
	return check_hostport(auth, (size_t)(p - auth), true, false, err, errlen);
}

int pp_listen_check(const char *buf, size_t len, char *err, size_t errlen)
{
	if (!len)
		return 0;
	return check_hostport(buf, len, false, true, err, errlen);
}

int pp_size_parse(const char *buf, size_t len, uint64_t *out, char *err, size_t errlen)
{
	static const struct {
		const char *s;
		uint64_t mult;
	} suffixes[] = {{"", 1},    {"b", 1},	  {"k", KIB}, {"kib", KIB},
			{"m", MIB}, {"mib", MIB}, {"g", GIB}, {"gib", GIB}};
	uint64_t v = 0;
	size_t i = 0, sl;

	while (i < len && isdigit((unsigned char)buf[i])) {
		unsigned d = (unsigned)(buf[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return set_err(err, errlen, "too large");
		v = v * 10 + d;
		i++;
	}
	if (!i)
		return set_err(err, errlen,
			       "not a size (give bytes, or a number with KiB, MiB "
			       "or GiB)");
	while (i < len && is_ows(buf[i]))
		i++;
	sl = len - i;
	for (size_t s = 0; s < sizeof(suffixes) / sizeof(suffixes[0]); s++) {
		if (strlen(suffixes[s].s) == sl && !strncasecmp(buf + i, suffixes[s].s, sl)) {
			if (suffixes[s].mult > 1 && v > UINT64_MAX / suffixes[s].mult)
				return set_err(err, errlen, "too large");
			*out = v * suffixes[s].mult;
			return 0;
		}
	}
	if (sl == 2 && strchr("kKmMgG", buf[i]) && (buf[i + 1] == 'B' || buf[i + 1] == 'b'))
		return set_err(err, errlen, "say KiB, MiB or GiB (powers of 1024), not '%.2s'",
			       buf + i);
	return set_err(err, errlen, "unknown suffix '%.*s' (use KiB, MiB or GiB)",
		       (int)(sl > 16 ? 16 : sl), buf + i);
}

static int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- the table ----------------------------------------------------------------------------- */

const char *pp_config_key_name(enum pp_config_key k)
{
	return (unsigned)k < PP_CFG_NKEYS ? table[k].name : NULL;
}

const char *pp_config_key_env(enum pp_config_key k)
{
	return (unsigned)k < PP_CFG_NKEYS ? table[k].env : NULL;
}

static int key_lookup_n(const char *name, size_t n)
{
	for (int k = 0; k < PP_CFG_NKEYS; k++)
		if (strlen(table[k].name) == n && !memcmp(table[k].name, name, n))
			return k;
	return -1;
}

int pp_config_key_lookup(const char *name)
{
	return key_lookup_n(name, strlen(name));
}

static void *field(struct pp_run_config *c, int k)
{
	return (char *)c + table[k].offset;
}

static const void *cfield(const struct pp_run_config *c, int k)
{
	return (const char *)c + table[k].offset;
}

/* Copies a URL for messages and printing with any user:password@ replaced. */
static void url_redact(const char *u, char *out, size_t outlen)
{
	const char *auth = strstr(u, "://"), *p, *at = NULL;

	if (!auth) {
		snprintf(out, outlen, "%s", u);
		return;
	}
	auth += 3;
	for (p = auth; *p && *p != '/' && *p != '?'; p++)
		if (*p == '@')
			at = p;
	if (!at) {
		snprintf(out, outlen, "%s", u);
		return;
	}
	snprintf(out, outlen, "%.*s<redacted>%s", (int)(auth - u), u, at);
}

/*
 * Parses s (NUL-terminated, already checked for embedded NULs) as key k and stores it. On a
 * bad value returns -EINVAL with the reason in err and leaves the field unchanged.
 */
static int store(struct pp_run_config *c, int k, const char *s, char *err, size_t errlen)
{
	const struct option_def *o = &table[k];
	size_t len = strlen(s);
	char why[PP_CONFIG_ERROR_LEN / 2];
	uint64_t v;
	int ret, b;

	why[0] = '\0';
	switch (o->type) {
	case T_PATH:
		if (!len)
			return set_err(err, errlen, "an empty path");
		/* fall through */
	case T_STR:
	case T_EVENT:
	case T_URL:
	case T_LISTEN: {
		char *copy;

		if (o->type == T_EVENT) {
			struct pp_event_spec spec;

			if (pp_event_spec_parse(s, len, &spec, why, sizeof(why)))
				return set_err(err, errlen, "bad event '%.*s': %s", ECHO_LEN, s,
					       why);
		} else if (o->type == T_URL && len && pp_url_check(s, len, why, sizeof(why))) {
			char red[ECHO_LEN + 16];

			url_redact(s, red, sizeof(red));
			return set_err(err, errlen, "bad URL '%s': %s", red, why);
		} else if (o->type == T_LISTEN && pp_listen_check(s, len, why, sizeof(why))) {
			return set_err(err, errlen, "bad address '%.*s': %s", ECHO_LEN, s, why);
		}
		copy = strdup(s);
		if (!copy)
			return -ENOMEM;
		free(*(char **)field(c, k));
		*(char **)field(c, k) = copy;
		return 0;
	}
	case T_KV: {
		struct pp_kv_list l;

		ret = pp_kv_list_parse(s, len, &l, why, sizeof(why));
		if (ret == -EINVAL)
			return set_err(err, errlen, "bad %s syntax: %s",
				       k == PP_CFG_HEADERS ? "header" : "attribute", why);
		if (ret)
			return ret;
		pp_kv_list_free(field(c, k));
		*(struct pp_kv_list *)field(c, k) = l;
		return 0;
	}
	case T_U64:
		ret = pp_parse_u64(s, o->min, o->max, &v);
		if (ret)
			return set_err(err, errlen, "'%.*s' is not a whole number in %llu..%llu",
				       ECHO_LEN, s, (unsigned long long)o->min,
				       (unsigned long long)o->max);
		*(uint64_t *)field(c, k) = v;
		return 0;
	case T_SECS:
		ret = pp_parse_seconds(s, &v);
		if (ret || v < o->min || v > o->max)
			return set_err(err, errlen,
				       "'%.*s' is not a duration in seconds from %g to %llu "
				       "(e.g. 10 or 2.5)",
				       ECHO_LEN, s, (double)o->min / NS_PER_S,
				       (unsigned long long)(o->max / NS_PER_S));
		*(uint64_t *)field(c, k) = v;
		return 0;
	case T_SIZE:
		ret = pp_size_parse(s, len, &v, why, sizeof(why));
		if (ret)
			return set_err(err, errlen, "bad size '%.*s': %s", ECHO_LEN, s, why);
		if (v < o->min || v > o->max)
			return set_err(err, errlen, "size '%.*s' is out of range %lluKiB..%lluGiB",
				       ECHO_LEN, s, (unsigned long long)(o->min / KIB),
				       (unsigned long long)(o->max / GIB));
		*(uint64_t *)field(c, k) = v;
		return 0;
	case T_ENUM:
		if (k == PP_CFG_USER_UNWIND && !strcmp(s, "shim")) { /* fp's name before tables */
			*(int *)field(c, k) = PP_USTACK_SHIM;
			return 0;
		}
		for (int i = 0; o->names[i]; i++) {
			if (!strcmp(s, o->names[i])) {
				*(int *)field(c, k) = i;
				return 0;
			}
		}
		{
			char list[128] = "";

			for (int i = 0; o->names[i]; i++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
					 i ? ", " : "", o->names[i]);
			return set_err(err, errlen, "'%.*s' is not one of %s", ECHO_LEN, s, list);
		}
	case T_BOOL:
		if (parse_bool(s, &b))
			return set_err(err, errlen,
				       "'%.*s' is not a boolean (true/false, yes/no, on/off, 1/0)",
				       ECHO_LEN, s);
		*(int *)field(c, k) = b;
		return 0;
	}
	return -EINVAL;
}

/* Loading for another subcommand sets only its keys; the others keep their defaults unchecked. */
static bool key_wanted(const struct pp_run_config *c, int k)
{
	return !c->keys_wanted || (c->keys_wanted & PP_CONFIG_KEY_BIT(k));
}

static void set_origin(struct pp_run_config *c, int k, enum pp_config_source src, const char *fmt,
		       ...) __attribute__((format(printf, 4, 5)));

static void set_origin(struct pp_run_config *c, int k, enum pp_config_source src, const char *fmt,
		       ...)
{
	va_list ap;

	if (!key_wanted(c, k))
		return;
	c->origin[k].src = src;
	va_start(ap, fmt);
	vsnprintf(c->origin[k].where, sizeof(c->origin[k].where), fmt, ap);
	va_end(ap);
}

/*
 * Stores [val, val+len) as key k; on a bad value adds "loc: reason" to errs. Returns 0,
 * -EINVAL or -ENOMEM.
 */
static int apply(struct pp_run_config *c, int k, const char *val, size_t len,
		 struct pp_config_errors *errs, const char *loc)
{
	char why[PP_CONFIG_ERROR_LEN];
	enum pp_text_fault fault;
	size_t at;
	char *s;
	int ret;

	if (!key_wanted(c, k))
		return 0;
	if (memchr(val, '\0', len)) {
		err_add(errs, "%s: the value holds a NUL byte", loc);
		return -EINVAL;
	}
	if (len > MAX_VALUE_LEN) {
		err_add(errs, "%s: the value is longer than %d bytes", loc, MAX_VALUE_LEN);
		return -EINVAL;
	}
	/* values end up in labels, HTTP headers and log lines: text only, no line breaks */
	fault = pp_text_check(val, len, &at);
	if (fault) {
		err_add(errs, "%s: the value %s at byte %zu (0x%02x); give plain UTF-8 text", loc,
			fault == PP_TEXT_BAD_UTF8 ? "is not valid UTF-8"
						  : "holds a control character",
			at, (unsigned char)val[at]);
		return -EINVAL;
	}
	s = strndup(val, len);
	if (!s) {
		err_add(errs, "%s: out of memory", loc);
		return -ENOMEM;
	}
	ret = store(c, k, s, why, sizeof(why));
	free(s);
	if (ret == -EINVAL)
		err_add(errs, "%s: %s", loc, why);
	else if (ret)
		err_add(errs, "%s: out of memory", loc);
	return ret;
}

/* ---- init / fini --------------------------------------------------------------------------- */

void pp_run_config_fini(struct pp_run_config *c)
{
	if (!c)
		return;
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		if (table[k].type == T_KV)
			pp_kv_list_free(field(c, k));
		else if (table[k].type <= T_URL || table[k].type == T_LISTEN)
			free(*(char **)field(c, k));
	}
	memset(c, 0, sizeof(*c));
}

int pp_run_config_init(struct pp_run_config *c)
{
	char why[PP_CONFIG_ERROR_LEN];
	struct utsname u;
	int ret;

	memset(c, 0, sizeof(*c));
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const char *def = table[k].def;

		set_origin(c, k, PP_SRC_DEFAULT, "default");
		if (k == PP_CFG_NODE_NAME)
			def = uname(&u) == 0 ? u.nodename : "";
		if (!def) {
			if (table[k].type <= T_URL || table[k].type == T_LISTEN)
				def = "";
			else
				continue; /* zero */
		}
		ret = store(c, k, def, why, sizeof(why));
		if (ret) {
			/* a default that does not parse is a bug in the table; tests catch it */
			pp_run_config_fini(c);
			return ret == -ENOMEM ? -ENOMEM : -EINVAL;
		}
	}
	return 0;
}

/* ---- config file ----------------------------------------------------------------------- */

/* Suggests 'output-dir' for 'output_dir' or 'OUTPUT-DIR'. */
static int key_suggest(const char *s, size_t n)
{
	char norm[64];

	if (n >= sizeof(norm))
		return -1;
	for (size_t i = 0; i < n; i++)
		norm[i] = s[i] == '_' ? '-' : (char)tolower((unsigned char)s[i]);
	return key_lookup_n(norm, n);
}

/*
 * Parses the value part of a line: "quoted \"text\"", 'literal', or bare text ending at the
 * line end or at whitespace followed by '#'. The result goes to *out (malloc'd).
 */
static int parse_value(const char *s, size_t n, char **out, size_t *outlen, const char **why)
{
	char *v = malloc(n + 1);
	size_t o = 0, i = 0;

	if (!v)
		return -ENOMEM;
	*why = NULL;
	if (n && (s[0] == '"' || s[0] == '\'')) {
		char q = s[0];

		for (i = 1; i < n && s[i] != q; i++) {
			if (q == '"' && s[i] == '\\') {
				if (i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\')) {
					v[o++] = s[++i];
					continue;
				}
				*why = "an unknown escape in a quoted value (only \\\" and \\\\)";
				goto bad;
			}
			v[o++] = s[i];
		}
		if (i == n) {
			*why = "an unterminated quote";
			goto bad;
		}
		for (i++; i < n && is_ows(s[i]); i++)
			;
		if (i < n && s[i] != '#') {
			*why = "text after the closing quote";
			goto bad;
		}
	} else {
		for (i = 0; i < n; i++) {
			if (s[i] == '#' && (i == 0 || is_ows(s[i - 1])))
				break;
			v[o++] = s[i];
		}
		while (o && is_ows(v[o - 1]))
			o--;
	}
	v[o] = '\0';
	*out = v;
	*outlen = o;
	return 0;
bad:
	free(v);
	return -EINVAL;
}

int pp_config_file_parse(const char *buf, size_t len, const char *name, struct pp_run_config *c,
			 struct pp_config_errors *errs)
{
	size_t seen[PP_CFG_NKEYS] = {0};
	size_t pos = 0, lineno = 0;
	int ret = 0;

	while (pos < len) {
		const char *line = buf + pos, *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos, i = 0, ks, kl;
		char loc[PP_CONFIG_WHERE_LEN + 64];
		const char *why;
		char *val;
		size_t vl;
		int k, r;

		pos += n + 1;
		lineno++;
		if (n && line[n - 1] == '\r')
			n--;
		while (i < n && (is_ows(line[i])))
			i++;
		if (i == n || line[i] == '#')
			continue;
		if (memchr(line, '\0', n)) {
			err_add(errs, "%s:%zu: a NUL byte (is this a text file?)", name, lineno);
			ret = -EINVAL;
			continue;
		}
		ks = i;
		while (i < n && !is_ows(line[i]) && line[i] != '=')
			i++;
		kl = i - ks;
		while (i < n && is_ows(line[i]))
			i++;
		if (!kl || i == n || line[i] != '=') {
			err_add(errs, "%s:%zu: expected 'key = value', got '%.*s'", name, lineno,
				(int)(n - ks > ECHO_LEN ? ECHO_LEN : n - ks), line + ks);
			ret = -EINVAL;
			continue;
		}
		i++;
		while (i < n && is_ows(line[i]))
			i++;
		k = key_lookup_n(line + ks, kl);
		if (k < 0) {
			int sug = key_suggest(line + ks, kl);

			if (sug >= 0 && !(table[sug].flags & F_NO_FILE))
				err_add(errs, "%s:%zu: unknown key '%.*s' (did you mean '%s'?)",
					name, lineno, (int)(kl > ECHO_LEN ? ECHO_LEN : kl),
					line + ks, table[sug].name);
			else
				err_add(errs, "%s:%zu: unknown key '%.*s'", name, lineno,
					(int)(kl > ECHO_LEN ? ECHO_LEN : kl), line + ks);
			ret = -EINVAL;
			continue;
		}
		if (table[k].flags & F_NO_FILE) {
			err_add(errs, "%s:%zu: '%s' cannot be set in a config file (it is a flag)",
				name, lineno, table[k].name);
			ret = -EINVAL;
			continue;
		}
		if (seen[k]) {
			err_add(errs, "%s:%zu: '%s' is set twice (first at line %zu)", name, lineno,
				table[k].name, seen[k]);
			ret = -EINVAL;
			continue;
		}
		seen[k] = lineno;
		r = parse_value(line + i, n - i, &val, &vl, &why);
		if (r == -ENOMEM) {
			err_add(errs, "%s:%zu: out of memory", name, lineno);
			return -ENOMEM;
		}
		if (r) {
			err_add(errs, "%s:%zu: '%s': %s", name, lineno, table[k].name, why);
			ret = -EINVAL;
			continue;
		}
		snprintf(loc, sizeof(loc), "%s:%zu: '%s'", name, lineno, table[k].name);
		r = apply(c, k, val, vl, errs, loc);
		free(val);
		if (r == -ENOMEM)
			return r;
		if (r) {
			ret = -EINVAL;
			continue;
		}
		set_origin(c, k, PP_SRC_FILE, "%s:%zu", name, lineno);
	}
	return ret;
}

#define MAX_CONFIG_FILE (1024 * 1024)

/*
 * The config file, opened so that nothing but a regular file is read: a FIFO or a device
 * put at its path would block start-up forever or read without end.
 */
static FILE *open_config_file(const char *path, struct pp_config_errors *errs)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	FILE *f;

	if (fd < 0) {
		err_add(errs,
			"cannot read config file '%s': %s (check --config or PEBSPROF_CONFIG)",
			path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		err_add(errs,
			"config file '%s' is not a regular file (a directory, FIFO, socket or "
			"device); give the path of a file (check --config or PEBSPROF_CONFIG)",
			path);
		close(fd);
		return NULL;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	f = fdopen(fd, "r");
	if (!f) {
		err_add(errs, "cannot read config file '%s': %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

int pp_config_file_load(const char *path, struct pp_run_config *c, struct pp_config_errors *errs)
{
	FILE *f = open_config_file(path, errs);
	char *buf;
	size_t n;
	int ret;

	if (!f)
		return -EINVAL;
	buf = malloc(MAX_CONFIG_FILE + 1);
	if (!buf) {
		fclose(f);
		err_add(errs, "%s: out of memory", path);
		return -ENOMEM;
	}
	n = fread(buf, 1, MAX_CONFIG_FILE + 1, f);
	if (ferror(f)) {
		/* a directory opens but does not read */
		ret = errno ? errno : EIO;
		err_add(errs,
			"cannot read config file '%s': %s (check --config or PEBSPROF_CONFIG)",
			path, strerror(ret));
		fclose(f);
		free(buf);
		return -EINVAL;
	}
	fclose(f);
	if (n > MAX_CONFIG_FILE) {
		err_add(errs, "config file '%s' is larger than %d bytes", path, MAX_CONFIG_FILE);
		free(buf);
		return -EINVAL;
	}
	ret = pp_config_file_parse(buf, n, path, c, errs);
	free(buf);
	return ret;
}

/* ---- environment ------------------------------------------------------------------------ */

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++) {
		/* an empty variable counts as unset, as the OpenTelemetry SDKs do */
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return (*envp)[n + 1] ? *envp + n + 1 : NULL;
	}
	return NULL;
}

/* A base URL with the profiles signal's path after its own path (malloc'ed; NULL: memory). */
static char *profiles_url(const char *base)
{
	size_t bl = strlen(base);
	char *full;

	while (bl && base[bl - 1] == '/')
		bl--;
	return asprintf(&full, "%.*s%s", (int)bl, base, PP_OTLP_PROFILES_PATH) < 0 ? NULL : full;
}

static int apply_env(struct pp_run_config *c, char *const *envp, struct pp_config_errors *errs)
{
	char loc[160];
	int ret = 0;

	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const struct option_def *o = &table[k];
		const char *v = o->env ? env_get(envp, o->env) : NULL;
		int r;

		if (v) {
			snprintf(loc, sizeof(loc), "environment %s ('%s')", o->env, o->name);
			r = apply(c, k, v, strlen(v), errs, loc);
			if (r == -ENOMEM)
				return r;
			if (r)
				ret = -EINVAL;
			else
				set_origin(c, k, PP_SRC_ENV, "%s", o->env);
			continue;
		}
		v = o->env_base ? env_get(envp, o->env_base) : NULL;
		if (v) {
			/* OTLP's base endpoint: the signal path goes after the base's own path */
			char *full = profiles_url(v);

			if (!full)
				return -ENOMEM;
			snprintf(loc, sizeof(loc), "environment %s ('%s')", o->env_base, o->name);
			/* check the base as given, so the message shows what the user wrote */
			char why[PP_CONFIG_ERROR_LEN / 2];

			if (pp_url_check(v, strlen(v), why, sizeof(why))) {
				char red[ECHO_LEN + 16];

				url_redact(v, red, sizeof(red));
				err_add(errs, "%s: bad URL '%s': %s", loc, red, why);
				r = -EINVAL;
			} else {
				r = apply(c, k, full, strlen(full), errs, loc);
			}
			free(full);
			if (r == -ENOMEM)
				return r;
			if (r)
				ret = -EINVAL;
			else
				set_origin(c, k, PP_SRC_ENV, "%s", o->env_base);
		}
	}
	return ret;
}

/* ---- cross-key rules ----------------------------------------------------------------------- */

static const char *origin_text(const struct pp_run_config *c, int k, char *buf, size_t len)
{
	const struct pp_config_origin *o = &c->origin[k];

	switch (o->src) {
	case PP_SRC_FILE:
		snprintf(buf, len, "file %s", o->where);
		break;
	case PP_SRC_ENV:
		snprintf(buf, len, "env %s", o->where);
		break;
	case PP_SRC_FLAG:
		snprintf(buf, len, "flag %s", o->where);
		break;
	default:
		snprintf(buf, len, "default");
		break;
	}
	return buf;
}

/* Whether url (already checked) has a path other than "/". */
static bool url_has_path(const char *url)
{
	const char *p = strstr(url, "://");
	const char *slash = p ? strchr(p + 3, '/') : NULL;

	return slash && slash[1] != '\0';
}

int pp_run_config_finish(struct pp_run_config *c, struct pp_config_errors *errs)
{
	enum pp_config_source fs = c->origin[PP_CFG_FREQ].src, ps = c->origin[PP_CFG_PERIOD].src;
	char a[PP_CONFIG_WHERE_LEN + 8], b[PP_CONFIG_WHERE_LEN + 8];
	int ret = 0;

	if (ps != PP_SRC_DEFAULT) {
		if (fs == ps) {
			err_add(errs,
				"freq (%s) and period (%s) exclude each other: set one of them",
				origin_text(c, PP_CFG_FREQ, a, sizeof(a)),
				origin_text(c, PP_CFG_PERIOD, b, sizeof(b)));
			ret = -EINVAL;
		} else if (fs > ps) {
			c->period = 0; /* the later layer wins */
		} else {
			c->freq_hz = 0;
		}
	}
	if (c->origin[PP_CFG_STALL_TIMEOUT].src == PP_SRC_DEFAULT)
		c->stall_timeout_ns =
		    c->interval_ns * 2 > DEFAULT_STALL_NS ? c->interval_ns * 2 : DEFAULT_STALL_NS;
	if (c->origin[PP_CFG_EXPORTER].src == PP_SRC_DEFAULT)
		c->exporter = c->endpoint[0] ? PP_EXPORTER_OTLP : PP_EXPORTER_FILE;
	/*
	 * The Collector's and Alloy's `endpoint` convention for a flag or the file: a URL
	 * without a path is a base the signal's path goes after; with a path it is used as is
	 * (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT is always used as is; the base variable got
	 * its path when it was read).
	 */
	if (c->exporter == PP_EXPORTER_OTLP && c->endpoint[0] &&
	    (c->origin[PP_CFG_ENDPOINT].src == PP_SRC_FLAG ||
	     c->origin[PP_CFG_ENDPOINT].src == PP_SRC_FILE) &&
	    !url_has_path(c->endpoint)) {
		char *full = profiles_url(c->endpoint);

		if (!full)
			return -ENOMEM;
		free(c->endpoint);
		c->endpoint = full;
	}
	if (c->origin[PP_CFG_EXPORTER].src != PP_SRC_DEFAULT && c->exporter != PP_EXPORTER_FILE &&
	    !c->endpoint[0]) {
		err_add(errs,
			"exporter '%s' (%s) needs an endpoint: give --endpoint URL, endpoint in "
			"the config file or OTEL_EXPORTER_OTLP_ENDPOINT, or use exporter file",
			exporter_names[c->exporter], origin_text(c, PP_CFG_EXPORTER, a, sizeof(a)));
		ret = -EINVAL;
	}
	return ret;
}

/* ---- flags and the whole load ------------------------------------------------------------ */

struct flag_value {
	int key;
	const char *val;
};

static int load(int argc, char **argv, char *const *envp, uint64_t keys, struct pp_run_config *out,
		struct pp_config_errors *errs)
{
	struct option longopts[PP_CFG_NKEYS + 1];
	char shortopts[3 + 2 * PP_CFG_NKEYS] = "+:";
	struct flag_value *flags = NULL;
	size_t nflags = 0, so = 2;
	const char *config_path = NULL;
	int ret, bad = 0, c;

	if (errs) {
		errs->n = 0;
		errs->dropped = 0;
	}
	ret = pp_run_config_init(out);
	if (ret) {
		err_add(errs, "cannot set the defaults: %s", strerror(-ret));
		return ret;
	}
	out->keys_wanted = keys;
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		bool arg = table[k].type != T_BOOL;

		longopts[k] = (struct option){table[k].name, arg ? required_argument : no_argument,
					      NULL, 256 + k};
		if (table[k].short_flag) {
			shortopts[so++] = table[k].short_flag;
			if (arg)
				shortopts[so++] = ':';
		}
	}
	memset(&longopts[PP_CFG_NKEYS], 0, sizeof(longopts[0]));
	shortopts[so] = '\0';

	flags = calloc(argc > 0 ? (size_t)argc : 1, sizeof(*flags));
	if (!flags) {
		err_add(errs, "out of memory");
		return -ENOMEM;
	}
	optind = 0; /* glibc: a full re-initialisation, so load can run more than once */
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const char *opt = argv[optind - 1];
		int k = -1;

		if (c == '?' || c == ':') {
			if (optopt >= 256 && optopt < 256 + PP_CFG_NKEYS && c == '?')
				err_add(errs, "--%s takes no value", table[optopt - 256].name);
			else if (c == ':')
				err_add(errs, "option '%s' needs a value", opt);
			else if (optopt)
				err_add(errs, "unknown option '-%c'", optopt);
			else
				err_add(errs, "unknown option '%s'", opt);
			bad = 1;
			continue;
		}
		if (c >= 256)
			k = c - 256;
		else
			for (int i = 0; i < PP_CFG_NKEYS; i++)
				if (table[i].short_flag == c)
					k = i;
		if (k < 0)
			continue;
		if (k == PP_CFG_HELP) {
			out->help = 1;
			set_origin(out, k, PP_SRC_FLAG, "--help");
			free(flags);
			return 0;
		}
		flags[nflags].key = k;
		flags[nflags].val = table[k].type == T_BOOL ? "true" : optarg;
		nflags++;
		if (k == PP_CFG_CONFIG)
			config_path = optarg;
	}
	for (int i = optind; i < argc; i++) {
		err_add(errs, "unexpected argument '%.*s': run takes options only", ECHO_LEN,
			argv[i]);
		bad = 1;
	}
	for (size_t i = 0; i < nflags; i++) {
		if (key_wanted(out, flags[i].key))
			continue;
		err_add(errs, "--%s is an option of run only", table[flags[i].key].name);
		bad = 1;
	}

	if (!config_path)
		config_path = env_get(envp, "PEBSPROF_CONFIG");
	if (config_path && *config_path) {
		ret = pp_config_file_load(config_path, out, errs);
		if (ret == -ENOMEM)
			goto out;
		bad |= ret != 0;
	}
	ret = apply_env(out, envp, errs);
	if (ret == -ENOMEM)
		goto out;
	bad |= ret != 0;
	for (size_t i = 0; i < nflags; i++) {
		int k = flags[i].key;
		char loc[96];

		snprintf(loc, sizeof(loc), "--%s", table[k].name);
		ret = apply(out, k, flags[i].val, strlen(flags[i].val), errs, loc);
		if (ret == -ENOMEM)
			goto out;
		if (ret)
			bad = 1;
		else
			set_origin(out, k, PP_SRC_FLAG, "--%s", table[k].name);
	}
	ret = pp_run_config_finish(out, errs);
	bad |= ret != 0;
	ret = bad ? -EINVAL : 0;
out:
	free(flags);
	return ret;
}

int pp_run_config_load(int argc, char **argv, char *const *envp, struct pp_run_config *out,
		       struct pp_config_errors *errs)
{
	return load(argc, argv, envp, 0, out, errs);
}

int pp_run_config_load_keys(int argc, char **argv, char *const *envp, uint64_t keys,
			    struct pp_run_config *out, struct pp_config_errors *errs)
{
	return load(argc, argv, envp, keys ? keys : ~0ull, out, errs);
}

const char *pp_run_config_node_name(const struct pp_run_config *c)
{
	return c->origin[PP_CFG_NODE_NAME].src != PP_SRC_DEFAULT && c->node_name[0] ? c->node_name
										    : NULL;
}

struct pp_k8s_meta_opts pp_run_config_k8s_opts(const struct pp_run_config *c)
{
	return (struct pp_k8s_meta_opts){
	    .source = c->k8s_source,
	    .api_url = c->k8s_api_url[0] ? c->k8s_api_url : NULL,
	    .kubelet_url = c->k8s_kubelet_url[0] ? c->k8s_kubelet_url : NULL,
	    .node_name = pp_run_config_node_name(c),
	    .token_path = c->k8s_token_file,
	    .ca_path = c->k8s_ca_file,
	    .kubelet_insecure = c->k8s_kubelet_insecure,
	    .refresh_ms = (uint32_t)(c->k8s_refresh_ns / 1000000),
	};
}

/* ---- printing ------------------------------------------------------------------------------ */

static void print_quoted(const char *s, FILE *f)
{
	size_t n = strlen(s);
	bool plain = n && !strpbrk(s, " \t#\"'\\"); /* spaces would blur the trailer */

	if (plain) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void print_kv(const struct pp_kv_list *l, bool secret, FILE *f)
{
	for (size_t i = 0; i < l->n; i++) {
		fprintf(f, "%s%s=", i ? "," : "", l->items[i].key);
		if (secret) {
			fputs("<redacted>", f);
			continue;
		}
		for (const unsigned char *p = (const unsigned char *)l->items[i].value; *p; p++) {
			if (isalnum(*p) || strchr("-._~:/@!$&'()*+;", *p))
				fputc(*p, f);
			else
				fprintf(f, "%%%02X", *p);
		}
	}
}

static void print_secs(uint64_t ns, FILE *f)
{
	char frac[16];
	size_t n;

	if (ns % NS_PER_S == 0) {
		fprintf(f, "%llu", (unsigned long long)(ns / NS_PER_S));
		return;
	}
	snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(ns % NS_PER_S));
	for (n = strlen(frac); n > 1 && frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	fprintf(f, "%llu.%s", (unsigned long long)(ns / NS_PER_S), frac);
}

static void print_size(uint64_t v, FILE *f)
{
	if (v && v % GIB == 0)
		fprintf(f, "%lluGiB", (unsigned long long)(v / GIB));
	else if (v && v % MIB == 0)
		fprintf(f, "%lluMiB", (unsigned long long)(v / MIB));
	else if (v && v % KIB == 0)
		fprintf(f, "%lluKiB", (unsigned long long)(v / KIB));
	else
		fprintf(f, "%llu", (unsigned long long)v);
}

void pp_run_config_print(const struct pp_run_config *c, FILE *f)
{
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const struct option_def *o = &table[k];
		const void *p = cfield(c, k);
		char where[PP_CONFIG_WHERE_LEN + 16];

		if (o->flags & F_NO_PRINT)
			continue;
		fprintf(f, "%s = ", o->name);
		switch (o->type) {
		case T_URL: {
			const char *u = *(char *const *)p;
			size_t n = strlen(u ? u : "") + 16;
			char *red = malloc(n);

			if (red) {
				url_redact(u ? u : "", red, n);
				print_quoted(red, f);
				free(red);
			}
			break;
		}
		case T_STR:
		case T_PATH:
		case T_EVENT:
		case T_LISTEN: {
			const char *s = *(char *const *)p;

			if (o->flags & F_SECRET)
				fputs(s && *s ? "<redacted>" : "\"\"", f);
			else
				print_quoted(s ? s : "", f);
			break;
		}
		case T_KV: {
			const struct pp_kv_list *l = p;

			if (!l->n)
				fputs("\"\"", f);
			else
				print_kv(l, o->flags & F_SECRET, f);
			break;
		}
		case T_U64:
			fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)p);
			break;
		case T_SECS:
			print_secs(*(const uint64_t *)p, f);
			break;
		case T_SIZE:
			print_size(*(const uint64_t *)p, f);
			break;
		case T_ENUM:
			fputs(o->names[*(const int *)p], f);
			break;
		case T_BOOL:
			fputs(*(const int *)p ? "true" : "false", f);
			break;
		}
		if (c->origin[k].src == PP_SRC_DEFAULT)
			fputs("   (default)\n", f);
		else
			fprintf(f, "   (from %s)\n", origin_text(c, k, where, sizeof(where)));
	}
}

void pp_run_config_usage(FILE *f)
{
	fprintf(f,
		"usage: pebsprof run [--endpoint URL] [--config FILE] [OPTIONS]\n"
		"\n"
		"Samples this machine continuously and exports a profile every interval: to an\n"
		"OTLP endpoint (OpenTelemetry Collector, Pyroscope) or, without one, to rolling\n"
		"files in output-dir.\n"
		"\n");
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const struct option_def *o = &table[k];
		char left[64];
		const char *h = o->help;
		int n;

		if (o->short_flag)
			n = snprintf(left, sizeof(left), "  -%c, --%s", o->short_flag, o->name);
		else
			n = snprintf(left, sizeof(left), "      --%s", o->name);
		if (o->metavar)
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->metavar);
		fprintf(f, "%-30s", left);
		if (strlen(left) >= 30)
			fprintf(f, "\n%30s", "");
		/* continuation lines of the help are indented under the first */
		for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
			fprintf(f, "%.*s\n%30s", (int)(nl - h), h, "");
		fprintf(f, "%s\n", h);
		if (o->type != T_BOOL && o->def && *o->def)
			fprintf(f, "%30sdefault %s%s", "", o->def, o->env ? "; " : "\n");
		else if (o->env)
			fprintf(f, "%30s", "");
		if (o->env && o->env_base)
			fprintf(f, "env %s (used as is),\n%30sor %s + %s\n", o->env, "",
				o->env_base, PP_OTLP_PROFILES_PATH);
		else if (o->env)
			fprintf(f, "env %s\n", o->env);
	}
	fprintf(f,
		"\n"
		"Precedence: defaults < config file < environment < flags. The config file has\n"
		"`key = value` lines keyed by the long flags' names, `#` comments, and optional\n"
		"quotes around values. --dry-run shows each value and where it came from.\n"
		"\n" PP_HEALTH_USAGE);
}

int pp_symbolizer_init(struct pp_symbolizer *out, const struct pp_run_config *c)
{
	char dirs[8192];
	int err;

	memset(out, 0, sizeof(*out));
	out->addresses_only = c->symbolize == PP_SYMBOLIZE_NONE;
	out->no_perf_maps = c->no_perf_maps;
	if (out->addresses_only)
		return 0; /* nothing of the files' symbols is read */
	snprintf(dirs, sizeof(dirs), "%s%s%s", PP_DEBUG_DIRS_DEFAULT, c->debug_dirs[0] ? ":" : "",
		 c->debug_dirs);
	out->debug_dirs = pp_debug_dirs_new(dirs);
	if (!out->debug_dirs) {
		err = -errno;
		pp_error("debug-dirs: \"%s\": %s (absolute directories, colon-separated, at most "
			 "%d with /usr/lib/debug)",
			 c->debug_dirs, strerror(-err), PP_DEBUG_DIRS_MAX);
		return err;
	}
	if (c->debuginfod[0]) {
		struct pp_debuginfod_opts o = {
		    .urls = c->debuginfod,
		    .cache_dir = c->debuginfod_cache,
		    .cache_max_bytes = c->debuginfod_cache_bytes,
		};

		out->debuginfod = pp_debuginfod_new(&o);
		if (!out->debuginfod) {
			err = -errno;
			if (err == -ENOENT)
				pp_error("debuginfod: libdebuginfod.so.1 cannot be loaded (Debian "
					 "package libdebuginfod1)");
			else
				pp_error("debuginfod: cannot start (cache %s): %s",
					 c->debuginfod_cache, strerror(-err));
			pp_symbolizer_fini(out);
			return err;
		}
	}
	return 0;
}

void pp_symbolizer_fini(struct pp_symbolizer *s)
{
	if (!s)
		return;
	pp_debuginfod_free(s->debuginfod);
	pp_debug_dirs_free(s->debug_dirs);
	memset(s, 0, sizeof(*s));
}
