// Checks the example stacks under deploy/examples against what pebsprof's OTLP output needs:
// Pyroscope >= 1.20 and otelcol-contrib >= 0.148 (OTLP proto v1.10), the profiles feature
// gate, an otlp receiver -> k8sattributes -> otlp exporter profiles pipeline aimed at
// Pyroscope's port 4040, the collector's ConfigMap equal to config.yaml, and Grafana's
// Pyroscope data source pointing at the Pyroscope service the agent sends to.
//   node check_examples.mjs DEPLOY_DIR
// Prints, on its last line, the agent environment of the compose file as NAME=VALUE pairs
// (for the caller to hand to `pebsprof run --dry-run`).
import fs from "node:fs";
import YAML from "yaml";
import { loadDocs } from "./lib.mjs";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node check_examples.mjs DEPLOY_DIR");
  process.exit(2);
}
let failed = 0;
const check = (ok, msg) => {
  if (!ok) {
    failed++;
    console.log(`FAIL ${msg}`);
  }
};
const read = (p) => YAML.parse(fs.readFileSync(`${dir}/examples/${p}`, "utf8"));
// "name:1.21.0" -> [1, 21, 0]; tags that are not versions compare as 0.0.0.
const version = (image) => (/:v?(\d+)\.(\d+)(?:\.(\d+))?$/.exec(image) ?? [0, 0, 0, 0]).slice(1).map((x) => Number(x ?? 0));
const atLeast = (v, min) => {
  for (let i = 0; i < 3; i++) if (v[i] !== min[i]) return v[i] > min[i];
  return true;
};

// Pyroscope + Grafana compose stack.
const compose = read("pyroscope-grafana/docker-compose.yaml");
const svc = compose.services ?? {};
check(svc.pyroscope && atLeast(version(svc.pyroscope.image), [1, 20, 0]),
  `pyroscope-grafana: Pyroscope image ${svc.pyroscope?.image} must be a version >= 1.20`);
const agent = svc.pebsprof ?? {};
check(agent.pid === "host", "pyroscope-grafana: the agent needs pid: host");
check(agent.read_only === true, "pyroscope-grafana: the agent's root filesystem should be read-only");
check(JSON.stringify(agent.cap_drop) === '["ALL"]' && !(agent.cap_add ?? []).includes("SYS_ADMIN") && !agent.privileged,
  "pyroscope-grafana: the agent drops ALL capabilities and is not privileged");
const env = agent.environment ?? {};
const ep = env.OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "";
check(/^http:\/\/pyroscope:4040(\/v1development\/profiles)?$/.test(ep),
  `pyroscope-grafana: the agent must send to Pyroscope's OTLP endpoint http://pyroscope:4040, not ${ep}`);
const ds = read("pyroscope-grafana/provisioning/datasources/pyroscope.yaml");
const pds = (ds.datasources ?? []).find((d) => d.type === "grafana-pyroscope-datasource");
check(pds && pds.url === "http://pyroscope:4040", "pyroscope-grafana: no grafana-pyroscope-datasource at http://pyroscope:4040");
const gvol = (svc.grafana?.volumes ?? []).some((v) => /^\.\/provisioning:\/etc\/grafana\/provisioning/.test(v));
check(gvol, "pyroscope-grafana: Grafana must mount ./provisioning at /etc/grafana/provisioning");

// OpenTelemetry Collector gateway.
const conf = read("otel-collector/config.yaml");
const pipe = conf.service?.pipelines?.profiles ?? {};
check((pipe.receivers ?? []).includes("otlp") && conf.receivers?.otlp?.protocols?.http,
  "otel-collector: the profiles pipeline needs the otlp receiver with HTTP (pebsprof posts OTLP/HTTP)");
check((pipe.processors ?? []).includes("k8sattributes") && conf.processors?.k8sattributes,
  "otel-collector: the profiles pipeline needs the k8sattributes processor");
const assoc = JSON.stringify(conf.processors?.k8sattributes?.pod_association ?? []);
check(assoc.includes("k8s.pod.uid") || assoc.includes("container.id"),
  "otel-collector: k8sattributes must associate on k8s.pod.uid or container.id (what pebsprof sends)");
const exp = (pipe.exporters ?? []).map((e) => [e, conf.exporters?.[e]]);
check(exp.some(([n, e]) => /^otlp(_grpc|_http|http)?(\/.*)?$/.test(n) && /:4040(\/|$)/.test(e?.endpoint ?? "")),
  "otel-collector: the profiles pipeline must export with otlp to Pyroscope's port 4040");
const kdocs = loadDocs([`${dir}/examples/otel-collector/kubernetes.yaml`]).map((d) => d.obj);
const cm = kdocs.find((o) => o.kind === "ConfigMap");
check(cm && JSON.stringify(YAML.parse(cm.data?.["config.yaml"] ?? "")) === JSON.stringify(conf),
  "otel-collector: kubernetes.yaml's ConfigMap differs from config.yaml");
const dep = kdocs.find((o) => o.kind === "Deployment");
const cc = dep?.spec?.template?.spec?.containers?.[0] ?? {};
check(/opentelemetry-collector-contrib/.test(cc.image ?? "") && atLeast(version(cc.image), [0, 148, 0]),
  `otel-collector: image ${cc.image} must be otelcol-contrib >= 0.148`);
check((cc.args ?? []).some((a) => /^--feature-gates=.*\+?service\.profilesSupport/.test(a)),
  "otel-collector: the collector must run with --feature-gates=service.profilesSupport");
const values = read("otel-collector/pebsprof-values.yaml");
const svcObj = kdocs.find((o) => o.kind === "Service");
const host = `${svcObj?.metadata?.name}.${svcObj?.metadata?.namespace}.svc.cluster.local`;
check(values.endpoint === `http://${host}:4318/v1development/profiles`,
  `otel-collector: pebsprof-values.yaml endpoint must be http://${host}:4318/v1development/profiles`);

console.log(failed ? `${failed} example checks failed` : "examples ok");
console.log(Object.entries(env).map(([k, v]) => `${k}=${v}`).join(" "));
process.exit(failed ? 1 : 0);
