"""Every code block of README.md, client/*/README.md and docs/frameworks/*.md
that is meant to run, run against a real savepointd, so that no example
names a function that does not exist. The files are found by glob: a new
page is covered the day it lands.

A block is code when its fence's info string names a language that runs
(python, go, sh, bash, js, ts); json, text, console and a bare fence are
output or prose. Code runs unless the line right before its fence marks it:

- ``<!-- docrun: skip REASON -->``: not run, for the reason given (a shell
  command for the reader's machine, a fragment of a larger program, an SDK
  this environment does not install); never a JavaScript or TypeScript
  block;
- ``<!-- docrun: prelude PATH -->``: run after the script PATH (relative to
  client/python/tests/docrun), which defines what the fragment takes as
  given, such as a fake model. A TypeScript prelude may hold the line
  ``// BLOCK``, where the block's code goes (its imports go first in the
  file), so that a fragment can run inside a function or a scope of its own,
  and lines ``// INCLUDE NAME``, replaced by the text of docrun/NAME;
- ``<!-- docrun: by PATH -->``: run by the test PATH (relative to the
  repository), as the page says (with its arguments, killed and resumed);
  this runner checks that PATH exists and reads the page.

A Python block runs as a script with this environment's interpreter, a Go
block as ``go run`` of a main package inside the module, a JavaScript or
TypeScript block as an ES module (docrun/run.mjs: types stripped by
TypeScript's compiler) inside the package whose imports it names
(client/anthropic, client/langgraphjs, client/openai-agents, or
.claude-agent-ts for the Claude Agent SDK), so that they resolve there;
"@openai/agents" is read as "@openai/agents-core", the part of it that
package installs. Each runs with $SAVEPOINT_ADDR naming a fresh daemon and
a scratch working directory, and must exit 0 within two minutes."""

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
MARK = re.compile(r"^\s*<!--\s*docrun:\s*(skip|prelude|by)\s+(.*?)\s*-->\s*$")
NODE = {"js", "javascript", "ts", "typescript"}
# Where a Node block runs: the first package whose imports it names, else
# client/anthropic (which has the client and Anthropic's SDK).
NODE_PACKAGES = [
    ("@anthropic-ai/claude-agent-sdk", ".claude-agent-ts"),
    ("@langchain/", "client/langgraphjs"),
    ("@savepoint-dev/langgraph", "client/langgraphjs"),
    ("@openai/", "client/openai-agents"),
    ("@savepoint-dev/openai-agents", "client/openai-agents"),
]
INCLUDE = re.compile(r"^// INCLUDE (\S+)\n", re.M)
IMPORT = re.compile(r"^import\s[^;]*;\s*$", re.M)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    mark: str  # "", "skip", "prelude" or "by"
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
    assert block.lang not in NODE, f"{block.id}: a {block.lang} block runs (give it a prelude, or name the test that runs it)"


@pytest.mark.parametrize("block", [b for b in ALL if b.mark == "by"], ids=lambda b: b.id)
def test_blocks_run_elsewhere_are(block: Block) -> None:
    """A block run by another test names a test that exists and reads this
    page (a test renamed or dropped would leave the block unrun)."""
    path = REPO / block.arg
    assert path.is_file(), f"{block.id}: no test {block.arg}"
    assert Path(block.page).name in path.read_text(), f"{block.id}: {block.arg} does not read {block.page}"


def node_block(block: Block, tmp_path: Path) -> tuple[list[str], Path]:
    """Writes a JavaScript or TypeScript block (after its prelude) into the
    package it needs and returns the command that runs it and that folder,
    to be removed after."""
    code = block.code.replace('"@openai/agents"', '"@openai/agents-core"')
    if block.mark == "prelude":
        prelude = INCLUDE.sub(lambda m: (PRELUDES / m.group(1)).read_text(), (PRELUDES / block.arg).read_text())
        imports = "".join(m.group(0) + "\n" for m in IMPORT.finditer(code))
        body = IMPORT.sub("", code)
        code = imports + (prelude.replace("// BLOCK\n", body) if "// BLOCK\n" in prelude else prelude + "\n" + body)
    pkg = next((p for needle, p in NODE_PACKAGES if f'"{needle}' in code), "client/anthropic")
    assert (REPO / pkg / "node_modules").is_dir(), f"{block.id}: {pkg} is not installed (make test builds it)"
    where = REPO / pkg / ".docrun" / tmp_path.name
    where.mkdir(parents=True)
    (where / "example.ts").write_text(code)
    return ["node", str(PRELUDES / "run.mjs"), str(where / "example.ts")], where


@pytest.mark.parametrize("block", [b for b in ALL if b.mark not in ("skip", "by")], ids=lambda b: b.id)
def test_block_runs(block: Block, start_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d = start_daemon()
    env = {**os.environ, "SAVEPOINT_ADDR": d.addr, "DOCRUN_TESTS": str(Path(__file__).parent), "DOCRUN_REPO": str(REPO)}
    if block.mark == "prelude":
        assert (PRELUDES / block.arg).is_file(), f"{block.id}: no prelude {PRELUDES / block.arg}"
    scratch: Path | None = None
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
        scratch = REPO / ".docrun" / tmp_path.name
        scratch.mkdir(parents=True)
        (scratch / "main.go").write_text(block.code)
        cmd, cwd = ["go", "run", str(scratch / "main.go")], tmp_path
        env["GOFLAGS"] = "-mod=mod"
    elif block.lang in NODE:
        cmd, scratch = node_block(block, tmp_path)
        cwd = tmp_path
    else:
        pytest.fail(f"{block.id}: this runner runs Python, Go, JavaScript and TypeScript; mark a {block.lang} block <!-- docrun: skip REASON -->")
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    assert p.returncode == 0, f"{block.id} exited {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
