/**
 * The package's modules import one another at run time without a circle:
 * session.ts and ledger.ts share the session's state through state.ts, and
 * import each other's types only (which tsc erases).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

// dist/tests/imports.test.js -> src/
const srcDir = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

/** Every .ts file under dir, but the tests. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "tests" ? [] : sources(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/**
 * The relative modules a source imports or re-exports at run time, as .ts
 * paths: `import type`, `export type` and imports whose every name is
 * `type X` are left out, as tsc erases them.
 */
export function runtimeImportsOf(file: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\b([^;]*?)\bfrom\s+"(\.[^"]+)"/gms)) {
    const clause = m[2].trim();
    if (clause.startsWith("type ")) continue;
    const names = /^\{([^}]*)\}$/.exec(clause)?.[1];
    if (names !== undefined) {
      const parts = names.split(",").map((n) => n.trim()).filter((n) => n !== "");
      if (parts.length > 0 && parts.every((n) => n.startsWith("type "))) continue;
    }
    out.push(resolve(dirname(file), m[3].replace(/\.js$/, ".ts")));
  }
  return out;
}

/** The first circle found in graph, as the files along it, or undefined. */
export function findCircle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (n: string): string[] | undefined => {
    if (state.get(n) === "done") return undefined;
    if (state.get(n) === "open") return [...path.slice(path.indexOf(n)), n];
    state.set(n, "open");
    path.push(n);
    for (const m of graph.get(n) ?? []) {
      const c = visit(m);
      if (c) return c;
    }
    path.pop();
    state.set(n, "done");
    return undefined;
  };
  for (const n of graph.keys()) {
    const c = visit(n);
    if (c) return c;
  }
  return undefined;
}

test("no run-time import circle among the package's modules", () => {
  const graph = new Map<string, string[]>();
  for (const f of sources(srcDir)) graph.set(f, runtimeImportsOf(f, readFileSync(f, "utf8")));
  assert.ok(graph.size >= 4, `found only ${graph.size} modules under ${srcDir}`);
  const circle = findCircle(graph);
  assert.equal(circle?.map((f) => relative(srcDir, f)).join(" -> "), undefined);
});

test("the check sees a circle and ignores type-only imports", () => {
  const a = "/p/a.ts";
  const b = "/p/b.ts";
  assert.deepEqual(runtimeImportsOf(a, 'import { type X } from "./b.js";\nimport type { Y } from "./b.js";\nexport type { Z } from "./b.js";'), []);
  assert.deepEqual(runtimeImportsOf(a, 'import { type X, f } from "./b.js";'), [b]);
  assert.deepEqual(runtimeImportsOf(a, 'import * as b from "./b.js";'), [b]);
  assert.deepEqual(runtimeImportsOf(a, 'export { g } from "./b.js";'), [b]);
  assert.deepEqual(findCircle(new Map([[a, [b]], [b, [a]]])), [a, b, a]);
  assert.equal(findCircle(new Map([[a, [b]], [b, []]])), undefined);
});
