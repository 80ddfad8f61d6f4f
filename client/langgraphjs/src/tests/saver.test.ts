/**
 * SavepointSaver beyond the validation suite: values over the daemon's
 * request limit (UploadCheckpoint, UploadWrites), and the first call after
 * a daemon outage.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Checkpoint, emptyCheckpoint, INTERRUPT, uuid6 } from "@langchain/langgraph-checkpoint";

import { InvalidArgumentError } from "@savepoint-dev/client";

import { SavepointSaver } from "../index.js";
import { type Daemon, haltDaemon, startDaemon, stopDaemon } from "./initializer.js";

const LIMIT = 1 << 20; // the daemon's --max-request-bytes in these tests
const FLAGS = ["--max-request-bytes", String(LIMIT), "--max-message-bytes", String(LIMIT / 4), "--max-state-bytes", String(LIMIT / 4)];
let d: Daemon;

before(async () => {
  d = await startDaemon(FLAGS);
});
after(async () => {
  await stopDaemon(d);
});

function checkpoint(i: number, values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(i), channel_values: values, channel_versions: versions };
}

test("new SavepointSaver() resolves the address as every client does ($SAVEPOINT_ADDR)", async () => {
  const saved = process.env.SAVEPOINT_ADDR;
  process.env.SAVEPOINT_ADDR = d.addr;
  try {
    const saver = new SavepointSaver();
    try {
      assert.equal(saver.address, d.addr);
      assert.equal(await saver.getTuple({ configurable: { thread_id: "nobody" } }), undefined);
    } finally {
      saver.close();
    }
  } finally {
    if (saved === undefined) delete process.env.SAVEPOINT_ADDR;
    else process.env.SAVEPOINT_ADDR = saved;
  }
});

test("a checkpoint over the daemon's request limit is uploaded in chunks and reads back whole", async () => {
  const saver = new SavepointSaver({ address: d.addr });
  try {
    const big = "x".repeat(3 * LIMIT); // three times what one request may carry
    const small = { n: 1 };
    const cp = checkpoint(1, { big, small }, { big: 1, small: 1 });
    const cfg = await saver.put(
      { configurable: { thread_id: "big", checkpoint_ns: "" } },
      cp,
      { source: "input", step: -1, parents: {} },
      { big: 1, small: 1 },
    );
    const t = await saver.getTuple(cfg);
    assert.equal(t?.checkpoint.id, cp.id);
    assert.equal((t?.checkpoint.channel_values.big as string).length, big.length);
    assert.equal(t?.checkpoint.channel_values.big, big);
    assert.deepEqual(t?.checkpoint.channel_values.small, small);
    const listed = [];
    for await (const x of saver.list({ configurable: { thread_id: "big" } })) listed.push(x);
    assert.equal(listed.length, 1);
    assert.equal(listed[0].checkpoint.channel_values.big, big);
  } finally {
    saver.close();
  }
});

test("writes over the request limit in all go in one UploadWrites and read back in order", async () => {
  const saver = new SavepointSaver({ address: d.addr });
  try {
    const cfg = await saver.put(
      { configurable: { thread_id: "writes", checkpoint_ns: "" } },
      checkpoint(2, {}, {}),
      { source: "loop", step: 0, parents: {} },
      {},
    );
    const values = ["a", "b", "c"].map((ch) => ch.repeat(LIMIT * 0.6));
    await saver.putWrites(cfg, values.map((v, i) => [`ch${i}`, v]), "task-1");
    const t = await saver.getTuple(cfg);
    assert.deepEqual(
      t?.pendingWrites?.map(([task, ch, v]) => [task, ch, (v as string).length, (v as string)[0]]),
      values.map((v, i) => ["task-1", `ch${i}`, v.length, v[0]]),
    );
  } finally {
    saver.close();
  }
});

test("an interrupt three times the request limit is uploaded, and a later interrupt of the task replaces it as PutWrites would", async () => {
  const saver = new SavepointSaver({ address: d.addr });
  try {
    const cfg = await saver.put(
      { configurable: { thread_id: "big-interrupt", checkpoint_ns: "" } },
      checkpoint(4, {}, {}),
      { source: "loop", step: 0, parents: {} },
      {},
    );
    const first = "q".repeat(3 * LIMIT) + "1";
    const second = "r".repeat(3 * LIMIT) + "2";
    await saver.putWrites(cfg, [[INTERRUPT, first]], "task-ask");
    const t1 = await saver.getTuple(cfg);
    assert.equal(t1?.pendingWrites?.length, 1);
    assert.ok(t1?.pendingWrites?.[0][2] === first, "the interrupt reads back whole");
    await saver.putWrites(cfg, [[INTERRUPT, second]], "task-ask");
    const t2 = await saver.getTuple(cfg);
    assert.deepEqual(
      t2?.pendingWrites?.map(([task, ch, v]) => [task, ch, (v as string).length, (v as string).at(-1)]),
      [["task-ask", INTERRUPT, second.length, "2"]],
    );
  } finally {
    saver.close();
  }
});

test("an upload the daemon refuses at its start fails with the daemon's reason, after which the saver still works", async () => {
  const saver = new SavepointSaver({ address: d.addr });
  try {
    const cfg = { configurable: { thread_id: "refused", checkpoint_ns: "", checkpoint_id: uuid6(5) } };
    // 20 chunks, more than grpc-js queues before it asks the saver to wait: the refusal arrives while the saver is still sending.
    const big = "z".repeat(20 * LIMIT);
    await assert.rejects(saver.putWrites(cfg, [["big", big]], ""), (err: Error & { reason?: string }) => {
      assert.ok(err instanceof InvalidArgumentError, `${err.name}: ${err.message}`);
      assert.equal(err.reason, "INVALID_GRAPH_KEY");
      return true;
    });
    await saver.putWrites(cfg, [["big", big]], "task-1"); // the same upload with a task id is stored
  } finally {
    saver.close();
  }
});

test("the first call after a 5 s outage succeeds: the saver waits for the reconnect (a control without the wait fails)", async (t) => {
  // No retries in either, so that only the wait for the connection differs.
  const noRetry = { maxAttempts: 1, initialBackoffMs: 0, maxBackoffMs: 0 };
  const waits = new SavepointSaver({ address: d.addr, retry: noRetry });
  const control = new SavepointSaver({ address: d.addr, retry: noRetry, reconnectWaitMs: 0 });
  const cfg = { configurable: { thread_id: "outage", checkpoint_ns: "" } };
  const outcome = (p: Promise<unknown>) => p.then(() => true as const, (e: Error) => e);
  let controlFailures = 0;
  const repeats = 3;
  try {
    await waits.put(cfg, checkpoint(3, { v: 1 }, { v: 1 }), { source: "input", step: -1, parents: {} }, { v: 1 });
    for (const s of [waits, control]) assert.ok(await s.getTuple(cfg));
    for (let i = 0; i < repeats; i++) {
      await haltDaemon(d);
      // Both channels keep trying to connect during the outage, as an agent calling then makes them.
      const down = AbortSignal.timeout(5000);
      await Promise.all([waits, control].map((s) => assert.rejects(s.waitReady(down))));
      d = await startDaemon(FLAGS, d.dir);
      const [w, c] = await Promise.all([outcome(waits.getTuple(cfg)), outcome(control.getTuple(cfg))]);
      assert.equal(w, true, `repeat ${i + 1}: the first call with the wait failed: ${w === true ? "" : w.message}`);
      if (c !== true) controlFailures++;
    }
    t.diagnostic(`the control failed ${controlFailures} of ${repeats} first calls; the saver with the wait 0`);
    assert.ok(controlFailures > 0, `the control (reconnectWaitMs 0) never failed in ${repeats} outages: the test shows nothing`);
  } finally {
    waits.close();
    control.close();
  }
});
