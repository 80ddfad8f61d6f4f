/**
 * The seed's agent on @savepoint-dev/anthropic, run as its own process by
 * the tests (and by client/python/tests/test_anthropic.py for the
 * cross-language resumes): node agent.js ADDR BASE_URL WORKDIR SESSION.
 * CRASH_AT=moment:n kills it with SIGKILL the n-th time it reaches moment:
 * before-point-a, after-point-a, after-begin, in-tool (inside write_report,
 * after its side effect), after-record, after-point-b, resume.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";

import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";
import { dial, Session } from "@savepoint-dev/client";

import { DurableAgent, durable, durableToolRunner } from "../index.js";

const [addr, baseURL, workdir, sessionId] = process.argv.slice(2) as [string, string, string, string];
const crash = process.env.CRASH_AT ?? "";
const seen = new Map<string, number>();

function moment(name: string): void {
  const n = (seen.get(name) ?? 0) + 1;
  seen.set(name, n);
  if (crash === `${name}:${n}`) {
    process.stdout.write(`[kill] ${crash}\n`);
    process.kill(process.pid, "SIGKILL");
  }
}

const proto = Session.prototype as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
for (const [name, before, afterName] of [
  ["pointA", "before-point-a", "after-point-a"],
  ["pointB", "", "after-point-b"],
  ["reconcile", "resume", ""],
] as const) {
  const orig = proto[name]!;
  proto[name] = async function (this: unknown, ...args: unknown[]) {
    if (before) moment(before);
    const r = await orig.apply(this, args);
    if (afterName) moment(afterName);
    return r;
  };
}

const pathSchema = { type: "object", properties: { path: { type: "string" } }, required: ["path"] } as const;
const readNotes = durable(
  betaTool({ name: "read_notes", description: "Read a notes file.", inputSchema: pathSchema, run: ({ path }) => readFileSync(join(workdir, path), "utf8") }),
  { effect: "read_only" },
);
const countWords = durable(
  betaTool({
    name: "count_words",
    description: "Count the words of a file.",
    inputSchema: pathSchema,
    run: ({ path }) => `${readFileSync(join(workdir, path), "utf8").split(/\s+/).filter(Boolean).length} words`,
  }),
  { effect: "read_only" },
);
const writeReport = betaTool({
  name: "write_report",
  description: "Write the report to report.txt.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } as const,
  run: ({ text }) => {
    appendFileSync(join(workdir, "report.txt"), text + "\n");
    moment("in-tool");
    return "wrote report.txt";
  },
});

const sp = await dial(addr, {
  toolHook: (ev) => {
    if (ev.stage === "begun") moment("after-begin");
    if (ev.stage === "recorded") moment("after-record");
  },
});
try {
  if (process.env.AGENT_MODE === "runner") {
    // The SDK's own tool runner, through the ledger.
    const runner = durableToolRunner(
      new Anthropic({ baseURL, apiKey: "test", maxRetries: 0 }),
      sessionId,
      {
        model: "claude-fake",
        max_tokens: 1024,
        messages: [{ role: "user", content: "Turn sales-notes.txt into a short report and write it to report.txt." }],
        tools: [readNotes, countWords, writeReport],
      },
      { savepoint: sp },
    );
    const final = await runner.runUntilDone();
    process.stdout.write(`[done] ${final.content.map((b: { text?: string }) => b.text ?? "").join("")}\n`);
    process.exit(0);
  }
  const agent = new DurableAgent(new Anthropic({ baseURL, apiKey: "test", maxRetries: 0 }), sessionId, {
    tools: [readNotes, countWords, writeReport],
    savepoint: sp,
  });
  const out = await agent.run("Turn sales-notes.txt into a short report and write it to report.txt.", { model: "claude-fake", max_tokens: 1024 });
  process.stdout.write(`[done] ${out}\n`);
} finally {
  sp.close();
}
