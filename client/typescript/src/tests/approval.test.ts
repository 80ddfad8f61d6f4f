import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { ApprovalConflictError, ApprovalInputMismatchError, AwaitingApprovalError, consoleLogger, Decision, dial, EffectClass, type Message, pb, type ToolUse } from "../index.js";
import { Daemon } from "./daemon.js";

// Approvals bound to one call: a tool that requires approval runs only once
// a person approved that exact call and input; a process SIGKILLed after
// BeginEffect, resumed and replayed from an older revision never runs it
// again; a denial reaches the model; an approval for other input does not
// unlock it.

const quiet = consoleLogger("error");
let d: Daemon;

before(async () => {
  d = await Daemon.start([]);
});
after(async () => {
  await d.close();
});

const PAY: ToolUse = { toolUseId: "toolu_pay", name: "send_payment", inputJson: '{"cents": 500}', effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT };
const PROMPT: Message = { role: "user", contentJson: '"pay the invoice"' };
const INDEX = fileURLToPath(new URL("../index.js", import.meta.url));

// The child resumes the session and runs the approved payment; it is killed
// by SIGKILL inside the tool, after BeginEffect and the side effect.
const CHILD = `
import { appendFileSync } from "node:fs";
import { dial } from ${JSON.stringify(INDEX)};
const [addr, id, marker] = process.argv.slice(1);
const c = await dial(addr, { approvalRequired: ["send_payment"] });
const s = await c.resume(id);
await s.reconcile((_call, key) => {
  appendFileSync(marker, key + "\\n");
  process.kill(process.pid, "SIGKILL");
  return "unreachable";
});
`;

test("approval once: other input refused, SIGKILL after BeginEffect, resume and replay run the tool once", async () => {
  const c = await dial(d.addr, { logger: quiet, approvalRequired: ["send_payment"] });
  try {
    const id = "approve-once";
    const s = await c.start(id, "pay", { messages: [PROMPT] });
    await s.pointA({ role: "assistant", contentJson: '"paying"' }, [PAY]);
    const runs: string[] = [];
    const pay = (key: string) => {
      runs.push(key);
      return "paid";
    };
    const waiting = await s.runTool(PAY, pay).then(
      () => assert.fail("ran without approval"),
      (err: unknown) => err,
    );
    assert.ok(waiting instanceof AwaitingApprovalError, String(waiting));
    assert.equal(runs.length, 0);
    const listed = await c.raw.listSessions({});
    assert.equal(listed.sessions.find((x) => x.sessionId === id)?.awaitingApprovalCount, 1);
    await assert.rejects(c.approveEffect(id, PAY.toolUseId, { inputDigest: new Uint8Array(32).fill(7) }), ApprovalInputMismatchError);
    await assert.rejects(s.runTool(PAY, pay), AwaitingApprovalError);
    const digest = (waiting.approval as pb.EffectApproval).inputDigest;
    await c.approveEffect(id, PAY.toolUseId, { decidedBy: "alice", inputDigest: digest });

    const marker = join(mkdtempSync(join(tmpdir(), "sp-appr-")), "paid");
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", CHILD, d.addr, id, marker], { timeout: 60_000 });
    assert.equal(child.signal, "SIGKILL", child.stderr?.toString());
    assert.equal(readFileSync(marker, "utf8").trim().split("\n").length, 1);

    for (const replay of [false, true]) {
      let s2 = await c.resume(id);
      if (replay) {
        await c.raw.rewindSession({ sessionId: id, epoch: s2.epoch, revision: 2n });
        s2 = await c.resume(id);
      }
      const results = await s2.reconcile((_call, key) => pay(key));
      assert.equal(results.length, 1);
      assert.equal(results[0]!.decision, Decision.DECISION_IN_DOUBT);
    }
    assert.equal(runs.length, 0);
    assert.equal(readFileSync(marker, "utf8").trim().split("\n").length, 1);
    const { entries } = await c.raw.listEffects({ sessionId: id });
    assert.ok(entries[0]!.begun && entries[0]!.approval?.spent);

    // A new call with the same input needs its own approval.
    const again: ToolUse = { ...PAY, toolUseId: "toolu_pay2", inputJson: '{"cents":500}' };
    const s3 = await c.start("approve-once-2", "pay", { messages: [PROMPT] });
    await s3.pointA({ role: "assistant", contentJson: '"paying"' }, [again]);
    await assert.rejects(s3.runTool(again, pay), AwaitingApprovalError);
  } finally {
    c.close();
  }
});

test("a denial reaches the model as the tool result, with the note", async () => {
  const c = await dial(d.addr, { logger: quiet, approvalRequired: ["send_payment"] });
  try {
    const id = "approve-deny";
    const s = await c.start(id, "pay", { messages: [PROMPT] });
    await s.pointA({ role: "assistant", contentJson: '"paying"' }, [PAY]);
    await assert.rejects(s.runTool(PAY, () => "paid"), AwaitingApprovalError);
    await c.approveEffect(id, PAY.toolUseId, { deny: true, note: "over the limit; ask finance", decidedBy: "alice" });
    await assert.rejects(c.approveEffect(id, PAY.toolUseId), ApprovalConflictError);
    let runs = 0;
    const results = await s.reconcile(() => {
      runs++;
      return "paid";
    });
    assert.equal(results[0]!.decision, Decision.DECISION_DENIED);
    assert.equal(results[0]!.isError, true);
    assert.match(String(results[0]!.content), /over the limit; ask finance/);
    assert.equal(runs, 0);
    await s.pointB(results);
    const cp = await c.raw.getSession({ sessionId: id });
    const last = cp.checkpoint!.messages.at(-1)!;
    assert.match(last.contentJson, /over the limit; ask finance/);
    const { entries } = await c.raw.listEffects({ sessionId: id });
    assert.ok(entries[0]!.effect?.refused);
  } finally {
    c.close();
  }
});
