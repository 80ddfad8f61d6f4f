/**
 * The saver's unary calls (PutCheckpoint, PutWrites, DeleteThread, the
 * thread ledger) go on a CallStream when the daemon serves it, and unary
 * when it answers UNIMPLEMENTED (savepointd --no-call-stream), with the
 * same results.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";

import { CallStream } from "@savepoint-dev/client";

import { SavepointSaver } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

let on: Daemon;
let off: Daemon;
before(async () => {
  [on, off] = await Promise.all([startDaemon(), startDaemon(["--no-call-stream"])]);
});
after(async () => {
  await Promise.all([stopDaemon(on), stopDaemon(off)]);
});

/** Runs a thread's life on a saver of addr; returns what it read back and how many calls were answered on a CallStream. */
async function life(addr: string): Promise<[unknown, number]> {
  const proto = CallStream.prototype;
  const orig = proto.call;
  let streamed = 0;
  proto.call = async function (this: CallStream, ...a: Parameters<CallStream["call"]>) {
    const r = await orig.apply(this, a);
    streamed++;
    return r;
  } as CallStream["call"];
  const saver = new SavepointSaver({ address: addr });
  try {
    const cfg = { configurable: { thread_id: "cs", checkpoint_ns: "" } };
    const cp = { ...emptyCheckpoint(), id: uuid6(1), channel_values: { messages: ["hi"] }, channel_versions: { messages: 1 } };
    const stored = await saver.put(cfg, cp, { source: "input", step: 1, parents: {} }, { messages: 1 });
    await saver.putWrites(stored, [["messages", "w"]], "task-1");
    const got = await saver.getTuple(stored);
    await saver.deleteThread("cs");
    const gone = await saver.getTuple(stored);
    return [[got?.checkpoint.channel_values, got?.pendingWrites, gone], streamed];
  } finally {
    saver.close();
    proto.call = orig;
  }
}

test("the saver's calls go on the stream when it is served and unary when not, with the same results", async () => {
  const [a, streamedA] = await life(on.addr);
  const [b, streamedB] = await life(off.addr);
  assert.deepEqual(a, b);
  assert.deepEqual((a as unknown[])[0], { messages: ["hi"] });
  assert.ok(streamedA >= 3, `${streamedA} calls on the stream: want put, putWrites and deleteThread (and GetServerInfo, asked by a client of its own)`);
  assert.equal(streamedB, 0);
});
