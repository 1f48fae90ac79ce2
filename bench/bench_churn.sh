#!/bin/bash
# What a node that never stops starting programs costs the agent, and what its profile of them
# is worth: a loop starts python3, perl, gcc, clang, node, sort, sh and two programs of our
# own (150 ms and 30 ms long, built without frame pointers, one of them stripped) over and
# over, and `record -a` samples the node. The peer is `perf record -a -g` on the same loop in
# the same run. See bench/README.md.
#
# usage: sudo bench/bench_churn.sh [-b BUILD_DIR] [-d SECONDS] [-F HZ,...] [-r ROUNDS] [-a ARGS]
#   -F  the rates to measure at (default 99,20: the default rate and the fleet's)
#   -a  more options for the agent's captures (e.g. "--unwind-partial-fdes 0": every file's
#       table compiled whole, as before partial tables)
#   -r  rounds at each rate (default 1), each every capture again: a row per round, then one
#       of the medians (whole-capture CPU on a 2-CPU VM varies by a quarter from run to run)
#
# Per rate: the weight of samples with a frame in no known file ([unknown]), the share of the
# 150 ms program's samples whose stack is whole, the agent's CPU against perf's (over a whole
# capture, start-up and first sight of every program included; the same capture again, as a
# restarted agent finds the tables it compiled and the symbol tables it read in its caches on
# disk; and over D seconds after a
# 10 s warm-up, what a long-running agent pays, against perf's whole capture and perf's own D
# seconds after 10; and, for what perf leaves to later, the CPU of a perf report of its
# capture: its stacks symbolized and merged, which the agent does as it samples), its RSS,
# and what churn cost it (processes from the kernel's reports, /proc reads, tables built and
# built again). Last, the agent's CPU on the idle node at 20 Hz after its warm-up, as a share
# of one CPU.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
D=20
RATES=99,20
ROUNDS=1
AGENT_ARGS=
while getopts "b:d:F:r:a:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	d) D=$OPTARG ;;
	F) RATES=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	a) AGENT_ARGS=$OPTARG ;;
	*)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 2
		;;
	esac
done
PP=$BUILD/collector/pebsprof
CHECK=$SRC/tests/integration/stack_checks.py
die() {
	echo "bench_churn: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root"
[ -x "$PP" ] || die "build pebsprof first (-b BUILD_DIR)"
# shellcheck source=bench/churn_loop.sh
. "$SRC/bench/churn_loop.sh"
missing=$(churn_missing)
[ -z "$missing" ] || die "needs $missing"
command -v perf >/dev/null || die "needs perf"
T=$(mktemp -d /tmp/pp-bench-churn.XXXXXX)
LOOP=
trap '[ -n "$LOOP" ] && kill $LOOP 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

# cpu_of CMD...: runs CMD; its output, then "cpu_s S maxrss_kb K" (its and its children's)
cpu_of() { python3 "$SRC/bench/cpu_of.py" "$@"; }

churn_setup "$T" || die "cannot build the workload"

field() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | tail -1; }
# steady_cpu SECS CMD...: CMD's CPU seconds over SECS after a 10 s warm-up (for the agent: the
# node's programs' tables built, their files read; what a long-running agent pays) and its RSS
# then, in KiB: "cpu_s S rss_kb K". CMD must run for 10 + SECS seconds and more.
steady_cpu() {
	local secs=$1 pid t0 t1 rss
	shift
	"$@" >/dev/null 2>&1 &
	pid=$!
	sleep 10
	t0=$(run_ns "$pid")
	sleep "$secs"
	t1=$(run_ns "$pid")
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
	wait $pid
	echo "cpu_s $(python3 -c "import sys; print('%.3f' % ((int(sys.argv[2]) - int(sys.argv[1])) / 1e9))" "$t0" "$t1") rss_kb $rss"
}
# steady HZ SECS OUT [CACHE]: the agent's steady_cpu
# shellcheck disable=SC2086 # AGENT_ARGS: words
steady() { steady_cpu "$2" "$PP" record -a -F "$1" -d $((10 + $2 + 5)) --unwind-table-cache "${4:-none}" --symbol-table-cache "${5:-none}" $AGENT_ARGS -o "$3"; }
pct() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('%.1f' % (100 * a / b if b else 0))" "$1" "$2"; }

echo "bench_churn: ${D} s per capture, rates $RATES, $(nproc) CPUs, kernel $(uname -r)"
churn_start "$T"
ROWS=()
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('%.2f' % (a / b) if b else '-')" "$1" "$2"; }
for HZ in ${RATES//,/ }; do
	R_FIRST=() R_WARM=() R_STEADY=() R_PERF=() R_PERF_STEADY=() R_REPORT=()
	for ((round = 1; round <= ROUNDS; round++)); do
		# the first sight of every program: a node's first start of the agent, its table
		# cache empty; then a restart, every table it compiled kept in that cache
		rm -rf "$T/tables$HZ" "$T/symbols$HZ"
		out=$(cpu_of "$PP" record -a -F "$HZ" -d "$D" --unwind-table-cache "$T/tables$HZ" --symbol-table-cache "$T/symbols$HZ" $AGENT_ARGS -o "$T/pp$HZ.folded")
		pp_cpu=$(echo "$out" | field cpu_s)
		pp_rss=$(echo "$out" | field maxrss_kb)
		procs=$(echo "$out" | sed -n 's/^processes: //p')
		tables=$(echo "$out" | sed -n 's/^unwind tables: \([0-9]*\) built.*(\([0-9]*\) built again).*/\1 built, \2 built again/p')
		partial=$(echo "$out" | sed -n 's/^\(partial unwind tables: .*\)/\1/p')
		out=$(cpu_of "$PP" record -a -F "$HZ" -d "$D" --unwind-table-cache "$T/tables$HZ" --symbol-table-cache "$T/symbols$HZ" $AGENT_ARGS -o "$T/warm$HZ.folded")
		warm_cpu=$(echo "$out" | field cpu_s)
		cached="$(echo "$out" | sed -n 's/^unwind tables: \([0-9]*\) built.*/\1 built/p'), $(echo "$out" | sed -n 's/^unwind table cache: \([0-9]*\) tables read in \([0-9]*\) ms.*/\1 read from the cache in \2 ms/p'); symbol tables: $(echo "$out" | sed -n 's/^symbol table cache: \([0-9]*\) tables read in \([0-9]*\) ms.*/\1 read from the cache in \2 ms/p')"
		out=$(steady "$HZ" "$D" "$T/steady$HZ.folded" "$T/tables$HZ" "$T/symbols$HZ")
		st_cpu=$(echo "$out" | field cpu_s)
		st_rss=$(echo "$out" | field rss_kb)
		out=$(cpu_of perf record -q -a -g -F "$HZ" -o "$T/perf$HZ.data" -- sleep "$D")
		perf_cpu=$(echo "$out" | field cpu_s)
		perf_rss=$(echo "$out" | field maxrss_kb)
		# perf's own steady state: its start (the node's processes synthesized) and its
		# build-id pass at the end left out, as the agent's are
		out=$(steady_cpu "$D" perf record -q -a -g -F "$HZ" -o "$T/perfst$HZ.data" -- sleep $((10 + D + 5)))
		perf_st=$(echo "$out" | field cpu_s)
		perf script -i "$T/perf$HZ.data" -F comm,tid,ip,sym,dso >"$T/perf$HZ.txt" 2>/dev/null
		# what perf defers to its report: the stacks symbolized and merged into a call graph,
		# which the agent does as it samples
		out=$(cpu_of perf report -i "$T/perf$HZ.data" --stdio -g none --sort dso,sym)
		report_cpu=$(echo "$out" | field cpu_s)
		read -r pu pt < <(python3 "$CHECK" unknown folded "$T/pp$HZ.folded")
		read -r fu ft < <(python3 "$CHECK" unknown perf "$T/perf$HZ.txt")
		read -r pw pwt _ < <(python3 "$CHECK" whole folded "$T/pp$HZ.folded" pp_churn_150ms)
		read -r fw fwt _ < <(python3 "$CHECK" whole perf "$T/perf$HZ.txt" pp_churn_150ms)
		R_FIRST+=("$pp_cpu") R_WARM+=("$warm_cpu") R_STEADY+=("$st_cpu") R_PERF+=("$perf_cpu")
		R_PERF_STEADY+=("$perf_st") R_REPORT+=("$report_cpu")
		label="$HZ Hz"
		[ "$ROUNDS" -gt 1 ] && label="$HZ Hz, round $round"
		ROWS+=("| $label | $(pct "$pu" "$pt")% of $pt | $(pct "$fu" "$ft")% of $ft | $(pct "$pw" "$pwt")% of $pwt | $(pct "$fw" "$fwt")% of $fwt | $pp_cpu s ($(ratio "$pp_cpu" "$perf_cpu")) | $warm_cpu s ($(ratio "$warm_cpu" "$perf_cpu")) | $st_cpu s ($(ratio "$st_cpu" "$perf_cpu"); $(ratio "$st_cpu" "$perf_st")) | $perf_cpu s | $perf_st s | $report_cpu s ($(ratio "$pp_cpu" "$(python3 -c "import sys; print(float(sys.argv[1]) + float(sys.argv[2]))" "$perf_cpu" "$report_cpu")")) | $((pp_rss / 1024)) MiB | $((st_rss / 1024)) MiB | $((perf_rss / 1024)) MiB |")
		echo "  $label: processes: $procs"
		echo "  $label: unwind tables: $tables; at the restart: $cached"
		echo "  $label: $partial"
		# deep stacks of the big programs: whole (to _start, a thread's start) against perf
		whole_of=
		for prog in clang cc1 node python3; do
			read -r pw pwt _ < <(python3 "$CHECK" whole folded "$T/pp$HZ.folded" $prog)
			read -r fw fwt _ < <(python3 "$CHECK" whole perf "$T/perf$HZ.txt" $prog)
			whole_of="$whole_of $prog $pw/$pwt ($fw/$fwt);"
		done
		echo "  $label: stacks whole (perf -g):$whole_of"
	done
	if [ "$ROUNDS" -gt 1 ]; then
		mf=$(median "${R_FIRST[@]}") mw=$(median "${R_WARM[@]}") ms=$(median "${R_STEADY[@]}") mp=$(median "${R_PERF[@]}")
		mps=$(median "${R_PERF_STEADY[@]}") mr=$(median "${R_REPORT[@]}")
		ROWS+=("| $HZ Hz, medians of $ROUNDS | | | | | $mf s ($(ratio "$mf" "$mp")) | $mw s ($(ratio "$mw" "$mp")) | $ms s ($(ratio "$ms" "$mp"); $(ratio "$ms" "$mps")) | $mp s | $mps s | $mr s | | | |")
	fi
done
kill $LOOP 2>/dev/null
wait $LOOP 2>/dev/null
LOOP=
sleep 2
out=$(steady 20 "$D" "$T/idle.folded")
idle_cpu=$(echo "$out" | field cpu_s)

echo
echo "| rate | pebsprof [unknown] weight | perf -g [unknown] weight | pebsprof 150 ms program whole | perf -g whole | pebsprof CPU, whole capture (/ perf) | the same, restarted: tables from its cache (/ perf) | pebsprof CPU after 10 s (/ perf's whole capture; / perf's after 10 s) | perf record CPU | perf CPU after 10 s | perf report CPU (pebsprof's whole capture / perf record + report) | pebsprof peak RSS | pebsprof RSS after 10 s | perf peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "idle node, 20 Hz, ${D} s after a 10 s warm-up: pebsprof CPU $idle_cpu s = $(pct "$idle_cpu" "$D")% of one CPU"
echo "commands: $PP record -a -F HZ -d $D --unwind-table-cache DIR --symbol-table-cache DIR2 (new DIRs, then again); perf record -a -g -F HZ -- sleep $D"
