#!/bin/bash
# What encoding costs: encode + gzip throughput of one export window (100 k samples over
# 20 k distinct stacks by default) and its bytes per sample on the wire, OTLP against pprof
# holding the same data. Runs tests/pp_bench_encode a few times (each run reports the median
# of its own repetitions) and prints one table. Builds nothing. See bench/README.md.
#
# usage: bench/bench_encode.sh [-b BUILD_DIR] [-R RUNS] [-- TOOL_ARGS...]
#   -b  build directory holding tests/pp_bench_encode (default: build)
#   -R  runs of the tool (default 3)
#   TOOL_ARGS go to pp_bench_encode, e.g. -- -r 9 -C (see pp_bench_encode -h)

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
RUNS=3
while getopts "b:R:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	R) RUNS=$OPTARG ;;
	*)
		sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
TOOL=$BUILD/tests/pp_bench_encode

die() {
	echo "bench_encode: $*" >&2
	exit 1
}
[ -x "$TOOL" ] || die "no tool at $TOOL (build target pp_bench_encode, or pass -b BUILD_DIR)"
case $RUNS in '' | *[!0-9]* | 0) die "-R wants a whole number > 0" ;; esac

W=$(mktemp -d /tmp/pp-bench-encode.XXXXXX)
trap 'rm -rf "$W"' EXIT

CMD="$TOOL -t${*:+ $*}"
FILES=()
for i in $(seq 1 "$RUNS"); do
	FILES+=("$W/run$i")
	"$TOOL" -t "$@" >"$W/run$i" 2>"$W/err$i" || die "run $i failed: $(cat "$W/err$i")"
done

# One row per figure: its value in every run, then the median across runs.
awk -v runs="$RUNS" '
function med(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	split($0, kv, "=")
	r = FILENAME; sub(/.*run/, "", r)
	if (!(kv[1] in seen)) { seen[kv[1]] = 1; order[++nk] = kv[1] }
	val[kv[1], r] = kv[2]
}
END {
	split("samples_total samples_distinct stacks processes functions mappings locations " \
	      "reps seed cpu", ctx, " ")
	for (i = 1; i in ctx; i++)
		printf "%s=%s  ", ctx[i], val[ctx[i], 1]
	printf "\n\n%-26s", "figure"
	for (r = 1; r <= runs; r++)
		printf " %12s", "run " r
	printf " %12s\n", "median"
	for (k = 1; k <= nk; k++) {
		key = order[k]
		if (key !~ /_(ms|per_s|bytes|per_sample|per_distinct|ratio)$/)
			continue
		printf "%-26s", key
		for (r = 1; r <= runs; r++) {
			printf " %12s", val[key, r]
			a[r] = val[key, r] + 0
		}
		f = key ~ /mb_per_s$/ ? "%.2f" : key ~ /(bytes|per_s)$/ ? "%.0f" : "%.3f"
		printf " %12s\n", sprintf(f, med(a, runs))
	}
}' "${FILES[@]}"

cat <<EOF

Each run times its own repetitions and reports their medians (CLOCK_MONOTONIC). samples/s
and mb_per_s are over encode + gzip (level 6, as the transport sends); MB = 10^6 bytes of
uncompressed output. build_* is building the profile (interning, pp_profile_add_sample),
measured apart and not part of the encode figures. bytes_per_sample divides the gzipped
size by samples_total; bytes_per_distinct by the aggregated samples.

command ($RUNS times): $CMD
EOF
