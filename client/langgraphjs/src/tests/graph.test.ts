/**
 * A real LangGraph.js StateGraph with an interrupt(), checkpointed by
 * SavepointSaver: the process that reached the interrupt is killed with
 * SIGKILL, and a new process finds the question saved, resumes with the
 * answer, and finishes, without running again the nodes that ran before.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

const program = fileURLToPath(new URL("./graphproc.js", import.meta.url));
let d: Daemon;
let dir: string;

before(async () => {
  d = await startDaemon();
  dir = mkdtempSync(join(tmpdir(), "splgg"));
});
after(async () => {
  await stopDaemon(d);
  rmSync(dir, { recursive: true, force: true });
});

/** Runs graphproc.js; with killOnLine, SIGKILLs it once it prints a line. Returns its exit (137 for SIGKILL) and stdout. */
function run(mode: string, killOnLine = false): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawn(process.execPath, [program, mode, d.addr, "interrupted-thread", dir]);
  let stdout = "";
  let stderr = "";
  p.stdout.on("data", (b: Buffer) => {
    stdout += b.toString();
    if (killOnLine && stdout.includes("\n")) p.kill("SIGKILL");
  });
  p.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => p.kill("SIGKILL"), 60_000);
  return new Promise((res) =>
    p.on("close", (code, signal) => {
      clearTimeout(timer);
      res({ code: code ?? (signal === "SIGKILL" ? 137 : null), stdout, stderr });
    }),
  );
}

test("an interrupt() survives SIGKILL of its process and is resumed from a new one", async () => {
  const first = await run("start", true);
  assert.equal(first.code, 137, first.stderr);
  assert.deepEqual(JSON.parse(first.stdout), { interrupted: true });
  assert.deepEqual(readFileSync(join(dir, "runs"), "utf8").split("\n").filter(Boolean), ["prepare", "ask"]);

  const second = await run("resume");
  assert.equal(second.code, 0, second.stderr);
  const got = JSON.parse(second.stdout);
  assert.deepEqual(got.next, ["ask"], "the new process sees where the graph stopped");
  assert.deepEqual(got.interrupts, [{ question: "send the report?" }], "and the question it asked");
  assert.deepEqual(got.log, ["start", "prepared", "asked: yes", "acted"]);
  assert.equal(got.answer, "done after 3 steps");
  assert.deepEqual(got.nextAfter, []);
  // prepare ran once; ask ran again on resume (LangGraph re-runs the interrupted node), act once.
  assert.deepEqual(readFileSync(join(dir, "runs"), "utf8").split("\n").filter(Boolean), ["prepare", "ask", "ask", "act"]);
});
