"""LangGraph's conformance suite for checkpoint savers
(langgraph-checkpoint-conformance) against SavepointSaver on a real
savepointd: every capability is detected, run on a daemon of its own, and
passes every one of its tests. The expected counts are those of the pinned
suite (0.0.2), so a capability that goes undetected or runs fewer tests fails
here instead of passing silently."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from conftest import Daemon
from langgraph.checkpoint.conformance import checkpointer_test, validate

from savepoint.langgraph import SavepointSaver

EXPECTED = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


def test_conformance(binaries: tuple[str, str]) -> None:
    daemons: list[Daemon] = []

    @checkpointer_test(name="SavepointSaver")
    async def factory() -> AsyncIterator[SavepointSaver]:
        d = Daemon(binaries[0], [])
        daemons.append(d)
        d.restart()
        try:
            async with SavepointSaver(d.addr) as saver:
                yield saver
        finally:
            d.close()

    report = asyncio.run(validate(factory))
    report.print_report()
    got = {name: (r.detected, r.passed, r.tests_passed, r.tests_failed) for name, r in report.results.items()}
    want = {name: (True, True, n, 0) for name, n in EXPECTED.items()}
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert got == want, failures
    assert sum(r.tests_passed for r in report.results.values()) == 81
    # One fresh daemon per capability.
    assert len(daemons) == len(EXPECTED)
