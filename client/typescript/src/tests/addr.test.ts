import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  DEFAULT_RETRY_POLICY,
  defaultAddr,
  dial,
  parseAddr,
  retryBackoff,
  stateDir,
  tlsFromEnv,
  UnavailableError,
} from "../index.js";
import { grpcTarget } from "../addr.js";
import { sentence } from "../errors.js";

// The address cases every parser shares with savepointd and the Go client.
type AddrCases = {
  parse: (
    | { input: string; ok: true; want: { network: string; address: string; host?: string; port?: string } }
    | { input: string; ok: false; error: string }
  )[];
  default: { name: string; env: Record<string, string>; want: string }[];
  state: { name: string; env: Record<string, string>; want: string }[];
};
const cases: AddrCases = JSON.parse(
  readFileSync(fileURLToPath(new URL("../../../../internal/addr/testdata/addresses.json", import.meta.url)), "utf8"),
);

test("defaultAddr resolves as the daemon and the Go client do (internal/addr/testdata/addresses.json)", () => {
  assert.ok(cases.default.length > 0);
  for (const c of cases.default) assert.equal(defaultAddr(c.env), c.want, c.name);
});

test("stateDir resolves as internal/addr's StateDir", () => {
  assert.ok(cases.state.length > 0);
  for (const c of cases.state) assert.equal(stateDir(c.env), c.want, c.name);
});

test("parseAddr accepts and refuses what internal/addr does, with the same errors", () => {
  assert.ok(cases.parse.length > 0);
  for (const c of cases.parse) {
    const name = JSON.stringify(c.input);
    if (!c.ok) {
      // The shared text, as a full sentence.
      assert.throws(() => parseAddr(c.input), { message: "savepoint: " + sentence(c.error) }, name);
      continue;
    }
    const ep = parseAddr(c.input);
    if (c.want.network === "unix") assert.deepEqual(ep, { network: "unix", path: c.want.address }, name);
    else assert.deepEqual(ep, { network: "tcp", host: c.want.host, port: c.want.port }, name);
  }
});

test("grpcTarget names each endpoint for grpc-js", () => {
  const targets: [string, string][] = [
    ["unix:/run/savepoint/savepoint.sock", "unix:/run/savepoint/savepoint.sock"],
    ["unix:///tmp/sp.sock", "unix:/tmp/sp.sock"],
    ["unix:/tmp/odd #%?.sock", "unix:/tmp/odd #%?.sock"],
    ["127.0.0.1:7070", "dns:127.0.0.1:7070"],
    ["localhost:7070", "dns:localhost:7070"],
    ["[::1]:7070", "ipv6:[::1]:7070"],
  ];
  for (const [addr, target] of targets) assert.equal(grpcTarget(parseAddr(addr)), target, addr);
});

test("dial refuses a bad address, and waitReady fails on a missing daemon", async () => {
  await assert.rejects(dial("nonsense"), /neither unix:PATH nor HOST:PORT/);
  const dir = mkdtempSync(join(tmpdir(), "sp"));
  const c0 = await dial(`unix:${dir}/none.sock`, { tls: false, reconnectWaitMs: 0 });
  // Without waitReady, dial does not wait: the first call reports the missing daemon.
  await assert.rejects(c0.raw.getServerInfo({}), UnavailableError);
  c0.close();
  await assert.rejects(dial(`unix:${dir}/none.sock`, { waitReady: true, signal: AbortSignal.timeout(300), tls: false }), UnavailableError);
});

test("tlsFromEnv reads the PEM files, CERT and KEY together", () => {
  assert.equal(tlsFromEnv({}), undefined);
  const dir = mkdtempSync(join(tmpdir(), "sptls"));
  for (const f of ["ca.pem", "c.pem", "k.pem"]) writeFileSync(join(dir, f), `${f}\n`);
  assert.deepEqual(tlsFromEnv({ SAVEPOINT_TLS_CA: join(dir, "ca.pem") }), { ca: Buffer.from("ca.pem\n"), cert: undefined, key: undefined });
  const both = tlsFromEnv({ SAVEPOINT_TLS_CERT: join(dir, "c.pem"), SAVEPOINT_TLS_KEY: join(dir, "k.pem") });
  assert.deepEqual(both, { ca: undefined, cert: Buffer.from("c.pem\n"), key: Buffer.from("k.pem\n") });
  assert.throws(() => tlsFromEnv({ SAVEPOINT_TLS_CERT: join(dir, "c.pem") }), /must be set together/);
  assert.throws(() => tlsFromEnv({ SAVEPOINT_TLS_CA: join(dir, "missing.pem") }), /SAVEPOINT_TLS_CA=.*missing\.pem/);
});

test("the retry backoff doubles from 100 ms to 1 s, less up to 20% jitter, as the Go client's", () => {
  const want = [100, 200, 400, 800, 1000, 1000];
  for (const [i, d] of want.entries()) {
    for (let n = 0; n < 200; n++) {
      const got = retryBackoff(DEFAULT_RETRY_POLICY, i);
      assert.ok(got <= d && got >= d * 0.8, `retry ${i}: ${got} ms, want within [${d * 0.8}, ${d}]`);
    }
  }
  assert.equal(retryBackoff({ maxAttempts: 3, initialBackoffMs: 0, maxBackoffMs: 0 }, 2), 0);
  assert.deepEqual(DEFAULT_RETRY_POLICY, { maxAttempts: 5, initialBackoffMs: 100, maxBackoffMs: 1000, budgetMs: 10000 });
});
