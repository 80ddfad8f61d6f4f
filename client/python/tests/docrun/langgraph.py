# docrun prelude: what the LangGraph examples take as given: a graph builder
# whose one node answers, LangChain's @tool and RunnableConfig, two tools, a
# fake payments API, and the State of a billing graph.
from typing import TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command


def _answer(state: MessagesState) -> dict:
    return {"messages": [AIMessage("done")]}


builder = StateGraph(MessagesState)
builder.add_node("answer", _answer)
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
prompt = HumanMessage("Invoice acme.")
answer = "yes"


@tool
def lookup_customer(name: str) -> str:
    """Find a customer."""
    return name


@tool
def send_invoice(customer: str) -> str:
    """Send an invoice."""
    return "sent"


class _Payments:
    def charge(self, amount: int, idempotency_key: str) -> str:
        return f"charged {amount}"


payments = _Payments()


class State(TypedDict):
    name: str
    sent: str | None
    check: str
