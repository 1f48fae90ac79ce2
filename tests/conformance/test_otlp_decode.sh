#!/bin/bash
# Our OTLP profiles request, read by independent decoders built from the REFERENCE
# opentelemetry-proto v1.11.0 schema: protoc --decode must accept it and show what
# pp_make_otlp put in; Python classes generated from the same schema check the encoding
# rules of reference/notes/otlp.md §8 (otlp_check.py). The checker is shown to reject
# requests that break those rules, so a pass means something.
set -u

: "${PP_TEST_BIN_DIR:?}" "${PP_REFERENCE_DIR:?}"
here=$(cd "$(dirname "$0")" && pwd)
make_otlp="$PP_TEST_BIN_DIR/pp_make_otlp"
ref="$PP_REFERENCE_DIR/opentelemetry-proto"
msg=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
protos=(opentelemetry/proto/common/v1/common.proto
	opentelemetry/proto/resource/v1/resource.proto
	opentelemetry/proto/profiles/v1development/profiles.proto
	opentelemetry/proto/collector/profiles/v1development/profiles_service.proto)

if [ ! -x "$make_otlp" ]; then
	echo "FAIL: $make_otlp not built"
	exit 1
fi
if [ ! -d "$ref/opentelemetry" ]; then
	echo "FAIL: reference schema missing at $ref"
	exit 1
fi
if ! command -v protoc >/dev/null; then
	echo "skipped: protoc not found (Debian package protobuf-compiler)"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
# expect FILE REGEX WHAT
expect() {
	if ! grep -Eq -- "$2" "$1"; then
		fail "$3: no line matches /$2/"
	fi
}

"$make_otlp" "$tmp/p.otlp.pb" || {
	echo "FAIL: pp_make_otlp"
	exit 1
}

# protoc: decodes against the reference schema, no unknown fields, the contents we wrote.
if ! protoc --decode="$msg" --proto_path="$ref" "${protos[3]}" <"$tmp/p.otlp.pb" \
	>"$tmp/decoded.txt" 2>"$tmp/decode.err"; then
	cat "$tmp/decode.err"
	echo "FAIL: protoc cannot decode the request with the reference schema"
	exit 1
fi
d="$tmp/decoded.txt"
# Unknown fields print as bare numbers: a renumbered field would show up here.
if grep -Eq '^ *[0-9]+:' "$d"; then
	fail "fields unknown to the reference schema"
fi
[ "$(grep -c '^resource_profiles {' "$d")" = 2 ] || fail "not 2 resource_profiles"
[ "$(grep -c '^dictionary {' "$d")" = 1 ] || fail "not exactly 1 dictionary"
[ "$(grep -m1 'string_table:' "$d" | tr -d ' ')" = 'string_table:""' ] ||
	fail "the first string is not empty"
for s in samples count cpu nanoseconds cycles main a memcpy do_syscall_64 /usr/bin/app \
	/usr/bin/db /usr/lib/x86_64-linux-gnu/libc.so.6 thread.id thread.name worker db-main \
	service checkout profile.frame.type process.executable.build_id.gnu \
	0123456789abcdef0123456789abcdef01234567; do
	expect "$d" "(string_table|string_value): \"$s\"$" "string $s"
done
for kv in service.name:shop host.name:host-1 k8s.node.name:node-a \
	deployment.environment.name:test process.executable.name:app process.executable.name:db; do
	k=${kv%%:*} v=${kv#*:}
	tr -d '\n' <"$d" | grep -Eq "key: \"$k\" +value \{ +string_value: \"$v\"" ||
		fail "resource attribute $k=$v not inline"
done
for pid in 100 200; do
	tr -d '\n' <"$d" | grep -Eq "key: \"process.pid\" +value \{ +int_value: $pid " ||
		fail "process.pid $pid"
done
# KeyValueAndUnit lives in the dictionary: any key_strindex before it is a KeyValue's.
if sed -n '/^resource_profiles/,/^dictionary/p' "$d" | grep -Eq 'key_strindex|string_value_strindex'; then
	fail "resource attributes use the _strindex forms"
fi
[ "$(grep -Ec '^ +values: ' "$d")" = 4 ] || fail "not 4 sample values"
vals=$(awk '/^ +values: / {s += $2} END {print s + 0}' "$d")
# cycles values are event counts: 7 samples of period 100000 (pp_make_otlp).
[ "$vals" = 700085 ] || fail "sample values sum to $vals, not 700085 (40 + 15 + 30 + 7 * 100000)"
expect "$d" '^ +period: 1000000$' "cpu period"
expect "$d" '^ +period: 100000$' "cycles period"
expect "$d" '^ +time_unix_nano: 1767225600000000000$' "time_unix_nano"
expect "$d" '^ +duration_nano: 1000000000$' "duration_nano"
expect "$d" '^ +address: 631024$' "memcpy address 0x9a0f0"
[ "$(grep -c '^  mapping_table {' "$d")" = 5 ] || fail "not 5 mappings (zero + 4)"
[ "$(grep -c '^  function_table {' "$d")" = 5 ] || fail "not 5 functions (zero + 4, main once)"

# Python classes from the reference schema: the §8 rules, checked independently.
py=
for cand in /usr/bin/python3 python3; do
	if command -v "$cand" >/dev/null && "$cand" -c 'import google.protobuf' 2>/dev/null; then
		py=$cand
		break
	fi
done
if [ -z "$py" ]; then
	echo "skipped: no python3 with google.protobuf (Debian package python3-protobuf)"
	exit 77
fi
mkdir "$tmp/gen"
if ! (cd "$ref" && protoc --python_out="$tmp/gen" "${protos[@]}") 2>"$tmp/gen.err"; then
	cat "$tmp/gen.err"
	echo "FAIL: protoc --python_out over the reference schema"
	exit 1
fi
if ! "$py" "$here/otlp_check.py" "$tmp/gen" "$tmp/p.otlp.pb"; then
	fail "otlp_check.py rejects the request"
fi

# Negative controls: each rule break must be caught by the checker.
PYTHONPATH="$tmp/gen" "$py" - "$tmp/p.otlp.pb" "$tmp" <<'EOF' || fail "writing the broken variants"
import sys
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as ps
src, out = sys.argv[1], sys.argv[2]
def load():
    r = ps.ExportProfilesServiceRequest()
    r.ParseFromString(open(src, "rb").read())
    return r
def save(name, r):
    open(f"{out}/bad_{name}.pb", "wb").write(r.SerializeToString())
r = load(); del r.dictionary.mapping_table[0]; save("no_zero_mapping", r)
r = load(); r.dictionary.string_table[0] = "x"; save("string0", r)
r = load(); r.dictionary.string_table.append("main"); save("dup_string", r)
r = load(); r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].values.append(1)
save("two_values", r)
r = load(); a = r.resource_profiles[1].resource.attributes
for kv in a:
    if kv.key == "service.name":
        kv.key = ""; kv.key_strindex = 1
save("service_strindex", r)
r = load(); r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 99
save("stack_range", r)
r = load(); r.dictionary.function_table.append(r.dictionary.function_table[1]); save("dup_function", r)
EOF
for bad in "$tmp"/bad_*.pb; do
	[ -e "$bad" ] || continue
	if "$py" "$here/otlp_check.py" "$tmp/gen" "$bad" >"$tmp/bad.out" 2>&1; then
		fail "otlp_check.py accepts $(basename "$bad")"
	fi
done
[ "$(ls "$tmp"/bad_*.pb 2>/dev/null | wc -l)" = 7 ] || fail "not all broken variants written"

if [ "$fails" -ne 0 ]; then
	echo "--- protoc --decode"
	cat "$d"
	echo "$fails check(s) failed"
	exit 1
fi
echo "ok: protoc and the reference-schema checker read the OTLP request as written"
