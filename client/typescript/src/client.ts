import { readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";

import {
  type ChannelCredentials,
  type Client as GrpcClient,
  type ChannelOptions,
  type ClientUnaryCall,
  connectivityState,
  credentials,
  Metadata,
  type ServiceError,
  status as Code,
} from "@grpc/grpc-js";

import { defaultAddr, grpcTarget, parseAddr } from "./addr.js";
import { sentence, translate, UnavailableError } from "./errors.js";
import {
  BeginEffectRequest,
  CompleteSessionRequest,
  DeleteSessionRequest,
  type DeepPartial,
  ForkSessionRequest,
  GetServerInfoRequest,
  GetSessionRequest,
  ListEffectsRequest,
  ListMessagesRequest,
  ListSessionsRequest,
  ReconcileRequest,
  RecordEffectRequest,
  ResumeRequest,
  ResolveEffectRequest,
  ApproveEffectRequest,
  type ApproveEffectResponse,
  ApprovalStatus,
  RewindSessionRequest,
  SaveCheckpointRequest,
  SavepointServiceClient,
  SavepointServiceService,
  VerifyRequest,
} from "./gen/savepoint/v1/savepoint.js";
import { type Autostart, resolveAddress } from "./autostart.js";
import {
  GraphCheckpointServiceClient,
  GraphCheckpointServiceService,
  ResolveThreadEffectRequest,
  type ResolveThreadEffectResponse,
  ApproveThreadEffectRequest,
  type ApproveThreadEffectResponse,
} from "./gen/savepoint/v1/graph.js";
import { discardLogger, type Logger } from "./log.js";
import { RETRY_RULES } from "./retry_rules.js";
import { Session } from "./session.js";
import { CallStream, Unsupported } from "./stream.js";
import { anthropicToolResults } from "./tool.js";
import { SessionWatch, type WatchOptions } from "./watch.js";
import type {
  CallOptions,
  ClientConfig,
  Method,
  RawClient,
  Req,
  Res,
  ResumeOptions,
  StartOptions,
  ToolEvent,
  ToolResult,
  ToolResultsFunc,
  ToolUse,
} from "./types.js";

type Service = typeof SavepointServiceService;

/** The unary methods of SavepointService, in the generated order. */
export const unaryMethods = (Object.keys(SavepointServiceService) as (keyof Service)[]).filter(
  (m) => !SavepointServiceService[m].responseStream,
) as Method[];

/**
 * How often a call that failed with UNAVAILABLE (the daemon is down or
 * restarting) is tried again. Only calls that are safe to repeat are
 * retried: saveCheckpoint when it carries a request_id (the retry carries the
 * same one, so the daemon applies the save once), beginEffect (a repeat
 * returns the same key), recordEffect (the same record again is accepted),
 * resume (a repeat only takes ownership again) and the reads. deleteSession
 * is never retried.
 */
export interface RetryPolicy {
  /** Counts the first try; 1 or less disables retries. */
  maxAttempts: number;
  /** The wait before the first retry in ms; it doubles on each retry up to maxBackoffMs, less up to 20% random jitter. */
  initialBackoffMs: number;
  /** The longest wait in ms; 0 means no bound. */
  maxBackoffMs: number;
  /**
   * Keeps retrying a retry-safe call past maxAttempts, each retry maxBackoffMs apart, while its wait ends within
   * budgetMs of the call's first failure (and before its deadline): long enough, the call outlasts a failover of
   * savepointd's database (NO_WRITABLE_HOST, COMMIT_OUTCOME_UNKNOWN) or a restart of the daemon. 0 or unset leaves
   * maxAttempts alone to bound the retries.
   */
  budgetMs?: number;
}

/**
 * The policy used unless DialOptions.retry says otherwise, as the Go client's: 5 attempts over about 1.5 seconds,
 * then retries a second apart until 10 seconds after the first failure. The budget covers a PostgreSQL failover as
 * `make failover` measures it (the longest time without a writable host it has seen is 8.3 s; docs/reliability-postgres.md).
 */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 5,
  initialBackoffMs: 100,
  maxBackoffMs: 1000,
  budgetMs: 10_000,
});

/** Says whether a retry-safe call that failed on try attempt (from 0), first at failedAt (ms), is tried again after wait ms. */
export function retryAgain(p: RetryPolicy, attempt: number, failedAt: number, wait: number): boolean {
  if (attempt + 1 < Math.max(1, p.maxAttempts)) return true;
  const budget = p.budgetMs ?? 0;
  return budget > 0 && Date.now() + wait - failedAt <= budget;
}

/** The wait before retry number retry (from 0), the Go client's formula. */
export function retryBackoff(p: RetryPolicy, retry: number): number {
  let d = p.initialBackoffMs;
  for (let i = 0; i < retry; i++) {
    d *= 2;
    if (p.maxBackoffMs > 0 && d >= p.maxBackoffMs) {
      d = p.maxBackoffMs;
      break;
    }
  }
  if (d <= 0) return 0;
  return d - Math.random() * (d / 5);
}

/**
 * Says whether repeating a call that may have been applied is harmless, as
 * its RPC declares in the proto (RETRY_RULES, written from it by make
 * generate); path is the full method name. An RPC the table lacks is not.
 */
export function retrySafe(path: string, request: unknown): boolean {
  switch (RETRY_RULES[path]) {
    case "always":
      return true;
    case "requestId":
      return ((request as { requestId?: string } | undefined)?.requestId ?? "") !== "";
  }
  return false;
}

/** TLS for the connection to savepointd. */
export interface TlsOptions {
  /** PEM root certificates to verify the daemon with; unset uses the system's. */
  ca?: Buffer;
  /** A PEM client certificate chain and its key, for mutual TLS; both or neither. */
  cert?: Buffer;
  key?: Buffer;
  /** The name to verify the daemon's certificate against; unset is the address's host ("localhost" for a unix socket). */
  serverName?: string;
}

/** The environment variables that turn on TLS when DialOptions.tls is not given: PEM file paths. */
export const ENV_TLS_CA = "SAVEPOINT_TLS_CA";
export const ENV_TLS_CERT = "SAVEPOINT_TLS_CERT";
export const ENV_TLS_KEY = "SAVEPOINT_TLS_KEY";

/**
 * Returns the TLS options of $SAVEPOINT_TLS_CA, $SAVEPOINT_TLS_CERT and
 * $SAVEPOINT_TLS_KEY (PEM file paths), or undefined when none is set
 * (plaintext). CERT and KEY go together; a file that cannot be read throws.
 */
export function tlsFromEnv(env: NodeJS.ProcessEnv = process.env): TlsOptions | undefined {
  const ca = env[ENV_TLS_CA] || undefined;
  const cert = env[ENV_TLS_CERT] || undefined;
  const key = env[ENV_TLS_KEY] || undefined;
  if (!ca && !cert && !key) return undefined;
  if (!cert !== !key) throw new Error(`savepoint: ${ENV_TLS_CERT} and ${ENV_TLS_KEY} must be set together.`);
  const read = (name: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`savepoint: ${name}=${path}: ${sentence((err as Error).message)}`, { cause: err });
    }
  };
  return { ca: read(ENV_TLS_CA, ca), cert: read(ENV_TLS_CERT, cert), key: read(ENV_TLS_KEY, key) };
}

/** How long a call waits for the connection to the daemon to be (re)established, unless DialOptions.reconnectWaitMs says otherwise. */
export const DEFAULT_RECONNECT_WAIT_MS = 5000;

/** Options of dial. */
export interface DialOptions {
  /** The policy for calls that fail with UNAVAILABLE (default DEFAULT_RETRY_POLICY). */
  retry?: RetryPolicy;
  /**
   * How long, in ms, a call waits for the connection to be ready before it
   * is sent (wait-for-ready), counted once per call across its retries and
   * cut short by the call's deadline or signal (default
   * DEFAULT_RECONNECT_WAIT_MS; 0 sends at once). After a daemon restart
   * gRPC reconnects only after its backoff (up to 2 s), which can outlast
   * the retries; the wait covers it, so the first call after an outage
   * succeeds. Waiting is safe for every call: nothing is sent until the
   * connection is ready.
   */
  reconnectWaitMs?: number;
  /**
   * Makes dial wait until the daemon accepts the connection, or signal
   * fires (then dial throws UnavailableError). By default dial returns at
   * once and the first call reports an unreachable daemon.
   */
  waitReady?: boolean;
  /** Bounds waitReady. */
  signal?: AbortSignal;
  /** TLS; false forces plaintext. Unset: tlsFromEnv(), plaintext when it gives none. */
  tls?: TlsOptions | false;
  /** grpc-js channel options, applied after the client's own (a short reconnect backoff), so they can override them. */
  channelOptions?: ChannelOptions;
  /**
   * Whether the unary calls go on one CallStream (docs/api.md) when the
   * daemon serves it; unary otherwise. Default true.
   */
  callStream?: boolean;
  /**
   * Where the client reports retries, reconcile decisions and ledger
   * failures. The default, discardLogger, writes nothing; consoleLogger()
   * writes lines to stderr. The client never logs payloads.
   */
  logger?: Logger;
  /** How sessions turn tool results into the message(s) pointB appends (default anthropicToolResults). */
  toolResults?: ToolResultsFunc;
  /**
   * Called, besides an error log, whenever a tool ran but its outcome could
   * not be written to the ledger. Such a tool's result is still the real one
   * (see Session.runTool).
   */
  onLedgerError?: (call: ToolUse, result: ToolResult, err: unknown) => void;
  /**
   * The names of the tools that require a person's approval: a call of one
   * is begun (beginEffect with requiresApproval) only against an approval
   * for that exact call and input, which the begin spends once. Without one,
   * runTool and reconcile throw AwaitingApprovalError (the tool did not
   * run); after a denial the result is the approver's note, isError, with
   * decision DECISION_DENIED, recorded as refused so later resumes reuse it.
   */
  approvalRequired?: Iterable<string>;
  /**
   * Called at each stage of every tool use a Session runs or reconciles,
   * synchronously, before the session goes on. It observes and cannot change
   * what happens: for logging, tracing and crash tests, which can stop the
   * process at an exact moment of the protocol. A stage is reported only
   * once its step succeeded.
   */
  toolHook?: (ev: ToolEvent) => void;
}

const requestTypes: { [M in Method]: { fromPartial(o: DeepPartial<Req<M>>): Req<M> } } = {
  saveCheckpoint: SaveCheckpointRequest,
  beginEffect: BeginEffectRequest,
  recordEffect: RecordEffectRequest,
  resume: ResumeRequest,
  reconcile: ReconcileRequest,
  getSession: GetSessionRequest,
  listMessages: ListMessagesRequest,
  listSessions: ListSessionsRequest,
  deleteSession: DeleteSessionRequest,
  verify: VerifyRequest,
  getServerInfo: GetServerInfoRequest,
  completeSession: CompleteSessionRequest,
  listEffects: ListEffectsRequest,
  forkSession: ForkSessionRequest,
  rewindSession: RewindSessionRequest,
  resolveEffect: ResolveEffectRequest,
  approveEffect: ApproveEffectRequest,
} as never;

/** A constructor of a generated grpc-js service client, such as graphPb.GraphCheckpointServiceClient. */
export type ServiceClientConstructor<T> = new (address: string, credentials: ChannelCredentials, options?: ChannelOptions) => T;

/**
 * Makes a grpc-js client of any generated service of savepointd, such as
 * graphPb.GraphCheckpointServiceClient, connected as dial connects: addr
 * ("" or undefined: defaultAddr()) parsed and resolved as every Savepoint
 * client does, TLS from options or the environment, the same short
 * reconnect backoff. It does not wait for the daemon; close it when done.
 */
export function serviceClient<T>(ctor: ServiceClientConstructor<T>, addr?: string, options: Pick<DialOptions, "tls" | "channelOptions"> = {}): T {
  const ep = parseAddr(addr || defaultAddr());
  const tls = options.tls === undefined ? tlsFromEnv() : options.tls || undefined;
  let creds: ChannelCredentials = credentials.createInsecure();
  const channelOptions: ChannelOptions = {
    // A local daemon restarts in moments: reconnect soon, not after gRPC's
    // default of up to two minutes.
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 2000,
  };
  if (tls) {
    creds = credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null);
    if (tls.serverName) channelOptions["grpc.ssl_target_name_override"] = tls.serverName;
  }
  return new ctor(grpcTarget(ep), creds, { ...channelOptions, ...options.channelOptions });
}

/**
 * Connects to savepointd at addr: "unix:PATH" or "HOST:PORT"; "" or
 * undefined means defaultAddr(). The connection is plaintext unless TLS is
 * given or set in the environment (tlsFromEnv). Unless waitReady is set,
 * dial does not wait for the daemon. Close the client when done.
 *
 * With no address chosen (none given, no SAVEPOINT_ADDR) and nothing
 * answering at the per-user default, dial starts savepointd there on demand
 * (the platform package's, SAVEPOINTD_PATH, else savepointd on PATH),
 * detached, and waits until it reports SERVING; a call that later finds it
 * gone starts it again. SAVEPOINT_AUTOSTART=0 turns this off
 * (docs/install.md).
 */
export async function dial(addr?: string, options: DialOptions = {}): Promise<Client> {
  const { address, autostart: auto } = await resolveAddress(addr);
  const stub = serviceClient(SavepointServiceClient, address, options);
  const c = new Client(stub, address, options, auto);
  if (options.waitReady) {
    try {
      await c.waitReady(options.signal);
    } catch (err) {
      c.close();
      throw err;
    }
  }
  return c;
}

/** A connection to savepointd, shared by the sessions made from it. */
export class Client {
  /** The generated calls through this client's retries and error translation. */
  readonly raw: RawClient;
  /** The address dialed. */
  readonly addr: string;
  /** @internal */
  readonly config: ClientConfig;
  readonly #stub: SavepointServiceClient;
  readonly #retry: RetryPolicy;
  readonly #reconnectWaitMs: number;
  readonly #autostart: Autostart | undefined;
  readonly #options: DialOptions;
  /** GraphCheckpointService on the same address, made on first use. */
  #graph: GraphCheckpointServiceClient | undefined;
  /** The CallStream on #stub's channel; undefined with callStream false. */
  readonly #stream: CallStream | undefined;

  /** @internal Use dial. */
  constructor(stub: SavepointServiceClient, addr: string, options: DialOptions, autostart?: Autostart) {
    this.#stub = stub;
    this.#options = options;
    this.#autostart = autostart;
    this.addr = addr;
    this.#retry = { ...(options.retry ?? DEFAULT_RETRY_POLICY) };
    this.#reconnectWaitMs = Math.max(0, options.reconnectWaitMs ?? DEFAULT_RECONNECT_WAIT_MS);
    this.#stream = options.callStream === false ? undefined : new CallStream(stub);
    this.config = {
      logger: options.logger ?? discardLogger,
      toolResults: options.toolResults ?? anthropicToolResults,
      onLedgerError: options.onLedgerError,
      toolHook: options.toolHook,
      approvalRequired: new Set(options.approvalRequired ?? []),
    };
    const raw: Partial<Record<Method, unknown>> = {};
    for (const m of unaryMethods) {
      raw[m] = (request: DeepPartial<Req<typeof m>>, opts?: CallOptions) =>
        this.#invoke(m, requestTypes[m].fromPartial(request as never), opts);
    }
    this.raw = raw as RawClient;
  }

  /** Closes the connection; calls in flight fail. */
  close(): void {
    this.#stream?.close();
    this.#stub.close();
    this.#graph?.close();
  }

  /**
   * ResolveThreadEffect (docs/api.md): records what was found about a graph
   * thread's call in doubt, as the Go client's ResolveThreadEffect does.
   * request.output must be serialized as the client that ran the tool
   * serializes outputs. A request without a requestId gets a fresh one, so
   * the call is retried while the daemon is unavailable, as ResolveEffect is.
   */
  resolveThreadEffect(request: Partial<ResolveThreadEffectRequest>, options: CallOptions = {}): Promise<ResolveThreadEffectResponse> {
    const req = ResolveThreadEffectRequest.fromPartial({ ...request, requestId: request.requestId || randomUUID() });
    const def = GraphCheckpointServiceService.resolveThreadEffect;
    this.#graph ??= serviceClient(GraphCheckpointServiceClient, this.addr, this.#options);
    const stub = this.#graph;
    return this.#retrying(def.path, req, options, () => unaryCall(stub, def, req, options));
  }

  /**
   * ApproveEffect (docs/api.md): approves (or with deny, denies) a tool use
   * of a session that waits for approval, as a person (no epoch), with a
   * fresh request id so that it is retried while the daemon is unavailable.
   * The approval holds for the call and its input only (inputDigest, when
   * given, must be the digest the call waits with); the begin that uses it
   * spends it. A denial's note is the tool result the model is given.
   */
  approveEffect(
    sessionId: string,
    toolUseId: string,
    decision: { deny?: boolean; note?: string; decidedBy?: string; inputDigest?: Uint8Array } = {},
    options: CallOptions = {},
  ): Promise<ApproveEffectResponse> {
    return this.raw.approveEffect(
      {
        sessionId,
        toolUseId,
        decision: decision.deny ? ApprovalStatus.APPROVAL_STATUS_DENIED : ApprovalStatus.APPROVAL_STATUS_APPROVED,
        note: decision.note ?? "",
        decidedBy: decision.decidedBy ?? "",
        inputDigest: Buffer.from(decision.inputDigest ?? new Uint8Array()),
        requestId: randomUUID(),
      },
      options,
    );
  }

  /**
   * ApproveThreadEffect (docs/api.md): approves or denies a graph thread's
   * call that waits for approval, as the Go client's ApproveThreadEffect
   * does. A request without a requestId gets a fresh one, so the call is
   * retried while the daemon is unavailable.
   */
  approveThreadEffect(request: Partial<ApproveThreadEffectRequest>, options: CallOptions = {}): Promise<ApproveThreadEffectResponse> {
    const req = ApproveThreadEffectRequest.fromPartial({ ...request, requestId: request.requestId || randomUUID() });
    const def = GraphCheckpointServiceService.approveThreadEffect;
    this.#graph ??= serviceClient(GraphCheckpointServiceClient, this.addr, this.#options);
    const stub = this.#graph;
    return this.#retrying(def.path, req, options, () => unaryCall(stub, def, req, options));
  }

  /**
   * Creates a fresh session (revision 1, turn 0) and owns it. An existing
   * session with the same id makes it throw SessionExistsError, unless
   * options.replace deletes it first.
   */
  start(id: string, task: string, options: StartOptions = {}, call?: CallOptions): Promise<Session> {
    return Session.start(this, id, task, options, call);
  }

  /**
   * Takes ownership of an existing session (fencing any process that owned
   * it before) and loads its latest revision with its whole history. A
   * session that does not exist is SessionNotFoundError: nothing to resume
   * from. If it has pending tool uses, call reconcile and then pointB. A
   * completed or failed session is loaded as it is; options.reopen makes it
   * active again so that it continues.
   */
  resume(id: string, options: ResumeOptions = {}, call: CallOptions = options): Promise<Session> {
    return Session.resume(this, id, options.reopen === true, { signal: call.signal, deadline: call.deadline });
  }

  /**
   * Watches the sessions that change (WatchSessions, docs/api.md): for
   * `for await`, a HEARTBEAT first, once the daemon has registered the
   * watch (list the sessions after it and apply the events from there),
   * then CHANGED with a selected session's summary after each durable
   * change, REMOVED when the filters stop selecting a session or it is
   * deleted, RESYNC when events were dropped, and a HEARTBEAT every
   * heartbeatIntervalMs in which nothing else was sent. The filters are
   * ListSessions'; the daemon checks them when the iteration starts. The
   * watch has no deadline and is not retried: it ends with UnavailableError
   * when the daemon stops (watch again once it is back), or when the loop
   * is left, close() is called, or options.signal fires (CanceledError).
   */
  watchSessions(options: WatchOptions = {}): SessionWatch {
    return new SessionWatch((request) => this.#stub.watchSessions(request), options);
  }

  /** Waits until the connection is ready, or signal fires (UnavailableError). */
  async waitReady(signal?: AbortSignal): Promise<void> {
    const state = await this.#ready(Infinity, signal);
    if (state !== connectivityState.READY) {
      throw new UnavailableError({
        code: Code.UNAVAILABLE,
        message: `savepointd at ${this.addr} not ready (last state ${connectivityState[state]})`,
      });
    }
  }

  #ready(by: number, signal?: AbortSignal): Promise<connectivityState> {
    return channelReady(this.#stub.getChannel(), by, signal);
  }

  /**
   * Runs one call: it is retried while it fails with UNAVAILABLE if
   * retrySafe says so, with the request unchanged (so a SaveCheckpoint
   * retry carries its original request_id), and its final error translated.
   */
  #invoke<M extends Method>(method: M, request: Req<M>, options: CallOptions = {}): Promise<Res<M>> {
    const def = SavepointServiceService[method];
    return this.#retrying(def.path, request, options, () => this.#send(method, request, options) as Promise<Res<M>>);
  }

  /** One try of a call: on the CallStream when the daemon serves one, else unary. */
  async #send<M extends Method>(method: M, request: Req<M>, options: CallOptions): Promise<unknown> {
    const def = SavepointServiceService[method];
    if (this.#stream?.supported) {
      try {
        return await this.#stream.call(method, request, options);
      } catch (err) {
        if (!(err instanceof Unsupported)) throw err;
        // never handled: send it unary
      }
    }
    return unaryCall(this.#stub, def, request, options);
  }

  /** Runs once, retried while it fails with UNAVAILABLE if retrySafe(path, request) says so, as #invoke says. */
  async #retrying<T>(path: string, request: unknown, options: CallOptions, once: () => Promise<T>): Promise<T> {
    const def = { path };
    const safe = retrySafe(path, request);
    let failedAt: number | undefined;
    // One bound for the whole call: its wait for the connection, before each try.
    let readyBy = Date.now() + this.#reconnectWaitMs;
    if (options.deadline !== undefined) readyBy = Math.min(readyBy, new Date(options.deadline).getTime());
    for (let attempt = 0; ; attempt++) {
      if (this.#reconnectWaitMs > 0) await this.#ready(readyBy, options.signal);
      try {
        return await once();
      } catch (err) {
        // The daemon started on demand is gone: start it again, so that this
        // call's retry, or the next call, finds one.
        if (this.#autostart && (err as ServiceError).code === Code.UNAVAILABLE) {
          await this.#autostart.ensure();
          // The wait for the connection counts from the daemon's start.
          readyBy = Math.max(readyBy, Date.now() + this.#reconnectWaitMs);
          if (options.deadline !== undefined) readyBy = Math.min(readyBy, new Date(options.deadline).getTime());
        }
        if (!safe || (err as ServiceError).code !== Code.UNAVAILABLE) throw translate(err);
        failedAt ??= Date.now();
        const wait = retryBackoff(this.#retry, attempt);
        if (!retryAgain(this.#retry, attempt, failedAt, wait)) throw translate(err);
        this.config.logger.warn("savepoint: daemon unavailable, retrying", {
          method: def.path,
          attempt: attempt + 2,
          in: `${Math.round(wait)}ms`,
          err: (err as ServiceError).details,
        });
        if (!(await sleep(wait, options))) throw translate(err);
      }
    }
  }

}


/** One unary call of def on a grpc-js client, cancelled when options.signal fires. */
function unaryCall<Q, R>(
  stub: GrpcClient,
  def: { path: string; requestSerialize: unknown; responseDeserialize: unknown },
  request: Q,
  options: CallOptions,
): Promise<R> {
  return new Promise((resolve, reject) => {
    const grpcOptions = options.deadline === undefined ? {} : { deadline: options.deadline };
    const call: ClientUnaryCall = stub.makeUnaryRequest(
      def.path,
      def.requestSerialize as (v: Q) => Buffer,
      def.responseDeserialize as (b: Buffer) => R,
      request,
      new Metadata(),
      grpcOptions,
      (err, response) => {
        options.signal?.removeEventListener("abort", cancel);
        if (err) reject(err);
        else resolve(response as R);
      },
    );
    const cancel = () => call.cancel();
    if (options.signal?.aborted) call.cancel();
    else options.signal?.addEventListener("abort", cancel, { once: true });
  });
}

/**
 * Waits until a grpc-js channel is READY, the time by (ms since the epoch)
 * passes, or signal fires, asking the channel to connect; returns the last
 * state seen. Client calls wait so before each try (reconnectWaitMs).
 */
export async function channelReady(channel: ReturnType<GrpcClient["getChannel"]>, by: number, signal?: AbortSignal): Promise<connectivityState> {
  for (;;) {
    const state = channel.getConnectivityState(true);
    if (state === connectivityState.READY || state === connectivityState.SHUTDOWN || signal?.aborted || Date.now() >= by) return state;
    // Wake at least every 100 ms to notice signal.
    await new Promise<void>((resolve) => channel.watchConnectivityState(state, Math.min(by, Date.now() + 100), () => resolve()));
  }
}

/** Waits ms; false if the call's signal fired or its deadline would pass first. */
function sleep(ms: number, options: CallOptions): Promise<boolean> {
  const { signal, deadline } = options;
  if (signal?.aborted) return Promise.resolve(false);
  if (deadline !== undefined && new Date(deadline).getTime() < Date.now() + ms) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(ok);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

