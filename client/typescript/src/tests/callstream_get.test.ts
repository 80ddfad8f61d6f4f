/**
 * CallStream carries GetCheckpoint, a server-streaming RPC: callStreamed
 * returns the messages of its stream, the same as the RPC's own call
 * streams (several for a checkpoint larger than the daemon's response
 * budget, none for no such checkpoint), and its error as the own call
 * reports it; carries says whether the daemon carries it, from
 * GetServerInfo's call_stream_get_checkpoint, asked once, a failed ask
 * deciding nothing.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type ServiceError } from "@grpc/grpc-js";

import { graphPb, serviceClient } from "../index.js";
import { CallStream, Unsupported as CallStreamUnsupported } from "../stream.js";
import { Daemon } from "./daemon.js";

type Stub = graphPb.GraphCheckpointServiceClient;

let on: Daemon;
let off: Daemon;
before(async () => {
  [on, off] = await Promise.all([
    // A response budget of 160 KiB: a checkpoint of 240 KiB of values comes in two messages or more.
    Daemon.start(["--response-budget-bytes", "163840", "--max-state-bytes", "16384"]),
    Daemon.start(["--no-call-stream"]),
  ]);
});
after(async () => {
  await Promise.all([on.close(), off.close()]);
});

function unary<Req, Res>(stub: Stub, method: "putCheckpoint", req: Req): Promise<Res> {
  const fn = stub[method] as unknown as (req: Req, cb: (err: ServiceError | null, res: Res) => void) => unknown;
  return new Promise((resolve, reject) => fn.call(stub, req, (err, res) => (err ? reject(err) : resolve(res))));
}

/** GetCheckpoint as its own RPC: its messages, or the error that ended it with the messages before. */
async function own(stub: Stub, req: graphPb.GetCheckpointRequest): Promise<{ messages: graphPb.GetCheckpointResponse[]; error?: ServiceError }> {
  const messages: graphPb.GetCheckpointResponse[] = [];
  try {
    for await (const m of stub.getCheckpoint(req) as AsyncIterable<graphPb.GetCheckpointResponse>) messages.push(m);
    return { messages };
  } catch (e) {
    return { messages, error: e as ServiceError };
  }
}

/** The error's code, details and grpc-status-details-bin, as a unary call reports them. */
function described(e: ServiceError): unknown[] {
  return [e.code, e.details, e.metadata.get("grpc-status-details-bin").map((b) => Buffer.from(b as Buffer).toString("base64"))];
}

/** Puts a checkpoint of thread th with 15 channels of 16 KiB each (240 KiB). */
async function putBig(stub: Stub, th: string, id: string): Promise<void> {
  const blobs = Array.from({ length: 15 }, (_, i) => ({
    channel: `ch${i}`,
    version: "1",
    value: { type: "bytes", data: Buffer.alloc(16 << 10, 97 + i) },
  }));
  await unary(
    stub,
    "putCheckpoint",
    graphPb.PutCheckpointRequest.fromPartial({
      checkpoint: {
        threadId: th,
        checkpointId: id,
        checkpoint: { type: "json", data: Buffer.from("{}") },
        metadataJson: "{}",
        channelVersions: Object.fromEntries(blobs.map((b) => [b.channel, "1"])),
      },
      blobs,
    }),
  );
}

test("callStreamed answers GetCheckpoint with the messages and errors of its own RPC", async () => {
  const stub = serviceClient(graphPb.GraphCheckpointServiceClient, on.addr);
  const cs = new CallStream(stub);
  try {
    await putBig(stub, "th", "c1");
    await putBig(stub, "th", "c2");
    assert.equal(await cs.carries("getCheckpoint"), true);
    const cases: [string, Partial<graphPb.GetCheckpointRequest>][] = [
      ["a checkpoint larger than a response", { threadId: "th", checkpointId: "c1" }],
      ["the latest", { threadId: "th" }],
      ["no such checkpoint", { threadId: "th", checkpointId: "missing" }],
      ["no such thread", { threadId: "nobody" }],
      ["a refused request", { threadId: "th", checkpointNs: "n".repeat(5000) }],
      ["a missing thread id", { threadId: "" }],
    ];
    let most = 0;
    for (const [name, partial] of cases) {
      const req = graphPb.GetCheckpointRequest.fromPartial(partial);
      const want = await own(stub, req);
      if (want.error === undefined) {
        const got = await cs.callStreamed<graphPb.GetCheckpointResponse>("getCheckpoint", req);
        assert.deepEqual(got, want.messages, name);
        most = Math.max(most, got.length);
      } else {
        assert.equal(want.messages.length, 0, name);
        await assert.rejects(cs.callStreamed("getCheckpoint", req), (e: ServiceError) => {
          assert.deepEqual(described(e), described(want.error!), name);
          return true;
        });
      }
    }
    assert.ok(most >= 2, `at most ${most} messages in one answer: the large checkpoint must take several`);
    // The cases reach a refusal of the daemon's (INVALID_ARGUMENT), and the stream goes on after it.
    const refused = await own(stub, graphPb.GetCheckpointRequest.fromPartial(cases[4]![1]));
    assert.equal(refused.error?.code, 3);
    assert.match(refused.error?.details ?? "", /checkpoint_ns/);
    assert.equal((await cs.callStreamed("getCheckpoint", graphPb.GetCheckpointRequest.fromPartial({ threadId: "th" }))).length, most);
    // A unary call on the same stream is answered as before.
    assert.equal(await cs.call("putCheckpoint", graphPb.PutCheckpointRequest.fromPartial({})).then(() => 0, (e: ServiceError) => e.code), 3);
  } finally {
    cs.close();
    stub.close();
  }
});

test("carries: GetCheckpoint when call_stream_get_checkpoint says so, a unary RPC while the stream is not refused", async () => {
  const onStub = serviceClient(graphPb.GraphCheckpointServiceClient, on.addr);
  const offStub = serviceClient(graphPb.GraphCheckpointServiceClient, off.addr);
  const a = new CallStream(onStub);
  const b = new CallStream(offStub);
  try {
    assert.deepEqual(await Promise.all([a.carries("getCheckpoint"), a.carries("putCheckpoint")]), [true, true]);
    assert.deepEqual(await Promise.all([b.carries("getCheckpoint"), b.carries("putCheckpoint")]), [false, true]);
    // Once the daemon refused the stream (UNIMPLEMENTED), nothing.
    await assert.rejects(b.call("putCheckpoint", graphPb.PutCheckpointRequest.fromPartial({})), CallStreamUnsupported);
    assert.deepEqual(await Promise.all([b.carries("getCheckpoint"), b.carries("putCheckpoint")]), [false, false]);
    // Never the RPCs CallStreamRequest has no field for.
    assert.deepEqual(await Promise.all([a.carries("listCheckpoints"), a.carries("uploadCheckpoint"), a.carries("backup")]), [false, false, false]);
    await assert.rejects(a.callStreamed("putCheckpoint", {}), TypeError);
    // Asked once: a daemon gone since answers carries without a call.
    const d = await Daemon.start();
    const stub = serviceClient(graphPb.GraphCheckpointServiceClient, d.addr);
    const c = new CallStream(stub);
    try {
      assert.equal(await c.carries("getCheckpoint"), true);
      await d.kill();
      assert.equal(await c.carries("getCheckpoint", { deadline: Date.now() + 2000 }), true);
    } finally {
      c.close();
      stub.close();
      await d.close();
    }
  } finally {
    a.close();
    b.close();
    onStub.close();
    offStub.close();
  }
});

test("a failed ask decides nothing: carries is false until an ask succeeds", async () => {
  const d = await Daemon.start();
  await d.kill();
  const stub = serviceClient(graphPb.GraphCheckpointServiceClient, d.addr);
  const cs = new CallStream(stub);
  try {
    assert.equal(await cs.carries("getCheckpoint", { deadline: Date.now() + 500 }), false);
    assert.equal(cs.supported, true, "a failed ask must not mark the stream unsupported");
    await d.restart();
    // The channel may still be backing off from the refused connection: ask until an ask succeeds.
    let carried = false;
    for (const by = Date.now() + 10_000; !carried && Date.now() < by; ) {
      carried = await cs.carries("getCheckpoint", { deadline: Date.now() + 1000 });
      if (!carried) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(carried, true);
    assert.deepEqual(await cs.callStreamed("getCheckpoint", graphPb.GetCheckpointRequest.fromPartial({ threadId: "none" })), []);
  } finally {
    cs.close();
    stub.close();
    await d.close();
  }
});
