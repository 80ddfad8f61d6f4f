"""The exceptions of the Savepoint client.

Every failed RPC raises a :class:`SavepointError` subclass chosen from the
``google.rpc.ErrorInfo`` reason the daemon sent (domain ``savepoint.v1``),
never from message text. The reason-to-class table is keyed by the generated
``ErrorReason`` enum constants, so a reason added to the proto without a
class here fails the test suite. Reasons are grouped as the Go client's
sentinels are: every INVALID_ARGUMENT reason is an :class:`InvalidArgumentError`,
and every reason that names a bad request field is also a :class:`FieldError`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import grpc

from savepoint._errnames import NAMES

if TYPE_CHECKING:
    from google.rpc import error_details_pb2
from savepoint.v1 import savepoint_pb2 as pb

__all__ = list(NAMES)

DOMAIN = "savepoint.v1"
"""The google.rpc.ErrorInfo domain of every Savepoint error."""

_REASON_PREFIX = "ERROR_REASON_"
_STATUS_DETAILS_KEY = "grpc-status-details-bin"


class SavepointError(Exception):
    """A failed Savepoint call.

    ``code`` is the gRPC status code (None for an error the client raised
    without asking the daemon), ``reason`` the ErrorInfo reason such as
    ``"SESSION_FENCED"`` (empty when the status carried no ErrorInfo of the
    savepoint.v1 domain: a transport error), ``metadata`` the ErrorInfo
    metadata, and ``current_revision``/``current_epoch`` the session's, parsed
    from the metadata when the daemon sent them (conflicts and fencing), else 0.
    """

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})
        self.current_revision = _parse_uint(self.metadata.get("current_revision"))
        self.current_epoch = _parse_uint(self.metadata.get("current_epoch"))
        self.context = ""

    def __str__(self) -> str:
        """The error's text, which ends in a full sentence: the context, the
        reason and code, and the message."""
        if self.code is None:
            text = f"savepoint: {self.message}"
        elif self.reason:
            text = f"savepoint: {self.reason} ({self.code.name}): {self.message}"
        else:
            text = f"savepoint: {self.code.name}: {self.message}"
        return sentence(f"{self.context}: {text}" if self.context else text)

    def with_context(self, context: str) -> SavepointError:
        """Return a copy of this error, of the same class, whose text starts
        with ``context`` (what the client was doing)."""
        e = copy.copy(self)
        e.context = f"{context}: {self.context}" if self.context else context
        e.__cause__ = self
        return e


# -- by reason ---------------------------------------------------------------


class InternalError(SavepointError):
    """INTERNAL: a daemon bug or an unexpected store failure; see its log."""


class SessionNotFoundError(SavepointError):
    """SESSION_NOT_FOUND: no such session; nothing to resume from."""


class SessionExistsError(SavepointError):
    """SESSION_EXISTS: a session with this id exists already."""


class SessionFencedError(SavepointError):
    """SESSION_FENCED: another process resumed the session; this one no
    longer owns it and must stop."""


class RevisionMismatchError(SavepointError):
    """REVISION_MISMATCH: the session changed since the revision this write
    built on."""


class RevisionNotFoundError(SavepointError):
    """REVISION_NOT_FOUND: the revision is not kept."""


class CallAlreadyRecordedError(SavepointError):
    """CALL_ALREADY_RECORDED: a tool use set pending already has a ledger entry."""


class CallNotPendingError(SavepointError):
    """CALL_NOT_PENDING: the tool use is not pending in the latest revision."""


class CallUnknownError(SavepointError):
    """CALL_UNKNOWN: the tool use was never pending in the session."""


class ToolNameMismatchError(SavepointError):
    """TOOL_NAME_MISMATCH: the name differs from the pending tool use's name."""


class EffectConflictError(SavepointError):
    """EFFECT_CONFLICT: a different outcome is recorded already; the first
    record wins."""


class CheckpointCorruptError(SavepointError):
    """CHECKPOINT_CORRUPT: the session's stored data failed its checksum or is
    incomplete; delete the session."""


class DiskFullError(SavepointError):
    """DISK_FULL: the daemon could not write for lack of space; reads are
    still served."""


class RequestTooLargeError(SavepointError):
    """REQUEST_TOO_LARGE: the whole request is over the daemon's request size
    limit (GetServerInfoResponse.max_request_bytes)."""


class PermissionDeniedError(SavepointError):
    """PERMISSION_DENIED: the daemon does not allow this process's uid or gid
    (its --allow-uid and --allow-gid)."""


class UploadAbortedError(SavepointError):
    """UPLOAD_ABORTED: the thread was deleted or copied over while the upload
    was staged; nothing was stored. Upload again."""


class EffectInputMismatchError(SavepointError):
    """EFFECT_INPUT_MISMATCH: the thread's tool use id was begun before with
    another tool name or input (some models reuse ids such as "call_0");
    nothing was written."""


class EffectNotBegunError(SavepointError):
    """EFFECT_NOT_BEGUN: a record for a thread's tool use that was never
    begun, or for an attempt other than the latest one begun."""


class CallNotInDoubtError(SavepointError):
    """CALL_NOT_IN_DOUBT: resolve_effect of a tool use that is not in doubt
    (recorded, not pending, or one reconcile runs); nothing was written."""


class ResolutionConflictError(SavepointError):
    """RESOLUTION_CONFLICT: the tool use was resolved already with another
    finding; the first resolution stands."""


class ApprovalNotWaitingError(SavepointError):
    """APPROVAL_NOT_WAITING: approve_effect of a tool use that cannot take a
    decision (begun without one, recorded, or neither waiting nor pending);
    nothing was written."""


class ApprovalConflictError(SavepointError):
    """APPROVAL_CONFLICT: the tool use was decided already otherwise; the
    first decision stands."""


class ApprovalInputMismatchError(SavepointError):
    """APPROVAL_INPUT_MISMATCH: the approval's input digest is not the
    call's; the approver saw other input. Nothing was written."""


class SessionCompletedError(SavepointError):
    """SESSION_COMPLETED: the session is completed or failed; saves and
    begin_effect need a Resume with reopen first, and completing it with
    another status or final output is refused."""


class PlaintextBackupError(SavepointError):
    """PLAINTEXT_BACKUP: the daemon's store has no encryption key, so its
    backup would be plaintext; set plaintext on the request to accept that."""


class BackupUnsupportedError(SavepointError):
    """BACKUP_UNSUPPORTED: the daemon's store cannot stream a backup
    (PostgreSQL: back the database up with its own tools, such as pg_dump)."""


class UnavailableError(SavepointError):
    """The daemon cannot be reached (gRPC UNAVAILABLE: down, restarting, or
    its store is closed). Calls that are safe to repeat were retried first."""


class CommitOutcomeUnknownError(UnavailableError):
    """COMMIT_OUTCOME_UNKNOWN: the daemon's connection to its database failed
    after COMMIT was sent, so the write may or may not be stored. The same
    request again (its request id, or its tool use id for an effect) is
    answered from what was stored or performed once; the client retried it so
    before raising this."""


class NoWritableHostError(UnavailableError):
    """NO_WRITABLE_HOST: no host of the daemon's database accepts writes (a
    failover); nothing was written. Reads are served from a standby where one
    answers."""


class CanceledError(SavepointError):
    """CANCELED: the call was canceled."""


class DeadlineExceededError(SavepointError):
    """DEADLINE_EXCEEDED: the call's deadline passed."""


class InvalidArgumentError(SavepointError):
    """Any INVALID_ARGUMENT answer; ``reason`` says which."""


class RequestIdReusedError(InvalidArgumentError):
    """REQUEST_ID_REUSED: a request id was sent again with a different payload."""


class KeepMessagesOutOfRangeError(InvalidArgumentError):
    """KEEP_MESSAGES_OUT_OF_RANGE: keep_messages is beyond the revision's history."""


class InvalidPageTokenError(InvalidArgumentError):
    """INVALID_PAGE_TOKEN: the page token is malformed or belongs to another
    request."""


class FieldError(InvalidArgumentError):
    """A request field the daemon refused; ``field`` names it."""

    @property
    def field(self) -> str:
        """The refused field, from the ErrorInfo metadata ("" when absent)."""
        return self.metadata.get("field", "")


class InvalidSessionIdError(FieldError):
    """INVALID_SESSION_ID: a session id is empty, too long or malformed."""


class InvalidToolUseIdError(FieldError):
    """INVALID_TOOL_USE_ID: a tool use id is empty, too long or malformed."""


class InvalidRequestIdError(FieldError):
    """INVALID_REQUEST_ID: a request id is malformed."""


class MissingFieldError(FieldError):
    """MISSING_FIELD: a required field is empty."""


class InvalidJsonError(FieldError):
    """INVALID_JSON: a JSON field does not hold valid JSON."""


class MessageTooLargeError(FieldError):
    """MESSAGE_TOO_LARGE: one message is over its size limit."""


class StateTooLargeError(FieldError):
    """STATE_TOO_LARGE: the state is over its size limit."""


class InvalidEffectClassError(FieldError):
    """INVALID_EFFECT_CLASS: an effect class is not one of the enum's values."""


class DuplicateToolUseIdError(FieldError):
    """DUPLICATE_TOOL_USE_ID: two pending tool uses share an id."""


class ToolUseIdMismatchError(FieldError):
    """TOOL_USE_ID_MISMATCH: BeginEffect's tool_use names another tool use
    than its tool_use_id."""


class InvalidLabelError(FieldError):
    """INVALID_LABEL: a label key or value is malformed or too long."""


class InvalidPageSizeError(FieldError):
    """INVALID_PAGE_SIZE: the page size is negative."""


class FieldTooLargeError(FieldError):
    """FIELD_TOO_LARGE: a field is over its size or count limit."""


class InvalidUtf8Error(FieldError):
    """INVALID_UTF8: a string field is not valid UTF-8."""


class InvalidGraphKeyError(FieldError):
    """INVALID_GRAPH_KEY: a GraphCheckpointService key field (thread id,
    namespace, checkpoint id, task id, channel, version, write index) is
    malformed or repeats within the request."""


class InvalidUploadError(FieldError):
    """INVALID_UPLOAD: an UploadCheckpoint stream is malformed; nothing was
    stored."""


class InvalidSessionStatusError(FieldError):
    """INVALID_SESSION_STATUS: a session status is not one the field accepts
    (CompleteSession takes COMPLETED or FAILED)."""


class InvalidOrderByError(FieldError):
    """INVALID_ORDER_BY: ListSessions' order_by is neither "session_id" nor
    "update_time desc"."""


class InvalidResolutionError(FieldError):
    """INVALID_RESOLUTION: a resolution's outcome or resolver kind is not a
    known value, or output or is_error came with NOT_DONE."""


class InvalidApprovalError(FieldError):
    """INVALID_APPROVAL: an approval's decision is not APPROVED or DENIED,
    or its input digest is not 32 bytes."""


# -- raised by the Session without asking the daemon ---------------------------


class ToolUsesPendingError(SavepointError):
    """The session has pending tool uses that point_b has not answered, so it
    cannot name new ones or change its history."""


class ResultsMismatchError(SavepointError):
    """The results given to point_b do not answer every pending tool use
    exactly once."""


class AlreadyRunError(SavepointError):
    """The session ran this tool use already; it never runs one twice."""


class NotRunError(SavepointError):
    """A result given to point_b to record claims an outcome that no tool of
    this session returned."""


class AwaitingApprovalError(SavepointError):
    """The tool requires a person's approval and has none for this call and
    input: it did not run. ``call`` is the tool use, ``approval`` the
    daemon's record of the request (its input digest). Approve it
    (``savepoint approve SESSION TOOL_USE_ID`` or Client.approve_effect),
    then run it again (reconcile, after a resume)."""

    def __init__(self, message: str, *, call: object = None, approval: object = None) -> None:
        super().__init__(message)
        self.call = call
        self.approval = approval


class DurableToolError(SavepointError):
    """A durable tool (savepoint.openai_agents) or a durable tool node or
    function (savepoint.langgraph) could not go through the ledger: its run
    has no SavepointSession or no thread, its tool use has no id or an id
    already in use, or a recorded outcome is unreadable. The tool was not
    run."""


REASON_CLASSES: Mapping[int, type[SavepointError]] = {
    pb.ERROR_REASON_INTERNAL: InternalError,
    pb.ERROR_REASON_SESSION_NOT_FOUND: SessionNotFoundError,
    pb.ERROR_REASON_SESSION_EXISTS: SessionExistsError,
    pb.ERROR_REASON_SESSION_FENCED: SessionFencedError,
    pb.ERROR_REASON_REVISION_MISMATCH: RevisionMismatchError,
    pb.ERROR_REASON_REVISION_NOT_FOUND: RevisionNotFoundError,
    pb.ERROR_REASON_REQUEST_ID_REUSED: RequestIdReusedError,
    pb.ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE: KeepMessagesOutOfRangeError,
    pb.ERROR_REASON_CALL_ALREADY_RECORDED: CallAlreadyRecordedError,
    pb.ERROR_REASON_CALL_NOT_PENDING: CallNotPendingError,
    pb.ERROR_REASON_CALL_UNKNOWN: CallUnknownError,
    pb.ERROR_REASON_TOOL_NAME_MISMATCH: ToolNameMismatchError,
    pb.ERROR_REASON_EFFECT_CONFLICT: EffectConflictError,
    pb.ERROR_REASON_CHECKPOINT_CORRUPT: CheckpointCorruptError,
    pb.ERROR_REASON_INVALID_PAGE_TOKEN: InvalidPageTokenError,
    pb.ERROR_REASON_DISK_FULL: DiskFullError,
    pb.ERROR_REASON_UNAVAILABLE: UnavailableError,
    pb.ERROR_REASON_CANCELED: CanceledError,
    pb.ERROR_REASON_DEADLINE_EXCEEDED: DeadlineExceededError,
    pb.ERROR_REASON_INVALID_ARGUMENT: InvalidArgumentError,
    pb.ERROR_REASON_INVALID_SESSION_ID: InvalidSessionIdError,
    pb.ERROR_REASON_INVALID_TOOL_USE_ID: InvalidToolUseIdError,
    pb.ERROR_REASON_INVALID_REQUEST_ID: InvalidRequestIdError,
    pb.ERROR_REASON_MISSING_FIELD: MissingFieldError,
    pb.ERROR_REASON_INVALID_JSON: InvalidJsonError,
    pb.ERROR_REASON_MESSAGE_TOO_LARGE: MessageTooLargeError,
    pb.ERROR_REASON_STATE_TOO_LARGE: StateTooLargeError,
    pb.ERROR_REASON_INVALID_EFFECT_CLASS: InvalidEffectClassError,
    pb.ERROR_REASON_DUPLICATE_TOOL_USE_ID: DuplicateToolUseIdError,
    pb.ERROR_REASON_TOOL_USE_ID_MISMATCH: ToolUseIdMismatchError,
    pb.ERROR_REASON_INVALID_LABEL: InvalidLabelError,
    pb.ERROR_REASON_INVALID_PAGE_SIZE: InvalidPageSizeError,
    pb.ERROR_REASON_FIELD_TOO_LARGE: FieldTooLargeError,
    pb.ERROR_REASON_REQUEST_TOO_LARGE: RequestTooLargeError,
    pb.ERROR_REASON_INVALID_UTF8: InvalidUtf8Error,
    pb.ERROR_REASON_PERMISSION_DENIED: PermissionDeniedError,
    pb.ERROR_REASON_INVALID_GRAPH_KEY: InvalidGraphKeyError,
    pb.ERROR_REASON_INVALID_UPLOAD: InvalidUploadError,
    pb.ERROR_REASON_UPLOAD_ABORTED: UploadAbortedError,
    pb.ERROR_REASON_SESSION_COMPLETED: SessionCompletedError,
    pb.ERROR_REASON_INVALID_SESSION_STATUS: InvalidSessionStatusError,
    pb.ERROR_REASON_PLAINTEXT_BACKUP: PlaintextBackupError,
    pb.ERROR_REASON_BACKUP_UNSUPPORTED: BackupUnsupportedError,
    pb.ERROR_REASON_INVALID_ORDER_BY: InvalidOrderByError,
    pb.ERROR_REASON_EFFECT_INPUT_MISMATCH: EffectInputMismatchError,
    pb.ERROR_REASON_EFFECT_NOT_BEGUN: EffectNotBegunError,
    pb.ERROR_REASON_CALL_NOT_IN_DOUBT: CallNotInDoubtError,
    pb.ERROR_REASON_RESOLUTION_CONFLICT: ResolutionConflictError,
    pb.ERROR_REASON_INVALID_RESOLUTION: InvalidResolutionError,
    pb.ERROR_REASON_APPROVAL_NOT_WAITING: ApprovalNotWaitingError,
    pb.ERROR_REASON_APPROVAL_CONFLICT: ApprovalConflictError,
    pb.ERROR_REASON_APPROVAL_INPUT_MISMATCH: ApprovalInputMismatchError,
    pb.ERROR_REASON_INVALID_APPROVAL: InvalidApprovalError,
    pb.ERROR_REASON_COMMIT_OUTCOME_UNKNOWN: CommitOutcomeUnknownError,
    pb.ERROR_REASON_NO_WRITABLE_HOST: NoWritableHostError,
}
"""The exception class of every ErrorReason value but UNSPECIFIED."""


def sentence(text: str) -> str:
    """Return ``text`` ending as a sentence does: without a dangling ":",
    ";" or "," and with a full stop unless it ends with ".", "!" or "?"."""
    t = text.rstrip().rstrip(":;,").rstrip()
    return t if t.endswith((".", "!", "?")) else t + "."


UNREACHABLE_HINT = "savepointd did not answer: check that it is running and that the address is the one it listens on."
"""The sentence that ends the text of an UNAVAILABLE error that did not come
from the daemon (no ErrorInfo): the connection itself failed."""


def reason_name(value: int) -> str:
    """Return the wire reason of an ErrorReason value: its name without the
    ``ERROR_REASON_`` prefix, as in ``"SESSION_FENCED"``."""
    return pb.ErrorReason.Name(value).removeprefix(_REASON_PREFIX)


_BY_REASON: dict[str, type[SavepointError]] = {reason_name(v): c for v, c in REASON_CLASSES.items()}

_BY_CODE: dict[grpc.StatusCode, type[SavepointError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.CANCELLED: CanceledError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def error_class(reason: str, code: grpc.StatusCode | None) -> type[SavepointError]:
    """Return the class of an error with this reason and code: the reason's
    class, else the code's (INVALID_ARGUMENT, UNAVAILABLE, CANCELLED,
    DEADLINE_EXCEEDED), else SavepointError."""
    if reason in _BY_REASON:
        return _BY_REASON[reason]
    if code is not None and code in _BY_CODE:
        return _BY_CODE[code]
    return SavepointError


def from_rpc_error(err: grpc.RpcError) -> SavepointError:
    """Translate a failed RPC (sync or grpc.aio) into its SavepointError. It
    is the one place where statuses become client errors."""
    code: grpc.StatusCode | None = err.code() if hasattr(err, "code") else None
    message = (err.details() if hasattr(err, "details") else None) or ""
    reason, metadata = "", {}
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    info = _error_info(trailing)
    if info is not None:
        reason, metadata = info.reason, dict(info.metadata)
    if code == grpc.StatusCode.UNAVAILABLE and not reason:
        message = f"{sentence(message)} {UNREACHABLE_HINT}" if message else UNREACHABLE_HINT
    cls = error_class(reason, code)
    e = cls(message, code=code or grpc.StatusCode.UNKNOWN, reason=reason, metadata=metadata)
    e.__cause__ = err
    return e


def _error_info(trailing: Any) -> error_details_pb2.ErrorInfo | None:
    # Imported here: only an error with status details needs them.
    from google.rpc import error_details_pb2, status_pb2

    for key, value in trailing or ():
        if key != _STATUS_DETAILS_KEY:
            continue
        try:
            st = status_pb2.Status.FromString(value)
        except Exception:  # a status we cannot decode carries no reason
            return None
        for detail in st.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                if info.domain == DOMAIN:
                    return info
    return None


def _parse_uint(s: str | None) -> int:
    try:
        n = int(s or "")
    except ValueError:
        return 0
    return n if n >= 0 else 0


def outcome_unknown(err: BaseException) -> bool:
    """Say whether a failed call may have been applied: the daemon did not
    answer with a definite refusal."""
    if not isinstance(err, SavepointError):
        return True
    if err.code is None:
        return False  # raised by the client itself: nothing was sent
    return err.reason in ("", "UNAVAILABLE", "INTERNAL", "COMMIT_OUTCOME_UNKNOWN")
