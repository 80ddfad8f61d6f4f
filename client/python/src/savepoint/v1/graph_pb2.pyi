import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from savepoint.v1 import options_pb2 as _options_pb2
from savepoint.v1 import savepoint_pb2 as _savepoint_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PruneStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRUNE_STRATEGY_UNSPECIFIED: _ClassVar[PruneStrategy]
    PRUNE_STRATEGY_KEEP_LATEST: _ClassVar[PruneStrategy]
    PRUNE_STRATEGY_DELETE: _ClassVar[PruneStrategy]

class ThreadEffectState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    THREAD_EFFECT_STATE_UNSPECIFIED: _ClassVar[ThreadEffectState]
    THREAD_EFFECT_STATE_BEGUN: _ClassVar[ThreadEffectState]
    THREAD_EFFECT_STATE_SUCCEEDED: _ClassVar[ThreadEffectState]
    THREAD_EFFECT_STATE_FAILED: _ClassVar[ThreadEffectState]
    THREAD_EFFECT_STATE_NOT_BEGUN: _ClassVar[ThreadEffectState]
PRUNE_STRATEGY_UNSPECIFIED: PruneStrategy
PRUNE_STRATEGY_KEEP_LATEST: PruneStrategy
PRUNE_STRATEGY_DELETE: PruneStrategy
THREAD_EFFECT_STATE_UNSPECIFIED: ThreadEffectState
THREAD_EFFECT_STATE_BEGUN: ThreadEffectState
THREAD_EFFECT_STATE_SUCCEEDED: ThreadEffectState
THREAD_EFFECT_STATE_FAILED: ThreadEffectState
THREAD_EFFECT_STATE_NOT_BEGUN: ThreadEffectState

class TypedValue(_message.Message):
    __slots__ = ("type", "data", "total_size")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    type: str
    data: bytes
    total_size: int
    def __init__(self, type: _Optional[str] = ..., data: _Optional[bytes] = ..., total_size: _Optional[int] = ...) -> None: ...

class GraphCheckpoint(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "channel_versions", "metadata_json")
    class ChannelVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str
    checkpoint: TypedValue
    channel_versions: _containers.ScalarMap[str, str]
    metadata_json: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., checkpoint_id: _Optional[str] = ..., parent_checkpoint_id: _Optional[str] = ..., checkpoint: _Optional[_Union[TypedValue, _Mapping]] = ..., channel_versions: _Optional[_Mapping[str, str]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class ChannelBlob(_message.Message):
    __slots__ = ("channel", "version", "value")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    channel: str
    version: str
    value: TypedValue
    def __init__(self, channel: _Optional[str] = ..., version: _Optional[str] = ..., value: _Optional[_Union[TypedValue, _Mapping]] = ...) -> None: ...

class ChannelWrite(_message.Message):
    __slots__ = ("idx", "channel", "value")
    IDX_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    idx: int
    channel: str
    value: TypedValue
    def __init__(self, idx: _Optional[int] = ..., channel: _Optional[str] = ..., value: _Optional[_Union[TypedValue, _Mapping]] = ...) -> None: ...

class PendingWrite(_message.Message):
    __slots__ = ("task_id", "task_path", "idx", "channel", "value")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_PATH_FIELD_NUMBER: _ClassVar[int]
    IDX_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: TypedValue
    def __init__(self, task_id: _Optional[str] = ..., task_path: _Optional[str] = ..., idx: _Optional[int] = ..., channel: _Optional[str] = ..., value: _Optional[_Union[TypedValue, _Mapping]] = ...) -> None: ...

class PutCheckpointRequest(_message.Message):
    __slots__ = ("checkpoint", "blobs", "request_id")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint: GraphCheckpoint
    blobs: _containers.RepeatedCompositeFieldContainer[ChannelBlob]
    request_id: str
    def __init__(self, checkpoint: _Optional[_Union[GraphCheckpoint, _Mapping]] = ..., blobs: _Optional[_Iterable[_Union[ChannelBlob, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class PutCheckpointResponse(_message.Message):
    __slots__ = ("already_applied",)
    ALREADY_APPLIED_FIELD_NUMBER: _ClassVar[int]
    already_applied: bool
    def __init__(self, already_applied: _Optional[bool] = ...) -> None: ...

class UploadCheckpointRequest(_message.Message):
    __slots__ = ("start", "chunk")
    START_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    start: UploadCheckpointStart
    chunk: bytes
    def __init__(self, start: _Optional[_Union[UploadCheckpointStart, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class UploadCheckpointStart(_message.Message):
    __slots__ = ("checkpoint", "blobs", "request_id")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint: GraphCheckpoint
    blobs: _containers.RepeatedCompositeFieldContainer[ChannelBlob]
    request_id: str
    def __init__(self, checkpoint: _Optional[_Union[GraphCheckpoint, _Mapping]] = ..., blobs: _Optional[_Iterable[_Union[ChannelBlob, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UploadCheckpointResponse(_message.Message):
    __slots__ = ("received_bytes", "already_applied")
    RECEIVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    ALREADY_APPLIED_FIELD_NUMBER: _ClassVar[int]
    received_bytes: int
    already_applied: bool
    def __init__(self, received_bytes: _Optional[int] = ..., already_applied: _Optional[bool] = ...) -> None: ...

class PutWritesRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "writes", "request_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_PATH_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: _containers.RepeatedCompositeFieldContainer[ChannelWrite]
    request_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., checkpoint_id: _Optional[str] = ..., task_id: _Optional[str] = ..., task_path: _Optional[str] = ..., writes: _Optional[_Iterable[_Union[ChannelWrite, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UploadWritesRequest(_message.Message):
    __slots__ = ("start", "chunk")
    START_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    start: UploadWritesStart
    chunk: bytes
    def __init__(self, start: _Optional[_Union[UploadWritesStart, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class UploadWritesStart(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "writes", "request_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_PATH_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: _containers.RepeatedCompositeFieldContainer[ChannelWrite]
    request_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., checkpoint_id: _Optional[str] = ..., task_id: _Optional[str] = ..., task_path: _Optional[str] = ..., writes: _Optional[_Iterable[_Union[ChannelWrite, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UploadWritesResponse(_message.Message):
    __slots__ = ("received_bytes", "written_count", "dropped_late", "already_applied")
    RECEIVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    DROPPED_LATE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_APPLIED_FIELD_NUMBER: _ClassVar[int]
    received_bytes: int
    written_count: int
    dropped_late: bool
    already_applied: bool
    def __init__(self, received_bytes: _Optional[int] = ..., written_count: _Optional[int] = ..., dropped_late: _Optional[bool] = ..., already_applied: _Optional[bool] = ...) -> None: ...

class PutWritesResponse(_message.Message):
    __slots__ = ("written_count", "dropped_late", "already_applied")
    WRITTEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    DROPPED_LATE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_APPLIED_FIELD_NUMBER: _ClassVar[int]
    written_count: int
    dropped_late: bool
    already_applied: bool
    def __init__(self, written_count: _Optional[int] = ..., dropped_late: _Optional[bool] = ..., already_applied: _Optional[bool] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., checkpoint_id: _Optional[str] = ...) -> None: ...

class GetCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint", "blobs", "pending_writes", "value_chunk")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    PENDING_WRITES_FIELD_NUMBER: _ClassVar[int]
    VALUE_CHUNK_FIELD_NUMBER: _ClassVar[int]
    checkpoint: GraphCheckpoint
    blobs: _containers.RepeatedCompositeFieldContainer[ChannelBlob]
    pending_writes: _containers.RepeatedCompositeFieldContainer[PendingWrite]
    value_chunk: bytes
    def __init__(self, checkpoint: _Optional[_Union[GraphCheckpoint, _Mapping]] = ..., blobs: _Optional[_Iterable[_Union[ChannelBlob, _Mapping]]] = ..., pending_writes: _Optional[_Iterable[_Union[PendingWrite, _Mapping]]] = ..., value_chunk: _Optional[bytes] = ...) -> None: ...

class ListCheckpointsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "before_checkpoint_id", "metadata_filter", "limit")
    class MetadataFilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    BEFORE_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FILTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    before_checkpoint_id: str
    metadata_filter: _containers.ScalarMap[str, str]
    limit: int
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., before_checkpoint_id: _Optional[str] = ..., metadata_filter: _Optional[_Mapping[str, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class ListCheckpointsResponse(_message.Message):
    __slots__ = ("checkpoint", "blobs", "pending_writes", "value_chunk")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    PENDING_WRITES_FIELD_NUMBER: _ClassVar[int]
    VALUE_CHUNK_FIELD_NUMBER: _ClassVar[int]
    checkpoint: GraphCheckpoint
    blobs: _containers.RepeatedCompositeFieldContainer[ChannelBlob]
    pending_writes: _containers.RepeatedCompositeFieldContainer[PendingWrite]
    value_chunk: bytes
    def __init__(self, checkpoint: _Optional[_Union[GraphCheckpoint, _Mapping]] = ..., blobs: _Optional[_Iterable[_Union[ChannelBlob, _Mapping]]] = ..., pending_writes: _Optional[_Iterable[_Union[PendingWrite, _Mapping]]] = ..., value_chunk: _Optional[bytes] = ...) -> None: ...

class DeleteThreadRequest(_message.Message):
    __slots__ = ("thread_id",)
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class DeleteThreadResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteForRunsRequest(_message.Message):
    __slots__ = ("run_ids",)
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteForRunsResponse(_message.Message):
    __slots__ = ("deleted_checkpoints",)
    DELETED_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    deleted_checkpoints: int
    def __init__(self, deleted_checkpoints: _Optional[int] = ...) -> None: ...

class CopyThreadRequest(_message.Message):
    __slots__ = ("source_thread_id", "target_thread_id")
    SOURCE_THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    source_thread_id: str
    target_thread_id: str
    def __init__(self, source_thread_id: _Optional[str] = ..., target_thread_id: _Optional[str] = ...) -> None: ...

class CopyThreadResponse(_message.Message):
    __slots__ = ("copied_checkpoints",)
    COPIED_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    copied_checkpoints: int
    def __init__(self, copied_checkpoints: _Optional[int] = ...) -> None: ...

class PruneRequest(_message.Message):
    __slots__ = ("thread_ids", "strategy")
    THREAD_IDS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    thread_ids: _containers.RepeatedScalarFieldContainer[str]
    strategy: PruneStrategy
    def __init__(self, thread_ids: _Optional[_Iterable[str]] = ..., strategy: _Optional[_Union[PruneStrategy, str]] = ...) -> None: ...

class PruneResponse(_message.Message):
    __slots__ = ("deleted_checkpoints",)
    DELETED_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    deleted_checkpoints: int
    def __init__(self, deleted_checkpoints: _Optional[int] = ...) -> None: ...

class ListThreadsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GraphThread(_message.Message):
    __slots__ = ("thread_id", "update_time")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, thread_id: _Optional[str] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListThreadsResponse(_message.Message):
    __slots__ = ("threads", "next_page_token")
    THREADS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    threads: _containers.RepeatedCompositeFieldContainer[GraphThread]
    next_page_token: str
    def __init__(self, threads: _Optional[_Iterable[_Union[GraphThread, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ThreadEffect(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "tool_use_id", "name", "input_json", "input_digest", "effect_class", "idempotency_key", "attempts", "state", "output", "output_digest", "begin_time", "record_time", "checkpoint_id", "resolution", "approval", "resolutions", "approvals", "duplicate_of", "run_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    INPUT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_OF_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    tool_use_id: str
    name: str
    input_json: str
    input_digest: bytes
    effect_class: _savepoint_pb2.EffectClass
    idempotency_key: str
    attempts: int
    state: ThreadEffectState
    output: TypedValue
    output_digest: bytes
    begin_time: _timestamp_pb2.Timestamp
    record_time: _timestamp_pb2.Timestamp
    checkpoint_id: str
    resolution: _savepoint_pb2.EffectResolution
    approval: _savepoint_pb2.EffectApproval
    resolutions: _containers.RepeatedCompositeFieldContainer[_savepoint_pb2.EffectResolution]
    approvals: _containers.RepeatedCompositeFieldContainer[_savepoint_pb2.EffectApproval]
    duplicate_of: str
    run_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., input_json: _Optional[str] = ..., input_digest: _Optional[bytes] = ..., effect_class: _Optional[_Union[_savepoint_pb2.EffectClass, str]] = ..., idempotency_key: _Optional[str] = ..., attempts: _Optional[int] = ..., state: _Optional[_Union[ThreadEffectState, str]] = ..., output: _Optional[_Union[TypedValue, _Mapping]] = ..., output_digest: _Optional[bytes] = ..., begin_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., record_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., checkpoint_id: _Optional[str] = ..., resolution: _Optional[_Union[_savepoint_pb2.EffectResolution, _Mapping]] = ..., approval: _Optional[_Union[_savepoint_pb2.EffectApproval, _Mapping]] = ..., resolutions: _Optional[_Iterable[_Union[_savepoint_pb2.EffectResolution, _Mapping]]] = ..., approvals: _Optional[_Iterable[_Union[_savepoint_pb2.EffectApproval, _Mapping]]] = ..., duplicate_of: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class BeginThreadEffectRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "tool_use_id", "name", "input_json", "effect_class", "checkpoint_id", "request_id", "requires_approval", "repeatable", "run_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    REPEATABLE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    tool_use_id: str
    name: str
    input_json: str
    effect_class: _savepoint_pb2.EffectClass
    checkpoint_id: str
    request_id: str
    requires_approval: bool
    repeatable: bool
    run_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., name: _Optional[str] = ..., input_json: _Optional[str] = ..., effect_class: _Optional[_Union[_savepoint_pb2.EffectClass, str]] = ..., checkpoint_id: _Optional[str] = ..., request_id: _Optional[str] = ..., requires_approval: _Optional[bool] = ..., repeatable: _Optional[bool] = ..., run_id: _Optional[str] = ...) -> None: ...

class BeginThreadEffectResponse(_message.Message):
    __slots__ = ("decision", "effect", "dropped_late", "duplicate_of", "tool_result_text")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    DROPPED_LATE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_OF_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_TEXT_FIELD_NUMBER: _ClassVar[int]
    decision: _savepoint_pb2.Decision
    effect: ThreadEffect
    dropped_late: bool
    duplicate_of: ThreadEffect
    tool_result_text: str
    def __init__(self, decision: _Optional[_Union[_savepoint_pb2.Decision, str]] = ..., effect: _Optional[_Union[ThreadEffect, _Mapping]] = ..., dropped_late: _Optional[bool] = ..., duplicate_of: _Optional[_Union[ThreadEffect, _Mapping]] = ..., tool_result_text: _Optional[str] = ...) -> None: ...

class RecordThreadEffectRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "tool_use_id", "attempt", "output", "is_error", "request_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    tool_use_id: str
    attempt: int
    output: TypedValue
    is_error: bool
    request_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., attempt: _Optional[int] = ..., output: _Optional[_Union[TypedValue, _Mapping]] = ..., is_error: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class RecordThreadEffectResponse(_message.Message):
    __slots__ = ("effect", "already_recorded", "dropped_late")
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RECORDED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_LATE_FIELD_NUMBER: _ClassVar[int]
    effect: ThreadEffect
    already_recorded: bool
    dropped_late: bool
    def __init__(self, effect: _Optional[_Union[ThreadEffect, _Mapping]] = ..., already_recorded: _Optional[bool] = ..., dropped_late: _Optional[bool] = ...) -> None: ...

class ListThreadEffectsRequest(_message.Message):
    __slots__ = ("thread_id", "page_size", "page_token")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    page_size: int
    page_token: str
    def __init__(self, thread_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListThreadEffectsResponse(_message.Message):
    __slots__ = ("effects", "next_page_token")
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    effects: _containers.RepeatedCompositeFieldContainer[ThreadEffect]
    next_page_token: str
    def __init__(self, effects: _Optional[_Iterable[_Union[ThreadEffect, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ResolveThreadEffectRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "tool_use_id", "outcome", "output", "is_error", "note", "resolver_kind", "resolved_by", "request_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_KIND_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    tool_use_id: str
    outcome: _savepoint_pb2.ResolutionOutcome
    output: TypedValue
    is_error: bool
    note: str
    resolver_kind: _savepoint_pb2.ResolverKind
    resolved_by: str
    request_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., outcome: _Optional[_Union[_savepoint_pb2.ResolutionOutcome, str]] = ..., output: _Optional[_Union[TypedValue, _Mapping]] = ..., is_error: _Optional[bool] = ..., note: _Optional[str] = ..., resolver_kind: _Optional[_Union[_savepoint_pb2.ResolverKind, str]] = ..., resolved_by: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResolveThreadEffectResponse(_message.Message):
    __slots__ = ("effect", "already_resolved")
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    effect: ThreadEffect
    already_resolved: bool
    def __init__(self, effect: _Optional[_Union[ThreadEffect, _Mapping]] = ..., already_resolved: _Optional[bool] = ...) -> None: ...

class ApproveThreadEffectRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "tool_use_id", "decision", "input_digest", "decided_by", "note", "request_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    INPUT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    tool_use_id: str
    decision: _savepoint_pb2.ApprovalStatus
    input_digest: bytes
    decided_by: str
    note: str
    request_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., decision: _Optional[_Union[_savepoint_pb2.ApprovalStatus, str]] = ..., input_digest: _Optional[bytes] = ..., decided_by: _Optional[str] = ..., note: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ApproveThreadEffectResponse(_message.Message):
    __slots__ = ("effect", "already_decided")
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_DECIDED_FIELD_NUMBER: _ClassVar[int]
    effect: ThreadEffect
    already_decided: bool
    def __init__(self, effect: _Optional[_Union[ThreadEffect, _Mapping]] = ..., already_decided: _Optional[bool] = ...) -> None: ...
