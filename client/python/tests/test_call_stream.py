"""CallStream: the client and the LangGraph saver, with call_stream=True,
send their unary calls on one stream when the daemon serves it, and unary when it answers
UNIMPLEMENTED (savepointd --no-call-stream); the answers and errors are the
unary ones; a daemon restart loses nothing acknowledged, and a call left
unanswered by the break is retried only when its RPC allows."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import grpc
import pytest
from conftest import Daemon

import savepoint
from savepoint import _stream
from savepoint.aio import AsyncClient
from savepoint.langgraph import SavepointSaver
from savepoint.v1 import savepoint_pb2 as pb


def _counting(raw: Any) -> dict[str, int]:
    """Count the tries of ``raw`` (a Raw or AsyncRaw) that went on the
    stream and those that went unary."""
    n = {"stream": 0, "unary": 0}
    stub = raw._stub

    class Counting:
        def __getattr__(self, name: str) -> Any:
            fn = getattr(stub, name)

            def call(*a: Any, **kw: Any) -> Any:
                n["unary"] += 1
                return fn(*a, **kw)

            return call

    raw._stub = Counting()
    if raw._stream is not None:
        s = raw._stream
        orig = s.call

        def scall(*a: Any, **kw: Any) -> Any:
            try:
                got = orig(*a, **kw)
            except _stream.Unsupported:  # not handled: not counted
                raise
            except grpc.RpcError:
                n["stream"] += 1
                raise
            n["stream"] += 1
            return got

        async def acall(*a: Any, **kw: Any) -> Any:
            try:
                got = await orig(*a, **kw)
            except _stream.Unsupported:
                raise
            except grpc.RpcError:
                n["stream"] += 1
                raise
            n["stream"] += 1
            return got

        s.call = acall if asyncio.iscoroutinefunction(orig) else scall
    return n


def _session_life(c: savepoint.Client, sid: str) -> list[Any]:
    """A session's saves, a fenced save, a resume and a missing session,
    as answers or error reasons."""
    out: list[Any] = []
    s = c.start(sid, task="t")
    s.save(append=[savepoint.Message(role="user", content_json=json.dumps("hi"))])
    out.append((s.revision, s.epoch, s.message_count))
    s2 = c.resume(sid)
    out.append((s2.revision, s2.epoch, [m.content_json for m in s2.messages]))
    try:
        s.save(append=[savepoint.Message(role="user", content_json=json.dumps("late"))])
    except savepoint.SavepointError as e:
        out.append((type(e).__name__, e.reason, e.code))
    try:
        c.resume(sid + "-missing")
    except savepoint.SavepointError as e:
        out.append((type(e).__name__, e.reason, e.code))
    try:
        c.raw.SaveCheckpoint(pb.SaveCheckpointRequest(session_id=sid, request_id="nope"))
    except savepoint.SavepointError as e:
        out.append((type(e).__name__, e.reason, e.code, e.metadata))
    return out


def test_stream_used_and_same_answers(start_daemon: Any) -> None:
    on, off = start_daemon(), start_daemon("--no-call-stream")
    with savepoint.Client(on.addr, call_stream=True) as a, savepoint.Client(off.addr, call_stream=True) as b:
        na, nb = _counting(a.raw), _counting(b.raw)
        got_a, got_b = _session_life(a, "cs"), _session_life(b, "cs")
        assert got_a == got_b
        assert got_a[2][1] == "SESSION_FENCED" and got_a[3][1] == "SESSION_NOT_FOUND" and got_a[4][1] == "INVALID_REQUEST_ID"
        # Every call on the stream; against --no-call-stream the first is
        # refused UNIMPLEMENTED (never handled) and all go unary.
        assert na["unary"] == 0 and na["stream"] >= 6
        assert nb["stream"] == 0 and nb["unary"] >= 6
        assert a.raw._stream.supported and not b.raw._stream.supported
        assert a.raw.GetServerInfo(pb.GetServerInfoRequest()).call_stream_max_in_flight > 0
        assert b.raw.GetServerInfo(pb.GetServerInfoRequest()).call_stream_max_in_flight == 0


def test_async_stream_and_fallback(start_daemon: Any) -> None:
    on, off = start_daemon(), start_daemon("--no-call-stream")

    async def main() -> None:
        for d, streamed in ((on, True), (off, False)):
            async with AsyncClient(d.addr, call_stream=True) as c:
                n = _counting(c.raw)
                s = await c.start("acs", task="t")
                await asyncio.gather(*(c.raw.GetSession(pb.GetSessionRequest(session_id="acs")) for _ in range(20)))
                await s.save(append=[savepoint.Message(role="user", content_json=json.dumps("x"))])
                with pytest.raises(savepoint.errors.SessionNotFoundError):
                    await c.resume("acs-missing")
                assert (n["stream"] > 0, n["unary"] > 0) == (streamed, not streamed), n

    asyncio.run(main())


def test_restart_loses_nothing_acknowledged(fresh_daemon: Daemon) -> None:
    """Saves acknowledged on the stream survive a SIGKILL and restart; the
    next save, sent while the daemon is down, reaches it after the restart
    on a new stream (a save with a request id is safe to repeat)."""
    with savepoint.Client(fresh_daemon.addr, call_stream=True) as c:
        n = _counting(c.raw)
        s = c.start("rs", task="t")
        for i in range(10):
            s.save(append=[savepoint.Message(role="user", content_json=json.dumps(f"m{i}"))])
        fresh_daemon.kill()
        fresh_daemon.restart()
        s.save(append=[savepoint.Message(role="user", content_json=json.dumps("after"))])
        r = c.resume("rs")
        assert [json.loads(m.content_json) for m in r.messages] == [f"m{i}" for i in range(10)] + ["after"]
        assert n["unary"] == 0


def test_unanswered_call_not_safe_to_repeat_is_not_retried(fresh_daemon: Daemon) -> None:
    """A call in flight when the stream breaks fails UNAVAILABLE, as unary:
    DeleteSession (IDEMPOTENCY_UNKNOWN) is not sent again; GetSession is."""
    with savepoint.Client(fresh_daemon.addr, call_stream=True, retry=savepoint.RetryPolicy(max_attempts=5, reconnect_wait=10)) as c:
        c.start("del", task="t")
        s = c.raw._stream
        assert s is not None
        tries: list[str] = []
        orig = s.call

        def call(method: str, req: Any, timeout: Any) -> Any:
            tries.append(method)
            if len(tries) == 1:  # the daemon dies with this call unanswered
                fresh_daemon.kill()
                fresh_daemon.restart()
                raise _stream.StreamError(grpc.StatusCode.UNAVAILABLE, "Socket closed")
            return orig(method, req, timeout)

        s.call = call
        with pytest.raises(savepoint.UnavailableError):
            c.raw.DeleteSession(pb.DeleteSessionRequest(session_id="del"))
        assert tries == ["DeleteSession"]
        tries.append("x")  # past the first: the next calls go through
        c.raw.GetSession(pb.GetSessionRequest(session_id="del"))
        assert tries[-1] == "GetSession"


def test_stream_breaks_fail_pending_with_unavailable(fresh_daemon: Daemon) -> None:
    """The real break: calls waiting on a stream whose daemon is killed get
    UNAVAILABLE (grpc.RpcError), which the retry rules then judge."""
    ch = grpc.insecure_channel(fresh_daemon.addr)
    s = _stream.CallStream(ch)
    s.call("GetServerInfo", pb.GetServerInfoRequest(), 5)
    fresh_daemon.kill()
    with pytest.raises(grpc.RpcError) as e:
        s.call("GetServerInfo", pb.GetServerInfoRequest(), 5)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    ch.close()


def test_saver_uses_stream_and_falls_back(start_daemon: Any) -> None:
    on, off = start_daemon(), start_daemon("--no-call-stream")
    cfg: Any = {"configurable": {"thread_id": "lg-" + uuid.uuid4().hex, "checkpoint_ns": ""}}

    def life(addr: str) -> tuple[Any, Any]:
        with SavepointSaver(addr, call_stream=True) as saver:
            from langgraph.checkpoint.base import empty_checkpoint

            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": ["hi"]}
            cp["channel_versions"] = {"messages": 1}
            stored = saver.put(cfg, cp, {"step": 1}, {"messages": 1})
            saver.put_writes(stored, [("messages", "w")], "task-1")
            got = saver.get_tuple(stored)
            assert got is not None
            s = saver._conn._stream
            return (got.checkpoint["channel_values"], got.pending_writes), (s is not None and s.supported)

    a, a_streamed = life(on.addr)
    b, b_streamed = life(off.addr)
    assert a == b
    assert a_streamed and not b_streamed


def test_async_saver_uses_stream(start_daemon: Any) -> None:
    on = start_daemon()

    async def main() -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        async with SavepointSaver(on.addr, call_stream=True) as saver:
            cfg: Any = {"configurable": {"thread_id": "alg", "checkpoint_ns": ""}}
            cp = empty_checkpoint()
            stored = await saver.aput(cfg, cp, {"step": 1}, {})
            await saver.aput_writes(stored, [("x", 1)], "t")
            got = await saver.aget_tuple(stored)
            assert got is not None and got.pending_writes
            s = saver._conn._astreams[asyncio.get_running_loop()]
            assert s.supported and s._open is not None

    asyncio.run(main())


def test_internal_without_details_is_unknown_outcome() -> None:
    """grpc.aio can end a stream over a broken connection with INTERNAL
    ("Internal error from Core."), no ErrorInfo: its calls' outcome is
    unknown, UNAVAILABLE, so the retry rules judge them; the daemon's own
    INTERNAL (with details) and UNIMPLEMENTED keep their meaning."""
    got = _stream._rpc_error(_stream.StreamError(grpc.StatusCode.INTERNAL, "Internal error from Core."))
    assert isinstance(got, grpc.RpcError) and got.code() == grpc.StatusCode.UNAVAILABLE
    daemon = _stream.StreamError(grpc.StatusCode.INTERNAL, "internal error; see the daemon's log", b"\x08\x0d")
    assert _stream._rpc_error(daemon) is daemon
    assert isinstance(_stream._rpc_error(_stream.StreamError(grpc.StatusCode.UNIMPLEMENTED, "")), _stream.Unsupported)


def test_default_is_unary(daemon: Daemon) -> None:
    """Without call_stream the Python clients send every call unary."""
    with savepoint.Client(daemon.addr) as c, SavepointSaver(daemon.addr) as saver:
        assert c.raw._stream is None
        saver._conn.stub()
        assert saver._conn._stream is None
