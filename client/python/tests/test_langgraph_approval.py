"""DurableToolNode(approval_required=...): a call of a tool that requires
approval stops the graph with LangGraph's interrupt(); resuming it with the
person's decision records it with ApproveThreadEffect, bound to the call's
input; an approved call runs once whatever replays follow, a denied one is
answered with the note. Against a real savepointd."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Daemon
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from savepoint.langgraph import DurableToolNode, SavepointSaver
from savepoint.v1 import graph_pb2 as gpb
from savepoint.v1 import savepoint_pb2 as pb


@pytest.fixture
def saver(daemon: Daemon) -> Iterator[SavepointSaver]:
    with SavepointSaver(daemon.addr) as s:
        yield s


PAID: list[int] = []


@tool
def send_payment(cents: int) -> str:
    """Send a payment."""
    PAID.append(cents)
    return f"paid {cents}"


def graph(saver: SavepointSaver) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("tools", DurableToolNode([send_payment], approval_required=["send_payment"]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile(checkpointer=saver)


def start(saver: SavepointSaver) -> tuple[Any, RunnableConfig, dict[str, Any]]:
    PAID.clear()
    config: RunnableConfig = {"configurable": {"thread_id": "appr-" + uuid.uuid4().hex}}
    g = graph(saver)
    call = {"name": "send_payment", "args": {"cents": 500}, "id": "call_pay", "type": "tool_call"}
    out = g.invoke({"messages": [AIMessage(content="", tool_calls=[call])]}, config)
    (intr,) = out["__interrupt__"]
    return g, config, intr.value["savepoint_approval"]


def ledger(saver: SavepointSaver, config: RunnableConfig) -> gpb.ThreadEffect:
    resp = saver._conn.unary("ListThreadEffects", gpb.ListThreadEffectsRequest(thread_id=config["configurable"]["thread_id"]))
    (e,) = resp.effects
    return e


def test_interrupt_then_approve_runs_once(saver: SavepointSaver) -> None:
    g, config, asked = start(saver)
    assert asked["tool_use_id"] == "call_pay" and asked["args"] == {"cents": 500} and len(bytes.fromhex(asked["input_digest"])) == 32
    assert PAID == [] and ledger(saver, config).state == gpb.THREAD_EFFECT_STATE_NOT_BEGUN
    out = g.invoke(Command(resume={"approved": True, "by": "alice"}), config)
    msg = out["messages"][-1]
    assert isinstance(msg, ToolMessage) and msg.content == "paid 500" and PAID == [500]
    e = ledger(saver, config)
    assert e.approval.status == pb.APPROVAL_STATUS_APPROVED and e.approval.spent and e.approval.decided_by == "alice"
    # A replay of the tools step from the checkpoint before it reuses the
    # recorded result: the approval is not spent again, the tool not rerun.
    history = list(g.get_state_history(config))
    before = next(h for h in history if h.next == ("tools",))
    again = g.invoke(None, before.config)
    assert again["messages"][-1].content == "paid 500" and PAID == [500]


def test_interrupt_then_deny_answers_the_note(saver: SavepointSaver) -> None:
    g, config, _ = start(saver)
    out = g.invoke(Command(resume={"approved": False, "note": "over the limit", "by": "alice"}), config)
    msg = out["messages"][-1]
    assert isinstance(msg, ToolMessage) and msg.status == "error" and "over the limit" in str(msg.content) and PAID == []
    assert ledger(saver, config).approval.status == pb.APPROVAL_STATUS_DENIED


def test_decided_elsewhere_then_resumed(saver: SavepointSaver) -> None:
    g, config, asked = start(saver)
    # Resumed before anyone decided: it asks again.
    out = g.invoke(Command(resume="any"), config)
    assert "__interrupt__" in out and PAID == []
    # A person approves with the daemon's API (as savepoint approve --thread).
    saver._conn.unary("ApproveThreadEffect", gpb.ApproveThreadEffectRequest(
        thread_id=asked["thread_id"], tool_use_id="call_pay", decision=pb.APPROVAL_STATUS_APPROVED,
        input_digest=bytes.fromhex(asked["input_digest"]), decided_by="bob"))
    out = g.invoke(Command(resume="go"), config)
    assert out["messages"][-1].content == "paid 500" and PAID == [500]
