/**
 * CallStream's reading of a server-streaming call's answers, against a fake
 * CallStreamService that answers as scripted, for the answers a real daemon
 * gives only by chance (a failure after some messages, two calls' answers
 * interleaved) and the ones it never gives (an answer carrying nothing
 * where a message is due).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { type ServerDuplexStream, Server, ServerCredentials, type ServiceError } from "@grpc/grpc-js";

import { Status } from "../gen/google/rpc/status.js";
import { GetCheckpointRequest, GetCheckpointResponse, GraphCheckpointServiceClient, PutCheckpointRequest } from "../gen/savepoint/v1/graph.js";
import { CallStreamRequest, CallStreamResponse, CallStreamServiceService } from "../gen/savepoint/v1/stream.js";
import { serviceClient } from "../index.js";
import { CallStream } from "../stream.js";
import { shortTempDir } from "./daemon.js";

let server: Server;
let addr: string;

/** A GetCheckpoint message naming checkpoint id. */
const msg = (id: string) => GetCheckpointResponse.fromPartial({ checkpoint: { threadId: "th", checkpointId: id } });

/** The answers of the fake to one call, by its thread id (GetCheckpoint) or any unary call ("unary"). */
function script(id: bigint, thread: string): CallStreamResponse[] {
  const r = (p: Partial<CallStreamResponse>) => CallStreamResponse.fromPartial({ id, ...p });
  const failed = Buffer.from(Status.encode(Status.fromPartial({ code: 10, message: "aborted after one" })).finish());
  switch (thread) {
    case "two":
      return [r({ getCheckpoint: msg("1"), more: true }), r({ getCheckpoint: msg("2") })];
    case "empty":
      return [r({})];
    case "fail-after":
      return [r({ getCheckpoint: msg("1"), more: true }), r({ error: failed })];
    case "nothing-after":
      return [r({ getCheckpoint: msg("1"), more: true }), r({})];
    case "more-nothing":
      return [r({ more: true })];
    default: // a unary call answered with nothing
      return [r({})];
  }
}

before(async () => {
  server = new Server();
  server.addService(CallStreamServiceService, {
    callStream: (call: ServerDuplexStream<CallStreamRequest, CallStreamResponse>) => {
      // "x" and "y" are answered together, their answers interleaved.
      let held: CallStreamRequest | undefined;
      call.on("data", (req: CallStreamRequest) => {
        const thread = req.getCheckpoint?.threadId ?? "unary";
        if (thread === "x" || thread === "y") {
          if (!held) {
            held = req;
            return;
          }
          const [a, b] = [held.id, req.id];
          held = undefined;
          for (const [id, part, more] of [
            [a, "a1", true],
            [b, "b1", true],
            [b, "b2", false],
            [a, "a2", false],
          ] as const) {
            call.write(CallStreamResponse.fromPartial({ id, getCheckpoint: msg(part), more }));
          }
          return;
        }
        for (const r of script(req.id, thread)) call.write(r);
      });
      call.on("end", () => call.end());
    },
  });
  addr = "unix:" + join(shortTempDir(), "f.sock");
  await new Promise<void>((res, rej) => server.bindAsync(addr, ServerCredentials.createInsecure(), (err) => (err ? rej(err) : res())));
});
after(() => {
  server.forceShutdown();
});

const get = (threadId: string) => GetCheckpointRequest.fromPartial({ threadId });

test("callStreamed: the messages to the one without more, none for a lone empty answer, the error that ends them", async () => {
  const stub = serviceClient(GraphCheckpointServiceClient, addr);
  const cs = new CallStream(stub);
  try {
    const ids = (m: GetCheckpointResponse[]) => m.map((x) => x.checkpoint?.checkpointId);
    assert.deepEqual(ids(await cs.callStreamed("getCheckpoint", get("two"))), ["1", "2"]);
    assert.deepEqual(await cs.callStreamed("getCheckpoint", get("empty")), []);
    await assert.rejects(cs.callStreamed("getCheckpoint", get("fail-after")), (e: ServiceError) => e.code === 10 && e.details === "aborted after one");
    // Two calls at once, their answers interleaved: each gets its own, in order.
    const [x, y] = await Promise.all([cs.callStreamed<GetCheckpointResponse>("getCheckpoint", get("x")), cs.callStreamed<GetCheckpointResponse>("getCheckpoint", get("y"))]);
    assert.deepEqual([ids(x), ids(y)], [
      ["a1", "a2"],
      ["b1", "b2"],
    ]);
    // An answer carrying nothing where a message is due is the daemon's fault.
    for (const bad of ["nothing-after", "more-nothing"]) {
      await assert.rejects(cs.callStreamed("getCheckpoint", get(bad)), (e: ServiceError) => e.code === 13, bad);
    }
    // A unary call answered with nothing likewise, not with `more`'s false.
    await assert.rejects(cs.call("putCheckpoint", PutCheckpointRequest.fromPartial({})), (e: ServiceError) => e.code === 13);
    // The stream still answers.
    assert.deepEqual(ids(await cs.callStreamed("getCheckpoint", get("two"))), ["1", "2"]);
  } finally {
    cs.close();
    stub.close();
  }
});
