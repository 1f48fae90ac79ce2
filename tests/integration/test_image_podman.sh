#!/bin/bash
# The agent's image as a cluster runs it: deploy/build-rootfs.sh stages the runtime tree (of
# the binary the other tests ran), podman builds deploy/Containerfile (FROM scratch, no
# registry) from it, and the container runs with the DaemonSet's settings: all capabilities
# dropped but BPF, PERFMON, SYS_PTRACE, DAC_READ_SEARCH and CHECKPOINT_RESTORE, a read-only
# root, the host's PID namespace, no-new-privileges, seccomp unconfined, the ConfigMap's file
# through PEBSPROF_CONFIG, the host's /proc at /host/proc and its cgroups, an emptyDir at
# /var/lib/pebsprof, and a network namespace of its own (slirp4netns, as a pod's) from which it
# sends to a sink on the host. A workload on the host must arrive with
# its function names; /healthz and /metrics answer through a published port; SIGTERM flushes
# the last window and exits 0.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
command -v podman >/dev/null || pp_skip "podman is not installed (scripts/setup.sh installs podman)"
command -v curl >/dev/null || pp_skip "curl is not installed"
[ -x "$PP_WORKLOAD" ] || pp_skip "the workload program is not built"

# Private storage (vfs: works on any file system), removed with the test's directory. runc and
# cgroupfs: crun refuses hosts with cgroup v1 and v2 mounted side by side. Resource limits no
# higher than the caller's: without SYS_RESOURCE (this CI's sandbox lacks it) none can be raised.
podman_() {
	podman --root "$T/storage" --runroot "$T/run" --storage-driver vfs --runtime runc \
		--cgroup-manager cgroupfs "$@"
}
cleanup_podman() {
	podman_ rm -f -t 0 pp-agent >/dev/null 2>&1
	podman_ rmi -f localhost/pebsprof:ci >/dev/null 2>&1
}
# the library's cleanup too: its trap is replaced, and with it the sink's kill and $PP_TMP
trap 'cleanup_podman; pp_cleanup' EXIT

# --- the image, from the staged tree ------------------------------------------------------------
mkdir -p "$T/ctx"
SECONDS=0
# The binary the other tests ran, staged (test_deploy_image runs the script's build from the
# Dockerfile's sources: beside the kernel matrix a second build here took over 2 minutes).
bash "$PP_SOURCE_DIR/deploy/build-rootfs.sh" --prebuilt "$PEBSPROF" \
	--stage "$T/ctx/rootfs" >"$T/rootfs.log" 2>&1 || { pp_show "$T/rootfs.log" 30; pp_fail "build-rootfs.sh failed"; pp_finish; }
staged=$SECONDS
podman_ build -q -f "$PP_SOURCE_DIR/deploy/Containerfile" -t localhost/pebsprof:ci "$T/ctx" \
	>"$T/build.out" 2>&1
pp_check "podman builds deploy/Containerfile from the staged tree" [ $? -eq 0 ]
echo "    the tree staged in $staged s, the image built by $SECONDS s"
[ "$(podman_ image inspect localhost/pebsprof:ci --format '{{.Config.Entrypoint}}' 2>/dev/null)" = "[/usr/bin/pebsprof]" ]
pp_check "the image's entry point is /usr/bin/pebsprof" [ $? -eq 0 ]
# At most what the runtime itself holds (podman's conmon keeps 32768 processes).
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")
if ! podman_ run --rm --network none "${limits[@]}" localhost/pebsprof:ci --version \
	>"$T/version.out" 2>&1; then
	pp_show "$T/version.out"
	pp_skip "podman cannot start containers on this host: $(tail -n1 "$T/version.out")"
fi

# --- the DaemonSet's container ------------------------------------------------------------------
mkdir -p "$T/config"
# The ConfigMap's pebsprof.conf, as the DaemonSet mounts it.
awk '/pebsprof.conf: \|/ { f = 1; next } f && /^    / { sub(/^    /, ""); print; next } f { f = 0 }' \
	"$PP_SOURCE_DIR/deploy/kubernetes/configmap.yaml" >"$T/config/pebsprof.conf"
pp_check "the ConfigMap's file was read" grep -q '^proc-root = /host/proc' "$T/config/pebsprof.conf"
pp_start_sink sink '[]'
[ -n "$SINK_PORT" ] || pp_skip "the sink did not start"
HOST_PORT=$((20000 + $$ % 20000))
podman_ run -d --name pp-agent "${limits[@]}" \
	--network slirp4netns:allow_host_loopback=true -p "127.0.0.1:$HOST_PORT:9464" \
	--pid host --read-only --cap-drop ALL --cap-add BPF,PERFMON,SYS_PTRACE,DAC_READ_SEARCH,CHECKPOINT_RESTORE \
	--security-opt no-new-privileges --security-opt seccomp=unconfined \
	-v "$T/config:/etc/pebsprof:ro" -v /sys/fs/cgroup:/sys/fs/cgroup:ro -v /proc:/host/proc:ro \
	--tmpfs /var/lib/pebsprof \
	-e NODE_NAME=ci-node -e PEBSPROF_CONFIG=/etc/pebsprof/pebsprof.conf \
	-e OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT="http://10.0.2.2:$SINK_PORT/v1development/profiles" \
	-e PEBSPROF_INTERVAL=2 \
	localhost/pebsprof:ci run >"$T/run.out" 2>&1
pp_check "the container starts with the DaemonSet's settings" [ $? -eq 0 ]
echo "    the container started at $SECONDS s"
"$PP_WORKLOAD" 5 >/dev/null 2>&1 &
WL=$!
health=""
for _ in $(seq 40); do
	health=$(curl -s "http://127.0.0.1:$HOST_PORT/healthz" 2>/dev/null) && [ -n "$health" ] && break
	sleep 0.25
done
wait "$WL"
sleep 2.5 # the window that holds the workload's end
health=$(curl -s "http://127.0.0.1:$HOST_PORT/healthz" 2>&1)
pp_check "/healthz answers ok through the published port ($health)" [ "${health%%;*}" = ok ]
curl -s "http://127.0.0.1:$HOST_PORT/metrics" >"$T/metrics" 2>&1
pp_check "/metrics counts samples" \
	awk '$1 == "pebsprof_samples_total" && $2 > 0 { ok = 1 } END { exit !ok }' "$T/metrics"
pp_check "the sink received profiles" ls "$PP_TMP/sink"/req-0000.body
pp_check "the workload's functions arrive by name (symbols read through /proc/PID/root)" \
	grep -qa burn_alpha "$PP_TMP/sink"/req-*.body
pp_check "a Kubernetes node's name: k8s.node.name" grep -qa ci-node "$PP_TMP/sink"/req-*.body
before=$(ls "$PP_TMP/sink"/req-*.body | wc -l)
podman_ stop -t 30 pp-agent >/dev/null 2>&1
rc=$(podman_ inspect pp-agent --format '{{.State.ExitCode}}' 2>/dev/null)
podman_ logs pp-agent >"$T/agent.log" 2>&1
pp_check "SIGTERM: the agent exits 0 (got $rc)" [ "$rc" = 0 ]
pp_check "SIGTERM: the last window is flushed to the sink" \
	[ "$(ls "$PP_TMP/sink"/req-*.body | wc -l)" -gt "$before" ]
pp_check "SIGTERM: the summary says nothing was dropped" \
	grep -q 'dropped 0 (' "$T/agent.log"
pp_check "no privilege warning with the DaemonSet's capabilities" \
	bash -c "! grep -Ei 'capabilit|permission|EPERM' '$T/agent.log'"
pp_finish
