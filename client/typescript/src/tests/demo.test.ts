import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { type Client, consoleLogger, dial, SessionStatus } from "../index.js";
import { FINAL_ANSWER, REPORT_TEXT, scripts } from "../demo/model.js";
import { countWrites, NOTES_FILE, REPORT_FILE, SAMPLE_NOTES } from "../demo/tools.js";
import { Daemon, describe as show, pool, repoRoot, runDemo, type RunOptions, startDemo } from "./daemon.js";

let d: Daemon;
let c: Client;

before(async () => {
  d = await Daemon.start();
  c = await dial(d.addr, { logger: consoleLogger("error") });
});
after(async () => {
  c.close();
  await d.close();
});

/** A fresh work directory holding the sample notes. */
export function workdir(withNotes = true): string {
  const dir = mkdtempSync(join(tmpdir(), "spdemo"));
  if (withNotes) writeFileSync(join(dir, NOTES_FILE), SAMPLE_NOTES);
  return dir;
}

/** A session's latest revision and whole history, read without taking ownership. */
async function sessionState(id: string) {
  const g = await c.raw.getSession({ sessionId: id });
  const cp = g.checkpoint!;
  const msgs = cp.messages.map((m) => [m.role, m.contentJson]);
  for (let token = g.nextPageToken; token !== ""; ) {
    const p = await c.raw.listMessages({ sessionId: id, revision: cp.revision, pageToken: token });
    msgs.push(...p.messages.map((m) => [m.role, m.contentJson]));
    token = p.nextPageToken;
  }
  return { turn: cp.turn, tokensUsed: cp.tokensUsed, pending: cp.pendingToolUses.length, messages: msgs };
}

test("the sample notes and the scripts are the Go demo's", () => {
  assert.equal(SAMPLE_NOTES, readFileSync(join(repoRoot, "cmd/savepoint-demo/sales-notes.txt"), "utf8"));
  assert.ok(REPORT_TEXT.includes(`${SAMPLE_NOTES.split(/\s+/).filter(Boolean).length} words.`), "the report states what count_words finds");
  assert.deepEqual(Object.keys(scripts).sort(), ["parallel", "seed"]);
});

test("the seed's two transcripts, line for line", async () => {
  const dir = workdir();
  const o: RunOptions = { addr: d.addr, dir, session: "seed-transcript", crash: "after-effect-write:3" };
  let r = await runDemo(o);
  assert.equal(r.code, 137, show(r));
  assert.equal(
    r.stdout,
    `[turn 1][save A] pending=read_notes
[turn 1][save B]
[turn 2][save A] pending=count_words
[turn 2][save B]
[turn 3][save A] pending=write_report
[kill] simulated kill at after-effect-write:3
`,
  );
  r = await runDemo({ ...o, resume: true, crash: "" });
  assert.equal(r.code, 0, show(r));
  assert.equal(
    r.stdout,
    `[resume] read turn=3 pending=write_report
[resume][reconcile] tool_use_id=toolu_03 name=write_report ledger hit, reusing result, not re-running
[turn 3][save B] filled in this turn's tool result after resume
[done] Report written to report.txt, task complete.
`,
  );
  assert.equal(countWrites(dir), 1);
  assert.equal(readFileSync(join(dir, REPORT_FILE), "utf8"), REPORT_TEXT);
});

test("the demo completes its session at the end, so it is listed as completed, after a crash and resume too", async () => {
  const completed = async () =>
    (await c.raw.listSessions({ statusFilter: SessionStatus.SESSION_STATUS_COMPLETED, pageSize: 1000 })).sessions.map((x) => x.sessionId);
  for (const [session, steps] of [
    ["done-fresh", [{}]],
    ["done-resumed", [{ crash: "after-effect-write:3" }, { resume: true }]],
    ["done-final-saved", [{ crash: "after-save-a:4" }, { resume: true }]],
  ] as const) {
    const dir = workdir();
    for (const [i, step] of steps.entries()) {
      const r = await runDemo({ addr: d.addr, dir, session, ...step });
      assert.equal(r.code, i === steps.length - 1 ? 0 : 137, show(r));
      if (i < steps.length - 1) {
        const g = await c.raw.getSession({ sessionId: session });
        assert.equal(SessionStatus[g.checkpoint!.status], "SESSION_STATUS_ACTIVE", `${session}: a crashed run leaves it active`);
      }
    }
    const cp = (await c.raw.getSession({ sessionId: session })).checkpoint!;
    assert.equal(SessionStatus[cp.status], "SESSION_STATUS_COMPLETED", session);
    assert.equal(cp.finalOutput, FINAL_ANSWER, session);
    assert.ok((await completed()).includes(session), `${session}: listSessions with the completed filter (savepoint ls) lists it`);
  }
  // Resuming a completed session finds the answer and completes it again, changing nothing.
  const r = await runDemo({ addr: d.addr, dir: workdir(), session: "done-fresh", resume: true });
  assert.equal(r.code, 0, show(r));
  assert.equal(SessionStatus[(await c.raw.getSession({ sessionId: "done-fresh" })).checkpoint!.status], "SESSION_STATUS_COMPLETED");
});

/**
 * The same runs of both demos, each against its own session and work
 * directory on one daemon: every line they print, their exit codes, their
 * writes of the report and the histories they leave must be equal.
 */
const runs: [string, Omit<RunOptions, "addr" | "dir" | "session" | "go">[]][] = [
  ["seed, uncrashed, fresh directory", [{}]],
  ["parallel, uncrashed", [{ script: "parallel" }]],
  ["seed, the ledger hit", [{ crash: "after-effect-write:3" }, { resume: true }]],
  ["seed, read-only re-run", [{ crash: "after-tool:1" }, { resume: true }]],
  ["seed, never begun", [{ crash: "after-save-a:3" }, { resume: true }]],
  ["seed, in doubt", [{ crash: "after-tool:3" }, { resume: true }]],
  ["seed, begun and killed again", [{ crash: "after-save-a:3" }, { resume: true, crash: "after-begin:3" }, { resume: true }]],
  ["seed, finished, resumed", [{}, { resume: true }]],
  ["seed, final answer saved", [{ crash: "after-save-a:4" }, { resume: true }]],
  ["parallel, one of two in doubt", [{ script: "parallel", crash: "after-begin:2:write_report" }, { script: "parallel", resume: true }]],
  ["parallel, one of two recorded", [{ script: "parallel", crash: "after-effect-write:2:count_words" }, { script: "parallel", resume: true }]],
  ["no session to resume", [{ resume: true }]],
];

test("the TypeScript demo prints what the Go demo prints, and leaves the same history", async () => {
  await pool(
    2,
    runs.map(([name, steps], i) => async () => {
      const out: Record<string, { lines: string[]; writes: number; report: string; state: unknown }> = {};
      for (const lang of ["go", "ts"] as const) {
        const fresh = i === 0;
        const dir = workdir(!fresh);
        const session = `same-${i}-${lang}`;
        const lines: string[] = [];
        for (const step of steps) {
          const r = await runDemo({ addr: d.addr, dir, session, go: lang === "go", ...step });
          const norm = (t: string) => t.replaceAll(dir, "DIR").replaceAll(session, "SESSION").replace(/^time=\S+ /gm, "");
          lines.push(`exit ${r.code}`, ...norm(r.stdout).split("\n"));
          // stderr differs in the details of gRPC's messages; its last line says what to do.
          // The TypeScript client ends each error message with a period (a full
          // sentence); the Go client's errors end without one.
          lines.push("stderr: " + (norm(r.stderr).trim().split("\n").at(-1) ?? "").replace(/\.$/, ""));
        }
        let report = "";
        try {
          report = readFileSync(join(dir, REPORT_FILE), "utf8");
        } catch {
          report = "(none)";
        }
        const state = steps[0].resume && steps.length === 1 ? null : await sessionState(session);
        out[lang] = { lines, writes: countWrites(dir), report, state };
      }
      assert.deepEqual(out.ts.lines, out.go.lines, `${name}: the output differs`);
      assert.equal(out.ts.writes, out.go.writes, `${name}: report writes`);
      assert.equal(out.ts.report, out.go.report, `${name}: report.txt`);
      assert.deepEqual(out.ts.state, out.go.state, `${name}: the saved history, turn and tokens differ`);
    }),
  );
});

test("a session crashes in one language and resumes in the other", async () => {
  const base = await (async () => {
    const r = await runDemo({ addr: d.addr, dir: workdir(), session: "x-base" });
    assert.equal(r.code, 0, show(r));
    return sessionState("x-base");
  })();
  const cases: [string, boolean, string][] = [
    ["TypeScript killed after the ledger write, Go resumes", false, "after-effect-write:3"],
    ["Go killed after count_words ran, TypeScript resumes", true, "after-tool:2"],
  ];
  for (const [name, goFirst, crash] of cases) {
    const dir = workdir();
    const session = `x-${goFirst ? "go" : "ts"}`;
    const r1 = await runDemo({ addr: d.addr, dir, session, crash, go: goFirst });
    assert.equal(r1.code, 137, `${name}: ${show(r1)}`);
    const r2 = await runDemo({ addr: d.addr, dir, session, resume: true, go: !goFirst });
    assert.equal(r2.code, 0, `${name}: ${show(r2)}`);
    assert.ok(r2.stdout.endsWith(`[done] ${FINAL_ANSWER}\n`), name);
    assert.equal(countWrites(dir), 1, `${name}: the report is written exactly once`);
    assert.deepEqual(await sessionState(session), base, `${name}: the history equals an uncrashed run's`);
  }
});

test("bad invocations exit 2 with the Go demo's message", async () => {
  const cases: [string, string[], Record<string, string>, string][] = [
    ["unknown label", [], { CRASH_AFTER: "after-lunch:1" }, `unknown label "after-lunch"`],
    ["no turn", [], { CRASH_AFTER: "after-tool" }, "want LABEL:N or LABEL:N:TOOL"],
    ["turn 0", [], { CRASH_AFTER: "after-tool:0" }, "the turn must be a number from 1"],
    ["empty tool", [], { CRASH_AFTER: "after-tool:1:" }, "empty tool name"],
    ["bad pause", [], { PAUSE_AFTER: "after-tool:x" }, "PAUSE_AFTER"],
    ["unknown script", ["--script", "poem"], {}, `unknown --script "poem"`],
    ["extra argument", ["resume"], {}, "unexpected arguments"],
    ["unknown flag", ["--bogus"], {}, "flag provided but not defined: -bogus"],
    ["missing value", ["--session"], {}, "flag needs an argument: -session"],
    ["bad bool", ["--resume=maybe"], {}, `invalid boolean value "maybe" for -resume`],
  ];
  for (const [name, args, env, want] of cases) {
    const firstLines: string[] = [];
    for (const go of [true, false]) {
      const r = await runDemo({ addr: d.addr, dir: workdir(), session: "bad", go, env, extra: args });
      assert.equal(r.code, 2, `${name} (${go ? "go" : "ts"}): ${show(r)}`);
      assert.ok(r.stderr.includes(want), `${name} (${go ? "go" : "ts"}): stderr lacks ${want}:\n${r.stderr}`);
      firstLines.push(r.stderr.split("\n")[0]);
    }
    assert.equal(firstLines[1], firstLines[0], `${name}: the first line of stderr differs`);
  }
  for (const go of [true, false]) {
    const r = await runDemo({ addr: d.addr, dir: workdir(), session: "help", go, extra: ["-h"] });
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /^usage: savepoint-demo \[flags\]/);
  }
});

test("an unreachable daemon is a clear error, exit 1", async () => {
  const dir = workdir();
  for (const go of [true, false]) {
    const r = await runDemo({ addr: `unix:${dir}/nobody.sock`, dir, session: "down", go });
    assert.equal(r.code, 1, show(r));
    assert.match(r.stderr, new RegExp(`\\[error\\] savepointd at unix:${dir}/nobody.sock is unavailable: start it, then run again\\n$`));
  }
});

// The daemon killed mid-run (not the agent): the agent's next call fails
// clearly, nothing runs blind, and once the daemon is back the run resumes
// and finishes, as in the Go demo's TestDaemonKilledMidRun.
test("a daemon killed mid-run: a clear error, nothing run blind, then resume", async () => {
  const cases = [
    {
      // The next call is BeginEffect: it fails, so write_report does not run, and it is still never begun.
      pause: "after-save-a:3",
      stderr: ['[error] turn 3: savepoint: tool use "toolu_03" (write_report) not run: BeginEffect:', "is unavailable: start it, then run again with --resume"],
      writesBefore: 0,
      decision: "[resume][reconcile] tool_use_id=toolu_03 name=write_report ledger miss, side-effecting tool was never started (not begun), running it safely",
    },
    {
      // The tool ran, its RecordEffect fails: reported loudly, the result not turned into an error, Point B fails; on resume it is in doubt.
      pause: "after-tool:3",
      stderr: ["[ledger write failed] tool_use_id=toolu_03 name=write_report", "[error] turn 3: saving Point B:", "is unavailable: start it, then run again with --resume"],
      writesBefore: 1,
      decision: "[resume][reconcile] tool_use_id=toolu_03 name=write_report ledger miss with side effects, begun but not recorded: in doubt, not re-running, appending is_error",
    },
  ];
  for (const tt of cases) {
    const own = await Daemon.start();
    try {
      const dir = workdir();
      const { proc, done } = startDemo({ addr: own.addr, dir, session: "daemon-killed", pause: tt.pause });
      await new Promise<void>((res, rej) => {
        let out = "";
        proc.stdout!.on("data", (b: Buffer) => {
          out += b.toString();
          if (out.includes("[pause] ")) res();
        });
        proc.on("exit", () => rej(new Error(`no pause line:\n${out}`)));
      });
      await own.kill();
      proc.stdin!.end("\n");
      const r = await done;
      assert.equal(r.code, 1, `${tt.pause}: ${show(r)}`);
      for (const want of tt.stderr) assert.ok(r.stderr.includes(want), `${tt.pause}: stderr lacks ${want}:\n${r.stderr}`);
      assert.ok(!r.stdout.includes("[done]"), `${tt.pause}: claimed done with the daemon down`);
      assert.equal(countWrites(dir), tt.writesBefore, tt.pause);
      await own.restart();
      const r2 = await runDemo({ addr: own.addr, dir, session: "daemon-killed", resume: true });
      assert.equal(r2.code, 0, `${tt.pause}: ${show(r2)}`);
      assert.ok(r2.stdout.includes(tt.decision + "\n"), `${tt.pause}: ${show(r2)}`);
      assert.equal(countWrites(dir), 1, `${tt.pause}: written once in all`);
    } finally {
      await own.close();
    }
  }
});
