"""savepoint.langgraph's wire helpers without a daemon: the reassembly of
streamed reads (docs/protocol.md, "Reading a stream"), the upload's message
sequence, the PutWrites indexes, and the retries of the graph RPCs."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import ERROR, INTERRUPT, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from savepoint._retry import retry_safe
from savepoint.errors import CheckpointCorruptError, MissingFieldError
from savepoint.langgraph import _wire
from savepoint.v1 import graph_pb2 as gpb


def cut(data: bytes, n: int) -> gpb.TypedValue:
    return gpb.TypedValue(type="bytes", data=data[:n], total_size=len(data))


def test_assembler_joins_cut_values_and_splits_tuples() -> None:
    big, blob = b"c" * 10, b"b" * 7
    asm = _wire.Assembler()
    msgs = [
        gpb.ListCheckpointsResponse(checkpoint=gpb.GraphCheckpoint(checkpoint_id="2", checkpoint=cut(big, 4))),
        gpb.ListCheckpointsResponse(value_chunk=big[4:8]),
        gpb.ListCheckpointsResponse(value_chunk=big[8:], blobs=[gpb.ChannelBlob(channel="x", version="1", value=cut(blob, 3))]),
        gpb.ListCheckpointsResponse(
            value_chunk=blob[3:],
            pending_writes=[gpb.PendingWrite(task_id="t", channel="y", value=cut(b"w", 1))],
            checkpoint=gpb.GraphCheckpoint(checkpoint_id="1", checkpoint=cut(b"small", 5)),
        ),
    ]
    done = []
    for m in msgs:
        done += asm.feed(m)
    last = asm.finish()
    assert last is not None
    done.append(last)
    assert [t.checkpoint.checkpoint_id for t in done] == ["2", "1"]
    first, second = done
    assert bytes(first.value.data) == big
    assert [(ch, bytes(v.data)) for ch, v in first.blobs] == [("x", blob)]
    # The writes after a value_chunk and a new checkpoint in one message
    # belong to the new tuple.
    assert first.writes == [] and [(t, ch, bytes(v.data)) for t, ch, v in second.writes] == [("t", "y", b"w")]
    assert asm.finish() is None


@pytest.mark.parametrize(
    "msgs",
    [
        [gpb.GetCheckpointResponse(value_chunk=b"x")],
        [gpb.GetCheckpointResponse(blobs=[gpb.ChannelBlob(channel="x", version="1")])],
        [
            gpb.GetCheckpointResponse(checkpoint=gpb.GraphCheckpoint(checkpoint_id="1", checkpoint=cut(b"abc", 1))),
            gpb.GetCheckpointResponse(value_chunk=b"bcd"),
        ],
        [
            gpb.GetCheckpointResponse(checkpoint=gpb.GraphCheckpoint(checkpoint_id="1", checkpoint=cut(b"abc", 1))),
            gpb.GetCheckpointResponse(blobs=[gpb.ChannelBlob(channel="x", version="1")]),
        ],
        [gpb.GetCheckpointResponse(checkpoint=gpb.GraphCheckpoint(checkpoint_id="1", checkpoint=cut(b"abc", 1))), None],
    ],
    ids=["chunk-without-value", "blob-before-checkpoint", "chunk-too-long", "moved-on-mid-value", "ended-mid-value"],
)
def test_assembler_refuses_broken_streams(msgs: list[gpb.GetCheckpointResponse | None]) -> None:
    asm = _wire.Assembler()
    with pytest.raises(CheckpointCorruptError):
        for m in msgs:
            if m is None:
                asm.finish()
            else:
                asm.feed(m)


def test_upload_messages_carry_every_byte_in_order() -> None:
    serde = JsonPlusSerializer()
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": "x" * 5000, "b": "y" * 3000}
    cp["channel_versions"] = {"a": "1", "b": "1"}
    req, _ = _wire.put_request(serde, {"configurable": {"thread_id": "t"}}, cp, {}, {"a": "1", "b": "1"})
    msgs = list(_wire.upload_messages(req, 4096 + 1000))
    start = msgs[0].start
    assert start.request_id == req.request_id and start.checkpoint.checkpoint.data == b""
    assert [b.value.total_size for b in start.blobs] == [len(b.value.data) for b in req.blobs]
    chunks = [m.chunk for m in msgs[1:]]
    assert all(0 < len(c) <= 1000 for c in chunks)
    assert b"".join(chunks) == req.checkpoint.checkpoint.data + b"".join(b.value.data for b in req.blobs)
    # The request given is unchanged (a retry sends it again).
    assert req.blobs[0].value.data


def test_writes_requests_indexes_and_batches() -> None:
    serde = JsonPlusSerializer()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
    (req,) = _wire.writes_requests(serde, config, [("a", 1), ("b", 2)], "task", "~p")
    assert [(w.idx, w.channel) for w in req.writes] == [(0, "a"), (1, "b")] and req.request_id
    (req,) = _wire.writes_requests(serde, config, [(INTERRUPT, "first"), (INTERRUPT, "second")], "task", "")
    assert [(w.idx, serde.loads_typed((w.value.type, w.value.data))) for w in req.writes] == [(-3, "second")]
    (req,) = _wire.writes_requests(serde, config, [(ERROR, "boom")], "task", "")
    assert [w.idx for w in req.writes] == [-1]
    many = _wire.writes_requests(serde, config, [("a", "v" * 100)] * 2500, "task", "")
    assert [len(r.writes) for r in many] == [1000, 1000, 500]
    assert len({r.request_id for r in many}) == 3
    with pytest.raises(MissingFieldError):
        _wire.writes_requests(serde, {"configurable": {"thread_id": "t"}}, [("a", 1)], "task", "")


def test_upload_writes_messages_carry_every_byte_in_order() -> None:
    serde = JsonPlusSerializer()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "ns", "checkpoint_id": "c1"}}
    (req,) = _wire.writes_requests(serde, config, [("a", "x" * 5000), ("b", "y" * 3000), (INTERRUPT, "z")], "task", "~p")
    assert _wire.needs_upload(req, 4096 + 1000) and not _wire.needs_upload(req, 4 << 20)
    msgs = list(_wire.upload_writes_messages(req, 4096 + 1000))
    start = msgs[0].start
    assert (start.thread_id, start.checkpoint_ns, start.checkpoint_id, start.task_id, start.task_path) == ("t", "ns", "c1", "task", "~p")
    assert start.request_id == req.request_id
    assert [(w.idx, w.channel, w.value.type, w.value.data) for w in start.writes] == [
        (w.idx, w.channel, w.value.type, b"") for w in req.writes
    ]
    assert [w.value.total_size for w in start.writes] == [len(w.value.data) for w in req.writes]
    chunks = [m.chunk for m in msgs[1:]]
    assert all(0 < len(c) <= 1000 for c in chunks) and len(chunks) == 9
    assert b"".join(chunks) == b"".join(w.value.data for w in req.writes)
    # The request given is unchanged (a retry streams it again).
    assert all(w.value.data for w in req.writes)


def test_writes_requests_one_per_call_whatever_its_size() -> None:
    serde = JsonPlusSerializer()
    config = {"configurable": {"thread_id": "t", "checkpoint_id": "c1"}}
    (req,) = _wire.writes_requests(serde, config, [("a", "v" * (3 << 20)), ("b", "w" * (3 << 20))], "task", "")
    assert [w.idx for w in req.writes] == [0, 1] and _wire.needs_upload(req, 4 << 20)


def test_graph_calls_retried_when_safe() -> None:
    assert retry_safe("UploadWrites", gpb.PutWritesRequest(request_id="id"))
    assert not retry_safe("UploadWrites", gpb.PutWritesRequest())
    assert retry_safe("PutCheckpoint", gpb.PutCheckpointRequest(request_id="id"))
    assert not retry_safe("PutCheckpoint", gpb.PutCheckpointRequest())
    assert retry_safe("PutWrites", gpb.PutWritesRequest(request_id="id"))
    assert not retry_safe("PutWrites", gpb.PutWritesRequest())
    for method, req in [
        ("GetCheckpoint", gpb.GetCheckpointRequest()),
        ("ListCheckpoints", gpb.ListCheckpointsRequest()),
        ("DeleteThread", gpb.DeleteThreadRequest()),
        ("DeleteForRuns", gpb.DeleteForRunsRequest()),
        ("CopyThread", gpb.CopyThreadRequest()),
        ("Prune", gpb.PruneRequest()),
    ]:
        assert retry_safe(method, req), method


def test_core_package_does_not_need_langgraph() -> None:
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("langgraph")]
    assert [d for d in project["optional-dependencies"]["langgraph"] if d.startswith("langgraph-checkpoint")]
    code = "import sys, savepoint, savepoint.aio; sys.exit(any(m.split('.')[0].startswith('lang') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
