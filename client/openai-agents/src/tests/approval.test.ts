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
// A run resumed from a RunState finds its session by the call's id in the histories of this process's sessions: a test that resumes one gives its call an id of its own.
const asking = (callId = "call_pay") => new ScriptedModel([[functionCall("pay", { cents: 500 }, { callId })], [assistantMessage("done")]]);

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

/** How many calls of session id wait for approval, as ListSessions counts them. */
async function awaiting(s: SavepointSession, id: string): Promise<number> {
  const c = await s.client();
  const all = (await c.raw.listSessions({})).sessions;
  return all.find((x) => x.sessionId === id)?.awaitingApprovalCount ?? -1;
}

test("state.reject() with a message: the tool is not run or begun, the model gets the message, and savepointd records the denial and the refusal", async () => {
  const ran: string[] = [];
  const model = asking();
  const agent = new Agent({ name: "a", model, tools: [payTool(ran)] });
  const first = await run(agent, "pay the invoice", { session: new SavepointSession("appr-no", { address: d.addr }) });
  const s = new SavepointSession("appr-no", { address: d.addr });
  assert.equal(await awaiting(s, "appr-no"), 1);
  first.state.reject(first.interruptions[0]!, { message: NOTE });
  const r = await run(agent, first.state, { session: s });
  assert.equal(r.finalOutput, "done");
  assert.deepEqual(ran, []);
  const [o] = outputs(model.lastCall!.request.input as AgentInputItem[]);
  assert.equal(o?.callId, "call_pay");
  assert.ok(o.text.includes(NOTE), o.text);
  const c = await s.client();
  const [e, ...more] = (await c.raw.listEffects({ sessionId: "appr-no" })).entries;
  assert.deepEqual(more, []);
  assert.ok(e && !e.begun && e.effect?.refused);
  assert.equal(e.effect?.output, NOTE);
  assert.equal(e.approval?.status, pb.ApprovalStatus.APPROVAL_STATUS_DENIED);
  assert.equal(e.approval?.note, NOTE);
  assert.equal(e.approval?.decidedBy, "openai-agents state.reject");
  assert.equal(await awaiting(s, "appr-no"), 0);
  const cp = (await c.raw.getSession({ sessionId: "appr-no" })).checkpoint!;
  assert.deepEqual(cp.pendingToolUses, []);
  assert.ok(!cp.stateJson.includes("openai_agents"), cp.stateJson);
  await s.close();
});

test("a call stopped for approval waits in savepointd too, and a resume without the RunState leaves it to the RunState", async () => {
  const id = "appr-wait";
  const agent = new Agent({ name: "a", model: asking(), tools: [payTool([])] });
  const first = await run(agent, "pay the invoice", { session: new SavepointSession(id, { address: d.addr }) });
  assert.deepEqual(first.interruptions.map((i) => i.name), ["pay"]);
  const s = new SavepointSession(id, { address: d.addr });
  const items = (await s.getItems()) as Item[];
  assert.deepEqual(items.map((i) => i.type), ["message", "function_call"]); // the prompt and the call, unanswered
  assert.equal(await awaiting(s, id), 1);
  const c = await s.client();
  const [e] = (await c.raw.listEffects({ sessionId: id })).entries;
  assert.equal(e?.approval?.status, pb.ApprovalStatus.APPROVAL_STATUS_WAITING);
  assert.equal(e.approval?.inputDigest.length, 32);
  assert.ok(!e.begun);
  assert.deepEqual((await c.raw.getSession({ sessionId: id })).checkpoint!.pendingToolUses.map((p) => p.toolUseId), ["call_pay"]);
  await s.close();
});

for (const deny of [false, true]) {
  test(`${deny ? "denied" : "approved"} in savepointd (as savepoint approve does), then the RunState resumed as it is: ${deny ? "the model gets the note, the tool never runs" : "the tool runs once and spends the approval"}`, async () => {
    const id = deny ? "appr-cli-no" : "appr-cli-ok";
    const ran: string[] = [];
    const model = asking(`call_${id}`);
    const agent = new Agent({ name: "a", model, tools: [payTool(ran)] });
    const first = await run(agent, "pay the invoice", { session: new SavepointSession(id, { address: d.addr }) });
    const state = await RunState.fromString(agent, first.state.toString());
    const s = new SavepointSession(id, { address: d.addr });
    const c = await s.client();
    await c.approveEffect(id, `call_${id}`, { deny, note: deny ? NOTE : "", decidedBy: "alice" });
    const r = await run(agent, state, { session: s });
    assert.equal(r.finalOutput, "done");
    assert.deepEqual(r.interruptions, []);
    assert.equal(ran.length, deny ? 0 : 1);
    const want = deny ? `This call was denied by alice; it did not run. Their note: ${NOTE}` : "paid 500";
    assert.deepEqual(outputs(model.lastCall!.request.input as AgentInputItem[]), [{ callId: `call_${id}`, text: want }]);
    const [e] = (await c.raw.listEffects({ sessionId: id })).entries;
    assert.equal(e?.approval?.decidedBy, "alice");
    assert.equal(await awaiting(s, id), 0);
    if (deny) assert.ok(!e.begun && e.effect?.refused && e.approval?.status === pb.ApprovalStatus.APPROVAL_STATUS_DENIED);
    else assert.ok(e.begun && e.approval?.spent && e.effect?.output === "paid 500");
    await s.close();
  });
}

for (const by of ["approve", "decided"] as const) {
test(`approved (${by === "approve" ? "state.approve" : "in savepointd"}), SIGKILLed after BeginEffect, resumed, then the older RunState replayed with its approval: the payment happens once`, async () => {
  const id = `appr-kill-${by}`;
  const stateFile = join(dir, id + ".state");
  const log = join(dir, id + ".log");
  const ask = await runNode("approval-worker.js", [d.addr, id, "ask", stateFile, log]);
  assert.equal(ask.code, 0, ask.stderr);
  assert.deepEqual(JSON.parse(ask.stdout), { interruptions: ["pay"] });
  assert.deepEqual(lines(log), []);
  if (by === "decided") {
    const p = new SavepointSession(id, { address: d.addr });
    assert.equal(await awaiting(p, id), 1);
    await (await p.client()).approveEffect(id, "call_pay", { decidedBy: "alice" });
    await p.close();
  }
  const killed = await runNode("approval-worker.js", [d.addr, id, by, stateFile, log], { CRASH: "tool" });
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

  const replay = await runNode("approval-worker.js", [d.addr, id, by, stateFile, log]);
  assert.equal(replay.code, 0, replay.stderr);
  const again = outputs(JSON.parse(replay.stdout).sent as AgentInputItem[]);
  assert.ok(again.length >= 1 && again.every((o) => o.callId === "call_pay" && !o.text.startsWith("paid")), JSON.stringify(again));
  assert.equal(lines(log).length, 1);
  [e] = (await c.raw.listEffects({ sessionId: id })).entries;
  assert.ok(e?.approval?.spent);
  await s.close();
});
}
