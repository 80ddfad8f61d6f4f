/**
 * What the agent processes durableproc.ts and dupproc.ts share: a chat
 * model without a network, the send_invoice tool whose effect the tests
 * count, the agent graph (model, then tools, until the model answers) and
 * the JSON of a run's messages.
 */
import { appendFileSync, writeSync } from "node:fs";
import { join } from "node:path";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { AIMessage, BaseMessage, ToolMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { toolsCondition } from "@langchain/langgraph/prebuilt";

import { type DurableToolNode, IDEMPOTENCY_KEY } from "../index.js";

/** Says name on stdout and blocks until the test's SIGKILL. */
export function stopHere(name: string): void {
  writeSync(1, `${name}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

/** A chat model without a network: its reply is reply(the tool messages so far). */
export class ScriptedChatModel extends BaseChatModel {
  constructor(private readonly reply: (answers: ToolMessage[]) => AIMessage) {
    super({});
  }

  _llmType(): string {
    return "scripted";
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const message = this.reply(messages.filter((m) => m.getType() === "tool") as ToolMessage[]);
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

/**
 * send_invoice, a side-effecting tool: appends "invoice N to X" to DIR/sent
 * (with " key K", its call's idempotency key, when withKey), then calls
 * sent(), and returns "invoice N sent to X".
 */
export function sendInvoice(dir: string, opts: { withKey?: boolean; sent?: () => void } = {}) {
  return tool(
    async ({ invoice, to }: { invoice: number; to: string }, runtime: { configurable?: Record<string, unknown> }) => {
      const key = opts.withKey ? ` key ${runtime.configurable?.[IDEMPOTENCY_KEY]}` : "";
      appendFileSync(join(dir, "sent"), `invoice ${invoice} to ${to}${key}\n`);
      opts.sent?.();
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
}

/** The agent graph: model, then tools while the model asks for them, on saver. */
export function agentGraph(model: BaseChatModel, tools: DurableToolNode, saver: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", async (s: typeof MessagesAnnotation.State) => ({ messages: [await model.invoke(s.messages)] }))
    .addNode("tools", tools)
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: saver });
}

/** A run's messages as the tests read them: type and content, and a tool message's name, status and call id. */
export function messagesJSON(messages: BaseMessage[]) {
  return messages.map((m) => ({
    type: m.getType(),
    content: m.content,
    ...(m.getType() === "tool" ? { name: m.name, status: (m as ToolMessage).status, tool_call_id: (m as ToolMessage).tool_call_id } : {}),
  }));
}
