"""The agent test_langgraph_duplicate.py runs, one process per part: a
StateGraph (agent, then a DurableToolNode) on a SavepointSaver, invoked
with ``durability="async"``, whose scripted chat model gives every tool call
a new id (as a real model asked again does). send_invoice is side-effecting:
it appends a line to a file.

``python duplicate_agent.py ADDR THREAD PHASE KILL EFFECTS OUT MODE SCRIPT``

- PHASE "start" gives the thread its input; "resume" invokes it with None.
- KILL "kill": the graph checkpoint that holds the model's message never
  reaches the daemon (its put, running in the background as async
  durability runs it, blocks), and once send_invoice has run and its
  outcome is recorded the process writes EFFECTS + ".marker" and waits for
  the parent's SIGKILL: the model's message is lost, its tool call ran.
- MODE "sync" (invoke) or "async" (ainvoke).
- SCRIPT "once": the model asks for the invoice, then answers with the
  tool results; "twice": it asks for the same invoice twice, one turn after
  the other, then answers.

It writes the thread's messages at the end as JSON to OUT.
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
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest

from savepoint.langgraph import DurableToolNode, SavepointSaver

KILL = False
EFFECTS = ""
SCRIPT = "once"


class ReissuingModel(BaseChatModel):
    """Asks for send_invoice (once, or twice in two turns) under a new id on
    every call, then says what the tool results were."""

    @property
    def _llm_type(self) -> str:
        return "reissuing"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ReissuingModel:  # type: ignore[override]
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if len(answers) < (2 if SCRIPT == "twice" else 1):
            call = {"name": "send_invoice", "args": {"customer": "acme", "amount": 42}, "id": "call_" + uuid.uuid4().hex[:12], "type": "tool_call"}
            msg = AIMessage(content="", tool_calls=[call])
        else:
            msg = AIMessage(content="done: " + " | ".join(f"[{m.status}] {m.content}" for m in answers))
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> ChatResult:
        return self._reply(messages)


def _send(customer: str, amount: int) -> str:
    with open(EFFECTS, "a") as f:
        f.write(f"invoice {customer} {amount}\n")
        f.flush()
        os.fsync(f.fileno())
    return f"invoice sent to {customer} for {amount}"


def _stop() -> None:
    """Give the puts before the blocked one time to land, say so, and wait
    for the SIGKILL."""
    time.sleep(0.5)
    with open(EFFECTS + ".marker", "w") as f:
        f.write("ran")
    while True:
        time.sleep(60)


def _wrap(req: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
    out = execute(req)
    if KILL:
        _stop()
    return out


async def _awrap(req: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]) -> Any:
    out = await execute(req)
    if KILL:
        await asyncio.to_thread(_stop)
    return out


def _holds_call(checkpoint: Any) -> bool:
    msgs = (checkpoint.get("channel_values") or {}).get("messages") or []
    return bool(msgs) and isinstance(msgs[-1], AIMessage) and bool(msgs[-1].tool_calls)


def _writes_call(writes: Sequence[tuple[str, Any]]) -> bool:
    for _, v in writes:
        for m in v if isinstance(v, list) else [v]:
            if isinstance(m, AIMessage) and m.tool_calls:
                return True
    return False


class LosingSaver(SavepointSaver):
    """With KILL, never stores the model's tool call: neither the agent
    task's writes that hold it nor the checkpoint whose last message it is
    (each put blocks, as a put still in flight when the process dies)."""

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        if KILL and _writes_call(writes):
            while True:
                time.sleep(60)
        super().put_writes(config, writes, task_id, task_path)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        if KILL and _writes_call(writes):
            while True:
                await asyncio.sleep(60)
        await super().aput_writes(config, writes, task_id, task_path)

    def put(self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        if KILL and _holds_call(checkpoint):
            while True:
                time.sleep(60)
        return super().put(config, checkpoint, metadata, new_versions)

    async def aput(self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        if KILL and _holds_call(checkpoint):
            while True:
                await asyncio.sleep(60)
        return await super().aput(config, checkpoint, metadata, new_versions)


def build(saver: SavepointSaver) -> Any:
    tool = StructuredTool.from_function(func=_send, name="send_invoice", description="Send an invoice.", metadata={"savepoint_effect": "side_effect"})
    node = DurableToolNode([tool], wrap_tool_call=_wrap, awrap_tool_call=_awrap)
    model = ReissuingModel()

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


def main(addr: str, thread: str, phase: str, kill: str, effects: str, out: str, mode: str, script: str) -> None:
    global KILL, EFFECTS, SCRIPT
    KILL, EFFECTS, SCRIPT = kill == "kill", effects, script
    saver = LosingSaver(addr)
    graph = build(saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    inp: Any = {"messages": [("user", "bill acme 42")]} if phase == "start" else None
    if mode == "sync":
        graph.invoke(inp, config, durability="async")
        state = graph.get_state(config)
    else:

        async def go() -> Any:
            await graph.ainvoke(inp, config, durability="async")
            return await graph.aget_state(config)

        state = asyncio.run(go())
    msgs = [{"type": m.type, "content": m.content, **({"status": m.status, "tool_call_id": m.tool_call_id} if isinstance(m, ToolMessage) else {})}
            for m in state.values["messages"]]
    with open(out, "w") as f:
        json.dump(msgs, f)


if __name__ == "__main__":
    main(*sys.argv[1:9])
