import { randomUUID } from "node:crypto";
import { AwaitingApprovalError, sentence } from "./errors.js";
import { Decision, type DuplicateToolUse, EffectClass, type EffectApproval, type ToolUse as PbToolUse } from "./gen/savepoint/v1/savepoint.js";
import { effectiveClass, fullToolUse, normalizeContent, toolOutput } from "./tool.js";
import type { CallOptions, SessionHost, ToolContent, ToolEvent, ToolResult } from "./types.js";

/** How long a recordEffect may take. It runs even when the caller's signal has fired: the tool ran, and its outcome is a fact worth keeping. */
const RECORD_TIMEOUT_MS = 30_000;

/**
 * The tool uses of one session's pending set that this process began or
 * ran, their results, and the one place a tool runs: what Session.runTool
 * and Session.reconcile share.
 */
export class ToolRuns {
  /** Pending tool uses this process began or ran. */
  readonly started = new Set<string>();
  /** Their results, once run. */
  readonly ran = new Map<string, ToolResult>();
  readonly #c: SessionHost;
  readonly #id: string;

  constructor(c: SessionHost, sessionId: string) {
    this.#c = c;
    this.#id = sessionId;
  }

  /** Forgets them all: the pending set changed. */
  clear(): void {
    this.started.clear();
    this.ran.clear();
  }

  /**
   * The one place a tool runs: beginEffect unless READ_ONLY, then fn, then
   * recordEffect of fn's real outcome. The caller marked p started.
   */
  async execute(
    p: PbToolUse,
    epoch: bigint,
    key: string,
    fn: (key: string, signal?: AbortSignal) => Promise<ToolContent> | ToolContent,
    options: CallOptions = {},
  ): Promise<ToolResult> {
    const id = p.toolUseId;
    const requiresApproval = this.#c.config.approvalRequired?.has(p.name) ?? false;
    if (effectiveClass(p.effectClass) !== EffectClass.EFFECT_CLASS_READ_ONLY || requiresApproval) {
      let b;
      try {
        b = await this.#c.raw.beginEffect({ sessionId: this.#id, toolUseId: id, epoch, requiresApproval, requestId: randomUUID() }, options);
      } catch (err) {
        this.started.delete(id);
        throw annotate(err, `savepoint: tool use ${JSON.stringify(id)} (${p.name}) not run: BeginEffect`);
      }
      if (b.duplicate) return duplicateResult(id, b.duplicate);
      if (b.decision === Decision.DECISION_AWAIT_APPROVAL) {
        this.started.delete(id);
        throw new AwaitingApprovalError(this.#id, id, p.name, b.approval);
      }
      if (b.decision === Decision.DECISION_DENIED) return this.denied(p, b.approval);
      key = b.idempotencyKey;
      this.hook({ stage: "begun", call: fullToolUse(p) });
    }
    const r: ToolResult = { toolUseId: id, content: "", isError: false, decision: Decision.DECISION_UNSPECIFIED };
    let bad: Error | undefined;
    try {
      const out: unknown = await fn(key, options.signal);
      try {
        r.content = normalizeContent(out);
      } catch (err) {
        // Neither text nor content blocks: its text still reaches the model, and the log says it was not recorded.
        r.content = String(out);
        bad = new Error(`savepoint: the tool's output cannot be recorded: ${(err as Error).message}`);
      }
    } catch (err) {
      r.content = err instanceof Error ? err.message : String(err);
      r.isError = true;
    }
    this.hook({ stage: "ran", call: fullToolUse(p), result: { ...r } });
    try {
      if (bad) throw bad;
      await this.record(p, r);
      this.hook({ stage: "recorded", call: fullToolUse(p), result: { ...r } });
    } catch (err) {
      r.ledgerError = err;
      this.reportLedgerError(p, r, err);
    }
    this.ran.set(id, { ...r });
    return r;
  }

  /** The result of a call a person denied: their note, isError, recorded as refused so that later resumes reuse it. */
  async denied(p: PbToolUse, a: EffectApproval | undefined): Promise<ToolResult> {
    const r: ToolResult = { toolUseId: p.toolUseId, content: deniedText(a), isError: true, decision: Decision.DECISION_DENIED };
    try {
      await this.#c.raw.recordEffect(
        { sessionId: this.#id, toolUseId: p.toolUseId, name: p.name, output: r.content as string, isError: true, refused: true },
        { deadline: Date.now() + RECORD_TIMEOUT_MS },
      );
    } catch (err) {
      r.ledgerError = err;
      this.reportLedgerError(p, r, err);
    }
    this.ran.set(p.toolUseId, { ...r });
    return r;
  }

  async record(p: PbToolUse, r: ToolResult): Promise<void> {
    await this.#c.raw.recordEffect(
      { sessionId: this.#id, toolUseId: p.toolUseId, name: p.name, output: toolOutput(r.content), isError: r.isError, requestId: randomUUID() },
      { deadline: Date.now() + RECORD_TIMEOUT_MS },
    );
  }

  reportLedgerError(p: PbToolUse, r: ToolResult, err: unknown): void {
    this.#c.config.logger.error(
      "savepoint: LEDGER WRITE FAILED: the tool ran, its side effect may have happened, and its outcome is not recorded; " +
        "if the agent stops before pointB, resume will report this call as in doubt; check it by hand",
      { session: this.#id, tool_use_id: p.toolUseId, name: p.name, tool_is_error: r.isError, err },
    );
    this.#c.config.onLedgerError?.(fullToolUse(p), { ...r }, err);
  }

  hook(ev: Omit<ToolEvent, "sessionId">): void {
    this.#c.config.toolHook?.({ ...ev, sessionId: this.#id });
  }
}

/**
 * Says where an error happened, keeping its class: a SavepointError stays
 * the same object (instanceof still works) with the context prefixed to its
 * message; anything else is wrapped, with the original as cause.
 */
export function annotate(err: unknown, context: string): Error {
  if (err instanceof Error) {
    err.message = `${context}: ${sentence(err.message)}`;
    return err;
  }
  return new Error(`${context}: ${sentence(String(err))}`, { cause: err });
}

/**
 * The answer to a call the daemon's duplicate-intent guard caught
 * (docs/api.md "The same action under a new id"): not run; the daemon's
 * text, the one wording every client gives the model, says the action was
 * already taken under d.toolUseId (with its output) or may have been (an
 * error).
 */
export function duplicateResult(toolUseId: string, d: DuplicateToolUse): ToolResult {
  return { toolUseId, content: d.toolResultText, isError: d.isError, decision: Decision.DECISION_UNSPECIFIED, duplicateOf: d.toolUseId };
}

/** The tool result the model is given for a denied call. */
export function deniedText(a: EffectApproval | undefined): string {
  const by = a?.decidedBy || "a person";
  if (!a?.note) return `This call was denied by ${by}; it did not run.`;
  return `This call was denied by ${by}; it did not run. Their note: ${a.note}`;
}
