"""SavepointSaver: LangGraph's BaseCheckpointSaver on savepointd's
GraphCheckpointService."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from types import TracebackType
from typing import Any

import grpc
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from savepoint._retry import DEFAULT_RETRY_POLICY, RetryPolicy
from savepoint.address import TLSConfig
from savepoint.errors import InvalidArgumentError, from_rpc_error
from savepoint.langgraph import _wire
from savepoint.langgraph._conn import Connection
from savepoint.v1 import graph_pb2 as gpb

LOGGER = logging.getLogger("savepoint.langgraph")


class SavepointSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer whose storage is savepointd: every
    checkpoint, channel value and pending write is durable in the daemon
    before the call returns, and every process on the host can share one
    daemon. Use it like any saver::

        with SavepointSaver() as saver:
            graph = builder.compile(checkpointer=saver)

    ``address`` is "unix:PATH" or "HOST:PORT"; None follows the default
    address resolution of savepoint.Client ($SAVEPOINT_ADDR, else the XDG
    runtime socket, else /run/savepoint/savepoint.sock), and ``tls`` works as
    there. ``serde`` serializes values (LangGraph's default serializer when
    None); the daemon stores its (type, bytes) pairs without decoding them.
    ``timeout`` bounds each call, retries included (None: no deadline); calls
    are retried per ``retry`` while the daemon is unavailable, with the same
    request id. Failed calls raise savepoint.errors exceptions.
    ``call_stream`` (default True) sends the calls (put, put_writes,
    get_tuple, deletes, the thread ledger) on one CallStream per channel
    when the daemon serves it, each as its own RPC otherwise (docs/api.md,
    CallStream); False sends each as its own RPC always.

    The sync methods use a grpc channel, the async ones (aget_tuple, aput,
    ...) a grpc.aio channel of the running event loop, made on first use.
    close() closes the sync channel, ``await aclose()`` (or ``async with``)
    the current loop's as well."""

    def __init__(
        self,
        address: str | None = None,
        *,
        serde: SerializerProtocol | None = None,
        tls: TLSConfig | bool | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        timeout: float | None = None,
        logger: logging.Logger | None = None,
        call_stream: bool = True,
    ) -> None:
        super().__init__(serde=serde)
        self._conn = Connection(address, tls, retry, timeout, logger or LOGGER, call_stream)
        self.address = self._conn.address

    # -- closing -------------------------------------------------------------

    def close(self) -> None:
        """Close the sync connection. The async connections are closed by
        aclose(), or end with their event loop."""
        self._conn.close()

    async def aclose(self) -> None:
        """Close the running event loop's connection and the sync one."""
        await self._conn.aclose()

    def __enter__(self) -> SavepointSaver:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> SavepointSaver:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    # -- reading ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names, or the latest of its thread and
        namespace without a checkpoint_id, with its channel values and
        pending writes (in writes_sort_key order); None if there is none.
        With a checkpoint_id the tuple's config is the caller's config, as
        the reference savers return it; without one it names the latest
        checkpoint."""
        raw = _assemble(self._conn.read("GetCheckpoint", _get_request(config)))
        return None if raw is None else _echo(config, _wire.to_tuple(self.serde, raw))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """get_tuple on grpc.aio."""
        raw = _assemble(await self._conn.aread("GetCheckpoint", _get_request(config)))
        return None if raw is None else _echo(config, _wire.to_tuple(self.serde, raw))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The matching checkpoints, newest first: of the config's thread
        (every thread when config is None) and namespace (every namespace
        when it names none), only the config's checkpoint_id when it names
        one, before ``before``'s checkpoint, whose metadata has each key of
        ``filter`` with an equal value, at most ``limit``. The daemon streams
        them from one snapshot; a failure before the first tuple is retried."""
        if limit is not None and limit <= 0:
            return
        req, wanted = _wire.list_request(config, filter, before, limit)
        stub = self._conn.stub()
        deadline = self._conn.deadline()
        count, try_ = 0, 0
        until: float | None = None
        while True:
            asm = _wire.Assembler()
            call = stub.ListCheckpoints(req, timeout=self._conn.left(deadline))
            try:
                for msg in call:
                    for raw in asm.feed(msg):
                        if _keep(raw, wanted):
                            count += 1
                            yield _wire.to_tuple(self.serde, raw)
                            if limit is not None and count >= limit:
                                return
                last = asm.finish()
                if last is not None and _keep(last, wanted):
                    yield _wire.to_tuple(self.serde, last)
                return
            except grpc.RpcError as e:
                until = None if count else self._conn.backoff("ListCheckpoints", req, e, try_, deadline, until)
                if until is None:
                    raise from_rpc_error(e) from None
                try_ += 1
            finally:
                call.cancel()  # a caller that stops early ends the stream

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """list on grpc.aio."""
        if limit is not None and limit <= 0:
            return
        req, wanted = _wire.list_request(config, filter, before, limit)
        stub = self._conn.astub()
        deadline = self._conn.deadline()
        count, try_ = 0, 0
        until: float | None = None
        while True:
            asm = _wire.Assembler()
            call = stub.ListCheckpoints(req, timeout=self._conn.left(deadline))
            try:
                async for msg in call:
                    for raw in asm.feed(msg):
                        if _keep(raw, wanted):
                            count += 1
                            yield _wire.to_tuple(self.serde, raw)
                            if limit is not None and count >= limit:
                                return
                last = asm.finish()
                if last is not None and _keep(last, wanted):
                    yield _wire.to_tuple(self.serde, last)
                return
            except grpc.RpcError as e:
                until = None if count else await self._conn.abackoff("ListCheckpoints", req, e, try_, deadline, until)
                if until is None:
                    raise from_rpc_error(e) from None
                try_ += 1
            finally:
                call.cancel()  # a caller that stops early ends the stream

    # -- writing ---------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint as the child of the config's checkpoint, with the
        values of the channels in ``new_versions``, in one commit (through
        UploadCheckpoint when it is over the daemon's request limit); return
        the config that names it."""
        req, stored = _wire.put_request(self.serde, config, checkpoint, metadata, new_versions)
        stub = self._conn.stub()
        limit = self._conn.request_limit()
        if not _wire.needs_upload(req, limit):
            self._conn.unary("PutCheckpoint", req)
        else:
            self._conn.call(
                "UploadCheckpoint", req,
                lambda t: stub.UploadCheckpoint(_wire.upload_messages(req, limit), timeout=t),
            )
        return stored

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """put on grpc.aio."""
        req, stored = _wire.put_request(self.serde, config, checkpoint, metadata, new_versions)
        stub = self._conn.astub()
        limit = await self._conn.arequest_limit()
        if not _wire.needs_upload(req, limit):
            await self._conn.aunary("PutCheckpoint", req)
        else:

            async def run(t: float | None) -> Any:
                return await stub.UploadCheckpoint(_wire.upload_messages(req, limit), timeout=t)

            await self._conn.acall("UploadCheckpoint", req, run)
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the config's checkpoint (which
        need not be stored yet). A write already stored for its (task_id,
        idx) stays as it is, unless every write of the call is a special
        one (an error, interrupt, ...), which replaces it. A write for a
        checkpoint of a thread deleted since is dropped (docs/protocol.md,
        the late-write rule). Writes over the daemon's request limit go
        through UploadWrites, in one commit per 1,000 writes as a PutWrites."""
        if not writes:
            return
        stub = self._conn.stub()
        limit = self._conn.request_limit()
        for req in _wire.writes_requests(self.serde, config, writes, task_id, task_path):
            if not _wire.needs_upload(req, limit):
                self._conn.unary("PutWrites", req)
            else:

                def run(t: float | None, r: gpb.PutWritesRequest = req) -> Any:
                    return stub.UploadWrites(_wire.upload_writes_messages(r, limit), timeout=t)

                self._conn.call("UploadWrites", req, run)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """put_writes on grpc.aio."""
        if not writes:
            return
        stub = self._conn.astub()
        limit = await self._conn.arequest_limit()
        for req in _wire.writes_requests(self.serde, config, writes, task_id, task_path):
            if not _wire.needs_upload(req, limit):
                await self._conn.aunary("PutWrites", req)
            else:

                async def run(t: float | None, r: gpb.PutWritesRequest = req) -> Any:
                    return await stub.UploadWrites(_wire.upload_writes_messages(r, limit), timeout=t)

                await self._conn.acall("UploadWrites", req, run)

    # -- deleting, copying, pruning -------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, blobs and writes in every
        namespace. Writes sent later for its old checkpoints are dropped."""
        self._conn.unary("DeleteThread", gpb.DeleteThreadRequest(thread_id=str(thread_id)))

    async def adelete_thread(self, thread_id: str) -> None:
        """delete_thread on grpc.aio."""
        await self._conn.aunary("DeleteThread", gpb.DeleteThreadRequest(thread_id=str(thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete, in every thread, the checkpoints whose metadata run_id is
        one of ``run_ids``, with their writes."""
        for batch in _batches(run_ids):
            self._conn.unary("DeleteForRuns", gpb.DeleteForRunsRequest(run_ids=batch))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """delete_for_runs on grpc.aio."""
        for batch in _batches(run_ids):
            await self._conn.aunary("DeleteForRuns", gpb.DeleteForRunsRequest(run_ids=batch))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Replace the target thread with a copy of the source thread: every
        namespace, checkpoint (with the same ids), value and write."""
        self._conn.unary("CopyThread", _copy_request(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """copy_thread on grpc.aio."""
        await self._conn.aunary("CopyThread", _copy_request(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint of the threads, with
        its writes and values ("keep_latest"), or delete the threads
        ("delete")."""
        strat = _strategy(strategy)
        for batch in _batches(thread_ids):
            self._conn.unary("Prune", gpb.PruneRequest(thread_ids=batch, strategy=strat))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """prune on grpc.aio."""
        strat = _strategy(strategy)
        for batch in _batches(thread_ids):
            await self._conn.aunary("Prune", gpb.PruneRequest(thread_ids=batch, strategy=strat))

    # -- versions --------------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The version after ``current``, as InMemorySaver and the SQLite and
        Postgres savers make them: a zero-padded counter and a random
        fraction, so that versions compare as strings."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"


def _assemble(msgs: list[gpb.GetCheckpointResponse]) -> _wire.RawTuple | None:
    """The tuple GetCheckpoint's messages carry, or None for none."""
    asm = _wire.Assembler()
    for msg in msgs:
        asm.feed(msg)
    return asm.finish()


def _get_request(config: RunnableConfig) -> gpb.GetCheckpointRequest:
    thread_id, ns = _wire.thread_of(config)
    return gpb.GetCheckpointRequest(
        thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=str((config.get("configurable") or {}).get("checkpoint_id") or "")
    )


def _echo(config: RunnableConfig, t: CheckpointTuple) -> CheckpointTuple:
    """The tuple that get_tuple returns: with the caller's config when it
    named the checkpoint (its checkpoint_ns and other keys as given), as
    InMemorySaver and SqliteSaver do."""
    return t._replace(config=config) if get_checkpoint_id(config) else t


def _keep(raw: _wire.RawTuple, wanted: str | None) -> bool:
    return wanted is None or raw.checkpoint.checkpoint_id == wanted


def _batches(ids: Sequence[str]) -> Iterator[list[str]]:
    items = [str(i) for i in ids]
    for i in range(0, len(items), _wire.MAX_BATCH):
        yield items[i : i + _wire.MAX_BATCH]


def _copy_request(source: str, target: str) -> gpb.CopyThreadRequest:
    return gpb.CopyThreadRequest(source_thread_id=str(source), target_thread_id=str(target))


def _strategy(name: str) -> gpb.PruneStrategy:
    try:
        return _wire.PRUNE_STRATEGIES[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown prune strategy {name!r}: keep_latest or delete") from None


__all__ = ["SavepointSaver"]
