"""The seed's agent on the Claude Agent SDK with savepoint.claude_agent, run
as its own process by e2e_claude_agent_sdk.py: tools from an in-process SDK
MCP server (read_notes, read-only; write_report, which appends to
report.txt), the SDK's bundled CLI pointed at the fake Messages API by the
environment (ANTHROPIC_BASE_URL). Usage: claude_agent_app.py WORKDIR
[SESSION_ID to resume]. CRASH=inside-write SIGKILLs the process inside
write_report right after its side effect, CRASH=after-record right after its
outcome is recorded; either with "-slow" a second later, once the SDK has
mirrored the call to the store. It prints the session id and then the final answer."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, SystemMessage, create_sdk_mcp_server, query, tool

from savepoint.aio import AsyncClient
from savepoint.claude_agent import SavepointSessionStore

WORK = sys.argv[1]
CRASH = os.environ.get("CRASH", "")


async def kill(moment: str) -> None:
    """SIGKILL the process at moment; its "-slow" form a second later, once
    the SDK has mirrored the call to the store."""
    if CRASH == moment + "-slow":
        await asyncio.sleep(1)
    if CRASH in (moment, moment + "-slow"):
        print(f"[kill] {moment}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


@tool("read_notes", "Read the sales notes", {"path": str})
async def read_notes(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "sales up 12%"}]}


@tool("write_report", "Write the report to report.txt", {"text": str})
async def write_report(args: dict[str, Any]) -> dict[str, Any]:
    with open(os.path.join(WORK, "report.txt"), "a") as f:
        f.write(args["text"].splitlines()[0] + "\n")
    await kill("inside-write")
    return {"content": [{"type": "text", "text": "report.txt written"}]}


async def main() -> None:
    async with AsyncClient(os.environ["SAVEPOINT_ADDR"], wait_ready=5) as c:
        # APPROVE=1: write_report waits for a person's approval (PreToolUse defers it).
        store = SavepointSessionStore(c, read_only=["mcp__notes__read_notes"],
                                      approval_required=["mcp__notes__write_report"] if os.environ.get("APPROVE") else [])
        record = store.post_tool_use

        async def post_tool_use(inp: Any, tid: str | None, ctx: Any) -> dict[str, Any]:
            out = await record(inp, tid, ctx)
            if inp["tool_name"].endswith("write_report"):
                await kill("after-record")
            return out

        store.post_tool_use = post_tool_use  # type: ignore[method-assign]
        denied = os.environ.get("DENY", "")

        async def policy(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
            from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

            return PermissionResultDeny(message=f"{name} is not allowed") if name == denied else PermissionResultAllow()

        options = ClaudeAgentOptions(
            mcp_servers={"notes": create_sdk_mcp_server("notes", tools=[read_notes, write_report])},
            tools=[],
            session_store=store,
            session_store_flush="eager",
            hooks=store.hooks(),
            # MODE=dontAsk: the CLI's own mode refuses what is not allowed,
            # with no can_use_tool to ask.
            **({"permission_mode": "dontAsk", "allowed_tools": ["mcp__notes__read_notes"]} if os.environ.get("MODE") == "dontAsk"
               else {"can_use_tool": store.can_use_tool(policy)}),
            resume=sys.argv[2] if len(sys.argv) > 2 else None,
            model="claude-sonnet-4-5",
            cwd=WORK,
            env={"CLAUDE_CONFIG_DIR": os.path.join(WORK, f"config-{os.getpid()}")},
        )

        task = "Continue." if len(sys.argv) > 2 else "Turn sales-notes.txt into a short report and write it to report.txt."

        async def prompt() -> Any:
            yield {"type": "user", "message": {"role": "user", "content": task}}

        async for m in query(prompt=prompt(), options=options):
            if isinstance(m, SystemMessage) and m.subtype == "init":
                print("session", m.data["session_id"], flush=True)
            if isinstance(m, ResultMessage):
                print("result", (m.result or "").replace("\n", " | "), flush=True)
                print("stop", m.stop_reason or "", flush=True)


asyncio.run(main())
