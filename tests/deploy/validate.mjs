// Validates Kubernetes objects in YAML files against the API schema (npm kubernetes-models,
// offline), strictly: kubernetes-models' validators accept unknown fields, so every object is
// wrapped in a Proxy that records which keys the validator read; a key it never read is not
// in the schema (a typo such as hostPIDD) and fails too.
//   node validate.mjs FILE...
import { loadDocs, where } from "./lib.mjs";

const files = process.argv.slice(2);
if (!files.length) {
  console.error("usage: node validate.mjs FILE...");
  process.exit(2);
}

// Track reads of each object's keys; values come back wrapped so nested reads count too.
function track(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  const read = new Set();
  seen.push({ value, path, read });
  const cache = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key !== "string" || !Object.prototype.hasOwnProperty.call(target, key))
        return Reflect.get(target, key, receiver);
      read.add(key);
      if (!cache.has(key)) cache.set(key, track(target[key], `${path}/${key}`, seen));
      return cache.get(key);
    },
  });
}

let failed = 0;
for (const d of loadDocs(files)) {
  const o = d.obj;
  const fail = (msg) => {
    console.log(`FAIL ${where(d)}: ${msg}`);
    failed++;
  };
  if (typeof o.apiVersion !== "string" || typeof o.kind !== "string") {
    fail("no apiVersion or kind");
    continue;
  }
  const mod = o.apiVersion.includes("/") ? o.apiVersion : "v1";
  let Model;
  try {
    Model = (await import(`kubernetes-models/${mod}`))[o.kind];
  } catch (e) {
    Model = undefined;
  }
  if (typeof Model !== "function" || Model.kind !== o.kind) {
    fail(`no schema for ${o.apiVersion} ${o.kind}`);
    continue;
  }
  const seen = [];
  try {
    Model.prototype.validate.call(track(o, "", seen));
  } catch (e) {
    fail(`schema: ${e.message}`);
    continue;
  }
  const unknown = [];
  for (const { value, path, read } of seen) {
    if (Array.isArray(value)) continue;
    for (const k of Object.keys(value)) if (!read.has(k)) unknown.push(`${path}/${k}`);
  }
  if (unknown.length) fail(`fields not in the schema: ${unknown.join(", ")}`);
  else console.log(`ok ${where(d)}`);
}
process.exit(failed ? 1 : 0);
