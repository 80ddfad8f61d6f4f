"""The agents test_langgraph_durable_processes.py and
test_langgraph_duplicate.py kill: a scripted chat model (no network) run by
a DurableToolNode on a SavepointSaver, either in
langgraph.prebuilt.create_react_agent ("react") or in a StateGraph of its
own ("graph"), with invoke ("sync") or ainvoke ("async"). The tools are
send_invoice (side effecting: it appends a line to a file) and lookup_price
(read-only). The model's script:

- "two-tools": it asks for send_invoice and lookup_price, then answers with
  what they returned;
- "once" or "twice": it asks for the same invoice (once, or twice one turn
  after the other) under a new id on every call, as a real model asked
  again does, then answers with the tool results.

run() runs one process's part: it starts the thread ("start") or resumes it
("resume"), with the graph's durability (None: LangGraph's default), and
with a kill point it stops for good there, after writing the point's name
to a marker file, for the parent to SIGKILL it:

- "before": in the node, before send_invoke's BeginThreadEffect;
- "during": in the tool, after its effect (the line is written);
- "after-return": in the node, after the tool returned and its outcome was
  recorded, before the node's writes;
- "after-write": in the saver, once the node's writes (send_invoice's
  ToolMessage) are stored;
- "lost-message": the saver never stores the model's tool call (each put
  of it blocks, as a put still in flight under durability="async" when the
  process dies), and the process stops once send_invoice returned and its
  outcome was recorded: the model's message is lost, its tool call ran.

It writes what the thread holds at the end (its messages without their ids)
as JSON to ``out``. As a script: ``python durable_agent.py ADDR THREAD KIND
MODE PHASE KILL_AT MARKER EFFECTS OUT [SCRIPT [DURABILITY]]`` (KILL_AT "-"
for none).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent, tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest

from savepoint.langgraph import DurableToolNode, SavepointSaver

POINTS = ("before", "during", "after-return", "after-write")

# Set by run() in the child.
_KILL_AT = ""
_MARKER = ""
_EFFECTS = ""
_SCRIPT = "two-tools"


def _hang(point: str) -> None:
    if _KILL_AT != point:
        return
    with open(_MARKER, "w") as f:
        f.write(point)
    while True:
        time.sleep(60)


async def _ahang(point: str) -> None:
    if _KILL_AT != point:
        return
    with open(_MARKER, "w") as f:
        f.write(point)
    while True:
        await asyncio.sleep(60)


class ScriptedModel(BaseChatModel):
    """Plays the module's script (_SCRIPT): asks for its tool calls, then,
    once they are answered, says what they returned."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if _SCRIPT in ("once", "twice"):
            if len(answers) < (2 if _SCRIPT == "twice" else 1):
                call = {"name": "send_invoice", "args": {"customer": "acme", "amount": 42}, "id": "call_" + uuid.uuid4().hex[:12], "type": "tool_call"}
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call]))])
        elif not answers:
            msg = AIMessage(
                content="",
                tool_calls=[
                    {"name": "send_invoice", "args": {"customer": "acme", "amount": 42}, "id": "call_send", "type": "tool_call"},
                    {"name": "lookup_price", "args": {"sku": "A1"}, "id": "call_lookup", "type": "tool_call"},
                ],
            )
            return ChatResult(generations=[ChatGeneration(message=msg)])
        if _SCRIPT == "two-tools":
            answers.sort(key=lambda m: str(m.tool_call_id))
        msg = AIMessage(content="done: " + " | ".join(f"{m.name}[{m.status}]: {m.content}" for m in answers))
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)


def _send(customer: str, amount: int) -> str:
    with open(_EFFECTS, "a") as f:
        f.write(f"invoice {customer} {amount}\n")
        f.flush()
        os.fsync(f.fileno())
    _hang("during")
    return f"invoice sent to {customer} for {amount}"


async def _asend(customer: str, amount: int) -> str:
    with open(_EFFECTS, "a") as f:
        f.write(f"invoice {customer} {amount}\n")
        f.flush()
        os.fsync(f.fileno())
    await _ahang("during")
    return f"invoice sent to {customer} for {amount}"


def _lookup(sku: str) -> str:
    return f"{sku} costs 42"


async def _alookup(sku: str) -> str:
    return f"{sku} costs 42"


def tools() -> list[BaseTool]:
    return [
        StructuredTool.from_function(
            func=_send, coroutine=_asend, name="send_invoice", description="Send an invoice.",
            metadata={"savepoint_effect": "side_effect"},
        ),
        StructuredTool.from_function(
            func=_lookup, coroutine=_alookup, name="lookup_price", description="Look a price up.",
            metadata={"savepoint_effect": "read_only"},
        ),
    ]


def _wrap(req: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
    sends = req.tool_call["name"] == "send_invoice"
    if sends:
        _hang("before")
    out = execute(req)
    if sends:
        _hang("after-return")
        if _KILL_AT == "lost-message":
            time.sleep(0.5)  # the puts before the blocked one land
            _hang("lost-message")
    return out


async def _awrap(req: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]) -> Any:
    sends = req.tool_call["name"] == "send_invoice"
    if sends:
        await _ahang("before")
    out = await execute(req)
    if sends:
        await _ahang("after-return")
        if _KILL_AT == "lost-message":
            await asyncio.sleep(0.5)  # the puts before the blocked one land
            await _ahang("lost-message")
    return out


def _sends(writes: Sequence[tuple[str, Any]]) -> bool:
    for _, v in writes:
        for m in v if isinstance(v, list) else [v]:
            if isinstance(m, ToolMessage) and m.name == "send_invoice":
                return True
    return False


def _holds_call(checkpoint: Any) -> bool:
    msgs = (checkpoint.get("channel_values") or {}).get("messages") or []
    return bool(msgs) and isinstance(msgs[-1], AIMessage) and bool(msgs[-1].tool_calls)


def _writes_call(writes: Sequence[tuple[str, Any]]) -> bool:
    for _, v in writes:
        for m in v if isinstance(v, list) else [v]:
            if isinstance(m, AIMessage) and m.tool_calls:
                return True
    return False


def _block() -> None:
    while True:
        time.sleep(60)


async def _ablock() -> None:
    while True:
        await asyncio.sleep(60)


class HookedSaver(SavepointSaver):
    """Stops for good once send_invoice's ToolMessage is stored (kill point
    "after-write"); never stores the model's tool call, neither the agent
    task's writes that hold it nor the checkpoint whose last message it is
    (kill point "lost-message")."""

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        if _KILL_AT == "lost-message" and _writes_call(writes):
            _block()
        super().put_writes(config, writes, task_id, task_path)
        if _sends(writes):
            _hang("after-write")

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        if _KILL_AT == "lost-message" and _writes_call(writes):
            await _ablock()
        await super().aput_writes(config, writes, task_id, task_path)
        if _sends(writes):
            await _ahang("after-write")

    def put(self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        if _KILL_AT == "lost-message" and _holds_call(checkpoint):
            _block()
        return super().put(config, checkpoint, metadata, new_versions)

    async def aput(self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        if _KILL_AT == "lost-message" and _holds_call(checkpoint):
            await _ablock()
        return await super().aput(config, checkpoint, metadata, new_versions)


def build(kind: str, saver: SavepointSaver) -> Any:
    node = DurableToolNode(tools(), wrap_tool_call=_wrap, awrap_tool_call=_awrap)
    model = ScriptedModel()
    if kind == "react":
        return create_react_agent(model, node, checkpointer=saver)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", RunnableLambda(agent, afunc=aagent))
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def plain(m: BaseMessage) -> dict[str, Any]:
    """A message without its id."""
    d: dict[str, Any] = {"type": m.type, "content": m.content}
    if isinstance(m, ToolMessage):
        d.update(name=m.name, tool_call_id=m.tool_call_id, status=m.status)
    if isinstance(m, AIMessage):
        d["tool_calls"] = [(c["name"], c["args"], c["id"]) for c in m.tool_calls]
    return d


def run(
    addr: str, thread: str, kind: str, mode: str, phase: str, kill_at: str, marker: str, effects: str, out: str,
    script: str = "two-tools", durability: str | None = None,
) -> None:
    """One process's part of a scenario (the module's doc)."""
    global _KILL_AT, _MARKER, _EFFECTS, _SCRIPT
    _KILL_AT, _MARKER, _EFFECTS, _SCRIPT = kill_at, marker, effects, script
    saver = HookedSaver(addr)
    graph = build(kind, saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    inp: Any = {"messages": [("user", "bill acme for A1")]} if phase == "start" else None
    opts: dict[str, Any] = {"durability": durability} if durability else {}
    if mode == "sync":
        graph.invoke(inp, config, **opts)
        state = graph.get_state(config)
    else:

        async def go() -> Any:
            await graph.ainvoke(inp, config, **opts)
            return await graph.aget_state(config)

        state = asyncio.run(go())
    rec = {"messages": [plain(m) for m in state.values["messages"]], "next": list(state.next)}
    with open(out, "w") as f:
        json.dump(rec, f)


__all__ = ["POINTS", "build", "run"]

if __name__ == "__main__":
    args = sys.argv[1:]
    args[5] = "" if args[5] == "-" else args[5]
    run(*args)  # type: ignore[arg-type]
