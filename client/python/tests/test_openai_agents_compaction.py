"""SavepointSession under the OpenAI Agents SDK's compaction: the private
names the SDK's compaction and encrypted sessions look up on the session they
wrap (read from openai-agents 0.24.0, the release pyproject.toml pins; the
test fails on another release so the names are read again), each one save on
a real savepointd, and a compaction that a concurrent write interrupts losing
nothing."""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession
from agents.testing import ScriptedModel, assistant_message

from savepoint import Client
from savepoint.openai_agents import SavepointSession

set_tracing_disabled(True)

PINNED_SDK = "0.24.0"
SUMMARY = {"type": "compaction", "id": "cmp_1", "encrypted_content": "SUMMARY"}


def test_sdk_release_is_the_one_read() -> None:
    assert version("openai-agents") == PINNED_SDK


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def revision(daemon: Any, sid: str) -> int:
    with Client(daemon.addr) as c:
        return c.get_session(sid)[0].revision


def test_snapshot_replace_suffix_is_one_save(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([user("a"), said("b"), user("c"), said("d")])
        snap = await s._get_compaction_snapshot(2)
        assert snap is not None and snap.items == [user("c"), said("d")] and not snap.complete
        full = await s._get_compaction_snapshot(10)
        assert full is not None and full.complete and len(full.items) == 4
        r0 = revision(daemon, sid)
        assert await snap.replace_suffix(0, [SUMMARY]) is True
        assert revision(daemon, sid) == r0 + 1
        assert await s.get_items() == [user("a"), said("b"), SUMMARY]
        # The suffix is gone now: a second replacement from the same snapshot changes nothing.
        assert await snap.replace_suffix(0, [SUMMARY]) is False
        assert revision(daemon, sid) == r0 + 1
        assert await snap.replace_suffix(2, []) is False  # an empty suffix is never replaced

    asyncio.run(go())


def test_snapshot_prunes_the_accepted_prefix_in_the_same_save(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([user("old-1"), user("old-2"), user("kept"), user("c"), said("d")])
        snap = await s._get_compaction_snapshot(2, prune_prefix=lambda it: str(it.get("content")).startswith("old"))
        assert snap is not None
        r0 = revision(daemon, sid)
        assert await snap.replace_suffix(0, [SUMMARY])
        assert revision(daemon, sid) == r0 + 1
        assert await s.get_items() == [user("kept"), SUMMARY]

    asyncio.run(go())


def test_concurrent_write_invalidates_the_snapshot(daemon: Any, sid: str) -> None:
    """A write by another process between the snapshot and its replacement
    makes the replacement change nothing: the write is kept."""

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        other = SavepointSession(sid, daemon.addr)
        await s.add_items([user("a"), said("b")])
        snap = await s._get_compaction_snapshot(5)
        assert snap is not None and snap.complete
        await other.add_items([user("late")])
        assert await snap.replace_suffix(0, [SUMMARY]) is False
        assert await s.get_items() == [user("a"), said("b"), user("late")]
        # A pop and an identical add is the same history: the SDK's SQLite compares row ids, we compare items.
        await other.pop_item()
        await other.add_items([said("x")])
        snap2 = await s._get_compaction_snapshot(5)
        await other.pop_item()
        assert snap2 is not None and await snap2.replace_suffix(0, [SUMMARY]) is False
        assert await s.get_items() == [user("a"), said("b")]
        await other.close()

    asyncio.run(go())


def test_atomic_replace_items_is_one_save(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([user("a"), said("b")])
        r0 = revision(daemon, sid)
        assert await s._atomic_replace_items([SUMMARY, user("c")]) is True
        assert revision(daemon, sid) == r0 + 1
        assert await s.get_items() == [SUMMARY, user("c")]
        await s.add_items([said("d")])

        class Transforming(SavepointSession):
            async def add_items(self, items: Any, **kw: Any) -> None:
                await super().add_items([{**it, "seen": True} for it in items], **kw)

        sub = Transforming(sid, daemon.addr)
        assert await sub._atomic_replace_items([]) is False  # as the SDK's backends: a subclass's transform is not bypassed
        assert await sub._get_compaction_snapshot(3) is None
        assert len(await s.get_items()) == 3

        class Helper(SavepointSession):  # overrides no item method: the atomic path stays
            def describe(self) -> str:
                return self.session_id

        helper = Helper(sid, daemon.addr)
        snap = await helper._get_compaction_snapshot(3)
        assert snap is not None and len(snap.items) == 3
        assert await helper._atomic_replace_items([SUMMARY]) is True
        assert revision(daemon, sid) == r0 + 3
        assert await s.get_items() == [SUMMARY]

    asyncio.run(go())


def test_pop_with_validation_removes_nothing_when_validation_fails(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([user("a"), user("bad")])

        def refuse(item: Any) -> None:
            if item["content"] == "bad":
                raise ValueError("not authentic")

        with pytest.raises(ValueError, match="not authentic"):
            await s._pop_item_with_validation(refuse)
        assert await s.get_items() == [user("a"), user("bad")]
        assert await s._pop_item_with_validation(lambda it: None) == user("bad")
        assert await s.pop_item() == user("a")
        assert await s.pop_item() is None

    asyncio.run(go())


def test_encrypted_session_pops_only_what_its_key_authenticates(daemon: Any, sid: str) -> None:
    # The SDK's EncryptedSession pops first and decrypts after over any session
    # but SQLiteSession; savepoint.openai_agents.encrypted's authenticates in the pop.
    from agents.extensions.memory.encrypt_session import EncryptedSession as SDKEncryptedSession
    from cryptography.fernet import InvalidToken

    from savepoint.openai_agents.encrypted import EncryptedSession

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        correct = EncryptedSession(sid, s, "correct-key")
        wrong = EncryptedSession(sid, s, "wrong-key")
        await correct.add_items([user("first"), said("second")])
        stored = await s.get_items()
        r0 = revision(daemon, sid)
        with pytest.raises(InvalidToken):
            await wrong.pop_item()
        assert await s.get_items() == stored and revision(daemon, sid) == r0  # nothing removed
        assert await correct.pop_item() == said("second")
        assert await correct.get_items() == [user("first")]
        # The SDK's own class over a SavepointSession: the wrong key removes what it cannot read.
        assert await SDKEncryptedSession(sid, s, "wrong-key").pop_item() is None
        assert await s.get_items() == []

    asyncio.run(go())


class FakeCompactAPI:
    """The Responses API's compact endpoint: answers SUMMARY, and runs
    ``during`` (a concurrent write) while the request is in flight."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.during: Any = None
        self.responses = SimpleNamespace(compact=self.compact)

    async def compact(self, **kw: Any) -> Any:
        self.calls.append(kw)
        if self.during is not None:
            await self.during()
        return SimpleNamespace(output=[dict(SUMMARY)], usage=None)


def test_runner_compaction_under_a_concurrent_write_loses_nothing(daemon: Any, sid: str) -> None:
    """The SDK's automatic compaction through Runner on SavepointSession: a
    write by another process while the compact request is in flight makes
    the compaction give way (the write kept, nothing replaced); the next
    turn's compaction, the write included in what it summarizes, replaces
    the history in one save."""

    async def go() -> None:
        api = FakeCompactAPI()
        store = SavepointSession(sid, daemon.addr)
        other = SavepointSession(sid, daemon.addr)
        session = OpenAIResponsesCompactionSession(
            sid, store, client=api, compaction_mode="input", should_trigger_compaction=lambda ctx: True  # type: ignore[arg-type]
        )
        model = ScriptedModel([[assistant_message("first answer")], [assistant_message("second answer")]])
        agent = Agent(name="a", model=model)

        async def write() -> None:
            await other.add_items([user("from another process")])

        api.during = write
        await Runner.run(agent, "first question", session=session)
        assert len(api.calls) == 1  # compaction was attempted
        items = await store.get_items()
        assert [it.get("content") for it in items if it.get("role") == "user"] == ["first question", "from another process"]
        assert SUMMARY not in items
        assert any(it.get("role") == "assistant" for it in items)

        api.during = None
        r0 = revision(daemon, sid)
        await Runner.run(agent, "second question", session=session)
        assert len(api.calls) == 2
        # The model was sent the whole history, so the whole of it is
        # compacted: the concurrent write is in what was summarized.
        assert await store.get_items() == [SUMMARY]
        sent = [it.get("content") for it in api.calls[1]["input"] if it.get("role") == "user"]
        assert sent == ["first question", "from another process", "second question"]
        # The turn's input, its output, and the compaction: one save each
        # (a clear-then-add replacement would take two).
        assert revision(daemon, sid) == r0 + 3
        await other.close()

    asyncio.run(go())
