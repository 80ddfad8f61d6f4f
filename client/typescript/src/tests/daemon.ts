/**
 * Test helpers: the real savepointd as a child process on a unix socket in a
 * short temporary directory, and the demo binaries.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { credentials, Metadata } from "@grpc/grpc-js";

import { HealthCheckResponse_ServingStatus, HealthClient } from "../gen/health/v1/health.js";

/** The repository root, from dist/tests/. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

/** The path of a binary from the environment variable env, else bin/name of the repository; it must exist. */
export function binary(env: string, name: string): string {
  const p = process.env[env] || join(repoRoot, "bin", name);
  if (!existsSync(p)) throw new Error(`${p} does not exist: build it with 'go build -o bin/ ./cmd/${name}' (or set ${env})`);
  return p;
}

/** The TypeScript demo, built next to these tests. */
export const tsDemo = resolve(dirname(fileURLToPath(import.meta.url)), "../demo.js");

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

/** A temporary directory short enough to hold a unix socket (the limit is about 107 bytes). */
export function shortTempDir(prefix = "sp"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A savepointd child process; its address stays the same across kill and restart. */
export class Daemon {
  readonly dir: string;
  readonly dataDir: string;
  readonly socket: string;
  readonly addr: string;
  stderr = "";
  #proc: ChildProcess | undefined;
  #exited: Promise<number | null> = Promise.resolve(null);

  private constructor(readonly args: string[], socketName: string) {
    this.dir = shortTempDir();
    this.dataDir = join(this.dir, "data");
    this.socket = join(this.dir, socketName);
    this.addr = "unix:" + this.socket;
  }

  /** Starts savepointd with a new data directory and extra flags, and waits until its health service says SERVING. */
  static async start(args: string[] = [], socketName = "s.sock"): Promise<Daemon> {
    const d = new Daemon(args, socketName);
    await d.restart();
    return d;
  }

  /** Starts the process again (after kill or stop) and waits until it serves. */
  async restart(): Promise<void> {
    const p = spawn(binary("SAVEPOINTD", "savepointd"), ["--data-dir", this.dataDir, "--listen", this.addr, ...this.args], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    live.add(p);
    this.stderr = "";
    p.stderr!.on("data", (b: Buffer) => (this.stderr += b.toString()));
    this.#exited = new Promise((res) =>
      p.on("exit", (code) => {
        live.delete(p);
        res(code);
      }),
    );
    this.#proc = p;
    await waitServing(this.socket, 20_000, () => p.exitCode !== null || p.signalCode !== null).catch((err: Error) => {
      throw new Error(`savepointd did not start: ${err.message}\nstderr:\n${this.stderr}`);
    });
  }

  /** SIGKILL, and waits for the exit. */
  async kill(): Promise<void> {
    this.#proc?.kill("SIGKILL");
    await this.#exited;
  }

  /** SIGTERM, and waits for the exit; returns the exit code. */
  async stop(): Promise<number | null> {
    this.#proc?.kill("SIGTERM");
    return this.#exited;
  }

  /** Kills the process and removes its directory. */
  async close(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls grpc.health.v1 on socket until it reports SERVING, timeoutMs pass, or exited() says the process is gone. */
export async function waitServing(socket: string, timeoutMs: number, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    // A new client each time: one would wait out gRPC's reconnect backoff after the first refusal.
    const c = new HealthClient("unix:" + socket, credentials.createInsecure());
    const ok = await new Promise<boolean>((res) =>
      c.check({ service: "" }, new Metadata(), { deadline: Date.now() + 1000 }, (err, resp) => {
        last = err ? err.message : `status ${resp.status}`;
        res(!err && resp.status === HealthCheckResponse_ServingStatus.SERVING);
      }),
    );
    c.close();
    if (ok) return;
    if (exited()) throw new Error("process exited");
    if (Date.now() > deadline) throw new Error(`not serving after ${timeoutMs} ms: ${last}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The outcome of one run of a demo. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function describe(r: RunResult): string {
  return `exit ${r.code}\nstdout:\n${r.stdout}stderr:\n${r.stderr}`;
}

/** One run of a demo (the TypeScript one unless go is set). */
export interface RunOptions {
  addr: string;
  dir: string;
  session: string;
  script?: string;
  resume?: boolean;
  /** CRASH_AFTER. */
  crash?: string;
  /** PAUSE_AFTER. */
  pause?: string;
  go?: boolean;
  env?: Record<string, string>;
  /** More arguments, after the others. */
  extra?: string[];
}

/** Runs a demo to its end and returns its exit code and output. */
export function runDemo(o: RunOptions): Promise<RunResult> {
  const { proc, done } = startDemo(o);
  proc.stdin!.end();
  return done;
}

/** Starts a demo; done settles when it exits. */
export function startDemo(o: RunOptions): { proc: ChildProcess; done: Promise<RunResult> } {
  const args = ["--addr", o.addr, "--workdir", o.dir, "--session", o.session, "--script", o.script ?? "seed"];
  if (o.resume) args.push("--resume");
  args.push(...(o.extra ?? []));
  const env = { ...process.env, CRASH_AFTER: o.crash ?? "", PAUSE_AFTER: o.pause ?? "", ...o.env };
  const proc = o.go
    ? spawn(binary("SAVEPOINT_DEMO_GO", "savepoint-demo"), args, { env })
    : spawn(process.execPath, [tsDemo, ...args], { env });
  live.add(proc);
  let stdout = "";
  let stderr = "";
  proc.stdout!.on("data", (b: Buffer) => (stdout += b.toString()));
  proc.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const done = new Promise<RunResult>((res) =>
    proc.on("close", (code, signal) => {
      clearTimeout(timer);
      live.delete(proc);
      res({ code: code ?? (signal === "SIGKILL" ? 137 : null), stdout, stderr });
    }),
  );
  return { proc, done };
}

/** Runs jobs at most n at a time. */
export async function pool<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, jobs.length) }, async () => {
      while (next < jobs.length) {
        const i = next++;
        results[i] = await jobs[i]();
      }
    }),
  );
  return results;
}
