"""Fixtures: the real savepointd (and the Go demo) built from this checkout,
started as child processes on unix sockets in short temporary directories."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

REPO = Path(__file__).resolve().parents[3]

# The suite's clients reach the daemons it starts: none may start one on
# demand in the user's own state directory (test_autostart.py starts its
# own, in temporary homes).
os.environ["SAVEPOINT_AUTOSTART"] = "0"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--crash-matrix",
        action="store_true",
        help="also run the crash-matrix cases marked crash_matrix (make crash-matrix); without it they are deselected",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "crash_matrix: a crash moment beyond make test's short form, which keeps one case of each reconcile branch; "
        "run with --crash-matrix (make crash-matrix)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --crash-matrix (or SAVEPOINT_FULL_MATRIX=1, as the TypeScript
    matrix takes it), deselect (not skip) the cases marked crash_matrix:
    make test runs the short form, make crash-matrix the rest."""
    if config.getoption("--crash-matrix") or os.environ.get("SAVEPOINT_FULL_MATRIX") == "1":
        return
    long = [it for it in items if it.get_closest_marker("crash_matrix")]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [it for it in items if not it.get_closest_marker("crash_matrix")]


def _build(tmp: Path) -> tuple[str, str]:
    if os.environ.get("SAVEPOINTD") and os.environ.get("SAVEPOINT_DEMO"):
        return os.environ["SAVEPOINTD"], os.environ["SAVEPOINT_DEMO"]
    if shutil.which("go") is None:
        pytest.fail("neither SAVEPOINTD and SAVEPOINT_DEMO nor a go toolchain to build them")
    subprocess.run(["go", "build", "-o", str(tmp) + "/", "./cmd/savepointd", "./cmd/savepoint-demo"], cwd=REPO, check=True)
    return str(tmp / "savepointd"), str(tmp / "savepoint-demo")


@pytest.fixture(scope="session")
def ts_demo() -> list[str]:
    """The TypeScript demo: $SAVEPOINT_TS_DEMO (make test-python passes it),
    else client/typescript/dist/demo.js; it must be built (make
    clients-typescript), so a missing one fails the test, never skips it."""
    path = os.environ.get("SAVEPOINT_TS_DEMO") or str(REPO / "client/typescript/dist/demo.js")
    if not Path(path).is_file():
        pytest.fail(f"the TypeScript demo {path} is not built: run make clients-typescript")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH; the cross-language tests need it for the TypeScript demo")
    return [node, path]


@pytest.fixture(scope="session")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The savepointd and savepoint-demo binaries: $SAVEPOINTD and
    $SAVEPOINT_DEMO (make test-python builds them), else built here."""
    return _build(tmp_path_factory.mktemp("bin"))


def health_serving(socket: str, timeout: float = 1.0) -> bool:
    """Ask grpc.health.v1.Health/Check; the request is the empty message and
    SERVING is the response b"\\x08\\x01"."""
    with grpc.insecure_channel("unix:" + socket) as ch:
        check = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None)
        try:
            return check(b"", timeout=timeout) == b"\x08\x01"  # type: ignore[no-any-return]
        except grpc.RpcError:
            return False


class Daemon:
    """A savepointd child process on a short unix socket path, with a data
    directory of its own. kill() is SIGKILL; restart() starts it again on the
    same data and socket."""

    def __init__(self, binary: str, args: list[str]) -> None:
        self.binary = binary
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="sp", dir="/tmp")
        self.socket = os.path.join(self.dir, "s.sock")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "savepointd.log")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return "unix:" + self.socket

    def restart(self) -> None:
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--data-dir", self.data, "--listen", self.addr, *self.args], stdout=logf, stderr=logf
        )
        logf.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"savepointd exited {self.proc.returncode}:\n{Path(self.log).read_text()}")
            if os.path.exists(self.socket) and health_serving(self.socket, 0.5):
                return
            time.sleep(0.05)
        raise RuntimeError(f"savepointd not serving after 20s:\n{Path(self.log).read_text()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def start_daemon(binaries: tuple[str, str]) -> Iterator[object]:
    """A factory: start_daemon(*flags) starts a savepointd, stopped at the
    end of the session."""
    started: list[Daemon] = []

    def start(*args: str) -> Daemon:
        d = Daemon(binaries[0], list(args))
        started.append(d)
        d.restart()
        return d

    yield start
    for d in started:
        d.close()


@pytest.fixture(scope="session")
def daemon(start_daemon) -> Daemon:  # type: ignore[no-untyped-def]
    """One savepointd shared by the tests that do not restart it; each test
    uses session ids of its own."""
    return start_daemon()  # type: ignore[no-any-return]


@pytest.fixture
def fresh_daemon(start_daemon) -> Iterator[Daemon]:  # type: ignore[no-untyped-def]
    """A savepointd of the test's own, for tests that kill or restart it."""
    d = start_daemon()
    yield d
    d.close()


@pytest.fixture
def sid(request: pytest.FixtureRequest) -> str:
    """A session id unique to the test."""
    name = request.node.name
    return "t." + "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in name)[:100]
