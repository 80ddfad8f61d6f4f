/** The agent of the guardrail-tripped run tests: one tool call, then a final answer its output guardrail refuses. */
import { Agent, tool } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import { z } from "zod";

export function trippingAgent(): Agent {
  const lookup = tool({
    name: "lookup",
    description: "Looks a name up.",
    parameters: z.object({ name: z.string() }),
    execute: async ({ name }) => `${name} was found`,
  });
  const model = new ScriptedModel([[functionCall("lookup", { name: "Ada" }, { callId: "call_ada" })], [assistantMessage("SECRET: Ada's password")]]);
  return new Agent({
    name: "looker",
    model,
    tools: [lookup],
    outputGuardrails: [
      {
        name: "no secrets",
        execute: async ({ agentOutput }) => ({ tripwireTriggered: String(agentOutput).includes("SECRET"), outputInfo: {} }),
      },
    ],
  });
}
