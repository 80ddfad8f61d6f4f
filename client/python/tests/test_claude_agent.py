"""savepoint.claude_agent against a real savepointd, its hooks and store
called the way the Claude Agent SDK calls them (claude_agent_sdk 0.2.184):
a hook callback gets the hook input (PreToolUseHookInput and the like: a
dict with session_id, tool_name, tool_input, tool_use_id, tool_response or
error), the tool_use_id and a HookContext; can_use_tool gets the tool's name,
input and a ToolPermissionContext whose tool_use_id names the call;
SessionStore.append gets a SessionKey and a batch of transcript entries
(JSON objects, most with a uuid), load a SessionKey. The SDK itself is not
needed here: `make test-claude-agent` runs it for real."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import Daemon

import savepoint
from savepoint.aio import AsyncClient
from savepoint.errors import ApprovalInputMismatchError
from savepoint.claude_agent import INTERRUPTED, NEVER_STARTED, SavepointSessionStore, dangling_tool_uses, session_id_for
from savepoint.v1 import savepoint_pb2 as pb

CTX = {"signal": None}  # the SDK's HookContext


@dataclass
class PermissionContext:  # the fields of the SDK's ToolPermissionContext the store reads
    tool_use_id: str


@dataclass
class Deny:  # the SDK's PermissionResultDeny
    message: str
    behavior: str = "deny"
    interrupt: bool = False


def pre(sdk_sid: str, tid: str, name: str, tool_input: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"session_id": sdk_sid, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": "PreToolUse",
            "tool_name": name, "tool_input": tool_input or {}, "tool_use_id": tid}


def post(sdk_sid: str, tid: str, name: str, response: Any) -> dict[str, Any]:
    return {**pre(sdk_sid, tid, name), "hook_event_name": "PostToolUse", "tool_response": response}


def failure(sdk_sid: str, tid: str, name: str, error: str, interrupt: bool = False) -> dict[str, Any]:
    return {**pre(sdk_sid, tid, name), "hook_event_name": "PostToolUseFailure", "error": error, "is_interrupt": interrupt}


def assistant(sdk_sid: str, parent: str | None, *tool_uses: tuple[str, str]) -> dict[str, Any]:
    return {"parentUuid": parent, "isSidechain": False, "type": "assistant", "uuid": str(uuid.uuid4()), "sessionId": sdk_sid,
            "timestamp": "2026-12-07T14:21:46.305Z", "cwd": "/tmp", "version": "2.1.327",
            "message": {"id": "msg_1", "type": "message", "role": "assistant",
                        "content": [{"type": "tool_use", "id": i, "name": n, "input": {}} for i, n in tool_uses]}}


def result(sdk_sid: str, parent: str, tid: str, text: str) -> dict[str, Any]:
    return {"parentUuid": parent, "isSidechain": False, "type": "user", "uuid": str(uuid.uuid4()), "sessionId": sdk_sid,
            "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": [{"type": "text", "text": text}]}]}}


def ledger(daemon: Daemon, sid: str) -> dict[str, pb.LedgerEntry]:
    with savepoint.Client(daemon.addr) as c:
        return {e.tool_use_id: e for e in c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_hooks_put_every_call_on_the_ledger(daemon: Daemon) -> None:
    sdk = str(uuid.uuid4())

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c, read_only=["mcp__notes__read_notes"])
            # PreToolUse of parallel calls: none contends on the revision.
            ids = [f"toolu_{i}" for i in range(8)]
            outs = await asyncio.gather(*(store.pre_tool_use(pre(sdk, t, "mcp__notes__write_report"), t, CTX) for t in ids))
            assert outs == [{}] * 8
            assert await store.pre_tool_use(pre(sdk, "toolu_r", "mcp__notes__read_notes"), "toolu_r", CTX) == {}
            blocks = [{"type": "text", "text": "sales up 12%"}]
            assert await store.post_tool_use(post(sdk, "toolu_r", "mcp__notes__read_notes", blocks), "toolu_r", CTX) == {}
            assert await store.post_tool_use(post(sdk, "toolu_0", "mcp__notes__write_report", "written"), "toolu_0", CTX) == {}
            assert await store.post_tool_use_failure(failure(sdk, "toolu_1", "mcp__notes__write_report", "disk full"), "toolu_1", CTX) == {}
            # An interrupted call's outcome is unknown: nothing is recorded.
            await store.post_tool_use_failure(failure(sdk, "toolu_2", "mcp__notes__write_report", "interrupted", True), "toolu_2", CTX)

    run(main())
    led = ledger(daemon, session_id_for(sdk))
    assert sorted(led) == sorted([f"toolu_{i}" for i in range(8)] + ["toolu_r"])
    assert all(e.begun and e.registered and e.begin_tracked for e in led.values())
    assert led["toolu_r"].effect_class == pb.EFFECT_CLASS_READ_ONLY
    assert led["toolu_0"].effect_class == pb.EFFECT_CLASS_SIDE_EFFECT
    assert json.loads(led["toolu_r"].effect.output) == [{"type": "text", "text": "sales up 12%"}]
    assert json.loads(led["toolu_0"].effect.output) == "written" and not led["toolu_0"].effect.is_error
    assert led["toolu_1"].effect.is_error and json.loads(led["toolu_1"].effect.output) == "disk full"
    assert not led["toolu_2"].HasField("effect")


def test_a_recorded_call_is_answered_not_run(daemon: Daemon) -> None:
    sdk = str(uuid.uuid4())

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            await store.pre_tool_use(pre(sdk, "toolu_w", "write_report"), "toolu_w", CTX)
            await store.post_tool_use(post(sdk, "toolu_w", "write_report", [{"type": "text", "text": "report.txt written"}]), "toolu_w", CTX)
        # Another process sees the same call again (a resumed model re-issues it).
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            out = await store.pre_tool_use(pre(sdk, "toolu_w", "write_report"), "toolu_w", CTX)
            hso = out["hookSpecificOutput"]
            assert hso["hookEventName"] == "PreToolUse" and hso["permissionDecision"] == "deny"
            assert "already ran" in hso["permissionDecisionReason"] and "report.txt written" in hso["permissionDecisionReason"]

    run(main())


def test_the_same_call_under_a_new_id_is_answered_not_run(daemon: Daemon) -> None:
    """A resumed model that re-issues a call under a new id (its reply was
    lost with the killed process) is denied with the daemon's text naming
    the earlier call and its output; the same call in one process runs."""
    sdk = str(uuid.uuid4())
    report = {"path": "report.txt", "text": "Q3"}

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            assert await store.pre_tool_use(pre(sdk, "toolu_w1", "write_report", report), "toolu_w1", CTX) == {}
            await store.post_tool_use(post(sdk, "toolu_w1", "write_report", [{"type": "text", "text": "report.txt written"}]), "toolu_w1", CTX)
            # The same call again in the same process runs.
            assert await store.pre_tool_use(pre(sdk, "toolu_w2", "write_report", report), "toolu_w2", CTX) == {}
            await store.post_tool_use(post(sdk, "toolu_w2", "write_report", [{"type": "text", "text": "report.txt written"}]), "toolu_w2", CTX)
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            out = await store.pre_tool_use(pre(sdk, "toolu_w3", "write_report", {"text": "Q3", "path": "report.txt"}), "toolu_w3", CTX)
            hso = out["hookSpecificOutput"]
            assert hso["permissionDecision"] == "deny", out
            reason = hso["permissionDecisionReason"]
            assert "toolu_w3" in reason and "tool_use_id toolu_w2 " in reason and "report.txt written" in reason, reason
        entries = ledger(daemon, session_id_for(sdk))
        assert entries["toolu_w3"].duplicate_of == "toolu_w2" and not entries["toolu_w3"].begun

    run(main())


def test_a_call_begun_elsewhere_is_in_doubt(daemon: Daemon) -> None:
    sdk = str(uuid.uuid4())

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c, read_only=["read_notes"])
            await store.pre_tool_use(pre(sdk, "toolu_w", "write_report"), "toolu_w", CTX)
            await store.pre_tool_use(pre(sdk, "toolu_r", "read_notes"), "toolu_r", CTX)
            # Killed inside both tools: no PostToolUse.
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c, read_only=["read_notes"])
            out = await store.pre_tool_use(pre(sdk, "toolu_w", "write_report"), "toolu_w", CTX)
            reason = out["hookSpecificOutput"]["permissionDecisionReason"]
            assert out["hookSpecificOutput"]["permissionDecision"] == "deny" and "unknown" in reason and "toolu_w" in reason
            # A read-only call is safe to run again.
            assert await store.pre_tool_use(pre(sdk, "toolu_r", "read_notes"), "toolu_r", CTX) == {}

    run(main())


def test_a_refused_call_is_recorded_as_never_run(daemon: Daemon) -> None:
    sdk = str(uuid.uuid4())

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)

            async def policy(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
                return Deny("writing reports is not allowed")

            check = store.can_use_tool(policy)
            await store.pre_tool_use(pre(sdk, "toolu_w", "write_report"), "toolu_w", CTX)
            res = await check("write_report", {}, PermissionContext("toolu_w"))
            assert res.behavior == "deny"

    run(main())
    e = ledger(daemon, session_id_for(sdk))["toolu_w"].effect
    assert e.refused and e.is_error and json.loads(e.output) == "writing reports is not allowed"


def test_a_call_the_transcript_shows_denied_is_recorded_as_refused(daemon: Daemon) -> None:
    """A call the CLI's own permission rules or mode deny fires PreToolUse
    and no other hook; its transcript entry (as CLI 2.1.327 writes it) says
    so, and append records the refusal."""
    sdk = str(uuid.uuid4())
    key = {"project_key": "-tmp", "session_id": sdk}
    a = assistant(sdk, None, ("toolu_w", "write_report"))
    denial = {**result(sdk, a["uuid"], "toolu_w", ""), "toolDenialKind": "permission-rule",
              "permissionDecision": {"decision": "reject", "source": "config", "reasonType": "mode", "reasonCode": "mode:dontAsk"}}
    denial["message"]["content"] = [{"type": "tool_result", "tool_use_id": "toolu_w", "is_error": True,
                                     "content": "Permission to use write_report has been denied because Claude Code is running in don't ask mode."}]
    accepted = {**result(sdk, a["uuid"], "toolu_r", "notes"), "permissionDecision": {"decision": "accept", "source": "config"}}

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            await store.pre_tool_use(pre(sdk, "toolu_w", "write_report"), "toolu_w", CTX)
            await store.pre_tool_use(pre(sdk, "toolu_r", "read_notes"), "toolu_r", CTX)
            await store.append(key, [a, denial, accepted])
            # A refusal can_use_tool recorded already stands: no conflict.
            await store.append(key, [{**denial, "uuid": str(uuid.uuid4())}])

    run(main())
    led = ledger(daemon, session_id_for(sdk))
    assert led["toolu_w"].effect.refused and "don't ask mode" in json.loads(led["toolu_w"].effect.output)
    assert not led["toolu_r"].HasField("effect")


def test_load_answers_each_dangling_call_with_reconcile(daemon: Daemon) -> None:
    sdk = str(uuid.uuid4())
    key = {"project_key": "-tmp", "session_id": sdk}
    prompt = {"type": "user", "uuid": str(uuid.uuid4()), "parentUuid": None, "message": {"role": "user", "content": "write the report"}}
    a1 = assistant(sdk, prompt["uuid"], ("toolu_r", "read_notes"))
    r1 = result(sdk, a1["uuid"], "toolu_r", "sales up 12%")
    old: SavepointSessionStore | None = None
    a2 = assistant(sdk, r1["uuid"], ("toolu_done", "write_report"), ("toolu_doubt", "send_mail"), ("toolu_never", "send_mail"),
                   ("toolu_refused", "delete_all"), ("toolu_ro", "read_notes"))

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c0, AsyncClient(daemon.addr, wait_ready=5) as c:
            await killed(c0)
            await resumed(c)

    async def killed(c: AsyncClient) -> None:
        nonlocal old
        store = SavepointSessionStore(c, read_only=["read_notes"])
        await store.append(key, [{"type": "queue-operation", "operation": "enqueue", "sessionId": sdk}, prompt, a1])
        await store.append(key, [r1, a2])
        await store.append(key, [r1, a2])  # a batch the SDK retried
        for tid, name in [("toolu_done", "write_report"), ("toolu_doubt", "send_mail"), ("toolu_refused", "delete_all"), ("toolu_ro", "read_notes")]:
            assert await store.pre_tool_use(pre(sdk, tid, name), tid, CTX) == {}
        await store.post_tool_use(post(sdk, "toolu_done", "write_report", [{"type": "text", "text": "report.txt written"}]), "toolu_done", CTX)
        await store.can_use_tool(lambda n, i, ctx: _deny("no deletes"))("delete_all", {}, PermissionContext("toolu_refused"))
        # Killed here: toolu_doubt and toolu_ro ran with no record, toolu_never never started.
        old = store

    async def resumed(c: AsyncClient) -> None:
        store = SavepointSessionStore(c, read_only=["read_notes"])
        assert await store.load({"project_key": "-tmp", "session_id": str(uuid.uuid4())}) is None
        entries = await store.load(key)
        assert entries is not None
        # The retried batch was kept once, and the answer comes last.
        assert [e.get("uuid") for e in entries[:-1]] == [None, prompt["uuid"], a1["uuid"], r1["uuid"], a2["uuid"]]
        answer = entries[-1]
        assert answer["type"] == "user" and answer["parentUuid"] == a2["uuid"] and answer["sessionId"] == sdk
        blocks = {b["tool_use_id"]: b for b in answer["message"]["content"]}
        assert list(blocks) == ["toolu_done", "toolu_doubt", "toolu_never", "toolu_refused", "toolu_ro"]
        assert blocks["toolu_done"]["content"] == [{"type": "text", "text": "report.txt written"}] and "is_error" not in blocks["toolu_done"]
        assert blocks["toolu_doubt"]["is_error"] and "unknown" in blocks["toolu_doubt"]["content"]
        assert blocks["toolu_never"] == {"type": "tool_result", "tool_use_id": "toolu_never", "is_error": True,
                                         "content": NEVER_STARTED.format(name="send_mail", id="toolu_never")}
        assert blocks["toolu_refused"]["is_error"] and blocks["toolu_refused"]["content"] == "no deletes"
        assert blocks["toolu_ro"]["content"] == INTERRUPTED.format(name="read_notes", id="toolu_ro")
        assert dangling_tool_uses(entries) == []
        # The answer is saved: loading again gives the same transcript.
        assert await SavepointSessionStore(c).load(key) == entries
        # The old process is fenced from the session.
        assert old is not None
        with pytest.raises(savepoint.SessionFencedError):
            await old.pre_tool_use(pre(sdk, "toolu_late", "write_report"), "toolu_late", CTX)

    run(main())


async def _deny(message: str) -> Deny:
    return Deny(message)


def test_session_ids() -> None:
    assert session_id_for("6374f0cd-b2dd-4a8b-a654-88983251d26a") == "claude.6374f0cd-b2dd-4a8b-a654-88983251d26a"
    assert session_id_for("abc", "subagents/agent-1") == "claude.abc.subagents:agent-1"
    with pytest.raises(ValueError):
        session_id_for("x" * 130)


def _fold(prev: dict[str, Any] | None, key: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A stand-in for the SDK's fold_session_summary (same signature and
    result shape): it counts entries and keeps the first prompt."""
    data = dict(prev["data"]) if prev else {"n": 0}
    data["n"] += len(entries)
    for e in entries:
        if e.get("type") == "user" and "firstPrompt" not in data:
            data["firstPrompt"] = e["message"]["content"]
    return {"session_id": key["session_id"], "mtime": prev["mtime"] if prev else 0, "data": data}


def test_list_methods(daemon: Daemon) -> None:
    """list_sessions, list_session_summaries and list_subkeys select by the
    SDK key saved with each session (a project's main transcripts, a
    session's subagent transcripts), take nothing over, and agree on mtime;
    delete of a main transcript takes its subagent transcripts with it."""
    a, b, other = (str(uuid.uuid4()) for _ in range(3))
    proj = "-work-" + str(uuid.uuid4())[:8]

    def user(text: str) -> dict[str, Any]:
        return {"type": "user", "uuid": str(uuid.uuid4()), "message": {"role": "user", "content": text}}

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c, fold_summary=_fold)
            # a's session first made by a hook, which does not know the project: append labels it.
            assert await store.pre_tool_use(pre(a, "toolu_1", "write_report"), "toolu_1", CTX) == {}
            await store.append({"project_key": proj, "session_id": a}, [user("first a"), user("again a")])
            await store.append({"project_key": proj, "session_id": a}, [user("third a")])
            await store.append({"project_key": proj, "session_id": a, "subpath": "subagents/agent-1"}, [user("sub 1")])
            await store.append({"project_key": proj, "session_id": a, "subpath": "subagents/agent-2"}, [user("sub 2")])
            await store.append({"project_key": proj, "session_id": b}, [user("first b")])
            await store.append({"project_key": proj + "-x", "session_id": other}, [user("elsewhere")])

        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)  # another process: lists without taking over
            listed = await store.list_sessions(proj)
            assert sorted(e["session_id"] for e in listed) == sorted([a, b])
            assert all(isinstance(e["mtime"], int) and e["mtime"] > 1_700_000_000_000 for e in listed)
            summaries = {e["session_id"]: e for e in await store.list_session_summaries(proj)}
            assert summaries[a]["data"] == {"n": 3, "firstPrompt": "first a"}
            assert summaries[b]["data"] == {"n": 1, "firstPrompt": "first b"}
            assert {e["session_id"]: e["mtime"] for e in listed} == {k: v["mtime"] for k, v in summaries.items()}
            assert sorted(await store.list_subkeys({"project_key": proj, "session_id": a})) == ["subagents/agent-1", "subagents/agent-2"]
            assert await store.list_subkeys({"project_key": proj, "session_id": b}) == []
            assert await store.list_sessions("-nowhere") == []
            await store.delete({"project_key": proj, "session_id": a})
            assert sorted(e["session_id"] for e in await store.list_sessions(proj)) == [b]
            assert await store.list_subkeys({"project_key": proj, "session_id": a}) == []
            # A targeted delete removes only that subagent transcript.
            await store.append({"project_key": proj, "session_id": b, "subpath": "subagents/x"}, [user("sub b")])
            await store.delete({"project_key": proj, "session_id": b, "subpath": "subagents/x"})
            assert await store.list_subkeys({"project_key": proj, "session_id": b}) == []
            assert [e["session_id"] for e in await store.list_sessions(proj)] == [b]

    run(main())
    with savepoint.Client(daemon.addr) as c:
        cp, _ = c.get_session(session_id_for(b))
        assert cp.epoch == 1, "listing took the session over"


def test_no_summaries_without_a_fold(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK's fold_session_summary (not installed here) the store
    keeps no summary, and list_session_summaries says so with an empty
    list: the SDK then fills in from list_sessions."""
    import builtins

    real = builtins.__import__

    def no_sdk(name: str, *a: Any, **k: Any) -> Any:
        if name.startswith("claude_agent_sdk"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_sdk)
    sdk, proj = str(uuid.uuid4()), "-p-" + str(uuid.uuid4())[:8]

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c)
            await store.append({"project_key": proj, "session_id": sdk}, [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}])
            assert [e["session_id"] for e in await store.list_sessions(proj)] == [sdk]
            assert await store.list_session_summaries(proj) == []

    run(main())


def test_approval_required_defers_until_a_person_decides(daemon: Daemon) -> None:
    """PreToolUse defers a call of a tool in approval_required (the SDK's
    pause) and load leaves it unanswered, so that the resumed SDK asks
    again; an approval for other input unlocks nothing; approved, the call
    is begun against it and runs once (a new process's PreToolUse of it
    after a crash does not run it again); denied, the model gets the
    note."""
    sdk = str(uuid.uuid4())
    sid = session_id_for(sdk)
    key = {"project_key": "p", "session_id": sdk}
    pay = {"to": "acme", "amount": 5}
    a = assistant(sdk, None, ("toolu_pay", "mcp__bank__pay"), ("toolu_no", "mcp__bank__pay"))

    def decision(out: dict[str, Any]) -> str:
        return str(out["hookSpecificOutput"]["permissionDecision"]) if out else "run"

    async def main() -> None:
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            store = SavepointSessionStore(c, approval_required=["mcp__bank__pay"])
            await store.append(key, [a])
            out = await store.pre_tool_use(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", CTX)
            assert out == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "defer",
                           "permissionDecisionReason": f"This mcp__bank__pay call (tool_use_id toolu_pay) waits for a person's approval: savepoint approve {sid} toolu_pay"}}
            assert decision(await store.pre_tool_use(pre(sdk, "toolu_no", "mcp__bank__pay", pay), "toolu_no", CTX)) == "defer"
            assert await store.pre_tool_use(pre(sdk, "toolu_read", "mcp__bank__balance"), "toolu_read", CTX) == {}
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            resumed = SavepointSessionStore(c, approval_required=["mcp__bank__pay"])
            assert await resumed.load(key) == [a]
            assert decision(await resumed.pre_tool_use(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", CTX)) == "defer"
            w = ledger(daemon, sid)["toolu_pay"].approval
            assert w.status == pb.APPROVAL_STATUS_WAITING
            with pytest.raises(ApprovalInputMismatchError):
                await c.approve_effect(sid, "toolu_pay", input_digest=bytes(32))
            assert decision(await resumed.pre_tool_use(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", CTX)) == "defer"
            await c.approve_effect(sid, "toolu_pay", decided_by="alice", input_digest=w.input_digest)
            await c.approve_effect(sid, "toolu_no", deny=True, note="not this month", decided_by="bob")
            assert await resumed.pre_tool_use(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", CTX) == {}
            out = await resumed.pre_tool_use(pre(sdk, "toolu_no", "mcp__bank__pay", pay), "toolu_no", CTX)
            assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
            assert out["hookSpecificOutput"]["permissionDecisionReason"] == "This call was denied by bob; it did not run. Their note: not this month"
        # Killed after the begin, before PostToolUse: a new process does not run it again.
        async with AsyncClient(daemon.addr, wait_ready=5) as c:
            third = SavepointSessionStore(c, approval_required=["mcp__bank__pay"])
            out = await third.pre_tool_use(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", CTX)
            assert out["hookSpecificOutput"]["permissionDecision"] == "deny" and "toolu_pay" in out["hookSpecificOutput"]["permissionDecisionReason"]

    run(main())
    led = ledger(daemon, sid)
    assert led["toolu_pay"].begun and led["toolu_pay"].approval.spent
    assert led["toolu_no"].effect.refused and not led["toolu_no"].begun
