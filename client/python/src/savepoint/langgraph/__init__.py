"""LangGraph's checkpointer on savepointd: SavepointSaver stores a graph's
checkpoints, channel values and pending writes in the daemon's
GraphCheckpointService, durable before each call returns and shared by every
process on the host::

    from savepoint.langgraph import SavepointSaver

    graph = builder.compile(checkpointer=SavepointSaver())

DurableToolNode, a drop-in for LangGraph's ToolNode, and ``@durable`` (for
tools and functions called from one's own nodes and tasks) run tool calls
through the daemon's graph-thread ledger: after a crash a call whose result
is recorded is answered with it, a side-effecting call that may have
happened is reported in doubt rather than run again
(docs/frameworks/langgraph.md). They are loaded on first use, so that
importing SavepointSaver does not import langgraph.prebuilt.

It needs the ``langgraph`` extra (``pip install 'savepoint[langgraph]'``),
which brings langgraph-checkpoint; the core package does not. DurableToolNode
needs langgraph itself (langgraph.prebuilt), as ToolNode does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from savepoint.langgraph.saver import SavepointSaver

if TYPE_CHECKING:
    from savepoint.errors import DurableToolError
    from savepoint.langgraph._durable import DurableFunction, DurableTool, durable
    from savepoint.langgraph._ledger import (
        IDEMPOTENCY_KEY,
        Effect,
        EffectInDoubtError,
        idempotency_key,
        in_doubt_text,
    )
    from savepoint.langgraph._toolnode import DurableToolNode

_LAZY = {
    "DurableToolNode": "savepoint.langgraph._toolnode",
    "durable": "savepoint.langgraph._durable",
    "DurableFunction": "savepoint.langgraph._durable",
    "DurableTool": "savepoint.langgraph._durable",
    "DurableToolError": "savepoint.errors",
    "Effect": "savepoint.langgraph._ledger",
    "EffectInDoubtError": "savepoint.langgraph._ledger",
    "IDEMPOTENCY_KEY": "savepoint.langgraph._ledger",
    "idempotency_key": "savepoint.langgraph._ledger",
    "in_doubt_text": "savepoint.langgraph._ledger",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'savepoint.langgraph' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DurableFunction",
    "DurableTool",
    "DurableToolError",
    "DurableToolNode",
    "Effect",
    "EffectInDoubtError",
    "IDEMPOTENCY_KEY",
    "SavepointSaver",
    "durable",
    "idempotency_key",
    "in_doubt_text",
]
