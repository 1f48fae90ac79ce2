#!/bin/bash
# The agent with pod metadata, end to end: real cgroup v2 directories named as a kubelet
# names a containerd container (a Deployment's pod in namespace shop) and a CRI-O container (a
# StatefulSet's pod in namespace db), a workload in each, and a real HTTPS API server on
# 127.0.0.1 (certificate made here, bearer token required) listing those pods for this node.
# `pebsprof run` writes windows whose ResourceProfiles carry, per container, container.id,
# k8s.pod.name, k8s.namespace.name, k8s.container.name, the workload and service.name; the
# server saw the token and the node's fieldSelector. --namespace shop profiles only shop's
# pod. With the API server down, or answering 401 or malformed JSON, samples still go out
# with the cgroup-derived attributes. `record --off-cpu` gives the pod its off-CPU time.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
ref="${PP_SOURCE_DIR:?}/../shared/reference/opentelemetry-proto"
SERVER=$PP_SOURCE_DIR/tests/tools/pp_k8s_apiserver.py
[ -d "$ref/opentelemetry" ] && command -v protoc >/dev/null || pp_skip "needs protoc and $ref"
"$PP_PYTHON" -c 'import google.protobuf, ssl' 2>/dev/null || pp_skip "needs python3-protobuf"
command -v openssl >/dev/null || pp_skip "openssl is not installed (apt-get install openssl)"
pp_require_cgroup2
pp_otlp_python "$ref" "$T/gen" || pp_skip "protoc could not generate the python classes"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T/cert.key" -out "$T/cert.pem" \
	>/dev/null 2>&1 || pp_skip "openssl req failed"

hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
CID_A=$(hex 32)
CID_B=$(hex 32)
POD_A=$(cat /proc/sys/kernel/random/uuid)
POD_B=$(cat /proc/sys/kernel/random/uuid)
NODE=worker-$$
cg_a="$PP_CGROUP_BASE/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_A//-/_}.slice/cri-containerd-$CID_A.scope"
cg_b="$PP_CGROUP_BASE/kubepods.slice/kubepods-pod${POD_B//-/_}.slice/crio-$CID_B.scope"
mkdir -p "$cg_a" "$cg_b" || pp_skip "cannot create cgroups under $PP_CG2"

# The pod list the API server answers: the two pods, with a ReplicaSet and a StatefulSet owner.
"$PP_PYTHON" - "$T/pods.json" "$NODE" "$POD_A" "$CID_A" "$POD_B" "$CID_B" <<'PY'
import json, sys
out, node, pod_a, cid_a, pod_b, cid_b = sys.argv[1:]
def pod(name, ns, uid, labels, owner, cname, cid):
    return {"metadata": {"name": name, "namespace": ns, "uid": uid, "labels": labels,
                         "ownerReferences": [owner]},
            "spec": {"nodeName": node},
            "status": {"phase": "Running",
                       "containerStatuses": [{"name": cname, "containerID": cid}]}}
items = [
    pod("checkout-6b7f9c8d5-q2w3e", "shop", pod_a,
        {"app.kubernetes.io/name": "checkout", "pod-template-hash": "6b7f9c8d5"},
        {"kind": "ReplicaSet", "name": "checkout-6b7f9c8d5", "controller": True},
        "app", "containerd://" + cid_a),
    pod("postgres-0", "db", pod_b, {},
        {"kind": "StatefulSet", "name": "postgres", "controller": True},
        "postgres", "cri-o://" + cid_b),
]
json.dump({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items},
          open(out, "w"))
PY

SRV=$T/srv
mkdir -p "$SRV"
printf 'token-%s' "$$" >"$SRV/token_required"
printf 'token-%s\n' "$$" >"$T/token"
"$PP_PYTHON" "$SERVER" --cert "$T/cert.pem" --key "$T/cert.key" --dir "$SRV" \
	--body "$T/pods.json" --node "$NODE" >"$T/server.out" 2>&1 &
PP_BG_PIDS="${PP_BG_PIDS:-} $!"
for _ in $(seq 100); do
	grep -q '^PORT ' "$T/server.out" && break
	sleep 0.1
done
PORT=$(sed -n 's/^PORT //p' "$T/server.out")
[ -n "$PORT" ] || pp_skip "the test API server did not start"

# agent NAME ARGS...: the workloads and an agent run writing 2 s windows, stopped once two are
# written (at most 60 s: a busy machine starts it late); NAME.jsonl holds the resources of its
# last complete window. --sample-labels pid: samples name their process, so the checks can see
# whose samples a pod's resource holds.
agent() {
	local name=$1 pid
	shift
	pid_a=$(pp_start_in_cgroup "$cg_a" 60)
	pid_b=$(pp_start_in_cgroup "$cg_b" 60)
	"$PEBSPROF" run --output-dir "$T/$name" --interval 2 -F 199 --node-name "$NODE" \
		--k8s-api-url "https://127.0.0.1:$PORT" --k8s-token-file "$T/token" \
		--k8s-ca-file "$T/cert.pem" --sample-labels pid "$@" >"$T/$name.out" \
		2>"$T/$name.err" &
	pid=$!
	# three windows: the first (from the agent's start) and the last (to its stop) are
	# partial, so two whole ones are written before the stop
	for _ in $(seq 900); do
		[ "$(ls "$T/$name"/pebsprof-*.otlp.pb 2>/dev/null | wc -l)" -ge 3 ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$pid"
	pp_wait_pid "$pid" 30
	kill "$pid_a" "$pid_b" 2>/dev/null
	wait "$pid_a" "$pid_b" 2>/dev/null
	# Of the windows before the last, the one with the most containers: on a busy machine a
	# workload can go a whole window without a sample (seen beside the kernel matrix).
	local f best=0 n
	: >"$T/$name.jsonl"
	for f in $(ls "$T/$name"/pebsprof-*.otlp.pb 2>/dev/null | sort | head -n -1); do
		"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/otlp_resources.py" "$T/gen" "$f" \
			>"$f.jsonl" || continue
		n=$(grep -c '"container.id"' "$f.jsonl")
		[ "$n" -ge "$best" ] && best=$n && cp "$f.jsonl" "$T/$name.jsonl"
	done
}

has_attr() { # JSONL CONTAINER_ID KEY VALUE
	grep "\"container.id\": \"$2\"" "$1" | grep -q "\"$3\": \"$4\""
}

# --- pod metadata arrives -------------------------------------------------------------------
agent all --k8s-source apiserver
pp_check "run exits 0 on SIGTERM" [ "$PP_RC" -eq 0 ]
J=$T/all.jsonl
pp_check "containerd container: k8s.pod.name" has_attr "$J" "$CID_A" k8s.pod.name checkout-6b7f9c8d5-q2w3e
pp_check "containerd container: k8s.namespace.name" has_attr "$J" "$CID_A" k8s.namespace.name shop
pp_check "containerd container: k8s.container.name" has_attr "$J" "$CID_A" k8s.container.name app
pp_check "containerd container: k8s.deployment.name through the ReplicaSet" \
	has_attr "$J" "$CID_A" k8s.deployment.name checkout
pp_check "containerd container: service.name from app.kubernetes.io/name" \
	has_attr "$J" "$CID_A" service.name checkout
pp_check "containerd container: k8s.pod.uid" has_attr "$J" "$CID_A" k8s.pod.uid "$POD_A"
pp_check "CRI-O container: k8s.statefulset.name" has_attr "$J" "$CID_B" k8s.statefulset.name postgres
pp_check "CRI-O container: service.name is the container name without the label" \
	has_attr "$J" "$CID_B" service.name postgres
pp_check "CRI-O container: k8s.namespace.name" has_attr "$J" "$CID_B" k8s.namespace.name db
pp_check "CRI-O container: the workload's samples (pid $pid_b)" \
	bash -c "grep '\"container.id\": \"$CID_B\"' '$J' | grep -q '\"pids\": \[$pid_b\]'"
pp_check "the API server saw the bearer token" grep -q "Bearer token-$$" "$SRV/requests.log"
pp_check "the list asked only for this node's pods" \
	grep -q "fieldSelector=spec.nodeName%3D$NODE" "$SRV/requests.log"
pp_check "k8s.node.name is the node" grep -q "\"k8s.node.name\": \"$NODE\"" "$J"

# --- --namespace profiles one namespace ----------------------------------------------------------
agent ns --k8s-source apiserver --namespace shop
pp_check "--namespace: run exits 0" [ "$PP_RC" -eq 0 ]
pp_check "--namespace shop: the shop pod's container is there" \
	has_attr "$T/ns.jsonl" "$CID_A" k8s.namespace.name shop
pp_check "--namespace shop: nothing else (one resource)" [ "$(wc -l <"$T/ns.jsonl")" -eq 1 ]

# --- record in the agent's pod: `kubectl exec` gets the pod's environment and config file -----
# The API server first lists only pod A; pod B's container, unknown at the first fetch, is
# named by the one more fetch record makes before it writes.
"$PP_PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1])); d["items"] = d["items"][:1]; json.dump(d, open(sys.argv[2], "w"))' \
	"$T/pods.json" "$SRV/body.json"
cat >"$T/agent.conf" <<EOF
k8s-source = auto
k8s-token-file = $T/token
k8s-ca-file = $T/cert.pem
# keys of run alone are not record's to check
endpoint = not a URL
EOF
: >"$SRV/requests.log"
pid_a=$(pp_start_in_cgroup "$cg_a" 60)
pid_b=$(pp_start_in_cgroup "$cg_b" 60)
# a program that waits, in pod A too: its off-CPU time is the pod's
sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" 20' sh "$cg_a" "$PP_TEST_BIN_DIR/pp_waits" \
	>/dev/null 2>&1 &
pid_w=$!
env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" NODE_NAME="$NODE" \
	PEBSPROF_CONFIG="$T/agent.conf" "$PEBSPROF" record -q -a -d 3 -F 199 --off-cpu \
	-o "$T/rec.otlp.pb" >"$T/rec.out" 2>"$T/rec.err" &
rec=$!
# the first list (pod A alone) answers the fetch before sampling; then the whole list
pp_wait_line "$rec" "$SRV/requests.log" . 30 || :
rm -f "$SRV/body.json"
pp_wait_pid "$rec" 30
kill "$pid_a" "$pid_b" "$pid_w" 2>/dev/null
wait "$pid_a" "$pid_b" "$pid_w" 2>/dev/null
pp_check "record in the pod: exits 0" [ "$PP_RC" -eq 0 ]
J=$T/rec.jsonl
"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/otlp_resources.py" "$T/gen" "$T/rec.otlp.pb" >"$J"
pp_check "record in the pod: k8s.pod.name from the API server" \
	has_attr "$J" "$CID_A" k8s.pod.name checkout-6b7f9c8d5-q2w3e
pp_check "record in the pod: k8s.deployment.name" has_attr "$J" "$CID_A" k8s.deployment.name checkout
pp_check "record --off-cpu in the pod: the pod's off_cpu Profile (pp_waits' waits)" \
	bash -c "grep '\"container.id\": \"$CID_A\"' '$J' | grep -q 'off_cpu/nanoseconds'"
pp_check "record in the pod: k8s.node.name from NODE_NAME" grep -q "\"k8s.node.name\": \"$NODE\"" "$J"
pp_check "record in the pod: a container missing from the first list is named (postgres-0)" \
	has_attr "$J" "$CID_B" k8s.pod.name postgres-0
pp_check "record in the pod: the token file from the config file was used" \
	grep -q "Bearer token-$$" "$SRV/requests.log"
pp_check "record in the pod: one fetch before sampling, one before writing" \
	[ "$(wc -l <"$SRV/requests.log")" -eq 2 ]

# The same keys as flags; outside a cluster (no KUBERNETES_SERVICE_HOST) auto fetches nothing.
lacks() { ! grep -q "$@"; }
record_in_b() { # NAME ARGS...: a 2 s system-wide record while pod B's workload runs
	local name=$1 pid
	shift
	# it runs until the record ends, however long the record takes to start on a busy machine
	pid=$(pp_start_in_cgroup "$cg_b" 60)
	"$PEBSPROF" record -q -a -d 2 -F 199 -o "$T/$name.otlp.pb" "$@" >"$T/$name.out" 2>&1
	PP_RC=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/otlp_resources.py" "$T/gen" \
		"$T/$name.otlp.pb" >"$T/$name.jsonl"
}
record_in_b rec-flags --k8s-source apiserver --k8s-api-url "https://127.0.0.1:$PORT" \
	--k8s-token-file "$T/token" --k8s-ca-file "$T/cert.pem" --node-name "$NODE"
pp_check "record with --k8s-* flags: exits 0" [ "$PP_RC" -eq 0 ]
if has_attr "$T/rec-flags.jsonl" "$CID_B" k8s.statefulset.name postgres; then
	pp_ok "record with --k8s-* flags: k8s.statefulset.name"
else
	pp_fail "record with --k8s-* flags: no k8s.statefulset.name on pod B's container"
	pp_show "$T/rec-flags.out" 20
	grep "$CID_B" "$T/rec-flags.jsonl" | cut -c1-600 | sed 's/^/    | resource: /'
	tail -n 3 "$SRV/requests.log" | sed 's/^/    | request: /'
fi
: >"$SRV/requests.log"
KUBERNETES_SERVICE_HOST='' record_in_b rec-none
pp_check "record outside a cluster: the container's runtime still arrives" \
	has_attr "$T/rec-none.jsonl" "$CID_B" container.runtime cri-o
pp_check "record outside a cluster: no pod name" lacks k8s.pod.name "$T/rec-none.jsonl"
pp_check "record outside a cluster: no request" [ ! -s "$SRV/requests.log" ]
"$PEBSPROF" record --k8s-source nowhere -d 1 -o "$T/x.folded" 2>"$T/rec-bad.err"
pp_check "record with a bad --k8s-source: exit 2" [ $? -eq 2 ]
pp_check "record with a bad --k8s-source: the message names the key" \
	grep -q 'k8s-source' "$T/rec-bad.err"

# --- the API server fails: the cgroup-derived attributes still go out ---------------------------
for mode in 401 malformed down; do
	if [ "$mode" = down ]; then
		args=(--k8s-api-url "https://127.0.0.1:1")
	else
		printf '%s' "$mode" >"$SRV/mode"
		args=()
	fi
	agent "fail-$mode" --k8s-source apiserver "${args[@]}"
	J=$T/fail-$mode.jsonl
	pp_check "API server $mode: run exits 0" [ "$PP_RC" -eq 0 ]
	pp_check "API server $mode: container.id and runtime still arrive" \
		has_attr "$J" "$CID_A" container.runtime containerd
	pp_check "API server $mode: k8s.pod.uid from the cgroup path" \
		has_attr "$J" "$CID_A" k8s.pod.uid "$POD_A"
	pp_check "API server $mode: no pod name made up" \
		bash -c "! grep '\"container.id\": \"$CID_A\"' '$J' | grep -q k8s.pod.name"
	pp_check "API server $mode: the failure is logged" grep -qi "pod metadata" "$T/fail-$mode.err"
done
pp_finish
