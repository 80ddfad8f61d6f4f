"""Approvals in savepoint.anthropic (DurableAgent, AsyncDurableAgent and
the SDK's tool runner, sync and async): a tool named in approval_required
pauses the loop instead of raising: run() (until_done()) returns Paused
naming the tool uses waiting, with the turn saved at Point A; once a person
decides, the same call goes on: an approved tool use runs once, a denied
one reaches the model as an error result with the approver's note, and an
approval for other input unlocks nothing. Against a real savepointd and a
local fake of the Messages API (fake_anthropic.Fake)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from conftest import Daemon
from fake_anthropic import Fake

import savepoint
import savepoint.aio
from savepoint import SessionStatus
from savepoint.anthropic import ApprovalRequest, AsyncDurableAgent, DurableAgent, Paused, durable, durable_tool_runner
from savepoint.errors import ApprovalInputMismatchError, AwaitingApprovalError

MODES = ["agent", "async", "runner", "async-runner"]
PAY_INPUT = {"to": "acme", "amount": 5}
AGENT = str(Path(__file__).with_name("anthropic_approval_agent.py"))


def reply(msgs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Turn 1 asks for send_payment and the read-only look; turn 2 answers
    with what send_payment's result said."""
    if not any(m["role"] == "assistant" for m in msgs):
        return [
            {"type": "text", "text": "Paying."},
            {"type": "tool_use", "id": "toolu_pay", "name": "send_payment", "input": PAY_INPUT},
            {"type": "tool_use", "id": "toolu_look", "name": "look", "input": {"q": "acme"}},
        ], "tool_use"
    pay = next(b for b in msgs[-1]["content"] if b.get("tool_use_id") == "toolu_pay")
    content = pay.get("content")
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    return [{"type": "text", "text": ("refused: " if pay.get("is_error") else "done: ") + text}], "end_turn"


@pytest.fixture(scope="module")
def fake() -> Iterator[Fake]:
    f = Fake(reply)
    yield f
    f.close()


class Agent:
    """One mode's loop in this process; payments and looks counts each
    tool's runs."""

    def __init__(self, daemon: Daemon, fake: Fake, sid: str, mode: str, **kw: Any) -> None:
        self.daemon, self.fake, self.sid, self.mode, self.kw = daemon, fake, sid, mode, kw
        self.payments: list[dict[str, Any]] = []
        self.looks = 0

        def pay(inp: dict[str, Any]) -> str:
            self.payments.append(inp)
            return f"paid {inp['amount']} to {inp['to']}"

        def look(inp: dict[str, Any]) -> str:
            self.looks += 1
            return "acme: ok"

        self.tools = [
            {"name": "send_payment", "input_schema": {"type": "object"}, "function": pay},
            durable({"name": "look", "input_schema": {"type": "object"}}, function=look, effect="read_only"),
        ]

    def run(self) -> Any:
        """A run from the start or from where the session stands: the final
        text, or Paused."""
        kw = {"approval_required": ["send_payment"], **self.kw}
        params: dict[str, Any] = {"model": "claude-fake", "max_tokens": 1024}
        if self.mode == "agent":
            client = anthropic.Anthropic(base_url=self.fake.url, api_key="t", max_retries=0)
            return DurableAgent(client, self.sid, tools=self.tools, savepoint=self.daemon.addr, **kw).run("pay", **params)
        if self.mode == "runner":
            client = anthropic.Anthropic(base_url=self.fake.url, api_key="t", max_retries=0)
            out = durable_tool_runner(client, self.sid, tools=self.tools, savepoint=self.daemon.addr,
                                      messages=[{"role": "user", "content": "pay"}], **kw, **params).until_done()
            return out if isinstance(out, Paused) else "".join(b.text for b in out.content)

        async def arun() -> Any:
            client = anthropic.AsyncAnthropic(base_url=self.fake.url, api_key="t", max_retries=0)
            async with savepoint.aio.AsyncClient(self.daemon.addr) as sp:
                if self.mode == "async":
                    return await AsyncDurableAgent(client, self.sid, tools=self.tools, savepoint=sp, **kw).run("pay", **params)
                out = await durable_tool_runner(client, self.sid, tools=self.tools, savepoint=sp,
                                                messages=[{"role": "user", "content": "pay"}], **kw, **params).until_done()
                return out if isinstance(out, Paused) else "".join(b.text for b in out.content)

        return asyncio.run(arun())


def paused_on_payment(out: Any, sid: str) -> ApprovalRequest:
    assert isinstance(out, Paused), out
    assert out.session_id == sid and [(w.tool_use_id, w.name, w.input) for w in out.waiting] == [("toolu_pay", "send_payment", PAY_INPUT)]
    return out.waiting[0]


def assert_point_a(daemon: Daemon, sid: str) -> None:
    """The session is saved with the turn's reply last and both of its tool
    uses pending: the Point A state."""
    with savepoint.Client(daemon.addr) as c:
        cp, msgs = c.get_session(sid)
    assert cp.status == SessionStatus.ACTIVE
    assert [p.tool_use_id for p in cp.pending_tool_uses] == ["toolu_pay", "toolu_look"]
    assert msgs[-1].role == "assistant" and "toolu_pay" in msgs[-1].content_json


@pytest.mark.parametrize("mode", MODES)
def test_pause_approve_resume_runs_the_tool_once(daemon: Daemon, fake: Fake, sid: str, mode: str) -> None:
    a = Agent(daemon, fake, sid, mode)
    w = paused_on_payment(a.run(), sid)
    assert a.payments == [] and a.looks == 1
    assert_point_a(daemon, sid)
    # Not decided yet: still paused, nothing ran.
    paused_on_payment(a.run(), sid)
    assert a.payments == []
    with savepoint.Client(daemon.addr) as c:
        c.approve_effect(sid, "toolu_pay", decided_by="alice", input_digest=bytes.fromhex(w.input_digest))
    assert a.run() == "done: paid 5 to acme"
    assert a.payments == [PAY_INPUT] and a.looks == 1
    # Completed: the final answer again, nothing run.
    n = len(fake.requests)
    assert a.run() == "done: paid 5 to acme"
    assert a.payments == [PAY_INPUT] and len(fake.requests) == n


@pytest.mark.parametrize("mode", MODES)
def test_denial_reaches_the_model_with_the_note(daemon: Daemon, fake: Fake, sid: str, mode: str) -> None:
    a = Agent(daemon, fake, sid, mode)
    paused_on_payment(a.run(), sid)
    with savepoint.Client(daemon.addr) as c:
        c.approve_effect(sid, "toolu_pay", deny=True, note="not this month", decided_by="bob")
    out = a.run()
    assert out == "refused: This call was denied by bob; it did not run. Their note: not this month"
    assert a.payments == []
    last = fake.requests[-1]["messages"][-1]["content"]
    pay = next(b for b in last if b.get("tool_use_id") == "toolu_pay")
    assert pay["is_error"] is True and "not this month" in json.dumps(pay["content"])


@pytest.mark.parametrize("mode", MODES)
def test_approval_for_other_input_does_not_unlock(daemon: Daemon, fake: Fake, sid: str, mode: str) -> None:
    a = Agent(daemon, fake, sid, mode)
    w = paused_on_payment(a.run(), sid)
    other = hashlib.sha256(b"send_payment" + json.dumps({"amount": 5000, "to": "acme"}).encode()).digest()
    assert other.hex() != w.input_digest
    with savepoint.Client(daemon.addr) as c, pytest.raises(ApprovalInputMismatchError):
        c.approve_effect(sid, "toolu_pay", input_digest=other)
    paused_on_payment(a.run(), sid)
    assert a.payments == []


@pytest.mark.parametrize("mode", ["agent", "runner"])
def test_pause_for_approval_false_raises_as_before(daemon: Daemon, fake: Fake, sid: str, mode: str) -> None:
    a = Agent(daemon, fake, sid, mode, pause_for_approval=False)
    with pytest.raises(AwaitingApprovalError) as e:
        a.run()
    assert e.value.call.tool_use_id == "toolu_pay"  # type: ignore[attr-defined]
    assert a.payments == []
    with pytest.raises(AwaitingApprovalError):
        a.run()  # from the resume's reconcile this time


def test_approval_required_names_a_tool() -> None:
    with pytest.raises(ValueError, match="'pay'"):
        DurableAgent(anthropic.Anthropic(api_key="x"), "s", approval_required=["pay"])


def run_process(daemon: Daemon, fake: Fake, work: Path, sid: str, mode: str, crash: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, AGENT, daemon.addr, fake.url, str(work), sid, mode],
                          env={**os.environ, "CRASH_AT": crash}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("crash", ["", "in-tool"])
def test_a_paused_process_killed_then_approved_pays_once(daemon: Daemon, fake: Fake, tmp_path: Path, sid: str, mode: str, crash: str) -> None:
    """A process pauses and is SIGKILLed; the payment is approved; a new
    process resumes and pays once. With crash "in-tool" that process is
    SIGKILLed right after the payment, before its outcome is recorded, and
    a third process does not pay again: the model is told the outcome is
    unknown."""
    first = run_process(daemon, fake, tmp_path, sid, mode, crash="paused")
    assert first.returncode == -9 and "[paused] toolu_pay" in first.stdout, first.stdout + first.stderr
    with savepoint.Client(daemon.addr) as c:
        c.approve_effect(sid, "toolu_pay", decided_by="alice")
    second = run_process(daemon, fake, tmp_path, sid, mode, crash=crash)
    if crash:
        assert second.returncode == -9, second.stdout + second.stderr
        third = run_process(daemon, fake, tmp_path, sid, mode)
        assert third.returncode == 0, third.stdout + third.stderr
        assert "[done] refused: " in third.stdout  # in doubt: an error result, not a second payment
    else:
        assert second.returncode == 0 and "[done] done: paid 5 to acme" in second.stdout, second.stdout + second.stderr
    assert (tmp_path / "payments.txt").read_text().splitlines() == [json.dumps(PAY_INPUT)]
