#!/bin/bash
# What naming frames costs: per new address, from a separate debug file and from a JIT perf
# map, against the file's own .symtab (the peer, measured in the same run), and the agent's
# memory with the debug files of libc, libstdc++ and a 100 MB binary loaded at once. Runs
# tests/pp_bench_symbolize; see bench/README.md.
#
# usage: bench/bench_symbolize.sh [-b BUILD_DIR] [-n ADDRS] [-r REPS] [-k]
#   -k  keep the generated files (printed)
#
# Inputs (made here, in a temporary directory):
#   libc       Debian's stripped libc.so.6, its debug file from libc6-dbg in /usr/lib/debug;
#              the peer is that debug file's own .symtab;
#   libstdc++  the unstripped build in libstdc++6-12-dbg, split here with objcopy;
#   big        a generated 100 MB executable of 400,000 functions, split here.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
N=200000
REPS=5
KEEP=0
while getopts "b:n:r:kh" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	n) N=$OPTARG ;;
	r) REPS=$OPTARG ;;
	k) KEEP=1 ;;
	*)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
TOOL=$BUILD/tests/pp_bench_symbolize
die() {
	echo "bench_symbolize: $*" >&2
	exit 1
}
[ -x "$TOOL" ] || die "no tool at $TOOL (build target pp_bench_symbolize, or -b BUILD_DIR)"
for t in objcopy readelf as ld; do command -v $t >/dev/null || die "$t missing (binutils)"; done

W=$(mktemp -d /tmp/pp-bench-sym.XXXXXX)
[ "$KEEP" = 1 ] && echo "files kept in $W" || trap 'rm -rf "$W"' EXIT
mkdir -p "$W/dbg"

# split UNSTRIPPED NAME: NAME (stripped) and its debug file under $W/dbg/.build-id
split() {
	local id
	id=$(readelf -n "$1" | awk '/Build ID/ { print $3; exit }')
	[ -n "$id" ] || die "$1 has no build id"
	mkdir -p "$W/dbg/.build-id/${id:0:2}"
	objcopy --only-keep-debug "$1" "$W/dbg/.build-id/${id:0:2}/${id:2}.debug" || die "objcopy $1"
	objcopy --strip-all "$1" "$W/$2" || die "strip $1"
	PAIRS+=("$W/$2:$1")
}
PAIRS=()

libc=/usr/lib/x86_64-linux-gnu/libc.so.6
id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID/ { print $3; exit }')
if [ -n "$id" ] && [ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ]; then
	PAIRS+=("$libc:/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug")
else
	echo "libc: no debug file in /usr/lib/debug (apt-get install libc6-dbg); left out"
fi
cxx=$(ls /usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.* 2>/dev/null | grep -v gdb.py | head -n1)
if [ -n "$cxx" ]; then
	split "$cxx" libstdc++.so.6
else
	echo "libstdc++: no unstripped build (apt-get install libstdc++6-12-dbg); left out"
fi

# 400,000 functions of 256 bytes: a 100 MB .text with a symbol table to match
awk 'BEGIN { print ".text"; for (i = 0; i < 400000; i++) {
	printf ".globl pp_big_fn_%d\n.type pp_big_fn_%d,@function\npp_big_fn_%d:\n.fill 255,1,0x90\nret\n.size pp_big_fn_%d,256\n", i, i, i, i }
	print ".globl _start\n_start:\nret" }' >"$W/big.s"
as -o "$W/big.o" "$W/big.s" && ld --build-id -o "$W/big.full" "$W/big.o" || die "cannot build the 100 MB binary"
split "$W/big.full" big
echo "inputs: $(for p in "${PAIRS[@]}"; do printf '%s (%s MB) ' "$(basename "${p%%:*}")" \
	$(($(stat -c %s "${p#*:}") / 1000000)); done)"

CMD="$TOOL -n $N -r $REPS /usr/lib/debug:$W/dbg ${PAIRS[*]}"
echo "command: $CMD"
echo
$CMD
