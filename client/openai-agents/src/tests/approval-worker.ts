/**
 * An agent process for the approval tests: `node approval-worker.js ADDR
 * SESSION ask|approve|decided|resume STATE LOG`. ask: the scripted model calls pay
 * (a durable tool with needsApproval that appends a line with its
 * idempotency key to LOG); the run stops for approval and its RunState is
 * written to STATE. approve: STATE is read, every interruption approved and
 * the run resumed; decided: STATE is read and the run resumed as it is
 * (the call was decided in savepointd); CRASH=tool kills the process with SIGKILL inside the
 * tool after its side effect. resume: a run with an empty input. approve
 * and resume print, as JSON, the items the model was sent.
 */
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";

import { Agent, run, RunState, setTracingDisabled } from "@openai/agents-core";
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents-core/testing";
import { z } from "zod";

import { durableTool, idempotencyKey, SavepointSession } from "../index.js";

setTracingDisabled(true);
const [addr, id, mode, stateFile, log] = process.argv.slice(2);

const pay = durableTool({
  name: "pay",
  description: "Pay the invoice.",
  parameters: z.object({ cents: z.number() }),
  needsApproval: true,
  execute: ({ cents }) => {
    appendFileSync(log!, `${cents} ${idempotencyKey()}\n`);
    if (process.env.CRASH === "tool") process.kill(process.pid, "SIGKILL");
    return `paid ${cents}`;
  },
});

const session = new SavepointSession(id!, { address: addr });
if (mode === "ask") {
  const model = new ScriptedModel([[functionCall("pay", { cents: 500 }, { callId: "call_pay" })], [assistantMessage("done")]]);
  const agent = new Agent({ name: "a", model, tools: [pay] });
  const r = await run(agent, "pay the invoice", { session });
  writeFileSync(stateFile!, r.state.toString());
  console.log(JSON.stringify({ interruptions: r.interruptions.map((i) => i.name) }));
} else {
  const model = new ScriptedModel([[assistantMessage("done")]]);
  const agent = new Agent({ name: "a", model, tools: [pay] });
  let input: RunState<unknown, Agent> | [] = [];
  if (mode === "approve" || mode === "decided") {
    input = await RunState.fromString(agent, readFileSync(stateFile!, "utf8"));
    if (mode === "approve") for (const it of input.getInterruptions()) input.approve(it);
  }
  const r = await run(agent, input, { session });
  console.log(JSON.stringify({ final: r.finalOutput, sent: model.lastCall?.request.input }));
}
await session.close();
