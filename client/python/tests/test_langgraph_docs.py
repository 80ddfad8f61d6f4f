"""docs/frameworks/langgraph.md's runnable example, run as the page says:
its Python block saved as approve.py, run twice against a savepointd of its
own, prints what the page's console block shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, Daemon

PAGE = REPO / "docs/frameworks/langgraph.md"


def example() -> tuple[str, list[tuple[list[str], str]]]:
    """The example's script, and each command of its console block (the
    arguments after ``python approve.py``) with the output it shows."""
    section = PAGE.read_text().split("## A runnable example", 1)[1].split("\n## ", 1)[0]
    script = re.search(r"```python\n(.*?)```", section, re.S)
    console = re.search(r"```console\n(.*?)```", section, re.S)
    assert script and console, "the example lacks its python or console block"
    runs: list[tuple[list[str], str]] = []
    for line in console.group(1).splitlines():
        if line.startswith("$ python approve.py"):
            runs.append((line.removeprefix("$ python approve.py").split(), ""))
        elif not line.startswith("$ ") and runs:
            args, out = runs[-1]
            runs[-1] = (args, out + line + "\n")
    return script.group(1), runs


def test_runnable_example(start_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d: Daemon = start_daemon()
    script, runs = example()
    assert [args for args, _ in runs] == [[], ["yes"]]
    (tmp_path / "approve.py").write_text(script)
    env = {**os.environ, "SAVEPOINT_ADDR": d.addr}
    for args, want in runs:
        got = subprocess.run(
            [sys.executable, "approve.py", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert got.returncode == 0, got.stderr
        assert got.stdout == want, got.stderr
