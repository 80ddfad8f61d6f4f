"""SavepointSaver across processes: a graph stopped at its interrupt is
resumed by a new process after savepointd was killed with SIGKILL and
restarted, and ends as an uninterrupted in-memory run does; several processes
run graphs against one daemon at once, and every checkpoint they made reads
back."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import langgraph_graph as lg
from conftest import Daemon
from langgraph.checkpoint.memory import InMemorySaver

from savepoint.langgraph import SavepointSaver

SCRIPT = str(Path(__file__).with_name("langgraph_graph.py"))


def run_script(addr: str, thread: str, phase: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, SCRIPT, addr, thread, phase], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def record(p: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_resume_after_kill_in_new_process(fresh_daemon: Daemon) -> None:
    want = lg.run_all(InMemorySaver(), "g")
    thread = "durable-" + uuid.uuid4().hex
    first = record(run_script(fresh_daemon.addr, thread, "until-interrupt"))
    assert first["interrupted"]["next"] == ["sub"]
    fresh_daemon.kill()
    fresh_daemon.restart()
    second = record(run_script(fresh_daemon.addr, thread, "resume"))
    got = {**first, **second}
    # The new process ran no node before the interrupt again.
    assert second["calls_2"] == {"review": 3, "stamp": 2, "finish": 2}
    want_calls_2 = {k: v - want["calls_1"].get(k, 0) for k, v in want["calls_2"].items()}
    assert {k: v for k, v in want_calls_2.items() if v} == second["calls_2"]
    got.pop("calls_2")
    want.pop("calls_2")
    assert got == want


def test_processes_share_one_daemon(daemon: Daemon) -> None:
    run = uuid.uuid4().hex
    threads = [f"proc-{run}-{i}" for i in range(4)]
    phases = ["all", "all-async", "all", "all-async"]
    procs = [run_script(daemon.addr, t, ph) for t, ph in zip(threads, phases)]
    recs = [record(p) for p in procs]
    want = lg.run_all(InMemorySaver(), "g")
    for rec in recs:
        assert rec == want
    # Every checkpoint each process made reads back whole, alone and listed.
    with SavepointSaver(daemon.addr) as saver:
        for t in threads:
            listed = list(saver.list({"configurable": {"thread_id": t}}))
            assert len(listed) == len(want["final_history"]) + sum(1 for x in listed if x.config["configurable"]["checkpoint_ns"])
            for tup in listed:
                again = saver.get_tuple(tup.config)
                assert again is not None
                assert again.checkpoint == tup.checkpoint and again.metadata == tup.metadata
                assert again.pending_writes == tup.pending_writes


def without_errors(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**h, "tasks": sorted(({**t, "error": None} for t in h["tasks"]), key=json.dumps)} for h in history]


def test_crash_in_fan_out_reruns_only_the_unfinished_task(fresh_daemon: Daemon) -> None:
    """The process dies inside the Send fan-out after two of its three tasks
    stored their writes; savepointd is killed too. A new process reruns only
    the third task and ends as an uninterrupted run does."""
    want = lg.run_all(InMemorySaver(), "g")
    thread = "crash-" + uuid.uuid4().hex
    p = run_script(fresh_daemon.addr, thread, "crash-in-fanout")
    _, err = p.communicate(timeout=120)
    assert p.returncode == lg.CRASH_EXIT, err
    fresh_daemon.kill()
    fresh_daemon.restart()
    got = record(run_script(fresh_daemon.addr, thread, "after-crash"))
    # "work:b" counts its run in the crashed process; "a" and "c" never ran again.
    assert got["calls_1"] == {"work:b": 2, "collect": 1, "review": 1}
    assert got["at_interrupt"] == want["at_interrupt"]
    for k in ("resumed", "done", "fork_interrupt", "fork_done", "final", "namespaces"):
        assert got[k] == want[k], k
    # The history is the same but for the error the crashed task never wrote.
    assert without_errors(got["final_history"]) == without_errors(want["final_history"])
