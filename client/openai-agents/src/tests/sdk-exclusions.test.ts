/**
 * The list of agents-core's own tests left out of the SavepointSession run
 * (sdk_tests/excluded.ts, make test-openai-agents-sdk-js) may only shrink,
 * and each entry gives one of the reasons the file declares.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

/** The count when the list was reasoned (agents-core 0.20.0); lower it as tests are won back. */
const MAX_EXCLUDED = 1;

// dist/tests/ -> sdk_tests/excluded.ts
const file = resolve(dirname(fileURLToPath(import.meta.url)), "../../sdk_tests/excluded.ts");

test("the SDK tests left out of the SavepointSession run do not grow", () => {
  const text = readFileSync(file, "utf8");
  const body = text.slice(text.indexOf("export const EXCLUDED"));
  const entries = [...body.matchAll(/\{ name: "([^"]+)", reason: ([A-Z_]+) \}/g)];
  const reasons = new Set([...text.matchAll(/^const ([A-Z_]+) = "/gm)].map((m) => m[1]));
  assert.ok(reasons.size > 0, "excluded.ts declares no reason");
  assert.ok(entries.length <= MAX_EXCLUDED, `${entries.length} SDK tests excluded, more than ${MAX_EXCLUDED}`);
  assert.equal(entries.length, (body.match(/reason:/g) ?? []).length, "an entry excluded.ts has that this test cannot read");
  for (const [, name, reason] of entries) {
    assert.ok(name.includes(".test.ts > "), `${name}: not "<file> > <full name>"`);
    assert.ok(reasons.has(reason), `${name}: its reason ${reason} is not one excluded.ts declares`);
  }
});
