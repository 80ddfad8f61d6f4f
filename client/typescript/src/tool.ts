import { Decision, EffectClass } from "./gen/savepoint/v1/savepoint.js";
import type { Message } from "./session.js";

export { Decision, EffectClass };

/** A tool call the model named. It is pending from pointA until pointB answers it. */
export interface ToolUse {
  /** The provider's tool_use_id. */
  id: string;
  name: string;
  /** The tool's input as JSON text; "" means {}. */
  inputJson?: string;
  /** What running the tool does; unset or UNSPECIFIED means SIDE_EFFECT. */
  class?: EffectClass;
}

/** The effect class that counts: UNSPECIFIED (or unset) is SIDE_EFFECT, the safe assumption. */
export function effectiveClass(c: EffectClass | undefined): EffectClass {
  return c === undefined || c === EffectClass.EFFECT_CLASS_UNSPECIFIED || c === EffectClass.UNRECOGNIZED
    ? EffectClass.EFFECT_CLASS_SIDE_EFFECT
    : c;
}

/** The behaviour hints of an MCP tool (the Model Context Protocol's ToolAnnotations). */
export interface ToolAnnotations {
  readOnlyHint?: boolean;
  idempotentHint?: boolean;
  destructiveHint?: boolean;
  openWorldHint?: boolean;
  [key: string]: unknown;
}

/**
 * The effect class of an MCP tool from its annotations: readOnlyHint gives
 * READ_ONLY, else idempotentHint gives IDEMPOTENT, else (no annotations, or
 * neither hint) SIDE_EFFECT, the safe assumption.
 */
export function effectClassFromAnnotations(annotations?: ToolAnnotations | null): EffectClass {
  if (annotations?.readOnlyHint === true) return EffectClass.EFFECT_CLASS_READ_ONLY;
  if (annotations?.idempotentHint === true) return EffectClass.EFFECT_CLASS_IDEMPOTENT;
  return EffectClass.EFFECT_CLASS_SIDE_EFFECT;
}

/** Answers one tool use. */
export interface ToolResult {
  toolUseId: string;
  /** The tool's output, or its error text when isError is set. */
  content: string;
  /** The tool ran and failed, or, after reconcile, its outcome is in doubt. */
  isError: boolean;
  /** Set by reconcile to the decision that made this result; UNSPECIFIED for runTool's results. */
  decision: Decision;
  /**
   * Set when the tool ran but its outcome could not be written to the
   * ledger. content and isError are still the tool's real outcome: append
   * it, because telling the model it failed would make it retry with a new
   * tool use and repeat the side effect. The failure was logged and passed
   * to onLedgerError; pointB tries to record it once more. If the agent
   * stops before pointB, reconcile will report the call as in doubt.
   */
  ledgerError?: unknown;
}

/** A moment in the life of a tool use that DialOptions.toolHook observes, in the order they happen. */
export type ToolStage =
  /** reconcile has the daemon's decision for a pending tool use and is about to act on it. */
  | "decided"
  /** beginEffect marked the tool use as dispatched; the tool has not run yet. Read-only tools skip it. */
  | "begun"
  /** The tool returned (result); its outcome is not in the ledger yet. */
  | "ran"
  /** recordEffect wrote the outcome to the ledger. */
  | "recorded";

/** What a tool hook is told. */
export interface ToolEvent {
  stage: ToolStage;
  sessionId: string;
  call: Required<ToolUse>;
  /** At "decided": the daemon's decision, and whether beginEffect had marked the tool use before the agent stopped. */
  decision?: Decision;
  begun?: boolean;
  /** At "ran" and "recorded": the tool's outcome. */
  result?: ToolResult;
}

/**
 * Runs a tool: key is the idempotency key to pass to an external API that
 * accepts one ("" for read-only tools). What it returns is the output; what
 * it throws is the tool's failure and becomes an isError result with the
 * error's message.
 */
export type ToolFunc = (call: Required<ToolUse>, key: string, signal?: AbortSignal) => Promise<string> | string;

/** Turns the results of one turn, in the order their tool uses were named, into the message(s) pointB appends. */
export type ToolResultsFunc = (results: ToolResult[]) => Message[];

/**
 * The default ToolResultsFunc: one message with role "user" whose content is
 * an array of Anthropic tool_result blocks,
 * {"type":"tool_result","tool_use_id":...,"content":...,"is_error":true},
 * with is_error left out when false, encoded byte for byte as the Go
 * client's AnthropicToolResults encodes it.
 */
export function anthropicToolResults(results: ToolResult[]): Message[] {
  if (results.length === 0) return [];
  const blocks = results.map((r) => ({
    type: "tool_result",
    tool_use_id: r.toolUseId,
    content: r.content,
    ...(r.isError ? { is_error: true } : {}),
  }));
  return [{ role: "user", contentJson: escapeLineSeparators(JSON.stringify(blocks)) }];
}

/** Go's JSON encoder always escapes U+2028 and U+2029; JSON.stringify does not. */
export function escapeLineSeparators(json: string): string {
  return json.replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/** A tool use with every field set, as hooks and tool functions see it. */
export function fullToolUse(u: { toolUseId: string; name: string; inputJson: string; effectClass: EffectClass }): Required<ToolUse> {
  return { id: u.toolUseId, name: u.name, inputJson: u.inputJson, class: effectiveClass(u.effectClass) };
}
