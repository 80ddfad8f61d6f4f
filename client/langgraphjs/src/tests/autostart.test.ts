/**
 * SavepointSaver() with no address resolves it as the TypeScript client's
 * dial does (resolveAddress, docs/install.md): a graph run in a process of
 * its own, with a temporary home and no daemon before, starts savepointd
 * on demand and checkpoints; after a kill -9 of that daemon a second
 * process starts it again and finds the thread as it was acknowledged.
 * With the system's daemon answering (and none at the per-user default),
 * the saver uses it and starts nothing.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { startDaemon, stopDaemon } from "./initializer.js";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../../../..");
const index = pathToFileURL(resolve(here, "../index.js")).href;

const HELPER = `
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { Autostart } from "@savepoint-dev/client";
import { SavepointSaver } from ${JSON.stringify(index)};
// The system's daemon's socket, where a test puts one (the real one is /run/savepoint/savepoint.sock).
if (process.env.SP_TEST_SYSTEM_ADDR) Autostart.systemAddr = process.env.SP_TEST_SYSTEM_ADDR;
const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const saver = new SavepointSaver();
const graph = new StateGraph(State).addNode("step", () => ({ log: ["step"] })).addEdge(START, "step").addEdge("step", END).compile({ checkpointer: saver });
const config = { configurable: { thread_id: "t" } };
if (process.argv[2] === "resume") {
  const before = (await graph.getState(config)).values.log;
  if (JSON.stringify(before) !== '["a","step"]') throw new Error("acknowledged state lost: " + JSON.stringify(before));
  const out = await graph.invoke({ log: ["b"] }, config);
  console.log(JSON.stringify(out.log));
} else {
  const out = await graph.invoke({ log: ["a"] }, config);
  console.log(JSON.stringify(out.log));
}
console.error("address " + saver.address);
saver.close();
`;

const home = mkdtempSync(join(tmpdir(), "spl"));
const pids: number[] = [];
after(() => {
  for (const p of pids) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // gone
    }
  }
  rmSync(home, { recursive: true, force: true });
});

function run(arg: string, extra: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("SAVEPOINT") && k !== "XDG_RUNTIME_DIR") env[k] = v;
  Object.assign(env, {
    HOME: home,
    XDG_STATE_HOME: join(home, "st"),
    SAVEPOINTD_PATH: process.env.SAVEPOINTD || join(repoRoot, "bin", "savepointd"),
    ...extra,
  });
  const helper = join(here, "autostart-helper.mjs"); // beside the tests, so that @langchain/langgraph resolves
  writeFileSync(helper, HELPER);
  return new Promise((res, rej) =>
    execFile(process.execPath, [helper, arg], { env, timeout: 120_000 }, (err, stdout, stderr) =>
      err ? rej(new Error(`${err.message}\n${stdout}\n${stderr}`)) : res({ stdout, stderr }),
    ),
  );
}

function startedPid(stderr: string): number {
  const m = /^savepoint: started savepointd on demand at unix:.* \(pid (\d+)\)/m.exec(stderr);
  assert.ok(m, `no 'started savepointd on demand' line: ${stderr}`);
  pids.push(Number(m[1]));
  return Number(m[1]);
}

test("SavepointSaver() with no address starts savepointd, and again after kill -9", async () => {
  const first = await run("first");
  assert.equal(first.stdout.trim(), '["a","step"]');
  const pid = startedPid(first.stderr);
  process.kill(pid, "SIGKILL");
  await new Promise((r) => setTimeout(r, 200));
  const second = await run("resume");
  assert.equal(second.stdout.trim(), '["a","step","b","step"]');
  assert.notEqual(startedPid(second.stderr), pid);
});

test("SavepointSaver() with no address uses the system's daemon when it answers, and starts nothing", async () => {
  const sys = await startDaemon();
  const own = mkdtempSync(join(tmpdir(), "spl"));
  const extra = { HOME: own, XDG_STATE_HOME: join(own, "st"), SP_TEST_SYSTEM_ADDR: sys.addr };
  try {
    const first = await run("first", extra);
    assert.equal(first.stdout.trim(), '["a","step"]');
    assert.ok(!first.stderr.includes("started savepointd on demand"), first.stderr);
    assert.match(first.stderr, new RegExp(`^address ${sys.addr}$`, "m"));
    assert.ok(!existsSync(join(own, "st", "savepoint")), "a per-user state directory was made");
    // The thread is in the system's daemon: a second process resumes it there.
    const second = await run("resume", extra);
    assert.equal(second.stdout.trim(), '["a","step","b","step"]');
    assert.ok(!second.stderr.includes("started savepointd on demand"), second.stderr);
  } finally {
    await stopDaemon(sys);
    rmSync(own, { recursive: true, force: true });
  }
});
