"""The package's type hints hold: mypy --strict (pyproject's [tool.mypy])
over src/savepoint, the generated stubs excepted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_strict() -> None:
    p = subprocess.run([sys.executable, "-m", "mypy", "src/savepoint", "demo/savepoint_demo"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr


def test_py_typed_is_shipped() -> None:
    assert (ROOT / "src" / "savepoint" / "py.typed").exists()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()
