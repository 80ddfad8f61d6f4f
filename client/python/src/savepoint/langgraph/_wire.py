"""LangGraph's objects to GraphCheckpointService messages and back, shared by
the saver's sync and async methods: the requests it sends, the reassembly of
the streamed reads (docs/protocol.md, "Reading a stream") and the upload's
message sequence. Nothing here does I/O."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from savepoint.errors import CheckpointCorruptError, MissingFieldError
from savepoint.v1 import graph_pb2 as gpb

MAX_BATCH = 1000
"""The most blobs per put, writes per PutWrites, and thread or run ids per
Prune or DeleteForRuns the daemon accepts (docs/api.md)."""

DEFAULT_MAX_REQUEST_BYTES = 4 << 20
"""The daemon's default --max-request-bytes, used when it cannot be asked."""

UPLOAD_CHUNK_BYTES = 1 << 20
"""The bytes per UploadCheckpoint or UploadWrites chunk message (less when
the daemon's request limit is smaller)."""

# A request's framing and the fields the size estimate leaves out.
_REQUEST_MARGIN = 4096

PRUNE_STRATEGIES: Mapping[str, gpb.PruneStrategy] = {
    "keep_latest": gpb.PRUNE_STRATEGY_KEEP_LATEST,
    "delete": gpb.PRUNE_STRATEGY_DELETE,
}


def request_id() -> str:
    """A fresh request id (AIP-155), sent again on each retry of one call."""
    return str(uuid.uuid4())


def thread_of(config: RunnableConfig) -> tuple[str, str]:
    """The (thread_id, checkpoint_ns) a config names; the thread is required."""
    conf = config.get("configurable") or {}
    if "thread_id" not in conf or conf["thread_id"] is None:
        raise MissingFieldError("the config has no configurable.thread_id", metadata={"field": "thread_id"})
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or "")


def typed(value: tuple[str, bytes]) -> gpb.TypedValue:
    return gpb.TypedValue(type=value[0], data=value[1], total_size=len(value[1]))


# -- writing ------------------------------------------------------------------


def put_request(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> tuple[gpb.PutCheckpointRequest, RunnableConfig]:
    """The PutCheckpoint request that stores ``checkpoint`` as a child of the
    config's checkpoint, with the blobs of the channels in ``new_versions``,
    and the config that names the stored checkpoint. A channel of
    new_versions without a value (an empty channel) gets no blob: a version
    without a blob reads back as absent, as the built-in savers' "empty"."""
    thread_id, ns = thread_of(config)
    c: dict[str, Any] = dict(checkpoint)
    values: dict[str, Any] = c.pop("channel_values", None) or {}
    blobs = [
        gpb.ChannelBlob(channel=k, version=str(v), value=typed(serde.dumps_typed(values[k])))
        for k, v in new_versions.items()
        if k in values
    ]
    md = get_checkpoint_metadata(config, metadata)
    req = gpb.PutCheckpointRequest(
        checkpoint=gpb.GraphCheckpoint(
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint_id=checkpoint["id"],
            parent_checkpoint_id=get_checkpoint_id(config) or "",
            checkpoint=typed(serde.dumps_typed(c)),
            channel_versions={k: str(v) for k, v in checkpoint["channel_versions"].items()},
            metadata_json=json.dumps(md),
        ),
        blobs=blobs,
        request_id=request_id(),
    )
    stored: RunnableConfig = {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
    }
    return req, stored


def needs_upload(req: gpb.PutCheckpointRequest | gpb.PutWritesRequest, max_request_bytes: int) -> bool:
    """Say whether a put or a PutWrites is over the daemon's request limit,
    so that it must go through UploadCheckpoint or UploadWrites. (The 1,000
    blobs a put may carry bind an upload too: a step that changes more
    channels is refused with FieldTooLargeError.)"""
    return req.ByteSize() + _REQUEST_MARGIN > max_request_bytes


def upload_messages(req: gpb.PutCheckpointRequest, max_request_bytes: int) -> Iterator[gpb.UploadCheckpointRequest]:
    """The UploadCheckpoint stream of a put: the start, every value's data
    emptied and its total_size kept, then the checkpoint's bytes and each
    blob's, in the start's order, in chunks under the request limit."""
    start = gpb.UploadCheckpointStart(checkpoint=req.checkpoint, blobs=req.blobs, request_id=req.request_id)
    start.checkpoint.checkpoint.data = b""
    for b in start.blobs:
        b.value.data = b""
    yield gpb.UploadCheckpointRequest(start=start)
    for chunk in _chunks((req.checkpoint.checkpoint.data, *(b.value.data for b in req.blobs)), max_request_bytes):
        yield gpb.UploadCheckpointRequest(chunk=chunk)


def upload_writes_messages(req: gpb.PutWritesRequest, max_request_bytes: int) -> Iterator[gpb.UploadWritesRequest]:
    """The UploadWrites stream of a PutWrites request: the start, every
    write's data emptied and its total_size kept, then each write's bytes in
    the start's order, in chunks under the request limit."""
    start = gpb.UploadWritesStart(
        thread_id=req.thread_id,
        checkpoint_ns=req.checkpoint_ns,
        checkpoint_id=req.checkpoint_id,
        task_id=req.task_id,
        task_path=req.task_path,
        writes=req.writes,
        request_id=req.request_id,
    )
    for w in start.writes:
        w.value.data = b""
    yield gpb.UploadWritesRequest(start=start)
    for chunk in _chunks([w.value.data for w in req.writes], max_request_bytes):
        yield gpb.UploadWritesRequest(chunk=chunk)


def _chunks(datas: Iterable[bytes], max_request_bytes: int) -> Iterator[bytes]:
    """The bytes of ``datas`` concatenated and cut into chunks of
    UPLOAD_CHUNK_BYTES (less when the request limit is smaller), the last
    one shorter; no chunk is empty."""
    size = max(1, min(UPLOAD_CHUNK_BYTES, max_request_bytes - _REQUEST_MARGIN))
    buf = bytearray()
    for data in datas:
        view = memoryview(data)
        while view:
            take = size - len(buf)
            buf += view[:take]
            view = view[take:]
            if len(buf) == size:
                yield bytes(buf)
                buf.clear()
    if buf:
        yield bytes(buf)


def writes_requests(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[gpb.PutWritesRequest]:
    """The PutWrites requests of one put_writes: one per MAX_BATCH writes,
    each with its own request id, whatever its size (one over the daemon's
    request limit is sent with UploadWrites, needs_upload). A write to one
    of LangGraph's special channels (ERROR, INTERRUPT, ...) gets its
    negative index, any other its position, as BaseCheckpointSaver's
    WRITES_IDX_MAP says; a special channel written twice in one call keeps
    the last value, as InMemorySaver does."""
    thread_id, ns = thread_of(config)
    conf = config.get("configurable") or {}
    checkpoint_id = conf.get("checkpoint_id")
    if not checkpoint_id:
        raise MissingFieldError(
            "put_writes needs a config with configurable.checkpoint_id", metadata={"field": "checkpoint_id"}
        )
    by_idx: dict[int, gpb.ChannelWrite] = {}
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        by_idx[idx] = gpb.ChannelWrite(idx=idx, channel=channel, value=typed(serde.dumps_typed(value)))
    ws = list(by_idx.values())
    return [
        gpb.PutWritesRequest(
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint_id=str(checkpoint_id),
            task_id=task_id,
            task_path=task_path,
            writes=ws[i : i + MAX_BATCH],
            request_id=request_id(),
        )
        for i in range(0, len(ws), MAX_BATCH)
    ]


def list_request(
    config: RunnableConfig | None,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> tuple[gpb.ListCheckpointsRequest, str | None]:
    """The ListCheckpoints request of a list() call, and the checkpoint id the
    config names, if any, which the daemon does not filter on: the saver
    then yields only that checkpoint and counts ``limit`` itself (the
    request then has none)."""
    req = gpb.ListCheckpointsRequest()
    conf = (config or {}).get("configurable") or {}
    if conf.get("thread_id") is not None:
        req.thread_id = str(conf["thread_id"])
    if conf.get("checkpoint_ns") is not None:
        req.checkpoint_ns = str(conf["checkpoint_ns"])
    if before is not None and (b := get_checkpoint_id(before)):
        req.before_checkpoint_id = b
    for k, v in (filter or {}).items():
        req.metadata_filter[k] = json.dumps(v)
    wanted = str(conf["checkpoint_id"]) if conf.get("checkpoint_id") else None
    if limit is not None and wanted is None:
        req.limit = max(limit, 0)
    return req, wanted


# -- reading ------------------------------------------------------------------


@dataclass
class _Value:
    type: str
    data: bytearray
    total: int

    def complete(self) -> bool:
        return len(self.data) >= self.total


@dataclass
class RawTuple:
    """One checkpoint tuple as the daemon streamed it, values still
    serialized."""

    checkpoint: gpb.GraphCheckpoint
    value: _Value
    blobs: list[tuple[str, _Value]] = field(default_factory=list)
    writes: list[tuple[str, str, _Value]] = field(default_factory=list)


def _value(v: gpb.TypedValue) -> _Value:
    return _Value(v.type, bytearray(v.data), max(v.total_size, len(v.data)))


class Assembler:
    """Reassembles GetCheckpoint and ListCheckpoints streams: feed() each
    message in order; it returns the tuples the message completed, and
    finish() the last one at the end of the stream. A stream that breaks the
    rules of docs/protocol.md raises CheckpointCorruptError."""

    def __init__(self) -> None:
        self._cur: RawTuple | None = None
        self._open: _Value | None = None

    def feed(self, msg: gpb.GetCheckpointResponse | gpb.ListCheckpointsResponse) -> list[RawTuple]:
        done: list[RawTuple] = []
        if msg.value_chunk:
            if self._open is None:
                raise CheckpointCorruptError("the stream sent a value_chunk with no value open")
            self._open.data += msg.value_chunk
            if len(self._open.data) > self._open.total:
                raise CheckpointCorruptError("the stream sent more bytes than a value's total_size")
            if self._open.complete():
                self._open = None
        if self._open is not None and (msg.HasField("checkpoint") or msg.blobs or msg.pending_writes):
            raise CheckpointCorruptError("the stream moved on before a value was complete")
        if msg.HasField("checkpoint"):
            if self._cur is not None:
                done.append(self._cur)
            self._cur = RawTuple(msg.checkpoint, self._track(msg.checkpoint.checkpoint))
        if (msg.blobs or msg.pending_writes) and self._cur is None:
            raise CheckpointCorruptError("the stream sent blobs or writes before a checkpoint")
        for b in msg.blobs:
            self._need_closed()
            assert self._cur is not None
            self._cur.blobs.append((b.channel, self._track(b.value)))
        for w in msg.pending_writes:
            self._need_closed()
            assert self._cur is not None
            self._cur.writes.append((w.task_id, w.channel, self._track(w.value)))
        return done

    def finish(self) -> RawTuple | None:
        if self._open is not None:
            raise CheckpointCorruptError("the stream ended inside a value")
        cur, self._cur = self._cur, None
        return cur

    def _need_closed(self) -> None:
        if self._open is not None:
            raise CheckpointCorruptError("a value was cut before another value of the same message")

    def _track(self, v: gpb.TypedValue) -> _Value:
        val = _value(v)
        if not val.complete():
            self._open = val
        return val


def to_tuple(serde: SerializerProtocol, raw: RawTuple) -> CheckpointTuple:
    """The CheckpointTuple of a reassembled stream tuple, its values
    deserialized with ``serde``."""
    cp = raw.checkpoint
    try:
        metadata: CheckpointMetadata = json.loads(cp.metadata_json) if cp.metadata_json else {}
    except ValueError as e:
        raise CheckpointCorruptError(f"checkpoint {cp.checkpoint_id!r}: its metadata is not JSON: {e}") from e
    checkpoint: Checkpoint = serde.loads_typed((raw.value.type, bytes(raw.value.data)))
    checkpoint["channel_values"] = {
        channel: serde.loads_typed((v.type, bytes(v.data))) for channel, v in raw.blobs if v.type != "empty"
    }
    conf = {"thread_id": cp.thread_id, "checkpoint_ns": cp.checkpoint_ns}
    return CheckpointTuple(
        config={"configurable": {**conf, "checkpoint_id": cp.checkpoint_id}},
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=(
            {"configurable": {**conf, "checkpoint_id": cp.parent_checkpoint_id}} if cp.parent_checkpoint_id else None
        ),
        pending_writes=[(task_id, channel, serde.loads_typed((v.type, bytes(v.data)))) for task_id, channel, v in raw.writes],
    )
