#!/bin/bash
# Unwinding user stacks with .eh_frame tables (--user-unwind auto), on tests/data/unwind's
# 28-30-frame chains built at -O2 without frame pointers. See bench/README.md. Needs root.
#   (a) the shim's ns per sample with tables against its frame-pointer walk on the same stacks
#       (the chains built with frame pointers, where both walks give every frame), and with
#       tables on the no-frame-pointer build (tests/pp_bench_shim -x tables);
#   (b) the agent's CPU per sample (pebsprof record, user + system) against perf record
#       --call-graph dwarf at the same rate on the same process, perf report's pass included;
#   (c) table memory for libc, libstdc++, the test programs, 200 distinct binaries of this
#       machine, and the 50 largest ELF files with tables that Debian packages installed here
#       (tests/pp_bench_unwind_tables: rows packed as the shim holds them, 4 bytes each, and
#       the rules they share);
#   (d) complete stacks: samples in the leaf holding the whole chain, pebsprof against perf.
#
# usage: bench/bench_unwind.sh [-b BUILD_DIR] [-d SECONDS] [-D SECONDS] [-F HZ] [-r ROUNDS]
#   -d  seconds per run of (a) (default 5)
#   -D  seconds of (b)'s captures (default 20: the agent's start-up is a fixed cost)
#   -F  sampling frequency: (a) per CPU, (b) on the one process (default 999)
#   -r  rounds of (a), each running A then B (default 5)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
SECS=5
BSECS=20
HZ=999
ROUNDS=5
while getopts "b:d:D:F:r:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	d) SECS=$OPTARG ;;
	D) BSECS=$OPTARG ;;
	F) HZ=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	*)
		sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
die() {
	echo "bench_unwind: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events)"
PEBSPROF=$BUILD/collector/pebsprof
SHIM_TOOL=$BUILD/tests/pp_bench_shim
TABLES_TOOL=$BUILD/tests/pp_bench_unwind_tables
for f in "$PEBSPROF" "$SHIM_TOOL" "$TABLES_TOOL"; do
	[ -x "$f" ] || die "no $f (build it, or pass -b BUILD_DIR)"
done
command -v perf >/dev/null || die "no perf (Debian's linux-perf): the peer of (b) and (d)"
PY=$(command -v /usr/bin/python3 || command -v python3)
T=$(mktemp -d /tmp/pp-bench-unwind.XXXXXX)
trap 'pkill -P $$ 2>/dev/null; rm -rf "$T"' EXIT
sh "$SRC/tests/data/unwind/build.sh" "$T/nofp" >/dev/null || die "cannot build the chains"
sh "$SRC/tests/data/unwind/build.sh" "$T/fp" fp >/dev/null || die "cannot build the chains"

echo "kernel $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"

echo
echo "== (c) table memory"
"$TABLES_TOOL" /usr/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
	"$T/nofp/chain" "$T/nofp/chain_cxx" "$T/nofp/libpp_chain.so" "$T/nofp/libpp_chain_fp.so"
echo "200 distinct binaries (by build id) from /usr/bin, /usr/sbin, /usr/lib/x86_64-linux-gnu:"
find /usr/bin /usr/sbin /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -size +8k 2>/dev/null |
	sort | "$TABLES_TOOL" -q -n 200
echo "the 50 largest ELF files with tables that Debian packages installed (by size, distinct):"
cat /var/lib/dpkg/info/*.list 2>/dev/null | sort -u >"$T/debian-files"
find /usr -xdev -type f -size +1M -printf '%s %p\n' 2>/dev/null | sort -rn | cut -d' ' -f2- |
	grep -Fxf "$T/debian-files" | "$TABLES_TOOL" -n 50

echo
echo "== (a) the shim per sample: frame pointers (A) against unwind tables (B), $ROUNDS x ${SECS}s"
echo "-- the chains with frame pointers: both walks give the same 33-frame stacks"
PP_CHAIN_SPIN=100000 "$SHIM_TOOL" -x tables -d "$SECS" -F "$HZ" -r "$ROUNDS" -w "$T/fp/chain"
echo "-- the chains without frame pointers: B gives the whole stack, A what frame pointers can"
PP_CHAIN_SPIN=100000 "$SHIM_TOOL" -x tables -d "$SECS" -F "$HZ" -r "$ROUNDS" -w "$T/nofp/chain"

# cpu_of CMD...: runs CMD; its output, then "cpu_s S maxrss_kb K" (its and its children's)
cpu_of() { "$PY" "$SRC/bench/cpu_of.py" "$@"; }

# share of pp_spin samples holding the whole chain: folded stacks (pebsprof) or perf script
SHARE=$SRC/tests/integration/chain_share.py
share_folded() { "$PY" "$SHARE" folded "$1" "$SRC/tests/data/unwind/chain.expected"; }
share_perf() {
	perf script -i "$1" -F ip,sym 2>/dev/null |
		"$PY" "$SHARE" perf "$SRC/tests/data/unwind/chain.expected"
}

echo
echo "== (b) agent CPU per sample and (d) complete stacks: one chain process, ${HZ} Hz, ${BSECS}s"
(cd "$T/nofp" && PP_CHAIN_SPIN=$((BSECS * 3 + 10)) exec ./chain) &
pid=$!
sleep 0.5
out=$(cpu_of "$PEBSPROF" record -e cpu-clock -F "$HZ" -d "$BSECS" -p "$pid" -o "$T/pp.folded" \
	-o "$T/pp.pb.gz")
pp_cpu=$(echo "$out" | sed -n 's/^cpu_s //p')
pp_n=$(echo "$out" | sed -n 's/^\([0-9]*\) samples in.*/\1/p')
echo "$out" | grep -E '^(unwinding|unwind tables|shim):' | sed 's/^/  /'
out=$(cpu_of perf record -e cpu-clock -F "$HZ" --call-graph dwarf -p "$pid" -o "$T/perf.data" \
	-- sleep "$BSECS")
perf_rec=$(echo "$out" | sed -n 's/^cpu_s //p')
perf_n=$(echo "$out" | sed -n 's/.*(\([0-9]*\) samples).*/\1/p')
out=$(cpu_of perf report -i "$T/perf.data" --stdio)
perf_rep=$(echo "$out" | sed -n 's/^cpu_s //p')
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$PY" - "$pp_cpu" "${pp_n:-0}" "$perf_rec" "$perf_rep" "${perf_n:-0}" <<'PY'
import sys
pp, ppn, rec, rep, pn = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
a = pp / ppn * 1e6 if ppn else 0
b = (rec + rep) / pn * 1e6 if pn else 0
print("  pebsprof record: %.3f s CPU for %d samples: %.1f us/sample" % (pp, ppn, a))
print("  perf record --call-graph dwarf: %.3f s + perf report %.3f s for %d samples: %.1f us/sample" % (rec, rep, pn, b))
print("  ratio pebsprof/perf: %.3f" % (a / b if b else 0))
PY
echo "  (d) whole chain: pebsprof $(share_folded "$T/pp.folded"), perf --call-graph dwarf $(share_perf "$T/perf.data")"
