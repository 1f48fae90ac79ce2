#!/bin/bash
# Stacks and names on the toolchains a fleet runs, on programs this test builds (each part says
# skipped, with the reason, when its toolchain is not installed):
#   Rust (rustc, linked by lld, no frame pointers; legacy and v0 mangling): whole stacks from
#     the leaf to _start, no caller its code cannot have, names demangled as perf shows them;
#   Go (default flags: compressed .debug_frame) whole to runtime.goexit by table; stripped
#     (-ldflags=-s -w) named from .gopclntab;
#   Node.js: stacks through V8's builtins (code in node's .text without CFI, frame-pointer
#     steps in auto) as deep as frame pointers give and whole to _start;
#   a JVM whose perf map is written in the middle of the capture (jcmd Compiler.perfmap): its
#     JIT leaf frames named from it.
# (lld-linked C and C++ chains: test_unwind_live.sh; C++ names: the unit tests.)

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP

# stacks FOLDED: "whole=W total=N median=D" for the samples of the folded file: whole ones
# reach one of the outermost frames named after it
stacks() {
	"$PP_PYTHON" - "$@" <<'PY'
import statistics, sys
path, roots = sys.argv[1], set(sys.argv[2:])
depths, whole, total = [], 0, 0
for line in open(path):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    frames, n = stack.split(";")[1:], int(n)
    total += n
    depths += [len(frames)] * n
    whole += n * any(f in roots for f in frames)
print("whole=%d total=%d median=%d" % (whole, total, statistics.median(depths) if depths else 0))
PY
}
# edges FOLDED CALLER->CALLEE...: samples in which a function of the program sits under a caller
# its code cannot have (pairs listed are the only callers allowed for each callee)
edges() {
	"$PP_PYTHON" - "$@" <<'PY'
import sys
path, allowed = sys.argv[1], {}
for pair in sys.argv[2:]:
    caller, callee = pair.split("->")
    allowed.setdefault(callee, set()).add(caller)
bad = total = 0
for line in open(path):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    frames, n = stack.split(";")[1:], int(n)  # root first
    total += n
    if any(callee in allowed and caller not in allowed[callee]
           for caller, callee in zip(frames, frames[1:])):
        bad += n
print("%d/%d" % (bad, total))
PY
}
# capture NAME PROG ARGS...: PROG running, recorded with -p into NAME.folded until it has had
# 1 s of CPU, then killed (the programs run far longer than that)
capture() {
	local name=$1 pid
	shift
	"$@" >/dev/null 2>&1 &
	pid=$!
	pp_record_cpu "$T/$name" "$pid" 1000 -F 499 -p "$pid" -o "$T/$name.folded"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ "$PP_RC" -eq 0 ] || { pp_fail "$name: record exited $PP_RC"; pp_show "$T/$name.err"; }
}
share_ok() { "$PP_PYTHON" -c "import sys; w, t = $1, $2; sys.exit(0 if t and w / t >= $3 else 1)"; }

# --- Rust -------------------------------------------------------------------------------------
RUSTC=$(command -v rustc)
if [ -n "$RUSTC" ] && command -v ld.lld >/dev/null; then
	cat >"$T/main.rs" <<'SRC'
use std::time::{Duration, Instant};
#[inline(never)]
fn spin(n: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..n { s = s.wrapping_add(i * i % 7); }
    unsafe { std::ptr::read_volatile(&s) }
}
#[inline(never)]
fn fib(n: u64) -> u64 { if n < 2 { spin(20000) } else { fib(n - 1).wrapping_add(fib(n - 2)) } }
#[inline(never)]
fn map_work(v: &[u64]) -> u64 { v.iter().map(|x| fib(*x % 6)).sum() }
fn main() {
    let secs: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    let end = Instant::now() + Duration::from_secs(secs);
    let v: Vec<u64> = (0..64).collect();
    let mut t = 0u64;
    while Instant::now() < end { t = t.wrapping_add(map_work(&v)); }
    println!("{}", t);
}
SRC
	for mangling in legacy v0; do
		# legacy is rustc's default (the flag takes only v0 on stable releases)
		mflag=
		[ $mangling = v0 ] && mflag="-C symbol-mangling-version=v0"
		# shellcheck disable=SC2086
		"$RUSTC" -C opt-level=2 -C force-frame-pointers=no -C link-arg=-fuse-ld=lld $mflag \
			-o "$T/rust_$mangling" "$T/main.rs" \
			2>"$T/rustc.err" || { pp_fail "rustc ($mangling) failed: $(tail -n1 "$T/rustc.err")"; continue; }
		capture "rust_$mangling" "$T/rust_$mangling" 60
		read -r w tot med <<<"$(stacks "$T/rust_$mangling.folded" _start)"
		w=${w#whole=} tot=${tot#total=}
		pp_check "Rust ($mangling, lld, no frame pointers): whole stacks in $w of $tot samples" \
			share_ok "$w" "$tot" 0.90
		bad=$(edges "$T/rust_$mangling.folded" 'main::fib->main::spin' 'main::fib->main::fib' \
			'main::map_work->main::fib' 'main::main->main::map_work')
		pp_check "Rust ($mangling): no sample with an invented caller ($bad)" [ "${bad%%/*}" -eq 0 ]
		pp_check "Rust ($mangling): names demangled as perf shows them (no _ZN, _R, \$LT\$, hash)" \
			bash -c "grep -q 'main::map_work;main::fib' '$T/rust_$mangling.folded' &&
				! grep -Eq '(^|;)(_ZN|_R[A-Z])|\\\$LT\\\$|::h[0-9a-f]{16}' '$T/rust_$mangling.folded'"
	done
else
	pp_skip_check "Rust: rustc or ld.lld is not installed (Debian packages rustc, lld)"
fi

# --- Go ---------------------------------------------------------------------------------------
if command -v go >/dev/null; then
	mkdir -p "$T/go"
	cat >"$T/go/main.go" <<'SRC'
package main

import (
	"fmt"
	"os"
	"time"
)

//go:noinline
func spin(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i % 7
	}
	return s
}

//go:noinline
func leaf(n int) int { return spin(n) + 1 }

//go:noinline
func mid(n int) int { return leaf(n) + 2 }

//go:noinline
func top(n int) int { return mid(n) + 3 }

func main() {
	d, _ := time.ParseDuration(os.Args[1])
	end := time.Now().Add(d)
	t := 0
	for time.Now().Before(end) {
		t += top(100000)
	}
	fmt.Println(t)
}
SRC
	export GOCACHE=$T/gocache GOPATH=$T/gopath HOME=${HOME:-$T}
	if (cd "$T/go" && go mod init pptest >/dev/null 2>&1 && go build -o "$T/gprog" . &&
		go build -ldflags="-s -w" -o "$T/gprog_stripped" .) >"$T/go.err" 2>&1; then
		capture go "$T/gprog" 60s
		read -r w tot med <<<"$(stacks "$T/go.folded" runtime.goexit runtime.goexit.abi0)"
		w=${w#whole=} tot=${tot#total=}
		pp_check "Go (compressed .debug_frame): whole stacks to runtime.goexit in $w of $tot" \
			share_ok "$w" "$tot" 0.90
		pp_check "Go: its frames walked by table" grep -Eq 'unwinding: [1-9][0-9]* frames by table' "$T/go.out"
		pp_check "Go: main.top;main.mid;main.leaf;main.spin in order" \
			grep -q 'main.top;main.mid;main.leaf;main.spin' "$T/go.folded"
		capture go_stripped "$T/gprog_stripped" 60s
		pp_check "Go, stripped (-s -w): named from .gopclntab" \
			bash -c "grep -Eq 'frames named [0-9]+ \\(.*gopclntab [1-9]' '$T/go_stripped.out' &&
				grep -q 'main.mid' '$T/go_stripped.folded'"
	else
		pp_fail "go build failed: $(tail -n2 "$T/go.err")"
	fi
else
	pp_skip_check "Go: go is not installed (Debian package golang-go)"
fi

# --- Node.js: through V8's builtins -----------------------------------------------------------
if command -v node >/dev/null; then
	cat >"$T/hot.js" <<'SRC'
function hot(n) { const a = []; for (let i = 0; i < n; i++) a.push(i * 7 % 13); return a.sort((x, y) => x - y).length; }
function mid(n) { return hot(n) + 1; }
function top(n) { return mid(n) + 2; }
const end = Date.now() + 120000; let t = 0; while (Date.now() < end) t += top(20000);
console.log(t);
SRC
	(cd "$T" && exec node --perf-basic-prof --logfile="$T/node-v8.log" "$T/hot.js") >/dev/null 2>&1 &
	NPID=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $NPID"
	# both captures see the hot functions compiled: on a busy machine V8 takes a while
	pp_wait_line "$NPID" "/tmp/perf-$NPID.map" 'JS:[*+]hot ' 60 ||
		echo "    no hot() in node's perf map within 60 s"
	for mode in auto fp; do
		pp_record_cpu "$T/node_$mode" "$NPID" 1000 -F 499 -p "$NPID" --user-unwind $mode \
			-o "$T/node_$mode.folded"
	done
	kill "$NPID" 2>/dev/null
	wait "$NPID" 2>/dev/null
	read -r w tot med <<<"$(stacks "$T/node_auto.folded" _start __libc_start_main)"
	read -r _ _ fmed <<<"$(stacks "$T/node_fp.folded" _start)"
	w=${w#whole=} tot=${tot#total=} med=${med#median=} fmed=${fmed#median=}
	echo "    auto: whole $w/$tot, median depth $med; fp: median depth $fmed"
	pp_check "Node.js (auto): whole stacks in $w of $tot samples, through V8's builtins" \
		share_ok "$w" "$tot" 0.90
	pp_check "Node.js (auto): as deep as frame pointers alone ($med >= $fmed)" [ "$med" -ge "$fmed" ]
else
	pp_skip_check "Node.js: node is not installed"
fi

# --- a JVM whose perf map comes in the middle of the capture ---------------------------------
if command -v java >/dev/null && command -v javac >/dev/null && command -v jcmd >/dev/null; then
	pp_start_java_hot "$T/java" ||
		echo "    the JVM did not compile PPHot.ppHotSpin within 90 s (or exited)"
	rm -f "/tmp/perf-$JPID.map"
	# The map is written once the capture has samples of the method unnamed, and the capture
	# goes on until the JVM has had 1 s of CPU after it: on a busy machine jcmd's attach
	# alone can outlast a fixed duration, and the map came after the capture's end.
	"$PEBSPROF" record -F 499 -p "$JPID" -o "$T/java.folded" -o "$T/java.pb.gz" \
		>"$T/java.out" 2>"$T/java.err" &
	REC=$!
	pp_wait_line "$REC" "$T/java.err" 'opened ' 120 || :
	pp_wait_cpu "$JPID" 500 120 || echo "    the JVM did not get 0.5 s of CPU within 120 s"
	jcmd "$JPID" Compiler.perfmap >"$T/jcmd.out" 2>&1 ||
		{ echo "    jcmd Compiler.perfmap failed:"; sed 's/^/    /' "$T/jcmd.out"; }
	pp_wait_cpu "$JPID" 1000 120 || echo "    the JVM did not get 1 s of CPU within 120 s"
	kill -INT "$REC" 2>/dev/null
	pp_wait_pid "$REC" 60
	[ "$PP_RC" = 0 ] || { echo "    record: exit $PP_RC"; sed 's/^/    /' "$T/java.err"; }
	kill "$JPID" 2>/dev/null
	wait "$JPID" 2>/dev/null
	# JIT leaf samples: the leaf is anonymous code, named by the map or not
	read -r named jit <<<"$(awk '{ n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";"); leaf = f[k]
		if (leaf ~ /^\[anonymous code\]/) un += n; else if (leaf ~ /PPHot|::|Interpreter|StubRoutines|Stub/) nm += n }
		END { print nm + 0, nm + un }' "$T/java.folded")"
	echo "    JIT leaf samples named: $named of $jit"
	pp_check "Java (jcmd Compiler.perfmap mid-capture): JIT leaf samples named ($named of $jit)" \
		share_ok "$named" "$jit" 0.90
	pp_check "Java: the hot method is named" grep -q 'PPHot.*ppHotSpin' "$T/java.folded"
else
	pp_skip_check "Java: no java, javac and jcmd (Debian's openjdk-17-jdk-headless)"
fi

pp_finish
