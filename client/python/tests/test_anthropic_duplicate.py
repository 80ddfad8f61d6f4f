"""The duplicate-intent guard in an Anthropic loop that asks the model
again (anthropic_reask_agent.py, against fake_anthropic's Messages API
playing a model that gives every tool call a new id): killed after
send_payment ran and was recorded but before the reply was saved, the
resumed process is asked for the same payment under a new id and does not
pay again; the model is told, under the new id, that the payment was made
and what it returned. An uncrashed run asked to pay twice pays twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from fake_anthropic import Fake

import savepoint
from savepoint.v1 import savepoint_pb2 as pb

AGENT = str(Path(__file__).with_name("anthropic_reask_agent.py"))


def model(times: int) -> Any:
    """A model asking for send_payment {"to": "bob", "amount": 5} under a
    new id until the history holds ``times`` results, then answering with
    the last result's text."""

    def reply(msgs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
        results = [b for m in msgs if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
        if len(results) < times:
            return [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": "send_payment", "input": {"to": "bob", "amount": 5}}], "tool_use"
        return [{"type": "text", "text": "Done. " + " | ".join(str(r["content"]) for r in results)}], "end_turn"

    return reply


@pytest.fixture(scope="module")
def once() -> Iterator[Fake]:
    f = Fake(reply=model(1))
    yield f
    f.close()


@pytest.fixture(scope="module")
def twice() -> Iterator[Fake]:
    f = Fake(reply=model(2))
    yield f
    f.close()


def run(daemon: Daemon, fake: Fake, sid: str, effects: Path, kill: bool = False) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, AGENT, daemon.addr, fake.url, sid, str(effects), *(["kill"] if kill else [])]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=os.environ)


def test_killed_before_the_reply_was_saved_pays_once(daemon: Daemon, once: Fake, tmp_path: Path, sid: str) -> None:
    effects = tmp_path / "payments"
    first = run(daemon, once, sid, effects, kill=True)
    assert first.returncode == -9, first.stderr
    assert effects.read_text().splitlines() == ["paid 5 to bob"]
    second = run(daemon, once, sid, effects)
    assert second.returncode == 0, second.stderr
    assert effects.read_text().splitlines() == ["paid 5 to bob"], "paid twice"
    assert not once.errors
    with savepoint.Client(daemon.addr) as c:
        cp, msgs = c.get_session(sid)
        ledger = list(c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid, page_size=100)).entries)
    calls = {e.tool_use_id: e for e in ledger}
    assert len(calls) == 2, ledger
    earlier = next(e for e in ledger if not e.duplicate_of)
    caught = next(e for e in ledger if e.duplicate_of)
    assert earlier.effect.output == "paid 5 to bob" and caught.duplicate_of == earlier.tool_use_id and not caught.begun
    history = [json.loads(m.content_json) for m in msgs]
    result = history[2][0]
    assert result["tool_use_id"] == caught.tool_use_id and "is_error" not in result
    assert f"tool_use_id {earlier.tool_use_id} " in result["content"]
    assert result["content"].endswith("It was already taken, and returned: paid 5 to bob")
    assert second.stdout.startswith("Done. This send_payment call")


def test_uncrashed_run_paying_twice_pays_twice(daemon: Daemon, twice: Fake, tmp_path: Path, sid: str) -> None:
    effects = tmp_path / "payments"
    done = run(daemon, twice, sid, effects)
    assert done.returncode == 0, done.stderr
    assert effects.read_text().splitlines() == ["paid 5 to bob", "paid 5 to bob"]
    assert done.stdout.strip() == "Done. paid 5 to bob | paid 5 to bob"
