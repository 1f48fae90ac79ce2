#!/bin/bash
# The agent's health endpoint against a running agent: /healthz answers 200 "ok" while it
# samples and exports; /metrics is Prometheus text whose samples counter grows between scrapes
# and whose export ok counter counts delivered windows; a backend that answers 500 turns
# /healthz into 503 with the reason; a backend that is down stays healthy within the retry
# budget while the failure shows in the metrics; SIGTERM exits 0 and closes the port; a bad
# or busy listen address is refused at start.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
command -v curl >/dev/null || pp_skip "needs curl"
T=$PP_TMP

# free_port: a port nobody listens on now (bound and released by the kernel's choice).
free_port() {
	"$PP_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# start_agent NAME ARGS...: pebsprof run in the background; sets AGENT.
start_agent() {
	local name=$1
	shift
	"$PEBSPROF" run "$@" >"$T/$name.out" 2>"$T/$name.err" &
	AGENT=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $AGENT"
}
# get PATH OUT: GET http://127.0.0.1:$HP/PATH; the body to OUT, prints the status code.
get() {
	curl -s -m 5 -o "$2" -w '%{http_code}' "http://127.0.0.1:$HP$1"
}
# wait_health CODE SECONDS [REGEX]: polls /healthz until it answers CODE (with a body matching
# REGEX); the last body is in $T/hz. 503 alone would also match "starting".
wait_health() {
	local code=000 i
	for i in $(seq $(($2 * 5))); do
		code=$(get /healthz "$T/hz")
		[ "$code" = "$1" ] && grep -qE "${3:-.}" "$T/hz" && return 0
		kill -0 "$AGENT" 2>/dev/null || break
		sleep 0.2
	done
	echo "    /healthz: $code $(cat "$T/hz" 2>/dev/null)"
	return 1
}
# metric FILE NAME_WITH_LABELS: the value of one sample line (empty when absent).
metric() {
	awk -v n="$2" '$1 == n {print $2; exit}' "$1"
}
stop_agent() {
	kill -TERM "$AGENT"
	pp_wait_pid "$AGENT" 30
}

# --- a working backend ---------------------------------------------------------------------
pp_start_sink ok '[]'
pp_check "test server listens" [ -n "$SINK_PORT" ]
HP=$(free_port)
start_agent a --listen "127.0.0.1:$HP" --interval 1 \
	--endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles"
pp_check "/healthz answers 200 once sampling runs" wait_health 200 20
pp_check "/healthz body is ok" grep -qx ok "$T/hz"
# Wait for a window to be delivered (at most 60 s on a busy machine), then scrape twice.
for _ in $(seq 300); do
	get /metrics "$T/m1" >/dev/null
	v=$(metric "$T/m1" 'pebsprof_export_requests_total{outcome="ok"}')
	[ -n "$v" ] && [ "$v" -gt 0 ] && break
	sleep 0.2
done
code=$(get /metrics "$T/m1")
sleep 1.5
get /metrics "$T/m2" >/dev/null
s1=$(metric "$T/m1" pebsprof_samples_total)
s2=$(metric "$T/m2" pebsprof_samples_total)
pp_check "/metrics answers 200" [ "$code" = 200 ]
pp_check "the samples counter grows between two scrapes ($s1 -> $s2)" \
	bash -c "[ -n '$s1' ] && [ -n '$s2' ] && [ '$s2' -gt '$s1' ]"
pp_check "export ok counter > 0 after a window ($(metric "$T/m2" 'pebsprof_export_requests_total{outcome="ok"}'))" \
	bash -c "[ \"\$(awk '\$1 == \"pebsprof_export_requests_total{outcome=\\\"ok\\\"}\" {print \$2}' '$T/m2')\" -gt 0 ]"
pp_check "windows counted" bash -c "[ '$(metric "$T/m2" pebsprof_windows_total)' -gt 0 ]"
pp_check "up, healthy and the version" \
	bash -c "grep -qx 'pebsprof_up 1' '$T/m2' && grep -qx 'pebsprof_healthy 1' '$T/m2' &&
		grep -q '^pebsprof_build_info{version=\"[0-9.]*\"} 1$' '$T/m2'"
# the agent's CPU by thread, read as /metrics is asked: its live threads' run time, which only
# grows, read again after
cpu_after=$(cat /proc/"$AGENT"/task/*/schedstat | awk '{ s += $1 } END { printf "%.3f\n", s / 1e9 }')
cpu_live=$(awk '/^pebsprof_cpu_seconds_total\{/ && $1 !~ /exited/ { s += $2 } END { printf "%.3f\n", s }' "$T/m2")
pp_check "CPU by thread: main, unwinder, sender and health named; their $cpu_live s within the $cpu_after s the threads ran by the time it was read" \
	bash -c "awk '\$1 == \"pebsprof_cpu_seconds_total{thread=\\\"main\\\"}\" && \$2 > 0 { m = 1 } END { exit !m }' '$T/m2' &&
		grep -q '^pebsprof_cpu_seconds_total{thread=\"unwinder\"} ' '$T/m2' &&
		grep -q '^pebsprof_cpu_seconds_total{thread=\"sender\"} ' '$T/m2' &&
		grep -q '^pebsprof_cpu_seconds_total{thread=\"health\"} ' '$T/m2' &&
		grep -q '^pebsprof_cpu_seconds_total{thread=\"exited\"} ' '$T/m2' &&
		awk -v p='$cpu_live' -v a='$cpu_after' 'BEGIN { exit !(p > 0 && p <= a + 0.002) }'"
pp_check "losses by reason and queue bytes are exported" \
	bash -c "grep -q '^pebsprof_lost_samples_total{reason=\"ringbuf_full\"} [0-9]*$' '$T/m2' &&
		grep -q '^pebsprof_export_queue_bytes [0-9]*$' '$T/m2'"
# Exposition format 0.0.4: every line is a HELP, a TYPE, or a sample of the family announced.
cat >"$T/promcheck.py" <<'PY'
import re, sys
fam, kinds, bad = None, {}, []
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*\})? (-?[0-9.]+(e[+-]?[0-9]+)?)$')
for n, line in enumerate(open(sys.argv[1]).read().split("\n")[:-1], 1):
    m = re.match(r"^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S", line)
    if m:
        fam = m.group(1)
        continue
    m = re.match(r"^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$", line)
    if m:
        if m.group(1) != fam or fam in kinds:
            bad.append((n, line))
        kinds[fam] = m.group(2)
        if m.group(2) == "counter" and not fam.endswith("_total"):
            bad.append((n, "counter without _total: " + line))
        continue
    m = sample.match(line)
    if not m or m.group(1) != fam:
        bad.append((n, line))
for b in bad:
    print("bad line %d: %s" % b)
sys.exit(1 if bad or len(kinds) < 20 else 0)
PY
pp_check "/metrics is valid exposition format 0.0.4" "$PP_PYTHON" "$T/promcheck.py" "$T/m2"
pp_check "Content-Type says version 0.0.4" \
	bash -c "curl -s -m 5 -D - -o /dev/null 'http://127.0.0.1:$HP/metrics' | grep -qi '^Content-Type: text/plain; version=0.0.4'"
pp_check "404 for another path" [ "$(get /nope "$T/x")" = 404 ]
pp_check "405 for POST" [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -d x=1 "http://127.0.0.1:$HP/healthz")" = 405 ]
pp_check "400 for garbage" \
	bash -c "printf 'hello there\r\n\r\n' | timeout 5 \"$PP_PYTHON\" -c '
import socket, sys
s = socket.create_connection((\"127.0.0.1\", $HP)); s.sendall(sys.stdin.buffer.read())
print(s.recv(100).decode().split(\"\r\n\")[0])' | grep -q '^HTTP/1.1 400'"
# A busy port: a second agent on the same address is refused at start.
pp_run "$T/busy" timeout -s KILL 20 "$PEBSPROF" run --listen "127.0.0.1:$HP" --output-dir "$T/files"
pp_check "a busy listen port: exit 1 naming the address" \
	bash -c "[ $PP_RC -eq 1 ] && grep -q 'cannot listen on 127.0.0.1:$HP' '$T/busy.err'"
stop_agent
pp_check "SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
pp_check "the port is closed after exit" bash -c "[ \"\$(curl -s -m 2 -o /dev/null -w '%{http_code}' 'http://127.0.0.1:$HP/healthz')\" = 000 ]"
kill "$SINK" 2>/dev/null
wait "$SINK" 2>/dev/null

# --- a backend that answers 500: not retried, every window dropped -> 503 -----------------------
script=$("$PP_PYTHON" -c 'import json; print(json.dumps([{"status": 500, "body": "boom"}] * 200))')
pp_start_sink e500 "$script"
HP=$(free_port)
start_agent b --listen "127.0.0.1:$HP" --interval 1 \
	--endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles"
pp_check "500s: /healthz turns 503 (exports failing)" wait_health 503 30 '^exports failing'
pp_show "$T/hz"
pp_check "500s: the reason names the failing exports and the status" \
	grep -q '^exports failing: the last [0-9]* exports in a row failed (last HTTP status 500)$' "$T/hz"
pp_check "500s: /livez stays 200 (sampling is fine; a restart would not help)" \
	[ "$(get /livez "$T/lz")" = 200 ]
get /metrics "$T/m3" >/dev/null
pp_check "500s: dropped_5xx counted, healthy 0" \
	bash -c "[ \"\$(awk '\$1 == \"pebsprof_export_requests_total{outcome=\\\"dropped_5xx\\\"}\" {print \$2}' '$T/m3')\" -ge 3 ] &&
		grep -qx 'pebsprof_healthy 0' '$T/m3'"
stop_agent
pp_check "500s: SIGTERM still exits 0" [ "$PP_RC" -eq 0 ]
kill "$SINK" 2>/dev/null
wait "$SINK" 2>/dev/null

# --- a backend that is down: retried within the budget, still healthy, failure visible --------
DOWN=$(free_port)
HP=$(free_port)
start_agent c --listen "127.0.0.1:$HP" --interval 1 --flush-timeout 1 \
	--endpoint "http://127.0.0.1:$DOWN/v1development/profiles"
pp_check "down backend: /healthz 200 at first" wait_health 200 20
# retries_show FILE: the metrics in FILE show a retry, a transport error and failing time
retries_show() {
	[ "$(metric "$1" 'pebsprof_export_requests_total{outcome="retried"}')" -ge 1 ] 2>/dev/null &&
		[ "$(metric "$1" pebsprof_export_transport_errors_total)" -ge 1 ] 2>/dev/null &&
		awk '$1 == "pebsprof_export_failing_seconds" { exit !($2 > 0) }' "$1"
}
# the first window's export and its retry come at the machine's pace: wait for them, 60 s at most
for _ in $(seq 300); do
	get /metrics "$T/m4" >/dev/null
	retries_show "$T/m4" && break
	sleep 0.2
done
pp_check "down backend: still 200 within the retry budget" [ "$(get /healthz "$T/hz")" = 200 ]
pp_check "down backend: retries and failing time show in /metrics" retries_show "$T/m4"
stop_agent
pp_check "down backend: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]

# --- bad addresses ----------------------------------------------------------------------------
pp_run "$T/bad" timeout -s KILL 20 "$PEBSPROF" run --listen 127.0.0.1 --dry-run
pp_check "listen without a port: exit 2 naming the key" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q listen '$T/bad.err'"
PEBSPROF_LISTEN="[::1]:$HP" pp_run "$T/env" timeout -s KILL 20 "$PEBSPROF" run --dry-run
pp_check "PEBSPROF_LISTEN sets the address" \
	grep -qF "listen = [::1]:$HP   (from env PEBSPROF_LISTEN)" "$T/env.out"

pp_finish
