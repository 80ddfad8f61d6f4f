"""The demo's tools and the files it keeps in its work directory."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from importlib import resources

from savepoint import EffectClass, ToolFunc, ToolUse

NOTES_FILE = "sales-notes.txt"
REPORT_FILE = "report.txt"
# One line per real write of report.txt, so that a double write shows.
WRITES_FILE = "report.writes"


def sample_notes() -> str:
    """The sample sales-notes.txt written at a fresh start when missing."""
    return (resources.files("savepoint_demo") / NOTES_FILE).read_text(encoding="utf-8")


def _path(d: str, name: str) -> str:
    if not name or name != os.path.basename(name) or name in (".", ".."):
        raise ValueError(f'file "{name}": want a plain file name in the work directory')
    return os.path.join(d, name)


def _read(d: str, name: str) -> str:
    p = _path(d, name)
    try:
        with open(p, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ValueError(f"{name} does not exist") from None


def _read_notes(d: str, inp: dict[str, str], _key: str) -> str:
    return _read(d, inp.get("file", ""))


def _count_words(d: str, inp: dict[str, str], _key: str) -> str:
    return f"{len(_read(d, inp.get('file', '')).split())} words"


def _write_report(d: str, inp: dict[str, str], key: str) -> str:
    """The side effect: replace the report (temp file, then rename) and append
    a line to report.writes."""
    name, text = inp.get("file", ""), inp.get("text", "")
    p = _path(d, name)
    with open(p + ".tmp", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(p + ".tmp", p)
    with open(os.path.join(d, WRITES_FILE), "a", encoding="utf-8") as f:
        f.write(f"{name} key={key}\n")
    return f"Wrote {len(text.encode())} bytes to {name}"


TOOLS: dict[str, tuple[EffectClass, Callable[[str, dict[str, str], str], str]]] = {
    "read_notes": (EffectClass.READ_ONLY, _read_notes),
    "count_words": (EffectClass.READ_ONLY, _count_words),
    "write_report": (EffectClass.SIDE_EFFECT, _write_report),
}


def class_of(name: str) -> EffectClass:
    """A tool's effect class; an unknown tool counts as side-effecting."""
    return TOOLS[name][0] if name in TOOLS else EffectClass.SIDE_EFFECT


def run_tool(d: str) -> ToolFunc:
    """The ToolFunc that runs the model's tool calls in directory d."""

    def run(call: ToolUse, key: str) -> str:
        if call.name not in TOOLS:
            raise ValueError(f'unknown tool "{call.name}"')
        inp: dict[str, str] = {}
        if call.input_json:
            try:
                inp = json.loads(call.input_json)
            except ValueError as e:
                raise ValueError(f"bad input for {call.name}: {e}") from None
        return TOOLS[call.name][1](d, inp, key)

    return run


def count_writes(d: str) -> int:
    """How many times write_report really wrote, from report.writes."""
    try:
        with open(os.path.join(d, WRITES_FILE), encoding="utf-8") as f:
            return f.read().count("\n")
    except FileNotFoundError:
        return 0
