import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { dial, SessionStatus } from "@savepoint-dev/client";

// The TypeScript client's test daemon helper (client/typescript/src/tests/daemon.ts).
import { Daemon } from "../../../typescript/dist/tests/daemon.js";
import { Fake, FINAL, pairingError, REPORT, UNSURE } from "./fake.js";

const AGENT = join(dirname(fileURLToPath(import.meta.url)), "agent.js");
let d: Daemon;
const fake = new Fake();

before(async () => {
  d = await Daemon.start();
  await fake.start();
});
after(async () => {
  await d.close();
  await fake.close();
});

function runAgent(work: string, sid: string, crash = "", mode = ""): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((res) => {
    const p = spawn(process.execPath, [AGENT, d.addr, fake.url, work, sid], { env: { ...process.env, CRASH_AT: crash, AGENT_MODE: mode } });
    let out = "";
    p.stdout.on("data", (b) => (out += b));
    p.stderr.on("data", (b) => (out += b));
    p.on("exit", (code, signal) => res({ code, signal, out }));
  });
}

// Every crash moment of every turn, as client/python/tests/test_anthropic.py
// has them: [CRASH_AT, report.txt writes, in doubt]. Turns 1-3 ask for
// read_notes, count_words (both read-only) and write_report; turn 4 answers.
const MOMENTS: [string, number, boolean][] = [
  ...[1, 2, 3, 4].map((n): [string, number, boolean] => [`before-point-a:${n}`, 1, false]),
  ...[1, 2, 3].map((n): [string, number, boolean] => [`after-point-a:${n}`, 1, false]),
  ["after-point-a:4", 1, false], // the final answer is saved, the session not completed
  ["after-begin:1", 0, true], // write_report begun, killed before it wrote
  ["in-tool:1", 1, true], // killed inside write_report, after its side effect
  ...[1, 2, 3].map((n): [string, number, boolean] => [`after-record:${n}`, 1, false]),
  ...[1, 2, 3].map((n): [string, number, boolean] => [`after-point-b:${n}`, 1, false]),
];

// make test runs a moment for each way a resume can go: Reconcile's RUN (a
// read-only call pending), IN_DOUBT (begun, and begun then written), REUSE
// (recorded), and a history that already ends with the final answer; the
// crash during a resume is its own test below. SAVEPOINT_FULL_MATRIX=1
// (make test-anthropic-matrix) runs every moment, and the SDK's tool runner
// at the moments around its tools, as the Python tests do.
const FULL = process.env.SAVEPOINT_FULL_MATRIX === "1";
const SHORT = new Set(["after-point-a:1", "after-begin:1", "in-tool:1", "after-record:3", "after-point-a:4"]);
const RUNNER_SHORT = new Set(["after-begin:1", "in-tool:1", "after-record:3"]);
const RUNNER_FULL = new Set([...SHORT, "before-point-a:1", "after-point-a:3", "after-point-b:2"]);
const CASES = [
  ...MOMENTS.filter((m) => FULL || SHORT.has(m[0])).map((m) => [...m, ""] as const),
  ...MOMENTS.filter((m) => (FULL ? RUNNER_FULL : RUNNER_SHORT).has(m[0])).map((m) => [...m, "runner"] as const),
];

for (const [crash, writes, inDoubt, mode] of CASES) {
  test(`${mode ? "durableToolRunner" : "DurableAgent"}: SIGKILL at ${crash}, resumed by a new process`, async () => {
    const work = mkdtempSync(join(tmpdir(), "spa"));
    writeFileSync(join(work, "sales-notes.txt"), "Closed deals with Acme, Globex and Initech this week.");
    const sid = `ts-${mode}-${crash}`;
    const first = await runAgent(work, sid, crash, mode);
    assert.equal(first.signal, "SIGKILL", first.out);
    const second = await runAgent(work, sid, "", mode);
    assert.equal(second.code, 0, second.out);
    const report = join(work, "report.txt");
    assert.deepEqual(existsSync(report) ? readFileSync(report, "utf8").split("\n").filter(Boolean) : [], Array(writes).fill(REPORT));
    const c = await dial(d.addr);
    try {
      const g = await c.raw.getSession({ sessionId: sid });
      const msgs = g.checkpoint!.messages.map((m) => ({ role: m.role, content: JSON.parse(m.contentJson) }));
      assert.equal(pairingError(msgs), "");
      assert.equal(g.checkpoint!.status, SessionStatus.SESSION_STATUS_COMPLETED);
      assert.equal(g.checkpoint!.finalOutput, inDoubt ? UNSURE : FINAL);
      const res = msgs.flatMap((m) => (m.role === "user" && Array.isArray(m.content) ? m.content : [])).find((b: { tool_use_id?: string }) => b.tool_use_id === "toolu_03");
      assert.equal(Boolean(res.is_error), inDoubt);
      assert.deepEqual(msgs[1]!.content[0], { type: "thinking", thinking: "Read the notes first.", signature: "sig-0" });
    } finally {
      c.close();
    }
    assert.deepEqual(fake.errors, []);
    const n = fake.requests.length;
    const third = await runAgent(work, sid, "", mode);
    assert.equal(third.out.trim(), `[done] ${inDoubt ? UNSURE : FINAL}`);
    assert.equal(fake.requests.length, n, "a completed session does not call the model");
  });
}

for (const mode of ["", "runner"]) {
  test(`${mode ? "durableToolRunner" : "DurableAgent"}: SIGKILL during a resume, then resumed again`, async () => {
    const work = mkdtempSync(join(tmpdir(), "spa"));
    writeFileSync(join(work, "sales-notes.txt"), "Closed deals with Acme, Globex and Initech this week.");
    const sid = `ts-${mode}-during-resume`;
    // Killed after write_report's outcome was recorded, then again inside the resume's Reconcile.
    assert.equal((await runAgent(work, sid, "after-record:3", mode)).signal, "SIGKILL");
    const second = await runAgent(work, sid, "resume:1", mode);
    assert.equal(second.signal, "SIGKILL", second.out);
    assert.match(second.out, /\[kill\] resume:1/);
    const last = await runAgent(work, sid, "", mode);
    assert.equal(last.code, 0, last.out);
    assert.deepEqual(readFileSync(join(work, "report.txt"), "utf8").split("\n").filter(Boolean), [REPORT]);
    const c = await dial(d.addr);
    try {
      const g = await c.raw.getSession({ sessionId: sid });
      const msgs = g.checkpoint!.messages.map((m) => ({ role: m.role, content: JSON.parse(m.contentJson) }));
      assert.equal(pairingError(msgs), "");
      assert.equal(g.checkpoint!.status, SessionStatus.SESSION_STATUS_COMPLETED);
      assert.equal(g.checkpoint!.finalOutput, FINAL);
    } finally {
      c.close();
    }
  });
}

const PARALLEL = join(dirname(fileURLToPath(import.meta.url)), "parallel.js");

function runParallel(work: string, sid: string, crash = ""): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((res) => {
    const p = spawn(process.execPath, [PARALLEL, d.addr, work, sid, ...(crash ? [crash] : [])]);
    let out = "";
    p.stdout.on("data", (b) => (out += b));
    p.stderr.on("data", (b) => (out += b));
    p.on("exit", (code, signal) => res({ code, signal, out }));
  });
}

const lines = (f: string) => (existsSync(f) ? readFileSync(f, "utf8").split("\n").filter(Boolean) : []);

test("DurableAgent runs a turn's tools concurrently, each begun before it runs", async () => {
  const work = mkdtempSync(join(tmpdir(), "spa"));
  const r = await runParallel(work, "ts-parallel");
  assert.equal(r.code, 0, r.out);
  assert.equal(r.out.trim(), "[done] toolu_fast:fast done, begun first: true | toolu_slow:slow done, begun first: true");
  assert.deepEqual([lines(join(work, "fast.txt")), lines(join(work, "slow.txt"))], [["fast"], ["slow"]]);
});

test("DurableAgent killed mid-turn while its tools run concurrently: the finished one is reused, the running one in doubt", async () => {
  const work = mkdtempSync(join(tmpdir(), "spa"));
  const first = await runParallel(work, "ts-parallel-crash", "crash");
  assert.equal(first.signal, "SIGKILL", first.out);
  const second = await runParallel(work, "ts-parallel-crash");
  assert.equal(second.code, 0, second.out);
  assert.equal(second.out.trim(), "[done] toolu_fast:fast done, begun first: true | toolu_slow:in doubt");
  assert.deepEqual([lines(join(work, "fast.txt")), lines(join(work, "slow.txt"))], [["fast"], ["slow"]]);
});

test("durableToolRunner refuses runToolsEagerly and stream", async () => {
  const { default: Anthropic } = await import("@anthropic-ai/sdk");
  const { durableToolRunner } = await import("../index.js");
  const client = new Anthropic({ apiKey: "x" });
  const base = { model: "m", max_tokens: 5, messages: [{ role: "user", content: "go" }], tools: [] };
  assert.throws(() => durableToolRunner(client, "s", { ...base, runToolsEagerly: true }), /runToolsEagerly is refused/);
  assert.throws(() => durableToolRunner(client, "s", { ...base, stream: true }), /stream is refused/);
});

/** A stand-in for the SDK client: hands out replies in order and keeps each create's parameters. */
function scripted(...replies: Record<string, unknown>[]) {
  const calls: Record<string, unknown>[] = [];
  const messages = {
    create: async (p: Record<string, unknown>) => {
      calls.push(structuredClone(p));
      const r = replies.shift();
      if (!r) throw new Error("no more replies");
      return { id: "m", type: "message", role: "assistant", model: "x", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 2 }, ...r };
    },
  };
  return { calls, client: { messages, beta: { messages } } as never };
}

test("DurableAgent: parameters pass through; pause_turn is sent back, max_tokens saves nothing", async () => {
  const { DurableAgent, StopReasonError, MaxTurnsError } = await import("../index.js");
  const pause = { content: [{ type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: { query: "q" } }], stop_reason: "pause_turn" };
  const { calls, client } = scripted(pause, { content: [{ type: "text", text: "The rep" }], stop_reason: "max_tokens" }, { content: [{ type: "text", text: "done" }], stop_reason: "end_turn" });
  const sp = await dial(d.addr);
  try {
    const agent = new DurableAgent(client, "ts-params", { savepoint: sp });
    const params = { model: "m", max_tokens: 5, system: "be brief", tool_choice: { type: "auto" }, metadata: { user_id: "u" }, thinking: { type: "enabled", budget_tokens: 1024 }, betas: ["b1"] };
    await assert.rejects(agent.run("go", params), (e: unknown) => e instanceof StopReasonError && e.stopReason === "max_tokens");
    assert.deepEqual(calls[1]!.messages as unknown[], [{ role: "user", content: "go" }, { role: "assistant", content: pause.content }]);
    assert.equal(await agent.run("go", params), "done");
    for (const c of calls) for (const [k, v] of Object.entries(params)) assert.deepEqual(c[k], v, k);
    assert.equal(agent.usage.input_tokens, 3);
    await assert.rejects(agent.run("go", { ...params, messages: [] } as never), /takes no messages/);

    const loop = (id: string) => ({ content: [{ type: "tool_use", id, name: "again", input: {} }], stop_reason: "tool_use" });
    const two = scripted(loop("toolu_x"), loop("toolu_y"));
    const bounded = new DurableAgent(two.client, "ts-max-turns", { savepoint: sp, maxTurns: 2, tools: [{ name: "again", input_schema: { type: "object" }, run: () => "ok" } as never] });
    await assert.rejects(bounded.run("go", { model: "m", max_tokens: 5 }), MaxTurnsError);
    const s = await sp.resume("ts-max-turns");
    assert.equal(s.status, SessionStatus.SESSION_STATUS_ACTIVE);
    assert.equal(s.turn, 2);
  } finally {
    sp.close();
  }
});

test("DurableAgent: effect classes from durable(), trusted MCP annotations, else SIDE_EFFECT", async () => {
  const { durable, effectOf } = await import("../index.js");
  const { EffectClass } = await import("@savepoint-dev/client");
  const plain = { name: "p", input_schema: { type: "object" }, run: () => "" } as never;
  const mcp = { name: "m", input_schema: { type: "object" }, run: () => "", annotations: { readOnlyHint: true } } as never;
  assert.equal(effectOf(plain), EffectClass.EFFECT_CLASS_SIDE_EFFECT);
  assert.equal(effectOf(durable({ ...(plain as object) } as never, { effect: "idempotent" })), EffectClass.EFFECT_CLASS_IDEMPOTENT);
  assert.equal(effectOf(mcp), EffectClass.EFFECT_CLASS_SIDE_EFFECT);
  assert.equal(effectOf(mcp, true), EffectClass.EFFECT_CLASS_READ_ONLY);
  assert.throws(() => durable({ ...(plain as object) } as never, { effect: "sometimes" as never }), /effect must be one of/);
});
