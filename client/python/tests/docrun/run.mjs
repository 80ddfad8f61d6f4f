// docrun's Node runner: node run.mjs FILE. Transpiles FILE (TypeScript or
// JavaScript, an ES module) with the TypeScript compiler of client/anthropic
// (types stripped, no type check: make check-claude-agent-ts and the
// packages' builds check types), writes it beside FILE as .mjs, so that its
// imports resolve in the package FILE lies in, and imports it. The process
// exits when the module's top level has finished, with its exit code: a
// fragment need not close the connections it opened.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [file] = process.argv.slice(2);
const require = createRequire(join(process.env.DOCRUN_REPO, "client/anthropic/package.json"));
const ts = require("typescript");
const out = ts.transpileModule(readFileSync(file, "utf8"), {
  fileName: file,
  reportDiagnostics: true,
  compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
});
if (out.diagnostics?.length) {
  for (const d of out.diagnostics) console.error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  process.exit(2);
}
const mjs = file.replace(/\.[^.]+$/, ".mjs");
writeFileSync(mjs, out.outputText);
await import(pathToFileURL(mjs).href);
process.exit(process.exitCode ?? 0);
