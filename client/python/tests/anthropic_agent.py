"""The seed's agent on savepoint.anthropic, run as its own process by
test_anthropic.py: python anthropic_agent.py ADDR BASE_URL WORKDIR SESSION
[--async]. CRASH_AT=moment:n kills it with SIGKILL at the n-th time it
reaches moment in this process: before-point-a, after-point-a, after-begin,
in-tool (inside write_report, after its side effect), after-record,
after-point-b, resume (after Resume, before Reconcile)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import anthropic
from anthropic import beta_tool

import savepoint
import savepoint.aio
from savepoint import ToolEvent, ToolStage
from savepoint.anthropic import AsyncDurableAgent, DurableAgent, durable, durable_tool_runner

ADDR, BASE_URL, WORKDIR, SESSION = sys.argv[1:5]
ASYNC = "--async" in sys.argv
CRASH = os.environ.get("CRASH_AT", "")
seen: Counter[str] = Counter()


def moment(name: str) -> None:
    seen[name] += 1
    if CRASH == f"{name}:{seen[name]}":
        print(f"[kill] {CRASH}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


@durable(effect="read_only")
@beta_tool
def read_notes(path: str) -> str:
    """Read a notes file."""
    return (Path(WORKDIR) / path).read_text()


@durable(effect="read_only")
@beta_tool
def count_words(path: str) -> str:
    """Count the words of a file."""
    return f"{len((Path(WORKDIR) / path).read_text().split())} words"


@beta_tool
def write_report(text: str) -> str:
    """Write the report to report.txt."""
    with open(Path(WORKDIR) / "report.txt", "a") as f:
        f.write(text + "\n")
    moment("in-tool")
    return "wrote report.txt"


def hook(ev: ToolEvent) -> None:
    if ev.stage == ToolStage.BEGUN:
        moment("after-begin")
    elif ev.stage == ToolStage.RECORDED:
        moment("after-record")


def patch(cls: type) -> None:
    point_a, point_b, reconcile = cls.point_a, cls.point_b, cls.reconcile
    is_async = cls is savepoint.aio.AsyncSession

    if is_async:
        async def a(self, *args, **kw):  # type: ignore[no-untyped-def]
            moment("before-point-a")
            await point_a(self, *args, **kw)
            moment("after-point-a")

        async def b(self, *args, **kw):  # type: ignore[no-untyped-def]
            await point_b(self, *args, **kw)
            moment("after-point-b")

        async def r(self, *args, **kw):  # type: ignore[no-untyped-def]
            moment("resume")
            return await reconcile(self, *args, **kw)
    else:
        def a(self, *args, **kw):  # type: ignore[no-untyped-def]
            moment("before-point-a")
            point_a(self, *args, **kw)
            moment("after-point-a")

        def b(self, *args, **kw):  # type: ignore[no-untyped-def]
            point_b(self, *args, **kw)
            moment("after-point-b")

        def r(self, *args, **kw):  # type: ignore[no-untyped-def]
            moment("resume")
            return reconcile(self, *args, **kw)

    cls.point_a, cls.point_b, cls.reconcile = a, b, r


TASK = "Turn sales-notes.txt into a short report and write it to report.txt."
TOOLS = [read_notes, count_words, write_report]


def main() -> None:
    if os.environ.get("AGENT_MODE") == "runner" and ASYNC:
        patch(savepoint.aio.AsyncSession)

        async def arun() -> str:
            async with savepoint.aio.AsyncClient(ADDR, tool_hook=hook) as sp:
                client = anthropic.AsyncAnthropic(base_url=BASE_URL, api_key="test", max_retries=0)
                runner = durable_tool_runner(client, SESSION, model="claude-fake", max_tokens=1024, tools=TOOLS,
                                             messages=[{"role": "user", "content": TASK}], savepoint=sp)
                final = await runner.until_done()
                return "".join(getattr(b, "text", "") for b in final.content)

        print(f"[done] {asyncio.run(arun())}")
        return
    if os.environ.get("AGENT_MODE") == "runner":
        # The SDK's own tool runner, through the ledger.
        patch(savepoint.Session)
        with savepoint.Client(ADDR, tool_hook=hook) as sp:
            client = anthropic.Anthropic(base_url=BASE_URL, api_key="test", max_retries=0)
            runner = durable_tool_runner(client, SESSION, model="claude-fake", max_tokens=1024, tools=TOOLS,
                                         messages=[{"role": "user", "content": TASK}], savepoint=sp)
            final = runner.until_done()
            print(f"[done] {''.join(getattr(b, 'text', '') for b in final.content)}")
        return
    if ASYNC:
        patch(savepoint.aio.AsyncSession)

        async def go() -> str:
            async with savepoint.aio.AsyncClient(ADDR, tool_hook=hook) as sp:
                agent = AsyncDurableAgent(anthropic.AsyncAnthropic(base_url=BASE_URL, api_key="test", max_retries=0), SESSION, tools=TOOLS, savepoint=sp)
                return await agent.run(TASK, model="claude-fake", max_tokens=1024)

        print(f"[done] {asyncio.run(go())}")
        return
    patch(savepoint.Session)
    with savepoint.Client(ADDR, tool_hook=hook) as sp:
        agent = DurableAgent(anthropic.Anthropic(base_url=BASE_URL, api_key="test", max_retries=0), SESSION, tools=TOOLS, savepoint=sp)
        print(f"[done] {agent.run(TASK, model='claude-fake', max_tokens=1024)}")


if __name__ == "__main__":
    main()
