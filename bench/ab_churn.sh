#!/bin/bash
# Two builds of the agent side by side on the churn loop of bench_churn.sh: both record the same
# node at the same time, each from a copy of its own warm cache, and each one's CPU over D
# seconds after a 10 s warm-up is read from schedstat. What one change costs or saves under
# churn, where two runs one after the other differ by a third on a 2-CPU VM (the host's
# preemption shows in either run, not in both).
#
# usage: sudo bench/ab_churn.sh [-m MODE] [-d SECONDS] [-F HZ] [-r ROUNDS] [-a ARGS] OLD NEW
#   OLD, NEW  two pebsprof binaries (copy build/collector/pebsprof aside between builds)
#   -m  record (default: one capture each) or run (the agent as a node runs it: a window
#       every 10 s, each written to a directory of its own by the file exporter, stopped by
#       SIGINT once measured; no [unknown] column)
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
MODE=record
while getopts "m:d:F:r:a:kh" opt; do
	case $opt in
	m) MODE=$OPTARG ;;
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
[ $# -eq 2 ] || die "usage: ab_churn.sh [-m MODE] [-d S] [-F HZ] [-r N] [-a ARGS] OLD NEW"
case $MODE in record | run) ;; *) die "-m: record or run" ;; esac
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
# windows X: how many windows the agent of cache copy X wrote (run)
windows() {
	local f n=0
	for f in "$T/$1.windows"/*.pb.gz; do [ -e "$f" ] && n=$((n + 1)); done
	echo $n
}
# agent BIN X N: BIN as MODE says, from the cache copy $T/X, round N, in the background
agent() {
	local bin=$1 x=$2 n=$3
	if [ "$MODE" = run ]; then
		{ rm -rf "$T/$x.windows" && mkdir "$T/$x.windows"; } || die "cannot make $T/$x.windows"
		# shellcheck disable=SC2086 # AGENT_ARGS: words
		"$bin" run -F "$HZ" --interval 10 --exporter file --output-dir "$T/$x.windows" \
			--unwind-table-cache "$T/$x/t" --symbol-table-cache "$T/$x/s" $AGENT_ARGS \
			>"$T/$x$n.out" 2>&1 &
	else
		# shellcheck disable=SC2086
		"$bin" record -a -F "$HZ" -d $((10 + D + 5)) --unwind-table-cache "$T/$x/t" \
			--symbol-table-cache "$T/$x/s" $AGENT_ARGS -o "$T/$x.pb.gz" -o "$T/$x$n.folded" \
			>"$T/$x$n.out" 2>&1 &
	fi
}

echo "ab_churn: $MODE, $ROUNDS rounds, $HZ Hz, $D s after 10 s, $(nproc) CPUs, kernel $(uname -r)"
churn_start "$T"
# warm BIN X: BIN's 20 s capture into the cache $T/warm_X, in the background
warm() {
	# shellcheck disable=SC2086 # AGENT_ARGS: words
	"$1" record -a -F "$HZ" -d 20 --unwind-table-cache "$T/warm_$2/t" \
		--symbol-table-cache "$T/warm_$2/s" $AGENT_ARGS -o "$T/warm_$2.pb.gz" >/dev/null 2>&1 &
}
# the warm caches they start from, each its own binary's (what a restarted agent finds; a
# change to what a cache holds would make the other's useless to it), made side by side
warm "$OLD" a
pa=$!
warm "$NEW" b
pb=$!
wait $pa || die "OLD could not record"
wait $pb || die "NEW could not record"
R_OLD=() R_NEW=() R_RATIO=()
for ((r = 1; r <= ROUNDS; r++)); do
	rm -rf "$T/a" "$T/b"
	{ cp -a "$T/warm_a" "$T/a" && cp -a "$T/warm_b" "$T/b"; } || die "cannot copy the caches"
	agent "$OLD" a "$r"
	pa=$!
	agent "$NEW" b "$r"
	pb=$!
	sleep 10
	a0=$(run_ns $pa) b0=$(run_ns $pb)
	sleep "$D"
	a1=$(run_ns $pa) b1=$(run_ns $pb)
	[ "$MODE" = run ] && kill -INT $pa $pb
	wait $pa $pb
	old_ms=$(((a1 - a0) / 1000000)) new_ms=$(((b1 - b0) / 1000000))
	ratio=$(python3 -c "import sys; print('%.2f' % (int(sys.argv[2]) / int(sys.argv[1])))" "$old_ms" "$new_ms")
	if [ "$MODE" = run ]; then
		echo "round $r: OLD $old_ms ms, NEW $new_ms ms (NEW / OLD $ratio); windows OLD $(windows a), NEW $(windows b)"
	else
		echo "round $r: OLD $old_ms ms, NEW $new_ms ms (NEW / OLD $ratio); [unknown] weight OLD $(unknown_pct "$T/a$r.folded"), NEW $(unknown_pct "$T/b$r.folded")"
	fi
	R_OLD+=("$old_ms") R_NEW+=("$new_ms") R_RATIO+=("$ratio")
done
echo "medians: OLD $(median "${R_OLD[@]}") ms, NEW $(median "${R_NEW[@]}") ms; NEW / OLD of a round: median $(median "${R_RATIO[@]}"), $(printf '%s\n' "${R_RATIO[@]}" | sort -n | tr '\n' ' ')"
