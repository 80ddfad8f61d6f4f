"""Durable agents on Anthropic's Python SDK (``pip install
'savepoint[anthropic]'``): DurableAgent over ``anthropic.Anthropic`` and
AsyncDurableAgent over ``anthropic.AsyncAnthropic`` checkpoint every turn
in savepointd and run every tool through its ledger, so a killed agent
resumes without running a side effect twice. docs/frameworks/anthropic.md
is the reference."""

from savepoint.anthropic._agent import (
    AgentError,
    ApprovalRequest,
    AsyncDurableAgent,
    DurableAgent,
    MaxTurnsError,
    Paused,
    RefusalError,
    SessionFailedError,
    StopReasonError,
    Usage,
    idempotency_key,
)
from savepoint.anthropic._runner import AsyncDurableToolRunner, DurableToolRunner, durable_tool_runner
from savepoint.anthropic._tools import DurableTool, durable

__all__ = [
    "AgentError",
    "ApprovalRequest",
    "AsyncDurableAgent",
    "AsyncDurableToolRunner",
    "DurableAgent",
    "DurableTool",
    "DurableToolRunner",
    "MaxTurnsError",
    "Paused",
    "RefusalError",
    "SessionFailedError",
    "StopReasonError",
    "Usage",
    "durable",
    "durable_tool_runner",
    "idempotency_key",
]
