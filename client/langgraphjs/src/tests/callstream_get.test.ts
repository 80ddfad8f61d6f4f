/**
 * getTuple's GetCheckpoint goes on the CallStream when the daemon carries it
 * (GetServerInfo's call_stream_get_checkpoint), with the result and errors
 * of its own RPC, and as its own RPC otherwise: callStream false, a
 * --no-call-stream daemon, or a daemon that serves CallStream but does not
 * carry GetCheckpoint on it.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";

import { CallStream, graphPb, pb, SavepointError } from "@savepoint-dev/client";

import { SavepointSaver, type SaverOptions } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

let big: Daemon;
let off: Daemon;
before(async () => {
  [big, off] = await Promise.all([
    // A response budget of 160 KiB: a checkpoint of 240 KiB of values comes in two messages or more.
    startDaemon(["--response-budget-bytes", "163840", "--max-state-bytes", "16384"]),
    startDaemon(["--no-call-stream"]),
  ]);
});
after(async () => {
  await Promise.all([stopDaemon(big), stopDaemon(off)]);
});

/**
 * How GetCheckpoint went while spied: the messages of each call on the
 * CallStream (-1 for an error), how many went as their own RPC; how many of
 * the saver's unary calls the stream answered.
 */
interface Seen {
  streamed: number[];
  own: number;
  unaryOnStream: number;
}

/** Runs fn with CallStream.callStreamed, CallStream.call and the stub's own getCheckpoint spied. */
async function spied<T>(fn: () => Promise<T>): Promise<[T, Seen]> {
  const seen: Seen = { streamed: [], own: 0, unaryOnStream: 0 };
  const cs = CallStream.prototype;
  const origStreamed = cs.callStreamed;
  const origCall = cs.call;
  const stub = graphPb.GraphCheckpointServiceClient.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  const origGet = stub.getCheckpoint!;
  cs.callStreamed = async function (this: CallStream, ...a: Parameters<CallStream["callStreamed"]>) {
    const i = seen.streamed.push(-1) - 1; // -1: answered with an error
    const got = await origStreamed.apply(this, a);
    seen.streamed[i] = got.length;
    return got;
  } as CallStream["callStreamed"];
  cs.call = async function (this: CallStream, ...a: Parameters<CallStream["call"]>) {
    const got = await origCall.apply(this, a);
    // The saver's own calls, not the GetServerInfo of the client it dials to read the request limit.
    if (a[0] in graphPb.GraphCheckpointServiceService) seen.unaryOnStream++;
    return got;
  } as CallStream["call"];
  stub.getCheckpoint = function (this: unknown, ...a: unknown[]) {
    seen.own++;
    return origGet.apply(this, a);
  };
  try {
    return [await fn(), seen];
  } finally {
    cs.callStreamed = origStreamed;
    cs.call = origCall;
    stub.getCheckpoint = origGet;
  }
}

/** A checkpoint of thread th with 15 channels of 16 KiB strings each (240 KiB), put on saver. */
async function putBig(saver: SavepointSaver, th: string): Promise<RunnableConfig> {
  const values = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`ch${i}`, String.fromCharCode(97 + i).repeat(16 << 10)]));
  const versions = Object.fromEntries(Object.keys(values).map((k) => [k, 1]));
  const cp = { ...emptyCheckpoint(), id: uuid6(1), channel_values: values, channel_versions: versions };
  const cfg = { configurable: { thread_id: th, checkpoint_ns: "" } };
  const stored = await saver.put(cfg, cp, { source: "input", step: 1, parents: {} }, versions);
  await saver.putWrites(stored, [["ch0", "w"]], "task-1");
  return stored;
}

/** The saver's getTuple of cfg, or the class name and reason of its error. */
async function get(saver: SavepointSaver, cfg: RunnableConfig): Promise<unknown> {
  try {
    return await saver.getTuple(cfg);
  } catch (e) {
    return [(e as Error).constructor.name, (e as SavepointError).reason, (e as SavepointError).code];
  }
}

test("getTuple reads on the CallStream, with the own RPC's result: a checkpoint in several messages, none, a refusal", async () => {
  const stream = new SavepointSaver({ address: big.addr });
  const unary = new SavepointSaver({ address: big.addr, callStream: false });
  try {
    const stored = await putBig(stream, "big");
    const cases: [string, RunnableConfig][] = [
      ["a checkpoint of 240 KiB", stored],
      ["the latest", { configurable: { thread_id: "big", checkpoint_ns: "" } }],
      ["no such checkpoint", { configurable: { thread_id: "big", checkpoint_ns: "", checkpoint_id: uuid6(2) } }],
      ["no such thread", { configurable: { thread_id: "nobody" } }],
      ["a checkpoint_ns of 5000 bytes", { configurable: { thread_id: "big", checkpoint_ns: "n".repeat(5000) } }],
    ];
    for (const [name, cfg] of cases) {
      const [got, seenStream] = await spied(() => get(stream, cfg));
      const [want, seenUnary] = await spied(() => get(unary, cfg));
      assert.deepEqual(got, want, name);
      assert.equal(seenStream.own, 0, `${name}: GetCheckpoint went as its own RPC, not on the stream`);
      assert.equal(seenStream.streamed.length, 1, `${name}: ${seenStream.streamed.length} GetCheckpoint calls on the stream`);
      assert.deepEqual([seenUnary.own, seenUnary.streamed.length], [1, 0], `${name}: callStream false`);
      if (name === "a checkpoint of 240 KiB") {
        const tuple = got as Awaited<ReturnType<SavepointSaver["getTuple"]>>;
        assert.equal(tuple?.checkpoint.channel_values.ch14, "o".repeat(16 << 10));
        assert.deepEqual(tuple?.pendingWrites, [["task-1", "ch0", "w"]]);
        assert.ok(seenStream.streamed[0]! >= 2, `the checkpoint came in ${seenStream.streamed[0]} messages: want several`);
      }
      if (name.startsWith("no such")) assert.equal(got, undefined, name);
      if (name.startsWith("a checkpoint_ns")) {
        assert.deepEqual(got, ["InvalidArgumentError", "INVALID_GRAPH_KEY", 3], name);
        assert.deepEqual(seenStream.streamed, [-1], name);
      }
    }
  } finally {
    stream.close();
    unary.close();
  }
});

test("getTuple uses GetCheckpoint's own RPC unless the daemon carries it on the stream", async () => {
  // A daemon that serves CallStream but says call_stream_get_checkpoint
  // false (one from before it was carried): GetServerInfo's answer, as the
  // client decodes it, with the field forced false.
  const info = pb.SavepointServiceService.getServerInfo;
  const decode = info.responseDeserialize;
  const older = (b: Buffer) => ({ ...decode(b), callStreamGetCheckpoint: false });
  const cases: [string, string, SaverOptions, boolean, boolean][] = [
    // name, daemon, options, GetServerInfo forced to say false, want on the stream
    ["a daemon that carries it", big.addr, {}, false, true],
    ["callStream false", big.addr, { callStream: false }, false, false],
    ["a --no-call-stream daemon", off.addr, {}, false, false],
    ["call_stream_get_checkpoint false", big.addr, {}, true, false],
  ];
  for (const [name, addr, opts, forced, onStream] of cases) {
    if (forced) (info as { responseDeserialize: unknown }).responseDeserialize = older;
    const saver = new SavepointSaver({ address: addr, ...opts });
    try {
      const [got, seen] = await spied(async () => {
        const cfg = { configurable: { thread_id: `t-${name}`, checkpoint_ns: "" } };
        const cp = { ...emptyCheckpoint(), id: uuid6(1), channel_values: { v: name }, channel_versions: { v: 1 } };
        const stored = await saver.put(cfg, cp, { source: "input", step: 1, parents: {} }, { v: 1 });
        return [await saver.getTuple(stored), await saver.getTuple({ configurable: { thread_id: "none" } })];
      });
      assert.equal((got[0] as unknown as { checkpoint: { channel_values: { v: string } } }).checkpoint.channel_values.v, name);
      assert.equal(got[1], undefined, name);
      assert.deepEqual([seen.streamed.length, seen.own], onStream ? [2, 0] : [0, 2], `${name}: [on the stream, own RPC]`);
      // The unary calls (put) go on the stream whenever it is served.
      assert.equal(seen.unaryOnStream > 0, opts.callStream !== false && addr !== off.addr, `${name}: put on the stream`);
    } finally {
      saver.close();
      (info as { responseDeserialize: unknown }).responseDeserialize = decode;
    }
  }
});

test("a getTuple on the CallStream whose daemon is gone is retried on a new stream until the daemon is back", async () => {
  let d = await startDaemon();
  // No wait for the connection, so that the tries fail at once while the daemon is down and are retried.
  const saver = new SavepointSaver({ address: d.addr, reconnectWaitMs: 0 });
  try {
    const cfg = { configurable: { thread_id: "back", checkpoint_ns: "" } };
    const cp = { ...emptyCheckpoint(), id: uuid6(1), channel_values: { v: "kept" }, channel_versions: { v: 1 } };
    const stored = await saver.put(cfg, cp, { source: "input", step: 1, parents: {} }, { v: 1 });
    assert.ok(await saver.getTuple(stored)); // GetServerInfo asked, the stream open
    d.proc.kill("SIGKILL");
    await new Promise((r) => d.proc.once("exit", r));
    const [got, seen] = await spied(async () => {
      const pending = saver.getTuple(stored);
      await new Promise((r) => setTimeout(r, 300));
      d = await startDaemon([], d.dir);
      return pending;
    });
    assert.equal(got?.checkpoint.channel_values.v, "kept");
    assert.equal(seen.own, 0, "the retries went as GetCheckpoint's own RPC");
    assert.ok(seen.streamed.length >= 2 && seen.streamed[0] === -1 && seen.streamed.at(-1)! > 0, `tries on the stream: ${seen.streamed}`);
  } finally {
    saver.close();
    await stopDaemon(d);
  }
});

test("what the daemon carries is asked again once the stream broke (the daemon may have been replaced)", async () => {
  let d = await startDaemon();
  // The first daemon says call_stream_get_checkpoint false, as one from before it was carried.
  const info = pb.SavepointServiceService.getServerInfo;
  const decode = info.responseDeserialize;
  (info as { responseDeserialize: unknown }).responseDeserialize = (b: Buffer) => ({ ...decode(b), callStreamGetCheckpoint: false });
  const saver = new SavepointSaver({ address: d.addr, reconnectWaitMs: 0 });
  try {
    const cfg = { configurable: { thread_id: "replaced", checkpoint_ns: "" } };
    const cp = { ...emptyCheckpoint(), id: uuid6(1), channel_values: { v: "kept" }, channel_versions: { v: 1 } };
    const stored = await saver.put(cfg, cp, { source: "input", step: 1, parents: {} }, { v: 1 });
    const [, before] = await spied(() => saver.getTuple(stored));
    assert.deepEqual([before.streamed.length, before.own], [0, 1], "before the break: its own RPC");
    (info as { responseDeserialize: unknown }).responseDeserialize = decode;
    d.proc.kill("SIGKILL");
    await new Promise((r) => d.proc.once("exit", r));
    d = await startDaemon([], d.dir);
    await saver.put(cfg, cp, { source: "input", step: 1, parents: {} }, { v: 1 });
    const [got, after] = await spied(() => saver.getTuple(stored));
    assert.equal(got?.checkpoint.channel_values.v, "kept");
    assert.deepEqual([after.streamed.length, after.own], [1, 0], "after the break: on the stream");
  } finally {
    (info as { responseDeserialize: unknown }).responseDeserialize = decode;
    saver.close();
    await stopDaemon(d);
  }
});
