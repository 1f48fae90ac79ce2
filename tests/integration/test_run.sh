#!/bin/bash
# `pebsprof run`, the agent, end to end: windows written locally tile time and stay bounded in
# number; OTLP uploads reach a real HTTP server on 127.0.0.1 with the required headers and
# decode with the official schema; a 503 is retried and the window arrives exactly once;
# SIGTERM mid-window ships the partial window and exits 0; an unreachable backend does not stop
# sampling; bad configuration exits 2 naming the key and the line; a window answered 413 is
# split and arrives as two halves with every sample once (the push's pprof too:
# test_run_backend_limits.sh).

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference/opentelemetry-proto"
msg=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
svc=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
[ -d "$ref/opentelemetry" ] && command -v protoc >/dev/null ||
	pp_skip "needs protoc and the reference schema at $ref"

decode() { (cd "$ref" && protoc --decode="$msg" "$svc") <"$1"; }

# A workload for the whole test: every window holds samples (a window without any is not sent),
# however quiet the machine.
"$PP_WORKLOAD" 0 >/dev/null 2>&1 &
PP_BG_PIDS="${PP_BG_PIDS:-} $!"

# --- the embedded default: windows as files ----------------------------------------------------
NODE_NAME=node-7 pp_run_for 4.5 "$T/f" --output-dir "$T/files" --interval 1 --keep 3
pp_check "file exporter: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
n_otlp=$(ls "$T/files"/pebsprof-*.otlp.pb 2>/dev/null | wc -l)
n_pprof=$(ls "$T/files"/pebsprof-*.pb.gz 2>/dev/null | wc -l)
pp_check "keep=3 bounds the window files ($n_otlp OTLP, $n_pprof pprof)" \
	[ "$n_otlp" -eq 3 -a "$n_pprof" -eq 3 ]
# Consecutive windows tile time: each starts where the previous one ended.
prev_end=
tiled=1
for f in $(ls "$T/files"/pebsprof-*.otlp.pb | sort); do
	decode "$f" >"$f.txt" || tiled=0
	start=$(awk '/^ *time_unix_nano:/{print $2; exit}' "$f.txt")
	dur=$(awk '/^ *duration_nano:/{print $2; exit}' "$f.txt")
	[ -n "$start" ] && [ -n "$dur" ] || tiled=0
	if [ -n "$prev_end" ] && [ "$start" != "$prev_end" ]; then tiled=0; fi
	prev_end=$((start + dur))
done
pp_check "windows decode and tile time without gaps" [ "$tiled" -eq 1 ]
# Every sample is in the window it was taken in: its time lies inside the window (the
# encoder leaves out a time outside it), thanks to each window's grace after its end and the
# hold of records taken after it, whenever they are read; those the agent read after the
# grace (a busy machine) are counted late, and only those lack one. (Before the hold began at
# the window's opening, a poll begun before the end read records taken after it: 7 of 530
# samples beside the kernel matrix.)
late=$(grep -oE 'late [0-9]+' "$T/f.err" | head -1 | awk '{print $2}')
pp_otlp_python "$ref" "$T/gen0" 2>"$T/gen0.err"
"$PP_PYTHON" - "$T/gen0" "$T/files" "${late:-0}" >"$T/times.out" 2>&1 <<'PY'
import glob, os, sys
sys.path.insert(0, sys.argv[1])
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc
n = without = 0
for f in sorted(glob.glob(os.path.join(sys.argv[2], "*.otlp.pb"))):
    r = svc.ExportProfilesServiceRequest()
    r.ParseFromString(open(f, "rb").read())
    for rp in r.resource_profiles:
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                for s in p.samples:
                    n += 1
                    ok = s.timestamps_unix_nano and all(
                        p.time_unix_nano <= t < p.time_unix_nano + p.duration_nano for t in s.timestamps_unix_nano)
                    without += not ok
                    if not ok:
                        end = p.time_unix_nano + p.duration_nano
                        for t in s.timestamps_unix_nano:
                            side = (f"{(p.time_unix_nano - t) / 1e6:.3f} ms before the start"
                                    if t < p.time_unix_nano else
                                    f"{(t - end) / 1e6:.3f} ms after the end" if t >= end else "inside")
                            print(f"  {os.path.basename(f)}: a time {side}")
                        if not s.timestamps_unix_nano:
                            print(f"  {os.path.basename(f)}: a sample without a time")
late = int(sys.argv[3])
windows = len(glob.glob(os.path.join(sys.argv[2], "*.otlp.pb")))
print(f"{n} samples, {without} without a time inside their window; the agent counted {late} "
      f"late; {windows} windows")
sys.exit(0 if n and without <= late else 1)
PY
rc=$?
cat "$T/times.out"
pp_check "every sample's time lies inside its window, but those the agent counted late" \
	[ "$rc" -eq 0 ]
pp_check "host.name is the node's (NODE_NAME), not the agent's own host name" \
	bash -c "grep -A3 'key: \"host.name\"' '$(ls "$T/files"/*.otlp.pb | sort | tail -n1).txt' | grep -q node-7"
pp_check "k8s.node.name from NODE_NAME" \
	bash -c "grep -A3 'key: \"k8s.node.name\"' '$(ls "$T/files"/*.otlp.pb | sort | tail -n1).txt' | grep -q node-7"
pp_check "windows are aligned to the interval" \
	bash -c "[ \$(( $(awk '/^ *time_unix_nano:/{print $2; exit}' "$(ls "$T/files"/*.otlp.pb | sort | sed -n 2p).txt") % 1000000000 )) -eq 0 ]"
pp_check "the pprof windows read in go tool pprof" \
	bash -c "go tool pprof -raw '$(ls "$T/files"/*.pb.gz | sort | tail -n1)' >/dev/null 2>&1 || ! command -v go >/dev/null"

# --- SIGTERM in a window's grace (the 450 ms after its end, samples held for the next) -----
# The ended window keeps its length and the held samples start a partial window of their own.
# The stop comes 200 ms after a boundary, once sampling runs, beside the test's workload: a
# partial window without samples is not written (clean run ci47, busy: the agent started late,
# its own workload was nearly done, and the last window written was the first).
"$PEBSPROF" run --output-dir "$T/grace" --interval 2 -F 199 >"$T/grace.out" 2>"$T/grace.err" &
gpid=$!
pp_wait_line "$gpid" "$T/grace.err" 'info: sampling;' 120 || :
sleep 2.5
# the boundary the stop follows, in seconds
boundary=$("$PP_PYTHON" -c 'import time; t = time.time(); b = (int(t / 2) + 1) * 2
time.sleep(b - t + 0.2); print(b)')
kill -TERM "$gpid"
pp_wait_pid "$gpid" 30
pp_check "SIGTERM in a grace: exits 0" [ "$PP_RC" -eq 0 ]
prev_end=
grace_ok=1
last_dur=
start=
ends_at_boundary=0
for f in $(ls "$T/grace"/pebsprof-*.otlp.pb | sort); do
	decode "$f" >"$f.txt" || grace_ok=0
	start=$(awk '/^ *time_unix_nano:/{print $2; exit}' "$f.txt")
	last_dur=$(awk '/^ *duration_nano:/{print $2; exit}' "$f.txt")
	[ "${last_dur:-0}" -le 2000000000 ] || grace_ok=0
	if [ -n "$prev_end" ] && [ "$start" != "$prev_end" ]; then grace_ok=0; fi
	prev_end=$((start + ${last_dur:-0}))
	[ "$prev_end" = "${boundary}000000000" ] && ends_at_boundary=1
done
pp_check "SIGTERM in a grace: no window longer than the interval, windows tile" [ "$grace_ok" -eq 1 ]
# The window before the boundary ends there, and the last one is a partial window from a
# boundary to where sampling stopped: on a busy machine the programs' detaching and the last
# reads take a second or more after the signal (clean run ci50, beside a busy loop: the last
# window was 1.6 s long), so its length says little, and it may start a boundary later.
pp_check "SIGTERM in a grace: the window before the boundary ($boundary s) ends there" \
	[ "$ends_at_boundary" -eq 1 ]
pp_check "SIGTERM in a grace: the last window is a partial one from a boundary ($start, $last_dur ns)" \
	[ "${start:-0}" -ge "${boundary}000000000" -a $((${start:-1} % 2000000000)) -eq 0 \
	-a "${last_dur:-0}" -gt 0 -a "${last_dur:-0}" -lt 2000000000 ]

# --- OTLP to a real server: 503 once, then 200 --------------------------------------------------
pp_start_sink sink '[{"status": 503}]'
PORT=$SINK_PORT
pp_check "test server listens" [ -n "$PORT" ]
# SIGTERM in the middle of a window, beside the test's workload: the partial window holds
# samples (an empty one is not sent), whatever the phase the agent started at. A stop just
# after a boundary left an empty partial window at 20 Hz, and the last window sent was a whole
# one.
OTEL_EXPORTER_OTLP_HEADERS="X-Scope-OrgID=tenant-a,Authorization=Basic%20dXNlcjpw%2Cw%3D%3D" \
	OTEL_SERVICE_NAME=agent-test \
	"$PEBSPROF" run --endpoint "http://127.0.0.1:$PORT/v1development/profiles" --interval 2 \
	--flush-timeout 10 >"$T/o.out" 2>"$T/o.err" &
opid=$!
pp_wait_line "$opid" "$T/o.err" 'info: sampling;' 120 || :
sleep 8
"$PP_PYTHON" -c 'import time; t = time.time(); time.sleep((int(t / 2) + 1) * 2 - t + 1.0)'
kill -TERM "$opid"
pp_wait_pid "$opid" 30
pp_check "OTLP exporter: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
kill "$SINK" 2>/dev/null
wait "$SINK" 2>/dev/null
nreq=$(ls "$T/sink"/req-*.hdr 2>/dev/null | wc -l)
pp_check "requests arrived ($nreq)" [ "$nreq" -ge 3 ]
ok_headers=1
for h in "$T/sink"/req-*.hdr; do
	grep -q '^POST /v1development/profiles' "$h" || ok_headers=0
	grep -qi '^Content-Type: application/x-protobuf$' "$h" || ok_headers=0
	grep -qi '^Content-Encoding: gzip' "$h" || ok_headers=0
	grep -qi '^X-Scope-OrgID: tenant-a' "$h" || ok_headers=0
	grep -qi '^User-Agent: pebsprof/' "$h" || ok_headers=0
	grep -q '^Authorization: Basic dXNlcjpw,w==$' "$h" || ok_headers=0
done
pp_check "every request: POST path, Content-Type exact, gzip, X-Scope-OrgID, Authorization, User-Agent" \
	[ "$ok_headers" -eq 1 ]
# Each delivered window once: the 503'd request is the same window as its retry.
starts=
for b in "$T/sink"/req-*.body; do
	decode "$b" >"$b.txt" || starts="$starts BAD"
	starts="$starts $(awk '/^ *time_unix_nano:/{print $2; exit}' "$b.txt")"
done
first=$(echo $starts | awk '{print $1}')
n_first=$(echo $starts | tr ' ' '\n' | grep -c "^$first\$")
pp_check "bodies decode with the official schema" bash -c "! echo '$starts' | grep -q BAD"
pp_check "the window answered 503 was retried and arrived again (2 copies: 503 + 200)" \
	[ "$n_first" -eq 2 ]
# Another window arrives twice only when its request was retried: a request unanswered in 10 s
# is sent again (at least once, as OTLP exporters deliver), as a sink starved beside the kernel
# matrix's guests was (clean run ci60).
retries=$(sed -nE 's/.*export: [0-9]+ delivered, ([0-9]+) retries.*/\1/p' "$T/o.err" | tail -n1)
extra=$(echo $starts | tr ' ' '\n' | sort | uniq -c | awk '$1 > 1 { n += $1 - 1 } END { print n + 0 }')
pp_check "a window arrived twice only when it was sent again ($extra extra copies, ${retries:-?} retries)" \
	[ "$extra" -ge 1 -a "$extra" -le "${retries:-0}" ]
pp_check "service.name from OTEL_SERVICE_NAME" grep -q '"agent-test"' "$T/sink"/req-0001.body.txt
pp_check "no k8s.node.name outside Kubernetes (NODE_NAME unset)" \
	bash -c "! grep -q 'k8s.node.name' '$T/sink/req-0001.body.txt'"
# SIGTERM came mid-window: the last request holds a partial window (shorter than 2 s).
last=$(ls "$T/sink"/req-*.body.txt | sort | tail -n1)
last_dur=$(awk '/^ *duration_nano:/{print $2; exit}' "$last")
pp_check "SIGTERM mid-window: the partial window was shipped ($last_dur ns)" \
	bash -c "[ -n '$last_dur' ] && [ '$last_dur' -gt 0 ] && [ '$last_dur' -lt 2000000000 ]"
pp_check "exit summary counts the delivery and the retry" \
	grep -qE 'export: [0-9]+ delivered, [1-9][0-9]* retries' "$T/o.err"

# --- Pyroscope push -------------------------------------------------------------------------
pp_start_sink pyro '[]'
PORT=$SINK_PORT
pp_run_for 3.5 "$T/p" --exporter pyroscope --endpoint "http://127.0.0.1:$PORT" --interval 1 \
	--service-name shop
kill "$SINK" 2>/dev/null
wait "$SINK" 2>/dev/null
pp_check "Pyroscope exporter: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
pp_check "Pyroscope: POST /ingest with name, from, until and format=pprof" \
	grep -qE '^POST /ingest\?name=shop.*from=[0-9]+.*until=[0-9]+.*format=pprof' "$T/pyro/req-0000.hdr"
pp_check "Pyroscope: the body is a pprof profile" \
	bash -c "(cd '$PP_SOURCE_DIR/../shared/reference/pprof/proto' && protoc --decode=perftools.profiles.Profile profile.proto) <'$T/pyro/req-0000.body' | grep -q sample_type"

# --- backend unreachable: sampling goes on, exit 0 within the flush deadline ---------------------
pp_run_for 4.5 "$T/u" --endpoint "http://127.0.0.1:9/v1development/profiles" --interval 1 \
	--flush-timeout 2
pp_check "unreachable backend: SIGTERM still exits 0" [ "$PP_RC" -eq 0 ]
pp_check "unreachable backend: the failure is logged once, not per window" \
	[ "$(grep -c 'is failing' "$T/u.err")" -eq 1 ]
pp_check "unreachable backend: said at the first failed attempt, with its reason" \
	grep -q 'is failing: no response: ' "$T/u.err"

# --- a backend slower than the windows: queue overflow drops are said and counted --------------
pp_start_sink slow '[{"stall": 6}, {"stall": 6}, {"stall": 6}, {"stall": 6}]'
PORT=$SINK_PORT
"$PP_WORKLOAD" --fork 30 >/dev/null 2>&1 &
WL=$!
# windows of 0.2 s at 999 Hz with every label: more than 64 KiB of them wait for the stalls,
# however quiet the rest of the machine
pp_run_for 9 "$T/v" --endpoint "http://127.0.0.1:$PORT/v1development/profiles" --interval 0.2 \
	--queue-bytes 64KiB --flush-timeout 1 -F 999 --sample-labels thread,pid,cpu
kill "$SINK" "$WL" 2>/dev/null
wait "$SINK" "$WL" 2>/dev/null
pp_check "queue overflow: the drops are said, once (rate-limited), with their count" \
	bash -c "[ \$(grep -c 'upload queue full' '$T/v.err') -eq 1 ] &&
		grep -qE 'upload queue full \(65536 bytes\): [1-9][0-9]* oldest requests dropped' '$T/v.err'"
pp_check "queue overflow: the summary counts them" \
	grep -qE 'queue overflow [1-9][0-9]*' "$T/v.err"
pp_check "unreachable backend: sampling never stopped (3+ windows, samples taken)" \
	grep -qE 'stopped: ([3-9]|[1-9][0-9]+) windows, [1-9][0-9]* samples' "$T/u.err"

# --- bad configuration: exit 2 naming the key (and the line) --------------------------------
run_bad() {
	pp_run "$T/b" timeout -s KILL 20 "$PEBSPROF" run "$@"
}
run_bad --endpoint "htp:/nowhere"
pp_check "malformed endpoint: exit 2 naming the key" \
	bash -c "[ $PP_RC -eq 2 ] && grep -qi endpoint '$T/b.err'"
printf 'interval = 5\nno-such-key = 1\n' >"$T/bad.conf"
run_bad --config "$T/bad.conf" --dry-run
pp_check "unknown key in the config file: exit 2 with file:line" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q 'bad.conf:2' '$T/b.err' && grep -q no-such-key '$T/b.err'"
OTEL_EXPORTER_OTLP_HEADERS="novalue" run_bad --endpoint http://127.0.0.1:1/x --dry-run
pp_check "bad header syntax: exit 2 naming the headers" \
	bash -c "[ $PP_RC -eq 2 ] && grep -qi header '$T/b.err'"
run_bad --endpoint http://127.0.0.1:4318 --dry-run
pp_check "--endpoint without a path is a base (the Collector's convention): --dry-run shows the URL" \
	bash -c "[ $PP_RC -eq 0 ] && grep -q '^endpoint = http://127.0.0.1:4318/v1development/profiles ' '$T/b.out'"
run_bad --config "$T/does-not-exist.conf" --dry-run
pp_check "unreadable config file: exit 2 naming it" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q does-not-exist.conf '$T/b.err'"
OTEL_EXPORTER_OTLP_HEADERS="X-Scope-OrgID=secret-tenant" run_bad --endpoint http://127.0.0.1:1/x \
	--dry-run
pp_check "--dry-run prints the configuration with secrets redacted" \
	bash -c "[ $PP_RC -eq 0 ] && grep -q X-Scope-OrgID '$T/b.out' && ! grep -q secret-tenant '$T/b.out'"
# --- HTTP 413: the window comes back to be split, and arrives as two halves -----------------------
# The second request is answered 413 (the first window runs from the start to the first aligned
# boundary, and may hold a single sample, which no split can halve; the second is a whole one);
# the agent splits that very body and sends both halves. Every sample it held must arrive
# exactly once, resolved the same through each half's own dictionary, and each half must pass
# the §8 checks of otlp_check.py on its own.
mkdir -p "$T/big"
pp_otlp_python "$ref" "$T/gen" 2>"$T/gen.err"
pp_check "python classes from the reference schema" [ -f "$T/gen/$(dirname "$svc")/profiles_service_pb2.py" ]
cat >"$T/split_check.py" <<'PY'
"""split_check.py GEN_DIR SINK_DIR: req-0001 got 413; finds the later requests that carry the
same window and checks that together they hold exactly its samples (each one resolved through
its own request's dictionary)."""
import collections, glob, os, sys
sys.path.insert(0, sys.argv[1])
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc

def load(path):
    r = svc.ExportProfilesServiceRequest()
    with open(path, "rb") as f:
        r.ParseFromString(f.read())
    return r

def val(d, v):
    k = v.WhichOneof("value")
    return d.string_table[v.string_value_strindex] if k == "string_value_strindex" else getattr(v, k) if k else None

def attrs(d, idx):
    return tuple((d.string_table[d.attribute_table[i].key_strindex], val(d, d.attribute_table[i].value)) for i in idx)

def samples(r):
    d, out = r.dictionary, []
    for rp in r.resource_profiles:
        res = tuple(sorted((kv.key, str(val(d, kv.value))) for kv in rp.resource.attributes))
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                meta = (d.string_table[p.sample_type.type_strindex], d.string_table[p.period_type.type_strindex],
                        d.string_table[p.period_type.unit_strindex], p.period, p.time_unix_nano, p.duration_nano)
                for s in p.samples:
                    stack = []
                    for li in d.stack_table[s.stack_index].location_indices:
                        loc = d.location_table[li]
                        m = d.mapping_table[loc.mapping_index]
                        stack.append((loc.address, d.string_table[m.filename_strindex], attrs(d, m.attribute_indices),
                                      tuple(d.string_table[d.function_table[ln.function_index].name_strindex] for ln in loc.lines),
                                      attrs(d, loc.attribute_indices)))
                    out.append((res, sp.scope.name, meta, tuple(stack), tuple(s.values),
                                tuple(s.timestamps_unix_nano), attrs(d, s.attribute_indices)))
    return out

def start(r):
    return min(p.time_unix_nano for rp in r.resource_profiles for sp in rp.scope_profiles for p in sp.profiles)

orig = load(os.path.join(sys.argv[2], "req-0001.body"))
halves = []
for b in sorted(glob.glob(os.path.join(sys.argv[2], "req-*.body")))[2:]:
    r = load(b)
    if r.resource_profiles and start(r) == start(orig):
        halves.append((b, r))
want = collections.Counter(samples(orig))
got = collections.Counter()
for b, r in halves:
    s = samples(r)
    print("half %s: %d resources, %d samples, value sum %d" % (os.path.basename(b), len(r.resource_profiles), len(s),
          sum(x[4][0] for x in s)))
    got.update(s)
    if not s:
        print("FAIL: a half without samples")
        sys.exit(1)
print("413'd: %d resources, %d samples, value sum %d; halves: %d, %d samples, value sum %d" % (
    len(orig.resource_profiles), sum(want.values()), sum(k[4][0] * n for k, n in want.items()),
    len(halves), sum(got.values()), sum(k[4][0] * n for k, n in got.items())))
if len(halves) != 2:
    print("FAIL: %d requests carry the window, not 2" % len(halves))
    sys.exit(1)
if got != want:
    print("FAIL: lost %d samples, %d extra" % (sum((want - got).values()), sum((got - want).values())))
    sys.exit(1)
for b, _ in halves:
    print("HALF", b)
PY
pp_start_sink big '[{"status": 200}, {"status": 413, "body": "request entity too large"}]'
PORT=$SINK_PORT
# Two busy processes, so the window certainly holds many samples to split.
"$PP_WORKLOAD" --fork 8 >/dev/null 2>&1 &
WL=$!
PP_BG_PIDS="${PP_BG_PIDS:-} $WL $SINK"
pp_run_for 5 "$T/s" --endpoint "http://127.0.0.1:$PORT/v1development/profiles" --interval 2 \
	--flush-timeout 10
pp_check "413: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
kill "$WL" "$SINK" 2>/dev/null
wait "$WL" "$SINK" 2>/dev/null
pp_check "413: the second request was answered 413 and the agent says it split it" \
	grep -q 'HTTP 413.*resent as two requests' "$T/s.err"
"$PP_PYTHON" "$T/split_check.py" "$T/gen" "$T/big" >"$T/split.out" 2>&1
rc=$?
cat "$T/split.out"
pp_check "413: the window arrived as two halves holding every sample exactly once" [ "$rc" -eq 0 ]
halves_ok=1
for h in $(awk '/^HALF /{print $2}' "$T/split.out"); do
	"$PP_PYTHON" "$PP_SOURCE_DIR/tests/conformance/otlp_check.py" "$T/gen" "$h" ||
		halves_ok=0
done
pp_check "413: each half is a valid request on its own (otlp_check.py)" \
	bash -c "[ $halves_ok -eq 1 ] && [ \$(grep -c '^HALF ' '$T/split.out') -eq 2 ]"
pp_check "413: the exit summary counts the split" \
	grep -q 'HTTP 413 or 400): 1 split and resent, 0 dropped' "$T/s.err"
pp_finish
