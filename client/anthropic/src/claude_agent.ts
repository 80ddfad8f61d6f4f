/**
 * The Claude Agent SDK (`@anthropic-ai/claude-agent-sdk`) on savepointd:
 * every tool call of the agent on a session's ledger, and the SDK's
 * transcript in the same session, so that an agent killed anywhere resumes
 * without running a side effect twice and without pretending to know what it
 * cannot. The twin of Python's savepoint.claude_agent:
 *
 *     const store = new SavepointSessionStore(await dial(), { readOnly: ["mcp__notes__read_notes"] });
 *     query({ prompt, options: {
 *       sessionStore: store, sessionStoreFlush: "eager", hooks: store.hooks(),
 *       canUseTool: store.canUseTool(myPolicy), // optional: refusals recorded
 *       mcpServers: { notes: notesServer },
 *     } });
 *     // A resumed run: options.resume = sessionId, with the same store.
 *
 * hooks() puts every call on the ledger: PreToolUse registers it as pending
 * and begun in one durable step (beginEffect with toolUse) before it runs,
 * and answers a call already recorded with its recorded output instead of
 * running it; PostToolUse and PostToolUseFailure record its outcome. The
 * matchers set onFailure "block", so a tool whose registration fails does
 * not run. canUseTool records a call its permission check refuses as never
 * run, and so does append for a call the transcript shows denied by the
 * CLI's own permission rules or mode.
 *
 * The SDK's types are written here structurally (from its sdk.d.ts,
 * 0.3.337), so this module does not import the SDK and a user of
 * DurableAgent never downloads it; the objects it returns are what the SDK's
 * Options.hooks, Options.canUseTool and Options.sessionStore take.
 */
import { randomUUID } from "node:crypto";

import {
  CallUnknownError,
  type Client,
  Decision,
  deniedText,
  EffectClass,
  EffectConflictError,
  type Message,
  type pb,
  type Session,
  SessionNotFoundError,
} from "@savepoint-dev/client";

/** The SDK's SessionKey: one transcript (a subagent's has a subpath). */
export interface SessionKey {
  projectKey: string;
  sessionId: string;
  subpath?: string;
}

/** The SDK's SessionStoreEntry: one transcript line, opaque JSON. */
export interface SessionStoreEntry {
  type: string;
  uuid?: string;
  timestamp?: string;
  [k: string]: unknown;
}

/**
 * The fields of the SDK's PreToolUse, PostToolUse and PostToolUseFailure
 * hook inputs the hooks read; the SDK passes its whole HookInput.
 */
export interface ToolHookInput {
  session_id: string;
  hook_event_name: string;
  tool_name?: unknown;
  tool_input?: unknown;
  tool_use_id?: unknown;
  tool_response?: unknown;
  error?: unknown;
  is_interrupt?: unknown;
}

/** What a hook returns: the SDK's SyncHookJSONOutput ({} lets the call go on). */
export interface HookOutput {
  hookSpecificOutput?: {
    hookEventName: "PreToolUse";
    permissionDecision: "deny" | "defer";
    permissionDecisionReason: string;
  };
}

/** The SDK's HookCallback. */
export type HookCallback = (input: ToolHookInput, toolUseID: string | undefined, options: { signal: AbortSignal }) => Promise<HookOutput>;

/** The SDK's HookCallbackMatcher, with onFailure. */
export interface HookCallbackMatcher {
  matcher?: string;
  hooks: HookCallback[];
  timeout?: number;
  onFailure?: "continue" | "block";
}

/** What hooks() returns: the SDK's Options.hooks for the three tool events. */
export interface ToolHooks {
  PreToolUse: HookCallbackMatcher[];
  PostToolUse: HookCallbackMatcher[];
  PostToolUseFailure: HookCallbackMatcher[];
}

/** The part of the SDK's PermissionResult this module reads: allow, or deny with a message. */
export type PermissionResult = { behavior: "allow" } | { behavior: "deny"; message: string };

/** The fields of the SDK's canUseTool options this module reads (the SDK passes them all). */
export interface PermissionOptions {
  signal: AbortSignal;
  toolUseID: string;
}

/** The SDK's CanUseTool, over its own options and result types. */
export type CanUseTool<O extends PermissionOptions = PermissionOptions, R extends PermissionResult | null = PermissionResult | null> = (
  toolName: string,
  input: Record<string, unknown>,
  options: O,
) => Promise<R>;

/** What SavepointSessionStore takes besides the client. */
export interface SavepointSessionStoreOptions {
  /** Tools re-run after a crash (READ_ONLY), by the name the SDK gives them (mcp__server__tool for an MCP tool). */
  readOnly?: Iterable<string>;
  /** Tools re-run after a crash with the same idempotency key (IDEMPOTENT). */
  idempotent?: Iterable<string>;
  /**
   * Tools whose calls wait for a person's approval, bound to the call and its
   * input (ApproveEffect). PreToolUse defers such a call until it is decided:
   * the SDK's own pause, which ends the query with terminal_reason
   * "tool_deferred" and the call as deferred_tool_use. After `savepoint
   * approve`, client.approveEffect or the inspector, a resume
   * (options.resume) asks PreToolUse again: an approved call runs once, a
   * denied one is refused with the approver's note.
   */
  approvalRequired?: Iterable<string>;
  /** Labels of the savepointd sessions the store creates, besides framework=claude-agent-sdk. */
  labels?: Record<string, string>;
  /**
   * The SDK's foldSessionSummary, which append uses to keep each main
   * transcript's summary for listSessionSummaries. Default: the SDK's own,
   * imported when the first main transcript is appended; when the SDK
   * cannot be imported no summary is kept.
   */
  foldSessionSummary?: FoldSessionSummary;
}

/** The SDK's SessionSummaryEntry: a session's folded summary; data is the SDK's, kept verbatim. */
export interface SessionSummaryEntry {
  sessionId: string;
  mtime: number;
  data: Record<string, unknown>;
}

/** The SDK's foldSessionSummary. */
export type FoldSessionSummary = (prev: SessionSummaryEntry | undefined, key: SessionKey, entries: SessionStoreEntry[], options?: { mtime?: number }) => SessionSummaryEntry;

/** The labels naming a savepointd session's SDK key, which the list methods select by. */
export const LABEL_PROJECT = "claude.project";
export const LABEL_SESSION = "claude.session";
export const LABEL_SUBPATH = "claude.subpath";
/** The key of the session's state_json under which append keeps the SDK's folded summary. */
export const SUMMARY_STATE = "claude_summary";

function millis(ts: { seconds: bigint | number | string; nanos: number } | undefined): number {
  return ts ? Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6) : 0;
}

/**
 * The tool result load() gives a call Reconcile decides RUN that was never
 * begun (its PreToolUse never registered it): it certainly did not run.
 * The same text as Python's NEVER_STARTED; fill it with fillTemplate.
 */
export const NEVER_STARTED =
  "This {name} call (tool_use_id {id}) never started: the agent stopped before running it. " +
  "It was not run on resume; call it again if it is still needed.";

/**
 * The tool result load() gives a begun call Reconcile decides RUN: a
 * read-only or idempotent one, safe to repeat. The same text as Python's.
 */
export const INTERRUPTED =
  "This {name} call (tool_use_id {id}) was interrupted before its result was recorded. " +
  "It only reads, so it is safe to call it again.";

/** NEVER_STARTED or INTERRUPTED with the call's tool name and id. */
export function fillTemplate(template: string, name: string, id: string): string {
  return template.replaceAll("{name}", name).replaceAll("{id}", id);
}

const UNSAFE = /[^A-Za-z0-9._:-]/g;

/**
 * The savepointd session that keeps the SDK session sessionId's transcript
 * (and, without subpath, its ledger): claude.<id>, with a subagent
 * transcript's subpath after a dot, "/" read as ":". The same ids as
 * Python's session_id_for, so either language resumes the other's sessions.
 */
export function sessionIdFor(sessionId: string, subpath?: string): string {
  let sid = "claude." + sessionId;
  if (subpath) sid += "." + subpath.replaceAll("/", ":");
  sid = sid.replace(UNSAFE, "_");
  if (sid.length > 128) {
    throw new RangeError(`session ${JSON.stringify(sessionId)} subpath ${JSON.stringify(subpath)} makes a savepointd session id over 128 characters`);
  }
  return sid;
}

/** JSON with object keys sorted, as Python's json.dumps(sort_keys=True, separators=(",", ":")). */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return (
      "{" +
      Object.keys(o)
        .filter((k) => o[k] !== undefined)
        .sort()
        .map((k) => JSON.stringify(k) + ":" + canonical(o[k]))
        .join(",") +
      "}"
    );
  }
  return JSON.stringify(v);
}

/** What makes two transcript entries the same one: the SDK's uuid, or for an entry without one its whole JSON. */
function entryKey(e: Record<string, unknown>): string {
  return typeof e.uuid === "string" && e.uuid !== "" ? "u:" + e.uuid : "j:" + canonical(e);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function blocksOf(entry: Record<string, unknown>): unknown[] {
  const m = entry.message;
  const c = isObject(m) ? m.content : undefined;
  return Array.isArray(c) ? c : [];
}

/** A tool_use the transcript leaves without a result: its id, tool name and the assistant entry that named it. */
export interface DanglingToolUse {
  id: string;
  name: string;
  entry: SessionStoreEntry;
}

/** The tool_use blocks of the transcript's assistant entries that no tool_result of a later user entry answers, in order. */
export function danglingToolUses(entries: readonly SessionStoreEntry[]): DanglingToolUse[] {
  const uses = new Map<string, DanglingToolUse>();
  for (const e of entries) {
    for (const b of blocksOf(e)) {
      if (!isObject(b)) continue;
      if (e.type === "assistant" && b.type === "tool_use" && typeof b.id === "string") {
        uses.set(b.id, { id: b.id, name: typeof b.name === "string" ? b.name : "", entry: e });
      } else if (e.type === "user" && b.type === "tool_result") {
        uses.delete(String(b.tool_use_id));
      }
    }
  }
  return [...uses.values()];
}

/** A tool's output as the hooks recorded it (JSON text of what the SDK reported: a string or content blocks), or the text itself. */
function outputOf(recorded: string): unknown {
  try {
    return JSON.parse(recorded);
  } catch {
    return recorded;
  }
}

function text(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

function deny(reason: string): HookOutput {
  return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: reason } };
}

/** The SDK's pause for a call that waits for a person: the query ends with the call as its deferred_tool_use, and a resume asks PreToolUse again. */
function defer(reason: string): HookOutput {
  return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "defer", permissionDecisionReason: reason } };
}

/** Whether a dangling call is one PreToolUse deferred for approval and no begin has spent its decision yet: the SDK asks about it again on resume. */
function deferred(r: pb.Resolution): boolean {
  const st = r.approval?.status;
  return r.decision === Decision.DECISION_RUN && !r.begun && st !== undefined && st !== 0 && !r.approval?.spent;
}

/** The id of the call a hook sees: the SDK's toolUseID argument, else the input's tool_use_id. */
function toolUseIdOf(input: ToolHookInput, toolUseID: string | undefined): string {
  const tid = toolUseID ?? input.tool_use_id;
  if (typeof tid !== "string" || tid === "") throw new TypeError(`savepoint: ${input.hook_event_name} hook without a tool_use_id`);
  return tid;
}

/**
 * The Claude Agent SDK's SessionStore (append, load, delete) on savepointd,
 * and the hooks that put the agent's tool calls on the same session's
 * ledger. One instance serves any number of SDK sessions of one process;
 * give it to the SDK's options as sessionStore, with sessionStoreFlush
 * "eager" and hooks: store.hooks(). The client stays the caller's to close.
 *
 * Effect classes: a tool named in readOnly is READ_ONLY (re-run after a
 * crash), in idempotent IDEMPOTENT; every other tool is SIDE_EFFECT (run at
 * most once; in doubt when a crash hides its outcome).
 */
export class SavepointSessionStore {
  readonly #client: Client;
  readonly #classes = new Map<string, EffectClass>();
  readonly #approval: ReadonlySet<string>;
  readonly #labels: Record<string, string>;
  readonly #sessions = new Map<string, Session>();
  readonly #seen = new Map<string, Set<string>>();
  readonly #locks = new Map<string, Promise<unknown>>();
  /** Tool uses this process registered first. */
  readonly #begun = new Set<string>();
  /** tool_use_id -> its session, for canUseTool. */
  readonly #calls = new Map<string, Session>();
  #fold: FoldSessionSummary | undefined | null;

  constructor(client: Client, options: SavepointSessionStoreOptions = {}) {
    this.#client = client;
    for (const n of options.readOnly ?? []) this.#classes.set(n, EffectClass.EFFECT_CLASS_READ_ONLY);
    for (const n of options.idempotent ?? []) this.#classes.set(n, EffectClass.EFFECT_CLASS_IDEMPOTENT);
    this.#labels = { ...options.labels };
    this.#approval = new Set(options.approvalRequired ?? []);
    this.#fold = options.foldSessionSummary;
  }

  /** The fold function: the option's, else the SDK's if it can be imported (null: neither). */
  async #folder(): Promise<FoldSessionSummary | null> {
    if (this.#fold === undefined) {
      const sdk = "@anthropic-ai/claude-agent-sdk"; // an optional peer: never a static import
      try {
        this.#fold = ((await import(sdk)) as { foldSessionSummary?: FoldSessionSummary }).foldSessionSummary ?? null;
      } catch {
        this.#fold = null;
      }
    }
    return this.#fold;
  }

  /** The effect class the hooks register a call of toolName with. */
  effectClass(toolName: string): EffectClass {
    return this.#classes.get(toolName) ?? EffectClass.EFFECT_CLASS_SIDE_EFFECT;
  }

  // -- sessions ----------------------------------------------------------------

  /** Runs f after every f before it for sid has settled. */
  #locked<T>(sid: string, f: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(sid) ?? Promise.resolve();
    const next = prev.then(f, f);
    this.#locks.set(
      sid,
      next.catch(() => undefined),
    );
    return next;
  }

  /**
   * The savepointd session sid, owned by this process: resumed (taken over)
   * the first time, created when it does not exist and create is set.
   */
  #session(sid: string, create: true): Promise<Session>;
  #session(sid: string, create: boolean): Promise<Session | undefined>;
  #session(sid: string, create: boolean): Promise<Session | undefined> {
    const have = this.#sessions.get(sid);
    if (have) return Promise.resolve(have);
    return this.#locked(sid, async () => {
      let s = this.#sessions.get(sid);
      if (s) return s;
      try {
        s = await this.#client.resume(sid);
      } catch (err) {
        if (!(err instanceof SessionNotFoundError)) throw err;
        if (!create) return undefined;
        s = await this.#client.start(sid, "Claude Agent SDK session", { labels: { framework: "claude-agent-sdk", ...this.#labels } });
      }
      this.#seen.set(sid, new Set(s.messages.map((m) => entryKey(JSON.parse(m.contentJson) as Record<string, unknown>))));
      this.#sessions.set(sid, s);
      return s;
    });
  }

  /**
   * Saves the entries not saved yet, in order, as one revision per 1000;
   * with the SDK's key, the labels that name it and (for a main transcript)
   * the folded summary go with the last revision.
   */
  #append(sid: string, s: Session, entries: readonly SessionStoreEntry[], key?: SessionKey): Promise<void> {
    return this.#locked(sid, async () => {
      const seen = this.#seen.get(sid)!;
      const fresh: Message[] = [];
      const keys = new Set<string>();
      for (const e of entries) {
        const k = entryKey(e);
        if (seen.has(k) || keys.has(k)) continue;
        keys.add(k);
        fresh.push({ role: typeof e.type === "string" && e.type !== "" ? e.type : "entry", contentJson: JSON.stringify(e) });
      }
      let labels: Record<string, string> | undefined;
      let stateJson: string | undefined;
      if (key) {
        const want: Record<string, string> = { [LABEL_PROJECT]: key.projectKey, [LABEL_SESSION]: key.sessionId };
        if (key.subpath) want[LABEL_SUBPATH] = key.subpath;
        if (Object.entries(want).some(([k, v]) => s.labels[k] !== v)) labels = { ...s.labels, ...want };
        const fold = fresh.length > 0 && !key.subpath ? await this.#folder() : null;
        if (fold) {
          const state = (s.stateJson ? JSON.parse(s.stateJson) : {}) as Record<string, unknown>;
          const prev = state[SUMMARY_STATE] as Record<string, unknown> | undefined;
          const folded = fold(prev === undefined ? undefined : { sessionId: key.sessionId, mtime: 0, data: prev }, key, fresh.map((m) => JSON.parse(m.contentJson)));
          stateJson = JSON.stringify({ ...state, [SUMMARY_STATE]: folded.data });
        }
      }
      const chunks: Message[][] = [];
      for (let i = 0; i < fresh.length; i += 1000) chunks.push(fresh.slice(i, i + 1000));
      if (chunks.length === 0 && labels) chunks.push([]);
      for (const [i, chunk] of chunks.entries()) {
        const last = i === chunks.length - 1;
        await s.save({ append: chunk, ...(last && labels ? { labels } : {}), ...(last && stateJson !== undefined ? { stateJson } : {}) });
      }
      for (const k of keys) seen.add(k);
    });
  }

  // -- SessionStore ------------------------------------------------------------

  /**
   * Mirrors a batch of transcript entries into the session's history,
   * durably, skipping entries already saved (by uuid; an entry without one
   * by its whole content), so a batch the SDK retries is kept once.
   */
  async append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void> {
    const sid = sessionIdFor(key.sessionId, key.subpath);
    const s = await this.#session(sid, true);
    await this.#append(sid, s, entries, key);
    await this.#recordRefusals(key.sessionId, entries);
  }

  /**
   * Records as refused, never run, each call a transcript entry answers with
   * a permission denial (permissionDecision.decision "reject": the CLI's
   * permission rules or mode, which fire no hook after PreToolUse). A call
   * the ledger does not know, or has an outcome for already (a refusal
   * canUseTool recorded), is left as it is.
   */
  async #recordRefusals(sdkSessionId: string, entries: readonly SessionStoreEntry[]): Promise<void> {
    const refusals: [string, unknown][] = [];
    for (const e of entries) {
      const pd = e.permissionDecision;
      if (e.type !== "user" || !isObject(pd) || pd.decision !== "reject") continue;
      for (const b of blocksOf(e)) {
        if (isObject(b) && b.type === "tool_result" && typeof b.tool_use_id === "string") refusals.push([b.tool_use_id, b.content ?? ""]);
      }
    }
    if (refusals.length === 0) return;
    const s = await this.#session(sessionIdFor(sdkSessionId), true);
    for (const [tid, content] of refusals) {
      try {
        await s.refuseToolUse(tid, JSON.stringify(text(content)));
      } catch (err) {
        if (!(err instanceof CallUnknownError || err instanceof EffectConflictError)) throw err;
      }
    }
  }

  /**
   * The session's transcript for a resume, or null when it was never
   * written. It takes the session over (resume), and answers every tool call
   * the transcript leaves without a result with Reconcile's decision, in one
   * user entry saved before it is returned: REUSE gives the recorded output,
   * RUN (never begun) says it never started, IN_DOUBT gives the daemon's
   * text as an error.
   */
  async load(key: SessionKey): Promise<SessionStoreEntry[] | null> {
    const sid = sessionIdFor(key.sessionId, key.subpath);
    const s = await this.#session(sid, false);
    if (!s) return null;
    const entries = s.messages.map((m) => JSON.parse(m.contentJson) as SessionStoreEntry);
    const dangling = danglingToolUses(entries);
    if (dangling.length === 0) return entries;
    const all = await s.reconcileToolUses(dangling.map((d) => d.id));
    // A call deferred for approval stays unanswered: the SDK asks PreToolUse about it again.
    const answered = dangling.map((d, i) => [d, all[i]!] as const).filter(([, r]) => !deferred(r));
    if (answered.length === 0) return entries;
    const last = answered[answered.length - 1]![0].entry;
    const answer: SessionStoreEntry = {
      parentUuid: last.uuid ?? null,
      isSidechain: Boolean(last.isSidechain ?? false),
      type: "user",
      message: { role: "user", content: answered.map(([d, r]) => answerOf(d, r)) },
      uuid: randomUUID(),
      timestamp: new Date().toISOString(),
      userType: "external",
      sessionId: key.sessionId,
      ...Object.fromEntries(["cwd", "version", "gitBranch", "entrypoint"].filter((k) => k in last).map((k) => [k, last[k]])),
      toolUseResult: "savepoint: answered on resume from the ledger",
      sourceToolAssistantUUID: last.uuid ?? null,
    };
    await this.#append(sid, s, [answer]);
    return [...entries, answer];
  }

  /** Deletes the session; a main transcript's (no subpath) with its subagent transcripts. */
  async delete(key: SessionKey): Promise<void> {
    const subpaths = key.subpath ? [key.subpath] : [undefined, ...(await this.listSubkeys(key))];
    for (const sub of subpaths) {
      const sid = sessionIdFor(key.sessionId, sub);
      const s = await this.#session(sid, false);
      if (s) {
        await s.delete();
        this.#sessions.delete(sid);
        this.#seen.delete(sid);
      }
    }
  }

  async #listed(labelFilter: Record<string, string>): Promise<pb.SessionSummary[]> {
    const out: pb.SessionSummary[] = [];
    let pageToken = "";
    do {
      const r = await this.#client.raw.listSessions({ labelFilter, pageSize: 1000, pageToken });
      out.push(...r.sessions);
      pageToken = r.nextPageToken;
    } while (pageToken);
    return out;
  }

  /**
   * The main transcripts of projectKey: each SDK session id with its
   * savepointd session's last update, in Unix milliseconds. Nothing is
   * taken over (unlike load).
   */
  async listSessions(projectKey: string): Promise<{ sessionId: string; mtime: number }[]> {
    return (await this.#listed({ [LABEL_PROJECT]: projectKey }))
      .filter((x) => !(LABEL_SUBPATH in x.labels))
      .map((x) => ({ sessionId: x.labels[LABEL_SESSION]!, mtime: millis(x.updateTime) }));
  }

  /**
   * The SDK's folded summary of each main transcript of projectKey that has
   * one (saved with its appends), stamped with the same mtime as
   * listSessions: one ListSessions and one GetSession (for the session's
   * state) per session, none taken over.
   */
  async listSessionSummaries(projectKey: string): Promise<SessionSummaryEntry[]> {
    const out: SessionSummaryEntry[] = [];
    for (const x of await this.#listed({ [LABEL_PROJECT]: projectKey })) {
      if (LABEL_SUBPATH in x.labels) continue;
      let state: string;
      try {
        state = (await this.#client.raw.getSession({ sessionId: x.sessionId })).checkpoint?.stateJson ?? "";
      } catch (err) {
        if (err instanceof SessionNotFoundError) continue;
        throw err;
      }
      const data = (state ? JSON.parse(state) : {})[SUMMARY_STATE] as Record<string, unknown> | undefined;
      if (data !== undefined) out.push({ sessionId: x.labels[LABEL_SESSION]!, mtime: millis(x.updateTime), data });
    }
    return out;
  }

  /** The subpaths of the subagent transcripts saved under the SDK session key. */
  async listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]> {
    return (await this.#listed({ [LABEL_PROJECT]: key.projectKey, [LABEL_SESSION]: key.sessionId }))
      .filter((x) => LABEL_SUBPATH in x.labels)
      .map((x) => x.labels[LABEL_SUBPATH]!);
  }

  // -- hooks -------------------------------------------------------------------

  /**
   * The SDK's Options.hooks putting every tool call matching matcher
   * (undefined: every tool) on the ledger, with onFailure "block": a call
   * whose registration fails does not run.
   */
  hooks(matcher?: string): ToolHooks {
    const m = (hook: HookCallback): HookCallbackMatcher[] => [{ ...(matcher === undefined ? {} : { matcher }), hooks: [hook], onFailure: "block" }];
    return { PreToolUse: m(this.preToolUse), PostToolUse: m(this.postToolUse), PostToolUseFailure: m(this.postToolUseFailure) };
  }

  /**
   * PreToolUse: registers the call as pending and begun in one durable
   * step. A call with a recorded outcome is denied with that outcome as the
   * reason (the model reads it as the tool's result) instead of running
   * again; a side-effecting call another process began and never recorded
   * is denied with the daemon's in-doubt text.
   */
  readonly preToolUse: HookCallback = async (input, toolUseID) => {
    const tid = toolUseIdOf(input, toolUseID);
    const name = String(input.tool_name ?? "");
    const s = await this.#session(sessionIdFor(input.session_id), true);
    const cls = this.effectClass(name);
    const call = { toolUseId: tid, name, inputJson: JSON.stringify(input.tool_input ?? {}), effectClass: cls };
    this.#calls.set(tid, s);
    let reg: { alreadyBegun: boolean; effect?: pb.Effect; duplicate?: pb.DuplicateToolUse };
    if (this.#approval.has(name)) {
      const b = await this.#client.raw.beginEffect({
        sessionId: s.id,
        toolUseId: tid,
        epoch: s.epoch,
        toolUse: { ...call, toolUseId: "", beginTracked: true },
        requiresApproval: true,
        requestId: randomUUID(),
      });
      if (b.decision === Decision.DECISION_AWAIT_APPROVAL) {
        return defer(`This ${name} call (tool_use_id ${tid}) waits for a person's approval: savepoint approve ${s.id} ${tid}`);
      }
      if (b.decision === Decision.DECISION_DENIED) {
        const note = deniedText(b.approval);
        await s.refuseToolUse(tid, JSON.stringify(note));
        return deny(note);
      }
      reg = b; // begun against its approval, which the begin spent
    } else {
      reg = await s.registerToolUse(call);
    }
    if (reg.duplicate) return deny(reg.duplicate.toolResultText);
    if (reg.effect) {
      const what = reg.effect.refused ? "was refused before it ran" : "already ran";
      return deny(`Not run again: this ${name} call (tool_use_id ${tid}) ${what}; its recorded outcome follows.\n${text(outputOf(reg.effect.output))}`);
    }
    if (reg.alreadyBegun && !this.#begun.has(tid) && cls === EffectClass.EFFECT_CLASS_SIDE_EFFECT) {
      const [res] = await s.reconcileToolUses([tid]);
      return deny(res!.toolResultText);
    }
    this.#begun.add(tid);
    return {};
  };

  /** PostToolUse: records what the tool returned (as JSON text). */
  readonly postToolUse: HookCallback = async (input, toolUseID) => {
    const tid = toolUseIdOf(input, toolUseID);
    const s = await this.#session(sessionIdFor(input.session_id), true);
    await s.recordToolUse(tid, JSON.stringify(input.tool_response ?? null));
    return {};
  };

  /**
   * PostToolUseFailure: records the failure as an error outcome. An
   * interrupted call is not recorded: its outcome is unknown.
   */
  readonly postToolUseFailure: HookCallback = async (input, toolUseID) => {
    if (input.is_interrupt === true) return {};
    const tid = toolUseIdOf(input, toolUseID);
    const s = await this.#session(sessionIdFor(input.session_id), true);
    await s.recordToolUse(tid, JSON.stringify(String(input.error ?? "")), true);
    return {};
  };

  /**
   * The SDK's Options.canUseTool: asks inner (undefined: allow everything)
   * and records a call it refuses as refused, never run, so that a resume
   * does not report it in doubt.
   */
  canUseTool<O extends PermissionOptions = PermissionOptions, R extends PermissionResult | null = { behavior: "allow" }>(
    inner?: CanUseTool<O, R>,
  ): CanUseTool<O, R | { behavior: "allow" }> {
    return async (toolName, input, options) => {
      if (!inner) return { behavior: "allow" };
      const result = await inner(toolName, input, options);
      const tid = options.toolUseID;
      const s = tid ? this.#calls.get(tid) : undefined;
      if (result?.behavior === "deny" && s) await s.refuseToolUse(tid, JSON.stringify(result.message || "refused by the permission check"));
      return result;
    };
  }
}

function answerOf(d: DanglingToolUse, r: pb.Resolution): Record<string, unknown> {
  const block: Record<string, unknown> = { type: "tool_result", tool_use_id: d.id };
  if (r.decision === Decision.DECISION_REUSE) {
    block.content = outputOf(r.effect?.output ?? "");
    if (r.effect?.isError) block.is_error = true;
  } else if (r.decision === Decision.DECISION_RUN) {
    block.content = fillTemplate(r.begun ? INTERRUPTED : NEVER_STARTED, d.name, d.id);
    block.is_error = true;
  } else {
    block.content = r.toolResultText;
    block.is_error = true;
  }
  return block;
}
