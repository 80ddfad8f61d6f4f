"""The client operations the sync and asyncio clients share, written once
as generators of the calls they make (a Step each), and the driver of the
sync client; savepoint.aio drives them over grpc.aio."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from google.protobuf.message import Message as ProtoMessage

from savepoint.errors import CheckpointCorruptError, SavepointError, SessionNotFoundError
from savepoint.types import Message
from savepoint.v1 import savepoint_pb2 as pb

T = TypeVar("T")


class Step(NamedTuple):
    """One call of a sequence that the sync and asyncio clients share: the
    Raw method, its request and its timeout (None: the client's)."""

    method: str
    request: ProtoMessage
    timeout: float | None = None


Steps = Generator[Step, Any, T]
"""A client operation written once: it yields each call it needs and is
sent its response, or thrown its exception. run_steps and arun_steps (in
savepoint.aio) drive it over Raw and AsyncRaw."""


def run_steps(raw: Any, steps: Steps[T]) -> T:
    """Drive ``steps`` over the sync Raw: each call's response is sent back
    to it, each exception thrown into it; return what it returns."""
    try:
        step = next(steps)
        while True:
            try:
                resp = getattr(raw, step.method)(step.request, step.timeout)
            except BaseException as e:
                step = steps.throw(e)
            else:
                step = steps.send(resp)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def q(s: str) -> str:
    """s quoted as Go's %q quotes it, for messages that match the Go client's."""
    return json.dumps(s, ensure_ascii=False)


def check_page(session_id: str, page: pb.ListMessagesResponse, loaded: int) -> None:
    """Check that a history page continues the messages loaded so far."""
    if page.first_index != loaded or (not page.messages and page.next_page_token):
        raise SavepointError(
            f"loading the history of {q(session_id)}: page at index {page.first_index} with "
            f"{len(page.messages)} messages after {loaded} loaded"
        )


def check_count(session_id: str, cp: pb.Checkpoint, loaded: int) -> None:
    if loaded != cp.message_count:
        raise SavepointError(
            f"loading the history of {q(session_id)}: got {loaded} messages, revision {cp.revision} has {cp.message_count}"
        )


def to_messages(src: Sequence[pb.Message]) -> list[Message]:
    return [Message(role=m.role, content_json=m.content_json) for m in src]


def delete_steps(session_id: str) -> Steps[None]:
    """Take ownership of a session and delete it, so that its old owner is
    fenced; a missing session is no error. A session that cannot be decoded
    is deleted under the epoch its error reports."""
    try:
        epoch = (yield Step("Resume", pb.ResumeRequest(session_id=session_id))).epoch
    except SessionNotFoundError:
        return
    except CheckpointCorruptError as e:
        epoch = e.current_epoch
    try:
        yield Step("DeleteSession", pb.DeleteSessionRequest(session_id=session_id, epoch=epoch))
    except SessionNotFoundError:
        pass


def history_steps(session_id: str, cp: pb.Checkpoint, token: str) -> Steps[list[Message]]:
    """The whole history of cp: its first page, then ListMessages pages
    from ``token``, checked to continue each other and to add up to its
    message count."""
    msgs = to_messages(cp.messages)
    while token:
        try:
            page = yield Step("ListMessages", pb.ListMessagesRequest(session_id=session_id, revision=cp.revision, page_token=token))
        except SavepointError as e:
            raise e.with_context(f"loading the history of {q(session_id)}") from e
        check_page(session_id, page, len(msgs))
        msgs.extend(to_messages(page.messages))
        token = page.next_page_token
    check_count(session_id, cp, len(msgs))
    return msgs


def get_session_steps(session_id: str, revision: int | None) -> Steps[tuple[pb.Checkpoint, list[Message]]]:
    """Client.get_session: a kept revision (None: the latest) with its
    whole history."""
    req = pb.GetSessionRequest(session_id=session_id)
    if revision is not None:
        req.revision = revision
    r = yield Step("GetSession", req)
    return r.checkpoint, (yield from history_steps(session_id, r.checkpoint, r.next_page_token))
