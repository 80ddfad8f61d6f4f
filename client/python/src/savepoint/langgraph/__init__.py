"""LangGraph's checkpointer on savepointd: SavepointSaver stores a graph's
checkpoints, channel values and pending writes in the daemon's
GraphCheckpointService, durable before each call returns and shared by every
process on the host::

    from savepoint.langgraph import SavepointSaver

    graph = builder.compile(checkpointer=SavepointSaver())

It needs the ``langgraph`` extra (``pip install 'savepoint[langgraph]'``),
which brings langgraph-checkpoint; the core package does not.
"""

from savepoint.langgraph.saver import SavepointSaver

__all__ = ["SavepointSaver"]
