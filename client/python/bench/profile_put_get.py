"""Where the time of one LangGraph put + get_tuple goes (docs/profiles.md):
starts a savepointd of its own (--savepointd) with --metrics-addr, runs the
benchmark's put + get_tuple (client/python/bench/langgraph_bench.py: a
checkpoint of two channels, 2 KiB messages) --ops times on SavepointSaver's
async methods, and prints the client's p50 of each call, its CPU per put +
get_tuple, the daemon's own time per RPC and per sync (from its
grpc_server_handling_seconds and savepoint_store_sync_seconds metrics), the
floor of a no-op call (GetServerInfo) on the same channel and on a
CallStream, and with --profile the cProfile lines of the client's own
code. The saver uses the CallStream as it does by default; --unary makes
every call its own RPC (call_stream=False).

    .venv/bin/python client/python/bench/profile_put_get.py --savepointd bin/savepointd [--ops 1000] [--profile] [--store-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from langgraph_bench import checkpoint_args, start_savepointd  # noqa: E402

from savepoint.langgraph import SavepointSaver  # noqa: E402
from savepoint.v1 import savepoint_pb2 as pb  # noqa: E402
from savepoint.v1 import savepoint_pb2_grpc as pb_grpc  # noqa: E402


def metrics(url: str) -> dict[str, float]:
    """The daemon's counters and histogram sums, by name and labels."""
    out = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        m = re.match(r"(\S+?)(\{[^}]*\})? (\S+)$", line)
        if m and not line.startswith("#"):
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def per_call(before: dict[str, float], after: dict[str, float], method: str) -> float:
    """The daemon's mean seconds per call of method between two scrapes."""
    key = next(k for k in after if k.startswith("grpc_server_handling_seconds_sum") and f'grpc_method="{method}"' in k)
    count = key.replace("_sum", "_count")
    return (after[key] - before.get(key, 0)) / max(1.0, after[count] - before.get(count, 0))


async def loop(saver: SavepointSaver, thread: str, parent: str | None, n: int, times: list[tuple[float, float]] | None) -> str | None:
    for i in range(n):
        t0 = time.perf_counter()
        stored = await saver.aput(*checkpoint_args(thread, parent, i, "m" * 2048))
        t1 = time.perf_counter()
        if await saver.aget_tuple(stored) is None:
            raise RuntimeError("the checkpoint just put did not read back")
        if times is not None:
            times.append((t1 - t0, time.perf_counter() - t1))
        parent = str(stored["configurable"]["checkpoint_id"])
    return parent


async def run(addr: str, url: str, ops: int, profile: bool, unary: bool) -> None:
    ms = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    async with SavepointSaver(addr, call_stream=not unary) as saver:
        thread = "profile-" + uuid.uuid4().hex
        parent = await loop(saver, thread, None, max(10, ops // 10), None)
        times: list[tuple[float, float]] = []
        before, cpu = metrics(url), time.process_time()
        parent = await loop(saver, thread, parent, ops, times)
        cpu, after = time.process_time() - cpu, metrics(url)
        mean = lambda xs: statistics.fmean(xs) * 1e3  # noqa: E731
        puts, gets = [t[0] for t in times], [t[1] for t in times]
        print(f"client p50 (mean): put {ms(puts):.3f} ({mean(puts):.3f}) ms, get_tuple {ms(gets):.3f} ({mean(gets):.3f}) ms, "
              f"put + get_tuple {ms([p + g for p, g in times]):.3f} ms; client CPU {cpu / ops * 1e3:.3f} ms per put + get_tuple")
        # Only the embedded store exports its syncs; with --store-url
        # PostgreSQL's commit is inside PutCheckpoint's time.
        syncs = after.get("savepoint_store_sync_seconds_count", 0) - before.get("savepoint_store_sync_seconds_count", 0)
        sync = ""
        if syncs > 0:
            secs = after["savepoint_store_sync_seconds_sum"] - before["savepoint_store_sync_seconds_sum"]
            sync = f" (its sync {secs / syncs * 1e3:.3f} ms)"
        print(f"daemon mean: PutCheckpoint {per_call(before, after, 'PutCheckpoint') * 1e3:.3f} ms{sync}, "
              f"GetCheckpoint {per_call(before, after, 'GetCheckpoint') * 1e3:.3f} ms")
        import grpc.aio

        from savepoint import _stream

        async with grpc.aio.insecure_channel(addr) as ch:
            stub = pb_grpc.SavepointServiceStub(ch)  # type: ignore[no-untyped-call]
            cs = _stream.AioCallStream(ch)
            noop, carried = [], []
            for _ in range(ops):
                t0 = time.perf_counter()
                await stub.GetServerInfo(pb.GetServerInfoRequest())
                t1 = time.perf_counter()
                await cs.call("GetServerInfo", pb.GetServerInfoRequest(), None)
                noop.append(t1 - t0)
                carried.append(time.perf_counter() - t1)
            cs.close()
        print(f"grpc.aio floor: a no-op call (GetServerInfo) p50 {ms(noop):.3f} ms unary, {ms(carried):.3f} ms on a CallStream")
        if profile:
            prof = cProfile.Profile()
            prof.enable()
            await loop(saver, thread, parent, ops, None)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(r"savepoint|serde|_wire", 15)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--savepointd", default="bin/savepointd")
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="also print the cProfile lines of the client's own code")
    ap.add_argument("--unary", action="store_true", help="every call its own RPC (call_stream=False), not on the CallStream")
    ap.add_argument("--store-url", default="", help="run savepointd with --store-url (an empty PostgreSQL database), not on its embedded store")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp(prefix="lgp", dir="/tmp")
    daemon, addr = start_savepointd_with_metrics(args.savepointd, tmp, port, args.store_url)
    try:
        asyncio.run(run(addr, f"http://127.0.0.1:{port}/metrics", args.ops, args.profile, args.unary))
    finally:
        daemon.terminate()
        daemon.wait()
    return 0


def start_savepointd_with_metrics(binary: str, tmp: str, port: int, store_url: str = "") -> tuple[subprocess.Popen[bytes], str]:
    """start_savepointd with --metrics-addr on the loopback port, and
    --store-url when store_url is set."""
    wrapper = os.path.join(tmp, "savepointd")
    store = f" --store-url {shlex.quote(store_url)}" if store_url else ""
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(os.path.abspath(binary))} --metrics-addr 127.0.0.1:{port}{store} "$@"\n')
    os.chmod(wrapper, 0o755)
    p, addr = start_savepointd(wrapper, tmp)
    deadline = time.monotonic() + 20
    while True:
        try:
            metrics(f"http://127.0.0.1:{port}/metrics")
            return p, addr
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
