"""Savepoint's Python client: checkpoints and a side-effects ledger in
savepointd for an agent loop, so that killed at any point it resumes without
repeating a side effect it already performed and without pretending to know
what it cannot.

Client connects (savepoint.aio.AsyncClient is the asyncio twin); a Session
does the protocol's bookkeeping (revision, epoch, history, pending tool uses,
request ids), so the loop says only what happened::

    with savepoint.Client() as c:
        s = c.start("my-task", task, messages=[prompt])
        while True:
            reply = model(s.messages)
            s.point_a(reply.message, reply.tool_uses)  # save before running any tool
            if not reply.tool_uses:
                break  # the final answer, saved too
            s.point_b(s.run_tools(reply.tool_uses, run_tool))  # begin, run, record each

After a crash the loop starts with ``c.resume(id)`` and answers what was
pending with ``s.point_b(s.reconcile(run_tool))``. Errors are SavepointError
subclasses chosen by the daemon's ErrorInfo reason (savepoint.errors).
"""

import logging as _logging

from savepoint._retry import DEFAULT_RETRY_POLICY, RetryPolicy
from savepoint.address import TLSConfig, default_addr, parse_addr
from savepoint.client import Client, Raw, Session, ToolFunc
from savepoint.errors import *  # noqa: F403
from savepoint.errors import __all__ as _errors_all
from savepoint.types import (
    Decision,
    EffectClass,
    Message,
    SessionStatus,
    ToolEvent,
    ToolResult,
    ToolStage,
    ToolUse,
    anthropic_tool_results,
)

# A library is silent unless the application configures logging: without
# this handler Python's last-resort handler prints warnings to stderr.
_logging.getLogger("savepoint").addHandler(_logging.NullHandler())

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "Client",
    "Decision",
    "EffectClass",
    "Message",
    "Raw",
    "RetryPolicy",
    "Session",
    "SessionStatus",
    "TLSConfig",
    "ToolEvent",
    "ToolFunc",
    "ToolResult",
    "ToolStage",
    "ToolUse",
    "anthropic_tool_results",
    "default_addr",
    "parse_addr",
    *_errors_all,
]
