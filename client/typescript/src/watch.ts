/**
 * Client.watchSessions: the WatchSessions stream as an AsyncIterable of
 * typed events (docs/api.md, WatchSessions).
 */
import { type ClientReadableStream, status as Code } from "@grpc/grpc-js";

import { ErrorReason, newError, translate } from "./errors.js";
import type { Duration } from "./gen/google/protobuf/duration.js";
import type { Timestamp } from "./gen/google/protobuf/timestamp.js";
import {
  type SessionStatus,
  type SessionSummary,
  WatchEventType,
  WatchSessionsRequest,
  type WatchSessionsResponse,
} from "./gen/savepoint/v1/savepoint.js";

export { WatchEventType };

/** What Client.watchSessions watches: ListSessions' filters, and the heartbeat. */
export interface WatchOptions {
  /** Keeps sessions whose labels include every pair. */
  labelFilter?: Record<string, string>;
  /** Keeps sessions of one status; unset (or UNSPECIFIED) keeps any. */
  statusFilter?: SessionStatus;
  /** Keeps sessions whose latest revision has a pending tool use. */
  hasPendingToolUses?: boolean;
  /**
   * Keeps sessions not updated for at least this many ms; a session is sent
   * as CHANGED when its idle time reaches it, and as REMOVED by a later
   * change. Unset or 0: any.
   */
  minIdleMs?: number;
  /** How often a heartbeat is sent while nothing else is, in ms: 100 ms to 1 h; unset or 0 is the daemon's 10 s. */
  heartbeatIntervalMs?: number;
  /** Ends the watch: the iteration then throws CanceledError, as every call with a signal does. */
  signal?: AbortSignal;
}

/** A session the filters select changed durably, or its idle time reached minIdleMs. */
export interface WatchChanged {
  type: WatchEventType.WATCH_EVENT_TYPE_CHANGED;
  sessionId: string;
  /** Its summary as listSessions gives it, read after the change. */
  session: SessionSummary;
  /** When the daemon sent the event. */
  sendTime: Date | undefined;
}

/** A session changed durably, or was deleted, and the filters do not select it: drop it if you show it. */
export interface WatchRemoved {
  type: WatchEventType.WATCH_EVENT_TYPE_REMOVED;
  sessionId: string;
  sendTime: Date | undefined;
}

/**
 * HEARTBEAT: nothing else to send. The first event of every watch, once
 * the daemon has registered it: every change durable after it is sent, so
 * list the sessions after it and apply the events from there.
 *
 * RESYNC: the watch fell behind and events were dropped (more than 1024
 * distinct sessions changed while it was not read, or a poll of a shared
 * PostgreSQL database failed): list the sessions again. Every change
 * durable after it is sent.
 */
export interface WatchSignal {
  type: WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT | WatchEventType.WATCH_EVENT_TYPE_RESYNC;
  sendTime: Date | undefined;
}

/** One event of a watch; switch on type to narrow it. */
export type WatchEvent = WatchChanged | WatchRemoved | WatchSignal;

/**
 * The events of one Client.watchSessions call, for `for await`. The call
 * starts when the iteration does, and the iteration ends only when close()
 * is called (quietly), the loop is left (break, return, a throw: the call
 * ends too), or the watch fails: with UnavailableError when the daemon
 * stops, InvalidArgumentError (or a subclass) for filters it refuses,
 * CanceledError when options.signal fires. It is iterated once.
 */
export class SessionWatch implements AsyncIterable<WatchEvent> {
  readonly #start: (request: WatchSessionsRequest) => ClientReadableStream<WatchSessionsResponse>;
  readonly #request: WatchSessionsRequest;
  readonly #signal: AbortSignal | undefined;
  #call: ClientReadableStream<WatchSessionsResponse> | undefined;
  #closed = false;
  #iterated = false;

  /** @internal Use Client.watchSessions. */
  constructor(start: (request: WatchSessionsRequest) => ClientReadableStream<WatchSessionsResponse>, options: WatchOptions) {
    this.#start = start;
    this.#request = watchRequest(options);
    this.#signal = options.signal;
  }

  /** Ends the call; an iteration waiting for an event ends quietly. */
  close(): void {
    this.#closed = true;
    this.#call?.cancel();
  }

  [Symbol.asyncIterator](): AsyncIterator<WatchEvent> {
    if (this.#iterated) throw new Error("savepoint: a SessionWatch is iterated once; call watchSessions again.");
    this.#iterated = true;
    return this.#events();
  }

  async *#events(): AsyncGenerator<WatchEvent, void, undefined> {
    if (this.#closed) return;
    const signal = this.#signal;
    const call = this.#start(this.#request);
    this.#call = call;
    // grpc-js emits a failed call's error even when no one reads any more
    // (after a break); the iteration below reports it when someone does.
    call.on("error", () => {});
    const cancel = () => call.cancel();
    if (signal?.aborted) call.cancel();
    else signal?.addEventListener("abort", cancel, { once: true });
    try {
      for await (const r of call as AsyncIterable<WatchSessionsResponse>) {
        const ev = watchEvent(r);
        if (ev !== undefined) yield ev;
      }
    } catch (err) {
      if (this.#closed && !signal?.aborted) return;
      throw translate(err);
    } finally {
      signal?.removeEventListener("abort", cancel);
      call.cancel();
    }
  }
}

/** The request of options; a duration that is not a finite number is refused here. */
function watchRequest(o: WatchOptions): WatchSessionsRequest {
  return WatchSessionsRequest.fromPartial({
    labelFilter: o.labelFilter ?? {},
    statusFilter: o.statusFilter,
    hasPendingToolUses: o.hasPendingToolUses ?? false,
    minIdle: o.minIdleMs === undefined ? undefined : duration("minIdleMs", o.minIdleMs),
    heartbeatInterval: o.heartbeatIntervalMs === undefined ? undefined : duration("heartbeatIntervalMs", o.heartbeatIntervalMs),
  });
}

function duration(name: string, ms: number): Duration {
  if (typeof ms !== "number" || !Number.isFinite(ms)) {
    throw newError(ErrorReason.ERROR_REASON_INVALID_ARGUMENT, Code.INVALID_ARGUMENT, `${name} is ${String(ms)}; give a number of milliseconds.`);
  }
  const seconds = Math.trunc(ms / 1000);
  return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** The event of a response; undefined for a type this client does not know, which a watch skips. */
export function watchEvent(r: WatchSessionsResponse): WatchEvent | undefined {
  const sendTime = dateOf(r.sendTime);
  switch (r.type) {
    case WatchEventType.WATCH_EVENT_TYPE_CHANGED:
      if (r.session === undefined) return undefined;
      return { type: r.type, sessionId: r.sessionId, session: r.session, sendTime };
    case WatchEventType.WATCH_EVENT_TYPE_REMOVED:
      return { type: r.type, sessionId: r.sessionId, sendTime };
    case WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT:
    case WatchEventType.WATCH_EVENT_TYPE_RESYNC:
      return { type: r.type, sendTime };
  }
  return undefined;
}

/** A Timestamp as a Date (to the millisecond). */
function dateOf(ts: Timestamp | undefined): Date | undefined {
  if (ts === undefined) return undefined;
  return new Date(Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6));
}
