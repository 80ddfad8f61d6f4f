import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import {
  consoleLogger,
  Decision,
  dial,
  EffectClass,
  type Message,
  type ToolUse,
  UnavailableError,
} from "../index.js";
import { REPORT_TEXT } from "../demo/model.js";
import { countWrites, NOTES_FILE, SAMPLE_NOTES } from "../demo/tools.js";
import { binary, Daemon, describe as show, shortTempDir, startDemo } from "./daemon.js";
import { FaultProxy } from "./proxy.js";

const quiet = consoleLogger("error");
let d: Daemon;

before(async () => {
  // A small response budget, so that a modest history and a few outputs page.
  d = await Daemon.start(["--max-state-bytes", "4096", "--response-budget-bytes", "200000"]);
});
after(async () => {
  await d.close();
});

function assistantFor(...calls: ToolUse[]): Message {
  return { role: "assistant", contentJson: JSON.stringify(calls.map((u) => ({ type: "tool_use", id: u.toolUseId, name: u.name, input: {} }))) };
}

test("resume pages through a large history", async () => {
  const c = await dial(d.addr, { logger: quiet });
  try {
    const msgs: Message[] = Array.from({ length: 150 }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      contentJson: JSON.stringify(`message ${i} ` + "x".repeat(5000)),
    }));
    const s = await c.start("paged", "a long task", { messages: msgs.slice(0, 100) });
    await s.save({ append: msgs.slice(100) });
    const first = await c.raw.getSession({ sessionId: "paged" });
    assert.ok(first.nextPageToken !== "", "the history does not fit one response");
    assert.ok(first.checkpoint!.messages.length < 60, `first page holds ${first.checkpoint!.messages.length}`);
    const r = await c.resume("paged");
    assert.equal(r.messageCount, 150n);
    assert.deepEqual(r.messages, msgs);
  } finally {
    c.close();
  }
});

test("reconcile pages through large recorded outputs", async () => {
  const c = await dial(d.addr, { logger: quiet });
  try {
    const calls: ToolUse[] = ["o1", "o2", "o3"].map((id) => ({ toolUseId: id, name: "fetch", effectClass: EffectClass.EFFECT_CLASS_READ_ONLY }));
    const s = await c.start("paged-reconcile", "fetch three pages", {});
    await s.pointA(assistantFor(...calls), calls);
    const big = (id: string) => id + "o".repeat(150_000);
    for (const call of calls) {
      const r = await s.runTool(call, () => big(call.toolUseId));
      assert.equal(r.ledgerError, undefined);
    }
    const page = await c.raw.reconcile({ sessionId: "paged-reconcile" });
    assert.ok(page.nextPageToken !== "" && page.resolutions.length < 3, "the outputs do not fit one response");
    const r = await c.resume("paged-reconcile");
    let runs = 0;
    const results = await r.reconcile(() => {
      runs++;
      return "ran";
    });
    assert.equal(runs, 0, "every output was recorded: nothing runs");
    assert.deepEqual(
      results.map((x) => [x.toolUseId, Decision[x.decision], x.content === big(x.toolUseId)]),
      calls.map((u) => [u.toolUseId, "DECISION_REUSE", true]),
    );
    await r.pointB(results);
  } finally {
    c.close();
  }
});

test("kill -9 of the agent after the ledger write, then resume: a ledger hit, nothing runs again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spdemo"));
  writeFileSync(join(dir, NOTES_FILE), SAMPLE_NOTES);
  const { proc, done } = startDemo({ addr: d.addr, dir, session: "kill9", pause: "after-effect-write:3" });
  await new Promise<void>((res, rej) => {
    let out = "";
    proc.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      if (out.includes("[pause] ")) res();
    });
    proc.on("exit", () => rej(new Error(`the demo exited before pausing:\n${out}`)));
  });
  proc.kill("SIGKILL"); // a real kill, no simulated exit
  const r = await done;
  assert.equal(r.code, 137, show(r));
  assert.equal(countWrites(dir), 1);

  const c = await dial(d.addr, { logger: quiet });
  try {
    const s = await c.resume("kill9");
    assert.equal(s.turn, 3);
    assert.deepEqual(s.pending.map((p) => p.name), ["write_report"]);
    const results = await s.reconcile(() => {
      throw new Error("must not run again");
    });
    assert.deepEqual(results.map((x) => [Decision[x.decision], x.content]), [["DECISION_REUSE", `Wrote ${Buffer.byteLength(REPORT_TEXT)} bytes to report.txt`]]);
    await s.pointB(results);
    assert.equal(s.pending.length, 0);
    assert.equal(countWrites(dir), 1, "the report was written once");
  } finally {
    c.close();
  }
});

test("kill -9 of the daemon: every answered save survives, calls fail clearly while it is down", async () => {
  const c = await dial(d.addr, { logger: quiet, retry: { maxAttempts: 2, initialBackoffMs: 10, maxBackoffMs: 10 }, reconnectWaitMs: 0 });
  try {
    const calls: ToolUse[] = [{ toolUseId: "k1", name: "write_report" }];
    const s = await c.start("daemon-kill9", "t", { messages: [{ role: "user", contentJson: '"go"' }] });
    await s.pointA(assistantFor(...calls), calls);
    await d.kill();
    await assert.rejects(s.runTool(calls[0], () => "x"), (e: unknown) => e instanceof UnavailableError && /not run: BeginEffect/.test(e.message));
    await d.restart();
    // A new client reconnects once the daemon is back.
    const c2 = await dial(d.addr, { logger: quiet });
    const r = await c2.resume("daemon-kill9");
    assert.equal(r.revision, s.revision);
    assert.deepEqual(r.pending.map((p) => [p.toolUseId, p.effectClass]), [["k1", EffectClass.EFFECT_CLASS_SIDE_EFFECT]]);
    // BeginEffect failed, so the tool never started: reconcile runs it.
    const results = await r.reconcile(() => "written");
    assert.deepEqual(results.map((x) => Decision[x.decision]), ["DECISION_RUN"]);
    await r.pointB(results);
    c2.close();
  } finally {
    c.close();
  }
});

/** Makes a CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, with openssl. */
function certificates(): Record<string, string> | undefined {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  const dir = mkdtempSync(join(tmpdir(), "sptls"));
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  for (const ca of ["ca", "other-ca"]) {
    ssl("req", "-x509", ...key, "-keyout", f(`${ca}.key`), "-out", f(`${ca}.pem`), "-days", "1", "-subj", `/CN=${ca}`);
  }
  writeFileSync(f("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  writeFileSync(f("client.ext"), "extendedKeyUsage=clientAuth\n");
  for (const who of ["server", "client"]) {
    ssl("req", ...key, "-keyout", f(`${who}.key`), "-out", f(`${who}.csr`), "-subj", `/CN=${who}`);
    ssl("x509", "-req", "-in", f(`${who}.csr`), "-CA", f("ca.pem"), "-CAkey", f("ca.key"), "-CAcreateserial",
      "-out", f(`${who}.pem`), "-days", "1", "-extfile", f(`${who}.ext`));
  }
  return { ca: f("ca.pem"), otherCa: f("other-ca.pem"), serverCert: f("server.pem"), serverKey: f("server.key"),
    clientCert: f("client.pem"), clientKey: f("client.key") };
}

test("TLS from SAVEPOINT_TLS_CA, SAVEPOINT_TLS_CERT and SAVEPOINT_TLS_KEY, against a mutual-TLS server", async (t) => {
  const certs = certificates();
  if (!certs) {
    t.skip("openssl is not installed: cannot make test certificates");
    return;
  }
  const read = (p: string) => readFileSync(p);
  const p = await FaultProxy.start(d.addr, { cert: read(certs.serverCert), key: read(certs.serverKey), clientCa: read(certs.ca) });
  const saved = { ...process.env };
  const withEnv = async (env: Record<string, string>, f: () => Promise<void>) => {
    for (const k of ["SAVEPOINT_TLS_CA", "SAVEPOINT_TLS_CERT", "SAVEPOINT_TLS_KEY"]) delete process.env[k];
    Object.assign(process.env, env);
    try {
      await f();
    } finally {
      process.env = { ...saved };
    }
  };
  const noRetry = { maxAttempts: 1, initialBackoffMs: 0, maxBackoffMs: 0 };
  try {
    await withEnv({ SAVEPOINT_TLS_CA: certs.ca, SAVEPOINT_TLS_CERT: certs.clientCert, SAVEPOINT_TLS_KEY: certs.clientKey }, async () => {
      const c = await dial(p.addr, { logger: quiet });
      try {
        const s = await c.start("over-tls", "t", {});
        assert.equal(s.revision, 1n);
        assert.equal(p.calls("saveCheckpoint").length, 1, "the call went through the TLS server");
      } finally {
        c.close();
      }
    });
    const refused: [string, Record<string, string>][] = [
      ["no client certificate", { SAVEPOINT_TLS_CA: certs.ca }],
      ["a server certificate from another CA", { SAVEPOINT_TLS_CA: certs.otherCa, SAVEPOINT_TLS_CERT: certs.clientCert, SAVEPOINT_TLS_KEY: certs.clientKey }],
      ["plaintext", {}],
    ];
    for (const [why, env] of refused) {
      await withEnv(env, async () => {
        const c = await dial(p.addr, { logger: quiet, retry: noRetry, reconnectWaitMs: 0 });
        try {
          await assert.rejects(c.raw.listSessions({}), UnavailableError, why);
        } finally {
          c.close();
        }
      });
    }
    // Options win over the environment.
    const c = await dial(p.addr, {
      logger: quiet,
      tls: { ca: read(certs.ca), cert: read(certs.clientCert), key: read(certs.clientKey) },
    });
    try {
      assert.ok((await c.raw.listSessions({})).sessions.some((x) => x.sessionId === "over-tls"));
    } finally {
      c.close();
    }
  } finally {
    await p.close();
  }
});

/** A free TCP port on 127.0.0.1. */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((res) => srv.close(() => res()));
  return port;
}

test("mutual TLS against the real savepointd (--tls-cert, --tls-key, --tls-client-ca)", async (t) => {
  const certs = certificates();
  if (!certs) {
    t.skip("openssl is not installed: cannot make test certificates");
    return;
  }
  chmodSync(certs.serverKey, 0o600);
  const addr = `127.0.0.1:${await freePort()}`;
  const dir = shortTempDir();
  let stderr = "";
  const p = spawn(binary("SAVEPOINTD", "savepointd"), ["--data-dir", join(dir, "data"), "--listen", addr,
    "--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, "--tls-client-ca", certs.ca], { stdio: ["ignore", "ignore", "pipe"] });
  p.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  const noRetry = { maxAttempts: 1, initialBackoffMs: 0, maxBackoffMs: 0 };
  const tls = { ca: readFileSync(certs.ca), cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) };
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      assert.equal(p.exitCode, null, `savepointd exited:\n${stderr}`);
      const c = await dial(addr, { logger: quiet, retry: noRetry, reconnectWaitMs: 0, tls });
      try {
        const info = await c.raw.getServerInfo({});
        assert.equal(info.storeKind, "badger", "the daemon's own answer");
        break;
      } catch (err) {
        if (!(err instanceof UnavailableError) || Date.now() > deadline) throw err;
        await new Promise((res) => setTimeout(res, 50));
      } finally {
        c.close();
      }
    }
    const c = await dial(addr, { logger: quiet, tls });
    try {
      const s = await c.start("over-daemon-tls", "t", { messages: [{ role: "user", contentJson: '"hello"' }] });
      const again = await c.resume("over-daemon-tls");
      assert.deepEqual(again.messages, s.messages);
    } finally {
      c.close();
    }
    const bare = await dial(addr, { logger: quiet, retry: noRetry, reconnectWaitMs: 0, tls: { ca: tls.ca } });
    try {
      await assert.rejects(bare.raw.getServerInfo({}), UnavailableError, "no client certificate");
    } finally {
      bare.close();
    }
  } finally {
    p.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});
