"""The wheel that pip builds from client/python holds the client and
nothing else: the demo (client/python/demo) is an example, not a module of
the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_holds_the_client_without_the_demo(tmp_path: Path) -> None:
    # Built from a copy, so that the build leaves nothing in the checkout.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("demo", "tests", "bench", "*.egg-info", "__pycache__"))
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True, text=True, timeout=240,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    wheels = list((tmp_path / "dist").glob("savepoint-*.whl"))
    assert len(wheels) == 1, wheels
    names = zipfile.ZipFile(wheels[0]).namelist()
    modules = {n for n in names if not n.startswith("savepoint-")}
    for want in ("savepoint/__init__.py", "savepoint/py.typed", "savepoint/v1/savepoint_pb2.pyi", "savepoint/langgraph/saver.py"):
        assert want in modules, sorted(modules)
    assert not [n for n in modules if "demo" in n or "sales-notes" in n], sorted(modules)
    assert all(n.startswith("savepoint/") for n in modules), sorted(modules)
