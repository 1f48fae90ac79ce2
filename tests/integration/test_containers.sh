#!/bin/bash
# Container attribution on real cgroup v2 directories: three cgroups named as a kubelet with
# the systemd driver names them (a containerd, a CRI-O and a docker container in burstable and
# besteffort pods), one workload started inside each and one outside, then
# `pebsprof record -a -o x.otlp.pb`: each container arrives as its own ResourceProfiles with
# container.id, container.runtime and k8s.pod.uid, holding exactly the samples of the workload
# that ran in it; the outside workload has none of them. Then --container-id and --cgroup
# profile only the selected container.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference/opentelemetry-proto"
[ -d "$ref/opentelemetry" ] && command -v protoc >/dev/null || pp_skip "needs protoc and $ref"
"$PP_PYTHON" -c 'import google.protobuf' 2>/dev/null || pp_skip "needs python3-protobuf"
# mountinfo: field 5 is the mount point, the type follows the " - " separator.
pp_require_cgroup2
pp_otlp_python "$ref" "$T/gen" || pp_skip "protoc could not generate the python classes"

CID_A=$(printf 'a%.0s' {1..8})$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
CID_B=$(printf 'b%.0s' {1..8})$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
CID_C=$(printf 'c%.0s' {1..8})$(head -c 28 /dev/urandom | od -An -tx1 | tr -d ' \n')
POD_1=$(cat /proc/sys/kernel/random/uuid)
POD_2=$(cat /proc/sys/kernel/random/uuid)
kp="$PP_CGROUP_BASE/kubepods.slice"
pod1="$kp/kubepods-burstable.slice/kubepods-burstable-pod${POD_1//-/_}.slice"
pod2="$kp/kubepods-besteffort.slice/kubepods-besteffort-pod${POD_2//-/_}.slice"
cg_a="$pod1/cri-containerd-$CID_A.scope"
cg_b="$pod1/crio-$CID_B.scope"
cg_c="$pod2/docker-$CID_C.scope"
mkdir -p "$cg_a" "$cg_b" "$cg_c" || pp_skip "cannot create cgroups under $PP_CG2"

# capture OUT ARGS...: a 3 s system-wide capture while the four workloads run (until it ends,
# however long it takes to start on a busy machine).
capture() {
	local out=$1
	shift
	pid_a=$(pp_start_in_cgroup "$cg_a" 60)
	pid_b=$(pp_start_in_cgroup "$cg_b" 60)
	pid_c=$(pp_start_in_cgroup "$cg_c" 60)
	"$PP_WORKLOAD" 60 >/dev/null 2>&1 &
	pid_host=$!
	sleep 0.3
	local before_a before_b before_c
	before_a=$(cpu_ticks "$pid_a") before_b=$(cpu_ticks "$pid_b") before_c=$(cpu_ticks "$pid_c")
	pp_run "$T/rec" "$PEBSPROF" record -q -a -d 3 -e cpu-clock -F 199 "$@" -o "$out"
	ticks_a=$(($(cpu_ticks "$pid_a") - before_a))
	ticks_b=$(($(cpu_ticks "$pid_b") - before_b))
	ticks_c=$(($(cpu_ticks "$pid_c") - before_c))
	kill "$pid_a" "$pid_b" "$pid_c" "$pid_host" 2>/dev/null
	wait "$pid_a" "$pid_b" "$pid_c" "$pid_host" 2>/dev/null
	"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/otlp_resources.py" "$T/gen" "$out" \
		>"$out.json"
}

# cpu_ticks PID: the CPU time PID has had, user and system, in clock ticks.
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# resource_of JSONL CONTAINER_ID: the one resource line of that container.
resource_of() {
	grep "\"container.id\": \"$2\"" "$1"
}

check_container() {
	local jsonl=$1 cid=$2 runtime=$3 pod=$4 pid=$5 line
	line=$(resource_of "$jsonl" "$cid")
	pp_check "$runtime container has exactly one ResourceProfiles" \
		[ "$(resource_of "$jsonl" "$cid" | wc -l)" -eq 1 ]
	pp_check "$runtime container: container.runtime=$runtime" \
		grep -q "\"container.runtime\": \"$runtime\"" <<<"$line"
	pp_check "$runtime container: k8s.pod.uid=$pod" grep -q "\"k8s.pod.uid\": \"$pod\"" <<<"$line"
	pp_check "$runtime container: its samples are its workload's (pid $pid)" \
		grep -q "\"pids\": \[$pid\]" <<<"$line"
	# a spinner for 3 s at 199 Hz: hundreds on a quiet machine, 40 seen beside the test suite
	# and two busy loops, and beside the kernel matrix a container whose spinner had a few
	# ticks of CPU in the whole capture; the check asks for some where it ran (1.5 s of CPU
	# while the capture ran, start-up included, is ten samples for certain)
	local ran=${6:-0} least=1
	[ "$ran" -ge $((150 * $(getconf CLK_TCK) / 100)) ] && least=10
	pp_check "$runtime container: it has samples (at least $least: it ran $ran ticks)" \
		"$PP_PYTHON" -c 'import json,sys
n = json.loads(sys.argv[1])["samples"]
print(f"  {n} samples") if n < int(sys.argv[2]) else None
sys.exit(n < int(sys.argv[2]))' "$line" "$least"
}

capture "$T/all.otlp.pb"
pp_check "record -a exits 0" [ "$PP_RC" -eq 0 ]
check_container "$T/all.otlp.pb.json" "$CID_A" containerd "$POD_1" "$pid_a" "$ticks_a"
check_container "$T/all.otlp.pb.json" "$CID_B" cri-o "$POD_1" "$pid_b" "$ticks_b"
check_container "$T/all.otlp.pb.json" "$CID_C" docker "$POD_2" "$pid_c" "$ticks_c"
pp_check "the host workload is in no container resource" \
	bash -c "! grep '\"container.id\"' '$T/all.otlp.pb.json' | grep -q '[^0-9]$pid_host[],]'"
pp_check "the host workload has samples of its own" \
	grep -q "[[ ]$pid_host[],]" "$T/all.otlp.pb.json"

capture "$T/one.otlp.pb" --container-id "${CID_B:0:12}"
pp_check "record --container-id exits 0" [ "$PP_RC" -eq 0 ]
pp_check "--container-id: only that container's resource" \
	[ "$(wc -l <"$T/one.otlp.pb.json")" -eq 1 ]
check_container "$T/one.otlp.pb.json" "$CID_B" cri-o "$POD_1" "$pid_b" "$ticks_b"

capture "$T/pod.otlp.pb" --cgroup "${pod1#$PP_CG2}"
pp_check "record --cgroup exits 0" [ "$PP_RC" -eq 0 ]
pp_check "--cgroup POD: the pod's two containers and nothing else" \
	[ "$(wc -l <"$T/pod.otlp.pb.json")" -eq 2 ]
check_container "$T/pod.otlp.pb.json" "$CID_A" containerd "$POD_1" "$pid_a" "$ticks_a"

pp_run "$T/bad" "$PEBSPROF" record -q -a -d 1 --container-id 0123456789ab -o "$T/x.pb.gz"
pp_check "an unknown container id is a usage error (exit 2)" [ "$PP_RC" -eq 2 ]
pp_check "... and says so" grep -q "no such container" "$T/bad.err"
pp_run "$T/bad2" "$PEBSPROF" record -q -a -d 1 --container-id 12ab -o "$T/x.pb.gz"
pp_check "a container id prefix under 12 digits is a usage error" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q 'at least its first 12 hex digits' '$T/bad2.err'"
pp_run "$T/bad3" "$PEBSPROF" record -q -a -d 1 --cgroup /pp-no-such-cgroup -o "$T/x.pb.gz"
pp_check "a cgroup that does not exist is a usage error" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q 'no such cgroup' '$T/bad3.err'"
pp_run "$T/bad4" "$PEBSPROF" run --namespace shop --k8s-source none --output-dir "$T/none"
pp_check "run --namespace without pod metadata is a usage error" \
	bash -c "[ $PP_RC -eq 2 ] && grep -q 'needs pod metadata' '$T/bad4.err'"
pp_finish
