/**
 * Test helpers: the real savepointd as a child process on a unix socket in a
 * short temporary directory, and node child processes running a test worker.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { dial } from "@savepoint-dev/client";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root, from dist/tests/. */
export const repoRoot = resolve(here, "../../../..");

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

/** The savepointd binary: $SAVEPOINTD, else bin/savepointd of the repository. */
export function savepointd(): string {
  const p = process.env.SAVEPOINTD || join(repoRoot, "bin", "savepointd");
  if (!existsSync(p)) throw new Error(`${p} does not exist: build it with 'go build -o bin/ ./cmd/savepointd' (or set SAVEPOINTD).`);
  return p;
}

/** A savepointd child process whose address stays the same across kill and restart. */
export class Daemon {
  readonly dir = mkdtempSync(join(tmpdir(), "spa"));
  readonly addr = "unix:" + join(this.dir, "s.sock");
  stderr = "";
  #proc: ChildProcess | undefined;
  #exited: Promise<unknown> = Promise.resolve();

  static async start(): Promise<Daemon> {
    const d = new Daemon();
    await d.restart();
    return d;
  }

  /** Starts the process (again) and waits until it answers. */
  async restart(): Promise<void> {
    const p = spawn(savepointd(), ["--data-dir", join(this.dir, "data"), "--listen", this.addr], { stdio: ["ignore", "ignore", "pipe"] });
    live.add(p);
    p.stderr!.on("data", (b: Buffer) => (this.stderr += b.toString()));
    this.#exited = new Promise((res) => p.on("exit", () => (live.delete(p), res(undefined))));
    this.#proc = p;
    const deadline = Date.now() + 20_000;
    for (;;) {
      const c = await dial(this.addr);
      try {
        await c.raw.getServerInfo({}, { deadline: Date.now() + 1000 });
        return;
      } catch (err) {
        if (p.exitCode !== null || Date.now() > deadline) throw new Error(`savepointd did not start: ${String(err)}\n${this.stderr}`);
      } finally {
        c.close();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL, and waits for the exit. */
  async kill(): Promise<void> {
    this.#proc?.kill("SIGKILL");
    await this.#exited;
  }

  async close(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The outcome of a worker process. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs dist/tests/<script> in a new node process with args and env, to its exit. */
export function runNode(script: string, args: string[], env: Record<string, string> = {}): Promise<Exit> {
  const p = spawn(process.execPath, [join(here, script), ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  live.add(p);
  let stdout = "";
  let stderr = "";
  p.stdout!.on("data", (b: Buffer) => (stdout += b.toString()));
  p.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => p.kill("SIGKILL"), 60_000);
  return new Promise((res) =>
    p.on("close", (code, signal) => {
      clearTimeout(timer);
      live.delete(p);
      res({ code, signal, stdout, stderr });
    }),
  );
}
