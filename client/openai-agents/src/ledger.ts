/**
 * The durable tools' bookkeeping in a SavepointSession: which calls are
 * running and in which process, the effect calls (BeginEffect,
 * RecordEffect) around each, and the answer a resumed run gives to a call
 * whose process died.
 *
 * Each call follows docs/protocol.md for its own tool use: saved pending (and
 * listed in the session's stateJson with the process running it) before the
 * tool starts, BeginEffect unless read-only, the tool, RecordEffect of its
 * real outcome, then a save that stops it pending. A process killed before
 * the SDK saved the call's output leaves the call listed, and the next
 * getItems by any process answers it (the recorded output, a re-run where
 * that is safe, or the in-doubt text) and appends what the history lacks of
 * the call and its output, so the history never holds a function_call
 * without exactly one function_call_result.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

import { type AgentInputItem, RunContext } from "@openai/agents-core";
import { Decision, EffectClass, pb, SavepointError, SessionFencedError, toolContent, type Verified } from "@savepoint-dev/client";

import type { SavepointSession } from "./session.js";
import { type Change, partOf, type View, withPart } from "./state.js";

/** What running a tool does: re-running a read-only tool is always safe, an idempotent one is safe with the same idempotency key, a side-effecting one must not run twice. */
export type Effect = "read_only" | "idempotent" | "side_effect";

export const EFFECT_CLASSES: Record<Effect, EffectClass> = {
  read_only: EffectClass.EFFECT_CLASS_READ_ONLY,
  idempotent: EffectClass.EFFECT_CLASS_IDEMPOTENT,
  side_effect: EffectClass.EFFECT_CLASS_SIDE_EFFECT,
};

/** How many calls answered on resume are remembered, to drop the SDK's late copy of them. */
const RESOLVED_KEPT = 100;

/** The process that runs a call: with the pid, the start time names one process on its host. */
export interface Owner {
  host: string;
  pid: number;
  start: string;
}

/** A durable tool use listed in the session's stateJson while it runs. */
export interface ToolUseRecord {
  name: string;
  arguments: string;
  owner: Owner;
  recorded?: boolean;
  /** Stopped for the SDK's approval: pending, waiting in savepointd, left to the run's RunState (never answered by a resume). */
  waiting?: boolean;
}

/** A durable tool could not be run under the ledger: its run's session is not a SavepointSession, or its call id is already in use. */
export class DurableToolError extends Error {
  override name = "DurableToolError";
}

/** How a durable tool runs one call, outside the ledger: the registry's entry for its name. */
export interface Durable {
  name: string;
  effect: Effect;
  /** Runs the tool (the SDK parses the arguments) with key as the idempotency key and returns its output as text, and whether it is a failure's. */
  rerun(runContext: RunContext<unknown>, call: { callId: string; name: string; arguments: string }, key: string): Promise<{ output: string; isError: boolean }>;
  /** The tool's verify hook, asked on resume about a call in doubt. */
  verify?: VerifyHook;
  /** The tool's needsApproval is true: a resumed call of it begins only against a recorded approval. */
  approval?: boolean;
}

/**
 * A durable tool's verify hook: given the idempotency key of a call in doubt
 * and its arguments (parsed JSON), it answers what it found, as the client's
 * Verified: { status: "done", output } (recorded and given to the model),
 * { status: "notDone" } (the call runs again with the same key) or
 * { status: "unknown" } (it stays in doubt, as does a throw).
 */
export type VerifyHook = (idempotencyKey: string, input: unknown) => Verified | Promise<Verified>;

/** By tool name: what a resume may re-run. */
export const registry = new Map<string, Durable>();
/** The calls this process is running, as sessionId + "\0" + callId. */
const live = new Set<string>();
/** Begins an approval ask made that began the call (approved in savepointd), by sessionId + "\0" + callId: the call's run must not begin it again. */
const asked = new Map<string, { key: string; already: boolean }>();
/** Each run's RunContext to its session: the SDK passes the run's context to the session's methods and to each tool. */
const runs = new WeakMap<object, SavepointSession>();
/** Every SavepointSession of this process, for findSession. */
const sessions = new Set<WeakRef<SavepointSession>>();
const keyStore = new AsyncLocalStorage<string>();

/**
 * A stage of one durable call: listed pending, begun, ran (the tool
 * returned, nothing recorded yet), recorded (RecordEffect returned), settled
 * (saved as no longer pending).
 */
export type Stage = "listed" | "begun" | "ran" | "recorded" | "settled";
let stageHook: ((stage: Stage, callId: string) => void) | undefined;

/** Observes each stage of every durable call this process runs, synchronously (for crash tests); undefined removes the hook. */
export function setStageHook(hook: ((stage: Stage, callId: string) => void) | undefined): void {
  stageHook = hook;
}

/**
 * Returns the idempotency key of the durable tool call running in this
 * async context: the same on every run of one call (pass it to an API that
 * accepts one), "" for a read-only tool or outside a durable tool.
 */
export function idempotencyKey(): string {
  return keyStore.getStore() ?? "";
}

/** Runs fn with key as the idempotency key its durable tool call sees. */
export function withKey<T>(key: string, fn: () => T): T {
  return keyStore.run(key, fn);
}

/** Remembers that the run of runContext uses session. */
export function bindRun(runContext: RunContext<unknown> | undefined, session: SavepointSession): void {
  if (runContext && typeof runContext === "object") runs.set(runContext, session);
}

/** Remembers s, a SavepointSession of this process, for findSession. */
export function registerSession(s: SavepointSession): void {
  sessions.add(new WeakRef(s));
}

/**
 * The SavepointSession of the run of runContext. A run resumed from a
 * RunState (after state.approve) runs its approved tools before it calls its
 * session, so it is not bound yet: its session is then the one
 * SavepointSession of this process whose history holds this call's
 * function_call (the interrupted run saved it), bound to the run from then
 * on; undefined when no session, or several, hold it.
 */
export async function findSession(runContext: RunContext<unknown> | undefined, callId: string): Promise<SavepointSession | undefined> {
  const bound = sessionOf(runContext);
  if (bound || !callId) return bound;
  const found = new Map<string, SavepointSession>();
  for (const ref of [...sessions]) {
    const s = ref.deref();
    if (!s) {
      sessions.delete(ref);
      continue;
    }
    if (found.has(s.sessionId)) continue;
    let items: AgentInputItem[];
    try {
      items = (await s.load(true)).items ?? [];
    } catch {
      continue; // a closed session
    }
    if (items.some((it) => (it as { type?: string; callId?: string }).type === "function_call" && (it as { callId?: string }).callId === callId)) {
      found.set(s.sessionId, s);
    }
  }
  if (found.size !== 1) return undefined;
  const [s] = found.values();
  bindRun(runContext, s!);
  return s;
}

/** The SavepointSession of the run a tool call belongs to, if any. */
export function sessionOf(runContext: RunContext<unknown> | undefined): SavepointSession | undefined {
  return runContext && typeof runContext === "object" ? runs.get(runContext) : undefined;
}

const liveKey = (s: SavepointSession, callId: string) => `${s.sessionId}\0${callId}`;

// -- which process runs a call ------------------------------------------------

/** The start time of process pid in clock ticks since boot (field 22 of /proc/PID/stat); "" when it is not running or unknown. */
export function startTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/)[19] ?? "";
  } catch {
    return "";
  }
}

function owner(): Owner {
  return { host: hostname(), pid: process.pid, start: startTime(process.pid) };
}

/**
 * Whether a listed call's process stopped without the SDK saving it: its
 * process is this one and no longer runs it, or is gone from this host. A
 * call listed by a process on another host counts as interrupted (its answer
 * is then the in-doubt text or the recorded output, never a second run of a
 * side effect: BeginEffect's alreadyBegun decides).
 */
function isInterrupted(s: SavepointSession, callId: string, c: ToolUseRecord): boolean {
  const o = c.owner ?? ({} as Partial<Owner>);
  const me = owner();
  if (o.host !== me.host) return true;
  if (o.pid === me.pid && o.start === me.start) return !live.has(liveKey(s, callId));
  return typeof o.pid !== "number" || startTime(o.pid) !== o.start;
}

/**
 * The calls listed in v whose process stopped before the SDK saved them. A
 * call waiting for approval is not one: the run's RunState holds it, and its
 * resume asks again or runs it.
 */
export function interrupted(s: SavepointSession, v: View): string[] {
  const calls = partOf(v).calls ?? {};
  return Object.entries(calls)
    .filter(([id, c]) => !c.waiting && isInterrupted(s, id, c))
    .map(([id]) => id);
}

// -- the session's side of the ledger -----------------------------------------

const callIdOf = (it: AgentInputItem): string | undefined => {
  const r = it as { type?: unknown; callId?: unknown };
  return (r.type === "function_call" || r.type === "function_call_result") && typeof r.callId === "string" ? r.callId : undefined;
};

/**
 * Plans addItems' save of batch: the items as they are, less the SDK's late
 * copy of a call a resume already answered; an output of a listed call stops
 * that call pending.
 */
export function planAppend(v: View, batch: AgentInputItem[]): Change {
  const part = partOf(v);
  if (!part.calls && !part.resolved) return { append: batch };
  const calls = part.calls ?? {};
  const resolved = [...(part.resolved ?? [])];
  const keep: AgentInputItem[] = [];
  const answered = new Set<string>();
  for (const it of batch) {
    const cid = callIdOf(it);
    const kind = (it as { type?: string }).type;
    if (cid !== undefined && resolved.includes(cid)) {
      if (kind === "function_call_result") resolved.splice(resolved.indexOf(cid), 1); // answered on resume already: the SDK's late copy
      continue;
    }
    if (cid !== undefined && kind === "function_call_result" && cid in calls) answered.add(cid);
    keep.push(it);
  }
  for (const cid of answered) delete calls[cid];
  return {
    append: keep,
    pending: v.pending.filter((p) => !answered.has(p.toolUseId)),
    stateJson: withPart(v, { ...part, calls, resolved }),
  };
}

// -- the effect calls ---------------------------------------------------------

/** The output a call whose outcome is unknown gets. */
export function inDoubt(name: string, callId: string, why: string): string {
  return (
    `The outcome of this ${name} call (tool_use_id ${callId}) is unknown: ${why}. ` +
    "It was not run again, to avoid repeating a side effect. Check whether it took effect before retrying it."
  );
}

/** A tool's return value as the text recorded and given to the model. */
/**
 * What the SDK gets for a tool's recorded text: its structured output (the
 * array of text/image/file objects the tool returned) when the text is their
 * JSON array, by the rule every client reads the ledger with (toolContent of
 * @savepoint-dev/client), else the text.
 */
export function content(output: string): unknown {
  return toolContent(output);
}

/**
 * A function_call_result item's output for a recorded text: the
 * input_text/input_image items the SDK makes of structured output (text, and
 * an image given as a URL or data URL), else the text.
 */
export function historyOutput(output: string): unknown {
  const c = toolContent(output);
  if (typeof c === "string") return { type: "text", text: c };
  const items: Record<string, unknown>[] = [];
  for (const b of c) {
    if (b.type === "text" && typeof b.text === "string") items.push({ type: "input_text", text: b.text });
    else if (b.type === "image" && typeof b.image === "string" && b.image !== "") {
      items.push({ type: "input_image", image: b.image, ...(typeof b.detail === "string" && b.detail !== "" ? { detail: b.detail } : {}) });
    } else return { type: "text", text: output };
  }
  return items;
}

export function text(out: unknown): string {
  if (typeof out === "string") return out;
  if (out === undefined) return "";
  try {
    return JSON.stringify(out) ?? String(out);
  } catch {
    return String(out);
  }
}

/**
 * BeginEffect with the session's current epoch (a SavepointSession never
 * owns the session, so a takeover by Resume is followed, not obeyed).
 * Returns the idempotency key, alreadyBegun, and, when the daemon's
 * duplicate-intent guard caught the call, the tool result its text gives
 * (the call must not run); for a call that requires approval and is not
 * begun, the denial's text (denied) or awaiting.
 */
type Began = { key: string; already: boolean; duplicate?: { output: string; isError: boolean }; denied?: string; awaiting?: boolean };

async function begin(s: SavepointSession, callId: string, requiresApproval = false): Promise<Began> {
  const c = await s.client();
  for (let i = 0; i < 5; i++) {
    try {
      const r = await c.raw.beginEffect({ sessionId: s.sessionId, toolUseId: callId, epoch: (await s.known()).epoch, requiresApproval });
      const duplicate = r.duplicate ? { output: r.duplicate.toolResultText, isError: r.duplicate.isError } : undefined;
      if (duplicate) return { key: "", already: false, duplicate };
      if (r.decision === Decision.DECISION_DENIED) return { key: "", already: false, denied: deniedText(r.approval) };
      if (r.decision === Decision.DECISION_AWAIT_APPROVAL) return { key: "", already: false, awaiting: true };
      return { key: r.idempotencyKey, already: r.alreadyBegun };
    } catch (err) {
      if (!(err instanceof SessionFencedError)) throw err;
      await s.load(false);
    }
  }
  throw new DurableToolError(`BeginEffect of tool use ${JSON.stringify(callId)} was fenced five times in a row; it was not run.`);
}

/** The tool result the model is given for a call denied in savepointd. */
function deniedText(a: pb.EffectApproval | undefined): string {
  const by = a?.decidedBy || "a person";
  return a?.note ? `This call was denied by ${by}; it did not run. Their note: ${a.note}` : `This call was denied by ${by}; it did not run.`;
}

/**
 * Records in savepointd the approval the SDK's RunState holds for callId
 * (state.approve), bound to the call's input as it is pending; the begin
 * that follows spends it. A call denied in savepointd meanwhile, or begun
 * already, is left to the begin's answer.
 */
async function approve(s: SavepointSession, callId: string): Promise<void> {
  const c = await s.client();
  try {
    await c.raw.approveEffect({
      sessionId: s.sessionId,
      toolUseId: callId,
      decision: pb.ApprovalStatus.APPROVAL_STATUS_APPROVED,
      decidedBy: "openai-agents state.approve",
      requestId: randomUUID(),
    });
  } catch (err) {
    if (!(err instanceof SavepointError && (err.reason === "APPROVAL_CONFLICT" || err.reason === "APPROVAL_NOT_WAITING"))) throw err;
  }
}

/** Records a denied call as refused, stops it pending, and returns the text the model is given. */
async function refuse(s: SavepointSession, callId: string, name: string, output: string): Promise<string> {
  const c = await s.client();
  try {
    await c.raw.recordEffect({ sessionId: s.sessionId, toolUseId: callId, name, output, isError: true, refused: true });
  } catch (err) {
    c.config.logger.error("the denial of a durable tool use could not be recorded.", { session: s.sessionId, tool_use_id: callId, error: String(err) });
    return output;
  }
  await settled(s, callId);
  return output;
}

/**
 * RecordEffect of a tool's real outcome, tried twice. A record that still
 * fails is reported through the client's logger (the tool ran: its output is
 * kept and returned, and a resume will answer the call in doubt).
 */
async function record(s: SavepointSession, callId: string, name: string, output: string, isError: boolean): Promise<boolean> {
  const c = await s.client();
  for (let attempt = 1; ; attempt++) {
    try {
      await c.raw.recordEffect({ sessionId: s.sessionId, toolUseId: callId, name, output, isError });
      return true;
    } catch (err) {
      if (!(err instanceof SavepointError) || attempt === 2) {
        c.config.logger.error("the outcome of a durable tool use could not be recorded; it ran, and a resume will report it in doubt.", {
          session: s.sessionId,
          tool_use_id: callId,
          name,
          error: String(err),
        });
        return false;
      }
    }
  }
}

/** Records the outcome run produced, and stops the call pending. run returns the text and whether it is a failure. */
export async function execute(
  s: SavepointSession,
  callId: string,
  name: string,
  key: string,
  run: () => Promise<{ output: string; isError: boolean }>,
): Promise<{ output: string; isError: boolean }> {
  const out = await withKey(key, run);
  stageHook?.("ran", callId);
  if (await record(s, callId, name, out.output, out.isError)) {
    stageHook?.("recorded", callId);
    await settled(s, callId);
    stageHook?.("settled", callId);
  }
  return out;
}

/** Stops callId pending: the ledger holds its answer (its recorded outcome, or the earlier call it duplicates). */
async function settled(s: SavepointSession, callId: string): Promise<void> {
  await s.mutate((v) => {
    const part = partOf(v);
    const c = part.calls?.[callId];
    if (!c) return undefined;
    c.recorded = true;
    return { pending: v.pending.filter((p) => p.toolUseId !== callId), stateJson: withPart(v, part) };
  });
}

type ToolSpec = { name: string; effect: Effect; repeatable?: boolean };

function toolUse(d: ToolSpec, callId: string, args: string): pb.ToolUse {
  return {
    toolUseId: callId,
    name: d.name,
    inputJson: args || "{}",
    effectClass: EFFECT_CLASSES[d.effect],
    beginTracked: d.effect !== "read_only",
    repeatable: d.repeatable === true,
  };
}

/**
 * Registers with savepointd a call the SDK is about to stop the run for (its
 * approval policy said yes): saved pending and listed waiting, then
 * BeginEffect with requiresApproval, which the daemon answers
 * AWAIT_APPROVAL (the call counts as waiting in ListSessions,
 * WatchSessions and the inspector) until someone decides. Returns whether
 * the SDK should still ask: true while it waits; false once decided in
 * savepointd (`savepoint approve`, or an approval spent by an earlier run),
 * so the SDK runs the tool, whose run answers the denial or runs under the
 * begin made here.
 */
export async function ask(s: SavepointSession, d: ToolSpec, callId: string, args: string): Promise<boolean> {
  let running = false;
  await s.mutate((v) => {
    const part = partOf(v);
    const calls = (part.calls ??= {});
    const c = calls[callId];
    running = c !== undefined && !c.waiting;
    if (c) return undefined;
    calls[callId] = { name: d.name, arguments: args, owner: owner(), waiting: true };
    return { pending: [...v.pending, toolUse(d, callId, args)], stateJson: withPart(v, part) };
  });
  if (running) return false; // run (or interrupted) already: its own run answers it
  const b = await begin(s, callId, true);
  if (b.awaiting) return true;
  if (!b.duplicate && b.denied === undefined) asked.set(liveKey(s, callId), { key: b.key, already: b.already });
  return false;
}

const outputText = (o: unknown): string =>
  typeof o === "string" ? o : o && typeof o === "object" && typeof (o as { text?: unknown }).text === "string" ? (o as { text: string }).text : text(o);

/**
 * Records the SDK's rejection (state.reject) of each call waiting for
 * approval whose function_call_result batch brings (the SDK answers a
 * rejected call without running its tool): a denial (ApproveEffect, the
 * output as its note, decidedBy "openai-agents state.reject"), then the
 * call recorded as refused with that output, so a resume or a replay
 * reuses it and never runs the call. A call approved in savepointd
 * meanwhile keeps that approval unspent, and is recorded refused all the
 * same: this run gave the model the rejection.
 */
export async function recordRejections(s: SavepointSession, batch: AgentInputItem[]): Promise<void> {
  const outs = new Map<string, unknown>();
  for (const it of batch) {
    const r = it as { type?: string; callId?: unknown; output?: unknown };
    if (r.type === "function_call_result" && typeof r.callId === "string") outs.set(r.callId, r.output);
  }
  if (outs.size === 0) return;
  let v = await s.known();
  if (Object.values(partOf(v).calls ?? {}).some((c) => c.waiting)) v = await s.load(false);
  const calls = partOf(v).calls ?? {};
  const c = await s.client();
  for (const [callId, out] of outs) {
    const rec = calls[callId];
    if (!rec?.waiting) continue;
    const note = outputText(out);
    try {
      await c.raw.approveEffect({
        sessionId: s.sessionId,
        toolUseId: callId,
        decision: pb.ApprovalStatus.APPROVAL_STATUS_DENIED,
        note,
        decidedBy: "openai-agents state.reject",
        requestId: randomUUID(),
      });
    } catch (err) {
      if (!(err instanceof SavepointError && (err.reason === "APPROVAL_CONFLICT" || err.reason === "APPROVAL_NOT_WAITING"))) throw err;
      c.config.logger.warn("the rejection of a durable tool use was not recorded as a denial.", { session: s.sessionId, tool_use_id: callId, error: String(err) });
    }
    try {
      await c.raw.recordEffect({ sessionId: s.sessionId, toolUseId: callId, name: rec.name, output: note, isError: true, refused: true });
    } catch (err) {
      c.config.logger.warn("the rejection of a durable tool use could not be recorded.", { session: s.sessionId, tool_use_id: callId, error: String(err) });
    }
  }
}

/**
 * Runs one call of a durable tool under the ledger: lists it pending (Point
 * A), begins it unless read-only, runs it through run and records its
 * outcome. A side-effecting call another process began is not run: it is
 * answered with the in-doubt text; one that repeats, with the same
 * arguments, a call an earlier, interrupted run made (the daemon's
 * duplicate-intent guard) is answered with the daemon's text.
 */
export async function runCall(
  s: SavepointSession,
  d: { name: string; effect: Effect; repeatable?: boolean; approved?: boolean },
  call: { callId: string; arguments: string },
  run: () => Promise<{ output: string; isError: boolean }>,
): Promise<{ output: string; isError: boolean }> {
  const { callId } = call;
  const tu = toolUse(d, callId, call.arguments);
  const begun = asked.get(liveKey(s, callId));
  asked.delete(liveKey(s, callId));
  let waited = false;
  live.add(liveKey(s, callId));
  try {
    try {
      await s.mutate((v) => {
        const part = partOf(v);
        const calls = (part.calls ??= {});
        if (calls[callId]?.waiting) {
          // Asked for approval (by this run or an earlier one): pending since; this process runs it now.
          waited = true;
          calls[callId] = { name: d.name, arguments: call.arguments, owner: owner() };
          return { stateJson: withPart(v, part) };
        }
        if (callId in calls || v.pending.some((p) => p.toolUseId === callId)) {
          throw new DurableToolError(
            `tool use ${JSON.stringify(callId)} of session ${JSON.stringify(s.sessionId)} is already running or interrupted; it was not run again.`,
          );
        }
        calls[callId] = { name: d.name, arguments: call.arguments, owner: owner() };
        return { pending: [...v.pending, tu], stateJson: withPart(v, part) };
      });
      stageHook?.("listed", callId);
    } catch (err) {
      if (err instanceof SavepointError && err.reason === "CALL_ALREADY_RECORDED") {
        throw new DurableToolError(
          `tool use ${JSON.stringify(callId)} already has a recorded outcome in session ${JSON.stringify(s.sessionId)} (a reused call id); it was not run again.`,
        );
      }
      throw err;
    }
    let key = "";
    if (d.approved) await approve(s, callId);
    const gated = d.approved === true || waited || begun !== undefined;
    if (d.effect !== "read_only" || gated) {
      const b: Began = begun ?? (await begin(s, callId, gated));
      if (b.duplicate) {
        // Not run: the same call of an earlier, interrupted run answers it, in the daemon's words.
        await settled(s, callId);
        return b.duplicate;
      }
      if (b.denied !== undefined) return { output: await refuse(s, callId, d.name, b.denied), isError: true };
      if (b.awaiting) {
        throw new DurableToolError(`tool use ${JSON.stringify(callId)} of session ${JSON.stringify(s.sessionId)} waits for approval in savepointd; it was not run.`);
      }
      key = b.key;
      stageHook?.("begun", callId);
      if (b.already && d.effect === "side_effect") return { output: inDoubt(d.name, callId, "another process started it"), isError: true };
    }
    return await execute(s, callId, d.name, key, run);
  } finally {
    live.delete(liveKey(s, callId));
  }
}

// -- answering interrupted calls ---------------------------------------------

async function resolutions(s: SavepointSession): Promise<Map<string, pb.Resolution>> {
  const c = await s.client();
  const out = new Map<string, pb.Resolution>();
  for (let token = ""; ; ) {
    const r = await c.raw.reconcile({ sessionId: s.sessionId, pageToken: token });
    for (const res of r.resolutions) if (res.toolUse) out.set(res.toolUse.toolUseId, res);
    token = r.nextPageToken;
    if (token === "") return out;
  }
}

async function effects(s: SavepointSession, ids: Set<string>): Promise<Map<string, pb.Effect>> {
  const out = new Map<string, pb.Effect>();
  if (ids.size === 0) return out;
  const c = await s.client();
  for (let token = ""; out.size < ids.size; ) {
    const r = await c.raw.listEffects({ sessionId: s.sessionId, pageToken: token });
    for (const e of r.entries) if (ids.has(e.toolUseId) && e.effect) out.set(e.toolUseId, e.effect);
    token = r.nextPageToken;
    if (token === "") break;
  }
  return out;
}

const STOPPED = "the agent stopped before its outcome was recorded";

/**
 * The definite answer of d's verify hook about call callId in doubt, or
 * undefined to leave it in doubt ("unknown", or the hook threw).
 */
async function verified(s: SavepointSession, d: Durable, callId: string, key: string, args: string): Promise<Exclude<Verified, { status: "unknown" }> | undefined> {
  const log = (await s.client()).config.logger;
  const attrs = { session: s.sessionId, tool_use_id: callId, name: d.name };
  let v: Verified;
  try {
    v = await d.verify!(key, JSON.parse(args || "{}"));
  } catch (err) {
    log.warn("savepoint: verify of a durable tool use failed; it stays in doubt", { ...attrs, error: String(err) });
    return undefined;
  }
  if (v?.status === "done" || v?.status === "notDone") return v;
  log.warn("savepoint: verify could not tell whether a durable tool use took effect; it stays in doubt", attrs);
  return undefined;
}

/** ResolveEffect of v (resolver VERIFY) under the session's current epoch, following takeovers as begin does. */
async function resolve(s: SavepointSession, callId: string, v: Exclude<Verified, { status: "unknown" }>): Promise<pb.ResolveEffectResponse> {
  const c = await s.client();
  const done = v.status === "done";
  for (let i = 0; i < 5; i++) {
    try {
      return await c.raw.resolveEffect({
        sessionId: s.sessionId,
        toolUseId: callId,
        epoch: (await s.known()).epoch,
        outcome: done ? pb.ResolutionOutcome.RESOLUTION_OUTCOME_DONE : pb.ResolutionOutcome.RESOLUTION_OUTCOME_NOT_DONE,
        output: done ? text(v.output) : "",
        isError: done ? (v.isError ?? false) : false,
        note: v.note ?? "",
        resolverKind: pb.ResolverKind.RESOLVER_KIND_VERIFY,
        resolvedBy: "verify",
        requestId: randomUUID(),
      });
    } catch (err) {
      if (!(err instanceof SessionFencedError)) throw err;
      await s.load(false);
    }
  }
  throw new DurableToolError(`ResolveEffect of tool use ${JSON.stringify(callId)} was fenced five times in a row.`);
}

/** The output an interrupted call gets: its recorded outcome, a re-run's, what its tool's verify hook found, or the in-doubt text. */
async function answer(
  s: SavepointSession,
  runContext: RunContext<unknown> | undefined,
  callId: string,
  c: ToolUseRecord,
  res: pb.Resolution | undefined,
  effect: pb.Effect | undefined,
): Promise<string> {
  const name = String(c.name ?? "");
  const args = String(c.arguments ?? "");
  if (effect) return effect.output;
  if (!res) return inDoubt(name, callId, STOPPED);
  if (res.decision === Decision.DECISION_REUSE) return res.effect?.output ?? "";
  const d = registry.get(name);
  if (res.decision === Decision.DECISION_IN_DOUBT && d?.verify) {
    const v = await verified(s, d, callId, res.idempotencyKey, args);
    if (v) {
      const resp = await resolve(s, callId, v);
      if (v.status === "done") return resp.entry?.effect?.output ?? "";
      res = { ...res, decision: Decision.DECISION_RUN, toolResultText: "" };
    }
  }
  if (res.decision !== Decision.DECISION_RUN) return res.toolResultText || inDoubt(name, callId, STOPPED);
  if (!d) {
    return (
      `This ${name} call (tool_use_id ${callId}) was interrupted before it ran and was not run again: ` +
      "the resumed agent has no durable tool of that name. Call it again if it is still needed."
    );
  }
  let key = res.idempotencyKey;
  if (d.effect !== "read_only" || d.approval) {
    const b = await begin(s, callId, d.approval === true);
    if (b.duplicate) return b.duplicate.output;
    if (b.denied !== undefined) return await refuse(s, callId, name, b.denied);
    if (b.awaiting) {
      return (
        `This ${name} call (tool_use_id ${callId}) was interrupted before it ran and was not run: ` +
        "it needs an approval that was never recorded. Call it again if it is still needed."
      );
    }
    key = b.key;
    if (b.already && !res.begun && d.effect === "side_effect") return inDoubt(name, callId, "another process started it");
  }
  const ctx = runContext ?? new RunContext();
  live.add(liveKey(s, callId));
  try {
    const out = await execute(s, callId, name, key, async () => {
      try {
        return await d.rerun(ctx, { callId, name, arguments: args }, key);
      } catch (err) {
        return { output: err instanceof Error ? err.message : String(err), isError: true };
      }
    });
    return out.output;
  } finally {
    live.delete(liveKey(s, callId));
  }
}

/**
 * Answers the interrupted calls ids and appends each one's output (and the
 * call, when the history lacks it) in one save; a call another process
 * answered first is left to it.
 */
export async function resolveInterrupted(s: SavepointSession, runContext: RunContext<unknown> | undefined, ids: string[]): Promise<void> {
  const v = await s.load(false);
  const calls = partOf(v).calls ?? {};
  const todo = ids.filter((id) => id in calls);
  if (todo.length === 0) return;
  const pending = new Set(v.pending.map((p) => p.toolUseId));
  const res = todo.some((id) => pending.has(id)) ? await resolutions(s) : new Map<string, pb.Resolution>();
  const recorded = await effects(s, new Set(todo.filter((id) => !pending.has(id))));
  const outputs = new Map<string, string>();
  for (const id of todo) outputs.set(id, await answer(s, runContext, id, calls[id], res.get(id), recorded.get(id)));
  await s.mutate(
    (v) => {
      const part = partOf(v);
      const listed = part.calls ?? {};
      const now = [...outputs.keys()].filter((id) => id in listed);
      if (now.length === 0) return undefined;
      const items = v.items ?? [];
      const have = new Set(items.filter((it) => (it as { type?: string }).type === "function_call").map(callIdOf));
      const answered = new Set(items.filter((it) => (it as { type?: string }).type === "function_call_result").map(callIdOf));
      const append: AgentInputItem[] = [];
      for (const id of now) {
        const c = listed[id];
        delete listed[id];
        if (answered.has(id)) continue;
        if (!have.has(id)) append.push({ type: "function_call", callId: id, name: c.name, arguments: c.arguments, status: "completed" } as AgentInputItem);
        append.push({ type: "function_call_result", callId: id, name: c.name, status: "completed", output: historyOutput(outputs.get(id)!) } as AgentInputItem);
      }
      part.resolved = [...(part.resolved ?? []), ...now].slice(-RESOLVED_KEPT);
      return { append, pending: v.pending.filter((p) => !now.includes(p.toolUseId)), stateJson: withPart(v, part) };
    },
    { history: true },
  );
}

/**
 * Stops pending every pending tool use that has a recorded outcome (its
 * process died between RecordEffect and the save after it, so every save
 * carrying it is refused with CALL_ALREADY_RECORDED). Returns whether any
 * was found.
 */
export async function settleRecorded(s: SavepointSession): Promise<boolean> {
  const res = await resolutions(s);
  const done = new Set([...res].filter(([, r]) => r.decision === Decision.DECISION_REUSE).map(([id]) => id));
  if (done.size === 0) return false;
  await s.mutate((v) => {
    const part = partOf(v);
    for (const id of done) if (part.calls?.[id]) part.calls[id].recorded = true;
    return { pending: v.pending.filter((p) => !done.has(p.toolUseId)), stateJson: withPart(v, part) };
  });
  return true;
}
