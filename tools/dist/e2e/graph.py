"""One step of the end-to-end test (run.sh): a LangGraph graph on
SavepointSaver() with no address. "first" runs thread e2e once on a fresh
machine (no daemon before); "resume" checks that the thread holds what was
acknowledged, runs it once more and checks again."""

import operator
import sys
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from savepoint.langgraph import SavepointSaver


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def step(state: State) -> dict[str, list[str]]:
    return {"log": ["step"]}


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_edge(START, "step")
builder.add_edge("step", END)
graph = builder.compile(checkpointer=SavepointSaver())
config = {"configurable": {"thread_id": "e2e"}}

mode = sys.argv[1]
if mode == "first":
    out = graph.invoke({"log": ["a"]}, config)
    assert out["log"] == ["a", "step"], out
else:
    before = graph.get_state(config).values
    assert before["log"] == ["a", "step"], f"the acknowledged checkpoint is not there: {before}"
    out = graph.invoke({"log": ["b"]}, config)
    assert out["log"] == ["a", "step", "b", "step"], out
    assert graph.get_state(config).values["log"] == ["a", "step", "b", "step"]
print("ok", mode, out["log"])
