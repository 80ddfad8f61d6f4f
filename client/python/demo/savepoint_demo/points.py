"""Crash and pause points: LABEL:N or LABEL:N:TOOL."""

from __future__ import annotations

from dataclasses import dataclass

# The crash points, in the order they happen within one turn. N in LABEL:N
# is the turn (the checkpoint's turn counter); during a resume the pending
# turn's points fire with that turn's number.
LABELS = (
    # Point A saved: the assistant message and its pending tool uses are in
    # the checkpoint, no tool has started.
    "after-save-a",
    # BeginEffect marked a side-effecting tool use as dispatched; the tool
    # has not run. Never fires for a read-only tool (it is not begun).
    "after-begin",
    # The tool returned, its outcome is not in the ledger.
    "after-tool",
    # RecordEffect wrote the outcome to the ledger; Point B not saved.
    "after-effect-write",
    # Point B saved: the tool results are in the history, nothing pending.
    "after-save-b",
)


@dataclass(frozen=True)
class Point:
    """A crash or pause point; ``tool`` "" matches the first tool use of the
    turn to reach the label."""

    label: str
    turn: int
    tool: str
    raw: str

    def matches(self, label: str, turn: int, tool: str) -> bool:
        return self.label == label and self.turn == turn and (self.tool == "" or self.tool == tool)


def parse_point(s: str) -> Point | None:
    """Parse LABEL:N or LABEL:N:TOOL; "" is no point. Raises ValueError."""
    if not s:
        return None
    parts = s.split(":")
    if len(parts) < 2 or len(parts) > 3:
        raise ValueError(f'"{s}": want LABEL:N or LABEL:N:TOOL')
    if parts[0] not in LABELS:
        raise ValueError(f'"{s}": unknown label "{parts[0]}" (have {", ".join(LABELS)})')
    if not parts[1].isdigit() or int(parts[1]) == 0 or int(parts[1]) >= 1 << 32:
        raise ValueError(f'"{s}": the turn must be a number from 1')
    tool = ""
    if len(parts) == 3:
        if parts[2] == "":
            raise ValueError(f'"{s}": empty tool name')
        tool = parts[2]
    return Point(parts[0], int(parts[1]), tool, s)


def matches(p: Point | None, label: str, turn: int, tool: str) -> bool:
    return p is not None and p.matches(label, turn, tool)
