/**
 * The crash points, in the order they happen within one turn. N in LABEL:N
 * is the turn (the checkpoint's turn counter); during a resume the pending
 * turn's points fire with that turn's number. The same labels as the Go
 * demo's (cmd/savepoint-demo/crash.go).
 */
export const labels = [
  // Point A saved: the assistant message and its pending tool uses are in
  // the checkpoint, no tool has started (seed moment 1).
  "after-save-a",
  // beginEffect marked a side-effecting tool use as dispatched; the tool has
  // not run. Never fires for a read-only tool (it is not begun).
  "after-begin",
  // The tool returned, its outcome is not in the ledger (seed moment 2).
  "after-tool",
  // recordEffect wrote the outcome to the ledger; Point B not saved (the
  // seed's demo).
  "after-effect-write",
  // Point B saved: the tool results are in the history, nothing is pending
  // (seed moment 3).
  "after-save-b",
] as const;

export type Label = (typeof labels)[number];

/**
 * A crash or pause point: LABEL:N, or LABEL:N:TOOL to pick one tool use of a
 * turn that names several (without TOOL, the first tool use to reach the
 * label).
 */
export interface Point {
  label: Label;
  turn: number;
  tool: string;
  raw: string;
}

/** Parses CRASH_AFTER or PAUSE_AFTER; "" is no point. It throws, saying why, on a malformed one. */
export function parsePoint(s: string): Point | undefined {
  if (s === "") return undefined;
  const q = JSON.stringify;
  const parts = s.split(":");
  if (parts.length < 2 || parts.length > 3) throw new Error(`${q(s)}: want LABEL:N or LABEL:N:TOOL`);
  if (!(labels as readonly string[]).includes(parts[0])) {
    throw new Error(`${q(s)}: unknown label ${q(parts[0])} (have ${labels.join(", ")})`);
  }
  const n = /^[0-9]+$/.test(parts[1]) ? Number(parts[1]) : NaN;
  if (!(n >= 1 && n <= 0xffffffff)) throw new Error(`${q(s)}: the turn must be a number from 1`);
  const p: Point = { label: parts[0] as Label, turn: n, tool: "", raw: s };
  if (parts.length === 3) {
    if (parts[2] === "") throw new Error(`${q(s)}: empty tool name`);
    p.tool = parts[2];
  }
  return p;
}

/** Says whether the point is reached: label at turn, for tool ("" for the points that are not about one tool use). */
export function matches(p: Point | undefined, label: Label, turn: number, tool: string): boolean {
  return p !== undefined && p.label === label && p.turn === turn && (p.tool === "" || p.tool === tool);
}
