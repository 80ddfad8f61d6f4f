"""AsyncDurableAgent whose first turn asks for two side-effecting tools at
once, run as its own process by test_anthropic_parallel.py: python
anthropic_parallel.py ADDR WORKDIR SESSION [crash]. fast_write is a
@beta_async_tool, slow_write a sync @beta_tool (run in a worker thread).
Each waits at a barrier until both have started (so the turn fails unless
they run concurrently), checks that the ledger shows it begun before it
does anything, and appends a line to its file. slow_write waits until
fast_write's outcome is recorded; with "crash" it is SIGKILLed right after
its side effect. The scripted model's final answer names each tool result:
"toolu_fast:<content>" or "toolu_slow:in doubt"."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from anthropic import beta_async_tool, beta_tool

import savepoint
import savepoint.aio
from savepoint import ToolEvent, ToolStage
from savepoint.anthropic import AsyncDurableAgent
from savepoint.v1 import savepoint_pb2 as pb

ADDR, WORK, SID = sys.argv[1:4]
CRASH = sys.argv[4:] == ["crash"]
recorded: set[str] = set()
barrier = threading.Barrier(2, timeout=10)  # broken (an error) unless both tools run at once


def hook(ev: ToolEvent) -> None:
    if ev.stage == ToolStage.RECORDED:
        recorded.add(ev.call.tool_use_id)


def begun(tool_use_id: str) -> bool:
    with savepoint.Client(ADDR) as c:
        entries = c.raw.ListEffects(pb.ListEffectsRequest(session_id=SID)).entries
    e = next(e for e in entries if e.tool_use_id == tool_use_id)
    return e.begun and not e.HasField("effect")


@beta_async_tool
async def fast_write() -> str:
    """Write fast.txt."""
    await asyncio.to_thread(barrier.wait)
    was = await asyncio.to_thread(begun, "toolu_fast")
    with open(Path(WORK) / "fast.txt", "a") as f:
        f.write("fast\n")
    return f"fast done, begun first: {was}"


@beta_tool
def slow_write() -> str:
    """Write slow.txt."""
    barrier.wait()
    was = begun("toolu_slow")
    while "toolu_fast" not in recorded:
        time.sleep(0.005)
    with open(Path(WORK) / "slow.txt", "a") as f:
        f.write("slow\n")
    if CRASH:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"slow done, begun first: {was}"


class _Reply:
    def __init__(self, content: list[dict[str, Any]], stop_reason: str) -> None:
        self.content, self.stop_reason = content, stop_reason
        self.usage = type("U", (), {"input_tokens": 1, "output_tokens": 1})()

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "stop_reason": self.stop_reason}


class _Messages:
    async def create(self, *, messages: list[dict[str, Any]], **_: Any) -> _Reply:
        if len(messages) == 1:
            return _Reply([{"type": "tool_use", "id": "toolu_fast", "name": "fast_write", "input": {}},
                           {"type": "tool_use", "id": "toolu_slow", "name": "slow_write", "input": {}}], "tool_use")
        results = messages[-1]["content"]
        text = " | ".join(f"{b['tool_use_id']}:{'in doubt' if b.get('is_error') else b['content'] if isinstance(b['content'], str) else b['content'][0]['text']}" for b in results)
        return _Reply([{"type": "text", "text": text}], "end_turn")


class _Client:
    messages = _Messages()
    beta = type("B", (), {"messages": messages})()


async def main() -> None:
    async with savepoint.aio.AsyncClient(ADDR, tool_hook=hook) as sp:
        agent = AsyncDurableAgent(_Client(), SID, tools=[fast_write, slow_write], savepoint=sp)
        print("[done]", await agent.run("write both", model="x", max_tokens=100), flush=True)


asyncio.run(main())
