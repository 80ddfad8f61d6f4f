import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from savepoint.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_INTERNAL: _ClassVar[ErrorReason]
    ERROR_REASON_SESSION_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_SESSION_EXISTS: _ClassVar[ErrorReason]
    ERROR_REASON_SESSION_FENCED: _ClassVar[ErrorReason]
    ERROR_REASON_REVISION_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_REVISION_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_REQUEST_ID_REUSED: _ClassVar[ErrorReason]
    ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE: _ClassVar[ErrorReason]
    ERROR_REASON_CALL_ALREADY_RECORDED: _ClassVar[ErrorReason]
    ERROR_REASON_CALL_NOT_PENDING: _ClassVar[ErrorReason]
    ERROR_REASON_CALL_UNKNOWN: _ClassVar[ErrorReason]
    ERROR_REASON_TOOL_NAME_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_EFFECT_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_CHECKPOINT_CORRUPT: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_PAGE_TOKEN: _ClassVar[ErrorReason]
    ERROR_REASON_DISK_FULL: _ClassVar[ErrorReason]
    ERROR_REASON_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_CANCELED: _ClassVar[ErrorReason]
    ERROR_REASON_DEADLINE_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENT: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_SESSION_ID: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_TOOL_USE_ID: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_REQUEST_ID: _ClassVar[ErrorReason]
    ERROR_REASON_MISSING_FIELD: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_JSON: _ClassVar[ErrorReason]
    ERROR_REASON_MESSAGE_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_STATE_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_EFFECT_CLASS: _ClassVar[ErrorReason]
    ERROR_REASON_DUPLICATE_TOOL_USE_ID: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_LABEL: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_PAGE_SIZE: _ClassVar[ErrorReason]
    ERROR_REASON_FIELD_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_REQUEST_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_UTF8: _ClassVar[ErrorReason]
    ERROR_REASON_PERMISSION_DENIED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_GRAPH_KEY: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_UPLOAD: _ClassVar[ErrorReason]
    ERROR_REASON_UPLOAD_ABORTED: _ClassVar[ErrorReason]
    ERROR_REASON_SESSION_COMPLETED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_SESSION_STATUS: _ClassVar[ErrorReason]
    ERROR_REASON_PLAINTEXT_BACKUP: _ClassVar[ErrorReason]
    ERROR_REASON_BACKUP_UNSUPPORTED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ORDER_BY: _ClassVar[ErrorReason]
    ERROR_REASON_EFFECT_INPUT_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_EFFECT_NOT_BEGUN: _ClassVar[ErrorReason]
    ERROR_REASON_TOOL_USE_ID_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_CALL_NOT_IN_DOUBT: _ClassVar[ErrorReason]
    ERROR_REASON_RESOLUTION_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_RESOLUTION: _ClassVar[ErrorReason]
    ERROR_REASON_APPROVAL_NOT_WAITING: _ClassVar[ErrorReason]
    ERROR_REASON_APPROVAL_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_APPROVAL_INPUT_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_APPROVAL: _ClassVar[ErrorReason]
    ERROR_REASON_COMMIT_OUTCOME_UNKNOWN: _ClassVar[ErrorReason]
    ERROR_REASON_NO_WRITABLE_HOST: _ClassVar[ErrorReason]

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATUS_UNSPECIFIED: _ClassVar[SessionStatus]
    SESSION_STATUS_ACTIVE: _ClassVar[SessionStatus]
    SESSION_STATUS_COMPLETED: _ClassVar[SessionStatus]
    SESSION_STATUS_FAILED: _ClassVar[SessionStatus]

class EffectClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EFFECT_CLASS_UNSPECIFIED: _ClassVar[EffectClass]
    EFFECT_CLASS_READ_ONLY: _ClassVar[EffectClass]
    EFFECT_CLASS_IDEMPOTENT: _ClassVar[EffectClass]
    EFFECT_CLASS_SIDE_EFFECT: _ClassVar[EffectClass]

class ResolutionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOLUTION_OUTCOME_UNSPECIFIED: _ClassVar[ResolutionOutcome]
    RESOLUTION_OUTCOME_DONE: _ClassVar[ResolutionOutcome]
    RESOLUTION_OUTCOME_NOT_DONE: _ClassVar[ResolutionOutcome]

class ResolverKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOLVER_KIND_UNSPECIFIED: _ClassVar[ResolverKind]
    RESOLVER_KIND_VERIFY: _ClassVar[ResolverKind]
    RESOLVER_KIND_PERSON: _ClassVar[ResolverKind]

class ApprovalStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_STATUS_UNSPECIFIED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_WAITING: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_APPROVED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_DENIED: _ClassVar[ApprovalStatus]

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_REUSE: _ClassVar[Decision]
    DECISION_RUN: _ClassVar[Decision]
    DECISION_IN_DOUBT: _ClassVar[Decision]
    DECISION_AWAIT_APPROVAL: _ClassVar[Decision]
    DECISION_DENIED: _ClassVar[Decision]

class WatchEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WATCH_EVENT_TYPE_UNSPECIFIED: _ClassVar[WatchEventType]
    WATCH_EVENT_TYPE_CHANGED: _ClassVar[WatchEventType]
    WATCH_EVENT_TYPE_REMOVED: _ClassVar[WatchEventType]
    WATCH_EVENT_TYPE_HEARTBEAT: _ClassVar[WatchEventType]
    WATCH_EVENT_TYPE_RESYNC: _ClassVar[WatchEventType]
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_INTERNAL: ErrorReason
ERROR_REASON_SESSION_NOT_FOUND: ErrorReason
ERROR_REASON_SESSION_EXISTS: ErrorReason
ERROR_REASON_SESSION_FENCED: ErrorReason
ERROR_REASON_REVISION_MISMATCH: ErrorReason
ERROR_REASON_REVISION_NOT_FOUND: ErrorReason
ERROR_REASON_REQUEST_ID_REUSED: ErrorReason
ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE: ErrorReason
ERROR_REASON_CALL_ALREADY_RECORDED: ErrorReason
ERROR_REASON_CALL_NOT_PENDING: ErrorReason
ERROR_REASON_CALL_UNKNOWN: ErrorReason
ERROR_REASON_TOOL_NAME_MISMATCH: ErrorReason
ERROR_REASON_EFFECT_CONFLICT: ErrorReason
ERROR_REASON_CHECKPOINT_CORRUPT: ErrorReason
ERROR_REASON_INVALID_PAGE_TOKEN: ErrorReason
ERROR_REASON_DISK_FULL: ErrorReason
ERROR_REASON_UNAVAILABLE: ErrorReason
ERROR_REASON_CANCELED: ErrorReason
ERROR_REASON_DEADLINE_EXCEEDED: ErrorReason
ERROR_REASON_INVALID_ARGUMENT: ErrorReason
ERROR_REASON_INVALID_SESSION_ID: ErrorReason
ERROR_REASON_INVALID_TOOL_USE_ID: ErrorReason
ERROR_REASON_INVALID_REQUEST_ID: ErrorReason
ERROR_REASON_MISSING_FIELD: ErrorReason
ERROR_REASON_INVALID_JSON: ErrorReason
ERROR_REASON_MESSAGE_TOO_LARGE: ErrorReason
ERROR_REASON_STATE_TOO_LARGE: ErrorReason
ERROR_REASON_INVALID_EFFECT_CLASS: ErrorReason
ERROR_REASON_DUPLICATE_TOOL_USE_ID: ErrorReason
ERROR_REASON_INVALID_LABEL: ErrorReason
ERROR_REASON_INVALID_PAGE_SIZE: ErrorReason
ERROR_REASON_FIELD_TOO_LARGE: ErrorReason
ERROR_REASON_REQUEST_TOO_LARGE: ErrorReason
ERROR_REASON_INVALID_UTF8: ErrorReason
ERROR_REASON_PERMISSION_DENIED: ErrorReason
ERROR_REASON_INVALID_GRAPH_KEY: ErrorReason
ERROR_REASON_INVALID_UPLOAD: ErrorReason
ERROR_REASON_UPLOAD_ABORTED: ErrorReason
ERROR_REASON_SESSION_COMPLETED: ErrorReason
ERROR_REASON_INVALID_SESSION_STATUS: ErrorReason
ERROR_REASON_PLAINTEXT_BACKUP: ErrorReason
ERROR_REASON_BACKUP_UNSUPPORTED: ErrorReason
ERROR_REASON_INVALID_ORDER_BY: ErrorReason
ERROR_REASON_EFFECT_INPUT_MISMATCH: ErrorReason
ERROR_REASON_EFFECT_NOT_BEGUN: ErrorReason
ERROR_REASON_TOOL_USE_ID_MISMATCH: ErrorReason
ERROR_REASON_CALL_NOT_IN_DOUBT: ErrorReason
ERROR_REASON_RESOLUTION_CONFLICT: ErrorReason
ERROR_REASON_INVALID_RESOLUTION: ErrorReason
ERROR_REASON_APPROVAL_NOT_WAITING: ErrorReason
ERROR_REASON_APPROVAL_CONFLICT: ErrorReason
ERROR_REASON_APPROVAL_INPUT_MISMATCH: ErrorReason
ERROR_REASON_INVALID_APPROVAL: ErrorReason
ERROR_REASON_COMMIT_OUTCOME_UNKNOWN: ErrorReason
ERROR_REASON_NO_WRITABLE_HOST: ErrorReason
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_ACTIVE: SessionStatus
SESSION_STATUS_COMPLETED: SessionStatus
SESSION_STATUS_FAILED: SessionStatus
EFFECT_CLASS_UNSPECIFIED: EffectClass
EFFECT_CLASS_READ_ONLY: EffectClass
EFFECT_CLASS_IDEMPOTENT: EffectClass
EFFECT_CLASS_SIDE_EFFECT: EffectClass
RESOLUTION_OUTCOME_UNSPECIFIED: ResolutionOutcome
RESOLUTION_OUTCOME_DONE: ResolutionOutcome
RESOLUTION_OUTCOME_NOT_DONE: ResolutionOutcome
RESOLVER_KIND_UNSPECIFIED: ResolverKind
RESOLVER_KIND_VERIFY: ResolverKind
RESOLVER_KIND_PERSON: ResolverKind
APPROVAL_STATUS_UNSPECIFIED: ApprovalStatus
APPROVAL_STATUS_WAITING: ApprovalStatus
APPROVAL_STATUS_APPROVED: ApprovalStatus
APPROVAL_STATUS_DENIED: ApprovalStatus
DECISION_UNSPECIFIED: Decision
DECISION_REUSE: Decision
DECISION_RUN: Decision
DECISION_IN_DOUBT: Decision
DECISION_AWAIT_APPROVAL: Decision
DECISION_DENIED: Decision
WATCH_EVENT_TYPE_UNSPECIFIED: WatchEventType
WATCH_EVENT_TYPE_CHANGED: WatchEventType
WATCH_EVENT_TYPE_REMOVED: WatchEventType
WATCH_EVENT_TYPE_HEARTBEAT: WatchEventType
WATCH_EVENT_TYPE_RESYNC: WatchEventType

class Message(_message.Message):
    __slots__ = ("role", "content_json")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    role: str
    content_json: str
    def __init__(self, role: _Optional[str] = ..., content_json: _Optional[str] = ...) -> None: ...

class ToolUse(_message.Message):
    __slots__ = ("tool_use_id", "name", "input_json", "effect_class", "begin_tracked", "repeatable")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TRACKED_FIELD_NUMBER: _ClassVar[int]
    REPEATABLE_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    name: str
    input_json: str
    effect_class: EffectClass
    begin_tracked: bool
    repeatable: bool
    def __init__(self, tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., input_json: _Optional[str] = ..., effect_class: _Optional[_Union[EffectClass, str]] = ..., begin_tracked: _Optional[bool] = ..., repeatable: _Optional[bool] = ...) -> None: ...

class Effect(_message.Message):
    __slots__ = ("tool_use_id", "name", "output", "is_error", "record_time", "late", "refused", "resolution")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    name: str
    output: str
    is_error: bool
    record_time: _timestamp_pb2.Timestamp
    late: bool
    refused: bool
    resolution: EffectResolution
    def __init__(self, tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., output: _Optional[str] = ..., is_error: _Optional[bool] = ..., record_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., late: _Optional[bool] = ..., refused: _Optional[bool] = ..., resolution: _Optional[_Union[EffectResolution, _Mapping]] = ...) -> None: ...

class EffectResolution(_message.Message):
    __slots__ = ("outcome", "resolver_kind", "resolved_by", "note", "resolve_time", "retry_begun")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_KIND_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_TIME_FIELD_NUMBER: _ClassVar[int]
    RETRY_BEGUN_FIELD_NUMBER: _ClassVar[int]
    outcome: ResolutionOutcome
    resolver_kind: ResolverKind
    resolved_by: str
    note: str
    resolve_time: _timestamp_pb2.Timestamp
    retry_begun: bool
    def __init__(self, outcome: _Optional[_Union[ResolutionOutcome, str]] = ..., resolver_kind: _Optional[_Union[ResolverKind, str]] = ..., resolved_by: _Optional[str] = ..., note: _Optional[str] = ..., resolve_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retry_begun: _Optional[bool] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("session_id", "revision", "epoch", "task", "turn", "tokens_used", "message_count", "messages", "pending_tool_uses", "state_json", "labels", "save_time", "status", "final_output", "complete_time", "create_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_USES_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SAVE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    revision: int
    epoch: int
    task: str
    turn: int
    tokens_used: int
    message_count: int
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    pending_tool_uses: _containers.RepeatedCompositeFieldContainer[ToolUse]
    state_json: str
    labels: _containers.ScalarMap[str, str]
    save_time: _timestamp_pb2.Timestamp
    status: SessionStatus
    final_output: str
    complete_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, session_id: _Optional[str] = ..., revision: _Optional[int] = ..., epoch: _Optional[int] = ..., task: _Optional[str] = ..., turn: _Optional[int] = ..., tokens_used: _Optional[int] = ..., message_count: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., pending_tool_uses: _Optional[_Iterable[_Union[ToolUse, _Mapping]]] = ..., state_json: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., save_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., final_output: _Optional[str] = ..., complete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SaveCheckpointRequest(_message.Message):
    __slots__ = ("session_id", "expected_revision", "epoch", "request_id", "task", "turn", "tokens_used", "keep_messages", "append_messages", "pending_tool_uses", "state_json", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    KEEP_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    APPEND_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_USES_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    expected_revision: int
    epoch: int
    request_id: str
    task: str
    turn: int
    tokens_used: int
    keep_messages: int
    append_messages: _containers.RepeatedCompositeFieldContainer[Message]
    pending_tool_uses: _containers.RepeatedCompositeFieldContainer[ToolUse]
    state_json: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, session_id: _Optional[str] = ..., expected_revision: _Optional[int] = ..., epoch: _Optional[int] = ..., request_id: _Optional[str] = ..., task: _Optional[str] = ..., turn: _Optional[int] = ..., tokens_used: _Optional[int] = ..., keep_messages: _Optional[int] = ..., append_messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., pending_tool_uses: _Optional[_Iterable[_Union[ToolUse, _Mapping]]] = ..., state_json: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SaveCheckpointResponse(_message.Message):
    __slots__ = ("revision", "message_count", "epoch")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    revision: int
    message_count: int
    epoch: int
    def __init__(self, revision: _Optional[int] = ..., message_count: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class BeginEffectRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "epoch", "tool_use", "request_id", "requires_approval")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    epoch: int
    tool_use: ToolUse
    request_id: str
    requires_approval: bool
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., epoch: _Optional[int] = ..., tool_use: _Optional[_Union[ToolUse, _Mapping]] = ..., request_id: _Optional[str] = ..., requires_approval: _Optional[bool] = ...) -> None: ...

class BeginEffectResponse(_message.Message):
    __slots__ = ("idempotency_key", "already_begun", "effect", "decision", "approval", "duplicate")
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ALREADY_BEGUN_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    already_begun: bool
    effect: Effect
    decision: Decision
    approval: EffectApproval
    duplicate: DuplicateToolUse
    def __init__(self, idempotency_key: _Optional[str] = ..., already_begun: _Optional[bool] = ..., effect: _Optional[_Union[Effect, _Mapping]] = ..., decision: _Optional[_Union[Decision, str]] = ..., approval: _Optional[_Union[EffectApproval, _Mapping]] = ..., duplicate: _Optional[_Union[DuplicateToolUse, _Mapping]] = ...) -> None: ...

class DuplicateToolUse(_message.Message):
    __slots__ = ("tool_use_id", "epoch", "idempotency_key", "effect", "tool_result_text", "is_error")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    epoch: int
    idempotency_key: str
    effect: Effect
    tool_result_text: str
    is_error: bool
    def __init__(self, tool_use_id: _Optional[str] = ..., epoch: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., effect: _Optional[_Union[Effect, _Mapping]] = ..., tool_result_text: _Optional[str] = ..., is_error: _Optional[bool] = ...) -> None: ...

class EffectApproval(_message.Message):
    __slots__ = ("status", "input_digest", "request_time", "decided_by", "note", "decide_time", "spent")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INPUT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    DECIDE_TIME_FIELD_NUMBER: _ClassVar[int]
    SPENT_FIELD_NUMBER: _ClassVar[int]
    status: ApprovalStatus
    input_digest: bytes
    request_time: _timestamp_pb2.Timestamp
    decided_by: str
    note: str
    decide_time: _timestamp_pb2.Timestamp
    spent: bool
    def __init__(self, status: _Optional[_Union[ApprovalStatus, str]] = ..., input_digest: _Optional[bytes] = ..., request_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decided_by: _Optional[str] = ..., note: _Optional[str] = ..., decide_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., spent: _Optional[bool] = ...) -> None: ...

class RecordEffectRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "name", "output", "is_error", "refused", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    name: str
    output: str
    is_error: bool
    refused: bool
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., output: _Optional[str] = ..., is_error: _Optional[bool] = ..., refused: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class RecordEffectResponse(_message.Message):
    __slots__ = ("effect", "already_recorded")
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RECORDED_FIELD_NUMBER: _ClassVar[int]
    effect: Effect
    already_recorded: bool
    def __init__(self, effect: _Optional[_Union[Effect, _Mapping]] = ..., already_recorded: _Optional[bool] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("session_id", "reopen")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REOPEN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reopen: bool
    def __init__(self, session_id: _Optional[str] = ..., reopen: _Optional[bool] = ...) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ("checkpoint", "epoch", "next_page_token")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    checkpoint: Checkpoint
    epoch: int
    next_page_token: str
    def __init__(self, checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., epoch: _Optional[int] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ReconcileRequest(_message.Message):
    __slots__ = ("session_id", "page_token", "tool_use_ids")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_IDS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    page_token: str
    tool_use_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[str] = ..., page_token: _Optional[str] = ..., tool_use_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Resolution(_message.Message):
    __slots__ = ("tool_use", "decision", "effect", "idempotency_key", "tool_result_text", "begun", "resolution", "approval")
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_TEXT_FIELD_NUMBER: _ClassVar[int]
    BEGUN_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    tool_use: ToolUse
    decision: Decision
    effect: Effect
    idempotency_key: str
    tool_result_text: str
    begun: bool
    resolution: EffectResolution
    approval: EffectApproval
    def __init__(self, tool_use: _Optional[_Union[ToolUse, _Mapping]] = ..., decision: _Optional[_Union[Decision, str]] = ..., effect: _Optional[_Union[Effect, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., tool_result_text: _Optional[str] = ..., begun: _Optional[bool] = ..., resolution: _Optional[_Union[EffectResolution, _Mapping]] = ..., approval: _Optional[_Union[EffectApproval, _Mapping]] = ...) -> None: ...

class ReconcileResponse(_message.Message):
    __slots__ = ("revision", "resolutions", "next_page_token")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    revision: int
    resolutions: _containers.RepeatedCompositeFieldContainer[Resolution]
    next_page_token: str
    def __init__(self, revision: _Optional[int] = ..., resolutions: _Optional[_Iterable[_Union[Resolution, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id", "revision")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    revision: int
    def __init__(self, session_id: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("checkpoint", "next_page_token")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    checkpoint: Checkpoint
    next_page_token: str
    def __init__(self, checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("session_id", "revision", "page_size", "page_token")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    revision: int
    page_size: int
    page_token: str
    def __init__(self, session_id: _Optional[str] = ..., revision: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "first_index", "revision", "next_page_token")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    first_index: int
    revision: int
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., first_index: _Optional[int] = ..., revision: _Optional[int] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "label_filter", "status_filter", "has_pending_tool_uses", "min_idle", "order_by")
    class LabelFilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABEL_FILTER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FILTER_FIELD_NUMBER: _ClassVar[int]
    HAS_PENDING_TOOL_USES_FIELD_NUMBER: _ClassVar[int]
    MIN_IDLE_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    label_filter: _containers.ScalarMap[str, str]
    status_filter: SessionStatus
    has_pending_tool_uses: bool
    min_idle: _duration_pb2.Duration
    order_by: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., label_filter: _Optional[_Mapping[str, str]] = ..., status_filter: _Optional[_Union[SessionStatus, str]] = ..., has_pending_tool_uses: _Optional[bool] = ..., min_idle: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., order_by: _Optional[str] = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ("session_id", "revision", "epoch", "task", "turn", "message_count", "pending_tool_use_count", "labels", "update_time", "in_doubt_tool_use_count", "status", "create_time", "resolved_by_verify_count", "resolved_by_person_count", "awaiting_approval_count")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_USE_COUNT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    IN_DOUBT_TOOL_USE_COUNT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_VERIFY_COUNT_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_PERSON_COUNT_FIELD_NUMBER: _ClassVar[int]
    AWAITING_APPROVAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    revision: int
    epoch: int
    task: str
    turn: int
    message_count: int
    pending_tool_use_count: int
    labels: _containers.ScalarMap[str, str]
    update_time: _timestamp_pb2.Timestamp
    in_doubt_tool_use_count: int
    status: SessionStatus
    create_time: _timestamp_pb2.Timestamp
    resolved_by_verify_count: int
    resolved_by_person_count: int
    awaiting_approval_count: int
    def __init__(self, session_id: _Optional[str] = ..., revision: _Optional[int] = ..., epoch: _Optional[int] = ..., task: _Optional[str] = ..., turn: _Optional[int] = ..., message_count: _Optional[int] = ..., pending_tool_use_count: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., in_doubt_tool_use_count: _Optional[int] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., resolved_by_verify_count: _Optional[int] = ..., resolved_by_person_count: _Optional[int] = ..., awaiting_approval_count: _Optional[int] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionSummary]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchSessionsRequest(_message.Message):
    __slots__ = ("label_filter", "status_filter", "has_pending_tool_uses", "min_idle", "heartbeat_interval")
    class LabelFilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABEL_FILTER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FILTER_FIELD_NUMBER: _ClassVar[int]
    HAS_PENDING_TOOL_USES_FIELD_NUMBER: _ClassVar[int]
    MIN_IDLE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    label_filter: _containers.ScalarMap[str, str]
    status_filter: SessionStatus
    has_pending_tool_uses: bool
    min_idle: _duration_pb2.Duration
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, label_filter: _Optional[_Mapping[str, str]] = ..., status_filter: _Optional[_Union[SessionStatus, str]] = ..., has_pending_tool_uses: _Optional[bool] = ..., min_idle: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WatchSessionsResponse(_message.Message):
    __slots__ = ("type", "session_id", "session", "send_time")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SEND_TIME_FIELD_NUMBER: _ClassVar[int]
    type: WatchEventType
    session_id: str
    session: SessionSummary
    send_time: _timestamp_pb2.Timestamp
    def __init__(self, type: _Optional[_Union[WatchEventType, str]] = ..., session_id: _Optional[str] = ..., session: _Optional[_Union[SessionSummary, _Mapping]] = ..., send_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("session_id", "epoch")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    epoch: int
    def __init__(self, session_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ("tombstone_epoch",)
    TOMBSTONE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    tombstone_epoch: int
    def __init__(self, tombstone_epoch: _Optional[int] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DamagedSession(_message.Message):
    __slots__ = ("session_id", "problem")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    problem: str
    def __init__(self, session_id: _Optional[str] = ..., problem: _Optional[str] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("checked_sessions", "checked_records", "damaged_sessions")
    CHECKED_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    CHECKED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    DAMAGED_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    checked_sessions: int
    checked_records: int
    damaged_sessions: _containers.RepeatedCompositeFieldContainer[DamagedSession]
    def __init__(self, checked_sessions: _Optional[int] = ..., checked_records: _Optional[int] = ..., damaged_sessions: _Optional[_Iterable[_Union[DamagedSession, _Mapping]]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("version", "store_kind", "store_format", "max_request_bytes", "max_message_bytes", "max_state_bytes", "response_budget_bytes", "start_time", "commit", "store_location", "store_bytes", "uptime", "saves", "commits", "started_on_demand", "pid", "call_stream_max_in_flight", "call_stream_get_checkpoint")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_KIND_FIELD_NUMBER: _ClassVar[int]
    STORE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_STATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    STORE_LOCATION_FIELD_NUMBER: _ClassVar[int]
    STORE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPTIME_FIELD_NUMBER: _ClassVar[int]
    SAVES_FIELD_NUMBER: _ClassVar[int]
    COMMITS_FIELD_NUMBER: _ClassVar[int]
    STARTED_ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CALL_STREAM_MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CALL_STREAM_GET_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    version: str
    store_kind: str
    store_format: int
    max_request_bytes: int
    max_message_bytes: int
    max_state_bytes: int
    response_budget_bytes: int
    start_time: _timestamp_pb2.Timestamp
    commit: str
    store_location: str
    store_bytes: int
    uptime: _duration_pb2.Duration
    saves: int
    commits: int
    started_on_demand: bool
    pid: int
    call_stream_max_in_flight: int
    call_stream_get_checkpoint: bool
    def __init__(self, version: _Optional[str] = ..., store_kind: _Optional[str] = ..., store_format: _Optional[int] = ..., max_request_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., max_state_bytes: _Optional[int] = ..., response_budget_bytes: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., commit: _Optional[str] = ..., store_location: _Optional[str] = ..., store_bytes: _Optional[int] = ..., uptime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., saves: _Optional[int] = ..., commits: _Optional[int] = ..., started_on_demand: _Optional[bool] = ..., pid: _Optional[int] = ..., call_stream_max_in_flight: _Optional[int] = ..., call_stream_get_checkpoint: _Optional[bool] = ...) -> None: ...

class CompleteSessionRequest(_message.Message):
    __slots__ = ("session_id", "epoch", "status", "final_output", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    epoch: int
    status: SessionStatus
    final_output: str
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., epoch: _Optional[int] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., final_output: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CompleteSessionResponse(_message.Message):
    __slots__ = ("revision", "epoch", "status", "already_completed")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ALREADY_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    revision: int
    epoch: int
    status: SessionStatus
    already_completed: bool
    def __init__(self, revision: _Optional[int] = ..., epoch: _Optional[int] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., already_completed: _Optional[bool] = ...) -> None: ...

class ListEffectsRequest(_message.Message):
    __slots__ = ("session_id", "page_size", "page_token")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    page_size: int
    page_token: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class LedgerEntry(_message.Message):
    __slots__ = ("tool_use_id", "name", "effect_class", "begin_tracked", "last_pending_revision", "begun", "idempotency_key", "begin_time", "effect", "registered", "resolution", "approval", "resolutions", "approvals", "repeatable", "duplicate_of")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TRACKED_FIELD_NUMBER: _ClassVar[int]
    LAST_PENDING_REVISION_FIELD_NUMBER: _ClassVar[int]
    BEGUN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    REPEATABLE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_OF_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    name: str
    effect_class: EffectClass
    begin_tracked: bool
    last_pending_revision: int
    begun: bool
    idempotency_key: str
    begin_time: _timestamp_pb2.Timestamp
    effect: Effect
    registered: bool
    resolution: EffectResolution
    approval: EffectApproval
    resolutions: _containers.RepeatedCompositeFieldContainer[EffectResolution]
    approvals: _containers.RepeatedCompositeFieldContainer[EffectApproval]
    repeatable: bool
    duplicate_of: str
    def __init__(self, tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., effect_class: _Optional[_Union[EffectClass, str]] = ..., begin_tracked: _Optional[bool] = ..., last_pending_revision: _Optional[int] = ..., begun: _Optional[bool] = ..., idempotency_key: _Optional[str] = ..., begin_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., effect: _Optional[_Union[Effect, _Mapping]] = ..., registered: _Optional[bool] = ..., resolution: _Optional[_Union[EffectResolution, _Mapping]] = ..., approval: _Optional[_Union[EffectApproval, _Mapping]] = ..., resolutions: _Optional[_Iterable[_Union[EffectResolution, _Mapping]]] = ..., approvals: _Optional[_Iterable[_Union[EffectApproval, _Mapping]]] = ..., repeatable: _Optional[bool] = ..., duplicate_of: _Optional[str] = ...) -> None: ...

class ListEffectsResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ("source_session_id", "revision", "new_session_id", "request_id")
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    NEW_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    source_session_id: str
    revision: int
    new_session_id: str
    request_id: str
    def __init__(self, source_session_id: _Optional[str] = ..., revision: _Optional[int] = ..., new_session_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ForkSessionResponse(_message.Message):
    __slots__ = ("revision", "epoch", "message_count", "performed_after", "in_doubt_after", "lists_truncated")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PERFORMED_AFTER_FIELD_NUMBER: _ClassVar[int]
    IN_DOUBT_AFTER_FIELD_NUMBER: _ClassVar[int]
    LISTS_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    revision: int
    epoch: int
    message_count: int
    performed_after: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    in_doubt_after: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    lists_truncated: bool
    def __init__(self, revision: _Optional[int] = ..., epoch: _Optional[int] = ..., message_count: _Optional[int] = ..., performed_after: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ..., in_doubt_after: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ..., lists_truncated: _Optional[bool] = ...) -> None: ...

class RewindSessionRequest(_message.Message):
    __slots__ = ("session_id", "epoch", "revision", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    epoch: int
    revision: int
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., epoch: _Optional[int] = ..., revision: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class RewindSessionResponse(_message.Message):
    __slots__ = ("revision", "epoch", "message_count", "performed_after", "in_doubt_after", "lists_truncated")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PERFORMED_AFTER_FIELD_NUMBER: _ClassVar[int]
    IN_DOUBT_AFTER_FIELD_NUMBER: _ClassVar[int]
    LISTS_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    revision: int
    epoch: int
    message_count: int
    performed_after: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    in_doubt_after: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    lists_truncated: bool
    def __init__(self, revision: _Optional[int] = ..., epoch: _Optional[int] = ..., message_count: _Optional[int] = ..., performed_after: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ..., in_doubt_after: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ..., lists_truncated: _Optional[bool] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ("since_version", "plaintext")
    SINCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PLAINTEXT_FIELD_NUMBER: _ClassVar[int]
    since_version: int
    plaintext: bool
    def __init__(self, since_version: _Optional[int] = ..., plaintext: _Optional[bool] = ...) -> None: ...

class BackupResponse(_message.Message):
    __slots__ = ("data", "next_since_version", "encrypted")
    DATA_FIELD_NUMBER: _ClassVar[int]
    NEXT_SINCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    next_since_version: int
    encrypted: bool
    def __init__(self, data: _Optional[bytes] = ..., next_since_version: _Optional[int] = ..., encrypted: _Optional[bool] = ...) -> None: ...

class ResolveEffectRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "epoch", "outcome", "output", "is_error", "note", "resolver_kind", "resolved_by", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_KIND_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    epoch: int
    outcome: ResolutionOutcome
    output: str
    is_error: bool
    note: str
    resolver_kind: ResolverKind
    resolved_by: str
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., epoch: _Optional[int] = ..., outcome: _Optional[_Union[ResolutionOutcome, str]] = ..., output: _Optional[str] = ..., is_error: _Optional[bool] = ..., note: _Optional[str] = ..., resolver_kind: _Optional[_Union[ResolverKind, str]] = ..., resolved_by: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResolveEffectResponse(_message.Message):
    __slots__ = ("entry", "already_resolved")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    entry: LedgerEntry
    already_resolved: bool
    def __init__(self, entry: _Optional[_Union[LedgerEntry, _Mapping]] = ..., already_resolved: _Optional[bool] = ...) -> None: ...

class ApproveEffectRequest(_message.Message):
    __slots__ = ("session_id", "tool_use_id", "epoch", "decision", "input_digest", "decided_by", "note", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    INPUT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    epoch: int
    decision: ApprovalStatus
    input_digest: bytes
    decided_by: str
    note: str
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., epoch: _Optional[int] = ..., decision: _Optional[_Union[ApprovalStatus, str]] = ..., input_digest: _Optional[bytes] = ..., decided_by: _Optional[str] = ..., note: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ApproveEffectResponse(_message.Message):
    __slots__ = ("entry", "already_decided")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    ALREADY_DECIDED_FIELD_NUMBER: _ClassVar[int]
    entry: LedgerEntry
    already_decided: bool
    def __init__(self, entry: _Optional[_Union[LedgerEntry, _Mapping]] = ..., already_decided: _Optional[bool] = ...) -> None: ...
