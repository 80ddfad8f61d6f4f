import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { consoleLogger, Decision, dial, EffectClass, type Message, pb, type ToolUse, type Verified } from "../index.js";
import { Daemon } from "./daemon.js";

// Verify hooks: a side-effecting tool killed after BeginEffect, resumed with
// a verify hook that says done, not done or unknown (or throws).

const quiet = consoleLogger("error");
let d: Daemon;

before(async () => {
  d = await Daemon.start([]);
});
after(async () => {
  await d.close();
});

const PAY: ToolUse = { toolUseId: "toolu_pay", name: "send_payment", inputJson: '{"cents":500}', effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT };
const PROMPT: Message = { role: "user", contentJson: '"pay the invoice"' };

const cases: { name: string; verified: Verified | Error; want: Decision; runs: number; content?: string; kind: pb.ResolverKind }[] = [
  { name: "done", verified: { status: "done", output: "paid, ref 42", note: "found by key" }, want: Decision.DECISION_REUSE, runs: 0, content: "paid, ref 42", kind: pb.ResolverKind.RESOLVER_KIND_VERIFY },
  { name: "not done", verified: { status: "notDone" }, want: Decision.DECISION_RUN, runs: 1, content: "paid", kind: pb.ResolverKind.RESOLVER_KIND_VERIFY },
  { name: "unknown", verified: { status: "unknown" }, want: Decision.DECISION_IN_DOUBT, runs: 0, kind: pb.ResolverKind.RESOLVER_KIND_UNSPECIFIED },
  { name: "throws", verified: new Error("bank API down"), want: Decision.DECISION_IN_DOUBT, runs: 0, kind: pb.ResolverKind.RESOLVER_KIND_UNSPECIFIED },
];

for (const tc of cases) {
  test(`verify ${tc.name}`, async () => {
    const c = await dial(d.addr, { logger: quiet });
    try {
      const id = `verify-${tc.name.replace(" ", "-")}`;
      // The first process: Point A, BeginEffect, killed while the tool ran.
      const first = await c.start(id, "pay", { messages: [PROMPT] });
      await first.pointA({ role: "assistant", contentJson: '"paying"' }, [PAY]);
      const key = (await c.raw.beginEffect({ sessionId: id, toolUseId: PAY.toolUseId, epoch: first.epoch })).idempotencyKey;

      const s = await c.resume(id);
      const asked: string[] = [];
      const runs: string[] = [];
      const results = await s.reconcile(
        (_call, k) => {
          runs.push(k);
          return "paid";
        },
        {
          verify: async (call, k) => {
            asked.push(`${call.toolUseId} ${k}`);
            if (tc.verified instanceof Error) throw tc.verified;
            return tc.verified;
          },
        },
      );
      assert.deepEqual(asked, [`${PAY.toolUseId} ${key}`]);
      assert.equal(results.length, 1);
      assert.equal(results[0]!.decision, tc.want);
      assert.equal(results[0]!.isError, tc.want === Decision.DECISION_IN_DOUBT);
      if (tc.content !== undefined) assert.equal(results[0]!.content, tc.content);
      assert.deepEqual(runs, Array(tc.runs).fill(key), "not done runs once more, with the key it was begun with");
      await s.pointB(results);
      const ledger = await c.raw.listEffects({ sessionId: id });
      assert.equal(ledger.entries[0]?.resolution?.resolverKind ?? pb.ResolverKind.RESOLVER_KIND_UNSPECIFIED, tc.kind);
    } finally {
      c.close();
    }
  });
}
