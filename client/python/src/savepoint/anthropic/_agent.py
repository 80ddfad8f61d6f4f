"""DurableAgent: the seed's agent loop on Anthropic's SDK, with every turn
checkpointed in savepointd (Point A before any tool runs, Point B after) and
every tool's outcome in the ledger."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import savepoint
import savepoint.aio
from savepoint.anthropic._tools import DurableTool, resolve
from savepoint.errors import AwaitingApprovalError, SavepointError, SessionExistsError
from savepoint.types import Message, SessionStatus, ToolContent, ToolResult, ToolUse, compact_json
from savepoint.v1 import savepoint_pb2 as pb

LOGGER = logging.getLogger("savepoint.anthropic")

_KEY: contextvars.ContextVar[str] = contextvars.ContextVar("savepoint_idempotency_key", default="")


def idempotency_key() -> str:
    """The idempotency key of the tool use running now (BeginEffect's, the
    same after a resume), for a tool that passes one to an external API; ""
    for a read-only tool or outside a tool."""
    return _KEY.get()


class AgentError(SavepointError):
    """The agent stopped without a final answer; the session stays as it
    was saved (``stop_reason`` says why)."""

    def __init__(self, message: str, stop_reason: str = "") -> None:
        super().__init__(message)
        self.stop_reason = stop_reason


class MaxTurnsError(AgentError):
    """The session reached max_turns; it stays active, and a run with a
    larger max_turns goes on from where it stopped."""


class StopReasonError(AgentError):
    """The model stopped for max_tokens or model_context_window_exceeded (its
    answer was cut off) or a reason this agent does not know; nothing of that
    reply was saved, so a run with other parameters asks again."""


class RefusalError(AgentError):
    """The model refused (stop_reason "refusal"): the session is marked
    FAILED with the refusal's text, as the API documents that a refused
    conversation should not go on."""


class SessionFailedError(AgentError):
    """The session was marked FAILED earlier; ``final_output`` is its text."""


@dataclass(frozen=True)
class ApprovalRequest:
    """A tool use that waits for a person's approval: its id, tool name and
    input (as the model gave it), and ``input_digest``, the hex SHA-256 the
    daemon binds the approval to (pass ``bytes.fromhex(input_digest)`` to
    Client.approve_effect to decide only for the input shown)."""

    tool_use_id: str
    name: str
    input: Any
    input_digest: str


@dataclass(frozen=True)
class Paused:
    """What ``run()`` returns when a tool use needs a person's approval: the
    session is checkpointed with the turn's tool uses pending (those that
    could run have run and are recorded), and ``waiting`` names the ones
    waiting. Approve or deny each (Client.approve_effect, ``savepoint
    approve SESSION TOOL_USE_ID``, the inspector), then call ``run()``
    again: it resumes the session, runs each approved tool use once, and
    gives a denied one's note to the model as its result."""

    session_id: str
    waiting: tuple[ApprovalRequest, ...]


def _request(call: ToolUse, approval: Any) -> ApprovalRequest:
    return ApprovalRequest(call.tool_use_id, call.name, json.loads(call.input_json or "{}"), bytes(approval.input_digest).hex())


def _waiting(s: Any, resolutions: Sequence[Any], first: AwaitingApprovalError) -> Paused:
    """The Paused of a resume whose reconcile stopped at first: the pending
    tool uses of s (each with its saved input) whose approval waits, as
    Reconcile (with tool_use_ids) reports them, first among them."""
    waits = {r.tool_use.tool_use_id: r.approval for r in resolutions
             if r.HasField("approval") and r.approval.status == pb.APPROVAL_STATUS_WAITING}
    if isinstance(first.call, ToolUse):
        waits.setdefault(first.call.tool_use_id, first.approval)
    return Paused(s.id, tuple(_request(p, waits[p.tool_use_id]) for p in s.pending if p.tool_use_id in waits))


@dataclass
class Usage:
    """Token totals of the model calls this agent made."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def add(self, u: Any) -> None:
        for f in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            setattr(self, f, getattr(self, f) + (getattr(u, f, None) or 0))


def history(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The Messages API's ``messages=`` of a session's history: each saved
    content exactly as it was saved."""
    return [{"role": m.role, "content": json.loads(m.content_json)} for m in messages]


def content_of(resp: Any) -> list[dict[str, Any]]:
    """The content blocks of a Messages API response exactly as the API sent
    them: only the fields it set (no nulls added), thinking blocks with
    their signatures."""
    return [b.to_dict(mode="json") if hasattr(b, "to_dict") else dict(b) for b in resp.content]


def text_of(content: Sequence[Mapping[str, Any]]) -> str:
    """The text blocks of a message's content, joined."""
    return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def tool_uses(content: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [b for b in content if b.get("type") == "tool_use"]


PAUSED = "paused_at"


def final_message(s: savepoint.Session | savepoint.aio.AsyncSession) -> list[dict[str, Any]] | None:
    """The content of the history's last message when it is the model's
    final answer: an assistant message naming no tool that is not a paused
    turn (stop_reason pause_turn, which the agent sends back to go on)."""
    msgs = s.messages
    if not msgs or msgs[-1].role != "assistant":
        return None
    content = json.loads(msgs[-1].content_json)
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if tool_uses(content):
        return None
    state = json.loads(s.state_json) if s.state_json else {}
    if state.get(PAUSED) == len(msgs) - 1:
        return None
    return list(content)


class _Base:
    """What DurableAgent and durable_tool_runner share: the session's tools
    and their effect classes, opening the session (start, or resume and
    reconcile what was pending), the tool uses of a reply, running one tool
    use with its idempotency key, and the checks of a reply's stop reason."""

    session: Any

    def __init__(
        self,
        client: Any,
        session_id: str,
        *,
        tools: Sequence[Any] = (),
        savepoint: Any = None,
        max_turns: int = 50,
        trust_mcp_annotations: bool = False,
        approval_required: Collection[str] = (),
        pause_for_approval: bool = True,
        logger: logging.Logger = LOGGER,
    ) -> None:
        if not session_id:
            raise ValueError("session_id is empty")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, not {max_turns}")
        self.client = client
        self.session_id = session_id
        self.tools: dict[str, DurableTool] = resolve(tools, trust_mcp_annotations)
        self.approval_required = frozenset([approval_required] if isinstance(approval_required, str) else approval_required)
        for name in sorted(self.approval_required - self.tools.keys()):
            raise ValueError(f"approval_required names {name!r}, which is not one of the tools")
        self.pause_for_approval = pause_for_approval
        self.max_turns = max_turns
        self.usage = Usage()
        self.stop_reason = ""
        self.logger = logger
        self._sp = savepoint
        self.session = None

    # -- tools ------------------------------------------------------------------

    def _calls(self, content: Sequence[Mapping[str, Any]]) -> list[ToolUse]:
        """The reply's tool uses, each with its tool's effect class (an
        unknown tool's: SIDE_EFFECT)."""
        out = []
        for b in tool_uses(content):
            t = self.tools.get(str(b["name"]))
            cls = t.effect if t is not None else savepoint_mod.EffectClass.SIDE_EFFECT
            out.append(ToolUse(str(b["id"]), str(b["name"]), compact_json(b.get("input", {})), effect_class=cls))
        return out

    def _tool(self, call: ToolUse) -> DurableTool:
        t = self.tools.get(call.name)
        if t is None:
            raise LookupError(f"no tool named {call.name!r}")
        return t

    def _run_call(self, call: ToolUse, key: str) -> ToolContent:
        """Run the tool of call with its input, idempotency_key() answering
        key."""
        t = self._tool(call)
        token = _KEY.set(key)
        try:
            return t.call(json.loads(call.input_json or "{}"))  # type: ignore[no-any-return]
        finally:
            _KEY.reset(token)

    async def _arun_call(self, call: ToolUse, key: str) -> ToolContent:
        """_run_call for the async loops: an async tool awaited, a sync one in
        a worker thread, so that it blocks neither the loop nor the others."""
        t = self._tool(call)
        args = json.loads(call.input_json or "{}")
        token = _KEY.set(key)
        try:
            # to_thread copies this context, so idempotency_key() answers there too.
            out = t.call(args) if t.is_async() else await asyncio.to_thread(t.call, args)
            if inspect.isawaitable(out):
                out = await out
            return out  # type: ignore[no-any-return]
        finally:
            _KEY.reset(token)

    # -- the session --------------------------------------------------------------

    def _open(self, sp: savepoint_mod.Client, text: str, messages: Sequence[Message]) -> tuple[savepoint_mod.Session, Paused | None]:
        """The session: started with messages, or resumed, what was pending
        answered by Reconcile (the tool run again where it decides RUN) and
        saved at Point B; with Paused instead of that Point B when a pending
        tool use still waits for approval."""
        try:
            s = sp.start(self.session_id, text, messages=messages)
            s.require_approval(self.approval_required)
            return s, None
        except SessionExistsError:
            pass
        s = sp.resume(self.session_id)
        s.require_approval(self.approval_required)
        if s.status == SessionStatus.ACTIVE and s.pending:
            try:
                s.point_b(s.reconcile(self._run_call))
            except AwaitingApprovalError as e:
                if not self.pause_for_approval:
                    raise
                return s, _waiting(s, s.reconcile_tool_uses([p.tool_use_id for p in s.pending]), e)
        return s, None

    async def _aopen(self, sp: savepoint_mod.aio.AsyncClient, text: str, messages: Sequence[Message]) -> tuple[savepoint_mod.aio.AsyncSession, Paused | None]:
        """_open over savepoint.aio."""
        try:
            s = await sp.start(self.session_id, text, messages=messages)
            s.require_approval(self.approval_required)
            return s, None
        except SessionExistsError:
            pass
        s = await sp.resume(self.session_id)
        s.require_approval(self.approval_required)
        if s.status == SessionStatus.ACTIVE and s.pending:
            try:
                await s.point_b(await s.reconcile(self._arun_call))
            except AwaitingApprovalError as e:
                if not self.pause_for_approval:
                    raise
                return s, _waiting(s, await s.reconcile_tool_uses([p.tool_use_id for p in s.pending]), e)
        return s, None

    def _ended(self, s: Any) -> tuple[list[dict[str, Any]] | None, bool]:
        """The final answer's content when the session has one, and whether
        the session must still be completed with it (its history ends in the
        final answer, saved before a crash); (None, False) while it goes on.
        A failed session raises SessionFailedError."""
        if s.status == SessionStatus.FAILED:
            raise SessionFailedError(f"session {self.session_id!r} failed: {s.final_output}", "failed")
        final = final_message(s)
        if s.status == SessionStatus.COMPLETED:
            return final if final is not None else [{"type": "text", "text": s.final_output}], False
        return final, final is not None

    def _paused(self, waiting: Sequence[AwaitingApprovalError]) -> Paused:
        """The Paused of a turn whose tool uses in waiting wait for approval
        (with pause_for_approval False: the first one's AwaitingApprovalError
        raised instead, as before pausing existed)."""
        if not self.pause_for_approval:
            raise waiting[0]
        return Paused(self.session_id, tuple(_request(e.call, e.approval) for e in waiting if isinstance(e.call, ToolUse)))

    # -- replies ------------------------------------------------------------------

    def _params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        for k in ("messages", "stream"):
            if k in params:
                raise TypeError(f"run() takes no {k}=: the session's history is the messages, and replies are not streamed")
        p = dict(params)
        defs = [dict(t.definition) for t in self.tools.values()]
        if defs or "tools" in p:
            p["tools"] = [*p.get("tools", []), *defs]
        return p

    def _api(self, params: Mapping[str, Any]) -> Any:
        """client.messages, or client.beta.messages when betas are given
        (only the beta endpoint takes them)."""
        return self.client.beta.messages if "betas" in params else self.client.messages

    def _check_turns(self, s: Any) -> None:
        if s.turn >= self.max_turns:
            raise MaxTurnsError(f"session {self.session_id!r} reached max_turns={self.max_turns} without a final answer", "max_turns")

    def _classify(self, resp: Any, *, known_only: bool = True) -> tuple[str, list[dict[str, Any]]]:
        """The reply's stop reason and exact content, its tokens counted;
        raises for a reply that must not be saved: cut off, or (known_only)
        with a stop reason this agent does not know."""
        u = getattr(resp, "usage", None)
        self.usage.add(u)
        if self.session is not None:
            self.session.add_tokens((getattr(u, "input_tokens", 0) or 0) + (getattr(u, "output_tokens", 0) or 0))
        reason = str(getattr(resp, "stop_reason", "") or "")
        self.stop_reason = reason
        if reason in ("max_tokens", "model_context_window_exceeded"):
            raise StopReasonError(
                f"the model's reply was cut off (stop_reason {reason}); nothing of it was saved: run again with a larger max_tokens", reason
            )
        if known_only and reason not in ("end_turn", "stop_sequence", "tool_use", "pause_turn", "refusal"):
            raise StopReasonError(f"unknown stop_reason {reason!r}; nothing of the reply was saved", reason)
        return reason, content_of(resp)

    def _refused(self, content: Sequence[Mapping[str, Any]]) -> RefusalError:
        return RefusalError(f"the model refused: {text_of(content)}", "refusal")


class DurableAgent(_Base):
    """An agent on ``anthropic.Anthropic`` whose session lives in savepointd.

    ``run(task, **params)`` creates the session ``session_id`` with the task
    as its first user message, or resumes it (Reconcile answers the tool uses
    that were pending, then Point B) and goes on; a completed session
    returns its final answer without calling the model. Each turn calls
    ``client.messages.create(messages=<the history>, tools=<the tools>,
    **params)``, saves the reply at Point A with each of its tool uses
    pending, runs each tool through the ledger (BeginEffect unless
    read-only, the tool, RecordEffect) and saves their results at Point B,
    until the model answers without tools: that answer is saved, the session
    completed, and its text returned. ``savepoint`` is a savepoint.Client,
    an address, or None for the default address. A tool use of a tool in
    ``approval_required`` waits for a person's approval: run() then returns
    Paused (with ``pause_for_approval=False``, deprecated, it raises
    AwaitingApprovalError as before)."""

    def __init__(self, client: Any, session_id: str, *, tools: Sequence[Any] = (), savepoint: savepoint.Client | str | None = None, max_turns: int = 50, trust_mcp_annotations: bool = False, approval_required: Collection[str] = (), pause_for_approval: bool = True, logger: logging.Logger = LOGGER) -> None:
        super().__init__(client, session_id, tools=tools, savepoint=savepoint, max_turns=max_turns, trust_mcp_annotations=trust_mcp_annotations,
                         approval_required=approval_required, pause_for_approval=pause_for_approval, logger=logger)
        for t in self.tools.values():
            if t.is_async():
                raise TypeError(f"tool {t.name!r} is async: use AsyncDurableAgent")
        self.session: savepoint_mod.Session | None = None

    def run(self, task: str | Sequence[Mapping[str, Any]], **params: Any) -> str | Paused:
        """Run the task to its final answer and return its text; or return
        Paused when a tool use waits for a person's approval (run again once
        it is decided)."""
        p = self._params(params)
        if isinstance(self._sp, savepoint_mod.Client):
            return self._run(self._sp, task, p)
        with savepoint_mod.Client(self._sp) as sp:
            return self._run(sp, task, p)

    def _run(self, sp: savepoint_mod.Client, task: Any, params: dict[str, Any]) -> str | Paused:
        s, paused = self._open(sp, *_first(task))
        self.session = s
        if paused is not None:
            return paused
        while True:
            final, complete = self._ended(s)
            if final is not None:
                if complete:
                    s.complete(SessionStatus.COMPLETED, text_of(final))
                return s.final_output
            self._check_turns(s)
            reason, content = self._classify(self._api(params).create(messages=history(s.messages), **params))
            if reason == "refusal":
                s.complete(SessionStatus.FAILED, text_of(content))
                raise self._refused(content)
            calls = self._calls(content)
            if reason == "pause_turn" and not calls:
                s.save(state_json=compact_json({PAUSED: s.message_count}))
            s.point_a(Message("assistant", compact_json(content)), calls)
            if calls:
                results: list[ToolResult] = []
                waiting: list[AwaitingApprovalError] = []
                for c in calls:
                    try:
                        results.append(s.run_tool(c, functools.partial(self._run_call, c)))
                    except AwaitingApprovalError as e:
                        waiting.append(e)
                if waiting:
                    return self._paused(waiting)
                s.point_b(results)


class AsyncDurableAgent(_Base):
    """DurableAgent over ``anthropic.AsyncAnthropic`` and
    savepoint.aio.AsyncClient: ``await agent.run(task, **params)``. Tools
    may be sync or async (``@beta_async_tool``); the tools of one turn run
    concurrently (a sync tool in a worker thread, so that it blocks neither
    the loop nor the others), each begun before it runs and recorded after
    it returns, as the TypeScript SDK's tool runner runs them."""

    def __init__(self, client: Any, session_id: str, *, tools: Sequence[Any] = (), savepoint: savepoint.aio.AsyncClient | str | None = None, max_turns: int = 50, trust_mcp_annotations: bool = False, approval_required: Collection[str] = (), pause_for_approval: bool = True, logger: logging.Logger = LOGGER) -> None:
        super().__init__(client, session_id, tools=tools, savepoint=savepoint, max_turns=max_turns, trust_mcp_annotations=trust_mcp_annotations,
                         approval_required=approval_required, pause_for_approval=pause_for_approval, logger=logger)
        self.session: savepoint_mod.aio.AsyncSession | None = None

    async def run(self, task: str | Sequence[Mapping[str, Any]], **params: Any) -> str | Paused:
        """Run the task to its final answer and return its text; or return
        Paused when a tool use waits for a person's approval."""
        p = self._params(params)
        if isinstance(self._sp, savepoint_mod.aio.AsyncClient):
            return await self._run(self._sp, task, p)
        async with savepoint_mod.aio.AsyncClient(self._sp) as sp:
            return await self._run(sp, task, p)

    async def _run(self, sp: savepoint_mod.aio.AsyncClient, task: Any, params: dict[str, Any]) -> str | Paused:
        s, paused = await self._aopen(sp, *_first(task))
        self.session = s
        if paused is not None:
            return paused
        while True:
            final, complete = self._ended(s)
            if final is not None:
                if complete:
                    await s.complete(SessionStatus.COMPLETED, text_of(final))
                return s.final_output
            self._check_turns(s)
            reason, content = self._classify(await self._api(params).create(messages=history(s.messages), **params))
            if reason == "refusal":
                await s.complete(SessionStatus.FAILED, text_of(content))
                raise self._refused(content)
            calls = self._calls(content)
            if reason == "pause_turn" and not calls:
                await s.save(state_json=compact_json({PAUSED: s.message_count}))
            await s.point_a(Message("assistant", compact_json(content)), calls)
            if calls:
                # Concurrently; a call that could not run (fenced) is raised
                # once the others have finished and been recorded.
                outs = await asyncio.gather(*(s.run_tool(c, functools.partial(self._arun_call, c)) for c in calls), return_exceptions=True)
                for o in outs:
                    if isinstance(o, BaseException) and not isinstance(o, AwaitingApprovalError):
                        raise o
                waiting = [o for o in outs if isinstance(o, AwaitingApprovalError)]
                if waiting:
                    return self._paused(waiting)
                await s.point_b(list(outs))  # type: ignore[arg-type]


def _first(task: str | Sequence[Mapping[str, Any]]) -> tuple[str, list[Message]]:
    """A new session's task text and first message: the task as the user's
    message (text, or content blocks)."""
    if isinstance(task, str):
        return task, [Message("user", compact_json(task))]
    return text_of(task), [Message("user", compact_json(list(task)))]


savepoint_mod = savepoint
