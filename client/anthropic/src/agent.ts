import type Anthropic from "@anthropic-ai/sdk";
import {
  dial,
  EffectClass,
  effectClassFromAnnotations,
  type Client as SavepointClient,
  type Message,
  type Session,
  SessionExistsError,
  SessionStatus,
  type ToolContent,
  type ToolUse,
} from "@savepoint-dev/client";

/** What a tool's run does to the world outside: "read_only" re-runs after a crash, "idempotent" and "side_effect" never run twice. */
export type Effect = "read_only" | "idempotent" | "side_effect";

const EFFECTS: Record<Effect, EffectClass> = {
  read_only: EffectClass.EFFECT_CLASS_READ_ONLY,
  idempotent: EffectClass.EFFECT_CLASS_IDEMPOTENT,
  side_effect: EffectClass.EFFECT_CLASS_SIDE_EFFECT,
};

/** A tool a DurableAgent runs: the SDK's betaTool object, or a plain definition with a run function. */
export interface AgentTool {
  name: string;
  // biome-ignore lint: the tool's own input and content block types
  run: (input: any, context?: any) => string | object[] | Promise<string | object[]>;
  parse?: (input: unknown) => unknown;
  annotations?: Record<string, unknown>;
}

const EFFECT = Symbol.for("savepoint.effect");

/**
 * Marks a tool with its effect class (unmarked tools count as
 * "side_effect", never run twice); returns the same tool.
 */
export function durable<T extends AgentTool>(tool: T, options: { effect: Effect }): T {
  const cls = EFFECTS[options.effect];
  if (cls === undefined) throw new TypeError(`savepoint: effect must be one of ${Object.keys(EFFECTS).join(", ")}, not ${JSON.stringify(options.effect)}`);
  Object.defineProperty(tool, EFFECT, { value: cls, enumerable: false, configurable: true });
  return tool;
}

/** The effect class of a tool: durable's mark, else its MCP annotations when trusted, else SIDE_EFFECT. */
export function effectOf(tool: AgentTool, trustMcpAnnotations = false): EffectClass {
  const marked = (tool as unknown as Record<symbol, EffectClass | undefined>)[EFFECT];
  if (marked !== undefined) return marked;
  if (trustMcpAnnotations && tool.annotations) return effectClassFromAnnotations(tool.annotations);
  return EffectClass.EFFECT_CLASS_SIDE_EFFECT;
}

/** The tool's definition as the Messages API takes it: every field but run, parse, close and annotations. */
export function definitionOf(tool: AgentTool): Record<string, unknown> {
  const { run: _r, parse: _p, annotations: _a, ...def } = tool as AgentTool & { close?: unknown };
  delete def.close;
  return def;
}

/** The agent stopped without a final answer; the session stays as it was saved. */
export class AgentError extends Error {
  constructor(message: string, readonly stopReason: string) {
    super(message);
    this.name = new.target.name;
  }
}
/** The session reached maxTurns; it stays active, and a run with a larger maxTurns goes on. */
export class MaxTurnsError extends AgentError {}
/** The reply was cut off (max_tokens, model_context_window_exceeded) or had an unknown stop reason; nothing of it was saved. */
export class StopReasonError extends AgentError {}
/** The model refused; the session is marked FAILED with the refusal's text. */
export class RefusalError extends AgentError {}
/** The session was marked FAILED earlier. */
export class SessionFailedError extends AgentError {}

export interface DurableAgentOptions {
  tools?: AgentTool[];
  /** A dialled savepoint Client, or an address to dial (default: the default address). */
  savepoint?: SavepointClient | string;
  /** The most turns (model calls that named tools) a session takes; default 50. */
  maxTurns?: number;
  /** Take effect classes of unmarked tools from their MCP annotations. */
  trustMcpAnnotations?: boolean;
}

type Block = { type: string; [k: string]: unknown };
const PAUSED = "paused_at";

function textOf(content: Block[]): string {
  return content.filter((b) => b.type === "text").map((b) => String(b.text ?? "")).join("");
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
export class DurableAgent {
  readonly tools = new Map<string, AgentTool>();
  readonly usage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  stopReason = "";
  session: Session | undefined;
  readonly #maxTurns: number;
  readonly #trust: boolean;

  constructor(
    readonly client: Anthropic,
    readonly sessionId: string,
    readonly options: DurableAgentOptions = {},
  ) {
    if (!sessionId) throw new TypeError("savepoint: sessionId is empty");
    this.#maxTurns = options.maxTurns ?? 50;
    if (this.#maxTurns < 1) throw new RangeError(`savepoint: maxTurns must be at least 1, not ${this.#maxTurns}`);
    this.#trust = options.trustMcpAnnotations ?? false;
    for (const t of options.tools ?? []) {
      if (this.tools.has(t.name)) throw new TypeError(`savepoint: two tools are named ${JSON.stringify(t.name)}`);
      this.tools.set(t.name, t);
    }
  }

  /** Runs the task to its final answer and returns its text. */
  async run(task: string | Block[], params: Record<string, unknown> & { model: string; max_tokens: number }): Promise<string> {
    if ("messages" in params || "stream" in params) {
      throw new TypeError("savepoint: run takes no messages or stream: the session's history is the messages, and replies are not streamed");
    }
    const sp = typeof this.options.savepoint === "object" ? this.options.savepoint : await dial(this.options.savepoint);
    try {
      return await this.#run(sp, task, params);
    } finally {
      if (sp !== this.options.savepoint) sp.close();
    }
  }

  async #open(sp: SavepointClient, task: string | Block[]): Promise<Session> {
    try {
      return await sp.start(this.sessionId, typeof task === "string" ? task : textOf(task), {
        messages: [{ role: "user", contentJson: JSON.stringify(task) }],
      });
    } catch (err) {
      if (!(err instanceof SessionExistsError)) throw err;
    }
    const s = await sp.resume(this.sessionId);
    if (s.status === SessionStatus.SESSION_STATUS_ACTIVE && s.pending.length > 0) {
      await s.pointB(await s.reconcile((call) => this.#call(call)));
    }
    return s;
  }

  async #call(call: Required<ToolUse>): Promise<ToolContent> {
    const t = this.tools.get(call.name);
    if (!t) throw new Error(`no tool named ${JSON.stringify(call.name)}`);
    const raw: unknown = JSON.parse(call.inputJson || "{}");
    const input = t.parse ? t.parse(raw) : raw;
    const block = { type: "tool_use", id: call.toolUseId, name: call.name, input: raw };
    return (await t.run(input, { toolUse: block, toolUseBlock: block })) as ToolContent;
  }

  #final(s: Session): Block[] | undefined {
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

  async #run(sp: SavepointClient, task: string | Block[], params: Record<string, unknown>): Promise<string> {
    const s = (this.session = await this.#open(sp, task));
    const defs = [...this.tools.values()].map(definitionOf);
    const tools = [...((params.tools as unknown[]) ?? []), ...defs];
    const api = "betas" in params ? this.client.beta.messages : this.client.messages;
    for (;;) {
      if (s.status === SessionStatus.SESSION_STATUS_COMPLETED) return s.finalOutput;
      if (s.status === SessionStatus.SESSION_STATUS_FAILED) throw new SessionFailedError(`savepoint: session ${JSON.stringify(this.sessionId)} failed: ${s.finalOutput}`, "failed");
      const final = this.#final(s);
      if (final) {
        await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, textOf(final));
        continue;
      }
      if (s.turn >= this.#maxTurns) throw new MaxTurnsError(`savepoint: session ${JSON.stringify(this.sessionId)} reached maxTurns=${this.#maxTurns} without a final answer`, "max_turns");
      const messages = s.messages.map((m: Message) => ({ role: m.role, content: JSON.parse(m.contentJson) }));
      // biome-ignore lint: the SDK's overloads; the parameters pass through as given
      const resp: any = await (api.create as any)({ ...params, messages, ...(tools.length ? { tools } : {}) });
      const u = resp.usage ?? {};
      for (const k of Object.keys(this.usage) as (keyof typeof this.usage)[]) this.usage[k] += u[k] ?? 0;
      s.addTokens((u.input_tokens ?? 0) + (u.output_tokens ?? 0));
      const reason = String(resp.stop_reason ?? "");
      this.stopReason = reason;
      // The SDK returns the API's JSON as it came: saved exactly, with no field added.
      const content = resp.content as Block[];
      if (reason === "max_tokens" || reason === "model_context_window_exceeded") {
        throw new StopReasonError(`savepoint: the model's reply was cut off (stop_reason ${reason}); nothing of it was saved: run again with a larger max_tokens`, reason);
      }
      if (!["end_turn", "stop_sequence", "tool_use", "pause_turn", "refusal"].includes(reason)) {
        throw new StopReasonError(`savepoint: unknown stop_reason ${JSON.stringify(reason)}; nothing of the reply was saved`, reason);
      }
      if (reason === "refusal") {
        await s.complete(SessionStatus.SESSION_STATUS_FAILED, textOf(content));
        throw new RefusalError(`savepoint: the model refused: ${textOf(content)}`, reason);
      }
      const calls: ToolUse[] = content
        .filter((b) => b.type === "tool_use")
        .map((b) => {
          const t = this.tools.get(String(b.name));
          return {
            toolUseId: String(b.id),
            name: String(b.name),
            inputJson: JSON.stringify(b.input ?? {}),
            effectClass: t ? effectOf(t, this.#trust) : EffectClass.EFFECT_CLASS_SIDE_EFFECT,
          };
        });
      if (reason === "pause_turn" && calls.length === 0) await s.save({ stateJson: JSON.stringify({ [PAUSED]: Number(s.messageCount) }) });
      await s.pointA({ role: "assistant", contentJson: JSON.stringify(content) }, calls);
      if (calls.length > 0) {
        // The turn's tools run concurrently, as the SDK's toolRunner runs them:
        // each begun before it runs and recorded after, on its own.
        const settled = await Promise.allSettled(calls.map((c) => s.runTool(c, () => this.#call(c as Required<ToolUse>))));
        const failed = settled.find((r) => r.status === "rejected");
        if (failed) throw failed.reason;
        await s.pointB(settled.map((r) => (r as PromiseFulfilledResult<Awaited<ReturnType<Session["runTool"]>>>).value));
      }
    }
  }
}
