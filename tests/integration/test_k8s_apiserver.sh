#!/bin/bash
# Pod metadata from a real HTTPS server on 127.0.0.1 with a certificate made here: the pod
# list arrives (pod name, namespace, container, workload, service.name), the request carries
# the bearer token and the node's fieldSelector, the CA is checked, a rewritten token file is
# used after its re-read (on its period and on a 401), and a server that is down, answers
# 401/500 or sends malformed JSON leaves the last good snapshot in place without a crash.
# The kubelet source (/pods, self-signed serving certificate) is checked the same way.
# Needs no root: openssl and python3 (Debian packages openssl, python3).

. "$(dirname "$0")/lib.sh"

PROBE=$PP_TEST_BIN_DIR/pp_k8s_meta_probe
SERVER=$PP_SOURCE_DIR/tests/tools/pp_k8s_apiserver.py
DATA=$PP_SOURCE_DIR/tests/data/k8s
NODE=worker-1.example.internal
ID_APP=6dd6cf154425d58c7bdbef93750269e248335fcf325d9236c98151c3e8cfc841
ID_EXPORTER=6869e2ddc0775082b343fc685c67b2ad780fd3bea7abcd426775c38547cd99d1
ID_POSTGRES=720d3fd9deec5c8a6c55c3cf195841390fc3c212a74c54701a02ae1ef322345f
ID_REPORT=1948541e4b6653d2c7828765e41d46c41614bb8c4297688d4f94aca96ba6e04a
ID_COREDNS=c3fb9eb1a0e33249e44aa4f6fa081e7a96b960ea116ffc0f730b5a6178a4904b

[ -x "$PROBE" ] || pp_skip "$PROBE is not built"
command -v openssl >/dev/null || pp_skip "openssl is not installed (apt-get install openssl)"
"$PP_PYTHON" -c 'import ssl' 2>/dev/null || pp_skip "python3 has no ssl module"

# A self-signed certificate for 127.0.0.1 (it is its own CA), and an unrelated one.
for name in cert other; do
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$PP_TMP/$name.key" \
		-out "$PP_TMP/$name.pem" >/dev/null 2>&1 || pp_skip "openssl req failed"
done

SRV=$PP_TMP/srv
mkdir -p "$SRV"
"$PP_PYTHON" "$SERVER" --cert "$PP_TMP/cert.pem" --key "$PP_TMP/cert.key" --dir "$SRV" \
	--body "$DATA/podlist_apiserver.json" --node "$NODE" >"$PP_TMP/server.out" 2>&1 &
SERVER_PID=$!
PP_BG_PIDS="${PP_BG_PIDS:-} $SERVER_PID"
for _ in $(seq 100); do
	grep -q '^PORT ' "$PP_TMP/server.out" && break
	sleep 0.1
done
PORT=$(sed -n 's/^PORT //p' "$PP_TMP/server.out")
[ -n "$PORT" ] || {
	cat "$PP_TMP/server.out"
	pp_fail "the test server did not start"
	pp_finish
}
URL=https://127.0.0.1:$PORT

printf 'tok-1\n' >"$PP_TMP/token"
printf 'tok-1' >"$SRV/token_required"

# probe_start NAME ARGS...: the probe in the background, talked to through two fifos; probe NAME CMD: one command, its answer.
declare -A PIN POUT PPID_OF
probe_start() {
	local name=$1 fdin fdout
	shift
	mkfifo "$PP_TMP/$name.in" "$PP_TMP/$name.out"
	"$PROBE" "$@" <"$PP_TMP/$name.in" >"$PP_TMP/$name.out" 2>>"$PP_TMP/probe.err" &
	PPID_OF[$name]=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $!"
	exec {fdin}>"$PP_TMP/$name.in" {fdout}<"$PP_TMP/$name.out"
	PIN[$name]=$fdin
	POUT[$name]=$fdout
}
probe() {
	local name=$1 line out=""
	shift
	echo "$*" >&"${PIN[$name]}" || return 1
	while IFS= read -r -t 30 line <&"${POUT[$name]}"; do
		[ "$line" = end ] && break
		out+="$line"$'\n'
	done
	printf '%s' "$out"
}
probe_quit() {
	local name=$1
	echo quit >&"${PIN[$name]}"
	wait "${PPID_OF[$name]}"
}
# has TEXT WORD...: every word occurs in TEXT (as " word" or at the start).
has() {
	local text=" $1" w
	shift
	for w in "$@"; do
		case "$text" in
		*" $w"*) ;;
		*)
			echo "  missing '$w' in: $1"
			return 1
			;;
		esac
	done
}
last_request() { tail -n 1 "$SRV/requests.log"; }

pp_log "API server source against $URL"
probe_start api --source apiserver --api-url "$URL" --token "$PP_TMP/token" \
	--ca "$PP_TMP/cert.pem" --node "$NODE" --refresh-ms 600000 --miss-refresh-ms 100 \
	--token-ttl-ms 1000 --timeout-ms 3000

out=$(probe api wait 1 10000)
pp_check "the first pod list arrives over HTTPS ($out)" has "$out" "gen 1"
pp_check "the request carried the bearer token and the node's fieldSelector" \
	grep -q "^/api/v1/pods?fieldSelector=spec.nodeName%3D$NODE&resourceVersion=0	Bearer tok-1	200" \
	"$SRV/requests.log"

out=$(probe api lookup $ID_APP)
pp_check "Deployment pod: name, namespace, container, workload, service.name" has "$out" \
	rc=0 k8s.pod.name=checkout-7d9f8b6c5d-x2k9p k8s.namespace.name=shop \
	k8s.container.name=app k8s.deployment.name=checkout \
	k8s.replicaset.name=checkout-7d9f8b6c5d service.name=checkout \
	container.runtime=containerd k8s.node.name=$NODE
out=$(probe api lookup $ID_EXPORTER)
pp_check "DaemonSet pod, CRI-O, service.name from the container name" has "$out" \
	rc=0 k8s.daemonset.name=node-exporter service.name=node-exporter container.runtime=cri-o
out=$(probe api lookup $ID_POSTGRES)
pp_check "StatefulSet pod, docker" has "$out" rc=0 k8s.statefulset.name=postgres \
	k8s.pod.name=postgres-0 container.runtime=docker service.name=postgres
out=$(probe api lookup $ID_REPORT)
pp_check "CronJob through its Job" has "$out" rc=0 k8s.job.name=nightly-report-28934520 \
	k8s.cronjob.name=nightly-report
out=$(probe api lookup - af82255f-05f1-2293-d0b8-3f1e2fc6d124)
pp_check "pod UID alone finds the pod" has "$out" rc=0 by_pod_uid=1 \
	k8s.pod.name=checkout-7d9f8b6c5d-x2k9p

# Failures: each keeps the last good snapshot.
for mode in 500 malformed close 401; do
	echo "$mode" >"$SRV/mode"
	out=$(probe api refresh)
	case $mode in
	500) want=rc=-5 ;;
	malformed) want=rc=-71 ;;
	close) want=rc=-113 ;;
	401) want=rc=-13 ;;
	esac
	pp_check "server answers $mode: the fetch fails ($out)" has "$out" "$want"
	out=$(probe api lookup $ID_APP)
	pp_check "after $mode the last snapshot still answers" has "$out" rc=0 \
		k8s.pod.name=checkout-7d9f8b6c5d-x2k9p
done
out=$(probe api stats)
pp_check "state failing, with the reason ($out)" has "$out" state=failing gen=1 "error=HTTP" 401
echo ok >"$SRV/mode"

# Token rotation: read again after its period.
printf 'tok-2\n' >"$PP_TMP/token"
printf 'tok-2' >"$SRV/token_required"
sleep 1.2
out=$(probe api refresh)
pp_check "rewritten token file: used after the re-read ($out)" has "$out" rc=0
pp_check "the request carried the new token" grep -q "	Bearer tok-2	200$" "$SRV/requests.log"
out=$(probe api stats)
pp_check "state ok again ($out)" has "$out" state=ok gen=2

# Rotation inside the period: the 401 makes it read the file again and retry.
printf 'tok-3\n' >"$PP_TMP/token"
printf 'tok-3' >"$SRV/token_required"
out=$(probe api refresh)
pp_check "token rejected inside its period: re-read on 401, retried ($out)" has "$out" rc=0
pp_check "a 401 with tok-2, then 200 with tok-3" bash -c \
	"tail -n 2 '$SRV/requests.log' | tr '\t' ' ' | grep -q 'Bearer tok-2 401' &&
	 tail -n 1 '$SRV/requests.log' | grep -q 'Bearer tok-3	200'"

# A new pod: the miss asks for a refresh, served by the thread.
cp "$DATA/podlist_kubelet.json" "$SRV/body.json"
out=$(probe api lookup $ID_COREDNS)
pp_check "unknown container misses at first ($out)" has "$out" rc=-2
out=$(probe api wait 4 5000)
out=$(probe api lookup $ID_COREDNS)
pp_check "the refresh a miss asked for brings it ($out)" has "$out" rc=0 \
	k8s.deployment.name=coredns k8s.namespace.name=kube-system
rm -f "$SRV/body.json"

# Wrong CA: TLS verification fails, nothing is loaded, nothing crashes.
probe_start wrongca --source apiserver --api-url "$URL" --token "$PP_TMP/token" \
	--ca "$PP_TMP/other.pem" --node "$NODE" --refresh-ms 600000 --timeout-ms 3000
out=$(probe wrongca refresh)
pp_check "a server the CA does not vouch for is refused ($out)" has "$out" rc=-113
out=$(probe wrongca lookup $ID_APP)
pp_check "and lookups miss" has "$out" rc=-2
pp_check "the wrong-CA probe exits cleanly" probe_quit wrongca

# Kubelet: /pods, self-signed serving certificate accepted only with --insecure.
probe_start kubelet --source kubelet --kubelet-url "$URL" --token "$PP_TMP/token" \
	--ca /nonexistent/ca.crt --insecure --refresh-ms 600000 --timeout-ms 3000
out=$(probe kubelet wait 1 10000)
pp_check "kubelet /pods with an unverified serving certificate ($out)" has "$out" "gen 1"
pp_check "the kubelet request went to /pods with the token" grep -q "^/pods	Bearer tok-3	200" \
	"$SRV/requests.log"
out=$(probe kubelet lookup $ID_POSTGRES)
pp_check "kubelet source answers" has "$out" rc=0 k8s.statefulset.name=postgres
pp_check "the kubelet probe exits cleanly" probe_quit kubelet
probe_start kubelet2 --source kubelet --kubelet-url "$URL" --token "$PP_TMP/token" \
	--ca /nonexistent/ca.crt --refresh-ms 600000 --timeout-ms 3000
out=$(probe kubelet2 refresh)
pp_check "without --insecure the self-signed kubelet is refused ($out)" has "$out" rc=-113
pp_check "that probe exits cleanly" probe_quit kubelet2

# The server goes away for good.
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
out=$(probe api refresh)
pp_check "server down: the fetch fails ($out)" has "$out" rc=-113
out=$(probe api lookup $ID_APP)
pp_check "server down: the last snapshot still answers" has "$out" rc=0 \
	k8s.pod.name=checkout-7d9f8b6c5d-x2k9p
pp_check "the API server probe exits cleanly" probe_quit api
if grep -qi "sanitizer\|runtime error" "$PP_TMP/probe.err"; then
	pp_fail "sanitizer reports: $(head -5 "$PP_TMP/probe.err")"
fi
# Changes of state are logged once each, not per failure.
n=$(grep -c "failing:" "$PP_TMP/probe.err")
pp_check "failures logged once per change of state ($n lines)" test "$n" -le 6
pp_finish
