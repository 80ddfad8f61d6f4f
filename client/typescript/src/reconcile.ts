import { status as Code } from "@grpc/grpc-js";

import { AlreadyRunError, newError } from "./errors.js";
import { Decision, ErrorReason, type Resolution, type ToolUse as PbToolUse } from "./gen/savepoint/v1/savepoint.js";
import type { ToolRuns } from "./run.js";
import { fullToolUse, toolContent } from "./tool.js";
import type { CallOptions, SessionHost, ToolFunc, ToolResult } from "./types.js";

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
export async function reconcileSession(s: ReconcileState, run?: ToolFunc, options?: CallOptions): Promise<ToolResult[]> {
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
  for (const res of resolutions) {
    const tu = res.toolUse;
    if (!tu) throw new Error("savepoint: reconcile: a resolution without its tool use.");
    const id = tu.toolUseId;
    const attrs = { session: s.sessionId, tool_use_id: id, name: tu.name, decision: Decision[res.decision] };
    s.runs.hook({ stage: "decided", call: fullToolUse(tu), decision: res.decision, begun: res.begun });
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
          r = { ...prev, decision: res.decision };
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
        r = { ...r, decision: res.decision };
        break;
      }
      default:
        throw new Error(`savepoint: reconcile: tool use ${JSON.stringify(id)}: unknown decision ${res.decision}.`);
    }
    results.push(r);
  }
  return results;
}
