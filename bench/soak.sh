#!/bin/bash
# A busy node for a while: `pebsprof run` (cpu-clock, 10 s windows, the file exporter) while
# the node spawns short processes (50/s), creates threads (600/s), compiles with cc and clang,
# and runs python3 and perl, so binaries with large symbol tables keep appearing. Prints the
# agent's RSS every 30 s with its cache bytes (/metrics), then the RSS slope after warm-up
# (least squares, KiB/min), the windows written and whether they tile time, and the loss
# counters. Needs root and a built tree. See bench/README.md.
#
# usage: bench/soak.sh [-b BUILD_DIR] [-m MINUTES] [-w WARMUP_MINUTES]
#   -b  build directory (default: build)
#   -m  minutes to run (default 15)
#   -w  minutes left out of the slope (default 2)

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
MINUTES=15
WARMUP=2
while getopts "b:m:w:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	m) MINUTES=$OPTARG ;;
	w) WARMUP=$OPTARG ;;
	*)
		sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
PEBSPROF=$BUILD/collector/pebsprof
die() {
	echo "soak: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (perf events and BPF)"
[ -x "$PEBSPROF" ] || die "no $PEBSPROF: build first"
T=$(mktemp -d /tmp/pp-soak.XXXXXX)
PIDS=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

"$PEBSPROF" run --interval 10 --output-dir "$T/out" --keep 100000 \
	--listen "127.0.0.1:$PORT" >"$T/agent.out" 2>"$T/agent.err" &
AGENT=$!
PIDS="$PIDS $AGENT"
sleep 2
kill -0 "$AGENT" 2>/dev/null || die "the agent did not start: $(tail -n 3 "$T/agent.err")"

# The churn, in one background loop per kind.
cat >"$T/prog.c" <<'C'
#include <stdio.h>
static double spin(int n) { double x = 0; for (int i = 0; i < n; i++) x += i * 0.5; return x; }
int main(void) { printf("%f\n", spin(20000000)); return 0; }
C
(while :; do for _ in $(seq 50); do /bin/true; done; sleep 1; done) &
PIDS="$PIDS $!"
(while :; do
	python3 -c 'import threading
ts = [threading.Thread(target=lambda: sum(range(1000))) for _ in range(600)]
[t.start() for t in ts]; [t.join() for t in ts]'
	sleep 1
done) &
PIDS="$PIDS $!"
(i=0; while :; do
	i=$((i + 1))
	cc -O2 -o "$T/p$((i % 4))" "$T/prog.c" && "$T/p$((i % 4))" >/dev/null
	command -v clang >/dev/null && clang -O2 -o "$T/q$((i % 4))" "$T/prog.c" 2>/dev/null &&
		"$T/q$((i % 4))" >/dev/null
	python3 -c 'import json, re; [json.dumps({"k": re.sub("a", "b", "a" * 100)}) for _ in range(200000)]'
	perl -e 'my %h; $h{$_} = $_ x 3 for 1 .. 300000;'
	sleep 2
done) &
PIDS="$PIDS $!"

rss_kib() { awk '/^VmRSS:/{print $2}' "/proc/$AGENT/status" 2>/dev/null; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" 'index($0, m) == 1 {print $2; exit}'; }

echo "minute  rss_kib  processes symbols frames raw_stacks (cache bytes, KiB)"
start=$(date +%s)
: >"$T/series"
while [ $(($(date +%s) - start)) -lt $((MINUTES * 60)) ]; do
	sleep 30
	kill -0 "$AGENT" 2>/dev/null || die "the agent exited: $(tail -n 3 "$T/agent.err")"
	min=$(awk -v s="$(($(date +%s) - start))" 'BEGIN{printf "%.1f", s / 60}')
	rss=$(rss_kib)
	echo "$min $rss" >>"$T/series"
	printf '%6s %8s  %9s %7s %6s %10s\n' "$min" "$rss" \
		$(($(metric 'pebsprof_cache_bytes{cache="processes"}') / 1024)) \
		$(($(metric 'pebsprof_cache_bytes{cache="symbols"}') / 1024)) \
		$(($(metric 'pebsprof_cache_bytes{cache="frames"}') / 1024)) \
		$(($(metric 'pebsprof_cache_bytes{cache="raw_stacks"}') / 1024))
done

awk -v w="$WARMUP" '$1 >= w {n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2; if ($2 > mx) mx = $2}
	END {if (n < 2) {print "slope: too few points after warm-up"; exit}
	     printf "RSS after %s min of warm-up: max %d KiB, slope %.1f KiB/min (%d points)\n", w, mx,
		(n * sxy - sx * sy) / (n * sxx - sx * sx), n}' "$T/series"
echo "symbol cache: $(metric pebsprof_symbol_cache_evictions_total) evictions, $(metric pebsprof_symbol_cache_too_big_total) tables too big"
echo "samples lost, by reason:"
curl -s "http://127.0.0.1:$PORT/metrics" | grep '^pebsprof_lost_samples_total' | sed 's/^/  /'
echo "samples: $(metric pebsprof_samples_total)"
kill -TERM "$AGENT"
wait "$AGENT" 2>/dev/null
n=$(ls "$T/out"/*.otlp.pb 2>/dev/null | wc -l)
# Window files are named by their start (UTC, seconds): consecutive ones 10 s apart tile time.
gaps=$(ls "$T/out"/*.otlp.pb | sed -E 's/.*pebsprof-([0-9T]+)Z.*/\1/' |
	while read -r s; do date -u -d "$(echo "$s" | sed -E 's/(....)(..)(..)T(..)(..)(..)/\1-\2-\3 \4:\5:\6/')" +%s; done |
	awk 'NR > 2 && $1 - p != 10 {g++} {p = $1} END {print g + 0}')
echo "windows written: $n (the first starts with the agent); gaps between the others: $gaps"
tail -n 2 "$T/agent.err"
