"""Retries: exactly the calls the Go client's retrySafe retries, on
UNAVAILABLE only, with the same request ids, and the backoff policy; against
a fake SavepointService that fails on demand, and a real savepointd killed and
restarted under a session."""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from conftest import Daemon
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

import savepoint
import savepoint.aio
from savepoint import Message, RetryPolicy, ToolUse
from savepoint._retry import retry_safe
from savepoint.v1 import savepoint_pb2 as pb
from savepoint.v1 import savepoint_pb2_grpc as pb_grpc

FAST = RetryPolicy(max_attempts=5, initial_backoff=0.001, max_backoff=0.004)
# The unary methods: Raw wraps those (Backup streams its response).
METHODS = [m.name for m in pb.DESCRIPTOR.services_by_name["SavepointService"].methods if not m.server_streaming]


class Fake(pb_grpc.SavepointServiceServicer):
    """Answers every call; ``fail[method]`` calls fail first with
    ``fail_code`` (UNAVAILABLE), applied anyway when ``apply_then_fail``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail: dict[str, int] = {}
        self.fail_code = grpc.StatusCode.UNAVAILABLE
        self.fail_reason = ""
        self.revision = 0
        self.applied: dict[str, int] = {}  # request_id -> revision
        self.delay = 0.0  # GetSession's

    def _enter(self, method: str, req: object, ctx: grpc.ServicerContext) -> None:
        self.calls.append((method, req))
        if self.fail.get(method, 0) > 0:
            self.fail[method] -= 1
            if self.fail_reason:
                info = any_pb2.Any()
                info.Pack(error_details_pb2.ErrorInfo(reason=self.fail_reason, domain="savepoint.v1"))
                st = status_pb2.Status(code=self.fail_code.value[0], message="refused", details=[info])
                ctx.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
            ctx.abort(self.fail_code, "fake failure")

    def SaveCheckpoint(self, req, ctx):  # type: ignore[no-untyped-def]
        # Applied before the failure: a lost response.
        if req.request_id not in self.applied:
            self.revision += 1
            self.applied[req.request_id] = self.revision
        self._enter("SaveCheckpoint", req, ctx)
        return pb.SaveCheckpointResponse(revision=self.applied[req.request_id], epoch=4, message_count=0)

    def BeginEffect(self, req, ctx):  # type: ignore[no-untyped-def]
        self._enter("BeginEffect", req, ctx)
        return pb.BeginEffectResponse(idempotency_key="key-" + req.tool_use_id)

    def GetSession(self, req, ctx):  # type: ignore[no-untyped-def]
        self._enter("GetSession", req, ctx)
        time.sleep(self.delay)
        return pb.GetSessionResponse()

    def RecordEffect(self, req, ctx):  # type: ignore[no-untyped-def]
        self._enter("RecordEffect", req, ctx)
        return pb.RecordEffectResponse()

    def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
        # Every other method answers its empty response.
        if name in METHODS and name not in ("SaveCheckpoint", "BeginEffect", "RecordEffect", "GetSession"):
            out = getattr(pb, name + "Response")

            def handler(req, ctx):  # type: ignore[no-untyped-def]
                self._enter(name, req, ctx)
                return out()

            return handler
        return super().__getattribute__(name)

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)


@pytest.fixture
def fake() -> Iterator[tuple[Fake, str]]:
    f = Fake()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_SavepointServiceServicer_to_server(f, server)
    d = tempfile.mkdtemp(prefix="sp", dir="/tmp")
    sock = os.path.join(d, "f.sock")
    server.add_insecure_port("unix:" + sock)
    server.start()
    yield f, "unix:" + sock
    server.stop(None)
    os.rmdir(d) if not os.listdir(d) else None


REQUESTS = {
    "SaveCheckpoint": pb.SaveCheckpointRequest(session_id="s", request_id="11111111-1111-4111-8111-111111111111"),
    "BeginEffect": pb.BeginEffectRequest(session_id="s", tool_use_id="t", epoch=3),
    "RecordEffect": pb.RecordEffectRequest(session_id="s", tool_use_id="t"),
    "Resume": pb.ResumeRequest(session_id="s"),
    "Reconcile": pb.ReconcileRequest(session_id="s"),
    "GetSession": pb.GetSessionRequest(session_id="s"),
    "ListMessages": pb.ListMessagesRequest(session_id="s"),
    "ListSessions": pb.ListSessionsRequest(),
    "DeleteSession": pb.DeleteSessionRequest(session_id="s", epoch=3),
    "Verify": pb.VerifyRequest(),
    "GetServerInfo": pb.GetServerInfoRequest(),
    "CompleteSession": pb.CompleteSessionRequest(session_id="s", epoch=3, request_id="22222222-2222-4222-8222-222222222222"),
    "ListEffects": pb.ListEffectsRequest(session_id="s"),
    "ForkSession": pb.ForkSessionRequest(source_session_id="s", new_session_id="f", request_id="33333333-3333-4333-8333-333333333333"),
    "RewindSession": pb.RewindSessionRequest(session_id="s", epoch=3, revision=1, request_id="44444444-4444-4444-8444-444444444444"),
    "ResolveEffect": pb.ResolveEffectRequest(session_id="s", tool_use_id="t", request_id="55555555-5555-4555-8555-555555555555"),
    "ApproveEffect": pb.ApproveEffectRequest(session_id="s", tool_use_id="t", request_id="66666666-6666-4666-8666-666666666666"),
}
# As client/client.go's retrySafe: every method but these is never retried.
RETRIED = {"SaveCheckpoint", "CompleteSession", "ForkSession", "RewindSession", "ResolveEffect", "ApproveEffect", "BeginEffect", "RecordEffect", "Resume", "Reconcile", "GetSession", "ListMessages", "ListSessions", "ListEffects"}


def test_requests_cover_every_method() -> None:
    assert sorted(REQUESTS) == sorted(METHODS)
    assert not retry_safe("SaveCheckpoint", pb.SaveCheckpointRequest(session_id="s"))


@pytest.mark.parametrize("method", sorted(REQUESTS))
def test_retried_exactly_when_retry_safe(fake: tuple[Fake, str], method: str) -> None:
    f, addr = fake
    f.fail[method] = 4
    with savepoint.Client(addr, retry=FAST) as c:
        call = getattr(c.raw, method)
        if method in RETRIED:
            call(REQUESTS[method])  # the fifth attempt succeeds
            assert f.count(method) == 5
            assert all(req == REQUESTS[method] for m, req in f.calls), "a retry resends the request unchanged"
        else:
            with pytest.raises(savepoint.UnavailableError):
                call(REQUESTS[method])
            assert f.count(method) == 1


def test_gives_up_after_max_attempts(fake: tuple[Fake, str]) -> None:
    f, addr = fake
    f.fail["Resume"] = 10
    with savepoint.Client(addr, retry=FAST) as c, pytest.raises(savepoint.UnavailableError):
        c.raw.Resume(pb.ResumeRequest(session_id="s"))
    assert f.count("Resume") == 5
    with savepoint.Client(addr, retry=RetryPolicy(max_attempts=1)) as c, pytest.raises(savepoint.UnavailableError):
        c.raw.Resume(pb.ResumeRequest(session_id="s"))
    assert f.count("Resume") == 6


def test_save_without_request_id_is_not_retried(fake: tuple[Fake, str]) -> None:
    f, addr = fake
    f.fail["SaveCheckpoint"] = 1
    with savepoint.Client(addr, retry=FAST) as c, pytest.raises(savepoint.UnavailableError):
        c.raw.SaveCheckpoint(pb.SaveCheckpointRequest(session_id="s"))
    assert f.count("SaveCheckpoint") == 1


@pytest.mark.parametrize("code", [grpc.StatusCode.ABORTED, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED])
def test_only_unavailable_is_retried(fake: tuple[Fake, str], code: grpc.StatusCode) -> None:
    f, addr = fake
    f.fail["GetSession"], f.fail_code = 1, code
    with savepoint.Client(addr, retry=FAST) as c, pytest.raises(savepoint.SavepointError) as e:
        c.raw.GetSession(pb.GetSessionRequest(session_id="s"))
    assert e.value.code == code and f.count("GetSession") == 1


def test_backoff_policy() -> None:
    p = savepoint.DEFAULT_RETRY_POLICY
    assert (p.max_attempts, p.initial_backoff, p.max_backoff) == (5, 0.1, 1.0)
    for retry, base in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (9, 1.0)]:
        for _ in range(50):
            assert base * 0.8 - 1e-9 <= p.backoff(retry) <= base, (retry, base)
    assert RetryPolicy(initial_backoff=0).backoff(3) == 0


def test_retry_budget(fake: tuple[Fake, str]) -> None:
    """A budget keeps a retry-safe call going past max_attempts, through a
    failover (NO_WRITABLE_HOST) longer than the attempts last; without one
    the call gives up after max_attempts; the budget ends the retries of a
    call that keeps failing; a call that is not retry-safe is tried once.
    The default budget covers make failover's longest time without a
    writable host (8.3 s)."""
    assert savepoint.DEFAULT_RETRY_POLICY.budget >= 8.3
    assert RetryPolicy().budget == 0
    f, addr = fake
    f.fail_reason = "NO_WRITABLE_HOST"
    base = RetryPolicy(max_attempts=2, initial_backoff=0.02, max_backoff=0.05)
    with_budget = RetryPolicy(max_attempts=2, initial_backoff=0.02, max_backoff=0.05, budget=3.0)
    f.fail["GetSession"] = 15  # about 0.75 s of retries
    with savepoint.Client(addr, retry=with_budget) as c:
        c.raw.GetSession(pb.GetSessionRequest(session_id="s"))
    assert f.count("GetSession") == 16
    f.fail["GetSession"] = 15
    with savepoint.Client(addr, retry=base) as c, pytest.raises(savepoint.NoWritableHostError):
        c.raw.GetSession(pb.GetSessionRequest(session_id="s"))
    assert f.count("GetSession") == 18
    f.fail["GetSession"] = 1000
    with savepoint.Client(addr, retry=with_budget) as c, pytest.raises(savepoint.NoWritableHostError):
        t = time.monotonic()
        try:
            c.raw.GetSession(pb.GetSessionRequest(session_id="s"))
        finally:
            took = time.monotonic() - t
    assert 2.5 <= took < 6.0, took
    f.fail["DeleteSession"] = 1000
    with savepoint.Client(addr, retry=with_budget) as c, pytest.raises(savepoint.NoWritableHostError):
        c.raw.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
    assert f.count("DeleteSession") == 1


def test_retry_budget_aio(fake: tuple[Fake, str]) -> None:
    """The asyncio client keeps the budget too."""
    f, addr = fake
    f.fail_reason = "NO_WRITABLE_HOST"
    f.fail["GetSession"] = 15

    async def main() -> None:
        async with savepoint.aio.AsyncClient(addr, retry=RetryPolicy(max_attempts=2, initial_backoff=0.02, max_backoff=0.05, budget=3.0)) as c:
            await c.raw.GetSession(pb.GetSessionRequest(session_id="s"))

    asyncio.run(main())
    assert f.count("GetSession") == 16


def test_default_backoff_timing(fake: tuple[Fake, str]) -> None:
    """5 attempts over about 1.5 seconds, as the Go client."""
    f, addr = fake
    f.fail["Reconcile"] = 4
    with savepoint.Client(addr) as c:
        t = time.monotonic()
        c.raw.Reconcile(pb.ReconcileRequest(session_id="s"))
        took = time.monotonic() - t
    assert 1.2 <= took < 5.0, took


def test_session_request_ids(fake: tuple[Fake, str]) -> None:
    """A save whose outcome is unknown is tried again with its request id; a
    different save, or one after a definite refusal, gets a new one."""
    f, addr = fake
    with savepoint.Client(addr, retry=FAST) as c:
        s = c.start("s", "t", messages=[Message("user", '"hi"')])
        first = f.calls[-1][1]
        assert isinstance(first, pb.SaveCheckpointRequest)
        assert (first.expected_revision, first.epoch, first.turn) == (0, 0, 0) and len(first.request_id) == 36
        assert (s.revision, s.epoch) == (1, 4)

        call = ToolUse("toolu_1", "send", "{}")
        f.fail["SaveCheckpoint"] = 5  # applied, every response lost
        with pytest.raises(savepoint.UnavailableError):
            s.point_a(Message("assistant", '"a"'), [call])
        ids = {req.request_id for m, req in f.calls if m == "SaveCheckpoint"} - {first.request_id}  # type: ignore[attr-defined]
        assert len(ids) == 1 and f.count("SaveCheckpoint") == 6
        assert s.revision == 1 and s.pending == []
        s.point_a(Message("assistant", '"a"'), [call])  # the same save again: the same id
        again = f.calls[-1][1]
        assert again.request_id in ids and again.expected_revision == 1 and again.epoch == 4  # type: ignore[attr-defined]
        assert s.revision == 2, "the daemon applied it once"

        # BeginEffect carries the session's epoch; the tool gets its key;
        # RecordEffect the pending tool use's name.
        got: list[str] = []
        s.run_tool(call, lambda key: got.append(key) or "ok")  # type: ignore[func-returns-value]
        begin = next(req for m, req in f.calls if m == "BeginEffect")
        record = next(req for m, req in f.calls if m == "RecordEffect")
        assert (begin.epoch, got, record.name, record.output) == (4, ["key-toolu_1"], "send", "ok")  # type: ignore[attr-defined]

        # A definite refusal: the next save is new.
        f.fail["SaveCheckpoint"], f.fail_code, f.fail_reason = 1, grpc.StatusCode.ABORTED, "REVISION_MISMATCH"
        with pytest.raises(savepoint.RevisionMismatchError):
            s.save(task="x")
        refused = f.calls[-1][1].request_id  # type: ignore[attr-defined]
        s.save(task="x")
        assert f.calls[-1][1].request_id != refused  # type: ignore[attr-defined]

        # An unknown outcome, then a different save: a new id.
        f.fail["SaveCheckpoint"], f.fail_code, f.fail_reason = 5, grpc.StatusCode.UNAVAILABLE, ""
        with pytest.raises(savepoint.UnavailableError):
            s.save(task="y")
        lost = f.calls[-1][1].request_id  # type: ignore[attr-defined]
        s.save(task="z")
        assert f.calls[-1][1].request_id != lost  # type: ignore[attr-defined]


def test_async_retries(fake: tuple[Fake, str]) -> None:
    f, addr = fake

    async def main() -> None:
        async with savepoint.aio.AsyncClient(addr, retry=FAST) as c:
            f.fail["SaveCheckpoint"] = 4
            s = await c.start("s", "t")
            saves = [req for m, req in f.calls if m == "SaveCheckpoint"]
            assert len(saves) == 5 and len({r.request_id for r in saves}) == 1  # type: ignore[attr-defined]
            assert s.revision == 1
            f.fail["DeleteSession"] = 1
            with pytest.raises(savepoint.UnavailableError):
                await s.delete()
            assert f.count("DeleteSession") == 1
            f.fail["SaveCheckpoint"] = 5
            with pytest.raises(savepoint.UnavailableError):
                await s.save(task="a")
            lost = f.calls[-1][1].request_id  # type: ignore[attr-defined]
            await s.save(task="a")
            assert f.calls[-1][1].request_id == lost  # type: ignore[attr-defined]

    asyncio.run(main())


def test_daemon_restarted_under_a_session(fresh_daemon: Daemon) -> None:
    """kill -9 of savepointd between two saves: the next save waits through
    the restart (retries with its request id) and is applied once."""
    policy = RetryPolicy(max_attempts=30, initial_backoff=0.1, max_backoff=0.5)
    with savepoint.Client(fresh_daemon.addr, retry=policy) as c:
        s = c.start("restarted", "t", messages=[Message("user", '"hi"')])
        fresh_daemon.kill()
        t = threading.Timer(0.5, fresh_daemon.restart)
        t.start()
        try:
            s.point_a(Message("assistant", '"after the restart"'), [])
        finally:
            t.join()
        assert s.revision == 2
        r = c.resume("restarted")
        assert [m.content_json for m in r.messages] == ['"hi"', '"after the restart"'] and r.revision == 2


def test_timeout(fake: tuple[Fake, str]) -> None:
    """Client(timeout=) bounds each call, retries included."""
    f, addr = fake
    f.delay = 1.0
    with savepoint.Client(addr, retry=FAST, timeout=0.2, wait_ready=5) as c:
        t = time.monotonic()
        with pytest.raises(savepoint.DeadlineExceededError):
            c.raw.GetSession(pb.GetSessionRequest(session_id="s"))
        assert time.monotonic() - t < 0.9 and f.count("GetSession") == 1
        f.delay = 0.0
        c.raw.GetSession(pb.GetSessionRequest(session_id="s"), timeout=5)


def test_reconnect_wait_is_bounded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """On a daemon that stays down, a retry-safe call waits for the
    connection at most reconnect_wait after its first failure, and never
    past its deadline; a call that is not retry-safe does not wait."""
    addr = f"unix:{tmp_path}/nobody.sock"
    policy = RetryPolicy(max_attempts=50, initial_backoff=0.01, max_backoff=0.01, reconnect_wait=0.5)
    for timeout, low, high in ((None, 0.5, 2.0), (0.2, 0.0, 0.6)):
        with savepoint.Client(addr, retry=policy, timeout=timeout) as c:
            t = time.monotonic()
            with pytest.raises((savepoint.UnavailableError, savepoint.DeadlineExceededError)):
                c.raw.GetSession(pb.GetSessionRequest(session_id="s"))
            assert low <= time.monotonic() - t < high, timeout
    with savepoint.Client(addr, retry=policy) as c:
        t = time.monotonic()
        with pytest.raises(savepoint.UnavailableError):
            c.raw.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
        assert time.monotonic() - t < 0.4

    async def main() -> None:
        async with savepoint.aio.AsyncClient(addr, retry=policy) as ac:
            t = time.monotonic()
            with pytest.raises(savepoint.UnavailableError):
                await ac.raw.GetSession(pb.GetSessionRequest(session_id="s"))
            assert 0.5 <= time.monotonic() - t < 2.0

    asyncio.run(main())


@pytest.mark.parametrize("reason", ["COMMIT_OUTCOME_UNKNOWN", "NO_WRITABLE_HOST"])
def test_failover_reasons_retried_with_the_same_request_id(fake: tuple[Fake, str], reason: str) -> None:
    """A save answered COMMIT_OUTCOME_UNKNOWN (applied, its answer lost) or
    NO_WRITABLE_HOST is retried unchanged, with its request id, and applied
    once; once the retries are used up the error is the reason's class, an
    UnavailableError."""
    f, addr = fake
    f.fail["SaveCheckpoint"], f.fail_reason = 2, reason
    req = pb.SaveCheckpointRequest(session_id="s", request_id="00000000-0000-4000-8000-000000000001")
    with savepoint.Client(addr, retry=FAST) as c:
        assert c.raw.SaveCheckpoint(req).revision == 1
    assert f.count("SaveCheckpoint") == 3
    assert all(r == req for m, r in f.calls), "each retry resends the request, its request id included"
    assert f.revision == 1, "applied once"
    f.fail["SaveCheckpoint"] = 10
    with savepoint.Client(addr, retry=FAST) as c, pytest.raises(savepoint.UnavailableError) as e:
        c.raw.SaveCheckpoint(req)
    assert e.value.reason == reason


def test_every_rpc_declares_retry_safety() -> None:
    # An RPC added without option idempotency_level (and
    # retry_with_request_id where a request_id makes it safe) fails here.
    from savepoint.v1 import graph_pb2 as gpb

    n = 0
    for mod, svc in ((pb, "SavepointService"), (gpb, "GraphCheckpointService")):
        for m in mod.DESCRIPTOR.services_by_name[svc].methods:
            n += 1
            assert m.GetOptions().HasField("idempotency_level"), f"{m.full_name} declares no idempotency_level"
    assert n >= 30


def test_retry_rules_from_the_proto() -> None:
    from savepoint._retry import service_retry_rules
    from savepoint.v1 import graph_pb2 as gpb

    rules = service_retry_rules(pb.DESCRIPTOR.services_by_name["SavepointService"])
    assert {m for m, r in rules.items() if r != "never"} == RETRIED
    assert {m for m, r in rules.items() if r == "request_id"} == {"SaveCheckpoint", "CompleteSession", "ForkSession", "RewindSession", "ResolveEffect", "ApproveEffect"}
    assert retry_safe("UploadCheckpoint", gpb.UploadCheckpointStart(request_id="r"))
    assert not retry_safe("UploadCheckpoint", gpb.UploadCheckpointStart())
    assert retry_safe("ListThreadEffects", gpb.ListThreadEffectsRequest())
    assert not retry_safe("DeleteSession", pb.DeleteSessionRequest(session_id="s"))
