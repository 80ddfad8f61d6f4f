/**
 * The session's state as a change is planned on it, and the durable tools'
 * part of its stateJson: what session.ts and ledger.ts both read and write,
 * kept apart so that neither imports the other at run time
 * (tests/imports.test.ts fails on any cycle).
 */
import type { AgentInputItem } from "@openai/agents-core";
import type { pb } from "@savepoint-dev/client";

import type { ToolUseRecord } from "./ledger.js";

/** The stateJson key under which the durable tools keep their calls (the Python package's key too). */
export const STATE_KEY = "openai_agents";

/**
 * The session's part of stateJson: the calls the durable tools are running,
 * the calls a resume answered, and the history transactions applied (each
 * operation id with a digest of its transaction).
 */
export interface LedgerPart {
  calls?: Record<string, ToolUseRecord>;
  resolved?: string[];
  operations?: Record<string, string>;
}

/** One revision of the session as a change is planned on it. */
export interface View {
  revision: bigint;
  epoch: bigint;
  count: bigint;
  task: string;
  turn: number;
  tokensUsed: bigint;
  labels: Record<string, string>;
  stateJson: string;
  pending: pb.ToolUse[];
  /** The whole history, when the change needs it. */
  items?: AgentInputItem[];
}

/** What one save does; unset fields keep the revision's value. */
export interface Change<T = unknown> {
  /** Keep only the first keep messages before appending. */
  keep?: bigint;
  append?: AgentInputItem[];
  pending?: pb.ToolUse[];
  stateJson?: string;
  /** What the operation returns once the change is saved. */
  result?: T;
}

/** Plans one change on a revision; undefined writes nothing. */
export type Planner<T> = (v: View) => Change<T> | undefined | Promise<Change<T> | undefined>;

/** The durable tools' part of v's stateJson: a fresh copy, empty when the session holds none. */
export function partOf(v: View): LedgerPart {
  let st: unknown;
  try {
    st = v.stateJson ? JSON.parse(v.stateJson) : {};
  } catch {
    return {};
  }
  const part = st && typeof st === "object" ? (st as Record<string, unknown>)[STATE_KEY] : undefined;
  return part && typeof part === "object" && !Array.isArray(part) ? (structuredClone(part) as LedgerPart) : {};
}

/** v's stateJson with the durable tools' part replaced (removed when it holds nothing); any other key a user stored is kept. */
export function withPart(v: View, part: LedgerPart): string {
  let st: Record<string, unknown> = {};
  try {
    const parsed: unknown = v.stateJson ? JSON.parse(v.stateJson) : {};
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) st = parsed as Record<string, unknown>;
  } catch {
    st = {};
  }
  const kept: Record<string, unknown> = {};
  if (part.calls && Object.keys(part.calls).length > 0) kept.calls = part.calls;
  if (part.resolved && part.resolved.length > 0) kept.resolved = part.resolved;
  if (part.operations && Object.keys(part.operations).length > 0) kept.operations = part.operations;
  if (Object.keys(kept).length > 0) st[STATE_KEY] = kept;
  else delete st[STATE_KEY];
  const keys = Object.keys(st).sort();
  return keys.length === 0 ? "" : JSON.stringify(Object.fromEntries(keys.map((k) => [k, st[k]])));
}
