import type Anthropic from "@anthropic-ai/sdk";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";
import {
  dial,
  EffectClass,
  type Client as SavepointClient,
  type Session,
  SessionExistsError,
  SessionStatus,
  type ToolContent,
  type ToolResult,
  type ToolUse,
} from "@savepoint-dev/client";

import { type AgentTool, durable, type Effect, effectOf, RefusalError, SessionFailedError, StopReasonError } from "./agent.js";

type Block = { type: string; [k: string]: unknown };
// biome-ignore lint: the SDK's message type, kept loose across its versions
type Msg = any;

/** Marks a betaTool with its effect class for durableToolRunner (the same mark DurableAgent reads); returns the tool. */
export function durableBetaTool<T extends AgentTool>(tool: T, options: { effect: Effect }): T {
  return durable(tool, options);
}

export interface DurableToolRunnerOptions {
  /** A dialled savepoint Client, or an address to dial (default: the default address). */
  savepoint?: SavepointClient | string;
  /** Take effect classes of unmarked tools from their MCP annotations. */
  trustMcpAnnotations?: boolean;
}

function textOf(content: Block[]): string {
  return content.filter((b) => b.type === "text").map((b) => String(b.text ?? "")).join("");
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
export class DurableToolRunner implements AsyncIterable<Msg> {
  session: Session | undefined;
  #final: Msg | undefined;
  readonly #tools = new Map<string, AgentTool>();

  constructor(
    readonly client: Anthropic,
    readonly sessionId: string,
    readonly params: Record<string, unknown> & { model: string; max_tokens: number; messages: { role: string; content: unknown }[]; tools: AgentTool[] },
    readonly options: DurableToolRunnerOptions = {},
  ) {
    if (!sessionId) throw new TypeError("savepoint: sessionId is empty");
    if (params.runToolsEagerly) {
      throw new TypeError("savepoint: runToolsEagerly is refused: a tool started while the reply streams would run before Point A saved its call");
    }
    if (params.stream) throw new TypeError("savepoint: stream is refused: durableToolRunner saves whole replies");
    for (const t of params.tools) this.#tools.set(t.name, t);
  }

  async #open(sp: SavepointClient): Promise<Session> {
    const first = this.params.messages[0];
    try {
      return await sp.start(this.sessionId, typeof first?.content === "string" ? first.content : "", {
        messages: this.params.messages.map((m) => ({ role: m.role, contentJson: JSON.stringify(m.content) })),
      });
    } catch (err) {
      if (!(err instanceof SessionExistsError)) throw err;
    }
    const s = await sp.resume(this.sessionId);
    if (s.status === SessionStatus.SESSION_STATUS_ACTIVE && s.pending.length > 0) {
      await s.pointB(
        await s.reconcile(async (call) => {
          const t = this.#tools.get(call.name);
          if (!t) throw new Error(`no tool named ${JSON.stringify(call.name)}`);
          const raw: unknown = JSON.parse(call.inputJson || "{}");
          const block = { type: "tool_use", id: call.toolUseId, name: call.name, input: raw };
          return (await t.run(t.parse ? t.parse(raw) : raw, { toolUse: block, toolUseBlock: block })) as ToolContent;
        }),
      );
    }
    return s;
  }

  /** The wrapped tools: each runs through the session's ledger by its tool use id and keeps its result for Point B. */
  #wrap(s: Session, results: Map<string, ToolResult>): AgentTool[] {
    return this.params.tools.map((t) => ({
      ...t,
      run: async (input: unknown, context?: { toolUse?: { id: string; name: string } }) => {
        const id = context?.toolUse?.id;
        if (!id) throw new Error("savepoint: a durable tool needs its context.toolUse (the SDK's tool runner passes it)");
        const call = s.pending.find((p) => p.toolUseId === id);
        if (!call) throw new Error(`savepoint: tool use ${JSON.stringify(id)} is not pending: Point A did not save it`);
        const r = await s.runTool(call, () => t.run(input, context) as ToolContent | Promise<ToolContent>);
        results.set(id, r);
        if (r.isError) throw new ToolError(r.content as string);
        return r.content as string;
      },
    }));
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Msg> {
    const sp = typeof this.options.savepoint === "object" ? this.options.savepoint : await dial(this.options.savepoint);
    try {
      const s = (this.session = await this.#open(sp));
      if (s.status === SessionStatus.SESSION_STATUS_FAILED) throw new SessionFailedError(`savepoint: session ${JSON.stringify(this.sessionId)} failed: ${s.finalOutput}`, "failed");
      const msgs = s.messages;
      const last = msgs[msgs.length - 1];
      const lastContent = last ? (JSON.parse(last.contentJson) as Block[] | string) : [];
      const isFinal = last?.role === "assistant" && (typeof lastContent === "string" || !lastContent.some((b) => b.type === "tool_use"));
      if (s.status === SessionStatus.SESSION_STATUS_COMPLETED || isFinal) {
        const content = typeof lastContent === "string" ? [{ type: "text", text: lastContent }] : lastContent;
        if (s.status !== SessionStatus.SESSION_STATUS_COMPLETED) await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, textOf(content));
        this.#final = { role: "assistant", content, stop_reason: "end_turn" };
        return;
      }
      const results = new Map<string, ToolResult>();
      const { tools: _t, messages: _m, ...rest } = this.params;
      const runner = this.client.beta.messages.toolRunner({
        ...rest,
        messages: msgs.map((m) => ({ role: m.role, content: JSON.parse(m.contentJson) })),
        tools: this.#wrap(s, results),
        // The full history every turn, never a server-side message thread: a new process resumes from the session's.
        thread: false,
      } as Parameters<Anthropic["beta"]["messages"]["toolRunner"]>[0]);
      for await (const message of runner as AsyncIterable<Msg>) {
        const reason = String(message.stop_reason ?? "");
        s.addTokens((message.usage?.input_tokens ?? 0) + (message.usage?.output_tokens ?? 0));
        if (reason === "max_tokens" || reason === "model_context_window_exceeded") {
          throw new StopReasonError(`savepoint: the model's reply was cut off (stop_reason ${reason}); nothing of it was saved`, reason);
        }
        const content = message.content as Block[];
        if (reason === "refusal") {
          await s.complete(SessionStatus.SESSION_STATUS_FAILED, textOf(content));
          throw new RefusalError(`savepoint: the model refused: ${textOf(content)}`, reason);
        }
        const calls: ToolUse[] = content
          .filter((b) => b.type === "tool_use")
          .map((b) => {
            const t = this.#tools.get(String(b.name));
            return {
              toolUseId: String(b.id),
              name: String(b.name),
              inputJson: JSON.stringify(b.input ?? {}),
              effectClass: t ? effectOf(t, this.options.trustMcpAnnotations) : EffectClass.EFFECT_CLASS_SIDE_EFFECT,
            };
          });
        await s.pointA({ role: "assistant", contentJson: JSON.stringify(content) }, calls);
        if (calls.length > 0) {
          results.clear();
          await runner.generateToolResponse(); // the SDK caches it: the runner sends these results, running nothing again
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
    } finally {
      if (sp !== this.options.savepoint) sp.close();
    }
  }

  /** Runs to the final message and returns it (for a completed session, its saved final answer, without calling the model). */
  async runUntilDone(): Promise<Msg> {
    for await (const _ of this) {
      // each turn is saved as it goes
    }
    if (!this.#final) throw new StopReasonError("savepoint: the tool runner stopped without a final answer (max_iterations?)", "max_iterations");
    return this.#final;
  }
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
