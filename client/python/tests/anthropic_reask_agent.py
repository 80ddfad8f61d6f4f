"""A hand-written Anthropic agent loop (the anthropic SDK, pointed at the
local fake of the Messages API) that registers each tool call with its
savepoint session just before running it (register_tool_use, as an agent
framework's hooks do) and saves the model's reply, with the tool results,
only once its tools ran: killed in between, the reply is lost, and the
resumed process asks the model again.

``python anthropic_reask_agent.py ADDR URL SESSION EFFECTS [kill]``: with
"kill" it SIGKILLs itself once send_payment ran and was recorded. It
prints the final answer.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import anthropic

import savepoint
from savepoint import Message, ToolUse
from savepoint.errors import SessionExistsError

TOOL = {
    "name": "send_payment",
    "description": "Send a payment.",
    "input_schema": {"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}}},
}


def pay(effects: str, to: str, amount: int) -> str:
    with open(effects, "a") as f:
        f.write(f"paid {amount} to {to}\n")
        f.flush()
        os.fsync(f.fileno())
    return f"paid {amount} to {to}"


def main(addr: str, url: str, sid: str, effects: str, kill: bool) -> None:
    with savepoint.Client(addr) as sp:
        try:
            s = sp.start(sid, "pay bob 5", messages=[Message("user", json.dumps("pay bob 5"))])
        except SessionExistsError:
            s = sp.resume(sid)
        api = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
        while True:
            history = [{"role": m.role, "content": json.loads(m.content_json)} for m in s.messages]
            resp = api.messages.create(model="claude-fake", max_tokens=256, messages=history, tools=[TOOL])  # type: ignore[arg-type]
            content = [b.model_dump(exclude_none=True) for b in resp.content]
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                s.save(append=[Message("assistant", json.dumps(content))])
                s.complete(final_output=content[0]["text"])
                print(content[0]["text"])
                return
            results = []
            for u in uses:
                reg = s.register_tool_use(ToolUse(u["id"], u["name"], json.dumps(u["input"])))
                if reg.duplicate is not None:
                    # The same payment, asked for by the run that was killed.
                    text, is_error = reg.duplicate.tool_result_text, reg.duplicate.is_error
                elif reg.effect is not None:
                    text, is_error = reg.effect.output, reg.effect.is_error
                else:
                    text, is_error = pay(effects, **u["input"]), False
                    s.record_tool_use(u["id"], text)
                    if kill:
                        os.kill(os.getpid(), signal.SIGKILL)
                results.append({"type": "tool_result", "tool_use_id": u["id"], "content": text, **({"is_error": True} if is_error else {})})
            s.save(append=[Message("assistant", json.dumps(content)), Message("user", json.dumps(results))])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:6] == ["kill"])
