/**
 * DurableToolNode against a real savepointd: a recorded result reused
 * without running the tool, the in-doubt answer of a side-effecting call
 * begun and never recorded, a read-only or idempotent call re-run with its
 * idempotency key, a tool that throws and then succeeds (a failed attempt,
 * then a result), ToolNode's outputs and handleToolErrors kept, a Command
 * rebuilt on reuse, a tool's interrupt() resumed in a graph, and a reused
 * tool_call_id refused.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, END, interrupt, isCommand, MessagesAnnotation, Send, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { EffectInputMismatchError, graphPb, pb } from "@savepoint-dev/client";

import { Connection } from "../conn.js";
import { DurableToolNode, IDEMPOTENCY_KEY, inDoubtText, SavepointSaver } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

let d: Daemon;
let conn: Connection;
const nodes: DurableToolNode[] = [];

before(async () => {
  d = await startDaemon();
  conn = new Connection({ address: d.addr });
});
after(async () => {
  for (const n of nodes) n.close();
  conn.close();
  await stopDaemon(d);
});

const schema = { type: "object" as const, properties: { to: { type: "string" as const } }, required: ["to"] };

/** A tool that counts its runs and keeps the idempotency key of each; fail(n) says whether run n throws. */
function counted(name: string, effect: string | undefined, fail: (n: number) => boolean = () => false) {
  const runs: string[] = [];
  const t = tool(
    async ({ to }: { to: string }, runtime: { configurable?: Record<string, unknown> }) => {
      runs.push(String(runtime.configurable?.[IDEMPOTENCY_KEY]));
      if (fail(runs.length)) throw new Error(`${name} to ${to} failed`);
      return `${name} to ${to}: run ${runs.length}`;
    },
    { name, description: name, schema, metadata: effect === undefined ? undefined : { savepoint_effect: effect } },
  );
  return { t, runs };
}

function node(tools: ConstructorParameters<typeof DurableToolNode>[0], options: { handleToolErrors?: boolean } = {}): DurableToolNode {
  const n = new DurableToolNode(tools, { address: d.addr, ...options });
  nodes.push(n);
  return n;
}

const call = (id: string, name: string, args: Record<string, unknown> = { to: "acme" }) => ({
  messages: [new AIMessage({ content: "", tool_calls: [{ id, name, args, type: "tool_call" as const }] })],
});
const cfg = (thread: string) => ({ configurable: { thread_id: thread } });

async function ledger(thread: string): Promise<graphPb.ThreadEffect[]> {
  const res = await conn.unary<graphPb.ListThreadEffectsRequest, graphPb.ListThreadEffectsResponse>(
    "listThreadEffects",
    graphPb.ListThreadEffectsRequest.fromPartial({ threadId: thread }),
  );
  return res.effects;
}

/** Begins a call directly, as a process that then died would have. */
async function beginOnly(thread: string, id: string, name: string, cls: pb.EffectClass): Promise<graphPb.BeginThreadEffectResponse> {
  return conn.unary<graphPb.BeginThreadEffectRequest, graphPb.BeginThreadEffectResponse>(
    "beginThreadEffect",
    graphPb.BeginThreadEffectRequest.fromPartial({ threadId: thread, toolUseId: id, name, inputJson: JSON.stringify({ to: "acme" }), effectClass: cls }),
  );
}

function only(out: unknown): ToolMessage {
  const msgs = (out as { messages: ToolMessage[] }).messages;
  assert.equal(msgs.length, 1);
  return msgs[0];
}

/** A message as LangChain serializes it (every field it has). */
const serialized = (m: ToolMessage) => JSON.parse(JSON.stringify(m));

/** The fields of a ToolMessage that a graph keeps. */
const fields = (m: ToolMessage) => ({ type: m.getType(), content: m.content, name: m.name, status: m.status, tool_call_id: m.tool_call_id, artifact: m.artifact });

test("a recorded result is reused without running the tool, as ToolNode would have answered", async () => {
  const { t, runs } = counted("send_invoice", "side_effect");
  const n = node([t]);
  const first = only(await n.invoke(call("c1", "send_invoice"), cfg("reuse")));
  const plain = counted("send_invoice", "side_effect");
  assert.deepEqual(serialized(first), serialized(only(await new ToolNode([plain.t]).invoke(call("c1", "send_invoice")))), "the output of ToolNode");
  assert.equal(runs.length, 1);
  assert.equal(first.content, "send_invoice to acme: run 1");
  // Another node (a new process, say) answers the same call from the ledger.
  const again = only(await node([t]).invoke(call("c1", "send_invoice"), cfg("reuse")));
  assert.equal(runs.length, 1, "REUSE did not run the tool");
  assert.ok(again instanceof ToolMessage);
  assert.deepEqual(serialized(again), serialized(first), "the recorded message, rebuilt exactly");
  const [e] = await ledger("reuse");
  assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
  assert.equal(e.attempts, 1);
  assert.equal(e.effectClass, pb.EffectClass.EFFECT_CLASS_SIDE_EFFECT);
  assert.equal(e.name, "send_invoice");
  assert.equal(e.checkpointNs, "");
});

test("a tool that answers with content blocks (text and an image) is reused with the same blocks", async () => {
  const blocks = [
    { type: "text", text: "sales by month" },
    { type: "image", source_type: "base64", mime_type: "image/png", data: "iVBORw0KGgo=" },
  ];
  let runs = 0;
  const chart = tool(
    async () => {
      runs++;
      return blocks;
    },
    { name: "chart", description: "chart", schema, metadata: { savepoint_effect: "side_effect" } },
  );
  const first = only(await node([chart]).invoke(call("b1", "chart"), cfg("blocks")));
  const again = only(await node([chart]).invoke(call("b1", "chart"), cfg("blocks")));
  assert.equal(runs, 1, "REUSE did not run the tool");
  assert.deepEqual(first.content, blocks);
  assert.deepEqual(again.content, blocks, "the same blocks, not their text");
});

test("a side-effecting call begun and never recorded is answered in doubt, not run", async () => {
  const { t, runs } = counted("send_invoice", undefined); // no metadata: side_effect
  await beginOnly("doubt", "c1", "send_invoice", pb.EffectClass.EFFECT_CLASS_SIDE_EFFECT);
  const m = only(await node([t]).invoke(call("c1", "send_invoice"), cfg("doubt")));
  assert.equal(runs.length, 0, "the tool was not run");
  assert.equal(m.status, "error");
  assert.equal(m.tool_call_id, "c1");
  assert.equal(m.name, "send_invoice");
  assert.equal(
    m.content,
    "The outcome of this send_invoice call (tool_use_id c1) is unknown: it was started, but the agent stopped before its outcome " +
      "was recorded. It was not run again, to avoid repeating a side effect. Check whether it took effect before retrying it.",
  );
  assert.equal(m.content, inDoubtText("send_invoice", "c1"));
  // handleToolErrors: false does not turn it into a throw, and it stays in doubt.
  const again = only(await node([t], { handleToolErrors: false }).invoke(call("c1", "send_invoice"), cfg("doubt")));
  assert.equal(again.content, m.content);
  const [e] = await ledger("doubt");
  assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_BEGUN);
  assert.equal(e.attempts, 1);
});

test("a read-only or idempotent call begun and never recorded is run again, with the same idempotency key", async () => {
  for (const [cls, effect] of [
    [pb.EffectClass.EFFECT_CLASS_READ_ONLY, "read_only"],
    [pb.EffectClass.EFFECT_CLASS_IDEMPOTENT, "idempotent"],
  ] as const) {
    const thread = `rerun-${effect}`;
    const { t, runs } = counted("charge", effect);
    const begun = await beginOnly(thread, "c1", "charge", cls);
    assert.ok(begun.effect?.idempotencyKey);
    const m = only(await node([t]).invoke(call("c1", "charge"), cfg(thread)));
    assert.equal(m.status, "success");
    assert.deepEqual(runs, [begun.effect.idempotencyKey], `${effect}: re-run once, with the key of the first attempt`);
    const [e] = await ledger(thread);
    assert.equal(e.attempts, 2, effect);
    assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
    assert.equal(e.idempotencyKey, begun.effect.idempotencyKey);
    // Recorded now: reused.
    only(await node([t]).invoke(call("c1", "charge"), cfg(thread)));
    assert.equal(runs.length, 1, effect);
  }
});

test("a tool that throws is a failed attempt: answered as ToolNode answers it, then run again, and its success recorded", async () => {
  const { t, runs } = counted("send_invoice", "side_effect", (n) => n === 1);
  const failed = only(await node([t]).invoke(call("c1", "send_invoice"), cfg("retry")));
  assert.deepEqual(fields(failed), {
    type: "tool",
    content: "Error: send_invoice to acme failed\n Please fix your mistakes.",
    name: "send_invoice",
    status: "error",
    tool_call_id: "c1",
    artifact: undefined,
  });
  let [e] = await ledger("retry");
  assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_FAILED);
  assert.equal(e.attempts, 1);
  const ok = only(await node([t]).invoke(call("c1", "send_invoice"), cfg("retry")));
  assert.equal(ok.content, "send_invoice to acme: run 2");
  assert.equal(runs.length, 2);
  assert.equal(runs[0], runs[1], "both attempts had one idempotency key");
  [e] = await ledger("retry");
  assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
  assert.equal(e.attempts, 2);
  assert.equal(only(await node([t]).invoke(call("c1", "send_invoice"), cfg("retry"))).content, "send_invoice to acme: run 2");
  assert.equal(runs.length, 2);
});

test("with handleToolErrors: false a tool's error is thrown, as from ToolNode, and recorded as a failed attempt", async () => {
  const { t, runs } = counted("send_invoice", "side_effect", (n) => n === 1);
  await assert.rejects(node([t], { handleToolErrors: false }).invoke(call("c1", "send_invoice"), cfg("throws")), /send_invoice to acme failed/);
  const [e] = await ledger("throws");
  assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_FAILED);
  assert.equal(only(await node([t], { handleToolErrors: false }).invoke(call("c1", "send_invoice"), cfg("throws"))).status, "success");
  assert.equal(runs.length, 2);
});

test("a tool_call_id reused for another call is refused with EffectInputMismatchError, and nothing runs", async () => {
  const { t, runs } = counted("send_invoice", "side_effect");
  await node([t]).invoke(call("c1", "send_invoice", { to: "acme" }), cfg("mismatch"));
  for (const handleToolErrors of [true, false]) {
    await assert.rejects(node([t], { handleToolErrors }).invoke(call("c1", "send_invoice", { to: "globex" }), cfg("mismatch")), (err: unknown) => {
      assert.ok(err instanceof EffectInputMismatchError, String(err));
      assert.equal(err.reason, "EFFECT_INPUT_MISMATCH");
      return true;
    });
  }
  const other = counted("refund", "side_effect");
  await assert.rejects(node([other.t]).invoke(call("c1", "refund", { to: "acme" }), cfg("mismatch")), EffectInputMismatchError);
  assert.equal(runs.length, 1);
  assert.equal(other.runs.length, 0);
});

test("a tool's Command is recorded and rebuilt on reuse", async () => {
  let runs = 0;
  const t = tool(
    async (_: { to: string }, runtime: { toolCallId?: string }) => {
      runs++;
      return new Command({
        update: { messages: [new ToolMessage({ content: "routed", tool_call_id: runtime.toolCallId ?? "" })], step: 3 },
        goto: [new Send("audit", { id: 7 }), "agent"],
      });
    },
    { name: "route", description: "route", schema, metadata: { savepoint_effect: "side_effect" } },
  );
  const first = (await node([t]).invoke(call("c1", "route"), cfg("command"))) as unknown[];
  const again = (await node([t]).invoke(call("c1", "route"), cfg("command"))) as unknown[];
  assert.equal(runs, 1);
  assert.equal(first.length, 1);
  assert.equal(again.length, 1);
  const [a, b] = [first[0], again[0]] as Command[];
  assert.ok(isCommand(b));
  assert.equal(b.graph, a.graph);
  assert.deepEqual(b.resume, a.resume);
  assert.deepEqual(b.goto, a.goto);
  assert.ok((b.goto as unknown[])[0] instanceof Send);
  const [ua, ub] = [a.update, b.update] as { messages: ToolMessage[]; step: number }[];
  assert.equal(ub.step, 3);
  assert.ok(ub.messages[0] instanceof ToolMessage);
  assert.deepEqual(fields(ub.messages[0]), fields(ua.messages[0]));
});

test("a call without a thread_id, and a tool with an unknown effect class, are refused before anything runs", async () => {
  const { t, runs } = counted("send_invoice", "side_effect");
  await assert.rejects(node([t]).invoke(call("c1", "send_invoice"), {}), /thread_id/);
  assert.equal(runs.length, 0);
  const bad = counted("send_invoice", "sometimes");
  assert.throws(() => new DurableToolNode([bad.t], { address: d.addr }), /savepoint_effect "sometimes"/);
  // An unknown tool is answered as ToolNode answers it, without the ledger.
  const m = only(await node([t]).invoke(call("c2", "nope"), cfg("unknown")));
  assert.equal(m.status, "error");
  assert.match(String(m.content), /Tool "nope" not found/);
  assert.deepEqual(await ledger("unknown"), []);
});

test("a tool that calls interrupt() is a failed attempt, run again on resume with the answer, in a graph on SavepointSaver", async () => {
  const sent: string[] = [];
  const t = tool(
    async ({ to }: { to: string }) => {
      const answer = interrupt({ question: `send to ${to}?` }) as string;
      sent.push(answer);
      return `sent to ${to} (${answer})`;
    },
    { name: "send_invoice", description: "send", schema, metadata: { savepoint_effect: "side_effect" } },
  );
  const saver = new SavepointSaver({ address: d.addr });
  try {
    const graph = new StateGraph(MessagesAnnotation).addNode("tools", node([t])).addEdge(START, "tools").addEdge("tools", END).compile({ checkpointer: saver });
    const config = cfg("interrupted");
    const first = await graph.invoke(call("c1", "send_invoice"), config);
    assert.deepEqual(
      ((first as { __interrupt__?: { value: unknown }[] }).__interrupt__ ?? []).map((i) => i.value),
      [{ question: "send to acme?" }],
    );
    let [e] = await ledger("interrupted");
    assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_FAILED, "the interrupted attempt ended without a result");
    // Keyed by the graph's namespace ("" at the root), not the task's ("tools:<task id>"), and the task's checkpoint.
    assert.equal(e.checkpointNs, "");
    assert.equal(e.checkpointId, (await saver.getTuple(config))?.checkpoint.id);
    const out = await graph.invoke(new Command({ resume: "yes" }), config);
    assert.equal(out.messages.at(-1)?.content, "sent to acme (yes)");
    assert.deepEqual(sent, ["yes"]);
    [e] = await ledger("interrupted");
    assert.equal(e.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
    assert.equal(e.attempts, 2);
  } finally {
    saver.close();
  }
});
