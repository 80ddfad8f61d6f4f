"""durable_tool_runner: the SDK's own tool runner
(``client.beta.messages.tool_runner``) with its session in savepointd."""

from __future__ import annotations

import json
import inspect
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from anthropic.lib.tools import BetaAsyncBuiltinFunctionTool, BetaBuiltinFunctionTool, ToolError

import savepoint
import savepoint.aio
from savepoint.anthropic._agent import (
    LOGGER,
    RefusalError,
    SessionFailedError,
    StopReasonError,
    _KEY,
    content_of,
    final_message,
    history,
    text_of,
    tool_uses,
)
from savepoint.anthropic._tools import DurableTool, resolve
from savepoint.errors import SavepointError, SessionExistsError
from savepoint.types import EffectClass, Message, SessionStatus, ToolContent, ToolResult, ToolUse, compact_json


class _LedgerTool(BetaBuiltinFunctionTool):
    """One of the user's tools as the SDK's runner runs it. The runner calls
    the tools of a reply one after the other, in the order of its tool_use
    blocks, without their ids: each call takes the next tool use of this
    name that Point A saved for the turn, and runs through the ledger by its
    id."""

    def __init__(self, runner: DurableToolRunner, tool: DurableTool) -> None:
        self._runner = runner
        self._tool = tool

    def to_dict(self) -> Any:
        return dict(self._tool.definition)

    def call(self, input: object) -> Any:
        return self._runner._call(self._tool, input)


class DurableToolRunner:
    """``client.beta.messages.tool_runner(...)`` whose turns are checkpointed
    in savepointd: iterate it for each assistant message, or call
    ``until_done()`` for the final one, as with the SDK's runner. Each reply
    is saved at Point A with its tool uses pending before the runner runs any
    tool; each tool runs through the ledger (BeginEffect unless read-only,
    the tool, RecordEffect), never twice; Point B saves the results before
    the next model call. A new session starts with ``messages``; an existing
    one is resumed (Reconcile, Point B) and its history replaces them; a
    completed one gives its final answer without calling the model. The
    runner sends the whole history every turn (``thread=False``: a
    server-side message thread could not be continued by a new process).
    ``run_tools_eagerly`` and ``stream`` are refused: a tool started while
    the reply streams would run before Point A could save its call."""

    def __init__(
        self,
        client: Any,
        session_id: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Any],
        savepoint: savepoint.Client | savepoint.aio.AsyncClient | str | None = None,
        trust_mcp_annotations: bool = False,
        **params: Any,
    ) -> None:
        if params.get("run_tools_eagerly"):
            raise TypeError(
                "durable_tool_runner refuses run_tools_eagerly: a tool started while the reply streams would run before Point A saved its call"
            )
        if params.get("stream"):
            raise TypeError("durable_tool_runner refuses stream=True: it saves whole replies")
        if params.get("thread", False) is not False:
            raise TypeError("durable_tool_runner runs with thread=False: a server-side message thread cannot be resumed by a new process")
        params.pop("thread", None)
        if not session_id:
            raise ValueError("session_id is empty")
        if not messages:
            raise ValueError("messages is empty: the first user message starts the session")
        self.client = client
        self.session_id = session_id
        self.tools: dict[str, DurableTool] = resolve(tools, trust_mcp_annotations)
        self._check_tools()
        self._messages = [dict(m) for m in messages]
        self._params = params
        self._sp = savepoint
        self._turn: list[ToolUse] = []
        self._results: dict[str, ToolResult] = {}
        self._final: Any = None
        self.session: Any = None
        self.logger = LOGGER

    def _check_tools(self) -> None:
        for t in self.tools.values():
            if t.is_async():
                raise TypeError(f"tool {t.name!r} is async: use anthropic.AsyncAnthropic, whose runner awaits it")

    # -- tools ----------------------------------------------------------------

    def _call(self, tool: DurableTool, tool_input: object) -> Any:
        call = next((c for c in self._turn if c.name == tool.name and c.tool_use_id not in self._results), None)
        if call is None:
            raise SavepointError(f"tool {tool.name!r} called with no pending tool use of that name: Point A did not save it")
        r = self.session.run_tool(call, lambda key: self._run(tool, tool_input, key))
        self._results[call.tool_use_id] = r
        if r.is_error:
            raise ToolError(r.content)
        return r.content

    @staticmethod
    def _run(tool: DurableTool, tool_input: object, key: str) -> ToolContent:
        token = _KEY.set(key)
        try:
            return tool.call(tool_input)  # type: ignore[arg-type,no-any-return]
        finally:
            _KEY.reset(token)

    def _reconcile_run(self, call: ToolUse, key: str) -> ToolContent:
        t = self.tools.get(call.name)
        if t is None:
            raise LookupError(f"no tool named {call.name!r}")
        return self._run(t, json.loads(call.input_json or "{}"), key)

    # -- the loop ---------------------------------------------------------------

    def _open(self, sp: savepoint.Client) -> Any:
        first = self._messages[0].get("content")
        try:
            return sp.start(
                self.session_id,
                first if isinstance(first, str) else "",
                messages=[Message(str(m["role"]), compact_json(m["content"])) for m in self._messages],
            )
        except SessionExistsError:
            pass
        s = sp.resume(self.session_id)
        if s.status == SessionStatus.ACTIVE and s.pending:
            s.point_b(s.reconcile(self._reconcile_run))
        return s

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self._sp, savepoint.Client):
            yield from self._steps(self._sp)
            return
        if isinstance(self._sp, savepoint.aio.AsyncClient):
            raise TypeError("the sync tool runner takes a savepoint.Client (or an address), not an AsyncClient")
        with savepoint.Client(self._sp) as sp:
            yield from self._steps(sp)

    def _steps(self, sp: savepoint.Client) -> Iterator[Any]:
        s = self.session = self._open(sp)
        if s.status == SessionStatus.FAILED:
            raise SessionFailedError(f"session {self.session_id!r} failed: {s.final_output}", "failed")
        final = final_message(s)
        if s.status == SessionStatus.COMPLETED or final is not None:
            content = final if final is not None else [{"type": "text", "text": s.final_output}]
            if s.status != SessionStatus.COMPLETED:
                s.complete(SessionStatus.COMPLETED, text_of(content))
            self._final = _message(content, str(self._params.get("model", "")))
            return
        runner = self.client.beta.messages.tool_runner(
            messages=history(s.messages), tools=[_LedgerTool(self, t) for t in self.tools.values()], thread=False, **self._params
        )
        for message in runner:
            reason, content, calls = self._turn_of(s, message)
            if reason == "refusal":
                s.complete(SessionStatus.FAILED, text_of(content))
                raise RefusalError(f"the model refused: {text_of(content)}", reason)
            s.point_a(Message("assistant", compact_json(content)), calls)
            if calls:
                self._turn, self._results = calls, {}
                # The SDK caches this response: its loop sends it and runs nothing again.
                runner.generate_tool_call_response()
                s.point_b(self._ordered(calls))
            yield message
            if not calls and reason != "pause_turn":
                s.complete(SessionStatus.COMPLETED, text_of(content))
                self._final = message

    def _turn_of(self, s: Any, message: Any) -> tuple[str, list[dict[str, Any]], list[ToolUse]]:
        """A reply's stop reason, exact content and tool uses (with their
        effect classes); counts its tokens; raises for a reply cut off."""
        reason = str(message.stop_reason or "")
        u = message.usage
        s.add_tokens((u.input_tokens or 0) + (u.output_tokens or 0))
        if reason in ("max_tokens", "model_context_window_exceeded"):
            raise StopReasonError(f"the model's reply was cut off (stop_reason {reason}); nothing of it was saved", reason)
        content = content_of(message)
        calls = [
            ToolUse(str(b["id"]), str(b["name"]), compact_json(b.get("input", {})),
                    effect_class=self.tools[b["name"]].effect if b["name"] in self.tools else EffectClass.SIDE_EFFECT)
            for b in tool_uses(content)
        ]
        return reason, content, calls

    def _ordered(self, calls: Sequence[ToolUse]) -> list[ToolResult]:
        return [self._results.get(c.tool_use_id) or ToolResult(c.tool_use_id, "Error: the tool runner did not run this tool", True) for c in calls]

    def until_done(self) -> Any:
        """Run to the final message and return it; a completed session's
        saved final answer without calling the model."""
        for _ in self:
            pass
        if self._final is None:
            raise StopReasonError("the tool runner stopped without a final answer (max_iterations?)", "max_iterations")
        return self._final


class _AsyncLedgerTool(BetaAsyncBuiltinFunctionTool):
    """_LedgerTool for the SDK's async runner."""

    def __init__(self, runner: AsyncDurableToolRunner, tool: DurableTool) -> None:
        self._runner = runner
        self._tool = tool

    def to_dict(self) -> Any:
        return dict(self._tool.definition)

    async def call(self, input: object) -> Any:
        return await self._runner._call(self._tool, input)


class AsyncDurableToolRunner(DurableToolRunner):
    """DurableToolRunner over ``anthropic.AsyncAnthropic`` and
    savepoint.aio.AsyncClient: ``async for message in runner`` or ``await
    runner.until_done()``; tools may be sync or async
    (``@beta_async_tool``)."""

    def _check_tools(self) -> None:
        pass

    async def _call(self, tool: DurableTool, tool_input: object) -> Any:
        call = next((c for c in self._turn if c.name == tool.name and c.tool_use_id not in self._results), None)
        if call is None:
            raise SavepointError(f"tool {tool.name!r} called with no pending tool use of that name: Point A did not save it")
        r = await self.session.run_tool(call, lambda key: self._arun(tool, tool_input, key))
        self._results[call.tool_use_id] = r
        if r.is_error:
            raise ToolError(r.content)
        return r.content

    @staticmethod
    async def _arun(tool: DurableTool, tool_input: object, key: str) -> ToolContent:
        token = _KEY.set(key)
        try:
            out = tool.call(tool_input)  # type: ignore[arg-type]
            if inspect.isawaitable(out):
                out = await out
            return out  # type: ignore[no-any-return]
        finally:
            _KEY.reset(token)

    async def _areconcile_run(self, call: ToolUse, key: str) -> ToolContent:
        t = self.tools.get(call.name)
        if t is None:
            raise LookupError(f"no tool named {call.name!r}")
        return await self._arun(t, json.loads(call.input_json or "{}"), key)

    async def _aopen(self, sp: savepoint.aio.AsyncClient) -> Any:
        first = self._messages[0].get("content")
        try:
            return await sp.start(
                self.session_id,
                first if isinstance(first, str) else "",
                messages=[Message(str(m["role"]), compact_json(m["content"])) for m in self._messages],
            )
        except SessionExistsError:
            pass
        s = await sp.resume(self.session_id)
        if s.status == SessionStatus.ACTIVE and s.pending:
            await s.point_b(await s.reconcile(self._areconcile_run))
        return s

    def __iter__(self) -> Iterator[Any]:
        raise TypeError("an AsyncDurableToolRunner is iterated with async for")

    async def __aiter__(self) -> AsyncIterator[Any]:
        if isinstance(self._sp, savepoint.aio.AsyncClient):
            async for m in self._asteps(self._sp):
                yield m
            return
        if isinstance(self._sp, savepoint.Client):
            raise TypeError("the async tool runner takes a savepoint.aio.AsyncClient (or an address), not a savepoint.Client")
        async with savepoint.aio.AsyncClient(self._sp) as sp:
            async for m in self._asteps(sp):
                yield m

    async def _asteps(self, sp: savepoint.aio.AsyncClient) -> AsyncIterator[Any]:
        s = self.session = await self._aopen(sp)
        if s.status == SessionStatus.FAILED:
            raise SessionFailedError(f"session {self.session_id!r} failed: {s.final_output}", "failed")
        final = final_message(s)
        if s.status == SessionStatus.COMPLETED or final is not None:
            content = final if final is not None else [{"type": "text", "text": s.final_output}]
            if s.status != SessionStatus.COMPLETED:
                await s.complete(SessionStatus.COMPLETED, text_of(content))
            self._final = _message(content, str(self._params.get("model", "")))
            return
        runner = self.client.beta.messages.tool_runner(
            messages=history(s.messages), tools=[_AsyncLedgerTool(self, t) for t in self.tools.values()], thread=False, **self._params
        )
        async for message in runner:
            reason, content, calls = self._turn_of(s, message)
            if reason == "refusal":
                await s.complete(SessionStatus.FAILED, text_of(content))
                raise RefusalError(f"the model refused: {text_of(content)}", reason)
            await s.point_a(Message("assistant", compact_json(content)), calls)
            if calls:
                self._turn, self._results = calls, {}
                await runner.generate_tool_call_response()
                await s.point_b(self._ordered(calls))
            yield message
            if not calls and reason != "pause_turn":
                await s.complete(SessionStatus.COMPLETED, text_of(content))
                self._final = message

    async def until_done(self) -> Any:
        """Run to the final message and return it."""
        async for _ in self:
            pass
        if self._final is None:
            raise StopReasonError("the tool runner stopped without a final answer (max_iterations?)", "max_iterations")
        return self._final


def _message(content: list[dict[str, Any]], model: str) -> Any:
    from anthropic.types.beta import BetaMessage

    return BetaMessage.model_validate({
        "id": "", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0},
    })


def durable_tool_runner(client: Any, session_id: str, **kwargs: Any) -> DurableToolRunner:
    """``client.beta.messages.tool_runner(**kwargs)`` with session
    ``session_id`` in savepointd: a DurableToolRunner for
    ``anthropic.Anthropic`` (``savepoint=`` a savepoint.Client or an
    address), an AsyncDurableToolRunner for ``anthropic.AsyncAnthropic``
    (``savepoint=`` a savepoint.aio.AsyncClient or an address). The tools
    are the same ``@beta_tool`` functions, marked with
    ``durable(effect=...)`` where they are not side-effecting."""
    import anthropic

    if isinstance(client, anthropic.AsyncAnthropic):
        return AsyncDurableToolRunner(client, session_id, **kwargs)
    return DurableToolRunner(client, session_id, **kwargs)
