import type Anthropic from "@anthropic-ai/sdk";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";
import {
  AwaitingApprovalError,
  dial,
  type Client as SavepointClient,
  type Session,
  SessionStatus,
  type ToolContent,
  type ToolResult,
} from "@savepoint-dev/client";

import { StopReasonError } from "./errors.js";
import { type ApprovalOptions, type Block, DurableLoop, historyOf, type Paused, textOf } from "./loop.js";
import { type AgentTool, durable, type Effect } from "./tools.js";

// biome-ignore lint: the SDK's message type, kept loose across its versions
type Msg = any;

/** Marks a betaTool with its effect class for durableToolRunner (the same mark DurableAgent reads); returns the tool. */
export function durableBetaTool<T extends AgentTool>(tool: T, options: { effect: Effect }): T {
  return durable(tool, options);
}

export interface DurableToolRunnerOptions extends ApprovalOptions {
  /** A dialled savepoint Client, or an address to dial (default: the default address). */
  savepoint?: SavepointClient | string;
  /** Take effect classes of unmarked tools from their MCP annotations. */
  trustMcpAnnotations?: boolean;
}

/**
 * client.beta.messages.toolRunner with its session in savepointd:
 * iterate it (each assistant message, as the SDK's runner yields them) or
 * await runUntilDone() for the final message. Each reply is saved at Point
 * A with every tool use pending before any tool of the turn runs; the
 * runner then runs the tools (its own generateToolResponse), each through
 * the ledger by its context.toolUse id (BeginEffect unless read-only, the
 * tool, RecordEffect; a tool use never runs twice), and Point B saves the
 * results before the next model call. The first user message comes from
 * params.messages when the session is new; a resumed session's history
 * replaces it, after Reconcile answered what was pending. The runner sends
 * the whole history every turn (thread: false): a server-side message thread
 * could not be continued by a new process. runToolsEagerly and stream are
 * refused: a tool started while the reply streams would run before Point A.
 */
export class DurableToolRunner extends DurableLoop implements AsyncIterable<Msg> {
  #final: Msg | undefined;
  /** Set when the iteration stopped because tool uses wait for approval. */
  paused: Paused | undefined;

  constructor(
    readonly client: Anthropic,
    sessionId: string,
    readonly params: Record<string, unknown> & { model: string; max_tokens: number; messages: { role: string; content: unknown }[]; tools: AgentTool[] },
    readonly options: DurableToolRunnerOptions = {},
  ) {
    if (!sessionId) throw new TypeError("savepoint: sessionId is empty");
    if (params.runToolsEagerly) {
      throw new TypeError("savepoint: runToolsEagerly is refused: a tool started while the reply streams would run before Point A saved its call");
    }
    if (params.stream) throw new TypeError("savepoint: stream is refused: durableToolRunner saves whole replies");
    super(sessionId, uniqueByName(params.tools), options.trustMcpAnnotations ?? false, options);
  }

  /** The wrapped tools: each runs through the session's ledger by its tool use id and keeps its result for Point B. */
  #wrap(s: Session, results: Map<string, ToolResult>, waiting: AwaitingApprovalError[]): AgentTool[] {
    return this.params.tools.map((t) => ({
      ...t,
      run: async (input: unknown, context?: { toolUse?: { id: string; name: string } }) => {
        const id = context?.toolUse?.id;
        if (!id) throw new Error("savepoint: a durable tool needs its context.toolUse (the SDK's tool runner passes it)");
        const call = s.pending.find((p) => p.toolUseId === id);
        if (!call) throw new Error(`savepoint: tool use ${JSON.stringify(id)} is not pending: Point A did not save it`);
        let r: ToolResult;
        try {
          r = await s.runTool(call, () => t.run(input, context) as ToolContent | Promise<ToolContent>);
        } catch (err) {
          if (!(err instanceof AwaitingApprovalError)) throw err;
          // The turn pauses before Point B: the SDK's runner gets an error result it never sends.
          waiting.push(err);
          throw new ToolError(`tool use ${id} waits for approval`);
        }
        results.set(id, r);
        if (r.isError) throw new ToolError(r.content as string);
        return r.content as string;
      },
    }));
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Msg> {
    const sp = typeof this.options.savepoint === "object" ? this.options.savepoint : await dial(this.options.savepoint);
    try {
      yield* this.#steps(sp);
    } finally {
      if (sp !== this.options.savepoint) sp.close();
    }
  }

  async *#steps(sp: SavepointClient): AsyncGenerator<Msg> {
    const first = this.params.messages[0];
    const { s, paused } = await this.open(sp, typeof first?.content === "string" ? first.content : "", this.params.messages);
    this.session = s;
    this.paused = paused;
    if (paused) return;
    const end = this.ended(s);
    if (end) {
      if (end.complete) await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, textOf(end.final));
      this.#final = { role: "assistant", content: end.final, stop_reason: "end_turn" };
      return;
    }
    const results = new Map<string, ToolResult>();
    const waiting: AwaitingApprovalError[] = [];
    const { tools: _t, messages: _m, ...rest } = this.params;
    const runner = this.client.beta.messages.toolRunner({
      ...rest,
      messages: historyOf(s),
      tools: this.#wrap(s, results, waiting),
      // The full history every turn, never a server-side message thread: a new process resumes from the session's.
      thread: false,
    } as Parameters<Anthropic["beta"]["messages"]["toolRunner"]>[0]);
    for await (const message of runner as AsyncIterable<Msg>) {
      const reason = String(message.stop_reason ?? "");
      s.addTokens((message.usage?.input_tokens ?? 0) + (message.usage?.output_tokens ?? 0));
      this.checkReason(reason, false);
      const content = message.content as Block[];
      if (reason === "refusal") throw await this.refused(s, content);
      const calls = this.calls(content);
      await s.pointA({ role: "assistant", contentJson: JSON.stringify(content) }, calls);
      if (calls.length > 0) {
        results.clear();
        waiting.length = 0;
        await runner.generateToolResponse(); // the SDK caches it: the runner sends these results, running nothing again
        if (waiting.length > 0) {
          this.paused = this.pausedAt(s, waiting);
          yield message;
          return;
        }
        await s.pointB(
          calls.map((c) => results.get(c.toolUseId) ?? { toolUseId: c.toolUseId, content: "Error: the tool runner did not run this tool", isError: true, decision: 0 }),
        );
      }
      yield message;
      if (calls.length === 0 && reason !== "pause_turn") {
        await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, textOf(content));
        this.#final = message;
      }
    }
  }

  /** Runs to the final message and returns it (for a completed session, its saved final answer, without calling the model); Paused when tool uses wait for approval (call again once they are decided). */
  async runUntilDone(): Promise<Msg | Paused> {
    for await (const _ of this) {
      // each turn is saved as it goes
    }
    if (this.paused) return this.paused;
    if (!this.#final) throw new StopReasonError("savepoint: the tool runner stopped without a final answer (max_iterations?)", "max_iterations");
    return this.#final;
  }
}

/** The tools by name, the last of a name kept (as the runner's map kept them). */
function uniqueByName(tools: AgentTool[]): AgentTool[] {
  return [...new Map(tools.map((t) => [t.name, t])).values()];
}

/** A DurableToolRunner: client.beta.messages.toolRunner(params) with session sessionId in savepointd. */
export function durableToolRunner(
  client: Anthropic,
  sessionId: string,
  params: ConstructorParameters<typeof DurableToolRunner>[2],
  options?: DurableToolRunnerOptions,
): DurableToolRunner {
  return new DurableToolRunner(client, sessionId, params, options);
}
