#!/bin/bash
# `pebsprof run` against a local sink, its requests then judged by Pyroscope's own ingest rules
# (tests/conformance/pyroscope_check.py, v1.21 and head) and by otlp_check.py: what a live agent
# sends is accepted, not only what the encoders make from synthetic profiles. And the backend's
# limits are met before sending: with a small --max-profile-samples every profile is cut below
# it, with a small --max-request-bytes every OTLP request is (cut in halves after encoding), with a
# small --max-burst-bytes every request counts within it at Pyroscope's rate limiter, the push sends one request per
# service named after it, a pushed pprof answered 413 is split in halves that hold every sample
# once, and label names past Pyroscope's 30 are left out and said (by record too). The first
# run and the two with every sample label take the whole machine; the others the workload's
# cgroup.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference"
checker="$PP_SOURCE_DIR/tests/conformance/pyroscope_check.py"
otlp_check="$PP_SOURCE_DIR/tests/conformance/otlp_check.py"
command -v protoc >/dev/null && [ -d "$ref/pprof" ] ||
	pp_skip "needs protoc and the reference schemas at $ref"
"$PP_PYTHON" -c 'import google.protobuf' 2>/dev/null ||
	pp_skip "no python3 with google.protobuf (Debian package python3-protobuf)"
pp_otlp_python "$ref/opentelemetry-proto" "$T/gen" &&
	(cd "$ref/pprof" && protoc --python_out="$T/gen" proto/profile.proto) ||
	pp_skip "protoc cannot generate the reference classes"

stop_sink() {
	kill "$SINK" 2>/dev/null
	wait "$SINK" 2>/dev/null
}
# judge DIR MODE [SERIES]: every request of the sink in DIR through pyroscope_check.py at v1.21
# and head (MODE otlp, or ingest with the request's own name=), one checker per version for all
# of them; prints each request's type ids; 0 if all accepted. SERIES: a file the series
# Pyroscope would make of them (head) are appended to. judge_burst: the tenant's burst, bytes.
judge() {
	local dir=$1 mode=$2 ok=1 b name v
	local -a series=()
	: >"$T/judge.list"
	for b in "$dir"/req-*.body; do
		[ -e "$b" ] || continue
		if [ "$mode" = otlp ]; then
			echo "otlp $b" >>"$T/judge.list"
		else
			name=$(head -n1 "${b%.body}.hdr" | sed -E 's/.*[?&]name=([^&]*).*/\1/' |
				"$PP_PYTHON" -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.stdin.read().strip()))')
			echo "ingest $b $name" >>"$T/judge.list"
		fi
	done
	[ -s "$T/judge.list" ] || return 1
	for v in v1.21 head; do
		series=()
		[ -n "${3:-}" ] && [ "$v" = head ] && series=(--series-out "$3")
		"$PP_PYTHON" "$checker" "$T/gen" batch --version "$v" "${series[@]}" ${judge_burst:+--burst "$judge_burst"} \
			<"$T/judge.list" >"$T/judge.out" 2>&1 || ok=0
		sed "s|^$dir/||; s|^|$v |" "$T/judge.out"
	done
	[ "$ok" -eq 1 ]
}

cat >"$T/limits.py" <<'PY'
"""limits.py GEN DIR MODE MAX_SAMPLES MAX_BYTES: the requests of a sink directory against the
limits they were cut for. otlp: every Profile <= MAX_SAMPLES samples and every body <=
MAX_BYTES unless it holds one sample; prints windows and requests per window. push: every
pprof <= MAX_SAMPLES samples, every sample's process_name label the one the request's name=
stands for (one request per service: the executable's name as Pyroscope takes it without
--service-name, kernel/threads and kernel/idle for what has no program)."""
import glob, os, re, sys, urllib.parse
sys.path.insert(0, sys.argv[1])
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc
from proto import profile_pb2
d, mode, max_samples, max_bytes = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def service_of(proc):
    if proc == "[kernel]":  # with the default --sample-labels, every kernel thread
        return "kernel/threads"
    if proc == "[idle]":
        return "kernel/idle"
    s = proc.strip()
    if len(s) >= 2 and s[0] == "[" and s[-1] == "]":
        s = s[1:-1]
    return "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in s) or "unknown_service"
bad, windows, names = [], {}, set()
for b in sorted(glob.glob(os.path.join(d, "req-*.body"))):
    data = open(b, "rb").read()
    if mode == "otlp":
        r = svc.ExportProfilesServiceRequest()
        r.ParseFromString(data)
        n = 0
        for rp in r.resource_profiles:
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    n += len(p.samples)
                    windows.setdefault(p.time_unix_nano, set()).add(b)
                    if len(p.samples) > max_samples:
                        bad.append(f"{b}: a profile of {len(p.samples)} samples")
        if len(data) > max_bytes and n > 1:
            bad.append(f"{b}: {len(data)} bytes, {n} samples")
    else:
        p = profile_pb2.Profile()
        p.ParseFromString(data)
        line = open(b[:-len(".body")] + ".hdr").readline()
        name = urllib.parse.unquote(re.search(r"[?&]name=([^& ]*)", line).group(1))
        names.add(name)
        windows.setdefault(p.time_nanos, set()).add(b)
        if len(p.sample) > max_samples:
            bad.append(f"{b}: {len(p.sample)} samples")
        st = p.string_table
        for s in p.sample:
            procs = [st[l.str] for l in s.label if st[l.key] == "process_name"]
            if [service_of(p) for p in procs] != [name]:
                bad.append(f"{b}: a sample of {procs} in the request named {name}")
                break
print("windows %d, requests per window %s%s" % (len(windows), sorted(len(v) for v in windows.values()),
      ", services " + ",".join(sorted(names)) if names else ""))
for x in bad[:10]:
    print("FAIL", x)
sys.exit(1 if bad else 0)
PY

# As long as the test takes, however slow the machine: killed at its end. In a cgroup of its
# own: the first run takes the whole machine, what a live agent meets (and so does the one
# whose series must vary by CPU); the others take the workload's cgroup alone (--cgroup), so that what they send, and what judging it costs, does
# not grow with whatever else the machine runs (beside the kernel matrix and podman's image
# build, a whole-machine run sent 433 requests where a quiet one sends 40).
pp_require_cgroup2
mkdir -p "$PP_CGROUP_BASE/wl"
sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" --threads 3 --fork 600' sh "$PP_CGROUP_BASE/wl" \
	"$PP_WORKLOAD" >/dev/null 2>&1 &
WL=$!
PP_BG_PIDS="${PP_BG_PIDS:-} $WL"
pp_wait_line "$WL" "$PP_CGROUP_BASE/wl/cgroup.procs" "^$WL\$" 10 || :
scope=(--cgroup "${PP_CGROUP_BASE#"$PP_CG2"}/wl")

# --- OTLP, live, every profile cut below 8 samples --------------------------------------------
pp_start_sink otlp '[]'
pp_run_for 5 "$T/o" --endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles" --interval 2 \
	--max-profile-samples 8 --flush-timeout 10
stop_sink
pp_check "OTLP: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
judge "$T/otlp" otlp >"$T/otlp.judged"
rc=$?
tail -n 2 "$T/otlp.judged"
pp_check "OTLP: Pyroscope's ingest rules (v1.21, head) accept every request a live run sent" \
	bash -c "[ $rc -eq 0 ] && grep -q 'ok: process_cpu:cpu:nanoseconds:cpu:nanoseconds' '$T/otlp.judged'"
"$PP_PYTHON" "$otlp_check" "$T/gen" "$T/otlp"/req-*.body >"$T/oc.out" 2>&1
rc=$?
grep FAIL "$T/oc.out" | head -n 10
pp_check "OTLP: every request passes otlp_check.py" [ "$rc" -eq 0 ]
"$PP_PYTHON" "$T/limits.py" "$T/gen" "$T/otlp" otlp 8 $((64 << 20)) >"$T/ol.out" 2>&1
rc=$?
cat "$T/ol.out"
pp_check "OTLP: no profile holds more than --max-profile-samples 8" [ "$rc" -eq 0 ]
pp_check "OTLP: windows went out as several requests, and the summary says so" \
	bash -c "grep -qE 'requests per window \[.*[2-9]' '$T/ol.out' &&
		grep -qE 'cut before sending for the backend.s limits: [1-9][0-9]* profiles' '$T/o.err'"

# --- OTLP, every request cut below 1 KiB --------------------------------------------------------
pp_start_sink small '[]'
pp_run_for 4 "$T/r" "${scope[@]}" --endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles" \
	--interval 2 --max-request-bytes 1KiB --flush-timeout 10
stop_sink
"$PP_PYTHON" "$T/limits.py" "$T/gen" "$T/small" otlp 16000 1024 >"$T/rl.out" 2>&1
rc=$?
cat "$T/rl.out"
pp_check "OTLP: every request within --max-request-bytes 1KiB (or of one sample)" [ "$rc" -eq 0 ]
pp_check "OTLP: requests were cut, and the summary says so" \
	grep -qE 'profiles \(max-profile-samples, max-profile-bytes\), [1-9][0-9]* requests' "$T/r.err"
judge "$T/small" otlp >"$T/small.judged"
pp_check "OTLP: the cut requests are accepted by Pyroscope's rules" [ $? -eq 0 ]

# --- OTLP, every request within a burst of 12 KiB ------------------------------------------------
# Pyroscope's rate limiter counts a whole request (its profiles as pprof, its series' labels)
# against the tenant's burst and refuses a larger one at any rate. At 999 Hz with every label,
# a window's resources take more than that.
pp_start_sink burst '[]'
# the whole machine: the workload's windows alone may fit one burst on a busy one
pp_run_for 4 "$T/bu" --endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles" \
	--interval 2 --max-burst-bytes 12KiB --flush-timeout 10 -F 999 --sample-labels thread,pid,cpu
stop_sink
"$PP_PYTHON" "$T/limits.py" "$T/gen" "$T/burst" otlp 16000 16777216 >"$T/bl.out" 2>&1
cat "$T/bl.out"
judge_burst=12288 judge "$T/burst" otlp >"$T/burst.judged"
rc=$?
grep -v ' ok: ' "$T/burst.judged" | head -n 5
pp_check "OTLP: every request within --max-burst-bytes 12KiB as Pyroscope's limiter counts it" \
	[ "$rc" -eq 0 ]
pp_check "OTLP: windows went out as several requests for the burst, and the summary says so" \
	bash -c "grep -qE 'requests per window \[.*[2-9]' '$T/bl.out' &&
		grep -qE '[1-9][0-9]* more requests for the burst' '$T/bu.err'"

# --- the push: one request per service, each cut below 8 samples --------------------------------
pp_start_sink push '[]'
pp_run_for 5 "$T/p" "${scope[@]}" --exporter pyroscope --endpoint "http://127.0.0.1:$SINK_PORT" \
	--interval 2 --max-profile-samples 8 --flush-timeout 10
stop_sink
pp_check "push: SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
"$PP_PYTHON" "$T/limits.py" "$T/gen" "$T/push" push 8 0 >"$T/pl.out" 2>&1
rc=$?
cat "$T/pl.out"
pp_check "push: one service per request (name= is its samples' executable), at most 8 samples each" \
	[ "$rc" -eq 0 ]
pp_check "push: the workload is a service of its own" grep -q 'services .*pp_workload' "$T/pl.out"
judge "$T/push" ingest >"$T/push.judged"
rc=$?
tail -n 2 "$T/push.judged"
pp_check "push: Pyroscope's ingest rules (v1.21, head) accept every request under its name" \
	[ "$rc" -eq 0 ]

# --- series: one per program and profile type, whatever the threads, CPUs and processes -------
cat >"$T/series.py" <<'PY'
"""series.py FILE: the series Pyroscope would make (one label set per line, from --series-out)
per profile type: prints "TYPE: S series, V services" per type; exit 0 when every type has
exactly one series per program: a service, and the executable's path (OTLP) or the process
name (the push: "[bash]" where the executable was not read): two python3.11 of different
paths are one service and two programs, seen beside a build, as is a bash read and one gone
before it was."""
import ast, collections, sys
series = collections.defaultdict(set)
for line in open(sys.argv[1]):
    labels = dict(ast.literal_eval(line))
    series[labels["__name__"]].add(tuple(sorted(labels.items())))
ok = bool(series)
for name, sets in sorted(series.items()):
    services = {dict(s)["service_name"] for s in sets}
    programs = {(dict(s)["service_name"], dict(s).get("process.executable.path"),
                 dict(s).get("process_name")) for s in sets}
    print(f"{name}: {len(sets)} series, {len(services)} services, {len(programs)} programs")
    ok &= len(sets) == len(programs)
    if len(sets) != len(programs):
        values = collections.defaultdict(set)
        for s in sets:
            for k, v in s:
                values[k].add(v)
        print("  labels that vary:", sorted(k for k, v in values.items() if len(v) > 1))
    by_service = collections.defaultdict(list)
    for s in sets:
        by_service[dict(s)["service_name"]].append(dict(s))
    for svc, group in sorted(by_service.items()):
        if len(group) > 1:
            keys = set().union(*group)
            differ = sorted(k for k in keys if len({g.get(k) for g in group}) > 1)
            print(f"  {svc}: {len(group)} series, differing in", {k: sorted(str(g.get(k)) for g in group) for k in differ})
sys.exit(0 if ok else 1)
PY
for m in otlp push; do
	: >"$T/$m.series"
	judge "$T/$m" "$([ $m = otlp ] && echo otlp || echo ingest)" "$T/$m.series" >/dev/null
	"$PP_PYTHON" "$T/series.py" "$T/$m.series" >"$T/$m.sc" 2>&1
	rc=$?
	sed "s/^/$m: /" "$T/$m.sc"
	pp_check "$m: one series per program and profile type by default (3 threads, 2 processes, 2 CPUs)" \
		[ "$rc" -eq 0 ]
done
pp_start_sink dims '[]'
# the whole machine, as the first run: the workload alone may run on one CPU on a busy one
pp_run_for 3.5 "$T/dm" --endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles" \
	--interval 2 --flush-timeout 10 --sample-labels thread,pid,cpu
stop_sink
: >"$T/dims.series"
judge "$T/dims" otlp "$T/dims.series" >"$T/dims.judged"
rc=$?
"$PP_PYTHON" "$T/series.py" "$T/dims.series" >"$T/dims.sc" 2>&1
sed 's/^/sample-labels thread,pid,cpu: /' "$T/dims.sc"
pp_check "--sample-labels thread,pid,cpu: accepted, and threads, processes and CPUs are series again" \
	bash -c "[ $rc -eq 0 ] && grep -q 'labels that vary:.*cpu.logical_number.*process.pid.*thread.id' '$T/dims.sc'"

# --- the push answered 413: the pprof is split in halves holding every sample once --------------
# The second push is answered 413: the first window runs from the start to the first aligned
# boundary and may hold a single sample, which no split can halve (ci82 failed so); at 999 Hz,
# since beside the kernel matrix the workload's cgroup got so little CPU that a whole 2 s
# window at 99 Hz held one sample too (ci83).
pp_start_sink p413 '[{"status": 200}, {"status": 413, "body": "request entity too large"}]'
pp_run_for 5.5 "$T/q" "${scope[@]}" -F 999 --exporter pyroscope --endpoint "http://127.0.0.1:$SINK_PORT" \
	--interval 2 --service-name shop --flush-timeout 10
stop_sink
pp_check "push 413: the agent split the pprof and resent it" \
	grep -q 'HTTP 413): resent as two requests' "$T/q.err"
cat >"$T/halves.py" <<'PY'
"""halves.py GEN DIR: req-0001 was answered 413; the two requests of the same window that
follow hold exactly its samples (stack by function names, values, labels)."""
import collections, glob, os, sys
sys.path.insert(0, sys.argv[1])
from proto import profile_pb2
def load(b):
    p = profile_pb2.Profile()
    p.ParseFromString(open(b, "rb").read())
    return p
def samples(p):
    st, fn = p.string_table, {f.id: p.string_table[f.name] for f in p.function}
    loc = {l.id: fn[l.line[0].function_id] for l in p.location}
    return collections.Counter((tuple(loc[i] for i in s.location_id), tuple(s.value),
                                tuple(sorted((st[l.key], st[l.str], l.num) for l in s.label))) for s in p.sample)
bodies = sorted(glob.glob(os.path.join(sys.argv[2], "req-*.body")))
orig = load(bodies[1])
halves = [load(b) for b in bodies[2:] if load(b).time_nanos == orig.time_nanos]
got = sum((samples(h) for h in halves), collections.Counter())
print("413'd: %d samples; %d halves: %s" % (len(orig.sample), len(halves), [len(h.sample) for h in halves]))
sys.exit(0 if len(halves) == 2 and got == samples(orig) and all(h.sample for h in halves) else 1)
PY
"$PP_PYTHON" "$T/halves.py" "$T/gen" "$T/p413" >"$T/h.out" 2>&1
rc=$?
cat "$T/h.out"
pp_check "push 413: two halves of the window hold every sample exactly once" [ "$rc" -eq 0 ]
pp_check "push 413: both halves keep the name=" \
	bash -c "[ \$(grep -l '^POST /ingest?name=shop&' '$T/p413'/req-000[23].hdr | wc -l) -eq 2 ]"
pp_check "push 413: the exit summary counts the split" \
	grep -q 'HTTP 413 or 400): 1 split and resent, 0 dropped' "$T/q.err"

# --- more label names than Pyroscope keeps: left out, said, and then accepted --------------------
attrs=$(seq 1 30 | sed 's/.*/team.attr&=v&/' | paste -sd,)
pp_start_sink labels '[]'
OTEL_RESOURCE_ATTRIBUTES="$attrs" pp_run_for 3.5 "$T/l" "${scope[@]}" \
	--endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles" --interval 2 --flush-timeout 10
stop_sink
pp_check "labels: the agent names what it leaves out, once" \
	bash -c "[ \$(grep -c 'more label names than Pyroscope keeps' '$T/l.err') -eq 1 ] &&
		grep -q 'least useful first: cpu.logical_number\|least useful first: .*team.attr30' '$T/l.err'"
pp_check "labels: the exit summary counts the names left out" \
	grep -qE 'export: [1-9][0-9]* label names left out' "$T/l.err"
judge "$T/labels" otlp >"$T/labels.judged"
rc=$?
tail -n 1 "$T/labels.judged"
pp_check "labels: with 30 extra attributes every request is still accepted" [ "$rc" -eq 0 ]

# record says it too, for the OTLP file it writes
OTEL_RESOURCE_ATTRIBUTES="$attrs" pp_run "$T/rec" timeout -s KILL 60 "$PEBSPROF" record -d 1 \
	-o "$T/rec.otlp.pb" -o "$T/rec.pb.gz"
pp_check "record: names the label names its OTLP file leaves out, not its pprof's" \
	bash -c "[ $PP_RC -eq 0 ] && grep -qE 'rec.otlp.pb: [0-9]+ label names left out for Pyroscope.s limit of 30: .*team.attr30' '$T/rec.err' &&
		! grep -q 'rec.pb.gz: .*label names left out' '$T/rec.err'"

kill "$WL" 2>/dev/null
wait "$WL" 2>/dev/null
pp_finish
