import {
  AwaitingApprovalError,
  dial,
  EffectClass,
  type Client as SavepointClient,
  type Message,
  Session,
  SessionExistsError,
  SessionStatus,
  type ToolContent,
  type ToolUse,
  pb,
} from "@savepoint-dev/client";

import { RefusalError, SessionFailedError, StopReasonError } from "./errors.js";
import { type AgentTool, effectOf } from "./tools.js";

/** A content block of a message, as the Messages API sends it. */
export type Block = { type: string; [k: string]: unknown };

/** Where a session's state_json marks a saved reply that stopped with pause_turn (sent back to go on, not a final answer). */
const PAUSED = "paused_at";

/** A tool use that waits for a person's approval: its id, tool name and input (as the model gave it), and inputDigest, the hex SHA-256 the daemon binds the approval to. */
export interface ApprovalRequest {
  toolUseId: string;
  name: string;
  input: unknown;
  /** Pass Buffer.from(inputDigest, "hex") as approveEffect's inputDigest to decide only for the input shown. */
  inputDigest: string;
}

/**
 * What run() (runUntilDone()) returns when a tool use needs a person's
 * approval: the session is checkpointed with the turn's tool uses pending
 * (those that could run have run and are recorded), and waiting names the
 * ones waiting. Approve or deny each (client.approveEffect, `savepoint
 * approve SESSION TOOL_USE_ID`, the inspector), then call run() again: it
 * resumes the session, runs each approved tool use once, and gives a denied
 * one's note to the model as its result.
 */
export class Paused {
  constructor(
    readonly sessionId: string,
    readonly waiting: ApprovalRequest[],
  ) {}
}

function request(call: { toolUseId: string; name: string; inputJson?: string }, approval: pb.EffectApproval | undefined): ApprovalRequest {
  return {
    toolUseId: call.toolUseId,
    name: call.name,
    input: JSON.parse(call.inputJson || "{}"),
    inputDigest: Buffer.from(approval?.inputDigest ?? new Uint8Array()).toString("hex"),
  };
}

/** Options about approvals that DurableAgent and durableToolRunner share. */
export interface ApprovalOptions {
  /** The tools whose tool uses wait for a person's approval, bound to the call and its input (besides the client's own approvalRequired). */
  approvalRequired?: Iterable<string>;
  /** false: throw AwaitingApprovalError, as before pausing existed (deprecated), instead of returning Paused. Default true. */
  pauseForApproval?: boolean;
}

/** The text blocks of a message's content, joined. */
export function textOf(content: Block[]): string {
  return content.filter((b) => b.type === "text").map((b) => String(b.text ?? "")).join("");
}

/** The Messages API's messages of a session's history: each saved content exactly as it was saved. */
export function historyOf(s: Session): { role: string; content: unknown }[] {
  return s.messages.map((m: Message) => ({ role: m.role, content: JSON.parse(m.contentJson) }));
}

/**
 * What DurableAgent and DurableToolRunner share: the session's tools and
 * their effect classes, opening the session (start, or resume and reconcile
 * what was pending), the tool uses of a reply, running one tool use, and
 * the checks of a reply's stop reason.
 */
export class DurableLoop {
  readonly tools = new Map<string, AgentTool>();
  readonly approvalRequired: ReadonlySet<string>;
  readonly pauseForApproval: boolean;
  session: Session | undefined;

  constructor(
    readonly sessionId: string,
    tools: Iterable<AgentTool>,
    readonly trustMcpAnnotations = false,
    approvals: ApprovalOptions = {},
  ) {
    if (!sessionId) throw new TypeError("savepoint: sessionId is empty");
    for (const t of tools) {
      if (this.tools.has(t.name)) throw new TypeError(`savepoint: two tools are named ${JSON.stringify(t.name)}`);
      this.tools.set(t.name, t);
    }
    this.approvalRequired = new Set(typeof approvals.approvalRequired === "string" ? [approvals.approvalRequired] : (approvals.approvalRequired ?? []));
    for (const name of this.approvalRequired) {
      if (!this.tools.has(name)) throw new TypeError(`savepoint: approvalRequired names ${JSON.stringify(name)}, which is not one of the tools`);
    }
    this.pauseForApproval = approvals.pauseForApproval ?? true;
  }

  /** Runs fn with the savepoint client given (an object) or dialled (an address, or the default), closing only one it dialled. */
  protected async withClient<T>(savepoint: SavepointClient | string | undefined, fn: (sp: SavepointClient) => Promise<T>): Promise<T> {
    const sp = typeof savepoint === "object" ? savepoint : await dial(savepoint);
    try {
      return await fn(sp);
    } finally {
      if (sp !== savepoint) sp.close();
    }
  }

  /**
   * The session: started with messages, or resumed, what was pending
   * answered by Reconcile (the tool run again where it decides RUN) and
   * saved at Point B; with Paused instead of that Point B when a pending
   * tool use still waits for approval.
   */
  protected async open(sp: SavepointClient, task: string, messages: { role: string; content: unknown }[]): Promise<{ s: Session; paused?: Paused }> {
    // The session's begins ask for approval of this loop's approvalRequired too, beside the client's.
    const host = { raw: sp.raw, config: { ...sp.config, approvalRequired: new Set([...(sp.config.approvalRequired ?? []), ...this.approvalRequired]) } };
    try {
      return { s: await Session.start(host, this.sessionId, task, { messages: messages.map((m) => ({ role: m.role, contentJson: JSON.stringify(m.content) })) }) };
    } catch (err) {
      if (!(err instanceof SessionExistsError)) throw err;
    }
    const s = await Session.resume(host, this.sessionId, false);
    if (s.status === SessionStatus.SESSION_STATUS_ACTIVE && s.pending.length > 0) {
      try {
        await s.pointB(await s.reconcile((call) => this.runCall(call)));
      } catch (err) {
        if (!(err instanceof AwaitingApprovalError) || !this.pauseForApproval) throw err;
        // Reconcile stops at the first tool use waiting: the ledger names them all.
        const waits = new Map<string, pb.EffectApproval | undefined>();
        for (const r of await s.reconcileToolUses(s.pending.map((p) => p.toolUseId))) {
          if (r.approval?.status === pb.ApprovalStatus.APPROVAL_STATUS_WAITING) waits.set(r.toolUse?.toolUseId ?? "", r.approval);
        }
        if (!waits.has(err.toolUseId)) waits.set(err.toolUseId, err.approval as pb.EffectApproval | undefined);
        return { s, paused: new Paused(this.sessionId, s.pending.filter((p) => waits.has(p.toolUseId)).map((p) => request(p, waits.get(p.toolUseId)))) };
      }
    }
    return { s };
  }

  /** The Paused of a turn whose tool uses in waiting wait for approval (with pauseForApproval false: the first one's AwaitingApprovalError thrown, as before). */
  protected pausedAt(s: Session, waiting: AwaitingApprovalError[]): Paused {
    if (!this.pauseForApproval) throw waiting[0];
    const byId = new Map(s.pending.map((p) => [p.toolUseId, p]));
    return new Paused(
      this.sessionId,
      waiting.map((e) => request(byId.get(e.toolUseId) ?? { toolUseId: e.toolUseId, name: e.toolName }, e.approval as pb.EffectApproval | undefined)),
    );
  }

  /** Runs the tool of call with its saved input, as the SDK's runner would (parsed, with the tool_use block as context). */
  protected async runCall(call: Required<ToolUse>): Promise<ToolContent> {
    const t = this.tools.get(call.name);
    if (!t) throw new Error(`no tool named ${JSON.stringify(call.name)}`);
    const raw: unknown = JSON.parse(call.inputJson || "{}");
    const block = { type: "tool_use", id: call.toolUseId, name: call.name, input: raw };
    return (await t.run(t.parse ? t.parse(raw) : raw, { toolUse: block, toolUseBlock: block })) as ToolContent;
  }

  /** The reply's tool uses, each with its tool's effect class (an unknown tool's: SIDE_EFFECT). */
  protected calls(content: Block[]): ToolUse[] {
    return content
      .filter((b) => b.type === "tool_use")
      .map((b) => {
        const t = this.tools.get(String(b.name));
        return {
          toolUseId: String(b.id),
          name: String(b.name),
          inputJson: JSON.stringify(b.input ?? {}),
          effectClass: t ? effectOf(t, this.trustMcpAnnotations) : EffectClass.EFFECT_CLASS_SIDE_EFFECT,
        };
      });
  }

  /**
   * The final answer's content when the session has one, and whether the
   * session must still be completed with it (its history ends in the final
   * answer, saved before a crash); undefined while it goes on. A failed
   * session throws SessionFailedError.
   */
  protected ended(s: Session): { final: Block[]; complete: boolean } | undefined {
    if (s.status === SessionStatus.SESSION_STATUS_FAILED) {
      throw new SessionFailedError(`savepoint: session ${JSON.stringify(this.sessionId)} failed: ${s.finalOutput}`, "failed");
    }
    const final = finalMessage(s);
    if (s.status === SessionStatus.SESSION_STATUS_COMPLETED) return { final: final ?? [{ type: "text", text: s.finalOutput }], complete: false };
    return final ? { final, complete: true } : undefined;
  }

  /** Throws for a reply that must not be saved: cut off, or (knownOnly) with a stop reason this agent does not know. */
  protected checkReason(reason: string, knownOnly: boolean): void {
    if (reason === "max_tokens" || reason === "model_context_window_exceeded") {
      throw new StopReasonError(`savepoint: the model's reply was cut off (stop_reason ${reason}); nothing of it was saved: run again with a larger max_tokens`, reason);
    }
    if (knownOnly && !["end_turn", "stop_sequence", "tool_use", "pause_turn", "refusal"].includes(reason)) {
      throw new StopReasonError(`savepoint: unknown stop_reason ${JSON.stringify(reason)}; nothing of the reply was saved`, reason);
    }
  }

  /** Marks the session FAILED with a refusal's text and returns the error to throw. */
  protected async refused(s: Session, content: Block[]): Promise<RefusalError> {
    await s.complete(SessionStatus.SESSION_STATUS_FAILED, textOf(content));
    return new RefusalError(`savepoint: the model refused: ${textOf(content)}`, "refusal");
  }

  /** Marks a reply that stopped with pause_turn and named no tool, so that a resume sends it back instead of taking it for the final answer. */
  protected async markPaused(s: Session): Promise<void> {
    await s.save({ stateJson: JSON.stringify({ [PAUSED]: Number(s.messageCount) }) });
  }
}

/** The content of the history's last message when it is the model's final answer: an assistant message naming no tool that is not a paused turn. */
function finalMessage(s: Session): Block[] | undefined {
  const msgs = s.messages;
  const last = msgs[msgs.length - 1];
  if (!last || last.role !== "assistant") return undefined;
  const content: unknown = JSON.parse(last.contentJson);
  if (typeof content === "string") return [{ type: "text", text: content }];
  const blocks = content as Block[];
  if (blocks.some((b) => b.type === "tool_use")) return undefined;
  const state = s.stateJson ? JSON.parse(s.stateJson) : {};
  if (state[PAUSED] === msgs.length - 1) return undefined;
  return blocks;
}
