/**
 * The seed's agent on @anthropic-ai/claude-agent-sdk with
 * @savepoint-dev/anthropic/claude-agent, the twin of
 * client/python/tests/claude_agent_app.py, run as its own process by
 * claude_agent.e2e.mjs: tools from an in-process SDK MCP server (read_notes,
 * read-only; write_report, which appends to report.txt), the SDK's bundled
 * CLI pointed at the fake Messages API by the environment
 * (ANTHROPIC_BASE_URL). Usage: node claude_agent_app.mjs WORKDIR [SESSION_ID
 * to resume]. CRASH=inside-write SIGKILLs the process inside write_report
 * right after its side effect, CRASH=after-record right after its outcome is
 * recorded; either with "-slow" a second later, once the SDK has mirrored
 * the call to the store. DENY=name refuses that tool in canUseTool;
 * MODE=dontAsk lets the CLI's permission mode refuse write_report;
 * APPROVE=1 makes write_report wait for a person's approval. It prints the
 * session id, then the final answer, the result's terminal_reason and its
 * deferred tool use's id.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { SavepointSessionStore } from "@savepoint-dev/anthropic/claude-agent";
import { dial } from "@savepoint-dev/client";
import { z } from "zod";

const [work, resume] = process.argv.slice(2);
const crash = process.env.CRASH ?? "";

async function kill(moment) {
  if (crash === moment + "-slow") await sleep(1000);
  if (crash === moment || crash === moment + "-slow") {
    process.stdout.write(`[kill] ${moment}\n`);
    process.kill(process.pid, "SIGKILL");
  }
}

const readNotes = tool("read_notes", "Read the sales notes", { path: z.string() }, async () => ({ content: [{ type: "text", text: "sales up 12%" }] }));
const writeReport = tool("write_report", "Write the report to report.txt", { text: z.string() }, async ({ text }) => {
  appendFileSync(join(work, "report.txt"), text.split("\n")[0] + "\n");
  await kill("inside-write");
  return { content: [{ type: "text", text: "report.txt written" }] };
});

const client = await dial(process.env.SAVEPOINT_ADDR);
// APPROVE=1: write_report waits for a person's approval (PreToolUse defers it).
const store = new SavepointSessionStore(client, { readOnly: ["mcp__notes__read_notes"], approvalRequired: process.env.APPROVE ? ["mcp__notes__write_report"] : [] });
const hooks = store.hooks();
const record = hooks.PostToolUse[0].hooks[0];
hooks.PostToolUse[0].hooks[0] = async (input, tid, opts) => {
  const out = await record(input, tid, opts);
  if (String(input.tool_name).endsWith("write_report")) await kill("after-record");
  return out;
};
const denied = process.env.DENY ?? "";
const task = resume ? "Continue." : "Turn sales-notes.txt into a short report and write it to report.txt.";

async function* prompt() {
  yield { type: "user", message: { role: "user", content: task }, parent_tool_use_id: null };
}

try {
  for await (const m of query({
    prompt: prompt(),
    options: {
      mcpServers: { notes: createSdkMcpServer({ name: "notes", tools: [readNotes, writeReport] }) },
      tools: [],
      sessionStore: store,
      sessionStoreFlush: "eager",
      hooks,
      // MODE=dontAsk: the CLI's own mode refuses what is not allowed, with no canUseTool to ask.
      ...(process.env.MODE === "dontAsk"
        ? { permissionMode: "dontAsk", allowedTools: ["mcp__notes__read_notes"] }
        : { canUseTool: store.canUseTool(async (name) => (name === denied ? { behavior: "deny", message: `${name} is not allowed` } : { behavior: "allow" })) }),
      resume,
      model: "claude-sonnet-4-5",
      cwd: work,
      env: { ...process.env, CLAUDE_CONFIG_DIR: join(work, `config-${process.pid}`) },
    },
  })) {
    if (m.type === "system" && m.subtype === "init") process.stdout.write(`session ${m.session_id}\n`);
    if (m.type === "result") {
      process.stdout.write(`result ${(m.result ?? "").replaceAll("\n", " | ")}\n`);
      process.stdout.write(`terminal ${m.terminal_reason ?? ""}\ndeferred ${m.deferred_tool_use?.id ?? ""}\n`);
    }
  }
} finally {
  client.close();
}
