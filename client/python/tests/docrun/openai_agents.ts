// docrun prelude (TypeScript): what the OpenAI Agents examples take as
// given: a tool's description, parameters and execute, an `invoices` API
// that takes an idempotency key, and, as the default model, the SDK's
// ScriptedModel: it calls send_invoice once, then answers. After the
// block: the invoice was sent once and the run answered.
import * as agentsCore from "@openai/agents-core";
import * as agentsTesting from "@openai/agents-core/testing";
import * as zod from "zod";

agentsCore.setTracingDisabled(true);
const scripted = new agentsTesting.ScriptedModel([
  [agentsTesting.functionCall("send_invoice", { customer: "acme", amount: 120 }, { callId: "call_1" })],
  [agentsTesting.assistantMessage("The invoice is sent.")],
]);
agentsCore.setDefaultModelProvider({ getModel: () => scripted });
const description = "Send an invoice to a customer.";
const parameters = zod.z.object({ customer: zod.z.string(), amount: zod.z.number() });
const sent: string[] = [];
const invoices = {
  send: async (input: { customer: string; amount: number }, { idempotencyKey }: { idempotencyKey: string }) => {
    sent.push(idempotencyKey);
    return `invoice for ${input.amount} sent to ${input.customer}`;
  },
};
const execute = async (input: { customer: string; amount: number }) => invoices.send(input, { idempotencyKey: "" });
// BLOCK
if (sent.length !== 1 || result.finalOutput !== "The invoice is sent.") throw new Error(`sent ${sent.length} times; ${result.finalOutput}`);
console.log(result.finalOutput);
