"""The synchronous client: Client connects to savepointd, Session does the
protocol's bookkeeping. savepoint.aio has the same API on grpc.aio."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from google.protobuf.message import Message as ProtoMessage

from savepoint import _core
from savepoint._retry import DEFAULT_RETRY_POLICY, RetryPolicy, left, ready_by, reconnected, retry_wait
from savepoint._steps import get_session_steps, run_steps
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

R = TypeVar("R", bound=ProtoMessage)

VerifyFunc = Callable[[ToolUse, str], Verified]
"""Asks the world whether a tool use in doubt took effect: given the call and
the idempotency key it was begun with ("" if never begun), it returns
Verified.done(output), Verified.not_done() or Verified.unknown(); an
exception counts as unknown."""

ToolFunc = Callable[[ToolUse, str], ToolContent]
"""Runs a tool: given the call and the idempotency key to pass to an external
API that accepts one ("" for read-only tools), it returns the tool's output;
an exception is the tool's failure and becomes an is_error result with its
text."""


class Raw:
    """The generated gRPC stub's calls, each with the client's retries (for
    the calls safe to repeat, on UNAVAILABLE) and error translation: a failed
    call raises a SavepointError subclass. Method names are the RPCs'."""

    def __init__(
        self,
        channel: grpc.Channel,
        retry: RetryPolicy,
        logger: logging.Logger,
        timeout: float | None,
        autostart: Any = None,
        call_stream: bool = False,
    ) -> None:
        self._autostart = autostart
        self._channel = channel
        self._stub = pb_grpc.SavepointServiceStub(channel)  # type: ignore[no-untyped-call]
        self._stream: _stream.CallStream | None = None
        if call_stream:
            # Imported here: the stream's stubs load graph.proto's, which a
            # client on unary calls never needs (tests/test_import.py).
            from savepoint import _stream

            self._stream = _stream.CallStream(channel)
        self._retry = retry
        self._logger = logger
        self._timeout = timeout

    def _send(self, method: str, req: ProtoMessage, timeout: float | None) -> Any:
        """One try of a call: on the CallStream when the daemon serves one,
        else unary."""
        s = self._stream
        if s is not None and s.supported:
            from savepoint import _stream  # loaded already, with s

            if method in _stream.FIELDS:
                try:
                    return s.call(method, req, timeout)
                except _stream.Unsupported:
                    pass  # never handled: send it unary
        return getattr(self._stub, method)(req, timeout=timeout)

    def close(self) -> None:
        """End the CallStream, if one is open."""
        if self._stream is not None:
            self._stream.close()

    def _call(self, method: str, req: ProtoMessage, timeout: float | None = None) -> Any:
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        try_ = 0
        until: float | None = None
        while True:
            try:
                return self._send(method, req, left(deadline))
            except grpc.RpcError as e:
                wait = retry_wait(self._retry, self._logger, method, req, e, try_, deadline, self._autostart, until)
                if wait is None:
                    raise from_rpc_error(e) from None
                if until is None:
                    until = ready_by(self._retry, None)
                time.sleep(wait)
                if not reconnected(self._retry, self._channel, until, deadline):
                    raise from_rpc_error(e) from None
                try_ += 1

    def SaveCheckpoint(self, request: pb.SaveCheckpointRequest, timeout: float | None = None) -> pb.SaveCheckpointResponse:
        return self._call("SaveCheckpoint", request, timeout)  # type: ignore[no-any-return]

    def BeginEffect(self, request: pb.BeginEffectRequest, timeout: float | None = None) -> pb.BeginEffectResponse:
        return self._call("BeginEffect", request, timeout)  # type: ignore[no-any-return]

    def RecordEffect(self, request: pb.RecordEffectRequest, timeout: float | None = None) -> pb.RecordEffectResponse:
        return self._call("RecordEffect", request, timeout)  # type: ignore[no-any-return]

    def Resume(self, request: pb.ResumeRequest, timeout: float | None = None) -> pb.ResumeResponse:
        return self._call("Resume", request, timeout)  # type: ignore[no-any-return]

    def Reconcile(self, request: pb.ReconcileRequest, timeout: float | None = None) -> pb.ReconcileResponse:
        return self._call("Reconcile", request, timeout)  # type: ignore[no-any-return]

    def GetSession(self, request: pb.GetSessionRequest, timeout: float | None = None) -> pb.GetSessionResponse:
        return self._call("GetSession", request, timeout)  # type: ignore[no-any-return]

    def ListMessages(self, request: pb.ListMessagesRequest, timeout: float | None = None) -> pb.ListMessagesResponse:
        return self._call("ListMessages", request, timeout)  # type: ignore[no-any-return]

    def ListSessions(self, request: pb.ListSessionsRequest, timeout: float | None = None) -> pb.ListSessionsResponse:
        return self._call("ListSessions", request, timeout)  # type: ignore[no-any-return]

    def DeleteSession(self, request: pb.DeleteSessionRequest, timeout: float | None = None) -> pb.DeleteSessionResponse:
        return self._call("DeleteSession", request, timeout)  # type: ignore[no-any-return]

    def Verify(self, request: pb.VerifyRequest, timeout: float | None = None) -> pb.VerifyResponse:
        return self._call("Verify", request, timeout)  # type: ignore[no-any-return]

    def GetServerInfo(self, request: pb.GetServerInfoRequest, timeout: float | None = None) -> pb.GetServerInfoResponse:
        return self._call("GetServerInfo", request, timeout)  # type: ignore[no-any-return]

    def CompleteSession(self, request: pb.CompleteSessionRequest, timeout: float | None = None) -> pb.CompleteSessionResponse:
        return self._call("CompleteSession", request, timeout)  # type: ignore[no-any-return]

    def ListEffects(self, request: pb.ListEffectsRequest, timeout: float | None = None) -> pb.ListEffectsResponse:
        return self._call("ListEffects", request, timeout)  # type: ignore[no-any-return]

    def ForkSession(self, request: pb.ForkSessionRequest, timeout: float | None = None) -> pb.ForkSessionResponse:
        return self._call("ForkSession", request, timeout)  # type: ignore[no-any-return]

    def RewindSession(self, request: pb.RewindSessionRequest, timeout: float | None = None) -> pb.RewindSessionResponse:
        return self._call("RewindSession", request, timeout)  # type: ignore[no-any-return]

    def ResolveEffect(self, request: pb.ResolveEffectRequest, timeout: float | None = None) -> pb.ResolveEffectResponse:
        return self._call("ResolveEffect", request, timeout)  # type: ignore[no-any-return]

    def ApproveEffect(self, request: pb.ApproveEffectRequest, timeout: float | None = None) -> pb.ApproveEffectResponse:
        return self._call("ApproveEffect", request, timeout)  # type: ignore[no-any-return]


class Client:
    """A connection to savepointd; safe for use from several threads.

    ``address`` is "unix:PATH" or "HOST:PORT"; None means default_addr()
    ($SAVEPOINT_ADDR, else the XDG runtime socket, else
    /run/savepoint/savepoint.sock). ``tls`` None takes TLS from
    SAVEPOINT_TLS_CA / SAVEPOINT_TLS_CERT / SAVEPOINT_TLS_KEY when any is set
    (else plaintext, for a local daemon); False forces plaintext; a TLSConfig
    sets it. ``wait_ready`` (seconds) makes the constructor wait until the
    daemon accepts the connection, raising UnavailableError after it; None
    returns at once and the first call reports an unreachable daemon.
    ``timeout`` bounds each call, retries included (None: no deadline).
    ``tool_results`` turns tool results into point_b's messages (default
    anthropic_tool_results); ``on_ledger_error`` is called, besides an error
    log, when a tool ran but its outcome could not be recorded; ``tool_hook``
    observes every ToolStage of every tool use, synchronously, and cannot
    change it (for logging, tracing and crash tests). ``call_stream`` True
    sends the calls on one CallStream when the daemon serves it, unary
    otherwise (docs/api.md, CallStream); the default, False, sends every
    call unary: with grpcio the stream's extra thread hops cost more than
    the transport it saves (docs/api.md). The
    client never logs message or tool payloads. Close it with close() or a
    with block.
    """

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
        to = resolve(address, tls, channel_options)
        self.address = to.address
        self._channel = to.channel()
        self._opts = _core.Options(
            tool_results=tool_results, tool_hook=tool_hook, on_ledger_error=on_ledger_error, logger=logger or _core.LOGGER,
            approval_required=frozenset(approval_required),
        )
        self.raw = Raw(self._channel, retry, self._opts.logger, timeout, to.autostart, call_stream)
        if wait_ready is not None:
            try:
                grpc.channel_ready_future(self._channel).result(timeout=wait_ready)
            except grpc.FutureTimeoutError:
                self._channel.close()
                raise UnavailableError(
                    f"savepointd at {self.address} not ready after {wait_ready}s", code=grpc.StatusCode.UNAVAILABLE
                ) from None

    def close(self) -> None:
        """Close the connection."""
        self.raw.close()
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(
        self,
        session_id: str,
        task: str,
        *,
        messages: Sequence[Message] = (),
        state_json: str = "",
        labels: Mapping[str, str] | None = None,
        replace: bool = False,
    ) -> Session:
        """Create a fresh session (revision 1, turn 0) and own it, with the
        initial history ``messages`` (such as the user's prompt), opaque
        ``state_json`` and ``labels``. An existing session raises
        SessionExistsError unless ``replace``, which deletes it (history and
        ledger, fencing its owner) first."""
        s = Session(self, session_id)
        m = _core.Meta(task=task, state_json=state_json, labels=dict(labels or {}))
        run_steps(self.raw, s._start_steps(m, messages, replace))
        return s

    def approve_effect(
        self, session_id: str, tool_use_id: str, *, deny: bool = False, note: str = "", decided_by: str = "", input_digest: bytes = b""
    ) -> pb.ApproveEffectResponse:
        """Approve (or with deny, deny) a tool use of session_id that waits
        for approval, as a person: no epoch. The approval holds for the call
        and its input only (input_digest, when given, must be the digest the
        call waits with: ApprovalInputMismatchError otherwise), and the
        begin that uses it spends it, once. A denial's note is the tool
        result the model is given. Another decision made before is
        ApprovalConflictError; the same one again answers already_decided."""
        return self.raw.ApproveEffect(_core.approve_request(session_id, tool_use_id, deny, note, decided_by, input_digest))

    def resume(self, session_id: str, *, reopen: bool = False) -> Session:
        """Take ownership of an existing session (fencing any process that
        owned it before) and load its latest revision with its whole history.
        A session that does not exist raises SessionNotFoundError. If the
        revision has pending tool uses, call reconcile and then point_b with
        its results. A completed or failed session is loaded as it is, and
        saves to it raise SessionCompletedError; ``reopen`` makes it active
        again (its status ACTIVE, its final output cleared) so it continues."""
        s = Session(self, session_id)
        run_steps(self.raw, s._resume_steps(reopen))
        return s

    def get_session(self, session_id: str, revision: int | None = None) -> tuple[pb.Checkpoint, list[Message]]:
        """Read a kept revision (None: the latest) with its whole history,
        without taking ownership: the checkpoint and every message."""
        return run_steps(self.raw, get_session_steps(session_id, revision))

    def list_sessions(self, label_filter: Mapping[str, str] | None = None, *, page_size: int = 0) -> Iterator[pb.SessionSummary]:
        """Yield every session whose labels include all of label_filter's
        pairs, in session_id order, fetching pages of ``page_size`` (0: the
        daemon's default) as it goes."""
        token = ""
        while True:
            r = self.raw.ListSessions(pb.ListSessionsRequest(page_size=page_size, page_token=token, label_filter=label_filter or {}))
            yield from r.sessions
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
    ) -> SessionWatch:
        """Watch the sessions that change (WatchSessions): iterate the
        returned SessionWatch for a WatchEvent per durable change, CHANGED
        with the session's summary while the filters select it, REMOVED when
        they stop selecting it or it is deleted, RESYNC when events were
        dropped, and a HEARTBEAT first (once the watch is registered: list
        the sessions after it and apply the events from there) and then
        every ``heartbeat_interval`` in which nothing else was sent.

        The filters are list_sessions' and ListSessions': ``label_filter``
        keeps sessions whose labels include every pair, ``status_filter``
        one status (None: any), ``has_pending_tool_uses`` sessions with a
        pending tool use, ``min_idle`` sessions not updated for that long
        (seconds or a timedelta; a session becomes CHANGED when its idle
        time reaches it). ``heartbeat_interval`` is seconds or a timedelta,
        None for the daemon's 10 s; 0.1 s to 1 h. A filter the daemon
        refuses raises InvalidArgumentError (or a subclass) from the first
        next().

        The watch never ends by itself and has no deadline (the client's
        ``timeout`` does not apply) and is not retried: when the daemon
        stops, the next next() raises UnavailableError; watch again once it
        is back. close() it, or use it in a with block, to end the call;
        after close() the iteration ends quietly, also in another thread."""
        req = _core.watch_request(label_filter, status_filter, has_pending_tool_uses, min_idle, heartbeat_interval)
        return SessionWatch(self.raw._stub.WatchSessions(req))


class SessionWatch:
    """The events of one Client.watch_sessions call: an iterator of
    WatchEvent that ends only with close() (quietly) or an error (a
    SavepointError: UnavailableError when the daemon stops). Closed when
    it is garbage-collected too, so a loop that drops it stops the call."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._closed = False

    def __iter__(self) -> SessionWatch:
        return self

    def __next__(self) -> WatchEvent:
        while True:
            try:
                r = next(self._call)
            except grpc.RpcError as e:
                if self._closed:
                    raise StopIteration from None
                raise from_rpc_error(e) from None
            ev = WatchEvent.from_proto(r)
            if ev is not None:
                return ev

    def close(self) -> None:
        """End the call; the iteration ends, also one waiting in another
        thread."""
        self._closed = True
        self._call.cancel()

    def __enter__(self) -> SessionWatch:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._closed:
            with contextlib.suppress(Exception):  # at exit, grpc may be gone
                self.close()


class Session(_core.SessionState):
    """One agent task as the daemon keeps it. It carries the session id,
    revision, epoch, history and pending tool uses, so its methods need none
    of them: every save builds on the revision the last one made, under the
    epoch the session owns. Methods may be called from several threads, and
    run_tool may run several tools of one turn at once, but the turn's
    point_a, run_tool calls and point_b must happen in that order. Make one
    with Client.start or Client.resume."""

    def __init__(self, client: Client, session_id: str) -> None:
        super().__init__(client._opts, session_id)
        self._raw = client.raw
        self._lock = threading.RLock()

    def _save(self, m: _core.Meta, keep: int | None, app: Sequence[Message], pending: Sequence[pb.ToolUse]) -> None:
        run_steps(self._raw, self._save_steps(m, keep, app, pending))

    def point_a(self, assistant: Message, calls: Sequence[ToolUse] = ()) -> None:
        """Save the assistant message that names calls and make calls the
        pending tool uses, before any of them runs; count a new turn. Run each
        call with run_tool, then answer them all with point_b. With no calls
        (the model's final answer) it only appends the message."""
        with self._lock:
            m, pending = self._point_a(calls)
            self._save(m, None, [assistant], pending)

    def point_b(self, results: Sequence[ToolResult]) -> None:
        """Append the message(s) answering the pending tool uses, made from
        results by the client's tool_results function, and clear the pending
        set. The results must answer every pending tool use exactly once (in
        any order; they are appended in the order the tool uses were named)
        and come from run_tool or reconcile. A result whose outcome missed the
        ledger is recorded once more first. With nothing pending and no
        results, it does nothing."""
        with self._lock:
            run_steps(self._raw, self._point_b_steps(results))

    def save(
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
        """Make a new revision with the changes given; None keeps a value.
        ``state_json`` "" removes the state; ``labels`` replaces them (an
        empty mapping removes them); ``keep_messages`` rewinds or compacts
        (only that many messages are kept before ``append``; older revisions
        stay readable). Pending tool uses stay pending; while any are, save
        refuses to append or rewind (ToolUsesPendingError)."""
        with self._lock:
            m = self._save_options(task, turn, tokens_used, state_json, labels, keep_messages, append)
            self._save(m, keep_messages, append, self._pending)

    def complete(self, status: SessionStatus = SessionStatus.COMPLETED, final_output: str = "") -> None:
        """Mark the session COMPLETED (the task is done) or FAILED with its
        final output, under the epoch it owns, without making a revision, as
        an agent does when it finishes: ``savepoint ls`` shows it so, the
        daemon refuses its saves and BeginEffect from then on
        (SessionCompletedError), and a later resume loads it without taking
        it over. Completing it again with the same status and output
        succeeds; another raises SessionCompletedError."""
        with self._lock:
            run_steps(self._raw, self._complete_steps(status, final_output))

    def delete(self) -> None:
        """Delete the session (checkpoints, history and ledger) under the
        epoch it owns. The Session must not be used afterwards."""
        with self._lock:
            self._raw.DeleteSession(pb.DeleteSessionRequest(session_id=self._id, epoch=self._epoch))

    def add_tokens(self, n: int) -> None:
        with self._lock:
            super().add_tokens(n)

    def run_tool(self, call: ToolUse, fn: Callable[[str], ToolContent]) -> ToolResult:
        """Run one pending tool use and record its outcome in the ledger:
        execute first, record after. Unless the call is READ_ONLY,
        BeginEffect marks it as dispatched first; if that fails the tool does
        not run and the error is raised (SessionFencedError: another process
        owns the session; stop). ``fn(key)`` gets the idempotency key and
        returns the output; its exception is the tool's failure, recorded
        and returned as an is_error result. See ToolResult.ledger_error for a
        failed record. Each pending tool use runs at most once per session."""
        with self._lock:
            p, epoch = self._claim(call)
        return self._execute(p, epoch, "", fn)

    def run_tools(self, calls: Sequence[ToolUse], run: ToolFunc) -> list[ToolResult]:
        """Run calls one after the other with run_tool and return their
        results for point_b. It stops at the first call that could not run."""
        return [self.run_tool(c, lambda key, c=c: run(c, key)) for c in calls]  # type: ignore[misc]

    def reconcile(self, run: ToolFunc | None = None, verify: VerifyFunc | None = None) -> list[ToolResult]:
        """Ask the daemon what to do with each pending tool use after a resume
        and return the results to pass to point_b, in the order the tool uses
        were named: REUSE gives the recorded outcome without running anything;
        RUN runs the tool with run (after BeginEffect unless it is READ_ONLY,
        with the key it was begun with, if any) and records it; IN_DOUBT gives
        an is_error result with the daemon's text. run may be None only if no
        tool use needs to run. With nothing pending it returns no results.

        verify(call, key), when given, is asked about each tool use in doubt
        (key: the idempotency key it was begun with, "" if never begun) and
        its answer recorded (ResolveEffect, resolver VERIFY): Verified.done
        is reused as the result (decision REUSE), Verified.not_done runs the
        tool again with the same key (RUN); unknown, or an exception, leaves
        it in doubt."""
        with self._lock:
            rev, epoch = self._revision, self._epoch
        resolutions = run_steps(self._raw, self._reconcile_steps(rev))
        results: list[ToolResult] = []
        for res in resolutions:
            if res.decision == pb.DECISION_IN_DOUBT and verify is not None:
                v = self._verified(res, verify)
                if v is not None:
                    resp = self._raw.ResolveEffect(self._resolve_request(res, epoch, v))
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
                r = self._execute(d, epoch, res.idempotency_key, lambda key: run(call, key))
            results.append(r if r.decision == Decision.DENIED else replace(r, decision=Decision(res.decision)))
        return results

    def register_tool_use(self, call: ToolUse) -> Registration:
        """Make call pending and begun in one durable write (BeginEffect with
        tool_use), without point_a or a new revision, for code that sees one
        call at a time just before it runs, such as an agent framework's
        hooks; the calls of one turn may register in parallel. Run the tool
        only when the returned ``effect`` is None, then record_tool_use its
        outcome. SessionFencedError: another process owns the session."""
        with self._lock:
            req = self._register_request(call)
        return self._registration(self._raw.BeginEffect(req))

    def record_tool_use(self, tool_use_id: str, output: str, *, is_error: bool = False) -> pb.Effect:
        """Write the outcome of a tool use that ran to the ledger
        (RecordEffect), whatever the session's epoch; the first record
        stands. ``is_error`` marks a tool that ran and failed."""
        req = self._tool_use_record_request(tool_use_id, output, is_error, False)
        return self._raw.RecordEffect(req, timeout=_core.RECORD_TIMEOUT).effect

    def refuse_tool_use(self, tool_use_id: str, reason: str) -> pb.Effect:
        """Record that a tool use was refused before it ran (a permission
        check said no), with ``reason`` as its error output: reconcile then
        reuses the refusal instead of reporting the call in doubt."""
        return self._raw.RecordEffect(self._tool_use_record_request(tool_use_id, reason, True, True)).effect

    def reconcile_tool_uses(self, tool_use_ids: Sequence[str]) -> list[pb.Resolution]:
        """Decide the named tool uses from the ledger (Reconcile with
        tool_use_ids), in the order given: for calls registered with
        register_tool_use and left without a result in a framework's own
        transcript. A call the ledger does not know was never begun
        (DECISION_RUN). It writes and runs nothing."""
        return run_steps(self._raw, self._ledger_reconcile_steps(tool_use_ids))

    def _verified(self, res: pb.Resolution, verify: VerifyFunc) -> Verified | None:
        """Ask verify about the tool use in doubt res: its definite answer,
        or None to leave it in doubt (unknown, or verify raised)."""
        try:
            v = verify(ToolUse.from_proto(res.tool_use), res.idempotency_key)
        except Exception as e:
            self._verify_failed(res, e)
            return None
        return self._definite(res, v)

    def _guard(self) -> threading.RLock:
        return self._lock

    def _execute(self, p: pb.ToolUse, epoch: int, key: str, fn: Callable[[str], ToolContent]) -> ToolResult:
        """The one place a tool runs: BeginEffect unless READ_ONLY, then fn,
        then RecordEffect of fn's real outcome. The caller marked p started."""
        if not _core.is_read_only(p) or self._requires_approval(p):
            try:
                resp = self._raw.BeginEffect(self._begin_request(p, epoch))
            except SavepointError as e:
                raise self._begin_failed(p, e) from e
            if resp.HasField("duplicate"):
                return self._duplicate_result(p, resp.duplicate)
            denied = self._gated(p, resp)
            if denied is not None:
                try:
                    self._raw.RecordEffect(self._refused_request(p, denied), timeout=_core.RECORD_TIMEOUT)
                except SavepointError as e:
                    return self._after_record(p, denied, e)
                return self._after_record(p, denied, None)
            key = resp.idempotency_key
            self._event(ToolStage.BEGUN, p)
        output: object = None
        exc: BaseException | None = None
        try:
            output = fn(key)
        except Exception as e:
            exc = e
        r, bad = self._after_run(p, output, exc)
        if bad is not None:
            return self._after_record(p, r, bad)
        try:
            self._record(p, r)
        except SavepointError as e:
            return self._after_record(p, r, e)
        return self._after_record(p, r, None)

    def _record(self, p: pb.ToolUse, r: ToolResult) -> None:
        self._raw.RecordEffect(self._record_request(p, r), timeout=_core.RECORD_TIMEOUT)
