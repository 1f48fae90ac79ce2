/*
 * Configuration of `pebsprof run`: one option table drives the defaults, the --help text, the
 * environment variables, the config file, the command-line flags, validation and the
 * --dry-run printout. Precedence: defaults < config file < environment < flags, and every
 * key remembers where its value came from. Every error is collected (not just the first)
 * and names the key and where it was set, so `run` can print them all and exit 2.
 */
#ifndef PP_COLLECTOR_CONFIG_H
#define PP_COLLECTOR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "metadata/k8s_meta.h"	    /* enum pp_k8s_source */
#include "symbolize/kernel_image.h" /* struct pp_kernel_image_opts */

/* The path the base OTEL_EXPORTER_OTLP_ENDPOINT gets; the signal-specific one is used as is. */
#define PP_OTLP_PROFILES_PATH "/v1development/profiles"

/* The keys, in table order; the config-file key and the long flag are the same name. */
enum pp_config_key {
	PP_CFG_EVENT,
	PP_CFG_FREQ,
	PP_CFG_PERIOD,
	PP_CFG_LDLAT,
	PP_CFG_INTERVAL,
	PP_CFG_ENDPOINT,
	PP_CFG_HEADERS,
	PP_CFG_EXPORTER,
	PP_CFG_OUTPUT_DIR,
	PP_CFG_KEEP,
	PP_CFG_QUEUE_BYTES,
	PP_CFG_MAX_PROFILE_SAMPLES,
	PP_CFG_MAX_PROFILE_BYTES,
	PP_CFG_MAX_REQUEST_BYTES,
	PP_CFG_MAX_BURST_BYTES,
	PP_CFG_SYMBOL_CACHE_BYTES,
	PP_CFG_SYMBOLIZE,
	PP_CFG_DEBUG_DIRS,
	PP_CFG_DEBUGINFOD,
	PP_CFG_DEBUGINFOD_CACHE,
	PP_CFG_DEBUGINFOD_CACHE_BYTES,
	PP_CFG_NO_PERF_MAPS,
	PP_CFG_KERNEL_IMAGE,
	PP_CFG_FLUSH_TIMEOUT,
	PP_CFG_STACK_DEPTH,
	PP_CFG_USER_UNWIND,
	PP_CFG_UNWIND_TABLE_BYTES,
	PP_CFG_UNWIND_TABLE_CACHE,
	PP_CFG_UNWIND_TABLE_CACHE_BYTES,
	PP_CFG_UNWIND_PARTIAL_FDES,
	PP_CFG_SYMBOL_TABLE_CACHE,
	PP_CFG_SYMBOL_TABLE_CACHE_BYTES,
	PP_CFG_OFF_CPU,
	PP_CFG_OFF_CPU_THRESHOLD,
	PP_CFG_OFF_CPU_EVERY,
	PP_CFG_OFF_CPU_STACKS,
	PP_CFG_SERVICE_NAME,
	PP_CFG_RESOURCE_ATTRIBUTES,
	PP_CFG_SAMPLE_LABELS,
	PP_CFG_NODE_NAME,
	PP_CFG_PROC_ROOT,
	PP_CFG_SYSFS_ROOT,
	PP_CFG_LISTEN,
	PP_CFG_STALL_TIMEOUT,
	PP_CFG_K8S_SOURCE,
	PP_CFG_K8S_API_URL,
	PP_CFG_K8S_KUBELET_URL,
	PP_CFG_K8S_TOKEN_FILE,
	PP_CFG_K8S_CA_FILE,
	PP_CFG_K8S_KUBELET_INSECURE,
	PP_CFG_K8S_REFRESH,
	PP_CFG_CGROUP_ROOT,
	PP_CFG_CGROUP,
	PP_CFG_CONTAINER_ID,
	PP_CFG_NAMESPACE,
	PP_CFG_VERBOSE,
	PP_CFG_CONFIG,	/* flag and env only */
	PP_CFG_DRY_RUN, /* flag only */
	PP_CFG_HELP,	/* flag only */
	PP_CFG_NKEYS
};

/*
 * What samples carry beyond their process and container (--sample-labels). Pyroscope makes
 * each distinct set of a sample's labels a series, so the default, none, keeps a node's
 * series to one per service and profile type (and memory level), whatever its threads and
 * CPUs; these turn a dimension back on.
 */
enum pp_sample_label {
	PP_SAMPLE_LABEL_THREAD = 1 << 0, /* thread.id, thread.name */
	PP_SAMPLE_LABEL_PID = 1 << 1,	 /* process.pid: one series per process, not executable */
	PP_SAMPLE_LABEL_CPU = 1 << 2,	 /* cpu.logical_number */
	PP_SAMPLE_LABEL_MEMORY = 1 << 3, /* memory.tlb, .snoop, .op, .latency_bucket */
};

enum pp_symbolize_mode {
	PP_SYMBOLIZE_LOCAL, /* names from symbol tables, debug files, debuginfod, perf maps */
	PP_SYMBOLIZE_NONE,  /* addresses and build ids only, for a backend to name */
};

enum pp_exporter_kind {
	PP_EXPORTER_OTLP,
	PP_EXPORTER_PYROSCOPE,
	PP_EXPORTER_FILE,
};

enum pp_config_source {
	PP_SRC_DEFAULT = 0,
	PP_SRC_FILE,
	PP_SRC_ENV,
	PP_SRC_FLAG,
};

#define PP_CONFIG_WHERE_LEN 256

/* Where a key's value came from: "FILE:LINE", the environment variable, or "--flag". */
struct pp_config_origin {
	enum pp_config_source src;
	char where[PP_CONFIG_WHERE_LEN];
};

/* A decoded `k=v,k2=v2` list (OTLP headers, resource attributes); values percent-decoded. */
struct pp_kv {
	char *key;
	char *value;
};

struct pp_kv_list {
	struct pp_kv *items;
	size_t n;
};

struct pp_run_config {
	char *event;		   /* validated with pp_event_spec_parse */
	uint64_t freq_hz;	   /* 0 when period is used */
	uint64_t period;	   /* 0: sample by frequency */
	uint64_t ldlat;		   /* mem-loads latency threshold, cycles */
	uint64_t interval_ns;	   /* window length; windows are aligned to multiples of it */
	char *endpoint;		   /* full profiles URL; "" = none (write files locally) */
	struct pp_kv_list headers; /* secret: values never printed */
	enum pp_exporter_kind exporter;
	char *output_dir;
	uint64_t keep;	      /* window files kept in output_dir per format */
	uint64_t queue_bytes; /* bound of the upload queue */
	/* A backend's limits, met by cutting windows before they are sent (split.h). */
	uint64_t max_profile_samples;
	uint64_t max_profile_bytes;
	uint64_t max_request_bytes;
	uint64_t max_burst_bytes;    /* a request's profiles as pprof, summed (Pyroscope's burst) */
	uint64_t symbol_cache_bytes; /* bound of the symbol tables held */
	int symbolize;		     /* PP_SYMBOLIZE_* */
	char *debug_dirs;	     /* more debug directories, colon-separated; "" = none */
	char *debuginfod;	     /* server URLs, space-separated; "" = off */
	char *debuginfod_cache;
	uint64_t debuginfod_cache_bytes;
	int no_perf_maps;
	char *kernel_image;	   /* "auto", "debuginfod", "none" or a vmlinux's path */
	uint64_t flush_timeout_ns; /* how long exit waits for the queue to drain */
	uint64_t stack_depth;
	int user_unwind; /* PP_USTACK_* (record.h), named by pp_ustack_walk_names */
	uint64_t unwind_table_bytes;
	char *unwind_table_cache; /* compiled tables kept across starts; "none" = none */
	uint64_t unwind_table_cache_bytes;
	uint64_t unwind_partial_fdes; /* files with this many FDEs get partial tables; 0: none */
	char *symbol_table_cache;     /* files' symbol tables kept across starts; "none" = none */
	uint64_t symbol_table_cache_bytes;
	int off_cpu;		       /* off-CPU profiles too */
	uint64_t off_cpu_threshold_ns; /* shortest wait recorded */
	uint64_t off_cpu_every;	       /* 1 in N switches */
	int off_cpu_stacks;	       /* PP_SHIM_OFF_CPU_* (shim_loader.h) */
	char *service_name;	       /* "" = per process (container, pod or executable) */
	struct pp_kv_list resource_attributes;
	int sample_labels; /* PP_SAMPLE_LABEL_* bits */
	char *node_name;   /* default: this host's name */
	char *proc_root;
	char *sysfs_root;
	char *listen; /* ADDR:PORT of the metrics/health listener; "" = off */
	/* /healthz: sampling counts as stopped after this long without progress; by default
	 * two windows, at least 30 s (set by pp_run_config_finish) */
	uint64_t stall_timeout_ns;
	enum pp_k8s_source k8s_source;
	char *k8s_api_url;     /* "" = https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT */
	char *k8s_kubelet_url; /* "" = https://$NODE_IP:10250 */
	char *k8s_token_file;
	char *k8s_ca_file;
	int k8s_kubelet_insecure;
	uint64_t k8s_refresh_ns;
	char *cgroup_root;  /* "" = the cgroup2 mount named in mountinfo */
	char *cgroup;	    /* profile only these cgroups (comma-separated paths); "" = all */
	char *container_id; /* profile only these containers (comma-separated ids) */
	char *namespace_;   /* profile only pods of these namespaces (comma-separated) */
	int verbose;
	char *config; /* the config file read; "" = none */
	int dry_run;
	int help;
	struct pp_config_origin origin[PP_CFG_NKEYS];
	uint64_t keys_wanted; /* the loader's: 0 = every key; else only these are set */
};

#define PP_CONFIG_KEY_BIT(k) (1ull << (k))
_Static_assert(PP_CFG_NKEYS <= 64, "keys_wanted holds a bit per key");

#define PP_CONFIG_MAX_ERRORS 32
#define PP_CONFIG_ERROR_LEN 384

/* A bounded list of messages; those past the bound are counted in dropped. */
struct pp_config_errors {
	size_t n;
	size_t dropped;
	char msg[PP_CONFIG_MAX_ERRORS][PP_CONFIG_ERROR_LEN];
};

/*
 * Sets every key to its default ("node-name" to this host's name). Returns 0 or -ENOMEM.
 * pp_run_config_fini() releases it, also after a failed init.
 */
int pp_run_config_init(struct pp_run_config *c);
/* Releases what c owns and zeroes it; safe to call twice. */
void pp_run_config_fini(struct pp_run_config *c);

/*
 * The whole configuration of `pebsprof run`: defaults, the config file (--config or
 * PEBSPROF_CONFIG), the environment (envp as main's third argument, NULL = empty), then the
 * flags in argv (argv[0] is the subcommand name). Returns 0, or -EINVAL with every problem
 * in errs (exit 2), or -ENOMEM. out is initialised here; call pp_run_config_fini(out) either
 * way. With --help, returns 0 with out->help set and reads neither file nor environment.
 */
int pp_run_config_load(int argc, char **argv, char *const *envp, struct pp_run_config *out,
		       struct pp_config_errors *errs);

/*
 * Some of run's keys for another subcommand (`record`'s pod metadata, so a one-off capture in
 * the agent's pod reads what the agent reads): as pp_run_config_load, but the config file and
 * the environment set only the keys in `keys` (PP_CONFIG_KEY_BIT of each), the others keep
 * their defaults unchecked, and a flag of another key is an error.
 */
int pp_run_config_load_keys(int argc, char **argv, char *const *envp, uint64_t keys,
			    struct pp_run_config *out, struct pp_config_errors *errs);

/*
 * Applies a config file's text (`key = value` lines, `#` comments, optional quotes) over c,
 * recording "name:LINE" as the origin of each key. Every bad line adds an error to errs.
 * Returns 0, -EINVAL when any line was bad, or -ENOMEM.
 */
int pp_config_file_parse(const char *buf, size_t len, const char *name, struct pp_run_config *c,
			 struct pp_config_errors *errs);
/* Reads the file at path and applies it; an unreadable file is an error naming it. */
int pp_config_file_load(const char *path, struct pp_run_config *c, struct pp_config_errors *errs);

/*
 * Decides what depends on several keys: the exporter by default (otlp with an endpoint, file
 * without), otlp/pyroscope without an endpoint (an error), freq against period.
 */
int pp_run_config_finish(struct pp_run_config *c, struct pp_config_errors *errs);

/*
 * The node's name when it was given (NODE_NAME, --node-name, the file); NULL when only the
 * host-name default holds, which is wrong in a pod and would label every machine outside
 * Kubernetes as a node.
 */
const char *pp_run_config_node_name(const struct pp_run_config *c);
/* Where pod metadata comes from, as the k8s-* keys and the node name say. */
struct pp_k8s_meta_opts pp_run_config_k8s_opts(const struct pp_run_config *c);

/* Prints "key = value   (from ...)" for every key; secrets redacted. */
void pp_run_config_print(const struct pp_run_config *c, FILE *f);
/* The --help text, generated from the option table. */
void pp_run_config_usage(FILE *f);
/* Prints each error as "prefix: message" ("prefix: " works too) and a count of those dropped. */
void pp_config_errors_print(const struct pp_config_errors *e, const char *prefix, FILE *f);

/* The table's view of one key, for tests and messages: NULL for an unknown name or key. */
const char *pp_config_key_name(enum pp_config_key k);
const char *pp_config_key_env(enum pp_config_key k);
int pp_config_key_lookup(const char *name); /* key or -1 */

/*
 * Leaf parsers, on buffers so they can be fuzzed. On error they return -EINVAL with the
 * reason in err; secrets are never copied into err.
 */
/*
 * k=v,... with percent-encoded values; header_names: keys are HTTP header names (tokens, as
 * given), else attribute keys (any text, percent-decoded like the values: the OTel spec's
 * OTEL_RESOURCE_ATTRIBUTES, where Kubernetes-style keys hold '/').
 */
int pp_kv_list_parse(const char *buf, size_t len, bool header_names, struct pp_kv_list *out,
		     char *err, size_t errlen);
void pp_kv_list_free(struct pp_kv_list *l);
/*
 * Resource attributes become labels of every series a backend stores: names and values
 * within Pyroscope's bounds (one label over them refuses every push, which the agent cannot
 * retry). -EINVAL with the reason in err.
 */
int pp_resource_attributes_check(const struct pp_kv_list *l, char *err, size_t errlen);
/* http(s)://[user[:pass]@]host[:port][/path][?query]; host a name, IPv4 or [IPv6]. */
int pp_url_check(const char *buf, size_t len, char *err, size_t errlen);
/* A byte count with an optional KiB/MiB/GiB (or K/M/G) suffix. */
int pp_size_parse(const char *buf, size_t len, uint64_t *out, char *err, size_t errlen);
/* ADDR:PORT, ADDR a name, IPv4, [IPv6] or empty (every address); "" means off. */
int pp_listen_check(const char *buf, size_t len, char *err, size_t errlen);

/* What the symbolizing keys of a config set up for a session (pp_session_opts). */
struct pp_symbolizer {
	struct pp_debug_dirs *debug_dirs;
	struct pp_debuginfod *debuginfod; /* NULL: off */
	int addresses_only;
	int no_perf_maps;
	/* Where the kernel's image is looked for (kernel-image), when kernel_image_on. */
	int kernel_image_on;
	struct pp_kernel_image_opts kernel_image;
	char kernel_image_root[300]; /* for .root */
};

struct pp_session_opts;

/*
 * Set up what c's symbolizing keys ask for: the debug directories (/usr/lib/debug, then
 * debug-dirs) and, when debuginfod names servers, the fetcher (its thread starts here: call
 * it before starting other threads). Returns 0, or -errno with the reason logged (a bad
 * directory list, libdebuginfod missing, a cache directory that cannot be made).
 */
int pp_symbolizer_init(struct pp_symbolizer *out, const struct pp_run_config *c);
void pp_symbolizer_fini(struct pp_symbolizer *s);

/*
 * What s sets up, into a session's options (which borrow s: it must outlive the session). The
 * kernel's image is looked for in the host's files as the process of pid 1 sees them
 * (<proc_root>/1/root: so in a pod with the host's PIDs too), and in sysfs_root (NULL or "":
 * /sys).
 */
void pp_symbolizer_session_opts(struct pp_symbolizer *s, const char *proc_root,
				const char *sysfs_root, struct pp_session_opts *sess);

#endif /* PP_COLLECTOR_CONFIG_H */
