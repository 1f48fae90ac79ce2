#!/bin/bash
# Collector cost per memory sample: tests/pp_bench_mem feeds 1 M synthetic shim records
# through pp_session_handle_record as plain samples and, in the same run, as memory samples
# (data address resolved to an ELF data symbol or mapping class, memory labels, latency sum),
# and as memory samples with exact IPs whose data type and field are named, and reports
# ns/sample for each and the ratios. Runs the tool a few times (each run reports
# the median of its own repetitions) and prints every run plus the median ratio. Builds
# nothing. See bench/README.md.
#
# usage: bench/bench_mem.sh [-b BUILD_DIR] [-R RUNS] [-- TOOL_ARGS...]
#   -b  build directory holding tests/pp_bench_mem (default: build)
#   -R  runs of the tool (default 3)
#   TOOL_ARGS go to pp_bench_mem, e.g. -- -n 2000000 -D (see the tool's header comment)

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
RUNS=3
while getopts "b:R:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	R) RUNS=$OPTARG ;;
	*)
		sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
TOOL=$BUILD/tests/pp_bench_mem

die() {
	echo "bench_mem: $*" >&2
	exit 1
}
[ -x "$TOOL" ] || die "no tool at $TOOL (build target pp_bench_mem, or pass -b BUILD_DIR)"
case $RUNS in '' | *[!0-9]* | 0) die "-R wants a whole number > 0" ;; esac

printf '%-4s %10s %10s %10s %7s %11s %11s\n' run plain_ns mem_ns typed_ns ratio typed/mem typed_share
ratios=()
typed=()
for r in $(seq 1 "$RUNS"); do
	out=$("$TOOL" -t "$@") || die "run $r failed"
	get() { printf '%s\n' "$out" | sed -n "s/^$1=//p"; }
	printf '%-4s %10s %10s %10s %7s %11s %10s%%\n' "$r" "$(get plain_ns_per_sample)" \
		"$(get mem_ns_per_sample)" "$(get typed_ns_per_sample)" "$(get ratio)" \
		"$(get typed_ratio)" "$(awk -v t="$(get data_typed)" -v n="$(get records)" \
		'BEGIN { printf "%.1f", 100 * t / n }')"
	ratios+=("$(get ratio)")
	typed+=("$(get typed_ratio)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median ratio memory/plain: $(median "${ratios[@]}"), typed/memory: $(median "${typed[@]}")" \
	" ($(nproc) CPUs, $(uname -r))"
