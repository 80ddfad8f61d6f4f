import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { consoleLogger, Decision, dial, EffectClass, SessionFencedError } from "../index.js";
import { Daemon } from "./daemon.js";

const quiet = consoleLogger("error");
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d.close();
});

test("registerToolUse, recordToolUse, refuseToolUse and reconcileToolUses: the hooks' protocol across a takeover", async () => {
  const c = await dial(d.addr, { logger: quiet });
  const c2 = await dial(d.addr, { logger: quiet });
  try {
    const s = await c.start("hooks", "write the report", {});
    const calls = [
      { toolUseId: "read", name: "read_notes", effectClass: EffectClass.EFFECT_CLASS_READ_ONLY },
      { toolUseId: "write", name: "write_report" },
      { toolUseId: "send", name: "send_mail" },
      { toolUseId: "killed", name: "write_report" },
    ];
    // Registered in parallel: none contends on the revision.
    const regs = await Promise.all(calls.map((u) => s.registerToolUse(u)));
    for (const r of regs) assert.ok(r.idempotencyKey !== "" && !r.alreadyBegun && r.effect === undefined);
    await s.recordToolUse("read", "notes");
    await s.recordToolUse("write", "written");
    const refused = await s.refuseToolUse("send", "denied by the permission check");
    assert.ok(refused?.refused && refused.isError);
    // A recorded call registered again is answered with its outcome.
    assert.equal((await s.registerToolUse(calls[1])).effect?.output, "written");

    // The process is killed inside "killed"; another takes over.
    const r = await c2.resume("hooks");
    await assert.rejects(s.registerToolUse({ toolUseId: "late", name: "write_report" }), SessionFencedError);
    const res = await r.reconcileToolUses(["read", "write", "send", "killed", "never"]);
    assert.deepEqual(
      res.map((x) => Decision[x.decision]),
      ["DECISION_REUSE", "DECISION_REUSE", "DECISION_REUSE", "DECISION_IN_DOUBT", "DECISION_RUN"].map((n) => n),
    );
    assert.ok(res[2].effect?.refused);
    assert.match(res[3].toolResultText, /unknown/);
  } finally {
    c.close();
    c2.close();
  }
});
