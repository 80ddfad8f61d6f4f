"""A tool may return text or a list of content blocks (text, image,
document): the ledger stores them as JSON, REUSE after a crash gives the
model the same blocks, the in-doubt text stays text, and a result the ledger
cannot record still reaches the model with the log saying so."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from conftest import Daemon

import savepoint
import savepoint.aio
from savepoint import Decision, EffectClass, Message, ToolUse
from savepoint.types import normalize_content, tool_content
from savepoint.v1 import savepoint_pb2 as pb

CASES = json.loads((Path(__file__).resolve().parents[2] / "testdata/tool_content.json").read_text())["cases"]
PROMPT = Message("user", '"chart the sales"')
CHART = ToolUse("toolu_chart", "chart", "{}", EffectClass.SIDE_EFFECT)
BLOCKS = [
    {"type": "text", "text": "sales by month"},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
]


def assistant(*calls: ToolUse) -> Message:
    return Message("assistant", json.dumps([{"type": "tool_use", "id": c.tool_use_id, "name": c.name, "input": {}} for c in calls]))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_tool_content_rule(case: dict[str, object]) -> None:
    out = str(case["output"])
    got = tool_content(out)
    assert got == (json.loads(out) if case["blocks"] else out)


def test_normalize_content() -> None:
    class Block:  # an SDK object, as anthropic's types are
        def to_dict(self) -> dict[str, object]:
            return {"type": "text", "text": "x"}

    assert normalize_content(None) == ""
    assert normalize_content((Block(),)) == [{"type": "text", "text": "x"}]
    assert normalize_content('[{"type":"text","text":"x"}]') == [{"type": "text", "text": "x"}]
    with pytest.raises(TypeError, match="not int"):
        normalize_content(3)
    with pytest.raises(TypeError, match="string type"):
        normalize_content([{"text": "no type"}])


def last_content(s: savepoint.Session | savepoint.aio.Session) -> object:
    return json.loads(s.messages[-1].content_json)[0]["content"]


def test_blocks_recorded_and_reused(daemon: Daemon, sid: str) -> None:
    with savepoint.Client(daemon.addr) as c:
        s = c.start(sid, "t", messages=[PROMPT])
        s.point_a(assistant(CHART), [CHART])
        r = s.run_tool(CHART, lambda key: BLOCKS)
        assert r.ledger_error is None and r.content == BLOCKS
        # The crash: Point B never saved. The ledger holds the blocks as JSON.
        effects = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
        assert [json.loads(e.effect.output) for e in effects] == [BLOCKS]
    with savepoint.Client(daemon.addr) as c:
        s = c.resume(sid)
        ran: list[str] = []
        [r] = s.reconcile(lambda call, key: ran.append(call.tool_use_id) or "ran again")
        assert (r.decision, r.content, ran) == (Decision.REUSE, BLOCKS, [])
        s.point_b([r])
        assert last_content(s) == BLOCKS


def test_in_doubt_stays_text(daemon: Daemon, sid: str) -> None:
    with savepoint.Client(daemon.addr) as c:
        s = c.start(sid, "t", messages=[PROMPT])
        s.point_a(assistant(CHART), [CHART])
        c.raw.BeginEffect(pb.BeginEffectRequest(session_id=sid, tool_use_id=CHART.tool_use_id, epoch=s.epoch))
    with savepoint.Client(daemon.addr) as c:
        s = c.resume(sid)
        [r] = s.reconcile()
        assert r.decision == Decision.IN_DOUBT and r.is_error and isinstance(r.content, str) and r.content


def test_unrecordable_result_reaches_model(daemon: Daemon, sid: str, caplog: pytest.LogCaptureFixture) -> None:
    class Chart:
        def __str__(self) -> str:
            return "a chart object"

    with savepoint.Client(daemon.addr) as c, caplog.at_level(logging.ERROR, logger="savepoint"):
        s = c.start(sid, "t", messages=[PROMPT])
        s.point_a(assistant(CHART), [CHART])
        r = s.run_tool(CHART, lambda key: Chart())  # type: ignore[arg-type,return-value]
        assert r.content == "a chart object" and not r.is_error
        assert r.ledger_error is not None and "cannot be recorded" in str(r.ledger_error)
        assert "LEDGER WRITE FAILED" in caplog.text and "not recorded" in caplog.text
        s.point_b([r])  # records what the model got, then Point B
        assert last_content(s) == "a chart object"
        assert [e.effect.output for e in c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries] == ["a chart object"]


def test_blocks_async(daemon: Daemon, sid: str) -> None:
    async def main() -> None:
        async with savepoint.aio.AsyncClient(daemon.addr) as c:
            s = await c.start(sid, "t", messages=[PROMPT])
            await s.point_a(assistant(CHART), [CHART])

            async def tool(key: str) -> list[dict[str, object]]:
                return BLOCKS

            r = await s.run_tool(CHART, tool)
            assert r.ledger_error is None and r.content == BLOCKS
        async with savepoint.aio.AsyncClient(daemon.addr) as c:
            s = await c.resume(sid)
            [r] = await s.reconcile()
            assert (r.decision, r.content) == (Decision.REUSE, BLOCKS)
            await s.point_b([r])
            assert last_content(s) == BLOCKS

    asyncio.run(main())
