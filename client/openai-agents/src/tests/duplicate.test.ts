/**
 * durableTool's duplicate branch: an earlier run of the session (an older
 * epoch) made a payment and its process died before the model's message
 * was saved; the session was taken over, and the new run's model asks for
 * the same payment under a new call id. The tool does not run: the model
 * gets the daemon's text naming the earlier call, with its output, and the
 * call is not left pending. A repeatable tool runs the same call.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Agent, type AgentInputItem, run, setTracingDisabled } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import { dial } from "@savepoint-dev/client";
import { z } from "zod";

import { durableTool, SavepointSession } from "../index.js";
import { Daemon, runNode } from "./daemon.js";

setTracingDisabled(true);

let d: Daemon;
before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d.close();
});

type Item = { type?: string; callId?: string; output?: { text?: string } | string };
const outputOf = (items: AgentInputItem[], callId: string) => {
  const r = (items as Item[]).find((i) => i.type === "function_call_result" && i.callId === callId);
  return typeof r?.output === "string" ? r.output : r?.output?.text;
};

for (const repeatable of [false, true]) {
  test(`a call an interrupted run made, reissued under a new id, is ${repeatable ? "run by a repeatable tool" : "not run: the model gets the daemon's text"}`, async () => {
    const id = `dup-${repeatable ? "repeatable" : "guarded"}`;
    const c = await dial(d.addr);
    try {
      // The earlier run: the payment begun and recorded under call_1, and
      // the process gone before the model's message was saved.
      await c.raw.saveCheckpoint({ sessionId: id, task: "pay bob" });
      const reg = await c.raw.beginEffect({ sessionId: id, toolUseId: "call_1", toolUse: { name: "pay", inputJson: '{"to": "bob", "amount": 5}' } });
      assert.equal(reg.duplicate, undefined);
      await c.raw.recordEffect({ sessionId: id, toolUseId: "call_1", output: "paid 5 to bob" });
      await c.raw.resume({ sessionId: id }); // taken over: a newer epoch
    } finally {
      c.close();
    }

    const paid: string[] = [];
    const pay = durableTool({
      name: "pay",
      description: "Pay someone.",
      parameters: z.object({ to: z.string(), amount: z.number() }),
      repeatable,
      execute: async ({ to, amount }) => {
        paid.push(to);
        return `paid ${amount} to ${to}`;
      },
    });
    const model = new ScriptedModel([[functionCall("pay", { amount: 5, to: "bob" }, { callId: "call_2" })], [assistantMessage("done")]]);
    const session = new SavepointSession(id, { address: d.addr });
    try {
      const r = await run(new Agent({ name: "billing", model, tools: [pay] }), [], { session });
      assert.equal(r.finalOutput, "done");
      const seen = outputOf(model.lastCall!.request.input as AgentInputItem[], "call_2") ?? "";
      if (repeatable) {
        assert.deepEqual(paid, ["bob"]);
        assert.equal(seen, "paid 5 to bob");
        return;
      }
      assert.deepEqual(paid, [], "the tool did not run");
      assert.match(seen, /^This pay call \(tool_use_id call_2\) was not run: the same call, with the same input, was made as tool_use_id call_1 /);
      assert.ok(seen.endsWith("It was already taken, and returned: paid 5 to bob"), seen);
      const sc = await session.client();
      const entries = (await sc.raw.listEffects({ sessionId: id })).entries;
      assert.equal(entries.find((e) => e.toolUseId === "call_2")?.duplicateOf, "call_1");
      const cp = (await sc.raw.getSession({ sessionId: id })).checkpoint!;
      assert.deepEqual(cp.pendingToolUses, [], "the caught call is not left pending");
    } finally {
      await session.close();
    }
  });
}

/**
 * A real crash between the outcome and the SDK's save of the model's
 * message: the agent process (tool-worker.js) sends the invoice under
 * call_1 and is SIGKILLed right after RecordEffect ("recorded") or right
 * after the save that stops the call pending ("settled": nothing pending,
 * while the SDK has saved neither the call nor its output). A new process
 * resumes with a model that reissues the same call under call_2. The result
 * is not lost in either window: the resume answers call_1 by its id with
 * its recorded output (not run again) before the model is asked. The guard
 * does not apply: this integration never loses the model's reply (the call
 * is listed in the session before it runs), and once the result is in the
 * saved history a reissue is the model's new decision (docs/api.md, "The
 * same action under a new id": the turn window closes there), so call_2
 * runs and is not stored as a duplicate.
 */
for (const stage of ["recorded", "settled"]) {
  test(`killed once the outcome was ${stage}, before the SDK saved the call: the resume answers call_1 by its id; a reissue under call_2 is a new decision`, async () => {
    const id = `dup-crash-${stage}`;
    const dir = mkdtempSync(join(tmpdir(), "spd"));
    const log = join(dir, "log");
    try {
      const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", log], { CRASH: stage });
      assert.equal(first.signal, "SIGKILL", first.stderr);
      assert.equal(readFileSync(log, "utf8").trim().split("\n").length, 1);
      const c = await dial(d.addr);
      try {
        const cp = (await c.raw.getSession({ sessionId: id })).checkpoint!;
        assert.ok(!cp.messages.some((m) => m.contentJson.includes('"function_call')), "the SDK saved neither the call nor its output");
        assert.deepEqual(cp.pendingToolUses.map((p) => p.toolUseId), stage === "settled" ? [] : ["call_1"]);
      } finally {
        c.close();
      }

      const resumed = await runNode("tool-worker.js", [d.addr, id, "side_effect", "resume", log], { REISSUE: "1" });
      assert.equal(resumed.code, 0, resumed.stderr);
      const out = JSON.parse(resumed.stdout) as { final: string; first: Item[]; items: Item[] };
      assert.equal(out.final, "Resumed.");
      const calls = (items: Item[]) => items.filter((i) => i.type === "function_call" || i.type === "function_call_result").map((i) => `${i.type} ${i.callId}`);
      assert.deepEqual(calls(out.first), ["function_call call_1", "function_call_result call_1"]);
      assert.equal(outputOf(out.first as AgentInputItem[], "call_1"), "invoice for 120 sent to acme");
      assert.deepEqual(calls(out.items), ["function_call call_1", "function_call_result call_1", "function_call call_2", "function_call_result call_2"]);
      const sent = readFileSync(log, "utf8").trim().split("\n");
      assert.equal(sent.length, 2, "call_1 ran once; call_2, the model's new decision, once");
      assert.notEqual(sent[0], sent[1], "each under its own key");
      const s = new SavepointSession(id, { address: d.addr });
      try {
        const sc = await s.client();
        const entries = (await sc.raw.listEffects({ sessionId: id })).entries;
        assert.deepEqual(entries.map((e) => [e.toolUseId, e.effect?.output, e.duplicateOf]), [
          ["call_1", "invoice for 120 sent to acme", ""],
          ["call_2", "invoice for 120 sent to acme", ""],
        ]);
        assert.deepEqual((await sc.raw.getSession({ sessionId: id })).checkpoint!.pendingToolUses, []);
      } finally {
        await s.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
