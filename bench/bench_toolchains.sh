#!/bin/bash
# Stacks on every toolchain, pebsprof against perf on the same process in the same run: for
# Debian's gzip, xz, sort, g++ (cc1plus), clang, python3 and sqlite3, and for a Rust program
# (lld, no frame pointers), a Go program (default flags), a Node.js script and a Java program
# (its perf map written by jcmd Compiler.perfmap), each one long-running process:
#   whole stacks: samples whose stack reaches a thread's first frame (_start, start_thread,
#     clone3, runtime.goexit...), pebsprof (--user-unwind auto) against perf -g and perf
#     --call-graph dwarf; target >= 90 % and >= the better perf's - 2 points;
#   invented edges (Rust and Go, whose call graphs are known): samples with a caller the code
#     cannot have; target 0;
#   JIT leaf samples named (Node.js, Java); target >= 90 %;
#   the agent's CPU per sample against perf record --call-graph dwarf + perf report on the same
#     capture; target <= 0.2.
# See bench/README.md. Needs root, perf (linux-perf); programs whose toolchain is missing are
# left out, said so.
#
# usage: sudo bench/bench_toolchains.sh [-b BUILD_DIR] [-d SECONDS] [-F HZ] [-k] [PROGRAM...]
#   -d  seconds each tool samples a program (default 15; the agent's start, ~0.1 s of CPU
#       verifying its BPF programs, is in its figure)
#   -F  sampling frequency (default 499)
#   -k  keep the captures (printed)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
D=15
HZ=499
KEEP=0
while getopts "b:d:F:kh" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	d) D=$OPTARG ;;
	F) HZ=$OPTARG ;;
	k) KEEP=1 ;;
	*)
		sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
PROGRAMS=${*:-gzip xz sort g++ clang python3 sqlite3 rust go node java}
die() {
	echo "bench_toolchains: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events)"
PP=$BUILD/collector/pebsprof
[ -x "$PP" ] || die "no $PP (build it, or pass -b BUILD_DIR)"
command -v perf >/dev/null || die "no perf (Debian's linux-perf): the peer"
PY=$(command -v /usr/bin/python3 || command -v python3)
CHECK=$SRC/tests/integration/stack_checks.py
T=$(mktemp -d /tmp/pp-bench-tc.XXXXXX)
chmod 755 "$T"
[ "$KEEP" = 1 ] && echo "captures kept in $T" || trap '[ -n "${PID:-}" ] && kill -KILL -- -"$PID" 2>/dev/null; rm -rf "$T"' EXIT
# Go's own build cache (a fresh one would compile the standard library again, minutes)
export GOPATH=$T/gopath HOME=${HOME:-$T}

# cpu_of CMD...: runs CMD; its output, then "cpu_s S maxrss_kb K" (its and its children's)
cpu_of() { "$PY" "$SRC/bench/cpu_of.py" "$@"; }

# --- the workloads: one process each, living through the three captures -----------------------
LIFE=$((3 * D + 20))
make_inputs() {
	# text for the compressors and sort: the same lines again and again, endless
	"$PY" -c 'import random; r = random.Random(7)
print("\n".join(" ".join(r.choice(["alpha","beta","gamma","delta","epsilon","zeta","eta"]) + str(r.randrange(1000)) for _ in range(12)) for _ in range(200000)))' >"$T/text"
	# a C++ translation unit the compilers take long on
	"$PY" -c '
print("#include <algorithm>\n#include <map>\n#include <string>\n#include <vector>\n#include <functional>")
for i in range(1500):
    print("template <typename T> struct S%d { std::map<std::string, std::vector<T>> m; T f(T x) { std::vector<T> v(x, x); std::sort(v.begin(), v.end(), std::greater<T>()); return v.empty() ? x : v[0] + (T)m.size(); } };" % i)
    print("int g%d(int x) { S%d<int> a; S%d<long> b; return a.f(x) + (int)b.f(x); }" % (i, i, i))' >"$T/big.cc"
	cat >"$T/hot.py" <<'EOF'
import time
def leaf(n):
    return sum(i * i % 7 for i in range(n))
def mid(n):
    return leaf(n) + 1
end = time.time() + float(__import__("sys").argv[1])
while time.time() < end:
    mid(20000)
EOF
}
# start NAME: the program running in the background in a process group of its own; sets PID,
# the group's leader (or returns 1: not available)
start() {
	local cmd
	case $1 in
	gzip) cmd='while :; do cat "$T/text"; done | gzip -9 >/dev/null' ;;
	xz) cmd='while :; do cat "$T/text"; done | xz -6 -T1 >/dev/null' ;;
	sort) cmd='while :; do cat "$T/text"; done | sort -S 32M -T "$T" >/dev/null' ;;
	g++) cmd='exec g++ -O2 -c -o /dev/null "$T/big.cc"' ;;
	clang)
		command -v clang++ >/dev/null || return 1
		cmd='exec clang++ -O2 -c -o /dev/null "$T/big.cc"'
		;;
	python3) cmd='exec /usr/bin/python3 "$T/hot.py" "$LIFE"' ;;
	sqlite3)
		command -v sqlite3 >/dev/null || return 1
		cmd='exec sqlite3 :memory: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 4000000000) SELECT sum(x * x % 7) FROM c;" >/dev/null'
		;;
	rust)
		command -v rustc >/dev/null && command -v ld.lld >/dev/null || return 1
		if [ ! -x "$T/rprog" ]; then
			sed -n '/^\tcat >"$T\/main.rs" <<.SRC.$/,/^SRC$/p' \
				"$SRC/tests/integration/test_toolchains.sh" | sed '1d;$d' >"$T/main.rs"
			rustc -C opt-level=2 -C force-frame-pointers=no -C link-arg=-fuse-ld=lld \
				-o "$T/rprog" "$T/main.rs" 2>/dev/null || return 1
		fi
		cmd='exec "$T/rprog" "$LIFE"'
		;;
	go)
		command -v go >/dev/null || return 1
		if [ ! -x "$T/gprog" ]; then
			mkdir -p "$T/go"
			sed -n '/^\tcat >"$T\/go\/main.go" <<.SRC.$/,/^SRC$/p' \
				"$SRC/tests/integration/test_toolchains.sh" | sed '1d;$d' >"$T/go/main.go"
			(cd "$T/go" && go mod init ppbench >/dev/null 2>&1 && go build -o "$T/gprog" .) ||
				return 1
		fi
		cmd='exec "$T/gprog" "${LIFE}s"'
		;;
	node)
		command -v node >/dev/null || return 1
		sed -n '/^\tcat >"$T\/hot.js" <<.SRC.$/,/^SRC$/p' "$SRC/tests/integration/test_toolchains.sh" |
			sed '1d;$d' | sed "s/Date.now() + 6000/Date.now() + ${LIFE}000/" >"$T/hot.js"
		cmd='cd "$T" && exec node --perf-basic-prof --logfile="$T/v8.log" "$T/hot.js" >/dev/null'
		;;
	java)
		command -v javac >/dev/null && command -v jcmd >/dev/null || return 1
		mkdir -p "$T/java"
		sed -n '/^\tcat >"$T\/java\/PPHot.java" <<.SRC.$/,/^SRC$/p' \
			"$SRC/tests/integration/test_toolchains.sh" | sed '1d;$d' >"$T/java/PPHot.java"
		javac -d "$T/java" "$T/java/PPHot.java" || return 1
		cmd='exec java -XX:+PreserveFramePointer -cp "$T/java" PPHot "$LIFE" >/dev/null'
		;;
	*) return 1 ;;
	esac
	T=$T LIFE=$LIFE setsid bash -c "$cmd" &
	PID=$!
}
# stop: the workload's whole process group
stop() {
	kill -- -"$PID" 2>/dev/null
	sleep 0.2
	kill -KILL -- -"$PID" 2>/dev/null
	wait "$PID" 2>/dev/null
}
# the process that does the work: the compiler proper under the driver, the last of a pipeline
worker_of() {
	case $1 in
	g++) pgrep -n -g "$PID" cc1plus ;;
	clang) pgrep -n -g "$PID" -f 'clang.* -cc1 ' || pgrep -n -g "$PID" clang ;;
	gzip | xz | sort) pgrep -n -x -g "$PID" "$1" ;;
	*) echo "$PID" ;;
	esac
}

echo "kernel $(uname -r), $(nproc) CPUs, $HZ Hz, $D s per capture"
make_inputs
rows=()
for prog in $PROGRAMS; do
	if ! start "$prog"; then
		echo "skipped: $prog (its toolchain is not installed)"
		continue
	fi
	sleep 2 # past start-up: the process maps its libraries, the agent builds their tables
	wpid=$(worker_of "$prog")
	if [ -z "$wpid" ] || ! kill -0 "$wpid" 2>/dev/null; then
		echo "skipped: $prog did not start"
		stop
		continue
	fi
	[ "$prog" = java ] && jcmd "$wpid" Compiler.perfmap >/dev/null 2>&1
	out=$(cpu_of "$PP" record -F "$HZ" -d "$D" -p "$wpid" -o "$T/$prog.folded")
	pp_cpu=$(echo "$out" | sed -n 's/^cpu_s //p')
	pp_n=$(echo "$out" | sed -n 's/^\([0-9]*\) samples in.*/\1/p')
	perf record -q -F "$HZ" -g -p "$wpid" -o "$T/$prog.fp.data" -- sleep "$D" >/dev/null 2>&1
	out=$(cpu_of perf record -F "$HZ" --call-graph dwarf -p "$wpid" -o "$T/$prog.dw.data" -- sleep "$D")
	rec_cpu=$(echo "$out" | sed -n 's/^cpu_s //p')
	rep_cpu=$(cpu_of perf report -i "$T/$prog.dw.data" --stdio | sed -n 's/^cpu_s //p')
	for k in fp dw; do
		# --no-inline: only the outermost frames are checked (addr2line over LLVM: minutes)
		perf script --no-inline -i "$T/$prog.$k.data" -F comm,tid,ip,sym,dso >"$T/$prog.$k.txt" 2>/dev/null
	done
	[ "$prog" = java ] && jcmd "$wpid" Compiler.perfmap >/dev/null 2>&1
	map=/tmp/perf-$wpid.map
	stop
	read -r pw pt _ <<<"$("$PY" "$CHECK" whole folded "$T/$prog.folded")"
	read -r fw ft _ <<<"$("$PY" "$CHECK" whole perf "$T/$prog.fp.txt")"
	read -r dw dt _ <<<"$("$PY" "$CHECK" whole perf "$T/$prog.dw.txt")"
	inv="-"
	case $prog in
	rust) inv=$("$PY" "$CHECK" edges folded "$T/$prog.folded" 'main::fib->main::spin' \
		'main::fib->main::fib' 'main::map_work->main::fib' 'main::main->main::map_work' | tr ' ' /) ;;
	go) inv=$("$PY" "$CHECK" edges folded "$T/$prog.folded" 'main.leaf->main.spin' \
		'main.mid->main.leaf' 'main.top->main.mid' 'main.main->main.top' | tr ' ' /) ;;
	esac
	jit="-"
	[ -f "$map" ] && case $prog in node | java) jit=$("$PY" "$CHECK" jit folded "$T/$prog.folded" "$map" | tr ' ' /) ;; esac
	rows+=("$("$PY" - "$prog" "$pw" "$pt" "$fw" "$ft" "$dw" "$dt" "$inv" "$jit" "$pp_cpu" "${pp_n:-0}" "$rec_cpu" "$rep_cpu" "$dt" <<'PY'
import sys
(prog, pw, pt, fw, ft, dw, dt, inv, jit, ppc, ppn, rec, rep, pn) = sys.argv[1:]
sh = lambda w, t: 100.0 * int(w) / int(t) if int(t) else 0.0
p, f, d = sh(pw, pt), sh(fw, ft), sh(dw, dt)
best = max(f, d)
a = float(ppc) / int(ppn) * 1e6 if int(ppn) else 0
b = (float(rec) + float(rep)) / int(pn) * 1e6 if int(pn) else 0
ok = "ok" if p >= 90 and p >= best - 2 else "MISS"
print("| %s | %.1f%% (%s/%s) | %.1f%% | %.1f%% | %s | %s | %s | %.1f | %.1f | %.3f |" % (
    prog, p, pw, pt, f, d, ok, inv, jit, a, b, a / b if b else 0))
PY
)")
done
echo
echo "| program | pebsprof whole | perf -g | perf dwarf | >= 90 and >= best - 2 | invented | JIT named | pebsprof us/sample | perf dwarf + report us/sample | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "commands: $PP record -F $HZ -d $D -p PID; perf record -F $HZ -g | --call-graph dwarf -p PID -- sleep $D; perf report --stdio"
