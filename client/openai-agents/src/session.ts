/**
 * SavepointSession: the OpenAI Agents SDK's Session on savepointd.
 *
 * Every SDK item is one message of a savepointd session (its role is the
 * item's role, else its type; its content the item as JSON). Every change is
 * one SaveCheckpoint made under expectedRevision: a writer that finds the
 * session changed since it last read it reloads and tries again, so several
 * processes can share one session without losing or reordering each other's
 * items and without fencing each other (none of them calls Resume).
 */
import { createHash, randomUUID } from "node:crypto";

import {
  type AgentInputItem,
  applySessionHistoryMutations,
  protocol,
  type RunContext,
  type RunContextAwareSession,
  type SessionHistoryRewriteAwareSession,
  type SessionHistoryRewriteArgs,
  type SessionHistoryTransaction,
  type SessionHistoryTransactionArgs,
  type SessionHistoryTransactionAwareSession,
  UserError,
} from "@openai/agents-core";
import {
  CallAlreadyRecordedError,
  type Client,
  dial,
  type DialOptions,
  type pb,
  RevisionMismatchError,
  SessionExistsError,
  SessionFencedError,
  SessionNotFoundError,
} from "@savepoint-dev/client";

import * as ledger from "./ledger.js";
import { type Change, partOf, type Planner, STATE_KEY, type View, withPart } from "./state.js";

export { STATE_KEY };
export type { Change, LedgerPart, Planner, View } from "./state.js";

/** The task a SavepointSession gives the savepointd session it creates. */
export const TASK = "openai-agents session";

/** How many times one change is tried against a session that keeps changing under it before SavepointSession gives up. */
export const MAX_ATTEMPTS = 200;

/** The options of a SavepointSession. */
export interface SavepointSessionOptions {
  /** The daemon's address; unset, it is resolved as dial resolves it ($SAVEPOINT_ADDR, then the default sockets). */
  address?: string;
  /** A connection to use instead of dialing one; the session then never closes it. */
  client?: Client;
  /** Options for the connection the session dials (TLS, retries, logger). */
  dial?: DialOptions;
  /** The number of latest items getItems returns when called without a limit; unset returns them all. */
  limit?: number;
}

/** A change could not be saved because other writers changed the session under every attempt. */
export class SessionContentionError extends Error {
  override name = "SessionContentionError";
}

/** A method of a SavepointSession was called after its close(). */
export class SessionClosedError extends Error {
  override name = "SessionClosedError";
}

const STALE = [RevisionMismatchError, SessionFencedError, SessionExistsError, SessionNotFoundError];

/** One SDK item as a savepointd message: its role, else its type, and the item as JSON text. */
export function encode(item: AgentInputItem): { role: string; contentJson: string } {
  if (!item || typeof item !== "object" || Array.isArray(item)) {
    throw new TypeError(`a session item must be an object (an AgentInputItem), not ${item === null ? "null" : typeof item}.`);
  }
  const rec = item as Record<string, unknown>;
  const role = typeof rec.role === "string" && rec.role ? rec.role : typeof rec.type === "string" && rec.type ? rec.type : "item";
  return { role, contentJson: JSON.stringify(item) };
}

/** The SDK item a message holds. */
export function decode(contentJson: string): AgentInputItem {
  return JSON.parse(contentJson) as AgentInputItem;
}

/**
 * The OpenAI Agents SDK's Session on savepointd: pass it as
 * `run(agent, input, { session: new SavepointSession("my-id") })`. Items are
 * durable once a method returns, survive restarts of the agent and of the
 * daemon, and may be shared by several processes. The session id is the
 * savepointd session id (1-128 characters of [A-Za-z0-9._:-], starting with
 * a letter or digit).
 */
export class SavepointSession implements RunContextAwareSession, SessionHistoryTransactionAwareSession, SessionHistoryRewriteAwareSession {
  /** Tells the SDK's runner to pass its RunContext to every method, which is how durable tools find their session. */
  readonly acceptsRunContext = true as const;
  readonly sessionId: string;
  readonly #options: SavepointSessionOptions;
  #client: Promise<Client> | undefined;
  /** The revision this process last saved or read, without items. */
  #cached: View | undefined;
  #closed = false;

  constructor(sessionId: string, options: SavepointSessionOptions = {}) {
    if (options.limit !== undefined && !Number.isInteger(options.limit)) {
      throw new RangeError(`SavepointSession: limit must be a whole number, not ${options.limit}.`);
    }
    this.sessionId = sessionId;
    this.#options = options;
    ledger.registerSession(this);
  }

  /** Returns the savepointd session id. */
  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /**
   * Returns the session's items in order, or the latest limit of them (the
   * limit option when not given; zero or less returns none, as the SDK's
   * MemorySession), read from one revision. Durable tool calls whose process
   * died are answered first.
   */
  async getItems(limit?: number, runContext?: RunContext<unknown>): Promise<AgentInputItem[]> {
    this.#checkOpen();
    const n = limit ?? this.#options.limit;
    if (n !== undefined && !Number.isInteger(n)) {
      throw new RangeError(`getItems: limit must be a whole number, not ${n}.`);
    }
    ledger.bindRun(runContext, this);
    let v = await this.load(true);
    const ids = ledger.interrupted(this, v);
    if (ids.length > 0) {
      await ledger.resolveInterrupted(this, runContext, ids);
      v = await this.load(true);
    }
    const items = v.items ?? [];
    if (n === undefined) return items;
    return n <= 0 ? [] : items.slice(-n);
  }

  /** Appends items after every item already stored, in one atomic save: all are durable when this returns, or none is. */
  async addItems(items: AgentInputItem[], runContext?: RunContext<unknown>): Promise<void> {
    this.#checkOpen();
    ledger.bindRun(runContext, this);
    if (items.length === 0) return;
    for (const it of items) encode(it); // refuse a bad item before any I/O
    const batch = items.map((it) => structuredClone(it));
    await ledger.recordRejections(this, batch);
    await this.mutate((v) => ledger.planAppend(v, batch));
  }

  /**
   * Removes and returns the latest item, or returns undefined when the
   * session is empty. The removal is one save made on the revision the item
   * was read from, so two processes popping at once never remove one item
   * twice or an item neither returned.
   */
  async popItem(runContext?: RunContext<unknown>): Promise<AgentInputItem | undefined> {
    this.#checkOpen();
    ledger.bindRun(runContext, this);
    return this.mutate<AgentInputItem>(
      (v) => {
        const items = v.items ?? [];
        if (items.length === 0) return undefined;
        return { keep: BigInt(items.length - 1), result: items[items.length - 1] };
      },
      { history: true },
    );
  }

  /**
   * Removes every item. The savepointd session and its side-effects ledger
   * are kept, so a tool call recorded before the clear is still known to the
   * durable tools.
   */
  async clearSession(runContext?: RunContext<unknown>): Promise<void> {
    this.#checkOpen();
    ledger.bindRun(runContext, this);
    await this.mutate((v) => {
      if (v.revision === 0n || (v.count === 0n && v.pending.length === 0)) return undefined;
      return { keep: 0n, pending: [], stateJson: withPart(v, {}) };
    });
  }

  /**
   * Applies one of the SDK's history transactions (agents-core 0.20.0's
   * SessionHistoryTransactionAwareSession) as one save: appending items, or
   * replacing the stored suffix that still equals expectedSuffix. The
   * operation id is saved with the change, so a retry with the same id and
   * transaction changes nothing and succeeds; the same id with another
   * transaction, or a suffix that no longer matches, throws the SDK's
   * UserError and changes nothing. clearSession forgets the ids, as
   * MemorySession does.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs, runContext?: RunContext<unknown>): Promise<void> {
    this.#checkOpen();
    ledger.bindRun(runContext, this);
    const { operationId, transaction } = checkTransaction(args);
    const digest = createHash("sha256").update(canonicalJSON(transaction)).digest("base64url");
    if (transaction.type === "append_items") await ledger.recordRejections(this, transaction.items);
    await this.mutate(
      (v) => {
        const part = partOf(v);
        const done = part.operations?.[operationId];
        if (done !== undefined) {
          if (done !== digest) throw new UserError("Session history operation was already applied with a different transaction.");
          return undefined;
        }
        let ch: Change;
        if (transaction.type === "append_items") {
          ch = transaction.items.length > 0 ? ledger.planAppend(v, transaction.items) : {};
        } else {
          const items = v.items ?? [];
          const start = items.length - transaction.expectedSuffix.length;
          if (start < 0 || canonicalJSON(items.slice(start)) !== canonicalJSON(transaction.expectedSuffix)) {
            throw new UserError("Session history suffix no longer matches the transaction precondition.");
          }
          ch = { keep: BigInt(start), append: transaction.replacement };
        }
        const next = partOf({ ...v, stateJson: ch.stateJson ?? v.stateJson });
        next.operations = { ...next.operations, [operationId]: digest };
        return { ...ch, stateJson: withPart(v, next) };
      },
      { history: transaction.type === "replace_suffix" },
    );
  }

  /**
   * Applies the SDK's history mutations (agents-core's
   * applySessionHistoryMutations: a function call replaced in place) to the
   * stored history as one save; an empty list changes nothing.
   */
  async applyHistoryMutations(args: SessionHistoryRewriteArgs): Promise<void> {
    this.#checkOpen();
    if (!args || !Array.isArray(args.mutations)) throw new UserError("Session history mutations must be an array.");
    if (args.mutations.length === 0) return;
    const mutations = structuredClone(args.mutations);
    await this.mutate(
      (v) => {
        const items = v.items ?? [];
        const next = applySessionHistoryMutations(items, mutations);
        let same = 0;
        while (same < items.length && same < next.length && canonicalJSON(items[same]) === canonicalJSON(next[same])) same++;
        if (same === items.length && same === next.length) return undefined;
        return { keep: BigInt(same), append: next.slice(same) };
      },
      { history: true },
    );
  }

  /**
   * Closes the session: from this call on every method rejects with
   * SessionClosedError, and the connection the session dialed is closed (a
   * client given in the options is left open). Repeated calls do nothing; the
   * items stay on the daemon.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const c = this.#client;
    this.#client = undefined;
    if (c && !this.#options.client) (await c).close();
  }

  /** Whether close() was called. */
  get closed(): boolean {
    return this.#closed;
  }

  #checkOpen(): void {
    if (this.#closed) throw new SessionClosedError(`SavepointSession ${JSON.stringify(this.sessionId)} is closed.`);
  }

  /** The session's connection to the daemon, dialed on first use. */
  client(): Promise<Client> {
    if (this.#closed) return Promise.reject(new SessionClosedError(`SavepointSession ${JSON.stringify(this.sessionId)} is closed.`));
    if (this.#options.client) return Promise.resolve(this.#options.client);
    if (!this.#client) {
      const p = dial(this.#options.address, this.#options.dial);
      p.catch(() => {
        if (this.#client === p) this.#client = undefined;
      });
      this.#client = p;
    }
    return this.#client;
  }

  /** The latest revision this process saved or read, reading it when none is known. */
  async known(): Promise<View> {
    return this.#cached ? copyView(this.#cached) : this.load(false);
  }

  /** Reads the latest revision (with its whole history when asked); an absent session reads as revision 0 with no item. */
  async load(history: boolean): Promise<View> {
    const c = await this.client();
    let r: pb.GetSessionResponse;
    try {
      r = await c.raw.getSession({ sessionId: this.sessionId });
    } catch (err) {
      if (err instanceof SessionNotFoundError) return emptyView(history);
      throw err;
    }
    const cp = r.checkpoint;
    if (!cp) throw new Error(`GetSession of ${JSON.stringify(this.sessionId)} answered no checkpoint.`);
    const v: View = {
      revision: cp.revision,
      epoch: cp.epoch,
      count: cp.messageCount,
      task: cp.task,
      turn: cp.turn,
      tokensUsed: cp.tokensUsed,
      labels: { ...cp.labels },
      stateJson: cp.stateJson,
      pending: [...cp.pendingToolUses],
    };
    if (history) {
      const msgs = [...cp.messages];
      for (let token = r.nextPageToken; token !== ""; ) {
        const page = await c.raw.listMessages({ sessionId: this.sessionId, revision: cp.revision, pageToken: token });
        if (page.firstIndex !== BigInt(msgs.length)) {
          throw new Error(`the history of ${JSON.stringify(this.sessionId)} came back out of order: a page at index ${page.firstIndex} after ${msgs.length} messages.`);
        }
        msgs.push(...page.messages);
        token = page.nextPageToken;
      }
      v.items = msgs.map((m) => decode(m.contentJson));
    }
    this.#remember(v);
    return v;
  }

  #remember(v: View): void {
    if (!this.#cached || v.revision >= this.#cached.revision) {
      const { items: _items, ...rest } = v;
      this.#cached = copyView(rest);
    }
  }

  /**
   * Makes one change: plans it on the latest revision this process knows
   * (reading the session first when the history is needed or nothing is
   * known), saves it under that revision, and when another writer got there
   * first, reloads and plans again. Returns the change's result; a plan
   * that returns undefined writes nothing and returns undefined.
   */
  async mutate<T>(plan: Planner<T>, options: { history?: boolean } = {}): Promise<T | undefined> {
    const history = options.history ?? false;
    const c = await this.client();
    let fresh = history;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const v = fresh || !this.#cached ? await this.load(history) : copyView(this.#cached);
      const ch = await plan(v);
      if (ch === undefined) return undefined;
      const pending = ch.pending ?? v.pending;
      const stateJson = ch.stateJson ?? v.stateJson;
      const req = {
        sessionId: this.sessionId,
        expectedRevision: v.revision,
        epoch: v.epoch,
        requestId: randomUUID(),
        task: v.task || TASK,
        turn: v.turn,
        tokensUsed: v.tokensUsed,
        keepMessages: ch.keep,
        appendMessages: (ch.append ?? []).map(encode),
        pendingToolUses: pending,
        stateJson,
        labels: v.labels,
      };
      let r: pb.SaveCheckpointResponse;
      try {
        r = await c.raw.saveCheckpoint(req);
      } catch (err) {
        if (STALE.some((k) => err instanceof k)) {
          fresh = true;
          await sleep(Math.random() * Math.min(50, attempt + 1));
          continue;
        }
        if (err instanceof CallAlreadyRecordedError) {
          // A pending tool use was recorded and its process has not (yet, or
          // ever) saved it as no longer pending: settle it and plan again.
          // When none is left to settle and the session has not moved on,
          // the refused tool use is one this change adds.
          if (!(await ledger.settleRecorded(this)) && (await this.load(false)).revision === v.revision) throw err;
          fresh = true;
          continue;
        }
        throw err;
      }
      this.#remember({ ...v, items: undefined, revision: r.revision, epoch: r.epoch, count: r.messageCount, task: req.task, pending, stateJson });
      return ch.result;
    }
    throw new SessionContentionError(
      `session ${JSON.stringify(this.sessionId)} changed under every one of ${MAX_ATTEMPTS} attempts to save; too many writers are contending for it.`,
    );
  }
}

/**
 * The transaction args checked and copied, as MemorySession checks them:
 * the envelope read once (an accessor that throws is refused without its
 * message), a non-empty operation id, and a transaction of exactly its
 * type's fields whose values are plain data (no class instances other than
 * Uint8Array, no accessors, symbols, cycles or holes) and whose items are
 * the protocol's items.
 */
function checkTransaction(args: SessionHistoryTransactionArgs): { operationId: string; transaction: SessionHistoryTransaction } {
  let operationId: unknown;
  let transaction: unknown;
  try {
    if (!args || typeof args !== "object") throw new Error("no arguments");
    operationId = Reflect.get(args, "operationId");
    transaction = Reflect.get(args, "transaction");
  } catch {
    throw new UserError("Session history transaction arguments are invalid.");
  }
  if (typeof operationId !== "string" || !operationId.trim()) {
    throw new UserError("Session history transaction operationId must be a non-empty string.");
  }
  if (!transaction || typeof transaction !== "object") throw new UserError("Session history transaction must be an object.");
  const unsupported = () => new UserError("Session history transaction items contain invalid or unsupported data.");
  let t: Record<string, unknown>;
  try {
    t = plainCopy(transaction) as Record<string, unknown>;
    structuredClone(transaction); // refuses what plainCopy cannot see, a Proxy
  } catch {
    throw unsupported();
  }
  const has = (...keys: string[]): boolean => Object.keys(t).length === keys.length && keys.every((k) => Object.hasOwn(t, k) && (k === "type" || Array.isArray(t[k])));
  const fields: string[] =
    t.type === "append_items" ? ["type", "items"] : t.type === "replace_suffix" ? ["type", "expectedSuffix", "replacement"] : [];
  if (fields.length === 0) throw new UserError("Unsupported session history transaction type.");
  if (!has(...fields)) {
    throw new UserError(`Session history ${t.type === "append_items" ? "append" : "suffix"} transaction fields are invalid.`);
  }
  for (const k of fields.slice(1)) {
    for (const it of t[k] as unknown[]) if (!protocol.ModelItem.safeParse(it).success) throw unsupported();
  }
  return { operationId, transaction: t as unknown as SessionHistoryTransaction };
}

/** A copy of value made only of plain data: primitives, Uint8Arrays, dense arrays and objects of enumerable data properties; throws on anything else. */
function plainCopy(value: unknown, seen = new Set<object>()): unknown {
  if (value === null || value === undefined || typeof value === "string" || typeof value === "boolean" || typeof value === "number") return value;
  if (typeof value !== "object") throw new Error("unsupported value");
  if (value instanceof Uint8Array) {
    if (Object.getPrototypeOf(value) !== Uint8Array.prototype || Reflect.ownKeys(value).length !== value.length) throw new Error("unsupported binary");
    return new Uint8Array(value);
  }
  if (seen.has(value)) throw new Error("cycle");
  seen.add(value);
  try {
    const keys = Reflect.ownKeys(value);
    if (Array.isArray(value)) {
      if (keys.length !== value.length + 1) throw new Error("sparse or decorated array");
      return Array.from({ length: value.length }, (_, i) => plainCopy(dataProperty(value, String(i)), seen));
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) throw new Error("not a plain object");
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      if (typeof k !== "string") throw new Error("symbol key");
      Object.defineProperty(out, k, { value: plainCopy(dataProperty(value, k), seen), enumerable: true, writable: true, configurable: true });
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

function dataProperty(o: object, key: string): unknown {
  const d = Object.getOwnPropertyDescriptor(o, key);
  if (!d?.enumerable || !("value" in d)) throw new Error("not an enumerable data property");
  return d.value;
}

/** JSON with object keys sorted and undefined members dropped: equal for structurally equal values. */
function canonicalJSON(x: unknown): string {
  return JSON.stringify(x, (_k, val: unknown) =>
    val && typeof val === "object" && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : val,
  );
}

function emptyView(history: boolean): View {
  return {
    revision: 0n,
    epoch: 0n,
    count: 0n,
    task: TASK,
    turn: 0,
    tokensUsed: 0n,
    labels: {},
    stateJson: "",
    pending: [],
    items: history ? [] : undefined,
  };
}

function copyView(v: View): View {
  return { ...v, labels: { ...v.labels }, pending: [...v.pending], items: v.items ? [...v.items] : undefined };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
