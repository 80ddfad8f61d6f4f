"""Every code block of README.md, client/*/README.md and docs/frameworks/*.md
that is meant to run, run against a real savepointd, so that no example
names a function that does not exist. The files are found by glob: a new
page is covered the day it lands.

A block is code when its fence's info string names a language that runs
(python, go, sh, bash, js, ts); json, text, console and a bare fence are
output or prose. Code runs unless the line right before its fence marks it:

- ``<!-- docrun: skip REASON -->``: not run, for the reason given (a shell
  command for the reader's machine, a fragment of a larger program, an SDK
  this environment does not install);
- ``<!-- docrun: prelude PATH -->`` (Python): run after the script PATH
  (relative to client/python/tests/docrun), which defines what the fragment
  takes as given, such as a fake model.

A Python block runs as a script with this environment's interpreter, a Go
block as ``go run`` of a main package inside the module; each with
$SAVEPOINT_ADDR naming a fresh daemon and a scratch working directory, and
must exit 0 within two minutes. A JavaScript or TypeScript block must be
marked: this runner does not run Node yet."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

PAGES = ["README.md", "client/*/README.md", "docs/frameworks/*.md"]
RUNS = {"python", "py", "go", "sh", "bash", "js", "javascript", "ts", "typescript"}
PRELUDES = Path(__file__).with_name("docrun")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
MARK = re.compile(r"^\s*<!--\s*docrun:\s*(skip|prelude)\s+(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    mark: str  # "", "skip" or "prelude"
    arg: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    out: list[Block] = []
    for pattern in PAGES:
        for path in sorted(REPO.glob(pattern)):
            page = str(path.relative_to(REPO))
            lines = path.read_text().split("\n")
            i = 0
            while i < len(lines):
                m = FENCE.match(lines[i])
                if not m:
                    i += 1
                    continue
                indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
                start = i
                body: list[str] = []
                i += 1
                while i < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]):
                    body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                    i += 1
                i += 1
                if lang not in RUNS:
                    continue
                mark = MARK.match(lines[start - 1]) if start > 0 else None
                out.append(Block(page, start + 1, lang, "\n".join(body) + "\n", mark.group(1) if mark else "", mark.group(2) if mark else ""))
    return out


ALL = blocks()


def test_the_pages_have_code() -> None:
    """The glob finds the pages and their code: a runner that finds nothing
    would pass silently."""
    pages = {b.page for b in ALL}
    assert {"README.md", "client/python/README.md", "docs/frameworks/claude-agent-sdk.md"} <= pages, pages
    assert sum(1 for b in ALL if not b.mark) >= 3


@pytest.mark.parametrize("block", [b for b in ALL if b.mark == "skip"], ids=lambda b: b.id)
def test_skipped_blocks_say_why(block: Block) -> None:
    assert len(block.arg) >= 10, f"{block.id}: a docrun skip mark must give its reason"


@pytest.mark.parametrize("block", [b for b in ALL if b.mark != "skip"], ids=lambda b: b.id)
def test_block_runs(block: Block, start_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d = start_daemon()
    env = {**os.environ, "SAVEPOINT_ADDR": d.addr, "DOCRUN_TESTS": str(Path(__file__).parent)}
    if block.lang in ("python", "py"):
        code = block.code
        if block.mark == "prelude":
            prelude = PRELUDES / block.arg
            assert prelude.is_file(), f"{block.id}: no prelude {prelude}"
            code = prelude.read_text() + "\n" + code
        (tmp_path / "example.py").write_text(code)
        cmd, cwd = [sys.executable, "example.py"], tmp_path
    elif block.lang == "go":
        assert block.mark == "", f"{block.id}: a Go block runs as it is"
        # Inside the module, so that its imports resolve to this checkout.
        d_go = REPO / ".docrun" / tmp_path.name
        d_go.mkdir(parents=True)
        (d_go / "main.go").write_text(block.code)
        cmd, cwd = ["go", "run", str(d_go / "main.go")], tmp_path
        env["GOFLAGS"] = "-mod=mod"
    else:
        pytest.fail(f"{block.id}: a {block.lang} block must be marked <!-- docrun: skip REASON --> (this runner runs Python and Go)")
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    finally:
        if block.lang == "go":
            shutil.rmtree(REPO / ".docrun" / tmp_path.name, ignore_errors=True)
    assert p.returncode == 0, f"{block.id} exited {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
