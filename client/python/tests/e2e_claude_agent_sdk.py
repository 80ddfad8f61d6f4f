"""The Claude Agent SDK run for real (claude-agent-sdk 0.2.184 and its
bundled CLI 2.1.327) with savepoint.claude_agent against a real savepointd
and a local fake of the Messages API: the agent (claude_agent_app.py) is
SIGKILLed inside its side-effecting tool, or right after the tool's outcome
was recorded, and resumed by a new process. write_report must run once, the
resumed agent must be told the outcome is unknown only where it is, and
every request must pass the fake's tool_use/tool_result pairing check. Not
collected by `make test` (the SDK is ~360 MB): `make test-claude-agent`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from fake_messages_api import WRITE, FakeMessagesAPI

import savepoint
from savepoint.claude_agent import session_id_for
from savepoint.v1 import savepoint_pb2 as pb

APP = str(Path(__file__).with_name("claude_agent_app.py"))


@pytest.fixture
def api() -> FakeMessagesAPI:
    a = FakeMessagesAPI()
    yield a  # type: ignore[misc]
    a.close()


def agent(daemon: Daemon, api: FakeMessagesAPI, work: Path, *args: str, crash: str = "", deny: str = "", mode: str = "",
          approve: bool = False) -> tuple[int, dict[str, str]]:
    env = {**os.environ, "SAVEPOINT_ADDR": daemon.addr, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-fake",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CRASH": crash, "DENY": deny, "MODE": mode, "APPROVE": "1" if approve else ""}
    p = subprocess.Popen([sys.executable, APP, str(work), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=120)
    finally:
        # The SDK's CLI outlives a SIGKILLed parent: end the whole group.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    lines = dict(l.split(" ", 1) for l in out.splitlines() if " " in l)
    assert p.returncode in (0, -signal.SIGKILL), f"exit {p.returncode}\n{out}\n{err}"
    return p.returncode, lines


def report_lines(work: Path) -> list[str]:
    return (work / "report.txt").read_text().splitlines()


def ledger(daemon: Daemon, sdk_session: str) -> dict[str, pb.LedgerEntry]:
    with savepoint.Client(daemon.addr) as c:
        return {e.tool_use_id: e for e in c.raw.ListEffects(pb.ListEffectsRequest(session_id=session_id_for(sdk_session))).entries}


@pytest.mark.parametrize("crash", ["inside-write", "inside-write-slow"])
def test_killed_inside_the_tool_is_in_doubt_not_run_twice(daemon: Daemon, api: FakeMessagesAPI, tmp_path: Path, crash: str) -> None:
    """Killed before the SDK mirrored the call (as may happen right after the
    side effect), the transcript has no call: the (deterministic) model names
    it again and PreToolUse denies it as in doubt. Killed after (-slow),
    load() answers it with the in-doubt text."""
    rc, out = agent(daemon, api, tmp_path, crash=crash)
    assert rc == -signal.SIGKILL and "session" in out
    assert report_lines(tmp_path) == ["Q3: sales up 12%"]
    sdk = out["session"]
    led = ledger(daemon, sdk)
    assert led[WRITE].begun and not led[WRITE].HasField("effect")

    rc, out = agent(daemon, api, tmp_path, sdk)
    assert rc == 0, out
    assert report_lines(tmp_path) == ["Q3: sales up 12%"], "write_report ran twice"
    assert "(error)" in out["result"] and "unknown" in out["result"], out
    if crash.endswith("-slow"):
        assert "hook error" not in out["result"], out
    assert api.rejected == []


@pytest.mark.parametrize("crash", ["after-record", "after-record-slow"])
def test_killed_after_the_record_reuses_it(daemon: Daemon, api: FakeMessagesAPI, tmp_path: Path, crash: str) -> None:
    """The recorded output reaches the model, from PreToolUse when the model
    names the call again, or (-slow) from load() without naming it again."""
    rc, out = agent(daemon, api, tmp_path, crash=crash)
    assert rc == -signal.SIGKILL
    sdk = out["session"]
    assert ledger(daemon, sdk)[WRITE].effect.output

    rc, out = agent(daemon, api, tmp_path, sdk)
    assert rc == 0, out
    assert report_lines(tmp_path) == ["Q3: sales up 12%"], "write_report ran twice"
    assert "report.txt written" in out["result"] and "unknown" not in out["result"], out
    if crash.endswith("-slow"):
        assert out["result"] == "Finished. write_report said: report.txt written", out
    assert api.rejected == []


@pytest.mark.parametrize("mode", ["", "dontAsk"])
def test_a_refused_call_is_recorded_never_run(daemon: Daemon, api: FakeMessagesAPI, tmp_path: Path, mode: str) -> None:
    """Refused by can_use_tool, or by the CLI's own permission mode."""
    rc, out = agent(daemon, api, tmp_path, deny="mcp__notes__write_report", mode=mode)
    assert rc == 0, out
    assert not (tmp_path / "report.txt").exists()
    assert ("not allowed" if mode == "" else "denied") in out["result"], out
    e = ledger(daemon, out["session"])[WRITE].effect
    assert e.refused and e.is_error


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_approval_required_pauses_until_decided(daemon: Daemon, api: FakeMessagesAPI, tmp_path: Path, decision: str) -> None:
    """PreToolUse defers write_report (the SDK's pause): nothing is written
    and the call waits in the ledger; approved, the resume runs it once (a
    second resume does not run it again); denied, the model gets the note."""
    rc, out = agent(daemon, api, tmp_path, approve=True)
    assert rc == 0, out
    assert out.get("stop") == "tool_deferred", out
    assert not (tmp_path / "report.txt").exists()
    sdk = out["session"]
    w = ledger(daemon, sdk)[WRITE]
    assert not w.begun and not w.HasField("effect") and w.approval.status == pb.APPROVAL_STATUS_WAITING
    with savepoint.Client(daemon.addr) as c:
        if decision == "deny":
            c.approve_effect(session_id_for(sdk), WRITE, deny=True, note="not this quarter", decided_by="bob")
        else:
            c.approve_effect(session_id_for(sdk), WRITE, decided_by="alice")
    rc, out = agent(daemon, api, tmp_path, sdk, approve=True)
    assert rc == 0, out
    if decision == "deny":
        assert not (tmp_path / "report.txt").exists()
        assert "not this quarter" in out["result"], out
    else:
        assert report_lines(tmp_path) == ["Q3: sales up 12%"]
        assert "report.txt written" in out["result"], out
        rc, out = agent(daemon, api, tmp_path, sdk, approve=True)
        assert rc == 0, out
        assert report_lines(tmp_path) == ["Q3: sales up 12%"], "write_report ran twice"
    assert api.rejected == []


class _ProjectScoped:
    """The store with each SDK session id prefixed by its project key. The
    store keys a transcript by its session id alone (the SDK's are UUIDs,
    unique across projects, and the hooks, which see only the session id,
    must find the same savepointd session), so the conformance suite's
    contract 6, one session id in two projects, runs through this mapping;
    every other contract sees the store as the SDK does."""

    def __init__(self, store: Any) -> None:
        self.s = store

    @staticmethod
    def _k(key: Any) -> dict[str, Any]:
        return {**key, "session_id": f"{key['project_key']}_{key['session_id']}"}

    @staticmethod
    def _strip(project_key: str, sid: str) -> str:
        return sid.removeprefix(project_key + "_")

    async def append(self, key: Any, entries: list[dict[str, Any]]) -> None:
        await self.s.append(self._k(key), entries)

    async def load(self, key: Any) -> Any:
        return await self.s.load(self._k(key))

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        return [{**e, "session_id": self._strip(project_key, e["session_id"])} for e in await self.s.list_sessions(project_key)]

    async def list_session_summaries(self, project_key: str) -> list[dict[str, Any]]:
        return [{**e, "session_id": self._strip(project_key, e["session_id"])} for e in await self.s.list_session_summaries(project_key)]

    async def delete(self, key: Any) -> None:
        await self.s.delete(self._k(key))

    async def list_subkeys(self, key: Any) -> list[str]:
        return await self.s.list_subkeys(self._k(key))  # type: ignore[no-any-return]


def test_session_store_conformance(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """The SDK's own SessionStore conformance suite (its 14 contracts, the
    optional list methods and delete included), each contract on a store
    over a fresh daemon, with the SDK's fold_session_summary."""
    import asyncio

    from claude_agent_sdk.testing import run_session_store_conformance

    from savepoint.aio import AsyncClient
    from savepoint.claude_agent import SavepointSessionStore

    clients: list[AsyncClient] = []

    async def main() -> None:
        async def make() -> _ProjectScoped:
            c = AsyncClient(start_daemon().addr, wait_ready=10)
            clients.append(c)
            return _ProjectScoped(SavepointSessionStore(c))

        try:
            await run_session_store_conformance(make)
        finally:
            for c in clients:
                await c.close()

    asyncio.run(main())


def test_sdk_lists_sessions_from_the_store(daemon: Daemon) -> None:
    """claude_agent_sdk's list_sessions_from_store reads the summaries the
    store folded with the SDK's fold_session_summary (and takes no session
    over)."""
    import asyncio
    import uuid

    from claude_agent_sdk import list_sessions_from_store

    from savepoint.aio import AsyncClient
    from savepoint.claude_agent import SavepointSessionStore

    sdk = str(uuid.uuid4())

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            from claude_agent_sdk._internal.sessions import _canonicalize_path, _sanitize_path

            key = {"project_key": _sanitize_path(_canonicalize_path("/tmp")), "session_id": sdk}
            await store.append(key, [{"type": "user", "uuid": str(uuid.uuid4()), "timestamp": "2026-12-07T14:21:46.305Z", "cwd": "/tmp",
                                      "sessionId": sdk, "message": {"role": "user", "content": "Write the Q3 report."}}])
            infos = await list_sessions_from_store(store, directory="/tmp")
            assert [i.session_id for i in infos] == [sdk]
            assert "Q3 report" in (infos[0].first_prompt or infos[0].summary or "")

    asyncio.run(main())
