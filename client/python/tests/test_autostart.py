"""savepointd started on demand (savepoint._autostart), each case in client
processes of their own with a temporary home: nothing listening, a stale
socket, a daemon killed between two calls, two racing clients,
SAVEPOINT_AUTOSTART=0, an explicit address, a daemon that fails to start,
and no savepointd to start. The Go (client/autostart_test.go) and
TypeScript clients are tested for the same cases."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# A client process: dials with no address, prints the daemon's pid; with
# argv[1] == "kill" kills that daemon and calls again (ListSessions, which
# is retried) through the same client.
HELPER = r"""
import os, signal, sys, time
import savepoint
from savepoint.v1 import savepoint_pb2 as pb
try:
    c = savepoint.Client()
    for i in range(2):
        if i == 1:
            list(c.list_sessions())
        info = c.raw.GetServerInfo(pb.GetServerInfoRequest())
        print(f"pid {info.pid} on-demand {info.started_on_demand}", flush=True)
        if sys.argv[1:] != ["kill"]:
            break
        os.kill(info.pid, signal.SIGKILL)
        while True:
            try:
                os.kill(info.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.01)
except savepoint.errors.SavepointError as e:
    print("error: " + type(e).__name__ + ": " + str(e).replace("\n", " | "), flush=True)
"""

STARTED = "savepoint: started savepointd on demand at unix:"


@dataclass
class Result:
    pids: list[int] = field(default_factory=list)
    on_demand: bool = False
    err: str = ""
    stderr: str = ""


class User:
    """A user with a home of its own and no XDG_RUNTIME_DIR."""

    def __init__(self, home: str, savepointd: str) -> None:
        self.home = home
        self.state = Path(home, "st", "savepoint")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEPOINT") and k not in ("HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME")}
        self.env = {**env, "HOME": home, "XDG_STATE_HOME": str(Path(home, "st")), "SAVEPOINTD_PATH": savepointd}
        self.pids: set[int] = set()

    def run(self, *args: str, **extra: str) -> Result:
        p = subprocess.run([sys.executable, "-c", HELPER, *args], env={**self.env, **extra}, capture_output=True, text=True, timeout=120)
        r = Result(stderr=p.stderr)
        # Every daemon started is killed at the end, even one no call reached.
        self.pids.update(int(m) for m in re.findall(r"\(pid (\d+)\)", p.stderr))
        for line in p.stdout.splitlines():
            if line.startswith("pid "):
                _, pid, _, od = line.split()
                r.pids.append(int(pid))
                r.on_demand = od == "True"
                self.pids.add(int(pid))
            elif line.startswith("error: "):
                r.err += line
        assert r.pids or r.err, (p.stdout, p.stderr)
        return r


@pytest.fixture
def user(binaries: tuple[str, str]) -> Iterator[User]:
    home = tempfile.mkdtemp(prefix="spa")  # short: the socket path must fit
    u = User(home, binaries[0])
    yield u
    for pid in u.pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["rm", "-rf", home], check=False)


def serving(r: Result) -> int:
    assert not r.err and r.pids and r.on_demand, r
    return r.pids[-1]


def test_nothing_listening(user: User) -> None:
    r = user.run()
    pid = serving(r)
    assert r.stderr.count(STARTED) == 1 and str(user.state / "savepointd.log") in r.stderr, r.stderr
    assert user.state.stat().st_mode & 0o777 == 0o700
    assert (user.state / "data").is_dir()
    r2 = user.run()
    assert serving(r2) == pid and r2.stderr == ""


def test_stale_socket(user: User) -> None:
    pid = serving(user.run())
    os.kill(pid, signal.SIGKILL)
    while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text(errors="replace"):
        time.sleep(0.01)
    assert (user.state / "savepoint.sock").exists()  # left by the killed daemon
    r = user.run()
    assert serving(r) != pid and STARTED in r.stderr


def test_restarts_after_kill(user: User) -> None:
    r = user.run("kill")
    assert not r.err and len(r.pids) == 2 and r.pids[0] != r.pids[1], r
    assert r.stderr.count(STARTED) == 2, r.stderr


def test_race(user: User) -> None:
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda _: user.run(), range(4)))
    assert len({serving(r) for r in results}) == 1, results
    assert sum(r.stderr.count(STARTED) for r in results) == 1, [r.stderr for r in results]


@pytest.mark.parametrize("extra", [{"SAVEPOINT_AUTOSTART": "0"}, {"SAVEPOINT_ADDR": "unix:SOCK"}], ids=["autostart-0", "explicit"])
def test_off(user: User, extra: dict[str, str]) -> None:
    extra = {k: v.replace("SOCK", str(user.state / "savepoint.sock")) for k, v in extra.items()}
    r = user.run(**extra)
    assert "UnavailableError" in r.err and not r.pids and r.stderr.count(STARTED) == 0, r
    assert not user.state.exists()


def test_failing_daemon(user: User) -> None:
    user.state.mkdir(parents=True, mode=0o700)
    (user.state / "data").write_text("not a directory")
    r = user.run()
    assert "did not start" in r.err and "the last lines of its log" in r.err and not r.pids, r
    last = (user.state / "savepointd.log").read_text().strip().splitlines()[-1]
    assert last and last in r.err


def test_no_binary(user: User) -> None:
    r = user.run(SAVEPOINTD_PATH="", PATH="/nonexistent")
    assert "no savepointd was found" in r.err and "docs/install.md" in r.err, r


def test_system_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing at the per-user default but the system's daemon answering
    (contrib/systemd's socket): the client uses it and starts nothing."""
    import socket

    from savepoint import _autostart

    d = tempfile.mkdtemp(prefix="sps")
    try:
        lis = socket.socket(socket.AF_UNIX)
        lis.bind(f"{d}/system.sock")
        lis.listen()
        monkeypatch.setattr(_autostart, "SYSTEM_ADDR", f"unix:{d}/system.sock")
        a = _autostart.Autostart(f"unix:{d}/st/savepoint.sock", f"{d}/st")
        assert a.ensure() == f"unix:{d}/system.sock"
        assert not Path(d, "st").exists()
        lis.close()
    finally:
        subprocess.run(["rm", "-rf", d], check=False)


# What the asyncio helper processes share: ticking() starts a task that
# ticks every 10 ms and returns the gaps between ticks (and the task);
# killed(pid) SIGKILLs a daemon and waits until it is gone.
LOOP = r"""
import asyncio, os, signal, time

async def ticking():
    gaps = []

    async def tick():
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    t = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    return gaps, t

async def killed(pid):
    os.kill(pid, signal.SIGKILL)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.01)
"""


def run_slow_start(user: User, tmp_path: Path, script: str, *args: str) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """Runs LOOP + script with a savepointd that takes a second to start;
    returns the process and the daemon pids it printed, all noted for
    cleanup."""
    slow = tmp_path / "savepointd"
    slow.write_text(f"#!/bin/sh\nsleep 1\nexec {user.env['SAVEPOINTD_PATH']} \"$@\"\n")
    slow.chmod(0o755)
    p = subprocess.run(
        [sys.executable, "-c", LOOP + script, *args], env={**user.env, "SAVEPOINTD_PATH": str(slow)}, capture_output=True, text=True, timeout=120
    )
    user.pids.update(int(m) for m in re.findall(r"\(pid (\d+)\)", p.stderr))
    pids = [int(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("pid ")]
    user.pids.update(pids)
    return p, pids


# An asyncio client process: dials with no address, kills the daemon, then
# calls again (ListSessions, retried) while a task ticks every 10 ms; prints
# how long that call took and the longest gap between ticks meanwhile.
ASYNC_HELPER = r"""
import time
import savepoint.aio
from savepoint.v1 import savepoint_pb2 as pb

async def main():
    c = savepoint.aio.AsyncClient()
    info = await c.raw.GetServerInfo(pb.GetServerInfoRequest())
    print(f"pid {info.pid} on-demand {info.started_on_demand}", flush=True)
    await killed(info.pid)
    gaps, t = await ticking()
    start = time.monotonic()
    [x async for x in c.list_sessions()]
    took = time.monotonic() - start
    t.cancel()
    info = await c.raw.GetServerInfo(pb.GetServerInfoRequest())
    print(f"pid {info.pid} on-demand {info.started_on_demand}", flush=True)
    print(f"took {took:.3f} maxgap {max(gaps):.3f}", flush=True)
    await c.close()

asyncio.run(main())
"""


def test_asyncio_restart_keeps_the_loop_running(user: User, tmp_path: Path) -> None:
    """The asyncio client starts the killed daemon again in a worker thread:
    the launch (here slowed by a second) never stalls the event loop."""
    p, pids = run_slow_start(user, tmp_path, ASYNC_HELPER)
    assert p.returncode == 0 and len(pids) == 2 and pids[0] != pids[1], (p.stdout, p.stderr)
    took, gap = (float(x) for x in re.search(r"took (\S+) maxgap (\S+)", p.stdout).groups())  # type: ignore[union-attr]
    assert took >= 1.0, p.stdout  # the restart happened inside the call, and took its second
    assert gap < 0.5, f"the event loop stalled {gap:.3f} s during the restart"


# An asyncio client process with nothing listening: builds AsyncClient()
# while a task ticks every 10 ms, then makes its first call (argv[1]:
# "call", GetServerInfo; "wait_ready", async with and wait_ready), which
# starts the daemon; prints how long the constructor and the first call
# took and the longest gap between ticks meanwhile.
ASYNC_FIRST_HELPER = r"""
import sys, time
import savepoint.aio
from savepoint.v1 import savepoint_pb2 as pb

async def main():
    gaps, t = await ticking()
    start = time.monotonic()
    c = savepoint.aio.AsyncClient(wait_ready=30)
    built = time.monotonic() - start
    if sys.argv[1] == "wait_ready":
        async with c:
            took = time.monotonic() - start
            info = await c.raw.GetServerInfo(pb.GetServerInfoRequest())
    else:
        info = await c.raw.GetServerInfo(pb.GetServerInfoRequest())
        took = time.monotonic() - start
        await c.close()
    t.cancel()
    print(f"pid {info.pid} on-demand {info.started_on_demand}", flush=True)
    print(f"built {built:.3f} took {took:.3f} maxgap {max(gaps):.3f}", flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize("first", ["call", "wait_ready"])
def test_asyncio_first_start_keeps_the_loop_running(user: User, tmp_path: Path, first: str) -> None:
    """The asyncio client's constructor starts nothing: the first call (or
    wait_ready) starts the daemon in a worker thread, and the launch (here
    slowed by a second) never stalls the event loop."""
    p, pids = run_slow_start(user, tmp_path, ASYNC_FIRST_HELPER, first)
    assert p.returncode == 0 and len(pids) == 1 and "on-demand True" in p.stdout, (p.stdout, p.stderr)
    assert p.stderr.count(STARTED) == 1, p.stderr
    built, took, gap = (float(x) for x in re.search(r"built (\S+) took (\S+) maxgap (\S+)", p.stdout).groups())  # type: ignore[union-attr]
    assert built < 0.5, f"the constructor took {built:.3f} s"
    assert took >= 1.0, p.stdout  # the start happened at the first call, and took its second
    assert gap < 0.5, f"the event loop stalled {gap:.3f} s during the first start"


@pytest.mark.parametrize("failing", [False, True], ids=["serving", "failing"])
def test_log_rotated(user: User, failing: bool) -> None:
    """The daemon started on demand rotates its log (savepointd --log-file,
    which the client passes): a log already at the 4 MiB limit becomes
    savepointd.log.1 at the daemon's first line, and the error of a daemon
    that fails to start still quotes the lines it wrote to the new file."""
    user.state.mkdir(parents=True, mode=0o700)
    log = user.state / "savepointd.log"
    old = "an old line\n" * ((4 << 20) // 12 + 1)
    log.write_text(old)
    if failing:
        (user.state / "data").write_text("not a directory")
    r = user.run()
    if failing:
        assert "did not start" in r.err and "the last lines of its log" in r.err, r
    else:
        serving(r)
    assert Path(f"{log}.1").read_text() == old
    cur = log.read_text()
    assert cur and len(cur) < 64 << 10 and "an old line" not in cur, len(cur)
    if failing:
        assert cur.strip().splitlines()[-1] in r.err


# A LangGraph saver used from asyncio, with no address: the daemon it
# started is killed, then aget_tuple (retried) runs while a task ticks
# every 10 ms; prints the daemons' pids, how long the call took and the
# longest gap between ticks meanwhile.
LANGGRAPH_ASYNC_HELPER = r"""
import time
import savepoint
from savepoint.langgraph import SavepointSaver
from savepoint.v1 import savepoint_pb2 as pb

def pid():
    c = savepoint.Client()
    info = c.raw.GetServerInfo(pb.GetServerInfoRequest())
    c.close()
    print(f"pid {info.pid} on-demand {info.started_on_demand}", flush=True)
    return info.pid

async def main():
    saver = SavepointSaver()
    config = {"configurable": {"thread_id": "t"}}
    await saver.aget_tuple(config)
    p = pid()
    await killed(p)
    gaps, t = await ticking()
    start = time.monotonic()
    await saver.aget_tuple(config)
    took = time.monotonic() - start
    t.cancel()
    pid()
    print(f"took {took:.3f} maxgap {max(gaps):.3f}", flush=True)
    saver.close()

asyncio.run(main())
"""


def test_langgraph_async_restart_keeps_the_loop_running(user: User, tmp_path: Path) -> None:
    """SavepointSaver's async methods start the killed daemon again in a
    worker thread: the launch (here slowed by a second) never stalls the
    event loop."""
    p, pids = run_slow_start(user, tmp_path, LANGGRAPH_ASYNC_HELPER)
    assert p.returncode == 0 and len(pids) == 2 and pids[0] != pids[1], (p.stdout, p.stderr)
    took, gap = (float(x) for x in re.search(r"took (\S+) maxgap (\S+)", p.stdout).groups())  # type: ignore[union-attr]
    assert took >= 1.0, p.stdout  # the restart happened inside the call, and took its second
    assert gap < 0.5, f"the event loop stalled {gap:.3f} s during the restart"
