import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Agent, type AgentInputItem, MemorySession, run, setTracingDisabled } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import { z } from "zod";

import { DEFAULT_ERROR_OUTPUT, durableTool, DurableToolError, type Effect, idempotencyKey, SavepointSession, STATE_KEY } from "../index.js";
import { planAppend } from "../ledger.js";
import { Daemon, runNode } from "./daemon.js";

setTracingDisabled(true);
let d: Daemon;
let dir: string;
before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "spt"));
});
after(async () => {
  await d.close();
  rmSync(dir, { recursive: true, force: true });
});

const REAL = "invoice for 120 sent to acme";
type Item = { type?: string; callId?: string; output?: { text?: string } | string; role?: string };

/** Every function_call of items has exactly one function_call_result, and no result lacks its call. */
function assertPaired(items: AgentInputItem[]): void {
  const its = items as Item[];
  const calls = its.filter((i) => i.type === "function_call").map((i) => i.callId);
  const results = its.filter((i) => i.type === "function_call_result").map((i) => i.callId);
  assert.deepEqual([...new Set(calls)], calls, "no call twice");
  assert.deepEqual([...results].sort(), [...calls].sort(), "each call has exactly one result");
}
const outputOf = (items: AgentInputItem[], callId: string) => {
  const r = (items as Item[]).find((i) => i.type === "function_call_result" && i.callId === callId);
  return typeof r?.output === "string" ? r.output : r?.output?.text;
};
const lines = (log: string) => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter(Boolean) : []);

// What the resumed model sees, by effect and the stage the first process was killed at.
type Expect = { runs: number; output: "real" | "in-doubt" };
const MATRIX: [string, Effect, Expect][] = [
  ["listed", "side_effect", { runs: 1, output: "real" }], // never begun: certainly never ran, so it runs now
  ["listed", "idempotent", { runs: 1, output: "real" }],
  ["listed", "read_only", { runs: 1, output: "real" }],
  ["begun", "side_effect", { runs: 0, output: "in-doubt" }],
  ["begun", "idempotent", { runs: 1, output: "real" }],
  ["tool", "side_effect", { runs: 1, output: "in-doubt" }],
  ["tool", "idempotent", { runs: 2, output: "real" }],
  ["tool", "read_only", { runs: 2, output: "real" }],
  ["ran", "side_effect", { runs: 1, output: "in-doubt" }],
  ["ran", "idempotent", { runs: 2, output: "real" }],
  ["ran", "read_only", { runs: 2, output: "real" }],
  ["recorded", "side_effect", { runs: 1, output: "real" }],
  ["recorded", "idempotent", { runs: 1, output: "real" }],
  ["recorded", "read_only", { runs: 1, output: "real" }],
  ["settled", "side_effect", { runs: 1, output: "real" }],
  ["settled", "idempotent", { runs: 1, output: "real" }],
  ["settled", "read_only", { runs: 1, output: "real" }],
  ["", "side_effect", { runs: 1, output: "real" }], // not killed: the SDK saved the call and its output
];

for (const [stage, effect, want] of MATRIX) {
  test(`killed at ${stage || "no point"} of a ${effect} call, a resume from a new process answers it (${want.output}, ${want.runs} runs)`, async () => {
    const id = `crash-${stage || "none"}-${effect}`;
    const log = join(dir, id + ".log");
    const first = await runNode("tool-worker.js", [d.addr, id, effect, "first", log], { CRASH: stage });
    if (stage) assert.equal(first.signal, "SIGKILL", `the first run was not killed at ${stage}:\n${first.stdout}${first.stderr}`);
    else assert.equal(first.code, 0, first.stderr);
    const resumed = await runNode("tool-worker.js", [d.addr, id, effect, "resume", log]);
    assert.equal(resumed.code, 0, resumed.stderr);
    const out = JSON.parse(resumed.stdout) as { final: string; sent: AgentInputItem[]; items: AgentInputItem[] };
    assert.equal(out.final, "Resumed.");
    // The next model request is valid: every call has exactly one output, in what was sent and in what is stored.
    assertPaired(out.sent);
    assertPaired(out.items);
    const seen = outputOf(out.sent, "call_1");
    if (want.output === "real") assert.equal(seen, REAL);
    else assert.match(seen ?? "", /^The outcome of this send call \(tool_use_id call_1\) is unknown: .*Check whether it took effect before retrying it\.$/);
    const runs = lines(log);
    assert.equal(runs.length, want.runs, `the tool ran ${runs.length} times: ${runs.join(" | ")}`);
    if (effect === "idempotent" && runs.length === 2) assert.equal(runs[0], runs[1], "a re-run gets the same idempotency key");
    if (effect !== "read_only" && runs.length > 0) assert.match(runs[0], /key=[0-9a-f]+$/);
    if (effect === "read_only") for (const r of runs) assert.match(r, /key=$/);
    // Nothing is left pending or listed.
    const s = new SavepointSession(id, { address: d.addr });
    const c = await s.client();
    const cp = (await c.raw.getSession({ sessionId: id })).checkpoint!;
    assert.deepEqual(cp.pendingToolUses, []);
    const part = cp.stateJson ? (JSON.parse(cp.stateJson) as Record<string, { calls?: object; resolved?: string[] }>)[STATE_KEY] : undefined;
    assert.equal(part?.calls, undefined, `no call is left listed: ${cp.stateJson}`);
    // The ledger holds the call's outcome when it ran and was recorded.
    const entries = (await c.raw.listEffects({ sessionId: id })).entries;
    assert.equal(entries.length, 1);
    if (want.output === "real") assert.equal(entries[0].effect?.output, REAL);
    await s.close();
  });
}

const invoice = (execute: () => Promise<string> | string, extra: Record<string, unknown> = {}) =>
  durableTool({
    name: "invoice",
    description: "Send an invoice.",
    parameters: z.object({ customer: z.string() }),
    execute,
    ...extra,
  });
const callThenAnswer = (callId: string) => new ScriptedModel([[functionCall("invoice", { customer: "acme" }, { callId })], [assistantMessage("Done.")]]);

test("an uninterrupted run records the call, passes its key, and leaves the history valid", async () => {
  const s = new SavepointSession("plain-run", { address: d.addr });
  const keys: string[] = [];
  const t = invoice(() => (keys.push(idempotencyKey()), "sent"));
  const r = await run(new Agent({ name: "a", model: callThenAnswer("c1"), tools: [t] }), "Invoice acme.", { session: s });
  assert.equal(r.finalOutput, "Done.");
  const items = await s.getItems();
  assertPaired(items);
  assert.equal(outputOf(items, "c1"), "sent");
  assert.equal(keys.length, 1);
  const c = await s.client();
  const e = (await c.raw.listEffects({ sessionId: s.sessionId })).entries[0];
  assert.equal(e.idempotencyKey, keys[0]);
  assert.equal(e.effect?.output, "sent");
  await s.close();
});

test("a tool that throws is recorded as a failure and answered by errorFunction; null rethrows after recording", async () => {
  const s = new SavepointSession("throws", { address: d.addr });
  const boom = () => {
    throw new Error("card declined");
  };
  const r = await run(new Agent({ name: "a", model: callThenAnswer("e1"), tools: [invoice(boom)] }), "go", { session: s });
  assert.equal(r.finalOutput, "Done.");
  assert.equal(outputOf(await s.getItems(), "e1"), DEFAULT_ERROR_OUTPUT);
  const custom = invoice(boom, { errorFunction: (_c: unknown, err: unknown) => `failed: ${(err as Error).message}` });
  await run(new Agent({ name: "a", model: callThenAnswer("e2"), tools: [custom] }), "go", { session: s });
  assert.equal(outputOf(await s.getItems(), "e2"), "failed: card declined");
  const c = await s.client();
  const byId = new Map((await c.raw.listEffects({ sessionId: s.sessionId })).entries.map((e) => [e.toolUseId, e.effect]));
  assert.deepEqual([byId.get("e1")?.isError, byId.get("e1")?.output], [true, DEFAULT_ERROR_OUTPUT]);
  assert.deepEqual([byId.get("e2")?.isError, byId.get("e2")?.output], [true, "failed: card declined"]);
  const raising = invoice(boom, { errorFunction: null });
  await assert.rejects(run(new Agent({ name: "a", model: callThenAnswer("e3"), tools: [raising] }), "go", { session: s }), /card declined/);
  const e3 = (await c.raw.listEffects({ sessionId: s.sessionId })).entries.find((e) => e.toolUseId === "e3");
  assert.deepEqual([e3?.effect?.isError, e3?.effect?.output], [true, "card declined"]);
  await s.close();
});

test("a durable tool in a run without a SavepointSession fails the run instead of running unrecorded", async () => {
  let ran = 0;
  const t = invoice(() => (ran++, "sent"));
  await assert.rejects(run(new Agent({ name: "a", model: callThenAnswer("m1"), tools: [t] }), "go", { session: new MemorySession() }), (err: unknown) => {
    assert.ok(err instanceof DurableToolError || /not a SavepointSession/.test(String(err)), String(err));
    return true;
  });
  assert.equal(ran, 0);
});

test("a call id reused after its call was recorded is refused, not run again", async () => {
  const s = new SavepointSession("reused", { address: d.addr });
  let ran = 0;
  const t = invoice(() => (ran++, "sent"));
  await run(new Agent({ name: "a", model: callThenAnswer("call_0"), tools: [t] }), "one", { session: s });
  await assert.rejects(run(new Agent({ name: "a", model: callThenAnswer("call_0"), tools: [t] }), "two", { session: s }), /already has a recorded outcome|reused call id/);
  assert.equal(ran, 1);
  await s.close();
});

test("addItems drops the SDK's late copy of a call a resume already answered", () => {
  const v = {
    revision: 3n, epoch: 1n, count: 2n, task: "t", turn: 0, tokensUsed: 0n, labels: {}, pending: [],
    stateJson: JSON.stringify({ [STATE_KEY]: { resolved: ["x1"] }, mine: 1 }),
  };
  const call = { type: "function_call", callId: "x1", name: "n", arguments: "{}" } as AgentInputItem;
  const result = { type: "function_call_result", callId: "x1", name: "n", status: "completed", output: "late" } as AgentInputItem;
  const msg = { role: "user", content: "next" } as AgentInputItem;
  const ch = planAppend(v, [call, result, msg]);
  assert.deepEqual(ch.append, [msg]);
  assert.equal(ch.stateJson, JSON.stringify({ mine: 1 }), "the resolved id is forgotten once its late output came; a user's key is kept");
});

/** Runs the worker's first run and resume for session id; returns the resume's output. */
async function resumeOf(id: string, env: Record<string, string> = {}): Promise<{ final: string; sent: AgentInputItem[]; items: AgentInputItem[] }> {
  const r = await runNode("tool-worker.js", [d.addr, id, "side_effect", "resume", join(dir, id + ".log")], env);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test("a resume killed again while re-running the call leaves it in doubt for the next one, run once", async () => {
  const id = "killed-twice";
  const log = join(dir, id + ".log");
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", log], { CRASH: "listed" });
  assert.equal(first.signal, "SIGKILL");
  const second = await runNode("tool-worker.js", [d.addr, id, "side_effect", "resume", log], { CRASH: "tool" });
  assert.equal(second.signal, "SIGKILL", "the resume re-ran the never-begun call and was killed in it");
  const out = await resumeOf(id);
  assertPaired(out.items);
  assert.match(outputOf(out.sent, "call_1") ?? "", /is unknown/);
  assert.equal(lines(log).length, 1);
});

test("an interrupted call of a tool the resumed agent lacks is answered, not left without an output", async () => {
  const id = "unknown-tool";
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", join(dir, id + ".log")], { CRASH: "listed" });
  assert.equal(first.signal, "SIGKILL");
  const out = await resumeOf(id, { NO_TOOL: "1" });
  assertPaired(out.items);
  assert.match(outputOf(out.sent, "call_1") ?? "", /^This send call \(tool_use_id call_1\) was interrupted before it ran and was not run again: the resumed agent has no durable tool of that name\./);
  assert.deepEqual(lines(join(dir, id + ".log")), []);
});

test("two agent processes running durable calls on one session each get their own outputs", async () => {
  const id = "two-agents";
  const runs = await Promise.all(
    ["a1", "b1"].map((callId) => runNode("tool-worker.js", [d.addr, id, "side_effect", "first", join(dir, `${id}-${callId}.log`)], { CALL_ID: callId })),
  );
  for (const r of runs) assert.equal(r.code, 0, r.stderr);
  const s = new SavepointSession(id, { address: d.addr });
  const items = await s.getItems();
  assertPaired(items);
  assert.equal(outputOf(items, "a1"), REAL);
  assert.equal(outputOf(items, "b1"), REAL);
  for (const c of ["a1", "b1"]) assert.equal(lines(join(dir, `${id}-${c}.log`)).length, 1);
  assert.equal(items.filter((i) => (i as Item).role === "user").length, 2);
  await s.close();
});

test("a call whose process is still running it is left to that process by another reader", async () => {
  const s = new SavepointSession("live-call", { address: d.addr });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const t = invoice(async () => {
    started();
    await gate;
    return "sent";
  });
  const done = run(new Agent({ name: "a", model: callThenAnswer("l1"), tools: [t] }), "go", { session: s });
  await running;
  const reader = new SavepointSession("live-call", { address: d.addr });
  assert.deepEqual(await reader.getItems(), [], "nothing answered while the call runs");
  release();
  await done;
  const items = await reader.getItems();
  assertPaired(items);
  assert.equal(outputOf(items, "l1"), "sent");
  await reader.close();
  await s.close();
});

test("parallel calls in one model response are each run once and answered once; a non-text output is recorded as JSON", async () => {
  const s = new SavepointSession("parallel", { address: d.addr });
  const seen: string[] = [];
  const t = durableTool({
    name: "quote",
    description: "Quote a price.",
    parameters: z.object({ sku: z.string() }),
    effect: "idempotent",
    execute: async ({ sku }) => (seen.push(sku), { sku, price: sku.length }),
  });
  const model = new ScriptedModel([
    [functionCall("quote", { sku: "ab" }, { callId: "q1" }), functionCall("quote", { sku: "abc" }, { callId: "q2" })],
    [assistantMessage("Quoted.")],
  ]);
  await run(new Agent({ name: "a", model, tools: [t] }), "quote", { session: s });
  const items = await s.getItems();
  assertPaired(items);
  assert.deepEqual(seen.sort(), ["ab", "abc"]);
  assert.equal(outputOf(items, "q1"), '{"sku":"ab","price":2}');
  assert.equal(outputOf(items, "q2"), '{"sku":"abc","price":3}');
  await s.close();
});

test("a streamed run goes through the ledger too", async () => {
  const s = new SavepointSession("streamed", { address: d.addr });
  const t = invoice(() => "sent");
  const r = await run(new Agent({ name: "a", model: callThenAnswer("st1"), tools: [t] }), "go", { session: s, stream: true });
  for await (const _ of r) void _;
  await r.completed;
  assert.equal(r.finalOutput, "Done.");
  const c = await s.client();
  assert.equal((await c.raw.listEffects({ sessionId: s.sessionId })).entries[0]?.effect?.output, "sent");
  assertPaired(await s.getItems());
  await s.close();
});

test("clearSession forgets listed calls but keeps the ledger: a recorded call id is still refused", async () => {
  const id = "clear-listed";
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", join(dir, id + ".log")], { CRASH: "recorded" });
  assert.equal(first.signal, "SIGKILL");
  const s = new SavepointSession(id, { address: d.addr });
  const c = await s.client();
  await s.clearSession();
  assert.deepEqual(await s.getItems(), [], "a cleared session answers no call");
  const cp = (await c.raw.getSession({ sessionId: id })).checkpoint!;
  assert.deepEqual(cp.pendingToolUses, []);
  assert.equal((await c.raw.listEffects({ sessionId: id })).entries[0]?.effect?.output, REAL);
  const again = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", join(dir, id + ".log")]);
  assert.notEqual(again.code, 0, "the reused call id call_1 is refused");
  assert.match(again.stderr, /already has a recorded outcome/);
  assert.equal(lines(join(dir, id + ".log")).length, 1);
  await s.close();
});

test("a call recorded by a process killed before it saved it as done is settled by any writer's save", async () => {
  const id = "settle-by-writer";
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", join(dir, id + ".log")], { CRASH: "recorded" });
  assert.equal(first.signal, "SIGKILL");
  const s = new SavepointSession(id, { address: d.addr });
  const c = await s.client();
  assert.equal((await c.raw.getSession({ sessionId: id })).checkpoint!.pendingToolUses.length, 1, "still pending after its record");
  // Not a getItems (which would answer it): a plain append, whose save carries the recorded pending tool use.
  await s.addItems([{ role: "user", content: "meanwhile" } as AgentInputItem]);
  assert.deepEqual((await c.raw.getSession({ sessionId: id })).checkpoint!.pendingToolUses, []);
  const items = await s.getItems();
  assertPaired(items);
  assert.equal(outputOf(items, "call_1"), REAL);
  assert.equal(lines(join(dir, id + ".log")).length, 1);
  await s.close();
});

test("a streamed run killed in a side-effecting tool is resumed like any other: in doubt, run once", async () => {
  const id = "streamed-crash";
  const log = join(dir, id + ".log");
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", log], { CRASH: "tool", STREAM: "1" });
  assert.equal(first.signal, "SIGKILL");
  const out = await resumeOf(id);
  assertPaired(out.items);
  assert.match(outputOf(out.sent, "call_1") ?? "", /is unknown/);
  assert.equal(lines(log).length, 1);
});

test("killed inside the second of two parallel side-effecting calls, a resume answers both once and runs neither twice", async () => {
  const id = "parallel-crash";
  const log = join(dir, id + ".log");
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", log], { CRASH: "tool", CRASH_NTH: "2", CALLS: "2" });
  assert.equal(first.signal, "SIGKILL");
  const out = await resumeOf(id);
  assertPaired(out.sent);
  assertPaired(out.items);
  const answered = (out.items as Item[]).filter((i) => i.type === "function_call").map((i) => i.callId);
  assert.deepEqual([...answered].sort(), ["call_1", "call_2"]);
  const runs = lines(log);
  assert.deepEqual(runs.map((r) => r.split(" ")[0]).sort(), ["acme", "globex"], "each invoice sent once");
  // The call that ran first may have been recorded before the kill (its real output) or not (in doubt); the one that ran second was killed in its tool.
  const callOf = (who: string) => (who === "acme" ? "call_1" : "call_2");
  const [firstRan, secondRan] = runs.map((r) => r.split(" ")[0]);
  assert.match(outputOf(out.items, callOf(firstRan)) ?? "", /^(invoice for \d+ sent to \w+|The outcome of this send call .* is unknown: .*)$/);
  assert.match(outputOf(out.items, callOf(secondRan)) ?? "", new RegExp(`^The outcome of this send call \\(tool_use_id ${callOf(secondRan)}\\) is unknown: `));
});

test("structured output (text and an image) reaches the model as such, is recorded as JSON, and a resume answers with the same", async () => {
  const blocks = [
    { type: "text", text: "invoice sent" },
    { type: "image", image: "data:image/png;base64,iVBORw0KGgo=" },
  ];
  const want = [
    { type: "input_text", text: "invoice sent" },
    { type: "input_image", image: "data:image/png;base64,iVBORw0KGgo=" },
  ];
  const s = new SavepointSession("blocks", { address: d.addr });
  const t = invoice(() => blocks as never);
  await run(new Agent({ name: "a", model: callThenAnswer("b1"), tools: [t] }), "Invoice acme.", { session: s });
  const items = (await s.getItems()) as { type?: string; callId?: string; output?: unknown }[];
  assert.deepEqual(items.find((i) => i.type === "function_call_result" && i.callId === "b1")?.output, want);
  const c = await s.client();
  assert.deepEqual(JSON.parse((await c.raw.listEffects({ sessionId: "blocks" })).entries[0].effect!.output), blocks);
  await s.close();

  // Killed after RecordEffect: the resume answers the call with the same structured output.
  const id = "blocks-recorded";
  const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", join(dir, id + ".log")], { CRASH: "recorded", BLOCKS: "1" });
  assert.equal(first.signal, "SIGKILL", first.stderr);
  const out = await resumeOf(id, { BLOCKS: "1" });
  assertPaired(out.items);
  const r = (out.sent as { type?: string; callId?: string; output?: unknown }[]).find((i) => i.type === "function_call_result" && i.callId === "call_1");
  assert.deepEqual(r?.output, want);
  assert.equal(lines(join(dir, id + ".log")).length, 1, "the tool ran once");
});
