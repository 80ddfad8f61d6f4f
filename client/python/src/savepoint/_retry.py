"""When and how a failed call is tried again: exactly as the Go client's
retrySafe and RetryPolicy say."""

from __future__ import annotations

import random
from dataclasses import dataclass

from savepoint.v1 import savepoint_pb2 as pb

SERVICE = "savepoint.v1.SavepointService"


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
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 1.0

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
"""5 attempts over about 1.5 seconds, as the Go client's DefaultRetryPolicy."""

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
}


def retry_safe(method: str, request: object) -> bool:
    """Say whether repeating a call that may have been applied is harmless.
    Methods not listed (DeleteSession, Verify, GetServerInfo, any added later)
    are not, as in the Go client."""
    if method == "SaveCheckpoint":
        return isinstance(request, pb.SaveCheckpointRequest) and request.request_id != ""
    if method in _SAFE_WITH_REQUEST_ID:
        return isinstance(request, _SAFE_WITH_REQUEST_ID[method]) and getattr(request, "request_id", "") != ""
    return method in _ALWAYS_SAFE
