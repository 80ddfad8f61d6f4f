/**
 * uint64 fields are bigints end to end: a revision or epoch of 2^63-1 (the
 * largest a PostgreSQL store holds) goes out and comes back exactly, where a
 * JS number would round it to 2^63 or fail to decode it.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Metadata, Server, ServerCredentials, status as Code, type UntypedServiceImplementation } from "@grpc/grpc-js";

import {
  type Client,
  dial,
  pb,
  RevisionMismatchError,
  RevisionNotFoundError,
  SessionFencedError,
} from "../index.js";
import { translate } from "../errors.js";
import { ErrorInfo } from "../gen/google/rpc/error_details.js";
import { Status } from "../gen/google/rpc/status.js";
import { Daemon, shortTempDir } from "./daemon.js";

const MAX = 2n ** 63n - 1n;
const prompt = { role: "user", contentJson: '"go"' };

let d: Daemon;
let c: Client;

before(async () => {
  d = await Daemon.start();
  c = await dial(d.addr);
});
after(async () => {
  c.close();
  await d.close();
});

test("the generated codec keeps 2^63-1 and 2^64-1 in every uint64 of a checkpoint", () => {
  for (const v of [MAX, 2n ** 64n - 1n]) {
    const cp = pb.Checkpoint.fromPartial({ sessionId: "s", revision: v, epoch: v, tokensUsed: v, messageCount: v });
    const back = pb.Checkpoint.decode(pb.Checkpoint.encode(cp).finish());
    assert.equal(back.revision, v);
    assert.equal(back.epoch, v);
    assert.equal(back.tokensUsed, v);
    assert.equal(back.messageCount, v);
    assert.equal(typeof back.revision, "bigint");
  }
});

test("a real daemon receives an epoch and a revision of 2^63-1 exactly", async () => {
  const s = await c.start("u64", "t", { messages: [prompt] });
  assert.equal(typeof s.revision, "bigint");
  assert.equal(typeof s.epoch, "bigint");
  // The daemon's refusals quote the numbers it decoded.
  await assert.rejects(
    c.raw.saveCheckpoint({ sessionId: "u64", expectedRevision: 1n, epoch: MAX, task: "t" }),
    (e: unknown) => e instanceof SessionFencedError && e.details.includes(`not ${MAX}`) && e.currentEpoch === s.epoch,
  );
  await assert.rejects(
    c.raw.saveCheckpoint({ sessionId: "u64", expectedRevision: MAX, epoch: s.epoch, task: "t" }),
    (e: unknown) => e instanceof RevisionMismatchError && e.details.includes(`not ${MAX}`) && e.currentRevision === 1n,
  );
  await assert.rejects(
    c.raw.listMessages({ sessionId: "u64", revision: MAX }),
    (e: unknown) => e instanceof RevisionNotFoundError && e.details.includes(String(MAX)),
  );
  await s.save({ tokensUsed: MAX });
  assert.equal((await c.raw.getSession({ sessionId: "u64" })).checkpoint!.tokensUsed, MAX);
  const r = await c.resume("u64");
  assert.equal(r.tokensUsed, MAX);
  assert.equal(r.epoch, s.epoch + 1n);
});

test("a session resumed at revision and epoch 2^63-1 builds its next save on them", async () => {
  const seen: pb.SaveCheckpointRequest[] = [];
  const impl: UntypedServiceImplementation = {
    resume: (_call: unknown, cb: (err: null, r: pb.ResumeResponse) => void) =>
      cb(
        null,
        pb.ResumeResponse.fromPartial({
          checkpoint: { sessionId: "big", revision: MAX, epoch: MAX, tokensUsed: MAX, messageCount: 1n, messages: [prompt] },
          epoch: MAX,
        }),
      ),
    saveCheckpoint: (call: { request: pb.SaveCheckpointRequest }, cb: (err: null, r: pb.SaveCheckpointResponse) => void) => {
      seen.push(call.request);
      cb(null, pb.SaveCheckpointResponse.fromPartial({ revision: call.request.expectedRevision + 1n, epoch: call.request.epoch, messageCount: 1n }));
    },
  };
  const server = new Server();
  server.addService(pb.SavepointServiceService, impl);
  const dir = shortTempDir("spu");
  const addr = "unix:" + join(dir, "f.sock");
  await new Promise<void>((res, rej) => server.bindAsync(addr, ServerCredentials.createInsecure(), (err) => (err ? rej(err) : res())));
  const fc = await dial(addr);
  try {
    const s = await fc.resume("big");
    assert.equal(s.revision, MAX);
    assert.equal(s.epoch, MAX);
    assert.equal(s.tokensUsed, MAX);
    s.addTokens(1);
    await s.save({ task: "next" });
    assert.equal(seen.length, 1);
    assert.equal(seen[0].expectedRevision, MAX);
    assert.equal(seen[0].epoch, MAX);
    assert.equal(seen[0].tokensUsed, MAX + 1n);
    assert.equal(s.revision, MAX + 1n);
  } finally {
    fc.close();
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("ErrorInfo metadata up to 2^64-1 becomes a bigint; anything else 0n", () => {
  const status = (md: Record<string, string>) => {
    const info = { reason: "SESSION_FENCED", domain: "savepoint.v1", metadata: md };
    const st = Status.encode({
      code: Code.FAILED_PRECONDITION,
      message: "m",
      details: [{ typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: Buffer.from(ErrorInfo.encode(info).finish()) }],
    }).finish();
    const m = new Metadata();
    m.set("grpc-status-details-bin", Buffer.from(st));
    return Object.assign(new Error("m"), { code: Code.FAILED_PRECONDITION, details: "m", metadata: m });
  };
  const e = translate(status({ current_epoch: String(2n ** 64n - 1n), current_revision: String(MAX) })) as SessionFencedError;
  assert.equal(e.currentEpoch, 2n ** 64n - 1n);
  assert.equal(e.currentRevision, MAX);
  const bad = translate(status({ current_epoch: String(2n ** 64n), current_revision: "-1" })) as SessionFencedError;
  assert.equal(bad.currentEpoch, 0n);
  assert.equal(bad.currentRevision, 0n);
});
