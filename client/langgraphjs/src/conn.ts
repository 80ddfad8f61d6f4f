import { type ClientWritableStream, connectivityState, type ServiceError, status as Code } from "@grpc/grpc-js";
import {
  type Autostart,
  CallStream,
  CallStreamUnsupported,
  channelReady,
  type Client,
  dial,
  DEFAULT_RECONNECT_WAIT_MS,
  DEFAULT_RETRY_POLICY,
  defaultAddr,
  graphPb,
  resolveAddress,
  retryAgain,
  retryBackoff,
  type RetryPolicy,
  retrySafe,
  serviceClient,
  type TlsOptions,
  translate,
  UnavailableError,
} from "@savepoint-dev/client";

/** The daemon's default --max-request-bytes. */
export const DEFAULT_MAX_REQUEST_BYTES = 4 << 20;

/** How the saver reaches savepointd. */
export interface SaverOptions {
  /**
   * "unix:PATH" or "HOST:PORT"; unset resolves as the TypeScript client's dial does (resolveAddress): $SAVEPOINT_ADDR, else
   * the per-user default when a daemon answers there, else the system's daemon (/run/savepoint/savepoint.sock) when one
   * answers there, else the per-user default after starting savepointd there on demand, at the first call.
   */
  address?: string;
  /** TLS; false forces plaintext. Unset: the SAVEPOINT_TLS_* environment variables, plaintext when none is set. */
  tls?: TlsOptions | false;
  /** The policy for calls that fail with UNAVAILABLE (default: the client's DEFAULT_RETRY_POLICY); a call is retried only where its RPC's declaration in the proto allows it (retryable). */
  retry?: RetryPolicy;
  /** How long a call waits for the connection to be ready before each try, in ms, counted once per call (default 5000; 0 sends at once). */
  reconnectWaitMs?: number;
  /** Whether the unary calls go on one CallStream (docs/api.md) when the daemon serves it; unary otherwise. Default true. */
  callStream?: boolean;
}

/** A GraphCheckpointService method, by its name on the generated stub. */
export type GraphMethod = keyof typeof graphPb.GraphCheckpointServiceService;

/**
 * Says whether a call of method carrying request may be sent again after
 * it failed with UNAVAILABLE: the TypeScript client's retrySafe, read from
 * the RPC's declaration in the proto (idempotency_level and
 * retry_with_request_id), so that the saver and the client never disagree.
 */
export function retryable(method: GraphMethod, request: unknown): boolean {
  return retrySafe(graphPb.GraphCheckpointServiceService[method].path, request);
}

/**
 * One grpc-js channel to the daemon's GraphCheckpointService, with the client's retries and error classes. The
 * address is resolved, and the channel made, at the first call (or waitReady), by the TypeScript client's
 * resolveAddress, since that may start the daemon; the constructor never waits.
 */
export class Connection {
  readonly #address: string | undefined;
  readonly #retry: RetryPolicy;
  readonly #waitMs: number;
  readonly #tls: TlsOptions | false | undefined;
  readonly #callStream: boolean;
  #limit: number | undefined;
  /** The resolution's outcome, once made: the address, its autostart, the stub and its CallStream. */
  #conn: { address: string; autostart: Autostart | undefined; stub: graphPb.GraphCheckpointServiceClient; stream: CallStream | undefined } | undefined;
  #connecting: Promise<void> | undefined;
  #closed = false;

  constructor(o: SaverOptions = {}) {
    this.#address = o.address || undefined;
    this.#tls = o.tls;
    this.#retry = { ...(o.retry ?? DEFAULT_RETRY_POLICY) };
    this.#waitMs = Math.max(0, o.reconnectWaitMs ?? DEFAULT_RECONNECT_WAIT_MS);
    this.#callStream = o.callStream !== false;
  }

  /** The daemon's address: the one resolved once the first call made the connection, the address given (else defaultAddr()) before. */
  get address(): string {
    return this.#conn?.address ?? this.#address ?? defaultAddr();
  }

  /** The stub of the connection the first call made; call, unary, upload and waitReady make it first. */
  get stub(): graphPb.GraphCheckpointServiceClient {
    if (this.#conn === undefined) throw new Error("savepoint: the connection is used before a call made it");
    return this.#conn.stub;
  }

  /** Resolves the address (starting the daemon on demand) and makes the channel, once; a failure is tried again by the next call. */
  #connect(): Promise<void> {
    if (this.#conn !== undefined) return Promise.resolve();
    this.#connecting ??= (async () => {
      try {
        const { address, autostart } = await resolveAddress(this.#address);
        if (this.#closed) throw new UnavailableError({ code: Code.UNAVAILABLE, message: "savepoint: the connection was closed" });
        // The client's grpc-js makes the channel, so that one copy of grpc-js serves both.
        const stub = serviceClient(graphPb.GraphCheckpointServiceClient, address, { tls: this.#tls });
        this.#conn = { address, autostart, stub, stream: this.#callStream ? new CallStream(stub) : undefined };
      } finally {
        this.#connecting = undefined;
      }
    })();
    return this.#connecting;
  }

  /** Whether the calls go on a CallStream: false once the daemon answered UNIMPLEMENTED. */
  get streaming(): boolean {
    return this.#conn?.stream?.supported === true;
  }

  close(): void {
    this.#closed = true;
    this.#conn?.stream?.close();
    this.#conn?.stub.close();
  }

  /**
   * The daemon's --max-request-bytes, asked once with GetServerInfo;
   * MAX_REQUEST_BYTES, the default, while it cannot be asked.
   */
  async requestLimit(): Promise<number> {
    if (this.#limit !== undefined) return this.#limit;
    let c: Client | undefined;
    try {
      await this.#connect();
      c = await dial(this.address, { tls: this.#tls, retry: this.#retry, reconnectWaitMs: this.#waitMs });
      const n = Number((await c.raw.getServerInfo({})).maxRequestBytes);
      if (n > 0) this.#limit = n;
      return n > 0 ? n : DEFAULT_MAX_REQUEST_BYTES;
    } catch {
      return DEFAULT_MAX_REQUEST_BYTES;
    } finally {
      c?.close();
    }
  }

  /**
   * Runs attempt, a call of method sending request, until it succeeds,
   * retrying while it fails with UNAVAILABLE (the same request each time)
   * when retryable(method, request) says so, after waiting for the
   * connection; the final error is a SavepointError of its reason's class.
   * attempt must not have yielded anything to the caller before it failed.
   */
  async call<T>(method: GraphMethod, request: unknown, attempt: () => Promise<T>): Promise<T> {
    await this.#connect();
    const autostart = this.#conn?.autostart;
    let readyBy = Date.now() + this.#waitMs;
    const safe = retryable(method, request);
    let failedAt: number | undefined;
    for (let i = 0; ; i++) {
      if (this.#waitMs > 0) await this.#ready(readyBy);
      try {
        return await attempt();
      } catch (err) {
        if (autostart && (err as ServiceError).code === Code.UNAVAILABLE) {
          // Nothing answers: start the daemon again, and count the wait
          // for the connection from then.
          await autostart.ensure();
          readyBy = Math.max(readyBy, Date.now() + this.#waitMs);
        }
        if (!safe || (err as ServiceError).code !== Code.UNAVAILABLE) throw translate(err);
        failedAt ??= Date.now();
        const wait = retryBackoff(this.#retry, i);
        if (!retryAgain(this.#retry, i, failedAt, wait)) throw translate(err);
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /**
   * A unary call of the stub's method, as a promise: on the CallStream when
   * the daemon serves one, else unary (a daemon without one never handled
   * the call).
   */
  unary<Req, Res>(method: GraphMethod, req: Req): Promise<Res> {
    const once = () => {
      // The stub exists once call() has made the connection.
      const fn = this.stub[method] as unknown as (req: Req, cb: (err: ServiceError | null, res: Res) => void) => unknown;
      return new Promise<Res>((resolve, reject) => fn.call(this.stub, req, (err, res) => (err ? reject(err) : resolve(res))));
    };
    return this.call(method, req, async () => {
      const stream = this.#conn?.stream;
      if (stream?.supported) {
        try {
          return await stream.call<Res>(method, req);
        } catch (err) {
          if (!(err instanceof CallStreamUnsupported)) throw err;
        }
      }
      return once();
    });
  }

  /**
   * The messages of a server-streaming call of the stub's method
   * (GetCheckpoint), as a promise, run as call runs it: on the CallStream
   * when the daemon carries the method (GetServerInfo's
   * call_stream_get_checkpoint, as CallStream.carries asks it), else as its
   * own RPC, whose messages are collected; empty for a stream of none.
   */
  read<Req, Res>(method: GraphMethod, req: Req): Promise<Res[]> {
    return this.call(method, req, async () => {
      const stream = this.#conn?.stream;
      if (stream && (await stream.carries(method))) {
        try {
          return await stream.callStreamed<Res>(method, req);
        } catch (err) {
          if (!(err instanceof CallStreamUnsupported)) throw err;
        }
      }
      // The stub exists once call() has made the connection.
      const fn = this.stub[method] as unknown as (req: Req) => AsyncIterable<Res>;
      const out: Res[] = [];
      for await (const msg of fn.call(this.stub, req)) out.push(msg);
      return out;
    });
  }

  /**
   * A client-streaming call of the stub's method (UploadCheckpoint,
   * UploadWrites), as a promise: each try sends the messages of a new
   * messages() one after another, waiting while grpc-js's buffer is full,
   * so that only a few chunks are queued at a time however large the
   * upload is; it stops sending once the daemon has answered. requestId is
   * the request id the upload's first message carries.
   */
  upload<Req, Res>(method: GraphMethod, requestId: string, messages: () => Iterator<Req>): Promise<Res> {
    return this.call(
      method,
      { requestId },
      () =>
        new Promise<Res>((resolve, reject) => {
          const fn = this.stub[method] as unknown as (cb: (err: ServiceError | null, res?: Res) => void) => ClientWritableStream<Req>;
          let done = false;
          const call = fn.call(this.stub, (err, res) => {
            done = true;
            if (err) reject(err);
            else resolve(res as Res);
          });
          const it = messages();
          const pump = (): void => {
            while (!done) {
              const next = it.next();
              if (next.done) {
                call.end();
                return;
              }
              if (!call.write(next.value)) {
                call.once("drain", pump);
                return;
              }
            }
          };
          pump();
        }),
    );
  }

  async #ready(by: number): Promise<void> {
    await channelReady(this.stub.getChannel(), by);
  }

  /** Waits until the connection is ready (making it first, which may start the daemon), or signal fires (then it throws UnavailableError). */
  async waitReady(signal?: AbortSignal): Promise<void> {
    await this.#connect();
    const state = await channelReady(this.stub.getChannel(), Infinity, signal);
    if (state !== connectivityState.READY) {
      throw new UnavailableError({ code: Code.UNAVAILABLE, message: `savepointd at ${this.address} not ready (last state ${connectivityState[state]})` });
    }
  }
}
