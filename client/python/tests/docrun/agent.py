# docrun prelude: what the agent-loop examples take as given, with a fake
# model that names one write_report call and then answers, and a session
# "sales-report" left with that call pending (as after a crash), for the
# examples that resume it. $SAVEPOINT_ADDR names a fresh daemon.
import asyncio
import json
from dataclasses import dataclass
from typing import Any

import savepoint
from savepoint import EffectClass, Message, SessionStatus, ToolUse

sid = "docrun-report"
task = "Turn sales-notes.txt into a short report and write it to report.txt."
prompt_json = json.dumps(task)
prompt = Message("user", prompt_json)


@dataclass
class Reply:
    message: Message
    tool_uses: list[ToolUse]
    content: list[dict[str, Any]]
    text: str


_turns = 0


def model(messages: Any) -> Reply:
    global _turns
    _turns += 1
    if _turns == 1:
        content = [{"type": "tool_use", "id": "toolu_01", "name": "write_report", "input": {"text": "Q3: sales up 12%"}}]
        calls = [ToolUse("toolu_01", "write_report", json.dumps(content[0]["input"]))]
        return Reply(Message("assistant", json.dumps(content)), calls, content, "")
    content = [{"type": "text", "text": "The report is written."}]
    return Reply(Message("assistant", json.dumps(content)), [], content, "The report is written.")


def run_tool(call: ToolUse, key: str) -> str:
    return f"{call.name} done"


async def run_tool_async(call: ToolUse, key: str) -> str:
    return f"{call.name} done"


with savepoint.Client() as _c:
    _s = _c.start("sales-report", task, messages=[prompt], replace=True)
    _s.point_a(model([]).message, [ToolUse("toolu_01", "write_report", "{}")])
_turns = 0
c = savepoint.Client()
CLASSES = {"write_report": EffectClass.SIDE_EFFECT}
