#!/bin/bash
# deploy/kubernetes (and its SYS_ADMIN variant) and the example stacks, without a cluster:
# every object against the Kubernetes schema with unknown fields refused (kubernetes-models),
# the DaemonSet's security and operational contract, the variant differing from the default
# only in capabilities, the ConfigMap's config file parsed by the agent itself, and the
# examples' versions, pipeline and endpoints. Broken copies must fail, so the checks can.
set -u
. "$PP_SOURCE_DIR/tests/deploy/common.sh"
need_node
need_agent
k8s="$deploy_dir/kubernetes"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tests_dir" || exit 1

plain=("$k8s"/*.yaml)
[ ${#plain[@]} -ge 6 ] || fail "expected >= 6 manifests in $k8s, found ${#plain[@]}"
node validate.mjs "${plain[@]}" "$k8s"/legacy-kernels/*.yaml \
	"$deploy_dir/examples/otel-collector/kubernetes.yaml" || fail "schema validation"
node check_security.mjs "${plain[@]}" || fail "security checks of deploy/kubernetes"
legacy=()
for f in "${plain[@]}"; do [ "$(basename "$f")" = daemonset.yaml ] || legacy+=("$f"); done
node check_security.mjs --legacy "${legacy[@]}" "$k8s/legacy-kernels/daemonset.yaml" ||
	fail "security checks of the SYS_ADMIN variant"
node compare.mjs --except /spec/template/spec/containers/0/securityContext/capabilities/add \
	"$k8s/daemonset.yaml" -- "$k8s/legacy-kernels/daemonset.yaml" >/dev/null ||
	fail "legacy-kernels/daemonset.yaml differs from daemonset.yaml beyond capabilities.add"

# Negative controls: each broken copy must be refused.
sed 's/hostPID: true/hostPIDD: true/' "$k8s/daemonset.yaml" >"$tmp/typo.yaml"
node validate.mjs "$tmp/typo.yaml" >/dev/null && fail "validate.mjs accepted the unknown field hostPIDD"
sed 's/hostPID: true/hostPID: "yes"/' "$k8s/daemonset.yaml" >"$tmp/type.yaml"
node validate.mjs "$tmp/type.yaml" >/dev/null && fail "validate.mjs accepted hostPID: \"yes\""
for mut in 's/privileged: false/privileged: true/' 's/allowPrivilegeEscalation: false/allowPrivilegeEscalation: true/' \
	's/add: \[BPF,/add: [SYS_ADMIN, BPF,/' 's/readOnly: true/readOnly: false/' \
	's/fieldPath: spec.nodeName/fieldPath: metadata.name/' 's/- operator: Exists/- operator: Equal/' \
	's|path: /healthz|path: /metrics|' 's|path: /livez|path: /healthz|' \
	's/containerPort: 9464/containerPort: 9465/'; do
	sed "$mut" "$k8s/daemonset.yaml" >"$tmp/daemonset.yaml"
	cmp -s "$tmp/daemonset.yaml" "$k8s/daemonset.yaml" && fail "mutation $mut changed nothing"
	others=()
	for f in "${plain[@]}"; do [ "$(basename "$f")" = daemonset.yaml ] || others+=("$f"); done
	node check_security.mjs "${others[@]}" "$tmp/daemonset.yaml" >/dev/null &&
		fail "check_security.mjs accepted the DaemonSet after $mut"
done

# The config file in the ConfigMap is one the agent accepts, with the values we meant.
node --input-type=module -e '
import fs from "node:fs"; import YAML from "yaml";
const cm = YAML.parse(fs.readFileSync(process.argv[1], "utf8"));
fs.writeFileSync(process.argv[2], cm.data["pebsprof.conf"]);' "$k8s/configmap.yaml" "$tmp/pebsprof.conf"
if out=$(dry_run "$tmp/pebsprof.conf" 2>&1); then
	for want in 'listen = :9464 .*from file' 'proc-root = /host/proc .*from file' \
		'k8s-source = auto .*from file' 'endpoint = http://.*:4040/v1development/profiles .*from file'; do
		printf '%s\n' "$out" | grep -Eq "$want" || fail "agent --dry-run of the ConfigMap: no line /$want/"
	done
else
	fail "the agent refused the ConfigMap's config file:"
	printf '%s\n' "$out"
fi
printf 'bogus-key = 1\n' >>"$tmp/pebsprof.conf"
dry_run "$tmp/pebsprof.conf" >/dev/null 2>&1 && fail "the agent accepted an unknown config key (dry-run proves nothing)"

# Examples, and the compose stack's agent environment as the agent resolves it.
if envline=$(node check_examples.mjs "$deploy_dir" | tee "$tmp/examples.out" | tail -1) &&
	grep -qx 'examples ok' "$tmp/examples.out"; then
	# shellcheck disable=SC2086
	out=$(env -i PATH="$PATH" $envline "$agent" run --dry-run 2>&1) ||
		fail "the agent refused the compose environment: $out"
	printf '%s\n' "$out" | grep -q '^endpoint = http://pyroscope:4040/v1development/profiles ' ||
		fail "compose agent endpoint does not resolve to Pyroscope's OTLP path: $(printf '%s\n' "$out" | grep ^endpoint)"
else
	cat "$tmp/examples.out"
	fail "example checks"
fi
finish
