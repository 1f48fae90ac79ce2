#!/bin/bash
# What sampling costs: pebsprof's in-kernel BPF time per sample, its user-space CPU per sample
# against `perf record -g` on the same busy machine, and the peak memory of both.
# See bench/README.md for what each figure means. Needs root.
#
# usage: bench/bench_overhead.sh [-b BUILD_DIR] [-d SECONDS] [-F HZ] [-u WALKER] [-k]
#   -b  build directory holding collector/pebsprof and tests/pp_workload (default: build)
#   -d  seconds per capture (default 20)
#   -F  sampling frequency per CPU (default 10000)
#   -u  pebsprof's --user-unwind (default: its default, auto)
#   -k  keep the work directory (profiles, perf.data, logs)

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
SECS=20
HZ=10000
KEEP=0
UNWIND=
while getopts "b:d:F:u:kh" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	d) SECS=$OPTARG ;;
	F) HZ=$OPTARG ;;
	u) UNWIND="--user-unwind $OPTARG" ;;
	k) KEEP=1 ;;
	*)
		sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
PEBSPROF=${PEBSPROF:-$BUILD/collector/pebsprof}
WORKLOAD=$BUILD/tests/pp_workload
PATH=$PATH:/usr/sbin:/sbin

die() {
	echo "bench_overhead: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events, sysctls); run under sudo"
[ -x "$PEBSPROF" ] || die "no pebsprof at $PEBSPROF (build it, or pass -b BUILD_DIR)"
[ -x "$WORKLOAD" ] || die "no workload at $WORKLOAD (build target pp_workload)"
for tool in perf bpftool python3 /usr/bin/time; do
	command -v $tool >/dev/null || die "$tool is missing (apt-get install linux-perf bpftool time)"
done
case $SECS$HZ in *[!0-9]*) die "-d and -F want whole numbers" ;; esac

W=$(mktemp -d /tmp/pp-bench.XXXXXX)
NCPU=$(nproc)
RATE_F=/proc/sys/kernel/perf_event_max_sample_rate
PCT_F=/proc/sys/kernel/perf_cpu_time_max_percent
STATS_F=/proc/sys/kernel/bpf_stats_enabled
OLD_RATE=$(cat $RATE_F)
OLD_PCT=$(cat $PCT_F)
OLD_STATS=$(cat $STATS_F)
LOAD_PIDS=

restore() {
	local p
	for p in $LOAD_PIDS; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	echo "$OLD_RATE" >$RATE_F
	echo "$OLD_PCT" >$PCT_F
	echo "$OLD_STATS" >$STATS_F
	if [ $KEEP = 1 ]; then echo "work directory kept: $W"; else rm -rf "$W"; fi
}
trap restore EXIT
trap 'exit 130' INT TERM

# The kernel refuses frequencies above perf_event_max_sample_rate, and lowers that limit by
# itself when sample handling exceeds perf_cpu_time_max_percent of CPU time ("perf:
# interrupt took too long"). Raise it if needed; report any lowering after each run.
SET_RATE=$OLD_RATE
if [ "$OLD_RATE" -lt "$HZ" ]; then
	SET_RATE=$((HZ * 2))
	echo "$SET_RATE" >$RATE_F
fi
echo 1 >$STATS_F
DMESG_MARK=$(dmesg 2>/dev/null | wc -l)

check_rate() {
	local now
	now=$(cat $RATE_F)
	if [ "$now" -lt "$SET_RATE" ]; then
		echo "note: after $1 the kernel lowered perf_event_max_sample_rate $SET_RATE -> $now" \
			"(perf_cpu_time_max_percent=$OLD_PCT); figures below are at the lowered rate"
		echo "$SET_RATE" >$RATE_F
		LOWERED="$LOWERED $1:$now"
	fi
}
LOWERED=

# Other load skews both tools (each samples every process): note it with the figures.
read -r LOAD_BEFORE _ </proc/loadavg

# Busy CPUs: one workload per CPU, running past both captures.
for _ in $(seq "$NCPU"); do
	"$WORKLOAD" $((SECS * 2 + 30)) &
	LOAD_PIDS="$LOAD_PIDS $!"
done
sleep 1

# While a tool runs, this script starts no process at all: pebsprof -a profiles every process
# on the machine, so each one the script started (pgrep, cat, awk, date...) would be read from
# /proc and symbolized by pebsprof and inflate the figure being measured. Everything below
# uses bash builtins only.

# A read that times out is a sleep without a process: the FIFO, open read-write, never ends.
mkfifo "$W/pause.fifo"
exec {PAUSE_FD}<>"$W/pause.fifo"
pause() { read -r -t "$1" -u "$PAUSE_FD"; }
# cputime OUT CMD...: runs CMD and writes "user_s sys_s maxrss_kib" of it to OUT. CPU time
# comes from bash's `times` (children, millisecond steps; /usr/bin/time prints only 10 ms
# steps), peak RSS from /usr/bin/time.
cputime() {
	local out=$1 rc
	shift
	(
		/usr/bin/time -f "%M" -o "$out.rss" "$@"
		rc=$?
		times >"$out.times"
		exit $rc
	)
	rc=$?
	awk -v rss="$(tail -n1 "$out.rss")" 'NR == 2 {
		split($1, u, /[ms]/); split($2, s, /[ms]/)
		printf "%.6f %.6f %d\n", u[1] * 60 + u[2], s[1] * 60 + s[2], rss }' \
		"$out.times" >"$out"
	return $rc
}
# CHILD=a child of process $1, found by scanning /proc (builtins only), or empty.
find_child() {
	local d line rest ppid
	CHILD=
	for d in /proc/[0-9]*; do
		read -r line <"$d/stat" 2>/dev/null || continue
		rest=${line##*) }
		read -r _ ppid _ <<<"$rest"
		if [ "$ppid" = "$1" ]; then
			CHILD=${d#/proc/}
			return
		fi
	done
}
# LEAF=the descendant of $1 whose command name is $2 (the tool under the wrappers), or empty.
find_leaf() {
	local p comm
	LEAF=
	for _ in {1..100}; do
		p=$1
		find_child "$p"
		while [ -n "$CHILD" ]; do
			p=$CHILD
			comm=
			read -r comm <"/proc/$p/comm" 2>/dev/null
			if [ "$comm" = "$2" ]; then
				LEAF=$p
				return
			fi
			find_child "$p"
		done
		pause 0.05
	done
}
# CPU=nanoseconds process $1 has run so far, all threads (first field of schedstat).
cpu_ns() {
	local t ns
	CPU=0
	for t in /proc/"$1"/task/*; do
		read -r ns _ <"$t/schedstat" 2>/dev/null && CPU=$((CPU + ns))
	done
}
now_ns() {
	local s=${EPOCHREALTIME/./}
	NOW=$((10#$s * 1000))
}
# steady_window PARENT COMM OUT: CPU time of the tool 3 s after its start and 2 s before its
# end, so start-up (symbol tables, kallsyms) and the final write are left out.
steady_window() {
	local out=$3 pid t0 c0 t1 c1
	find_leaf "$1" "$2"
	pid=$LEAF
	[ -n "$pid" ] || return 0
	pause 3
	now_ns
	t0=$NOW
	cpu_ns "$pid"
	c0=$CPU
	pause $((SECS - 5))
	now_ns
	t1=$NOW
	cpu_ns "$pid"
	c1=$CPU
	echo "$((t1 - t0)) $((c1 - c0))" >"$out"
}

# --- pebsprof ----------------------------------------------------------------------------
PP_CMD="$PEBSPROF record -e cpu-clock -a -F $HZ -d $SECS $UNWIND -o $W/pp.pb.gz"
cputime "$W/pp.time" $PP_CMD >"$W/pp.out" 2>"$W/pp.err" &
TPID=$!
: >"$W/pp.steady"
steady_window $TPID pebsprof "$W/pp.steady" &
SPID=$!
: >"$W/bpf.last"
# One bpftool call, 1 s before the end: the counters vanish when pebsprof unloads the program.
(
	pause $((SECS - 1))
	# on_sample, or with unwind tables on_sample_unwind
	{ bpftool prog show name on_sample; bpftool prog show name on_sample_unwind; } \
		2>/dev/null >"$W/bpf.show"
) &
BPID=$!
wait $TPID
PP_RC=$?
wait $SPID $BPID 2>/dev/null
awk '/run_time_ns/ { for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t = $(i + 1);
	if ($i == "run_cnt") c = $(i + 1) } } END { if (c) print 0, t, c }' "$W/bpf.show" >"$W/bpf.last"
check_rate pebsprof
[ $PP_RC -eq 0 ] || {
	cat "$W/pp.err" >&2
	die "pebsprof exited $PP_RC"
}

# Samples pebsprof delivered: counted by Go's pprof in the written profile (independent of
# what pebsprof says it did).
export GOCACHE=$W/gocache HOME=${HOME:-$W}
PP_SAMPLES=$(go tool pprof -symbolize=none -raw "$W/pp.pb.gz" 2>/dev/null |
	awk '/^Samples:/{s=1; getline; next} /^Locations/{s=0} s && /^ *[0-9]+ +[0-9]+:/{n+=$1} END{print n+0}')

# --- perf ----------------------------------------------------------------------------------
PERF_CMD="perf record -e cpu-clock -a -g -F $HZ -o $W/perf.data -- sleep $SECS"
cputime "$W/perf.time" $PERF_CMD >"$W/perf.out" 2>"$W/perf.err" &
TPID=$!
: >"$W/perf.steady"
steady_window $TPID perf "$W/perf.steady" &
SPID=$!
wait $TPID
PERF_RC=$?
wait $SPID 2>/dev/null
check_rate perf
[ $PERF_RC -eq 0 ] || {
	cat "$W/perf.err" >&2
	die "perf record exited $PERF_RC"
}
PERF_SAMPLES=$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' "$W/perf.err" | tail -n1)
[ -n "$PERF_SAMPLES" ] || PERF_SAMPLES=$(perf report -i "$W/perf.data" --stats 2>/dev/null |
	awk '/SAMPLE events:/{print $3; exit}')

# --- table -----------------------------------------------------------------------------------
read -r BPF_ID BPF_NS BPF_CNT <"$W/bpf.last" 2>/dev/null
read -r PP_U PP_S PP_RSS <"$W/pp.time"
read -r PF_U PF_S PF_RSS <"$W/perf.time"
read -r PP_WIN_NS PP_WIN_CPU <"$W/pp.steady"
read -r PF_WIN_NS PF_WIN_CPU <"$W/perf.steady"
python3 - "$NCPU" "$HZ" "$SECS" "${BPF_NS:-0}" "${BPF_CNT:-0}" "$PP_U" "$PP_S" "$PP_RSS" \
	"${PP_SAMPLES:-0}" "$PF_U" "$PF_S" "$PF_RSS" "${PERF_SAMPLES:-0}" \
	"${PP_WIN_NS:-0}" "${PP_WIN_CPU:-0}" "${PF_WIN_NS:-0}" "${PF_WIN_CPU:-0}" <<'EOF'
import sys
ncpu, hz, secs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
bpf_ns, bpf_cnt = int(sys.argv[4]), int(sys.argv[5])
pu, ps, prss, psamp = float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
fu, fs, frss, fsamp = float(sys.argv[10]), float(sys.argv[11]), int(sys.argv[12]), int(sys.argv[13])
pwin, pwcpu, fwin, fwcpu = (int(x) for x in sys.argv[14:18])
want = ncpu * hz * secs
a = bpf_ns / bpf_cnt / 1000 if bpf_cnt else float("nan")
b = (pu + ps) * 1e6 / psamp if psamp else float("nan")
c = (fu + fs) * 1e6 / fsamp if fsamp else float("nan")
d = b / c if c == c and c else float("nan")
def verdict(ok, v=0.0):
    return "n/a" if v != v else ("ok" if ok else "MISSED")
print(f"\n{ncpu} CPUs busy, cpu-clock at {hz} Hz per CPU for {secs} s "
      f"(ideal {want} samples per tool)\n")
print(f"{'':44s} {'pebsprof':>12s} {'perf -g':>12s}  target")
print(f"{'samples delivered':44s} {psamp:12d} {fsamp:12d}")
print(f"{'  as % of ideal':44s} {100*psamp/want:11.1f}% {100*fsamp/want:11.1f}%")
print(f"{'user + sys CPU (s)':44s} {pu+ps:12.2f} {fu+fs:12.2f}")
print(f"{'(a) BPF program time per sample (us)':44s} {a:12.3f} {'-':>12s}  <= 2   {verdict(a <= 2, a)}"
      f"   [{bpf_cnt} runs]")
print(f"{'(b,c) user-space CPU per sample (us)':44s} {b:12.3f} {c:12.3f}")
print(f"{'(d) ratio pebsprof / perf, whole run':44s} {d:12.3f} {'':12s}  <= 0.5 {verdict(d <= 0.5, d)}")
# Steady state: CPU used inside the window, over the samples the window held (delivered rate
# of the whole run times the window length).
def steady(win_ns, win_cpu, samples):
    if not win_ns or not samples:
        return float("nan")
    return win_cpu / 1000 / (samples / secs * win_ns / 1e9)
bs, cs = steady(pwin, pwcpu, psamp), steady(fwin, fwcpu, fsamp)
ds = bs / cs if cs == cs and cs else float("nan")
print(f"{'(b,c) steady-state CPU per sample (us)':44s} {bs:12.3f} {cs:12.3f}")
# Informational: perf defers its work (build ids, and all symbolization to perf report).
print(f"{'    ratio in the steady state (information)':44s} {ds:12.3f}")
print(f"{'(e) peak RSS (MiB)':44s} {prss/1024:12.1f} {frss/1024:12.1f}  <= 64  "
      f"{verdict(prss / 1024 <= 64)}")
EOF
read -r LOAD_AFTER _ </proc/loadavg
echo
echo "load average (1 min) before: $LOAD_BEFORE, after: $LOAD_AFTER (the $NCPU workloads add $NCPU;" \
	"more means other processes ran too and the figures are noisier)"
echo "commands:"
echo "  load:     $NCPU x $WORKLOAD $((SECS * 2 + 30))"
echo "  sysctl:   kernel.bpf_stats_enabled=1, kernel.perf_event_max_sample_rate=$SET_RATE" \
	"(was $OLD_RATE), kernel.perf_cpu_time_max_percent=$OLD_PCT (restored on exit)"
echo "  (a)       bpftool prog show --json   # run_time_ns / run_cnt of on_sample, read while loaded"
echo "  (b,e)     CPU by bash times, RSS by /usr/bin/time around: $PP_CMD"
echo "            go tool pprof -raw pp.pb.gz   # samples counted in the written profile"
echo "  (c,e)     CPU by bash times, RSS by /usr/bin/time around: $PERF_CMD"
if [ -n "$LOWERED" ]; then
	echo "kernel lowered the sample rate during:$LOWERED"
fi
if dmesg 2>/dev/null | tail -n +"$((DMESG_MARK + 1))" | grep -q 'perf: interrupt took too long'; then
	echo "dmesg: $(dmesg | tail -n +"$((DMESG_MARK + 1))" | grep 'perf: interrupt took too long' | tail -n1)"
fi
echo "pebsprof summary:"
sed 's/^/  /' "$W/pp.out" | head -n 20
