"""LangGraph's own savers as rows of the checkpointer comparison
(`make bench-checkpointers`, bench/checkpointers.go): savepoint-bench starts
this script and drives it over its standard input and output, one JSON
object a line each way, so that its scenarios (latency, throughput, history
growth, resume) time LangGraph's AsyncSqliteSaver and AsyncPostgresSaver
with the same turns as every other checkpointer.

A turn appends one message to a session's conversation and saves it: here
one ``aput`` of a checkpoint whose ``messages`` channel holds the whole
conversation so far, as LangGraph's default ``add_messages`` channel keeps
it (a list value, stored whole at every new version), with that channel's
new version. Each message is ``{"role": ..., "content": <content_json>}``
with the bytes savepoint-bench sends.

Requests (every one has an ``id``, echoed in its answer):

    {"op": "open", "kind": "sqlite"|"postgres", "where": path or URL, "pool": n}
    {"op": "close"}
    {"op": "session", "s": i, "thread": t}         a new, empty conversation
    {"op": "save", "s": i, "messages": [[r, c], ...]}  one turn; answers "us", the aput's time
    {"op": "prefill", "s": i, "messages": [[r, c], ...]}  history not written
    {"op": "resume", "thread": t}                   aget_tuple of the latest; "us", "messages"

Answers are ``{"id": n, "ok": true, ...}`` or ``{"id": n, "ok": false,
"error": "..."}``. Requests run concurrently (one asyncio task each); a
session's requests come one at a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint


class Conversation:
    def __init__(self, thread: str) -> None:
        self.thread = thread
        self.parent: str | None = None
        self.step = 0
        self.messages: list[dict[str, str]] = []


class Server:
    def __init__(self) -> None:
        self.saver: BaseCheckpointSaver[Any] | None = None
        self.cm: Any = None
        self.pool: Any = None
        self.sessions: dict[int, Conversation] = {}

    async def open(self, kind: str, where: str, pool: int) -> None:
        await self.close()
        if kind == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            self.cm = AsyncSqliteSaver.from_conn_string(where)
            self.saver = await self.cm.__aenter__()
            await self.saver.setup()  # type: ignore[union-attr]
        elif kind == "postgres":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            # As LangGraph's documentation sets a pool up for the saver; one
            # connection per session, opened before anything is timed.
            self.pool = AsyncConnectionPool(
                where, min_size=pool, max_size=pool, open=False,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            )
            await self.pool.open(wait=True, timeout=120)
            self.saver = AsyncPostgresSaver(self.pool)
            await self.saver.setup()
        else:
            raise ValueError(f"unknown kind {kind!r}")
        self.sessions = {}

    async def close(self) -> None:
        if self.cm is not None:
            await self.cm.__aexit__(None, None, None)
        if self.pool is not None:
            await self.pool.close()
        self.saver, self.cm, self.pool, self.sessions = None, None, None, {}

    async def save(self, c: Conversation, messages: list[list[str]]) -> float:
        assert self.saver is not None, "no store open"
        c.messages.extend({"role": r, "content": m} for r, m in messages)
        c.step += 1
        cp = empty_checkpoint()
        version = f"{c.step:032}.0"
        cp["channel_values"] = {"messages": c.messages}
        cp["channel_versions"] = {"messages": version}
        config: dict[str, Any] = {"configurable": {"thread_id": c.thread, "checkpoint_ns": ""}}
        if c.parent:
            config["configurable"]["checkpoint_id"] = c.parent
        metadata: dict[str, Any] = {"source": "loop", "step": c.step, "parents": {}}
        t0 = time.perf_counter()
        stored = await self.saver.aput(config, cp, metadata, {"messages": version})  # type: ignore[arg-type]
        took = time.perf_counter() - t0
        c.parent = str(stored["configurable"]["checkpoint_id"])
        return took

    async def resume(self, thread: str) -> tuple[float, int]:
        assert self.saver is not None, "no store open"
        t0 = time.perf_counter()
        tup = await self.saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        took = time.perf_counter() - t0
        if tup is None:
            raise RuntimeError(f"thread {thread} has no checkpoint")
        return took, len(tup.checkpoint["channel_values"].get("messages", []))

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        if op == "open":
            await self.open(req["kind"], req["where"], int(req.get("pool", 1)))
            return {"pid": os.getpid()}
        if op == "close":
            await self.close()
            return {}
        if op == "session":
            self.sessions[req["s"]] = Conversation(req["thread"])
            return {}
        if op == "save":
            return {"us": 1e6 * await self.save(self.sessions[req["s"]], req["messages"])}
        if op == "prefill":
            c = self.sessions[req["s"]]
            c.messages.extend({"role": r, "content": m} for r, m in req["messages"])
            c.step += len(req["messages"])
            return {}
        if op == "resume":
            took, n = await self.resume(req["thread"])
            return {"us": 1e6 * took, "messages": n}
        raise ValueError(f"unknown op {op!r}")


async def serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=256 << 20)  # a 20 MiB history comes in one prefill line
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    server = Server()
    tasks: set[asyncio.Task[None]] = set()

    async def one(req: dict[str, Any]) -> None:
        try:
            ans = {"id": req["id"], "ok": True, **await server.handle(req)}
        except Exception as e:  # answered, not raised: the driver reports it
            ans = {"id": req.get("id"), "ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(ans).encode() + b"\n")
        out.flush()

    while line := await reader.readline():
        t = asyncio.create_task(one(json.loads(line)))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    await server.close()


if __name__ == "__main__":
    asyncio.run(serve())
