/**
 * durableTool's duplicate branch: an earlier run of the session (an older
 * epoch) made a payment and its process died before the model's message
 * was saved; the session was taken over, and the new run's model asks for
 * the same payment under a new call id. The tool does not run: the model
 * gets the daemon's text naming the earlier call, with its output, and the
 * call is not left pending. A repeatable tool runs the same call.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Agent, type AgentInputItem, run, setTracingDisabled } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import { dial } from "@savepoint-dev/client";
import { z } from "zod";

import { durableTool, SavepointSession } from "../index.js";
import { Daemon } from "./daemon.js";

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
