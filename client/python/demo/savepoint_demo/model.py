"""The scripted model: a fixed queue of Anthropic-shaped responses that fails
loudly once drained. The scripts are cmd/savepoint-demo's, byte for byte."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from savepoint import Message, ToolUse
from savepoint.types import compact_json

from savepoint_demo.tools import class_of


def text_block(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def tool_use_block(id: str, name: str, input_json: str) -> dict[str, Any]:
    # The raw input text is kept for the tool use, as Go's json.RawMessage is.
    return {"type": "tool_use", "id": id, "name": name, "input": _Raw(input_json)}


class _Raw(str):
    """JSON text embedded as it is (Go's json.RawMessage)."""


def _marshal(v: Any) -> Any:
    if isinstance(v, _Raw):
        return json.loads(v)
    if isinstance(v, dict):
        return {k: _marshal(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_marshal(x) for x in v]
    return v


@dataclass(frozen=True)
class Reply:
    """One model response, shaped like an Anthropic Messages API response."""

    content: list[dict[str, Any]]
    stop_reason: str
    tokens: int

    def tool_uses(self) -> list[ToolUse]:
        """The tool_use blocks as tool uses, each with its tool's effect class."""
        return [
            ToolUse(tool_use_id=b["id"], name=b["name"], input_json=str(b["input"]), effect_class=class_of(b["name"]))
            for b in self.content
            if b["type"] == "tool_use"
        ]

    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b["type"] == "text")

    def message(self) -> Message:
        return Message(role="assistant", content_json=compact_json(_marshal(self.content)))


FINAL_ANSWER = "Report written to report.txt, task complete."
REPORT_TEXT = (
    "Q3 sales report, West region\n\n"
    "Closed: Acme Corp ($18,000), Globex ($9,000), Initech ($15,000): $42,000 in total.\n"
    "Open: Umbrella (quote, follow up in November), Hooli (legal review).\n"
    "Source: sales-notes.txt, 43 words.\n"
)
REPORT_INPUT = compact_json({"file": "report.txt", "text": REPORT_TEXT})
NOTES_INPUT = '{"file":"sales-notes.txt"}'

SCRIPTS: dict[str, list[Reply]] = {
    # seed: one tool per turn: read_notes, count_words, write_report, then
    # the final answer.
    "seed": [
        Reply([text_block("I'll start by reading the sales notes."), tool_use_block("toolu_01", "read_notes", NOTES_INPUT)], "tool_use", 120),
        Reply([text_block("Now I'll count the words in the notes."), tool_use_block("toolu_02", "count_words", NOTES_INPUT)], "tool_use", 180),
        Reply([text_block("Writing the report."), tool_use_block("toolu_03", "write_report", REPORT_INPUT)], "tool_use", 260),
        Reply([text_block(FINAL_ANSWER)], "end_turn", 90),
    ],
    # parallel: the second turn names a read-only and a side-effecting call
    # at once; they run one after the other, in order.
    "parallel": [
        Reply([text_block("I'll start by reading the sales notes."), tool_use_block("toolu_01", "read_notes", NOTES_INPUT)], "tool_use", 120),
        Reply(
            [
                text_block("I'll count the words and write the report in one go."),
                tool_use_block("toolu_02", "count_words", NOTES_INPUT),
                tool_use_block("toolu_03", "write_report", REPORT_INPUT),
            ],
            "tool_use",
            260,
        ),
        Reply([text_block(FINAL_ANSWER)], "end_turn", 90),
    ],
}


def script_names() -> list[str]:
    return sorted(SCRIPTS)


@dataclass
class Scripted:
    """The fixed queue of one script, continuing after turn ``from_turn``."""

    name: str
    queue: list[Reply]
    turn: int
    served: int = field(default=0)

    @classmethod
    def new(cls, name: str, from_turn: int) -> Scripted:
        if name not in SCRIPTS:
            raise ValueError(f'unknown script "{name}" (have {", ".join(script_names())})')
        replies = SCRIPTS[name]
        return cls(name=name, queue=list(replies[min(from_turn, len(replies)) :]), turn=from_turn + 1)

    def create(self, messages: Sequence[Message]) -> Reply:
        if not self.queue:
            raise RuntimeError(
                f'scripted model "{self.name}": response queue drained after {self.served} responses: the script has no '
                f"response for turn {self.turn} (history of {len(messages)} messages)"
            )
        r = self.queue.pop(0)
        self.served += 1
        self.turn += 1
        return r
