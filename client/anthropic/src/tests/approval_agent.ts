/**
 * An agent on @savepoint-dev/anthropic whose send_payment tool requires a
 * person's approval, run as its own process by approval.test.ts: node
 * approval_agent.js ADDR BASE_URL WORKDIR SESSION MODE (agent or runner).
 * It prints "[paused] <tool use ids>" when the run returns Paused, "[done]
 * <final text>" when it finishes. send_payment appends a line to
 * WORKDIR/payments.txt; CRASH_AT=in-tool kills the process with SIGKILL
 * right after that write, before the outcome is recorded; CRASH_AT=paused
 * right after it printed Paused.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import Anthropic from "@anthropic-ai/sdk";

import { type AgentTool, DurableAgent, durable, durableToolRunner, Paused } from "../index.js";

const [addr, baseURL, workdir, sessionId, mode] = process.argv.slice(2) as [string, string, string, string, string];

/** The tools, counting their runs in runs (send_payment also in WORKDIR/payments.txt when workdir is given). */
export function tools(runs: { payments: unknown[]; looks: number }, dir?: string): AgentTool[] {
  return [
    {
      name: "send_payment",
      input_schema: { type: "object" },
      run: (input: { to: string; amount: number }) => {
        runs.payments.push(input);
        if (dir) {
          appendFileSync(join(dir, "payments.txt"), `${JSON.stringify(input)}\n`);
          if (process.env.CRASH_AT === "in-tool") process.kill(process.pid, "SIGKILL");
        }
        return `paid ${input.amount} to ${input.to}`;
      },
    } as AgentTool,
    durable({ name: "look", input_schema: { type: "object" }, run: () => { runs.looks++; return "acme: ok"; } } as AgentTool, { effect: "read_only" }),
  ];
}

/** One run of mode's loop from where the session stands: the final text, or Paused. */
export async function runOnce(mode: string, addr: string, baseURL: string, sessionId: string, t: AgentTool[], extra: Record<string, unknown> = {}): Promise<string | Paused> {
  const client = new Anthropic({ baseURL, apiKey: "test", maxRetries: 0 });
  const params = { model: "claude-fake", max_tokens: 1024 };
  if (mode === "agent") {
    return new DurableAgent(client, sessionId, { tools: t, savepoint: addr, approvalRequired: ["send_payment"], ...extra }).run("pay", params);
  }
  const out = await durableToolRunner(client, sessionId, { ...params, messages: [{ role: "user", content: "pay" }], tools: t }, {
    savepoint: addr,
    approvalRequired: ["send_payment"],
    ...extra,
  }).runUntilDone();
  return out instanceof Paused ? out : (out.content as { type: string; text?: string }[]).map((b) => b.text ?? "").join("");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = await runOnce(mode, addr, baseURL, sessionId, tools({ payments: [], looks: 0 }, workdir));
  process.stdout.write(out instanceof Paused ? `[paused] ${out.waiting.map((w) => w.toolUseId).join(" ")}\n` : `[done] ${out}\n`);
  if (out instanceof Paused && process.env.CRASH_AT === "paused") process.kill(process.pid, "SIGKILL");
  process.exit(0);
}
