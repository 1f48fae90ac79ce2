#!/bin/bash
# Our gzipped pprof, read by independent decoders: `go tool pprof` (-raw and -top) must see
# the functions, counts and percentages pp_make_profile put in, and protoc must decode the
# inflated bytes against the reference profile.proto.
set -u

: "${PP_TEST_BIN_DIR:?}" "${PP_REFERENCE_DIR:?}"
make_profile="$PP_TEST_BIN_DIR/pp_make_profile"
ref_proto="$PP_REFERENCE_DIR/pprof/proto"

if [ ! -x "$make_profile" ]; then
	echo "FAIL: $make_profile not built"
	exit 1
fi
if ! command -v go >/dev/null || ! go tool -n pprof >/dev/null 2>&1; then
	echo "skipped: go tool pprof not found (Debian package golang-go)"
	exit 77
fi
if ! command -v protoc >/dev/null; then
	echo "skipped: protoc not found (Debian package protobuf-compiler)"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# pprof may want a writable home and cache; keep it off the user's.
export HOME="$tmp" GOCACHE="$tmp/gocache" PPROF_TMPDIR="$tmp"
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
# expect FILE REGEX WHAT
expect() {
	if ! grep -Eq -- "$2" "$1"; then
		fail "$3: no line matches /$2/ in $(basename "$1")"
	fi
}

"$make_profile" "$tmp/p.pb.gz" || {
	echo "FAIL: pp_make_profile"
	exit 1
}
if [ "$(head -c2 "$tmp/p.pb.gz" | od -An -tx1 | tr -d ' ')" != "1f8b" ]; then
	fail "p.pb.gz does not start with the gzip magic"
fi

# -raw: header, every sample with its values and labels, locations and mappings.
if ! go tool pprof -raw "$tmp/p.pb.gz" >"$tmp/raw.txt" 2>"$tmp/raw.err"; then
	cat "$tmp/raw.err"
	echo "FAIL: go tool pprof -raw rejects the profile"
	exit 1
fi
expect "$tmp/raw.txt" '^PeriodType: cpu nanoseconds$' "period type"
expect "$tmp/raw.txt" '^Period: 1000000$' "period"
expect "$tmp/raw.txt" '^Duration: 1s$' "duration"
expect "$tmp/raw.txt" '^samples/count cpu/nanoseconds$' "sample types"
for v in "35 35000000" "25 25000000" "30 30000000" "10 10000000"; do
	set -- $v
	expect "$tmp/raw.txt" "^ +$1 +$2: " "sample of $1"
done
total=$(awk '/^Samples:/ {s = 1; next} /^Locations/ {s = 0} s && /^ +[0-9]+ +[0-9]+:/ {n += $1} END {print n + 0}' "$tmp/raw.txt")
[ "$total" = 100 ] || fail "sample counts sum to $total, not 100"
expect "$tmp/raw.txt" 'pid:\[100\] tid:\[102\]' "pid/tid labels"
expect "$tmp/raw.txt" 'process_name:\[app\] service:\[checkout\] thread_name:\[worker\]' \
	"string labels"
for f in main a b c; do
	expect "$tmp/raw.txt" "^ +[0-9]+: 0x[0-9a-f]+ M=1 $f /usr/bin/app" "location of $f"
done
expect "$tmp/raw.txt" '^ +[0-9]+: 0xffffffff81000100 M=2 do_syscall_64 \[kernel\.kallsyms\]' \
	"kernel location"
expect "$tmp/raw.txt" '^1: 0x400000/0x500000/0x0 /usr/bin/app 0123456789abcdef0123456789abcdef01234567 \[FN\]$' \
	"application mapping with build id"
expect "$tmp/raw.txt" '^2: .* \[kernel\.kallsyms\]' "kernel mapping"

# -top: flat and cumulative time and shares per function (value is cpu nanoseconds).
if ! go tool pprof -top -nodecount=20 "$tmp/p.pb.gz" >"$tmp/top.txt" 2>"$tmp/top.err"; then
	cat "$tmp/top.err"
	echo "FAIL: go tool pprof -top rejects the profile"
	exit 1
fi
expect "$tmp/top.txt" '^Type: cpu$' "type"
expect "$tmp/top.txt" 'Total samples = 100ms' "total"
expect "$tmp/top.txt" '^ +60ms +60\.00% +60\.00% +60ms +60\.00%  b$' "top line of b"
expect "$tmp/top.txt" '^ +30ms +30\.00% +90\.00% +40ms +40\.00%  c$' "top line of c"
expect "$tmp/top.txt" '^ +10ms +10\.00% +100% +10ms +10\.00%  do_syscall_64$' "top line of kernel"
expect "$tmp/top.txt" '^ +0 +0% +100% +60ms +60\.00%  a$' "top line of a"
expect "$tmp/top.txt" '^ +0 +0% +100% +100ms +100%  main$' "top line of main"
[ "$(grep -Ec '^ +[0-9.]+(ms)? +[0-9.]+% ' "$tmp/top.txt")" = 5 ] || fail "-top does not list 5 functions"

# The first sample type counts samples.
go tool pprof -sample_index=samples -top "$tmp/p.pb.gz" >"$tmp/topn.txt" 2>/dev/null ||
	fail "go tool pprof -sample_index=samples"
expect "$tmp/topn.txt" '^ +60 +60\.00% +60\.00% +60 +60\.00%  b$' "sample count of b"

# protoc with the reference schema decodes the inflated bytes.
gzip -dc "$tmp/p.pb.gz" >"$tmp/p.pb" || fail "gzip -d"
if ! protoc --decode=perftools.profiles.Profile --proto_path="$ref_proto" profile.proto \
	<"$tmp/p.pb" >"$tmp/decoded.txt" 2>"$tmp/decode.err"; then
	cat "$tmp/decode.err"
	fail "protoc cannot decode the profile with the reference schema"
fi
expect "$tmp/decoded.txt" '^string_table: ""$' "string_table[0]"
[ "$(grep -m1 '^string_table:' "$tmp/decoded.txt")" = 'string_table: ""' ] ||
	fail "the first string is not empty"
for s in samples count cpu nanoseconds main do_syscall_64 /usr/bin/app '\[kernel\.kallsyms\]' \
	pid tid thread_name process_name worker service checkout; do
	expect "$tmp/decoded.txt" "^string_table: \"$s\"$" "string $s"
done
expect "$tmp/decoded.txt" '^period: 1000000$' "period field"
expect "$tmp/decoded.txt" '^time_nanos: 1700000000000000000$' "time_nanos"
expect "$tmp/decoded.txt" '^duration_nanos: 1000000000$' "duration_nanos"
[ "$(grep -c '^sample {' "$tmp/decoded.txt")" = 4 ] || fail "not 4 samples"
[ "$(grep -c '^function {' "$tmp/decoded.txt")" = 5 ] || fail "not 5 functions"
[ "$(grep -c '^mapping {' "$tmp/decoded.txt")" = 2 ] || fail "not 2 mappings"

if [ "$fails" -ne 0 ]; then
	echo "--- go tool pprof -raw"
	cat "$tmp/raw.txt"
	echo "--- go tool pprof -top"
	cat "$tmp/top.txt"
	echo "$fails check(s) failed"
	exit 1
fi
echo "ok: go tool pprof and protoc read the profile as written"
