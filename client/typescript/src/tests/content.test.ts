import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Decision, dial, EffectClass, type Message, normalizeContent, toolContent, type ToolUse } from "../index.js";
import { Daemon, repoRoot } from "./daemon.js";

/** The ledger-output cases every client reads the same way (client/testdata/tool_content.json). */
const shared: { cases: { name: string; output: string; blocks: boolean }[] } = JSON.parse(
  readFileSync(join(repoRoot, "client/testdata/tool_content.json"), "utf8"),
);

const CHART: ToolUse = { toolUseId: "toolu_chart", name: "chart", inputJson: "{}", effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT };
const BLOCKS = [
  { type: "text", text: "sales by month" },
  { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
];
const PROMPT: Message = { role: "user", contentJson: '"chart the sales"' };
const ASSISTANT: Message = { role: "assistant", contentJson: '[{"type":"tool_use","id":"toolu_chart","name":"chart","input":{}}]' };
const silent = { debug() {}, info() {}, warn() {}, error() {} };

let d: Daemon;
before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d.close();
});

test("tool content: the shared ledger cases", () => {
  assert.ok(shared.cases.length >= 10);
  for (const c of shared.cases) {
    assert.deepEqual(toolContent(c.output), c.blocks ? JSON.parse(c.output) : c.output, c.name);
  }
  assert.equal(normalizeContent(undefined), "");
  assert.throws(() => normalizeContent(3), /not number/);
  assert.throws(() => normalizeContent([{ text: "no type" }]), /string type/);
});

function lastContent(m: Message[]): unknown {
  return JSON.parse(m[m.length - 1]!.contentJson)[0].content;
}

test("content blocks: recorded as JSON, reused intact after a crash after RecordEffect", async () => {
  const c = await dial(d.addr, { logger: silent });
  try {
    const s = await c.start("blocks", "t", { messages: [PROMPT] });
    await s.pointA(ASSISTANT, [CHART]);
    const r = await s.runTool(CHART, () => BLOCKS);
    assert.equal(r.ledgerError, undefined);
    assert.deepEqual(r.content, BLOCKS);
    const eff = await c.raw.listEffects({ sessionId: "blocks" });
    assert.deepEqual(JSON.parse(eff.entries[0]!.effect!.output), BLOCKS, "the ledger holds the blocks as JSON, not [object Object]");
  } finally {
    c.close();
  }
  const c2 = await dial(d.addr, { logger: silent });
  try {
    const s = await c2.resume("blocks");
    let ran = 0;
    const [r] = await s.reconcile(() => {
      ran++;
      return "ran again";
    });
    assert.equal(ran, 0);
    assert.equal(r!.decision, Decision.DECISION_REUSE);
    assert.deepEqual(r!.content, BLOCKS);
    await s.pointB([r!]);
    assert.deepEqual(lastContent(s.messages), BLOCKS, "the model receives the same blocks");
  } finally {
    c2.close();
  }
});

test("content blocks: the in-doubt text stays text", async () => {
  const c = await dial(d.addr, { logger: silent });
  try {
    const s = await c.start("doubt", "t", { messages: [PROMPT] });
    await s.pointA(ASSISTANT, [CHART]);
    await c.raw.beginEffect({ sessionId: "doubt", toolUseId: CHART.toolUseId, epoch: s.epoch });
  } finally {
    c.close();
  }
  const c2 = await dial(d.addr, { logger: silent });
  try {
    const [r] = await (await c2.resume("doubt")).reconcile();
    assert.equal(r!.decision, Decision.DECISION_IN_DOUBT);
    assert.equal(typeof r!.content, "string");
    assert.ok(r!.isError);
  } finally {
    c2.close();
  }
});

test("a result the ledger cannot record still reaches the model, and the log says so", async () => {
  const errors: string[] = [];
  const c = await dial(d.addr, { logger: { ...silent, error: (m: string) => errors.push(m) } });
  try {
    const s = await c.start("unrecordable", "t", { messages: [PROMPT] });
    await s.pointA(ASSISTANT, [CHART]);
    const odd = { toString: () => "a chart object" };
    const r = await s.runTool(CHART, () => odd as unknown as string);
    assert.equal(r.content, "a chart object");
    assert.ok(r.ledgerError instanceof Error && /cannot be recorded/.test(r.ledgerError.message));
    assert.ok(errors.some((m) => /LEDGER WRITE FAILED/.test(m) && /not recorded/.test(m)), errors.join("\n"));
    await s.pointB([r]);
    assert.equal(lastContent(s.messages), "a chart object");
  } finally {
    c.close();
  }
});
