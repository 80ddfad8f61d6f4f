/**
 * CallStream (docs/api.md): the client's unary calls carried on one
 * bidirectional stream per connection, so that a busy client pays the
 * transport once per stream instead of once per call.
 *
 * A call on the stream fails as its unary call would: its answer's error
 * becomes a ServiceError with the same code, details and
 * grpc-status-details-bin, so translate and the retries apply unchanged. A
 * stream that breaks fails its unanswered calls with the stream's error
 * (UNAVAILABLE when the daemon went away): they are retried, on a new
 * stream, only when the unary call would be. A daemon that serves no
 * CallStream (UNIMPLEMENTED: an older daemon, or savepointd
 * --no-call-stream) is remembered, and its calls, never handled, go unary.
 *
 * A server-streaming RPC the stream carries (GetCheckpoint) is answered with
 * one CallStreamResponse per message of its stream, more set on all but the
 * last; callStreamed collects them. Whether the daemon carries it is
 * GetServerInfo's call_stream_<method> (call_stream_get_checkpoint), read
 * by carries, once and again after the stream broke: an older daemon
 * answers such a request INVALID_ARGUMENT, so its calls must go as their
 * own RPC.
 */
import { type Client as GrpcClient, type ClientDuplexStream, Metadata, type ServiceError, status as Code } from "@grpc/grpc-js";

import { Status } from "./gen/google/rpc/status.js";
import { GraphCheckpointServiceService } from "./gen/savepoint/v1/graph.js";
import { GetServerInfoRequest, GetServerInfoResponse, SavepointServiceService } from "./gen/savepoint/v1/savepoint.js";
import { CallStreamRequest, CallStreamResponse, CallStreamServiceService } from "./gen/savepoint/v1/stream.js";

/** Thrown by CallStream.call when the daemon serves no CallStream; the call was not handled. */
export class Unsupported extends Error {}

/** The field of CallStreamRequest (and CallStreamResponse) of each RPC it carries, by method name ("saveCheckpoint"). */
type Field = keyof Omit<CallStreamRequest, "id">;

/** The RPCs CallStreamRequest has a field for, by method name. */
const FIELDS: ReadonlySet<string> = new Set(Object.keys(CallStreamRequest.fromPartial({})).filter((k) => k !== "id"));

/**
 * The server-streaming RPCs CallStreamRequest has a field for
 * ("getCheckpoint"), each with the GetServerInfoResponse field that says
 * whether the daemon carries it ("callStreamGetCheckpoint"; undefined when
 * there is none, so that nothing says it is), read from the generated code
 * rather than listed by hand.
 */
const STREAMED: ReadonlyMap<string, keyof GetServerInfoResponse | undefined> = new Map(
  [...Object.entries(SavepointServiceService), ...Object.entries(GraphCheckpointServiceService)]
    .filter(([m, def]) => def.responseStream && !def.requestStream && FIELDS.has(m))
    .map(([m]) => {
      const info = `callStream${m[0]!.toUpperCase()}${m.slice(1)}`;
      return [m, info in GetServerInfoResponse.fromPartial({}) ? (info as keyof GetServerInfoResponse) : undefined] as const;
    }),
);

/** The message a response carries (its one field of the response oneof but error), or undefined. */
function carried(resp: CallStreamResponse): unknown {
  for (const [k, v] of Object.entries(resp)) {
    if (k !== "id" && k !== "error" && k !== "more" && v !== undefined) return v;
  }
  return undefined;
}

/** The error a response carries, as its unary call would report it. */
function answerError(bytes: Uint8Array): ServiceError {
  let st: Status;
  try {
    st = Status.decode(bytes);
  } catch {
    return serviceError(Code.INTERNAL, "undecodable CallStream error");
  }
  return serviceError(st.code, st.message, bytes);
}

/** A call's failure as a unary call would report it. */
function serviceError(code: number, details: string, statusBytes?: Uint8Array): ServiceError {
  const md = new Metadata();
  if (statusBytes && statusBytes.length > 0) md.set("grpc-status-details-bin", Buffer.from(statusBytes));
  return Object.assign(new Error(`${code} ${Code[code] ?? ""}: ${details}`), { code, details, metadata: md });
}

interface Pending {
  /** The messages of a server-streaming call answered so far; undefined for a unary call. */
  messages?: unknown[];
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/** Options of one call on the stream. */
export interface StreamCallOptions {
  deadline?: Date | number;
  signal?: AbortSignal;
}

interface Open {
  call: ClientDuplexStream<CallStreamRequest, CallStreamResponse>;
  pending: Map<bigint, Pending>;
}

/** The calls of one grpc-js client's channel on one CallStream, opened on first use and again after it breaks. */
export class CallStream {
  readonly #stub: GrpcClient;
  #supported = true;
  #next = 1n;
  #open: Open | undefined;
  /** GetServerInfo's answer, once asked successfully; the ask in flight, while one is. */
  #info: GetServerInfoResponse | Promise<GetServerInfoResponse | undefined> | undefined;
  /** Whether the stream broke since GetServerInfo's answer, which is then asked again. */
  #stale = false;

  constructor(stub: GrpcClient) {
    this.#stub = stub;
  }

  /** False once the daemon answered UNIMPLEMENTED. */
  get supported(): boolean {
    return this.#supported;
  }

  #stream(): Open {
    if (!this.#supported) throw new Unsupported();
    if (this.#open) return this.#open;
    const def = CallStreamServiceService.callStream;
    const call = this.#stub.makeBidiStreamRequest(
      def.path,
      def.requestSerialize as (v: CallStreamRequest) => Buffer,
      def.responseDeserialize as (b: Buffer) => CallStreamResponse,
      new Metadata(),
      {},
    );
    const open: Open = { call, pending: new Map() };
    const fail = (err: unknown) => {
      if (this.#open === open) this.#open = undefined;
      this.#stale = true; // the daemon may have been replaced: ask again
      let e = err;
      if ((err as ServiceError).code === Code.UNIMPLEMENTED) {
        this.#supported = false;
        e = new Unsupported();
      }
      for (const p of open.pending.values()) p.reject(e);
      open.pending.clear();
    };
    call.on("data", (resp: CallStreamResponse) => {
      const p = open.pending.get(resp.id);
      if (!p) return;
      if (resp.error !== undefined) {
        open.pending.delete(resp.id);
        p.reject(answerError(resp.error));
        return;
      }
      const msg = carried(resp);
      if (p.messages !== undefined) {
        // A server-streaming call: its messages until one without more; a
        // stream of no message is one lone answer carrying nothing.
        if (msg !== undefined) p.messages.push(msg);
        else if (resp.more || p.messages.length > 0) {
          open.pending.delete(resp.id);
          p.reject(serviceError(Code.INTERNAL, "the daemon answered a CallStream call with nothing"));
          return;
        }
        if (resp.more) return;
        open.pending.delete(resp.id);
        p.resolve(p.messages);
        return;
      }
      open.pending.delete(resp.id);
      if (msg !== undefined) p.resolve(msg);
      else p.reject(serviceError(Code.INTERNAL, "the daemon answered a CallStream call with nothing"));
    });
    call.on("error", fail);
    call.on("end", () => fail(serviceError(Code.UNAVAILABLE, "the CallStream ended")));
    this.#open = open;
    return open;
  }

  /**
   * Sends request of RPC method (its name in the generated client:
   * "saveCheckpoint") and returns its response; rejects with its error (a
   * ServiceError) or Unsupported. A deadline that passes, or a signal that
   * fires, rejects the call (DEADLINE_EXCEEDED, CANCELLED) as unary.
   */
  call<R>(method: string, request: unknown, options: StreamCallOptions = {}): Promise<R> {
    return this.#send<R>(method, request, options, undefined);
  }

  /**
   * Whether the daemon carries method (its name in the generated client) on
   * the stream: never an RPC CallStreamRequest has no field for
   * (ListCheckpoints, the uploads); a unary one while the daemon is not
   * known to serve no CallStream; a server-streaming one ("getCheckpoint")
   * when GetServerInfo's
   * call_stream_<method> says so. GetServerInfo is asked once, and again
   * after the stream broke (the daemon may have been replaced), unary on
   * the stub's channel; a failed ask decides nothing (it is asked again
   * next time) and keeps the last answer, or, with none, answers false, so
   * that the call goes as its own RPC. Never rejects.
   */
  async carries(method: string, options: StreamCallOptions = {}): Promise<boolean> {
    if (!FIELDS.has(method) || !this.#supported) return false;
    if (!STREAMED.has(method)) return true;
    const field = STREAMED.get(method);
    if (field === undefined) return false;
    const info = await this.#serverInfo(options);
    return info?.[field] === true && this.#supported;
  }

  /** GetServerInfo's answer, asked as carries says (concurrent callers share the ask); the last one, or undefined, when the ask failed. */
  async #serverInfo(options: StreamCallOptions): Promise<GetServerInfoResponse | undefined> {
    if (this.#info === undefined || (this.#stale && !(this.#info instanceof Promise))) {
      const last = this.#info;
      this.#stale = false;
      const def = SavepointServiceService.getServerInfo;
      const ask = new Promise<GetServerInfoResponse | undefined>((resolve) => {
        this.#stub.makeUnaryRequest(
          def.path,
          def.requestSerialize as (v: GetServerInfoRequest) => Buffer,
          def.responseDeserialize as (b: Buffer) => GetServerInfoResponse,
          GetServerInfoRequest.fromPartial({}),
          new Metadata(),
          options.deadline === undefined ? {} : { deadline: options.deadline },
          (err, info) => resolve(err ? undefined : info),
        );
      }).then((info) => {
        this.#info = info ?? last;
        if (info === undefined) this.#stale = true;
        return this.#info;
      });
      this.#info = ask;
    }
    return this.#info;
  }

  /**
   * Sends request of server-streaming RPC method ("getCheckpoint") and
   * returns the messages of its stream, in order: empty when it streamed
   * none (no such checkpoint). Rejects as call does, with the error that
   * ended the stream (even after some messages came), or Unsupported. Only
   * for a method carries says the daemon carries: an older daemon answers
   * INVALID_ARGUMENT.
   */
  callStreamed<R>(method: string, request: unknown, options: StreamCallOptions = {}): Promise<R[]> {
    if (!STREAMED.has(method)) return Promise.reject(new TypeError(`savepoint: ${method} is not a server-streaming RPC CallStream carries`));
    return this.#send<R[]>(method, request, options, []);
  }

  /** Sends one call, a server-streaming one when messages (its collection) is given. */
  #send<R>(method: string, request: unknown, options: StreamCallOptions, messages: unknown[] | undefined): Promise<R> {
    const open = this.#stream();
    const id = this.#next++;
    return new Promise<R>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        open.pending.delete(id);
        if (timer) clearTimeout(timer);
        options.signal?.removeEventListener("abort", abort);
      };
      const abort = () => {
        done();
        reject(serviceError(Code.CANCELLED, "Cancelled on client"));
      };
      open.pending.set(id, {
        messages,
        resolve: (v) => {
          done();
          resolve(v as R);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      if (options.deadline !== undefined) {
        timer = setTimeout(() => {
          done();
          reject(serviceError(Code.DEADLINE_EXCEEDED, "Deadline exceeded"));
        }, Math.max(0, new Date(options.deadline).getTime() - Date.now()));
      }
      if (options.signal?.aborted) return abort();
      options.signal?.addEventListener("abort", abort, { once: true });
      // The request is already a whole message of its type: set, not copied.
      const env = CallStreamRequest.fromPartial({ id });
      (env as unknown as Record<Field, unknown>)[method as Field] = request;
      open.call.write(env);
    });
  }

  /** Ends the stream: calls in flight fail. */
  close(): void {
    const open = this.#open;
    this.#open = undefined;
    open?.call.cancel();
  }
}
