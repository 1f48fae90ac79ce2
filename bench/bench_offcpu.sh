#!/bin/bash
# What off-CPU profiling costs per context switch: tests/tools/pp_switcher makes switches at
# three rates (pairs of threads passing a byte over pipes, paced), and on the same load, one
# after another, this measures
#   - nothing: the load alone (the machine's busy CPU time, /proc/stat);
#   - pebsprof record -a --off-cpu (default threshold, -F 1 so the CPU samples cost nothing):
#     its process's CPU time (/usr/bin/time), its BPF programs' run time (bpf_stats_enabled,
#     on_switch, the switch-in probe or fexit and on_wakeup, bpftool) and what it lost (its summary);
#   - perf record -e sched:sched_switch -a -g, the way perf records where threads switch
#     (Debian's perf has no --off-cpu: it is built without BPF skeletons): its CPU time;
# and for each the machine's busy CPU time beyond the load alone, which holds the in-kernel
# cost of both (perf's tracepoint handler included). Each is measured over the whole run and
# in the steady state, a window from a third of the run to a sixth before its end (what a
# long-running agent pays, without its start-up and perf's end-of-run pass). See
# bench/README.md. Needs root, perf and bpftool.
#
# usage: bench/bench_offcpu.sh [-b BUILD_DIR] [-d SECONDS] [-m RATES] [-p PAIRS] [-t THRESHOLD]
#                              [-s STACKS] [-r ROUNDS]
#   -b  build directory with collector/pebsprof and tests/pp_switcher (default: build)
#   -d  seconds per run (default 10)
#   -m  messages per second of the switcher, comma-separated (default 250,2500,50000: about
#       1k, 10k and 100k switches per second beside a quiet machine's own)
#   -p  thread pairs of the switcher (default 4)
#   -t  pebsprof's --off-cpu-threshold (default: its default, 1ms)
#   -s  pebsprof's --off-cpu-stacks: auto (default), kprobe, fexit or switch
#   -r  rounds of the three runs at each rate (default 1): with more, the median of each
#       tool's cost (its CPU and what the load's grew by) too, which a VM's noise moves less

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
SECS=10
RATES=250,2500,50000
PAIRS=4
THRESHOLD=
STACKS=auto
ROUNDS=1
while getopts "b:d:m:p:t:s:r:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	d) SECS=$OPTARG ;;
	m) RATES=$OPTARG ;;
	p) PAIRS=$OPTARG ;;
	t) THRESHOLD=$OPTARG ;;
	s) STACKS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	*)
		sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
PEBSPROF=$BUILD/collector/pebsprof
SWITCHER=$BUILD/tests/pp_switcher
die() {
	echo "bench_offcpu: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events, BPF statistics)"
[ -x "$PEBSPROF" ] || die "no $PEBSPROF (pass -b BUILD_DIR)"
[ -x "$SWITCHER" ] || die "no $SWITCHER (build target pp_switcher)"
command -v perf >/dev/null || die "needs perf (Debian package linux-perf)"
command -v bpftool >/dev/null || die "needs bpftool"
[ -x /usr/bin/time ] || die "needs /usr/bin/time (Debian package time)"
case $SECS$PAIRS$ROUNDS in *[!0-9]*) die "-d, -p and -r want whole numbers" ;; esac

TMP=$(mktemp -d /tmp/pp-bench-offcpu.XXXXXX)
OLD_STATS=$(cat /proc/sys/kernel/bpf_stats_enabled)
restore() {
	echo "$OLD_STATS" >/proc/sys/kernel/bpf_stats_enabled
	rm -rf "$TMP"
}
trap restore EXIT
trap 'exit 130' INT TERM
echo 1 >/proc/sys/kernel/bpf_stats_enabled

# busy and switches: the machine's busy CPU time in ms (user, nice, system, irq, softirq;
# not the time the hypervisor took, steal) and its context switches so far
busy_ms() {
	awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print int(($2 + $3 + $4 + $7 + $8) * 1000 / hz) }' /proc/stat
}
switches() { awk '/^ctxt/ { print $2 }' /proc/stat; }
# cpu_ms FILE: user + system CPU of a command /usr/bin/time -f '%U %S' wrote to FILE
cpu_ms() { awk 'END { printf "%d", ($1 + $2) * 1000 }' "$1"; }
# proc_us PID: the CPU time a running process has had so far, its threads included, in us
# (the scheduler's count, schedstat's first field: /proc/PID/stat's ticks are 10 ms, as
# coarse as the steady state's whole figure)
proc_us() {
	local t ns sum=0
	for t in /proc/"$1"/task/*; do
		read -r ns _ <"$t/schedstat" 2>/dev/null && sum=$((sum + ns))
	done
	echo $((sum / 1000))
}
# steady PID FILE: from a third of the run to a sixth before its end (room for a slow
# machine's commands; under TCG a shell command takes a tenth of a second), the CPU of the
# command /usr/bin/time runs as PID's child and the machine's busy time: "cpu_us busy_ms ms",
# or "- - -" where the command was gone before the window ended
steady() {
	local child c0 b0 t0 c1 b1 t1 warm=$((SECS / 3 > 1 ? SECS / 3 : 1)) tail=$((SECS / 6 + 1))
	sleep "$warm"
	child=$(pgrep -P "$1" | head -n1)
	c0=$(proc_us "$child") b0=$(busy_ms) t0=$(date +%s%N)
	sleep $((SECS - warm - tail > 1 ? SECS - warm - tail : 1))
	c1=$(proc_us "$child") b1=$(busy_ms) t1=$(date +%s%N)
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		echo "$((c1 - c0)) $((b1 - b0)) $(((t1 - t0) / 1000000))" >"$2"
	else
		echo "- - -" >"$2"
	fi
}
# bpf_ns: run time and runs of the shim's switch and wakeup programs now loaded ("ns runs"); plain
# bpftool and awk, as cheap as it gets: the busy CPU measured includes it
bpf_ns() {
	bpftool prog show 2>/dev/null | awk '
		/ name on_(switch|wakeup|schedule|rseq)/ { on = 1 } / name / && !/ name on_(switch|wakeup|schedule|rseq)/ { on = 0 }
		on { for (i = 1; i < NF; i++) {
			if ($i == "run_time_ns") ns += $(i + 1)
			if ($i == "run_cnt") runs += $(i + 1) } }
		END { print ns + 0, runs + 0 }'
}

# ratio A B [FORMAT]: A / B, or - where B is not above 0
ratio() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2fx}" 'BEGIN { if (b > 0) printf f, a / b; else printf "-" }'
}

# measure NAME CMD...: runs CMD beside a fresh switcher; sets B_MS (busy ms), SW (switches/s),
# LOAD_US (the switcher's own CPU, the scheduler's count: the tracepoints' and BPF programs'
# work at its switches and system calls runs in its threads' time)
measure() {
	local name=$1 b0 s0 b1 s1 t0 t1 l0 l1
	shift
	"$SWITCHER" "$RATE" $((SECS + 30)) "$PAIRS" &
	local load=$!
	sleep 1
	b0=$(busy_ms)
	s0=$(switches)
	l0=$(proc_us "$load")
	t0=$(date +%s%N)
	"$@"
	t1=$(date +%s%N)
	l1=$(proc_us "$load")
	b1=$(busy_ms)
	s1=$(switches)
	kill "$load" 2>/dev/null
	wait "$load" 2>/dev/null
	WALL_MS=$(((t1 - t0) / 1000000))
	B_MS=$((b1 - b0))
	LOAD_US=$((l1 - l0))
	SW=$(((s1 - s0) * 1000 / (WALL_MS > 0 ? WALL_MS : 1)))
}

pebsprof_run() {
	local args=(record -a -F 1 --off-cpu --off-cpu-stacks "$STACKS" --top 0 -d "$SECS" -o "$TMP/pp.folded")
	[ -n "$THRESHOLD" ] && args+=(--off-cpu-threshold "$THRESHOLD")
	/usr/bin/time -f '%U %S' -o "$TMP/pp.time" "$PEBSPROF" "${args[@]}" >"$TMP/pp.out" \
		2>"$TMP/pp.err" &
	local pid=$! last="0 0" cur
	steady "$pid" "$TMP/pp.steady"
	# the counters vanish with the programs: read them in the run's last second or so only,
	# so that reading them adds little to what is measured
	while kill -0 "$pid" 2>/dev/null; do
		cur=$(bpf_ns)
		[ "${cur% *}" != 0 ] && last=$cur
		sleep 0.3
	done
	wait "$pid"
	echo "$last" >"$TMP/pp.bpf"
}

perf_run() {
	/usr/bin/time -f '%U %S' -o "$TMP/perf.time" perf record -q -e sched:sched_switch -a -g \
		-o "$TMP/perf.data" -- sleep "$SECS" >"$TMP/perf.out" 2>&1 &
	local pid=$!
	steady "$pid" "$TMP/perf.steady"
	wait "$pid"
}

echo "off-CPU cost: $SECS s per run, $PAIRS pairs, threshold ${THRESHOLD:-default (1ms)}; $(uname -r); $(nproc) CPUs"
printf '%-9s | %-24s | %-31s | %-22s | %s\n' "messages" "load alone" "pebsprof record --off-cpu" \
	"perf -e sched_switch -g" "pebsprof / perf"
# median N...: the middle one (the lower middle of an even count)
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for RATE in ${RATES//,/ }; do
	pp_costs=() perf_costs=()
	for ((round = 1; round <= ROUNDS; round++)); do
		measure base sleep "$SECS"
		base_busy=$B_MS base_sw=$SW base_wall=$WALL_MS base_load=$LOAD_US
		# the load's own busy time over a steady window of W ms: base_busy * W / base_wall
		measure pebsprof pebsprof_run
		pp_busy=$((B_MS - base_busy * WALL_MS / base_wall)) pp_sw=$SW
		pp_load=$(((LOAD_US - base_load * WALL_MS / base_wall) / 1000))
		pp_cpu=$(cpu_ms "$TMP/pp.time")
		read -r bpf_ns bpf_runs <"$TMP/pp.bpf"
		lost=$(sed -n 's/.* lost \([0-9]*\) (ring buffer full [0-9]*, not noted.*/\1/p' "$TMP/pp.out")
		waits=$(sed -n 's/^off-CPU: \([0-9]*\) waits.*/\1/p' "$TMP/pp.out")
		at=$(sed -n 's/.*stacks taken at \([^ ;]*\).*/\1/p' "$TMP/pp.out")
		measure perf perf_run
		perf_busy=$((B_MS - base_busy * WALL_MS / base_wall)) perf_sw=$SW
		perf_load=$(((LOAD_US - base_load * WALL_MS / base_wall) / 1000))
		perf_cpu=$(cpu_ms "$TMP/perf.time")
		printf '%-9s | %6d sw/s, busy %5d ms | %6d sw/s, cpu %5d ms, +%5d ms | %6d sw/s, cpu %5d ms | cpu %s, +busy %s\n' \
			"$RATE/s" "$base_sw" "$base_busy" "$pp_sw" "$pp_cpu" "$pp_busy" "$perf_sw" "$perf_cpu" \
			"$(ratio "$pp_cpu" "$perf_cpu")" "$(ratio "$pp_busy" "$perf_busy")"
		read -r pp_sc pp_sb pp_sw_ms <"$TMP/pp.steady"
		read -r perf_sc perf_sb perf_sw_ms <"$TMP/perf.steady"
		[ "$pp_sw_ms" = - ] && pp_sc=0 pp_sb=0 pp_sw_ms=0
		[ "$perf_sw_ms" = - ] && perf_sc=0 perf_sb=0 perf_sw_ms=0
		pp_sb=$((pp_sb - base_busy * pp_sw_ms / base_wall))
		perf_sb=$((perf_sb - base_busy * perf_sw_ms / base_wall))
		printf '          steady state: pebsprof cpu %s ms/s, +busy %s ms/s; perf cpu %s ms/s, +busy %s ms/s; cpu %s, +busy %s\n' \
			"$(ratio "$pp_sc" "$pp_sw_ms" %.2f)" "$(ratio "$pp_sb" "$((pp_sw_ms / 1000))" %.1f)" \
			"$(ratio "$perf_sc" "$perf_sw_ms" %.2f)" "$(ratio "$perf_sb" "$((perf_sw_ms / 1000))" %.1f)" \
			"$(ratio "$pp_sc" "$perf_sc")" "$(ratio "$pp_sb" "$perf_sb")"
		printf '          the load'"'"'s own CPU: alone %d ms; beside pebsprof +%d ms, beside perf +%d ms; pebsprof cpu + that: %d ms, perf: %d ms (%s)\n' \
			"$((base_load / 1000))" "$pp_load" "$perf_load" "$((pp_cpu + pp_load))" \
			"$((perf_cpu + perf_load))" "$(ratio "$((pp_cpu + pp_load))" "$((perf_cpu + perf_load))")"
		pp_costs+=("$((pp_cpu + pp_load))") perf_costs+=("$((perf_cpu + perf_load))")
		echo "          pebsprof: BPF $(ratio "$bpf_ns" "$bpf_runs" %.0f) ns a run over $bpf_runs runs (stacks at ${at:-?}), ${waits:-?} waits recorded, lost ${lost:-?}; perf: +busy $perf_busy ms, $(du -k "$TMP/perf.data" 2>/dev/null | cut -f1) KiB of perf.data"
		rm -f "$TMP/perf.data" "$TMP/pp.folded"
	done
	if [ "$ROUNDS" -gt 1 ]; then
		pm=$(median "${pp_costs[@]}") fm=$(median "${perf_costs[@]}")
		echo "          $RATE/s over $ROUNDS rounds: pebsprof cpu + the load's growth ${pp_costs[*]} ms (median $pm), perf ${perf_costs[*]} ms (median $fm): $(ratio "$pm" "$fm")"
	fi
done
echo
echo "cpu: the process's user + system CPU; +busy: the machine's busy CPU beyond the load alone"
echo "(in-kernel work included), both over the $SECS s run; steady state: the same from a third"
echo "of the run to a sixth before its end, per second (- where the window could not be read)."
echo "The load's own CPU (its threads' schedstat, exact where /proc/stat's ticks are not) grows by"
echo "what each tool's in-kernel handlers cost it; with the tool's own CPU, the cost of each."
