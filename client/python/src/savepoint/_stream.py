"""CallStream: the daemon's unary calls, and GetCheckpoint, carried on one
bidirectional stream per channel (CallStreamService), so that a busy client
pays the transport once per stream instead of once per call.

A call sent on the stream fails as its unary call would: its answer's error
is raised as a grpc.RpcError with the same code, details and
grpc-status-details-bin trailer, so the client's error translation and
retries (retry_wait: only calls the proto declares safe to repeat) apply
unchanged. A stream that breaks fails its unanswered calls with the
stream's error (UNAVAILABLE when the daemon went away): they are retried,
on a new stream, only when the unary call would be. A daemon that serves no
CallStream (UNIMPLEMENTED, an older daemon or savepointd --no-call-stream)
is remembered per channel, and its calls, which it never handled, go
unary."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any

import grpc

from savepoint.v1 import graph_pb2 as gpb
from savepoint.v1 import savepoint_pb2 as pb
from savepoint.v1 import stream_pb2 as spb
from savepoint.v1 import stream_pb2_grpc as spb_grpc

_STATUS_DETAILS_KEY = "grpc-status-details-bin"

# The field of CallStreamRequest (and CallStreamResponse) of each RPC it
# carries, by method name, read from the proto: "SaveCheckpoint" ->
# "save_checkpoint".
FIELDS: dict[str, str] = {
    f.message_type.name.removesuffix("Request"): f.name
    for f in spb.CallStreamRequest.DESCRIPTOR.oneofs_by_name["request"].fields
    if f.message_type is not None
}


# The carried RPCs that stream their answer (GetCheckpoint): answered with
# one CallStreamResponse per message, ``more`` set on all but the last.
STREAMED: frozenset[str] = frozenset(
    m.name
    for f in (pb.DESCRIPTOR, gpb.DESCRIPTOR)
    for svc in f.services_by_name.values()
    for m in svc.methods
    if m.server_streaming and m.name in FIELDS
)


class Unsupported(Exception):
    """The daemon serves no CallStream; the call was not handled."""


class StreamError(grpc.RpcError):
    """A call's failure as a unary call would report it: code(), details()
    and trailing_metadata() with the grpc-status-details-bin trailer."""

    def __init__(self, code: grpc.StatusCode, details: str, status: bytes = b"") -> None:
        super().__init__(details)
        self._code, self._details = code, details
        self._trailing = ((_STATUS_DETAILS_KEY, status),) if status else ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _answer(resp: spb.CallStreamResponse) -> Any:
    """The response carried by ``resp``, or its error raised."""
    which = resp.WhichOneof("response")
    if which == "error":
        from google.rpc import status_pb2

        st = status_pb2.Status.FromString(resp.error)
        raise StreamError(_CODES.get(st.code, grpc.StatusCode.UNKNOWN), st.message, resp.error)
    if which is None:
        raise StreamError(grpc.StatusCode.INTERNAL, "the daemon answered a CallStream call with nothing")
    return getattr(resp, which)


def _messages(resps: list[spb.CallStreamResponse]) -> list[Any]:
    """The messages a streamed call's answers carry, in order, or the error
    that ends them raised; a lone answer carrying nothing is a stream of no
    message."""
    if len(resps) == 1 and resps[0].WhichOneof("response") is None:
        return []
    return [_answer(r) for r in resps]


class _Call:
    """A call sent and not yet answered in full: the answers so far, and
    the future that gets them all once one comes without ``more``."""

    __slots__ = ("fut", "parts")

    def __init__(self, fut: Any) -> None:
        self.fut = fut
        self.parts: list[spb.CallStreamResponse] = []

    def add(self, resp: spb.CallStreamResponse) -> bool:
        """Take ``resp``; whether it is the call's last answer."""
        self.parts.append(resp)
        return not resp.more


def _rpc_error(e: BaseException) -> BaseException:
    """The error that fails the calls left unanswered by a stream that
    ended with ``e``; Unsupported when the daemon has no CallStream. An
    INTERNAL without an ErrorInfo did not come from the daemon (grpc.aio
    reports some broken connections so) and leaves the calls unknown, as
    UNAVAILABLE does."""
    code = e.code() if isinstance(e, grpc.RpcError) and hasattr(e, "code") else None
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return Unsupported()
    if code == grpc.StatusCode.INTERNAL and not _has_details(e):
        return StreamError(grpc.StatusCode.UNAVAILABLE, f"the CallStream broke: {e.details() if hasattr(e, 'details') else e}")
    if isinstance(e, grpc.RpcError):
        return e
    return StreamError(grpc.StatusCode.UNAVAILABLE, f"the CallStream ended: {e}")


def _has_details(e: BaseException) -> bool:
    """Whether ``e`` carries the daemon's grpc-status-details-bin."""
    trailing = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
    return any(k == _STATUS_DETAILS_KEY for k, _ in trailing or ())


class CallStream:
    """The calls of one sync channel on one CallStream, opened on first use
    and again after it breaks; safe for several threads. call() raises
    Unsupported when the daemon serves none (then every later call too)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._channel = channel
        self._stub = spb_grpc.CallStreamServiceStub(channel)  # type: ignore[no-untyped-call]
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._supported = True
        self._get_checkpoint: bool | None = None
        self._stale = False  # the stream broke since the ask: ask again
        self._open: tuple[queue.SimpleQueue[Any], dict[int, _Call]] | None = None

    @property
    def supported(self) -> bool:
        return self._supported

    def carries(self, method: str, timeout: float | None) -> bool:
        """Whether the daemon carries ``method`` on the stream: every unary
        RPC while it serves one, GetCheckpoint when GetServerInfo says so
        (asked once, and again after the stream broke, when the daemon may
        have been replaced; a failed ask keeps the last answer, or says no
        when there is none)."""
        if not self._supported:
            return False
        if method not in STREAMED:
            return method in FIELDS
        if self._get_checkpoint is None or self._stale:
            from savepoint.v1 import savepoint_pb2_grpc as pb_grpc

            try:
                info = pb_grpc.SavepointServiceStub(self._channel).GetServerInfo(  # type: ignore[no-untyped-call]
                    pb.GetServerInfoRequest(), timeout=timeout
                )
            except grpc.RpcError:
                return bool(self._get_checkpoint)
            self._get_checkpoint, self._stale = info.call_stream_get_checkpoint, False
        return self._get_checkpoint

    def _stream(self, fut: Future[Any]) -> tuple[queue.SimpleQueue[Any], int]:
        """The open stream's queue, opened when none is, with ``fut``
        registered under a new id, in one step with respect to _read, which
        fails every call registered when the stream ends."""
        with self._lock:
            if not self._supported:
                raise Unsupported()
            if self._open is None:
                q: queue.SimpleQueue[Any] = queue.SimpleQueue()
                pending: dict[int, _Call] = {}

                def requests() -> Iterator[spb.CallStreamRequest]:
                    while (r := q.get()) is not None:
                        yield r

                responses = self._stub.CallStream(requests())
                self._open = (q, pending)
                threading.Thread(target=self._read, args=(responses, q, pending), daemon=True, name="savepoint-callstream").start()
            i = next(self._ids)
            self._open[1][i] = _Call(fut)
            return self._open[0], i

    def _read(self, responses: Any, q: queue.SimpleQueue[Any], pending: dict[int, _Call]) -> None:
        err: BaseException = StreamError(grpc.StatusCode.UNAVAILABLE, "the CallStream ended")
        try:
            for resp in responses:
                with self._lock:
                    c = pending.get(resp.id)
                    if c is None or not c.add(resp):
                        continue
                    del pending[resp.id]
                c.fut.set_result(c.parts)
        except BaseException as e:  # the stream broke: its unanswered calls fail
            err = _rpc_error(e)
        with self._lock:
            if isinstance(err, Unsupported):
                self._supported = False
            if self._open is not None and self._open[1] is pending:
                self._open = None
            self._stale = True  # the daemon may have been replaced: ask again
            left = list(pending.values())
            pending.clear()
        q.put(None)
        for c in left:
            c.fut.set_exception(err)

    def call(self, method: str, req: Any, timeout: float | None) -> Any:
        """Send ``req`` of unary RPC ``method`` and return its response, or
        raise its error (a grpc.RpcError) or Unsupported."""
        return _answer(self._send(method, req, timeout)[0])

    def call_streamed(self, method: str, req: Any, timeout: float | None) -> list[Any]:
        """Send ``req`` of server-streaming RPC ``method`` (GetCheckpoint,
        when carries() says so) and return the messages of its stream, or
        raise its error or Unsupported."""
        return _messages(self._send(method, req, timeout))

    def _send(self, method: str, req: Any, timeout: float | None) -> list[spb.CallStreamResponse]:
        fut: Future[Any] = Future()
        q, i = self._stream(fut)
        q.put(spb.CallStreamRequest(id=i, **{FIELDS[method]: req}))
        try:
            resp = fut.result(timeout)
        except TimeoutError:
            with self._lock:
                if self._open is not None:
                    self._open[1].pop(i, None)
            raise StreamError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        return resp  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            got, self._open = self._open, None
        if got is not None:
            got[0].put(None)


class AioCallStream:
    """CallStream for one grpc.aio channel, used from its event loop."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel
        self._stub = spb_grpc.CallStreamServiceStub(channel)  # type: ignore[no-untyped-call]
        self._ids = itertools.count(1)
        self._supported = True
        self._asked = False
        self._stale = False  # the stream broke since the ask: ask again
        self._get_checkpoint = False
        self._open: tuple[asyncio.Queue[Any], dict[int, _Call]] | None = None

    @property
    def supported(self) -> bool:
        return self._supported

    async def carries(self, method: str, timeout: float | None) -> bool:
        """Whether the daemon carries ``method`` on the stream, as
        CallStream.carries, from _ask's answer."""
        if not self._asked or self._stale:
            try:
                await self._ask(timeout)
            except Unsupported:
                if not self._asked:
                    return False
        if not self._supported:
            return False
        return self._get_checkpoint if method in STREAMED else method in FIELDS

    def _stream(self) -> tuple[asyncio.Queue[Any], dict[int, _Call]]:
        if not self._supported:
            raise Unsupported()
        if self._open is None:
            # Written by one task, not from a request iterator: grpc.aio
            # reports a request iterator's stream that fails to start as
            # INTERNAL, not with its status.
            q: asyncio.Queue[Any] = asyncio.Queue()
            pending: dict[int, _Call] = {}
            call = self._stub.CallStream()
            self._open = (q, pending)
            loop = asyncio.get_running_loop()
            self._tasks = (loop.create_task(self._write(call, q)), loop.create_task(self._read(call, q, pending)))
        return self._open

    @staticmethod
    async def _write(call: Any, q: asyncio.Queue[Any]) -> None:
        try:
            await call.wait_for_connection()
            while (r := await q.get()) is not None:
                await call.write(r)
            await call.done_writing()
        except Exception:  # noqa: BLE001 - the stream ended: _read fails its calls with its status
            pass

    async def _read(self, call: Any, q: asyncio.Queue[Any], pending: dict[int, _Call]) -> None:
        err: BaseException = StreamError(grpc.StatusCode.UNAVAILABLE, "the CallStream ended")
        try:
            async for resp in call:
                c = pending.get(resp.id)
                if c is not None and c.add(resp):
                    del pending[resp.id]
                    if not c.fut.done():
                        c.fut.set_result(c.parts)
        except asyncio.CancelledError:
            err = StreamError(grpc.StatusCode.CANCELLED, "the CallStream was closed")
        except BaseException as e:
            err = _rpc_error(e)
            # A write racing the stream's end can make grpc.aio raise INTERNAL
            # on the read; the call's own status says why it ended.
            with contextlib.suppress(Exception):
                if await call.code() == grpc.StatusCode.UNIMPLEMENTED:
                    err = Unsupported()
        if isinstance(err, Unsupported):
            self._supported = False
        if self._open is not None and self._open[1] is pending:
            self._open = None
        self._stale = True  # the daemon may have been replaced: ask again
        q.put_nowait(None)
        for c in pending.values():
            if not c.fut.done():
                c.fut.set_exception(err)
        pending.clear()

    async def _ask(self, timeout: float | None) -> None:
        """Read from GetServerInfo whether the daemon serves CallStream
        (call_stream_max_in_flight, 0 or absent from an older daemon), once:
        grpc.aio can report a stream refused UNIMPLEMENTED as INTERNAL when
        a write races the refusal, which must not be taken for a call's
        failure. A failed ask decides nothing: the call goes unary."""
        from savepoint.v1 import savepoint_pb2_grpc as pb_grpc

        try:
            info = await pb_grpc.SavepointServiceStub(self._channel).GetServerInfo(  # type: ignore[no-untyped-call]
                pb.GetServerInfoRequest(), timeout=timeout
            )
        except grpc.RpcError:
            raise Unsupported() from None
        self._asked, self._stale = True, False
        self._supported = info.call_stream_max_in_flight > 0
        self._get_checkpoint = info.call_stream_get_checkpoint

    async def call(self, method: str, req: Any, timeout: float | None) -> Any:
        """CallStream.call on the running loop."""
        return _answer((await self._send(method, req, timeout))[0])

    async def call_streamed(self, method: str, req: Any, timeout: float | None) -> list[Any]:
        """CallStream.call_streamed on the running loop."""
        return _messages(await self._send(method, req, timeout))

    async def _send(self, method: str, req: Any, timeout: float | None) -> list[spb.CallStreamResponse]:
        if not self._asked:
            await self._ask(timeout)
        q, pending = self._stream()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        i = next(self._ids)
        pending[i] = _Call(fut)
        q.put_nowait(spb.CallStreamRequest(id=i, **{FIELDS[method]: req}))
        try:
            resp = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pending.pop(i, None)
            raise StreamError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        return resp  # type: ignore[no-any-return]

    def close(self) -> None:
        got, self._open = self._open, None
        if got is not None:
            got[0].put_nowait(None)
