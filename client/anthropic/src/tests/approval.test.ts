/**
 * Approvals in DurableAgent and durableToolRunner: a tool named in
 * approvalRequired pauses the loop instead of throwing: run()
 * (runUntilDone()) returns Paused naming the tool uses waiting, with the
 * turn saved at Point A; once a person decides, the same call goes on: an
 * approved tool use runs once, a denied one reaches the model as an error
 * result with the approver's note, and an approval for other input unlocks
 * nothing. Against a real savepointd and the local fake Messages API.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { ApprovalInputMismatchError, AwaitingApprovalError, dial, SessionStatus } from "@savepoint-dev/client";

import { Daemon } from "../../../typescript/dist/tests/daemon.js";
import type Anthropic from "@anthropic-ai/sdk";

import { DurableAgent, Paused } from "../index.js";
import { runOnce, tools } from "./approval_agent.js";
import { Fake } from "./fake.js";

type Block = { type: string; [k: string]: unknown };
const PAY = { to: "acme", amount: 5 };
const AGENT = join(dirname(fileURLToPath(import.meta.url)), "approval_agent.js");

/** Turn 1 asks for send_payment and the read-only look; turn 2 answers with what send_payment's result said. */
function reply(msgs: { role: string; content: string | Block[] }[]): [Block[], string] {
  if (!msgs.some((m) => m.role === "assistant")) {
    return [
      [
        { type: "text", text: "Paying." },
        { type: "tool_use", id: "toolu_pay", name: "send_payment", input: PAY },
        { type: "tool_use", id: "toolu_look", name: "look", input: { q: "acme" } },
      ],
      "tool_use",
    ];
  }
  const pay = (msgs[msgs.length - 1]!.content as Block[]).find((b) => b.tool_use_id === "toolu_pay")!;
  const c = pay.content as string | { text?: string }[];
  const text = typeof c === "string" ? c : c.map((b) => b.text ?? "").join("");
  return [[{ type: "text", text: `${pay.is_error ? "refused: " : "done: "}${text}` }], "end_turn"];
}

let d: Daemon;
const fake = new Fake(reply);
before(async () => {
  d = await Daemon.start();
  await fake.start();
});
after(async () => {
  await d.close();
  await fake.close();
});

function pausedOnPayment(out: string | Paused, sid: string): string {
  assert.ok(out instanceof Paused, String(out));
  assert.equal(out.sessionId, sid);
  assert.deepEqual(out.waiting.map((w) => [w.toolUseId, w.name, w.input]), [["toolu_pay", "send_payment", PAY]]);
  return out.waiting[0]!.inputDigest;
}

for (const mode of ["agent", "runner"]) {
  const name = mode === "agent" ? "DurableAgent" : "durableToolRunner";

  test(`${name}: pause, approve with the client API, resume: the tool runs once`, async () => {
    const sid = `ts-approve-${mode}`;
    const runs = { payments: [] as unknown[], looks: 0 };
    const t = tools(runs);
    const digest = pausedOnPayment(await runOnce(mode, d.addr, fake.url, sid, t), sid);
    assert.deepEqual([runs.payments, runs.looks], [[], 1]);
    const c = await dial(d.addr);
    try {
      // The Point A state: the reply saved last, both tool uses pending.
      const g = await c.raw.getSession({ sessionId: sid });
      assert.equal(g.checkpoint!.status, SessionStatus.SESSION_STATUS_ACTIVE);
      assert.deepEqual(g.checkpoint!.pendingToolUses.map((p) => p.toolUseId), ["toolu_pay", "toolu_look"]);
      pausedOnPayment(await runOnce(mode, d.addr, fake.url, sid, t), sid); // not decided yet
      assert.deepEqual(runs.payments, []);
      await c.approveEffect(sid, "toolu_pay", { decidedBy: "alice", inputDigest: Buffer.from(digest, "hex") });
    } finally {
      c.close();
    }
    assert.equal(await runOnce(mode, d.addr, fake.url, sid, t), "done: paid 5 to acme");
    assert.deepEqual([runs.payments, runs.looks], [[PAY], 1]);
    const n = fake.requests.length;
    assert.equal(await runOnce(mode, d.addr, fake.url, sid, t), "done: paid 5 to acme");
    assert.deepEqual([runs.payments, fake.requests.length], [[PAY], n]);
  });

  test(`${name}: a denial reaches the model with the note`, async () => {
    const sid = `ts-deny-${mode}`;
    const runs = { payments: [] as unknown[], looks: 0 };
    const t = tools(runs);
    pausedOnPayment(await runOnce(mode, d.addr, fake.url, sid, t), sid);
    const c = await dial(d.addr);
    try {
      await c.approveEffect(sid, "toolu_pay", { deny: true, note: "not this month", decidedBy: "bob" });
    } finally {
      c.close();
    }
    assert.equal(await runOnce(mode, d.addr, fake.url, sid, t), "refused: This call was denied by bob; it did not run. Their note: not this month");
    assert.deepEqual(runs.payments, []);
    const last = fake.requests[fake.requests.length - 1]!.messages.at(-1)!.content as Block[];
    const pay = last.find((b) => b.tool_use_id === "toolu_pay")!;
    assert.equal(pay.is_error, true);
    assert.match(JSON.stringify(pay.content), /not this month/);
  });

  test(`${name}: an approval for other input does not unlock the call`, async () => {
    const sid = `ts-other-${mode}`;
    const runs = { payments: [] as unknown[], looks: 0 };
    const t = tools(runs);
    const digest = pausedOnPayment(await runOnce(mode, d.addr, fake.url, sid, t), sid);
    const other = createHash("sha256").update(`send_payment${JSON.stringify({ amount: 5000, to: "acme" })}`).digest();
    assert.notEqual(other.toString("hex"), digest);
    const c = await dial(d.addr);
    try {
      await assert.rejects(c.approveEffect(sid, "toolu_pay", { inputDigest: other }), ApprovalInputMismatchError);
    } finally {
      c.close();
    }
    pausedOnPayment(await runOnce(mode, d.addr, fake.url, sid, t), sid);
    assert.deepEqual(runs.payments, []);
  });

  test(`${name}: pauseForApproval false throws AwaitingApprovalError, as before`, async () => {
    const sid = `ts-throw-${mode}`;
    const runs = { payments: [] as unknown[], looks: 0 };
    await assert.rejects(runOnce(mode, d.addr, fake.url, sid, tools(runs), { pauseForApproval: false }), AwaitingApprovalError);
    await assert.rejects(runOnce(mode, d.addr, fake.url, sid, tools(runs), { pauseForApproval: false }), AwaitingApprovalError);
    assert.deepEqual(runs.payments, []);
  });

  for (const crash of ["", "in-tool"]) {
    test(`${name}: a paused process SIGKILLed, approved, resumed by a new process${crash ? " killed after the payment" : ""}: paid once`, async () => {
      const sid = `ts-kill-${mode}-${crash}`;
      const work = mkdtempSync(join(tmpdir(), "spa"));
      const first = await runAgent(work, sid, mode, "paused");
      assert.equal(first.signal, "SIGKILL", first.out);
      assert.match(first.out, /\[paused\] toolu_pay/);
      const c = await dial(d.addr);
      try {
        await c.approveEffect(sid, "toolu_pay", { decidedBy: "alice" });
      } finally {
        c.close();
      }
      const second = await runAgent(work, sid, mode, crash);
      if (crash) {
        assert.equal(second.signal, "SIGKILL", second.out);
        const third = await runAgent(work, sid, mode);
        assert.equal(third.code, 0, third.out);
        assert.match(third.out, /\[done\] refused: /); // in doubt: an error result, not a second payment
      } else {
        assert.equal(second.code, 0, second.out);
        assert.match(second.out, /\[done\] done: paid 5 to acme/);
      }
      assert.deepEqual(readFileSync(join(work, "payments.txt"), "utf8").split("\n").filter(Boolean), [JSON.stringify(PAY)]);
    });
  }
}

test("approvalRequired must name one of the tools", () => {
  assert.throws(() => new DurableAgent({} as Anthropic, "s", { tools: tools({ payments: [], looks: 0 }), approvalRequired: ["pay"] }), /approvalRequired names "pay"/);
});

function runAgent(work: string, sid: string, mode: string, crash = ""): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((res) => {
    const p = spawn(process.execPath, [AGENT, d.addr, fake.url, work, sid, mode], { env: { ...process.env, CRASH_AT: crash } });
    let out = "";
    p.stdout.on("data", (b) => (out += b));
    p.stderr.on("data", (b) => (out += b));
    p.on("exit", (code, signal) => res({ code, signal, out }));
  });
}
