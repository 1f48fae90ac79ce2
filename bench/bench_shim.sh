#!/bin/bash
# What a part of the BPF shim costs per sample, with both stacks: tests/tools/pp_bench_shim on
# cpu-clock, two configurations alternating. -x mem: reading the memory fields (addr,
# data_src, weight, phys_addr; software events accept the memory sample bits) against the same
# shim without them. -x unwind: the shim's own walk of user frame pointers against the
# kernel's walker (bpf_get_stack). See bench/README.md. Needs root.
#
# usage: bench/bench_shim.sh [-x mem|unwind] [-b BUILD_DIR] [-d SECONDS] [-F HZ] [-r ROUNDS]
#                            [-v kctx|core]
#   -x  what to compare (default mem)
#   -b  build directory holding tests/pp_bench_shim and tests/pp_workload (default: build)
#   -d  seconds per configuration and round (default 5)
#   -F  sampling frequency per CPU (default 10000)
#   -r  rounds, each running A then B (default 7)
#   -v  shim variant (default: both, kctx where the kernel has bpf_cast_to_kern_ctx)

set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
SECS=5
HZ=10000
ROUNDS=7
VARIANTS="kctx core"
CMP=mem
while getopts "x:b:d:F:r:v:h" opt; do
	case $opt in
	x) CMP=$OPTARG ;;
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	d) SECS=$OPTARG ;;
	F) HZ=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	v) VARIANTS=$OPTARG ;;
	*)
		sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
TOOL=$BUILD/tests/pp_bench_shim
WORKLOAD=$BUILD/tests/pp_workload

die() {
	echo "bench_shim: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events, BPF statistics)"
[ -x "$TOOL" ] || die "no $TOOL (build target pp_bench_shim, or pass -b BUILD_DIR)"
[ -x "$WORKLOAD" ] || die "no $WORKLOAD (build target pp_workload)"
case $SECS$HZ$ROUNDS in *[!0-9]*) die "-d, -F and -r want whole numbers" ;; esac
case $CMP in mem | unwind) ;; *) die "-x wants mem or unwind" ;; esac

RATE_F=/proc/sys/kernel/perf_event_max_sample_rate
OLD_RATE=$(cat $RATE_F)
restore() { echo "$OLD_RATE" >$RATE_F; }
trap restore EXIT
trap 'exit 130' INT TERM

# The kernel refuses frequencies above perf_event_max_sample_rate and lowers that limit when
# sample handling takes too long; raise it for the run, report a lowering, restore it after.
SET_RATE=$OLD_RATE
if [ "$OLD_RATE" -lt "$HZ" ]; then
	SET_RATE=$((HZ * 2))
	echo "$SET_RATE" >$RATE_F
fi

echo "kernel $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
for v in $VARIANTS; do
	echo
	echo "== variant $v"
	echo "$TOOL -x $CMP -d $SECS -F $HZ -r $ROUNDS -v $v -w $WORKLOAD"
	"$TOOL" -x "$CMP" -d "$SECS" -F "$HZ" -r "$ROUNDS" -v "$v" -w "$WORKLOAD" ||
		echo "variant $v: pp_bench_shim failed (kctx needs kernel 6.2+)"
	now=$(cat $RATE_F)
	if [ "$now" -lt "$SET_RATE" ]; then
		echo "note: the kernel lowered perf_event_max_sample_rate $SET_RATE -> $now" \
			"during this run; the figures are at the lowered rate"
		echo "$SET_RATE" >$RATE_F
	fi
done
