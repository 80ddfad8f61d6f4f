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
 */
import { type Client as GrpcClient, type ClientDuplexStream, Metadata, type ServiceError, status as Code } from "@grpc/grpc-js";

import { Status } from "./gen/google/rpc/status.js";
import { CallStreamRequest, CallStreamResponse, CallStreamServiceService } from "./gen/savepoint/v1/stream.js";

/** Thrown by CallStream.call when the daemon serves no CallStream; the call was not handled. */
export class Unsupported extends Error {}

/** The field of CallStreamRequest (and CallStreamResponse) of each RPC it carries, by method name ("saveCheckpoint"). */
type Field = keyof Omit<CallStreamRequest, "id">;

/** A call's failure as a unary call would report it. */
function serviceError(code: number, details: string, statusBytes?: Uint8Array): ServiceError {
  const md = new Metadata();
  if (statusBytes && statusBytes.length > 0) md.set("grpc-status-details-bin", Buffer.from(statusBytes));
  return Object.assign(new Error(`${code} ${Code[code] ?? ""}: ${details}`), { code, details, metadata: md });
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
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
      open.pending.delete(resp.id);
      if (resp.error !== undefined) {
        let st: Status;
        try {
          st = Status.decode(resp.error);
        } catch {
          p.reject(serviceError(Code.INTERNAL, "undecodable CallStream error"));
          return;
        }
        p.reject(serviceError(st.code, st.message, resp.error));
        return;
      }
      for (const [k, v] of Object.entries(resp)) {
        if (k !== "id" && k !== "error" && v !== undefined) {
          p.resolve(v);
          return;
        }
      }
      p.reject(serviceError(Code.INTERNAL, "the daemon answered a CallStream call with nothing"));
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
  call<R>(method: string, request: unknown, options: { deadline?: Date | number; signal?: AbortSignal } = {}): Promise<R> {
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
