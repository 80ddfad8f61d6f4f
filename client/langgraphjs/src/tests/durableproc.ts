/**
 * A LangGraph.js agent, a StateGraph of a scripted chat model and a
 * DurableToolNode on SavepointSaver, run as its own process by
 * durable.test.ts. The model asks for two tools at once: lookup_customer
 * (read-only) and send_invoice (side-effecting, which appends a line to
 * DIR/sent: the effect the test counts); once it has their answers it
 * repeats them and the graph ends.
 *
 * `start` runs a new thread; with a kill point it stops there and waits
 * for SIGKILL, after printing the point's name: `before` (the tools node
 * is about to begin send_invoice), `during` (the invoice is sent, its
 * outcome not yet recorded) or `after` (its outcome is recorded, the
 * node's writes not yet saved). `resume` (a new process) runs the thread
 * on from its last checkpoint. Both print the thread's messages as JSON.
 * Checkpoints are saved with durability "sync".
 *
 * VERIFY=done|notDone|unknown|throw gives send_invoice a verify hook that
 * appends "verify KEY" to DIR/verify and answers so.
 *
 * Usage: node durableproc.js start|resume ADDR THREAD DIR [before|during|after]
 */
import { appendFileSync, writeSync } from "node:fs";
import { join } from "node:path";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage, HumanMessage, type ToolCall, type ToolMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { type Command, END, type LangGraphRunnableConfig, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { toolsCondition } from "@langchain/langgraph/prebuilt";

import type { Verified } from "@savepoint-dev/client";

import { DurableToolNode, IDEMPOTENCY_KEY, SavepointSaver } from "../index.js";

const [mode, address, threadId, dir, killAt] = process.argv.slice(2);

/** At the kill point: says so on stdout and blocks until the test's SIGKILL. */
function point(name: string): void {
  if (mode !== "start" || name !== killAt) return;
  writeSync(1, `${name}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

/** A chat model without a network: it asks for both tools, then repeats what they answered. */
class ScriptedChatModel extends BaseChatModel {
  _llmType(): string {
    return "scripted";
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const answers = messages.filter((m) => m.getType() === "tool") as ToolMessage[];
    const message =
      answers.length > 0
        ? new AIMessage(answers.map((m) => `${m.name} ${m.status}: ${m.content}`).join("\n"))
        : new AIMessage({
            content: "",
            tool_calls: [
              { id: "call_lookup", name: "lookup_customer", args: { customer: "acme" }, type: "tool_call" },
              { id: "call_send", name: "send_invoice", args: { invoice: 42, to: "acme" }, type: "tool_call" },
            ],
          });
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

const lookupCustomer = tool(
  async ({ customer }: { customer: string }) => {
    appendFileSync(join(dir, "lookups"), `${customer}\n`);
    return `${customer}: billing@${customer}.example`;
  },
  {
    name: "lookup_customer",
    description: "Find a customer's billing address.",
    schema: { type: "object" as const, properties: { customer: { type: "string" as const } }, required: ["customer"] },
    metadata: { savepoint_effect: "read_only" },
  },
);

const sendInvoice = tool(
  async ({ invoice, to }: { invoice: number; to: string }, runtime: { configurable?: Record<string, unknown> }) => {
    appendFileSync(join(dir, "sent"), `invoice ${invoice} to ${to} key ${runtime.configurable?.[IDEMPOTENCY_KEY]}\n`);
    point("during");
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

/** DurableToolNode with the test's kill points around send_invoice's call. */
class Probed extends DurableToolNode {
  protected override async runTool(call: ToolCall, config: LangGraphRunnableConfig, state: unknown): Promise<ToolMessage | Command> {
    if (call.name === "send_invoice") point("before");
    const out = await super.runTool(call, config, state);
    if (call.name === "send_invoice") point("after");
    return out;
  }
}

const model = new ScriptedChatModel({});
const saver = new SavepointSaver({ address });
/** The verify hook of VERIFY: a done call's output names the key it was begun with. */
const verify = (key: string, args: unknown): Verified => {
  appendFileSync(join(dir, "verify"), `verify ${key} ${JSON.stringify(args)}\n`);
  switch (process.env.VERIFY) {
    case "done":
      return { status: "done", output: `found invoice sent under key ${key}`, note: "the billing API has it" };
    case "notDone":
      return { status: "notDone" };
    case "throw":
      throw new Error("the billing API is down");
    default:
      return { status: "unknown" };
  }
};
const tools = new Probed([lookupCustomer, sendInvoice], { address, ...(process.env.VERIFY ? { verify: { send_invoice: verify } } : {}) });
const app = new StateGraph(MessagesAnnotation)
  .addNode("agent", async (s: typeof MessagesAnnotation.State) => ({ messages: [await model.invoke(s.messages)] }))
  .addNode("tools", tools)
  .addEdge(START, "agent")
  .addConditionalEdges("agent", toolsCondition, ["tools", END])
  .addEdge("tools", "agent")
  .compile({ checkpointer: saver });
// "sync": each step's checkpoint (the model's AIMessage with its tool calls
// among them) is saved before the next step runs, as the docs advise.
const config = { configurable: { thread_id: threadId }, durability: "sync" as const };

const out = await app.invoke(mode === "start" ? { messages: [new HumanMessage("send invoice 42 to acme")] } : null, config);
const after = await app.getState(config);
const messages = (out.messages as BaseMessage[]).map((m) => ({
  type: m.getType(),
  content: m.content,
  ...(m.getType() === "tool" ? { name: m.name, status: (m as ToolMessage).status, tool_call_id: (m as ToolMessage).tool_call_id } : {}),
}));
process.stdout.write(JSON.stringify({ messages, next: after.next }) + "\n");
saver.close();
tools.close();
