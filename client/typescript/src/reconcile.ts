import { status as Code } from "@grpc/grpc-js";

import { AlreadyRunError, newError } from "./errors.js";
import { randomUUID } from "node:crypto";

import {
  Decision,
  ErrorReason,
  type Resolution,
  ResolutionOutcome,
  ResolverKind,
  type ToolUse as PbToolUse,
} from "./gen/savepoint/v1/savepoint.js";
import type { ToolRuns } from "./run.js";
import { fullToolUse, toolContent, toolOutput } from "./tool.js";
import type { ReconcileOptions, SessionHost, ToolFunc, ToolResult, Verified } from "./types.js";

/** What reconcile needs of its Session, as it stands when reconcile starts. */
export interface ReconcileState {
  host: SessionHost;
  sessionId: string;
  revision: bigint;
  epoch: bigint;
  /** The session's pending tool uses. */
  pending: PbToolUse[];
  /** The pending tool uses the session began or ran, and their results. */
  runs: ToolRuns;
}

/**
 * Session.reconcile: asks the daemon what to do with each pending tool use
 * after a resume (every page of its answer) and returns the results to pass
 * to pointB, in the order the tool uses were named: REUSE gives the
 * recorded outcome without running anything; RUN runs the tool with run
 * (after beginEffect unless it is READ_ONLY, with the key it was begun
 * with, if any) and records it; IN_DOUBT gives an isError result with the
 * daemon's text. A daemon whose latest revision is not the session's is
 * RevisionMismatchError.
 */
export async function reconcileSession(s: ReconcileState, run?: ToolFunc, options?: ReconcileOptions): Promise<ToolResult[]> {
  const rev = s.revision;
  const epoch = s.epoch;
  const resolutions: Resolution[] = [];
  for (let token = ""; ; ) {
    const resp = await s.host.raw.reconcile({ sessionId: s.sessionId, pageToken: token }, options);
    if (resp.revision !== rev) {
      throw newError(
        ErrorReason.ERROR_REASON_REVISION_MISMATCH,
        Code.ABORTED,
        `reconcile: the daemon's latest revision is ${resp.revision}, this session's ${rev}`,
        { current_revision: String(resp.revision) },
      );
    }
    resolutions.push(...resp.resolutions);
    token = resp.nextPageToken;
    if (token === "") break;
  }
  const log = s.host.config.logger;
  const results: ToolResult[] = [];
  for (let res of resolutions) {
    const tu = res.toolUse;
    if (!tu) throw new Error("savepoint: reconcile: a resolution without its tool use.");
    const id = tu.toolUseId;
    const attrs = { session: s.sessionId, tool_use_id: id, name: tu.name, decision: Decision[res.decision] };
    s.runs.hook({ stage: "decided", call: fullToolUse(tu), decision: res.decision, begun: res.begun });
    if (res.decision === Decision.DECISION_IN_DOUBT && options?.verify) {
      const v = await verified(s, res, options);
      if (v) {
        const done = v.status === "done";
        const resp = await s.host.raw.resolveEffect(
          {
            sessionId: s.sessionId,
            toolUseId: id,
            epoch,
            outcome: done ? ResolutionOutcome.RESOLUTION_OUTCOME_DONE : ResolutionOutcome.RESOLUTION_OUTCOME_NOT_DONE,
            output: done ? toolOutput(v.output) : "",
            isError: done ? (v.isError ?? false) : false,
            note: v.note ?? "",
            resolverKind: ResolverKind.RESOLVER_KIND_VERIFY,
            resolvedBy: "verify",
            requestId: randomUUID(),
          },
          options,
        );
        if (done) {
          log.info("savepoint: reconcile: verify found the tool use done; its output is recorded and reused", attrs);
          const isError = resp.entry?.effect?.isError ?? false;
          const out = resp.entry?.effect?.output ?? "";
          results.push({ toolUseId: id, content: isError ? out : toolContent(out), isError, decision: Decision.DECISION_REUSE });
          continue;
        }
        log.info("savepoint: reconcile: verify found the tool use not done; running it again with its idempotency key", attrs);
        res = { ...res, decision: Decision.DECISION_RUN, toolResultText: "" };
      }
    }
    let r: ToolResult;
    switch (res.decision) {
      case Decision.DECISION_REUSE:
        log.info("savepoint: reconcile: outcome recorded, reusing it, not running the tool", attrs);
        {
          const isError = res.effect?.isError ?? false;
          const out = res.effect?.output ?? "";
          r = { toolUseId: id, content: isError ? out : toolContent(out), isError, decision: res.decision };
        }
        break;
      case Decision.DECISION_IN_DOUBT:
        log.warn("savepoint: reconcile: outcome unknown, not running the tool, answering with an is_error result", attrs);
        r = { toolUseId: id, content: res.toolResultText, isError: true, decision: res.decision };
        break;
      case Decision.DECISION_RUN: {
        const p = s.pending.find((p) => p.toolUseId === id);
        const prev = s.runs.ran.get(id);
        const started = s.runs.started.has(id);
        if (prev) {
          log.info("savepoint: reconcile: this session ran the tool already, reusing its result", attrs);
          r = prev.decision === Decision.DECISION_DENIED ? { ...prev } : { ...prev, decision: res.decision };
          break;
        }
        if (!p) {
          throw newError(
            ErrorReason.ERROR_REASON_CALL_NOT_PENDING,
            Code.FAILED_PRECONDITION,
            `reconcile: tool use ${JSON.stringify(id)} is not pending in this session`,
          );
        }
        if (started) throw new AlreadyRunError(`reconcile: tool use ${JSON.stringify(id)} (${tu.name}) not run`);
        if (!run) {
          throw new Error(`savepoint: reconcile: tool use ${JSON.stringify(id)} (${tu.name}) must run, but no run function was given.`);
        }
        s.runs.started.add(id);
        log.info("savepoint: reconcile: safe to run, running the tool", attrs);
        const call = fullToolUse(p);
        r = await s.runs.execute(p, epoch, res.idempotencyKey, (key, signal) => run(call, key, signal), options);
        if (r.decision !== Decision.DECISION_DENIED) r = { ...r, decision: res.decision };
        break;
      }
      default:
        throw new Error(`savepoint: reconcile: tool use ${JSON.stringify(id)}: unknown decision ${res.decision}.`);
    }
    results.push(r);
  }
  return results;
}

/**
 * Asks options.verify about the tool use in doubt res: its definite answer,
 * or undefined to leave it in doubt ("unknown", or verify threw).
 */
async function verified(s: ReconcileState, res: Resolution, options: ReconcileOptions): Promise<Exclude<Verified, { status: "unknown" }> | undefined> {
  const tu = res.toolUse as PbToolUse;
  const attrs = { session: s.sessionId, tool_use_id: tu.toolUseId, name: tu.name };
  let v: Verified;
  try {
    v = await options.verify!(fullToolUse(tu), res.idempotencyKey, options.signal);
  } catch (err) {
    s.host.config.logger.warn("savepoint: reconcile: verify failed; the outcome stays unknown", { ...attrs, err: String(err) });
    return undefined;
  }
  if (v.status === "done" || v.status === "notDone") return v;
  s.host.config.logger.warn("savepoint: reconcile: verify could not tell; the outcome stays unknown", attrs);
  return undefined;
}
