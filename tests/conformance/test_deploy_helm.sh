#!/bin/bash
# The Helm chart deploy/helm/pebsprof, rendered without helm by tests/deploy/render (Go's
# text/template + Debian's sprig): with default values it renders the same objects as
# deploy/kubernetes (parsed YAML compared, not text); createNamespace + legacyKernel give the
# namespace and the SYS_ADMIN variant; other values (endpoint, headers Secret, event,
# frequency, interval, k8s source, resources, image, namespace) land where they should, pass
# the schema and security checks, and yield a config file the agent accepts; kernelImage
# debuginfod sizes the state volume for the kernel's image and needs servers.
set -u
. "$PP_SOURCE_DIR/tests/deploy/common.sh"
need_node
need_agent
command -v go >/dev/null || skip "go not found (Debian package golang-go)"
gopath=/usr/share/gocode
for pkg in github.com/Masterminds/sprig sigs.k8s.io/yaml; do
	[ -d "$gopath/src/$pkg" ] || skip "$pkg not in $gopath (Debian packages golang-github-masterminds-sprig-dev, golang-k8s-sigs-yaml-dev)"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k8s="$deploy_dir/kubernetes"
chart="$deploy_dir/helm/pebsprof"

# GOPATH mode against Debian's packaged sources: offline, no module proxy.
if ! (cd "$tests_dir/render" && GO111MODULE=off GOPATH="$gopath" GOCACHE="$tmp/gocache" \
	GOFLAGS= go build -o "$tmp/render" main.go); then
	fail "building tests/deploy/render"
	finish
fi
render() { "$tmp/render" --chart "$chart" --release-name pebsprof --namespace pebsprof "$@"; }
cd "$tests_dir" || exit 1

# 1. Defaults: deploy/kubernetes without the Namespace (helm --create-namespace makes it).
render >"$tmp/default.yaml" || fail "render with default values"
plain=()
for f in "$k8s"/*.yaml; do [ "$(basename "$f")" = 00-namespace.yaml ] || plain+=("$f"); done
node compare.mjs "${plain[@]}" -- "$tmp/default.yaml" || fail "default values do not render deploy/kubernetes"
node validate.mjs "$tmp/default.yaml" >/dev/null || fail "schema of the default rendering"

# 2. createNamespace + legacyKernel: the whole directory with the SYS_ADMIN DaemonSet.
render --set createNamespace=true --set legacyKernel=true >"$tmp/legacy.yaml" || fail "render legacy"
full=()
for f in "$k8s"/*.yaml; do [ "$(basename "$f")" = daemonset.yaml ] || full+=("$f"); done
node compare.mjs "${full[@]}" "$k8s/legacy-kernels/daemonset.yaml" -- "$tmp/legacy.yaml" ||
	fail "createNamespace+legacyKernel do not render deploy/kubernetes with legacy-kernels/daemonset.yaml"

# 3. Every documented value, changed.
cat >"$tmp/values.yaml" <<'VALUES'
namespace: profiling
endpoint: "http://{{ .Release.Name }}-gw.obs:4318/v1development/profiles"
headers:
  secretName: tenant-headers
  secretKey: otlp
  optional: false
event: cycles
freq: 49
interval: 15
k8sSource: kubelet
listenPort: 9500
image:
  repository: registry.example.com/pebsprof
  tag: "9.9.9"
resources:
  requests: {cpu: 20m, memory: 48Mi}
  limits: {memory: 128Mi}
extraConfig:
  stack-depth: 64
extraEnv:
  - name: OTEL_RESOURCE_ATTRIBUTES
    value: k8s.cluster.name=prod
rbac:
  kubeletSource: true
VALUES
render --release-name prof -f "$tmp/values.yaml" >"$tmp/custom.yaml" || fail "render with custom values"
node validate.mjs "$tmp/custom.yaml" >/dev/null || fail "schema of the custom rendering"
node check_security.mjs "$tmp/custom.yaml" >"$tmp/sec.out" || { cat "$tmp/sec.out"; fail "security checks of the custom rendering"; }
node --input-type=module -e '
import fs from "node:fs"; import YAML from "yaml";
const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJS()).filter(Boolean);
const get = (k) => docs.find((o) => o.kind === k);
const ds = get("DaemonSet"), cm = get("ConfigMap"), role = get("ClusterRole");
const c = ds.spec.template.spec.containers[0];
const env = Object.fromEntries(c.env.map((e) => [e.name, e]));
const conf = cm.data["pebsprof.conf"];
fs.writeFileSync(process.argv[2], conf);
const want = [
  [ds.metadata.name === "prof-pebsprof", "full name prof-pebsprof"],
  [docs.filter((o) => o.metadata.namespace).every((o) => o.metadata.namespace === "profiling"), "namespace profiling everywhere"],
  [c.image === "registry.example.com/pebsprof:9.9.9", "image repository:tag"],
  [JSON.stringify(env.OTEL_EXPORTER_OTLP_HEADERS.valueFrom.secretKeyRef) === JSON.stringify({ name: "tenant-headers", key: "otlp", optional: false }), "headers from secret tenant-headers/otlp"],
  [env.OTEL_RESOURCE_ATTRIBUTES?.value === "k8s.cluster.name=prod", "extraEnv"],
  [c.resources.requests.memory === "48Mi" && c.resources.limits.memory === "128Mi" && c.resources.requests.cpu === "20m", "resources"],
  [c.ports[0].containerPort === 9500 && ds.spec.template.metadata.annotations["prometheus.io/port"] === "9500", "listen port 9500"],
  [conf.includes("endpoint = http://prof-gw.obs:4318/v1development/profiles\n"), "endpoint through tpl"],
  [/^event = cycles$/m.test(conf) && /^freq = 49$/m.test(conf) && /^interval = 15$/m.test(conf), "event, freq, interval"],
  [/^k8s-source = kubelet$/m.test(conf) && /^listen = :9500$/m.test(conf) && /^stack-depth = 64$/m.test(conf), "k8s-source, listen, extraConfig"],
  [role.rules.some((r) => r.resources.includes("nodes/proxy") && r.verbs.join() === "get"), "nodes/proxy get for the kubelet source"],
];
let bad = 0;
for (const [ok, what] of want) if (!ok) { console.log("FAIL custom values: " + what); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/custom.yaml" "$tmp/custom.conf" || fail "custom values not rendered as set"
if out=$(dry_run "$tmp/custom.conf" 2>&1); then
	for want in 'event = cycles .*from file' 'freq = 49 .*from file' 'interval = 15 .*from file' \
		'k8s-source = kubelet .*from file' 'stack-depth = 64 .*from file'; do
		printf '%s\n' "$out" | grep -Eq "$want" || fail "agent --dry-run of the custom config: no line /$want/"
	done
else
	fail "the agent refused the rendered config file:"
	printf '%s\n' "$out"
fi

# 4. The otel-collector example's values; required values are enforced.
render -f "$deploy_dir/examples/otel-collector/pebsprof-values.yaml" >"$tmp/otel.yaml" &&
	grep -q 'endpoint = http://otel-collector.observability.svc.cluster.local:4318/v1development/profiles' "$tmp/otel.yaml" ||
	fail "examples/otel-collector/pebsprof-values.yaml does not set the endpoint"
if render --set endpoint= >/dev/null 2>"$tmp/err"; then
	fail "an empty endpoint rendered"
else
	grep -q 'endpoint is required' "$tmp/err" || fail "empty endpoint: unexpected error $(cat "$tmp/err")"
fi
# 5. The kernel's image from debuginfod: the state volume sized for it, and only with servers.
render --set debuginfod=http://debuginfod.infra:8002 --set kernelImage=debuginfod \
	>"$tmp/kimage.yaml" || fail "render with kernelImage debuginfod"
node validate.mjs "$tmp/kimage.yaml" >/dev/null || fail "schema of the kernelImage debuginfod rendering"
node --input-type=module -e '
import fs from "node:fs"; import YAML from "yaml";
const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJS()).filter(Boolean);
const ds = docs.find((o) => o.kind === "DaemonSet"), conf = docs.find((o) => o.kind === "ConfigMap").data["pebsprof.conf"];
const vol = ds.spec.template.spec.volumes.find((v) => v.name === "profiles");
const ok = vol?.emptyDir?.sizeLimit === "2Gi" && /^kernel-image = debuginfod$/m.test(conf) &&
  /^debuginfod = http:\/\/debuginfod.infra:8002$/m.test(conf);
if (!ok) console.log("FAIL kernelImage debuginfod: state volume " + JSON.stringify(vol) + ", config:\n" + conf);
process.exit(ok ? 0 : 1);' "$tmp/kimage.yaml" || fail "kernelImage debuginfod not rendered as set"
grep -q 'sizeLimit: 448Mi' "$tmp/default.yaml" || fail "the default state volume is not 448Mi"
if render --set kernelImage=debuginfod >/dev/null 2>"$tmp/err"; then
	fail "kernelImage debuginfod without servers rendered"
else
	grep -q 'kernelImage debuginfod needs debuginfod servers' "$tmp/err" ||
		fail "kernelImage debuginfod without servers: unexpected error $(cat "$tmp/err")"
fi

# 6. The agent's state on the node (stateHostPath): a writable hostPath under /var/lib/ that
# the security check accepts, the table cache in it; elsewhere refused by the chart, and a
# writable host path anywhere else refused by the security check.
render --set stateHostPath=/var/lib/pebsprof/ >"$tmp/state.yaml" || fail "render with stateHostPath"
node validate.mjs "$tmp/state.yaml" >/dev/null || fail "schema of the stateHostPath rendering"
node check_security.mjs "$tmp/state.yaml" >"$tmp/sec.out" || {
	cat "$tmp/sec.out"
	fail "the stateHostPath rendering fails the security check"
}
node --input-type=module -e '
import fs from "node:fs"; import YAML from "yaml";
const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJS()).filter(Boolean);
const ds = docs.find((o) => o.kind === "DaemonSet"), conf = docs.find((o) => o.kind === "ConfigMap").data["pebsprof.conf"];
const vol = ds.spec.template.spec.volumes.find((v) => v.name === "profiles");
const ok = vol?.hostPath?.path === "/var/lib/pebsprof" && vol.hostPath.type === "DirectoryOrCreate" &&
  !vol.emptyDir && /^unwind-table-cache = \/var\/lib\/pebsprof\/unwind-tables$/m.test(conf) &&
  /^unwind-table-cache-bytes = 64MiB$/m.test(conf) &&
  /^symbol-table-cache = \/var\/lib\/pebsprof\/symbol-tables$/m.test(conf) &&
  /^symbol-table-cache-bytes = 128MiB$/m.test(conf);
if (!ok) console.log("FAIL stateHostPath: state volume " + JSON.stringify(vol) + ", config:\n" + conf);
process.exit(ok ? 0 : 1);' "$tmp/state.yaml" || fail "stateHostPath not rendered as set"
for bad in /etc /var/lib/../etc /; do
	if render --set stateHostPath=$bad >/dev/null 2>"$tmp/err"; then
		fail "stateHostPath $bad rendered"
	else
		grep -q 'stateHostPath must be a directory under /var/lib/' "$tmp/err" ||
			fail "stateHostPath $bad: unexpected error $(cat "$tmp/err")"
	fi
done
sed 's|path: /var/lib/pebsprof$|path: /etc|' "$tmp/state.yaml" >"$tmp/state-etc.yaml"
cmp -s "$tmp/state.yaml" "$tmp/state-etc.yaml" && fail "the /etc mutation changed nothing"
node check_security.mjs "$tmp/state-etc.yaml" >/dev/null && fail "a writable hostPath /etc passed the security check"

# And the comparison itself can fail.
render --set freq=49 >"$tmp/freq.yaml"
node compare.mjs "${plain[@]}" -- "$tmp/freq.yaml" >/dev/null && fail "compare.mjs saw no difference for freq=49"
finish
