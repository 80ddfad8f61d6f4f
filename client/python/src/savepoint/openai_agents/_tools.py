"""durable_function_tool: the SDK's function tools with savepointd's
side-effects ledger, in a run whose session is a SavepointSession.

Each call follows docs/protocol.md for its own tool use: saved pending (and
listed in the session's state_json with the process running it) before the
tool starts, BeginEffect unless read-only, the tool, RecordEffect of its real
outcome, then a save that stops it pending. The SDK saves the call and its
output to the session after its tools return; a process killed before that
leaves the call listed, and the next get_items by any process answers it
(the recorded output, a re-run where that is safe, or the in-doubt text) and
appends the call with its answer, so the history never holds a
function_call without exactly one function_call_output.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import socket
import uuid
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from agents import FunctionTool, ItemHelpers, function_tool
from agents.run_context import RunContextWrapper
from agents.tool import ToolErrorFunction, default_tool_error_function
from agents.tool_context import ToolContext

from savepoint import EffectClass
from savepoint._core import denied_text
from savepoint.errors import ApprovalConflictError, ApprovalNotWaitingError, DurableToolError, SavepointError, SessionFencedError
from savepoint.types import Verified, VerifyStatus, compact_json, tool_content
from savepoint.openai_agents._revision import Change, View
from savepoint.v1 import savepoint_pb2 as pb

if TYPE_CHECKING:  # for annotations only: _session imports this module
    from savepoint.openai_agents._session import SavepointSession

Effect = Literal["read_only", "idempotent", "side_effect"]
"""What running a tool does: re-running a read-only tool is always safe, an
idempotent one is safe with the same idempotency key, a side-effecting one
must not run twice."""

_CLASSES = {"read_only": EffectClass.READ_ONLY, "idempotent": EffectClass.IDEMPOTENT, "side_effect": EffectClass.SIDE_EFFECT}
_RESOLVED_KEPT = 100  # calls answered on resume, remembered to drop the SDK's late copy of them
LOGGER = logging.getLogger("savepoint.openai_agents")

_KEY: ContextVar[str] = ContextVar("savepoint_openai_agents_idempotency_key", default="")


def idempotency_key() -> str:
    """The idempotency key of the durable tool call running in this context:
    the same on every run of one call (pass it to an API that accepts one),
    empty for a read-only tool or outside a durable tool."""
    return _KEY.get()


VerifyHook = Callable[[str, Any], "Verified | Awaitable[Verified]"]
"""A durable tool's verify hook: given the idempotency key of a call in doubt
and its arguments (parsed), it returns savepoint.Verified.done(output),
.not_done() or .unknown(); it may be a coroutine function."""


@dataclass
class _Durable:
    tool: FunctionTool
    invoke: Callable[[ToolContext[Any], str], Awaitable[Any]]  # the SDK's own invoker, raising on failure
    effect: EffectClass
    on_error: ToolErrorFunction | None
    verify: VerifyHook | None = None
    repeatable: bool = False
    approval: bool = False  # the tool has the SDK's needs_approval: its begins require an approval
    policy: Any = False  # the SDK's needs_approval as given: a bool, or a policy (ctx, params, call_id) -> bool


_REGISTRY: dict[str, _Durable] = {}  # by tool name: what a resume may re-run
_LIVE: set[tuple[str, str]] = set()  # (session_id, call_id) of the calls this process is running
_ASKED: dict[tuple[str, str], pb.BeginEffectResponse] = {}  # (session_id, call_id) -> a begin an approval ask made that ran it
_RUNS: dict[int, tuple[weakref.ref[Any], SavepointSession]] = {}  # id(run's Usage) -> its session
_SESSIONS: weakref.WeakSet[SavepointSession] = weakref.WeakSet()  # every SavepointSession of this process


# -- which session a tool call belongs to -------------------------------------


def bind_run(wrapper: RunContextWrapper[Any] | None, session: SavepointSession) -> None:
    """Remember that the run of ``wrapper`` uses ``session``: the SDK gives
    the session its RunContextWrapper, and each ToolContext of the run shares
    the wrapper's Usage object."""
    if wrapper is None:
        return
    usage = wrapper.usage
    key = id(usage)
    ref = _RUNS.get(key)
    if ref is not None and ref[0]() is usage and ref[1] is session:
        return
    _RUNS[key] = (weakref.ref(usage, lambda _r, k=key: _RUNS.pop(k, None)), session)  # type: ignore[misc]


def register(s: SavepointSession) -> None:
    """Remember s, a SavepointSession of this process, for _session_of."""
    _SESSIONS.add(s)


async def _session_of(ctx: RunContextWrapper[Any], call_id: str) -> SavepointSession | None:
    """The SavepointSession of ctx's run (ctx is a call's ToolContext, or the
    run's RunContextWrapper that an approval policy is given). A run resumed
    from a RunState runs (and asks the approval of) its interrupted tools
    before it calls its session, so its Usage is not bound yet: its session
    is then the one SavepointSession of this process whose history holds
    call_id's function_call (the interrupted run saved it), which is bound
    to the run from then on; None when no session, or several, hold it."""
    ref = _RUNS.get(id(ctx.usage))
    if ref is not None and ref[0]() is ctx.usage:
        return ref[1]
    found: dict[str, SavepointSession] = {}
    for s in list(_SESSIONS):
        if s._closed or s.session_id in found:
            continue
        items = (await s._load(history=True)).items or []
        if any(it.get("type") == "function_call" and it.get("call_id") == call_id for it in items):
            found[s.session_id] = s
    if len(found) != 1:
        return None
    (s,) = found.values()
    bind_run(ctx, s)
    return s


# -- which process runs a call ------------------------------------------------


def _start_time(pid: int) -> str:
    """The start time of process pid (in clock ticks since boot), which with
    the pid names one process; empty when it is not running or unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _owner() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _start_time(pid)}


def _interrupted(session_id: str, call_id: str, c: dict[str, Any]) -> bool:
    """Whether a listed call's process stopped without the SDK saving it: its
    process is this one and no longer runs it, or is gone from this host. A
    call listed by a process on another host counts as interrupted (its
    answer is then the in-doubt text or the recorded output, never a second
    run of a side effect: see _begin's already_begun check)."""
    o = c.get("owner") or {}
    me = _owner()
    if o.get("host") != me["host"]:
        return True
    if o.get("pid") == me["pid"] and o.get("start") == me["start"]:
        return (session_id, call_id) not in _LIVE
    pid = o.get("pid")
    return not isinstance(pid, int) or _start_time(pid) != o.get("start")


# -- the effect calls ---------------------------------------------------------


def _in_doubt(name: str, call_id: str, why: str) -> str:
    return (
        f"The outcome of this {name} call (tool_use_id {call_id}) is unknown: {why}. "
        "It was not run again, to avoid repeating a side effect. Check whether it took effect before retrying it."
    )


def _blocks(out: Any) -> list[dict[str, Any]] | None:
    """The SDK's structured tool output (ToolOutputText, ToolOutputImage,
    ToolOutputFileContent, or their dicts with a ``type``; one or a list) as
    JSON objects; None for any other value."""
    from agents import ToolOutputFileContent, ToolOutputImage, ToolOutputText

    models = (ToolOutputText, ToolOutputImage, ToolOutputFileContent)
    items = list(out) if isinstance(out, (list, tuple)) else [out] if isinstance(out, models) else []
    blocks: list[dict[str, Any]] = []
    for it in items:
        if isinstance(it, models):
            blocks.append(it.model_dump(mode="json", exclude_none=True))
        elif isinstance(it, dict) and isinstance(it.get("type"), str) and ItemHelpers._maybe_get_output_as_structured_function_output(it) is not None:
            blocks.append(dict(it))
        else:
            return None
    return blocks or None


def _content(text: str) -> Any:
    """What the SDK gets for a tool's recorded text: its structured output
    (the list of output dicts) when the text is their JSON array, by the
    ledger's rule every client reads (savepoint.types.tool_content), else the
    text."""
    return tool_content(text)


def _history_output(text: str) -> Any:
    """A function_call_output item's ``output`` for a recorded text: the
    Responses API's input_text/input_image/input_file list for structured
    output, else the text."""
    return ItemHelpers._convert_tool_output(tool_content(text))


def _text(out: Any) -> str:
    """A tool's return value as the text recorded: text as it is,
    structured output (text, image, file) as its JSON array, another value
    as JSON or its str."""
    if isinstance(out, str):
        return out
    blocks = _blocks(out)
    if blocks is not None:
        return compact_json(blocks)
    dump = getattr(out, "model_dump_json", None)
    if callable(dump):
        return cast(str, dump())
    try:
        return json.dumps(out, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(out)


async def _epoch(s: SavepointSession) -> int:
    v = s._cached
    if v is None:
        v = await s._load(history=False)
    return v.epoch


async def _begin(s: SavepointSession, call_id: str, requires_approval: bool = False) -> pb.BeginEffectResponse:
    """BeginEffect with the session's current epoch (a SavepointSession
    never owns the session, so a takeover by Resume is followed, not
    obeyed): the idempotency key, already_begun, and duplicate when the
    daemon's duplicate-intent guard caught the call; for a call that
    requires approval, its decision is AWAIT_APPROVAL or DENIED when it
    was not begun."""
    for _ in range(5):
        try:
            return await s.client().raw.BeginEffect(
                pb.BeginEffectRequest(session_id=s.session_id, tool_use_id=call_id, epoch=await _epoch(s), requires_approval=requires_approval)
            )
        except SessionFencedError:
            await s._load(history=False)
    raise DurableToolError(f"BeginEffect of tool use {call_id!r} was fenced five times in a row; it was not run.")


async def _record(s: SavepointSession, call_id: str, name: str, text: str, is_error: bool) -> bool:
    """RecordEffect of a tool's real outcome, tried twice; a record that
    still fails is logged (the tool ran: its result is kept and returned, and
    a resume will answer the call in doubt)."""
    req = pb.RecordEffectRequest(session_id=s.session_id, tool_use_id=call_id, name=name, output=text, is_error=is_error)
    for attempt in (1, 2):
        try:
            await s.client().raw.RecordEffect(req)
            return True
        except SavepointError as e:
            if attempt == 2:
                LOGGER.error(
                    "savepoint: the outcome of tool use %s (%s) could not be recorded; it ran, and a resume will report it "
                    "in doubt: %s", call_id, name, e,
                )
    return False


async def _execute(s: SavepointSession, d: _Durable, ctx: ToolContext[Any], call_id: str, args: str, key: str) -> tuple[str, Exception | None]:
    """Run the tool with its key, record its outcome, and stop it pending."""
    token = _KEY.set(key)
    err: Exception | None = None
    try:
        text = _text(await d.invoke(ctx, args))
    except Exception as e:  # the tool ran and failed: a fact, recorded as such
        err = e
        msg: Any = (d.on_error or default_tool_error_function)(ctx, e)
        if inspect.isawaitable(msg):
            msg = await msg
        text = _text(msg)
    finally:
        _KEY.reset(token)
    if await _record(s, call_id, d.tool.name, text, err is not None):
        await _settled(s, call_id)
    return text, err


async def _settled(s: SavepointSession, call_id: str) -> None:
    """Stop call_id pending: the ledger holds its answer (its recorded
    outcome, or the earlier call it duplicates)."""

    def recorded(v: View) -> Change | None:
        part = v.part()
        calls = part.get("calls", {})
        if call_id not in calls:
            return None
        calls[call_id]["recorded"] = True
        return Change(pending=[p for p in v.pending if p.tool_use_id != call_id], state_json=v.with_part(part))

    await s.mutate(recorded)


async def _approve(s: SavepointSession, call_id: str) -> None:
    """Record in savepointd the approval the SDK's RunState holds for
    call_id (RunState.approve), bound to the call's input as it is pending;
    the begin that follows spends it. A call denied in savepointd meanwhile
    keeps its denial (the begin answers DENIED)."""
    req = pb.ApproveEffectRequest(
        session_id=s.session_id, tool_use_id=call_id, decision=pb.APPROVAL_STATUS_APPROVED,
        decided_by="openai-agents RunState.approve", request_id=str(uuid.uuid4()),
    )
    try:
        await s.client().raw.ApproveEffect(req)
    except (ApprovalConflictError, ApprovalNotWaitingError):
        pass  # denied meanwhile, or begun already: the begin answers


async def _refuse(s: SavepointSession, call_id: str, name: str, text: str) -> str:
    """Record a denied call as refused, stop it pending, and return the
    text the model is given."""
    try:
        await s.client().raw.RecordEffect(
            pb.RecordEffectRequest(session_id=s.session_id, tool_use_id=call_id, name=name, output=text, is_error=True, refused=True)
        )
    except SavepointError as e:
        LOGGER.warning("savepoint: the denial of tool use %s (%s) could not be recorded: %s", call_id, name, e)
    else:
        await _settled(s, call_id)
    return text


def _tool_use(d: _Durable, call_id: str, args: str) -> pb.ToolUse:
    return pb.ToolUse(
        tool_use_id=call_id, name=d.tool.name, input_json=args or "{}", effect_class=cast(pb.EffectClass, int(d.effect)),
        begin_tracked=d.effect != EffectClass.READ_ONLY, repeatable=d.repeatable,
    )


async def _ask(s: SavepointSession, d: _Durable, call_id: str, args: str) -> bool:
    """Register with savepointd a call the SDK is about to stop the run for
    (its approval policy said yes): saved pending and listed waiting, then
    BeginEffect with requires_approval, which the daemon answers
    AWAIT_APPROVAL (the call counts as waiting in ListSessions,
    WatchSessions and the inspector) until someone decides. Returns whether
    the SDK should still ask: True while it waits; False once decided in
    savepointd (``savepoint approve``, or an approval spent by an earlier
    run), so the SDK invokes the tool, whose run answers the denial or runs
    under the begin made here."""

    def listed(v: View) -> Change | None:
        part = v.part()
        calls = part.setdefault("calls", {})
        c = calls.get(call_id)
        if c is not None:
            return None if c.get("waiting") else Change(nothing=True, result="running")
        calls[call_id] = {"name": d.tool.name, "arguments": args, "owner": _owner(), "waiting": True}
        return Change(pending=[*v.pending, _tool_use(d, call_id, args)], state_json=v.with_part(part))

    if await s.mutate(listed) == "running":
        return False  # run (or interrupted) already: its own run answers it
    b = await _begin(s, call_id, True)
    if b.decision == pb.DECISION_AWAIT_APPROVAL:
        return True
    if b.decision == pb.DECISION_RUN and not b.HasField("duplicate"):
        _ASKED[(s.session_id, call_id)] = b  # begun (the approval spent): the tool's run must not begin it again
    return False


async def record_rejections(s: SavepointSession, items: list[Any]) -> None:
    """Record the SDK's rejection (RunState.reject) of each call waiting for
    approval whose function_call_output ``items`` brings (the SDK answers a
    rejected call without invoking its tool): a denial (ApproveEffect, the
    output as its note, decided_by "openai-agents RunState.reject"), then
    the call recorded as refused with that output, so a resume or a replay
    reuses it and never runs the call. A call approved in savepointd
    meanwhile keeps that approval unspent, and is recorded refused all the
    same: this run gave the model the rejection."""
    outs = {it.get("call_id"): it.get("output") for it in items if isinstance(it, dict) and it.get("type") == "function_call_output"}
    if not outs:
        return
    v = s._cached
    if v is None or any(c.get("waiting") for c in v.part().get("calls", {}).values()):
        v = await s._load(history=False)
    calls = v.part().get("calls", {})
    for cid, out in outs.items():
        c = calls.get(cid)
        if not c or not c.get("waiting"):
            continue
        text = out if isinstance(out, str) else _text(out)
        req = pb.ApproveEffectRequest(
            session_id=s.session_id, tool_use_id=str(cid), decision=pb.APPROVAL_STATUS_DENIED, note=text,
            decided_by="openai-agents RunState.reject", request_id=str(uuid.uuid4()),
        )
        try:
            await s.client().raw.ApproveEffect(req)
        except (ApprovalConflictError, ApprovalNotWaitingError) as e:
            LOGGER.warning("savepoint: the rejection of tool use %s was not recorded as a denial: %s", cid, e)
        try:
            await s.client().raw.RecordEffect(pb.RecordEffectRequest(
                session_id=s.session_id, tool_use_id=str(cid), name=str(c.get("name", "")), output=text, is_error=True, refused=True,
            ))
        except SavepointError as e:
            LOGGER.warning("savepoint: the rejection of tool use %s could not be recorded: %s", cid, e)


async def apply_decisions(state: Any, session: SavepointSession) -> list[Any]:
    """Give ``state`` (the SDK's RunState of a run stopped for approval) the
    decisions savepointd holds for its interruptions that are durable calls
    of ``session``: each one approved (``savepoint approve``, the inspector,
    Client.approve_effect) is ``state.approve``d, each one denied is
    ``state.reject``ed with the text a denial gives the model (the
    approver's note). An approval spent already is applied too: the run
    then answers the call as begun (in doubt, or its recorded output)
    and never runs it again. Call it before ``Runner.run(agent, state,
    session=session)``. Returns the interruptions it decided; the others
    still wait (for ``state.approve``/``state.reject``, or a decision made
    later)."""
    items = [it for it in state.get_interruptions() if getattr(it, "call_id", None)]
    ids = {str(it.call_id) for it in items}
    if not ids:
        return []
    entries: dict[str, pb.LedgerEntry] = {}
    token = ""
    while True:
        r = await session.client().raw.ListEffects(pb.ListEffectsRequest(session_id=session.session_id, page_token=token))
        entries.update((e.tool_use_id, e) for e in r.entries if e.tool_use_id in ids)
        token = r.next_page_token
        if not token:
            break
    decided = []
    for it in items:
        e = entries.get(str(it.call_id))
        if e is None or not e.HasField("approval"):
            continue
        if e.approval.status == pb.APPROVAL_STATUS_APPROVED:
            state.approve(it)
        elif e.approval.status == pb.APPROVAL_STATUS_DENIED:
            state.reject(it, rejection_message=denied_text(e.approval))
        else:
            continue
        decided.append(it)
    return decided


async def _run_call(s: SavepointSession, d: _Durable, ctx: ToolContext[Any], call_id: str, args: str) -> Any:
    name = d.tool.name
    tu = _tool_use(d, call_id, args)
    asked = _ASKED.pop((s.session_id, call_id), None)
    waited = False

    def point_a(v: View) -> Change:
        nonlocal waited
        part = v.part()
        calls = part.setdefault("calls", {})
        if calls.get(call_id, {}).get("waiting"):
            # Asked for approval (by this run or an earlier one): pending
            # since; this process runs it now.
            waited = True
            calls[call_id] = {"name": name, "arguments": args, "owner": _owner()}
            return Change(state_json=v.with_part(part))
        if call_id in calls or any(p.tool_use_id == call_id for p in v.pending):
            raise DurableToolError(f"tool use {call_id!r} of session {s.session_id!r} is already running or interrupted; it was not run again.")
        calls[call_id] = {"name": name, "arguments": args, "owner": _owner()}
        return Change(pending=[*v.pending, tu], state_json=v.with_part(part))

    _LIVE.add((s.session_id, call_id))
    try:
        try:
            await s.mutate(point_a)
        except SavepointError as e:
            if e.reason == "CALL_ALREADY_RECORDED":
                raise DurableToolError(
                    f"tool use {call_id!r} already has a recorded outcome in session {s.session_id!r} (a reused call id); it was not run again."
                ) from e
            raise
        key = ""
        sdk_approved = d.approval and ctx.is_tool_approved(name, call_id) is True
        if sdk_approved:
            await _approve(s, call_id)
        gated = sdk_approved or waited or asked is not None
        if d.effect != EffectClass.READ_ONLY or gated:
            b = asked if asked is not None else await _begin(s, call_id, gated)
            if b.HasField("duplicate"):
                # Not run: the same call of an earlier, interrupted run
                # answers it, in the daemon's words.
                await _settled(s, call_id)
                return b.duplicate.tool_result_text
            if b.decision == pb.DECISION_DENIED:
                return await _refuse(s, call_id, name, denied_text(b.approval))
            if b.decision == pb.DECISION_AWAIT_APPROVAL:
                raise DurableToolError(f"tool use {call_id!r} of session {s.session_id!r} waits for approval in savepointd; it was not run.")
            key, already = b.idempotency_key, b.already_begun
            if already and d.effect == EffectClass.SIDE_EFFECT:
                return _in_doubt(name, call_id, "another process started it")
        text, err = await _execute(s, d, ctx, call_id, args, key)
        if err is not None and d.on_error is None:
            raise err
        return text if err is not None else _content(text)
    finally:
        _LIVE.discard((s.session_id, call_id))


# -- answering interrupted calls ---------------------------------------------


def interrupted(s: SavepointSession, v: View) -> list[str]:
    """The calls listed in v whose process stopped before the SDK saved
    them. A call waiting for approval is not one: the run's RunState holds
    it, and its resume asks again or runs it."""
    calls = v.part().get("calls", {})
    return [cid for cid, c in calls.items() if not c.get("waiting") and _interrupted(s.session_id, cid, c)]


async def _resolutions(s: SavepointSession) -> dict[str, pb.Resolution]:
    out: dict[str, pb.Resolution] = {}
    token = ""
    while True:
        r = await s.client().raw.Reconcile(pb.ReconcileRequest(session_id=s.session_id, page_token=token))
        for res in r.resolutions:
            out[res.tool_use.tool_use_id] = res
        token = r.next_page_token
        if not token:
            return out


async def _effects(s: SavepointSession, ids: set[str]) -> dict[str, pb.Effect]:
    out: dict[str, pb.Effect] = {}
    token = ""
    while ids - out.keys():
        r = await s.client().raw.ListEffects(pb.ListEffectsRequest(session_id=s.session_id, page_token=token))
        for e in r.entries:
            if e.tool_use_id in ids and e.HasField("effect"):
                out[e.tool_use_id] = e.effect
        token = r.next_page_token
        if not token:
            break
    return out


async def _verified(d: _Durable, cid: str, key: str, args: str) -> Verified | None:
    """The definite answer of d's verify hook about call cid in doubt, or
    None to leave it in doubt (unknown, or the hook raised)."""
    assert d.verify is not None
    try:
        v = d.verify(key, json.loads(args or "{}"))
        if inspect.isawaitable(v):
            v = await v
    except Exception as e:
        LOGGER.warning("savepoint: verify of tool use %s (%s) failed; it stays in doubt: %s", cid, d.tool.name, e)
        return None
    if isinstance(v, Verified) and v.status in (VerifyStatus.DONE, VerifyStatus.NOT_DONE):
        return v
    LOGGER.warning("savepoint: verify could not tell whether tool use %s (%s) took effect; it stays in doubt", cid, d.tool.name)
    return None


async def _resolve(s: SavepointSession, cid: str, v: Verified) -> pb.ResolveEffectResponse:
    """ResolveEffect of v (resolver VERIFY) under the session's current
    epoch, followed through takeovers as _begin does."""
    done = v.status == VerifyStatus.DONE
    req = pb.ResolveEffectRequest(
        session_id=s.session_id, tool_use_id=cid,
        outcome=pb.RESOLUTION_OUTCOME_DONE if done else pb.RESOLUTION_OUTCOME_NOT_DONE,
        output=_text(v.output) if done else "", is_error=v.is_error if done else False, note=v.note,
        resolver_kind=pb.RESOLVER_KIND_VERIFY, resolved_by="verify", request_id=str(uuid.uuid4()),
    )
    for _ in range(5):
        req.epoch = await _epoch(s)
        try:
            return await s.client().raw.ResolveEffect(req)
        except SessionFencedError:
            await s._load(history=False)
            req.request_id = str(uuid.uuid4())
    raise DurableToolError(f"ResolveEffect of tool use {cid!r} was fenced five times in a row.")


async def _answer(s: SavepointSession, wrapper: RunContextWrapper[Any] | None, cid: str, c: dict[str, Any], res: pb.Resolution | None, effect: pb.Effect | None) -> str:
    """The output an interrupted call gets: its recorded outcome, a re-run's,
    what its tool's verify hook found, or the in-doubt text."""
    name, args = str(c.get("name", "")), str(c.get("arguments", ""))
    if effect is not None:
        return effect.output
    if res is None:
        return _in_doubt(name, cid, "the agent stopped before its outcome was recorded")
    if res.decision == pb.DECISION_REUSE:
        return res.effect.output
    d = _REGISTRY.get(name)
    if res.decision == pb.DECISION_IN_DOUBT and d is not None and d.verify is not None:
        v = await _verified(d, cid, res.idempotency_key, args)
        if v is not None:
            resp = await _resolve(s, cid, v)
            if v.status == VerifyStatus.DONE:
                return resp.entry.effect.output
            run = pb.Resolution()
            run.CopyFrom(res)
            run.decision = pb.DECISION_RUN
            res = run
    if res.decision != pb.DECISION_RUN:
        return res.tool_result_text or _in_doubt(name, cid, "the agent stopped before its outcome was recorded")
    if d is None:
        return (
            f"This {name} call (tool_use_id {cid}) was interrupted before it ran and was not run again: "
            "the resumed agent has no durable tool of that name. Call it again if it is still needed."
        )
    key = res.idempotency_key
    # A resume has no RunState: a call of a tool that always needs approval
    # runs only against the approval its run recorded (a per-call policy
    # cannot be asked here; a call it approved was recorded, and is gated).
    gated = d.policy is True
    if d.effect != EffectClass.READ_ONLY or gated:
        b = await _begin(s, cid, gated)
        if b.HasField("duplicate"):
            return b.duplicate.tool_result_text
        if b.decision == pb.DECISION_DENIED:
            return await _refuse(s, cid, name, denied_text(b.approval))
        if b.decision == pb.DECISION_AWAIT_APPROVAL:
            return (
                f"This {name} call (tool_use_id {cid}) was interrupted before it ran and was not run: "
                "it needs an approval that was never recorded. Call it again if it is still needed."
            )
        key, already = b.idempotency_key, b.already_begun
        if already and not res.begun and d.effect == EffectClass.SIDE_EFFECT:
            return _in_doubt(name, cid, "another process started it")
    if wrapper is not None:
        ctx: ToolContext[Any] = ToolContext.from_agent_context(wrapper, cid, tool_name=name, tool_arguments=args)
    else:
        ctx = ToolContext(context=None, tool_name=name, tool_call_id=cid, tool_arguments=args)
    _LIVE.add((s.session_id, cid))
    try:
        text, _ = await _execute(s, d, ctx, cid, args, key)
    finally:
        _LIVE.discard((s.session_id, cid))
    return text


async def resolve_interrupted(s: SavepointSession, wrapper: RunContextWrapper[Any] | None, ids: list[str]) -> None:
    """Answer the interrupted calls ``ids`` and append each with its output
    (only the output when the history holds the call already) in one save;
    a call another process answered first is left to it."""
    v = await s._load(history=False)
    calls = v.part().get("calls", {})
    ids = [cid for cid in ids if cid in calls]
    if not ids:
        return
    pending = {p.tool_use_id for p in v.pending}
    res = await _resolutions(s) if pending & set(ids) else {}
    effects = await _effects(s, {cid for cid in ids if cid not in pending})
    outputs = {cid: await _answer(s, wrapper, cid, calls[cid], res.get(cid), effects.get(cid)) for cid in ids}

    def append(v: View) -> Change | None:
        part = v.part()
        calls = part.get("calls", {})
        todo = [cid for cid in outputs if cid in calls]
        if not todo:
            return None
        assert v.items is not None
        have = {it.get("call_id") for it in v.items if it.get("type") == "function_call"}
        items: list[Any] = []
        for cid in todo:
            c = calls.pop(cid)
            if cid not in have:
                items.append({"type": "function_call", "call_id": cid, "name": c.get("name", ""), "arguments": c.get("arguments", "")})
            items.append({"type": "function_call_output", "call_id": cid, "output": _history_output(outputs[cid])})
        part["resolved"] = (list(part.get("resolved", [])) + todo)[-_RESOLVED_KEPT:]
        return Change(append=items, pending=[p for p in v.pending if p.tool_use_id not in todo], state_json=v.with_part(part))

    await s.mutate(append, history=True)


async def settle_recorded(s: SavepointSession) -> bool:
    """Stop pending every pending tool use that has a recorded outcome (its
    process died between RecordEffect and the save after it, so every save
    carrying it is refused with CALL_ALREADY_RECORDED). Returns whether any
    was found."""
    res = await _resolutions(s)
    done = {cid for cid, r in res.items() if r.decision == pb.DECISION_REUSE}
    if not done:
        return False

    def settle(v: View) -> Change | None:
        part = v.part()
        for cid in done & part.get("calls", {}).keys():
            part["calls"][cid]["recorded"] = True
        return Change(pending=[p for p in v.pending if p.tool_use_id not in done], state_json=v.with_part(part))

    await s.mutate(settle)
    return True


# -- the decorator ------------------------------------------------------------


def _make(func: Callable[..., Any], effect: Effect, on_error: Any, kwargs: dict[str, Any], verify: VerifyHook | None = None, repeatable: bool = False) -> FunctionTool:
    if effect not in _CLASSES:
        raise ValueError(f"durable_function_tool: effect must be 'read_only', 'idempotent' or 'side_effect', not {effect!r}.")
    tool = function_tool(func, failure_error_function=None, **kwargs)
    d = _Durable(tool=tool, invoke=tool.on_invoke_tool, effect=_CLASSES[effect],
                 on_error=default_tool_error_function if on_error is _DEFAULT else on_error, verify=verify, repeatable=repeatable,
                 approval=tool.needs_approval is not False, policy=tool.needs_approval)

    async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        """The tool's own policy, and, when it asks, the call registered
        with savepointd as waiting (_ask), which may find it decided."""
        ask = d.policy
        if callable(ask):
            ask = ask(ctx, params, call_id)
            if inspect.isawaitable(ask):
                ask = await ask
        if not ask:
            return False
        s = await _session_of(ctx, call_id)
        if s is None:
            return True  # the SDK asks; run, the tool says it needs a SavepointSession
        return await _ask(s, d, call_id, compact_json(params))

    if d.approval:
        tool.needs_approval = needs_approval

    async def on_invoke_tool(ctx: ToolContext[Any], input: str) -> Any:
        s = await _session_of(ctx, ctx.tool_call_id)
        if s is None:
            raise DurableToolError(
                f"durable tool {tool.name!r} ran in a run whose session is not a SavepointSession; "
                "pass session=SavepointSession(...) to Runner.run."
            )
        return await _run_call(s, d, ctx, ctx.tool_call_id, input)

    tool.on_invoke_tool = on_invoke_tool
    _REGISTRY[tool.name] = d
    return tool


_DEFAULT: Any = object()


@overload
def durable_function_tool(func: Callable[..., Any], *, effect: Effect = "side_effect", failure_error_function: ToolErrorFunction | None = ..., verify: VerifyHook | None = None, repeatable: bool = False, **kwargs: Any) -> FunctionTool: ...
@overload
def durable_function_tool(func: None = None, *, effect: Effect = "side_effect", failure_error_function: ToolErrorFunction | None = ..., verify: VerifyHook | None = None, repeatable: bool = False, **kwargs: Any) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def durable_function_tool(
    func: Callable[..., Any] | None = None,
    *,
    effect: Effect = "side_effect",
    failure_error_function: ToolErrorFunction | None = _DEFAULT,
    verify: VerifyHook | None = None,
    repeatable: bool = False,
    **kwargs: Any,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """The SDK's ``function_tool`` (as a decorator, with or without
    arguments, or a call; its keyword arguments are passed on) whose calls go
    through savepointd's ledger when the run's session is a SavepointSession:
    a call is never run twice unless ``effect`` says that is safe
    ("read_only", "idempotent"; "side_effect" is the default), and a call
    interrupted by a crash is answered on resume by its recorded output, a
    re-run, or an error output saying its outcome is unknown. The output is
    text: a non-string return value is recorded as JSON (or str()). A failed
    call is recorded and answered by ``failure_error_function`` as
    function_tool does (None re-raises, after recording). ``verify``, when
    given, is the tool's verify hook, ``verify(idempotency_key, args)``: on
    resume, a call in doubt is asked of it, and its
    savepoint.Verified.done(output) is recorded (ResolveEffect) and given as
    the call's output, not_done() runs the call again with the same key,
    and unknown() or an exception leaves it in doubt. A call that repeats,
    with the same arguments, one an earlier, interrupted run made (the
    daemon's duplicate-intent guard) is not run: its output is the daemon's
    text saying the action was already taken (with its output) or may have
    been; ``repeatable=True`` exempts a tool that may legitimately repeat.
    With the SDK's ``needs_approval``, a call the SDK stops the run for
    waits in savepointd too (``savepoint ls`` counts it, ``savepoint
    approve`` decides it; apply_decisions gives such a decision to the
    RunState); a call the SDK approved (RunState.approve) is approved in
    savepointd too (ApproveEffect, bound to its input) and its begin spends
    that approval, so a replay of the approved RunState never runs it a
    second time; a RunState.reject is recorded as a denial."""
    if func is not None:
        return _make(func, effect, failure_error_function, kwargs, verify, repeatable)
    return lambda f: _make(f, effect, failure_error_function, kwargs, verify, repeatable)
