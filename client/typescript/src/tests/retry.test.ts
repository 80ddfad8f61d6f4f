import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  type Client,
  consoleLogger,
  DEFAULT_RETRY_POLICY,
  dial,
  EffectClass,
  type Message,
  type Method,
  retrySafe,
  SessionFencedError,
  unaryMethods,
  UnavailableError,
} from "../index.js";
import { GraphCheckpointServiceService } from "../gen/savepoint/v1/graph.js";
import { SavepointServiceService } from "../gen/savepoint/v1/savepoint.js";
import { RETRY_RULES } from "../retry_rules.js";
import { Daemon } from "./daemon.js";
import { FaultProxy } from "./proxy.js";

const quiet = consoleLogger("error");
const fast = { maxAttempts: 5, initialBackoffMs: 1, maxBackoffMs: 2 };
const prompt: Message = { role: "user", contentJson: '"go"' };
const assistant: Message = { role: "assistant", contentJson: '[{"type":"tool_use","id":"t1","name":"write_report","input":{}}]' };
const call = { toolUseId: "t1", name: "write_report", effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT };
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let d: Daemon;
let p: FaultProxy;
let direct: Client;

before(async () => {
  d = await Daemon.start();
  p = await FaultProxy.start(d.addr);
  direct = await dial(d.addr, { logger: quiet });
});
after(async () => {
  direct.close();
  await p.close();
  await d.close();
});

test("ResolveThreadEffect is retry-safe only with a request id, as ResolveEffect", () => {
  const path = "/savepoint.v1.GraphCheckpointService/ResolveThreadEffect";
  assert.equal(retrySafe(path, { requestId: "00000000-0000-4000-8000-000000000001" }), true);
  assert.equal(retrySafe(path, { requestId: "" }), false);
  assert.equal(retrySafe(path, undefined), false);
});

test("retrySafe, read from the proto, is the table the clients kept by hand", () => {
  const want: Record<Method, boolean> = {
    saveCheckpoint: true, // with a request id; see below
    beginEffect: true,
    recordEffect: true,
    resume: true,
    reconcile: true,
    getSession: true,
    listMessages: true,
    listSessions: true,
    deleteSession: false,
    verify: false,
    getServerInfo: false,
    completeSession: true, // with a request id, as a save
    listEffects: true,
    forkSession: true, // with a request id
    rewindSession: true, // with a request id
    resolveEffect: true, // with a request id, as the Go client always did
    approveEffect: true, // with a request id, as resolveEffect
  };
  assert.ok(!(unaryMethods as string[]).includes("backup"), "backup streams: the raw client does not wrap it");
  for (const m of unaryMethods) {
    assert.equal(retrySafe(SavepointServiceService[m].path, { requestId: "r" }), want[m], m);
  }
  assert.equal(retrySafe(SavepointServiceService.saveCheckpoint.path, { requestId: "" }), false);
  assert.equal(retrySafe(SavepointServiceService.saveCheckpoint.path, {}), false);
  assert.equal(retrySafe(SavepointServiceService.completeSession.path, { requestId: "" }), false);
  assert.equal(retrySafe("/savepoint.v1.SavepointService/SomethingNew", {}), false);
});

test("every RPC declares its retry safety in the proto", () => {
  // An RPC added without option idempotency_level is "undeclared" in the
  // table make generate writes, or missing from a stale one.
  const paths = [...Object.values(SavepointServiceService), ...Object.values(GraphCheckpointServiceService)].map((d) => d.path);
  assert.ok(paths.length >= 30, `only ${paths.length} RPCs`);
  for (const p of paths) {
    assert.ok(RETRY_RULES[p] !== undefined && RETRY_RULES[p] !== "undeclared", `${p} declares no idempotency_level (${RETRY_RULES[p]})`);
  }
  assert.deepEqual(Object.keys(RETRY_RULES).sort(), [...paths].sort(), "retry_rules.ts is stale: make generate");
});

test("calls that failed with UNAVAILABLE are retried exactly when retrySafe says", async () => {
  const c = await dial(p.addr, { logger: quiet, retry: fast });
  try {
    const s = await c.start("retry-table", "t", { messages: [prompt] });
    await s.pointA(assistant, [call]);
    const requests: { [M in Method]?: () => Promise<unknown> } = {
      saveCheckpoint: () => c.raw.saveCheckpoint({ sessionId: "retry-table", requestId: "" }),
      beginEffect: () => c.raw.beginEffect({ sessionId: "retry-table", toolUseId: "t1", epoch: s.epoch }),
      recordEffect: () => c.raw.recordEffect({ sessionId: "retry-table", toolUseId: "t1", output: "x" }),
      resume: () => c.raw.resume({ sessionId: "retry-table" }),
      reconcile: () => c.raw.reconcile({ sessionId: "retry-table" }),
      getSession: () => c.raw.getSession({ sessionId: "retry-table" }),
      listMessages: () => c.raw.listMessages({ sessionId: "retry-table" }),
      listSessions: () => c.raw.listSessions({}),
      deleteSession: () => c.raw.deleteSession({ sessionId: "nobody", epoch: 1n }),
      verify: () => c.raw.verify({}),
      getServerInfo: () => c.raw.getServerInfo({}),
      listEffects: () => c.raw.listEffects({ sessionId: "retry-table" }),
    };
    for (const m of Object.keys(requests) as Method[]) {
      const safe = retrySafe(SavepointServiceService[m].path, {}) || m === "saveCheckpoint";
      // Always failing: a safe call is tried maxAttempts times, any other once.
      p.faults[m] = { before: 100 };
      let n = p.calls(m).length;
      await assert.rejects(requests[m]!(), UnavailableError, m);
      const tries = p.calls(m).length - n;
      const wantTries = m === "saveCheckpoint" ? 1 : safe ? fast.maxAttempts : 1; // a save without request id is not safe
      assert.equal(tries, wantTries, `${m}: ${tries} tries, want ${wantTries}`);
      // Failing twice, then answered: a safe call succeeds on the third try.
      p.faults[m] = { before: 2 };
      n = p.calls(m).length;
      const ok = m !== "saveCheckpoint" && safe;
      if (ok) {
        await requests[m]!();
        assert.equal(p.calls(m).length - n, 3, m);
      } else {
        await assert.rejects(requests[m]!(), UnavailableError, m);
      }
      p.faults[m] = {};
    }
    // A failure that is not UNAVAILABLE is never retried.
    const n = p.calls("beginEffect").length;
    await assert.rejects(c.raw.beginEffect({ sessionId: "retry-table", toolUseId: "t1", epoch: 999n }), SessionFencedError);
    assert.equal(p.calls("beginEffect").length - n, 1);
  } finally {
    c.close();
  }
});

test("a save applied but answered UNAVAILABLE is retried with the same request id and applied once", async () => {
  const ops: [string, bigint, (c: Client, id: string) => Promise<unknown>][] = [
    ["start", 1n, (c, id) => c.start(id, "t", { messages: [prompt] })],
    ["pointA", 2n, async (c, id) => {
      const s = await c.start(id, "t", { messages: [prompt] });
      p.faults.saveCheckpoint = { after: 1 };
      await s.pointA(assistant, [call]);
      return s;
    }],
    ["pointB", 3n, async (c, id) => {
      const s = await c.start(id, "t", { messages: [prompt] });
      await s.pointA(assistant, [call]);
      const r = await s.runTool(call, () => "done");
      p.faults.saveCheckpoint = { after: 1 };
      await s.pointB([r]);
      return s;
    }],
    ["save", 3n, async (c, id) => {
      const s = await c.start(id, "t", { messages: [prompt] });
      await s.pointA(assistant, [call]);
      p.faults.saveCheckpoint = { after: 1 };
      await s.save({ tokensUsed: 42n });
      return s;
    }],
  ];
  const c = await dial(p.addr, { logger: quiet, retry: fast });
  try {
    for (const [name, wantRev, op] of ops) {
      const id = `retry-${name}`;
      if (name === "start") p.faults.saveCheckpoint = { after: 1 };
      const before = p.calls("saveCheckpoint").length;
      const s = (await op(c, id)) as { revision: bigint };
      const all = p.calls("saveCheckpoint");
      const last2 = all.slice(-2);
      assert.ok(all.length - before >= 2, name);
      const rid = last2[0].request.requestId as string;
      assert.match(rid, uuid, `${name}: the request id is a UUID`);
      assert.equal(last2[1].request.requestId, rid, `${name}: the retry carries the first try's request id`);
      assert.deepEqual({ ...last2[1].request }, { ...last2[0].request }, `${name}: the retry is the same request`);
      const g = await direct.raw.getSession({ sessionId: id });
      assert.equal(g.checkpoint!.revision, wantRev, `${name}: applied once`);
      assert.equal(s.revision, wantRev, name);
    }
  } finally {
    c.close();
  }
});

test("a save whose outcome stayed unknown keeps its request id when tried again; other saves get new ones", async () => {
  const c = await dial(p.addr, { logger: quiet, retry: { ...fast, maxAttempts: 1 } });
  try {
    const s = await c.start("retry-across", "t", { messages: [prompt] });
    const before = p.calls("saveCheckpoint").length;
    p.faults.saveCheckpoint = { after: 1 };
    const calls = [{ toolUseId: "t1", name: "read_notes", effectClass: EffectClass.EFFECT_CLASS_READ_ONLY }];
    await assert.rejects(s.pointA(assistant, calls), UnavailableError);
    assert.equal(s.revision, 1n, "a failed save changes nothing in the session");
    assert.equal(s.pending.length, 0);
    await s.pointA(assistant, calls);
    await s.save({ tokensUsed: 5n });
    const ids = p.calls("saveCheckpoint").slice(before).map((x) => x.request.requestId);
    assert.equal(ids.length, 3);
    assert.equal(ids[0], ids[1], "the repeated pointA reuses its request id");
    assert.notEqual(ids[2], ids[1], "a different save gets a new one");
    assert.equal((await direct.raw.getSession({ sessionId: "retry-across" })).checkpoint!.revision, 3n);
    assert.equal(s.revision, 3n);
  } finally {
    c.close();
  }
});

test("epochs and idempotency keys are passed as the Go client passes them", async () => {
  const c = await dial(p.addr, { logger: quiet, retry: fast });
  try {
    const s = await c.start("epochs", "t", { messages: [prompt] });
    const before = p.seen.length;
    const idem = { ...call, effectClass: EffectClass.EFFECT_CLASS_IDEMPOTENT };
    await s.pointA(assistant, [idem]);
    // The record is lost: the tool ran, begun, its outcome not in the ledger.
    p.faults.recordEffect = { before: 100 };
    const keys: string[] = [];
    const r = await s.runTool(idem, (key) => {
      keys.push(key);
      return "sent";
    });
    p.faults.recordEffect = {};
    assert.ok(r.ledgerError instanceof UnavailableError);
    const r2 = await c.resume("epochs");
    assert.equal(r2.epoch, s.epoch + 1n);
    const results = await r2.reconcile((_call, key) => {
      keys.push(key);
      return "sent";
    });
    assert.equal(results.length, 1);
    await r2.pointB(results);
    const seen = p.seen.slice(before).map((x) => [x.method, x.request.epoch, x.request.expectedRevision ?? "-"]);
    assert.deepEqual(
      seen.filter(([m]) => m === "saveCheckpoint" || m === "beginEffect"),
      [
        ["saveCheckpoint", s.epoch, 1n],
        ["beginEffect", s.epoch, "-"],
        ["beginEffect", r2.epoch, "-"],
        ["saveCheckpoint", r2.epoch, 2n],
      ],
    );
    // The pending tool use was begun, so the run after the resume repeats its key.
    assert.equal(keys.length, 2);
    assert.equal(keys[1], keys[0]);
    // recordEffect carries the pending tool use's name; the first (lost) one was tried maxAttempts times.
    const records = p.seen.slice(before).filter((x) => x.method === "recordEffect");
    assert.equal(records.length, fast.maxAttempts + 1);
    assert.ok(records.every((x) => x.request.name === "write_report" && x.request.output === "sent"));
  } finally {
    c.close();
  }
});

test("the default policy retries 5 times over about 1.5 s, then the daemon is back", async () => {
  const c = await dial(p.addr, { logger: quiet });
  try {
    p.faults.getServerInfo = {};
    p.faults.listSessions = { before: 4 };
    const n = p.calls("listSessions").length;
    const t0 = Date.now();
    await c.raw.listSessions({});
    const tries = p.calls("listSessions").slice(n);
    assert.equal(tries.length, 5);
    const gaps = tries.slice(1).map((x, i) => x.at - tries[i].at);
    for (const [i, want] of [100, 200, 400, 800].entries()) {
      assert.ok(gaps[i] >= want * 0.8 - 5, `retry ${i + 1} after ${gaps[i]} ms, want at least ${want * 0.8} ms`);
    }
    assert.ok(Date.now() - t0 >= 1200, "about 1.5 s of backoff in all");
    // Canceling stops the retries.
    p.faults.listSessions = { before: 100 };
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 150);
    const m = p.calls("listSessions").length;
    await assert.rejects(c.raw.listSessions({}, { signal: ac.signal }), UnavailableError);
    assert.ok(p.calls("listSessions").length - m <= 3);
    p.faults.listSessions = {};
  } finally {
    c.close();
  }
});

test("a retry budget keeps a retry-safe call going through a failover past maxAttempts; without one it gives up", async () => {
  assert.ok((DEFAULT_RETRY_POLICY.budgetMs ?? 0) >= 8300, "the default budget covers make failover's longest time without a writable host (8.3 s)");
  const policy = { maxAttempts: 2, initialBackoffMs: 20, maxBackoffMs: 50 };
  const withBudget = await dial(p.addr, { logger: quiet, retry: { ...policy, budgetMs: 3000 } });
  const without = await dial(p.addr, { logger: quiet, retry: policy });
  try {
    p.faults.getServerInfo = {};
    // Failing 15 times (about 0.75 s of retries): within the budget.
    p.faults.listSessions = { before: 15 };
    let n = p.calls("listSessions").length;
    await withBudget.raw.listSessions({});
    assert.equal(p.calls("listSessions").length - n, 16);
    p.faults.listSessions = { before: 15 };
    n = p.calls("listSessions").length;
    await assert.rejects(without.raw.listSessions({}), UnavailableError);
    assert.equal(p.calls("listSessions").length - n, 2);
    // Always failing: the budget ends the retries after about 3 s.
    p.faults.listSessions = { before: 1000 };
    const t0 = Date.now();
    await assert.rejects(withBudget.raw.listSessions({}), UnavailableError);
    const took = Date.now() - t0;
    assert.ok(took >= 2500 && took < 6000, `gave up after ${took} ms, want about 3000`);
    // A call that is not retry-safe is tried once, budget or not.
    p.faults.deleteSession = { before: 1000 };
    n = p.calls("deleteSession").length;
    await assert.rejects(withBudget.raw.deleteSession({ sessionId: "nobody", epoch: 1n }), UnavailableError);
    assert.equal(p.calls("deleteSession").length - n, 1);
  } finally {
    p.faults.listSessions = {};
    p.faults.deleteSession = {};
    withBudget.close();
    without.close();
  }
});
