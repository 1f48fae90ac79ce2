// Shared helpers of the deploy checks: read multi-document YAML files into plain objects,
// each tagged with where it came from, so every message names file, kind and name.
import fs from "node:fs";
import YAML from "yaml";

export function loadDocs(files) {
  const docs = [];
  for (const file of files) {
    const parsed = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
    parsed.forEach((d, i) => {
      if (d.errors.length) throw new Error(`${file}: document ${i + 1}: ${d.errors[0].message}`);
      const obj = d.toJS();
      if (obj === null || obj === undefined) return; // comments only
      docs.push({ file, index: i + 1, obj });
    });
  }
  return docs;
}

export function ident(o) {
  const m = o.metadata || {};
  return `${o.apiVersion}/${o.kind} ${m.namespace ? m.namespace + "/" : ""}${m.name}`;
}

export function where(d) {
  return `${d.file}#${d.index} (${ident(d.obj)})`;
}
