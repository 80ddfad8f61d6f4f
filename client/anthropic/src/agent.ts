import type Anthropic from "@anthropic-ai/sdk";
import { AwaitingApprovalError, type Client as SavepointClient, SessionStatus, type ToolResult } from "@savepoint-dev/client";

import { MaxTurnsError } from "./errors.js";
import { type ApprovalOptions, type Block, DurableLoop, historyOf, type Paused, textOf } from "./loop.js";
import { type AgentTool, definitionOf } from "./tools.js";

export { AgentError, MaxTurnsError, RefusalError, SessionFailedError, StopReasonError } from "./errors.js";
export { type AgentTool, definitionOf, durable, type Effect, effectOf } from "./tools.js";

export { type ApprovalOptions, type ApprovalRequest, Paused } from "./loop.js";

export interface DurableAgentOptions extends ApprovalOptions {
  tools?: AgentTool[];
  /** A dialled savepoint Client, or an address to dial (default: the default address). */
  savepoint?: SavepointClient | string;
  /** The most turns (model calls that named tools) a session takes; default 50. */
  maxTurns?: number;
  /** Take effect classes of unmarked tools from their MCP annotations. */
  trustMcpAnnotations?: boolean;
}

/**
 * An agent on Anthropic's client whose session lives in savepointd.
 * run(task, params) creates the session, or resumes it (Reconcile answers
 * what was pending, then Point B) and goes on; a completed session returns
 * its final answer without calling the model. Each turn calls
 * client.messages.create({...params, messages: <history>, tools}), saves the
 * reply exactly at Point A with every tool use pending, runs the turn's
 * tools concurrently, each through the ledger (BeginEffect before it runs,
 * RecordEffect after), saves the results at Point B, until the model answers
 * without tools: that answer is saved, the session completed, and its text
 * returned.
 */
export class DurableAgent extends DurableLoop {
  readonly usage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  stopReason = "";
  readonly #maxTurns: number;

  constructor(
    readonly client: Anthropic,
    sessionId: string,
    readonly options: DurableAgentOptions = {},
  ) {
    super(sessionId, options.tools ?? [], options.trustMcpAnnotations ?? false, options);
    this.#maxTurns = options.maxTurns ?? 50;
    if (this.#maxTurns < 1) throw new RangeError(`savepoint: maxTurns must be at least 1, not ${this.#maxTurns}`);
  }

  /** Runs the task to its final answer and returns its text; or returns Paused when a tool use waits for a person's approval (run again once it is decided). */
  async run(task: string | Block[], params: Record<string, unknown> & { model: string; max_tokens: number }): Promise<string | Paused> {
    if ("messages" in params || "stream" in params) {
      throw new TypeError("savepoint: run takes no messages or stream: the session's history is the messages, and replies are not streamed");
    }
    return this.withClient(this.options.savepoint, (sp) => this.#run(sp, task, params));
  }

  async #run(sp: SavepointClient, task: string | Block[], params: Record<string, unknown>): Promise<string | Paused> {
    const { s, paused } = await this.open(sp, typeof task === "string" ? task : textOf(task), [{ role: "user", content: task }]);
    this.session = s;
    if (paused) return paused;
    const defs = [...this.tools.values()].map(definitionOf);
    const tools = [...((params.tools as unknown[]) ?? []), ...defs];
    const api = "betas" in params ? this.client.beta.messages : this.client.messages;
    for (;;) {
      const end = this.ended(s);
      if (end) {
        if (end.complete) await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, textOf(end.final));
        return s.finalOutput;
      }
      if (s.turn >= this.#maxTurns) throw new MaxTurnsError(`savepoint: session ${JSON.stringify(this.sessionId)} reached maxTurns=${this.#maxTurns} without a final answer`, "max_turns");
      // biome-ignore lint: the SDK's overloads; the parameters pass through as given
      const resp: any = await (api.create as any)({ ...params, messages: historyOf(s), ...(tools.length ? { tools } : {}) });
      const u = resp.usage ?? {};
      for (const k of Object.keys(this.usage) as (keyof typeof this.usage)[]) this.usage[k] += u[k] ?? 0;
      s.addTokens((u.input_tokens ?? 0) + (u.output_tokens ?? 0));
      const reason = String(resp.stop_reason ?? "");
      this.stopReason = reason;
      this.checkReason(reason, true);
      // The SDK returns the API's JSON as it came: saved exactly, with no field added.
      const content = resp.content as Block[];
      if (reason === "refusal") throw await this.refused(s, content);
      const calls = this.calls(content);
      if (reason === "pause_turn" && calls.length === 0) await this.markPaused(s);
      await s.pointA({ role: "assistant", contentJson: JSON.stringify(content) }, calls);
      if (calls.length > 0) {
        // The turn's tools run concurrently, as the SDK's toolRunner runs them:
        // each begun before it runs and recorded after, on its own.
        const settled = await Promise.allSettled(calls.map((c) => s.runTool(c, () => this.runCall(c as Required<typeof c>))));
        const failed = settled.find((r) => r.status === "rejected" && !(r.reason instanceof AwaitingApprovalError));
        if (failed) throw (failed as PromiseRejectedResult).reason;
        const waiting = settled.flatMap((r) => (r.status === "rejected" ? [r.reason as AwaitingApprovalError] : []));
        if (waiting.length > 0) return this.pausedAt(s, waiting);
        await s.pointB(settled.map((r) => (r as PromiseFulfilledResult<ToolResult>).value));
      }
    }
  }
}
