#!/bin/bash
# The churn bench's CPU split in two, for pebsprof and for perf, each measured against the other
# in the same run: what a capture costs once (its start and its end) and what each second of it
# costs. Both tools record the churn loop of bench_churn.sh side by side (pebsprof record -a and
# perf record -a -g, the same rate, the same seconds), once for a short and once for a long
# capture; with cost(D) = once + D x per second, the two lengths give both parts. perf's cost
# includes its end-of-run build-id pass, as in bench_churn.sh; pebsprof starts from a copy of a
# warm table cache, as a restarted agent does.
#
# usage: sudo bench/churn_split.sh [-b BUILD_DIR] [-F HZ] [-s SHORT] [-l LONG] [-r ROUNDS] [-a ARGS]
#   -b  the build directory (default build)
#   -F  the sampling rate (default 99)
#   -s  seconds of the short captures (default 10)
#   -l  seconds of the long captures (default 30)
#   -r  rounds (default 3): a line each, then the medians and the split
#   -a  more options for pebsprof's captures (--symbolize none: frames named by the backend,
#       as perf leaves them to perf report)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
HZ=99
SHORT=10
LONG=30
ROUNDS=3
AGENT_ARGS=
while getopts "b:F:s:l:r:a:h" opt; do
	case $opt in
	b) BUILD=$OPTARG ;;
	F) HZ=$OPTARG ;;
	s) SHORT=$OPTARG ;;
	l) LONG=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	a) AGENT_ARGS=$OPTARG ;;
	*)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 2
		;;
	esac
done
die() {
	echo "churn_split: $*" >&2
	exit 1
}
PP=$BUILD/collector/pebsprof
[ "$(id -u)" -eq 0 ] || die "needs root"
[ -x "$PP" ] || die "no $PP: build first (cmake --build $BUILD)"
command -v perf >/dev/null || die "needs perf (linux-perf)"
[ "$LONG" -gt "$SHORT" ] || die "-l must be longer than -s"
# shellcheck source=bench/churn_loop.sh
. "$SRC/bench/churn_loop.sh"
missing=$(churn_missing)
[ -z "$missing" ] || die "needs $missing"
T=$(mktemp -d /tmp/pp-churn-split.XXXXXX)
LOOP=
trap '[ -n "$LOOP" ] && kill $LOOP 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
churn_setup "$T" || die "cannot build the workload"
# cpu_ms CMD...: the CPU in ms CMD took, as wait4() reports it (bench/cpu_of.py)
cpu_ms() { python3 "$SRC/bench/cpu_of.py" "$@" | awk '/^cpu_s / { printf "%d\n", $2 * 1000 }'; }

# both tools for D seconds at once: "PP_MS PERF_MS"
side_by_side() {
	local d=$1 pp perf
	{ rm -rf "$T/c" && cp -a "$T/warm" "$T/c"; } || die "cannot copy the cache"
	# shellcheck disable=SC2086 # AGENT_ARGS: words
	cpu_ms "$PP" record -a -F "$HZ" -d "$d" --unwind-table-cache "$T/c/t" \
		--symbol-table-cache "$T/c/s" $AGENT_ARGS -o "$T/pp.pb.gz" >"$T/pp.ms" &
	cpu_ms perf record -q -a -g -F "$HZ" -o "$T/perf.data" -- sleep "$d" >"$T/perf.ms"
	wait
	pp=$(cat "$T/pp.ms") perf=$(cat "$T/perf.ms")
	{ [ -n "$pp" ] && [ -n "$perf" ]; } || die "a capture failed"
	echo "$pp $perf"
}

echo "churn_split: $ROUNDS rounds, $HZ Hz, captures of $SHORT s and $LONG s, $(nproc) CPUs, kernel $(uname -r)${AGENT_ARGS:+, pebsprof $AGENT_ARGS}"
churn_start "$T"
# shellcheck disable=SC2086
"$PP" record -a -F "$HZ" -d 10 --unwind-table-cache "$T/warm/t" --symbol-table-cache "$T/warm/s" \
	$AGENT_ARGS -o "$T/warm.pb.gz" >/dev/null 2>&1 || die "pebsprof could not record"
PS=() PL=() QS=() QL=()
for ((r = 1; r <= ROUNDS; r++)); do
	read -r ps qs < <(side_by_side "$SHORT")
	read -r pl ql < <(side_by_side "$LONG")
	echo "round $r: pebsprof $ps ms ($SHORT s), $pl ms ($LONG s); perf $qs ms, $ql ms"
	PS+=("$ps") PL+=("$pl") QS+=("$qs") QL+=("$ql")
done
python3 - "$SHORT" "$LONG" "$(median "${PS[@]}")" "$(median "${PL[@]}")" \
	"$(median "${QS[@]}")" "$(median "${QL[@]}")" <<'EOF'
import sys
s, l, ps, pl, qs, ql = (int(v) for v in sys.argv[1:])
def split(a, b):
    per = (b - a) / (l - s)
    return a - s * per, per
po, pp = split(ps, pl)
qo, qp = split(qs, ql)
print("medians: pebsprof %d ms (%d s), %d ms (%d s); perf %d ms, %d ms" % (ps, s, pl, l, qs, ql))
print("once per capture: pebsprof %.0f ms, perf %.0f ms (%.2fx)" % (po, qo, po / qo if qo else 0))
print("per second:       pebsprof %.1f ms, perf %.1f ms (%.2fx)" % (pp, qp, pp / qp if qp else 0))
for d in (10, 20, 60, 600):
    a, b = po + d * pp, qo + d * qp
    print("a %d s capture:  pebsprof %.0f ms, perf %.0f ms (%.2fx)" % (d, a, b, a / b if b else 0))
EOF
