"""CallStream: the client with call_stream=True, and the LangGraph saver by
default, send their unary calls (the saver its GetCheckpoint too) on one
stream when the daemon serves it, and as their own RPCs when it answers
UNIMPLEMENTED (savepointd --no-call-stream) or does not carry GetCheckpoint;
the answers and errors are those of the calls' own RPCs; a daemon restart
loses nothing acknowledged, and a call left unanswered by the break is
retried only when its RPC allows."""

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
    """Without call_stream the Python clients send every call unary; the
    saver uses the stream unless call_stream=False."""
    with savepoint.Client(daemon.addr) as c, SavepointSaver(daemon.addr) as saver, SavepointSaver(daemon.addr, call_stream=False) as off:
        assert c.raw._stream is None
        saver._conn.stub()
        assert saver._conn._stream is not None
        off._conn.stub()
        assert off._conn._stream is None


def _big_checkpoint(n: int) -> tuple[Any, dict[str, Any]]:
    """A checkpoint whose n channels hold 40 KiB each, and its versions."""
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {f"ch{i}": f"{i}" * (40 << 10) for i in range(n)}
    cp["channel_versions"] = {f"ch{i}": 1 for i in range(n)}
    return cp, dict(cp["channel_versions"])


def _spy_streamed(s: Any) -> list[tuple[str, int]]:
    """Record the calls ``s`` (a CallStream or AioCallStream) carries as
    streamed calls and answers: the method and how many messages."""
    seen: list[tuple[str, int]] = []
    orig = s.call_streamed

    def scall(method: str, *a: Any) -> Any:
        got = orig(method, *a)
        seen.append((method, len(got)))
        return got

    async def acall(method: str, *a: Any) -> Any:
        got = await orig(method, *a)
        seen.append((method, len(got)))
        return got

    s.call_streamed = acall if asyncio.iscoroutinefunction(orig) else scall
    return seen


def test_saver_get_tuple_on_stream(start_daemon: Any) -> None:
    """get_tuple goes on the CallStream, its answer in several messages
    (a 160 KiB response budget, a checkpoint of 240 KiB) assembled as from
    GetCheckpoint's own stream; a missing checkpoint is None and a refused
    request raises as the own RPC's refusal does."""
    d = start_daemon("--response-budget-bytes", str(160 << 10), "--max-state-bytes", str(16 << 10))
    thread = "gs-" + uuid.uuid4().hex
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    cp, versions = _big_checkpoint(6)
    with SavepointSaver(d.addr) as saver, SavepointSaver(d.addr, call_stream=False) as own:
        stored = saver.put(cfg, cp, {"step": 1}, versions)
        saver.put_writes(stored, [("ch0", "w")], "task-1")
        s = saver._conn._stream
        assert s is not None
        seen = _spy_streamed(s)
        got, want = saver.get_tuple(stored), own.get_tuple(stored)
        assert got is not None and want is not None
        assert got.checkpoint == want.checkpoint and got.pending_writes == want.pending_writes == [("task-1", "ch0", "w")]
        assert got.checkpoint["channel_values"] == cp["channel_values"]
        missing: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": "nope"}}
        assert saver.get_tuple(missing) is None
        bad: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": "x" * 5000}}
        with pytest.raises(savepoint.SavepointError) as e1:
            saver.get_tuple(bad)
        with pytest.raises(savepoint.SavepointError) as e2:
            own.get_tuple(bad)
        assert (e1.value.code, e1.value.reason) == (e2.value.code, e2.value.reason)
        assert [m for m, _ in seen] == ["GetCheckpoint"] * 2 and seen[0][1] >= 2 and seen[1][1] == 0


def test_async_saver_get_tuple_on_stream(start_daemon: Any) -> None:
    """aget_tuple: as get_tuple, on the loop's stream."""
    d = start_daemon("--response-budget-bytes", str(160 << 10), "--max-state-bytes", str(16 << 10))

    async def main() -> None:
        cfg: Any = {"configurable": {"thread_id": "ags-" + uuid.uuid4().hex, "checkpoint_ns": ""}}
        cp, versions = _big_checkpoint(6)
        async with SavepointSaver(d.addr) as saver:
            stored = await saver.aput(cfg, cp, {"step": 1}, versions)
            seen = _spy_streamed(saver._conn._astreams[asyncio.get_running_loop()])
            got = await saver.aget_tuple(stored)
            assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]
            missing: Any = {"configurable": {"thread_id": "ags-none", "checkpoint_ns": ""}}
            assert await saver.aget_tuple(missing) is None
            assert [m for m, _ in seen] == ["GetCheckpoint"] * 2 and seen[0][1] >= 2 and seen[1][1] == 0

    asyncio.run(main())


def test_saver_get_tuple_own_rpc_when_not_carried(daemon: Daemon) -> None:
    """A daemon whose stream does not carry GetCheckpoint (GetServerInfo's
    call_stream_get_checkpoint false, as from an older one) gets it as its
    own RPC, its unary calls still on the stream."""
    cfg: Any = {"configurable": {"thread_id": "old-" + uuid.uuid4().hex, "checkpoint_ns": ""}}
    cp, versions = _big_checkpoint(1)
    with SavepointSaver(daemon.addr) as saver:
        saver._conn.stub()
        s = saver._conn._stream
        assert s is not None
        s._get_checkpoint = False
        seen = _spy_streamed(s)
        stored = saver.put(cfg, cp, {"step": 1}, versions)
        got = saver.get_tuple(stored)
        assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]
        assert seen == [] and s._open is not None


def test_saver_asks_again_after_a_break(fresh_daemon: Daemon) -> None:
    """What the daemon carries is asked again once the stream broke (the
    daemon may have been replaced by another version): a stale "not
    carried" from before a restart does not outlive the stream, in sync and
    async code."""
    cfg: Any = {"configurable": {"thread_id": "ask-" + uuid.uuid4().hex, "checkpoint_ns": ""}}
    cp, versions = _big_checkpoint(1)
    with SavepointSaver(fresh_daemon.addr) as saver:
        stored = saver.put(cfg, cp, {"step": 1}, versions)
        s = saver._conn._stream
        assert s is not None
        s._get_checkpoint = False  # as an older daemon's answer
        seen = _spy_streamed(s)
        assert saver.get_tuple(stored) is not None and seen == []
        fresh_daemon.kill()
        fresh_daemon.restart()
        saver.put(cfg, cp, {"step": 1}, versions)  # on a new stream, after the break
        assert saver.get_tuple(stored) is not None
        assert [m for m, _ in seen] == ["GetCheckpoint"]

    async def main() -> None:
        async with SavepointSaver(fresh_daemon.addr) as saver:
            stored = await saver.aput(cfg, cp, {"step": 1}, versions)
            s = saver._conn._astreams[asyncio.get_running_loop()]
            s._get_checkpoint = False
            seen = _spy_streamed(s)
            assert await saver.aget_tuple(stored) is not None and seen == []
            fresh_daemon.kill()
            fresh_daemon.restart()
            await saver.aput(cfg, cp, {"step": 1}, versions)
            assert await saver.aget_tuple(stored) is not None
            assert [m for m, _ in seen] == ["GetCheckpoint"]

    asyncio.run(main())
