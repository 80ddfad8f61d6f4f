/**
 * @anthropic-ai/claude-agent-sdk run for real (0.3.337 and its bundled
 * native CLI) with @savepoint-dev/anthropic/claude-agent against a real
 * savepointd and the local fake of the Messages API of the Python tests
 * (client/python/tests/fake_messages_api.py, standard library only): the
 * agent (claude_agent_app.mjs) is SIGKILLed inside its side-effecting tool,
 * or right after the tool's outcome was recorded, and resumed by a new
 * process. write_report must run once, the resumed agent must be told the
 * outcome is unknown only where it is, and no request may fail the fake's
 * tool_use/tool_result pairing check. Run by `make test-claude-agent-ts`
 * (the SDK's CLI is large), not by make test.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { dial } from "@savepoint-dev/client";

const here = dirname(fileURLToPath(import.meta.url));
const repo = process.env.REPO_ROOT;
const { Daemon } = await import(join(repo, "client/typescript/dist/tests/daemon.js"));
const APP = join(here, "claude_agent_app.mjs");
const WRITE = "toolu_02write";

let d;
let api;
const rejected = [];

/** The Python fake, in a child process; it prints its URL, then each request it rejects. */
function startFake() {
  const code = [
    "import sys, time",
    `sys.path.insert(0, ${JSON.stringify(join(repo, "client/python/tests"))})`,
    "from fake_messages_api import FakeMessagesAPI",
    "class Log(list):",
    "    def append(self, v):",
    "        print('REJECTED', v, flush=True); super().append(v)",
    "a = FakeMessagesAPI()",
    "a.rejected = Log()",
    "print('URL', a.url, flush=True)",
    "sys.stdin.read()",
  ].join("\n");
  const p = spawn("python3", ["-c", code], { stdio: ["pipe", "pipe", "inherit"] });
  return new Promise((res, rej) => {
    let buf = "";
    p.stdout.on("data", (b) => {
      buf += b;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.startsWith("URL ")) res({ url: line.slice(4), proc: p });
        if (line.startsWith("REJECTED ")) rejected.push(line.slice(9));
      }
    });
    p.on("exit", (c) => rej(new Error(`the fake Messages API exited with ${c}`)));
  });
}

before(async () => {
  d = await Daemon.start();
  api = await startFake();
});
after(async () => {
  api.proc.stdin.end();
  api.proc.kill();
  await d.close();
});

function agent(work, resumeId, env = {}) {
  return new Promise((res) => {
    const args = [APP, work, ...(resumeId ? [resumeId] : [])];
    const p = spawn(process.execPath, args, {
      env: { ...process.env, SAVEPOINT_ADDR: d.addr, ANTHROPIC_BASE_URL: api.url, ANTHROPIC_API_KEY: "sk-fake", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", ...env },
      detached: true,
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (b) => (out += b));
    p.stderr.on("data", (b) => (err += b));
    const timer = setTimeout(() => p.kill("SIGKILL"), 120_000);
    p.on("exit", (code, signal) => {
      clearTimeout(timer);
      // The SDK's CLI outlives a SIGKILLed parent: end the whole group.
      try {
        process.kill(-p.pid, "SIGKILL");
      } catch {}
      const lines = Object.fromEntries(out.split("\n").filter((l) => l.includes(" ")).map((l) => [l.slice(0, l.indexOf(" ")), l.slice(l.indexOf(" ") + 1)]));
      res({ code, signal, lines, out: out + err });
    });
  });
}

function reportLines(work) {
  return readFileSync(join(work, "report.txt"), "utf8").split("\n").filter(Boolean);
}

async function ledger(sdkSession) {
  const c = await dial(d.addr);
  try {
    return new Map((await c.raw.listEffects({ sessionId: "claude." + sdkSession })).entries.map((e) => [e.toolUseId, e]));
  } finally {
    c.close();
  }
}

function workdir() {
  return mkdtempSync(join(tmpdir(), "claude-ts-"));
}

for (const crash of ["inside-write", "inside-write-slow"]) {
  test(`killed ${crash}: in doubt, not run twice`, async () => {
    const work = workdir();
    let r = await agent(work, "", { CRASH: crash });
    assert.equal(r.signal, "SIGKILL", r.out);
    assert.deepEqual(reportLines(work), ["Q3: sales up 12%"]);
    const sdk = r.lines.session;
    assert.ok(sdk, r.out);
    const w = (await ledger(sdk)).get(WRITE);
    assert.ok(w.begun && w.effect === undefined);

    r = await agent(work, sdk);
    assert.equal(r.code, 0, r.out);
    assert.deepEqual(reportLines(work), ["Q3: sales up 12%"], "write_report ran twice");
    assert.match(r.lines.result, /\(error\)/, r.out);
    assert.match(r.lines.result, /unknown/, r.out);
    assert.deepEqual(rejected, []);
  });
}

for (const crash of ["after-record", "after-record-slow"]) {
  test(`killed ${crash}: the recorded output is reused`, async () => {
    const work = workdir();
    let r = await agent(work, "", { CRASH: crash });
    assert.equal(r.signal, "SIGKILL", r.out);
    const sdk = r.lines.session;
    assert.ok((await ledger(sdk)).get(WRITE).effect.output);

    r = await agent(work, sdk);
    assert.equal(r.code, 0, r.out);
    assert.deepEqual(reportLines(work), ["Q3: sales up 12%"], "write_report ran twice");
    assert.match(r.lines.result, /report\.txt written/, r.out);
    assert.doesNotMatch(r.lines.result, /unknown/, r.out);
    assert.deepEqual(rejected, []);
  });
}

for (const mode of ["", "dontAsk"]) {
  test(`a call refused by ${mode || "canUseTool"} is recorded as refused, never run`, async () => {
    const work = workdir();
    const r = await agent(work, "", { DENY: "mcp__notes__write_report", MODE: mode });
    assert.equal(r.code, 0, r.out);
    assert.ok(!existsSync(join(work, "report.txt")));
    assert.match(r.lines.result, mode ? /denied/ : /not allowed/, r.out);
    const e = (await ledger(r.lines.session)).get(WRITE).effect;
    assert.ok(e.refused && e.isError);
  });
}

for (const [decision, undecidedFirst] of [["approve", false], ["deny", false], ["approve", true]]) {
  test(`approvalRequired: PreToolUse's defer pauses the query; ${undecidedFirst ? "resumed undecided, then " : ""}${decision === "deny" ? "denied, the model gets the note" : "approved, the resume runs it once"}`, async () => {
    const work = workdir();
    let r = await agent(work, "", { APPROVE: "1" });
    assert.equal(r.code, 0, r.out);
    assert.equal(r.lines.terminal, "tool_deferred", r.out);
    assert.equal(r.lines.deferred, WRITE, r.out);
    assert.ok(!existsSync(join(work, "report.txt")));
    const sdk = r.lines.session;
    const w = (await ledger(sdk)).get(WRITE);
    assert.ok(!w.begun && w.effect === undefined && w.approval.status === 1, "write_report waits for approval, not begun"); // APPROVAL_STATUS_WAITING
    if (undecidedFirst) {
      r = await agent(work, sdk, { APPROVE: "1" });
      assert.equal(r.code, 0, r.out);
      assert.ok(!existsSync(join(work, "report.txt")));
    }
    const c = await dial(d.addr);
    try {
      await c.approveEffect("claude." + sdk, WRITE, decision === "deny" ? { deny: true, note: "not this quarter", decidedBy: "bob" } : { decidedBy: "alice" });
    } finally {
      c.close();
    }
    r = await agent(work, sdk, { APPROVE: "1" });
    assert.equal(r.code, 0, r.out);
    if (decision === "deny") {
      assert.ok(!existsSync(join(work, "report.txt")));
      assert.match(r.lines.result, /\(error\).*not this quarter/, r.out);
    } else {
      assert.deepEqual(reportLines(work), ["Q3: sales up 12%"]);
      assert.match(r.lines.result, /report\.txt written/, r.out);
      r = await agent(work, sdk, { APPROVE: "1" });
      assert.equal(r.code, 0, r.out);
      assert.deepEqual(reportLines(work), ["Q3: sales up 12%"], "write_report ran twice");
    }
    assert.deepEqual(rejected, []);
  });
}

test("docs/frameworks/claude-agent-sdk.md's TypeScript example runs, and its resume reuses the recorded write", async () => {
  // The page's ts block (plain JavaScript but for its fence), saved beside
  // this file so that its imports resolve here, run in a fresh folder.
  const page = readFileSync(join(repo, "docs/frameworks/claude-agent-sdk.md"), "utf8");
  const code = [...page.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.equal(code.length, 1, "the page has one ts block");
  const script = join(here, "docs_example.mjs");
  writeFileSync(script, code[0]);
  const work = workdir();
  writeFileSync(join(work, "sales-notes.txt"), "sales up 12%\n");
  const run = (env) =>
    new Promise((res) => {
      const p = spawn(process.execPath, [script], {
        cwd: work,
        env: { ...process.env, SAVEPOINT_ADDR: d.addr, ANTHROPIC_BASE_URL: api.url, ANTHROPIC_API_KEY: "sk-fake", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", ...env },
      });
      let out = "";
      p.stdout.on("data", (b) => (out += b));
      p.stderr.on("data", (b) => (out += b));
      p.on("exit", (code) => res({ code, out }));
    });
  let r = await run({});
  assert.equal(r.code, 0, r.out);
  assert.ok(existsSync(join(work, "report.txt")), r.out);
  assert.deepEqual(reportLines(work), ["Q3: sales up 12%"], r.out);
  const sdk = /session_id: '([^']+)'/.exec(r.out)?.[1];
  assert.ok(sdk, r.out);
  assert.ok((await ledger(sdk)).get(WRITE)?.effect, "write_report's outcome is on the ledger");
  r = await run({ RESUME: sdk });
  assert.equal(r.code, 0, r.out);
  assert.deepEqual(reportLines(work), ["Q3: sales up 12%"], "write_report ran twice");
  assert.deepEqual(rejected, []);
});

test("the SDK's listSessions({ sessionStore }) reads the summaries the store folded with the SDK's own foldSessionSummary", async () => {
  // foldSessionSummary given as the option: here @savepoint-dev/anthropic is
  // a symlink to client/anthropic, whose own node_modules lack the SDK, so
  // its default (importing the SDK from where the package lies) finds none.
  const { foldSessionSummary, listSessions } = await import("@anthropic-ai/claude-agent-sdk");
  const { SavepointSessionStore } = await import("@savepoint-dev/anthropic/claude-agent");
  const { randomUUID } = await import("node:crypto");
  const c = await dial(d.addr);
  try {
    const dir = workdir();
    const writer = new SavepointSessionStore(c, { foldSessionSummary });
    // The project key as the SDK derives it from dir: read back from the key its own listSessions asks for.
    const asked = [];
    const probe = { append: async () => {}, load: async () => null, listSessions: async (k) => (asked.push(k), []) };
    await listSessions({ dir, sessionStore: probe });
    assert.equal(asked.length, 1);
    const sessionId = randomUUID();
    await writer.append({ projectKey: asked[0], sessionId }, [
      { type: "user", uuid: randomUUID(), timestamp: new Date().toISOString(), cwd: dir, sessionId, message: { role: "user", content: "Write the Q3 report." } },
    ]);
    const reader = new SavepointSessionStore(c);
    let loads = 0;
    const load = reader.load.bind(reader);
    reader.load = async (k) => (loads++, load(k));
    const infos = await listSessions({ dir, sessionStore: reader });
    assert.deepEqual(infos.map((i) => i.sessionId), [sessionId]);
    assert.match(JSON.stringify(infos[0]), /Q3 report/);
    assert.equal(loads, 0, "listed from the summaries, no session loaded (taken over)");
  } finally {
    c.close();
  }
});
