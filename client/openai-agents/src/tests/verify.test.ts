/**
 * durableTool's verify hook: a side-effecting call begun and not recorded
 * (its process SIGKILLed right after BeginEffect) is asked of the hook on
 * resume, from a new process.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import type { AgentInputItem } from "@openai/agents-core";
import { pb } from "@savepoint-dev/client";

import { SavepointSession } from "../index.js";
import { Daemon, runNode } from "./daemon.js";

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

type Item = { type?: string; callId?: string; output?: { text?: string } | string };
const outputOf = (items: AgentInputItem[], callId: string) => {
  const r = (items as Item[]).find((i) => i.type === "function_call_result" && i.callId === callId);
  return typeof r?.output === "string" ? r.output : r?.output?.text;
};
const lines = (f: string) => (existsSync(f) ? readFileSync(f, "utf8").trim().split("\n").filter(Boolean) : []);
const IN_DOUBT = /^The outcome of this send call \(tool_use_id call_1\) is unknown: .*Check whether it took effect before retrying it\.$/;

for (const verify of ["done", "notDone", "unknown", "throw"] as const) {
  test(`killed after BeginEffect, a resume whose verify says ${verify} answers the call ${verify === "done" ? "with the found output" : verify === "notDone" ? "by running it once more with the same key" : "in doubt"}`, async () => {
    const id = `verify-${verify}`;
    const log = join(dir, id + ".log");
    const first = await runNode("tool-worker.js", [d.addr, id, "side_effect", "first", log], { CRASH: "begun" });
    assert.equal(first.signal, "SIGKILL", `the first run was not killed after BeginEffect:\n${first.stdout}${first.stderr}`);
    assert.deepEqual(lines(log), [], "the tool did not run before the kill");
    const resumed = await runNode("tool-worker.js", [d.addr, id, "side_effect", "resume", log], { VERIFY: verify });
    assert.equal(resumed.code, 0, resumed.stderr);
    const out = JSON.parse(resumed.stdout) as { final: string; sent: AgentInputItem[] };
    assert.equal(out.final, "Resumed.");

    // The hook was asked once, with the key BeginEffect minted and the call's arguments.
    const asked = lines(log + ".verify");
    assert.equal(asked.length, 1, asked.join(" | "));
    const m = /^verify ([0-9a-f]+) acme$/.exec(asked[0]);
    assert.ok(m, asked[0]);
    const key = m[1];

    const s = new SavepointSession(id, { address: d.addr });
    const c = await s.client();
    const entries = (await c.raw.listEffects({ sessionId: id })).entries;
    const seen = outputOf(out.sent, "call_1");
    const runs = lines(log);
    if (verify === "done") {
      const found = `found the invoice to acme under key=${key}`;
      assert.equal(seen, found, "the model gets what verify found");
      assert.deepEqual(runs, [], "the tool did not run again");
      assert.equal(entries.length, 1);
      assert.equal(entries[0].effect?.output, found);
      assert.equal(entries[0].resolution?.resolverKind, pb.ResolverKind.RESOLVER_KIND_VERIFY);
      assert.equal(entries[0].resolution?.outcome, pb.ResolutionOutcome.RESOLUTION_OUTCOME_DONE);
    } else if (verify === "notDone") {
      assert.deepEqual(runs, [`acme 120 key=${key}`], "the tool ran once more, with the same idempotency key");
      assert.equal(seen, "invoice for 120 sent to acme");
      assert.equal(entries.length, 1);
      assert.equal(entries[0].effect?.output, "invoice for 120 sent to acme");
      assert.equal(entries[0].resolution?.outcome, pb.ResolutionOutcome.RESOLUTION_OUTCOME_NOT_DONE);
    } else {
      assert.match(seen ?? "", IN_DOUBT);
      assert.deepEqual(runs, [], "a call verify could not settle is not run");
      assert.equal(entries.filter((e) => e.effect).length, 0, "nothing was recorded");
    }
    const cp = (await c.raw.getSession({ sessionId: id })).checkpoint!;
    assert.deepEqual(cp.pendingToolUses, []);
    await s.close();
  });
}
