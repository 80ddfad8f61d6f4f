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
import { appendFileSync } from "node:fs";
import { join } from "node:path";

import { AIMessage, type BaseMessage, HumanMessage, type ToolCall, type ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import type { Command, LangGraphRunnableConfig } from "@langchain/langgraph";
import type { Verified } from "@savepoint-dev/client";

import { DurableToolNode, SavepointSaver } from "../index.js";
import { agentGraph, messagesJSON, ScriptedChatModel, sendInvoice, stopHere } from "./agentgraph.js";

const [mode, address, threadId, dir, killAt] = process.argv.slice(2);

/** At the kill point: says so on stdout and blocks until the test's SIGKILL. */
function point(name: string): void {
  if (mode === "start" && name === killAt) stopHere(name);
}

/** Asks for both tools, then repeats what they answered. */
const model = new ScriptedChatModel((answers) =>
  answers.length > 0
    ? new AIMessage(answers.map((m) => `${m.name} ${m.status}: ${m.content}`).join("\n"))
    : new AIMessage({
        content: "",
        tool_calls: [
          { id: "call_lookup", name: "lookup_customer", args: { customer: "acme" }, type: "tool_call" },
          { id: "call_send", name: "send_invoice", args: { invoice: 42, to: "acme" }, type: "tool_call" },
        ],
      }),
);

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

/** DurableToolNode with the test's kill points around send_invoice's call. */
class Probed extends DurableToolNode {
  protected override async runTool(call: ToolCall, config: LangGraphRunnableConfig, state: unknown): Promise<ToolMessage | Command> {
    if (call.name === "send_invoice") point("before");
    const out = await super.runTool(call, config, state);
    if (call.name === "send_invoice") point("after");
    return out;
  }
}

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
const tools = new Probed([lookupCustomer, sendInvoice(dir, { withKey: true, sent: () => point("during") })], {
  address,
  ...(process.env.VERIFY ? { verify: { send_invoice: verify } } : {}),
});
const app = agentGraph(model, tools, saver);
// "sync": each step's checkpoint (the model's AIMessage with its tool calls
// among them) is saved before the next step runs, as the docs advise.
const config = { configurable: { thread_id: threadId }, durability: "sync" as const };

const out = await app.invoke(mode === "start" ? { messages: [new HumanMessage("send invoice 42 to acme")] } : null, config);
const after = await app.getState(config);
process.stdout.write(JSON.stringify({ messages: messagesJSON(out.messages as BaseMessage[]), next: after.next }) + "\n");
saver.close();
tools.close();
