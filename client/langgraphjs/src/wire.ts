/**
 * LangGraph's objects to GraphCheckpointService messages and back: the
 * requests the saver sends and the reassembly of the streamed reads
 * (docs/protocol.md, "Reading a stream"), as the Python saver's _wire.py
 * does them. Nothing here does I/O.
 */
import { randomUUID } from "node:crypto";

import type { RunnableConfig } from "@langchain/core/runnables";
import {
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  WRITES_IDX_MAP,
} from "@langchain/langgraph-checkpoint";
import { CheckpointCorruptError, graphPb, newError, ErrorReason } from "@savepoint-dev/client";
import { status as Code } from "@grpc/grpc-js";

/** The most blobs per put and writes per PutWrites the daemon accepts (docs/api.md). */
export const MAX_BATCH = 1000;

/** A request's framing and the fields the size estimates leave out. */
const REQUEST_MARGIN = 4096;

/** The bytes per upload chunk message (less when the daemon's request limit is smaller). */
export const UPLOAD_CHUNK_BYTES = 1 << 20;

/** The most bytes one UploadCheckpoint or UploadWrites may declare (docs/api.md). */
export const MAX_UPLOAD_BYTES = 2 ** 30;

/**
 * Says whether a put is over the daemon's request limit, so that it must go
 * through UploadCheckpoint.
 */
export function needsUpload(req: graphPb.PutCheckpointRequest, maxRequestBytes: number): boolean {
  return graphPb.PutCheckpointRequest.encode(req).finish().length + REQUEST_MARGIN > maxRequestBytes;
}

/** A value with its data emptied and its total_size kept, as an upload's start carries it. */
function emptied(v: graphPb.TypedValue | undefined): graphPb.TypedValue | undefined {
  return v ? { ...v, data: Buffer.alloc(0), totalSize: BigInt(v.data.length) } : v;
}

/**
 * The bytes of values, concatenated and cut into chunks of at most the
 * upload chunk size under the request limit; each chunk is a view of its
 * value where it can be, a copy only where it joins two values.
 */
function* chunks(values: Uint8Array[], maxRequestBytes: number): Generator<Buffer> {
  const size = Math.max(1, Math.min(UPLOAD_CHUNK_BYTES, maxRequestBytes - REQUEST_MARGIN));
  let buf: Uint8Array[] = [];
  let have = 0;
  for (const data of values) {
    for (let off = 0; off < data.length; ) {
      const take = Math.min(size - have, data.length - off);
      buf.push(data.subarray(off, off + take));
      have += take;
      off += take;
      if (have === size) {
        yield buf.length === 1 ? Buffer.from(buf[0].buffer, buf[0].byteOffset, buf[0].length) : Buffer.concat(buf);
        buf = [];
        have = 0;
      }
    }
  }
  if (have > 0) yield Buffer.concat(buf);
}

/**
 * The UploadCheckpoint messages of a put: the start, every value's data
 * emptied and its total_size kept, then the checkpoint's bytes and each
 * blob's, in the start's order, in chunks under the request limit.
 */
export function* uploadMessages(req: graphPb.PutCheckpointRequest, maxRequestBytes: number): Generator<graphPb.UploadCheckpointRequest> {
  const cp = req.checkpoint!;
  yield graphPb.UploadCheckpointRequest.fromPartial({
    start: {
      checkpoint: { ...cp, checkpoint: emptied(cp.checkpoint) },
      blobs: req.blobs.map((b) => ({ ...b, value: emptied(b.value) })),
      requestId: req.requestId,
    },
  });
  const values = [cp.checkpoint?.data ?? Buffer.alloc(0), ...req.blobs.map((b) => b.value?.data ?? Buffer.alloc(0))];
  for (const chunk of chunks(values, maxRequestBytes)) yield graphPb.UploadCheckpointRequest.fromPartial({ chunk });
}

/**
 * Says whether a PutWrites request is over the daemon's request limit, so
 * that it must go through UploadWrites; it counts the values' bytes and
 * keys without encoding them.
 */
export function writesNeedUpload(req: graphPb.PutWritesRequest, maxRequestBytes: number): boolean {
  let n = req.threadId.length + req.checkpointNs.length + req.checkpointId.length + req.taskId.length + req.taskPath.length + req.requestId.length;
  for (const w of req.writes) n += writeSize(w);
  return n + REQUEST_MARGIN > maxRequestBytes;
}

/**
 * The UploadWrites messages of a PutWrites request: the start, every
 * value's data emptied and its total_size kept, then each write's bytes in
 * the start's order, in chunks under the request limit.
 */
export function* writesUploadMessages(req: graphPb.PutWritesRequest, maxRequestBytes: number): Generator<graphPb.UploadWritesRequest> {
  yield graphPb.UploadWritesRequest.fromPartial({
    start: { ...req, writes: req.writes.map((w) => ({ ...w, value: emptied(w.value) })) },
  });
  for (const chunk of chunks(req.writes.map((w) => w.value?.data ?? Buffer.alloc(0)), maxRequestBytes)) {
    yield graphPb.UploadWritesRequest.fromPartial({ chunk });
  }
}

function missing(field: string, message: string): Error {
  return newError(ErrorReason.ERROR_REASON_MISSING_FIELD, Code.INVALID_ARGUMENT, message, { field });
}

/** The (thread_id, checkpoint_ns) a config names; the thread is required. */
export function threadOf(config: RunnableConfig): [string, string] {
  const conf = config.configurable ?? {};
  if (conf.thread_id === undefined || conf.thread_id === null) {
    throw missing("thread_id", "the config has no configurable.thread_id; pass one, as in { configurable: { thread_id: \"t1\" } }.");
  }
  return [String(conf.thread_id), String(conf.checkpoint_ns ?? "")];
}

async function typed(serde: SerializerProtocol, value: unknown): Promise<graphPb.TypedValue> {
  const [type, data] = await serde.dumpsTyped(value);
  const bytes = Buffer.from(data);
  return { type, data: bytes, totalSize: BigInt(bytes.length) };
}

/**
 * The PutCheckpoint request that stores checkpoint as a child of the
 * config's checkpoint, with a blob for each channel of newVersions that has
 * a value, and the config that names the stored checkpoint.
 */
export async function putRequest(
  serde: SerializerProtocol,
  config: RunnableConfig,
  checkpoint: Checkpoint,
  metadata: CheckpointMetadata,
  newVersions: ChannelVersions,
): Promise<[graphPb.PutCheckpointRequest, RunnableConfig]> {
  const [threadId, ns] = threadOf(config);
  const { channel_values: values = {}, ...rest } = checkpoint;
  const blobs: graphPb.ChannelBlob[] = [];
  for (const [channel, version] of Object.entries(newVersions)) {
    if (!Object.hasOwn(values, channel)) continue; // an empty channel: no blob, read back as absent
    blobs.push({ channel, version: String(version), value: await typed(serde, (values as Record<string, unknown>)[channel]) });
  }
  const req = graphPb.PutCheckpointRequest.fromPartial({
    checkpoint: {
      threadId,
      checkpointNs: ns,
      checkpointId: checkpoint.id,
      parentCheckpointId: String(config.configurable?.checkpoint_id ?? ""),
      checkpoint: await typed(serde, { ...rest, channel_values: {} }),
      channelVersions: Object.fromEntries(Object.entries(checkpoint.channel_versions).map(([k, v]) => [k, String(v)])),
      metadataJson: JSON.stringify(metadata ?? {}),
    },
    blobs,
    requestId: randomUUID(),
  });
  return [req, { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } }];
}

/** A write's bytes in a request, its framing estimated. */
function writeSize(w: graphPb.ChannelWrite): number {
  return (w.value?.data.length ?? 0) + (w.value?.type.length ?? 0) + w.channel.length + 32;
}

/**
 * The requests of one putWrites: one, unless the call has more writes than
 * one request may carry (MAX_BATCH) or declares more than one upload may
 * (MAX_UPLOAD_BYTES), each with its own request id. A request over the
 * daemon's request limit goes through UploadWrites (writesNeedUpload), so
 * no size of value splits a call. A write to one of LangGraph's special
 * channels (ERROR, INTERRUPT, ...) gets its negative index from
 * WRITES_IDX_MAP, any other its position; a special channel written twice
 * in one call keeps the last value.
 */
export async function writesRequests(
  serde: SerializerProtocol,
  config: RunnableConfig,
  writes: PendingWrite[],
  taskId: string,
  taskPath: string,
): Promise<graphPb.PutWritesRequest[]> {
  const [threadId, ns] = threadOf(config);
  const checkpointId = config.configurable?.checkpoint_id;
  if (!checkpointId) throw missing("checkpoint_id", "putWrites needs a config with configurable.checkpoint_id.");
  const byIdx = new Map<number, graphPb.ChannelWrite>();
  for (const [i, [channel, value]] of writes.entries()) {
    const idx = WRITES_IDX_MAP[channel] ?? i;
    byIdx.set(idx, { idx, channel, value: await typed(serde, value) });
  }
  const out: graphPb.PutWritesRequest[] = [];
  let cur: graphPb.PutWritesRequest | undefined;
  let size = 0;
  for (const w of byIdx.values()) {
    const n = w.value!.data.length;
    if (!cur || cur.writes.length >= MAX_BATCH || (cur.writes.length > 0 && size + n > MAX_UPLOAD_BYTES)) {
      cur = graphPb.PutWritesRequest.fromPartial({
        threadId,
        checkpointNs: ns,
        checkpointId: String(checkpointId),
        taskId,
        taskPath,
        requestId: randomUUID(),
      });
      out.push(cur);
      size = 0;
    }
    cur.writes.push(w);
    size += n;
  }
  return out;
}

/**
 * The ListCheckpoints request of a list() call, and the checkpoint id the
 * config names, if any, which the daemon does not filter on: the saver then
 * yields only that checkpoint and counts the limit itself.
 */
export function listRequest(config: RunnableConfig | undefined, o: CheckpointListOptions = {}): [graphPb.ListCheckpointsRequest, string | undefined] {
  const conf = config?.configurable ?? {};
  const wanted = conf.checkpoint_id ? String(conf.checkpoint_id) : undefined;
  const req = graphPb.ListCheckpointsRequest.fromPartial({
    threadId: conf.thread_id === undefined || conf.thread_id === null ? "" : String(conf.thread_id),
    checkpointNs: conf.checkpoint_ns === undefined || conf.checkpoint_ns === null ? undefined : String(conf.checkpoint_ns),
    beforeCheckpointId: o.before?.configurable?.checkpoint_id ? String(o.before.configurable.checkpoint_id) : "",
    metadataFilter: Object.fromEntries(Object.entries(o.filter ?? {}).map(([k, v]) => [k, JSON.stringify(v)])),
    limit: o.limit !== undefined && wanted === undefined ? Math.max(o.limit, 0) : 0,
  });
  return [req, wanted];
}

interface Value {
  type: string;
  chunks: Buffer[];
  have: number;
  total: number;
}

/** One checkpoint tuple as the daemon streamed it, values still serialized. */
export interface RawTuple {
  checkpoint: graphPb.GraphCheckpoint;
  value: Value;
  blobs: [string, Value][];
  writes: [string, string, Value][];
}

type StreamMessage = graphPb.GetCheckpointResponse | graphPb.ListCheckpointsResponse;

/**
 * Reassembles GetCheckpoint and ListCheckpoints streams: feed each message
 * in order; it returns the tuples the message completed, and finish the
 * last one at the end of the stream. A stream that breaks the rules of
 * docs/protocol.md throws CheckpointCorruptError.
 */
export class Assembler {
  #cur: RawTuple | undefined;
  #open: Value | undefined;

  feed(msg: StreamMessage): RawTuple[] {
    const done: RawTuple[] = [];
    if (msg.valueChunk.length > 0) {
      if (!this.#open) throw corrupt("the stream sent a value_chunk with no value open");
      this.#open.chunks.push(msg.valueChunk);
      this.#open.have += msg.valueChunk.length;
      if (this.#open.have > this.#open.total) throw corrupt("the stream sent more bytes than a value's total_size");
      if (this.#open.have === this.#open.total) this.#open = undefined;
    }
    if (this.#open && (msg.checkpoint || msg.blobs.length > 0 || msg.pendingWrites.length > 0)) {
      throw corrupt("the stream moved on before a value was complete");
    }
    if (msg.checkpoint) {
      if (this.#cur) done.push(this.#cur);
      this.#cur = { checkpoint: msg.checkpoint, value: this.#track(msg.checkpoint.checkpoint), blobs: [], writes: [] };
    }
    if ((msg.blobs.length > 0 || msg.pendingWrites.length > 0) && !this.#cur) throw corrupt("the stream sent blobs or writes before a checkpoint");
    for (const b of msg.blobs) {
      this.#needClosed();
      this.#cur!.blobs.push([b.channel, this.#track(b.value)]);
    }
    for (const w of msg.pendingWrites) {
      this.#needClosed();
      this.#cur!.writes.push([w.taskId, w.channel, this.#track(w.value)]);
    }
    return done;
  }

  finish(): RawTuple | undefined {
    if (this.#open) throw corrupt("the stream ended inside a value");
    const cur = this.#cur;
    this.#cur = undefined;
    return cur;
  }

  #needClosed(): void {
    if (this.#open) throw corrupt("a value was cut before another value of the same message");
  }

  #track(v: graphPb.TypedValue | undefined): Value {
    const data = v?.data ?? Buffer.alloc(0);
    const val: Value = { type: v?.type ?? "", chunks: [data], have: data.length, total: Math.max(Number(v?.totalSize ?? 0n), data.length) };
    if (val.have < val.total) this.#open = val;
    return val;
  }
}

function corrupt(message: string): Error {
  return newError(ErrorReason.ERROR_REASON_CHECKPOINT_CORRUPT, Code.DATA_LOSS, message) as CheckpointCorruptError;
}

/** The CheckpointTuple of a reassembled stream tuple, its values deserialized with serde. */
export async function toTuple(serde: SerializerProtocol, raw: RawTuple): Promise<CheckpointTuple> {
  const cp = raw.checkpoint;
  const load = (v: Value) => serde.loadsTyped(v.type, Buffer.concat(v.chunks));
  let metadata: CheckpointMetadata;
  try {
    metadata = cp.metadataJson ? JSON.parse(cp.metadataJson) : {};
  } catch (err) {
    throw corrupt(`checkpoint ${JSON.stringify(cp.checkpointId)}: its metadata is not JSON: ${(err as Error).message}`);
  }
  const checkpoint: Checkpoint = await load(raw.value);
  const values: Record<string, unknown> = {};
  for (const [channel, v] of raw.blobs) if (v.type !== "empty") values[channel] = await load(v);
  checkpoint.channel_values = values;
  const conf = { thread_id: cp.threadId, checkpoint_ns: cp.checkpointNs };
  const tuple: CheckpointTuple = {
    config: { configurable: { ...conf, checkpoint_id: cp.checkpointId } },
    checkpoint,
    metadata,
    pendingWrites: await Promise.all(raw.writes.map(async ([taskId, channel, v]) => [taskId, channel, await load(v)] as [string, string, unknown])),
  };
  if (cp.parentCheckpointId) tuple.parentConfig = { configurable: { ...conf, checkpoint_id: cp.parentCheckpointId } };
  return tuple;
}
