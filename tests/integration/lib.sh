# Shared shell helpers for the pebsprof integration tests (sourced, not run).
#
# A test sources this file, calls the pp_require_* guards (each exits 77 with the reason
# when the machine cannot run the test), records findings with pp_ok / pp_fail, and ends
# with pp_finish, which exits 1 if anything failed. Temporary files live under $PP_TMP,
# removed on exit unless PP_KEEP_TMP=1 (then the path is printed for post-mortems).

PP_FAILS=0
PP_CHECKS=0
PP_SOURCE_DIR=${PP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PP_BUILD_DIR=${PP_BUILD_DIR:-$PP_SOURCE_DIR/build}
PP_TEST_BIN_DIR=${PP_TEST_BIN_DIR:-$PP_BUILD_DIR/tests}
PEBSPROF=${PEBSPROF:-$PP_BUILD_DIR/collector/pebsprof}
PP_HELPER="$PP_SOURCE_DIR/tests/integration/pprof_shares.py"
PP_WORKLOAD="$PP_TEST_BIN_DIR/pp_workload"
# Debian's interpreter: the tests need only its standard library.
PP_PYTHON=${PP_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}

PP_TMP=$(mktemp -d /tmp/pp-it.XXXXXX)
chmod 755 "$PP_TMP"
# Each test compiles its programs' unwind tables and reads their symbols as a new node does,
# in caches of its own (the machine's /var/lib/pebsprof is not the tests'); test_table_cache
# restarts with them.
export PEBSPROF_UNWIND_TABLE_CACHE=${PEBSPROF_UNWIND_TABLE_CACHE-$PP_TMP/unwind-tables}
export PEBSPROF_SYMBOL_TABLE_CACHE=${PEBSPROF_SYMBOL_TABLE_CACHE-$PP_TMP/symbol-tables}
pp_cleanup() {
	local pid procs
	for pid in ${PP_BG_PIDS:-}; do
		kill -KILL "$pid" 2>/dev/null
		# a JIT runtime's perf map (Java, Node.js) is the one file a test's program writes
		# outside the test's directory
		rm -f "/tmp/perf-$pid.map"
	done
	# Cgroups made by the test (pp_require_cgroup2): empty them, then remove them.
	if [ -n "${PP_CGROUP_BASE:-}" ] && [ -d "$PP_CGROUP_BASE" ]; then
		for procs in $(find "$PP_CGROUP_BASE" -name cgroup.procs); do
			while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$procs"
		done
		sleep 0.2
		find "$PP_CGROUP_BASE" -depth -type d -exec rmdir {} + 2>/dev/null
	fi
	for procs in ${PP_CGROUP_EXTRA:-}; do
		pp_rmdir_cgroup "$procs" 5
	done
	if [ "${PP_KEEP_TMP:-0}" = 1 ]; then
		echo "kept temporary files in $PP_TMP"
	else
		rm -rf "$PP_TMP"
	fi
}
trap pp_cleanup EXIT

# pp_rmdir_cgroup DIR SECONDS: kill what is in a cgroup the test made outside PP_CGROUP_BASE
# (those in PP_CGROUP_EXTRA are removed at exit too), wait until it is empty, at most SECONDS
# (a killed process leaves its cgroup only once reaped, and a test's `$(...)` child is not its
# own to wait for), and remove it.
pp_rmdir_cgroup() {
	local pid i procs
	[ -d "$1" ] || return 0
	for ((i = 0; i < $2 * 10; i++)); do
		procs=$(cat "$1/cgroup.procs" 2>/dev/null) # its size reads 0 whatever it holds
		[ -n "$procs" ] || break
		for pid in $procs; do kill -KILL "$pid" 2>/dev/null; done
		sleep 0.1
	done
	rmdir "$1" 2>/dev/null
}

pp_log() { echo "== $*"; }
pp_ok() {
	PP_CHECKS=$((PP_CHECKS + 1))
	echo "ok: $*"
}
pp_fail() {
	PP_CHECKS=$((PP_CHECKS + 1))
	PP_FAILS=$((PP_FAILS + 1))
	echo "FAIL: $*"
}
pp_skip() {
	echo "skipped: $*"
	exit 77
}

# pp_skip_check REASON: one check that cannot run here, said so; the test goes on.
pp_skip_check() {
	echo "skipped: $*"
}

# pp_check DESCRIPTION CMD...: a check that passes when CMD exits 0; CMD's output is shown.
pp_check() {
	local what=$1
	shift
	if "$@"; then
		pp_ok "$what"
	else
		pp_fail "$what"
	fi
}

pp_finish() {
	echo "$PP_CHECKS checks, $PP_FAILS failed"
	[ "$PP_FAILS" -eq 0 ] || exit 1
	exit 0
}

pp_require_root() {
	[ "$(id -u)" -eq 0 ] || pp_skip "needs root (BPF and perf events); run under sudo"
}

pp_require_bpf() {
	[ -r /sys/kernel/btf/vmlinux ] || pp_skip "kernel has no BTF (/sys/kernel/btf/vmlinux)"
	if command -v bpftool >/dev/null || [ -x /usr/sbin/bpftool ]; then
		PATH=$PATH:/usr/sbin bpftool prog list >/dev/null 2>&1 ||
			pp_skip "the bpf() system call is unavailable here (bpftool prog list failed)"
	fi
}

# perf_event_open for a software event: without it nothing can sample.
pp_require_perf_events() {
	[ -e /proc/sys/kernel/perf_event_paranoid ] ||
		pp_skip "kernel built without perf events (/proc/sys/kernel/perf_event_paranoid missing)"
	if command -v perf >/dev/null; then
		perf stat -e cpu-clock -x, -- true >/dev/null 2>&1 ||
			pp_skip "perf_event_open(cpu-clock) fails here (perf stat -e cpu-clock true)"
	fi
}

pp_require_pebsprof() {
	[ -x "$PEBSPROF" ] || {
		echo "FAIL: pebsprof binary not found at '$PEBSPROF' (set PEBSPROF or build it)"
		exit 1
	}
	[ -x "$PP_WORKLOAD" ] || {
		echo "FAIL: workload not found at '$PP_WORKLOAD' (build target pp_workload)"
		exit 1
	}
}

pp_require_go_pprof() {
	command -v go >/dev/null || pp_skip "go tool pprof unavailable (apt-get install golang-go)"
	export GOCACHE=${GOCACHE:-$PP_TMP/gocache} HOME=${HOME:-$PP_TMP}
	# pprof would try to reach a symbol server for unsymbolized addresses: never here.
	export PPROF_BINARY_PATH=/nonexistent PPROF_TMPDIR=$PP_TMP
}

# pp_pprof_raw FILE.pb.gz OUT: decode with Go's pprof; nonzero if it cannot.
pp_pprof_raw() {
	go tool pprof -symbolize=none -raw "$1" >"$2" 2>"$2.err"
}

# pp_run OUTPREFIX CMD...: run CMD with stdout/stderr to OUTPREFIX.{out,err}; sets PP_RC.
pp_run() {
	local pfx=$1
	shift
	"$@" >"$pfx.out" 2>"$pfx.err"
	PP_RC=$?
}

# pp_wait_pid PID SECONDS: wait for a background child; sets PP_RC, or 124 after SECONDS
# (the child is then killed).
pp_wait_pid() {
	local pid=$1 limit=$(($2 * 10)) i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt $limit ]; do
		# a child that has exited but is not yet reaped still answers kill -0
		[ -r "/proc/$pid/stat" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] &&
			break
		sleep 0.1
		i=$((i + 1))
	done
	if [ $i -ge $limit ]; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		PP_RC=124
		return
	fi
	wait "$pid"
	PP_RC=$?
}

# pp_py ARGS...: the profile helper (pprof_shares.py), output indented.
pp_py() {
	"$PP_PYTHON" "$PP_HELPER" "$@" 2>&1 | sed 's/^/    /'
	return "${PIPESTATUS[0]}"
}

# pp_require_cgroup2: PP_CG2 is the host's cgroup v2 mount, writable (else the test skips);
# cgroups the test makes under PP_CGROUP_BASE are emptied and removed on exit.
pp_require_cgroup2() {
	# mountinfo: field 5 is the mount point, the type follows the " - " separator.
	PP_CG2=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") { if ($(i+1) == "cgroup2") print $5; break } }' \
		/proc/self/mountinfo | head -1)
	[ -n "$PP_CG2" ] || pp_skip "no cgroup v2 mounted on this host"
	[ -w "$PP_CG2" ] || pp_skip "the cgroup v2 mount $PP_CG2 is not writable here"
	PP_CGROUP_BASE="$PP_CG2/pp-test-$$"
}

# pp_start_in_cgroup DIR SECONDS: the workload for SECONDS, in cgroup DIR from its first
# instruction; prints its pid once it is there.
pp_start_in_cgroup() {
	local pid
	sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" "$3"' sh "$1" "$PP_WORKLOAD" "$2" \
		>/dev/null 2>&1 &
	pid=$!
	# back once it is in the cgroup (at most 10 s): a busy machine is slow to start it
	pp_wait_line "$pid" "$1/cgroup.procs" "^$pid\$" 10 || :
	echo "$pid"
}

# pp_wait_line PID FILE PATTERN SECONDS: wait until FILE has a line matching PATTERN, at most
# SECONDS (a busy machine is slow to start things), or until PID has exited. 0 when it has.
pp_wait_line() {
	local i
	for ((i = 0; i < $4 * 10; i++)); do
		grep -q "$3" "$2" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "$3" "$2" 2>/dev/null
}

# pp_start_java_hot DIR: tests/programs/PPHot.java, compiled into DIR and started (for at most
# 120 s; killed at exit), back once the JIT has compiled its hot method (C2, level 4) or after
# 90 s. Sets JPID; 0 when the method is compiled. On a busy machine the JVM's start and its
# compiler threads take seconds, so the tests wait for the method rather than sleep.
pp_start_java_hot() {
	local i
	mkdir -p "$1"
	javac -d "$1" "$PP_SOURCE_DIR/tests/programs/PPHot.java" || return 1
	java -XX:+PreserveFramePointer -cp "$1" PPHot 120 >/dev/null &
	JPID=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $JPID"
	for ((i = 0; i < 900; i++)); do
		kill -0 "$JPID" 2>/dev/null || return 1
		jcmd "$JPID" Compiler.codelist 2>/dev/null | awk '$2 == 4 && /PPHot.ppHotSpin/ { f = 1 } END { exit !f }' &&
			return 0
		sleep 0.1
	done
	return 1
}

# pp_cpu_ms PID: the CPU time (user and system) PID has had, in ms; empty once it is gone.
pp_cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000 / hz) }' \
		"/proc/$1/stat" 2>/dev/null
}

# pp_wait_grows MS SECONDS MEASURE ARGS...: wait until `MEASURE ARGS` (a number of ms) has
# grown by MS from now, at most SECONDS; 0 when it has, 1 on the limit or when it prints nothing
# (its subject is gone). PP_GREW is how much it had grown when the wait ended.
pp_wait_grows() {
	local ms=$1 secs=$2 start now i
	shift 2
	PP_GREW=0
	start=$("$@")
	[ -n "$start" ] || return 1
	for ((i = 0; i < secs * 10; i++)); do
		now=$("$@")
		[ -n "$now" ] || return 1
		PP_GREW=$((now - start))
		[ "$PP_GREW" -ge "$ms" ] && return 0
		sleep 0.1
	done
	return 1
}

# pp_wait_cpu PID MS SECONDS: wait until PID has had MS more ms of CPU than now, at most
# SECONDS; 0 when it has. What a check needs is samples, that is CPU time: on a busy machine
# a fixed wall time gives a starved workload a fraction of it.
pp_wait_cpu() {
	pp_wait_grows "$2" "$3" pp_cpu_ms "$1"
}

# pp_record_until OUT MS MEASURE... -- ARGS...: `pebsprof record ARGS` (stdout and stderr in
# OUT.out and OUT.err) until `MEASURE...` (ms, as pp_wait_grows takes it) has grown by MS from
# when the event is open (at most 120 s), then Ctrl-C. Sets PP_RC, and PP_GREW as
# pp_wait_grows does.
pp_record_until() {
	local out=$1 ms=$2 rec measure=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		measure+=("$1")
		shift
	done
	shift
	"$PEBSPROF" record "$@" >"$out.out" 2>"$out.err" &
	rec=$!
	pp_wait_line "$rec" "$out.err" 'opened ' 120 || :
	pp_wait_grows "$ms" 120 "${measure[@]}" ||
		echo "    ${measure[*]} did not grow by $ms ms within 120 s"
	kill -INT "$rec" 2>/dev/null
	pp_wait_pid "$rec" 60
}

# pp_record_cpu OUT PID MS ARGS...: `pebsprof record ARGS` until the workload PID has had MS ms
# of CPU from when the event is open. What a check needs is samples: a fixed duration on a busy
# machine gives the workload a fraction of them. Sets PP_RC.
pp_record_cpu() {
	local out=$1 pid=$2 ms=$3
	shift 3
	pp_record_until "$out" "$ms" pp_cpu_ms "$pid" -- "$@"
}

# pp_start_sink NAME SCRIPT: tests/tools/pp_http_sink.py on a kernel-chosen port of 127.0.0.1,
# recording into $PP_TMP/NAME and answering by SCRIPT (its JSON list); sets SINK (its pid,
# killed at exit) and SINK_PORT.
pp_start_sink() {
	mkdir -p "$PP_TMP/$1"
	"$PP_PYTHON" "$PP_SOURCE_DIR/tests/tools/pp_http_sink.py" --port 0 --dir "$PP_TMP/$1" \
		--script "$2" >"$PP_TMP/$1.port" 2>"$PP_TMP/$1.err" &
	SINK=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $SINK"
	pp_wait_line "$SINK" "$PP_TMP/$1.port" PORT 60 || :
	SINK_PORT=$(awk '/PORT/{print $2}' "$PP_TMP/$1.port")
}

# pp_run_for SECONDS OUT ARGS...: `pebsprof run ARGS` for SECONDS, then SIGTERM; its output in
# OUT.out and OUT.err; PP_RC is its exit status (124 if it took more than 30 s to stop).
pp_run_for() {
	local secs=$1 out=$2
	shift 2
	"$PEBSPROF" run "$@" >"$out.out" 2>"$out.err" &
	local pid=$!
	# The seconds count from when sampling began (the agent says so): beside the kernel
	# matrix, loading the shim took long enough that a 4 s run was stopped before it sent
	# anything. At most 120 s; an agent that exits first (bad configuration) ends the wait.
	pp_wait_line "$pid" "$out.err" 'info: sampling;' 120 || :
	sleep "$secs"
	kill -TERM "$pid" 2>/dev/null
	pp_wait_pid "$pid" 30
}

# pp_otlp_python REF DIR: python classes of the OTLP profiles schema at REF (the reference
# opentelemetry-proto tree), made by protoc into DIR. Returns protoc's status.
pp_otlp_python() {
	mkdir -p "$2"
	(cd "$1" && protoc --python_out="$2" opentelemetry/proto/common/v1/common.proto \
		opentelemetry/proto/resource/v1/resource.proto \
		opentelemetry/proto/profiles/v1development/profiles.proto \
		opentelemetry/proto/collector/profiles/v1development/profiles_service.proto)
}

# pp_show FILE [N]: show the first N lines of a file, indented, to explain a failure.
pp_show() {
	[ -s "$1" ] && head -n "${2:-10}" "$1" | sed 's/^/    | /'
	return 0
}
