#!/bin/bash
# Names for every frame, end to end with `pebsprof record`:
#  1. a stripped program named through its separate debug file, placed by build id
#     (--debug-dirs) and, separately, by .gnu_debuglink; without the file its frames stay
#     "prog+0x..." and keep address, mapping and build id in pprof (go tool pprof) and OTLP
#     (the official schema); --symbolize none sends addresses only;
#  2. debuginfod: Debian's server on 127.0.0.1 serves the debug file (--debuginfod);
#  3. JIT code named from a perf map (a tiny JIT, then Java's jcmd Compiler.perfmap and
#     Node.js --perf-basic-prof where installed), and hostile perf maps (a link to another
#     file, a FIFO, garbage, a huge file) refused or bounded without hanging the capture.
# Needs root, BPF and perf events; exits 77 with the reason otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
pp_require_go_pprof

T=$PP_TMP
JIT="$PP_TEST_BIN_DIR/pp_jit"

cat >"$T/prog.c" <<'SRC'
#include <stdlib.h>
#include <time.h>
volatile unsigned long pp_sink;
/* global, not exported (no -rdynamic): in .symtab only, so stripping loses its name */
__attribute__((noinline)) unsigned long pp_split_spin(unsigned long n)
{ unsigned long s = 0; for (unsigned long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
int main(int argc, char **argv)
{
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 2);
	while (time(NULL) < end) pp_sink += pp_split_spin(2000000);
	return 0;
}
SRC
cc -O1 -fno-omit-frame-pointer -fno-inline -Wl,--build-id -o "$T/prog" "$T/prog.c" ||
	pp_skip "cc cannot build the test program"
objcopy --only-keep-debug "$T/prog" "$T/prog.debug"
ID=$(readelf -n "$T/prog" | awk '/Build ID/ { print $3 }')
[ -n "$ID" ] || pp_skip "the test program has no build id"

# record_prog NAME BINARY ARGS...: record the program for 2 s into NAME.{folded,pb.gz,otlp.pb}
record_prog() {
	local name=$1 bin=$2
	shift 2
	pp_run "$T/$name" "$PEBSPROF" record -F 499 -o "$T/$name.folded" -o "$T/$name.pb.gz" \
		-o "$T/$name.otlp.pb" "$@" -- "$bin" 2
}

# --- 0. what probe says about naming frames ------------------------------------------------
"$PEBSPROF" probe --json >"$T/probe.json" 2>"$T/probe.err"
want_dbgd=false
[ -n "$(ldconfig -p | awk '$1 == "libdebuginfod.so.1"')" ] && want_dbgd=true
pp_check "probe --json reports symbolization: libdebuginfod $want_dbgd, openat2, the debug dir" \
	"$PP_PYTHON" -c "import json, sys; s = json.load(open('$T/probe.json'))['symbolization']
sys.exit(0 if s['libdebuginfod'] == $([ $want_dbgd = true ] && echo True || echo False) and s['openat2'] and
         s['debug_dir'] == '/usr/lib/debug' else 1)"
pp_check "probe's text names the debuginfod and perf map facts" \
	bash -c "'$PEBSPROF' probe | grep -q '^symbolization:' && '$PEBSPROF' probe | grep -q 'perf maps:'"

# --- 1. separate debug files ---------------------------------------------------------------
mkdir -p "$T/bid/bin" "$T/dbg/.build-id/${ID:0:2}" "$T/link/bin"
objcopy --strip-all "$T/prog" "$T/bid/bin/prog"
cp "$T/prog.debug" "$T/dbg/.build-id/${ID:0:2}/${ID:2}.debug"
record_prog bid "$T/bid/bin/prog" --debug-dirs "$T/dbg"
pp_check "by build id: the stripped program's static function is named" \
	grep -q 'pp_split_spin' "$T/bid.folded"
grep -q 'frames named.*debug_file' "$T/bid.out" &&
	pp_ok "by build id: the summary counts frames named by a debug file" ||
	{ pp_fail "by build id: no debug_file count in the summary"; pp_show "$T/bid.out" 30; }

objcopy --strip-all --add-gnu-debuglink="$T/prog.debug" "$T/prog" "$T/link/bin/prog"
cp "$T/prog.debug" "$T/link/bin/prog.debug"
record_prog link "$T/link/bin/prog"
pp_check "by .gnu_debuglink next to the binary: named" grep -q 'pp_split_spin' "$T/link.folded"

# the debuglink's CRC protects against a stale file of the same name
printf 'x' >>"$T/link/bin/prog.debug"
record_prog stale "$T/link/bin/prog"
pp_check "a debuglink file whose CRC differs is not used" \
	bash -c "! grep -q pp_split_spin '$T/stale.folded'"

mkdir -p "$T/bare/bin"
objcopy --strip-all "$T/prog" "$T/bare/bin/prog"
record_prog bare "$T/bare/bin/prog"
pp_check "without a debug file: not named" bash -c "! grep -q pp_split_spin '$T/bare.folded'"
pp_check "without a debug file: the frame is prog+0x<ELF address> in the folded stacks" \
	grep -Eq ';prog\+0x[0-9a-f]+' "$T/bare.folded"
grep -Eq 'unnamed [1-9]' "$T/bare.out" && pp_ok "the summary counts unnamed frames" ||
	{ pp_fail "no unnamed count in the summary"; pp_show "$T/bare.out" 30; }

# the ELF address of pp_split_spin, for the checks of the unnamed frames' addresses
SPIN=$(nm "$T/prog" | awk '$3 == "pp_split_spin" { print $1 }')
SPIN_SIZE=$(nm -S "$T/prog" | awk '$4 == "pp_split_spin" { print $2 }')

# check_unnamed NAME [--drawn]: prog's unnamed frames in NAME's pprof and OTLP files
check_unnamed() {
	local name=$1 drawn=${2:-} what
	what=$([ -n "$drawn" ] && echo "their placeholder as the function" || echo "no Line")
	if pp_pprof_raw "$T/$name.pb.gz" "$T/$name.raw"; then
		pp_check "$name: pprof: prog's unnamed frames lie inside pp_split_spin with $what, \
their mapping has the file and build id and no [FN]" \
			pp_py check-unnamed "$T/$name.raw" prog "$ID" "$SPIN" "$SPIN_SIZE" $drawn
	else
		pp_fail "$name: go tool pprof cannot read the profile"
		pp_show "$T/$name.raw.err"
	fi
	if [ "$HAVE_OTLP_PY" = 1 ]; then
		pp_check "$name: OTLP: prog's unnamed frames carry the ELF address with $what, the \
mapping's file and build id" \
			"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/otlp_unnamed.py" "$T/gen" \
			"$T/$name.otlp.pb" prog "$ID" "$SPIN" "$SPIN_SIZE" $drawn
	else
		pp_skip_check "$name: OTLP schema check: python3-protobuf or the reference schema is missing"
	fi
}
HAVE_OTLP_PY=0
"$PP_PYTHON" -c 'import google.protobuf' 2>/dev/null &&
	pp_otlp_python "$PP_SOURCE_DIR/../shared/reference/opentelemetry-proto" "$T/gen" 2>/dev/null &&
	HAVE_OTLP_PY=1
# local: the agent tried; the frame is drawn as prog+0x..., and pprof may symbolize it again
check_unnamed bare --drawn

record_prog none "$T/prog" --symbolize none
pp_check "--symbolize none: even the unstripped program's function stays unnamed" \
	bash -c "! grep -q pp_split_spin '$T/none.folded' && grep -Eq ';prog\+0x' '$T/none.folded'"
# none: left to the backend, with no Line, as Pyroscope's symbolizer expects
check_unnamed none

# --- 2. debuginfod ---------------------------------------------------------------------------
if command -v debuginfod >/dev/null; then
	mkdir -p "$T/srv"
	cp "$T/prog.debug" "$T/srv/"
	PORT=$((20000 + $$ % 20000))
	debuginfod -F "$T/srv" -p "$PORT" -d "$T/dbgd.sqlite" >"$T/dbgd.log" 2>&1 &
	DPID=$!
	for _ in $(seq 150); do
		curl -sf -o /dev/null "http://127.0.0.1:$PORT/buildid/$ID/debuginfo" && break
		sleep 0.2
	done
	asked_before=$(grep -c "GET /buildid/$ID/debuginfo" "$T/dbgd.log")
	record_prog dbgd "$T/bare/bin/prog" --debuginfod "http://127.0.0.1:$PORT" \
		--debuginfod-cache "$T/dcache"
	pp_check "debuginfod: the stripped program's function is named" \
		grep -q 'pp_split_spin' "$T/dbgd.folded"
	pp_check "debuginfod: the debug file is in the cache directory" \
		bash -c "find '$T/dcache' -name debuginfo -size +0 | grep -q ."
	pp_check "debuginfod: the server was asked for the build id once" \
		bash -c "[ \$(grep -c 'GET /buildid/$ID/debuginfo' '$T/dbgd.log') -eq $((asked_before + 1)) ]"
	kill "$DPID" 2>/dev/null
	wait "$DPID" 2>/dev/null
else
	pp_skip_check "debuginfod: Debian's debuginfod server is not installed"
fi

# --- 3. JIT perf maps ------------------------------------------------------------------------
pp_run "$T/jit" "$PEBSPROF" record -F 499 -o "$T/jit.folded" -- "$JIT" 2
pp_check "JIT: the generated code is named from its perf map" \
	grep -q 'pp_jit_hot_loop' "$T/jit.folded"
pp_check "JIT: the summary counts perf map names" grep -q 'perf_map' "$T/jit.out"

pp_run "$T/jlink" timeout 30 "$PEBSPROF" record -F 499 -o "$T/jlink.folded" -- \
	"$JIT" 2 link /etc/shadow
pp_check "hostile: a perf map that is a link to /etc/shadow is refused, nothing of it in the profile" \
	bash -c "grep -q 'perf maps refused [1-9]' '$T/jlink.out' && ! grep -q 'root:' '$T/jlink.folded'"
echo "7f0000000000 7fffffff0000 leaked_secret_name" >"$T/secret.map"
pp_run "$T/jlink2" timeout 30 "$PEBSPROF" record -F 499 -o "$T/jlink2.folded" -- \
	"$JIT" 2 link "$T/secret.map"
pp_check "hostile: a link to a well-formed map the agent can read names nothing" \
	bash -c "! grep -q leaked_secret_name '$T/jlink2.folded' && grep -q 'perf maps refused [1-9]' '$T/jlink2.out'"

pp_run "$T/jfifo" timeout 30 "$PEBSPROF" record -F 499 -o "$T/jfifo.folded" -- "$JIT" 2 fifo
pp_check "hostile: a FIFO perf map neither blocks the capture nor names anything" \
	bash -c "[ $PP_RC -eq 0 ] && grep -q 'perf maps refused [1-9]' '$T/jfifo.out'"

# it runs until killed: beside the matrix, loading the shim outlasted a 3 s run
"$JIT" 600 none "$T/jg.pid" &
JGPID=$!
PP_BG_PIDS="${PP_BG_PIDS:-} $JGPID"
pp_wait_line "$JGPID" "$T/jg.pid" . 60 || :
JG=$(head -n1 "$T/jg.pid")
ADDR=$(sed -n 2p "$T/jg.pid")
{
	printf 'garbage line\n\x01\x02\x03\n%s 10 \x1b[31mred_name\n' "$ADDR"
	head -c 5000000 /dev/zero
	printf '\n%s 10 after_the_zeros\n' "$ADDR"
} >"/tmp/perf-$JG.map"
pp_run "$T/jgarb" timeout 30 "$PEBSPROF" record -F 499 -d 1 -p "$JG" -o "$T/jgarb.folded"
kill "$JGPID" 2>/dev/null
wait "$JGPID" 2>/dev/null
pp_check "hostile: garbage lines are counted, a control byte never reaches the profile" \
	bash -c "grep -q 'bad lines [1-9]' '$T/jgarb.out' && ! grep -q \$'\x1b' '$T/jgarb.folded'"
pp_check "hostile: the latest entry for the address names it (after 5 MB of NULs)" \
	grep -q 'after_the_zeros' "$T/jgarb.folded"
if ! grep -q 'after_the_zeros' "$T/jgarb.folded" 2>/dev/null; then
	# for a post-mortem: the process, its map, and what the capture said
	echo "  JIT process $JG ($(wc -l <"$T/jg.pid" 2>/dev/null) lines in its pid file), address $ADDR, rc $PP_RC"
	pp_show "$T/jgarb.out" 30
	pp_show "$T/jgarb.err" 10
	pp_show "$T/jgarb.folded" 5
fi
rm -f "/tmp/perf-$JG.map"

if command -v java >/dev/null && command -v javac >/dev/null && command -v jcmd >/dev/null; then
	if pp_start_java_hot "$T/java"; then
		jcmd "$JPID" Compiler.perfmap >"$T/jcmd.out" 2>&1
		pp_run "$T/java" "$PEBSPROF" record -F 499 -d 2 -p "$JPID" -o "$T/java.folded"
		[ "$PP_RC" = 0 ] || { echo "    record: exit $PP_RC"; sed 's/^/    /' "$T/java.err"; }
	else
		echo "    the JVM did not compile PPHot.ppHotSpin within 90 s (or exited)"
	fi
	kill "$JPID" 2>/dev/null
	wait "$JPID" 2>/dev/null
	pp_check "Java (jcmd Compiler.perfmap): the JIT-compiled method is named" \
		grep -q 'PPHot.ppHotSpin' "$T/java.folded"
else
	pp_skip_check "Java: no java, javac and jcmd (Debian's openjdk-17-jdk-headless)"
fi

if command -v node >/dev/null; then
	# V8 writes its log where it runs: in the test's directory, never the tree's
	(cd "$T" && exec node --perf-basic-prof --logfile="$T/node-v8.log" -e 'function ppHotLoop(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s }
const end = Date.now() + 120000; let t = 0; while (Date.now() < end) t += ppHotLoop(1e6)') &
	NPID=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $NPID"
	# V8 writes a function's line when it compiles it: on a busy machine that takes a while
	pp_wait_line "$NPID" "/tmp/perf-$NPID.map" ppHotLoop 60 ||
		echo "    no ppHotLoop in node's perf map within 60 s"
	pp_run "$T/node" "$PEBSPROF" record -F 499 -d 2 -p "$NPID" -o "$T/node.folded"
	kill "$NPID" 2>/dev/null
	wait "$NPID" 2>/dev/null
	pp_check "Node.js (--perf-basic-prof): the JIT-compiled function is named" \
		grep -q 'ppHotLoop' "$T/node.folded"
else
	pp_skip_check "Node.js: node is not installed"
fi

pp_finish
