"""An agent on savepoint.anthropic whose send_payment tool requires a
person's approval, run as its own process by test_anthropic_approval.py:
python anthropic_approval_agent.py ADDR BASE_URL WORKDIR SESSION MODE, MODE
one of agent, async, runner, async-runner. It prints "[paused] <tool use
ids>" when run() returns Paused, "[done] <final text>" when it finishes.
send_payment appends a line to WORKDIR/payments.txt; CRASH_AT=in-tool
kills the process with SIGKILL right after that write, before the outcome
is recorded; CRASH_AT=paused kills it right after it printed Paused."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anthropic

import savepoint
import savepoint.aio
from savepoint.anthropic import AsyncDurableAgent, DurableAgent, Paused, durable, durable_tool_runner

ADDR, BASE_URL, WORKDIR, SESSION, MODE = sys.argv[1:6]
TASK = "Pay Acme's invoice."


def send_payment(inp: dict[str, Any]) -> str:
    with open(Path(WORKDIR) / "payments.txt", "a") as f:
        f.write(json.dumps(inp) + "\n")
    if os.environ.get("CRASH_AT") == "in-tool":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"paid {inp['amount']} to {inp['to']}"


TOOLS = [
    {"name": "send_payment", "description": "Send a payment.", "input_schema": {"type": "object"}, "function": send_payment},
    durable({"name": "look", "description": "Look a payee up.", "input_schema": {"type": "object"}}, function=lambda inp: "acme: ok", effect="read_only"),
]


def report(out: Any) -> None:
    if isinstance(out, Paused):
        print("[paused] " + " ".join(w.tool_use_id for w in out.waiting), flush=True)
        if os.environ.get("CRASH_AT") == "paused":
            os.kill(os.getpid(), signal.SIGKILL)
    elif isinstance(out, str):
        print(f"[done] {out}", flush=True)
    else:
        print(f"[done] {''.join(getattr(b, 'text', '') for b in out.content)}", flush=True)


async def arun() -> Any:
    client = anthropic.AsyncAnthropic(base_url=BASE_URL, api_key="test", max_retries=0)
    async with savepoint.aio.AsyncClient(ADDR) as sp:
        if MODE == "async":
            return await AsyncDurableAgent(client, SESSION, tools=TOOLS, savepoint=sp, approval_required=["send_payment"]).run(
                TASK, model="claude-fake", max_tokens=1024)
        runner = durable_tool_runner(client, SESSION, model="claude-fake", max_tokens=1024, tools=TOOLS, savepoint=sp,
                                     messages=[{"role": "user", "content": TASK}], approval_required=["send_payment"])
        return await runner.until_done()


def main() -> None:
    if MODE.startswith("async"):
        report(asyncio.run(arun()))
        return
    client = anthropic.Anthropic(base_url=BASE_URL, api_key="test", max_retries=0)
    if MODE == "agent":
        # An address: the agent dials its own client.
        report(DurableAgent(client, SESSION, tools=TOOLS, savepoint=ADDR, approval_required=["send_payment"]).run(
            TASK, model="claude-fake", max_tokens=1024))
        return
    runner = durable_tool_runner(client, SESSION, model="claude-fake", max_tokens=1024, tools=TOOLS, savepoint=ADDR,
                                 messages=[{"role": "user", "content": TASK}], approval_required=["send_payment"])
    report(runner.until_done())


if __name__ == "__main__":
    main()
