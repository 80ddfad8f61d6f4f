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
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from savepoint import Client
from savepoint.errors import SessionNotFoundError
from savepoint.openai_agents import SavepointSession
from savepoint.openai_agents._revision import TASK
from savepoint.openai_agents._session import encode
from savepoint.v1 import savepoint_pb2 as pb

SDK_RELEASE = "0.24.0"

SQLITE = ("SQLiteSession",)
LIST = ("SimpleListSession",)
BOTH = SQLITE + LIST

MODULES: dict[str, tuple[str, ...]] = {
    "tests/memory/test_session.py": SQLITE,
    "tests/memory/test_compaction_suffix.py": SQLITE,
    "tests/memory/test_session_limit.py": SQLITE,
    # Its SimpleListSession is the non-native backend, as below.
    "tests/memory/test_compaction_model_visibility.py": SQLITE,
    # Its SimpleListSession is the non-native backend the compaction's
    # fallback path is tested on (beside SQLiteSession, the native one), so
    # it stays.
    "tests/memory/test_openai_responses_compaction_session.py": SQLITE,
    # The EncryptedSession users wrap a SavepointSession in is
    # savepoint.openai_agents.encrypted's (the SDK's, with its authenticated pop).
    "tests/extensions/memory/test_encrypt_session.py": (*SQLITE, "EncryptedSession"),
    "tests/deferred_session_writes/test_compaction.py": LIST,
    "tests/deferred_session_writes/test_filters.py": LIST,
    "tests/deferred_session_writes/test_max_turns.py": LIST,
    "tests/deferred_session_writes/test_pending_write.py": LIST,
    "tests/deferred_session_writes/test_recovery.py": LIST,
    "tests/deferred_session_writes/test_resume.py": LIST,
    "tests/test_agent_runner.py": BOTH,
    "tests/test_agent_runner_streamed.py": BOTH,
    "tests/test_run_impl_resume_paths.py": BOTH,
    "tests/test_hitl_session_scenario.py": LIST,
    "tests/test_max_turns.py": BOTH,
    "tests/test_soft_cancel.py": SQLITE,
    "tests/test_tool_batch_failure_history.py": SQLITE,
    "tests/test_native_tool_failure_history.py": SQLITE,
    "tests/test_tool_failure_boundaries.py": SQLITE,
}
"""The SDK test modules run here, and the session classes swapped in each
for SavepointSession (where a test builds one, not where it subclasses one)."""

QUICK = ("tests/memory/test_session.py", "tests/memory/test_compaction_suffix.py")
"""The modules `make test` runs (SAVEPOINT_SDK_QUICK=1); make test-openai-agents-sdk runs them all."""

SQLITE_CONNECTIONS = "reads SQLiteSession's connections, threads or file lock"
SQLITE_ROWS = "reads or writes rows (or triggers) of SQLite's tables with sqlite3"
SQLITE_ROLLBACK = "fails SQLite's rollback or close to test its recovery"
SQLITE_WORKER = "blocks the SQLite worker thread inside a synchronous hook SQLiteSession runs there (its _insert_items(conn), a pop's authentication); SavepointSession's _insert_items is a coroutine, as AsyncSQLiteSession's (whose form of the suffix test runs), and a pop's authentication runs on the event loop"

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
    "tests/memory/test_compaction_suffix.py::test_suffix_transaction_rolls_back_failed_insert": SQLITE_ROWS,
    "tests/memory/test_compaction_suffix.py::test_failed_encrypted_suffix_transaction_preserves_original_tokens": SQLITE_ROWS,
    "tests/test_run_impl_resume_paths.py::test_handoff_resume_after_cancelled_compaction_commits": SQLITE_WORKER,
    "tests/extensions/memory/test_encrypt_session.py::test_encrypted_pop_cancellation_waits_for_authentication_rollback": SQLITE_WORKER,
    "tests/extensions/memory/test_encrypt_session.py::test_encrypted_pop_wrong_key_preserves_row_identity": SQLITE_ROWS,
    "tests/extensions/memory/test_encrypt_session.py::test_encrypted_pop_authentication_is_atomic_with_concurrent_mutations": SQLITE_CONNECTIONS,
    "tests/memory/test_openai_responses_compaction_session.py::TestOpenAIResponsesCompactionSession::test_settled_pop_failure_invalidates_response_chain": SQLITE_CONNECTIONS,
    "tests/memory/test_openai_responses_compaction_session.py::TestOpenAIResponsesCompactionSession::test_settled_clear_failure_invalidates_response_chain": SQLITE_CONNECTIONS,
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
    """isinstance(x, <swap>) holds for instances of the class it stands for
    (SQLiteSession, SimpleListSession), not for SavepointSessions: a test
    that branches on it to reach into SQLite takes its other branch, the
    one for a session it does not know."""

    real: Callable[[], type]

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.real())

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        # isinstance(x, C) answers True for an x of exactly C before asking
        # __instancecheck__, so the swap itself builds an x of a subclass,
        # named after the class it stands for (a closed one says
        # "SavepointSQLiteSession is closed", as SQLiteSession says its name).
        if "_made" not in cls.__dict__:
            cls._made = type(cls)(f"Savepoint{cls.real().__name__}", (cls,), {"_made": None})
        return type.__call__(cls._made or cls, *args, **kwargs)


def _real_list() -> type:
    from tests.utils.simple_session import SimpleListSession

    return SimpleListSession


class SQLiteSessionSwap(SavepointSession, metaclass=_SwapMeta):
    """What a listed module's ``SQLiteSession`` is: a SavepointSession whose
    id is the SQLite file's and session id's digest, so two objects on one
    file and id share a session, as SQLite's do. It overrides no item
    method, so the SDK's compaction takes its native path; a test's subclass
    that overrides one falls back to clear-then-add, as a subclass of
    SQLiteSession does."""

    real = staticmethod(_real_sqlite)

    @staticmethod
    def _id(session_id: str, db_path: Any) -> str:
        key = str(db_path) if str(db_path) != ":memory:" else f"mem-{time.monotonic_ns()}"
        return "sdk-" + hashlib.sha256(f"{key}|{session_id}".encode()).hexdigest()[:24]

    def __init__(self, session_id: str, db_path: Any = ":memory:", *, session_settings: Any = None, **_: Any) -> None:
        super().__init__(self._id(session_id, db_path), _address(), session_settings=session_settings)


class SimpleListSessionSwap(SavepointSession, metaclass=_SwapMeta):
    """What a listed module's ``SimpleListSession`` is: a SavepointSession of
    a fresh id, holding ``history`` from the start, whose ``saved_items``
    (SimpleListSession's attribute the tests inspect) are the items stored
    on the daemon, read when asked."""

    real = staticmethod(_real_list)

    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        sid = f"sdk-list-{uuid.uuid4().hex[:24]}"
        if history:
            with Client(_address()) as c:
                c.raw.SaveCheckpoint(
                    pb.SaveCheckpointRequest(
                        session_id=sid, expected_revision=0, request_id=str(uuid.uuid4()), task=TASK,
                        append_messages=[encode(it) for it in history],
                    )
                )
        super().__init__(sid, _address())

    @property
    def saved_items(self) -> list[Any]:
        with Client(_address()) as c:
            try:
                _, msgs = c.get_session(self.session_id)
            except SessionNotFoundError:
                return []
        return [json.loads(m.content_json) for m in msgs]


def _swap(name: str) -> type:
    if name == "EncryptedSession":
        from savepoint.openai_agents.encrypted import EncryptedSession

        return EncryptedSession
    return {"SQLiteSession": SQLiteSessionSwap, "SimpleListSession": SimpleListSessionSwap}[name]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    modules = QUICK if os.environ.get("SAVEPOINT_SDK_QUICK") else tuple(MODULES)
    for item in items:
        path = Path(str(item.fspath)).relative_to(config.rootpath).as_posix()
        if path not in modules:
            drop.append(item)
            continue
        for name in MODULES[path]:
            setattr(item.module, name, _swap(name))  # type: ignore[attr-defined]
        base = item.nodeid.split("[")[0]
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
