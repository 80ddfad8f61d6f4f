/**
 * The client is silent unless the application gives it a logger, and every
 * error message it makes ends in a full sentence.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { after, before, test } from "node:test";

import { status as Code } from "@grpc/grpc-js";

import {
  AlreadyRunError,
  type Client,
  dial,
  ErrorReason,
  type Logger,
  newError,
  NotRunError,
  ResultsMismatchError,
  SavepointError,
  sentence,
  SessionNotFoundError,
  ToolUsesPendingError,
  UnavailableError,
} from "../index.js";
import { Daemon, shortTempDir } from "./daemon.js";

const fast = { maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 5 };
/** No wait for a daemon that never comes. */
const noWait = { reconnectWaitMs: 0 };
const endsInSentence = /[^\s:][.!?]$/;

let d: Daemon;
let c: Client;
let dir: string;

before(async () => {
  d = await Daemon.start();
  c = await dial(d.addr);
  dir = shortTempDir("spq");
});
after(async () => {
  c.close();
  await d.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs a program in a new Node process with the client imported as sp, and returns its stderr. */
function stderrOf(program: string): string {
  const index = new URL("../index.js", import.meta.url).href;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", `import * as sp from ${JSON.stringify(index)};\n${program}`], {
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(r.status, 0, `the program failed: ${r.stderr}`);
  return r.stderr;
}

test("without a logger the client writes nothing, even when it retries; consoleLogger() writes the retries", () => {
  const program = (logger: string) => `
    const c = await sp.dial(${JSON.stringify(`unix:${dir}/none.sock`)}, { retry: ${JSON.stringify(fast)}, reconnectWaitMs: 0${logger} });
    try { await c.raw.getSession({ sessionId: "s" }); } catch (e) { if (!(e instanceof sp.UnavailableError)) throw e; }
    c.close();`;
  assert.equal(stderrOf(program("")), "");
  const loud = stderrOf(program(", logger: sp.consoleLogger()"));
  assert.match(loud, /level=WARN msg="savepoint: daemon unavailable, retrying"/);
});

test("the logger option receives the retries", async () => {
  const got: string[] = [];
  const logger: Logger = {
    info: (m) => got.push(`info ${m}`),
    warn: (m) => got.push(`warn ${m}`),
    error: (m) => got.push(`error ${m}`),
  };
  const u = await dial(`unix:${dir}/none.sock`, { retry: fast, ...noWait, logger });
  try {
    await assert.rejects(u.raw.getSession({ sessionId: "s" }), UnavailableError);
  } finally {
    u.close();
  }
  assert.deepEqual(got, ["warn savepoint: daemon unavailable, retrying", "warn savepoint: daemon unavailable, retrying"]);
});

test("an unreachable daemon's error ends in a sentence, without grpc-js's empty resolution note", async () => {
  const u = await dial(`unix:${dir}/none.sock`, { retry: { ...fast, maxAttempts: 1 }, ...noWait });
  try {
    await assert.rejects(u.raw.getSession({ sessionId: "s" }), (e: unknown) => {
      assert.ok(e instanceof UnavailableError);
      assert.doesNotMatch(e.message, /Resolution note/);
      assert.doesNotMatch(e.details, /Resolution note/);
      assert.match(e.message, endsInSentence, e.message);
      assert.match(e.message, /none\.sock/, "it still says what failed");
      return true;
    });
  } finally {
    u.close();
  }
});

/** The error p is rejected with; it fails the test if p resolves. */
async function refusal(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("the call succeeded; a refusal was expected.");
}

test("the daemon's refusals and the session's own errors end in a sentence", async () => {
  await assert.rejects(c.resume("nobody"), (e: unknown) => e instanceof SessionNotFoundError && endsInSentence.test(e.message));
  const s = await c.start("quiet", "t", { messages: [{ role: "user", contentJson: '"go"' }] });
  await s.pointA({ role: "assistant", contentJson: "[]" }, [{ toolUseId: "t1", name: "tool" }]);
  const errors: Error[] = [
    await refusal(s.pointA({ role: "assistant", contentJson: "[]" }, [])),
    await refusal(s.pointB([])),
    await refusal(s.runTool({ toolUseId: "nope", name: "tool" }, () => "x")),
    new ToolUsesPendingError(),
    new ResultsMismatchError("detail"),
    new AlreadyRunError("detail"),
    new NotRunError("detail."),
  ];
  for (const r of Object.values(ErrorReason)) {
    if (typeof r === "number" && r > 0) errors.push(newError(r, Code.FAILED_PRECONDITION, "a clause without a period"));
  }
  for (const e of errors) {
    assert.ok(e instanceof Error, String(e));
    assert.match(e.message, endsInSentence, `${e.name}: ${e.message}`);
  }
  assert.ok(errors.some((e) => e instanceof SavepointError));
});

test("sentence ends text with one period and drops an empty resolution note", () => {
  const cases: [string, string][] = [
    ["No connection established. Last error: Error: connect ENOENT /x.sock. Resolution note: ", "No connection established. Last error: Error: connect ENOENT /x.sock."],
    ["session is at revision 3, not 2; reload it before saving", "session is at revision 3, not 2; reload it before saving."],
    ["already a sentence.", "already a sentence."],
    ["a question?", "a question?"],
    ["  padded  ", "padded."],
    ["", "No details were given."],
    ["Resolution note: ", "No details were given."],
  ];
  for (const [in_, want] of cases) assert.equal(sentence(in_), want, JSON.stringify(in_));
});
