import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { consoleLogger, dial } from "../index.js";
import { Daemon } from "./daemon.js";

const quiet = consoleLogger("error");
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d.close();
});

// The duplicate-intent guard through the TypeScript client: a payment
// registered and run by one process, which dies before the model's message
// is saved; the process that takes over is asked for the same payment under
// a new id (by registerToolUse, and by pointA and runTool) and answers the
// model with the daemon's text without running the tool. An uncrashed run
// calling the tool twice runs it twice; a repeatable tool is not guarded.
test("the same action under a new id is answered, not run again", async () => {
  const c = await dial(d.addr, { logger: quiet });
  const c2 = await dial(d.addr, { logger: quiet });
  let payments = 0;
  const pay = () => {
    payments++;
    return "paid 5 to bob";
  };
  const call = (toolUseId: string, inputJson: string) => ({ toolUseId, name: "send_payment", inputJson });
  const assistant = { role: "assistant", contentJson: JSON.stringify([{ type: "text", text: "paying" }]) };
  try {
    const s = await c.start("pay", "pay bob", {});
    const first = await s.registerToolUse(call("toolu_1", `{"to":"bob","amount":5}`));
    assert.ok(first.duplicate === undefined && first.idempotencyKey !== "");
    await s.recordToolUse("toolu_1", pay());

    const r = await c2.resume("pay");
    const reg = await r.registerToolUse(call("toolu_2", `{"amount": 5, "to": "bob"}`));
    assert.equal(reg.idempotencyKey, "");
    assert.equal(reg.duplicate?.toolUseId, "toolu_1");
    assert.equal(reg.duplicate?.isError, false);
    assert.equal(reg.duplicate?.effect?.output, "paid 5 to bob");
    assert.match(reg.duplicate?.toolResultText ?? "", /tool_use_id toolu_1 .*paid 5 to bob$/s);

    const rep = await r.registerToolUse({ ...call("toolu_4", `{"to":"bob","amount":5}`), repeatable: true });
    assert.ok(rep.duplicate === undefined && rep.idempotencyKey !== "");
    await r.recordToolUse("toolu_4", "paid 5 to bob");

    await r.pointA(assistant, [call("toolu_3", `{"to":"bob","amount":5}`)]);
    const res = await r.runTool(call("toolu_3", `{"to":"bob","amount":5}`), pay);
    assert.equal(res.duplicateOf, "toolu_1");
    assert.equal(res.isError, false);
    assert.match(String(res.content), /paid 5 to bob$/);
    await r.pointB([res]);
    assert.equal(payments, 1);

    const s2 = await c.start("twice", "pay bob twice", {});
    const twice = [call("a", `{"to":"bob","amount":5}`), call("b", `{"to":"bob","amount":5}`)];
    await s2.pointA(assistant, twice);
    const results = [await s2.runTool(twice[0], pay), await s2.runTool(twice[1], pay)];
    assert.ok(results.every((x) => x.duplicateOf === undefined && !x.isError));
    assert.equal(payments, 3);
  } finally {
    c.close();
    c2.close();
  }
});
