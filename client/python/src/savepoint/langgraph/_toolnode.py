"""DurableToolNode: LangGraph's ToolNode whose tool calls go through
savepointd's graph-thread ledger.

It is a ToolNode given two tool-call wrappers of its own (ToolNode's
``wrap_tool_call`` and ``awrap_tool_call`` hooks, the way ToolNode lets a
caller run code around each call's execution), with the user's wrappers, if
any, around them. ToolNode's own error handling is turned off underneath
(``handle_tool_errors=False``) so that the wrapper sees every exception a
tool raises, records it as a failed attempt and then handles it as ToolNode
would with the ``handle_tool_errors`` the caller gave (the same helpers
ToolNode uses)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import (
    AsyncToolCallWrapper,
    ToolCallRequest,
    ToolCallWrapper,
    ToolNode,
    _default_handle_tool_errors,
    _handle_tool_error,
    _infer_handled_types,
)
from langgraph.types import Command, interrupt

from savepoint._retry import DEFAULT_RETRY_POLICY, RetryPolicy
from savepoint.address import TLSConfig
from savepoint._core import denied_text
from savepoint.errors import DurableToolError
from savepoint.langgraph import _ledger
from savepoint.langgraph._durable import DurableTool
from savepoint.langgraph._ledger import IDEMPOTENCY_KEY, EffectKey, Effect, Ledger, VerifyHook
from savepoint.types import Verified, VerifyStatus

try:
    from langgraph.errors import is_invalid_resume
except ImportError:  # a langgraph without it never marks a resume error

    def is_invalid_resume(error: BaseException) -> bool:
        return False


Result = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Result]
AExecute = Callable[[ToolCallRequest], Awaitable[Result]]
HandleToolErrors = bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...]


class DurableToolNode(ToolNode):
    """A drop-in for LangGraph's ``ToolNode`` (the same arguments, inputs,
    outputs and ``handle_tool_errors``) whose tool calls go through
    savepointd's graph-thread ledger, keyed by (thread_id, the graph's
    checkpoint namespace, tool_call_id) from the run config::

        tools = DurableToolNode([send_invoice, lookup])   # was ToolNode([...])

    Each call is begun (BeginThreadEffect) before its tool runs and its
    outcome recorded (RecordThreadEffect) the moment the tool returns or
    raises. A call whose result is recorded is answered with that result (the
    same ToolMessage or Command) without running the tool; a side-effecting
    call that was begun and never recorded (its process died mid-call) is
    answered with an error ToolMessage saying the call may have happened
    (in_doubt_text), never run again; a read-only or idempotent one is run
    again with the same idempotency key. A tool that raises is recorded as a
    failed attempt, so a RetryPolicy or a later run tries it again; the
    exception is then raised or answered as ToolNode does.

    The effect class of a tool is, in order: ``effects[name]``, its
    metadata's ``savepoint_effect`` ("read_only", "idempotent" or
    "side_effect"), its MCP annotations when ``trust_annotations`` is True
    (or names it: a collection of tool names) (readOnlyHint, idempotentHint),
    else "side_effect". A tool run through the ledger finds its call's
    idempotency key in ``config["configurable"]["savepoint_idempotency_key"]``
    (a tool with a ``config: RunnableConfig`` or ``runtime: ToolRuntime``
    parameter) and from savepoint.langgraph.idempotency_key().

    ``address`` is the daemon's; None uses the graph's checkpointer when it
    is a SavepointSaver, else resolves the address as SavepointSaver() does
    ($SAVEPOINT_ADDR, ...). ``tls``, ``retry`` and ``timeout`` are as for
    SavepointSaver; ``serde`` serializes the recorded results (LangGraph's
    JsonPlusSerializer by default). ``verify[name]``, when given, is a tool's
    verify hook, ``verify(idempotency_key, args)``: asked about a call in
    doubt, its savepoint.Verified.done(output) is recorded
    (ResolveThreadEffect) and answered as the call's ToolMessage, not_done()
    runs the tool again as a new attempt under the same key, and unknown()
    or an exception leaves it in doubt. ``approval_required`` names tools
    that require a person's approval, bound to the call and its input (see
    docs/api.md, ApproveEffect): a call of one without an approval stops the
    graph with LangGraph's ``interrupt()``, its value
    ``{"savepoint_approval": {"thread_id", "checkpoint_ns", "tool_use_id",
    "name", "args", "input_digest"}}``; resume it with
    ``Command(resume={"approved": True | False, "note": ..., "by": ...})``,
    which records the decision (ApproveThreadEffect, for the input the call
    waits with), or with any other value once the decision was recorded
    elsewhere (``savepoint approve --thread``). An approved call runs once
    (its begin spends the approval); a denied one is answered with an error
    ToolMessage holding the note. The run needs a thread_id. Ledger calls
    that fail raise savepoint.errors exceptions whatever
    ``handle_tool_errors`` says: EffectInputMismatchError when a
    tool_call_id is reused for a call with another name or arguments; a
    record that fails after the tool ran is logged and the tool's result
    returned.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: HandleToolErrors = _default_handle_tool_errors,
        messages_key: str = "messages",
        wrap_tool_call: ToolCallWrapper | None = None,
        awrap_tool_call: AsyncToolCallWrapper | None = None,
        address: str | None = None,
        tls: TLSConfig | bool | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        timeout: float | None = None,
        serde: SerializerProtocol | None = None,
        trust_annotations: bool | Collection[str] = False,
        effects: Mapping[str, Effect] | None = None,
        logger: logging.Logger | None = None,
        verify: Mapping[str, VerifyHook] | None = None,
        approval_required: Collection[str] = (),
    ) -> None:
        # A @durable tool given here is unwrapped: the node keeps its ledger.
        given: dict[str, Effect] = {}
        plain: list[BaseTool | Callable[..., Any]] = []
        for t in tools:
            if isinstance(t, DurableTool):
                given[t.name] = _ledger.check_effect(t.effect, f"tool {t.name!r}")
                plain.append(t.inner)
            else:
                plain.append(t)
        self._sp_errors = handle_tool_errors
        self._sp_wrap = wrap_tool_call
        self._sp_awrap = awrap_tool_call
        self._sp_ledger = Ledger(address, tls, retry, timeout, serde, logger)
        self._sp_trust = trust_annotations
        super().__init__(
            plain,
            name=name,
            tags=tags,
            handle_tool_errors=False,
            messages_key=messages_key,
            wrap_tool_call=self._wrap,
            # A sync wrapper alone runs under ainvoke as ToolNode runs it:
            # synchronously, with the sync execution.
            awrap_tool_call=self._awrap if awrap_tool_call is not None or wrap_tool_call is None else None,
        )
        self._sp_effects: dict[str, Effect] = {}
        for tname, tool in self.tools_by_name.items():
            self._sp_effects[tname] = given.get(tname) or _ledger.effect_from_metadata(
                tname, tool.metadata, _ledger.trusts(trust_annotations, tname)
            )
        for tname, eff in (effects or {}).items():
            if tname not in self.tools_by_name:
                raise ValueError(f"DurableToolNode: effects names {tname!r}, which is not one of its tools")
            self._sp_effects[tname] = _ledger.check_effect(eff, f"DurableToolNode: effects[{tname!r}]")
        self._sp_approval = frozenset(approval_required)
        for tname in self._sp_approval:
            if tname not in self.tools_by_name:
                raise ValueError(f"DurableToolNode: approval_required names {tname!r}, which is not one of its tools")
        self._sp_verify: dict[str, VerifyHook] = dict(verify or {})
        for tname in self._sp_verify:
            if tname not in self.tools_by_name:
                raise ValueError(f"DurableToolNode: verify names {tname!r}, which is not one of its tools")

    # -- what the node knows ----------------------------------------------------

    def effect_of(self, tool: BaseTool) -> Effect:
        """The effect class the node gives ``tool``."""
        got = self._sp_effects.get(tool.name)
        if got is not None and self.tools_by_name.get(tool.name) is tool:
            return got
        return _ledger.effect_from_metadata(tool.name, tool.metadata, _ledger.trusts(self._sp_trust, tool.name))

    def close(self) -> None:
        """Close the node's own connection (made when it has an address, or
        when its graph's checkpointer is not a SavepointSaver)."""
        self._sp_ledger.close()

    async def aclose(self) -> None:
        """close() and the running event loop's connection."""
        await self._sp_ledger.aclose()

    # -- the wrappers -----------------------------------------------------------

    def _wrap(self, req: ToolCallRequest, execute: Execute) -> Result:
        if self._sp_wrap is None:
            return self._run(req, execute)
        try:
            return self._sp_wrap(req, lambda r: self._run(r, execute))
        except GraphBubbleUp:
            raise
        except Exception as e:
            return self._wrapper_error(e, req)

    async def _awrap(self, req: ToolCallRequest, execute: AExecute) -> Result:
        if self._sp_awrap is None:
            return await self._arun(req, execute)

        async def run(r: ToolCallRequest) -> Result:
            return await self._arun(r, execute)

        try:
            return await self._sp_awrap(req, run)
        except GraphBubbleUp:
            raise
        except Exception as e:
            return self._wrapper_error(e, req)

    def _wrapper_error(self, e: Exception, req: ToolCallRequest) -> ToolMessage:
        """What ToolNode answers for an exception out of a user's wrapper (a
        effect call's error is raised)."""
        if not self._sp_errors or is_invalid_resume(e) or _ledger.is_ledger_error(e):
            raise e
        content = _handle_tool_error(e, flag=self._sp_errors)
        call = req.tool_call
        return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"], status="error")

    def _handled(self, e: Exception, call: ToolCall) -> ToolMessage | None:
        """The error ToolMessage ToolNode answers for exception ``e`` of a
        tool, or None when ToolNode raises it."""
        if isinstance(e, GraphBubbleUp) or is_invalid_resume(e):
            return None
        flag = self._sp_errors
        handled: tuple[type[Exception], ...]
        if isinstance(flag, type) and issubclass(flag, Exception):
            handled = (flag,)
        elif isinstance(flag, tuple):
            handled = flag
        elif callable(flag) and not isinstance(flag, type):
            handled = _infer_handled_types(flag)
        else:
            handled = (Exception,)
        if not flag or not isinstance(e, handled):
            return None
        content = _handle_tool_error(e, flag=flag)
        return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"], status="error")

    # -- one call -----------------------------------------------------------------

    def _prepare(self, req: ToolCallRequest) -> tuple[ToolCall, EffectKey, Effect, Any]:
        call = req.tool_call
        assert req.tool is not None
        config = getattr(req.runtime, "config", None)
        key = _ledger.effect_key(config, call.get("id") or "", f"DurableToolNode (tool {call['name']!r})")
        return call, key, self.effect_of(req.tool), config

    @staticmethod
    def _repeatable(req: ToolCallRequest) -> bool:
        """Whether the call's tool opts out of the duplicate-intent guard
        (metadata savepoint_repeatable)."""
        return bool(req.tool is not None and (req.tool.metadata or {}).get(_ledger.REPEATABLE))

    def _answer(self, resp: Any, call: ToolCall, key: EffectKey) -> Result | None:
        """The answer of a REUSE or IN_DOUBT begin; None for RUN."""
        if resp.HasField("duplicate_of"):
            text, is_error = self._sp_ledger.duplicate(resp, key)
            return ToolMessage(content=text, name=call["name"], tool_call_id=key.tool_use_id, status="error" if is_error else "success")
        if resp.decision == _ledger.REUSE:
            out = self._sp_ledger.load(key, resp.effect)
            if not isinstance(out, (ToolMessage, Command, list)):
                raise DurableToolError(
                    f"the recorded outcome of tool use {key.tool_use_id!r} is a {type(out).__name__}, not a ToolMessage "
                    "or Command"
                )
            return out  # type: ignore[return-value]
        if resp.decision == _ledger.IN_DOUBT:
            return ToolMessage(
                content=_ledger.in_doubt_text(call["name"], key.tool_use_id),
                name=call["name"],
                tool_call_id=key.tool_use_id,
                status="error",
            )
        if resp.decision != _ledger.RUN:
            raise _ledger.unexpected(resp, key)
        return None

    @staticmethod
    def _approval_request(resp: Any, call: ToolCall, key: EffectKey) -> dict[str, Any]:
        """The value of the interrupt a call waiting for approval raises."""
        return {"savepoint_approval": {
            "thread_id": key.thread_id, "checkpoint_ns": key.ns, "tool_use_id": key.tool_use_id,
            "name": call["name"], "args": call.get("args"), "input_digest": resp.effect.input_digest.hex(),
        }}

    @staticmethod
    def _denied(resp: Any, call: ToolCall, key: EffectKey) -> ToolMessage:
        """The error ToolMessage answering a call a person denied."""
        return ToolMessage(content=denied_text(resp.effect.approval), name=call["name"], tool_call_id=key.tool_use_id, status="error")

    def _found(self, v: Verified, call: ToolCall, key: EffectKey) -> ToolMessage:
        """The ToolMessage answering a call a verify hook found done."""
        content: str | list[str | dict[Any, Any]] = v.output if isinstance(v.output, str) else [dict(b) for b in v.output]
        return ToolMessage(content=content, name=call["name"], tool_call_id=key.tool_use_id, status="error" if v.is_error else "success")

    def _verified(self, resp: Any, call: ToolCall, key: EffectKey) -> Verified | None:
        """The definite answer of the call's verify hook for an IN_DOUBT
        begin; None when there is none, it cannot tell, or it raised."""
        hook = self._sp_verify.get(call["name"])
        if resp.decision != _ledger.IN_DOUBT or hook is None or resp.HasField("duplicate_of"):
            return None
        try:
            v = hook(resp.effect.idempotency_key, call.get("args"))
        except Exception as e:
            _ledger.verify_failed(e, key, self._sp_ledger.logger)
            return None
        return _ledger.definite(v, key, self._sp_ledger.logger)

    async def _averified(self, resp: Any, call: ToolCall, key: EffectKey) -> Verified | None:
        hook = self._sp_verify.get(call["name"])
        if resp.decision != _ledger.IN_DOUBT or hook is None or resp.HasField("duplicate_of"):
            return None
        try:
            v = hook(resp.effect.idempotency_key, call.get("args"))
            if inspect.isawaitable(v):
                v = await v
        except Exception as e:
            _ledger.verify_failed(e, key, self._sp_ledger.logger)
            return None
        return _ledger.definite(v, key, self._sp_ledger.logger)

    def _run(self, req: ToolCallRequest, execute: Execute) -> Result:
        if req.tool is None:
            return execute(req)  # no such tool: nothing runs, ToolNode answers
        with _ledger.ledger_errors():
            call, key, effect, config = self._prepare(req)
            needs = call["name"] in self._sp_approval
            resp = self._sp_ledger.begin(config, key, call["name"], call.get("args"), effect, needs, repeatable=self._repeatable(req))
            while resp.decision == _ledger.AWAIT_APPROVAL:
                decided = interrupt(self._approval_request(resp, call, key))
                if isinstance(decided, Mapping) and "approved" in decided:
                    self._sp_ledger.approve(config, key, bool(decided["approved"]), str(decided.get("note", "")),
                                            str(decided.get("by", "")), resp.effect.input_digest)
                resp = self._sp_ledger.begin(config, key, call["name"], call.get("args"), effect, needs, repeatable=self._repeatable(req))
        if resp.decision == _ledger.DENIED:
            return self._denied(resp, call, key)
        v = self._verified(resp, call, key)
        if v is not None:
            # Recorded with ResolveThreadEffect: done is this answer from now
            # on; not done lets the next begin start a new attempt.
            with _ledger.ledger_errors():
                if v.status == VerifyStatus.DONE:
                    found = self._found(v, call, key)
                    self._sp_ledger.resolve(config, key, v, found)
                    return found
                self._sp_ledger.resolve(config, key, v, None)
                resp = self._sp_ledger.begin(config, key, call["name"], call.get("args"), effect, needs, repeatable=self._repeatable(req))
        with _ledger.ledger_errors():
            answer = self._answer(resp, call, key)
        if answer is not None:
            return answer
        attempt = _ledger.attempt_of(resp)
        idem = resp.effect.idempotency_key
        if config is not None:
            config.setdefault("configurable", {})[IDEMPOTENCY_KEY] = idem
        try:
            with _ledger.key_set(idem):
                out = execute(req)
        except Exception as e:
            self._sp_ledger.record(config, key, attempt, _ledger.error_value(e), True)
            msg = self._handled(e, call)
            if msg is None:
                raise
            return msg
        self._sp_ledger.record(config, key, attempt, out, False)
        return out

    async def _arun(self, req: ToolCallRequest, execute: AExecute) -> Result:
        if req.tool is None:
            return await execute(req)
        with _ledger.ledger_errors():
            call, key, effect, config = self._prepare(req)
            needs = call["name"] in self._sp_approval
            resp = await self._sp_ledger.abegin(config, key, call["name"], call.get("args"), effect, needs, repeatable=self._repeatable(req))
            while resp.decision == _ledger.AWAIT_APPROVAL:
                decided = interrupt(self._approval_request(resp, call, key))
                if isinstance(decided, Mapping) and "approved" in decided:
                    await self._sp_ledger.aapprove(config, key, bool(decided["approved"]), str(decided.get("note", "")),
                                                   str(decided.get("by", "")), resp.effect.input_digest)
                resp = await self._sp_ledger.abegin(config, key, call["name"], call.get("args"), effect, needs, repeatable=self._repeatable(req))
        if resp.decision == _ledger.DENIED:
            return self._denied(resp, call, key)
        v = await self._averified(resp, call, key)
        if v is not None:
            with _ledger.ledger_errors():
                if v.status == VerifyStatus.DONE:
                    found = self._found(v, call, key)
                    await self._sp_ledger.aresolve(config, key, v, found)
                    return found
                await self._sp_ledger.aresolve(config, key, v, None)
                resp = await self._sp_ledger.abegin(config, key, call["name"], call.get("args"), effect, needs, repeatable=self._repeatable(req))
        with _ledger.ledger_errors():
            answer = self._answer(resp, call, key)
        if answer is not None:
            return answer
        attempt = _ledger.attempt_of(resp)
        idem = resp.effect.idempotency_key
        if config is not None:
            config.setdefault("configurable", {})[IDEMPOTENCY_KEY] = idem
        try:
            with _ledger.key_set(idem):
                out = await execute(req)
        except Exception as e:
            await self._sp_ledger.arecord(config, key, attempt, _ledger.error_value(e), True)
            msg = self._handled(e, call)
            if msg is None:
                raise
            return msg
        await self._sp_ledger.arecord(config, key, attempt, out, False)
        return out


__all__ = ["DurableToolNode"]
