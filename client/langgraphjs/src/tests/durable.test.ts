/**
 * A real LangGraph.js agent (durableproc.ts: a StateGraph of a scripted
 * chat model and a DurableToolNode on SavepointSaver) killed with SIGKILL
 * before its side-effecting tool, during it (after the effect, before its
 * outcome is recorded) and after its outcome is recorded, and resumed from
 * a new process each time: the invoice is sent at most once, exactly once
 * unless the call is reported in doubt, and the in-doubt ToolMessage
 * appears only for the kill between the begin and the record.
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
import { inDoubtText } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

const program = fileURLToPath(new URL("./durableproc.js", import.meta.url));
let d: Daemon;
let conn: Connection;
let root: string;

before(async () => {
  d = await startDaemon();
  conn = new Connection({ address: d.addr });
  root = mkdtempSync(join(tmpdir(), "spldt"));
});
after(async () => {
  conn.close();
  await stopDaemon(d);
  rmSync(root, { recursive: true, force: true });
});

interface Msg {
  type: string;
  content: string;
  name?: string;
  status?: string;
  tool_call_id?: string;
}

/** Runs durableproc.js; with a kill point, SIGKILLs it once it prints the point's name. */
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

async function ledger(thread: string): Promise<Map<string, graphPb.ThreadEffect>> {
  const res = await conn.unary<graphPb.ListThreadEffectsRequest, graphPb.ListThreadEffectsResponse>(
    "listThreadEffects",
    graphPb.ListThreadEffectsRequest.fromPartial({ threadId: thread }),
  );
  return new Map(res.effects.map((e) => [e.toolUseId, e]));
}

/** Runs the agent on a new thread, killed at point (none: not killed), then resumed from a new process when killed. */
async function scenario(point: "none" | "before" | "during" | "after") {
  const thread = `kill-${point}`;
  const dir = join(root, point);
  mkdirSync(dir);
  const first = await run(["start", d.addr, thread, dir, point], point === "none" ? undefined : point);
  let final = first;
  if (point === "none") {
    assert.equal(first.code, 0, first.stderr);
  } else {
    assert.equal(first.code, 137, `killed at ${point}: ${first.stderr}`);
    assert.equal(first.stdout, `${point}\n`);
    assert.equal(lines(join(dir, "sent")).length, point === "before" ? 0 : 1, "sent when killed");
    final = await run(["resume", d.addr, thread, dir]);
    assert.equal(final.code, 0, final.stderr);
  }
  const got = JSON.parse(final.stdout) as { messages: Msg[]; next: string[] };
  assert.deepEqual(got.next, [], "the graph ended");
  return { got, sent: lines(join(dir, "sent")), lookups: lines(join(dir, "lookups")), effects: await ledger(thread) };
}

const doubt = inDoubtText("send_invoice", "call_send");

for (const point of ["none", "before", "after"] as const) {
  test(`killed ${point === "none" ? "never" : `${point} the tool's ${point === "before" ? "begin" : "record"}`}: the invoice is sent exactly once and answered with its result`, async () => {
    const { got, sent, effects } = await scenario(point);
    assert.equal(sent.length, 1, sent.join("\n"));
    const tools = got.messages.filter((m) => m.type === "tool");
    assert.deepEqual(
      tools.map((m) => [m.tool_call_id, m.status, m.content]),
      [
        ["call_lookup", "success", "acme: billing@acme.example"],
        ["call_send", "success", "invoice 42 sent to acme"],
      ],
    );
    assert.ok(!got.messages.some((m) => String(m.content).includes("is unknown")), "no call in doubt");
    assert.equal(got.messages.at(-1)?.content, "lookup_customer success: acme: billing@acme.example\nsend_invoice success: invoice 42 sent to acme");
    const send = effects.get("call_send");
    assert.equal(send?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
    assert.equal(send?.attempts, 1);
    assert.equal(sent[0], `invoice 42 to acme key ${send?.idempotencyKey}`, "the tool had its call's idempotency key");
  });
}

test("killed during the tool (after its effect, before its record): the invoice is not sent again, and the call is answered in doubt", async () => {
  const { got, sent, lookups, effects } = await scenario("during");
  assert.equal(sent.length, 1, "sent once, by the killed process");
  const tools = got.messages.filter((m) => m.type === "tool");
  assert.deepEqual(
    tools.map((m) => [m.tool_call_id, m.status, m.content]),
    [
      ["call_lookup", "success", "acme: billing@acme.example"],
      ["call_send", "error", doubt],
    ],
  );
  assert.equal(got.messages.at(-1)?.content, `lookup_customer success: acme: billing@acme.example\nsend_invoice error: ${doubt}`);
  const send = effects.get("call_send");
  assert.equal(send?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_BEGUN, "still begun: nothing was recorded");
  assert.equal(send?.attempts, 1);
  // The read-only lookup, running beside it, is run again on resume unless its result was recorded first.
  const lookup = effects.get("call_lookup");
  assert.equal(lookup?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
  assert.ok(lookups.length >= 1 && lookups.length <= (lookup?.attempts ?? 0), `${lookups.length} lookups in ${lookup?.attempts} attempts`);
});
