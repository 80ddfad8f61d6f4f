"""DurableToolNode across processes: a real agent (create_react_agent, and a
StateGraph of its own) on SavepointSaver is SIGKILLed before its
side-effecting tool, during it, after it returned and before the node's
write, and after the write, then resumed from a new process, sync (invoke)
and async (ainvoke). The effect (a line in a file) happens at most once in
every case and exactly once unless the call is in doubt; the in-doubt
ToolMessage appears only for the kill between the begin and the record; the
thread ends as an uncrashed run does in every other case.

The processes are forked from a forkserver that has imported the agent
(durable_agent.py), so that each costs milliseconds rather than the seconds
of importing langgraph."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.forkserver
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import durable_agent
import pytest
from conftest import Daemon

from savepoint.langgraph import SavepointSaver, in_doubt_text
from savepoint.v1 import graph_pb2 as gpb
from savepoint.v1 import savepoint_pb2 as pb


@pytest.fixture(scope="module")
def forkserver() -> Iterator[Any]:
    """A multiprocessing context whose forkserver has imported
    durable_agent (and so langgraph). The forkserver finds the module on
    PYTHONPATH: Python 3.11's does not take the parent's sys.path."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["durable_agent"])
    old = os.environ.get("PYTHONPATH")
    here = str(Path(__file__).parent)
    os.environ["PYTHONPATH"] = here + (os.pathsep + old if old else "")
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    yield ctx


def run(ctx: Any, tmp: Path, daemon: Daemon, thread: str, kind: str, mode: str, phase: str, kill_at: str = "") -> dict[str, Any] | None:
    """Run one process's part; with kill_at, SIGKILL it once it reports
    the point (None is returned), else return what it wrote."""
    marker = tmp / f"{thread}.{phase}.marker"
    out = tmp / f"{thread}.{phase}.json"
    effects = tmp / f"{thread}.effects"
    p = ctx.Process(
        target=durable_agent.run,
        args=(daemon.addr, thread, kind, mode, phase, kill_at, str(marker), str(effects), str(out)),
    )
    p.start()
    deadline = time.monotonic() + 60
    try:
        if kill_at:
            while not marker.exists():
                assert p.is_alive(), f"{thread}: the process ended ({p.exitcode}) before reaching {kill_at}"
                assert time.monotonic() < deadline, f"{thread}: {kill_at} not reached in 60 s"
                time.sleep(0.01)
            p.kill()  # SIGKILL
            p.join()
            return None
        p.join(timeout=60)
        assert p.exitcode == 0, f"{thread} {phase}: exit {p.exitcode}"
        return json.loads(out.read_text())  # type: ignore[no-any-return]
    finally:
        if p.is_alive():
            p.kill()
            p.join()


def effect_lines(tmp: Path, thread: str) -> list[str]:
    path = tmp / f"{thread}.effects"
    return path.read_text().splitlines() if path.exists() else []


def ledger(daemon: Daemon, thread: str) -> dict[str, Any]:
    with SavepointSaver(daemon.addr) as s:
        resp = s._conn.unary("ListThreadEffects", gpb.ListThreadEffectsRequest(thread_id=thread))
    return {e.tool_use_id: e for e in resp.effects}


IN_DOUBT = {
    "type": "tool",
    "content": in_doubt_text("send_invoice", "call_send"),
    "name": "send_invoice",
    "tool_call_id": "call_send",
    "status": "error",
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["react", "graph"])
def test_kill_at_each_point_then_resume(forkserver: Any, daemon: Daemon, tmp_path: Path, kind: str, mode: str) -> None:
    run_id = uuid.uuid4().hex[:8]
    base = f"dur-{kind}-{mode}-{run_id}-clean"
    want = run(forkserver, tmp_path, daemon, base, kind, mode, "start")
    assert want is not None
    assert effect_lines(tmp_path, base) == ["invoice acme 42"]
    assert want["next"] == []
    tool_msgs = [m for m in want["messages"] if m["type"] == "tool"]
    assert {m["name"]: m["status"] for m in tool_msgs} == {"send_invoice": "success", "lookup_price": "success"}
    assert want["messages"][-1]["content"].startswith("done: ")

    for point in durable_agent.POINTS:
        thread = f"dur-{kind}-{mode}-{run_id}-{point}"
        assert run(forkserver, tmp_path, daemon, thread, kind, mode, "start", kill_at=point) is None
        before_resume = effect_lines(tmp_path, thread)
        assert before_resume == ([] if point == "before" else ["invoice acme 42"]), point
        got = run(forkserver, tmp_path, daemon, thread, kind, mode, "resume")
        assert got is not None
        # At most once always; exactly once here, in doubt or not (the
        # in-doubt call's effect happened in the killed process).
        assert effect_lines(tmp_path, thread) == ["invoice acme 42"], point
        entry = ledger(daemon, thread)["call_send"]
        assert entry.attempts == 1, point
        in_doubt = [m for m in got["messages"] if m == IN_DOUBT]
        if point == "during":
            # Killed between the begin and the record: the call is in doubt,
            # said once, and never run again.
            assert len(in_doubt) == 1, got["messages"]
            assert entry.state == gpb.THREAD_EFFECT_STATE_BEGUN
            assert got["next"] == []
            assert got["messages"][-1]["content"] == (
                "done: lookup_price[success]: A1 costs 42 | send_invoice[error]: " + in_doubt_text("send_invoice", "call_send")
            )
        else:
            assert in_doubt == [], (point, got["messages"])
            assert entry.state == gpb.THREAD_EFFECT_STATE_SUCCEEDED
            assert got == want, point
        assert entry.effect_class == pb.EFFECT_CLASS_SIDE_EFFECT
        assert entry.checkpoint_ns == ""

