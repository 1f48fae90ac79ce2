#!/bin/bash
# Our proto/ files must stay wire-equal to the reference .proto files they copy: descriptor
# sets of both are compared message by message, field by field (proto_equal.py). Add a line
# to PAIRS for each copied .proto (OTLP ones included).
set -u

: "${PP_SOURCE_DIR:?}" "${PP_REFERENCE_DIR:?}"
here=$(cd "$(dirname "$0")" && pwd)

# "our proto_path|our file|reference proto_path|reference file"
PAIRS=(
	"$PP_SOURCE_DIR/proto|pprof/profile.proto|$PP_REFERENCE_DIR/pprof/proto|profile.proto"
	"$PP_SOURCE_DIR/proto|opentelemetry/proto/common/v1/common.proto|$PP_REFERENCE_DIR/opentelemetry-proto|opentelemetry/proto/common/v1/common.proto"
	"$PP_SOURCE_DIR/proto|opentelemetry/proto/resource/v1/resource.proto|$PP_REFERENCE_DIR/opentelemetry-proto|opentelemetry/proto/resource/v1/resource.proto"
	"$PP_SOURCE_DIR/proto|opentelemetry/proto/profiles/v1development/profiles.proto|$PP_REFERENCE_DIR/opentelemetry-proto|opentelemetry/proto/profiles/v1development/profiles.proto"
	"$PP_SOURCE_DIR/proto|opentelemetry/proto/collector/profiles/v1development/profiles_service.proto|$PP_REFERENCE_DIR/opentelemetry-proto|opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
)

if ! command -v protoc >/dev/null; then
	echo "skipped: protoc not found (Debian package protobuf-compiler)"
	exit 77
fi
# python3-protobuf is installed for the system interpreter; another python3 earlier in PATH
# may lack it.
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

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=()
i=0
for pair in "${PAIRS[@]}"; do
	IFS='|' read -r our_path our_file ref_path ref_file <<<"$pair"
	if [ ! -f "$ref_path/$ref_file" ]; then
		echo "FAIL: reference $ref_path/$ref_file not found"
		exit 1
	fi
	protoc --proto_path="$our_path" --include_imports \
		--descriptor_set_out="$tmp/ours$i.pb" "$our_file" || {
		echo "FAIL: protoc rejects $our_path/$our_file"
		exit 1
	}
	protoc --proto_path="$ref_path" --include_imports \
		--descriptor_set_out="$tmp/ref$i.pb" "$ref_file" || {
		echo "FAIL: protoc rejects $ref_path/$ref_file"
		exit 1
	}
	args+=("$tmp/ours$i.pb" "$tmp/ref$i.pb")
	i=$((i + 1))
done

# Self-check: the comparison must notice a difference (an edited copy of our first file).
IFS='|' read -r our_path our_file _ _ <<<"${PAIRS[0]}"
mkdir -p "$tmp/mut/$(dirname "$our_file")"
sed -E '0,/= 2;/s/= 2;/= 22;/' "$our_path/$our_file" >"$tmp/mut/$our_file"
if cmp -s "$our_path/$our_file" "$tmp/mut/$our_file"; then
	echo "FAIL: self-check could not mutate $our_file"
	exit 1
fi
if ! protoc --proto_path="$tmp/mut" --include_imports --descriptor_set_out="$tmp/mut.pb" \
	"$our_file"; then
	echo "FAIL: self-check: protoc rejects the mutated copy"
	exit 1
fi
if "$py" "$here/proto_equal.py" "$tmp/mut.pb" "$tmp/ref0.pb" >"$tmp/mut.out"; then
	echo "FAIL: self-check: proto_equal.py did not notice a changed field number"
	exit 1
fi
echo "self-check: a changed field number is detected: $(grep -m1 'differs\|missing' "$tmp/mut.out")"

"$py" "$here/proto_equal.py" "${args[@]}"
