#!/bin/bash
# `pebsprof run`, the agent, end to end: windows written locally tile time and stay bounded in
# number; OTLP uploads reach a real HTTP server on 127.0.0.1 with the required headers and
# decode with the official schema; a 503 is retried and the window arrives exactly once;
# SIGTERM mid-window ships the partial window and exits 0; an unreachable backend does not stop
# sampling; bad configuration exits 2 naming the key and the line.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference/opentelemetry-proto"
msg=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
svc=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
sink="$PP_SOURCE_DIR/tests/tools/pp_http_sink.py"
[ -d "$ref/opentelemetry" ] && command -v protoc >/dev/null ||
	pp_skip "needs protoc and the reference schema at $ref"

decode() { (cd "$ref" && protoc --decode="$msg" "$svc") <"$1"; }
# run_for SECONDS OUT ARGS...: runs the agent, sends SIGTERM after SECONDS, waits (max 30 s).
run_for() {
	local secs=$1 out=$2
	shift 2
	"$PEBSPROF" run "$@" >"$out.out" 2>"$out.err" &
	local pid=$!
	sleep "$secs"
	kill -TERM "$pid"
	pp_wait_pid "$pid" 30
}

# --- the embedded default: windows as files ----------------------------------------------------
run_for 4.5 "$T/f" --output-dir "$T/files" --interval 1 --keep 3
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
pp_check "windows are aligned to the interval" \
	bash -c "[ \$(( $(awk '/^ *time_unix_nano:/{print $2; exit}' "$(ls "$T/files"/*.otlp.pb | sort | sed -n 2p).txt") % 1000000000 )) -eq 0 ]"
pp_check "the pprof windows read in go tool pprof" \
	bash -c "go tool pprof -raw '$(ls "$T/files"/*.pb.gz | sort | tail -n1)' >/dev/null 2>&1 || ! command -v go >/dev/null"

# --- OTLP to a real server: 503 once, then 200 --------------------------------------------------
mkdir -p "$T/sink"
"$PP_PYTHON" "$sink" --port 0 --dir "$T/sink" --script '[{"status": 503}]' >"$T/sink.port" 2>"$T/sink.err" &
SINK=$!
for _ in $(seq 50); do grep -q PORT "$T/sink.port" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/PORT/{print $2}' "$T/sink.port")
pp_check "test server listens" [ -n "$PORT" ]
OTEL_EXPORTER_OTLP_HEADERS="X-Scope-OrgID=tenant-a" OTEL_SERVICE_NAME=agent-test \
	run_for 9 "$T/o" --endpoint "http://127.0.0.1:$PORT/v1development/profiles" --interval 2 \
	--flush-timeout 10
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
done
pp_check "every request: POST path, Content-Type exact, gzip, X-Scope-OrgID, User-Agent" \
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
pp_check "no other window arrived twice" \
	[ "$(echo $starts | tr ' ' '\n' | sort | uniq -d | wc -l)" -eq 1 ]
pp_check "service.name from OTEL_SERVICE_NAME" grep -q '"agent-test"' "$T/sink"/req-0001.body.txt
# SIGTERM came mid-window: the last request holds a partial window (shorter than 2 s).
last=$(ls "$T/sink"/req-*.body.txt | sort | tail -n1)
last_dur=$(awk '/^ *duration_nano:/{print $2; exit}' "$last")
pp_check "SIGTERM mid-window: the partial window was shipped ($last_dur ns)" \
	bash -c "[ -n '$last_dur' ] && [ '$last_dur' -gt 0 ] && [ '$last_dur' -lt 2000000000 ]"
pp_check "exit summary counts the delivery and the retry" \
	grep -qE 'export: [0-9]+ delivered, [1-9][0-9]* retries' "$T/o.err"

# --- Pyroscope push -------------------------------------------------------------------------
mkdir -p "$T/pyro"
"$PP_PYTHON" "$sink" --port 0 --dir "$T/pyro" --script '[]' >"$T/pyro.port" 2>"$T/pyro.err" &
SINK=$!
for _ in $(seq 50); do grep -q PORT "$T/pyro.port" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/PORT/{print $2}' "$T/pyro.port")
run_for 3.5 "$T/p" --exporter pyroscope --endpoint "http://127.0.0.1:$PORT" --interval 1 \
	--service-name shop
kill "$SINK" 2>/dev/null
wait "$SINK" 2>/dev/null
pp_check "Pyroscope exporter: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
pp_check "Pyroscope: POST /ingest with name, from, until and format=pprof" \
	grep -qE '^POST /ingest\?name=shop.*from=[0-9]+.*until=[0-9]+.*format=pprof' "$T/pyro/req-0000.hdr"
pp_check "Pyroscope: the body is a pprof profile" \
	bash -c "(cd '$PP_SOURCE_DIR/../shared/reference/pprof/proto' && protoc --decode=perftools.profiles.Profile profile.proto) <'$T/pyro/req-0000.body' | grep -q sample_type"

# --- backend unreachable: sampling goes on, exit 0 within the flush deadline ---------------------
run_for 3.5 "$T/u" --endpoint "http://127.0.0.1:9/v1development/profiles" --interval 1 \
	--flush-timeout 2
pp_check "unreachable backend: SIGTERM still exits 0" [ "$PP_RC" -eq 0 ]
pp_check "unreachable backend: the failure is logged once, not per window" \
	[ "$(grep -c 'is failing' "$T/u.err")" -le 1 ]
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
run_bad --config "$T/does-not-exist.conf" --dry-run
pp_check "unreadable config file: exit 2 naming it" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q does-not-exist.conf '$T/b.err'"
OTEL_EXPORTER_OTLP_HEADERS="X-Scope-OrgID=secret-tenant" run_bad --endpoint http://127.0.0.1:1/x \
	--dry-run
pp_check "--dry-run prints the configuration with secrets redacted" \
	bash -c "[ $PP_RC -eq 0 ] && grep -q X-Scope-OrgID '$T/b.out' && ! grep -q secret-tenant '$T/b.out'"
pp_finish
