#!/bin/bash
# The agent against a hostile neighbour: an unprivileged user (nobody), in a user namespace of
# its own where it needs one, runs code from files this test builds to hurt the agent
# (tests/tools/pp_hostile_elf), and a hostile network client floods the health endpoint. Each
# part fails without the defence it checks:
#   1. files whose .symtab, .strtab and .eh_frame claim 2 GiB of an 8 GiB sparse file: the
#      capture ends on time, its peak RSS stays within 16 MiB of a capture beside plain files,
#      no sample is lost, each file is refused, counted and named once; a run's windows hold
#      no late sample;
#   2. a file in the user's own tmpfs with the inode number of a root-only ELF, its path then
#      covered by a link to that ELF: no sample is named by the secret's symbols, with
#      /proc/PID/map_files (root) and without it (the DaemonSet's capabilities: by path, the
#      device and inode checked);
#   3. 2000 idle and 200 slow connections to /healthz: every probe answered within 1 s;
#   4. and 5. symbol names, an executable name and a comm that are not UTF-8 and hold
#      terminal escapes: pprof, OTLP, folded, SVG and the terminal get clean text, decoded by
#      the official schemas and go tool pprof;
#   7. --config naming a FIFO, NODE_NAME with a newline, a service name that is not UTF-8:
#      exit 2 at once with the reason.
# (6, qsort on an empty .debug_frame index, is the unwind fuzz corpus's debug-frame-cie-only,
# replayed under UBSan.)

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
HOSTILE="$PP_TEST_BIN_DIR/pp_hostile_elf"
[ -x "$HOSTILE" ] || {
	echo "FAIL: $HOSTILE not built (target pp_hostile_elf)"
	exit 1
}
command -v setpriv >/dev/null || pp_skip "needs setpriv (util-linux) to run as nobody"
[ -x /usr/bin/time ] || pp_skip "needs /usr/bin/time (Debian package time) for peak RSS"
T=$PP_TMP
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

# as_nobody_run SECONDS OUT FILES...: the user's process running code from FILES; waits
# until it has mapped them all; sets RUNNER.
as_nobody_run() {
	local secs=$1 out=$2
	shift 2
	"${NOBODY[@]}" "$HOSTILE" run "$secs" "$@" >"$out" 2>&1 &
	RUNNER=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $RUNNER"
	for _ in $(seq 100); do grep -q '^ready' "$out" && return 0; sleep 0.05; done
	return 1
}
# field FILE REGEX: the number after REGEX in FILE (first match).
field() { grep -oE "$2 [0-9]+" "$1" | head -1 | awk '{print $NF}'; }
# peak_kb TIME_V_OUTPUT: "Maximum resident set size" of /usr/bin/time -v.
peak_kb() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }
elapsed_s() {
	awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
		for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$1"
}

mkdir -p "$T/u"
chmod 777 "$T/u"

# --- 1. sparse files claiming 2 GiB tables ----------------------------------------------------
pp_log "1. tables claiming 2 GiB of sparse 8 GiB files"
for k in sparse-symtab sparse-strtab sparse-ehframe; do
	"${NOBODY[@]}" "$HOSTILE" write "$k" "$T/u/$k" || pp_fail "write $k"
done
for i in 1 2 3 4; do "${NOBODY[@]}" "$HOSTILE" write plain "$T/u/plain$i" "pp_plain_spin$i"; done
pp_check "the sparse files hold 8 GiB in a few KiB" \
	[ "$(stat -c %s "$T/u/sparse-symtab")" -eq 8589934592 -a "$(du -k "$T/u/sparse-symtab" | cut -f1)" -lt 64 ]
D=6
# capture CASE FILES...: record -p the user's process, running FILES, for D seconds: the peak
# RSS of two captures of it is compared, which a system-wide one would mix with whatever else
# the machine ran meanwhile (seen: 22 MiB and 47 MiB, another test's compiles beside)
capture() {
	local c=$1
	shift
	as_nobody_run $((D + 6)) "$T/$c.runner" "$@" || pp_fail "$c: the user's process mapped its files"
	/usr/bin/time -v "$PEBSPROF" record -p "$RUNNER" -d "$D" -o "$T/$c.folded" >"$T/$c.out" \
		2>"$T/$c.err"
	pp_check "$c: record exits 0" [ $? -eq 0 ]
	kill "$RUNNER" 2>/dev/null
	wait "$RUNNER" 2>/dev/null
}
capture plain "$T/u/plain1" "$T/u/plain2" "$T/u/plain3" "$T/u/plain4"
capture sparse "$T/u/sparse-symtab" "$T/u/sparse-strtab" "$T/u/sparse-ehframe" "$T/u/plain4"
base=$(peak_kb "$T/plain.err")
peak=$(peak_kb "$T/sparse.err")
echo "    peak RSS: $base KiB beside plain files, $peak KiB beside the sparse ones"
pp_check "peak RSS within 16 MiB of the capture beside plain files" \
	[ -n "$peak" -a -n "$base" -a "$peak" -le $((base + 16384)) ]
el=$(elapsed_s "$T/sparse.err")
echo "    the ${D} s capture took $el s"
pp_check "the capture ends on time (within 4 s of its length)" \
	awk -v e="$el" -v d="$D" 'BEGIN { exit !(e <= d + 4) }'
pp_check "no sample lost" grep -q "lost 0 (ring buffer full 0)" "$T/sparse.out"
grep -E '^symbol files:|^unwind tables:' "$T/sparse.out" | sed 's/^/    /'
pp_check "the symbol tables of the sparse files are refused and counted" \
	[ "$(grep -oE 'refused [0-9]+' "$T/sparse.out" | head -1 | awk '{print $2}')" -ge 2 ]
pp_check "the CFI claiming 2 GiB is refused and counted" \
	[ "$(grep -oE '\(([0-9]+) refused\)' "$T/sparse.out" | tr -dc 0-9)" -ge 1 ]
for k in sparse-symtab sparse-strtab; do
	n=$(grep -c "symbols: refused $T/u/$k" "$T/sparse.err")
	pp_check "$k: named once in the log ($n)" [ "$n" -eq 1 ]
done
pp_check "sparse-ehframe: its CFI refused, named once" \
	[ "$(grep -c "unwind: refused the CFI of $T/u/sparse-ehframe" "$T/sparse.err")" -eq 1 ]
pp_check "the plain file beside them is named" grep -q "pp_plain_spin4" "$T/sparse.folded"
pp_check "the refused files' frames keep their file and address" \
	grep -qE 'sparse-(symtab|strtab)\+0x100' "$T/sparse.folded"

# the agent beside them for a few windows: nothing read late, so no window holds another's
as_nobody_run 12 "$T/run.runner" "$T/u/sparse-symtab" "$T/u/sparse-strtab" "$T/u/sparse-ehframe" ||
	pp_fail "run: the user's process mapped its files"
pp_run_for 7 "$T/run" --interval 2 --output-dir "$T/windows"
kill "$RUNNER" 2>/dev/null
late=$(grep -oE 'late [0-9]+' "$T/run.err" | head -1 | awk '{print $2}')
pp_check "run: exit 0 and no sample late for its window (late ${late:-?})" \
	[ "$PP_RC" -eq 0 -a "${late:-1}" -eq 0 ]

# --- 2. a root-only ELF named through a link out of the user's root --------------------------
pp_log "2. a root-only file behind a link, with the inode number of the user's own file"
mkdir -p "$T/secretfs" "$T/u/att"
chmod 700 "$T/secretfs"
if mount -t tmpfs -o mode=0700 pp-secret "$T/secretfs"; then
	"$HOSTILE" write plain "$T/secretfs/secret.so" pp_secret_symbol_do_not_show
	chmod 600 "$T/secretfs/secret.so"
	SECRET_INO=$(stat -c %i "$T/secretfs/secret.so")
	"${NOBODY[@]}" "$HOSTILE" write plain "$T/u/attacker.so" pp_attacker_spin
	cat >"$T/u/attack.sh" <<-EOF
		#!/bin/sh
		# inside unshare -Urm: the user's tmpfs, a file with the secret's inode number
		set -e
		mount -t tmpfs att "$T/u/att"
		i=0
		while :; do
			: >"$T/u/att/f\$i"
			[ "\$(stat -c %i "$T/u/att/f\$i")" = "$SECRET_INO" ] && break
			i=\$((i + 1))
			[ \$i -lt 100000 ] || exit 3
		done
		cat "$T/u/attacker.so" >"$T/u/att/f\$i"
		mv "$T/u/att/f\$i" "$T/u/att/lib.so"
		"$HOSTILE" run 14 "$T/u/att/lib.so" >"$T/u/attack.out" 2>&1 &
		while ! grep -q ready "$T/u/attack.out"; do sleep 0.05; done
		# the mapped path now leads, through a link, to the root-only file
		mount -t tmpfs cover "$T/u/att"
		ln -s "$T/secretfs/secret.so" "$T/u/att/lib.so"
		echo covered >"$T/u/attack.state"
		wait
	EOF
	chmod 755 "$T/u/attack.sh"
	"${NOBODY[@]}" unshare -Urm sh "$T/u/attack.sh" >"$T/attack.log" 2>&1 &
	ATTACK=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $ATTACK"
	for _ in $(seq 200); do [ -s "$T/u/attack.state" ] && break; sleep 0.05; done
	if [ -s "$T/u/attack.state" ]; then
		pp_run "$T/sec-root" "$PEBSPROF" record -a -d 3 -o "$T/sec-root.folded"
		pp_run "$T/sec-caps" capsh --drop=cap_sys_admin,cap_checkpoint_restore -- -c \
			"'$PEBSPROF' record -a -d 3 -o '$T/sec-caps.folded'"
		pp_check "root: exit 0" [ "$PP_RC" -eq 0 ]
		pp_check "with map_files: the secret's symbols name nothing" \
			bash -c "! grep -q pp_secret_symbol '$T/sec-root.folded'"
		pp_check "with map_files: the user's own code is named" \
			grep -q pp_attacker_spin "$T/sec-root.folded"
		pp_check "without map_files: the secret's symbols name nothing" \
			bash -c "! grep -q pp_secret_symbol '$T/sec-caps.folded'"
		nm=$(field "$T/sec-caps.out" "not the mapped file")
		pp_check "without map_files: the link to another inode is refused and counted ($nm)" \
			[ "${nm:-0}" -ge 1 ]
		grep '^symbol files:' "$T/sec-caps.out" | sed 's/^/    /'
	else
		pp_fail "the attack could not be set up: $(cat "$T/attack.log")"
	fi
	kill "$ATTACK" 2>/dev/null
	pkill -KILL -f "$T/u/att/lib.so" 2>/dev/null
	wait "$ATTACK" 2>/dev/null
	umount "$T/secretfs"
else
	pp_skip_check "2: cannot mount a tmpfs here"
fi

# --- 3. /healthz under idle and slow connections ---------------------------------------------
pp_log "3. 2000 idle and 200 slow connections to the health endpoint"
HP=$("$PP_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PEBSPROF" run --listen "127.0.0.1:$HP" --interval 2 --output-dir "$T/hz-windows" \
	>"$T/hz.out" 2>"$T/hz.err" &
AGENT=$!
PP_BG_PIDS="${PP_BG_PIDS:-} $AGENT"
for _ in $(seq 100); do
	curl -s -m 1 -o /dev/null "http://127.0.0.1:$HP/livez" && break
	sleep 0.1
done
(ulimit -n 8192 && "${NOBODY[@]}" "$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/health_flood.py" \
	"$HP" 2000 200 8) >"$T/flood.out" 2>&1
tail -1 "$T/flood.out" | sed 's/^/    /'
probes=$(field "$T/flood.out" probes)
ok=$(field "$T/flood.out" answered)
max=$(field "$T/flood.out" max_ms)
pp_check "every probe answered 200 ($ok of $probes)" [ -n "$probes" -a "$probes" -ge 10 -a "$ok" = "$probes" ]
pp_check "the slowest probe within 1 s (${max} ms)" [ -n "$max" -a "$max" -lt 1000 ]
curl -s -m 2 "http://127.0.0.1:$HP/metrics" >"$T/hz.metrics"
shed=$(awk '$1 == "pebsprof_http_shed_total" {print $2}' "$T/hz.metrics")
pp_check "connections past the cap were shed and counted ($shed)" [ "${shed:-0}" -gt 0 ]
kill -TERM "$AGENT"
pp_wait_pid "$AGENT" 30

# --- 4. and 5. names that are not UTF-8 and hold terminal escapes ----------------------------
pp_log "4./5. symbol, executable and thread names that are not UTF-8 and hold escapes"
BADNAME=$(printf 'evil\xff\xfe\033]0;PWNED\007\033[31mred\nline')
mkdir -p "$T/u/bad"
chmod 777 "$T/u/bad"
"${NOBODY[@]}" "$HOSTILE" write plain "$T/u/bad/lib.so" "$BADNAME"
EXE="$T/u/bad/$(printf '\xff\033[2Jx\x7f')"
cp "$HOSTILE" "$EXE"
as_nobody_run 10 "$T/bad.runner" "$T/u/bad/lib.so" || pp_fail "4: the user's process ran"
"${NOBODY[@]}" "$EXE" run 8 "$T/u/bad/lib.so" >/dev/null 2>&1 &
PP_BG_PIDS="${PP_BG_PIDS:-} $!"
pp_run "$T/bad" "$PEBSPROF" record -a -d 3 -o "$T/bad.pb.gz" -o "$T/bad.otlp.pb" \
	-o "$T/bad.folded" -o "$T/bad.svg"
pp_check "record: exit 0" [ "$PP_RC" -eq 0 ]
pp_check "the hostile symbol was sampled, cleaned (\\x1b]0;PWNED\\x07)" \
	grep -qF 'PWNED\x07\x1b[31mred\x0aline' "$T/bad.folded"
# control bytes: none in any text output or on the terminal (newlines aside)
for f in "$T/bad.out" "$T/bad.err" "$T/bad.folded" "$T/bad.svg"; do
	pp_check "no control byte in $(basename "$f")" \
		bash -c "! LC_ALL=C grep -qP '[\\x00-\\x08\\x0b-\\x1f\\x7f]' '$f'"
	pp_check "valid UTF-8 in $(basename "$f")" iconv -f UTF-8 -t UTF-8 -o /dev/null "$f"
done
pp_check "the SVG parses as XML" "$PP_PYTHON" -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$T/bad.svg"
if command -v go >/dev/null; then
	pp_require_go_pprof
	pp_check "go tool pprof reads the pprof" pp_pprof_raw "$T/bad.pb.gz" "$T/bad.raw"
else
	pp_skip_check "go tool pprof unavailable"
fi
ref="$PP_SOURCE_DIR/../shared/reference/opentelemetry-proto"
if [ -d "$ref" ] && command -v protoc >/dev/null && pp_otlp_python "$ref" "$T/gen" 2>/dev/null; then
	pp_check "OTLP parses with the official schema's classes (UTF-8 checked)" \
		"$PP_PYTHON" "$PP_SOURCE_DIR/tests/conformance/otlp_check.py" "$T/gen" "$T/bad.otlp.pb"
	pp_start_sink badsink '[]'
	pp_run_for 4.5 "$T/badrun" --endpoint "http://127.0.0.1:$SINK_PORT" --interval 2
	n=$(find "$T/badsink" -name 'req-*.body' 2>/dev/null | wc -l)
	rc=1
	if [ "$n" -gt 0 ]; then
		"$PP_PYTHON" "$PP_SOURCE_DIR/tests/conformance/otlp_check.py" "$T/gen" \
			"$T"/badsink/req-*.body >"$T/badsink.checked" 2>&1
		rc=$?
		grep FAIL "$T/badsink.checked" | head -n 5
	fi
	pp_check "run: every OTLP request parses ($n requests)" [ "$n" -ge 1 -a "$rc" -eq 0 ]
else
	pp_skip_check "the reference OTLP schema or protoc is missing"
fi

# --- 7. configuration a hostile environment could hand the agent -----------------------------
pp_log "7. a FIFO as config, a newline in NODE_NAME, a service name that is not UTF-8"
mkfifo "$T/conf.fifo"
SECONDS=0
pp_run "$T/fifo" timeout 20 "$PEBSPROF" run --config "$T/conf.fifo" --output-dir "$T/x"
pp_check "--config FIFO: exit 2 at once ($SECONDS s)" [ "$PP_RC" -eq 2 -a "$SECONDS" -lt 5 ]
pp_check "--config FIFO: says why" grep -q "is not a regular file" "$T/fifo.err"
pp_run "$T/nn" env NODE_NAME="$(printf 'node-1\nforged')" "$PEBSPROF" run --dry-run
pp_check "NODE_NAME with a newline: exit 2" [ "$PP_RC" -eq 2 ]
pp_check "NODE_NAME with a newline: says why" grep -q "control character" "$T/nn.err"
pp_run "$T/sn" "$PEBSPROF" run --dry-run --service-name "$(printf 'shop\xff')"
pp_check "service-name not UTF-8: exit 2" [ "$PP_RC" -eq 2 ]
pp_check "service-name not UTF-8: says why" grep -q "not valid UTF-8" "$T/sn.err"

pp_finish
