import { EffectClass, effectClassFromAnnotations } from "@savepoint-dev/client";

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
