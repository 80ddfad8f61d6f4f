/**
 * A LangGraph.js agent run as its own process by duplicate.test.ts: a
 * StateGraph of a chat model that gives every tool call a new id (as a real
 * model asked again does) and a DurableToolNode on SavepointSaver, invoked
 * with durability "async". send_invoice appends a line to DIR/sent.
 *
 * `start ADDR THREAD DIR kill`: the model's tool call never reaches the
 * daemon (the agent task's writes and the checkpoint holding it are put
 * while the next step runs, and these puts never finish), and once
 * send_invoice has run and its outcome is recorded the process prints
 * "ran" and waits for the test's SIGKILL. `resume` runs the thread on from
 * its last saved checkpoint; `twice` runs a new thread whose model asks for
 * the same invoice twice, one turn after the other. Each prints the
 * thread's messages as JSON.
 *
 * Usage: node dupproc.js start|resume|twice ADDR THREAD DIR [kill]
 */
import { randomUUID } from "node:crypto";

import { AIMessage, type BaseMessage, HumanMessage, type ToolCall, type ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { Command, LangGraphRunnableConfig } from "@langchain/langgraph";
import type { ChannelVersions, Checkpoint, CheckpointMetadata, PendingWrite } from "@langchain/langgraph-checkpoint";

import { DurableToolNode, SavepointSaver } from "../index.js";
import { agentGraph, messagesJSON, ScriptedChatModel, sendInvoice, stopHere } from "./agentgraph.js";

const [mode, address, threadId, dir, kill] = process.argv.slice(2);
const killing = kill === "kill";
const times = mode === "twice" ? 2 : 1;

/** Gives every tool call a new id, as a real model asked again does, until it has times answers. */
const model = new ScriptedChatModel((answers) =>
  answers.length >= times
    ? new AIMessage("done: " + answers.map((m) => `[${m.status}] ${m.content}`).join(" | "))
    : new AIMessage({
        content: "",
        tool_calls: [{ id: `call_${randomUUID().slice(0, 12)}`, name: "send_invoice", args: { invoice: 42, to: "acme" }, type: "tool_call" }],
      }),
);

/** Stops for good once send_invoice ran and was recorded, when killing. */
class Probed extends DurableToolNode {
  protected override async runTool(call: ToolCall, config: LangGraphRunnableConfig, state: unknown): Promise<ToolMessage | Command> {
    const out = await super.runTool(call, config, state);
    if (killing) {
      // The puts before the lost one land first.
      await new Promise((r) => setTimeout(r, 500));
      stopHere("ran");
    }
    return out;
  }
}

const holdsCall = (v: unknown): boolean =>
  (Array.isArray(v) ? v : [v]).some((m) => m instanceof AIMessage && (m.tool_calls?.length ?? 0) > 0);

/** When killing, never stores the model's tool call: its puts never finish, as puts still in flight when the process dies. */
class LosingSaver extends SavepointSaver {
  override put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const msgs = (checkpoint.channel_values as { messages?: unknown[] }).messages ?? [];
    if (killing && holdsCall(msgs.at(-1))) return new Promise(() => {});
    return super.put(config, checkpoint, metadata, newVersions);
  }

  override putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    if (killing && writes.some(([, v]) => holdsCall(v))) return new Promise(() => {});
    return super.putWrites(config, writes, taskId, taskPath);
  }
}

const saver = new LosingSaver({ address });
const tools = new Probed([sendInvoice(dir)], { address });
const app = agentGraph(model, tools, saver);
const config = { configurable: { thread_id: threadId }, durability: "async" as const };

const out = await app.invoke(mode === "resume" ? null : { messages: [new HumanMessage("send invoice 42 to acme")] }, config);
process.stdout.write(JSON.stringify({ messages: messagesJSON(out.messages as BaseMessage[]) }) + "\n");
saver.close();
tools.close();
