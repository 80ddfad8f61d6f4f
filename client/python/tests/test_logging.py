"""The client logs only where the application asks: its retry warnings
reach stderr only when logging is configured (the package logger has a
NullHandler, so Python's last-resort handler stays quiet)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Each program makes a call on a socket nobody listens on, with a policy that
# retries twice at once without waiting for the connection: two retry
# warnings, then UnavailableError.
CLIENT = """
import savepoint
from savepoint.v1 import savepoint_pb2 as pb
c = savepoint.Client("unix:{sock}", retry=savepoint.RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.01, reconnect_wait=0))
try:
    c.raw.GetSession(pb.GetSessionRequest(session_id="x"))
except savepoint.UnavailableError:
    print("unavailable")
"""

AIO = """
import asyncio
import savepoint
from savepoint.aio import AsyncClient
from savepoint.v1 import savepoint_pb2 as pb
async def main():
    async with AsyncClient("unix:{sock}", retry=savepoint.RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.01, reconnect_wait=0)) as c:
        try:
            await c.raw.GetSession(pb.GetSessionRequest(session_id="x"))
        except savepoint.UnavailableError:
            print("unavailable")
asyncio.run(main())
"""

SAVER = """
import savepoint
from savepoint.langgraph import SavepointSaver
s = SavepointSaver("unix:{sock}", retry=savepoint.RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.01, reconnect_wait=0))
try:
    s.get_tuple({{"configurable": {{"thread_id": "t"}}}})
except savepoint.UnavailableError:
    print("unavailable")
"""


def run(program: str, sock: Path, configure: bool) -> subprocess.CompletedProcess[str]:
    prefix = "import logging; logging.basicConfig()\n" if configure else ""
    return subprocess.run([sys.executable, "-c", prefix + program.format(sock=sock)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("program", [CLIENT, AIO, SAVER], ids=["client", "aio", "saver"])
def test_retry_warnings_only_when_logging_is_configured(tmp_path: Path, program: str) -> None:
    sock = tmp_path / "nobody.sock"
    quiet = run(program, sock, configure=False)
    assert quiet.stdout == "unavailable\n", quiet
    assert quiet.stderr == "", quiet
    loud = run(program, sock, configure=True)
    assert loud.stdout == "unavailable\n", loud
    assert loud.stderr.count("daemon unavailable, retrying") == 2, loud
