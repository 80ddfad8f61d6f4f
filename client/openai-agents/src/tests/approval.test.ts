import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Agent, type AgentInputItem, run, RunState, setTracingDisabled } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import { pb } from "@savepoint-dev/client";
import { z } from "zod";

import { durableTool, idempotencyKey, SavepointSession } from "../index.js";
import { Daemon, runNode } from "./daemon.js";

setTracingDisabled(true);
let d: Daemon;
let dir: string;
before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "spa"));
});
after(async () => {
  await d.close();
  rmSync(dir, { recursive: true, force: true });
});

const NOTE = "over the limit; ask finance";
const lines = (log: string) => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter(Boolean) : []);
type Item = { type?: string; callId?: string; output?: { text?: string } | string };
const outputs = (items: AgentInputItem[]) =>
  (items as Item[]).filter((i) => i.type === "function_call_result").map((i) => ({ callId: i.callId, text: typeof i.output === "string" ? i.output : i.output?.text ?? "" }));

const payTool = (ran: string[]) =>
  durableTool({
    name: "pay",
    description: "Pay the invoice.",
    parameters: z.object({ cents: z.number() }),
    needsApproval: true,
    execute: ({ cents }) => (ran.push(idempotencyKey()), `paid ${cents}`),
  });
const asking = () => new ScriptedModel([[functionCall("pay", { cents: 500 }, { callId: "call_pay" })], [assistantMessage("done")]]);

test("state.approve() is recorded in savepointd and spent by the begin; the resumed run (a new session object, a restored RunState) runs the call once", async () => {
  const ran: string[] = [];
  const model = asking();
  const agent = new Agent({ name: "a", model, tools: [payTool(ran)] });
  const first = await run(agent, "pay the invoice", { session: new SavepointSession("appr-ok", { address: d.addr }) });
  assert.deepEqual(first.interruptions.map((i) => i.name), ["pay"]);
  assert.equal(ran.length, 0);
  const state = await RunState.fromString(agent, first.state.toString());
  state.approve(state.getInterruptions()[0]!);
  const s = new SavepointSession("appr-ok", { address: d.addr });
  const r = await run(agent, state, { session: s });
  assert.equal(r.finalOutput, "done");
  assert.equal(ran.length, 1);
  assert.equal(ran[0]!.length, 32);
  assert.deepEqual(outputs(model.lastCall!.request.input as AgentInputItem[]), [{ callId: "call_pay", text: "paid 500" }]);
  const c = await s.client();
  const [e] = (await c.raw.listEffects({ sessionId: "appr-ok" })).entries;
  assert.ok(e?.begun);
  assert.equal(e.effect?.output, "paid 500");
  assert.equal(e.approval?.status, pb.ApprovalStatus.APPROVAL_STATUS_APPROVED);
  assert.ok(e.approval?.spent);
  assert.equal(e.approval?.decidedBy, "openai-agents state.approve");
  assert.deepEqual((await c.raw.getSession({ sessionId: "appr-ok" })).checkpoint!.pendingToolUses, []);
  await s.close();
});

test("state.reject() with a message: the tool is not run or begun, and the model gets the message", async () => {
  const ran: string[] = [];
  const model = asking();
  const agent = new Agent({ name: "a", model, tools: [payTool(ran)] });
  const first = await run(agent, "pay the invoice", { session: new SavepointSession("appr-no", { address: d.addr }) });
  first.state.reject(first.interruptions[0]!, { message: NOTE });
  const s = new SavepointSession("appr-no", { address: d.addr });
  const r = await run(agent, first.state, { session: s });
  assert.equal(r.finalOutput, "done");
  assert.deepEqual(ran, []);
  const [o] = outputs(model.lastCall!.request.input as AgentInputItem[]);
  assert.equal(o?.callId, "call_pay");
  assert.ok(o.text.includes(NOTE), o.text);
  const c = await s.client();
  assert.deepEqual((await c.raw.listEffects({ sessionId: "appr-no" })).entries.filter((e) => e.begun), []);
  await s.close();
});

test("approved, SIGKILLed after BeginEffect, resumed, then the older RunState replayed with its approval: the payment happens once", async () => {
  const id = "appr-kill";
  const stateFile = join(dir, id + ".state");
  const log = join(dir, id + ".log");
  const ask = await runNode("approval-worker.js", [d.addr, id, "ask", stateFile, log]);
  assert.equal(ask.code, 0, ask.stderr);
  assert.deepEqual(JSON.parse(ask.stdout), { interruptions: ["pay"] });
  assert.deepEqual(lines(log), []);
  const killed = await runNode("approval-worker.js", [d.addr, id, "approve", stateFile, log], { CRASH: "tool" });
  assert.equal(killed.signal, "SIGKILL", killed.stderr);
  assert.equal(lines(log).length, 1);
  const s = new SavepointSession(id, { address: d.addr });
  const c = await s.client();
  let [e] = (await c.raw.listEffects({ sessionId: id })).entries;
  assert.ok(e?.begun && !e.effect && e.approval?.spent);

  const resumed = await runNode("approval-worker.js", [d.addr, id, "resume", stateFile, log]);
  assert.equal(resumed.code, 0, resumed.stderr);
  const seen = outputs(JSON.parse(resumed.stdout).sent as AgentInputItem[]);
  assert.equal(seen.length, 1);
  assert.ok(seen[0]!.text.includes("is unknown"), seen[0]!.text);

  const replay = await runNode("approval-worker.js", [d.addr, id, "approve", stateFile, log]);
  assert.equal(replay.code, 0, replay.stderr);
  const again = outputs(JSON.parse(replay.stdout).sent as AgentInputItem[]);
  assert.ok(again.length >= 1 && again.every((o) => o.callId === "call_pay" && !o.text.startsWith("paid")), JSON.stringify(again));
  assert.equal(lines(log).length, 1);
  [e] = (await c.raw.listEffects({ sessionId: id })).entries;
  assert.ok(e?.approval?.spent);
  await s.close();
});
