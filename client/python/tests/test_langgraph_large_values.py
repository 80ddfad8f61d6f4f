"""SavepointSaver stores any value the reference savers store: a single
channel value, input, Command(resume=...) or interrupt() value over the
daemon's 4 MiB request limit goes through UploadWrites, under durability
"async" and "sync", sync and async; a 64 MiB value is stored without the
daemon holding it in memory; an upload is retried across a daemon restart;
more than the 1 GiB upload cap is refused (docs/frameworks/langgraph.md)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from typing import Any, TypedDict

import pytest
from conftest import Daemon
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from savepoint import RetryPolicy
from savepoint.errors import InvalidArgumentError, InvalidUploadError
from savepoint.langgraph import SavepointSaver, _wire
from savepoint.langgraph._conn import Connection

SIZE = 5_000_000  # 5 MB a value: over the 4 MiB request limit


class S(TypedDict, total=False):
    inp: str
    out: str
    answer: str


def values(size: int) -> dict[str, str]:
    """Four distinct random values of ``size`` characters, so that bytes cut
    or reordered between chunks or values are noticed."""
    return {k: os.urandom(size // 2).hex() for k in ("inp", "out", "question", "resume")}


def build(saver: Any, v: dict[str, str]) -> Any:
    """START -> produce (returns a large channel value) -> ask (interrupts
    with a large value, resumed with a large answer) -> END."""

    def produce(s: S) -> S:
        return {"out": v["out"]}

    def ask(s: S) -> S:
        return {"answer": interrupt(v["question"])}

    g = StateGraph(S)
    g.add_node("produce", produce)
    g.add_node("ask", ask)
    g.add_edge(START, "produce")
    g.add_edge("produce", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def observe(first: dict[str, Any], at: Any, last: dict[str, Any], end: Any) -> dict[str, Any]:
    """What a user sees of one run, sizes and equality kept small to print."""
    return {
        "first_interrupts": [i.value for i in first.get("__interrupt__", [])],
        "at_next": at.next,
        "at_interrupts": [i.value for i in at.interrupts],
        "at_values": at.values,
        "last": last,
        "end_next": end.next,
        "end_values": end.values,
    }


def run_sync(saver: Any, v: dict[str, str], durability: str) -> dict[str, Any]:
    graph = build(saver, v)
    config = {"configurable": {"thread_id": f"large-{durability}-{uuid.uuid4().hex}"}}
    first = graph.invoke({"inp": v["inp"]}, config, durability=durability)
    at = graph.get_state(config)
    last = graph.invoke(Command(resume=v["resume"]), config, durability=durability)
    return observe(first, at, last, graph.get_state(config))


async def run_async(saver: Any, v: dict[str, str], durability: str) -> dict[str, Any]:
    graph = build(saver, v)
    config = {"configurable": {"thread_id": f"alarge-{durability}-{uuid.uuid4().hex}"}}
    first = await graph.ainvoke({"inp": v["inp"]}, config, durability=durability)
    at = await graph.aget_state(config)
    last = await graph.ainvoke(Command(resume=v["resume"]), config, durability=durability)
    return observe(first, at, last, await graph.aget_state(config))


def check(got: dict[str, Any], v: dict[str, str]) -> None:
    want_state = {"inp": v["inp"], "out": v["out"]}
    assert got["first_interrupts"] == [v["question"]]
    assert got["at_next"] == ("ask",)
    assert got["at_interrupts"] == [v["question"]]
    assert got["at_values"] == want_state
    assert got["last"] == {**want_state, "answer": v["resume"]}
    assert got["end_next"] == ()
    assert got["end_values"] == {**want_state, "answer": v["resume"]}


@pytest.fixture(scope="module")
def five_mb() -> dict[str, str]:
    return values(SIZE)


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_large_values_sync(daemon: Daemon, five_mb: dict[str, str], durability: str) -> None:
    check(run_sync(InMemorySaver(), five_mb, durability), five_mb)
    with SavepointSaver(daemon.addr) as saver:
        check(run_sync(saver, five_mb, durability), five_mb)


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_large_values_async(daemon: Daemon, five_mb: dict[str, str], durability: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Connection) -> None:
        raise AssertionError("an async method used the sync channel")

    monkeypatch.setattr(Connection, "stub", refuse)

    async def run() -> dict[str, Any]:
        async with SavepointSaver(daemon.addr) as saver:
            return await run_async(saver, five_mb, durability)

    check(asyncio.run(run_async(InMemorySaver(), five_mb, durability)), five_mb)
    check(asyncio.run(run()), five_mb)


# -- 64 MiB, with the daemon's memory checked -------------------------------------

HUGE = 64 << 20
SOFT_LIMIT = 64 << 20  # the --memory-limit the test gives its daemon
MARGIN = 16 << 20  # the Go runtime and Badger's tables beside the heap
# Badger maps its value log: each byte written is a file-backed page in the
# daemon's resident set (page cache the kernel can drop, not the heap the
# soft limit bounds). The run writes the value twice: as the node's pending
# write (UploadWrites) and as the checkpoint's blob (UploadCheckpoint).
MAPPED = 2 * HUGE


def proc_status(pid: int) -> dict[str, int]:
    """VmHWM (the peak resident set), RssAnon and RssFile of
    /proc/PID/status, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "RssAnon", "RssFile"):
                kb, unit = rest.split()
                assert unit == "kB", line
                out[key] = int(kb) << 10
    assert len(out) == 3, f"/proc/{pid}/status lacks VmHWM, RssAnon or RssFile: {out}"
    return out


class Sampler:
    """The peak RssAnon (the heap and stacks, without mapped files) of a
    process, sampled every 5 ms on a thread until stop()."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_anon = max(self.peak_anon, proc_status(self.pid)["RssAnon"])
            self._stop.wait(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_anon = max(self.peak_anon, proc_status(self.pid)["RssAnon"])


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def test_64_mib_value_within_the_daemons_memory(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """A node returning a 64 MiB value: its write (UploadWrites) and the
    checkpoint that holds it (UploadCheckpoint) are staged in chunks, never
    held whole, so the daemon's anonymous memory stays under its soft limit
    plus MARGIN and its VmHWM under that plus the mapped pages of the value
    log and of its binary; the value reads back whole, its interrupt too.
    The daemon runs with a 64 MiB soft limit, under the default, so that a
    value held whole (64 MiB) could not stay under the bound."""
    d = start_daemon("--memory-limit", "64MiB")
    try:
        assert d.proc is not None
        pid = d.proc.pid
        idle = proc_status(pid)
        v = {"inp": "i", "out": os.urandom(HUGE // 2).hex(), "question": "q", "resume": "r"}
        sampler = Sampler(pid)
        try:
            with SavepointSaver(d.addr) as saver:
                got = run_sync(saver, v, "sync")
        finally:
            sampler.stop()
        check(got, v)
        end = proc_status(pid)
    finally:
        d.close()
    print(
        f"savepointd: VmHWM idle {mib(idle['VmHWM'])}, after the 64 MiB run {mib(end['VmHWM'])}; "
        f"RssAnon peak sampled {mib(sampler.peak_anon)}; RssFile at the end {mib(end['RssFile'])}"
    )
    assert sampler.peak_anon < SOFT_LIMIT + MARGIN, f"savepointd's anonymous memory peaked at {mib(sampler.peak_anon)}"
    # The binary's own mapped pages (idle RssFile) are resident from the start.
    bound = SOFT_LIMIT + MARGIN + MAPPED + idle["RssFile"]
    assert end["VmHWM"] < bound, f"savepointd's VmHWM is {mib(end['VmHWM'])}, over {mib(bound)}"


def test_upload_over_1_gib_refused(daemon: Daemon) -> None:
    """The upload cap of docs/frameworks/langgraph.md: writes declaring more
    than 1 GiB in all are refused from the start, before any byte is sent,
    with InvalidUploadError, and nothing is stored."""
    config = {"configurable": {"thread_id": "cap-" + uuid.uuid4().hex, "checkpoint_ns": "", "checkpoint_id": "c1"}}
    (req,) = _wire.writes_requests(JsonPlusSerializer(), config, [("a", 1), ("b", 2)], "task", "")
    start = next(_wire.upload_writes_messages(req, 4 << 20))
    start.start.writes[0].value.total_size = 1 << 29
    start.start.writes[1].value.total_size = (1 << 29) + 1
    with SavepointSaver(daemon.addr) as saver:
        stub = saver._conn.stub()
        with pytest.raises(InvalidUploadError) as e:
            saver._conn.call("UploadWrites", req, lambda t: stub.UploadWrites(iter([start]), timeout=t))
        assert isinstance(e.value, InvalidArgumentError) and "at most 1073741824" in str(e.value)
        assert saver.get_tuple(config) is None
        cp = empty_checkpoint()
        cp["id"] = "c1"
        saver.put({"configurable": {"thread_id": config["configurable"]["thread_id"]}}, cp, {}, {})
        stored = saver.get_tuple(config)
        assert stored is not None and stored.pending_writes == []


def test_upload_retried_across_a_restart(fresh_daemon: Daemon) -> None:
    """A put_writes over the request limit sent while the daemon is down is
    retried with its request id, the whole stream sent again, sync and
    async, and reads back once."""
    patient = RetryPolicy(max_attempts=100, initial_backoff=0.05, max_backoff=0.2)
    thread = "retry-up-" + uuid.uuid4().hex
    big = [os.urandom(SIZE // 2).hex() for _ in range(2)]

    def restart_later() -> threading.Thread:
        fresh_daemon.kill()
        t = threading.Thread(target=lambda: (time.sleep(0.5), fresh_daemon.restart()))
        t.start()
        return t

    with SavepointSaver(fresh_daemon.addr, retry=patient) as saver:
        cp = empty_checkpoint()
        config = saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {}, {})
        t = restart_later()
        saver.put_writes(config, [("a", big[0])], "task-sync", "")
        t.join()

        async def run() -> None:
            async with SavepointSaver(fresh_daemon.addr, retry=patient) as asaver:
                await asaver.aget_tuple(config)  # connect before the outage
                t = restart_later()
                await asaver.aput_writes(config, [("b", big[1])], "task-async", "")
                t.join()

        asyncio.run(run())
        stored = saver.get_tuple(config)
    assert stored is not None
    assert sorted(stored.pending_writes) == [("task-async", "b", big[1]), ("task-sync", "a", big[0])]
