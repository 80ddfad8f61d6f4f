"""Verify hooks: a side-effecting tool killed after BeginEffect, resumed with
a verify hook that says done, not done or unknown (or raises), sync and
asyncio, against a real savepointd."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conftest import Daemon

import savepoint
from savepoint import Decision, EffectClass, Message, ToolUse, Verified
from savepoint.aio import AsyncClient
from savepoint.v1 import savepoint_pb2 as pb

PROMPT = Message("user", '"pay the invoice"')
PAY = ToolUse("toolu_pay", "send_payment", '{"cents":500}', EffectClass.SIDE_EFFECT)

CASES = [
    # name, what verify answers (an exception is raised), decision, runs, content, resolver
    ("done", Verified.done("paid, ref 42", note="found by key"), Decision.REUSE, 0, "paid, ref 42", pb.RESOLVER_KIND_VERIFY),
    ("not done", Verified.not_done(), Decision.RUN, 1, "paid", pb.RESOLVER_KIND_VERIFY),
    ("unknown", Verified.unknown(), Decision.IN_DOUBT, 0, None, pb.RESOLVER_KIND_UNSPECIFIED),
    ("raises", RuntimeError("bank API down"), Decision.IN_DOUBT, 0, None, pb.RESOLVER_KIND_UNSPECIFIED),
]


@pytest.fixture
def client(daemon: Daemon) -> Iterator[savepoint.Client]:
    with savepoint.Client(daemon.addr) as c:
        yield c


def killed_after_begin(client: savepoint.Client, sid: str) -> str:
    """Leave sid as a process killed after BeginEffect of PAY leaves it; return
    the key it was begun with."""
    s = client.start(sid, "pay", messages=[PROMPT], replace=True)
    s.point_a(Message("assistant", '"paying"'), [PAY])
    return client.raw.BeginEffect(pb.BeginEffectRequest(session_id=sid, tool_use_id=PAY.tool_use_id, epoch=s.epoch)).idempotency_key


def check(client: savepoint.Client, sid: str, res: object, key: str, asked: list[tuple[str, str]], runs: list[str],
          want: Decision, want_runs: int, content: str | None, kind: int) -> None:
    assert asked == [(PAY.tool_use_id, key)]
    (r,) = res  # type: ignore[misc]
    assert r.decision == want and r.is_error == (want == Decision.IN_DOUBT)
    if content is not None:
        assert r.content == content
    assert runs == [key] * want_runs  # not done: once more, with the key it was begun with
    (entry,) = client.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert entry.resolution.resolver_kind == kind


@pytest.mark.parametrize("name,verified,want,want_runs,content,kind", CASES, ids=[c[0] for c in CASES])
def test_verify(client: savepoint.Client, sid: str, name: str, verified: object, want: Decision, want_runs: int,
                content: str | None, kind: int) -> None:
    key = killed_after_begin(client, sid)
    asked: list[tuple[str, str]] = []
    runs: list[str] = []

    def verify(call: ToolUse, k: str) -> Verified:
        asked.append((call.tool_use_id, k))
        if isinstance(verified, Exception):
            raise verified
        assert isinstance(verified, Verified)
        return verified

    def run(call: ToolUse, k: str) -> str:
        runs.append(k)
        return "paid"

    s = client.resume(sid)
    results = s.reconcile(run, verify=verify)
    check(client, sid, results, key, asked, runs, want, want_runs, content, kind)
    s.point_b(results)
    assert not s.pending


@pytest.mark.parametrize("name,verified,want,want_runs,content,kind", CASES, ids=[c[0] for c in CASES])
def test_verify_async(client: savepoint.Client, daemon: Daemon, sid: str, name: str, verified: object, want: Decision,
                      want_runs: int, content: str | None, kind: int) -> None:
    key = killed_after_begin(client, sid)
    asked: list[tuple[str, str]] = []
    runs: list[str] = []

    async def verify(call: ToolUse, k: str) -> Verified:
        asked.append((call.tool_use_id, k))
        if isinstance(verified, Exception):
            raise verified
        assert isinstance(verified, Verified)
        return verified

    async def run(call: ToolUse, k: str) -> str:
        runs.append(k)
        return "paid"

    async def main() -> list[savepoint.ToolResult]:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            s = await c.resume(sid)
            results = await s.reconcile(run, verify=verify)
            await s.point_b(results)
            return results

    check(client, sid, asyncio.run(main()), key, asked, runs, want, want_runs, content, kind)
