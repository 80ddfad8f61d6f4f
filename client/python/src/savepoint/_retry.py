"""When and how a failed call is tried again: which calls, as each RPC
declares in the proto (read from the generated descriptors, as the Go and
TypeScript clients read them), and how, as the Go client's RetryPolicy."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import grpc

from savepoint.v1 import options_pb2
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

    ``budget`` keeps retrying a retry-safe call past ``max_attempts``, each
    retry ``max_backoff`` apart, while its wait ends within ``budget``
    seconds of the call's first failure (and before its deadline): long
    enough, the call outlasts a failover of savepointd's database
    (NO_WRITABLE_HOST, COMMIT_OUTCOME_UNKNOWN) or a restart of the daemon.
    0 leaves ``max_attempts`` alone to bound the retries.

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
    budget: float = 0.0

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


DEFAULT_RETRY_POLICY = RetryPolicy(budget=10.0)
"""5 attempts over about 1.5 seconds, then retries a second apart until 10
seconds after the first failure, waiting up to 5 seconds for the
connection, as the Go client's DefaultRetryPolicy. The budget covers a
PostgreSQL failover as ``make failover`` measures it (the longest time
without a writable host it has seen is 8.3 s; docs/reliability-postgres.md)."""

# When a call that may have been applied can be sent again, as its RPC
# declares it in the proto (proto/savepoint/v1/options.proto): "always" for
# NO_SIDE_EFFECTS or IDEMPOTENT, "request_id" for retry_with_request_id
# (only when the request carries one), "never" otherwise.
RetryRule = str


def service_retry_rules(service: Any) -> dict[str, RetryRule]:
    """The rule of each method of ``service`` (a ServiceDescriptor), by
    method name, read from its options."""
    rules: dict[str, RetryRule] = {}
    for m in service.methods:
        o = m.GetOptions()
        if o.idempotency_level in (o.NO_SIDE_EFFECTS, o.IDEMPOTENT):
            rules[m.name] = "always"
        elif o.Extensions[options_pb2.retry_with_request_id]:
            rules[m.name] = "request_id"
        else:
            rules[m.name] = "never"
    return rules


_RULES = service_retry_rules(pb.DESCRIPTOR.services_by_name["SavepointService"])
_GRAPH_FILE = "savepoint/v1/graph.proto"
_graph_rules: dict[str, RetryRule] = {}  # read on a graph request's first retry_safe


def retry_safe(method: str, request: object) -> bool:
    """Say whether repeating a call that may have been applied is harmless,
    as the RPC declares in the proto. ``method`` is a SavepointService RPC,
    or a GraphCheckpointService one when ``request`` is a graph_pb2 message
    (for UploadCheckpoint, its start; for UploadCheckpoint and UploadWrites,
    the PutCheckpoint or PutWrites request they stream). The graph stubs are
    never imported here: their rules are read from the request's own file."""
    rules = _RULES
    desc = getattr(request, "DESCRIPTOR", None)
    file = getattr(desc, "file", None)
    if file is not None and file.name == _GRAPH_FILE:
        if not _graph_rules:
            _graph_rules.update(service_retry_rules(file.services_by_name["GraphCheckpointService"]))
        rules = _graph_rules
    rule = rules.get(method, "never")
    if rule == "request_id":
        return getattr(request, "request_id", "") != ""
    return rule == "always"


def retry_wait(
    policy: RetryPolicy,
    logger: logging.Logger,
    method: str,
    request: object,
    err: Any,
    try_: int,
    deadline: float | None,
    autostart: Any = None,
    until: float | None = None,
) -> float | None:
    """Return the seconds to wait before trying a failed call again, or None
    when it must not be tried again: its error ``err`` (a grpc.RpcError) is
    not UNAVAILABLE, the call is not retry_safe, ``try_`` (0 for the first
    try) used up the policy's attempts, or the wait would pass the call's
    ``deadline`` (time.monotonic(), None for none). A retry is logged as a
    warning on ``logger``. With ``autostart`` (the daemon was started on
    demand), UNAVAILABLE starts it again first, so that the retry, or the
    next call, finds one; that start's failure is raised. ``until`` is what
    ready_by returned at the call's first failure (None at the first): the
    policy's budget counts from that failure."""
    code = err.code() if hasattr(err, "code") else None
    if autostart is not None and code == grpc.StatusCode.UNAVAILABLE:
        autostart.ensure()
    if code != grpc.StatusCode.UNAVAILABLE or not retry_safe(method, request):
        return None
    now = time.monotonic()
    failed_at = now if until is None else until - max(0.0, policy.reconnect_wait)
    wait = policy.backoff(try_)
    again = try_ + 1 < max(1, policy.max_attempts) or (policy.budget > 0 and now + wait - failed_at <= policy.budget)
    if not again or (deadline is not None and now + wait >= deadline):
        return None
    logger.warning(
        "savepoint: daemon unavailable, retrying (method=%s attempt=%d in=%.3fs err=%s)",
        method, try_ + 2, wait, err.details() if hasattr(err, "details") else err,
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
