"""The LangGraph graph the savepoint.langgraph tests run, the same way against
InMemorySaver and SavepointSaver, in process and (``python
langgraph_graph.py``) in child processes: a Send fan-out whose task for "b"
fails once, a subgraph (its own checkpoint namespace) that stops at an
interrupt(), resumed with Command(resume=...), then a fork by update_state on
an old checkpoint. Every step records what a user can observe (outputs,
states, history, call counts) with ids and timestamps left out, so two
savers' records compare equal.

As a script: ``langgraph_graph.py ADDR THREAD PHASE`` with PHASE "until-
interrupt" (run until the interrupt), "resume" (resume and fork to the end),
"all" or "all-async" (both), "crash-in-fanout" (the process dies in the
fan-out, after the tasks for "a" and "c" stored their writes) or
"after-crash" (the run resumed from there, to the end); it prints the record
as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import sys
import threading
import time
from collections import Counter
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    items: list[str]
    results: Annotated[list[str], operator.add]
    summary: str
    approval: str
    answer: str


class SubState(TypedDict, total=False):
    summary: str
    approval: str


class WorkerFailed(Exception):
    """The fan-out task for "b" fails on its first run."""


def build(
    calls: Counter[str], checkpointer: BaseCheckpointSaver[Any], crash_thread: str = ""
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The graph, counting node runs in ``calls``. With ``crash_thread``,
    the task for "b" kills its process on its first run instead of failing,
    once the other tasks' writes are stored in ``checkpointer``."""

    def plan(state: State) -> State:
        calls["plan"] += 1
        return {"log": ["plan"], "items": ["a", "b", "c"]}

    def fan_out(state: State) -> list[Send]:
        return [Send("work", {"item": x}) for x in state["items"]]

    # The task for "b" fails only once the others have finished, so that
    # they are never cancelled by its failure (which the async runner does
    # to tasks still running): the outcome does not depend on timing.
    others_done = threading.Condition()

    def work(arg: dict[str, str]) -> State:
        item = arg["item"]
        with others_done:
            calls["work:" + item] += 1
            others_done.notify_all()
        if item == "b" and calls["work:b"] == 1:
            with others_done:
                others_done.wait_for(lambda: calls["work:a"] and calls["work:c"], timeout=10)
            time.sleep(0.2)
            if crash_thread:
                wait_for_writes(checkpointer, crash_thread, "results", 2)
                os._exit(CRASH_EXIT)
            raise WorkerFailed("b failed once")
        return {"results": ["done-" + item], "log": ["work-" + item]}

    def collect(state: State) -> State:
        calls["collect"] += 1
        return {"summary": ",".join(sorted(state["results"])), "log": ["collect"]}

    def review(state: SubState) -> SubState:
        calls["review"] += 1
        answer = interrupt({"question": "approve?", "summary": state["summary"]})
        return {"approval": str(answer)}

    def stamp(state: SubState) -> SubState:
        calls["stamp"] += 1
        return {"summary": state["summary"] + "!"}

    sub = StateGraph(SubState)
    sub.add_node("review", review)
    sub.add_node("stamp", stamp)
    sub.add_edge(START, "review")
    sub.add_edge("review", "stamp")
    sub.add_edge("stamp", END)

    def finish(state: State) -> State:
        calls["finish"] += 1
        return {"answer": f"{state['approval']}:{state['summary']}", "log": ["finish"]}

    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("work", work)
    g.add_node("collect", collect)
    g.add_node("sub", sub.compile())
    g.add_node("finish", finish)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan_out, ["work"])
    g.add_edge("work", "collect")
    g.add_edge("collect", "sub")
    g.add_edge("sub", "finish")
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)


CRASH_EXIT = 17


def wait_for_writes(saver: BaseCheckpointSaver[Any], thread: str, channel: str, n: int) -> None:
    """Wait until the thread's latest checkpoint has n pending writes to
    channel (at most 10 s)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        if tup is not None and sum(1 for w in tup.pending_writes or () if w[1] == channel) >= n:
            return
        time.sleep(0.02)
    raise TimeoutError(f"the thread's latest checkpoint never had {n} writes to {channel}")


# -- what a user sees, without ids ---------------------------------------------


def plain(v: Any) -> Any:
    """A value with Interrupts replaced by their values and tuples by lists."""
    if isinstance(v, Interrupt):
        return {"interrupt": plain(v.value)}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def state_record(st: StateSnapshot) -> dict[str, Any]:
    return {
        "values": plain(st.values),
        "next": list(st.next),
        "source": st.metadata.get("source") if st.metadata else None,
        "step": st.metadata.get("step") if st.metadata else None,
        "interrupts": [plain(i.value) for i in st.interrupts],
        "tasks": sorted(
            (
                {
                    "name": t.name,
                    "error": repr(t.error) if t.error is not None else None,
                    "interrupts": [plain(i.value) for i in t.interrupts],
                    "result": plain(t.result),
                    "state": state_record(t.state) if isinstance(t.state, StateSnapshot) else None,
                }
                for t in st.tasks
            ),
            key=json.dumps,
        ),
    }


def history_record(history: list[StateSnapshot]) -> list[dict[str, Any]]:
    """The history newest first, each entry with its parent's position."""
    pos = {h.config["configurable"]["checkpoint_id"]: i for i, h in enumerate(history)}
    out = []
    for h in history:
        r = state_record(h)
        parent = h.parent_config["configurable"]["checkpoint_id"] if h.parent_config else None
        r["parent"] = pos.get(parent) if parent else None
        out.append(r)
    return out


def namespaces(saver: BaseCheckpointSaver[Any], thread: str) -> list[str]:
    """The namespace kinds ("" the root, "sub" the subgraph) of the thread's
    stored checkpoints."""
    return sorted({t.config["configurable"]["checkpoint_ns"].split(":")[0] for t in saver.list({"configurable": {"thread_id": thread}})})


async def anamespaces(saver: BaseCheckpointSaver[Any], thread: str) -> list[str]:
    return sorted(
        {t.config["configurable"]["checkpoint_ns"].split(":")[0] async for t in saver.alist({"configurable": {"thread_id": thread}})}
    )


# -- the runs --------------------------------------------------------------------


def until_interrupt(saver: BaseCheckpointSaver[Any], thread: str, calls: Counter[str]) -> dict[str, Any]:
    """Run the graph until its interrupt: the first invoke fails in the
    fan-out ("b"), the second resumes it; return what was seen."""
    graph = build(calls, saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    rec: dict[str, Any] = {}
    try:
        graph.invoke({"log": ["start"]}, config)
        rec["first"] = "no error"
    except WorkerFailed as e:
        rec["first"] = repr(e)
    rec["after_failure"] = state_record(graph.get_state(config))
    rec["at_interrupt"] = plain(graph.invoke(None, config))
    rec["interrupted"] = state_record(graph.get_state(config, subgraphs=True))
    rec["calls_1"] = dict(sorted(calls.items()))
    return rec


def resume(saver: BaseCheckpointSaver[Any], thread: str, calls: Counter[str]) -> dict[str, Any]:
    """Resume the interrupt with "yes", then fork: update_state on the
    checkpoint before the subgraph ran, run it to its interrupt again and
    resume that with "no"."""
    graph = build(calls, saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    rec: dict[str, Any] = {}
    rec["resumed"] = plain(graph.invoke(Command(resume="yes"), config))
    rec["done"] = state_record(graph.get_state(config))
    history = list(graph.get_state_history(config))
    rec["history"] = history_record(history)
    before_sub = next(h for h in history if list(h.next) == ["sub"])
    fork = graph.update_state(before_sub.config, {"summary": "forked"})
    rec["fork_interrupt"] = plain(graph.invoke(None, fork))
    rec["fork_done"] = plain(graph.invoke(Command(resume="no"), config))
    rec["final"] = state_record(graph.get_state(config))
    rec["final_history"] = history_record(list(graph.get_state_history(config)))
    rec["namespaces"] = namespaces(saver, thread)
    rec["calls_2"] = dict(sorted(calls.items()))
    return rec


async def auntil_interrupt(saver: BaseCheckpointSaver[Any], thread: str, calls: Counter[str]) -> dict[str, Any]:
    """until_interrupt with the async API (ainvoke, aget_state)."""
    graph = build(calls, saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    rec: dict[str, Any] = {}
    try:
        await graph.ainvoke({"log": ["start"]}, config)
        rec["first"] = "no error"
    except WorkerFailed as e:
        rec["first"] = repr(e)
    rec["after_failure"] = state_record(await graph.aget_state(config))
    rec["at_interrupt"] = plain(await graph.ainvoke(None, config))
    rec["interrupted"] = state_record(await graph.aget_state(config, subgraphs=True))
    rec["calls_1"] = dict(sorted(calls.items()))
    return rec


async def aresume(saver: BaseCheckpointSaver[Any], thread: str, calls: Counter[str]) -> dict[str, Any]:
    """resume with the async API."""
    graph = build(calls, saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    rec: dict[str, Any] = {}
    rec["resumed"] = plain(await graph.ainvoke(Command(resume="yes"), config))
    rec["done"] = state_record(await graph.aget_state(config))
    history = [h async for h in graph.aget_state_history(config)]
    rec["history"] = history_record(history)
    before_sub = next(h for h in history if list(h.next) == ["sub"])
    fork = await graph.aupdate_state(before_sub.config, {"summary": "forked"})
    rec["fork_interrupt"] = plain(await graph.ainvoke(None, fork))
    rec["fork_done"] = plain(await graph.ainvoke(Command(resume="no"), config))
    rec["final"] = state_record(await graph.aget_state(config))
    rec["final_history"] = history_record([h async for h in graph.aget_state_history(config)])
    rec["namespaces"] = await anamespaces(saver, thread)
    rec["calls_2"] = dict(sorted(calls.items()))
    return rec


def run_all(saver: BaseCheckpointSaver[Any], thread: str) -> dict[str, Any]:
    calls: Counter[str] = Counter()
    return {**until_interrupt(saver, thread, calls), **resume(saver, thread, calls)}


async def arun_all(saver: BaseCheckpointSaver[Any], thread: str) -> dict[str, Any]:
    calls: Counter[str] = Counter()
    return {**await auntil_interrupt(saver, thread, calls), **await aresume(saver, thread, calls)}


def main(argv: list[str]) -> None:
    from savepoint.langgraph import SavepointSaver

    addr, thread, phase = argv
    calls: Counter[str] = Counter()
    with SavepointSaver(addr) as saver:
        if phase == "until-interrupt":
            rec = until_interrupt(saver, thread, calls)
        elif phase == "resume":
            rec = resume(saver, thread, calls)
        elif phase == "all":
            rec = run_all(saver, thread)
        elif phase == "crash-in-fanout":
            # Exits CRASH_EXIT from inside the fan-out: nothing is printed.
            build(calls, saver, crash_thread=thread).invoke({"log": ["start"]}, {"configurable": {"thread_id": thread}})
            raise SystemExit("the crash did not happen")
        elif phase == "after-crash":
            calls["work:b"] = 1  # its run in the crashed process
            graph = build(calls, saver)
            at = plain(graph.invoke(None, {"configurable": {"thread_id": thread}}))
            rec = {"at_interrupt": at, "calls_1": dict(sorted(calls.items()))}
            calls.clear()
            rec.update(resume(saver, thread, calls))
        elif phase == "all-async":
            rec = asyncio.run(arun_all(saver, thread))
        else:
            raise SystemExit(f"unknown phase {phase!r}")
    print(json.dumps(rec, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
