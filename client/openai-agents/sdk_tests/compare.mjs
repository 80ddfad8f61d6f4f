// Compares vitest's JSON reports of the projects "memory" (the SDK's tests
// as they are, on its own MemorySession) and "savepoint" (SavepointSession
// in its place): fails when a test that passed with MemorySession did not
// pass with SavepointSession, or when no test passed with SavepointSession.
// A test that fails with MemorySession too fails for a reason of the SDK's
// own (the test checkout and the installed package are not one release) and
// is listed and counted, not hidden. Usage: node compare.mjs memory.json savepoint.json
import { readFileSync } from "node:fs";

function results(path) {
  const m = new Map();
  for (const file of JSON.parse(readFileSync(path, "utf8")).testResults) {
    for (const t of file.assertionResults) {
      const key = `${file.name.replace(/^.*?\/test\//, "")} > ${t.fullName}`;
      let k = key;
      for (let i = 2; m.has(k); i++) k = `${key} #${i}`;
      m.set(k, t.status);
    }
  }
  return m;
}
const memory = results(process.argv[2]);
const savepoint = results(process.argv[3]);
const count = (m, s) => [...m.values()].filter((x) => x === s).length;
const regressions = [...memory].filter(([k, s]) => s === "passed" && savepoint.has(k) && savepoint.get(k) !== "passed" && savepoint.get(k) !== "skipped");
const bothFail = [...memory].filter(([k, s]) => s === "failed" && savepoint.get(k) === "failed");
for (const [k] of bothFail) console.log(`fails with MemorySession too: ${k}`);
for (const [k] of regressions) console.log(`FAILS ONLY WITH SavepointSession: ${k}`);
const line = (name, m) => `${name}: ${count(m, "passed")} passed, ${count(m, "failed")} failed, ${count(m, "skipped") + count(m, "pending")} skipped`;
console.log(line("MemorySession (control)", memory));
console.log(line("SavepointSession", savepoint));
console.log(`SavepointSession against the control: ${regressions.length} tests fail only with SavepointSession, ${bothFail.length} fail with both`);
if (count(savepoint, "passed") === 0) {
  console.log("test-openai-agents-sdk-js: no test passed against SavepointSession");
  process.exit(1);
}
process.exit(regressions.length > 0 ? 1 : 0);
