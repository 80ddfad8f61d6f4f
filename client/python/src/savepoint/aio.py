"""The asyncio client, on grpc.aio: AsyncClient and AsyncSession have the
sync API's methods as coroutines, with the same retries, request ids, epochs,
idempotency keys and exceptions."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message as ProtoMessage

from savepoint import _core
from savepoint._retry import DEFAULT_RETRY_POLICY, RetryPolicy, areconnected, left, ready_by, retry_wait
from savepoint._steps import Steps, get_session_steps
from savepoint.address import TLSConfig, resolve
from savepoint.errors import (
    SavepointError,
    UnavailableError,
    from_rpc_error,
)
from savepoint.types import (
    Decision,
    LedgerErrorHandler,
    Message,
    Registration,
    SessionStatus,
    ToolHook,
    ToolContent,
    ToolResult,
    ToolResultsFunc,
    ToolStage,
    ToolUse,
    Verified,
    WatchEvent,
    anthropic_tool_results,
)
from savepoint.v1 import savepoint_pb2 as pb
from savepoint.v1 import savepoint_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from savepoint import _stream

AsyncToolFunc = Callable[[ToolUse, str], Awaitable[ToolContent] | ToolContent]
"""Runs a tool: given the call and its idempotency key ("" for read-only
tools), it returns (or a coroutine returns) the tool's output; an exception
is the tool's failure."""


AsyncVerifyFunc = Callable[[ToolUse, str], Awaitable[Verified] | Verified]
"""As savepoint.client.VerifyFunc; it may be a coroutine function."""

T = TypeVar("T")


async def arun_steps(raw: AsyncRaw, steps: Steps[T]) -> T:
    """Drive ``steps`` over AsyncRaw as run_steps does over Raw. A
    RecordEffect is shielded: a tool that ran is recorded even when the
    caller's task is cancelled meanwhile."""
    try:
        step = next(steps)
        while True:
            try:
                call = getattr(raw, step.method)(step.request, step.timeout)
                resp = await (asyncio.shield(call) if step.method == "RecordEffect" else call)
            except BaseException as e:
                step = steps.throw(e)
            else:
                step = steps.send(resp)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class AsyncRaw:
    """The generated grpc.aio stub's calls with the client's retries and
    error translation, as Raw is for the sync client."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        retry: RetryPolicy,
        logger: logging.Logger,
        timeout: float | None,
        autostart: Any = None,
        call_stream: bool = False,
        start_pending: bool = False,
    ) -> None:
        self._autostart = autostart
        # The start on demand that resolve(defer_start=True) left to the
        # first call (started()); None once done or when there is none.
        self._pending = autostart if start_pending else None
        self._starting = asyncio.Lock()
        self._channel = channel
        self._stub = pb_grpc.SavepointServiceStub(channel)  # type: ignore[no-untyped-call]
        self._stream: _stream.AioCallStream | None = None
        if call_stream:
            # Imported here: the stream's stubs load graph.proto's, which a
            # client on unary calls never needs (tests/test_import.py).
            from savepoint import _stream

            self._stream = _stream.AioCallStream(channel)
        self._retry = retry
        self._logger = logger
        self._timeout = timeout

    async def _send(self, method: str, req: ProtoMessage, timeout: float | None) -> Any:
        """One try of a call, as Raw._send."""
        s = self._stream
        if s is not None and s.supported:
            from savepoint import _stream  # loaded already, with s

            if method in _stream.FIELDS:
                try:
                    return await s.call(method, req, timeout)
                except _stream.Unsupported:
                    pass  # never handled: send it unary
        return await getattr(self._stub, method)(req, timeout=timeout)

    async def started(self) -> None:
        """Start savepointd on demand if the client's construction left it
        to the first call (nothing answered at the per-user default), in a
        worker thread, so that the event loop goes on while the daemon
        starts; concurrent first calls wait for the one start. A start that
        fails raises UnavailableError here, and the next call tries again."""
        if self._pending is None:
            return
        async with self._starting:
            if self._pending is not None:
                await asyncio.to_thread(self._pending.start)
                self._pending = None

    def close(self) -> None:
        """End the CallStream, if one is open."""
        if self._stream is not None:
            self._stream.close()

    async def _call(self, method: str, req: ProtoMessage, timeout: float | None = None) -> Any:
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        try_ = 0
        until: float | None = None
        await self.started()
        while True:
            try:
                return await self._send(method, req, left(deadline))
            except grpc.RpcError as e:
                if self._autostart is not None and e.code() == grpc.StatusCode.UNAVAILABLE:
                    # The daemon started on demand is gone: start it again in a
                    # worker thread (a launch waits up to seconds for it to
                    # serve), so that the event loop goes on meanwhile; a start
                    # that fails raises here, as retry_wait's would.
                    await asyncio.to_thread(self._autostart.ensure)
                wait = retry_wait(self._retry, self._logger, method, req, e, try_, deadline, until=until)
                if wait is None:
                    raise from_rpc_error(e) from None
                if until is None:
                    until = ready_by(self._retry, None)
                await asyncio.sleep(wait)
                if not await areconnected(self._retry, self._channel, until, deadline):
                    raise from_rpc_error(e) from None
                try_ += 1

    async def SaveCheckpoint(self, request: pb.SaveCheckpointRequest, timeout: float | None = None) -> pb.SaveCheckpointResponse:
        return await self._call("SaveCheckpoint", request, timeout)  # type: ignore[no-any-return]

    async def BeginEffect(self, request: pb.BeginEffectRequest, timeout: float | None = None) -> pb.BeginEffectResponse:
        return await self._call("BeginEffect", request, timeout)  # type: ignore[no-any-return]

    async def RecordEffect(self, request: pb.RecordEffectRequest, timeout: float | None = None) -> pb.RecordEffectResponse:
        return await self._call("RecordEffect", request, timeout)  # type: ignore[no-any-return]

    async def Resume(self, request: pb.ResumeRequest, timeout: float | None = None) -> pb.ResumeResponse:
        return await self._call("Resume", request, timeout)  # type: ignore[no-any-return]

    async def Reconcile(self, request: pb.ReconcileRequest, timeout: float | None = None) -> pb.ReconcileResponse:
        return await self._call("Reconcile", request, timeout)  # type: ignore[no-any-return]

    async def GetSession(self, request: pb.GetSessionRequest, timeout: float | None = None) -> pb.GetSessionResponse:
        return await self._call("GetSession", request, timeout)  # type: ignore[no-any-return]

    async def ListMessages(self, request: pb.ListMessagesRequest, timeout: float | None = None) -> pb.ListMessagesResponse:
        return await self._call("ListMessages", request, timeout)  # type: ignore[no-any-return]

    async def ListSessions(self, request: pb.ListSessionsRequest, timeout: float | None = None) -> pb.ListSessionsResponse:
        return await self._call("ListSessions", request, timeout)  # type: ignore[no-any-return]

    async def DeleteSession(self, request: pb.DeleteSessionRequest, timeout: float | None = None) -> pb.DeleteSessionResponse:
        return await self._call("DeleteSession", request, timeout)  # type: ignore[no-any-return]

    async def Verify(self, request: pb.VerifyRequest, timeout: float | None = None) -> pb.VerifyResponse:
        return await self._call("Verify", request, timeout)  # type: ignore[no-any-return]

    async def GetServerInfo(self, request: pb.GetServerInfoRequest, timeout: float | None = None) -> pb.GetServerInfoResponse:
        return await self._call("GetServerInfo", request, timeout)  # type: ignore[no-any-return]

    async def CompleteSession(self, request: pb.CompleteSessionRequest, timeout: float | None = None) -> pb.CompleteSessionResponse:
        return await self._call("CompleteSession", request, timeout)  # type: ignore[no-any-return]

    async def ListEffects(self, request: pb.ListEffectsRequest, timeout: float | None = None) -> pb.ListEffectsResponse:
        return await self._call("ListEffects", request, timeout)  # type: ignore[no-any-return]

    async def ForkSession(self, request: pb.ForkSessionRequest, timeout: float | None = None) -> pb.ForkSessionResponse:
        return await self._call("ForkSession", request, timeout)  # type: ignore[no-any-return]

    async def RewindSession(self, request: pb.RewindSessionRequest, timeout: float | None = None) -> pb.RewindSessionResponse:
        return await self._call("RewindSession", request, timeout)  # type: ignore[no-any-return]

    async def ResolveEffect(self, request: pb.ResolveEffectRequest, timeout: float | None = None) -> pb.ResolveEffectResponse:
        return await self._call("ResolveEffect", request, timeout)  # type: ignore[no-any-return]

    async def ApproveEffect(self, request: pb.ApproveEffectRequest, timeout: float | None = None) -> pb.ApproveEffectResponse:
        return await self._call("ApproveEffect", request, timeout)  # type: ignore[no-any-return]


class AsyncClient:
    """A grpc.aio connection to savepointd, with the options of
    savepoint.Client. Create it inside the event loop that uses it; close it
    with ``await close()`` or ``async with``. ``wait_ready`` is honoured by
    ``await client.wait_ready()`` and by ``async with``. The constructor
    never blocks: a daemon to start on demand is started by the first call
    (or wait_ready), in a worker thread."""

    def __init__(
        self,
        address: str | None = None,
        *,
        tls: TLSConfig | bool | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        wait_ready: float | None = None,
        timeout: float | None = None,
        logger: logging.Logger | None = None,
        tool_results: ToolResultsFunc = anthropic_tool_results,
        on_ledger_error: LedgerErrorHandler | None = None,
        tool_hook: ToolHook | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        approval_required: Sequence[str] = (),
        call_stream: bool = False,
    ) -> None:
        # A daemon to start on demand is started at the first call, not
        # here: the constructor never blocks the event loop.
        to = resolve(address, tls, channel_options, defer_start=True)
        self.address = to.address
        self._channel = to.aio_channel()
        self._wait_ready = wait_ready
        self._opts = _core.Options(
            tool_results=tool_results, tool_hook=tool_hook, on_ledger_error=on_ledger_error, logger=logger or _core.LOGGER,
            approval_required=frozenset(approval_required),
        )
        self.raw = AsyncRaw(self._channel, retry, self._opts.logger, timeout, to.autostart, call_stream, to.start_pending)

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the daemon accepts the connection, at most ``timeout``
        seconds (default: the constructor's wait_ready, else no limit);
        raises UnavailableError after it."""
        limit = self._wait_ready if timeout is None else timeout
        try:
            await asyncio.wait_for(self._ready(), limit)
        except TimeoutError:
            raise UnavailableError(
                f"savepointd at {self.address} not ready after {limit}s", code=grpc.StatusCode.UNAVAILABLE
            ) from None

    async def _ready(self) -> None:
        await self.raw.started()
        await self._channel.channel_ready()

    async def close(self) -> None:
        """Close the connection."""
        self.raw.close()
        await self._channel.close(None)

    async def __aenter__(self) -> AsyncClient:
        if self._wait_ready is not None:
            await self.wait_ready()
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def start(
        self,
        session_id: str,
        task: str,
        *,
        messages: Sequence[Message] = (),
        state_json: str = "",
        labels: Mapping[str, str] | None = None,
        replace: bool = False,
    ) -> AsyncSession:
        """Create a fresh session and own it; see savepoint.Client.start."""
        s = AsyncSession(self, session_id)
        m = _core.Meta(task=task, state_json=state_json, labels=dict(labels or {}))
        await arun_steps(self.raw, s._start_steps(m, messages, replace))
        return s

    async def approve_effect(
        self, session_id: str, tool_use_id: str, *, deny: bool = False, note: str = "", decided_by: str = "", input_digest: bytes = b""
    ) -> pb.ApproveEffectResponse:
        """Approve (or with deny, deny) a tool use of session_id that waits
        for approval, as a person: no epoch. The approval holds for the call
        and its input only (input_digest, when given, must be the digest the
        call waits with: ApprovalInputMismatchError otherwise), and the
        begin that uses it spends it, once. A denial's note is the tool
        result the model is given. Another decision made before is
        ApprovalConflictError; the same one again answers already_decided."""
        return await self.raw.ApproveEffect(_core.approve_request(session_id, tool_use_id, deny, note, decided_by, input_digest))

    async def resume(self, session_id: str, *, reopen: bool = False) -> AsyncSession:
        """Take ownership of a session and load it whole, ``reopen`` making a
        completed or failed one active again; see savepoint.Client.resume."""
        s = AsyncSession(self, session_id)
        await arun_steps(self.raw, s._resume_steps(reopen))
        return s

    async def get_session(self, session_id: str, revision: int | None = None) -> tuple[pb.Checkpoint, list[Message]]:
        """See savepoint.Client.get_session."""
        return await arun_steps(self.raw, get_session_steps(session_id, revision))

    async def list_sessions(self, label_filter: Mapping[str, str] | None = None, *, page_size: int = 0) -> AsyncIterator[pb.SessionSummary]:
        """See savepoint.Client.list_sessions; iterate with ``async for``."""
        token = ""
        while True:
            r = await self.raw.ListSessions(pb.ListSessionsRequest(page_size=page_size, page_token=token, label_filter=label_filter or {}))
            for x in r.sessions:
                yield x
            token = r.next_page_token
            if not token:
                return

    def watch_sessions(
        self,
        label_filter: Mapping[str, str] | None = None,
        *,
        status_filter: SessionStatus | None = None,
        has_pending_tool_uses: bool = False,
        min_idle: float | timedelta | None = None,
        heartbeat_interval: float | timedelta | None = None,
    ) -> AsyncSessionWatch:
        """See savepoint.Client.watch_sessions; iterate with ``async for``,
        in an ``async with`` block (or ``await watch.close()``) to end the
        call. The call starts at the first iteration."""
        req = _core.watch_request(label_filter, status_filter, has_pending_tool_uses, min_idle, heartbeat_interval)
        return AsyncSessionWatch(self.raw._stub, req, self.raw.started)


class AsyncSessionWatch:
    """The events of one AsyncClient.watch_sessions call: an async iterator
    of WatchEvent that ends only with close() (quietly) or an error (a
    SavepointError: UnavailableError when the daemon stops). A cancelled
    task's CancelledError passes through."""

    def __init__(self, stub: Any, req: pb.WatchSessionsRequest, started: Callable[[], Awaitable[None]] | None = None) -> None:
        self._stub = stub
        self._req = req
        self._started = started
        self._call: Any = None
        self._closed = False

    def __aiter__(self) -> AsyncSessionWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._closed:
            raise StopAsyncIteration
        if self._call is None:
            if self._started is not None:
                await self._started()
            self._call = self._stub.WatchSessions(self._req)
        while True:
            try:
                r = await self._call.read()
            except asyncio.CancelledError:
                # grpc.aio raises it also when close() cancelled the call.
                task = asyncio.current_task()
                if self._closed and (task is None or not task.cancelling()):
                    raise StopAsyncIteration from None
                raise
            except grpc.aio.AioRpcError as e:
                if self._closed:
                    raise StopAsyncIteration from None
                raise from_rpc_error(e) from None
            if r is grpc.aio.EOF:  # type: ignore[attr-defined]
                raise StopAsyncIteration
            ev = WatchEvent.from_proto(r)
            if ev is not None:
                return ev

    async def close(self) -> None:
        """End the call; the iteration ends, also one waiting in another
        task."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    async def __aenter__(self) -> AsyncSessionWatch:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def __del__(self) -> None:
        if not self._closed and self._call is not None:
            with contextlib.suppress(Exception):  # the loop may be closed
                self._call.cancel()


class AsyncSession(_core.SessionState):
    """savepoint.Session for asyncio: the same methods, as coroutines. Saves
    of one session are serialized; run_tool may run several tools of one
    turn at once (asyncio.gather), between point_a and point_b."""

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        super().__init__(client._opts, session_id)
        self._raw = client.raw
        self._lock = asyncio.Lock()

    async def _save(self, m: _core.Meta, keep: int | None, app: Sequence[Message], pending: Sequence[pb.ToolUse]) -> None:
        await arun_steps(self._raw, self._save_steps(m, keep, app, pending))

    async def point_a(self, assistant: Message, calls: Sequence[ToolUse] = ()) -> None:
        """See savepoint.Session.point_a."""
        async with self._lock:
            m, pending = self._point_a(calls)
            await self._save(m, None, [assistant], pending)

    async def point_b(self, results: Sequence[ToolResult]) -> None:
        """See savepoint.Session.point_b."""
        async with self._lock:
            await arun_steps(self._raw, self._point_b_steps(results))

    async def save(
        self,
        *,
        task: str | None = None,
        turn: int | None = None,
        tokens_used: int | None = None,
        state_json: str | None = None,
        labels: Mapping[str, str] | None = None,
        keep_messages: int | None = None,
        append: Sequence[Message] = (),
    ) -> None:
        """See savepoint.Session.save."""
        async with self._lock:
            m = self._save_options(task, turn, tokens_used, state_json, labels, keep_messages, append)
            await self._save(m, keep_messages, append, self._pending)

    async def complete(self, status: SessionStatus = SessionStatus.COMPLETED, final_output: str = "") -> None:
        """See savepoint.Session.complete."""
        async with self._lock:
            await arun_steps(self._raw, self._complete_steps(status, final_output))

    async def delete(self) -> None:
        """See savepoint.Session.delete."""
        async with self._lock:
            await self._raw.DeleteSession(pb.DeleteSessionRequest(session_id=self._id, epoch=self._epoch))

    async def run_tool(self, call: ToolUse, fn: Callable[[str], Awaitable[ToolContent] | ToolContent]) -> ToolResult:
        """See savepoint.Session.run_tool; fn may be a coroutine function."""
        p, epoch = self._claim(call)
        return await self._execute(p, epoch, "", fn)

    async def run_tools(self, calls: Sequence[ToolUse], run: AsyncToolFunc) -> list[ToolResult]:
        """Run calls one after the other with run_tool; see
        savepoint.Session.run_tools."""
        out = []
        for c in calls:
            out.append(await self.run_tool(c, lambda key, c=c: run(c, key)))  # type: ignore[misc]
        return out

    async def reconcile(self, run: AsyncToolFunc | None = None, verify: AsyncVerifyFunc | None = None) -> list[ToolResult]:
        """See savepoint.Session.reconcile; run and verify may be coroutine
        functions."""
        rev, epoch = self._revision, self._epoch
        resolutions = await arun_steps(self._raw, self._reconcile_steps(rev))
        results: list[ToolResult] = []
        for res in resolutions:
            if res.decision == pb.DECISION_IN_DOUBT and verify is not None:
                v = await self._averified(res, verify)
                if v is not None:
                    resp = await self._raw.ResolveEffect(self._resolve_request(res, epoch, v))
                    after = self._after_verify(res, resp, v)
                    if isinstance(after, ToolResult):
                        results.append(after)
                        continue
                    res = after
            d = self._decide(res, run is not None)
            if isinstance(d, ToolResult):
                r = d
            else:
                assert run is not None
                call = ToolUse.from_proto(d)
                r = await self._execute(d, epoch, res.idempotency_key, lambda key: run(call, key))
            results.append(r if r.decision == Decision.DENIED else replace(r, decision=Decision(res.decision)))
        return results

    async def register_tool_use(self, call: ToolUse) -> Registration:
        """See savepoint.Session.register_tool_use."""
        return self._registration(await self._raw.BeginEffect(self._register_request(call)))

    async def record_tool_use(self, tool_use_id: str, output: str, *, is_error: bool = False) -> pb.Effect:
        """See savepoint.Session.record_tool_use. Shielded: a tool that ran
        is recorded even when the caller's task is cancelled meanwhile."""
        req = self._tool_use_record_request(tool_use_id, output, is_error, False)
        return (await asyncio.shield(self._raw.RecordEffect(req, timeout=_core.RECORD_TIMEOUT))).effect

    async def refuse_tool_use(self, tool_use_id: str, reason: str) -> pb.Effect:
        """See savepoint.Session.refuse_tool_use."""
        return (await self._raw.RecordEffect(self._tool_use_record_request(tool_use_id, reason, True, True))).effect

    async def reconcile_tool_uses(self, tool_use_ids: Sequence[str]) -> list[pb.Resolution]:
        """See savepoint.Session.reconcile_tool_uses."""
        return await arun_steps(self._raw, self._ledger_reconcile_steps(tool_use_ids))

    async def _averified(self, res: pb.Resolution, verify: AsyncVerifyFunc) -> Verified | None:
        """Ask verify about the tool use in doubt res: its definite answer,
        or None to leave it in doubt (unknown, or verify raised)."""
        try:
            out = verify(ToolUse.from_proto(res.tool_use), res.idempotency_key)
            v = await out if inspect.isawaitable(out) else out
        except Exception as e:
            self._verify_failed(res, e)
            return None
        return self._definite(res, v)

    async def _execute(self, p: pb.ToolUse, epoch: int, key: str, fn: Callable[[str], Awaitable[ToolContent] | ToolContent]) -> ToolResult:
        if not _core.is_read_only(p) or self._requires_approval(p):
            try:
                resp = await self._raw.BeginEffect(self._begin_request(p, epoch))
            except SavepointError as e:
                raise self._begin_failed(p, e) from e
            if resp.HasField("duplicate"):
                return self._duplicate_result(p, resp.duplicate)
            denied = self._gated(p, resp)
            if denied is not None:
                try:
                    await self._raw.RecordEffect(self._refused_request(p, denied), timeout=_core.RECORD_TIMEOUT)
                except SavepointError as e:
                    return self._after_record(p, denied, e)
                return self._after_record(p, denied, None)
            key = resp.idempotency_key
            self._event(ToolStage.BEGUN, p)
        output: object = None
        exc: BaseException | None = None
        try:
            out = fn(key)
            output = await out if inspect.isawaitable(out) else out
        except Exception as e:
            exc = e
        r, bad = self._after_run(p, output, exc)
        if bad is not None:
            return self._after_record(p, r, bad)
        try:
            await self._record(p, r)
        except SavepointError as e:
            return self._after_record(p, r, e)
        return self._after_record(p, r, None)

    async def _record(self, p: pb.ToolUse, r: ToolResult) -> None:
        # Shielded: a tool that ran is recorded even when the caller's task is
        # cancelled meanwhile.
        await asyncio.shield(self._raw.RecordEffect(self._record_request(p, r), timeout=_core.RECORD_TIMEOUT))
