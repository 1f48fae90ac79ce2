/*
 * The option table of `pebsprof run`: the only list of keys. The defaults are parsed from it
 * through the same code as user input, and --help, the environment names, the config-file
 * keys, getopt_long's options and the --dry-run printout are all generated from it, so a key
 * cannot exist in one place and be missing in another.
 */
#define _GNU_SOURCE /* strndup */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pebsprof/record.h>

#include "agent/health.h"
#include "sampling/events.h"
#include "sampling/shim_loader.h"
#include "symbolize/debug_file.h"
#include "symbolize/debuginfod_fetch.h"
#include "symbolize/symbol_store.h"
#include "unwind/table_cache.h"

#include "config_internal.h"

const char *const pp_cfg_exporter_names[] = {"otlp", "pyroscope", "file", NULL};
static const char *const symbolize_names[] = {"local", "none", NULL};
const char *const pp_cfg_sample_label_names[] = {"thread", "pid", "cpu", "memory", NULL};
static const char *const k8s_names[] = {"auto", "apiserver", "kubelet", "none", NULL};

const struct option_def pp_cfg_table[PP_CFG_NKEYS] = {
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
			 .names = pp_cfg_exporter_names,
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
    [PP_CFG_MAX_BURST_BYTES] = {.name = "max-burst-bytes",
				.env = "PEBSPROF_MAX_BURST_BYTES",
				.type = T_SIZE,
				.offset = OFF(max_burst_bytes),
				.def = "2MiB",
				.min = 4 * KIB,
				.max = 1 * GIB,
				.metavar = "SIZE",
				.help =
				    "bytes of profiles per request as pprof, summed: Pyroscope\n"
				    "counts a request against its ingestion burst\n"
				    "(distributor.ingestion-burst-size-mb) and refuses a\n"
				    "larger one at any rate"},
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
    [PP_CFG_KERNEL_IMAGE] = {.name = "kernel-image",
			     .env = "PEBSPROF_KERNEL_IMAGE",
			     .type = T_STR,
			     .offset = OFF(kernel_image),
			     .def = "auto",
			     .metavar = "auto|debuginfod|none|PATH",
			     .help =
				 "the running kernel's vmlinux with DWARF, for the data types of\n"
				 "kernel memory accesses: auto looks where perf does (Debian:\n"
				 "linux-image-$(uname -r)-dbg), taking only the running build's;\n"
				 "debuginfod also asks the debuginfod servers for it (hundreds\n"
				 "of MiB a node, kept in the cache outside its bound)"},
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
    [PP_CFG_UNWIND_TABLE_CACHE] =
	{.name = "unwind-table-cache",
	 .env = "PEBSPROF_UNWIND_TABLE_CACHE",
	 .type = T_PATH,
	 .offset = OFF(unwind_table_cache),
	 .def = PP_UNWIND_TABLE_CACHE_DIR_DEFAULT,
	 .metavar = "DIR",
	 .help = "where compiled unwind tables are kept across starts, named by\n"
		 "the digest of what each was compiled from (none: compiled at each start)"},
    [PP_CFG_UNWIND_TABLE_CACHE_BYTES] = {.name = "unwind-table-cache-bytes",
					 .env = "PEBSPROF_UNWIND_TABLE_CACHE_BYTES",
					 .type = T_SIZE,
					 .offset = OFF(unwind_table_cache_bytes),
					 .def = "64MiB",
					 .min = 1 * MIB,
					 .max = 64 * GIB,
					 .metavar = "SIZE",
					 .help = "bound of that directory; the least recently used "
						 "go first"},
    [PP_CFG_UNWIND_PARTIAL_FDES] =
	{.name = "unwind-partial-fdes",
	 .env = "PEBSPROF_UNWIND_PARTIAL_FDES",
	 .type = T_U64,
	 .offset = OFF(unwind_partial_fdes),
	 .def = "20000",
	 .min = 0,
	 .max = 1000000000,
	 .metavar = "N",
	 .help = "a file with N FDEs or more that no earlier start compiled gets its\n"
		 "unwind rows found as samples reach its code, not compiled whole\n"
		 "(compiled whole once they pay for it; 0: every file whole)"},
    [PP_CFG_SYMBOL_TABLE_CACHE] =
	{.name = "symbol-table-cache",
	 .env = "PEBSPROF_SYMBOL_TABLE_CACHE",
	 .type = T_PATH,
	 .offset = OFF(symbol_table_cache),
	 .def = PP_SYMBOL_STORE_DIR_DEFAULT,
	 .metavar = "DIR",
	 .help = "where the symbol tables read from files are kept across starts,\n"
		 "found by each file's identity while it is unchanged (none: read\n"
		 "at each start)"},
    [PP_CFG_SYMBOL_TABLE_CACHE_BYTES] = {.name = "symbol-table-cache-bytes",
					 .env = "PEBSPROF_SYMBOL_TABLE_CACHE_BYTES",
					 .type = T_SIZE,
					 .offset = OFF(symbol_table_cache_bytes),
					 .def = "128MiB",
					 .min = 1 * MIB,
					 .max = 64 * GIB,
					 .metavar = "SIZE",
					 .help = "bound of that directory; the least recently used "
						 "go first"},
    [PP_CFG_OFF_CPU] = {.name = "off-cpu",
			.env = "PEBSPROF_OFF_CPU",
			.type = T_BOOL,
			.offset = OFF(off_cpu),
			.def = "false",
			.help = "also profile where threads wait off the CPU (an off_cpu\n"
				"profile beside the event's, with each wait's stacks and state)"},
    [PP_CFG_OFF_CPU_THRESHOLD] = {.name = "off-cpu-threshold",
				  .env = "PEBSPROF_OFF_CPU_THRESHOLD",
				  .type = T_DURATION,
				  .offset = OFF(off_cpu_threshold_ns),
				  .def = "1ms",
				  .min = 0,
				  .max = 3600 * NS_PER_S,
				  .metavar = "DURATION",
				  .help =
				      "shortest wait off the CPU recorded (500us, 2ms, 0 for all)"},
    [PP_CFG_OFF_CPU_EVERY] = {.name = "off-cpu-every",
			      .env = "PEBSPROF_OFF_CPU_EVERY",
			      .type = T_U64,
			      .offset = OFF(off_cpu_every),
			      .def = "1",
			      .min = 1,
			      .max = 1000000,
			      .metavar = "N",
			      .help = "record 1 in N switches off the CPU, values scaled by N"},
    [PP_CFG_OFF_CPU_STACKS] = {.name = "off-cpu-stacks",
			       .env = "PEBSPROF_OFF_CPU_STACKS",
			       .type = T_ENUM,
			       .offset = OFF(off_cpu_stacks),
			       .def = "auto",
			       .names = pp_off_cpu_stacks_names,
			       .metavar = "auto|kprobe|fexit|switch",
			       .help =
				   "where off-CPU stacks are taken: kprobe (on the scheduler\n"
				   "as a thread resumes, for the waits recorded), fexit (as it\n"
				   "returns from schedule(); preempted threads at the switch),\n"
				   "switch (as it leaves the CPU, every switch: more CPU, no\n"
				   "probe) or auto (the first the kernel has)"},
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
    [PP_CFG_SAMPLE_LABELS] = {.name = "sample-labels",
			      .env = "PEBSPROF_SAMPLE_LABELS",
			      .type = T_SET,
			      .offset = OFF(sample_labels),
			      .def = "none",
			      .names = pp_cfg_sample_label_names,
			      .metavar = "LIST",
			      .help = "per-sample labels to send beyond the process and\n"
				      "container: thread (id and name), pid, cpu, memory (TLB,\n"
				      "snoop, op, latency bucket; the level is always sent), or\n"
				      "none: each becomes a series dimension in Pyroscope"},
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

_Static_assert(sizeof(pp_cfg_table) / sizeof(pp_cfg_table[0]) == PP_CFG_NKEYS,
	       "one table row per key");

/* ---- the table ----------------------------------------------------------------------------- */

const char *pp_config_key_name(enum pp_config_key k)
{
	return (unsigned)k < PP_CFG_NKEYS ? pp_cfg_table[k].name : NULL;
}

const char *pp_config_key_env(enum pp_config_key k)
{
	return (unsigned)k < PP_CFG_NKEYS ? pp_cfg_table[k].env : NULL;
}

int pp_cfg_key_lookup_n(const char *name, size_t n)
{
	for (int k = 0; k < PP_CFG_NKEYS; k++)
		if (strlen(pp_cfg_table[k].name) == n && !memcmp(pp_cfg_table[k].name, name, n))
			return k;
	return -1;
}

int pp_config_key_lookup(const char *name)
{
	return pp_cfg_key_lookup_n(name, strlen(name));
}

void *pp_cfg_field(struct pp_run_config *c, int k)
{
	return (char *)c + pp_cfg_table[k].offset;
}

const void *pp_cfg_cfield(const struct pp_run_config *c, int k)
{
	return (const char *)c + pp_cfg_table[k].offset;
}

/* Copies a URL for messages and printing with any user:password@ replaced. */
