/**
 * The duplicate-intent guard where it happens, in LangGraph.js
 * (dupproc.ts): a graph under durability "async" SIGKILLed after its
 * side-effecting tool ran and was recorded but before the model's message
 * was saved, resumed from a new process whose model reissues the same call
 * under a new id: the invoice is sent once, and the model is told under
 * the new id that it was sent and what it returned. An uncrashed run asking
 * for the same invoice twice sends it twice.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { graphPb } from "@savepoint-dev/client";

import { Connection } from "../conn.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

const program = fileURLToPath(new URL("./dupproc.js", import.meta.url));
let d: Daemon;
let conn: Connection;
let root: string;

before(async () => {
  d = await startDaemon();
  conn = new Connection({ address: d.addr });
  root = mkdtempSync(join(tmpdir(), "spldd"));
});
after(async () => {
  conn.close();
  await stopDaemon(d);
  rmSync(root, { recursive: true, force: true });
});

interface Msg {
  type: string;
  content: string;
  status?: string;
  tool_call_id?: string;
}

function run(args: string[], killOn?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawn(process.execPath, [program, ...args]);
  let stdout = "";
  let stderr = "";
  p.stdout.on("data", (b: Buffer) => {
    stdout += b.toString();
    if (killOn && stdout.includes(`${killOn}\n`)) p.kill("SIGKILL");
  });
  p.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => p.kill("SIGKILL"), 30_000);
  return new Promise((res) =>
    p.on("close", (code, signal) => {
      clearTimeout(timer);
      res({ code: code ?? (signal === "SIGKILL" ? 137 : null), stdout, stderr });
    }),
  );
}

const lines = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : []);

async function ledger(thread: string): Promise<graphPb.ThreadEffect[]> {
  const res = await conn.unary<graphPb.ListThreadEffectsRequest, graphPb.ListThreadEffectsResponse>(
    "listThreadEffects",
    graphPb.ListThreadEffectsRequest.fromPartial({ threadId: thread }),
  );
  return res.effects;
}

test("killed after the tool ran, before the model's message was saved: resumed, the reissued call is answered, not run", async () => {
  const thread = "dup-killed";
  const dir = join(root, thread);
  mkdirSync(dir);
  const killed = await run(["start", d.addr, thread, dir, "kill"], "ran");
  assert.equal(killed.code, 137, killed.stderr);
  assert.deepEqual(lines(join(dir, "sent")), ["invoice 42 to acme"]);
  const resumed = await run(["resume", d.addr, thread, dir]);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.deepEqual(lines(join(dir, "sent")), ["invoice 42 to acme"], "the invoice was sent twice");
  const entries = await ledger(thread);
  assert.equal(entries.length, 2);
  const first = entries.find((e) => !e.duplicateOf)!;
  const caught = entries.find((e) => e.duplicateOf)!;
  assert.equal(first.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
  assert.equal(caught.duplicateOf, first.toolUseId);
  assert.equal(caught.attempts, 0);
  assert.notEqual(first.runId, caught.runId);
  const { messages } = JSON.parse(resumed.stdout) as { messages: Msg[] };
  const toolMsgs = messages.filter((m) => m.type === "tool");
  assert.equal(toolMsgs.length, 1);
  assert.equal(toolMsgs[0].tool_call_id, caught.toolUseId);
  assert.equal(toolMsgs[0].status, "success");
  assert.ok(toolMsgs[0].content.includes(`tool_use_id ${first.toolUseId} `), toolMsgs[0].content);
  assert.ok(toolMsgs[0].content.endsWith("It was already taken, and returned:\ninvoice 42 sent to acme"), toolMsgs[0].content);
});

test("an uncrashed run asking for the same invoice twice sends it twice", async () => {
  const thread = "dup-twice";
  const dir = join(root, thread);
  mkdirSync(dir);
  const done = await run(["twice", d.addr, thread, dir]);
  assert.equal(done.code, 0, done.stderr);
  assert.deepEqual(lines(join(dir, "sent")), ["invoice 42 to acme", "invoice 42 to acme"]);
  const { messages } = JSON.parse(done.stdout) as { messages: Msg[] };
  assert.deepEqual(
    messages.filter((m) => m.type === "tool").map((m) => m.content),
    ["invoice 42 sent to acme", "invoice 42 sent to acme"],
  );
  assert.ok((await ledger(thread)).every((e) => !e.duplicateOf && e.attempts === 1));
});
