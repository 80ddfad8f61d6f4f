/**
 * docs/frameworks/langgraphjs.md's runnable examples, run as the page says:
 * each js block saved under the name its console block runs (approve.mjs,
 * invoice.mjs; inside this package, so that "@savepoint-dev/langgraph"
 * resolves to it), then each `node` command of the console block in a
 * process of its own against one savepointd, each printing what the block
 * shows (a command the example kills with SIGKILL up to its death). And
 * the page's in-doubt message is DurableToolNode's.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { inDoubtText } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

const here = dirname(fileURLToPath(import.meta.url));
const page = resolve(here, "../../../../docs/frameworks/langgraphjs.md");
const scripts: string[] = [];
let d: Daemon;

before(async () => {
  d = await startDaemon();
});
after(async () => {
  for (const f of scripts) rmSync(f, { force: true });
  await stopDaemon(d);
});

/** The bodies of the page's fenced blocks of a language, in order. */
function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp("^```" + lang + "\\n([\\s\\S]*?)^```$", "gm"))].map((m) => m[1]);
}

/** The commands of a console block (after "$ node NAME"), each with its output up to the next "$". */
function commands(transcript: string, name: string): { args: string[]; want: string }[] {
  const runs: { args: string[]; want: string }[] = [];
  const cmd = new RegExp(`^\\$ node ${name.replace(".", "\\.")} ?(.*)$`);
  for (const line of transcript.split("\n").filter(Boolean)) {
    const m = cmd.exec(line);
    if (m) runs.push({ args: m[1] ? m[1].split(" ") : [], want: "" });
    else if (!line.startsWith("$") && runs.length > 0) runs.at(-1)!.want += line + "\n";
  }
  return runs;
}

/** Saves the page's js block i as name and runs the commands of its console block i; returns how many ran. */
async function example(i: number, name: string): Promise<number> {
  const text = readFileSync(page, "utf8");
  const code = blocks(text, "js")[i];
  assert.ok(code, `${page} has no js block ${i}`);
  const script = join(here, name);
  scripts.push(script);
  writeFileSync(script, code);
  const transcript = blocks(text, "console")[i];
  assert.ok(transcript, `${page} has no console block ${i}`);
  const runs = commands(transcript, name);
  const env = { ...process.env, SAVEPOINT_ADDR: d.addr };
  for (const r of runs) {
    let stdout: string;
    try {
      ({ stdout } = await promisify(execFile)(process.execPath, [script, ...r.args], { env, timeout: 60_000 }));
    } catch (err) {
      const e = err as { signal?: string; stdout?: string };
      // The example's crash: the process kills itself.
      if (e.signal !== "SIGKILL" || !r.args.includes("crash")) throw err;
      stdout = e.stdout ?? "";
    }
    assert.equal(stdout, r.want, `node ${name} ${r.args.join(" ")}`);
  }
  return runs.length;
}

test("the page's example runs as it shows: the first process asks, a second one answers and the graph finishes", async () => {
  assert.equal(await example(0, "approve.mjs"), 2, "the console block runs the example twice");
});

test("the page's DurableToolNode example runs as it shows: a process killed inside the tool is resumed without sending again, answered in doubt", async () => {
  assert.equal(await example(1, "invoice.mjs"), 3, "the console block runs the example three times");
});

test("the page's in-doubt message is DurableToolNode's", () => {
  const [msg] = blocks(readFileSync(page, "utf8"), "text");
  assert.equal(msg, inDoubtText("send_invoice", "call_1") + "\n");
});
