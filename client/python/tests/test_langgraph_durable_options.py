"""@durable's verify and repeatable options against a real savepointd: a
durable function (or tool) killed after BeginThreadEffect and resumed asks
its verify hook, and done answers the call without running it (recorded,
so a later call reuses it), not done runs it once more under the same
idempotency key, and unknown or a failing hook leaves it in doubt; a
repeatable function or tool runs a call that repeats an earlier,
interrupted run's call, which the duplicate-intent guard otherwise
catches."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Daemon
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from savepoint import Verified
from savepoint.langgraph import EffectInDoubtError, SavepointSaver, durable, idempotency_key, in_doubt_text
from savepoint.langgraph._ledger import input_json
from savepoint.v1 import graph_pb2 as gpb
from savepoint.v1 import savepoint_pb2 as pb


@pytest.fixture
def saver(daemon: Daemon) -> Iterator[SavepointSaver]:
    with SavepointSaver(daemon.addr) as s:
        yield s


class State(TypedDict, total=False):
    out: list[str]


class Crash(BaseException):
    """Stands for the process dying: nothing catches it, nothing is recorded."""


def new_thread() -> RunnableConfig:
    return {"configurable": {"thread_id": "durable-opt-" + uuid.uuid4().hex}}


def effects(saver: SavepointSaver, thread: str) -> dict[str, gpb.ThreadEffect]:
    resp = saver._conn.unary("ListThreadEffects", gpb.ListThreadEffectsRequest(thread_id=thread))
    return {e.tool_use_id: e for e in resp.effects}


# -- verify ----------------------------------------------------------------------------

VERIFY_CASES = [
    # case, the hook's answer, the node's output, runs after the crash, state, attempts
    ("done", Verified.done("sent ann, message 7"), "sent ann, message 7", 0, gpb.THREAD_EFFECT_STATE_SUCCEEDED, 1),
    ("not done", Verified.not_done(), "sent ann", 1, gpb.THREAD_EFFECT_STATE_SUCCEEDED, 2),
    ("unknown", Verified.unknown(), "in doubt", 0, gpb.THREAD_EFFECT_STATE_BEGUN, 1),
    ("raises", RuntimeError("mail server down"), "in doubt", 0, gpb.THREAD_EFFECT_STATE_BEGUN, 1),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("case", "verified", "want", "runs_after", "state", "attempts"), VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verify_settles_a_durable_function_in_doubt_on_resume(daemon: Daemon, saver: SavepointSaver, mode: str, case: str, verified: object, want: str,
                                                             runs_after: int, state: int, attempts: int) -> None:
    sent: list[tuple[str, str]] = []
    asked: list[tuple[str, Any]] = []
    crash = [True]

    def hook(key: str, args: Any) -> Verified:
        asked.append((key, args))
        if isinstance(verified, Exception):
            raise verified
        assert isinstance(verified, Verified)
        return verified

    async def ahook(key: str, args: Any) -> Verified:
        return hook(key, args)

    def run(to: str) -> str:
        sent.append((to, idempotency_key()))
        if crash[0]:
            crash[0] = False
            raise Crash()
        return f"sent {to}"

    @durable(name="send", verify=hook, address=daemon.addr)
    def send(to: str) -> str:
        return run(to)

    @durable(name="send", verify=ahook, address=daemon.addr)
    async def asend(to: str) -> str:
        return run(to)

    def node(state: State) -> State:
        try:
            return {"out": [send("ann")]}
        except EffectInDoubtError:
            return {"out": ["in doubt"]}

    async def anode(state: State) -> State:
        try:
            return {"out": [await asend("ann")]}
        except EffectInDoubtError:
            return {"out": ["in doubt"]}

    g = StateGraph(State)
    g.add_node("work", node if mode == "sync" else anode)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    graph = g.compile(checkpointer=saver)
    config = new_thread()
    with pytest.raises(Crash):
        graph.invoke({"out": []}, config) if mode == "sync" else asyncio.run(graph.ainvoke({"out": []}, config))
    assert asked == []  # the first run began the call: nothing was in doubt
    # Resumed: the call is in doubt, and the hook is asked about it.
    out = graph.invoke(None, config) if mode == "sync" else asyncio.run(graph.ainvoke(None, config))
    (call_id, e), = effects(saver, str(config["configurable"]["thread_id"])).items()
    assert out["out"] == [want]
    assert asked == [(e.idempotency_key, {"to": "ann"})]
    assert sent == [("ann", e.idempotency_key)] * (1 + runs_after)  # not done: the same key
    assert (e.state, e.attempts) == (state, attempts)
    if case in ("done", "not done"):
        assert (e.resolution.resolver_kind, e.resolution.resolved_by) == (pb.RESOLVER_KIND_VERIFY, "verify")
    else:
        assert not e.HasField("resolution")
    if case == "done":
        # Recorded: a later call of the same id reuses it, asking nothing.
        again = send.with_call_id(call_id, config={"configurable": {"thread_id": config["configurable"]["thread_id"]}})("ann")
        assert again == want and len(asked) == 1 and len(sent) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_verify_settles_a_durable_tool_call_in_doubt(daemon: Daemon, saver: SavepointSaver, mode: str) -> None:
    runs: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        runs.append(idempotency_key())
        return f"sent to {to}"

    answers = {"c-done": Verified.done("sent to ann, message 9"), "c-not": Verified.not_done(), "c-unknown": Verified.unknown()}
    asked: list[tuple[str, Any]] = []

    def hook(key: str, args: Any) -> Verified:
        asked.append((key, args))
        return answers[next(c for c, e in begun.items() if e.effect.idempotency_key == key)]

    t = durable(send, verify=hook, address=daemon.addr)
    config = new_thread()
    thread = str(config["configurable"]["thread_id"])
    begun: dict[str, gpb.BeginThreadEffectResponse] = {}
    for call_id in answers:
        # A begin as a process that died mid-call made it.
        begun[call_id] = saver._conn.unary("BeginThreadEffect", gpb.BeginThreadEffectRequest(
            thread_id=thread, tool_use_id=call_id, name="send", input_json=input_json({"to": "ann"}),
            effect_class=pb.EFFECT_CLASS_SIDE_EFFECT, request_id=str(uuid.uuid4())))
    got: dict[str, ToolMessage] = {}
    for call_id in answers:
        call = {"type": "tool_call", "id": call_id, "name": "send", "args": {"to": "ann"}}
        got[call_id] = t.invoke(call, config) if mode == "sync" else asyncio.run(t.ainvoke(call, config))
    assert (got["c-done"].content, got["c-done"].status) == ("sent to ann, message 9", "success")
    assert (got["c-not"].content, got["c-not"].status) == ("sent to ann", "success")
    assert (got["c-unknown"].content, got["c-unknown"].status) == (in_doubt_text("send", "c-unknown"), "error")
    assert runs == [begun["c-not"].effect.idempotency_key]
    assert sorted(a[0] for a in asked) == sorted(b.effect.idempotency_key for b in begun.values())
    led = effects(saver, thread)
    assert [(led[c].state, led[c].attempts) for c in answers] == [
        (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 1), (gpb.THREAD_EFFECT_STATE_SUCCEEDED, 2), (gpb.THREAD_EFFECT_STATE_BEGUN, 1)]


# -- repeatable ------------------------------------------------------------------------


def earlier_run_began(saver: SavepointSaver, thread: str, call_id: str, name: str, args: Any) -> None:
    """A begin as an earlier run, interrupted before its checkpoint was
    saved, made it: another run id, another checkpoint."""
    saver._conn.unary("BeginThreadEffect", gpb.BeginThreadEffectRequest(
        thread_id=thread, tool_use_id=call_id, name=name, input_json=input_json(args), effect_class=pb.EFFECT_CLASS_SIDE_EFFECT,
        run_id="earlier-run-" + uuid.uuid4().hex, checkpoint_id="02", request_id=str(uuid.uuid4())))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_repeatable_durable_function_runs_a_repeated_call(daemon: Daemon, saver: SavepointSaver, mode: str) -> None:
    ran: list[str] = []

    def pay_body(amount: int) -> str:
        ran.append(idempotency_key())
        return f"paid {amount}"

    async def apay_body(amount: int) -> str:
        return pay_body(amount)

    body = pay_body if mode == "sync" else apay_body
    guarded = durable(name="pay", address=daemon.addr)(body)
    repeatable = durable(name="pay", repeatable=True, address=daemon.addr)(body)
    assert (guarded.repeatable, repeatable.repeatable) == (False, True)
    thread = "durable-opt-" + uuid.uuid4().hex
    earlier_run_began(saver, thread, "call_a", "pay", {"amount": 5})
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_id": "03"}}

    def call(f: Any, call_id: str) -> Any:
        out = f.with_call_id(call_id, config=config)(5)
        return asyncio.run(out) if mode == "async" else out

    # Without repeatable the guard catches the call: the earlier one is in
    # doubt, so this one is too, and nothing runs.
    with pytest.raises(EffectInDoubtError):
        call(guarded, "call_b")
    assert ran == []
    # With it, the same call runs.
    assert call(repeatable, "call_c") == "paid 5"
    assert len(ran) == 1
    led = effects(saver, thread)
    assert led["call_b"].duplicate_of == "call_a"
    assert (led["call_c"].duplicate_of, led["call_c"].state, led["call_c"].attempts) == ("", gpb.THREAD_EFFECT_STATE_SUCCEEDED, 1)


def test_repeatable_durable_tool_runs_a_repeated_call(daemon: Daemon, saver: SavepointSaver) -> None:
    ran: list[str] = []

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        ran.append("x")
        return f"paid {amount}"

    thread = "durable-opt-" + uuid.uuid4().hex
    earlier_run_began(saver, thread, "call_a", "pay", {"amount": 5})
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_id": "03"}}
    guarded, repeatable = durable(pay, address=daemon.addr), durable(pay, repeatable=True, address=daemon.addr)
    assert repeatable.metadata is not None and repeatable.metadata.get("savepoint_repeatable") is True
    caught = guarded.invoke({"type": "tool_call", "id": "call_b", "name": "pay", "args": {"amount": 5}}, config)
    assert caught.status == "error" and "call_a" in caught.content and ran == []
    got = repeatable.invoke({"type": "tool_call", "id": "call_c", "name": "pay", "args": {"amount": 5}}, config)
    assert (got.content, got.status) == ("paid 5", "success") and ran == ["x"]
    assert effects(saver, thread)["call_c"].duplicate_of == ""
