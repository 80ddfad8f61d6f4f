"""savepointd started on demand, as the Go and TypeScript clients do (see
docs/install.md): when the caller chose no address (no argument, no
SAVEPOINT_ADDR) and nothing answers at the per-user default address, start
the savepointd this package carries (its platform wheel puts it beside the
interpreter's scripts), detached, with its data and log under
$XDG_STATE_HOME/savepoint, and wait until it reports SERVING.
SAVEPOINT_AUTOSTART=0 turns it off."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable

import grpc

from savepoint.errors import UnavailableError

ENV_AUTOSTART = "SAVEPOINT_AUTOSTART"
"""Set to "0", stops the client from starting savepointd on demand."""

ENV_DAEMON_PATH = "SAVEPOINTD_PATH"
"""The savepointd binary to start on demand (unset: the one this package
carries, else savepointd on PATH)."""

START_TIMEOUT = 30.0
"""How long to wait for the daemon started to report SERVING."""

SYSTEM_ADDR = "unix:/run/savepoint/savepoint.sock"
"""The system's daemon, the socket contrib/systemd's savepointd.socket creates."""

GRACE = 5.0
"""Once the daemon started exited (another client's took the data
directory's lock), how long to wait for the other one to answer."""


def state_dir(getenv: Callable[[str], str | None] = os.environ.get) -> str:
    """The per-user directory of a daemon started on demand:
    $XDG_STATE_HOME/savepoint when XDG_STATE_HOME is an absolute path, else
    $HOME/.local/state/savepoint when HOME is set, else "" (as internal/addr's
    StateDir)."""
    from savepoint.address import _clean

    d = getenv("XDG_STATE_HOME") or ""
    if os.path.isabs(d):
        return _clean(os.path.join(d, "savepoint"))
    if home := getenv("HOME"):
        return _clean(os.path.join(home, ".local", "state", "savepoint"))
    return ""


def find_savepointd(getenv: Callable[[str], str | None] = os.environ.get) -> str | None:
    """The savepointd to start: SAVEPOINTD_PATH, else the one the platform
    wheel installed with this package (the environment's scripts, or the user
    scheme's for pip install --user), else savepointd on PATH; None when
    there is none."""
    if p := getenv(ENV_DAEMON_PATH):
        return p
    exe = "savepointd" + (sysconfig.get_config_var("EXE") or "")
    dirs = [sysconfig.get_path("scripts")]
    try:
        dirs.append(sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user")))
    except (KeyError, AttributeError):
        pass
    for d in dirs:
        cand = os.path.join(d, exe)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which(exe)


def _answers(sock: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(sock)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _private_dir(d: str) -> None:
    """Create d (0700) when missing and check that this user owns it and no
    one else may enter it, fixing the mode of a directory the user owns."""
    os.makedirs(d, mode=0o700, exist_ok=True)
    st = os.lstat(d)
    import stat

    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{d} is not a directory")
    if st.st_uid != os.getuid():
        raise OSError(f"{d} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)


def _health_serving(target: str) -> int | None:
    """The daemon's pid once health says SERVING, else None."""
    from savepoint.v1 import savepoint_pb2 as pb
    from savepoint.v1 import savepoint_pb2_grpc as pb_grpc

    with grpc.insecure_channel(target) as ch:
        check = ch.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        try:
            # HealthCheckRequest{} is empty; HealthCheckResponse{status: SERVING} is field 1 = 1.
            if check(b"", timeout=1.0) != b"\x08\x01":
                return None
            info = pb_grpc.SavepointServiceStub(ch).GetServerInfo(pb.GetServerInfoRequest(), timeout=1.0)  # type: ignore[no-untyped-call]
        except grpc.RpcError:
            return None
        return int(info.pid)


class Autostart:
    """Starts savepointd on demand at the per-user default address ``addr``
    (a unix socket) with its data in ``state``/data and log in
    ``state``/savepointd.log."""

    def __init__(self, addr: str, state: str) -> None:
        self.addr = addr
        self.sock = addr[len("unix:") :]
        self.state = state
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, getenv: Callable[[str], str | None] = os.environ.get) -> Autostart | None:
        """The autostart of a client that chose no address, or None when it
        is off (SAVEPOINT_AUTOSTART=0), SAVEPOINT_ADDR chose the address, or
        there is no per-user default (no XDG_STATE_HOME, no HOME)."""
        from savepoint.address import ENV_ADDR, default_addr

        if getenv(ENV_ADDR) or getenv(ENV_AUTOSTART) == "0" or sys.platform == "win32":
            return None
        state = state_dir(getenv)
        if not state:
            return None
        return cls(default_addr(getenv), state)

    def ensure(self) -> str:
        """Return the address to use once something answers there: the
        per-user default when a daemon answers there; else the system's
        daemon (SYSTEM_ADDR, contrib/systemd) when one answers there, which
        starts nothing; else the per-user default after starting savepointd
        there. Raises UnavailableError, quoting the last lines of the
        daemon's log when the daemon started failed."""
        with self._lock:
            if (addr := self.probe()) is not None:
                return addr
            self._start()
            return self.addr

    def probe(self) -> str | None:
        """The address that answers now, starting nothing: the per-user
        default, else the system's daemon (SYSTEM_ADDR); None when neither
        answers, so that start() is still to come. It takes no longer than
        connecting to two unix sockets."""
        if _answers(self.sock):
            return self.addr
        system = SYSTEM_ADDR
        if self.addr != system and _answers(system[len("unix:") :]):
            return system
        return None

    def start(self) -> None:
        """Start savepointd at the per-user default unless a daemon answers
        there already, and wait until one reports SERVING: the second half
        of ensure(), for a client whose probe() found nothing. Raises as
        ensure() does."""
        with self._lock:
            if not _answers(self.sock):
                self._start()

    def _start(self) -> None:
        """Start savepointd at the per-user default and wait until it (or
        another client's, which won the race) reports SERVING."""
        binary = find_savepointd()
        if binary is None:
            raise UnavailableError(
                f"nothing answers at {self.addr} and no savepointd was found to start on demand: "
                f"this installation of savepoint carries none for {platform.system()} {platform.machine()} "
                "(the platform wheels, for Linux x86_64 and aarch64 and macOS x86_64 and arm64, do); "
                "install savepointd from a release archive or with make install (see docs/install.md), "
                "or set SAVEPOINT_ADDR to a running daemon's address",
                code=grpc.StatusCode.UNAVAILABLE,
            )
        try:
            _private_dir(self.state)
        except OSError as e:
            raise UnavailableError(f"cannot start savepointd on demand: {e}", code=grpc.StatusCode.UNAVAILABLE) from None
        log_path = os.path.join(self.state, "savepointd.log")
        data = os.path.join(self.state, "data")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEPOINT_")}
        with open(log_path, "ab") as log:
            start = log.tell()
            try:
                proc = subprocess.Popen(
                    [binary, "--data-dir", data, "--listen", self.addr, "--started-on-demand", "--log-file", log_path],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.state, env=env,
                    start_new_session=True, close_fds=True,
                )
            except OSError as e:
                raise UnavailableError(f"cannot start {binary} on demand: {e}", code=grpc.StatusCode.UNAVAILABLE) from None
        # Reap it if it exits while this process lives (it loses a race).
        threading.Thread(target=proc.wait, daemon=True).start()
        pid = self._wait_serving(proc)
        if pid is None:
            raise UnavailableError(
                f"savepointd started on demand at {self.addr} did not start{_tail(log_path, start)}",
                code=grpc.StatusCode.UNAVAILABLE,
            )
        if pid == proc.pid:
            print(
                f"savepoint: started savepointd on demand at {self.addr} (pid {pid}), data in {data}, log in {log_path}",
                file=sys.stderr, flush=True,
            )

    def _wait_serving(self, proc: subprocess.Popen[bytes]) -> int | None:
        from savepoint.address import parse_addr

        target = parse_addr(self.addr).target
        end = time.monotonic() + START_TIMEOUT
        grace_end: float | None = None
        while time.monotonic() < end and (grace_end is None or time.monotonic() < grace_end):
            if _answers(self.sock) and (pid := _health_serving(target)) is not None:
                return pid
            if grace_end is None and proc.poll() is not None:
                grace_end = time.monotonic() + GRACE
            time.sleep(0.05)
        return None


def _tail(path: str, start: int) -> str:
    """The last lines the daemon wrote to its log from ``start`` on (from the
    beginning when the daemon rotated the log meanwhile and it is shorter
    now), as text to end an error with."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < start:
                start = 0
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = text.rstrip("\n").splitlines()[-10:]
    if not lines:
        return ""
    return f"; the last lines of its log ({path}):\n" + "\n".join(lines)
