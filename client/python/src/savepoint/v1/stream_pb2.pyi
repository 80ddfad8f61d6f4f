from savepoint.v1 import graph_pb2 as _graph_pb2
from savepoint.v1 import savepoint_pb2 as _savepoint_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallStreamRequest(_message.Message):
    __slots__ = ("id", "save_checkpoint", "begin_effect", "record_effect", "resume", "reconcile", "get_session", "list_messages", "list_sessions", "delete_session", "verify", "get_server_info", "complete_session", "list_effects", "fork_session", "rewind_session", "resolve_effect", "put_checkpoint", "put_writes", "delete_thread", "delete_for_runs", "copy_thread", "prune", "list_threads", "begin_thread_effect", "record_thread_effect", "list_thread_effects", "resolve_thread_effect", "approve_effect", "approve_thread_effect")
    ID_FIELD_NUMBER: _ClassVar[int]
    SAVE_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BEGIN_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RECORD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_FIELD_NUMBER: _ClassVar[int]
    GET_SESSION_FIELD_NUMBER: _ClassVar[int]
    LIST_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LIST_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DELETE_SESSION_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    GET_SERVER_INFO_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_SESSION_FIELD_NUMBER: _ClassVar[int]
    LIST_EFFECTS_FIELD_NUMBER: _ClassVar[int]
    FORK_SESSION_FIELD_NUMBER: _ClassVar[int]
    REWIND_SESSION_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    PUT_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PUT_WRITES_FIELD_NUMBER: _ClassVar[int]
    DELETE_THREAD_FIELD_NUMBER: _ClassVar[int]
    DELETE_FOR_RUNS_FIELD_NUMBER: _ClassVar[int]
    COPY_THREAD_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FIELD_NUMBER: _ClassVar[int]
    LIST_THREADS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RECORD_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    LIST_THREAD_EFFECTS_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    APPROVE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    APPROVE_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    id: int
    save_checkpoint: _savepoint_pb2.SaveCheckpointRequest
    begin_effect: _savepoint_pb2.BeginEffectRequest
    record_effect: _savepoint_pb2.RecordEffectRequest
    resume: _savepoint_pb2.ResumeRequest
    reconcile: _savepoint_pb2.ReconcileRequest
    get_session: _savepoint_pb2.GetSessionRequest
    list_messages: _savepoint_pb2.ListMessagesRequest
    list_sessions: _savepoint_pb2.ListSessionsRequest
    delete_session: _savepoint_pb2.DeleteSessionRequest
    verify: _savepoint_pb2.VerifyRequest
    get_server_info: _savepoint_pb2.GetServerInfoRequest
    complete_session: _savepoint_pb2.CompleteSessionRequest
    list_effects: _savepoint_pb2.ListEffectsRequest
    fork_session: _savepoint_pb2.ForkSessionRequest
    rewind_session: _savepoint_pb2.RewindSessionRequest
    resolve_effect: _savepoint_pb2.ResolveEffectRequest
    put_checkpoint: _graph_pb2.PutCheckpointRequest
    put_writes: _graph_pb2.PutWritesRequest
    delete_thread: _graph_pb2.DeleteThreadRequest
    delete_for_runs: _graph_pb2.DeleteForRunsRequest
    copy_thread: _graph_pb2.CopyThreadRequest
    prune: _graph_pb2.PruneRequest
    list_threads: _graph_pb2.ListThreadsRequest
    begin_thread_effect: _graph_pb2.BeginThreadEffectRequest
    record_thread_effect: _graph_pb2.RecordThreadEffectRequest
    list_thread_effects: _graph_pb2.ListThreadEffectsRequest
    resolve_thread_effect: _graph_pb2.ResolveThreadEffectRequest
    approve_effect: _savepoint_pb2.ApproveEffectRequest
    approve_thread_effect: _graph_pb2.ApproveThreadEffectRequest
    def __init__(self, id: _Optional[int] = ..., save_checkpoint: _Optional[_Union[_savepoint_pb2.SaveCheckpointRequest, _Mapping]] = ..., begin_effect: _Optional[_Union[_savepoint_pb2.BeginEffectRequest, _Mapping]] = ..., record_effect: _Optional[_Union[_savepoint_pb2.RecordEffectRequest, _Mapping]] = ..., resume: _Optional[_Union[_savepoint_pb2.ResumeRequest, _Mapping]] = ..., reconcile: _Optional[_Union[_savepoint_pb2.ReconcileRequest, _Mapping]] = ..., get_session: _Optional[_Union[_savepoint_pb2.GetSessionRequest, _Mapping]] = ..., list_messages: _Optional[_Union[_savepoint_pb2.ListMessagesRequest, _Mapping]] = ..., list_sessions: _Optional[_Union[_savepoint_pb2.ListSessionsRequest, _Mapping]] = ..., delete_session: _Optional[_Union[_savepoint_pb2.DeleteSessionRequest, _Mapping]] = ..., verify: _Optional[_Union[_savepoint_pb2.VerifyRequest, _Mapping]] = ..., get_server_info: _Optional[_Union[_savepoint_pb2.GetServerInfoRequest, _Mapping]] = ..., complete_session: _Optional[_Union[_savepoint_pb2.CompleteSessionRequest, _Mapping]] = ..., list_effects: _Optional[_Union[_savepoint_pb2.ListEffectsRequest, _Mapping]] = ..., fork_session: _Optional[_Union[_savepoint_pb2.ForkSessionRequest, _Mapping]] = ..., rewind_session: _Optional[_Union[_savepoint_pb2.RewindSessionRequest, _Mapping]] = ..., resolve_effect: _Optional[_Union[_savepoint_pb2.ResolveEffectRequest, _Mapping]] = ..., put_checkpoint: _Optional[_Union[_graph_pb2.PutCheckpointRequest, _Mapping]] = ..., put_writes: _Optional[_Union[_graph_pb2.PutWritesRequest, _Mapping]] = ..., delete_thread: _Optional[_Union[_graph_pb2.DeleteThreadRequest, _Mapping]] = ..., delete_for_runs: _Optional[_Union[_graph_pb2.DeleteForRunsRequest, _Mapping]] = ..., copy_thread: _Optional[_Union[_graph_pb2.CopyThreadRequest, _Mapping]] = ..., prune: _Optional[_Union[_graph_pb2.PruneRequest, _Mapping]] = ..., list_threads: _Optional[_Union[_graph_pb2.ListThreadsRequest, _Mapping]] = ..., begin_thread_effect: _Optional[_Union[_graph_pb2.BeginThreadEffectRequest, _Mapping]] = ..., record_thread_effect: _Optional[_Union[_graph_pb2.RecordThreadEffectRequest, _Mapping]] = ..., list_thread_effects: _Optional[_Union[_graph_pb2.ListThreadEffectsRequest, _Mapping]] = ..., resolve_thread_effect: _Optional[_Union[_graph_pb2.ResolveThreadEffectRequest, _Mapping]] = ..., approve_effect: _Optional[_Union[_savepoint_pb2.ApproveEffectRequest, _Mapping]] = ..., approve_thread_effect: _Optional[_Union[_graph_pb2.ApproveThreadEffectRequest, _Mapping]] = ...) -> None: ...

class CallStreamResponse(_message.Message):
    __slots__ = ("id", "error", "save_checkpoint", "begin_effect", "record_effect", "resume", "reconcile", "get_session", "list_messages", "list_sessions", "delete_session", "verify", "get_server_info", "complete_session", "list_effects", "fork_session", "rewind_session", "resolve_effect", "put_checkpoint", "put_writes", "delete_thread", "delete_for_runs", "copy_thread", "prune", "list_threads", "begin_thread_effect", "record_thread_effect", "list_thread_effects", "resolve_thread_effect", "approve_effect", "approve_thread_effect")
    ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SAVE_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BEGIN_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RECORD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_FIELD_NUMBER: _ClassVar[int]
    GET_SESSION_FIELD_NUMBER: _ClassVar[int]
    LIST_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LIST_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DELETE_SESSION_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    GET_SERVER_INFO_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_SESSION_FIELD_NUMBER: _ClassVar[int]
    LIST_EFFECTS_FIELD_NUMBER: _ClassVar[int]
    FORK_SESSION_FIELD_NUMBER: _ClassVar[int]
    REWIND_SESSION_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    PUT_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PUT_WRITES_FIELD_NUMBER: _ClassVar[int]
    DELETE_THREAD_FIELD_NUMBER: _ClassVar[int]
    DELETE_FOR_RUNS_FIELD_NUMBER: _ClassVar[int]
    COPY_THREAD_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FIELD_NUMBER: _ClassVar[int]
    LIST_THREADS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    RECORD_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    LIST_THREAD_EFFECTS_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    APPROVE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    APPROVE_THREAD_EFFECT_FIELD_NUMBER: _ClassVar[int]
    id: int
    error: bytes
    save_checkpoint: _savepoint_pb2.SaveCheckpointResponse
    begin_effect: _savepoint_pb2.BeginEffectResponse
    record_effect: _savepoint_pb2.RecordEffectResponse
    resume: _savepoint_pb2.ResumeResponse
    reconcile: _savepoint_pb2.ReconcileResponse
    get_session: _savepoint_pb2.GetSessionResponse
    list_messages: _savepoint_pb2.ListMessagesResponse
    list_sessions: _savepoint_pb2.ListSessionsResponse
    delete_session: _savepoint_pb2.DeleteSessionResponse
    verify: _savepoint_pb2.VerifyResponse
    get_server_info: _savepoint_pb2.GetServerInfoResponse
    complete_session: _savepoint_pb2.CompleteSessionResponse
    list_effects: _savepoint_pb2.ListEffectsResponse
    fork_session: _savepoint_pb2.ForkSessionResponse
    rewind_session: _savepoint_pb2.RewindSessionResponse
    resolve_effect: _savepoint_pb2.ResolveEffectResponse
    put_checkpoint: _graph_pb2.PutCheckpointResponse
    put_writes: _graph_pb2.PutWritesResponse
    delete_thread: _graph_pb2.DeleteThreadResponse
    delete_for_runs: _graph_pb2.DeleteForRunsResponse
    copy_thread: _graph_pb2.CopyThreadResponse
    prune: _graph_pb2.PruneResponse
    list_threads: _graph_pb2.ListThreadsResponse
    begin_thread_effect: _graph_pb2.BeginThreadEffectResponse
    record_thread_effect: _graph_pb2.RecordThreadEffectResponse
    list_thread_effects: _graph_pb2.ListThreadEffectsResponse
    resolve_thread_effect: _graph_pb2.ResolveThreadEffectResponse
    approve_effect: _savepoint_pb2.ApproveEffectResponse
    approve_thread_effect: _graph_pb2.ApproveThreadEffectResponse
    def __init__(self, id: _Optional[int] = ..., error: _Optional[bytes] = ..., save_checkpoint: _Optional[_Union[_savepoint_pb2.SaveCheckpointResponse, _Mapping]] = ..., begin_effect: _Optional[_Union[_savepoint_pb2.BeginEffectResponse, _Mapping]] = ..., record_effect: _Optional[_Union[_savepoint_pb2.RecordEffectResponse, _Mapping]] = ..., resume: _Optional[_Union[_savepoint_pb2.ResumeResponse, _Mapping]] = ..., reconcile: _Optional[_Union[_savepoint_pb2.ReconcileResponse, _Mapping]] = ..., get_session: _Optional[_Union[_savepoint_pb2.GetSessionResponse, _Mapping]] = ..., list_messages: _Optional[_Union[_savepoint_pb2.ListMessagesResponse, _Mapping]] = ..., list_sessions: _Optional[_Union[_savepoint_pb2.ListSessionsResponse, _Mapping]] = ..., delete_session: _Optional[_Union[_savepoint_pb2.DeleteSessionResponse, _Mapping]] = ..., verify: _Optional[_Union[_savepoint_pb2.VerifyResponse, _Mapping]] = ..., get_server_info: _Optional[_Union[_savepoint_pb2.GetServerInfoResponse, _Mapping]] = ..., complete_session: _Optional[_Union[_savepoint_pb2.CompleteSessionResponse, _Mapping]] = ..., list_effects: _Optional[_Union[_savepoint_pb2.ListEffectsResponse, _Mapping]] = ..., fork_session: _Optional[_Union[_savepoint_pb2.ForkSessionResponse, _Mapping]] = ..., rewind_session: _Optional[_Union[_savepoint_pb2.RewindSessionResponse, _Mapping]] = ..., resolve_effect: _Optional[_Union[_savepoint_pb2.ResolveEffectResponse, _Mapping]] = ..., put_checkpoint: _Optional[_Union[_graph_pb2.PutCheckpointResponse, _Mapping]] = ..., put_writes: _Optional[_Union[_graph_pb2.PutWritesResponse, _Mapping]] = ..., delete_thread: _Optional[_Union[_graph_pb2.DeleteThreadResponse, _Mapping]] = ..., delete_for_runs: _Optional[_Union[_graph_pb2.DeleteForRunsResponse, _Mapping]] = ..., copy_thread: _Optional[_Union[_graph_pb2.CopyThreadResponse, _Mapping]] = ..., prune: _Optional[_Union[_graph_pb2.PruneResponse, _Mapping]] = ..., list_threads: _Optional[_Union[_graph_pb2.ListThreadsResponse, _Mapping]] = ..., begin_thread_effect: _Optional[_Union[_graph_pb2.BeginThreadEffectResponse, _Mapping]] = ..., record_thread_effect: _Optional[_Union[_graph_pb2.RecordThreadEffectResponse, _Mapping]] = ..., list_thread_effects: _Optional[_Union[_graph_pb2.ListThreadEffectsResponse, _Mapping]] = ..., resolve_thread_effect: _Optional[_Union[_graph_pb2.ResolveThreadEffectResponse, _Mapping]] = ..., approve_effect: _Optional[_Union[_savepoint_pb2.ApproveEffectResponse, _Mapping]] = ..., approve_thread_effect: _Optional[_Union[_graph_pb2.ApproveThreadEffectResponse, _Mapping]] = ...) -> None: ...
