/**
 * An agent process for the crash tests: `node tool-worker.js ADDR SESSION
 * EFFECT first|resume LOG`. The first run's scripted model calls send (a
 * durable tool of class EFFECT that appends a line with its idempotency key
 * to LOG) once and then answers; CRASH=STAGE kills the process with SIGKILL
 * at that stage of the call (listed, begun, ran, recorded, settled; "tool" inside the
 * tool after its side effect). CALL_ID names the call (call_1 by default);
 * NO_TOOL=1 leaves the tool out of the agent (and of this process);
 * STREAM=1 makes the first run a streamed one; CALLS=2 makes its model
 * call send twice at once (call_1 for acme, call_2 for globex), and
 * CRASH_NTH=N kills at the Nth time the stage is reached (1 by default).
 * VERIFY=done|notDone|unknown|throw gives the tool a verify hook that
 * appends "verify KEY CUSTOMER" to LOG.verify and answers so. The
 * resume runs with an empty input and prints, as JSON, the items the resumed
 * model was sent (first: the items of its first request too) and the
 * session's items; with REISSUE=1 its model first asks for the first run's
 * call again, with the same input, under call_2.
 */
import { appendFileSync } from "node:fs";

import { Agent, run, setTracingDisabled } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import type { Verified } from "@savepoint-dev/client";
import { z } from "zod";

import { durableTool, type Effect, idempotencyKey, SavepointSession } from "../index.js";
import { setStageHook } from "../ledger.js";

setTracingDisabled(true);
const [addr, id, effect, mode, log] = process.argv.slice(2);
const crash = process.env.CRASH ?? "";
const callId = process.env.CALL_ID || "call_1";
let reached = 0;
const killAt = (stage: string) => {
  if (stage === crash && ++reached === Number(process.env.CRASH_NTH || "1")) process.kill(process.pid, "SIGKILL");
};

/** What the tool returns with BLOCKS=1: text and an image, the SDK's structured tool output. */
const BLOCKS = [
  { type: "text", text: "invoice sent" },
  { type: "image", image: "data:image/png;base64,iVBORw0KGgo=" },
];

/** The verify hook of VERIFY: a done call's output names the key it was begun with. */
const verify = (key: string, input: unknown): Verified => {
  const { customer } = input as { customer: string };
  appendFileSync(log + ".verify", `verify ${key} ${customer}\n`);
  switch (process.env.VERIFY) {
    case "done":
      return { status: "done", output: `found the invoice to ${customer} under key=${key}`, note: "the billing API has it" };
    case "notDone":
      return { status: "notDone", note: "the billing API has no such invoice" };
    case "throw":
      throw new Error("the billing API is down");
    default:
      return { status: "unknown" };
  }
};

const send = process.env.NO_TOOL === "1" ? undefined : durableTool({
  name: "send",
  description: "Send an invoice.",
  parameters: z.object({ customer: z.string(), amount: z.number() }),
  effect: effect as Effect,
  ...(process.env.VERIFY ? { verify } : {}),
  execute: async ({ customer, amount }) => {
    appendFileSync(log, `${customer} ${amount} key=${idempotencyKey()}\n`);
    killAt("tool");
    if (process.env.BLOCKS === "1") return BLOCKS as never;
    return `invoice for ${amount} sent to ${customer}`;
  },
});
setStageHook(killAt);

const session = new SavepointSession(id, { address: addr });
const tools = send ? [send] : [];
if (mode === "first") {
  const calls = [functionCall("send", { customer: "acme", amount: 120 }, { callId })];
  if (process.env.CALLS === "2") calls.push(functionCall("send", { customer: "globex", amount: 80 }, { callId: "call_2" }));
  const model = new ScriptedModel([calls, [assistantMessage("The invoice is sent.")]]);
  const agent = new Agent({ name: "billing", model, tools });
  if (process.env.STREAM === "1") {
    const r = await run(agent, "Invoice acme for 120.", { session, stream: true });
    for await (const _ of r) void _;
    await r.completed;
    process.stdout.write(JSON.stringify({ final: r.finalOutput }) + "\n");
  } else {
    const r = await run(agent, "Invoice acme for 120.", { session });
    process.stdout.write(JSON.stringify({ final: r.finalOutput }) + "\n");
  }
} else {
  const reissue = process.env.REISSUE === "1" ? [[functionCall("send", { amount: 120, customer: "acme" }, { callId: "call_2" })]] : [];
  const model = new ScriptedModel([...reissue, [assistantMessage("Resumed.")]]);
  const r = await run(new Agent({ name: "billing", model, tools }), [], { session });
  const first = model.calls[0]!.request.input;
  process.stdout.write(JSON.stringify({ final: r.finalOutput, first, sent: model.lastCall!.request.input, items: await session.getItems() }) + "\n");
}
await session.close();
