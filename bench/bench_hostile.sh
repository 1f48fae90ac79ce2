#!/bin/bash
# What a hostile neighbour costs the agent: an unprivileged process runs code from files whose
# headers claim huge tables, and the agent samples it. The peer is the same capture beside
# plain files, in the same run: peak RSS, how long a D-second capture takes, samples lost,
# and for `run`, whether any window holds samples read too late for it (late) or more samples
# than its length can hold (misfilled). See bench/README.md.
#
# usage: sudo bench/bench_hostile.sh [-b BUILD_DIR] [-d SECONDS] [-n SYMBOLS] [-k]
#   -n  entries of the real (not sparse) symbol table of the "huge" case (default 10000000,
#       a 240 MB file; 0 leaves the case out)
#   -k  keep the files (printed)
#
# Cases, each a process of the user nobody running code from three files:
#   plain    three whole ELF files of a few KiB                       (the peer)
#   sparse   .symtab, .strtab and .eh_frame each claiming 2 GiB at 4 GiB of an 8 GiB sparse
#            file holding 12 KiB
#   huge     a real .symtab of SYMBOLS entries, and two plain files
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
D=6
NSYMS=10000000
KEEP=0
while getopts "b:d:n:kh" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	d) D=$OPTARG ;;
	n) NSYMS=$OPTARG ;;
	k) KEEP=1 ;;
	*)
		sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
PP=$BUILD/collector/pebsprof
HOSTILE=$BUILD/tests/pp_hostile_elf
die() {
	echo "bench_hostile: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root"
[ -x "$PP" ] && [ -x "$HOSTILE" ] || die "build pebsprof and pp_hostile_elf first (-b BUILD_DIR)"
[ -x /usr/bin/time ] || die "needs /usr/bin/time (Debian package time)"
command -v go >/dev/null || die "needs go (golang-go) to count each window's samples"
W=$(mktemp -d /tmp/pp-bench-hostile.XXXXXX)
chmod 777 "$W"
[ "$KEEP" = 1 ] && echo "files kept in $W" || trap 'pkill -f "$HOSTILE run" 2>/dev/null; rm -rf "$W"' EXIT
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
export GOCACHE=$W/gocache HOME=${HOME:-$W} PPROF_BINARY_PATH=/nonexistent PPROF_TMPDIR=$W

for i in 1 2 3; do "${NOBODY[@]}" "$HOSTILE" write plain "$W/plain$i" "pp_plain_$i"; done
for k in sparse-symtab sparse-strtab sparse-ehframe; do "${NOBODY[@]}" "$HOSTILE" write "$k" "$W/$k"; done
CASES="plain sparse"
if [ "$NSYMS" -gt 0 ]; then
	"${NOBODY[@]}" "$HOSTILE" write "huge-symtab:$NSYMS" "$W/huge" || die "cannot write the huge table"
	CASES="$CASES huge"
fi
files_of() {
	case $1 in
	plain) echo "$W/plain1 $W/plain2 $W/plain3" ;;
	sparse) echo "$W/sparse-symtab $W/sparse-strtab $W/sparse-ehframe" ;;
	huge) echo "$W/huge $W/plain1 $W/plain2" ;;
	esac
}
# start_user SECONDS CASE: the user's process running the case's files; waits for its maps.
start_user() {
	# shellcheck disable=SC2046
	"${NOBODY[@]}" "$HOSTILE" run "$1" $(files_of "$2") >"$W/$2.user" 2>&1 &
	USER_PID=$!
	for _ in $(seq 100); do grep -q ready "$W/$2.user" && return; sleep 0.05; done
	die "$2: the user's process did not start: $(cat "$W/$2.user")"
}
ncpu=$(nproc)
F=99
INTERVAL=2

printf '%-7s %9s %9s %9s %7s %9s %6s %10s %s\n' case "peak MiB" "Δ MiB" "took s" lost samples late "max/win" "refused (symbols, unwind)"
for c in $CASES; do
	start_user $((D + 4)) "$c"
	/usr/bin/time -f '%M %e' -o "$W/$c.time" "$PP" record -a -F $F -d "$D" -o "$W/$c.pb.gz" \
		>"$W/$c.out" 2>"$W/$c.err"
	kill "$USER_PID" 2>/dev/null
	wait "$USER_PID" 2>/dev/null
	read -r kb took <"$W/$c.time"
	lost=$(grep -oE 'ring buffer full [0-9]+' "$W/$c.out" | awk '{print $4}')
	samples=$(grep -oE '^[0-9]+ samples in' "$W/$c.out" | awk '{print $1}')
	sref=$(grep -oE '; refused [0-9]+' "$W/$c.out" | awk '{print $3}')
	uref=$(grep -oE '\([0-9]+ refused\)' "$W/$c.out" | tr -dc 0-9)
	# the agent: windows of INTERVAL s beside the same process; samples per window
	start_user $((3 * INTERVAL + 4)) "$c"
	rm -rf "$W/$c.win"
	"$PP" run -F $F --interval $INTERVAL --output-dir "$W/$c.win" >"$W/$c.run.out" 2>"$W/$c.run.err" &
	agent=$!
	sleep $((3 * INTERVAL + 1))
	kill -TERM $agent
	wait $agent
	kill "$USER_PID" 2>/dev/null
	wait "$USER_PID" 2>/dev/null
	late=$(grep -oE 'late [0-9]+' "$W/$c.run.err" | head -1 | awk '{print $2}')
	maxwin=0
	for f in "$W/$c.win"/*.pb.gz; do
		[ -e "$f" ] || continue
		n=$(go tool pprof -raw "$f" 2>/dev/null | awk '/^Samples:/ {s = 1; next} s && /^ +[0-9]+ +[0-9]+:/ {t += $1} /^Locations/ {s = 0} END {print t + 0}')
		[ "$n" -gt "$maxwin" ] && maxwin=$n
	done
	[ "$c" = plain ] && base_kb=$kb
	printf '%-7s %9.1f %+9.1f %9s %7s %9s %6s %10s %s, %s\n' "$c" "$(echo "$kb / 1024" | bc -l)" \
		"$(echo "($kb - $base_kb) / 1024" | bc -l)" "$took" "${lost:-?}" "${samples:-?}" \
		"${late:-?}" "$maxwin" "${sref:-?}" "${uref:-?}"
done
echo
echo "a window can hold at most $ncpu CPUs x $F Hz x $INTERVAL s = $((ncpu * F * INTERVAL)) samples;"
echo "captures of $D s at $F Hz; Δ against plain, measured in this run:"
echo "  $PP record -a -F $F -d $D -o CASE.pb.gz   (/usr/bin/time -f %M)"
echo "  $PP run -F $F --interval $INTERVAL --output-dir CASE.win   (3 windows)"
