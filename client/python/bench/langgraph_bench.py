"""SavepointSaver against AsyncSqliteSaver on a file, in one run: the latency
of a put followed by a get_tuple (one process, one thread, async), and the
throughput of 16 processes each doing put + get_tuple on threads of their
own. It prints two tables and the closing name=value lines:

    langgraph_put_get_p50_vs_sqlite  SavepointSaver p50 / AsyncSqliteSaver p50 (below 1: faster)
    langgraph_16proc_vs_sqlite       SavepointSaver ops/s / AsyncSqliteSaver ops/s at 16 processes (above 1: faster)
    langgraph_put_get_p50_stream_vs_unary  SavepointSaver p50 as it is by default, on a CallStream / with call_stream=False (below 1: the stream is faster)

With --postgres-url (a database for LangGraph's PostgresSaver) and
--postgres-store-url (one for savepointd --store-url) on the same
PostgreSQL server, it also measures SavepointSaver on a second savepointd
storing into PostgreSQL against LangGraph's own PostgreSQL savers, the peer
a fleet would pick: the same latency against AsyncPostgresSaver (one
connection, as from_conn_string opens it), and 16 processes of the sync
savers (put + get_tuple) against PostgresSaver (a connection each):

    langgraph_pg_put_get_p50_vs_postgressaver  SavepointSaver p50 / AsyncPostgresSaver p50 (below 1: faster)
    langgraph_pg_16proc_vs_postgressaver       SavepointSaver ops/s / PostgresSaver ops/s at 16 processes (above 1: faster)

savepointd is the real binary (--savepointd), started on a fresh data
directory; SQLite is a fresh file. Both are durable stores: savepointd
fsyncs every write, AsyncSqliteSaver runs SQLite as the package sets it up
(WAL, synchronous left at SQLite's FULL: the WAL is synced at each commit).
Worker errors (such as "database is locked") are counted and printed, and a
run in which a system made no progress fails (exit 1). --quick is the short
form that `make bench-quick` runs; --json prints the tables and figures as
one JSON object instead, which savepoint-bench (bench/langgraph.go) reads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

PROCS = 16


def checkpoint_args(thread: str, parent: str | None, step: int, payload: str) -> tuple[Any, Any, Any, Any]:
    """The arguments of one aput: a checkpoint of a conversation step with
    a new message channel value, as LangGraph makes them."""
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [payload] * 2, "step": step}
    cp["channel_versions"] = {"messages": f"{step:032}.0", "step": f"{step:032}.0"}
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent:
        config["configurable"]["checkpoint_id"] = parent
    metadata = {"source": "loop", "step": step, "parents": {}}
    return config, cp, metadata, dict(cp["channel_versions"])


async def put_get(saver: BaseCheckpointSaver[Any], thread: str, parent: str | None, step: int, payload: str) -> str:
    stored = await saver.aput(*checkpoint_args(thread, parent, step, payload))
    tup = await saver.aget_tuple(stored)
    if tup is None or tup.checkpoint["channel_values"].get("step") != step:
        raise RuntimeError("the checkpoint just put did not read back")
    return str(stored["configurable"]["checkpoint_id"])


def put_get_sync(saver: BaseCheckpointSaver[Any], thread: str, parent: str | None, step: int, payload: str) -> str:
    """put_get with the sync API."""
    stored = saver.put(*checkpoint_args(thread, parent, step, payload))
    tup = saver.get_tuple(stored)
    if tup is None or tup.checkpoint["channel_values"].get("step") != step:
        raise RuntimeError("the checkpoint just put did not read back")
    return str(stored["configurable"]["checkpoint_id"])


class open_saver:
    """An async context manager opening the saver of ``kind`` on ``where``
    (a savepointd address, a SQLite file or a PostgreSQL URL)."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind, self.where = kind, where

    async def __aenter__(self) -> BaseCheckpointSaver[Any]:
        if self.kind.startswith("savepoint"):
            from savepoint.langgraph import SavepointSaver

            # savepoint-unary: the same saver with every call its own RPC.
            self._cm: Any = SavepointSaver(self.where, call_stream=self.kind != "savepoint-unary")
        elif self.kind == "postgres":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            self._cm = AsyncPostgresSaver.from_conn_string(self.where)
        else:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            self._cm = AsyncSqliteSaver.from_conn_string(self.where)
        saver: BaseCheckpointSaver[Any] = await self._cm.__aenter__()
        if self.kind == "postgres":
            await saver.setup()  # type: ignore[attr-defined]
        return saver

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)


async def latency(kind: str, where: str, ops: int, payload: str) -> list[float]:
    """Seconds of each put + get_tuple, after a warm-up of ops/10."""
    async with open_saver(kind, where) as saver:
        thread, parent = "lat-" + uuid.uuid4().hex, None
        took = []
        for i in range(ops + ops // 10):
            t0 = time.perf_counter()
            parent = await put_get(saver, thread, parent, i, payload)
            if i >= ops // 10:
                took.append(time.perf_counter() - t0)
        return took


async def worker(kind: str, where: str, window: float, payload: str) -> dict[str, Any]:
    """One process of the throughput run: put + get_tuple on its own thread
    for window seconds from the start time the parent sends on stdin, once
    every worker said it is ready."""
    async with open_saver(kind, where) as saver:
        thread, parent, step = "tp-" + uuid.uuid4().hex, None, 0
        # Connect and create the thread before the window.
        parent = await put_get(saver, thread, parent, step, payload)
        print("ready", flush=True)
        start_at = float(await asyncio.to_thread(sys.stdin.readline))
        await asyncio.sleep(max(0.0, start_at - time.time()))
        done, errors, first_error = 0, 0, ""
        end = start_at + window
        while time.time() < end:
            step += 1
            try:
                parent = await put_get(saver, thread, parent, step, payload)
                done += 1
            except Exception as e:  # counted: the figure is what got through
                errors += 1
                first_error = first_error or f"{type(e).__name__}: {e}"
        return {"ops": done, "errors": errors, "first_error": first_error}


def worker_sync(kind: str, where: str, window: float, payload: str) -> dict[str, Any]:
    """worker with the sync savers: SavepointSaver's put and get_tuple, or
    LangGraph's PostgresSaver on a connection of its own."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        saver: BaseCheckpointSaver[Any]
        if kind == "postgres-sync":
            from langgraph.checkpoint.postgres import PostgresSaver

            saver = stack.enter_context(PostgresSaver.from_conn_string(where))
        else:
            from savepoint.langgraph import SavepointSaver

            saver = stack.enter_context(SavepointSaver(where))
        thread, parent, step = "tp-" + uuid.uuid4().hex, None, 0
        parent = put_get_sync(saver, thread, parent, step, payload)
        print("ready", flush=True)
        start_at = float(sys.stdin.readline())
        time.sleep(max(0.0, start_at - time.time()))
        done, errors, first_error = 0, 0, ""
        end = start_at + window
        while time.time() < end:
            step += 1
            try:
                parent = put_get_sync(saver, thread, parent, step, payload)
                done += 1
            except Exception as e:  # counted: the figure is what got through
                errors += 1
                first_error = first_error or f"{type(e).__name__}: {e}"
        return {"ops": done, "errors": errors, "first_error": first_error}


def throughput(kind: str, where: str, window: float, payload_size: int) -> tuple[float, int, str]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, where, str(window), str(payload_size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCS)
    ]
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a {kind} worker did not start")
    start_at = time.time() + 0.2
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(f"{start_at}\n")
        p.stdin.flush()
    ops, errors, first = 0, 0, ""
    for p in procs:
        out, _ = p.communicate(timeout=window + 120)
        if p.returncode != 0:
            raise RuntimeError(f"a {kind} worker exited {p.returncode}")
        r = json.loads(out.strip().splitlines()[-1])
        ops += r["ops"]
        errors += r["errors"]
        first = first or r["first_error"]
    return ops / window, errors, first


def start_savepointd(binary: str, tmp: str, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    os.makedirs(tmp, exist_ok=True)
    sock = os.path.join(tmp, "s.sock")
    log = open(os.path.join(tmp, "savepointd.log"), "wb")
    p = subprocess.Popen([binary, "--data-dir", os.path.join(tmp, "data"), "--listen", "unix:" + sock, *extra], stderr=log, stdout=log)
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("savepointd did not start; see " + log.name)
        time.sleep(0.05)
    return p, "unix:" + sock


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--savepointd", default="bin/savepointd")
    ap.add_argument("--quick", action="store_true", help="the short form (fewer operations, a shorter window)")
    ap.add_argument("--ops", type=int, default=0, help="put + get_tuple timed per system (default 1000, quick 200)")
    ap.add_argument("--window", type=float, default=0, help="seconds counted at 16 processes (default 10, quick 3)")
    ap.add_argument("--payload", type=int, default=2048, help="bytes of each message in the checkpoint")
    ap.add_argument("--json", action="store_true", help="print one JSON object (tables and figures), for savepoint-bench")
    ap.add_argument("--postgres-url", default="", help="a PostgreSQL database for LangGraph's PostgresSaver (with --postgres-store-url)")
    ap.add_argument("--postgres-store-url", default="", help="a database of the same server for savepointd --store-url")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, where, window, size = args.worker
        if kind.endswith("-sync"):
            print(json.dumps(worker_sync(kind, where, float(window), "m" * int(size))))
        else:
            print(json.dumps(asyncio.run(worker(kind, where, float(window), "m" * int(size)))))
        return 0
    if bool(args.postgres_url) != bool(args.postgres_store_url):
        ap.error("--postgres-url and --postgres-store-url go together")
    ops = args.ops or (200 if args.quick else 1000)
    window = args.window or (3.0 if args.quick else 10.0)
    payload = "m" * args.payload

    tmp = tempfile.mkdtemp(prefix="lgb", dir="/tmp")
    daemons = []
    daemon, addr = start_savepointd(args.savepointd, tmp)
    daemons.append(daemon)
    # (kind in the latency run, kind in the 16 processes, row name, where)
    systems = [
        ("savepoint", "savepoint", "SavepointSaver", addr),
        ("sqlite", "sqlite", "AsyncSqliteSaver", os.path.join(tmp, "sqlite", "checkpoints.db")),
    ]
    if args.postgres_url:
        pg_daemon, pg_addr = start_savepointd(args.savepointd, os.path.join(tmp, "pg"), "--store-url", args.postgres_store_url)
        daemons.append(pg_daemon)
        systems += [
            ("savepoint-pg", "savepoint-pg-sync", "SavepointSaver, savepointd --store-url", pg_addr),
            ("postgres", "postgres-sync", "AsyncPostgresSaver | PostgresSaver", args.postgres_url),
        ]
    os.makedirs(os.path.join(tmp, "sqlite"))
    p50: dict[str, float] = {}
    rate: dict[str, float] = {}
    lat = {
        "title": f"LangGraph savers: put + get_tuple latency, one process ({ops} timed, {args.payload}-byte messages)",
        "header": ["saver", "p50 ms", "p90 ms", "p99 ms"],
        "rows": [],
        "notes": ["One async put of a checkpoint with two channels, then aget_tuple of it; a fresh store each."],
    }
    tp = {
        "title": f"LangGraph savers: {PROCS} processes, put + get_tuple each on its own thread ({window:g} s counted)",
        "header": ["saver", "ops/s", "errors", "first error"],
        "rows": [],
        "notes": [f"{PROCS} Python processes on one savepointd, or on one SQLite file (WAL, synchronous FULL)."],
    }
    if args.postgres_url:
        lat["notes"].append(
            "On PostgreSQL: SavepointSaver on a second savepointd started with --store-url, against AsyncPostgresSaver"
            " (from_conn_string: one connection, autocommit) on another database of the same server (fsync on)."
        )
        tp["notes"].append(
            "On PostgreSQL: the sync savers, put + get_tuple: SavepointSaver on the savepointd with --store-url,"
            " against PostgresSaver (from_conn_string: a connection per process)."
        )
    try:
        for kind, _, name, where in systems:
            took = sorted(asyncio.run(latency(kind, where, ops, payload)))
            p50[kind] = statistics.median(took)
            q = statistics.quantiles(took, n=100)
            lat["rows"].append([name.split(" | ")[0], f"{p50[kind] * 1e3:.3f}", f"{q[89] * 1e3:.3f}", f"{q[98] * 1e3:.3f}"])
        # The same saver with every call its own RPC (latency only): what
        # the CallStream changes per put + get_tuple.
        took = sorted(asyncio.run(latency("savepoint-unary", addr, ops, payload)))
        p50["savepoint-unary"] = statistics.median(took)
        q = statistics.quantiles(took, n=100)
        lat["rows"].append(["SavepointSaver, call_stream=False", f"{p50['savepoint-unary'] * 1e3:.3f}", f"{q[89] * 1e3:.3f}", f"{q[98] * 1e3:.3f}"])
        for kind, tkind, name, where in systems:
            rate[kind], errors, first = throughput(tkind, where, window, args.payload)
            if tkind.endswith("-sync"):
                name = name.split(" | ")[-1] + (" (sync)" if kind.startswith("savepoint") else "")
            tp["rows"].append([name, f"{rate[kind]:.1f}", str(errors), first[:80] or "-"])
    finally:
        for d in daemons:
            d.send_signal(signal.SIGTERM)
            d.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    if not all(rate.values()) or not all(p50.values()):
        print("langgraph_bench: a saver made no progress", file=sys.stderr)
        return 1
    summary = {
        "langgraph_put_get_p50_vs_sqlite": p50["savepoint"] / p50["sqlite"],
        "langgraph_16proc_vs_sqlite": rate["savepoint"] / rate["sqlite"],
        "langgraph_put_get_p50_stream_vs_unary": p50["savepoint"] / p50["savepoint-unary"],
    }
    if args.postgres_url:
        summary["langgraph_pg_put_get_p50_vs_postgressaver"] = p50["savepoint-pg"] / p50["postgres"]
        summary["langgraph_pg_16proc_vs_postgressaver"] = rate["savepoint-pg"] / rate["postgres"]
    if args.json:
        print(json.dumps({"tables": [lat, tp], "summary": summary}))
        return 0
    for t in (lat, tp):
        print(f"## {t['title']}\n")
        print("| " + " | ".join(t["header"]) + " |\n|" + " --- |" * len(t["header"]))
        for r in t["rows"]:
            print("| " + " | ".join(r) + " |")
        print()
    for name, v in summary.items():
        print(f"{name}={v:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
