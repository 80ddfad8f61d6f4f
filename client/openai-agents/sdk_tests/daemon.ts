/**
 * The project "savepoint"'s global setup: one savepointd ($SAVEPOINTD, else
 * the repository's bin/savepointd) on a unix socket in a short temporary
 * directory, its address in $SAVEPOINT_ADDR for the test workers; killed
 * and removed at the end, failing the run when no test saved a session on it.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { dial } from "@savepoint-dev/client";

export default async function setup(): Promise<() => Promise<void>> {
  const bin = process.env.SAVEPOINTD || resolve(dirname(fileURLToPath(import.meta.url)), "../../../bin/savepointd");
  if (!existsSync(bin)) throw new Error(`${bin} does not exist: build it with 'go build -o bin/ ./cmd/savepointd' (or set SAVEPOINTD).`);
  const dir = mkdtempSync(join(tmpdir(), "spjs"));
  const addr = `unix:${join(dir, "s.sock")}`;
  let stderr = "";
  const p = spawn(bin, ["--data-dir", join(dir, "data"), "--listen", addr], { stdio: ["ignore", "ignore", "pipe"] });
  p.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise((r) => p.on("exit", r));
  const deadline = Date.now() + 20_000;
  for (;;) {
    const c = await dial(addr);
    try {
      await c.raw.getServerInfo({}, { deadline: Date.now() + 1000 });
      break;
    } catch (err) {
      if (p.exitCode !== null || Date.now() > deadline) throw new Error(`savepointd did not start: ${String(err)}\n${stderr}`);
    } finally {
      c.close();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  process.env.SAVEPOINT_ADDR = addr;
  return async () => {
    // A run in which no test reached the daemon tested MemorySession, not SavepointSession.
    const c = await dial(addr);
    let sessions = 0;
    try {
      sessions = (await c.raw.listSessions({ pageSize: 1 })).sessions.length;
    } finally {
      c.close();
    }
    p.kill("SIGKILL");
    await exited;
    rmSync(dir, { recursive: true, force: true });
    if (sessions === 0) throw new Error("no test of the project 'savepoint' built a SavepointSession");
  };
}
