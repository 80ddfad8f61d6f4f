"""docs/frameworks/langgraph.md's durable-tools example, run as the page
says: its Python block saved as invoice.py and run three times against a
savepointd of its own (the second run kills itself inside the tool), each
printing what the page's console block shows."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from conftest import REPO, Daemon


def test_runnable_example(start_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """docs/frameworks/langgraph.md's durable-tools example, run as the page
    says: each command of its console block prints what the block shows."""
    page = (REPO / "docs/frameworks/langgraph.md").read_text()
    section = page.split("## Durable tools", 1)[1].split("### A runnable example", 1)[1].split("\n### ", 1)[0]
    script = re.search(r"```python\n(.*?)```", section, re.S)
    console = re.search(r"```console\n(.*?)```", section, re.S)
    assert script and console
    runs: list[tuple[list[str], str]] = []
    for line in console.group(1).splitlines():
        if line.startswith("$ python invoice.py"):
            runs.append((line.removeprefix("$ python invoice.py").split(), ""))
        elif runs:
            runs[-1] = (runs[-1][0], runs[-1][1] + line + "\n")
    assert [args for args, _ in runs] == [["march"], ["april", "crash"], ["april"]]
    d: Daemon = start_daemon()
    (tmp_path / "invoice.py").write_text(script.group(1))
    env = {**os.environ, "SAVEPOINT_ADDR": d.addr}
    for args, want in runs:
        got = subprocess.run([sys.executable, "invoice.py", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert got.returncode == (-signal.SIGKILL if "crash" in args else 0), got.stderr
        assert got.stdout == want, got.stderr
