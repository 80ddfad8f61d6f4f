"""The duplicate branch of the OpenAI Agents durable tools
(savepoint.openai_agents with the SDK's real Runner and ScriptedModel
against a real savepointd): an earlier run of the session (an older epoch)
made a payment, and its process died before the model's message was saved;
the session is taken over, and the new run's model asks for the same
payment under a new call id. The tool does not run: the model gets the
daemon's text naming the earlier call, with its output, and the call is no
longer pending. A repeatable tool runs the same call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from savepoint import Client, ToolUse
from savepoint.openai_agents import SavepointSession, durable_function_tool
from savepoint.v1 import savepoint_pb2 as pb

set_tracing_disabled(True)


def outputs(items: list[Any]) -> dict[str, str]:
    """The function_call_output items the run added, by call id."""
    out: dict[str, str] = {}
    for it in items:
        raw = getattr(it, "raw_item", None)
        if isinstance(raw, dict) and raw.get("type") == "function_call_output":
            out[str(raw["call_id"])] = str(raw["output"])
    return out


@pytest.mark.parametrize("repeatable", [False, True], ids=["guarded", "repeatable"])
def test_reissued_call_of_an_interrupted_run_is_not_run(daemon: Any, sid: str, repeatable: bool) -> None:
    paid: list[str] = []

    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {amount} to {to}"

    tool = durable_function_tool(pay, repeatable=repeatable)
    with Client(daemon.addr) as c:
        # The earlier run: the payment begun and recorded under call_1, and
        # the process gone before the model's message was saved.
        s = c.start(sid, "pay bob")
        reg = s.register_tool_use(ToolUse("call_1", "pay", '{"to": "bob", "amount": 5}'))
        assert reg.duplicate is None
        s.record_tool_use("call_1", "paid 5 to bob")
        c.resume(sid)  # taken over: a newer epoch

    async def go() -> dict[str, str]:
        model = ScriptedModel([
            [function_call("pay", {"amount": 5, "to": "bob"}, call_id="call_2")],
            [assistant_message("done")],
        ])
        r = await Runner.run(Agent(name="a", model=model, tools=[tool]), [], session=SavepointSession(sid, daemon.addr))
        assert r.final_output == "done"
        return outputs(r.new_items)

    got = asyncio.run(go())
    if repeatable:
        assert paid == ["bob"] and got["call_2"] == "paid 5 to bob"
        return
    assert paid == []
    assert "was not run" in got["call_2"] and "tool_use_id call_1" in got["call_2"], got
    assert got["call_2"].endswith("It was already taken, and returned: paid 5 to bob"), got
    with Client(daemon.addr) as c:
        entry = {e.tool_use_id: e for e in c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries}
        assert entry["call_2"].duplicate_of == "call_1"
        assert not c.raw.GetSession(pb.GetSessionRequest(session_id=sid)).checkpoint.pending_tool_uses
