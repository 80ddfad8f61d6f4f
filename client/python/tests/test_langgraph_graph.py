"""SavepointSaver under real LangGraph graphs (langgraph_graph.py), sync and
async: what a user observes equals what InMemorySaver gives on the same
graph; checkpoints over the daemon's request limit go through the upload
and read back whole; a late put_writes after delete_thread does not bring the
thread back."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
import uuid
from collections import Counter
from typing import Annotated, Any, TypedDict

import langgraph_graph as lg
import pytest
from conftest import Daemon
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from savepoint import RetryPolicy
from savepoint.errors import InvalidArgumentError, InvalidGraphKeyError, MissingFieldError
from savepoint.langgraph import SavepointSaver
from savepoint.langgraph._conn import Connection


def check_record(rec: dict[str, Any]) -> None:
    """What the graph must show whatever the saver: the fan-out's failed task
    has its error stored and is the only one run again; the subgraph's
    interrupt is resumed; the fork ends with its own answer."""
    assert rec["first"] == "WorkerFailed('b failed once')"
    errors = [t for t in rec["after_failure"]["tasks"] if t["error"]]
    assert [t["name"] for t in errors] == ["work"] and "b failed once" in errors[0]["error"]
    assert rec["after_failure"]["values"]["results"] == ["done-a", "done-c"]
    assert rec["at_interrupt"]["__interrupt__"] == [{"interrupt": {"question": "approve?", "summary": "done-a,done-b,done-c"}}]
    assert rec["calls_1"] == {"plan": 1, "work:a": 1, "work:b": 2, "work:c": 1, "collect": 1, "review": 1}
    assert rec["done"]["values"]["answer"] == "yes:done-a,done-b,done-c!"
    assert rec["final"]["values"]["answer"] == "no:forked!"
    assert rec["namespaces"] == ["", "sub"]
    assert any(h["source"] == "update" for h in rec["final_history"])


def test_graph_sync_equals_in_memory(daemon: Daemon) -> None:
    want = lg.run_all(InMemorySaver(), "g")
    check_record(want)
    thread = "g-sync-" + uuid.uuid4().hex
    with SavepointSaver(daemon.addr) as saver:
        got = lg.run_all(saver, thread)
    assert got == want


@pytest.fixture
def no_sync_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The async methods must run on grpc.aio, never on the sync channel
    (say, in a thread pool): using it fails the test."""

    def refuse(self: Connection) -> None:
        raise AssertionError("an async method used the sync channel")

    monkeypatch.setattr(Connection, "stub", refuse)


def test_graph_async_equals_in_memory(daemon: Daemon, no_sync_channel: None) -> None:
    want = asyncio.run(lg.arun_all(InMemorySaver(), "g"))
    check_record(want)
    thread = "g-async-" + uuid.uuid4().hex

    async def run() -> dict[str, Any]:
        async with SavepointSaver(daemon.addr) as saver:
            return await lg.arun_all(saver, thread)

    assert asyncio.run(run()) == want


# -- large checkpoints --------------------------------------------------------------


class Big(TypedDict, total=False):
    chunks: Annotated[list[str], operator.add]


CHUNK = 3 << 19  # 1.5 MiB a step: each write fits a request, the state soon does not
STEPS = 7  # 10.5 MiB: over the 4 MiB request limit and the 3 MiB response budget


def big_graph(saver: Any) -> Any:
    """A loop whose state grows by a chunk per step, as a conversation's
    messages do: its later checkpoints are over the request limit."""

    def grow(state: Big) -> Big:
        n = len(state.get("chunks", []))
        return {"chunks": [chr(ord("a") + n) * CHUNK]}

    g = StateGraph(Big)
    g.add_node("grow", grow)
    g.add_edge(START, "grow")
    g.add_conditional_edges("grow", lambda s: END if len(s["chunks"]) >= STEPS else "grow")
    return g.compile(checkpointer=saver)


def check_big(out: dict[str, Any], latest: Any, listed: list[Any]) -> None:
    want = [chr(ord("a") + i) * CHUNK for i in range(STEPS)]
    assert out["chunks"] == want
    assert latest is not None and latest.checkpoint["channel_values"]["chunks"] == want
    assert [len(t.checkpoint["channel_values"].get("chunks", [])) for t in listed] == list(range(STEPS, -1, -1)) + [0]


def test_large_checkpoint_sync(daemon: Daemon) -> None:
    config = {"configurable": {"thread_id": "big-sync-" + uuid.uuid4().hex}}
    with SavepointSaver(daemon.addr) as saver:
        out = big_graph(saver).invoke({"chunks": []}, config)
        check_big(out, saver.get_tuple(config), list(saver.list(config)))


def test_large_checkpoint_async(daemon: Daemon, no_sync_channel: None) -> None:
    config = {"configurable": {"thread_id": "big-async-" + uuid.uuid4().hex}}

    async def run() -> None:
        async with SavepointSaver(daemon.addr) as saver:
            out = await big_graph(saver).ainvoke({"chunks": []}, config)
            check_big(out, await saver.aget_tuple(config), [t async for t in saver.alist(config)])

    asyncio.run(run())


# -- the late-write rule ----------------------------------------------------------------


def _late_write_setup(saver: SavepointSaver, thread: str) -> Any:
    graph = lg.build(Counter(), saver)
    config = {"configurable": {"thread_id": thread}}
    with pytest.raises(lg.WorkerFailed):
        graph.invoke({"log": ["start"]}, config)
    graph.invoke(None, config)
    assert saver.get_tuple(config) is not None
    return config


def test_late_write_after_delete_thread_sync(daemon: Daemon) -> None:
    thread = "late-sync-" + uuid.uuid4().hex
    with SavepointSaver(daemon.addr) as saver:
        config = _late_write_setup(saver, thread)
        old = [t.config for t in saver.list(config)]
        saver.delete_thread(thread)
        # What LangGraph's background executor may still send for the
        # deleted run's checkpoints.
        for c in old:
            saver.put_writes(c, [("results", ["late"]), ("log", ["late"])], "late-task", "~late")
        assert saver.get_tuple(config) is None
        assert list(saver.list({"configurable": {"thread_id": thread}})) == []
        # A new run on the thread is stored as usual.
        rec = lg.run_all(saver, thread)
        check_record(rec)


def test_late_write_after_delete_thread_async(daemon: Daemon) -> None:
    thread = "late-async-" + uuid.uuid4().hex
    with SavepointSaver(daemon.addr) as saver:
        config = _late_write_setup(saver, thread)

    async def run() -> None:
        async with SavepointSaver(daemon.addr) as saver:
            old = [t.config async for t in saver.alist(config)]
            await saver.adelete_thread(thread)
            for c in old:
                await saver.aput_writes(c, [("results", ["late"])], "late-task", "~late")
            assert await saver.aget_tuple(config) is None
            assert [t async for t in saver.alist({"configurable": {"thread_id": thread}})] == []

    asyncio.run(run())


def test_errors_are_savepoint_exceptions(daemon: Daemon) -> None:
    with SavepointSaver(daemon.addr) as saver:
        with pytest.raises(InvalidGraphKeyError):
            saver.copy_thread("same", "same")
        with pytest.raises(InvalidGraphKeyError):
            saver.get_tuple({"configurable": {"thread_id": "t\x00"}})

        # Refused before asking the daemon.
        with pytest.raises(MissingFieldError):
            saver.get_tuple({"configurable": {}})
        with pytest.raises(InvalidArgumentError):
            saver.prune(["t"], strategy="keep_some")

    async def run() -> None:
        async with SavepointSaver(daemon.addr) as saver:
            with pytest.raises(InvalidGraphKeyError):
                await saver.aput({"configurable": {"thread_id": "x" * 600, "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})

    asyncio.run(run())


# -- a daemon restart under the saver ----------------------------------------------

PATIENT = RetryPolicy(max_attempts=100, initial_backoff=0.05, max_backoff=0.2)


def _restart_later(d: Daemon) -> threading.Thread:
    d.kill()
    t = threading.Thread(target=lambda: (time.sleep(0.5), d.restart()))
    t.start()
    return t


def test_calls_retried_across_a_restart(fresh_daemon: Daemon) -> None:
    config = {"configurable": {"thread_id": "restart-" + uuid.uuid4().hex}}
    with SavepointSaver(fresh_daemon.addr, retry=PATIENT) as saver:
        graph = lg.build(Counter(), saver)
        with pytest.raises(lg.WorkerFailed):
            graph.invoke({"log": ["start"]}, config)
        t = _restart_later(fresh_daemon)
        # The daemon is down when the run resumes: the saver's calls wait for it.
        graph.invoke(None, config)
        t.join()
        assert graph.get_state(config).next == ("sub",)

    async def run() -> None:
        async with SavepointSaver(fresh_daemon.addr, retry=PATIENT) as saver:
            t = _restart_later(fresh_daemon)
            out = await lg.build(Counter(), saver).ainvoke(Command(resume="yes"), config)
            t.join()
            assert out["answer"] == "yes:done-a,done-b,done-c!"

    asyncio.run(run())


def test_default_address(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAVEPOINT_ADDR", daemon.addr)
    thread = "default-addr-" + uuid.uuid4().hex
    with SavepointSaver() as saver:
        assert saver.address == daemon.addr
        graph = lg.build(Counter(), saver)
        with pytest.raises(lg.WorkerFailed):
            graph.invoke({"log": ["start"]}, {"configurable": {"thread_id": thread}})
    with SavepointSaver(daemon.addr) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": thread}}) is not None


def test_get_tuple_with_checkpoint_id_echoes_the_config(daemon: Daemon) -> None:
    """Named by checkpoint_id, get_tuple (and so graph.get_state) returns the
    caller's config, its checkpoint_ns and other keys as given, as
    InMemorySaver does; without one, the config names the latest checkpoint."""
    thread = f"echo-{uuid.uuid4()}"

    def views(saver: Any) -> list[Any]:
        cp = empty_checkpoint()
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": "sub"}}, cp, {}, {})
        asked = [
            {"configurable": {"thread_id": thread, "checkpoint_ns": "sub", "checkpoint_id": cp["id"], "extra": 1}},
            {"configurable": {"thread_id": thread, "checkpoint_ns": "sub"}},
        ]
        got = [saver.get_tuple(a).config for a in asked]
        got += [asyncio.run(saver.aget_tuple(a)).config for a in asked]
        return [asked[0], {"configurable": {"thread_id": thread, "checkpoint_ns": "sub", "checkpoint_id": cp["id"]}}] * 2 + [got]

    with SavepointSaver(daemon.addr) as saver:
        *want, got = views(saver)
    assert got == want
    *want, got = views(InMemorySaver())
    assert got == want

    # What a user sees: graph.get_state at a checkpoint_id without a namespace.
    class S(TypedDict):
        n: int

    for saver in (SavepointSaver(daemon.addr), InMemorySaver()):
        g = StateGraph(S).add_node("inc", lambda s: {"n": s["n"] + 1}).add_edge(START, "inc").add_edge("inc", END).compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": f"{thread}-{type(saver).__name__}"}}
        g.invoke({"n": 1}, config)
        first = list(g.get_state_history(config))[-1].config["configurable"]["checkpoint_id"]
        at = {"configurable": {"thread_id": config["configurable"]["thread_id"], "checkpoint_id": first}}
        assert g.get_state(at).config == at, type(saver).__name__
