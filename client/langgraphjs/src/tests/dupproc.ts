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
import { appendFileSync, writeSync } from "node:fs";
import { join } from "node:path";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage, HumanMessage, type ToolCall, type ToolMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { RunnableConfig } from "@langchain/core/runnables";
import { tool } from "@langchain/core/tools";
import { type Command, END, type LangGraphRunnableConfig, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import type { ChannelVersions, Checkpoint, CheckpointMetadata, PendingWrite } from "@langchain/langgraph-checkpoint";
import { toolsCondition } from "@langchain/langgraph/prebuilt";

import { DurableToolNode, SavepointSaver } from "../index.js";

const [mode, address, threadId, dir, kill] = process.argv.slice(2);
const killing = kill === "kill";
const times = mode === "twice" ? 2 : 1;

class ReissuingChatModel extends BaseChatModel {
  _llmType(): string {
    return "reissuing";
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const answers = messages.filter((m) => m.getType() === "tool") as ToolMessage[];
    const message =
      answers.length >= times
        ? new AIMessage("done: " + answers.map((m) => `[${m.status}] ${m.content}`).join(" | "))
        : new AIMessage({
            content: "",
            tool_calls: [{ id: `call_${randomUUID().slice(0, 12)}`, name: "send_invoice", args: { invoice: 42, to: "acme" }, type: "tool_call" }],
          });
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

const sendInvoice = tool(
  async ({ invoice, to }: { invoice: number; to: string }) => {
    appendFileSync(join(dir, "sent"), `invoice ${invoice} to ${to}\n`);
    return `invoice ${invoice} sent to ${to}`;
  },
  {
    name: "send_invoice",
    description: "Send an invoice.",
    schema: {
      type: "object" as const,
      properties: { invoice: { type: "number" as const }, to: { type: "string" as const } },
      required: ["invoice", "to"],
    },
    metadata: { savepoint_effect: "side_effect" },
  },
);

/** Stops for good once send_invoice ran and was recorded, when killing. */
class Probed extends DurableToolNode {
  protected override async runTool(call: ToolCall, config: LangGraphRunnableConfig, state: unknown): Promise<ToolMessage | Command> {
    const out = await super.runTool(call, config, state);
    if (killing) {
      // The puts before the lost one land first.
      await new Promise((r) => setTimeout(r, 500));
      writeSync(1, "ran\n");
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
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

const model = new ReissuingChatModel({});
const saver = new LosingSaver({ address });
const tools = new Probed([sendInvoice], { address });
const app = new StateGraph(MessagesAnnotation)
  .addNode("agent", async (s: typeof MessagesAnnotation.State) => ({ messages: [await model.invoke(s.messages)] }))
  .addNode("tools", tools)
  .addEdge(START, "agent")
  .addConditionalEdges("agent", toolsCondition, ["tools", END])
  .addEdge("tools", "agent")
  .compile({ checkpointer: saver });
const config = { configurable: { thread_id: threadId }, durability: "async" as const };

const out = await app.invoke(mode === "resume" ? null : { messages: [new HumanMessage("send invoice 42 to acme")] }, config);
const messages = (out.messages as BaseMessage[]).map((m) => ({
  type: m.getType(),
  content: m.content,
  ...(m.getType() === "tool" ? { status: (m as ToolMessage).status, tool_call_id: (m as ToolMessage).tool_call_id } : {}),
}));
process.stdout.write(JSON.stringify({ messages }) + "\n");
saver.close();
tools.close();
