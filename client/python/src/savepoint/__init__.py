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

import importlib as _importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

from savepoint._errnames import NAMES as _ERROR_NAMES

# A library is silent unless the application configures logging: without
# this handler Python's last-resort handler prints warnings to stderr.
_logging.getLogger("savepoint").addHandler(_logging.NullHandler())

# The package's names, each loaded from its module on first use (PEP 562), so
# that ``import savepoint`` does not import grpc and protobuf until a name
# that needs them is used. Type checkers see the plain imports below.
_MODULES = {
    "savepoint._retry": ("DEFAULT_RETRY_POLICY", "RetryPolicy"),
    "savepoint.address": ("TLSConfig", "default_addr", "parse_addr"),
    "savepoint.client": ("Client", "Raw", "Session", "SessionWatch", "ToolFunc"),
    "savepoint.types": (
        "Decision", "EffectClass", "Message", "Registration", "SessionStatus", "ToolContent", "ToolEvent", "ToolResult", "ToolStage", "ToolUse",
        "Verified", "VerifyStatus", "WatchEvent", "WatchEventType", "anthropic_tool_results",
    ),
    "savepoint.errors": _ERROR_NAMES,
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # "X as X": the explicit re-exports mypy --strict wants
    from savepoint._retry import DEFAULT_RETRY_POLICY as DEFAULT_RETRY_POLICY
    from savepoint._retry import RetryPolicy as RetryPolicy
    from savepoint.address import TLSConfig as TLSConfig
    from savepoint.address import default_addr as default_addr
    from savepoint.address import parse_addr as parse_addr
    from savepoint.client import Client as Client
    from savepoint.client import Raw as Raw
    from savepoint.client import Session as Session
    from savepoint.client import SessionWatch as SessionWatch
    from savepoint.client import ToolFunc as ToolFunc
    from savepoint.errors import *  # noqa: F403
    from savepoint.types import Decision as Decision
    from savepoint.types import EffectClass as EffectClass
    from savepoint.types import Message as Message
    from savepoint.types import Registration as Registration
    from savepoint.types import SessionStatus as SessionStatus
    from savepoint.types import ToolContent as ToolContent
    from savepoint.types import ToolEvent as ToolEvent
    from savepoint.types import ToolResult as ToolResult
    from savepoint.types import ToolStage as ToolStage
    from savepoint.types import ToolUse as ToolUse
    from savepoint.types import Verified as Verified
    from savepoint.types import VerifyStatus as VerifyStatus
    from savepoint.types import WatchEvent as WatchEvent
    from savepoint.types import WatchEventType as WatchEventType
    from savepoint.types import anthropic_tool_results as anthropic_tool_results

def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'savepoint' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__all__ = sorted(_WHERE)
