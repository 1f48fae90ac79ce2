#!/bin/bash
# `pebsprof record -o FILE.otlp.pb` on a live capture: the request is read by decoders built
# from the official opentelemetry-proto schema (protoc --decode, and python classes checked
# by tests/conformance/otlp_check.py for the encoding rules), carries the workload's process
# as a resource with service.name inline, and names its functions.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference/opentelemetry-proto"
msg=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
svc=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
if [ ! -d "$ref/opentelemetry" ] || ! command -v protoc >/dev/null; then
	pp_skip "needs protoc and the reference schema at $ref"
fi

pp_run "$T/r" env OTEL_SERVICE_NAME=checkout OTEL_RESOURCE_ATTRIBUTES=deployment.environment=ci \
	"$PEBSPROF" record -q -e cpu-clock -F 499 -o "$T/w.otlp.pb" -- "$PP_TEST_BIN_DIR/pp_workload" 2
pp_check "record exits 0" [ "$PP_RC" -eq 0 ]
pp_check "an OTLP file is written" [ -s "$T/w.otlp.pb" ]

(cd "$ref" && protoc --decode="$msg" "$svc") <"$T/w.otlp.pb" >"$T/decoded.txt" 2>"$T/decode.err"
pp_check "protoc decodes it with the official schema" [ $? -eq 0 ]
pp_check "service.name from OTEL_SERVICE_NAME" grep -q 'string_value: "checkout"' "$T/decoded.txt"
pp_check "OTEL_RESOURCE_ATTRIBUTES arrive" grep -q 'key: "deployment.environment"' "$T/decoded.txt"
pp_check "the workload's functions are named" grep -q '"burn_alpha"' "$T/decoded.txt"
pp_check "process.executable.path is the workload's path" \
	bash -c "grep -A3 'key: \"process.executable.path\"' '$T/decoded.txt' | grep -q 'pp_workload\"'"
pp_check "CPU profile period type" grep -q '"nanoseconds"' "$T/decoded.txt"

py=/usr/bin/python3
if "$py" -c 'import google.protobuf' 2>/dev/null; then
	pp_otlp_python "$ref" "$T/gen"
	pp_check "the encoding rules hold (otlp_check.py)" \
		"$py" "$PP_SOURCE_DIR/tests/conformance/otlp_check.py" "$T/gen" "$T/w.otlp.pb"
else
	echo "  (python3-protobuf missing: the rule check is skipped)"
fi
pp_finish
