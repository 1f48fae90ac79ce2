// Asserts the agent's deployment contract (issue 6 item 2) on a set of manifests: host PID
// namespace, least-privilege capabilities, no privileged mode or escalation, read-only root
// and host mounts, NODE_NAME from the downward API, tolerations for all taints, resources,
// /livez and /healthz probes on the port the config file listens on, rolling updates, and RBAC limited
// to reading pods. Each failure says what is wrong and where.
//   node check_security.mjs [--legacy] FILE...      (--legacy: the SYS_ADMIN variant)
import { loadDocs, where } from "./lib.mjs";

const args = process.argv.slice(2);
const legacy = args[0] === "--legacy";
const files = legacy ? args.slice(1) : args;
if (!files.length) {
  console.error("usage: node check_security.mjs [--legacy] FILE...");
  process.exit(2);
}
const docs = loadDocs(files);
const byKind = (k) => docs.filter((d) => d.obj.kind === k);
let failed = 0,
  passed = 0;
function check(ok, what, msg) {
  if (ok) passed++;
  else {
    failed++;
    console.log(`FAIL ${what}: ${msg}`);
  }
}
const same = (a, b) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

// Kubernetes memory quantities to bytes (the suffixes we would write).
function bytes(q) {
  const m = /^([0-9.]+)([KMGT]i?)?$/.exec(String(q ?? ""));
  if (!m) return NaN;
  const mul = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, K: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mul[m[2]] : 1);
}

const dsets = byKind("DaemonSet");
check(dsets.length === 1, "manifests", `want exactly one DaemonSet, found ${dsets.length}`);
for (const d of dsets) {
  const w = where(d);
  const ds = d.obj;
  const pod = ds.spec?.template?.spec ?? {};
  check(pod.hostPID === true, w, "spec.template.spec.hostPID must be true (host PIDs, /proc/PID/root)");
  check(!pod.hostNetwork && !pod.hostIPC, w, "hostNetwork and hostIPC must stay off");
  const all = [...(pod.initContainers ?? []), ...(pod.containers ?? [])];
  for (const c of all)
    check(c.securityContext?.privileged !== true, `${w} container ${c.name}`, "privileged: true is not allowed");
  const c = (pod.containers ?? []).find((x) => x.name === "pebsprof");
  check(!!c, w, "no container named pebsprof");
  if (!c) continue;
  const cw = `${w} container pebsprof`;
  const sc = c.securityContext ?? {};
  check(sc.privileged === false, cw, "securityContext.privileged must be false (explicitly)");
  check(sc.allowPrivilegeEscalation === false, cw, "securityContext.allowPrivilegeEscalation must be false");
  check(sc.readOnlyRootFilesystem === true, cw, "securityContext.readOnlyRootFilesystem must be true");
  check(same(sc.capabilities?.drop ?? [], ["ALL"]), cw, `capabilities.drop must be [ALL], is ${JSON.stringify(sc.capabilities?.drop)}`);
  const want = legacy
    ? ["SYS_ADMIN", "SYS_RESOURCE", "SYS_PTRACE", "DAC_READ_SEARCH"]
    : ["BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH", "CHECKPOINT_RESTORE"];
  check(same(sc.capabilities?.add ?? [], want), cw,
    `capabilities.add must be exactly [${want.join(", ")}], is ${JSON.stringify(sc.capabilities?.add)}`);

  // Host paths: mounted, and read-only wherever they are mounted.
  const hostVols = new Map((pod.volumes ?? []).filter((v) => v.hostPath).map((v) => [v.name, v.hostPath.path]));
  const mounts = c.volumeMounts ?? [];
  for (const p of ["/sys/fs/cgroup", "/proc"]) {
    const names = [...hostVols].filter(([, hp]) => hp === p).map(([n]) => n);
    const ms = mounts.filter((m) => names.includes(m.name));
    check(ms.length > 0, cw, `host ${p} is not mounted (hostPath volume + volumeMount)`);
  }
  // The one writable host path allowed: the agent's own state (the chart's stateHostPath), a
  // directory under /var/lib/ mounted where the agent keeps its state, created if missing.
  const stateVol = (v) => v.hostPath.type === "DirectoryOrCreate" &&
    /^\/var\/lib\/[^/.][^/]*(\/[^/.][^/]*)*$/.test(v.hostPath.path);
  const vols = new Map((pod.volumes ?? []).filter((v) => v.hostPath).map((v) => [v.name, v]));
  for (const x of all)
    for (const m of x.volumeMounts ?? [])
      if (hostVols.has(m.name))
        check(m.readOnly === true || (x === c && m.mountPath === "/var/lib/pebsprof" && stateVol(vols.get(m.name))),
          `${w} container ${x.name}`,
          `hostPath ${hostVols.get(m.name)} at ${m.mountPath} must be readOnly (only the agent's state, under /var/lib/ at /var/lib/pebsprof, may be written)`);

  const nodeName = (c.env ?? []).find((e) => e.name === "NODE_NAME");
  check(nodeName?.valueFrom?.fieldRef?.fieldPath === "spec.nodeName", cw, "env NODE_NAME must come from fieldRef spec.nodeName");
  const hdr = (c.env ?? []).find((e) => e.name === "OTEL_EXPORTER_OTLP_HEADERS");
  check(!hdr || (hdr.valueFrom?.secretKeyRef && hdr.value === undefined), cw, "OTEL_EXPORTER_OTLP_HEADERS must come from a Secret, not a literal");
  check((pod.tolerations ?? []).some((t) => t.operator === "Exists" && !t.key && !t.effect), w,
    "tolerations need {operator: Exists} (no key, no effect) to run on every node");

  const r = c.resources ?? {};
  check(bytes(r.requests?.memory) >= 32 * 2 ** 20, cw, `requests.memory ${r.requests?.memory} is below the measured peak RSS (~28 MiB)`);
  check(bytes(r.limits?.memory) >= 2 * bytes(r.requests?.memory), cw, "limits.memory must leave room above the request (upload queue)");
  check(!!r.requests?.cpu, cw, "requests.cpu must be set");
  check(r.limits?.cpu === undefined, cw, "no CPU limit: throttling loses samples");

  // Probes at the port the agent's config file listens on.
  const cms = byKind("ConfigMap");
  const conf = cms.map((m) => Object.values(m.obj.data ?? {}).join("\n")).join("\n");
  const listen = /^\s*listen\s*=\s*"?[^:\s]*:(\d+)/m.exec(conf);
  check(!!listen, w, "the ConfigMap sets no `listen = ADDR:PORT`: no health endpoint to probe");
  // Liveness on /livez (sampling only: a restart cannot fix a backend), readiness on /healthz.
  for (const [kind, path] of [["livenessProbe", "/livez"], ["readinessProbe", "/healthz"]]) {
    const g = c[kind]?.httpGet;
    check(g?.path === path, cw, `${kind} must be httpGet ${path}`);
    const port = typeof g?.port === "string" ? (c.ports ?? []).find((p) => p.name === g.port)?.containerPort : g?.port;
    check(listen && port === Number(listen[1]), cw, `${kind} port ${g?.port} (${port}) is not the listen port ${listen?.[1]}`);
  }
  // Output-dir mode (no endpoint) must work as shipped: on a read-only root, the directory
  // the windows go to is on a writable volume of its own, with a size bound.
  const outDir = /^\s*output-dir\s*=\s*"?([^"\s]+)/m.exec(conf)?.[1] ?? "/var/lib/pebsprof/profiles";
  if (c.securityContext?.readOnlyRootFilesystem) {
    const outMount = mounts.find((m) => (outDir + "/").startsWith(m.mountPath.replace(/\/$/, "") + "/"));
    const outVol = (pod.volumes ?? []).find((v) => v.name === outMount?.name);
    check(!!outMount && !outMount.readOnly && (outVol?.emptyDir || outVol?.hostPath), cw,
      `output-dir ${outDir} is on the read-only root: mount a writable volume there`);
    check(!outVol?.emptyDir || !!outVol.emptyDir.sizeLimit, cw,
      `the output-dir volume ${outVol?.name} needs emptyDir.sizeLimit`);
  }
  // AppArmor's default profiles deny reading other processes' maps: every frame bare.
  check(sc.appArmorProfile?.type === "Unconfined" || sc.appArmorProfile?.type === "Localhost", cw,
    "securityContext.appArmorProfile must be Unconfined (or a Localhost profile allowing ptrace read)");
  // The config file by PEBSPROF_CONFIG, not --config: `kubectl exec ... pebsprof record` in
  // the pod then reads the same file (the pod metadata source, the token and CA files).
  const cfgPath = (c.env ?? []).find((e) => e.name === "PEBSPROF_CONFIG")?.value ?? null;
  check(!!cfgPath, cw, "env must set PEBSPROF_CONFIG to the ConfigMap's file");
  check(!(c.args ?? []).includes("--config"), cw,
    "the config file goes in PEBSPROF_CONFIG, not --config: an exec'd record would not read it");
  const cfgMount = mounts.find((m) => cfgPath && cfgPath.startsWith(m.mountPath + "/"));
  const cfgVol = (pod.volumes ?? []).find((v) => v.name === cfgMount?.name)?.configMap?.name;
  const cfgKey = cfgPath && cfgMount ? cfgPath.slice(cfgMount.mountPath.length + 1) : null;
  check(cms.some((m) => m.obj.metadata.name === cfgVol && m.obj.data?.[cfgKey] !== undefined), cw,
    `PEBSPROF_CONFIG ${cfgPath} is not a key of a ConfigMap mounted there`);

  const us = ds.spec?.updateStrategy;
  check(us?.type === "RollingUpdate" && us?.rollingUpdate?.maxUnavailable !== undefined, w,
    "updateStrategy must be RollingUpdate with rollingUpdate.maxUnavailable");

  // RBAC: the pod's ServiceAccount, bound to a role that only reads pods (+ nodes/proxy).
  const sa = pod.serviceAccountName;
  const ns = ds.metadata.namespace;
  check(byKind("ServiceAccount").some((s) => s.obj.metadata.name === sa && s.obj.metadata.namespace === ns), w,
    `ServiceAccount ${ns}/${sa} is not in the manifests`);
  const bindings = byKind("ClusterRoleBinding").filter((b) =>
    (b.obj.subjects ?? []).some((s) => s.kind === "ServiceAccount" && s.name === sa && s.namespace === ns));
  check(bindings.length > 0, w, `no ClusterRoleBinding for ServiceAccount ${ns}/${sa}`);
  for (const b of bindings) {
    const role = byKind("ClusterRole").find((r2) => r2.obj.metadata.name === b.obj.roleRef?.name);
    check(!!role, where(b), `ClusterRole ${b.obj.roleRef?.name} is not in the manifests`);
    if (!role) continue;
    const rules = role.obj.rules ?? [];
    const podRule = rules.find((x) => (x.apiGroups ?? []).includes("") && (x.resources ?? []).includes("pods"));
    check(podRule && ["get", "list", "watch"].every((v) => podRule.verbs.includes(v)), where(role), "pods get/list/watch not granted");
    for (const x of rules) {
      check(x.verbs.every((v) => ["get", "list", "watch"].includes(v)), where(role), `write verbs granted: ${x.verbs}`);
      check(x.resources.every((res) => ["pods", "nodes/proxy", "nodes/pods"].includes(res)), where(role), `more than pod metadata granted: ${x.resources}`);
    }
  }
}
console.log(`${passed} checks passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
