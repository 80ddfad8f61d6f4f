import { randomUUID } from "node:crypto";

import { status as Code } from "@grpc/grpc-js";

import {
  AlreadyRunError,
  CheckpointCorruptError,
  newError,
  NotRunError,
  ResultsMismatchError,
  SavepointError,
  SessionCompletedError,
  SessionExistsError,
  SessionFencedError,
  sentence,
  SessionNotFoundError,
  ToolUsesPendingError,
} from "./errors.js";
import {
  EffectClass,
  ErrorReason,
  SaveCheckpointRequest,
  SessionStatus,
  type Effect as PbEffect,
  type Resolution as PbResolution,
  type ToolUse as PbToolUse,
} from "./gen/savepoint/v1/savepoint.js";
import { reconcileSession } from "./reconcile.js";
import { annotate, ToolRuns } from "./run.js";
import { effectiveClass, fullToolUse, toolOutput } from "./tool.js";
import type { CallOptions, Message, ReconcileOptions, Registration, SaveOptions, SessionHost, StartOptions, ToolContent, ToolFunc, ToolResult, ToolUse } from "./types.js";

/** What each save sends whole and the session keeps between saves. */
interface Meta {
  task: string;
  turn: number;
  tokensUsed: bigint;
  stateJson: string;
  labels: Record<string, string>;
}

/**
 * One agent task as the daemon keeps it. It carries the session id,
 * revision, epoch, history and pending tool uses, so its methods need none of
 * them: every save builds on the revision the last one made, under the epoch
 * the session owns. Saves are serialized; runTool may run several tools of
 * one turn at once, but the turn's pointA, runTool calls and pointB must
 * happen in that order.
 */
export class Session {
  /** The session id. */
  readonly id: string;
  readonly #c: SessionHost;
  #revision = 0n;
  #epoch = 0n;
  #meta: Meta;
  #messages: Message[] = [];
  #count = 0n;
  #pending: PbToolUse[] = [];
  #status = SessionStatus.SESSION_STATUS_ACTIVE;
  #finalOutput = "";
  /** The last save whose outcome is unknown. */
  #failed: SaveCheckpointRequest | undefined;
  /** The pending tool uses this process began or ran, and their results. */
  readonly #runs: ToolRuns;
  /** The tail of the chain of saves, so that they run one at a time. */
  #lock: Promise<unknown> = Promise.resolve();

  private constructor(c: SessionHost, id: string, meta: Meta) {
    this.#c = c;
    this.id = id;
    this.#meta = meta;
    this.#runs = new ToolRuns(c, id);
  }

  /** @internal Client.start. */
  static async start(c: SessionHost, id: string, task: string, options: StartOptions, call?: CallOptions): Promise<Session> {
    const meta: Meta = { task, turn: 0, tokensUsed: 0n, stateJson: options.stateJson ?? "", labels: { ...options.labels } };
    const s = new Session(c, id, meta);
    const create = () => s.#save(meta, undefined, options.messages ?? [], [], call);
    try {
      await create();
    } catch (err) {
      let exists = err;
      if (err instanceof SessionFencedError || err instanceof SessionCompletedError) {
        // A create carries epoch 0, which the daemon fences once the
        // existing session has been resumed, and refuses on a completed
        // session: either way the session exists.
        exists = new SessionExistsError({
          code: err.code,
          reason: err.reason,
          message: `session ${JSON.stringify(id)} exists (resumed or completed): ${err.details}`,
          metadata: { ...err.metadata },
          cause: err,
        });
      }
      if (!(exists instanceof SessionExistsError) || !options.replace) throw exists;
      try {
        await deleteSession(c, id, call);
      } catch (e) {
        throw new Error(`savepoint: replacing session ${JSON.stringify(id)}: ${sentence((e as Error).message)}`, { cause: e });
      }
      await create();
    }
    return s;
  }

  /** @internal Client.resume. */
  static async resume(c: SessionHost, id: string, reopen: boolean, call?: CallOptions): Promise<Session> {
    const r = await c.raw.resume({ sessionId: id, reopen }, call);
    const cp = r.checkpoint;
    if (!cp) throw new Error(`savepoint: resume of ${JSON.stringify(id)} answered no checkpoint.`);
    const msgs: Message[] = cp.messages.map(toMessage);
    for (let token = r.nextPageToken; token !== ""; ) {
      let page;
      try {
        page = await c.raw.listMessages({ sessionId: id, revision: cp.revision, pageToken: token }, call);
      } catch (err) {
        throw annotate(err, `savepoint: loading the history of ${JSON.stringify(id)}`);
      }
      if (page.firstIndex !== BigInt(msgs.length) || (page.messages.length === 0 && page.nextPageToken !== "")) {
        throw new Error(
          `savepoint: loading the history of ${JSON.stringify(id)}: page at index ${page.firstIndex} with ${page.messages.length} messages after ${msgs.length} loaded.`,
        );
      }
      msgs.push(...page.messages.map(toMessage));
      token = page.nextPageToken;
    }
    if (BigInt(msgs.length) !== cp.messageCount) {
      throw new Error(
        `savepoint: loading the history of ${JSON.stringify(id)}: got ${msgs.length} messages, revision ${cp.revision} has ${cp.messageCount}.`,
      );
    }
    const s = new Session(c, id, {
      task: cp.task,
      turn: cp.turn,
      tokensUsed: cp.tokensUsed,
      stateJson: cp.stateJson,
      labels: { ...cp.labels },
    });
    s.#revision = cp.revision;
    s.#epoch = r.epoch;
    s.#messages = msgs;
    s.#count = cp.messageCount;
    s.#pending = cp.pendingToolUses.map((p) => ({ ...p }));
    s.#status = cp.status;
    s.#finalOutput = cp.finalOutput;
    return s;
  }

  /** The revision the session's last save made or loaded (a uint64, so a bigint). */
  get revision(): bigint {
    return this.#revision;
  }
  /** The epoch the session owns (a uint64, so a bigint). */
  get epoch(): bigint {
    return this.#epoch;
  }
  /** The number of messages in the history, as the daemon counted them (a uint64, so a bigint). */
  get messageCount(): bigint {
    return this.#count;
  }
  /** The task description. */
  get task(): string {
    return this.#meta.task;
  }
  /** The turn counter: pointA counts one turn. */
  get turn(): number {
    return this.#meta.turn;
  }
  /** The tokens used so far (a uint64, so a bigint). */
  get tokensUsed(): bigint {
    return this.#meta.tokensUsed;
  }
  /** The opaque client state, "" when none. */
  get stateJson(): string {
    return this.#meta.stateJson;
  }
  /** A copy of the labels. */
  get labels(): Record<string, string> {
    return { ...this.#meta.labels };
  }
  /** A copy of the whole history as the session knows it, ready to send to the model. */
  get messages(): Message[] {
    return this.#messages.map((m) => ({ ...m }));
  }
  /** The pending tool uses, in the order they were named. */
  get pending(): Required<ToolUse>[] {
    return this.#pending.map(fullToolUse);
  }

  /** The session's status: ACTIVE until complete, or as the resume loaded it. */
  get status(): SessionStatus {
    return this.#status;
  }
  /** The final output complete stored, "" while the session is active. */
  get finalOutput(): string {
    return this.#finalOutput;
  }

  /**
   * Ends the session with status COMPLETED (the task is done) or FAILED
   * (the agent gave up), storing finalOutput, under the epoch the session
   * owns; `savepoint ls` then shows it so. The history stays readable; saves
   * and beginEffect are refused until a resume with reopen. Completing again
   * with the same status and output changes nothing.
   */
  complete(status: SessionStatus.SESSION_STATUS_COMPLETED | SessionStatus.SESSION_STATUS_FAILED, finalOutput: string, call?: CallOptions): Promise<void> {
    return this.#serialized(async () => {
      const r = await this.#c.raw.completeSession(
        { sessionId: this.id, epoch: this.#epoch, status, finalOutput, requestId: randomUUID() },
        call,
      );
      this.#status = r.status;
      this.#finalOutput = finalOutput;
    });
  }

  /** Adds n to the tokens used, sent with the next save; n must be a non-negative integer. */
  addTokens(n: number | bigint): void {
    this.#meta.tokensUsed += BigInt(n);
  }

  /**
   * Point A: saves the assistant message that names calls and makes calls
   * the pending tool uses, before any of them runs; it counts a new turn.
   * Run each call with runTool, then answer them all with pointB. With no
   * calls (the model's final answer) it only appends the message.
   */
  pointA(assistant: Message, calls: ToolUse[], call?: CallOptions): Promise<void> {
    return this.#serialized(async () => {
      if (this.#pending.length > 0) throw new ToolUsesPendingError();
      const pending: PbToolUse[] = calls.map((c) => {
        const cls = effectiveClass(c.effectClass);
        return {
          toolUseId: c.toolUseId,
          name: c.name,
          inputJson: c.inputJson ?? "",
          effectClass: cls,
          // runTool and reconcile call beginEffect before running any tool
          // that is not read-only, so a call never begun is safe to run.
          beginTracked: cls !== EffectClass.EFFECT_CLASS_READ_ONLY,
          repeatable: c.repeatable ?? false,
        };
      });
      await this.#save({ ...this.#meta, turn: this.#meta.turn + 1 }, undefined, [assistant], pending, call);
    });
  }

  /**
   * Point B: appends the message(s) answering the pending tool uses, made
   * from results by the client's toolResults function, and clears the
   * pending set. The results must answer every pending tool use exactly once
   * (in any order; they are appended in the order the tool uses were named)
   * and come from runTool or reconcile. With nothing pending and no results,
   * it does nothing.
   */
  pointB(results: ToolResult[], call?: CallOptions): Promise<void> {
    return this.#serialized(async () => {
      if (this.#pending.length === 0 && results.length === 0) return;
      const byId = new Map<string, ToolResult>();
      for (const r of results) {
        if (byId.has(r.toolUseId)) throw new ResultsMismatchError(`tool use ${JSON.stringify(r.toolUseId)} answered twice`);
        byId.set(r.toolUseId, r);
      }
      const ordered: ToolResult[] = [];
      for (const p of this.#pending) {
        const r = byId.get(p.toolUseId);
        if (!r) throw new ResultsMismatchError(`no result for tool use ${JSON.stringify(p.toolUseId)} (${p.name})`);
        ordered.push({ ...r });
      }
      if (ordered.length !== results.length) {
        throw new ResultsMismatchError(`${results.length} results for ${this.#pending.length} pending tool uses`);
      }
      // A tool whose outcome missed the ledger: try once more, so that a
      // crash before this save does not leave it in doubt. Only an outcome
      // this session's runTool or reconcile got from the tool is recorded,
      // so a result made by hand never reaches the ledger ("execute first,
      // record after").
      for (const [i, r] of ordered.entries()) {
        if (r.ledgerError === undefined) continue;
        const p = this.#pending[i];
        const ran = this.#runs.ran.get(r.toolUseId);
        if (!ran || toolOutput(ran.content) !== toolOutput(r.content) || ran.isError !== r.isError) {
          throw new NotRunError(
            `pointB: tool use ${JSON.stringify(r.toolUseId)} (${p.name}) has a ledger error but its result is not the one this session's tool returned`,
          );
        }
        try {
          await this.#runs.record(p, r);
          ordered[i].ledgerError = undefined;
        } catch (err) {
          this.#runs.reportLedgerError(p, r, err);
        }
      }
      let msgs: Message[];
      try {
        msgs = this.#c.config.toolResults(ordered);
      } catch (err) {
        throw annotate(err, "savepoint: pointB: making the tool result messages");
      }
      await this.#save(this.#meta, undefined, msgs, [], call);
    });
  }

  /**
   * Makes a new revision with the changes in o. Pending tool uses stay
   * pending; while any are, save refuses to append or rewind
   * (ToolUsesPendingError), since the history must answer them first.
   */
  save(o: SaveOptions, call?: CallOptions): Promise<void> {
    return this.#serialized(async () => {
      const append = o.append ?? [];
      if (this.#pending.length > 0 && (append.length > 0 || o.keepMessages !== undefined)) throw new ToolUsesPendingError();
      const m: Meta = { ...this.#meta };
      if (o.task !== undefined) m.task = o.task;
      if (o.turn !== undefined) m.turn = o.turn;
      if (o.tokensUsed !== undefined) m.tokensUsed = o.tokensUsed;
      if (o.stateJson !== undefined) m.stateJson = o.stateJson;
      if (o.labels !== undefined) m.labels = { ...o.labels };
      await this.#save(m, o.keepMessages, append, this.#pending, call);
    });
  }

  /** Deletes the session (checkpoints, history and ledger) under the epoch it owns. The Session must not be used afterwards. */
  delete(call?: CallOptions): Promise<void> {
    return this.#serialized(async () => {
      await this.#c.raw.deleteSession({ sessionId: this.id, epoch: this.#epoch }, call);
    });
  }

  /**
   * Runs one pending tool use and records its outcome in the ledger:
   * execute first, record after. Unless the call is READ_ONLY, beginEffect
   * marks it as dispatched first; if that fails the tool does not run and
   * runTool throws (SessionFencedError: another process resumed the
   * session; stop). What fn returns or throws is recorded and returned as
   * the result; see ToolResult.ledgerError for a failed record. runTool is
   * the only way a Session records an effect, and it records only what fn
   * returned, so an effect can never be recorded before it happened. Each
   * pending tool use runs at most once per session.
   */
  async runTool(call: ToolUse, fn: (key: string, signal?: AbortSignal) => Promise<ToolContent> | ToolContent, options?: CallOptions): Promise<ToolResult> {
    const p = this.#pendingCall(call.toolUseId);
    if (!p) {
      throw newError(
        ErrorReason.ERROR_REASON_CALL_NOT_PENDING,
        Code.FAILED_PRECONDITION,
        `tool use ${JSON.stringify(call.toolUseId)} (${call.name}) not run: name it with pointA first`,
      );
    }
    if (call.name !== p.name) {
      throw newError(
        ErrorReason.ERROR_REASON_TOOL_NAME_MISMATCH,
        Code.FAILED_PRECONDITION,
        `tool use ${JSON.stringify(call.toolUseId)} not run: named ${JSON.stringify(p.name)} at pointA, ${JSON.stringify(call.name)} here`,
      );
    }
    if (this.#runs.started.has(call.toolUseId)) throw new AlreadyRunError(`tool use ${JSON.stringify(call.toolUseId)} (${call.name}) not run again`);
    this.#runs.started.add(call.toolUseId);
    return this.#runs.execute(p, this.#epoch, "", fn, options);
  }

  /**
   * Runs calls one after the other with runTool and returns their results
   * for pointB. It throws at the first call that could not run.
   */
  async runTools(calls: ToolUse[], run: ToolFunc, options?: CallOptions): Promise<ToolResult[]> {
    const results: ToolResult[] = [];
    for (const call of calls) {
      const full = {
        toolUseId: call.toolUseId,
        name: call.name,
        inputJson: call.inputJson ?? "",
        effectClass: effectiveClass(call.effectClass),
        repeatable: call.repeatable ?? false,
      };
      results.push(await this.runTool(call, (key, signal) => run(full, key, signal), options));
    }
    return results;
  }

  /**
   * Asks the daemon what to do with each pending tool use after a resume
   * (every page of its answer) and returns the results to pass to pointB, in
   * the order the tool uses were named: REUSE gives the recorded outcome
   * without running anything; RUN runs the tool with run (after beginEffect
   * unless it is READ_ONLY, with the key it was begun with, if any) and
   * records it; IN_DOUBT gives an isError result with the daemon's text. run
   * may be omitted only if no tool use needs to run. With nothing pending it
   * returns no results. options.verify, when given, is asked about each tool
   * use in doubt first (see ReconcileOptions).
   */
  reconcile(run?: ToolFunc, options?: ReconcileOptions): Promise<ToolResult[]> {
    const state = { host: this.#c, sessionId: this.id, revision: this.#revision, epoch: this.#epoch, pending: this.#pending, runs: this.#runs };
    return reconcileSession(state, run, options);
  }

  /**
   * Makes call pending and begun in one durable write (beginEffect with
   * toolUse), without pointA or a new revision, for code that sees one call
   * at a time just before it runs, such as an agent framework's hooks; the
   * calls of one turn may register in parallel. Run the tool only when the
   * returned effect and duplicate are undefined, then recordToolUse its
   * outcome.
   * SessionFencedError: another process owns the session.
   */
  async registerToolUse(call: ToolUse, options?: CallOptions): Promise<Registration> {
    const r = await this.#c.raw.beginEffect(
      {
        sessionId: this.id,
        toolUseId: call.toolUseId,
        epoch: this.#epoch,
        toolUse: {
          toolUseId: "",
          name: call.name,
          inputJson: call.inputJson ?? "",
          effectClass: effectiveClass(call.effectClass),
          beginTracked: true,
          repeatable: call.repeatable ?? false,
        },
        requestId: randomUUID(),
      },
      options,
    );
    return { idempotencyKey: r.idempotencyKey, alreadyBegun: r.alreadyBegun, effect: r.effect, duplicate: r.duplicate };
  }

  /**
   * Writes the outcome of a tool use that ran to the ledger (recordEffect),
   * whatever the session's epoch; the first record stands. isError marks a
   * tool that ran and failed.
   */
  async recordToolUse(toolUseId: string, output: string, isError = false, options?: CallOptions): Promise<PbEffect | undefined> {
    return (await this.#c.raw.recordEffect({ sessionId: this.id, toolUseId, output, isError }, options)).effect;
  }

  /**
   * Records that a tool use was refused before it ran (a permission check
   * said no), with reason as its error output: reconcile then reuses the
   * refusal instead of reporting the call in doubt.
   */
  async refuseToolUse(toolUseId: string, reason: string, options?: CallOptions): Promise<PbEffect | undefined> {
    return (await this.#c.raw.recordEffect({ sessionId: this.id, toolUseId, output: reason, isError: true, refused: true }, options)).effect;
  }

  /**
   * Decides the named tool uses from the ledger (reconcile with
   * tool_use_ids, every page), in the order given: for calls registered with
   * registerToolUse and left without a result in a framework's own
   * transcript. A call the ledger does not know was never begun
   * (DECISION_RUN). It writes and runs nothing.
   */
  async reconcileToolUses(toolUseIds: string[], options?: CallOptions): Promise<PbResolution[]> {
    const out: PbResolution[] = [];
    let pageToken = "";
    do {
      const r = await this.#c.raw.reconcile({ sessionId: this.id, toolUseIds, pageToken }, options);
      out.push(...r.resolutions);
      pageToken = r.nextPageToken;
    } while (pageToken !== "");
    return out;
  }

  #pendingCall(id: string): PbToolUse | undefined {
    return this.#pending.find((p) => p.toolUseId === id);
  }

  /** Runs f after every save before it has settled. */
  #serialized<T>(f: () => Promise<T>): Promise<T> {
    const next = this.#lock.then(f, f);
    this.#lock = next.catch(() => undefined);
    return next;
  }

  /**
   * The one place a Session writes a revision. It sends the whole meta,
   * builds on the session's revision under its epoch, and on success makes
   * the new revision the session's. The request_id of a save whose outcome
   * is unknown is reused when the same save is tried again, so the daemon
   * applies it once; within one call the client's retries resend it
   * unchanged.
   */
  async #save(m: Meta, keep: bigint | undefined, append: Message[], pending: PbToolUse[], call?: CallOptions): Promise<void> {
    const req = SaveCheckpointRequest.fromPartial({
      sessionId: this.id,
      expectedRevision: this.#revision,
      epoch: this.#epoch,
      task: m.task,
      turn: m.turn,
      tokensUsed: m.tokensUsed,
      keepMessages: keep,
      appendMessages: append.map((msg) => ({ role: msg.role, contentJson: msg.contentJson })),
      pendingToolUses: pending,
      stateJson: m.stateJson,
      labels: m.labels,
    });
    req.requestId = this.#requestId(req);
    let resp;
    try {
      resp = await this.#c.raw.saveCheckpoint(req, call);
    } catch (err) {
      this.#failed = outcomeUnknown(err) ? req : undefined;
      throw err;
    }
    this.#failed = undefined;
    this.#revision = resp.revision;
    this.#epoch = resp.epoch;
    this.#meta = { ...m, labels: { ...m.labels } };
    if (keep !== undefined && keep < BigInt(this.#messages.length)) this.#messages = this.#messages.slice(0, Number(keep));
    this.#messages.push(...append.map((msg) => ({ role: msg.role, contentJson: msg.contentJson })));
    this.#count = resp.messageCount;
    if (this.#count !== BigInt(this.#messages.length)) {
      this.#c.config.logger.error("savepoint: the daemon's message count differs from the history this session holds", {
        session: this.id,
        revision: this.#revision,
        daemon: this.#count,
        client: this.#messages.length,
      });
    }
    if (!samePending(this.#pending, pending)) {
      this.#pending = pending;
      this.#runs.clear();
    }
  }

  #requestId(req: SaveCheckpointRequest): string {
    if (this.#failed && sameSave(this.#failed, req)) return this.#failed.requestId;
    return randomUUID();
  }
}

/** The same pending tool uses, one by one (as the Go client's slices.Equal of the same pointers). */
function samePending(a: PbToolUse[], b: PbToolUse[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

/** Whether two saves are the same but for their request ids. */
function sameSave(a: SaveCheckpointRequest, b: SaveCheckpointRequest): boolean {
  const bytes = (r: SaveCheckpointRequest) =>
    Buffer.from(
      SaveCheckpointRequest.encode({
        ...r,
        requestId: "",
        labels: Object.fromEntries(Object.entries(r.labels).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))),
      }).finish(),
    );
  return bytes(a).equals(bytes(b));
}

/** The reasons after which a failed call may have been applied ("": no answer from the daemon). */
const OUTCOME_UNKNOWN_REASONS: ReadonlySet<string> = new Set(["", "UNAVAILABLE", "INTERNAL", "COMMIT_OUTCOME_UNKNOWN"]);

/** Says whether a failed call may have been applied: the daemon did not answer with a definite refusal. */
function outcomeUnknown(err: unknown): boolean {
  return !(err instanceof SavepointError) || OUTCOME_UNKNOWN_REASONS.has(err.reason);
}

/**
 * Takes ownership of a session and deletes it, so that its old owner is
 * fenced. A session that cannot be decoded is deleted under the epoch its
 * error reports.
 */
async function deleteSession(c: SessionHost, id: string, call?: CallOptions): Promise<void> {
  let epoch: bigint;
  try {
    epoch = (await c.raw.resume({ sessionId: id }, call)).epoch;
  } catch (err) {
    if (err instanceof SessionNotFoundError) return;
    if (!(err instanceof CheckpointCorruptError)) throw err;
    epoch = err.currentEpoch;
  }
  try {
    await c.raw.deleteSession({ sessionId: id, epoch }, call);
  } catch (err) {
    if (!(err instanceof SessionNotFoundError)) throw err;
  }
}

function toMessage(m: { role: string; contentJson: string }): Message {
  return { role: m.role, contentJson: m.contentJson };
}
