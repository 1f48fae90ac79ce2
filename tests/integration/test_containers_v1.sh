#!/bin/bash
# Container attribution where cgroup v1 hierarchies are mounted (v1 alone, or hybrid beside
# the unified one): a cgroup named as Docker's cgroupfs driver names it (.../docker/<id>) in
# the v1 memory hierarchy, and in it a loop starting short programs (a shell counting for
# some ms, over and over) while `pebsprof record -a -o x.otlp.pb` samples the node. The shim
# keys each sample by the task's v1 and v2 cgroups: the container arrives as one
# ResourceProfiles with container.id and container.runtime=docker holding the samples of
# dozens of those processes, all gone when the capture ends, and the collector read a few
# /proc/PID/cgroup files for the whole node, not one per process.
. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference/opentelemetry-proto"
[ -d "$ref/opentelemetry" ] && command -v protoc >/dev/null || pp_skip "needs protoc and $ref"
"$PP_PYTHON" -c 'import google.protobuf' 2>/dev/null || pp_skip "needs python3-protobuf"
# mountinfo: field 5 is the mount point; after the " - " separator, the type, source, options
MEM=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") {
	if ($(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)memory(,|$)/) print $5; break } }' \
	/proc/self/mountinfo | head -1)
[ -n "$MEM" ] || pp_skip "no cgroup v1 memory hierarchy here: cgroup2 alone keys samples by v2 ids (test_containers)"
pp_otlp_python "$ref" "$T/gen" || pp_skip "protoc could not generate the python classes"

CID=$(printf 'd%.0s' {1..8})$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
base="$MEM/pp-test-$$"
CG="$base/docker/$CID"
PP_CGROUP_EXTRA="$CG $base/docker $base"
mkdir -p "$CG" || pp_skip "cannot create a cgroup under $MEM"

cat >"$T/loop.sh" <<'SH'
for i in $(seq 120); do sh -c 'i=0; while [ $i -lt 4000 ]; do i=$((i + 1)); done'; done
SH

own_perf_link() {
	grep -Eqs 'link_type:[[:space:]]*(perf|perf_event|7)$' /proc/"$1"/fdinfo/*
}

"$PEBSPROF" record -a -e cpu-clock -F 499 -d 300 -o "$T/all.otlp.pb" >"$T/rec.out" \
	2>"$T/rec.err" &
rec=$!
for i in $(seq 300); do
	own_perf_link "$rec" && break
	sleep 0.1
done
own_perf_link "$rec" || pp_fail "record -a: no perf_event link after 30 s"
sh -c 'echo $$ >"$1/cgroup.procs" && exec sh "$2"' sh "$CG" "$T/loop.sh"
kill -INT "$rec"
pp_wait_pid "$rec" 60
pp_check "record -a exits 0" [ "$PP_RC" -eq 0 ]
"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/otlp_resources.py" "$T/gen" "$T/all.otlp.pb" \
	>"$T/all.json" 2>"$T/resources.err"
pp_check "the profile parses ($(wc -l <"$T/all.json") resources)$(head -c 300 "$T/resources.err")" \
	test -s "$T/all.json"
line=$(grep "\"container.id\": \"$CID\"" "$T/all.json")
pp_check "the container has exactly one ResourceProfiles" \
	[ "$(grep -c "\"container.id\": \"$CID\"" "$T/all.json")" -eq 1 ]
pp_check "the container: container.runtime=docker" \
	grep -q '"container.runtime": "docker"' <<<"$line"
read -r npids nsamples < <("$PP_PYTHON" -c 'import json, sys
r = json.loads(sys.argv[1] or "{}")
print(len(r.get("pids", [])), r.get("samples", 0))' "$line")
# 120 programs of about 20 ms each at 499 Hz: most are sampled, some ten times
pp_check "the container holds the samples of many short processes: $npids processes, $nsamples samples" \
	test "${npids:-0}" -ge 20 -a "${nsamples:-0}" -ge 50
reads=$(sed -n 's/^containers: .*; \([0-9]*\) cgroup files read from \/proc.*/\1/p' "$T/rec.out")
keyed=$(sed -n 's/^containers: [0-9]* lookups (\([0-9]*\) by a key.*/\1/p' "$T/rec.out")
grep '^containers:' "$T/rec.out" | sed 's/^/    /'
pp_check "samples were keyed by their v1 and v2 cgroups (${keyed:-?} lookups)" \
	test "${keyed:-0}" -ge "${nsamples:-1}"
pp_check "cgroup files read: ${reads:-?} for the node, fewer than its $npids processes here" \
	test -n "$reads" -a "${reads:-999}" -lt $((npids / 2))
pp_finish
