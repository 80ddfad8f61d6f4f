"""The duplicate-intent guard never trips an uncrashed OpenAI Agents run:
a durable tool called twice with the same arguments, one turn after the
other, runs twice (savepoint.openai_agents with the SDK's real Runner and
ScriptedModel against a real savepointd)."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from savepoint import Client
from savepoint.openai_agents import SavepointSession, durable_function_tool
from savepoint.v1 import savepoint_pb2 as pb

set_tracing_disabled(True)


def test_same_call_twice_in_one_run_runs_twice(daemon: Any, sid: str) -> None:
    paid: list[str] = []

    @durable_function_tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {amount} to {to}"

    async def go() -> None:
        model = ScriptedModel([
            [function_call("pay", {"to": "bob", "amount": 5}, call_id="c1")],
            [function_call("pay", {"amount": 5, "to": "bob"}, call_id="c2")],
            [assistant_message("paid twice")],
        ])
        r = await Runner.run(Agent(name="a", model=model, tools=[pay]), "pay bob twice", session=SavepointSession(sid, daemon.addr))
        assert r.final_output == "paid twice"

    asyncio.run(go())
    assert paid == ["bob", "bob"]
    with Client(daemon.addr) as c:
        entries = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert sorted(e.tool_use_id for e in entries) == ["c1", "c2"]
    assert all(e.begun and not e.duplicate_of and e.effect.output == "paid 5 to bob" for e in entries)
