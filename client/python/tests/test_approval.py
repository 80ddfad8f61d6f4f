"""Approvals bound to one call: a tool that requires approval runs only once
a person approved that exact call and input; a process SIGKILLed after
BeginEffect, resumed and replayed from an older revision never runs it a
second time; a denial reaches the model; an approval for other input does
not unlock it. Sync and asyncio, against a real savepointd."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Daemon

import savepoint
from savepoint import Decision, EffectClass, Message, ToolUse
from savepoint.aio import AsyncClient
from savepoint.errors import ApprovalConflictError, ApprovalInputMismatchError, AwaitingApprovalError
from savepoint.v1 import savepoint_pb2 as pb

PROMPT = Message("user", '"pay the invoice"')
PAY = ToolUse("toolu_pay", "send_payment", '{"cents": 500}', EffectClass.SIDE_EFFECT)


@pytest.fixture
def client(daemon: Daemon) -> Iterator[savepoint.Client]:
    with savepoint.Client(daemon.addr, approval_required=["send_payment"]) as c:
        yield c


def start(client: savepoint.Client, sid: str) -> savepoint.Session:
    s = client.start(sid, "pay", messages=[PROMPT], replace=True)
    s.point_a(Message("assistant", '"paying"'), [PAY])
    return s


# The child resumes the session, runs the approved payment, and is killed
# by SIGKILL inside the tool, after BeginEffect and the side effect, before
# its outcome is recorded.
CHILD = textwrap.dedent("""
    import os, signal, sys
    import savepoint
    from savepoint import ToolUse, EffectClass
    addr, sid, marker = sys.argv[1:4]
    c = savepoint.Client(addr, approval_required=["send_payment"])
    s = c.resume(sid)
    def pay(call, key):
        with open(marker, "a") as f:
            f.write(key + "\\n")
        os.kill(os.getpid(), signal.SIGKILL)
    s.reconcile(pay)
""")


def test_approval_once_across_sigkill_and_replay(client: savepoint.Client, daemon: Daemon, sid: str, tmp_path: Path) -> None:
    s = start(client, sid)
    runs: list[str] = []
    with pytest.raises(AwaitingApprovalError) as waiting:
        s.run_tool(PAY, lambda key: runs.append(key) or "paid")
    assert waiting.value.call.tool_use_id == PAY.tool_use_id and runs == []
    (summary,) = [x for x in client.list_sessions() if x.session_id == sid]
    assert summary.awaiting_approval_count == 1
    # An approval for other input is refused and unlocks nothing.
    with pytest.raises(ApprovalInputMismatchError):
        client.approve_effect(sid, PAY.tool_use_id, input_digest=b"\x07" * 32)
    with pytest.raises(AwaitingApprovalError):
        s.run_tool(PAY, lambda key: runs.append(key) or "paid")
    resp = client.approve_effect(sid, PAY.tool_use_id, decided_by="alice", input_digest=waiting.value.approval.input_digest)
    assert resp.entry.approval.status == pb.APPROVAL_STATUS_APPROVED and not resp.already_decided
    # A process takes over and is SIGKILLed inside the tool, after BeginEffect.
    marker = tmp_path / "paid"
    p = subprocess.run([sys.executable, "-c", CHILD, daemon.addr, sid, str(marker)], timeout=60)
    assert p.returncode == -9
    assert len(marker.read_text().splitlines()) == 1
    # Resumed: in doubt, not run; replayed from the older revision: the same.
    for replay in (False, True):
        s2 = client.resume(sid)
        if replay:
            client.raw.RewindSession(pb.RewindSessionRequest(session_id=sid, epoch=s2.epoch, revision=2))
            s2 = client.resume(sid)
        (r,) = s2.reconcile(lambda call, key: runs.append(key) or "paid")
        assert r.decision == Decision.IN_DOUBT and r.is_error
    assert runs == [] and len(marker.read_text().splitlines()) == 1
    (entry,) = client.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert entry.begun and entry.approval.spent
    # A new call with the same input needs its own approval.
    s3 = client.start(sid + "-2", "pay", messages=[PROMPT], replace=True)
    again = ToolUse("toolu_pay2", "send_payment", '{"cents":500}', EffectClass.SIDE_EFFECT)
    s3.point_a(Message("assistant", '"paying"'), [again])
    with pytest.raises(AwaitingApprovalError):
        s3.run_tool(again, lambda key: runs.append(key) or "paid")


def test_denial_reaches_the_model(client: savepoint.Client, sid: str) -> None:
    s = start(client, sid)
    with pytest.raises(AwaitingApprovalError):
        s.run_tool(PAY, lambda key: "paid")
    client.approve_effect(sid, PAY.tool_use_id, deny=True, note="over the limit; ask finance", decided_by="alice")
    with pytest.raises(ApprovalConflictError):
        client.approve_effect(sid, PAY.tool_use_id)
    runs: list[str] = []
    (r,) = s.reconcile(lambda call, key: runs.append(key) or "paid")
    assert r.decision == Decision.DENIED and r.is_error and "over the limit; ask finance" in r.content and runs == []
    s.point_b([r])
    cp, msgs = client.get_session(sid)
    assert "over the limit; ask finance" in msgs[-1].content_json and '"is_error": true' in msgs[-1].content_json.replace('":true', '": true')
    # Recorded as refused: a later resume reuses the denial.
    (entry,) = client.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert entry.effect.refused and entry.approval.status == pb.APPROVAL_STATUS_DENIED


def test_async_waits_then_runs_once(daemon: Daemon, sid: str) -> None:
    async def main() -> None:
        async with AsyncClient(daemon.addr, approval_required=["send_payment"]) as c:
            s = await c.start(sid, "pay", messages=[PROMPT], replace=True)
            await s.point_a(Message("assistant", '"paying"'), [PAY])
            runs: list[str] = []

            async def pay(key: str) -> str:
                runs.append(key)
                return "paid"

            with pytest.raises(AwaitingApprovalError):
                await s.run_tool(PAY, pay)
            await c.approve_effect(sid, PAY.tool_use_id, decided_by="alice")
            r = await s.run_tool(PAY, pay)
            assert r.content == "paid" and len(runs) == 1 and runs[0]

    asyncio.run(main())
