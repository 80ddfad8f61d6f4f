/**
 * A DurableAgent whose first turn asks for two side-effecting tools at once,
 * run as its own process by agent.test.ts: node parallel.js ADDR WORKDIR
 * SESSION [crash]. Each tool waits at a barrier until both have started (so
 * the turn fails unless they run concurrently), checks that the ledger
 * shows it begun before it does anything, and appends a line to its file.
 * slow_write waits until fast_write's outcome is recorded; with "crash" it
 * is SIGKILLed right after its side effect. The scripted model's final
 * answer names each tool result: "toolu_fast:<content>" or
 * "toolu_slow:in doubt".
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";

import { dial } from "@savepoint-dev/client";

import { DurableAgent } from "../index.js";

const [addr, work, sid, crash] = process.argv.slice(2) as [string, string, string, string | undefined];
const recorded = new Set<string>();
const sp = await dial(addr, { toolHook: (ev) => ev.stage === "recorded" && recorded.add(ev.call.toolUseId) });

let started = 0;
let release: () => void = () => {};
const both = new Promise<void>((r) => (release = r));
async function barrier(): Promise<void> {
  if (++started === 2) release();
  const timeout = new Promise<never>((_, rej) => setTimeout(() => rej(new Error("the turn's tools did not run concurrently")), 10_000).unref());
  await Promise.race([both, timeout]);
}

async function begun(id: string): Promise<boolean> {
  const { entries } = await sp.raw.listEffects({ sessionId: sid });
  const e = entries.find((x) => x.toolUseId === id);
  return Boolean(e?.begun && !e.effect);
}

const schema = { type: "object", properties: {} } as const;
const tools = [
  {
    name: "fast_write",
    input_schema: schema,
    run: async (_: unknown, ctx: { toolUse: { id: string } }) => {
      await barrier();
      const wasBegun = await begun(ctx.toolUse.id);
      appendFileSync(join(work, "fast.txt"), "fast\n");
      return `fast done, begun first: ${wasBegun}`;
    },
  },
  {
    name: "slow_write",
    input_schema: schema,
    run: async (_: unknown, ctx: { toolUse: { id: string } }) => {
      await barrier();
      const wasBegun = await begun(ctx.toolUse.id);
      while (!recorded.has("toolu_fast")) await new Promise((r) => setTimeout(r, 5));
      appendFileSync(join(work, "slow.txt"), "slow\n");
      if (crash) process.kill(process.pid, "SIGKILL");
      return `slow done, begun first: ${wasBegun}`;
    },
  },
];

type Block = { type: string; tool_use_id?: string; is_error?: boolean; content?: unknown };
const reply = (content: unknown[], stop_reason: string) => ({ id: "m", type: "message", role: "assistant", model: "x", content, stop_reason, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } });
const messages = {
  create: async (p: { messages: { role: string; content: unknown }[] }) => {
    if (p.messages.length === 1)
      return reply(
        [
          { type: "tool_use", id: "toolu_fast", name: "fast_write", input: {} },
          { type: "tool_use", id: "toolu_slow", name: "slow_write", input: {} },
        ],
        "tool_use",
      );
    const results = p.messages.at(-1)!.content as Block[];
    const text = (b: Block) => (typeof b.content === "string" ? b.content : JSON.stringify(b.content));
    return reply([{ type: "text", text: results.map((b) => `${b.tool_use_id}:${b.is_error ? "in doubt" : text(b)}`).join(" | ") }], "end_turn");
  },
};

try {
  const agent = new DurableAgent({ messages, beta: { messages } } as never, sid, { tools: tools as never, savepoint: sp });
  process.stdout.write(`[done] ${await agent.run("write both", { model: "x", max_tokens: 100 })}\n`);
} finally {
  sp.close();
}
