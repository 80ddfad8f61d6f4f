"""Client.watch_sessions and AsyncClient.watch_sessions against a real
savepointd: the first event is a heartbeat, a save arrives as CHANGED with
its summary, a session the filters stop selecting as REMOVED, a stopped
daemon ends the watch with UnavailableError, refused filters raise
InvalidArgumentError, and close() ends the iteration."""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from conftest import Daemon

import savepoint
from savepoint import SessionStatus, WatchEvent, WatchEventType
from savepoint.aio import AsyncClient


def next_change(it: savepoint.SessionWatch) -> WatchEvent:
    """The next event that is not a heartbeat."""
    for ev in it:
        if ev.type != WatchEventType.HEARTBEAT:
            return ev
    raise AssertionError("the watch ended")


def test_watch_changed_and_removed(daemon: Daemon, sid: str) -> None:
    with savepoint.Client(daemon.addr, wait_ready=5) as c, c.watch_sessions({"team": sid}, heartbeat_interval=0.2) as w:
        first = next(w)
        assert first.type == WatchEventType.HEARTBEAT and first.session is None
        assert first.send_time is not None and abs(datetime.now(timezone.utc) - first.send_time) < timedelta(seconds=5)

        s = c.start(sid, "watched", labels={"team": sid})
        ev = next_change(w)
        assert (ev.type, ev.session_id) == (WatchEventType.CHANGED, sid)
        assert ev.session is not None
        assert (ev.session.session_id, ev.session.revision, ev.session.task, SessionStatus(ev.session.status)) == (sid, 1, "watched", SessionStatus.ACTIVE)
        assert ev.session.labels == {"team": sid} and ev.session.HasField("create_time")

        s.save(turn=3)
        ev = next_change(w)
        assert (ev.type, ev.session_id) == (WatchEventType.CHANGED, sid)
        assert ev.session is not None and (ev.session.revision, ev.session.turn) == (2, 3)

        # A save that moves it out of the label filter: removed.
        s.save(labels={"team": "other"})
        ev = next_change(w)
        assert (ev.type, ev.session_id, ev.session) == (WatchEventType.REMOVED, sid, None)

        # Nothing changes: heartbeats at the interval asked for.
        t0 = time.monotonic()
        assert next(w).type == WatchEventType.HEARTBEAT
        assert next(w).type == WatchEventType.HEARTBEAT
        assert time.monotonic() - t0 < 3


def test_watch_bad_filters(daemon: Daemon) -> None:
    with savepoint.Client(daemon.addr, wait_ready=5) as c:
        for kwargs, cls in [
            ({"min_idle": -1.0}, savepoint.InvalidArgumentError),
            ({"heartbeat_interval": timedelta(milliseconds=10)}, savepoint.InvalidArgumentError),
            ({"heartbeat_interval": 7200}, savepoint.InvalidArgumentError),
            ({"status_filter": 7}, savepoint.InvalidSessionStatusError),
            ({"label_filter": {"": "x"}}, savepoint.InvalidLabelError),
        ]:
            with c.watch_sessions(**kwargs) as w:  # type: ignore[arg-type]
                with pytest.raises(cls) as e:
                    next(w)
            assert isinstance(e.value, savepoint.InvalidArgumentError), kwargs
            assert e.value.code is not None and e.value.code.name == "INVALID_ARGUMENT", kwargs


def test_watch_ends_unavailable_when_the_daemon_stops(fresh_daemon: Daemon) -> None:
    with savepoint.Client(fresh_daemon.addr, wait_ready=5) as c:
        w = c.watch_sessions(heartbeat_interval=60)
        assert next(w).type == WatchEventType.HEARTBEAT
        assert fresh_daemon.proc is not None
        t0 = time.monotonic()
        fresh_daemon.proc.send_signal(signal.SIGTERM)
        with pytest.raises(savepoint.UnavailableError):
            next(w)
        assert time.monotonic() - t0 < 10
        fresh_daemon.proc.wait(30)


def test_watch_close_ends_the_iteration(daemon: Daemon) -> None:
    with savepoint.Client(daemon.addr, wait_ready=5) as c:
        w = c.watch_sessions(heartbeat_interval=60)
        got: list[WatchEvent] = []
        done = threading.Event()

        def consume() -> None:
            got.extend(w)  # ends quietly on close()
            done.set()

        t = threading.Thread(target=consume)
        t.start()
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        w.close()
        assert done.wait(5), "the iteration did not end on close()"
        t.join()
        assert [e.type for e in got] == [WatchEventType.HEARTBEAT]
        assert list(w) == []

        # A loop that stops and drops the watch ends its call too.
        w = c.watch_sessions(heartbeat_interval=60)
        call = w._call
        for _ in w:
            break
        del w
        gc.collect()
        assert call.cancelled()


def test_async_watch(daemon: Daemon, sid: str) -> None:
    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            async with c.watch_sessions(
                {"team": sid}, status_filter=SessionStatus.ACTIVE, heartbeat_interval=timedelta(milliseconds=200)
            ) as w:
                it = aiter(w)
                first = await anext(it)
                assert first.type == WatchEventType.HEARTBEAT

                async def next_change() -> WatchEvent:
                    async for ev in w:
                        if ev.type != WatchEventType.HEARTBEAT:
                            return ev
                    raise AssertionError("the watch ended")

                s = await c.start(sid, "watched", labels={"team": sid})
                ev = await asyncio.wait_for(next_change(), 5)
                assert (ev.type, ev.session_id) == (WatchEventType.CHANGED, sid)
                assert ev.session is not None and (ev.session.revision, ev.session.task) == (1, "watched")

                # Completed: the status filter no longer selects it.
                await s.complete(SessionStatus.COMPLETED, "done")
                ev = await asyncio.wait_for(next_change(), 5)
                assert (ev.type, ev.session_id, ev.session) == (WatchEventType.REMOVED, sid, None)

                # close() from another task ends a waiting iteration quietly.
                async def drain() -> list[WatchEvent]:
                    return [ev async for ev in w]

                task = asyncio.create_task(drain())
                await asyncio.sleep(0.1)
                await w.close()
                rest = await asyncio.wait_for(task, 5)
                assert all(e.type == WatchEventType.HEARTBEAT for e in rest), rest

            with pytest.raises(savepoint.InvalidArgumentError):
                async for _ in c.watch_sessions(min_idle=-1):
                    pass

    asyncio.run(main())


def test_async_watch_ends_unavailable_when_the_daemon_dies(fresh_daemon: Daemon) -> None:
    async def main() -> None:
        async with AsyncClient(fresh_daemon.addr, wait_ready=5) as c:
            async with c.watch_sessions(heartbeat_interval=60) as w:
                assert (await anext(w)).type == WatchEventType.HEARTBEAT
                fresh_daemon.kill()
                with pytest.raises(savepoint.UnavailableError):
                    await asyncio.wait_for(anext(w), 10)

    asyncio.run(main())
