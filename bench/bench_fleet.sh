#!/bin/bash
# A fleet at Pyroscope: N nodes x M pods x the profile types we send (cpu-clock, cycles,
# mem-loads), each node's window built, cut and encoded by the agent's own code
# (tests/pp_fleet_sim), with the default --sample-labels (none) and with thread,pid,cpu,memory,
# over OTLP and over the push. Prints series, requests per second, bytes per second and per
# day, against Pyroscope's default limits (pkg/validation/limits.go, head of 2026-08-21):
#   ingester.max-global-series-per-tenant  5000 active series per tenant
#   distributor.ingestion-rate-limit-mb    4 MB/s per tenant (profiles as pprof, plus labels)
#   distributor.ingestion-burst-size-mb    2 MB: a larger single request is never let through
#   validation.max-label-names-per-series  30
# See bench/README.md.
#
# usage: bench/bench_fleet.sh [-b BUILD_DIR] [-n NODES] [-m PODS] [-F HZ] [-- TOOL_ARGS...]
#   -b  build directory holding tests/pp_fleet_sim (default: build)
#   -n  nodes (default 1000), -m pods per node (default 50), -F samples per second per CPU
#       (default 20, the chart's fleet rate; 99 is the agent's default)
#   TOOL_ARGS go to pp_fleet_sim (see its usage: deployments, CPU per pod, threads, CPUs)

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
NODES=1000
PODS=50
HZ=20
while getopts "b:n:m:F:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	n) NODES=$OPTARG ;;
	m) PODS=$OPTARG ;;
	F) HZ=$OPTARG ;;
	*)
		sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
TOOL=$BUILD/tests/pp_fleet_sim
[ -x "$TOOL" ] || {
	echo "bench_fleet: no tool at $TOOL (build target pp_fleet_sim, or pass -b)" >&2
	exit 1
}

SERIES_LIMIT=5000
RATE_LIMIT=$((4 * 1024 * 1024))
BURST=$((2 * 1024 * 1024))

row() { # exporter labels
	local out
	out=$("$TOOL" -n "$NODES" -m "$PODS" -F "$HZ" -e "$1" -L "$2" "${@:3}") || exit 1
	awk -F= -v exporter="$1" -v labels="$2" -v sl="$SERIES_LIMIT" -v rl="$RATE_LIMIT" \
		-v burst="$BURST" '
	{ v[$1] = $2 }
	END {
		printf "| %s | %s | %d (%d per node: cpu %d, cycles %d, mem %d) | %.1fx | %.0f | %.2f MB/s, %.1f GB/day | %.1f MB/s (%.0fx) | %.0f KB%s |\n",
			exporter, labels, v["fleet_series"], v["node_series"], v["node_series_cpu"],
			v["node_series_cycles"], v["node_series_mem_loads"],
			v["fleet_series"] / sl, v["fleet_requests_per_s"],
			v["fleet_wire_bytes_per_s"] / 1e6, v["fleet_wire_bytes_per_day"] / 1e9,
			v["fleet_rate_limited_bytes_per_s"] / 1e6, v["fleet_rate_limited_bytes_per_s"] / rl,
			v["largest_request_rate_bytes"] / 1e3,
			(v["largest_request_rate_bytes"] > burst ? " (over the burst)" : "")
	}' <<<"$out"
}

echo "Fleet: $NODES nodes x $PODS pods, $HZ Hz, 10 s windows ($TOOL -n $NODES -m $PODS -F $HZ ${*:-})"
echo
echo "| exporter | --sample-labels | series (per node, by profile type) | x the 5000-series limit | requests/s | on the wire (gzip) | counted by the rate limiter (x its 4 MB/s) | largest request it counts (burst 2 MiB) |"
echo "|---|---|---|---|---|---|---|---|"
for exp in otlp pyroscope; do
	for labels in none thread,pid,cpu,memory; do
		row "$exp" "$labels" "$@"
	done
done
row otlp none -i 60 "$@" | sed 's/^| otlp | none |/| otlp, --interval 60 | none |/'

# What the default (OTLP, none) needs of Pyroscope, with half again for headroom.
out=$("$TOOL" -n "$NODES" -m "$PODS" -F "$HZ" -e otlp -L none "$@") || exit 1
awk -F= '{ v[$1] = $2 } END {
	series = v["fleet_series"] * 1.5
	rate = v["fleet_rate_limited_bytes_per_s"] * 1.5 / 1048576
	printf "\nTo take the default (otlp, none) in one tenant: max_global_series_per_tenant >= %d, ingestion_rate_mb >= %d; ingestion_burst_size_mb at its default 2 or more (the agent packs each request within max-burst-bytes, 2 MiB: set both alike)\n",
		series, rate + 1
}' <<<"$out"
