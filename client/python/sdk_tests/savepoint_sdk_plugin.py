"""A pytest plugin that runs the OpenAI Agents SDK's own session tests
(openai-agents 0.24.0, the release the ``openai-agents`` extra pins, from its
sdist) against SavepointSession on a real savepointd: every ``SQLiteSession``
a listed test module builds is a SavepointSession of its own id.

Load it with ``-p savepoint_sdk_plugin`` from the sdist's root, with
$SAVEPOINTD set (mk/openai-agents-sdk.mk does). The tests in EXCLUDED read
SQLite's internals (its file, tables, connections, locks) and are deselected
with the reason; tests/test_openai_agents_sdk_exclusions.py fails when the
list grows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

SDK_RELEASE = "0.24.0"

MODULES = ("tests/memory/test_session.py", "tests/memory/test_compaction_suffix.py")
"""The SDK test modules run here, each with its SQLiteSession swapped."""

SQLITE_CONNECTIONS = "reads SQLiteSession's connections, threads or file lock"
SQLITE_ROWS = "writes rows or triggers into SQLite's tables with sqlite3"
SQLITE_ROLLBACK = "fails SQLite's rollback or close to test its recovery"
CLASS_NAME = "matches the text 'SQLiteSession is closed' (SavepointSession raises the same RuntimeError naming itself)"

EXCLUDED: dict[str, str] = {
    "tests/memory/test_session.py::test_sqlite_session_close_closes_worker_thread_connections": SQLITE_CONNECTIONS,
    "tests/memory/test_session.py::test_sqlite_session_reaps_connections_from_exited_worker_threads": SQLITE_CONNECTIONS,
    "tests/memory/test_session.py::test_sqlite_session_closes_retired_connections_before_the_next_allocation": SQLITE_CONNECTIONS,
    "tests/memory/test_session.py::test_sqlite_session_keeps_connections_of_live_worker_threads": SQLITE_CONNECTIONS,
    "tests/memory/test_session.py::test_sqlite_session_file_lock_is_shared_across_instances": SQLITE_CONNECTIONS,
    "tests/memory/test_session.py::test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": SQLITE_CONNECTIONS,
    "tests/memory/test_session.py::test_sqlite_session_pop_item_skips_corrupt_most_recent": SQLITE_ROWS,
    "tests/memory/test_session.py::test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": SQLITE_ROWS,
    "tests/memory/test_session.py::test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": SQLITE_ROWS,
    "tests/memory/test_session.py::test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": SQLITE_ROWS,
    "tests/memory/test_session.py::test_sqlite_session_failed_add_items_releases_write_lock": SQLITE_ROLLBACK,
    "tests/memory/test_session.py::test_sqlite_session_failed_clear_session_rolls_back": SQLITE_ROLLBACK,
    "tests/memory/test_session.py::test_sqlite_session_failed_pop_item_releases_write_lock": SQLITE_ROLLBACK,
    "tests/memory/test_session.py::test_sqlite_session_rollback_failure_evicts_connection": SQLITE_ROLLBACK,
    "tests/memory/test_session.py::test_sqlite_session_close_retries_quarantined_connection": SQLITE_ROLLBACK,
    "tests/memory/test_session.py::test_sqlite_session_closed_rejects_empty_add_items": CLASS_NAME,
    "tests/memory/test_compaction_suffix.py::test_suffix_transaction_rolls_back_failed_insert": SQLITE_ROWS,
    "tests/memory/test_compaction_suffix.py::test_failed_encrypted_suffix_transaction_preserves_original_tokens": SQLITE_ROWS,
}
"""Tests not run, by node id without parameters, with the reason."""

_daemon: dict[str, Any] = {}


def _address() -> str:
    if "addr" not in _daemon:
        d = tempfile.mkdtemp(prefix="spsdk")
        addr = f"unix:{d}/s.sock"
        p = subprocess.Popen([os.environ["SAVEPOINTD"], "--data-dir", f"{d}/data", "--listen", addr], stderr=subprocess.DEVNULL)
        _daemon.update(addr=addr, dir=d, proc=p)
        from savepoint import Client

        deadline = time.monotonic() + 20
        while True:
            try:
                with Client(addr) as c:
                    c.list_sessions()
                break
            except Exception:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise
                time.sleep(0.05)
    return str(_daemon["addr"])


def _real_sqlite() -> type:
    from agents.memory.sqlite_session import SQLiteSession

    return SQLiteSession


class _SwapMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _real_sqlite())


class SQLiteSessionSwap(metaclass=_SwapMeta):
    """What a listed module's ``SQLiteSession`` is: constructing it returns a
    SavepointSession whose id is the SQLite file's and session id's digest,
    so two objects on one file and id share a session, as SQLite's do."""

    def __new__(cls, session_id: str, db_path: Any = ":memory:", *, session_settings: Any = None, **_: Any) -> Any:
        from savepoint.openai_agents import SavepointSession

        key = str(db_path) if str(db_path) != ":memory:" else f"mem-{time.monotonic_ns()}"
        sid = "sdk-" + hashlib.sha256(f"{key}|{session_id}".encode()).hexdigest()[:24]
        return SavepointSession(sid, _address(), session_settings=session_settings)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        path = Path(str(item.fspath)).relative_to(config.rootpath).as_posix()
        if path not in MODULES:
            drop.append(item)
            continue
        item.module.SQLiteSession = SQLiteSessionSwap  # type: ignore[attr-defined]
        base = f"{path}::{item.originalname}"  # type: ignore[attr-defined]
        if base in EXCLUDED:
            drop.append(item)
            continue
        # The SDK's own async-SQLite backend is not what is under test here.
        if "async-sqlite" in item.nodeid:
            drop.append(item)
            continue
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A run in which no swapped session reached the daemon tested SQLite, not SavepointSession.
    if session.testscollected and "addr" not in _daemon:
        print("savepoint_sdk_plugin: no test built a SavepointSession")
        session.exitstatus = 1


def pytest_unconfigure(config: pytest.Config) -> None:
    p = _daemon.get("proc")
    if p is not None:
        p.kill()
        p.wait()
        shutil.rmtree(_daemon["dir"], ignore_errors=True)
