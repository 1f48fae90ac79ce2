#!/bin/bash
# The fleet simulation (tests/pp_fleet_sim, behind bench/bench_fleet.sh) counts what the agent's
# own splitter and encoders make of a node: on a small node whose series can be counted by
# hand (3 pods of their own deployments, 5 daemons, kernel threads, idle), the default
# --sample-labels gives one cpu series per service (3 + 5 + kernel/threads + kernel/idle = 10),
# one OTLP request per profile type and one push request per service and type; the fleet's
# series are the node's times N; and the per-sample labels multiply them.
set -u
: "${PP_TEST_BIN_DIR:?}"
sim=$PP_TEST_BIN_DIR/pp_fleet_sim
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
[ -x "$sim" ] || {
	echo "FAIL: $sim not built"
	exit 1
}
get() { # OUTPUT KEY
	sed -n "s/^$2=//p" <<<"$1"
}
expect() { # WHAT GOT WANT
	if [ "$2" = "$3" ]; then echo "ok - $1: $2"; else fail "$1: $2, not $3"; fi
}

small=(-n 10 -m 3 -d 3 -c 4 -t 4 -F 20)
otlp=$("$sim" "${small[@]}" -e otlp -L none) || fail "pp_fleet_sim -e otlp failed"
push=$("$sim" "${small[@]}" -e pyroscope -L none) || fail "pp_fleet_sim -e pyroscope failed"
dims=$("$sim" "${small[@]}" -e otlp -L thread,pid,cpu,memory) || fail "pp_fleet_sim -L failed"

expect "cpu series per node, default labels" "$(get "$otlp" node_series_cpu)" 10
expect "cycles series per node (no idle samples)" "$(get "$otlp" node_series_cycles)" 9
mem=$(get "$otlp" node_series_mem_loads)
[ "${mem:-0}" -gt 9 ] && [ "$mem" -le 54 ] && echo "ok - mem-loads series: $mem (9 services x at most 6 levels)" ||
	fail "mem-loads series $mem, not within 10..54"
expect "fleet series = node series x 10" "$(get "$otlp" fleet_series)" \
	$(($(get "$otlp" node_series) * 10))
expect "OTLP requests per window: one per profile type" "$(get "$otlp" node_requests_per_window)" 3
expect "push requests per window: one per service and type" \
	"$(get "$push" node_requests_per_window)" $((10 + 9 + 9))
expect "the same series over the push" "$(get "$push" node_series)" "$(get "$otlp" node_series)"
d=$(get "$dims" node_series_cpu)
[ "${d:-0}" -gt 40 ] && echo "ok - thread,pid,cpu,memory: $d cpu series per node" ||
	fail "thread,pid,cpu,memory gave $d cpu series per node, not many more than 10"
w=$(get "$otlp" node_wire_bytes_per_window)
[ "${w:-0}" -gt 0 ] && [ "$w" -lt "$(get "$otlp" node_body_bytes_per_window)" ] &&
	echo "ok - gzip makes the bodies smaller ($w bytes on the wire)" ||
	fail "wire bytes $w against bodies of $(get "$otlp" node_body_bytes_per_window)"
if [ "$fails" -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
