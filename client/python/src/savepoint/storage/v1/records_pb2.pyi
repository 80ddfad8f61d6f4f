import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from savepoint.v1 import savepoint_pb2 as _savepoint_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionRecord(_message.Message):
    __slots__ = ("revision", "epoch", "resumed", "next_seq", "create_time", "update_time", "recent_requests", "deleted", "purging", "task", "turn", "message_count", "pending_tool_use_count", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    RECENT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    PURGING_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_USE_COUNT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    revision: int
    epoch: int
    resumed: bool
    next_seq: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    recent_requests: _containers.RepeatedCompositeFieldContainer[RequestRecord]
    deleted: bool
    purging: bool
    task: str
    turn: int
    message_count: int
    pending_tool_use_count: int
    labels: _containers.ScalarMap[str, str]
    def __init__(self, revision: _Optional[int] = ..., epoch: _Optional[int] = ..., resumed: _Optional[bool] = ..., next_seq: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recent_requests: _Optional[_Iterable[_Union[RequestRecord, _Mapping]]] = ..., deleted: _Optional[bool] = ..., purging: _Optional[bool] = ..., task: _Optional[str] = ..., turn: _Optional[int] = ..., message_count: _Optional[int] = ..., pending_tool_use_count: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RequestRecord(_message.Message):
    __slots__ = ("request_id", "fingerprint", "revision", "message_count", "epoch")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    fingerprint: bytes
    revision: int
    message_count: int
    epoch: int
    def __init__(self, request_id: _Optional[str] = ..., fingerprint: _Optional[bytes] = ..., revision: _Optional[int] = ..., message_count: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class Segment(_message.Message):
    __slots__ = ("first_seq", "count")
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    first_seq: int
    count: int
    def __init__(self, first_seq: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class RevisionRecord(_message.Message):
    __slots__ = ("revision", "epoch", "task", "turn", "tokens_used", "segments", "message_count", "pending_tool_uses", "state_json", "labels", "save_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_USES_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SAVE_TIME_FIELD_NUMBER: _ClassVar[int]
    revision: int
    epoch: int
    task: str
    turn: int
    tokens_used: int
    segments: _containers.RepeatedCompositeFieldContainer[Segment]
    message_count: int
    pending_tool_uses: _containers.RepeatedCompositeFieldContainer[_savepoint_pb2.ToolUse]
    state_json: str
    labels: _containers.ScalarMap[str, str]
    save_time: _timestamp_pb2.Timestamp
    def __init__(self, revision: _Optional[int] = ..., epoch: _Optional[int] = ..., task: _Optional[str] = ..., turn: _Optional[int] = ..., tokens_used: _Optional[int] = ..., segments: _Optional[_Iterable[_Union[Segment, _Mapping]]] = ..., message_count: _Optional[int] = ..., pending_tool_uses: _Optional[_Iterable[_Union[_savepoint_pb2.ToolUse, _Mapping]]] = ..., state_json: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., save_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CallRecord(_message.Message):
    __slots__ = ("tool_use", "last_pending_revision", "begun", "idempotency_key", "begin_time", "effect")
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    LAST_PENDING_REVISION_FIELD_NUMBER: _ClassVar[int]
    BEGUN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    tool_use: _savepoint_pb2.ToolUse
    last_pending_revision: int
    begun: bool
    idempotency_key: str
    begin_time: _timestamp_pb2.Timestamp
    effect: _savepoint_pb2.Effect
    def __init__(self, tool_use: _Optional[_Union[_savepoint_pb2.ToolUse, _Mapping]] = ..., last_pending_revision: _Optional[int] = ..., begun: _Optional[bool] = ..., idempotency_key: _Optional[str] = ..., begin_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., effect: _Optional[_Union[_savepoint_pb2.Effect, _Mapping]] = ...) -> None: ...

class FormatRecord(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...
