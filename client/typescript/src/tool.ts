import { Decision, EffectClass } from "./gen/savepoint/v1/savepoint.js";
import type { ContentBlock, Message, ToolContent, ToolResult, ToolUse } from "./types.js";

export { Decision, EffectClass };

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
 * neither hint) SIDE_EFFECT, the safe assumption. A hint counts only when it
 * is the boolean true, as in the cases every client shares
 * (client/testdata/mcp_annotations.json).
 */
export function effectClassFromAnnotations(annotations?: ToolAnnotations | null): EffectClass {
  if (annotations?.readOnlyHint === true) return EffectClass.EFFECT_CLASS_READ_ONLY;
  if (annotations?.idempotentHint === true) return EffectClass.EFFECT_CLASS_IDEMPOTENT;
  return EffectClass.EFFECT_CLASS_SIDE_EFFECT;
}

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
export function fullToolUse(u: { toolUseId: string; name: string; inputJson: string; effectClass: EffectClass; repeatable?: boolean }): Required<ToolUse> {
  return { toolUseId: u.toolUseId, name: u.name, inputJson: u.inputJson, effectClass: effectiveClass(u.effectClass), repeatable: u.repeatable ?? false };
}

/** The ledger's text of a tool's content: the text itself, or the content blocks as JSON. toolContent reads it back. */
export function toolOutput(content: ToolContent): string {
  return typeof content === "string" ? content : escapeLineSeparators(JSON.stringify(content));
}

function isBlock(b: unknown): b is ContentBlock {
  return typeof b === "object" && b !== null && !Array.isArray(b) && typeof (b as { type?: unknown }).type === "string";
}

/**
 * The content a ledger output stands for: the list of content blocks when
 * the text is a non-empty JSON array of objects that each have a string
 * type, else the text itself. Every client reads the ledger by this rule
 * (client/testdata/tool_content.json).
 */
export function toolContent(output: string): ToolContent {
  if (!output.startsWith("[")) return output;
  let v: unknown;
  try {
    v = JSON.parse(output);
  } catch {
    return output;
  }
  return Array.isArray(v) && v.length > 0 && v.every(isBlock) ? (v as ContentBlock[]) : output;
}

/**
 * The ToolContent of what a tool function returned: undefined or null is
 * "", a string is read as toolContent reads the ledger (so a run and a later
 * REUSE give the model the same thing), and an array of blocks is taken
 * through JSON as the ledger stores it. Anything else throws a TypeError.
 */
export function normalizeContent(value: unknown): ToolContent {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return toolContent(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return "";
    for (const b of value) {
      if (!isBlock(b)) throw new TypeError("a content block must be an object with a string type");
    }
    return toolContent(toolOutput(value as ContentBlock[]));
  }
  throw new TypeError(`a tool returns a string or an array of content blocks, not ${typeof value}`);
}
