"""durable_tool_runner: the SDK's own tool runner
(``client.beta.messages.tool_runner``) with its session in savepointd."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from typing import Any

from anthropic.lib.tools import BetaAsyncBuiltinFunctionTool, BetaBuiltinFunctionTool, ToolError

import savepoint
import savepoint.aio
from savepoint.anthropic._agent import Paused, StopReasonError, _Base, history, text_of
from savepoint.anthropic._tools import DurableTool
from savepoint.errors import AwaitingApprovalError, SavepointError
from savepoint.types import Message, SessionStatus, ToolResult, ToolUse, compact_json


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


class DurableToolRunner(_Base):
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
        approval_required: Collection[str] = (),
        pause_for_approval: bool = True,
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
        super().__init__(
            client, session_id, tools=tools, savepoint=savepoint, trust_mcp_annotations=trust_mcp_annotations,
            approval_required=approval_required, pause_for_approval=pause_for_approval,
        )
        if not messages:
            raise ValueError("messages is empty: the first user message starts the session")
        self._check_tools()
        self._messages = [dict(m) for m in messages]
        self._sdk_params = params
        self._turn: list[ToolUse] = []
        self._results: dict[str, ToolResult] = {}
        self._waiting: list[AwaitingApprovalError] = []
        self._final: Any = None
        self.paused: Paused | None = None
        """Set when the iteration stopped because tool uses wait for approval."""

    def _check_tools(self) -> None:
        for t in self.tools.values():
            if t.is_async():
                raise TypeError(f"tool {t.name!r} is async: use anthropic.AsyncAnthropic, whose runner awaits it")

    def _first(self) -> tuple[str, list[Message]]:
        """A new session's task text (the first message's, when it is text)
        and its messages."""
        first = self._messages[0].get("content")
        return first if isinstance(first, str) else "", [Message(str(m["role"]), compact_json(m["content"])) for m in self._messages]

    # -- tools ----------------------------------------------------------------

    def _next(self, tool: DurableTool) -> ToolUse:
        """The next tool use of the turn named for tool that has no result
        yet: the runner calls a reply's tools in the order of its tool_use
        blocks, without their ids."""
        call = next((c for c in self._turn if c.name == tool.name and c.tool_use_id not in self._results), None)
        if call is None:
            raise SavepointError(f"tool {tool.name!r} called with no pending tool use of that name: Point A did not save it")
        return call

    def _kept(self, r: ToolResult) -> Any:
        """Keep r for Point B and give the SDK's runner its content (or, for
        an error, the ToolError it turns into an is_error result)."""
        self._results[r.tool_use_id] = r
        if r.is_error:
            raise ToolError(r.content)  # type: ignore[arg-type]
        return r.content

    def _waits(self, call: ToolUse, e: AwaitingApprovalError) -> ToolError:
        """Note call as waiting for approval: its result is not kept (the turn
        pauses before Point B), and the SDK's runner gets an error result it
        never sends."""
        self._waiting.append(e)
        self._results[call.tool_use_id] = ToolResult(call.tool_use_id, "waiting for approval", True)
        return ToolError(f"tool use {call.tool_use_id} waits for approval")

    def _call(self, tool: DurableTool, tool_input: object) -> Any:
        call = self._next(tool)
        try:
            r = self.session.run_tool(call, functools.partial(self._run_call, call))
        except AwaitingApprovalError as e:
            raise self._waits(call, e) from None
        return self._kept(r)

    # -- the loop ---------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self._sp, savepoint.Client):
            yield from self._steps(self._sp)
            return
        if isinstance(self._sp, savepoint.aio.AsyncClient):
            raise TypeError("the sync tool runner takes a savepoint.Client (or an address), not an AsyncClient")
        with savepoint.Client(self._sp) as sp:
            yield from self._steps(sp)

    def _ended_here(self, s: Any) -> tuple[list[dict[str, Any]] | None, bool]:
        """_ended, keeping the final answer as the message until_done returns."""
        final, complete = self._ended(s)
        if final is not None:
            self._final = _message(final, str(self._sdk_params.get("model", "")))
        return final, complete

    def _runner(self, s: Any, tool: type[Any]) -> Any:
        return self.client.beta.messages.tool_runner(
            messages=history(s.messages), tools=[tool(self, t) for t in self.tools.values()], thread=False, **self._sdk_params
        )

    def _turn_of(self, message: Any) -> tuple[str, list[dict[str, Any]], list[ToolUse]]:
        """A reply's stop reason, exact content and tool uses (with their
        effect classes); counts its tokens; raises for a reply cut off."""
        reason, content = self._classify(message, known_only=False)
        calls = self._calls(content)
        self._turn, self._results, self._waiting = calls, {}, []
        return reason, content, calls

    def _steps(self, sp: savepoint.Client) -> Iterator[Any]:
        s, self.paused = self._open(sp, *self._first())
        self.session = s
        if self.paused is not None:
            return
        final, complete = self._ended_here(s)
        if final is not None:
            if complete:
                s.complete(SessionStatus.COMPLETED, text_of(final))
            return
        runner = self._runner(s, _LedgerTool)
        for message in runner:
            reason, content, calls = self._turn_of(message)
            if reason == "refusal":
                s.complete(SessionStatus.FAILED, text_of(content))
                raise self._refused(content)
            s.point_a(Message("assistant", compact_json(content)), calls)
            if calls:
                # The SDK caches this response: its loop sends it and runs nothing again.
                runner.generate_tool_call_response()
                if self._waiting:
                    self.paused = self._paused(self._waiting)
                    yield message
                    return
                s.point_b(self._ordered(calls))
            yield message
            if not calls and reason != "pause_turn":
                s.complete(SessionStatus.COMPLETED, text_of(content))
                self._final = message

    def _ordered(self, calls: Sequence[ToolUse]) -> list[ToolResult]:
        return [self._results.get(c.tool_use_id) or ToolResult(c.tool_use_id, "Error: the tool runner did not run this tool", True) for c in calls]

    def until_done(self) -> Any:
        """Run to the final message and return it; a completed session's
        saved final answer without calling the model; Paused when tool uses
        wait for approval (call again once they are decided)."""
        for _ in self:
            pass
        return self._done()

    def _done(self) -> Any:
        if self.paused is not None:
            return self.paused
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
        return await self._runner._acall(self._tool, input)


class AsyncDurableToolRunner(DurableToolRunner):
    """DurableToolRunner over ``anthropic.AsyncAnthropic`` and
    savepoint.aio.AsyncClient: ``async for message in runner`` or ``await
    runner.until_done()``; tools may be sync (run in a worker thread) or
    async (``@beta_async_tool``)."""

    def _check_tools(self) -> None:
        pass

    async def _acall(self, tool: DurableTool, tool_input: object) -> Any:
        call = self._next(tool)
        try:
            r = await self.session.run_tool(call, functools.partial(self._arun_call, call))
        except AwaitingApprovalError as e:
            raise self._waits(call, e) from None
        return self._kept(r)

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
        s, self.paused = await self._aopen(sp, *self._first())
        self.session = s
        if self.paused is not None:
            return
        final, complete = self._ended_here(s)
        if final is not None:
            if complete:
                await s.complete(SessionStatus.COMPLETED, text_of(final))
            return
        runner = self._runner(s, _AsyncLedgerTool)
        async for message in runner:
            reason, content, calls = self._turn_of(message)
            if reason == "refusal":
                await s.complete(SessionStatus.FAILED, text_of(content))
                raise self._refused(content)
            await s.point_a(Message("assistant", compact_json(content)), calls)
            if calls:
                await runner.generate_tool_call_response()
                if self._waiting:
                    self.paused = self._paused(self._waiting)
                    yield message
                    return
                await s.point_b(self._ordered(calls))
            yield message
            if not calls and reason != "pause_turn":
                await s.complete(SessionStatus.COMPLETED, text_of(content))
                self._final = message

    async def until_done(self) -> Any:
        """Run to the final message and return it (or Paused)."""
        async for _ in self:
            pass
        return self._done()


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
