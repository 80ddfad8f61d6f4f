"""AsyncDurableAgent runs a turn's tools concurrently (an async tool on the
loop, a sync one in a worker thread), each begun before it runs and
recorded after; killed mid-turn, the finished tool is reused and the one
that was running is in doubt (tests/anthropic_parallel.py, a process of its
own per run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Daemon

WORKER = str(Path(__file__).with_name("anthropic_parallel.py"))


def run(daemon: Daemon, work: Path, sid: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, WORKER, daemon.addr, str(work), sid, *args], capture_output=True, text=True, timeout=60)


def lines(p: Path) -> list[str]:
    return p.read_text().splitlines() if p.exists() else []


def test_tools_of_a_turn_run_concurrently(daemon: Daemon, tmp_path: Path, sid: str) -> None:
    r = run(daemon, tmp_path, sid)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "[done] toolu_fast:fast done, begun first: True | toolu_slow:slow done, begun first: True"
    assert (lines(tmp_path / "fast.txt"), lines(tmp_path / "slow.txt")) == (["fast"], ["slow"])


def test_killed_mid_turn_reuses_the_finished_tool(daemon: Daemon, tmp_path: Path, sid: str) -> None:
    first = run(daemon, tmp_path, sid, "crash")
    assert first.returncode == -9, first.stdout + first.stderr
    second = run(daemon, tmp_path, sid)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.strip() == "[done] toolu_fast:fast done, begun first: True | toolu_slow:in doubt"
    assert (lines(tmp_path / "fast.txt"), lines(tmp_path / "slow.txt")) == (["fast"], ["slow"])
