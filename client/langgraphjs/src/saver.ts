import type { ClientReadableStream } from "@grpc/grpc-js";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  maxChannelVersion,
  type SerializerProtocol,
  TASKS,
} from "@langchain/langgraph-checkpoint";
import { graphPb } from "@savepoint-dev/client";

import { Connection, type SaverOptions } from "./conn.js";
import {
  Assembler,
  listRequest,
  needsUpload,
  putRequest,
  type RawTuple,
  threadOf,
  toTuple,
  uploadMessages,
  writesNeedUpload,
  writesRequests,
  writesUploadMessages,
} from "./wire.js";

/** The options of a SavepointSaver: where the daemon is, and how values are serialized. */
export interface SavepointSaverOptions extends SaverOptions {
  /** Serializes channel values, checkpoints and writes (default LangGraph's JsonPlusSerializer); the daemon stores its (type, bytes) pairs as they are. */
  serde?: SerializerProtocol;
}

/**
 * A LangGraph.js checkpointer whose storage is savepointd: every
 * checkpoint, channel value and pending write is durable in the daemon
 * before the call resolves, and every process on the host can share one
 * daemon. `new SavepointSaver()` resolves the address as every Savepoint
 * client does; `new SavepointSaver({ address })` names it. Use it like any
 * saver: `builder.compile({ checkpointer: new SavepointSaver() })`, and
 * close() it when done. Failed calls throw the client's SavepointError
 * classes.
 */
export class SavepointSaver extends BaseCheckpointSaver {
  readonly #conn: Connection;

  /** The daemon's address: the given one, else, once the first call resolved it, where the saver connected (the per-user daemon, the system's, or one started on demand). */
  get address(): string {
    return this.#conn.address;
  }

  constructor(options: SavepointSaverOptions = {}) {
    super(options.serde);
    this.#conn = new Connection(options);
  }

  /** Waits until the daemon accepts the connection, or signal fires (then it throws UnavailableError): for a process that starts before its daemon. */
  waitReady(signal?: AbortSignal): Promise<void> {
    return this.#conn.waitReady(signal);
  }

  /** Closes the connection; calls in flight fail. */
  close(): void {
    this.#conn.close();
  }

  /**
   * The checkpoint the config names, or the latest of its thread and
   * namespace without a checkpoint_id, with its channel values and pending
   * writes (in writesSortKey order); undefined when there is none.
   */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    if (config.configurable?.thread_id === undefined || config.configurable.thread_id === null) return undefined;
    const raw = await this.#get(config);
    return raw === undefined ? undefined : this.#tuple(raw);
  }

  /** The stored checkpoint the config names (the latest without a checkpoint_id), values still serialized. */
  async #get(config: RunnableConfig): Promise<RawTuple | undefined> {
    const [threadId, ns] = threadOf(config);
    const req = graphPb.GetCheckpointRequest.fromPartial({
      threadId,
      checkpointNs: ns,
      checkpointId: String(config.configurable?.checkpoint_id ?? ""),
    });
    const msgs = await this.#conn.read<graphPb.GetCheckpointRequest, graphPb.GetCheckpointResponse>("getCheckpoint", req);
    const asm = new Assembler();
    for (const msg of msgs) asm.feed(msg);
    return asm.finish();
  }

  /**
   * The tuple of a raw one. A checkpoint of format v < 4 gets its parent's
   * pending sends (writes to TASKS) as its TASKS channel, as MemorySaver
   * migrates them.
   */
  async #tuple(raw: RawTuple): Promise<CheckpointTuple> {
    const t = await toTuple(this.serde, raw);
    if (t.checkpoint.v >= 4 || !t.parentConfig) return t;
    const parent = await this.#get(t.parentConfig);
    const sends = await Promise.all(
      (parent?.writes ?? []).filter(([, channel]) => channel === TASKS).map(([, , v]) => this.serde.loadsTyped(v.type, Buffer.concat(v.chunks))),
    );
    const cp = t.checkpoint;
    cp.channel_values = { ...cp.channel_values, [TASKS]: sends };
    const versions = Object.values(cp.channel_versions ?? {});
    cp.channel_versions = { ...cp.channel_versions, [TASKS]: versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined) };
    return t;
  }

  /**
   * The matching checkpoints, newest first: of the config's thread (every
   * thread when it names none) and namespace (every namespace when it names
   * none), only the config's checkpoint_id when it names one, before
   * options.before's checkpoint, whose metadata has each key of
   * options.filter with an equal value, at most options.limit. A failure
   * before the first tuple is retried.
   */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const limit = options.limit;
    if (limit !== undefined && limit <= 0) return;
    const [req, wanted] = listRequest(config, options);
    const keep = (raw: RawTuple) => wanted === undefined || raw.checkpoint.checkpointId === wanted;
    let count = 0;
    let call: ClientReadableStream<graphPb.ListCheckpointsResponse> | undefined;
    let first: graphPb.ListCheckpointsResponse[] = [];
    // The stream is opened, and its first message read, through the retries.
    const iterator = await this.#conn.call("listCheckpoints", req, async () => {
      call?.cancel();
      call = this.#conn.stub.listCheckpoints(req);
      const it = (call as AsyncIterable<graphPb.ListCheckpointsResponse>)[Symbol.asyncIterator]();
      const head = await it.next();
      first = head.done ? [] : [head.value];
      return it;
    });
    try {
      const asm = new Assembler();
      const messages = async function* () {
        yield* first;
        for (;;) {
          const r = await iterator.next();
          if (r.done) return;
          yield r.value;
        }
      };
      for await (const msg of messages()) {
        for (const raw of asm.feed(msg)) {
          if (!keep(raw)) continue;
          yield await this.#tuple(raw);
          if (limit !== undefined && ++count >= limit) return;
        }
      }
      const last = asm.finish();
      if (last && keep(last)) yield await this.#tuple(last);
    } finally {
      call?.cancel(); // a caller that stops early ends the stream
    }
  }

  /**
   * Stores a checkpoint as the child of the config's checkpoint, with the
   * values of the channels in newVersions, in one commit (through
   * UploadCheckpoint, in chunks, when it is over the daemon's request
   * limit); returns the config that names it.
   */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const [req, stored] = await putRequest(this.serde, config, checkpoint, metadata, newVersions);
    const limit = await this.#conn.requestLimit();
    if (!needsUpload(req, limit)) {
      await this.#conn.unary("putCheckpoint", req);
      return stored;
    }
    await this.#conn.upload("uploadCheckpoint", req.requestId, () => uploadMessages(req, limit));
    return stored;
  }

  /**
   * Stores a task's pending writes for the config's checkpoint (which need
   * not be stored yet), in one commit (through UploadWrites, in chunks, when
   * they are over the daemon's request limit; a call of more than 1,000
   * writes, or of more than 1 GiB, in several). A write already stored for
   * its (taskId, idx) stays as it is, unless every write of the call is a
   * special one (an error, interrupt, ...), which replaces it. A write for a
   * checkpoint of a thread deleted since is dropped (docs/protocol.md, the
   * late-write rule).
   */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    if (writes.length === 0) return;
    const limit = await this.#conn.requestLimit();
    for (const req of await writesRequests(this.serde, config, writes, taskId, taskPath)) {
      if (writesNeedUpload(req, limit)) await this.#conn.upload("uploadWrites", req.requestId, () => writesUploadMessages(req, limit));
      else await this.#conn.unary("putWrites", req);
    }
  }

  /** Deletes the thread's checkpoints, values and writes in every namespace. Writes sent later for its old checkpoints are dropped. */
  async deleteThread(threadId: string): Promise<void> {
    await this.#conn.unary("deleteThread", graphPb.DeleteThreadRequest.fromPartial({ threadId: String(threadId) }));
  }
}
