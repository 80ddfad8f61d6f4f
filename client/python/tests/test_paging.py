"""Paging hidden: a history and a reconcile larger than one response, against
a savepointd with a small response budget."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import Daemon

import savepoint
import savepoint.aio
from savepoint import Decision, EffectClass, Message, ToolUse
from savepoint.v1 import savepoint_pb2 as pb

# The smallest budget the daemon accepts with 4 KiB of state: max state +
# 2 x 64 KiB.
FLAGS = ("--max-state-bytes", "4096", "--max-message-bytes", "1048576", "--response-budget-bytes", "140000")
MESSAGES = 60  # of 8 KiB each: about 4 pages
CALLS = 24  # recorded outputs of 15 KiB each: about 3 pages


@pytest.fixture(scope="module")
def small(start_daemon) -> Daemon:  # type: ignore[no-untyped-def]
    return start_daemon(*FLAGS)  # type: ignore[no-any-return]


def big(i: int, size: int) -> str:
    return json.dumps(f"message {i} " + "x" * size)


def test_history_pages(small: Daemon) -> None:
    with savepoint.Client(small.addr) as c:
        s = c.start("paging.history", "t", messages=[Message("user", big(0, 8000))], replace=True)
        for i in range(1, MESSAGES, 10):
            s.save(append=[Message("assistant" if j % 2 else "user", big(j, 8000)) for j in range(i, min(i + 10, MESSAGES))])
        assert s.message_count == MESSAGES
        first = c.raw.GetSession(pb.GetSessionRequest(session_id="paging.history"))
        assert first.next_page_token and len(first.checkpoint.messages) < MESSAGES / 3, "the history fits one response: no paging tested"
        r = c.resume("paging.history")
        assert r.messages == s.messages and len(r.messages) == MESSAGES
        cp, msgs = c.get_session("paging.history")
        assert msgs == s.messages and cp.revision == s.revision
        cp, msgs = c.get_session("paging.history", revision=3)
        assert cp.revision == 3 and len(msgs) == cp.message_count == 21

    async def resume() -> list[Message]:
        async with savepoint.aio.AsyncClient(small.addr) as ac:
            assert (await ac.get_session("paging.history"))[1] == s.messages
            return (await ac.resume("paging.history")).messages

    assert asyncio.run(resume()) == s.messages


def test_reconcile_pages(small: Daemon) -> None:
    calls = [ToolUse(f"toolu_{i:02d}", "fetch", "{}", EffectClass.SIDE_EFFECT) for i in range(CALLS)]
    with savepoint.Client(small.addr) as c:
        s = c.start("paging.reconcile", "t", messages=[Message("user", '"go"')], replace=True)
        s.point_a(Message("assistant", '"fetching"'), calls)
        for call in calls:
            s.run_tool(call, lambda key, call=call: f"{call.tool_use_id}:" + "y" * 15000)  # type: ignore[misc]
        first = c.raw.Reconcile(pb.ReconcileRequest(session_id="paging.reconcile"))
        assert first.next_page_token and len(first.resolutions) < CALLS / 2, "one page holds every resolution: no paging tested"
        r = c.resume("paging.reconcile")
        results = r.reconcile(None)
        assert [x.tool_use_id for x in results] == [call.tool_use_id for call in calls]
        assert all(x.decision == Decision.REUSE and x.content.startswith(x.tool_use_id + ":") for x in results)
        r.point_b(results)
        assert r.pending == []

    async def areconcile() -> list[str]:
        async with savepoint.aio.AsyncClient(small.addr) as ac:
            s2 = await ac.start("paging.reconcile.aio", "t", messages=[Message("user", '"go"')], replace=True)
            await s2.point_a(Message("assistant", '"fetching"'), calls)
            for call in calls:
                await s2.run_tool(call, lambda key, call=call: f"{call.tool_use_id}:" + "z" * 15000)  # type: ignore[misc]
            res = await (await ac.resume("paging.reconcile.aio")).reconcile(None)
            return [x.tool_use_id for x in res if x.decision == Decision.REUSE]

    assert asyncio.run(areconcile()) == [call.tool_use_id for call in calls]


def test_list_sessions_pages(small: Daemon) -> None:
    with savepoint.Client(small.addr) as c:
        ids = [f"paging.list.{i:02d}" for i in range(11)]
        for i, sid in enumerate(ids):
            c.start(sid, "t", labels={"suite": "paging", "odd": str(i % 2)}, replace=True)
        first = c.raw.ListSessions(pb.ListSessionsRequest(page_size=3, label_filter={"suite": "paging"}))
        assert len(first.sessions) == 3 and first.next_page_token
        assert [x.session_id for x in c.list_sessions({"suite": "paging"}, page_size=3)] == ids
        assert [x.session_id for x in c.list_sessions({"suite": "paging", "odd": "1"}, page_size=2)] == ids[1::2]

    async def alist() -> list[str]:
        async with savepoint.aio.AsyncClient(small.addr) as ac:
            return [x.session_id async for x in ac.list_sessions({"suite": "paging"}, page_size=4)]

    assert asyncio.run(alist()) == ids
