/*
 * `pebsprof record`: a bounded capture, like `perf record`. Opens the events the ladder
 * picks, loads the shim, optionally starts a command (profiled with its children through the
 * shim's tgid filter), drains the ring buffer into a profile, and writes each -o output.
 */
#define _GNU_SOURCE /* pipe2 */
#include "cmd_record.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>
#include <pebsprof/writers.h>

#include "cli_util.h"
#include "config.h"
#include "containers.h"
#include "base/deadline.h"
#include "base/log.h"
#include "base/self_cpu.h"
#include "metadata/host_name.h"
#include "sampler.h"
#include "session.h"
#include "sampling/shim_loader.h"
#include "symbolize/symbol_store.h"
#include "unwind/table_cache.h"

#define MAX_OUTPUTS 16
#define DEFAULT_FREQ_HZ 99
#define RUN_KEYS_MAX_FLAGS 32
/* How long the end of a capture waits for debug files still coming from debuginfod. */
#define RECORD_DEBUGINFOD_WAIT_S 10u
/* How long record waits at the end for symbol tables still being read. */
#define RECORD_SYMBOLS_WAIT_S 10u
/* The unwinder's queued work at the end, for the summary's counts (a table may be compiling). */
#define RECORD_UNWINDER_WAIT_MS 2000u

/* The keys record shares with run: where pod metadata comes from, how frames are named and
 * where off-CPU stacks are taken, read from the same config file (PEBSPROF_CONFIG) and
 * environment as the agent's, so `kubectl exec` into its pod does as the agent does. */
static const uint64_t run_keys =
    PP_CONFIG_KEY_BIT(PP_CFG_K8S_SOURCE) | PP_CONFIG_KEY_BIT(PP_CFG_K8S_API_URL) |
    PP_CONFIG_KEY_BIT(PP_CFG_K8S_KUBELET_URL) | PP_CONFIG_KEY_BIT(PP_CFG_K8S_TOKEN_FILE) |
    PP_CONFIG_KEY_BIT(PP_CFG_K8S_CA_FILE) | PP_CONFIG_KEY_BIT(PP_CFG_K8S_KUBELET_INSECURE) |
    PP_CONFIG_KEY_BIT(PP_CFG_NODE_NAME) | PP_CONFIG_KEY_BIT(PP_CFG_CONFIG) |
    PP_CONFIG_KEY_BIT(PP_CFG_SYMBOLIZE) | PP_CONFIG_KEY_BIT(PP_CFG_DEBUG_DIRS) |
    PP_CONFIG_KEY_BIT(PP_CFG_DEBUGINFOD) | PP_CONFIG_KEY_BIT(PP_CFG_DEBUGINFOD_CACHE) |
    PP_CONFIG_KEY_BIT(PP_CFG_DEBUGINFOD_CACHE_BYTES) | PP_CONFIG_KEY_BIT(PP_CFG_NO_PERF_MAPS) |
    PP_CONFIG_KEY_BIT(PP_CFG_KERNEL_IMAGE) | PP_CONFIG_KEY_BIT(PP_CFG_OFF_CPU_STACKS) |
    PP_CONFIG_KEY_BIT(PP_CFG_UNWIND_TABLE_CACHE) |
    PP_CONFIG_KEY_BIT(PP_CFG_UNWIND_TABLE_CACHE_BYTES) |
    PP_CONFIG_KEY_BIT(PP_CFG_UNWIND_PARTIAL_FDES) | PP_CONFIG_KEY_BIT(PP_CFG_SYMBOL_TABLE_CACHE) |
    PP_CONFIG_KEY_BIT(PP_CFG_SYMBOL_TABLE_CACHE_BYTES);

struct record_args {
	const char *event;
	uint64_t freq_hz;
	uint64_t period;
	uint64_t duration_ns; /* 0: until the command exits or Ctrl-C */
	int64_t pid;	      /* -1: none */
	int system_wide;
	uint32_t stack_depth;
	uint32_t ldlat;
	int no_kernel_stacks;
	uint32_t ustack_walk; /* PP_USTACK_* */
	uint64_t unwind_table_bytes;
	uint32_t off_cpu_every; /* 0: no off-CPU profile */
	uint64_t off_cpu_min_ns;
	const char *outputs[MAX_OUTPUTS];
	size_t noutputs;
	size_t top;
	char **command; /* argv of the command, or NULL */
	const char *proc_root;
	const char *sysfs_root;
	const char *cgroup_root;   /* NULL: the cgroup2 mount from mountinfo */
	const char *cgroups;	   /* --cgroup: comma-separated paths */
	const char *container_ids; /* --container-id: comma-separated ids */
	/* run's pod metadata flags, as given, for pp_run_config_load_keys: "record" first */
	char *run_argv[1 + 2 * RUN_KEYS_MAX_FLAGS];
	char run_flags[RUN_KEYS_MAX_FLAGS][32];
	int run_argc, run_nflags;
	const char *node_name; /* the node's name when set (NODE_NAME, --node-name, file) */
	int verbose;
	int quiet;
};

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t child_exited;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_sigchld(int sig)
{
	(void)sig;
	child_exited = 1;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: pebsprof record [-e EVENT] [-F HZ | -c PERIOD] [-d SECONDS] [-p PID | -a]\n"
	    "                       [-o FILE]... [-- CMD ARGS]\n"
	    "\n"
	    "Samples this machine, a process or a command, and writes profiles.\n"
	    "\n"
	    "  -e, --event EVENT     auto (default: best precise source, else cpu-clock),\n"
	    "                        cpu-clock, cycles, instructions, mem-loads, mem-stores,\n"
	    "                        or a raw event pmu/config=...,config1=.../\n"
	    "  -F, --freq HZ         samples per second per CPU (default %d)\n"
	    "  -c, --period N        sample every N events instead of a frequency\n"
	    "  -d, --duration SECS   stop after SECS seconds (default: until the command exits\n"
	    "                        or Ctrl-C; 10 s system-wide without a command)\n"
	    "  -p, --pid PID         profile this process and its future children\n"
	    "  -a, --all-cpus        profile the whole machine (default without -p or a command)\n"
	    "  -o, --output FILE     write FILE; repeatable; format by extension:\n"
	    "                        .pb.gz (pprof), .folded (folded stacks), .svg (flame graph)\n"
	    "      --stack-depth N   frames per stack, 1..%d (default %d)\n"
	    "      --no-kernel-stacks  user stacks only\n"
	    "      --user-unwind auto|dwarf|fp|kernel  how user stacks are unwound: auto\n"
	    "                        (default) with .eh_frame unwind tables where a file has\n"
	    "                        them and frame pointers elsewhere; dwarf tables only; fp\n"
	    "                        the shim follows frame pointers; kernel bpf_get_stack\n"
	    "      --unwind-table-bytes SIZE  kernel memory for unwind tables (default 64MiB)\n"
	    "      --unwind-table-cache DIR  compiled tables kept across starts (default\n"
	    "                        " PP_UNWIND_TABLE_CACHE_DIR_DEFAULT ", or none),\n"
	    "                        --unwind-table-cache-bytes SIZE its bound (64MiB)\n"
	    "      --unwind-partial-fdes N  a file of N FDEs or more (default 20000) not\n"
	    "                        compiled before gets rows as samples reach its code\n"
	    "                        (0: every file compiled whole)\n"
	    "      --symbol-table-cache DIR  files' symbol tables kept across starts\n"
	    "                        (default " PP_SYMBOL_STORE_DIR_DEFAULT ",\n"
	    "                        or none), --symbol-table-cache-bytes SIZE its bound\n"
	    "                        (128MiB)\n"
	    "      --off-cpu         also record where threads wait off the CPU, with their\n"
	    "                        stacks and state: .svg and .folded show wall clock (on\n"
	    "                        and off the CPU, in ns), .otlp.pb adds off_cpu profiles\n"
	    "      --off-cpu-threshold DURATION  shortest wait recorded (default 1ms; 500us,\n"
	    "                        2ms, 0 for all)\n"
	    "      --off-cpu-every N record 1 in N switches, values scaled by N (default 1)\n"
	    "      --off-cpu-stacks auto|kprobe|fexit|switch  where their stacks are taken:\n"
	    "                        kprobe (as threads resume), fexit (as they return from\n"
	    "                        schedule()), switch (as they leave the CPU, every switch:\n"
	    "                        more CPU, no probe); auto: the first the kernel has\n"
	    "      --ldlat CYCLES    load-latency threshold for mem-loads (default 30)\n"
	    "      --top N           functions in the summary (default 15; 0 = none)\n"
	    "      --proc-root DIR   where /proc is (default /proc)\n"
	    "      --sysfs-root DIR  where /sys is (default /sys): PMUs, BTF\n"
	    "      --cgroup PATH,... profile only tasks in these cgroups (under the cgroup v2\n"
	    "                        mount, or as /proc/PID/cgroup shows them) and below\n"
	    "      --container-id ID,...  profile only these containers (ids, or their first\n"
	    "                        12+ hex digits, as docker ps and crictl ps print them)\n"
	    "      --cgroup-root DIR the cgroup v2 mount (default: from /proc/self/mountinfo)\n"
	    "      --k8s-source SOURCE  pod metadata from: auto (the API server when\n"
	    "                        KUBERNETES_SERVICE_HOST is set, else none), apiserver,\n"
	    "                        kubelet or none; fetched once, before the outputs are\n"
	    "                        written. --k8s-api-url, --k8s-kubelet-url,\n"
	    "                        --k8s-token-file, --k8s-ca-file, --k8s-kubelet-insecure,\n"
	    "                        --node-name and --config work as in `run`, and so do\n"
	    "                        their PEBSPROF_* variables and config file keys\n"
	    "      --symbolize local|none  name frames here, or keep addresses and build ids\n"
	    "                        only, for the backend to name (default local)\n"
	    "      --debug-dirs DIR:...  more directories of separate debug files, after\n"
	    "                        /usr/lib/debug (inside each process's root, then the host's)\n"
	    "      --debuginfod URLS ask these debuginfod servers (or DEBUGINFOD_URLS) for\n"
	    "                        stripped files' debug files; --debuginfod-cache DIR and\n"
	    "                        --debuginfod-cache-bytes SIZE bound what is kept\n"
	    "      --no-perf-maps    do not read JIT runtimes' /tmp/perf-PID.map files\n"
	    "      --kernel-image auto|debuginfod|none|PATH  the running kernel's vmlinux with\n"
	    "                        DWARF, for the data types of kernel memory accesses (auto:\n"
	    "                        where perf looks; Debian: linux-image-$(uname -r)-dbg;\n"
	    "                        debuginfod: then the --debuginfod servers, hundreds of MiB)\n"
	    "  -q, --quiet           no progress line and no summary\n"
	    "  -v, --verbose         debug logging (libbpf and verifier messages)\n"
	    "  -h, --help            this text\n"
	    "\n"
	    "With -- CMD ARGS the command is started, profiled with its children, and its exit\n"
	    "status is returned. Ctrl-C ends a capture early and still writes the outputs.\n",
	    DEFAULT_FREQ_HZ, PP_MAX_STACK_DEPTH, PP_MAX_STACK_DEPTH);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "pebsprof record: %s (see pebsprof record --help)\n", msg);
	return PP_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, struct record_args *a)
{
	enum {
		OPT_STACK_DEPTH = 256,
		OPT_NO_KSTACK,
		OPT_USER_UNWIND,
		OPT_UNWIND_TABLE_BYTES,
		OPT_LDLAT,
		OPT_TOP,
		OPT_PROC_ROOT,
		OPT_SYSFS_ROOT,
		OPT_CGROUP,
		OPT_CONTAINER_ID,
		OPT_CGROUP_ROOT,
		OPT_RUN_KEY_ARG,
		OPT_RUN_KEY_BOOL,
		OPT_OFF_CPU,
		OPT_OFF_CPU_THRESHOLD,
		OPT_OFF_CPU_EVERY,
	};
	static const struct option longopts[] = {
	    {"event", required_argument, NULL, 'e'},
	    {"freq", required_argument, NULL, 'F'},
	    {"period", required_argument, NULL, 'c'},
	    {"duration", required_argument, NULL, 'd'},
	    {"pid", required_argument, NULL, 'p'},
	    {"all-cpus", no_argument, NULL, 'a'},
	    {"output", required_argument, NULL, 'o'},
	    {"stack-depth", required_argument, NULL, OPT_STACK_DEPTH},
	    {"no-kernel-stacks", no_argument, NULL, OPT_NO_KSTACK},
	    {"user-unwind", required_argument, NULL, OPT_USER_UNWIND},
	    {"unwind-table-bytes", required_argument, NULL, OPT_UNWIND_TABLE_BYTES},
	    {"off-cpu", no_argument, NULL, OPT_OFF_CPU},
	    {"off-cpu-threshold", required_argument, NULL, OPT_OFF_CPU_THRESHOLD},
	    {"off-cpu-every", required_argument, NULL, OPT_OFF_CPU_EVERY},
	    {"off-cpu-stacks", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"ldlat", required_argument, NULL, OPT_LDLAT},
	    {"top", required_argument, NULL, OPT_TOP},
	    {"proc-root", required_argument, NULL, OPT_PROC_ROOT},
	    {"sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT},
	    {"cgroup", required_argument, NULL, OPT_CGROUP},
	    {"container-id", required_argument, NULL, OPT_CONTAINER_ID},
	    {"cgroup-root", required_argument, NULL, OPT_CGROUP_ROOT},
	    {"k8s-source", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"k8s-api-url", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"k8s-kubelet-url", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"k8s-token-file", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"k8s-ca-file", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"k8s-kubelet-insecure", no_argument, NULL, OPT_RUN_KEY_BOOL},
	    {"node-name", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"config", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"symbolize", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"debug-dirs", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"kernel-image", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"debuginfod", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"debuginfod-cache", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"debuginfod-cache-bytes", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"unwind-table-cache", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"unwind-table-cache-bytes", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"unwind-partial-fdes", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"symbol-table-cache", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"symbol-table-cache-bytes", required_argument, NULL, OPT_RUN_KEY_ARG},
	    {"no-perf-maps", no_argument, NULL, OPT_RUN_KEY_BOOL},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c, li = -1;

	a->run_argv[a->run_argc++] = argv[0];
	a->event = "auto";
	a->pid = -1;
	a->stack_depth = PP_MAX_STACK_DEPTH;
	a->ustack_walk = PP_USTACK_AUTO;
	a->ldlat = 30;
	a->off_cpu_min_ns = PP_OFF_CPU_THRESHOLD_DEFAULT_NS;
	a->top = 15;
	a->proc_root = "/proc";
	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, so a command's own options stay its own. */
	while ((c = getopt_long(argc, argv, "+:e:F:c:d:p:ao:qvh", longopts, &li)) != -1) {
		switch (c) {
		case 'e':
			a->event = optarg;
			break;
		case 'F':
			if (pp_parse_u64(optarg, 1, 1000000, &v))
				return usage_error("bad frequency '%s': give samples per second, "
						   "1..1000000",
						   optarg);
			a->freq_hz = v;
			break;
		case 'c':
			if (pp_parse_u64(optarg, 1, (1ull << 62), &v))
				return usage_error("bad period '%s': give a positive event count",
						   optarg);
			a->period = v;
			break;
		case 'd':
			if (pp_parse_seconds(optarg, &v))
				return usage_error(
				    "bad duration '%s': give seconds > 0, e.g. 10 or 2.5", optarg);
			a->duration_ns = v;
			break;
		case 'p':
			if (pp_parse_u64(optarg, 1, 0x3fffffff, &v))
				return usage_error("bad pid '%s': give a process id", optarg);
			a->pid = (int64_t)v;
			break;
		case 'a':
			a->system_wide = 1;
			break;
		case 'o':
			if (a->noutputs == MAX_OUTPUTS)
				return usage_error("too many -o outputs (at most %s)", "16");
			if (pp_output_format_of(optarg) == PP_OUT_UNKNOWN)
				return usage_error(
				    "unknown output format '%s': use a .pb.gz "
				    "(pprof), .otlp.pb (OTLP), .folded or .svg file name",
				    optarg);
			a->outputs[a->noutputs++] = optarg;
			break;
		case OPT_STACK_DEPTH:
			if (pp_parse_u64(optarg, 1, PP_MAX_STACK_DEPTH, &v))
				return usage_error("bad --stack-depth '%s': give 1..127", optarg);
			a->stack_depth = (uint32_t)v;
			break;
		case OPT_NO_KSTACK:
			a->no_kernel_stacks = 1;
			break;
		case OPT_USER_UNWIND:
			if (pp_ustack_walk_parse(optarg) < 0)
				return usage_error("bad --user-unwind '%s': give auto, dwarf, fp "
						   "or kernel",
						   optarg);
			a->ustack_walk = (uint32_t)pp_ustack_walk_parse(optarg);
			break;
		case OPT_UNWIND_TABLE_BYTES:
			if (pp_size_parse(optarg, strlen(optarg), &v, NULL, 0) || v < (1u << 20) ||
			    v > (4ull << 30))
				return usage_error("bad --unwind-table-bytes '%s': give 1MiB..4GiB",
						   optarg);
			a->unwind_table_bytes = v;
			break;
		case OPT_OFF_CPU:
			if (!a->off_cpu_every)
				a->off_cpu_every = 1;
			break;
		case OPT_OFF_CPU_THRESHOLD:
			if (pp_parse_duration(optarg, &v))
				return usage_error("bad --off-cpu-threshold '%s': give a duration "
						   "with its unit, e.g. 1ms, 500us or 0",
						   optarg);
			a->off_cpu_min_ns = v;
			break;
		case OPT_OFF_CPU_EVERY:
			if (pp_parse_u64(optarg, 1, 1000000, &v))
				return usage_error("bad --off-cpu-every '%s': give 1..1000000",
						   optarg);
			a->off_cpu_every = (uint32_t)v;
			break;
		case OPT_LDLAT:
			if (pp_parse_u64(optarg, 1, 65535, &v))
				return usage_error("bad --ldlat '%s': give cycles, 1..65535",
						   optarg);
			a->ldlat = (uint32_t)v;
			break;
		case OPT_TOP:
			if (pp_parse_u64(optarg, 0, 100000, &v))
				return usage_error("bad --top '%s': give a count", optarg);
			a->top = (size_t)v;
			break;
		case OPT_PROC_ROOT:
			a->proc_root = optarg;
			break;
		case OPT_SYSFS_ROOT:
			a->sysfs_root = optarg;
			break;
		case OPT_CGROUP:
			a->cgroups = optarg;
			break;
		case OPT_CONTAINER_ID:
			a->container_ids = optarg;
			break;
		case OPT_CGROUP_ROOT:
			a->cgroup_root = optarg;
			break;
		case OPT_RUN_KEY_ARG:
		case OPT_RUN_KEY_BOOL: {
			/* run's own parser checks them: pp_run_config_load_keys */
			int nflag = a->run_nflags++;

			if (nflag >= RUN_KEYS_MAX_FLAGS)
				return usage_error("too many pod metadata options (at most %d)",
						   RUN_KEYS_MAX_FLAGS);
			snprintf(a->run_flags[nflag], sizeof(a->run_flags[nflag]), "--%s",
				 longopts[li].name);
			a->run_argv[a->run_argc++] = a->run_flags[nflag];
			if (c == OPT_RUN_KEY_ARG)
				a->run_argv[a->run_argc++] = optarg;
			break;
		}
		case 'q':
			a->quiet = 1;
			break;
		case 'v':
			a->verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return -1;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		a->command = &argv[optind];
	if (a->freq_hz && a->period)
		return usage_error("%s",
				   "-F and -c exclude each other: give a frequency or a period");
	if (a->command && a->pid >= 0)
		return usage_error("%s", "-p and a command exclude each other");
	if (a->system_wide && (a->pid >= 0 || a->command))
		return usage_error("%s", "-a profiles every process: drop -p or the command");
	if (!a->freq_hz && !a->period)
		a->freq_hz = DEFAULT_FREQ_HZ;
	if (!a->command && a->pid < 0) {
		a->system_wide = 1;
		if (!a->duration_ns)
			a->duration_ns = 10ull * 1000000000ull;
	}
	return 0;
}

/*
 * Forks the command stopped on a pipe: it execs only once the events are attached, so its
 * first instructions are profiled. exec failure comes back over a CLOEXEC pipe.
 */
struct child {
	pid_t pid;
	int go_fd;  /* write end: release the child */
	int err_fd; /* read end: errno of a failed exec */
};

static int start_child(char **argv, struct child *ch)
{
	int go[2], err[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(err[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	ch->pid = pid;
	ch->go_fd = go[1];
	ch->err_fd = err[0];
	return 0;
}

/* Releases the child; returns 0 once it exec'ed, or -errno of the failed exec. */
static int release_child(struct child *ch)
{
	int e = 0;
	ssize_t n;

	if (write(ch->go_fd, "g", 1) != 1)
		return -errno;
	close(ch->go_fd);
	ch->go_fd = -1;
	n = read(ch->err_fd, &e, sizeof(e));
	close(ch->err_fd);
	ch->err_fd = -1;
	if (n == (ssize_t)sizeof(e))
		return -e;
	return 0;
}

/* Whether argv0 names something execvp can run, so a typo fails before anything is loaded. */
static int command_runnable(const char *argv0)
{
	const char *path = getenv("PATH");
	char candidate[4096];

	if (strchr(argv0, '/'))
		return access(argv0, X_OK) ? -errno : 0;
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");

		snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)len, len ? path : ".",
			 argv0);
		if (access(candidate, X_OK) == 0)
			return 0;
		path += len;
		if (*path == ':')
			path++;
	}
	return -ENOENT;
}

static const char *format_name(enum pp_output_format f)
{
	switch (f) {
	case PP_OUT_PPROF:
		return "pprof";
	case PP_OUT_FOLDED:
		return "folded stacks";
	case PP_OUT_SVG:
		return "flame graph";
	case PP_OUT_OTLP:
		return "OTLP profiles";
	default:
		return "?";
	}
}

/* The OTLP request `pebsprof run` would send for this capture, with the OTel environment. */
static int write_otlp(const struct pp_profile *profile, const char *path, const char *proc_root,
		      const char *node_name, struct pp_label_budget *budget)
{
	const struct pp_profile *profiles[1] = {profile};
	const char *env_attrs = getenv("OTEL_RESOURCE_ATTRIBUTES");
	struct pp_otlp_resource res = {
	    .service_name = getenv("OTEL_SERVICE_NAME"),
	    .node_name = node_name,
	    .scope_version = PP_VERSION,
	};
	struct pp_label *attrs = NULL;
	uint32_t nattrs = 0;
	char host[256] = "", err[256];
	int ret;

	/* host.name: the node's name, not the pod's (when run in the agent's pod) */
	if (res.node_name && res.node_name[0])
		snprintf(host, sizeof(host), "%s", res.node_name);
	else
		pp_host_name(proc_root, host, sizeof(host));
	res.host_name = host;
	if (env_attrs && *env_attrs) {
		/* The OTel SDK rule: a malformed variable is reported and ignored as a whole. */
		if (pp_otlp_parse_resource_attributes(env_attrs, strlen(env_attrs), &attrs, &nattrs,
						      err, sizeof(err)))
			pp_warn("ignoring OTEL_RESOURCE_ATTRIBUTES: %s", err);
	}
	res.extra_attrs = attrs;
	res.n_extra = nattrs;
	pp_otlp_plan_labels(profiles, 1, &res, budget);
	ret = pp_otlp_write_file(profiles, 1, &res, path);
	pp_otlp_free_attributes(attrs);
	return ret;
}

static int write_outputs(const struct record_args *a, const struct pp_profile *profile)
{
	int failed = 0;

	for (size_t i = 0; i < a->noutputs; i++) {
		enum pp_output_format f = pp_output_format_of(a->outputs[i]);
		struct pp_label_budget budget = {0};
		char dropped[512];
		int ret;

		switch (f) {
		case PP_OUT_PPROF:
			pp_pprof_plan_labels(profile, &budget);
			ret = pp_pprof_write_file(profile, a->outputs[i]);
			break;
		case PP_OUT_FOLDED:
			ret = pp_folded_write_file(profile, a->outputs[i]);
			break;
		case PP_OUT_SVG:
			ret = pp_flamegraph_write_file(profile, a->outputs[i], "pebsprof record");
			break;
		case PP_OUT_OTLP:
			ret =
			    write_otlp(profile, a->outputs[i], a->proc_root, a->node_name, &budget);
			break;
		default:
			ret = -EINVAL;
		}
		if (ret) {
			pp_error("cannot write %s to %s: %s; check the path and free space",
				 format_name(f), a->outputs[i], strerror(-ret));
			failed = 1;
		} else if (!a->quiet) {
			fprintf(stderr, "pebsprof: wrote %s to %s\n", format_name(f),
				a->outputs[i]);
		}
		/* Pyroscope refuses a series of more than 30 label names: say which went. */
		if (!ret && !a->quiet && budget.ndropped) {
			pp_label_budget_describe(&budget, dropped, sizeof(dropped));
			fprintf(stderr,
				"pebsprof: %s: %u label names left out for Pyroscope's limit of "
				"30: %s\n",
				a->outputs[i], budget.ndropped, dropped);
		}
	}
	return failed ? -EIO : 0;
}

/* The shim as this kernel took it: what a kernel matrix compares (tests/vm). */
static void print_shim(const struct pp_shim *shim, int ustack_walk)
{
	static const char *const cgroup_modes[] = {"off", "in the kernel", "in user space"};
	enum pp_shim_cgroup_mode cg = pp_shim_cgroup_filter_mode(shim);
	uint32_t insns = pp_shim_verified_insns(shim);

	printf("shim: %s variant, loaded in %.0f ms, ",
	       pp_shim_variant_name(pp_shim_loaded_variant(shim)),
	       (double)pp_shim_load_ns(shim) / 1e6);
	if (insns)
		printf("%u instructions verified", insns);
	else
		printf("verified instructions not reported (kernel before 5.16)");
	printf("; user stacks walked by the %s%s; cgroup filter %s\n",
	       ustack_walk == PP_USTACK_KERNEL	? "kernel"
	       : ustack_walk == PP_USTACK_AUTO	? "tables (frame pointers elsewhere)"
	       : ustack_walk == PP_USTACK_DWARF ? "tables only"
						: "fp",
	       (ustack_walk == PP_USTACK_AUTO || ustack_walk == PP_USTACK_DWARF) &&
		       pp_shim_table_walker_bounded(shim)
		   ? " in a bounded loop (no bpf_loop: 32 frames, user-mode samples)"
		   : "",
	       (unsigned)cg < 3 ? cgroup_modes[cg] : "?");
}

/* What unwinding with tables did: the shim's walks and the tables behind them. */
static void print_unwinding(struct pp_unwinder *u, const uint64_t c[PP_CNT__MAX],
			    const struct pp_session_stats *st)
{
	struct pp_unwinder_stats us;
	uint64_t stops = c[PP_CNT_UNWIND_STOP_NO_CFI] + c[PP_CNT_UNWIND_STOP_UNREADABLE] +
			 c[PP_CNT_UNWIND_STOP_NOT_UP] + c[PP_CNT_UNWIND_STOP_UNSUPPORTED] +
			 c[PP_CNT_UNWIND_STOP_IMPLAUSIBLE] + c[PP_CNT_UNWIND_STOP_FP];

	if (!u)
		return;
	pp_unwinder_get_stats(u, &us);
	printf("unwinding: %llu frames by table, %llu by frame pointer; %llu samples before "
	       "their process had tables, %llu frames in code mapped since its list; walks "
	       "stopped early %llu (by table: no CFI %llu, unreadable %llu, CFA not up %llu, "
	       "unsupported %llu, implausible %llu; by frame pointer %llu)\n",
	       (unsigned long long)c[PP_CNT_UNWIND_TABLE_FRAMES],
	       (unsigned long long)c[PP_CNT_UNWIND_FP_FRAMES],
	       (unsigned long long)c[PP_CNT_UNWIND_NO_PROC],
	       (unsigned long long)c[PP_CNT_UNWIND_UNLISTED], (unsigned long long)stops,
	       (unsigned long long)c[PP_CNT_UNWIND_STOP_NO_CFI],
	       (unsigned long long)c[PP_CNT_UNWIND_STOP_UNREADABLE],
	       (unsigned long long)c[PP_CNT_UNWIND_STOP_NOT_UP],
	       (unsigned long long)c[PP_CNT_UNWIND_STOP_UNSUPPORTED],
	       (unsigned long long)c[PP_CNT_UNWIND_STOP_IMPLAUSIBLE],
	       (unsigned long long)c[PP_CNT_UNWIND_STOP_FP]);
	printf(
	    "stack copies of those samples: %llu, walked once their tables were in %llu (whole "
	    "%llu; short: the copy ended %llu, no CFI %llu, other %llu); left as the shim "
	    "walked them: no table for their frames %llu, not walked %llu; taken in an image "
	    "replaced by exec since, walked with its own mappings %llu\n",
	    (unsigned long long)st->ustack_copies, (unsigned long long)st->copies_walked,
	    (unsigned long long)st->copies_whole, (unsigned long long)st->copies_short_copy_ended,
	    (unsigned long long)st->copies_short_no_cfi, (unsigned long long)st->copies_short_other,
	    (unsigned long long)st->copies_no_tables, (unsigned long long)st->copies_refused,
	    (unsigned long long)st->copies_of_replaced_images);
	printf("unwind tables: %llu built in %.0f ms, %llu shared, %llu files without CFI "
	       "(%llu refused), %llu too big, %llu evicted (%llu built again), %llu did not fit; "
	       "%llu of %llu rows (%.1f MiB) and %llu rules in use; %llu process installs (%llu "
	       "from mappings the kernel reports, %llu maps reads; %llu released, %llu live, %llu "
	       "gone before, %llu lists without room), %llu files found by identity, %llu "
	       "mappings (%llu without a table: %llu of files without CFI, %llu unopened, %llu "
	       "that did not fit, %llu not placed)\n",
	       (unsigned long long)us.tables_built, (double)us.build_ns / 1e6,
	       (unsigned long long)us.tables_shared, (unsigned long long)us.tables_none,
	       (unsigned long long)us.tables_refused, (unsigned long long)us.tables_too_big,
	       (unsigned long long)us.tables_evicted, (unsigned long long)us.tables_rebuilt,
	       (unsigned long long)us.tables_no_room, (unsigned long long)us.rows_used,
	       (unsigned long long)us.rows_total,
	       (double)us.rows_used * sizeof(uint32_t) / (1 << 20),
	       (unsigned long long)us.rules_used, (unsigned long long)us.procs_installed,
	       (unsigned long long)us.procs_from_events, (unsigned long long)us.maps_reads,
	       (unsigned long long)us.procs_released, (unsigned long long)us.procs_live,
	       (unsigned long long)us.procs_failed, (unsigned long long)us.procs_no_room,
	       (unsigned long long)us.tables_by_identity, (unsigned long long)us.mappings,
	       (unsigned long long)us.mappings_no_table, (unsigned long long)us.mappings_no_cfi,
	       (unsigned long long)us.mappings_unopened, (unsigned long long)us.mappings_no_room,
	       (unsigned long long)us.mappings_unplaced);
	printf("partial unwind tables: %llu files (%llu FDEs found at an earlier start, looked up "
	       "again at once; rows found as walks reach their code: %llu FDEs "
	       "for %llu frames of stack copies; the shim met code not found yet %llu times), "
	       "written %llu times (%llu failed), %llu compiled whole since\n",
	       (unsigned long long)us.tables_partial, (unsigned long long)us.partial_fdes_again,
	       (unsigned long long)us.partial_fdes, (unsigned long long)us.partial_frames,
	       (unsigned long long)c[PP_CNT_UNWIND_DEFERRED], (unsigned long long)us.partial_writes,
	       (unsigned long long)(us.partial_write_failed + us.partial_move_failed),
	       (unsigned long long)us.partial_promoted);
	if (us.cache_on)
		printf(
		    "unwind table cache: %llu tables read in %.0f ms (digests included, %llu "
		    "known from an earlier start), %llu stored, %llu refused, %llu trimmed, %llu "
		    "failed; %.1f MiB kept\n",
		    (unsigned long long)us.tables_from_cache, (double)us.cache_read_ns / 1e6,
		    (unsigned long long)us.cache_identity_hits, (unsigned long long)us.cache_stored,
		    (unsigned long long)us.cache_refused, (unsigned long long)us.cache_trimmed,
		    (unsigned long long)us.cache_failed, (double)us.cache_bytes / (1 << 20));
	else
		printf("unwind table cache: none (every table compiled at this start)\n");
}

/* Time off the CPU: what was recorded, by state, and what was not (short, lost). */
static void print_off_cpu(const struct record_args *a, const struct pp_profile *profile,
			  const struct pp_session_stats *st, const uint64_t counters[PP_CNT__MAX],
			  const char *taken_at)
{
	uint64_t ns[PP_WAIT_STATES] = {0};

	for (size_t i = 0; i < pp_profile_sample_count(profile); i++) {
		const struct pp_sample_info *s = pp_profile_get_sample(profile, i);

		if (s->wait)
			ns[s->wait] += s->value;
	}
	/* a wait whose thread was woken late is two samples (record.h), one wait here */
	printf("off-CPU: %llu waits of %.1f ms or more (1 in %u), %.1f ms: runnable %.1f, "
	       "throttled %.1f, sleeping %.1f, disk %.1f, stopped %.1f; %llu woken and kept from "
	       "a CPU (in runnable, throttled); %llu shorter; lost %llu (ring buffer full %llu, "
	       "not noted %llu, evicted %llu, end not seen %llu); %llu whose end was not seen "
	       "ended at their wakeup; stacks taken at %s\n",
	       (unsigned long long)st->off_cpu_samples, (double)a->off_cpu_min_ns / 1e6,
	       a->off_cpu_every, (double)pp_profile_off_cpu_ns(profile) / 1e6,
	       (double)ns[PP_WAIT_RUNNABLE] / 1e6, (double)ns[PP_WAIT_THROTTLED] / 1e6,
	       (double)ns[PP_WAIT_SLEEPING] / 1e6, (double)ns[PP_WAIT_DISK] / 1e6,
	       (double)ns[PP_WAIT_STOPPED] / 1e6, (unsigned long long)st->off_cpu_woken_late,
	       (unsigned long long)counters[PP_CNT_OFF_CPU_SHORT],
	       (unsigned long long)(counters[PP_CNT_OFF_CPU_RB_FULL] +
				    counters[PP_CNT_OFF_CPU_NOT_NOTED] +
				    counters[PP_CNT_OFF_CPU_EVICTED] +
				    counters[PP_CNT_OFF_CPU_UNSEEN_END]),
	       (unsigned long long)counters[PP_CNT_OFF_CPU_RB_FULL],
	       (unsigned long long)counters[PP_CNT_OFF_CPU_NOT_NOTED],
	       (unsigned long long)counters[PP_CNT_OFF_CPU_EVICTED],
	       (unsigned long long)counters[PP_CNT_OFF_CPU_UNSEEN_END],
	       (unsigned long long)counters[PP_CNT_OFF_CPU_ENDED_AT_WAKEUP],
	       taken_at ? taken_at : "none");
}

/* What the data-type resolution did, and the table of the accessed types and fields. */
static void print_data_types(struct pp_session *session, const struct pp_profile *profile,
			     const struct pp_session_stats *st, int kernel_image,
			     const char *kernel_why)
{
	uint32_t modules_typed, modules_untyped;
	char modules_why[768];

	printf("data types: %llu samples named a type and field, %llu waited for the answer",
	       (unsigned long long)st->data_typed, (unsigned long long)st->data_type_pending);
	for (int m = 1; m < PP_DT_MISS__COUNT; m++)
		if (st->data_untyped[m])
			printf(", %s %llu", pp_data_type_miss_name((enum pp_data_type_miss)m),
			       (unsigned long long)st->data_untyped[m]);
	printf("\n");
	if (kernel_image)
		printf("kernel data types: %s%s\n",
		       kernel_image > 0		      ? ""
		       : kernel_image == -EINPROGRESS ? "not yet: "
						      : "none: ",
		       kernel_why);
	pp_session_kernel_modules(session, &modules_typed, &modules_untyped, modules_why,
				  sizeof(modules_why));
	if (modules_typed || modules_untyped)
		printf(
		    "kernel modules' data types: %u laid out from their files, %u without%s%s%s\n",
		    modules_typed, modules_untyped, modules_why[0] ? " (last: " : "", modules_why,
		    modules_why[0] ? ")" : "");
	pp_report_print_data_types(profile, stdout, 15);
}

/* What naming the samples' containers cost: /proc reads, per process or per cgroup. */
static void print_containers(const struct pp_container_meta *meta)
{
	struct pp_container_meta_stats cs;

	pp_container_meta_get_stats(meta, &cs);
	printf("containers: %llu lookups (%llu by a key of v1 and v2 cgroups); %llu cgroup files "
	       "read from /proc (%llu of processes no longer in the cgroups of their key), "
	       "%llu unresolved\n",
	       (unsigned long long)cs.lookups, (unsigned long long)cs.v1_lookups,
	       (unsigned long long)cs.proc_reads, (unsigned long long)cs.key_mismatches,
	       (unsigned long long)cs.unresolved);
}

/* What the capture cost the agent so far, by thread (base/self_cpu.h). */
static void print_cpu(void)
{
	struct pp_self_cpu c;

	if (pp_self_cpu_read(NULL, &c))
		return;
	printf("agent cpu: %.3f s (", (double)c.total_ns / 1e9);
	for (size_t i = 0; i < c.n; i++)
		printf("%s%s %.3f", i ? ", " : "", c.threads[i].name,
		       (double)c.threads[i].ns / 1e9);
	printf("%sexited %.3f)\n", c.n ? ", " : "", (double)c.exited_ns / 1e9);
}

static void print_summary(const struct record_args *a, const struct pp_profile *profile,
			  const uint64_t counters[PP_CNT__MAX], const struct pp_session_stats *st,
			  double seconds, const char *off_cpu_at, struct pp_session *session)
{
	uint64_t lost = counters[PP_CNT_RB_FULL] + counters[PP_CNT_SCRATCH_MISS];

	pp_debug("pipeline: %llu samples, %llu on known raw stacks, %llu flushes; frames %llu "
		 "(%llu cached, %llu unmapped, %llu without symbol, %llu file unreadable)",
		 (unsigned long long)st->samples, (unsigned long long)st->raw_stack_hits,
		 (unsigned long long)st->raw_stack_flushes, (unsigned long long)st->frames,
		 (unsigned long long)st->frames_cached, (unsigned long long)st->frames_unmapped,
		 (unsigned long long)st->frames_no_symbol, (unsigned long long)st->frames_no_file);
	if (a->quiet)
		return;
	if (a->top && pp_profile_sample_count(profile))
		pp_report_print_top(profile, stdout, a->top);
	printf("\n%llu samples in %.1f s; lost %llu (ring buffer full %llu); stacks truncated: "
	       "kernel %llu, user %llu; decode errors %llu; process gone %llu\n",
	       (unsigned long long)(st->samples - st->off_cpu_samples), seconds,
	       (unsigned long long)lost, (unsigned long long)counters[PP_CNT_RB_FULL],
	       (unsigned long long)counters[PP_CNT_KSTACK_TRUNC],
	       (unsigned long long)counters[PP_CNT_USTACK_TRUNC],
	       (unsigned long long)(st->decode.too_short + st->decode.bad_size +
				    st->decode.bad_type + st->decode.bad_version +
				    st->decode.bad_stack + st->decode.bad_raw),
	       (unsigned long long)st->samples_no_process);
	if (a->off_cpu_every)
		print_off_cpu(a, profile, st, counters, off_cpu_at);
	if (st->mem_samples) {
		char why[768];
		int kernel_image = pp_session_kernel_image(session, why, sizeof(why));

		print_data_types(session, profile, st, kernel_image, why);
	}
	{
		uint64_t named = 0;

		for (int i = 0; i < PP_NAMED_SOURCES; i++)
			named += st->named[i];
		printf("frames named %llu", (unsigned long long)named);
		for (int i = 0, first = 1; i < PP_NAMED_SOURCES; i++) {
			if (!st->named[i])
				continue;
			printf("%s%s %llu", first ? " (" : ", ",
			       pp_frame_source_name((enum pp_frame_source)i),
			       (unsigned long long)st->named[i]);
			first = 0;
		}
		printf("%s, unnamed %llu", named ? ")" : "", (unsigned long long)st->unnamed);
		if (st->names_memoized)
			printf("; named again from names found before %llu (the memo started over "
			       "%llu times)",
			       (unsigned long long)st->names_memoized,
			       (unsigned long long)st->name_memo_resets);
		if (st->perf_map_refused || st->perf_map_bad_lines)
			printf("; perf maps refused %llu, bad lines %llu",
			       (unsigned long long)st->perf_map_refused,
			       (unsigned long long)st->perf_map_bad_lines);
		if (st->jit_given_up)
			printf("; anonymous code whose process exited before its perf map named "
			       "it %llu",
			       (unsigned long long)st->jit_given_up);
		printf("\n");
		printf("symbol files: %llu opened (%llu through map_files, %llu by path in the "
		       "process's root, %llu in a relative's root when the process was gone; "
		       "%llu more known without an open, %llu mappings named at once by a file "
		       "known so); "
		       "refused %llu (over the caps %llu, sparse %llu), not the "
		       "mapped file %llu, unreachable %llu; %llu frames waited for their file "
		       "(%llu finished)\n",
		       (unsigned long long)(st->symbol_via_map_files + st->symbol_via_root +
					    st->symbol_via_relative),
		       (unsigned long long)st->symbol_via_map_files,
		       (unsigned long long)st->symbol_via_root,
		       (unsigned long long)st->symbol_via_relative,
		       (unsigned long long)st->symbol_via_identity,
		       (unsigned long long)st->symbol_tables_at_once,
		       (unsigned long long)(st->symbol_too_big + st->symbol_refused),
		       (unsigned long long)st->symbol_too_big,
		       (unsigned long long)st->symbol_refused,
		       (unsigned long long)st->symbol_not_mapped_file,
		       (unsigned long long)st->symbol_open_failed,
		       (unsigned long long)st->frames_pending,
		       (unsigned long long)st->frames_resolved);
		if (st->symbol_store_on)
			printf("symbol table cache: %llu tables read in %llu ms, %llu stored "
			       "(%llu not: their files changed under %d s before), %llu refused, "
			       "%llu trimmed, %llu failed; %.1f MiB kept\n",
			       (unsigned long long)st->symbol_store.hits,
			       (unsigned long long)(st->symbol_store.read_ns / 1000000),
			       (unsigned long long)st->symbol_store.stored,
			       (unsigned long long)st->symbol_store.unsettled,
			       PP_SYMBOL_STORE_SETTLED_S,
			       (unsigned long long)st->symbol_store.refused,
			       (unsigned long long)st->symbol_store.trimmed,
			       (unsigned long long)st->symbol_store.failed,
			       (double)st->symbol_store.bytes / (1 << 20));
		else if (st->symbol_store_err)
			printf("symbol table cache: not used (%s): symbols read at each start\n",
			       strerror(-st->symbol_store_err));
	}
	printf("processes: %llu images from the kernel's reports (exec, fork) with %llu "
	       "mappings (%llu read after their image's exec); %llu read from /proc, %llu maps "
	       "rereads; process events %llu (lost %llu); samples of an image replaced by exec "
	       "before they were read %llu (%llu of one no longer kept, left without a process); "
	       "samples in an exec before the new image ran, their user frame named in the image "
	       "that called it %llu\n",
	       (unsigned long long)st->process_images_reported,
	       (unsigned long long)st->process_mappings_reported,
	       (unsigned long long)st->process_mappings_late, (unsigned long long)st->process_reads,
	       (unsigned long long)st->process_map_rereads,
	       (unsigned long long)st->sideband_records, (unsigned long long)st->sideband_lost,
	       (unsigned long long)st->samples_of_replaced_images,
	       (unsigned long long)st->samples_of_images_not_kept,
	       (unsigned long long)st->samples_in_exec);
	printf("caches: processes %.1f MiB (%llu), symbols %.1f MiB (%llu files), frames %.1f MiB, "
	       "raw stacks %.1f MiB\n",
	       (double)st->process_cache_bytes / (1 << 20),
	       (unsigned long long)st->processes_cached, (double)st->symbol_cache_bytes / (1 << 20),
	       (unsigned long long)st->symbol_files_cached,
	       (double)st->frame_cache_bytes / (1 << 20), (double)st->raw_stack_bytes / (1 << 20));
	print_cpu();
	if (st->samples_unreadable)
		printf("%llu samples from processes whose maps or binaries could not be read "
		       "(CAP_SYS_PTRACE "
		       "missing, or AppArmor): their user frames are bare\n",
		       (unsigned long long)st->samples_unreadable);
}

static int exit_status_of(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return PP_EXIT_RUNTIME;
}

/* run's pod metadata keys: its config file, its environment, then record's flags for them. */
static int load_run_keys(struct record_args *a, struct pp_run_config *rc)
{
	struct pp_config_errors *errs = calloc(1, sizeof(*errs));
	int ret;

	if (!errs) {
		pp_error("out of memory");
		return PP_EXIT_RUNTIME;
	}
	ret = pp_run_config_load_keys(a->run_argc, a->run_argv, environ, run_keys, rc, errs);
	if (ret) {
		pp_config_errors_print(errs, "pebsprof record", stderr);
		free(errs);
		return ret == -ENOMEM ? PP_EXIT_RUNTIME : PP_EXIT_USAGE;
	}
	free(errs);
	a->node_name = pp_run_config_node_name(rc);
	return 0;
}

/* A container that started during the capture missed the first list: fetch once more. */
static void refresh_pods_if_missed(struct pp_containers *c)
{
	struct pp_k8s_meta_stats st;

	if (!c->k8s)
		return;
	pp_k8s_meta_get_stats(c->k8s, &st);
	if (st.refresh_requests)
		pp_k8s_meta_refresh_now(c->k8s);
}

int pp_cmd_record(int argc, char **argv)
{
	struct record_args a = {0};
	struct pp_sampler smp = {0};
	struct pp_profile *profile = NULL;
	struct pp_session *session = NULL;
	struct pp_containers containers = {0};
	struct pp_run_config rc = {0};
	struct pp_symbolizer sym = {0};
	struct child ch = {.pid = -1, .go_fd = -1, .err_fd = -1};
	struct pp_session_stats st;
	uint64_t counters[PP_CNT__MAX] = {0};
	int ret, status = PP_EXIT_RUNTIME, child_status = -1;
	uint64_t start_mono, deadline = 0, last_progress = 0;
	int tty = isatty(STDERR_FILENO);

	ret = parse_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? PP_EXIT_OK : ret;
	if (a.verbose)
		pp_log_set_level(PP_LOG_DEBUG);
	pp_log_hook_libbpf();
	pp_cli_tune_malloc();

	for (size_t i = 0; i < a.noutputs; i++) {
		ret = pp_output_dir_writable(a.outputs[i]);
		if (ret) {
			pp_error("cannot write output %s: %s; choose a writable directory",
				 a.outputs[i], strerror(-ret));
			return PP_EXIT_RUNTIME;
		}
	}
	if (a.pid >= 0 && kill((pid_t)a.pid, 0) && errno == ESRCH) {
		fprintf(stderr,
			"pebsprof record: no process with pid %lld; check the pid with ps\n",
			(long long)a.pid);
		return PP_EXIT_USAGE;
	}

	if (a.command) {
		ret = command_runnable(a.command[0]);
		if (ret) {
			fprintf(
			    stderr,
			    "pebsprof record: cannot run %s: %s; check the command name and PATH\n",
			    a.command[0], strerror(-ret));
			return PP_EXIT_USAGE;
		}
	}

	status = load_run_keys(&a, &rc);
	if (status != PP_EXIT_OK)
		goto out;
	ret = pp_symbolizer_init(&sym, &rc);
	if (ret) {
		status = ret == -EINVAL ? PP_EXIT_USAGE : PP_EXIT_RUNTIME;
		goto out;
	}
	status = PP_EXIT_RUNTIME;
	{
		struct pp_sampler_opts so = {
		    .sysfs_root = a.sysfs_root,
		    .proc_root = a.proc_root,
		    .req = {.spec = a.event,
			    .freq_hz = a.freq_hz,
			    .period = a.period,
			    .ldlat = a.ldlat,
			    .stack_depth = a.stack_depth,
			    .want_kstack = !a.no_kernel_stacks,
			    .want_ustack = 1},
		    .filter_tgids = !a.system_wide,
		    .cgroup2_root = a.cgroup_root,
		    .ustack_walk = a.ustack_walk,
		    .unwind_table_bytes = a.unwind_table_bytes,
		    .unwind_table_cache = rc.unwind_table_cache,
		    .unwind_table_cache_bytes = rc.unwind_table_cache_bytes,
		    .unwind_partial_fdes = rc.unwind_partial_fdes,
		    .off_cpu_every = a.off_cpu_every,
		    .off_cpu_min_ns = a.off_cpu_min_ns,
		    .off_cpu_stacks = (enum pp_shim_off_cpu_stacks)rc.off_cpu_stacks,
		};
		struct pp_containers_filter filter = {.cgroups = a.cgroups,
						      .container_ids = a.container_ids};
		struct pp_containers_opts co = {.proc_root = a.proc_root,
						.cgroup_root = a.cgroup_root,
						.k8s = pp_run_config_k8s_opts(&rc)};
		char err[512];
		struct pp_profile_desc desc = {0};
		struct pp_session_opts sess = {
		    .proc_root = a.proc_root,
		    .raw_stack_entries = 1 << 16,
		    .symbol_table_cache = pp_symbol_store_dir_of(rc.symbol_table_cache),
		    .symbol_table_cache_bytes = rc.symbol_table_cache_bytes,
		};

		co.k8s.no_thread = 1; /* a bounded capture fetches when it chooses to */
		so.filter_cgroups = pp_containers_filter_wanted(&filter);
		status = pp_sampler_open(&so, &smp);
		if (status != PP_EXIT_OK)
			goto out;
		status = PP_EXIT_RUNTIME;
		ret = pp_containers_open(&co, &containers, err, sizeof(err));
		if (!ret)
			ret = pp_containers_filter_apply(&containers, &filter, smp.shim, err,
							 sizeof(err));
		if (ret) {
			fprintf(stderr, "pebsprof record: %s\n", err);
			status = ret == -EINVAL ? PP_EXIT_USAGE : PP_EXIT_RUNTIME;
			goto out;
		}
		/* Once, before sampling: samples meet the pods of this node as they arrive. */
		if (containers.k8s)
			pp_k8s_meta_refresh_now(containers.k8s);
		if (!a.quiet)
			for (size_t i = 0; i < smp.events->nr_events; i++)
				fprintf(stderr, "pebsprof: %s\n", smp.events->events[i].why);
		pp_sampler_profile_desc(&smp, &desc);
		pp_sampler_session_opts(&smp, &sess);
		sess.containers = containers.meta;
		pp_symbolizer_session_opts(&sym, a.proc_root, a.sysfs_root, &sess);
		profile = pp_profile_new(&desc);
		session = profile ? pp_session_new(&sess, profile) : NULL;
		if (!session) {
			pp_error("out of memory");
			goto out;
		}
	}

	signal(SIGINT, on_stop_signal);
	signal(SIGTERM, on_stop_signal);
	if (a.command) {
		signal(SIGCHLD, on_sigchld);
		ret = start_child(a.command, &ch);
		if (ret) {
			pp_error("cannot start %s: %s", a.command[0], strerror(-ret));
			goto out;
		}
		ret = pp_shim_add_target(smp.shim, (uint32_t)ch.pid);
	} else if (a.pid >= 0) {
		ret = pp_shim_add_target(smp.shim, (uint32_t)a.pid);
		/* a running process: its tables before the first sample, not after */
		if (!ret && smp.unwinder)
			(void)pp_unwinder_install(smp.unwinder, (uint32_t)a.pid);
	}
	if (ret) {
		pp_error("cannot set the process filter: %s", strerror(-ret));
		goto out;
	}

	if (pp_sampler_attach(&smp) != PP_EXIT_OK)
		goto out;

	start_mono = pp_clock_ns(CLOCK_MONOTONIC);
	pp_profile_set_window(profile, pp_clock_ns(CLOCK_REALTIME), 0);
	if (a.duration_ns)
		deadline = start_mono + a.duration_ns;
	if (a.command) {
		/* its wait on the pipe until now, and its way to the exec, are ours */
		pp_session_skip_launcher(session, (uint32_t)ch.pid, pp_clock_ns(CLOCK_MONOTONIC));
		ret = release_child(&ch);
		if (ret) {
			fprintf(stderr,
				"pebsprof record: cannot run %s: %s; check the command name "
				"and PATH\n",
				a.command[0], strerror(-ret));
			waitpid(ch.pid, NULL, 0);
			ch.pid = -1;
			status = PP_EXIT_USAGE;
			goto out;
		}
	}

	while (!stop_requested) {
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		int wait_ms = pp_shim_poll_interval_ms(smp.shim);

		/* -d ends on time, not up to a quiet poll's wait later */
		if (deadline)
			wait_ms = pp_poll_wait_until(wait_ms, now, deadline);
		ret = pp_shim_poll(smp.shim, wait_ms, pp_session_record_cb, session);
		pp_session_read_sideband(session);
		if (ret < 0 && ret != -EINTR) {
			pp_error("reading the BPF ring buffer failed: %s", strerror(-ret));
			goto out;
		}
		if (ch.pid > 0 && child_exited) {
			int ws;
			pid_t w = waitpid(ch.pid, &ws, WNOHANG);

			child_exited = 0;
			if (w == ch.pid) {
				child_status = exit_status_of(ws);
				ch.pid = -1;
				break;
			}
		}
		if (a.pid >= 0 && kill((pid_t)a.pid, 0) && errno == ESRCH)
			break;
		now = pp_clock_ns(CLOCK_MONOTONIC);
		if (deadline && now >= deadline)
			break;
		if (tty && !a.quiet && now - last_progress >= 1000000000ull) {
			pp_session_get_stats(session, &st);
			fprintf(stderr, "\r\033[Kpebsprof: recording %.0f s, %llu samples",
				(double)(now - start_mono) / 1e9, (unsigned long long)st.samples);
			last_progress = now;
		}
	}
	if (tty && !a.quiet && last_progress)
		fprintf(stderr, "\r\033[K");

	/* Stop sampling, then drain what is already in the ring buffer. */
	pp_shim_detach_all(smp.shim);
	while (pp_shim_poll(smp.shim, 0, pp_session_record_cb, session) > 0)
		;
	pp_session_read_sideband(session);
	/* and the unwinder's queue: the exits read last are released before the summary */
	if (pp_unwinder_drain_for(smp.unwinder, RECORD_UNWINDER_WAIT_MS))
		pp_debug("unwinder: work still queued after %u ms", RECORD_UNWINDER_WAIT_MS);
	/* the stack copies walked last, before their files are waited for */
	pp_session_take_walked(session);
	refresh_pods_if_missed(&containers);
	/* the files still being read when sampling stopped name their frames before writing */
	if (pp_session_wait_symbols(session, (uint64_t)RECORD_SYMBOLS_WAIT_S * 1000))
		pp_warn("symbols: files still being read after %u s: their frames stay unnamed",
			RECORD_SYMBOLS_WAIT_S);
	/* debug files asked of debuginfod during the capture name its frames before writing */
	if (sym.debuginfod) {
		struct pp_debuginfod_stats ds;

		pp_debuginfod_get_stats(sym.debuginfod, &ds);
		if (ds.pending && !a.quiet)
			fprintf(stderr,
				"pebsprof: waiting up to %u s for %llu debug files from "
				"debuginfod\n",
				RECORD_DEBUGINFOD_WAIT_S, (unsigned long long)ds.pending);
		pp_session_wait_debug(session, (uint64_t)RECORD_DEBUGINFOD_WAIT_S * 1000);
	}
	if (pp_session_flush(session))
		pp_warn("some samples could not be added to the profile: out of memory");
	pp_profile_set_window(profile, pp_profile_get_desc(profile)->start_unix_ns,
			      pp_clock_ns(CLOCK_MONOTONIC) - start_mono);
	pp_shim_read_counters(smp.shim, counters);
	pp_session_get_stats(session, &st);
	{
		struct pp_kallsyms_stats ks;

		pp_kallsyms_get_stats(smp.ksyms, &ks);
		pp_debug("kernel symbols %s: %llu addresses asked of the kernel, %llu answered "
			 "from kept symbols, %llu pages it named nothing in%s",
			 ks.on_demand ? "on demand" : "from the whole kallsyms",
			 (unsigned long long)ks.queries, (unsigned long long)ks.hits,
			 (unsigned long long)ks.unresolved,
			 ks.table_loaded ? "; then read whole" : "");
	}

	if (ch.pid > 0) {
		/* Interrupted: the command got the same Ctrl-C; collect its status. */
		int ws;

		if (waitpid(ch.pid, &ws, 0) == ch.pid)
			child_status = exit_status_of(ws);
		ch.pid = -1;
	}

	ret = write_outputs(&a, profile);
	if (!a.quiet) {
		print_shim(smp.shim, (int)smp.ustack_walk);
		print_unwinding(smp.unwinder, counters, &st);
	}
	print_summary(&a, profile, counters, &st,
		      (double)pp_profile_get_desc(profile)->duration_ns / 1e9,
		      pp_shim_switch_in_at(smp.shim), session);
	if (!a.quiet && containers.meta)
		print_containers(containers.meta);
	if (ret)
		status = PP_EXIT_RUNTIME;
	else
		status = child_status >= 0 ? child_status : PP_EXIT_OK;

out:
	if (ch.pid > 0) {
		kill(ch.pid, SIGKILL);
		waitpid(ch.pid, NULL, 0);
	}
	if (ch.go_fd >= 0)
		close(ch.go_fd);
	if (ch.err_fd >= 0)
		close(ch.err_fd);
	pp_session_free(session);
	pp_containers_close(&containers);
	pp_sampler_close(&smp);
	pp_profile_free(profile);
	pp_symbolizer_fini(&sym);
	pp_run_config_fini(&rc);
	return status;
}
