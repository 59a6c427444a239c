// Validates Prometheus Operator objects (monitoring.coreos.com/v1) the way the Operator's CRDs
// would, without a cluster: tests/shipped/test_kubernetes.py runs `node validate.mjs objects.json`.
//
// Two checks per object, both from @kubernetes-models/prometheus-operator (the Operator's API
// types, with their validation markers):
// * its JSON schema (types, required fields, enums, patterns), as the API server's OpenAPI check;
// * its TypeScript interface, whose excess-property check rejects a field the kind does not have,
//   as `kubectl apply` does (strict field validation) and the JSON schema alone does not.
// Prints one JSON object: {"errors": [[index of the object, message], ...]}.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as v1 from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const here = dirname(fileURLToPath(import.meta.url));
const objects = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const errors = [];

objects.forEach((object, index) => {
  const Kind = object.apiVersion === "monitoring.coreos.com/v1" ? v1[object.kind] : undefined;
  if (typeof Kind !== "function") {
    errors.push([index, `not a monitoring.coreos.com/v1 kind: ${object.apiVersion} ${object.kind}`]);
    return;
  }
  try {
    new Kind(object).validate();
  } catch (error) {
    errors.push([index, String(error.message)]);
  }
});

// One line per object, after the imports, so a compiler error's line names its object.
const kinds = [...new Set(objects.map((object) => object.kind))].filter((kind) => typeof v1[kind] === "function");
const lines = kinds.map(
  (kind) => `import type { I${kind} } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}";`,
);
const first = lines.length + 1;
objects.forEach((object, index) => {
  const type = kinds.includes(object.kind) ? `I${object.kind}` : "unknown";
  lines.push(`export const object${index}: ${type} = ${JSON.stringify(object)};`);
});
const folder = mkdtempSync(join(here, ".check-"));
try {
  const source = join(folder, "objects.ts");
  writeFileSync(source, lines.join("\n") + "\n");
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const options = ["--noEmit", "--strict", "--skipLibCheck", "--module", "nodenext", "--moduleResolution", "nodenext"];
  try {
    execFileSync(process.execPath, [tsc, ...options, source], { encoding: "utf-8" });
  } catch (failed) {
    const output = String(failed.stdout || "") + String(failed.stderr || "");
    const found = [...output.matchAll(/objects\.ts\((\d+),\d+\): error (TS\d+: .*)/g)];
    if (found.length === 0) throw new Error(`tsc failed: ${output}`);
    for (const [, line, message] of found) errors.push([Number(line) - first, message]);
  }
} finally {
  rmSync(folder, { recursive: true, force: true });
}
console.log(JSON.stringify({ errors }));
