// savepointd started on demand (src/autostart.ts), each case in client
// processes of their own with a temporary home, as the Go
// (client/autostart_test.go) and Python (tests/test_autostart.py) clients
// are tested: nothing listening, a stale socket, a daemon killed between
// two calls, racing clients, SAVEPOINT_AUTOSTART=0, an explicit address, a
// daemon that fails to start, and no savepointd to start.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve, dirname } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { binary, shortTempDir } from "./daemon.js";

const index = pathToFileURL(resolve(dirname(fileURLToPath(import.meta.url)), "../index.js")).href;

// A client process: dials with no address, prints the daemon's pid; with
// argv "kill" kills that daemon and calls again (listSessions, retried).
const HELPER = `
import { dial } from ${JSON.stringify(index)};
try {
  const c = await dial();
  for (let i = 0; i < 2; i++) {
    if (i === 1) await c.raw.listSessions({});
    const info = await c.raw.getServerInfo({});
    console.log(\`pid \${info.pid} on-demand \${info.startedOnDemand}\`);
    if (process.argv[2] !== "kill") break;
    process.kill(info.pid, "SIGKILL");
    for (;;) { try { process.kill(info.pid, 0); } catch { break; } await new Promise((r) => setTimeout(r, 10)); }
  }
  c.close();
} catch (e) {
  console.log("error: " + e.name + ": " + String(e.message).replaceAll("\\n", " | "));
}
`;

const STARTED = "savepoint: started savepointd on demand at unix:";
const seen = new Set<number>();
const homes: string[] = [];
after(() => {
  for (const pid of seen) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

type Result = { pids: number[]; onDemand: boolean; err: string; stderr: string };

class User {
  readonly home = shortTempDir("spa");
  readonly state = join(this.home, "st", "savepoint");
  readonly env: NodeJS.ProcessEnv;
  readonly helper: string;
  constructor() {
    homes.push(this.home);
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (!k.startsWith("SAVEPOINT") && !["HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME"].includes(k)) env[k] = v;
    }
    this.env = { ...env, HOME: this.home, XDG_STATE_HOME: join(this.home, "st"), SAVEPOINTD_PATH: binary("SAVEPOINTD", "savepointd") };
    this.helper = join(this.home, "helper.mjs");
    writeFileSync(this.helper, HELPER);
  }

  run(args: string[] = [], extra: NodeJS.ProcessEnv = {}): Promise<Result> {
    return new Promise((resolve, reject) => {
      execFile(process.execPath, [this.helper, ...args], { env: { ...this.env, ...extra }, timeout: 120_000 }, (err, stdout, stderr) => {
        if (err) return reject(new Error(`helper: ${err.message}\n${stdout}\n${stderr}`));
        const r: Result = { pids: [], onDemand: false, err: "", stderr };
        // Every daemon started is killed at the end, even one no call reached.
        for (const m of stderr.matchAll(/\(pid (\d+)\)/g)) seen.add(Number(m[1]));
        for (const line of stdout.split("\n")) {
          const m = /^pid (\d+) on-demand (true|false)$/.exec(line);
          if (m) {
            r.pids.push(Number(m[1]));
            r.onDemand = m[2] === "true";
            seen.add(Number(m[1]));
          } else if (line.startsWith("error: ")) r.err += line;
        }
        if (r.pids.length === 0 && r.err === "") return reject(new Error(`helper printed nothing: ${stdout} ${stderr}`));
        resolve(r);
      });
    });
  }
}

function serving(r: Result): number {
  assert.ok(r.err === "" && r.pids.length > 0 && r.onDemand, JSON.stringify(r));
  return r.pids[r.pids.length - 1];
}

const count = (s: string, sub: string) => s.split(sub).length - 1;

test("nothing listening: the first client starts it and says so, the next finds it", async () => {
  const u = new User();
  const r = await u.run();
  const pid = serving(r);
  assert.equal(count(r.stderr, STARTED), 1, r.stderr);
  assert.ok(r.stderr.includes(join(u.state, "savepointd.log")), r.stderr);
  assert.equal(statSync(u.state).mode & 0o777, 0o700);
  assert.ok(statSync(join(u.state, "data")).isDirectory());
  const r2 = await u.run();
  assert.equal(serving(r2), pid);
  assert.equal(r2.stderr, "");
});

test("a stale socket left by a killed daemon", async () => {
  const u = new User();
  const pid = serving(await u.run());
  process.kill(pid, "SIGKILL");
  while (existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/status`, "utf8").includes("zombie")) await new Promise((r) => setTimeout(r, 10));
  assert.ok(existsSync(join(u.state, "savepoint.sock")));
  const r = await u.run();
  assert.notEqual(serving(r), pid);
  assert.ok(r.stderr.includes(STARTED));
});

test("a call after kill -9 starts it again", async () => {
  const r = await new User().run(["kill"]);
  assert.ok(r.err === "" && r.pids.length === 2 && r.pids[0] !== r.pids[1], JSON.stringify(r));
  assert.equal(count(r.stderr, STARTED), 2, r.stderr);
});

test("two racing clients end with one daemon", async () => {
  const u = new User();
  const rs = await Promise.all([u.run(), u.run(), u.run(), u.run()]);
  assert.equal(new Set(rs.map(serving)).size, 1);
  assert.equal(rs.reduce((n, r) => n + count(r.stderr, STARTED), 0), 1, rs.map((r) => r.stderr).join("\n"));
});

for (const [name, extra] of [
  ["SAVEPOINT_AUTOSTART=0", (_: User) => ({ SAVEPOINT_AUTOSTART: "0" })],
  ["an explicit address", (u: User) => ({ SAVEPOINT_ADDR: "unix:" + join(u.state, "savepoint.sock") })],
] as const) {
  test(`${name} starts nothing`, async () => {
    const u = new User();
    const r = await u.run([], extra(u));
    assert.ok(r.err.includes("UnavailableError") && r.pids.length === 0 && !r.stderr.includes(STARTED), JSON.stringify(r));
    assert.ok(!existsSync(u.state));
  });
}

test("a daemon that fails to start: the error quotes its log", async () => {
  const u = new User();
  mkdirSync(u.state, { recursive: true, mode: 0o700 });
  writeFileSync(join(u.state, "data"), "not a directory");
  const r = await u.run();
  assert.ok(r.err.includes("did not start") && r.err.includes("the last lines of its log") && r.pids.length === 0, JSON.stringify(r));
  const last = readFileSync(join(u.state, "savepointd.log"), "utf8").trim().split("\n").pop()!;
  assert.ok(last !== "" && r.err.includes(last), `${last}\n${r.err}`);
});

for (const failing of [false, true]) {
  test(`the daemon rotates its log (--log-file), ${failing ? "failing" : "serving"}`, async () => {
    // A log already at the 4 MiB limit becomes savepointd.log.1 at the
    // daemon's first line; a failing daemon's error quotes the new file.
    const u = new User();
    mkdirSync(u.state, { recursive: true, mode: 0o700 });
    const log = join(u.state, "savepointd.log");
    const old = "an old line\n".repeat(Math.floor((4 << 20) / 12) + 1);
    writeFileSync(log, old);
    if (failing) writeFileSync(join(u.state, "data"), "not a directory");
    const r = await u.run();
    if (failing) assert.ok(r.err.includes("did not start") && r.err.includes("the last lines of its log"), JSON.stringify(r));
    else serving(r);
    assert.equal(readFileSync(`${log}.1`, "utf8"), old);
    const cur = readFileSync(log, "utf8");
    assert.ok(cur !== "" && cur.length < 64 << 10 && !cur.includes("an old line"), `${cur.length} bytes`);
    if (failing) assert.ok(r.err.includes(cur.trim().split("\n").pop()!), r.err);
  });
}

test("no savepointd to start: the error says how to get one", async () => {
  const r = await new User().run([], { SAVEPOINTD_PATH: "", PATH: "/nonexistent" });
  assert.ok(r.err.includes("no savepointd was found") && r.err.includes("docs/install.md"), JSON.stringify(r));
});

test("the system's daemon answering: it is used and nothing is started", async () => {
  const { createServer } = await import("node:net");
  const { Autostart } = await import("../autostart.js");
  const d = shortTempDir("sps");
  homes.push(d);
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(join(d, "system.sock"), r));
  try {
    const a = new Autostart("unix:" + join(d, "st", "savepoint.sock"), join(d, "st"), "unix:" + join(d, "system.sock"));
    assert.equal(await a.ensure(), "unix:" + join(d, "system.sock"));
    assert.ok(!existsSync(join(d, "st")));
  } finally {
    srv.close();
  }
});
