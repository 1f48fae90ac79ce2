// Compares two sets of Kubernetes objects as parsed YAML (not text): the same objects,
// keyed by apiVersion, kind, namespace and name, with deeply equal contents. Prints every
// missing, extra or differing object with the path of each difference.
//   node compare.mjs [--except /json/pointer]... EXPECTED_FILE... -- ACTUAL_FILE...
import { loadDocs, ident } from "./lib.mjs";

const args = process.argv.slice(2);
const except = [];
while (args[0] === "--except") {
  except.push(args[1]);
  args.splice(0, 2);
}
const sep = args.indexOf("--");
if (sep <= 0 || sep === args.length - 1) {
  console.error("usage: node compare.mjs [--except PTR]... EXPECTED... -- ACTUAL...");
  process.exit(2);
}
function index(files) {
  const m = new Map();
  for (const d of loadDocs(files)) {
    const id = ident(d.obj);
    if (m.has(id)) throw new Error(`${id} twice (${m.get(id).file}, ${d.file})`);
    m.set(id, d);
  }
  return m;
}
const expected = index(args.slice(0, sep));
const actual = index(args.slice(sep + 1));

function diff(a, b, path, out) {
  if (except.includes(path)) return;
  if (a === b) return;
  const ta = Array.isArray(a) ? "array" : a === null ? "null" : typeof a;
  const tb = Array.isArray(b) ? "array" : b === null ? "null" : typeof b;
  if (ta !== tb || ta !== "object" && ta !== "array") {
    out.push(`${path || "/"}: expected ${JSON.stringify(a)}, got ${JSON.stringify(b)}`);
    return;
  }
  if (ta === "array" && a.length !== b.length) {
    out.push(`${path}: expected ${a.length} items, got ${b.length}: ${JSON.stringify(b)}`);
    return;
  }
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (!(k in b)) out.push(`${path}/${k}: missing`);
    else if (!(k in a)) out.push(`${path}/${k}: unexpected ${JSON.stringify(b[k])}`);
    else diff(a[k], b[k], `${path}/${k}`, out);
  }
}

let bad = 0;
for (const [id, e] of expected) {
  const a = actual.get(id);
  if (!a) {
    console.log(`MISSING ${id} (expected from ${e.file})`);
    bad++;
    continue;
  }
  const out = [];
  diff(e.obj, a.obj, "", out);
  if (out.length) {
    bad++;
    console.log(`DIFFERS ${id} (${e.file} vs ${a.file}):\n  ${out.join("\n  ")}`);
  } else console.log(`same ${id}`);
}
for (const [id, a] of actual)
  if (!expected.has(id)) {
    console.log(`EXTRA ${id} (from ${a.file})`);
    bad++;
  }
process.exit(bad ? 1 : 0);
