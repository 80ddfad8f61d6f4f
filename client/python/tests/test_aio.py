"""The asyncio API on grpc.aio against a real savepointd."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import Daemon

import savepoint
from savepoint import Decision, EffectClass, Message, SessionStatus, ToolEvent, ToolStage, ToolUse
from savepoint.aio import AsyncClient
from savepoint.v1 import savepoint_pb2 as pb

PROMPT = Message("user", '"do it"')
READ = ToolUse("toolu_r", "read", "{}", EffectClass.READ_ONLY)
SIDE = ToolUse("toolu_s", "send", "{}", EffectClass.SIDE_EFFECT)
IDEM = ToolUse("toolu_i", "charge", "{}", EffectClass.IDEMPOTENT)


def test_async_loop_and_resume(daemon: Daemon) -> None:
    async def main() -> None:
        events: list[ToolEvent] = []
        async with AsyncClient(daemon.addr, wait_ready=5, tool_hook=events.append) as c:
            s = await c.start("aio.loop", "t", messages=[PROMPT], replace=True)
            await s.point_a(Message("assistant", '"go"'), [READ, SIDE])
            ran: list[tuple[str, str]] = []

            async def run(call: ToolUse, key: str) -> str:
                await asyncio.sleep(0)
                ran.append((call.tool_use_id, key))
                return call.name + " ok"

            # Two tools of one turn at once.
            results = await asyncio.gather(
                s.run_tool(READ, lambda key: run(READ, key)), s.run_tool(SIDE, lambda key: run(SIDE, key))
            )
            assert [r.content for r in results] == ["read ok", "send ok"]
            assert ran[0][1] == "" if ran[0][0] == READ.tool_use_id else ran[1][1] == ""
            assert {e.stage for e in events} == {ToolStage.RAN, ToolStage.RECORDED, ToolStage.BEGUN}
            await s.point_b(results)
            await s.point_a(Message("assistant", '"next"'), [IDEM])
            # Killed after BeginEffect of the idempotent tool.
            key = (await c.raw.BeginEffect(pb.BeginEffectRequest(session_id="aio.loop", tool_use_id=IDEM.tool_use_id, epoch=s.epoch))).idempotency_key

            r = await c.resume("aio.loop")
            assert r.messages == s.messages and r.turn == 2 and r.epoch == s.epoch + 1
            with pytest.raises(savepoint.SessionFencedError):
                await s.save(task="stale")

            def sync_run(call: ToolUse, k: str) -> str:  # a plain function works too
                ran.append((call.tool_use_id, k))
                return "charged"

            (res,) = await r.reconcile(sync_run)
            assert (res.decision, res.content, ran[-1]) == (Decision.RUN, "charged", (IDEM.tool_use_id, key))
            await r.point_b([res])
            await r.point_a(Message("assistant", '"done"'))
            assert json.loads(r.messages[-2].content_json)[0]["content"] == "charged"
            await r.complete(SessionStatus.COMPLETED, "done")
            assert (r.status, r.final_output) == (SessionStatus.COMPLETED, "done")
            assert (await c.resume("aio.loop")).status == SessionStatus.COMPLETED
            o = await c.resume("aio.loop", reopen=True)
            assert (o.status, o.final_output) == (SessionStatus.ACTIVE, "")
            await o.point_a(Message("assistant", '"again"'))
            r = o
            await r.delete()
            with pytest.raises(savepoint.SessionNotFoundError):
                await c.resume("aio.loop")

    asyncio.run(main())


def test_async_reconcile_rules(daemon: Daemon) -> None:
    async def main() -> None:
        async with AsyncClient(daemon.addr) as c:
            s = await c.start("aio.rules", "t", messages=[PROMPT], replace=True)
            await s.point_a(Message("assistant", '"go"'), [READ, IDEM, SIDE])
            await s.run_tool(IDEM, lambda key: "recorded")
            await c.raw.BeginEffect(pb.BeginEffectRequest(session_id="aio.rules", tool_use_id=SIDE.tool_use_id, epoch=s.epoch))
            r = await c.resume("aio.rules")
            runs: list[str] = []

            async def run(call: ToolUse, key: str) -> str:
                runs.append(call.tool_use_id)
                return "again"

            results = await r.reconcile(run)
            assert [(x.tool_use_id, x.decision, x.is_error) for x in results] == [
                (READ.tool_use_id, Decision.RUN, False), (IDEM.tool_use_id, Decision.REUSE, False), (SIDE.tool_use_id, Decision.IN_DOUBT, True),
            ]
            assert runs == [READ.tool_use_id]
            await r.point_b(results)
            assert r.pending == []
            await r.point_a(Message("assistant", '"x"'), [ToolUse("toolu_new", "read", "{}", EffectClass.READ_ONLY)])
            with pytest.raises(savepoint.ToolUsesPendingError):
                await r.point_a(Message("assistant", '"y"'), [])
            with pytest.raises(savepoint.InvalidSessionIdError):
                await c.start("bad id", "t")

    asyncio.run(main())


def test_async_unreachable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        c = AsyncClient(f"unix:{tmp_path}/none.sock", retry=savepoint.RetryPolicy(max_attempts=2, initial_backoff=0.001))
        with pytest.raises(savepoint.UnavailableError):
            await c.resume("x")
        with pytest.raises(savepoint.UnavailableError):
            await c.wait_ready(0.2)
        await c.close()

    asyncio.run(main())
