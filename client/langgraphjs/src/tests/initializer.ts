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

/**
 * Starts savepointd ($SAVEPOINTD, else bin/savepointd) with extra flags and
 * waits until it accepts a connection; with dir, on that directory again
 * (its data and socket), as a restart.
 */
export async function startDaemon(args: string[] = [], dir = mkdtempSync(join(tmpdir(), "splg"))): Promise<Daemon> {
  const bin = process.env.SAVEPOINTD || join(repoRoot, "bin", "savepointd");
  if (!existsSync(bin)) throw new Error(`${bin} does not exist: build it with 'go build -o bin/ ./cmd/savepointd' (or set SAVEPOINTD).`);
  const addr = `unix:${join(dir, "s.sock")}`;
  let stderr = "";
  const proc = spawn(bin, ["--data-dir", join(dir, "data"), "--listen", addr, ...args], { stdio: ["ignore", "ignore", "pipe"] });
  proc.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  // A new client each try, so that no reconnect backoff delays the answer,
  // with a subchannel of its own, so that it does not connect the savers'
  // (grpc-js shares subchannels between channels of the same target and
  // options): until it answers, the daemon exits (a bad flag), or 20 s pass.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const c = await dial(addr, {
      retry: { maxAttempts: 1, initialBackoffMs: 0, maxBackoffMs: 0 },
      reconnectWaitMs: 1000,
      channelOptions: { "grpc.use_local_subchannel_pool": 1 },
    });
    const ok = await c.raw.getServerInfo({}, { deadline: Date.now() + 1000 }).then(
      () => true,
      () => false,
    );
    c.close();
    if (ok) break;
    if (proc.exitCode !== null || proc.signalCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`savepointd did not start.\nstderr:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return { addr, dir, proc };
}

/** Stops the daemon (SIGTERM) and waits for it to exit, keeping its directory. */
export async function haltDaemon(d: Daemon): Promise<void> {
  if (d.proc.exitCode !== null || d.proc.signalCode !== null) return;
  const exited = new Promise((res) => d.proc.once("exit", res));
  d.proc.kill("SIGTERM");
  await exited;
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
