"""A daemon outage of several seconds: the first call afterwards on an
existing client (sync and asyncio) and saver (sync and async methods)
succeeds, because a retry-safe call waits for its channel to reconnect
within its own bound (RetryPolicy.reconnect_wait) instead of failing while
gRPC's reconnect backoff (up to 2 s) runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from conftest import Daemon

import savepoint
from savepoint.aio import AsyncClient
from savepoint.langgraph import SavepointSaver
from savepoint.v1 import savepoint_pb2 as pb

OUTAGE = 6.0  # longer than reconnect_wait, so the calls made during it fail first
ROUNDS = 3
REQ = pb.GetSessionRequest(session_id="reconnect")
CONFIG: Any = {"configurable": {"thread_id": "reconnect"}}


async def _failing(call: Callable[[], Awaitable[object]]) -> None:
    """A call made while the daemon is down: it fails, and leaves its channel
    in gRPC's reconnect backoff."""
    try:
        await call()
    except savepoint.UnavailableError:
        return
    raise AssertionError("a call succeeded while the daemon was down")


def test_first_call_after_an_outage_succeeds(fresh_daemon: Daemon) -> None:
    async def main() -> None:
        with savepoint.Client(fresh_daemon.addr) as c, SavepointSaver(fresh_daemon.addr) as saver:
            async with AsyncClient(fresh_daemon.addr) as ac:
                c.start("reconnect", "t", messages=[savepoint.Message("user", '"hi"')])
                calls: dict[str, Callable[[], Awaitable[object]]] = {
                    "client": lambda: asyncio.to_thread(c.raw.GetSession, REQ),
                    "aio": lambda: ac.raw.GetSession(REQ),
                    "saver": lambda: asyncio.to_thread(saver.get_tuple, CONFIG),
                    "async saver": lambda: saver.aget_tuple(CONFIG),
                }
                for call in calls.values():
                    await call()
                for i in range(ROUNDS):
                    fresh_daemon.kill()
                    down = time.monotonic()
                    await asyncio.gather(*(_failing(call) for call in calls.values()))
                    await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - down)))
                    fresh_daemon.restart()
                    for name, call in calls.items():
                        t = time.monotonic()
                        got = await call()
                        assert got is None or got.checkpoint.revision == 1, (i, name)  # type: ignore[attr-defined]
                        assert time.monotonic() - t < 6.0, (i, name)
                await saver.aclose()

    asyncio.run(main())


def test_retry_waits_for_reconnect(fresh_daemon: Daemon) -> None:
    """With a retry budget of a few milliseconds, a call made while the
    daemon is down still succeeds once it is back a second later, because
    the retry waits for the connection (reconnect_wait); without that wait
    it fails."""
    policy = savepoint.RetryPolicy(max_attempts=2, initial_backoff=0.01, max_backoff=0.01, reconnect_wait=10)

    async def main() -> None:
        with savepoint.Client(fresh_daemon.addr, retry=policy) as c, SavepointSaver(fresh_daemon.addr, retry=policy) as saver:
            async with AsyncClient(fresh_daemon.addr, retry=policy) as ac:
                c.start("reconnect", "t")
                calls = [
                    asyncio.to_thread(c.raw.GetSession, REQ), ac.raw.GetSession(REQ),
                    asyncio.to_thread(saver.get_tuple, CONFIG), saver.aget_tuple(CONFIG),
                ]
                fresh_daemon.kill()
                waiting = asyncio.gather(*calls)
                await asyncio.sleep(1.0)
                await asyncio.to_thread(fresh_daemon.restart)
                got = await waiting
                assert [g is None or g.checkpoint.revision for g in got] == [1, 1, True, True]  # type: ignore[attr-defined]
                await saver.aclose()

    asyncio.run(main())
