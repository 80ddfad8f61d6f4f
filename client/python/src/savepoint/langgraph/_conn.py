"""SavepointSaver's connections to savepointd: a grpc channel for the sync
methods, a grpc.aio channel per event loop for the async ones, and the calls
on them with the client's retries and error translation."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message as ProtoMessage

from savepoint import _retry, _stream
from savepoint._retry import RetryPolicy
from savepoint.address import TLSConfig, resolve
from savepoint.errors import from_rpc_error
from savepoint.langgraph import _wire
from savepoint.v1 import graph_pb2_grpc as gpb_grpc
from savepoint.v1 import savepoint_pb2 as pb
from savepoint.v1 import savepoint_pb2_grpc as pb_grpc

T = TypeVar("T")


class Connection:
    """The channels to one daemon, made on first use: stub() is the sync
    GraphCheckpointService stub, astub() the running loop's grpc.aio one.
    call() and acall() run one whole call (a stream read to its end
    included), retried per ``retry`` while the daemon is unavailable and
    the call is safe to repeat (retry_safe), and raise savepoint.errors
    exceptions. close() closes the sync channel, aclose() the running
    loop's too."""

    def __init__(
        self,
        address: str | None,
        tls: TLSConfig | bool | None,
        retry: RetryPolicy,
        timeout: float | None,
        logger: logging.Logger,
        call_stream: bool = False,
    ) -> None:
        self._to = resolve(address, tls)
        self._call_stream = call_stream
        self._stream: _stream.CallStream | None = None
        self._astreams: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _stream.AioCallStream] = weakref.WeakKeyDictionary()
        self.address = self._to.address
        self._retry = retry
        self._timeout = timeout
        self._logger = logger
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._stub: Any = None
        self._aio: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[grpc.aio.Channel, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._max_request_bytes = 0

    def close(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.close()
            if self._channel is not None:
                self._channel.close()
            self._channel, self._stub, self._stream = None, None, None

    async def aclose(self) -> None:
        s = self._astreams.pop(asyncio.get_running_loop(), None)
        if s is not None:
            s.close()
        got = self._aio.pop(asyncio.get_running_loop(), None)
        if got is not None:
            await got[0].close(None)
        self.close()

    def stub(self) -> Any:
        with self._lock:
            if self._stub is None:
                self._channel = self._to.channel()
                self._stub = gpb_grpc.GraphCheckpointServiceStub(self._channel)  # type: ignore[no-untyped-call]
                if self._call_stream:
                    self._stream = _stream.CallStream(self._channel)
            return self._stub

    def astub(self) -> Any:
        loop = asyncio.get_running_loop()
        got = self._aio.get(loop)
        if got is None:
            ch = self._to.aio_channel()
            got = (ch, gpb_grpc.GraphCheckpointServiceStub(ch))  # type: ignore[no-untyped-call]
            self._aio[loop] = got
            if self._call_stream:
                self._astreams[loop] = _stream.AioCallStream(ch)
        return got[1]

    def deadline(self) -> float | None:
        return None if self._timeout is None else time.monotonic() + self._timeout

    def backoff(
        self, method: str, req: ProtoMessage, err: grpc.RpcError, try_: int, deadline: float | None, until: float | None
    ) -> float | None:
        """Wait before retrying a failed call: its backoff, then until the
        sync channel has reconnected (RetryPolicy.reconnect_wait, counted
        from ``until``, the wait's end, or now for the first failure).
        Return the wait's end to pass to the next failure, or None when the
        call must not be retried and its error is to be raised."""
        wait = _retry.retry_wait(self._retry, self._logger, method, req, err, try_, deadline, self._to.autostart, until)
        if wait is None:
            return None
        until = _retry.ready_by(self._retry, None) if until is None else until
        time.sleep(wait)
        if self._channel is None or not _retry.reconnected(self._retry, self._channel, until, deadline):
            return None
        return until

    async def abackoff(
        self, method: str, req: ProtoMessage, err: grpc.RpcError, try_: int, deadline: float | None, until: float | None
    ) -> float | None:
        """backoff for the running loop's grpc.aio channel. A daemon started
        on demand that is gone is started again in a worker thread, so that
        the event loop goes on while it starts."""
        auto = self._to.autostart
        if auto is not None and getattr(err, "code", lambda: None)() == grpc.StatusCode.UNAVAILABLE:
            await asyncio.to_thread(auto.ensure)
        wait = _retry.retry_wait(self._retry, self._logger, method, req, err, try_, deadline, None, until)
        if wait is None:
            return None
        until = _retry.ready_by(self._retry, None) if until is None else until
        await asyncio.sleep(wait)
        got = self._aio.get(asyncio.get_running_loop())
        if got is None or not await _retry.areconnected(self._retry, got[0], until, deadline):
            return None
        return until

    left = staticmethod(_retry.left)

    def call(self, method: str, req: ProtoMessage, run: Callable[[float | None], T]) -> T:
        """Run ``run(timeout)``, one whole call (a stream read to its end
        included), retrying it while the daemon is unavailable."""
        deadline = self.deadline()
        try_, until = 0, None
        while True:
            try:
                return run(self.left(deadline))
            except grpc.RpcError as e:
                until = self.backoff(method, req, e, try_, deadline, until)
                if until is None:
                    raise from_rpc_error(e) from None
                try_ += 1

    async def acall(self, method: str, req: ProtoMessage, run: Callable[[float | None], Awaitable[T]]) -> T:
        deadline = self.deadline()
        try_, until = 0, None
        while True:
            try:
                return await run(self.left(deadline))
            except grpc.RpcError as e:
                until = await self.abackoff(method, req, e, try_, deadline, until)
                if until is None:
                    raise from_rpc_error(e) from None
                try_ += 1

    def unary(self, method: str, req: ProtoMessage) -> Any:
        """Run one unary call, on the CallStream when the daemon serves
        one (a daemon that does not never handled it: it goes unary)."""
        fn = getattr(self.stub(), method)

        def run(t: float | None) -> Any:
            s = self._stream
            if s is not None and s.supported and method in _stream.FIELDS:
                try:
                    return s.call(method, req, t)
                except _stream.Unsupported:
                    pass
            return fn(req, timeout=t)

        return self.call(method, req, run)

    def read(self, method: str, req: ProtoMessage) -> list[Any]:
        """The messages of one call of server-streaming RPC ``method``, read
        to its end: on the CallStream when the daemon carries it there
        (GetCheckpoint, GetServerInfo's call_stream_get_checkpoint), else
        as its own RPC; retried as call() retries."""
        fn = getattr(self.stub(), method)

        def run(t: float | None) -> list[Any]:
            s = self._stream
            if s is not None and s.carries(method, t):
                try:
                    return s.call_streamed(method, req, t)
                except _stream.Unsupported:
                    pass
            return list(fn(req, timeout=t))

        return self.call(method, req, run)

    async def aread(self, method: str, req: ProtoMessage) -> list[Any]:
        """read on the running loop's grpc.aio channel."""
        fn = getattr(self.astub(), method)
        loop = asyncio.get_running_loop()

        async def run(t: float | None) -> list[Any]:
            s = self._astreams.get(loop)
            if s is not None and await s.carries(method, t):
                try:
                    return await s.call_streamed(method, req, t)
                except _stream.Unsupported:
                    pass
            return [msg async for msg in fn(req, timeout=t)]

        return await self.acall(method, req, run)

    async def aunary(self, method: str, req: ProtoMessage) -> Any:
        """unary on the running loop's grpc.aio channel."""
        fn = getattr(self.astub(), method)
        loop = asyncio.get_running_loop()

        async def run(t: float | None) -> Any:
            s = self._astreams.get(loop)
            if s is not None and s.supported and method in _stream.FIELDS:
                try:
                    return await s.call(method, req, t)
                except _stream.Unsupported:
                    pass
            return await fn(req, timeout=t)

        return await self.acall(method, req, run)

    def request_limit(self) -> int:
        """The daemon's request limit (GetServerInfo's max_request_bytes,
        asked once), or 4 MiB when it cannot be asked."""
        self.stub()
        if not self._max_request_bytes:
            self._max_request_bytes = _wire.DEFAULT_MAX_REQUEST_BYTES
            assert self._channel is not None
            try:
                info = pb_grpc.SavepointServiceStub(self._channel).GetServerInfo(  # type: ignore[no-untyped-call]
                    pb.GetServerInfoRequest(), timeout=self.left(self.deadline()) or 10.0
                )
                if info.max_request_bytes > 0:
                    self._max_request_bytes = info.max_request_bytes
            except grpc.RpcError as e:
                self._logger.debug("savepoint: GetServerInfo failed, assuming a 4 MiB request limit: %s", e)
        return self._max_request_bytes

    async def arequest_limit(self) -> int:
        """request_limit on grpc.aio."""
        if not self._max_request_bytes:
            limit = _wire.DEFAULT_MAX_REQUEST_BYTES
            loop = asyncio.get_running_loop()
            self.astub()
            ch = self._aio[loop][0]
            try:
                info = await pb_grpc.SavepointServiceStub(ch).GetServerInfo(  # type: ignore[no-untyped-call]
                    pb.GetServerInfoRequest(), timeout=self.left(self.deadline()) or 10.0
                )
                if info.max_request_bytes > 0:
                    limit = info.max_request_bytes
            except grpc.RpcError as e:
                self._logger.debug("savepoint: GetServerInfo failed, assuming a 4 MiB request limit: %s", e)
            self._max_request_bytes = limit
        return self._max_request_bytes
