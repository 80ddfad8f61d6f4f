"""DurableToolNode and @durable against a real savepointd: a recorded
result is reused without running the tool, a side-effecting call begun and
never recorded is answered in doubt, a read-only or idempotent one runs
again under the same idempotency key, a tool that raises is recorded as a
failed attempt (so a RetryPolicy runs it again), a reused tool_call_id with
other arguments is an error, the effect class comes from the metadata (MCP
annotations only when trusted), and DurableToolNode answers as ToolNode
does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Daemon
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, RetryPolicy
from typing_extensions import TypedDict

from savepoint import Verified
from savepoint._retry import retry_safe
from savepoint.errors import EffectInputMismatchError
from savepoint.langgraph import (
    IDEMPOTENCY_KEY,
    DurableToolError,
    DurableToolNode,
    EffectInDoubtError,
    SavepointSaver,
    durable,
    idempotency_key,
    in_doubt_text,
)
from savepoint.v1 import graph_pb2 as gpb
from savepoint.v1 import savepoint_pb2 as pb


@pytest.fixture
def saver(daemon: Daemon) -> Iterator[SavepointSaver]:
    with SavepointSaver(daemon.addr) as s:
        yield s


def new_thread() -> RunnableConfig:
    return {"configurable": {"thread_id": "durable-" + uuid.uuid4().hex}}


def thread_of(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


def ai(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls])


def tool_graph(saver: SavepointSaver, node: Any, retry: RetryPolicy | None = None) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("tools", node, retry_policy=retry)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile(checkpointer=saver)


def effects(saver: SavepointSaver, config: RunnableConfig) -> dict[str, gpb.ThreadEffect]:
    resp = saver._conn.unary("ListThreadEffects", gpb.ListThreadEffectsRequest(thread_id=thread_of(config)))
    return {e.tool_use_id: e for e in resp.effects}


def begin(saver: SavepointSaver, config: RunnableConfig, call_id: str, name: str, args: str, cls: int) -> gpb.BeginThreadEffectResponse:
    """A begin as a process that died mid-call made it."""
    req = gpb.BeginThreadEffectRequest(
        thread_id=thread_of(config), tool_use_id=call_id, name=name, input_json=args, effect_class=cls,  # type: ignore[arg-type]
        request_id=str(uuid.uuid4()),
    )
    return saver._conn.unary("BeginThreadEffect", req)  # type: ignore[no-any-return]


class Flaky(Exception):
    pass


def counting_tools(runs: Counter[str], seen: list[tuple[str, str, str]]) -> list[BaseTool]:
    @tool
    def send(to: str, config: RunnableConfig) -> str:
        """Send a message."""
        runs["send"] += 1
        seen.append(("send", config["configurable"].get(IDEMPOTENCY_KEY, ""), idempotency_key()))
        return f"sent to {to}"

    @tool
    def look(q: str, config: RunnableConfig) -> str:
        """Look something up."""
        runs["look"] += 1
        seen.append(("look", config["configurable"].get(IDEMPOTENCY_KEY, ""), idempotency_key()))
        return f"found {q}"

    @tool
    async def charge(amount: int, config: RunnableConfig) -> str:
        """Charge."""
        runs["charge"] += 1
        seen.append(("charge", config["configurable"].get(IDEMPOTENCY_KEY, ""), idempotency_key()))
        return f"charged {amount}"

    return [meta(send, "side_effect"), meta(look, "read_only"), meta(charge, "idempotent")]


def meta(t: BaseTool, effect: str | None = None, **md: Any) -> BaseTool:
    t.metadata = {**md, **({"savepoint_effect": effect} if effect else {})}
    return t


# -- DurableToolNode ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_recorded_result_is_reused_without_running(saver: SavepointSaver, mode: str) -> None:
    runs: Counter[str] = Counter()
    seen: list[tuple[str, str, str]] = []
    graph = tool_graph(saver, DurableToolNode(counting_tools(runs, seen)))
    config = new_thread()
    # charge is async only: ToolNode runs it under ainvoke alone.
    other, args, result, cls = (
        ("look", {"q": "x"}, "found x", pb.EFFECT_CLASS_READ_ONLY) if mode == "sync" else ("charge", {"amount": 5}, "charged 5", pb.EFFECT_CLASS_IDEMPOTENT)
    )
    msg = ai(("send", {"to": "ann"}, "c1"), (other, args, "c2"))

    def invoke() -> list[Any]:
        if mode == "sync":
            return graph.invoke({"messages": [msg]}, config)["messages"]  # type: ignore[no-any-return]
        return asyncio.run(graph.ainvoke({"messages": [msg]}, config))["messages"]  # type: ignore[no-any-return]

    first = invoke()[-2:]
    again = invoke()[-2:]
    assert runs == {"send": 1, other: 1}
    assert [(m.content, m.tool_call_id, m.name, m.status) for m in again] == [
        (m.content, m.tool_call_id, m.name, m.status) for m in first
    ] == [("sent to ann", "c1", "send", "success"), (result, "c2", other, "success")]
    led = effects(saver, config)
    assert {k: (e.state, e.attempts, e.effect_class) for k, e in led.items()} == {
        "c1": (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 1, pb.EFFECT_CLASS_SIDE_EFFECT),
        "c2": (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 1, cls),
    }
    assert led["c1"].checkpoint_ns == "" and led["c1"].checkpoint_id
    # Each run saw its call's key in its config and from idempotency_key().
    assert sorted(seen) == sorted((n, led[c].idempotency_key, led[c].idempotency_key) for n, c in [("send", "c1"), (other, "c2")])


def test_content_blocks_are_reused_intact(saver: SavepointSaver) -> None:
    """A tool that answers with content blocks (text and an image): the
    recorded ToolMessage is reused with the same blocks, not run again."""
    runs: Counter[str] = Counter()
    blocks = [
        {"type": "text", "text": "sales by month"},
        {"type": "image", "source_type": "base64", "mime_type": "image/png", "data": "iVBORw0KGgo="},
    ]

    @tool
    def chart(q: str) -> list[dict[str, Any]]:
        """Chart."""
        runs["chart"] += 1
        return blocks

    graph = tool_graph(saver, DurableToolNode([meta(chart, "side_effect")]))
    config = new_thread()
    msg = ai(("chart", {"q": "sales"}, "c1"))
    first = graph.invoke({"messages": [msg]}, config)["messages"][-1]
    again = graph.invoke({"messages": [msg]}, config)["messages"][-1]
    assert runs == {"chart": 1}
    assert first.content == again.content == blocks


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_begun_side_effect_is_answered_in_doubt(saver: SavepointSaver, mode: str) -> None:
    runs: Counter[str] = Counter()
    graph = tool_graph(saver, DurableToolNode(counting_tools(runs, [])))
    config = new_thread()
    begin(saver, config, "c1", "send", '{"to": "ann"}', pb.EFFECT_CLASS_SIDE_EFFECT)
    inp = {"messages": [ai(("send", {"to": "ann"}, "c1"))]}
    out = graph.invoke(inp, config) if mode == "sync" else asyncio.run(graph.ainvoke(inp, config))
    got = out["messages"][-1]
    assert isinstance(got, ToolMessage)
    assert (got.content, got.status, got.name, got.tool_call_id) == (in_doubt_text("send", "c1"), "error", "send", "c1")
    assert got.content == (
        "The outcome of this send call (tool_use_id c1) is unknown: it was started, but the agent stopped before its "
        "outcome was recorded. It was not run again, to avoid repeating a side effect. Check whether it took effect "
        "before retrying it."
    )
    assert runs == {}
    e = effects(saver, config)["c1"]
    assert (e.state, e.attempts) == (gpb.THREAD_EFFECT_STATE_BEGUN, 1)


@pytest.mark.parametrize(("name", "cls", "args"), [("look", pb.EFFECT_CLASS_READ_ONLY, {"q": "x"}), ("charge", pb.EFFECT_CLASS_IDEMPOTENT, {"amount": 3})])
def test_begun_rerunnable_call_runs_again_with_the_same_key(saver: SavepointSaver, name: str, cls: int, args: dict[str, Any]) -> None:
    runs: Counter[str] = Counter()
    seen: list[tuple[str, str, str]] = []
    graph = tool_graph(saver, DurableToolNode(counting_tools(runs, seen)))
    config = new_thread()
    first = begin(saver, config, "c1", name, str(args).replace("'", '"'), cls)
    key = first.effect.idempotency_key
    assert key
    out = asyncio.run(graph.ainvoke({"messages": [ai((name, args, "c1"))]}, config))
    assert out["messages"][-1].status == "success"
    assert runs == {name: 1}
    assert seen == [(name, key, key)]
    e = effects(saver, config)["c1"]
    assert (e.state, e.attempts, e.idempotency_key) == (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 2, key)


def test_raise_then_succeed_under_retry_policy(saver: SavepointSaver) -> None:
    config = new_thread()
    observed: list[tuple[int, int]] = []

    @tool
    def flaky(x: int) -> str:
        """Fails on its first run."""
        e = effects(saver, config)["c1"]
        observed.append((e.attempts, e.state))
        if len(observed) == 1:
            raise Flaky("first run fails")
        return f"ok {x}"

    retry = RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False, retry_on=Flaky)
    graph = tool_graph(saver, DurableToolNode([flaky]), retry=retry)
    out = graph.invoke({"messages": [ai(("flaky", {"x": 1}, "c1"))]}, config)
    assert out["messages"][-1].content == "ok 1"
    # The second run is attempt 2: the first was recorded as failed (a
    # side-effecting call begun and never recorded would be in doubt).
    assert observed == [(1, gpb.THREAD_EFFECT_STATE_BEGUN), (2, gpb.THREAD_EFFECT_STATE_BEGUN)]
    e = effects(saver, config)["c1"]
    assert (e.state, e.attempts) == (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 2)


def test_handled_error_is_a_failed_attempt(saver: SavepointSaver) -> None:
    runs: Counter[str] = Counter()

    @tool
    def flaky(x: int) -> str:
        """Fails on its first run."""
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            raise Flaky("first run fails")
        return f"ok {x}"

    graph = tool_graph(saver, DurableToolNode([flaky], handle_tool_errors=True))
    config = new_thread()
    inp = {"messages": [ai(("flaky", {"x": 1}, "c1"))]}
    first = graph.invoke(inp, config)["messages"][-1]
    assert (first.status, first.content) == ("error", "Error: Flaky('first run fails')\n Please fix your mistakes.")
    e = effects(saver, config)["c1"]
    assert (e.state, e.attempts) == (gpb.THREAD_EFFECT_STATE_FAILED, 1)
    assert saver.serde.loads_typed((e.output.type, e.output.data)) == {"error": {"name": "Flaky", "message": "first run fails"}}
    assert graph.invoke(inp, config)["messages"][-1].content == "ok 1"
    e = effects(saver, config)["c1"]
    assert (e.state, e.attempts) == (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 2)


def test_reused_call_id_with_other_arguments_is_an_error(saver: SavepointSaver) -> None:
    runs: Counter[str] = Counter()
    graph = tool_graph(saver, DurableToolNode(counting_tools(runs, []), handle_tool_errors=True))
    config = new_thread()
    graph.invoke({"messages": [ai(("send", {"to": "ann"}, "call_0"))]}, config)
    with pytest.raises(EffectInputMismatchError, match="reused a tool use id"):
        graph.invoke({"messages": [ai(("send", {"to": "bob"}, "call_0"))]}, config)
    with pytest.raises(EffectInputMismatchError):
        asyncio.run(graph.ainvoke({"messages": [ai(("look", {"q": "ann"}, "call_0"))]}, config))
    assert runs == {"send": 1}


def test_no_thread_is_an_error(daemon: Daemon) -> None:
    g = StateGraph(MessagesState)
    g.add_node("tools", DurableToolNode(counting_tools(Counter(), []), address=daemon.addr))
    g.add_edge(START, "tools")
    with pytest.raises(DurableToolError, match="thread_id"):
        g.compile().invoke({"messages": [ai(("send", {"to": "ann"}, "c1"))]})


# -- effect classes -------------------------------------------------------------------


def mk(name: str, metadata: dict[str, Any] | None) -> BaseTool:
    def f(x: int) -> str:
        """A tool."""
        return str(x)

    t = tool(name)(f)
    t.metadata = metadata
    return t  # type: ignore[no-any-return]


MCP_READ = {"title": None, "readOnlyHint": True, "destructiveHint": None, "idempotentHint": None, "openWorldHint": None}
MCP_IDEM = {"title": None, "readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": None}


def test_effect_classes() -> None:
    tools = [
        mk("plain", None),
        mk("ro", {"savepoint_effect": "read_only"}),
        mk("idem", {"savepoint_effect": "idempotent"}),
        mk("se", {"savepoint_effect": "side_effect"}),
        mk("mcp_read", MCP_READ),
        mk("mcp_idem", MCP_IDEM),
        mk("mcp_snake", {"read_only_hint": True}),
        mk("mcp_but_marked", {**MCP_READ, "savepoint_effect": "side_effect"}),
    ]
    node = DurableToolNode(tools)
    assert {t.name: node.effect_of(t) for t in tools} == {
        "plain": "side_effect", "ro": "read_only", "idem": "idempotent", "se": "side_effect",
        # Hints are untrusted unless the user opts in.
        "mcp_read": "side_effect", "mcp_idem": "side_effect", "mcp_snake": "side_effect", "mcp_but_marked": "side_effect",
    }
    trusting = DurableToolNode(tools, trust_annotations=True)
    assert {t.name: trusting.effect_of(t) for t in tools if t.name.startswith("mcp")} == {
        "mcp_read": "read_only", "mcp_idem": "idempotent", "mcp_snake": "read_only", "mcp_but_marked": "side_effect",
    }
    some = DurableToolNode(tools, trust_annotations={"mcp_idem"}, effects={"plain": "read_only"})
    assert [some.effect_of(t) for t in tools if t.name in ("plain", "mcp_read", "mcp_idem")] == ["read_only", "side_effect", "idempotent"]
    with pytest.raises(ValueError, match="savepoint_effect"):
        DurableToolNode([mk("bad", {"savepoint_effect": "harmless"})])
    with pytest.raises(ValueError, match="not one of its tools"):
        DurableToolNode(tools, effects={"nope": "read_only"})
    # A @durable tool in a DurableToolNode keeps its class and runs once.
    d = durable(mk("wrapped", None), effect="idempotent")
    node = DurableToolNode([d])
    assert node.effect_of(node.tools_by_name["wrapped"]) == "idempotent"
    assert node.tools_by_name["wrapped"] is d.inner


def test_effect_class_is_sent(saver: SavepointSaver) -> None:
    graph = tool_graph(saver, DurableToolNode([mk("mcp_read", MCP_READ), mk("mcp_idem", MCP_IDEM)], trust_annotations=True))
    config = new_thread()
    graph.invoke({"messages": [ai(("mcp_read", {"x": 1}, "a"), ("mcp_idem", {"x": 2}, "b"))]}, config)
    led = effects(saver, config)
    assert (led["a"].effect_class, led["b"].effect_class) == (pb.EFFECT_CLASS_READ_ONLY, pb.EFFECT_CLASS_IDEMPOTENT)
    assert (led["a"].input_json, led["b"].name) == ('{"x":1}', "mcp_idem")


# -- a drop-in for ToolNode -----------------------------------------------------------


@tool
def ok_tool(x: int) -> str:
    """Fine."""
    return f"x={x}"


@tool
def bad_tool(x: int) -> str:
    """Raises."""
    raise ValueError(f"bad {x}")


@tool
def cmd_tool(x: int, tool_call_id: Any = None) -> Command[Any]:
    """Returns a Command."""
    return Command(update={"messages": [ToolMessage(content=f"cmd {x}", tool_call_id="c1", name="cmd_tool")]})


def value_handler(e: ValueError) -> str:
    return f"handled {e}"


CASES = [
    ("ok", "ok_tool", {"x": 1}, dict()),
    ("raises", "bad_tool", {"x": 1}, dict()),
    ("handled-true", "bad_tool", {"x": 1}, dict(handle_tool_errors=True)),
    ("handled-str", "bad_tool", {"x": 1}, dict(handle_tool_errors="oops")),
    ("unhandled-type", "bad_tool", {"x": 1}, dict(handle_tool_errors=(KeyError,))),
    ("handled-type", "bad_tool", {"x": 1}, dict(handle_tool_errors=ValueError)),
    ("handler", "bad_tool", {"x": 1}, dict(handle_tool_errors=value_handler)),
    ("bad-args", "ok_tool", {"x": "not an int"}, dict()),
    ("no-such-tool", "nope", {"x": 1}, dict()),
    ("command", "cmd_tool", {"x": 1}, dict()),
    ("off", "bad_tool", {"x": 1}, dict(handle_tool_errors=False)),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("case", "name", "args", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_answers_as_toolnode_does(saver: SavepointSaver, mode: str, case: str, name: str, args: dict[str, Any], kwargs: dict[str, Any]) -> None:
    def outcome(node: Any) -> Any:
        graph = tool_graph(saver, node)
        inp = {"messages": [ai((name, args, "c1"))]}
        try:
            out = graph.invoke(inp, new_thread()) if mode == "sync" else asyncio.run(graph.ainvoke(inp, new_thread()))
        except Exception as e:
            return ("raised", type(e), str(e))
        return [(type(m).__name__, m.content, getattr(m, "status", None), getattr(m, "name", None)) for m in out["messages"][1:]]

    tools = [ok_tool, bad_tool, cmd_tool]
    want = outcome(ToolNode(tools, **kwargs))
    assert outcome(DurableToolNode(tools, **kwargs)) == want
    if case in ("raises", "unhandled-type", "off"):
        assert want[:2] == ("raised", ValueError)
    else:
        assert want[0][0] == "ToolMessage"


def test_user_wrappers_wrap_the_ledger(saver: SavepointSaver) -> None:
    """A user's wrap_tool_call sees the ledger's answers: a recorded result
    comes back through execute without the tool running."""
    runs: Counter[str] = Counter()
    seen: list[str] = []

    def wrap(req: Any, execute: Any) -> Any:
        out = execute(req)
        seen.append(str(out.content))
        return out

    async def awrap(req: Any, execute: Any) -> Any:
        out = await execute(req)
        seen.append("async " + str(out.content))
        return out

    graph = tool_graph(saver, DurableToolNode(counting_tools(runs, []), wrap_tool_call=wrap, awrap_tool_call=awrap))
    config = new_thread()
    inp = {"messages": [ai(("send", {"to": "ann"}, "c1"))]}
    graph.invoke(inp, config)
    asyncio.run(graph.ainvoke(inp, config))
    assert seen == ["sent to ann", "async sent to ann"]
    assert runs == {"send": 1}


# -- @durable ---------------------------------------------------------------------------


class State(TypedDict, total=False):
    n: int
    out: list[str]


class Crash(BaseException):
    """Stands for the process dying: nothing catches it, nothing is recorded."""


def test_durable_function_in_a_node(saver: SavepointSaver) -> None:
    sent: list[str] = []
    fail_once = [True]

    @durable
    def send(to: str) -> str:
        sent.append(to)
        return f"sent {to}"

    @durable(effect="read_only")
    def look(q: str) -> dict[str, Any]:
        return {"q": q, "n": len(sent)}

    def node(state: State) -> State:
        out = [send("ann"), send("bob"), str(look("x")), send("ann")]
        if fail_once[0]:
            fail_once[0] = False
            raise Flaky("after the sends")
        return {"out": out}

    g = StateGraph(State)
    g.add_node("work", node, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False, retry_on=Flaky))
    g.add_edge(START, "work")
    g.add_edge("work", END)
    graph = g.compile(checkpointer=saver)
    config = new_thread()
    out = graph.invoke({"n": 0}, config)
    # The retry got each call's recorded result; nothing was sent twice.
    assert out["out"] == ["sent ann", "sent bob", "{'q': 'x', 'n': 2}", "sent ann"]
    assert sent == ["ann", "bob", "ann"]
    led = effects(saver, config)
    task_ids = {k.split("@", 1)[1] for k in led}
    assert len(task_ids) == 1
    assert sorted(k.split("@")[0] for k in led) == [
        "test_durable_function_in_a_node.<locals>.look#0",
        "test_durable_function_in_a_node.<locals>.send#0",
        "test_durable_function_in_a_node.<locals>.send#1",
        "test_durable_function_in_a_node.<locals>.send#2",
    ]
    assert all(e.state == gpb.THREAD_EFFECT_STATE_SUCCEEDED and e.attempts == 1 for e in led.values())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_durable_function_in_doubt_after_a_crash(saver: SavepointSaver, mode: str) -> None:
    sent: list[str] = []
    crash = [True]

    @durable(name="send")
    def send(to: str) -> str:
        sent.append(to)
        if crash[0]:
            crash[0] = False
            raise Crash()
        return f"sent {to}"

    @durable(name="asend")
    async def asend(to: str) -> str:
        sent.append(to)
        if crash[0]:
            crash[0] = False
            raise Crash()
        return f"sent {to}"

    def node(state: State) -> State:
        try:
            return {"out": [send("ann")]}
        except EffectInDoubtError as e:
            return {"out": [str(e.message)]}

    async def anode(state: State) -> State:
        try:
            return {"out": [await asend("ann")]}
        except EffectInDoubtError as e:
            return {"out": [str(e.message)]}

    g = StateGraph(State)
    g.add_node("work", node if mode == "sync" else anode)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    graph = g.compile(checkpointer=saver)
    config = new_thread()
    with pytest.raises(Crash):
        graph.invoke({"n": 0}, config) if mode == "sync" else asyncio.run(graph.ainvoke({"n": 0}, config))
    out = graph.invoke(None, config) if mode == "sync" else asyncio.run(graph.ainvoke(None, config))
    (key,) = effects(saver, config)
    name = "send" if mode == "sync" else "asend"
    assert out["out"] == [in_doubt_text(name, key)]
    assert key.startswith(name + "#0@")
    assert sent == ["ann"]


def test_durable_tool_with_a_tool_call(saver: SavepointSaver) -> None:
    runs: Counter[str] = Counter()
    send = durable(counting_tools(runs, [])[0])
    assert send.name == "send" and send.effect == "side_effect"
    call = ai(("send", {"to": "ann"}, "tc1")).tool_calls[0]

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [send.invoke(call)]}

    g = StateGraph(MessagesState)
    g.add_node("work", node)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    graph = g.compile(checkpointer=saver)
    config = new_thread()
    first = graph.invoke({"messages": [("user", "hi")]}, config)["messages"][-1]
    second = graph.invoke({"messages": [("user", "again")]}, config)["messages"][-1]
    assert (first.content, second.content, second.tool_call_id) == ("sent to ann", "sent to ann", "tc1")
    assert runs == {"send": 1}
    # In doubt: an error ToolMessage for a ToolCall.
    config2 = new_thread()
    begin(saver, config2, "tc1", "send", '{"to":"ann"}', pb.EFFECT_CLASS_SIDE_EFFECT)
    got = graph.invoke({"messages": [("user", "hi")]}, config2)["messages"][-1]
    assert (got.content, got.status) == (in_doubt_text("send", "tc1"), "error")
    assert runs == {"send": 1}


def test_durable_in_functional_api(saver: SavepointSaver) -> None:
    sent: list[int] = []
    failed = [False]

    @task(retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False, retry_on=Flaky))
    @durable(effect="idempotent")
    async def charge(amount: int) -> str:
        sent.append(amount)
        key = idempotency_key()
        if not failed[0]:
            failed[0] = True
            raise Flaky("first run fails")
        return f"charged {amount} under {key}"

    @durable
    def explicit(x: int) -> int:
        return x * 2

    @entrypoint(checkpointer=saver)
    async def flow(amounts: list[int]) -> list[str]:
        got = [await charge(a) for a in amounts]
        got.append(str(explicit.with_call_id("my-call")(21)))
        return got

    config = new_thread()
    out = asyncio.run(flow.ainvoke([5, 7], config))
    led = effects(saver, config)
    assert out[-1] == "42" and led["my-call"].state == gpb.THREAD_EFFECT_STATE_SUCCEEDED
    keys = {k: e for k, e in led.items() if k.startswith("test_durable_in_functional_api.<locals>.charge#0@")}
    assert len(keys) == 2
    # The first call failed once and ran again under the same key.
    assert sent == [5, 5, 7]
    first = next(e for e in keys.values() if e.attempts == 2)
    assert out[0] == f"charged 5 under {first.idempotency_key}"
    # Outside a node, a call needs an id of its own (and a thread).
    with pytest.raises(DurableToolError, match="outside a LangGraph node"):
        explicit(1)
    with pytest.raises(DurableToolError, match="thread_id"):
        explicit.with_call_id("x")(1)


# -- the client's plumbing ------------------------------------------------------------


def test_ledger_calls_are_retried_only_with_a_request_id() -> None:
    assert retry_safe("BeginThreadEffect", gpb.BeginThreadEffectRequest(request_id="id"))
    assert not retry_safe("BeginThreadEffect", gpb.BeginThreadEffectRequest())
    assert retry_safe("RecordThreadEffect", gpb.RecordThreadEffectRequest(request_id="id"))
    assert not retry_safe("RecordThreadEffect", gpb.RecordThreadEffectRequest())
    assert retry_safe("ListThreadEffects", gpb.ListThreadEffectsRequest())


def test_import_stays_lazy() -> None:
    code = (
        "import sys, savepoint.langgraph as m\n"
        "print(sorted(k for k in sys.modules if k.startswith(('langgraph.prebuilt', 'savepoint.langgraph._'))))\n"
        "m.DurableToolNode, m.durable\n"
        "print('langgraph.prebuilt' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout.split("\n")
    loaded = set(eval(out[0]))
    assert not loaded & {"langgraph.prebuilt", "savepoint.langgraph._toolnode", "savepoint.langgraph._durable", "savepoint.langgraph._ledger"}
    assert out[1] == "True"


def test_durable_tool_in_a_plain_toolnode(saver: SavepointSaver) -> None:
    """durable(tool) in a ToolNode of someone else's (create_agent's): the
    call is keyed by its tool_call_id and reused."""
    runs: Counter[str] = Counter()
    graph = tool_graph(saver, ToolNode([durable(t) for t in counting_tools(runs, [])], handle_tool_errors=True))
    config = new_thread()
    inp = {"messages": [ai(("send", {"to": "ann"}, "c1"))]}
    assert graph.invoke(inp, config)["messages"][-1].content == "sent to ann"
    assert asyncio.run(graph.ainvoke(inp, config))["messages"][-1].content == "sent to ann"
    assert runs == {"send": 1}
    assert effects(saver, config)["c1"].input_json == '{"to":"ann"}'



# -- verify hooks -----------------------------------------------------------------------

VERIFY_CASES = [
    ("done", Verified.done("sent to ann, message 7"), "sent to ann, message 7", "success", 0, gpb.THREAD_EFFECT_STATE_SUCCEEDED, 1),
    ("not done", Verified.not_done(), "sent to ann", "success", 1, gpb.THREAD_EFFECT_STATE_SUCCEEDED, 2),
    ("unknown", Verified.unknown(), in_doubt_text("send", "c1"), "error", 0, gpb.THREAD_EFFECT_STATE_BEGUN, 1),
    ("raises", RuntimeError("mail server down"), in_doubt_text("send", "c1"), "error", 0, gpb.THREAD_EFFECT_STATE_BEGUN, 1),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("case", "verified", "content", "status", "runs_want", "state", "attempts"), VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verify_hook_settles_a_call_in_doubt(saver: SavepointSaver, mode: str, case: str, verified: object, content: str, status: str,
                                             runs_want: int, state: int, attempts: int) -> None:
    # Killed after BeginThreadEffect of a side-effecting call; the node runs
    # again with a verify hook for the tool.
    runs: Counter[str] = Counter()
    seen: list[tuple[str, str, str]] = []
    asked: list[tuple[str, Any]] = []

    def verify(key: str, args: Any) -> Verified:
        asked.append((key, args))
        if isinstance(verified, Exception):
            raise verified
        assert isinstance(verified, Verified)
        return verified

    graph = tool_graph(saver, DurableToolNode(counting_tools(runs, seen), verify={"send": verify}))
    config = new_thread()
    key = begin(saver, config, "c1", "send", '{"to": "ann"}', pb.EFFECT_CLASS_SIDE_EFFECT).effect.idempotency_key
    inp = {"messages": [ai(("send", {"to": "ann"}, "c1"))]}
    out = graph.invoke(inp, config) if mode == "sync" else asyncio.run(graph.ainvoke(inp, config))
    got = out["messages"][-1]
    assert (got.content, got.status, got.tool_call_id) == (content, status, "c1")
    assert asked == [(key, {"to": "ann"})]
    assert runs == ({"send": runs_want} if runs_want else {})
    assert [s[1] for s in seen] == [key] * runs_want  # not done: the same key
    e = effects(saver, config)["c1"]
    assert (e.state, e.attempts) == (state, attempts)
    kinds = {"done": pb.RESOLVER_KIND_VERIFY, "not done": pb.RESOLVER_KIND_VERIFY}
    assert e.resolution.resolver_kind == kinds.get(case, pb.RESOLVER_KIND_UNSPECIFIED)
    if case == "done":  # recorded: a later run of the node reuses it, asking nothing
        again = graph.invoke({"messages": [ai(("send", {"to": "ann"}, "c1"))]}, new_config_same(config))
        assert again["messages"][-1].content == content and len(asked) == 1 and runs == {}


def new_config_same(config: RunnableConfig) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_of(config)}}
