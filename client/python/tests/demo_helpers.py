"""Running the Python and Go demos as processes, and reading a session back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import savepoint
from savepoint_demo.tools import NOTES_FILE, sample_notes
from savepoint.v1 import savepoint_pb2 as pb

PY_DEMO = [sys.executable, "-m", "savepoint_demo"]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.stdout}stderr:\n{self.stderr}"


def workdir(base: Path, name: str = "w") -> Path:
    """A fresh work directory holding the sample notes."""
    d = base / name
    d.mkdir(parents=True, exist_ok=True)
    (d / NOTES_FILE).write_text(sample_notes())
    return d


def run_demo(cmd: list[str], addr: str, wd: Path, session: str, script: str = "seed", resume: bool = False,
             crash: str = "", cwd: Path | None = None) -> Run:
    """One run of a demo (PY_DEMO or the Go binary) with CRASH_AFTER=crash."""
    args = [*cmd, "--addr", addr, "--workdir", str(wd), "--session", session, "--script", script]
    if resume:
        args.append("--resume")
    env = {**os.environ, "CRASH_AFTER": crash, "PAUSE_AFTER": ""}
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, cwd=cwd, stdin=subprocess.DEVNULL)
    return Run(p.returncode, p.stdout, p.stderr)


def history(addr: str, sid: str) -> tuple[pb.Checkpoint, list[pb.Message]]:
    """A session's latest revision and whole history, without taking it."""
    with savepoint.Client(addr) as c:
        g = c.raw.GetSession(pb.GetSessionRequest(session_id=sid))
        msgs = list(g.checkpoint.messages)
        token = g.next_page_token
        while token:
            page = c.raw.ListMessages(pb.ListMessagesRequest(session_id=sid, revision=g.checkpoint.revision, page_token=token))
            msgs.extend(page.messages)
            token = page.next_page_token
    assert len(msgs) == g.checkpoint.message_count
    return g.checkpoint, msgs


def blocks(m: pb.Message) -> list[dict[str, Any]]:
    v = json.loads(m.content_json)
    return v if isinstance(v, list) else [{"type": "text", "text": v}]


def check_pairing(msgs: list[pb.Message]) -> list[str]:
    """Every tool_use answered by exactly one tool_result in the next message."""
    problems, open_ = [], []  # type: ignore[var-annotated]
    for i, m in enumerate(msgs):
        uses = [b["id"] for b in blocks(m) if b.get("type") == "tool_use"]
        results = [b["tool_use_id"] for b in blocks(m) if b.get("type") == "tool_result"]
        if open_ or results:
            if m.role != "user" or sorted(results) != sorted(open_):
                problems.append(f"message {i} ({m.role}) answers {results}, want exactly one tool_result for each of {open_}")
        open_ = uses if m.role == "assistant" else []
    if open_:
        problems.append(f"tool uses {open_} never answered")
    return problems


def canon(m: pb.Message) -> str:
    return json.dumps({"role": m.role, "content": json.loads(m.content_json)}, sort_keys=True)


def compare_history(base: list[pb.Message], got: list[pb.Message], in_doubt: set[str]) -> list[str]:
    """Compare with the uncrashed history, allowing only an is_error "unknown"
    tool_result for a tool use in doubt."""
    if len(got) != len(base):
        return [f"{len(got)} messages, the uncrashed run has {len(base)}"]
    problems, seen = [], set()
    for i, (g, b) in enumerate(zip(got, base)):
        if canon(g) == canon(b):
            continue
        gb, bb = blocks(g), blocks(b)
        if g.role != b.role or len(gb) != len(bb):
            problems.append(f"message {i} differs:\n got {canon(g)}\nwant {canon(b)}")
            continue
        for x, y in zip(gb, bb):
            if x == y:
                continue
            tid = x.get("tool_use_id")
            if (x.get("type") == "tool_result" and tid == y.get("tool_use_id") and tid in in_doubt
                    and x.get("is_error") is True and "unknown" in str(x.get("content")) and "is_error" not in y):
                seen.add(tid)
                continue
            problems.append(f"message {i} block differs:\n got {x}\nwant {y}")
    problems += [f"tool use {t} was in doubt, but its result is not an is_error one" for t in sorted(in_doubt - seen)]
    return problems


def count_writes(wd: Path) -> int:
    p = wd / "report.writes"
    return p.read_text().count("\n") if p.exists() else 0
