#!/bin/bash
# Pyroscope accepts every kind of profile we produce, under the profile type ids
# deploy/README.md lists: pyroscope_check.py (Pyroscope's ingest rules at v1.21.0 and at its
# head, written from its source) on cpu-clock, cycles with -F and -c, mem-loads, mem-stores,
# IBS op, a named PEBS event, and mem-loads in a pod with extra resource attributes, each as
# we send it over OTLP and as we push it to /ingest. The OTLP files also pass otlp_check.py.
# The checker is shown to reject what Pyroscope rejects, so a pass means something.
set -u

: "${PP_TEST_BIN_DIR:?}" "${PP_REFERENCE_DIR:?}"
here=$(cd "$(dirname "$0")" && pwd)
make_cases="$PP_TEST_BIN_DIR/pp_make_pyroscope_cases"
ref="$PP_REFERENCE_DIR"

[ -x "$make_cases" ] || {
	echo "FAIL: $make_cases not built"
	exit 1
}
command -v protoc >/dev/null || {
	echo "skipped: protoc not found (Debian package protobuf-compiler)"
	exit 77
}
py=
for cand in /usr/bin/python3 python3; do
	if command -v "$cand" >/dev/null && "$cand" -c 'import google.protobuf' 2>/dev/null; then
		py=$cand
		break
	fi
done
[ -n "$py" ] || {
	echo "skipped: no python3 with google.protobuf (Debian package python3-protobuf)"
	exit 77
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
mkdir "$tmp/gen" "$tmp/c"
(cd "$ref/opentelemetry-proto" && protoc --python_out="$tmp/gen" \
	opentelemetry/proto/common/v1/common.proto opentelemetry/proto/resource/v1/resource.proto \
	opentelemetry/proto/profiles/v1development/profiles.proto \
	opentelemetry/proto/collector/profiles/v1development/profiles_service.proto) &&
	(cd "$ref/pprof" && protoc --python_out="$tmp/gen" proto/profile.proto) || {
	echo "FAIL: protoc cannot generate the reference classes"
	exit 1
}
"$make_cases" "$tmp/c" || {
	echo "FAIL: pp_make_pyroscope_cases"
	exit 1
}

check() { # expected ids (any order), then the checker's arguments
	local want out
	want=$(tr , '\n' <<<"$1" | sort | paste -sd,)
	shift
	out=$("$py" "$here/pyroscope_check.py" "$tmp/gen" "$@" 2>&1)
	if [ "$out" = "ok: $want" ]; then
		echo "ok - ${*: -3:1} ${*: -1}: $want"
	else
		fail "$*: wanted ok: $want"
		echo "$out" | sed 's/^/    /'
	fi
}

while read -r name ids; do
	for v in v1.21 head; do
		check "$ids" otlp "$tmp/c/$name.otlp.pb" --version "$v"
		push_ids=$ids
		# The push of a CPU profile also keeps its sample count, as Go's own profiles do.
		[ "$name" = cpu_clock ] && push_ids="$ids,process_cpu:samples:count:cpu:nanoseconds"
		check "$push_ids" ingest "$tmp/c/$name.pb.gz" shop --version "$v"
	done
	"$py" "$here/otlp_check.py" "$tmp/gen" "$tmp/c/$name.otlp.pb" >"$tmp/oc.out" 2>&1 ||
		{
			fail "$name: otlp_check.py rejects it"
			sed 's/^/    /' "$tmp/oc.out"
		}
done <"$tmp/c/cases.txt"

# Off-CPU time (--off-cpu): over OTLP a Profile of its own, which Pyroscope names off_cpu; the
# push sends it as a pprof of its own beside the event's, which /ingest files under
# process_cpu (its name holds "cpu") as the sample type off_cpu.
cpu_ids=process_cpu:cpu:nanoseconds:cpu:nanoseconds
for v in v1.21 head; do
	check "$cpu_ids,off_cpu:off_cpu:nanoseconds::" otlp "$tmp/c/off_cpu.otlp.pb" --version "$v"
	check "$cpu_ids,process_cpu:samples:count:cpu:nanoseconds" ingest "$tmp/c/off_cpu.pb.gz" shop \
		--version "$v"
	check "process_cpu:off_cpu:nanoseconds::" ingest "$tmp/c/off_cpu.off.pb" shop --version "$v"
done
"$py" "$here/otlp_check.py" "$tmp/gen" "$tmp/c/off_cpu.otlp.pb" >"$tmp/oc.out" 2>&1 || {
	fail "off_cpu: otlp_check.py rejects it"
	sed 's/^/    /' "$tmp/oc.out"
}

# Every name a node gives is pushed under a name /ingest takes (exporter pyroscope.h): the
# window cut by service as `run` cuts it, each part checked with its name= on both versions.
cpu_ids=process_cpu:cpu:nanoseconds:cpu:nanoseconds,process_cpu:samples:count:cpu:nanoseconds
nparts=0
while read -r part service; do
	for v in v1.21 head; do
		check "$cpu_ids" ingest "$tmp/c/$part.pb.gz" "$service" --version "$v"
	done
	nparts=$((nparts + 1))
done <"$tmp/c/names.txt"
services=$(cut -d' ' -f2 "$tmp/c/names.txt" | paste -sd' ')
want="checkout_v2 evil_service_name_x_a_b_ kernel/idle kernel/threads memfd_sealed-_ python3.11 unknown_service wc x86_64-linux-gnu-g__-12"
[ "$services" = "$want" ] || fail "the push's services are '$services', not '$want'"
# What the agent pushed before: the raw names, which Pyroscope refuses (all but python3.11,
# and "evil{service_name=x,...}", which it takes as service x: the list above shows it is not).
while IFS= read -r raw; do
	case $raw in python3.11 | evil*) continue ;; esac
	if out=$("$py" "$here/pyroscope_check.py" "$tmp/gen" ingest "$tmp/c/names_0.pb.gz" \
		"$raw" 2>&1); then
		fail "the checker accepts name=$raw: $out"
	else
		echo "ok - rejected raw name=$raw"
	fi
done <"$tmp/c/names_raw.txt"

# The checker rejects what Pyroscope rejects: a '-' in a sample type, a hardware profile
# with no period (no name), a frame without a function, a label name with '/' on v1.21.
"$py" - "$tmp/gen" "$tmp/c" <<'PYEOF' || fail "could not write the rejected variants"
import gzip, sys
sys.path.insert(0, sys.argv[1])
from proto import profile_pb2
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2
d = sys.argv[2]
p = profile_pb2.Profile()
p.ParseFromString(gzip.decompress(open(f"{d}/mem_loads.pb.gz", "rb").read()))
st = list(p.string_table)
p.string_table[st.index("mem_loads")] = "mem-loads"
open(f"{d}/bad_dash.pb.gz", "wb").write(gzip.compress(p.SerializeToString()))
p.ParseFromString(gzip.decompress(open(f"{d}/cycles_period.pb.gz", "rb").read()))
del p.location[0].line[:]
open(f"{d}/bad_noname.pb.gz", "wb").write(gzip.compress(p.SerializeToString()))
r = profiles_service_pb2.ExportProfilesServiceRequest()
r.ParseFromString(open(f"{d}/cycles_freq.otlp.pb", "rb").read())
for rp in r.resource_profiles:
    for sp in rp.scope_profiles:
        for pr in sp.profiles:
            pr.period = 0
open(f"{d}/bad_period.otlp.pb", "wb").write(r.SerializeToString())
r.ParseFromString(open(f"{d}/cpu_clock.otlp.pb", "rb").read())
kv = r.resource_profiles[0].resource.attributes.add()
kv.key, kv.value.string_value = "app.kubernetes.io/name", "x"
open(f"{d}/bad_slash.otlp.pb", "wb").write(r.SerializeToString())
PYEOF
reject() { # what it must say, then the checker's arguments
	local want=$1 out
	shift
	if out=$("$py" "$here/pyroscope_check.py" "$tmp/gen" "$@" 2>&1); then
		fail "the checker accepts $*: $out"
	elif ! grep -q -- "$want" <<<"$out"; then
		fail "the checker rejects $* but not for '$want': $out"
	else
		echo "ok - rejected: $want"
	fi
}
reject "sample type contains -" ingest "$tmp/c/bad_dash.pb.gz" shop
reject "has no function name" ingest "$tmp/c/bad_noname.pb.gz" shop
reject "invalid metric name" otlp "$tmp/c/bad_period.otlp.pb"
reject "invalid label name 'app.kubernetes.io/name'" otlp "$tmp/c/bad_slash.otlp.pb" --version v1.21
check process_cpu:cpu:nanoseconds:cpu:nanoseconds otlp "$tmp/c/bad_slash.otlp.pb" --version head

if [ "$fails" -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
