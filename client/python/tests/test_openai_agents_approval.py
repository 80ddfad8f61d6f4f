"""durable_function_tool(needs_approval=...) with the SDK's own tool
approval: the run stops with an interruption and the call waits in
savepointd too (ListSessions counts it, ListEffects lists its request);
RunState.approve() records the approval in savepointd (ApproveEffect for
that call and its input) and the begin spends it, so a process SIGKILLed
after BeginEffect, resumed, and replayed from the older RunState runs the
side effect once; a decision made in savepointd (as ``savepoint approve``
makes it) reaches the RunState through apply_decisions, with the same
guarantees; a RunState.reject() is recorded as a denial and its note
reaches the model. With the SDK's real Runner and its ScriptedModel
against a real savepointd.

Run as a script (``python test_openai_agents_approval.py MODE ...``) this
file is the agent process."""

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
from agents import Agent, RunState, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from savepoint import Client
from savepoint.openai_agents import SavepointSession, apply_decisions, durable_function_tool, idempotency_key
from savepoint.v1 import savepoint_pb2 as pb

set_tracing_disabled(True)  # no network: the SDK would try to export traces

CALL = "call_pay"
NOTE = "over the limit; ask finance"


def _pay_tool(workdir: str, point: str = "none") -> Any:
    @durable_function_tool(needs_approval=True)
    def pay(cents: int) -> str:
        """Pay the invoice."""
        with open(os.path.join(workdir, "effects"), "a") as f:
            f.write(f"{cents} {idempotency_key()}\n")
        if point == "in-tool":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {cents}"

    return pay


def _asking_model() -> ScriptedModel:
    return ScriptedModel([[function_call("pay", {"cents": 500}, call_id=CALL)], [assistant_message("done")]])


def _outputs(items: list[Any]) -> list[Any]:
    return [it for it in items if it.get("type") == "function_call_output"]


def _effects(workdir: Path) -> list[str]:
    f = workdir / "effects"
    return f.read_text().splitlines() if f.exists() else []


def _entries(daemon: Any, sid: str) -> list[Any]:
    with Client(daemon.addr) as c:
        return list(c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries)


def test_approved_in_the_run_state_runs_once(daemon: Any, sid: str, tmp_path: Path) -> None:
    """The run stops for approval without running the tool; approved, the
    same process resumes the RunState with a new SavepointSession (whose
    run is not bound yet: the tool finds its session), the approval is
    recorded and spent, the tool runs once and the model gets its output."""

    async def go() -> None:
        tool = _pay_tool(str(tmp_path))
        model = _asking_model()
        agent = Agent(name="a", model=model, tools=[tool])
        first = await Runner.run(agent, "pay the invoice", session=SavepointSession(sid, daemon.addr))
        (item,) = first.interruptions
        assert item.name == "pay" and _effects(tmp_path) == []
        state = first.to_state()
        state.approve(item)
        r = await Runner.run(agent, state, session=SavepointSession(sid, daemon.addr))
        assert r.final_output == "done"
        (out,) = _outputs(model.calls[-1].input)
        assert out["call_id"] == CALL and out["output"] == "paid 500"

    asyncio.run(go())
    (line,) = _effects(tmp_path)
    assert line.split()[0] == "500" and len(line.split()[1]) == 32
    (e,) = _entries(daemon, sid)
    assert e.begun and e.effect.output == "paid 500"
    assert e.approval.status == pb.APPROVAL_STATUS_APPROVED and e.approval.spent
    assert e.approval.decided_by == "openai-agents RunState.approve" and len(e.approval.input_digest) == 32
    with Client(daemon.addr) as c:
        cp, _ = c.get_session(sid)
    assert list(cp.pending_tool_uses) == []


def _awaiting(daemon: Any, sid: str) -> int:
    with Client(daemon.addr) as c:
        (summary,) = [x for x in c.list_sessions() if x.session_id == sid]
    return summary.awaiting_approval_count


def test_rejection_is_recorded_and_reaches_the_model(daemon: Any, sid: str, tmp_path: Path) -> None:
    """RunState.reject: the model gets the note, the tool never runs, and
    savepointd holds the denial (by RunState.reject, with the note) and the
    call recorded as refused, no longer waiting or pending."""

    async def go() -> None:
        model = _asking_model()
        agent = Agent(name="a", model=model, tools=[_pay_tool(str(tmp_path))])
        first = await Runner.run(agent, "pay the invoice", session=SavepointSession(sid, daemon.addr))
        assert _awaiting(daemon, sid) == 1
        state = first.to_state()
        state.reject(first.interruptions[0], rejection_message=NOTE)
        r = await Runner.run(agent, state, session=SavepointSession(sid, daemon.addr))
        assert r.final_output == "done"
        (out,) = _outputs(model.calls[-1].input)
        assert out["call_id"] == CALL and NOTE in out["output"]

    asyncio.run(go())
    assert _effects(tmp_path) == []
    (e,) = _entries(daemon, sid)
    assert not e.begun and e.effect.refused and e.effect.output == NOTE
    assert e.approval.status == pb.APPROVAL_STATUS_DENIED and e.approval.note == NOTE
    assert e.approval.decided_by == "openai-agents RunState.reject"
    assert _awaiting(daemon, sid) == 0
    with Client(daemon.addr) as c:
        cp, _ = c.get_session(sid)
    assert list(cp.pending_tool_uses) == [] and "openai_agents" not in cp.state_json


def test_waiting_call_is_listed_in_savepointd(daemon: Any, sid: str, tmp_path: Path) -> None:
    """The run stopped for approval: the call waits in savepointd as well,
    with its input digest, and a new SavepointSession's get_items (a
    resume without the RunState) leaves it to the RunState instead of
    answering it."""

    async def go() -> None:
        agent = Agent(name="a", model=_asking_model(), tools=[_pay_tool(str(tmp_path))])
        first = await Runner.run(agent, "pay the invoice", session=SavepointSession(sid, daemon.addr))
        assert [it.name for it in first.interruptions] == ["pay"]
        items = await SavepointSession(sid, daemon.addr).get_items()
        assert [it.get("type") for it in items] == [None, "function_call"]  # the prompt and the call, unanswered

    asyncio.run(go())
    assert _awaiting(daemon, sid) == 1
    (e,) = _entries(daemon, sid)
    assert e.approval.status == pb.APPROVAL_STATUS_WAITING and len(e.approval.input_digest) == 32 and not e.begun
    with Client(daemon.addr) as c:
        cp, _ = c.get_session(sid)
    assert [p.tool_use_id for p in cp.pending_tool_uses] == [CALL]


@pytest.mark.parametrize("deny", [False, True], ids=["approved", "denied"])
def test_decided_in_savepointd_then_resumed(daemon: Any, sid: str, tmp_path: Path, deny: bool) -> None:
    """A person decides the waiting call with the daemon's API (as
    ``savepoint approve [--deny]`` does); apply_decisions gives the
    decision to the RunState: approved, the resumed run runs the tool once
    and spends the person's approval; denied, the model gets the person's
    note and the tool never runs."""

    async def go() -> None:
        model = _asking_model()
        agent = Agent(name="a", model=model, tools=[_pay_tool(str(tmp_path))])
        first = await Runner.run(agent, "pay the invoice", session=SavepointSession(sid, daemon.addr))
        state = first.to_state()
        session = SavepointSession(sid, daemon.addr)
        assert await apply_decisions(state, session) == []  # nothing decided yet
        with Client(daemon.addr) as c:
            c.approve_effect(sid, CALL, deny=deny, note=NOTE if deny else "", decided_by="alice")
        assert [it.call_id for it in await apply_decisions(state, session)] == [CALL]
        r = await Runner.run(agent, state, session=session)
        assert r.final_output == "done" and r.interruptions == []
        (out,) = _outputs(model.calls[-1].input)
        want = f"This call was denied by alice; it did not run. Their note: {NOTE}" if deny else "paid 500"
        assert out["call_id"] == CALL and out["output"] == want

    asyncio.run(go())
    assert len(_effects(tmp_path)) == (0 if deny else 1)
    (e,) = _entries(daemon, sid)
    assert e.approval.decided_by == "alice" and _awaiting(daemon, sid) == 0
    if deny:
        assert not e.begun and e.effect.refused and e.approval.status == pb.APPROVAL_STATUS_DENIED
    else:
        assert e.begun and e.approval.spent and e.effect.output == "paid 500"


def _spawn(daemon: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SAVEPOINT_ADDR=daemon.addr)
    return subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("by", ["approve", "decided"], ids=["RunState.approve", "savepoint-approve"])
def test_approval_spent_once_across_sigkill_resume_and_replay(daemon: Any, sid: str, tmp_path: Path, by: str) -> None:
    """One process stops for approval and saves its RunState; the call is
    approved (by RunState.approve in the next process, or by a person in
    savepointd, which that process applies to the RunState), and that
    process is SIGKILLed inside the tool, after BeginEffect; a third
    resumes the session (the call is in doubt, not run); a fourth replays
    the older RunState with its approval: the payment happened once."""
    ask = _spawn(daemon, "ask", sid, str(tmp_path))
    assert ask.returncode == 0, ask.stderr
    assert json.loads(ask.stdout.splitlines()[-1]) == {"interruptions": ["pay"]}
    assert _effects(tmp_path) == [] and _awaiting(daemon, sid) == 1
    if by == "decided":
        with Client(daemon.addr) as c:
            c.approve_effect(sid, CALL, decided_by="alice")
    killed = _spawn(daemon, by, sid, str(tmp_path), "in-tool")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(_effects(tmp_path)) == 1
    (e,) = _entries(daemon, sid)
    assert e.begun and not e.HasField("effect") and e.approval.spent

    resumed = _spawn(daemon, "resume", sid, str(tmp_path))
    assert resumed.returncode == 0, resumed.stderr
    (out,) = _outputs(json.loads(resumed.stdout.splitlines()[-1])["model_input"])
    assert out["call_id"] == CALL and "is unknown" in out["output"]

    replay = _spawn(daemon, by, sid, str(tmp_path), "none")
    assert replay.returncode == 0, replay.stderr
    seen = _outputs(json.loads(replay.stdout.splitlines()[-1])["model_input"])
    assert [o["call_id"] for o in seen] == [CALL] and "is unknown" in seen[0]["output"], seen
    assert len(_effects(tmp_path)) == 1
    (e,) = _entries(daemon, sid)
    assert e.approval.spent and e.approval.status == pb.APPROVAL_STATUS_APPROVED


# -- the agent process --------------------------------------------------------


async def _agent(mode: str, sid: str, workdir: str, point: str = "none") -> None:
    session = SavepointSession(sid)
    state_file = os.path.join(workdir, "state.json")
    if mode == "ask":
        agent = Agent(name="a", model=_asking_model(), tools=[_pay_tool(workdir, point)])
        r = await Runner.run(agent, "pay the invoice", session=session)
        with open(state_file, "w") as f:
            f.write(r.to_state().to_string())
        print(json.dumps({"interruptions": [it.name for it in r.interruptions]}))
        return
    model = ScriptedModel([[assistant_message("done")]])
    agent = Agent(name="a", model=model, tools=[_pay_tool(workdir, point)])
    if mode in ("approve", "decided"):
        with open(state_file) as f:
            state = await RunState.from_string(agent, f.read())
        if mode == "decided":
            await apply_decisions(state, session)
        else:
            for item in state.get_interruptions():
                state.approve(item)
        r = await Runner.run(agent, state, session=session)
    else:
        r = await Runner.run(agent, [], session=session)
    print(json.dumps({"final_output": r.final_output, "model_input": model.calls[0].input}))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    asyncio.run(_agent(*sys.argv[1:5]))
