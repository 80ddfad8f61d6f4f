/**
 * CallStream: the client sends its unary calls on one stream when the
 * daemon serves it and unary when it answers UNIMPLEMENTED (savepointd
 * --no-call-stream), with the unary answers and errors; a daemon restart
 * loses nothing acknowledged, and a call left unanswered by a break is
 * retried only when its RPC allows.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Client, dial, SavepointError } from "../index.js";
import { CallStream } from "../stream.js";
import { Daemon } from "./daemon.js";

let on: Daemon;
let off: Daemon;
before(async () => {
  [on, off] = await Promise.all([Daemon.start(), Daemon.start(["--no-call-stream"])]);
});
after(async () => {
  await Promise.all([on.close(), off.close()]);
});

/** Counts the tries that went on a CallStream (answered or failed there), of every client, until the file's tests end. */
function countStream(c: Client): { n: number } {
  void c;
  const count = { n: 0 };
  const proto = CallStream.prototype;
  const orig = proto.call;
  proto.call = async function (this: CallStream, ...a: Parameters<CallStream["call"]>) {
    const r = orig.apply(this, a);
    const supported = this.supported;
    try {
      return await r;
    } finally {
      if (supported && this.supported) count.n++;
    }
  } as CallStream["call"];
  after(() => {
    proto.call = orig;
  });
  return count;
}

async function life(c: Client, id: string): Promise<unknown[]> {
  const out: unknown[] = [];
  const s = await c.start(id, "t", { replace: true });
  await s.save({ task: "t2" });
  out.push([s.revision, s.epoch]);
  const s2 = await c.resume(id);
  out.push([s2.revision, s2.epoch]);
  try {
    await s.save({ task: "late" });
  } catch (e) {
    out.push([(e as SavepointError).constructor.name, (e as SavepointError).reason, (e as SavepointError).code]);
  }
  try {
    await c.raw.saveCheckpoint({ sessionId: id, requestId: "nope" });
  } catch (e) {
    out.push([(e as SavepointError).reason, (e as SavepointError).message, (e as SavepointError).metadata]);
  }
  try {
    await c.resume(id + "-missing");
  } catch (e) {
    out.push([(e as SavepointError).reason, (e as SavepointError).code]);
  }
  const many = await Promise.all(Array.from({ length: 20 }, () => c.raw.getSession({ sessionId: id })));
  out.push(many.map((g) => g.checkpoint?.revision));
  return out;
}

test("calls go on the stream when it is served, unary when not, with the same answers", async () => {
  const count = countStream(await dial(on.addr, { callStream: false })); // installs the counter
  const a = await dial(on.addr);
  const b = await dial(off.addr);
  try {
    const before = count.n;
    const got = await life(a, "ts-cs");
    const streamed = count.n - before;
    const gotB = await life(b, "ts-cs");
    assert.deepEqual(got, gotB);
    assert.equal((got[2] as unknown[])[1], "SESSION_FENCED");
    assert.equal((got[3] as unknown[])[0], "INVALID_REQUEST_ID");
    assert.equal((got[4] as unknown[])[0], "SESSION_NOT_FOUND");
    assert.ok(streamed >= 25, `only ${streamed} calls went on the stream`);
    assert.equal(count.n - before - streamed, 0, "the --no-call-stream daemon's calls were counted on a stream");
    assert.ok((await a.raw.getServerInfo({})).callStreamMaxInFlight > 0);
    assert.equal((await b.raw.getServerInfo({})).callStreamMaxInFlight, 0);
  } finally {
    a.close();
    b.close();
  }
});

test("a daemon restart loses nothing acknowledged; an unsafe call left unanswered is not sent again", async () => {
  const d = await Daemon.start();
  const c = await dial(d.addr);
  try {
    const s = await c.start("ts-rs", "t", { replace: true });
    for (let i = 0; i < 10; i++) await s.save({ task: `t${i}` });
    await d.kill();
    await d.restart();
    await s.save({ task: "after" }); // on a new stream: a save with a request id is retried
    const r = await c.raw.getSession({ sessionId: "ts-rs" });
    assert.equal(r.checkpoint?.revision, 12n);
    assert.equal(r.checkpoint?.task, "after");

    // A DeleteSession in flight when the daemon dies fails UNAVAILABLE and
    // is not sent again (IDEMPOTENCY_UNKNOWN): the session is still there.
    const proto = CallStream.prototype;
    const orig = proto.call;
    let tries = 0;
    proto.call = async function (this: CallStream, method: string, ...rest: unknown[]) {
      if (method === "deleteSession") {
        tries++;
        await d.kill();
      }
      return orig.apply(this, [method, ...rest] as Parameters<CallStream["call"]>);
    } as CallStream["call"];
    try {
      await assert.rejects(c.raw.deleteSession({ sessionId: "ts-rs", epoch: r.checkpoint?.epoch ?? 0n }), (e: SavepointError) => e.code === 14);
    } finally {
      proto.call = orig;
    }
    assert.equal(tries, 1);
    await d.restart();
    assert.equal((await c.raw.getSession({ sessionId: "ts-rs" })).checkpoint?.revision, 12n);
  } finally {
    c.close();
    await d.close();
  }
});
