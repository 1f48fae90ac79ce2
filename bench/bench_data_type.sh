#!/bin/bash
# What naming the data type and field of a memory access costs per new PC, against naming the
# function of the same PC from .symtab (the peer, measured in the same run), and how many of a
# real binary's accesses get a type. Runs tests/pp_bench_data_type on pebsprof itself (C,
# -O2 -g, RelWithDebInfo) and on tests/pp_data_access; see bench/README.md.
#
# usage: bench/bench_data_type.sh [-b BUILD_DIR] [BINARY [DEBUG_FILE]]
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
while getopts "b:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	*)
		sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
TOOL=$BUILD/tests/pp_bench_data_type
[ -x "$TOOL" ] || {
	echo "bench_data_type: no tool at $TOOL (build target pp_bench_data_type, or -b BUILD_DIR)" >&2
	exit 1
}
if [ $# -gt 0 ]; then
	echo "\$ $TOOL $*"
	"$TOOL" "$@"
	exit
fi
for bin in "$BUILD/collector/pebsprof" "$BUILD/tests/pp_data_access"; do
	echo "\$ $TOOL $bin"
	"$TOOL" "$bin" || exit 1
	echo
done
