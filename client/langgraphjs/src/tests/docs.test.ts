/**
 * docs/frameworks/langgraphjs.md's runnable example, run as the page says:
 * its js block saved as approve.mjs (inside this package, so that
 * "@savepoint-dev/langgraph" resolves to it), then `node approve.mjs` and
 * `node approve.mjs yes` in two processes against one savepointd, each
 * printing what the page's console block shows.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

const here = dirname(fileURLToPath(import.meta.url));
const page = resolve(here, "../../../../docs/frameworks/langgraphjs.md");
const script = join(here, "approve.mjs");
let d: Daemon;

before(async () => {
  d = await startDaemon();
});
after(async () => {
  rmSync(script, { force: true });
  await stopDaemon(d);
});

/** The bodies of the page's fenced blocks of a language, in order. */
function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp("^```" + lang + "\\n([\\s\\S]*?)^```$", "gm"))].map((m) => m[1]);
}

test("the page's example runs as it shows: the first process asks, a second one answers and the graph finishes", async () => {
  const text = readFileSync(page, "utf8");
  const [code] = blocks(text, "js");
  assert.ok(code, `${page} has no js block`);
  writeFileSync(script, code);
  // The console block: the commands after "$ node", and each one's output up to the next "$".
  const [transcript] = blocks(text, "console");
  const runs: { args: string[]; want: string }[] = [];
  for (const line of transcript.split("\n").filter(Boolean)) {
    const m = /^\$ node approve\.mjs ?(.*)$/.exec(line);
    if (m) runs.push({ args: m[1] ? m[1].split(" ") : [], want: "" });
    else if (!line.startsWith("$") && runs.length > 0) runs.at(-1)!.want += line + "\n";
  }
  assert.equal(runs.length, 2, "the console block runs the example twice");
  const env = { ...process.env, SAVEPOINT_ADDR: d.addr };
  for (const r of runs) {
    const { stdout } = await promisify(execFile)(process.execPath, [script, ...r.args], { env, timeout: 60_000 });
    assert.equal(stdout, r.want, `node approve.mjs ${r.args.join(" ")}`);
  }
});
