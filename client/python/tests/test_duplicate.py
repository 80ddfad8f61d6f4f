"""The duplicate-intent guard through the Python session, sync and async:
a payment registered, run and recorded by one process, which dies before
the model's message is saved; the process that takes over is asked for the
same payment under a new id (register_tool_use, and point_a then run_tool)
and answers with the daemon's text without running the tool. An uncrashed
run calling the tool twice runs it twice; a repeatable call is not
guarded."""

from __future__ import annotations

import asyncio
import json

from conftest import Daemon

import savepoint
from savepoint import Message, ToolUse
from savepoint.aio import AsyncClient

ASSISTANT = Message("assistant", json.dumps([{"type": "text", "text": "paying"}]))


def pay(id: str, input: str = '{"to": "bob", "amount": 5}', repeatable: bool = False) -> ToolUse:
    return ToolUse(id, "send_payment", input, repeatable=repeatable)


def test_duplicate_sync(daemon: Daemon, sid: str) -> None:
    payments: list[str] = []

    def run(key: str) -> str:
        payments.append(key)
        return "paid 5 to bob"

    with savepoint.Client(daemon.addr) as c:
        s = c.start(sid, "pay bob")
        reg = s.register_tool_use(pay("toolu_1"))
        assert reg.duplicate is None and reg.idempotency_key
        s.record_tool_use("toolu_1", run(reg.idempotency_key))

        r = c.resume(sid)
        reg = r.register_tool_use(pay("toolu_2", '{"amount":5,"to":"bob"}'))
        assert reg.duplicate is not None and reg.idempotency_key == ""
        assert reg.duplicate.tool_use_id == "toolu_1" and not reg.duplicate.is_error
        assert reg.duplicate.tool_result_text.endswith("It was already taken, and returned: paid 5 to bob")
        rep = r.register_tool_use(pay("toolu_4", repeatable=True))
        assert rep.duplicate is None and rep.idempotency_key
        r.record_tool_use("toolu_4", "paid 5 to bob")

        r.point_a(ASSISTANT, [pay("toolu_3")])
        res = r.run_tool(pay("toolu_3"), run)
        assert res.duplicate_of == "toolu_1" and not res.is_error
        assert isinstance(res.content, str) and "tool_use_id toolu_1 " in res.content
        r.point_b([res])
        assert len(payments) == 1

        s2 = c.start(sid + "-twice", "pay bob twice")
        twice = [pay("a"), pay("b")]
        s2.point_a(ASSISTANT, twice)
        results = [s2.run_tool(t, run) for t in twice]
        assert [x.duplicate_of for x in results] == ["", ""]
        assert len(payments) == 3


def test_duplicate_async(daemon: Daemon, sid: str) -> None:
    async def go() -> None:
        ran: list[str] = []

        async def run(key: str) -> str:
            ran.append(key)
            return "paid 5 to bob"

        async with AsyncClient(daemon.addr) as c:
            s = await c.start(sid, "pay bob")
            reg = await s.register_tool_use(pay("toolu_1"))
            await s.record_tool_use("toolu_1", await run(reg.idempotency_key))
            r = await c.resume(sid)
            await r.point_a(ASSISTANT, [pay("toolu_2")])
            res = await r.run_tool(pay("toolu_2"), run)
            assert res.duplicate_of == "toolu_1" and not res.is_error
            assert isinstance(res.content, str) and res.content.endswith("returned: paid 5 to bob")
            assert len(ran) == 1

    asyncio.run(go())
