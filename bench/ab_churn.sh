#!/bin/bash
# Two builds of the agent side by side on the churn loop of bench_churn.sh: both record the same
# node at the same time, each from its own copy of one warm cache, and each one's CPU over D
# seconds after a 10 s warm-up is read from schedstat. What one change costs or saves under
# churn, where two runs one after the other differ by a third on a 2-CPU VM (the host's
# preemption shows in either run, not in both).
#
# usage: sudo bench/ab_churn.sh [-d SECONDS] [-F HZ] [-r ROUNDS] [-a ARGS] OLD NEW
#   OLD, NEW  two pebsprof binaries (copy build/collector/pebsprof aside between builds)
#   -d  seconds measured after the warm-up (default 20)
#   -F  the sampling rate (default 99)
#   -r  rounds (default 5): a line each, then the medians and NEW / OLD of each round
#   -a  more options for both agents' captures
#   -k  keep the captures and each round's summaries (a<N>.out: OLD's, b<N>.out: NEW's)
# Each round's line also gives both captures' [unknown] weight (bench_churn.sh's measure).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
D=20
HZ=99
ROUNDS=5
AGENT_ARGS=
KEEP=0
while getopts "d:F:r:a:kh" opt; do
	case $opt in
	d) D=$OPTARG ;;
	F) HZ=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	a) AGENT_ARGS=$OPTARG ;;
	k) KEEP=1 ;;
	*)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
die() {
	echo "ab_churn: $*" >&2
	exit 1
}
[ $# -eq 2 ] || die "usage: ab_churn.sh [-d S] [-F HZ] [-r N] [-a ARGS] OLD NEW"
OLD=$1 NEW=$2
[ "$(id -u)" -eq 0 ] || die "needs root"
{ [ -x "$OLD" ] && [ -x "$NEW" ]; } || die "OLD and NEW must be pebsprof binaries"
# shellcheck source=bench/churn_loop.sh
. "$SRC/bench/churn_loop.sh"
missing=$(churn_missing)
[ -z "$missing" ] || die "needs $missing"
T=$(mktemp -d /tmp/pp-ab-churn.XXXXXX)
LOOP=
trap '[ -n "$LOOP" ] && kill $LOOP 2>/dev/null; wait 2>/dev/null; [ $KEEP = 1 ] && echo "kept in $T" || rm -rf "$T"' EXIT
# the weight of samples with a frame in no known file, of a capture's folded stacks
unknown_pct() {
	python3 "$SRC/tests/integration/stack_checks.py" unknown folded "$1" |
		awk '{ printf "%.1f%%", $2 ? 100 * $1 / $2 : 0 }'
}
churn_setup "$T" || die "cannot build the workload"

echo "ab_churn: $ROUNDS rounds, $HZ Hz, $D s after 10 s, $(nproc) CPUs, kernel $(uname -r)"
churn_start "$T"
# the warm cache both start from: what a restarted agent finds
# shellcheck disable=SC2086 # AGENT_ARGS: words
"$OLD" record -a -F "$HZ" -d 20 --unwind-table-cache "$T/warm/t" --symbol-table-cache "$T/warm/s" \
	$AGENT_ARGS -o "$T/warm.pb.gz" >/dev/null 2>&1 || die "OLD could not record"
R_OLD=() R_NEW=() R_RATIO=()
for ((r = 1; r <= ROUNDS; r++)); do
	rm -rf "$T/a" "$T/b"
	{ cp -a "$T/warm" "$T/a" && cp -a "$T/warm" "$T/b"; } || die "cannot copy the cache"
	# shellcheck disable=SC2086
	"$OLD" record -a -F "$HZ" -d $((10 + D + 5)) --unwind-table-cache "$T/a/t" \
		--symbol-table-cache "$T/a/s" $AGENT_ARGS -o "$T/a.pb.gz" -o "$T/a$r.folded" >"$T/a$r.out" 2>&1 &
	pa=$!
	# shellcheck disable=SC2086
	"$NEW" record -a -F "$HZ" -d $((10 + D + 5)) --unwind-table-cache "$T/b/t" \
		--symbol-table-cache "$T/b/s" $AGENT_ARGS -o "$T/b.pb.gz" -o "$T/b$r.folded" >"$T/b$r.out" 2>&1 &
	pb=$!
	sleep 10
	a0=$(run_ns $pa) b0=$(run_ns $pb)
	sleep "$D"
	a1=$(run_ns $pa) b1=$(run_ns $pb)
	wait $pa $pb
	old_ms=$(((a1 - a0) / 1000000)) new_ms=$(((b1 - b0) / 1000000))
	ratio=$(python3 -c "import sys; print('%.2f' % (int(sys.argv[2]) / int(sys.argv[1])))" "$old_ms" "$new_ms")
	echo "round $r: OLD $old_ms ms, NEW $new_ms ms (NEW / OLD $ratio); [unknown] weight OLD $(unknown_pct "$T/a$r.folded"), NEW $(unknown_pct "$T/b$r.folded")"
	R_OLD+=("$old_ms") R_NEW+=("$new_ms") R_RATIO+=("$ratio")
done
echo "medians: OLD $(median "${R_OLD[@]}") ms, NEW $(median "${R_NEW[@]}") ms; NEW / OLD of a round: median $(median "${R_RATIO[@]}"), $(printf '%s\n' "${R_RATIO[@]}" | sort -n | tr '\n' ' ')"
