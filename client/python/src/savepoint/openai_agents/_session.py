"""SavepointSession: the OpenAI Agents SDK's Session protocol on savepointd.

Every SDK item is one message of a savepointd session (its role is the item's
role, else its type; its content the item as JSON). Every change is one
SaveCheckpoint made under expected_revision: a writer that finds the session
changed since it last read it reloads and tries again, so several processes
can share one session without losing or reordering each other's items and
without fencing each other (none of them calls Resume).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import replace
from typing import Any

from agents.items import TResponseInputItem
from agents.memory.session import _CompactionSnapshot
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
from agents.run_context import RunContextWrapper

from savepoint import DEFAULT_RETRY_POLICY, RetryPolicy, TLSConfig
from savepoint.aio import AsyncClient
from savepoint.errors import (
    CallAlreadyRecordedError,
    RevisionMismatchError,
    SavepointError,
    SessionExistsError,
    SessionFencedError,
    SessionNotFoundError,
)
from savepoint.openai_agents import _tools
from savepoint.openai_agents._revision import TASK, Change, View
from savepoint.v1 import savepoint_pb2 as pb

MAX_ATTEMPTS = 200
"""How many times one change is tried against a session that keeps changing
under it before SavepointSession gives up."""

# Errors that mean another writer changed (or created, deleted, resumed) the
# session since this process last read it: reload and try again.
_STALE = (RevisionMismatchError, SessionFencedError, SessionExistsError, SessionNotFoundError)


_ITEM_METHODS = ("get_items", "add_items", "pop_item", "clear_session")
"""The methods through which a subclass may transform items (see
SavepointSession._replaces_natively)."""

Planner = Callable[[View], "Awaitable[Change | None] | Change | None"]


def encode(item: TResponseInputItem) -> pb.Message:
    """One SDK item as a savepointd message: its role, else its type, and the
    item as JSON text."""
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item must be a dict (a TResponseInputItem), not {type(item).__name__}.")
    role = item.get("role") or item.get("type") or "item"
    if not isinstance(role, str):
        role = "item"
    return pb.Message(role=role, content_json=json.dumps(item, ensure_ascii=False, separators=(",", ":")))


def decode(content_json: str) -> TResponseInputItem:
    """The SDK item a message holds."""
    return json.loads(content_json)  # type: ignore[no-any-return]


class SessionClosedError(RuntimeError):
    """A method of a SavepointSession was called after its close()."""


class Closing:
    """What SavepointSession.close() returns: awaiting it waits until the
    session's connections are closed; dropping it unawaited is safe (the
    closes run on their own loops, and nothing warns)."""

    def __init__(self, waits: list[Awaitable[None]]) -> None:
        self._waits = waits

    def __await__(self) -> Generator[Any, None, None]:
        if self._waits:
            yield from asyncio.gather(*self._waits, return_exceptions=True).__await__()
        return None


def _close_on(loop: asyncio.AbstractEventLoop, c: AsyncClient) -> Awaitable[None] | None:
    """Start closing c on the loop it belongs to (grpc.aio channels belong to
    one loop); returns what the caller may await, or None when nothing is
    left to wait for."""
    if loop.is_closed():
        return None  # its loop is gone, and with it the channel's transport
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is running:
        return loop.create_task(c.close())
    if loop.is_running():
        fut = asyncio.run_coroutine_threadsafe(c.close(), loop)
        return asyncio.wrap_future(fut) if running is not None else None
    if running is None:
        loop.run_until_complete(c.close())  # an idle loop of this thread's sync caller
    return None


async def _settled(call: Awaitable[Any]) -> tuple[Any, bool]:
    """Await a save to its outcome even when the caller is cancelled meanwhile
    (the daemon may have made it already, as SQLiteSession's worker commits
    regardless): returns its result and whether a cancel arrived. A save
    that fails raises its error, or CancelledError when a cancel arrived."""
    fut = asyncio.ensure_future(call)
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = cancelled or not fut.done()
        except BaseException:  # noqa: BLE001 - fut's own error, raised below
            break
    if cancelled and (fut.cancelled() or fut.exception() is not None):
        raise asyncio.CancelledError()
    return fut.result(), cancelled


class SavepointSession:
    """The OpenAI Agents SDK's ``Session`` on savepointd: pass it as
    ``Runner.run(agent, input, session=SavepointSession("my-id"))``. Items
    are durable once a method returns, survive restarts of the agent and of
    the daemon, and may be shared by several processes.

    ``session_id`` is the savepointd session id (1-128 characters of
    ``[A-Za-z0-9._:-]``, starting with a letter or digit); ``address`` the
    daemon's, resolved as ``savepoint.Client`` resolves it when None.
    ``session_settings`` is the SDK's (its ``limit`` is get_items' default).
    A method cancelled while its save is on its way to the daemon raises
    CancelledError once the save's outcome is known (it may have been made).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        address: str | None = None,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        tls: TLSConfig | bool | None = None,
        timeout: float | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        self.session_id = session_id
        self.address = address
        self.session_settings = (
            coerce_session_settings(dict(session_settings) if isinstance(session_settings, Mapping) else session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._tls = tls
        self._timeout = timeout
        self._retry = retry
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = weakref.WeakKeyDictionary()
        self._cached: View | None = None  # the revision this process last saved or read, without items
        self._closed = False
        _tools.register(self)

    # -- the Session protocol ----------------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None) -> list[TResponseInputItem]:
        """Return the session's items in order, or the latest ``limit`` of
        them (``session_settings.limit`` when None; 0 returns none). Items
        are read from one revision."""
        self._check_not_closed()
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and n < 0:
            n = None  # as SQLiteSession: a negative limit (SQLite's LIMIT -1) returns every item
        _tools.bind_run(wrapper, self)
        view = await self._load(history=True)
        if ids := _tools.interrupted(self, view):
            await _tools.resolve_interrupted(self, wrapper, ids)
            view = await self._load(history=True)
        items = view.items or []
        if n is None:
            return items
        return items[-n:] if n else []

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Append ``items`` after every item already stored, in one atomic
        save: they are all durable when this returns, or none is."""
        self._check_not_closed()
        _tools.bind_run(wrapper, self)
        if not items:
            return
        for it in items:
            encode(it)  # refuse a bad item before any I/O
        batch = list(items)
        await _tools.record_rejections(self, batch)

        def plan(v: View) -> Change | None:
            part = v.part()
            if not part:
                return Change(append=batch)
            calls, resolved = part.get("calls", {}), list(part.get("resolved", []))
            keep: list[TResponseInputItem] = []
            answered: set[str] = set()
            for it in batch:
                kind, cid = it.get("type"), it.get("call_id")
                if kind in ("function_call", "function_call_output") and cid in resolved:
                    if kind == "function_call_output":  # answered on resume already: the SDK's late copy
                        resolved.remove(cid)
                    continue
                if kind == "function_call_output" and cid in calls:
                    answered.add(str(cid))
                keep.append(it)
            for cid in answered:
                calls.pop(cid, None)
            part["resolved"] = resolved
            return Change(
                append=keep,
                pending=[p for p in v.pending if p.tool_use_id not in answered],
                state_json=v.with_part(part),
            )

        await self.mutate(plan)

    async def pop_item(self, *, wrapper: RunContextWrapper[Any] | None = None) -> TResponseInputItem | None:
        """Remove and return the latest item, or return None when the session
        is empty. The removal is one save made on the revision the item was
        read from, so two processes popping at once never remove one item
        twice or an item neither returned."""
        self._check_not_closed()
        _tools.bind_run(wrapper, self)
        return await self._pop_item_with_validation()

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Remove every item. The savepointd session and its side-effects
        ledger are kept, so a tool call recorded before the clear is still
        known to the durable tools."""
        self._check_not_closed()
        _tools.bind_run(wrapper, self)

        def plan(v: View) -> Change | None:
            if v.revision == 0 or (v.count == 0 and not v.pending):
                return None
            return Change(keep=0, pending=(), state_json=v.with_part({}))

        await self.mutate(plan)

    # -- what the SDK's compaction and encrypted sessions duck-type --------
    #
    # openai-agents 0.24.0 (the release pyproject.toml pins) looks these
    # private names up on the session it wraps: OpenAIResponsesCompactionSession
    # calls _get_compaction_snapshot (automatic compaction: replace the suffix
    # the model just saw) and _atomic_replace_items (manual compaction: the
    # whole history), else falls back to clear-then-add; both insert through
    # _insert_items(conn, items), the hook the SDK's tests wrap; EncryptedSession's
    # atomic pop calls _pop_item_with_validation. As the SDK's own backends
    # (SQLiteSession, RedisSession) do for every subclass, a subclass that
    # overrides how items are read or written (get_items, add_items,
    # pop_item, clear_session) gets None/False from the first two: it may
    # transform items on the way in or out, which a raw replacement would
    # bypass. A subclass that overrides none of them keeps the atomic path.

    def _replaces_natively(self) -> bool:
        """Whether compaction may replace this session's items directly: yes
        unless its class overrides one of the item methods."""
        t = type(self)
        return all(getattr(t, m) is getattr(SavepointSession, m) for m in _ITEM_METHODS)

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[TResponseInputItem], bool] | None = None
    ) -> _CompactionSnapshot | None:
        """The latest ``limit`` items of one revision, whether they are the
        whole history, and ``replace_suffix(start, output)``: in one save,
        replace the snapshot's items from ``start`` on with ``output`` (and
        drop the leading run of items ``prune_prefix`` accepts before them),
        but only while those items are still the session's last ones;
        returns False, changing nothing, when another writer changed them.
        None for a subclass that overrides an item method."""
        self._check_not_closed()
        if not self._replaces_natively():
            return None
        view = await self._load(history=True)
        assert view.items is not None
        window = view.items[-limit:] if limit > 0 else []
        complete = len(window) == len(view.items)

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            expected = window[start:]
            if not expected:
                return False
            for it in output:
                encode(it)
            replacement = list(output)

            async def plan(v: View) -> Change | None:
                assert v.items is not None
                at = len(v.items) - len(expected)
                if at < 0 or v.items[at:] != expected:
                    return Change(result=False, nothing=True)
                drop = 0
                if prune_prefix is not None:
                    while drop < at and prune_prefix(v.items[drop]):
                        drop += 1
                ch = Change(keep=0, append=v.items[drop:at], result=True) if drop else Change(keep=at, result=True)
                await self._insert_items(ch, replacement)
                return ch

            return bool(await self.mutate(plan, history=True))

        return _CompactionSnapshot(list(window), complete, replace_suffix)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Replace the whole history with ``items`` in one save (the daemon
        holds the old history or the new one, never a cleared gap); False,
        changing nothing, for a subclass that overrides an item method. The
        pending tool uses and the durable tools' state are kept."""
        self._check_not_closed()
        if not self._replaces_natively():
            return False
        for it in items:
            encode(it)
        batch = list(items)

        async def plan(v: View) -> Change:
            ch = Change(keep=0)
            await self._insert_items(ch, batch)
            return ch

        await self.mutate(plan)
        return True

    async def _insert_items(self, conn: Change, items: list[TResponseInputItem]) -> None:
        """Add ``items`` to the end of the save ``conn`` being planned: the
        insert of every compaction replacement (SQLiteSession's hook of the
        same name and shape, which the SDK's compaction tests wrap to hold a
        replacement in flight). The save is made once it returns."""
        for it in items:
            encode(it)
        conn.append = [*conn.append, *items]

    async def _pop_item_with_validation(
        self, validate: Callable[[TResponseInputItem], None] | None = None
    ) -> TResponseInputItem | None:
        """pop_item, calling ``validate(item)`` on the latest item before the
        save that removes it: when it raises, nothing is removed and its
        error propagates (EncryptedSession authenticates an item this way
        before popping it)."""
        self._check_not_closed()

        def plan(v: View) -> Change | None:
            assert v.items is not None
            if not v.items:
                return None
            if validate is not None:
                validate(v.items[-1])
            return Change(keep=len(v.items) - 1, result=v.items[-1])

        return await self.mutate(plan, history=True)  # type: ignore[no-any-return]

    def close(self) -> Closing:
        """Close the session: from this call on every method raises
        ``SessionClosedError`` (a RuntimeError, as a closed ``SQLiteSession``
        raises), and its connections to the daemon are closed. Call it from
        sync code as ``SQLiteSession.close()`` is called, or await what it
        returns to wait until the connections are closed; repeated calls are
        no-ops. The items stay on the daemon: a new SavepointSession with the
        same id reads them."""
        with self._lock:
            self._closed = True
            clients = list(self._clients.items())
            self._clients.clear()
        return Closing([c for c in (_close_on(loop, cl) for loop, cl in clients) if c is not None])

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def _check_not_closed(self) -> None:
        if self._closed:
            raise SessionClosedError(f"{type(self).__name__} is closed (session {self.session_id!r}).")

    # -- the compare-and-set loop ------------------------------------------

    def client(self) -> AsyncClient:
        """This event loop's connection to the daemon (grpc.aio channels
        belong to one loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_not_closed()
            c = self._clients.get(loop)
            if c is None:
                c = AsyncClient(self.address, tls=self._tls, timeout=self._timeout, retry=self._retry)
                self._clients[loop] = c
            return c

    async def _load(self, *, history: bool) -> View:
        """Read the latest revision (with its whole history when asked); an
        absent session reads as revision 0 with no item."""
        c = self.client()
        try:
            if history:
                cp, msgs = await c.get_session(self.session_id)
            else:
                cp, msgs = (await c.raw.GetSession(pb.GetSessionRequest(session_id=self.session_id))).checkpoint, []
        except SessionNotFoundError:
            return View(items=[] if history else None)
        v = View(
            revision=cp.revision,
            epoch=cp.epoch,
            count=cp.message_count,
            task=cp.task,
            turn=cp.turn,
            tokens_used=cp.tokens_used,
            labels=dict(cp.labels),
            state_json=cp.state_json,
            pending=list(cp.pending_tool_uses),
            items=[decode(m.content_json) for m in msgs] if history else None,
        )
        self._remember(v)
        return v

    def _remember(self, v: View) -> None:
        with self._lock:
            if self._cached is None or v.revision >= self._cached.revision:
                self._cached = replace(v, labels=dict(v.labels), pending=list(v.pending), items=None)

    async def mutate(self, plan: Planner, *, history: bool = False) -> Any:
        """Make one change: plan it on the latest revision this process knows
        (reading the session first when ``history`` is needed or nothing is
        known), save it under that revision, and when another writer got
        there first, reload and plan again. Returns the change's result;
        a plan that returns None writes nothing and returns None."""
        c = self.client()
        fresh = history
        for attempt in range(MAX_ATTEMPTS):
            with self._lock:
                cached = self._cached
            if fresh or cached is None:
                v = await self._load(history=history)
            else:
                v = replace(cached, pending=list(cached.pending), labels=dict(cached.labels))
            ch = plan(v)
            if asyncio.iscoroutine(ch):
                ch = await ch
            if ch is None:
                return None
            assert isinstance(ch, Change)
            if ch.nothing:
                return ch.result
            pending = list(v.pending if ch.pending is None else ch.pending)
            state = v.state_json if ch.state_json is None else ch.state_json
            req = pb.SaveCheckpointRequest(
                session_id=self.session_id,
                expected_revision=v.revision,
                epoch=v.epoch,
                request_id=str(uuid.uuid4()),
                task=v.task or TASK,
                turn=v.turn,
                tokens_used=v.tokens_used,
                append_messages=[encode(it) for it in ch.append],
                pending_tool_uses=pending,
                state_json=state,
                labels=v.labels,
            )
            if ch.keep is not None:
                req.keep_messages = ch.keep
            cancelled = False
            try:
                r, cancelled = await _settled(c.raw.SaveCheckpoint(req))
            except _STALE:
                fresh = True
                await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * (attempt + 1))))
                continue
            except CallAlreadyRecordedError:
                # A pending tool use was recorded and its process has not
                # (yet, or ever) saved it as no longer pending: settle it and
                # plan again. When none is left to settle and the session has
                # not moved on (its owner saved it meanwhile), the refused
                # tool use is one this change adds.
                if not await _tools.settle_recorded(self) and (await self._load(history=False)).revision == v.revision:
                    raise
                fresh = True
                continue
            self._remember(
                View(
                    revision=r.revision, epoch=r.epoch, count=r.message_count, task=req.task, turn=req.turn,
                    tokens_used=req.tokens_used, labels=dict(req.labels), state_json=state, pending=pending,
                )
            )
            if cancelled:
                raise asyncio.CancelledError()
            return ch.result
        raise SavepointError(
            f"session {self.session_id!r} changed under every one of {MAX_ATTEMPTS} attempts to save; "
            "too many writers are contending for it."
        )
