/**
 * The CheckpointerTestInitializer of @langchain/langgraph-checkpoint-validation
 * for SavepointSaver: each checkpointer gets a savepointd of its own, on a
 * fresh data directory, so that no test sees another's state.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { dial } from "@savepoint-dev/client";

import { SavepointSaver } from "../index.js";

/** The repository root, from dist/tests/. */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

/** A running savepointd on a unix socket in a new temporary directory. */
export interface Daemon {
  addr: string;
  dir: string;
  proc: ChildProcess;
}

/** Starts savepointd ($SAVEPOINTD, else bin/savepointd) and waits until it accepts a connection. */
export async function startDaemon(): Promise<Daemon> {
  const bin = process.env.SAVEPOINTD || join(repoRoot, "bin", "savepointd");
  if (!existsSync(bin)) throw new Error(`${bin} does not exist: build it with 'go build -o bin/ ./cmd/savepointd' (or set SAVEPOINTD).`);
  const dir = mkdtempSync(join(tmpdir(), "splg"));
  const addr = `unix:${join(dir, "s.sock")}`;
  let stderr = "";
  const proc = spawn(bin, ["--data-dir", join(dir, "data"), "--listen", addr], { stdio: ["ignore", "ignore", "pipe"] });
  proc.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  const c = await dial(addr, { waitReady: true, signal: AbortSignal.timeout(20_000) }).catch((err: Error) => {
    proc.kill("SIGKILL");
    throw new Error(`savepointd did not start: ${err.message}\nstderr:\n${stderr}`);
  });
  c.close();
  return { addr, dir, proc };
}

/** Kills the daemon and removes its directory. */
export async function stopDaemon(d: Daemon): Promise<void> {
  if (d.proc.exitCode === null && d.proc.signalCode === null) {
    const exited = new Promise((res) => d.proc.once("exit", res));
    d.proc.kill("SIGKILL");
    await exited;
  }
  rmSync(d.dir, { recursive: true, force: true });
}

const daemons = new WeakMap<SavepointSaver, Daemon>();

const initializer: CheckpointSaverTestInitializer<SavepointSaver> = {
  checkpointerName: "@savepoint-dev/langgraph SavepointSaver",
  async createCheckpointer() {
    const d = await startDaemon();
    const saver = new SavepointSaver({ address: d.addr });
    daemons.set(saver, d);
    return saver;
  },
  async destroyCheckpointer(saver) {
    saver.close();
    const d = daemons.get(saver);
    if (d) await stopDaemon(d);
  },
};

export default initializer;
