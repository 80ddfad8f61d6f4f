"""When and how a failed call is tried again: exactly as the Go client's
retrySafe and RetryPolicy say."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import grpc

from savepoint.v1 import savepoint_pb2 as pb

SERVICE = "savepoint.v1.SavepointService"
GRAPH_SERVICE = "savepoint.v1.GraphCheckpointService"


@dataclass(frozen=True)
class RetryPolicy:
    """How often a call that failed with UNAVAILABLE (the daemon is down or
    restarting) is tried again. Only calls that are safe to repeat are
    retried: SaveCheckpoint when it carries a request_id (the retry carries
    the same one, so the daemon applies the save once), BeginEffect (a repeat
    returns the same key), RecordEffect (the same record again is accepted),
    Resume (a repeat only takes ownership again) and the reads. DeleteSession
    is never retried.

    ``max_attempts`` counts the first try (1 or less disables retries);
    ``initial_backoff`` is the wait in seconds before the first retry, doubling
    on each retry up to ``max_backoff``, less up to 20% random jitter.

    ``reconnect_wait`` bounds the wait for the connection: after a failed
    try and its backoff, a retry waits until the channel has reconnected,
    at most ``reconnect_wait`` seconds after the call's first failure and
    never past the call's deadline, then fails with the last error if the
    channel is still down. gRPC's own reconnect backoff (up to 2 s) can
    outlast the retries' backoff, so without it the first call after a
    restart may fail although the daemon is back. 0 disables the wait.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 1.0
    reconnect_wait: float = 5.0

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (0 for the first)."""
        d = self.initial_backoff
        for _ in range(retry):
            d *= 2
            if self.max_backoff > 0 and d >= self.max_backoff:
                d = self.max_backoff
                break
        if d <= 0:
            return 0.0
        return d - random.uniform(0, d / 5)


DEFAULT_RETRY_POLICY = RetryPolicy()
"""5 attempts over about 1.5 seconds, waiting up to 5 seconds for the
connection, as the Go client's DefaultRetryPolicy."""

# The methods whose repeat is always harmless.
_ALWAYS_SAFE = frozenset(
    {"BeginEffect", "RecordEffect", "Resume", "Reconcile", "GetSession", "ListMessages", "ListSessions", "ListEffects"}
)

# The methods whose repeat is harmless when they carry a request id, as
# SaveCheckpoint (below).
_SAFE_WITH_REQUEST_ID: dict[str, type] = {
    "CompleteSession": pb.CompleteSessionRequest,
    "ForkSession": pb.ForkSessionRequest,
    "RewindSession": pb.RewindSessionRequest,
    "ResolveEffect": pb.ResolveEffectRequest,
}

# GraphCheckpointService's: its reads, and its deletes, copy and prune, which
# are idempotent (docs/protocol.md); its puts only with a request id.
_GRAPH_ALWAYS_SAFE = frozenset(
    {"GetCheckpoint", "ListCheckpoints", "DeleteThread", "DeleteForRuns", "CopyThread", "Prune", "ListThreadEffects"}
)

# GraphCheckpointService's requests, by full name, so that the client does
# not import the graph stubs (savepoint.v1.graph_pb2) unless it uses them.
_GRAPH_PUTS = frozenset(
    {"savepoint.v1.PutCheckpointRequest", "savepoint.v1.PutWritesRequest", "savepoint.v1.UploadCheckpointStart"}
)
# The graph-thread ledger's writes: a repeat with the same request id returns
# the first call's answer (a begin starts no second attempt).
_GRAPH_EFFECT_WRITES = {
    "savepoint.v1.BeginThreadEffectRequest": "BeginThreadEffect",
    "savepoint.v1.RecordThreadEffectRequest": "RecordThreadEffect",
    "savepoint.v1.ResolveThreadEffectRequest": "ResolveThreadEffect",
}
_GRAPH_OTHER_REQUESTS = frozenset(
    {
        "savepoint.v1.GetCheckpointRequest",
        "savepoint.v1.ListCheckpointsRequest",
        "savepoint.v1.DeleteThreadRequest",
        "savepoint.v1.DeleteForRunsRequest",
        "savepoint.v1.CopyThreadRequest",
        "savepoint.v1.PruneRequest",
        "savepoint.v1.ListThreadEffectsRequest",
    }
)


def retry_safe(method: str, request: object) -> bool:
    """Say whether repeating a call that may have been applied is harmless.
    Methods not listed (DeleteSession, Verify, GetServerInfo, any added later)
    are not, as in the Go client. ``method`` is a SavepointService RPC, or
    a GraphCheckpointService one when ``request`` is a graph_pb2 message
    (for UploadCheckpoint, its start; for UploadCheckpoint and
    UploadWrites, the PutCheckpoint or PutWrites request they stream).
    BeginThreadEffect and RecordThreadEffect are safe with a request id,
    ListThreadEffects always."""
    kind = getattr(getattr(request, "DESCRIPTOR", None), "full_name", "")
    if kind in _GRAPH_PUTS:
        return method in ("PutCheckpoint", "PutWrites", "UploadCheckpoint", "UploadWrites") and getattr(request, "request_id", "") != ""
    if kind in _GRAPH_EFFECT_WRITES:
        return method == _GRAPH_EFFECT_WRITES[kind] and getattr(request, "request_id", "") != ""
    if kind in _GRAPH_OTHER_REQUESTS:
        return method in _GRAPH_ALWAYS_SAFE
    if method == "SaveCheckpoint":
        return isinstance(request, pb.SaveCheckpointRequest) and request.request_id != ""
    if isinstance(request, (pb.CompleteSessionRequest, pb.ForkSessionRequest, pb.RewindSessionRequest)):
        return _SAFE_WITH_REQUEST_ID.get(method) is type(request) and request.request_id != ""
    return method in _ALWAYS_SAFE


def retry_wait(
    policy: RetryPolicy,
    logger: logging.Logger,
    method: str,
    request: object,
    err: Any,
    try_: int,
    deadline: float | None,
    autostart: Any = None,
) -> float | None:
    """Return the seconds to wait before trying a failed call again, or None
    when it must not be tried again: its error ``err`` (a grpc.RpcError) is
    not UNAVAILABLE, the call is not retry_safe, ``try_`` (0 for the first
    try) used up the policy's attempts, or the wait would pass the call's
    ``deadline`` (time.monotonic(), None for none). A retry is logged as a
    warning on ``logger``. With ``autostart`` (the daemon was started on
    demand), UNAVAILABLE starts it again first, so that the retry, or the
    next call, finds one; that start's failure is raised."""
    code = err.code() if hasattr(err, "code") else None
    if autostart is not None and code == grpc.StatusCode.UNAVAILABLE:
        autostart.ensure()
    attempts = max(1, policy.max_attempts) if retry_safe(method, request) else 1
    wait = policy.backoff(try_)
    if code != grpc.StatusCode.UNAVAILABLE or try_ + 1 >= attempts or (deadline is not None and time.monotonic() + wait >= deadline):
        return None
    logger.warning(
        "savepoint: daemon unavailable, retrying (method=%s attempt=%d of=%d in=%.3fs err=%s)",
        method, try_ + 2, attempts, wait, err.details() if hasattr(err, "details") else err,
    )
    return wait


def left(deadline: float | None) -> float | None:
    """The seconds until ``deadline`` (time.monotonic()), at least 0; None
    for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def ready_by(policy: RetryPolicy, started: float | None) -> float:
    """The time (time.monotonic()) until which a call whose first failure was
    at ``started`` (None: now) waits for its channel to reconnect."""
    return (time.monotonic() if started is None else started) + max(0.0, policy.reconnect_wait)


def _wait_bound(policy: RetryPolicy, until: float, deadline: float | None) -> float | None:
    """The seconds to wait for the channel, or None for no wait (disabled)."""
    if policy.reconnect_wait <= 0:
        return None
    end = until if deadline is None else min(until, deadline)
    return end - time.monotonic()


# The call that waits for the connection: the standard health check, sent
# with wait_for_ready, whose answer (any answer, UNIMPLEMENTED included)
# shows that the channel is connected. gRPC's connectivity watchers would
# need a polling thread per channel; a call needs nothing more.
_PROBE = "/grpc.health.v1.Health/Check"
_NOT_CONNECTED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def reconnected(policy: RetryPolicy, channel: grpc.Channel, until: float, deadline: float | None) -> bool:
    """Wait until ``channel`` is connected again, at most until ``until``
    and ``deadline`` (time.monotonic()); say whether to retry. With the wait
    disabled (reconnect_wait 0) it says yes at once."""
    bound = _wait_bound(policy, until, deadline)
    if bound is None:
        return True
    if bound <= 0:
        return False
    probe = channel.unary_unary(_PROBE, request_serializer=None, response_deserializer=None)
    try:
        probe(b"", timeout=bound, wait_for_ready=True)
    except grpc.RpcError as e:
        return e.code() not in _NOT_CONNECTED
    return True


async def areconnected(policy: RetryPolicy, channel: Any, until: float, deadline: float | None) -> bool:
    """reconnected for a grpc.aio channel."""
    bound = _wait_bound(policy, until, deadline)
    if bound is None:
        return True
    if bound <= 0:
        return False
    probe = channel.unary_unary(_PROBE, request_serializer=None, response_deserializer=None)
    try:
        await probe(b"", timeout=bound, wait_for_ready=True)
    except grpc.RpcError as e:
        return e.code() not in _NOT_CONNECTED
    return True
