/**
 * The client's modules import one another without a circle, type-only
 * imports included: the shared types live in types.ts, which imports no
 * module of the client but the generated code and log.ts.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";

import { repoRoot } from "./daemon.js";

const srcDir = join(repoRoot, "client/typescript/src");

/** Every .ts file under dir, but the tests and the generated code. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "tests" || e.name === "gen" ? [] : sources(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/** The relative modules a source imports or re-exports, `import type` and `export type` included, as .ts paths. */
export function importsOf(file: string, text: string): string[] {
  const specs = [...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.[^"]+)"/gms)].map((m) => m[1]);
  return specs.map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts")));
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
      if (!graph.has(m)) continue; // generated code, outside the graph
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

test("no import circle among the client's modules, type-only imports included", () => {
  const graph = new Map<string, string[]>();
  for (const f of sources(srcDir)) graph.set(f, importsOf(f, readFileSync(f, "utf8")));
  assert.ok(graph.size >= 10, `found only ${graph.size} modules under ${srcDir}`);
  const circle = findCircle(graph);
  assert.equal(circle?.map((f) => relative(srcDir, f)).join(" -> "), undefined);
});

test("the check sees a circle made of type-only imports", () => {
  const a = join(srcDir, "a.ts");
  const b = join(srcDir, "b.ts");
  const graph = new Map([
    [a, importsOf(a, 'import type { B } from "./b.js";\n')],
    [b, importsOf(b, 'export {\n  type A,\n} from "./a.js";\n')],
  ]);
  assert.deepEqual(findCircle(graph), [a, b, a]);
});
