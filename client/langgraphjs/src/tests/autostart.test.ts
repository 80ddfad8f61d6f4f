/**
 * SavepointSaver() with no address starts savepointd on demand, as the
 * TypeScript client does (docs/install.md): a graph run in a process of its
 * own, with a temporary home and no daemon before, checkpoints; after a
 * kill -9 of that daemon a second process starts it again and finds the
 * thread as it was acknowledged.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../../../..");
const index = pathToFileURL(resolve(here, "../index.js")).href;

const HELPER = `
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { SavepointSaver } from ${JSON.stringify(index)};
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

function run(arg: string): Promise<{ stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("SAVEPOINT") && k !== "XDG_RUNTIME_DIR") env[k] = v;
  Object.assign(env, {
    HOME: home,
    XDG_STATE_HOME: join(home, "st"),
    SAVEPOINTD_PATH: process.env.SAVEPOINTD || join(repoRoot, "bin", "savepointd"),
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
