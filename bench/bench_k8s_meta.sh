#!/bin/bash
# What pod metadata costs on a busy node: memory held by the store for 500 pods and 2000
# containers (the bound is 32 MiB), the process RSS growth, parse time and lookup time.
# Runs tests/pp_bench_k8s_meta a few times on a synthetic PodList it builds itself (each pod
# as verbose as a real one) and prints every run. Builds nothing; needs no cluster or root.
#
# usage: bench/bench_k8s_meta.sh [-b BUILD_DIR] [-R RUNS] [-- TOOL_ARGS...]
#   -b  build directory holding tests/pp_bench_k8s_meta (default: build)
#   -R  runs of the tool (default 3)
#   TOOL_ARGS go to pp_bench_k8s_meta: --pods N --containers-per-pod N --lookups N --max-mib N

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
TOOL=$BUILD/tests/pp_bench_k8s_meta
[ -x "$TOOL" ] || {
	echo "bench_k8s_meta: no tool at $TOOL (build target pp_bench_k8s_meta, or pass -b)" >&2
	exit 1
}
case $RUNS in '' | *[!0-9]* | 0)
	echo "bench_k8s_meta: -R wants a whole number > 0" >&2
	exit 1
	;;
esac

status=0
for i in $(seq 1 "$RUNS"); do
	echo "== run $i: $TOOL $*"
	# The store logs its state changes on stderr; only the figures matter here.
	"$TOOL" "$@" 2>/dev/null || status=1
done
cat <<'TXT'

store bytes: the store's own count of its heap (pod and container records, interned strings,
both indexes) after two loads, as two refreshes leave it. rss delta: VmRSS growth of the
process across creating the store and both loads (includes libcurl/OpenSSL initialisation and
allocator slack; the PodList text itself is built before the first reading). lookup: one
pp_k8s_meta_lookup by container id (hex parse, mutex, hash probe, copy-out), ids visited in a
scattered order.
TXT
exit $status
