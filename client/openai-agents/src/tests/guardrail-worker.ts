/**
 * A process whose run trips an output guardrail after a tool call:
 * `ADDR SESSION` runs it on a SavepointSession, prints "tripped" once the
 * run has thrown, and then waits to be killed.
 */
import { OutputGuardrailTripwireTriggered, run } from "@openai/agents-core";

import { SavepointSession } from "../index.js";
import { trippingAgent } from "./guardrail.js";

const [addr, id] = process.argv.slice(2);
const s = new SavepointSession(id, { address: addr });
try {
  await run(trippingAgent(), "look up Ada", { session: s });
  process.stdout.write("not tripped\n");
} catch (err) {
  process.stdout.write(err instanceof OutputGuardrailTripwireTriggered ? "tripped\n" : `failed: ${String(err)}\n`);
}
setInterval(() => {}, 1_000); // wait for SIGKILL
