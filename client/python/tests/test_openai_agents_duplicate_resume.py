"""A real crash between a durable tool's outcome and the SDK's save of the
model's message, in the OpenAI Agents integration (savepoint.openai_agents
with the SDK's real Runner and ScriptedModel against a real savepointd;
run as a script, ``python test_openai_agents_duplicate_resume.py MODE ...``,
this file is the agent process).

The agent process pays bob under call_1 and is SIGKILLed after the payment
was recorded: right after RecordEffect ("recorded"), or right after the
save that stops the call pending (``_settled``: a revision with nothing
pending while the SDK has not yet saved the call or its output,
"settled"). A new process resumes the session with a model that reissues
the same payment under call_2.

What it shows: the result is not lost in either window, and the resume
answers call_1 by its id with its recorded output (the tool is not run for
it) before the model is asked, so the model's first request holds the
payment and its result. The duplicate-intent guard does not apply here:
it catches a call an earlier, interrupted run made while the model's reply
was lost, but this integration never loses it (the call is listed in the
session before it runs), and once the result is in the saved history a
reissue is the model's new decision (docs/api.md, "The same action under a
new id": the turn window closes there). So call_2 runs, and is not stored
as a duplicate. An uncrashed run does the same (test_openai_agents_duplicate.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from savepoint import Client
from savepoint.openai_agents import SavepointSession, durable_function_tool
from savepoint.v1 import savepoint_pb2 as pb

set_tracing_disabled(True)  # no network: the SDK would try to export traces

PAID = "paid 5 to bob"


def _spawn(daemon: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SAVEPOINT_ADDR=daemon.addr)
    return subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=120)


def _kinds(items: list[Any]) -> list[tuple[str, str]]:
    return [(it["type"], it["call_id"]) for it in items if it.get("type") in ("function_call", "function_call_output")]


@pytest.mark.parametrize("point", ["recorded", "settled"])
def test_killed_after_the_outcome_then_reissued(daemon: Any, sid: str, tmp_path: Path, point: str) -> None:
    first = _spawn(daemon, "run", sid, str(tmp_path), point)
    assert first.returncode == -signal.SIGKILL, f"exit {first.returncode}:\n{first.stderr}"
    paid = tmp_path / "paid"
    assert paid.read_text().splitlines() == ["bob 5"]
    with Client(daemon.addr) as c:
        cp, _ = c.get_session(sid)
    # Killed before the SDK saved the call: the history holds the prompt only.
    assert [json.loads(m.content_json).get("type") for m in cp.messages] == [None]
    assert [p.tool_use_id for p in cp.pending_tool_uses] == ([] if point == "settled" else ["call_1"])

    second = _spawn(daemon, "resume", sid, str(tmp_path), "none")
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout.splitlines()[-1])
    assert out["final"] == "done"
    # Asked first from a history that answers call_1 with its recorded output.
    asked = out["inputs"][0]
    assert _kinds(asked) == [("function_call", "call_1"), ("function_call_output", "call_1")]
    assert asked[-1]["output"] == PAID
    # call_1 was not run again; call_2, the model's new decision, ran once.
    assert paid.read_text().splitlines() == ["bob 5", "bob 5"]
    with Client(daemon.addr) as c:
        entries = {e.tool_use_id: e for e in c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries}
        cp, _ = c.get_session(sid)
    assert sorted(entries) == ["call_1", "call_2"]
    assert entries["call_1"].effect.output == PAID and entries["call_2"].effect.output == PAID
    assert entries["call_2"].duplicate_of == ""
    items = [json.loads(m.content_json) for m in cp.messages]
    assert _kinds(items) == [("function_call", "call_1"), ("function_call_output", "call_1"),
                             ("function_call", "call_2"), ("function_call_output", "call_2")]
    assert list(cp.pending_tool_uses) == []


# -- the agent process --------------------------------------------------------


async def _agent(mode: str, sid: str, workdir: str, point: str) -> None:
    from savepoint.aio import AsyncRaw
    from savepoint.openai_agents import _tools

    @durable_function_tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        with open(os.path.join(workdir, "paid"), "a") as f:
            f.write(f"{to} {amount}\n")
        return f"paid {amount} to {to}"

    if point == "recorded":
        record = AsyncRaw.RecordEffect

        async def record_then_die(self: AsyncRaw, req: Any, timeout: float | None = None) -> Any:
            await record(self, req, timeout)
            os.kill(os.getpid(), signal.SIGKILL)

        AsyncRaw.RecordEffect = record_then_die  # type: ignore[method-assign]
    elif point == "settled":
        settled = _tools._settled

        async def settled_then_die(s: SavepointSession, call_id: str) -> None:
            await settled(s, call_id)
            os.kill(os.getpid(), signal.SIGKILL)

        _tools._settled = settled_then_die  # type: ignore[assignment]

    session = SavepointSession(sid)
    if mode == "run":
        model = ScriptedModel([[function_call("pay", {"to": "bob", "amount": 5}, call_id="call_1")], [assistant_message("done")]])
        await Runner.run(Agent(name="a", model=model, tools=[pay]), "pay bob 5", session=session)
        return
    model = ScriptedModel([[function_call("pay", {"amount": 5, "to": "bob"}, call_id="call_2")], [assistant_message("done")]])
    r = await Runner.run(Agent(name="a", model=model, tools=[pay]), [], session=session)
    print(json.dumps({"final": r.final_output, "inputs": [m.input for m in model.calls]}, default=str))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    asyncio.run(_agent(*sys.argv[1:5]))
