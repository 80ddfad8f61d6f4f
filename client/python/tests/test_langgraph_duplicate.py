"""The duplicate-intent guard where it happens: a LangGraph graph under
durability="async" (durable_agent.py, kill point "lost-message", with a
model that gives every call a new id) is SIGKILLed after its
side-effecting tool ran and was recorded but before the graph checkpoint
holding the model's message was saved; resumed by a new process, its model
reissues the same call under a new id, and the tool does not run again: the
model is told, under the new id, that the invoice was already sent and what
it returned. An uncrashed run that asks for the same invoice twice sends it
twice."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon

from savepoint.langgraph import SavepointSaver
from savepoint.v1 import graph_pb2 as gpb

AGENT = str(Path(__file__).with_name("durable_agent.py"))


def part(daemon: Daemon, tmp: Path, thread: str, phase: str, mode: str, script: str = "once", kill: bool = False) -> list[dict[str, Any]] | None:
    """Run one process; with kill, SIGKILL it once its tool ran."""
    effects, out, marker = tmp / f"{thread}.effects", tmp / f"{thread}.{phase}.json", tmp / f"{thread}.{phase}.marker"
    args = [sys.executable, AGENT, daemon.addr, thread, "graph", mode, phase, "lost-message" if kill else "-",
            str(marker), str(effects), str(out), script, "async"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill:
            deadline = time.monotonic() + 60
            while not marker.exists():
                assert p.poll() is None, f"{thread}: ended before its tool ran: {p.communicate()}"
                assert time.monotonic() < deadline, f"{thread}: the tool did not run in 60 s"
                time.sleep(0.02)
            p.kill()  # SIGKILL
            p.wait()
            return None
        stdout, stderr = p.communicate(timeout=90)
        assert p.returncode == 0, f"{thread} {phase}: exit {p.returncode}\n{stdout}\n{stderr}"
        return json.loads(out.read_text())["messages"]  # type: ignore[no-any-return]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def effect_lines(tmp: Path, thread: str) -> list[str]:
    path = tmp / f"{thread}.effects"
    return path.read_text().splitlines() if path.exists() else []


def ledger(daemon: Daemon, thread: str) -> list[gpb.ThreadEffect]:
    with SavepointSaver(daemon.addr) as s:
        return list(s._conn.unary("ListThreadEffects", gpb.ListThreadEffectsRequest(thread_id=thread)).effects)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_killed_before_the_message_was_saved_runs_the_tool_once(daemon: Daemon, tmp_path: Path, mode: str) -> None:
    thread = f"dup-{mode}-{uuid.uuid4().hex[:8]}"
    assert part(daemon, tmp_path, thread, "start", mode, kill=True) is None
    assert effect_lines(tmp_path, thread) == ["invoice acme 42"]
    # The model's message was lost with the process: the saved thread does
    # not hold the call that ran.
    with SavepointSaver(daemon.addr) as s:
        tup = s.get_tuple({"configurable": {"thread_id": thread}})
    assert tup is not None
    assert not any(getattr(m, "tool_calls", None) for m in tup.checkpoint["channel_values"].get("messages", []))

    got = part(daemon, tmp_path, thread, "resume", mode)
    assert got is not None
    assert effect_lines(tmp_path, thread) == ["invoice acme 42"], "the invoice was sent twice"
    entries = {e.tool_use_id: e for e in ledger(daemon, thread)}
    assert len(entries) == 2, json.dumps(got)
    first = next(e for e in entries.values() if not e.duplicate_of)
    second = next(e for e in entries.values() if e.duplicate_of)
    assert first.state == gpb.THREAD_EFFECT_STATE_SUCCEEDED and first.attempts == 1
    assert second.duplicate_of == first.tool_use_id and second.attempts == 0
    assert first.run_id and second.run_id and first.run_id != second.run_id
    tool_msgs = [m for m in got if m["type"] == "tool"]
    assert len(tool_msgs) == 1, got
    msg = tool_msgs[0]
    assert msg["tool_call_id"] == second.tool_use_id and msg["status"] == "success"
    assert f"tool_use_id {first.tool_use_id} " in msg["content"]
    assert msg["content"].endswith("It was already taken, and returned:\ninvoice sent to acme for 42"), msg["content"]
    assert got[-1]["content"].startswith("done: send_invoice[success]: This send_invoice call"), got[-1]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_uncrashed_run_calling_twice_runs_twice(daemon: Daemon, tmp_path: Path, mode: str) -> None:
    thread = f"twice-{mode}-{uuid.uuid4().hex[:8]}"
    got = part(daemon, tmp_path, thread, "start", mode, script="twice")
    assert got is not None
    assert effect_lines(tmp_path, thread) == ["invoice acme 42", "invoice acme 42"]
    assert [m["content"] for m in got if m["type"] == "tool"] == ["invoice sent to acme for 42"] * 2
    assert all(not e.duplicate_of and e.attempts == 1 for e in ledger(daemon, thread))
