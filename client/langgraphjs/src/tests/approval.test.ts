/**
 * DurableToolNode({ approvalRequired }): a call of a tool that requires
 * approval stops the graph with interrupt(); resuming with the person's
 * decision records it with ApproveThreadEffect, bound to the call's input;
 * an approved call runs once (a replay from the checkpoint before it reuses
 * its result), a denied one is answered with the note.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { AIMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { graphPb, pb } from "@savepoint-dev/client";

import { Connection } from "../conn.js";
import { DurableToolNode, SavepointSaver } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

let d: Daemon;
let conn: Connection;
let saver: SavepointSaver;
const nodes: DurableToolNode[] = [];

before(async () => {
  d = await startDaemon();
  conn = new Connection({ address: d.addr });
  saver = new SavepointSaver({ address: d.addr });
});
after(async () => {
  for (const n of nodes) n.close();
  saver.close();
  conn.close();
  await stopDaemon(d);
});

const schema = { type: "object" as const, properties: { cents: { type: "number" as const } }, required: ["cents"] };

function payGraph() {
  const paid: number[] = [];
  const pay = tool(
    async ({ cents }: { cents: number }) => {
      paid.push(cents);
      return `paid ${cents}`;
    },
    { name: "send_payment", description: "pay", schema },
  );
  const n = new DurableToolNode([pay], { address: d.addr, approvalRequired: ["send_payment"] });
  nodes.push(n);
  const graph = new StateGraph(MessagesAnnotation).addNode("tools", n).addEdge(START, "tools").addEdge("tools", END).compile({ checkpointer: saver });
  return { graph, paid };
}

const input = { messages: [new AIMessage({ content: "", tool_calls: [{ id: "call_pay", name: "send_payment", args: { cents: 500 }, type: "tool_call" as const }] })] };

async function effect(thread: string): Promise<graphPb.ThreadEffect> {
  const res = await conn.unary<graphPb.ListThreadEffectsRequest, graphPb.ListThreadEffectsResponse>(
    "listThreadEffects",
    graphPb.ListThreadEffectsRequest.fromPartial({ threadId: thread }),
  );
  return res.effects[0]!;
}

type Asked = { savepointApproval: { toolUseId: string; args: unknown; inputDigest: string } };

test("interrupt, approve by resuming: the tool runs once, a replay reuses it", async () => {
  const { graph, paid } = payGraph();
  const config = { configurable: { thread_id: "lgjs-approve" } };
  const first = (await graph.invoke(input, config)) as { __interrupt__?: { value: Asked }[] };
  const asked = first.__interrupt__?.[0]?.value.savepointApproval;
  assert.equal(asked?.toolUseId, "call_pay");
  assert.deepEqual(asked?.args, { cents: 500 });
  assert.equal(asked?.inputDigest.length, 64);
  assert.deepEqual(paid, []);
  assert.equal((await effect("lgjs-approve")).state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_NOT_BEGUN);
  const out = await graph.invoke(new Command({ resume: { approved: true, by: "alice" } }), config);
  assert.equal(out.messages.at(-1)?.content, "paid 500");
  assert.deepEqual(paid, [500]);
  const e = await effect("lgjs-approve");
  assert.equal(e.approval?.status, pb.ApprovalStatus.APPROVAL_STATUS_APPROVED);
  assert.equal(e.approval?.spent, true);
  // Replay the tools step from the checkpoint before it.
  let before: { config: unknown; next: string[] } | undefined;
  for await (const h of graph.getStateHistory(config)) {
    if (h.next.length === 1 && h.next[0] === "tools") before = h as never;
  }
  assert.ok(before);
  const again = await graph.invoke(null, before.config as never);
  assert.equal(again.messages.at(-1)?.content, "paid 500");
  assert.deepEqual(paid, [500]);
});

test("interrupt, deny by resuming: the model gets the note, the tool never runs", async () => {
  const { graph, paid } = payGraph();
  const config = { configurable: { thread_id: "lgjs-deny" } };
  await graph.invoke(input, config);
  const out = await graph.invoke(new Command({ resume: { approved: false, note: "over the limit", by: "alice" } }), config);
  const last = out.messages.at(-1) as { status?: string; content: unknown };
  assert.equal(last.status, "error");
  assert.match(String(last.content), /over the limit/);
  assert.deepEqual(paid, []);
  assert.equal((await effect("lgjs-deny")).approval?.status, pb.ApprovalStatus.APPROVAL_STATUS_DENIED);
});
