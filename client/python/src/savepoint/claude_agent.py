"""The Claude Agent SDK (``claude-agent-sdk``) on savepointd: every tool call
of the agent on a session's ledger, and the SDK's transcript in the same
session, so that an agent killed anywhere resumes without running a side
effect twice and without pretending to know what it cannot::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from savepoint.aio import AsyncClient
    from savepoint.claude_agent import SavepointSessionStore

    store = SavepointSessionStore(AsyncClient(), read_only=["mcp__notes__read_notes"])
    options = ClaudeAgentOptions(
        session_store=store, session_store_flush="eager", hooks=store.hooks(),
        can_use_tool=store.can_use_tool(my_policy),  # optional: refusals recorded
        mcp_servers={"notes": notes_server},
    )
    # A resumed run: ClaudeAgentOptions(resume=session_id, ...) with the same store.

``hooks()`` puts every call on the ledger: PreToolUse registers it as pending
and begun in one durable step (BeginEffect with tool_use) before it runs, and
answers a call already recorded with its recorded output instead of running
it; PostToolUse and PostToolUseFailure record its outcome. The matchers use
``on_failure="block"``, so a tool whose registration fails does not run.
``can_use_tool`` records a call its permission check refuses as never run,
and so does ``append`` for a call the transcript shows denied by the CLI's
own permission rules or mode.

The store keeps each SDK session's transcript in the savepointd session
``claude.<session id>`` (a subagent's in ``claude.<session id>.<subpath>``),
one message per transcript entry. Its ``load()``, which the SDK calls to
resume, answers each call the transcript leaves without a result with
Reconcile's decision: the recorded output, "never started", or the daemon's
in-doubt text, instead of the SDK's blanket "unknown". Loading takes the
session over (Resume): a process still running it is fenced from then on.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from savepoint._core import denied_text
from savepoint.aio import AsyncClient, AsyncSession
from savepoint.errors import CallUnknownError, EffectConflictError, SessionNotFoundError
from savepoint.types import EffectClass, Message, ToolUse
from savepoint.v1 import savepoint_pb2 as pb

__all__ = ["INTERRUPTED", "NEVER_STARTED", "SavepointSessionStore", "dangling_tool_uses", "session_id_for"]

NEVER_STARTED = (
    "This {name} call (tool_use_id {id}) never started: the agent stopped before running it. "
    "It was not run on resume; call it again if it is still needed."
)
"""The tool result load() gives a call Reconcile decides RUN that was never
begun (its PreToolUse never registered it): it certainly did not run."""

INTERRUPTED = (
    "This {name} call (tool_use_id {id}) was interrupted before its result was recorded. "
    "It only reads, so it is safe to call it again."
)
"""The tool result load() gives a begun call Reconcile decides RUN: a
read-only or idempotent one, safe to repeat."""

_SAFE = re.compile(r"[^A-Za-z0-9._:-]")


# The labels naming a savepointd session's SDK key, and where its state_json
# keeps the SDK's folded summary.
LABEL_PROJECT = "claude.project"
LABEL_SESSION = "claude.session"
LABEL_SUBPATH = "claude.subpath"
SUMMARY_STATE = "claude_summary"


def _ms(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def session_id_for(session_id: str, subpath: str | None = None) -> str:
    """The savepointd session that keeps the SDK session ``session_id``'s
    transcript (and, without ``subpath``, its ledger): ``claude.<id>``, with
    a subagent transcript's subpath after a dot, "/" read as ":"."""
    sid = "claude." + session_id
    if subpath:
        sid += "." + subpath.replace("/", ":")
    sid = _SAFE.sub("_", sid)
    if len(sid) > 128:
        raise ValueError(f"session {session_id!r} subpath {subpath!r} makes a savepointd session id over 128 characters")
    return sid


def _entry_key(e: Mapping[str, Any]) -> str:
    """What makes two transcript entries the same one: the SDK's uuid, or for
    an entry without one its whole JSON."""
    u = e.get("uuid")
    return "u:" + u if isinstance(u, str) and u else "j:" + json.dumps(e, sort_keys=True, separators=(",", ":"))


def _blocks(entry: Mapping[str, Any]) -> list[Any]:
    m = entry.get("message")
    c = m.get("content") if isinstance(m, Mapping) else None
    return c if isinstance(c, list) else []


def dangling_tool_uses(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tool_use blocks of the transcript's assistant entries that no
    tool_result of a later user entry answers, in order."""
    uses: dict[str, dict[str, Any]] = {}
    for e in entries:
        for b in _blocks(e):
            if not isinstance(b, Mapping):
                continue
            if e.get("type") == "assistant" and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                uses[b["id"]] = {"id": b["id"], "name": b.get("name", ""), "entry": e}
            elif e.get("type") == "user" and b.get("type") == "tool_result":
                uses.pop(str(b.get("tool_use_id")), None)
    return list(uses.values())


def _output_of(recorded: str) -> Any:
    """A tool's output as the hooks recorded it (JSON text of what the SDK
    reported: a string or a list of content blocks), or the text itself."""
    try:
        return json.loads(recorded)
    except ValueError:
        return recorded


class SavepointSessionStore:
    """The Claude Agent SDK's SessionStore on savepointd (``append``,
    ``load``, and the optional ``list_sessions``, ``list_session_summaries``,
    ``delete`` and ``list_subkeys``), and the hooks that put the agent's tool
    calls on the same session's ledger. One instance serves any number of SDK sessions of one
    process; give it to ``ClaudeAgentOptions(session_store=...)`` with
    ``session_store_flush="eager"`` and ``hooks=store.hooks()``.

    Effect classes: a tool named in ``read_only`` is READ_ONLY (re-run after a
    crash), in ``idempotent`` IDEMPOTENT; every other tool is SIDE_EFFECT (run
    at most once; in doubt when a crash hides its outcome).

    Each savepointd session carries labels naming its SDK key
    (``claude.project``, ``claude.session``, ``claude.subpath`` for a
    subagent transcript), which the list methods select by; the summary the
    SDK's ``fold_session_summary`` keeps (``fold_summary``, default: the
    SDK's own, when it is installed) is saved in the session's
    ``state_json`` with each append, in the same revision.

    Approvals: a call of a tool named in ``approval_required`` waits for a
    person's approval, bound to the call and its input (ApproveEffect).
    PreToolUse defers it (``permissionDecision`` "defer", the SDK's own
    pause: the query ends with the call deferred), and ``load`` leaves it
    unanswered, so that a resume asks PreToolUse again: once approved
    (``savepoint approve``, Client.approve_effect, the inspector) it is
    begun against its approval and runs once; denied, it is refused with
    the approver's note, which the model reads."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        read_only: Iterable[str] = (),
        idempotent: Iterable[str] = (),
        labels: Mapping[str, str] | None = None,
        fold_summary: Callable[..., Any] | None = None,
        approval_required: Iterable[str] = (),
    ) -> None:
        self._client = client
        self._approval = frozenset([approval_required] if isinstance(approval_required, str) else approval_required)
        self._fold = fold_summary
        self._classes = {n: EffectClass.READ_ONLY for n in read_only} | {n: EffectClass.IDEMPOTENT for n in idempotent}
        self._labels = dict(labels or {})
        self._sessions: dict[str, AsyncSession] = {}
        self._seen: dict[str, set[str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._begun: set[str] = set()  # tool uses this process registered first
        self._calls: dict[str, AsyncSession] = {}  # tool_use_id -> its session, for can_use_tool

    def effect_class(self, tool_name: str) -> EffectClass:
        """The effect class the hooks register a call of ``tool_name`` with."""
        return self._classes.get(tool_name, EffectClass.SIDE_EFFECT)

    # -- sessions ----------------------------------------------------------------

    def _lock(self, sid: str) -> asyncio.Lock:
        return self._locks.setdefault(sid, asyncio.Lock())

    async def _session(self, sid: str, *, create: bool) -> AsyncSession | None:
        """The savepointd session sid, owned by this process: resumed (taken
        over) the first time, created when it does not exist and ``create``."""
        async with self._lock(sid):
            s = self._sessions.get(sid)
            if s is not None:
                return s
            try:
                s = await self._client.resume(sid)
            except SessionNotFoundError:
                if not create:
                    return None
                s = await self._client.start(sid, "Claude Agent SDK session", labels={"framework": "claude-agent-sdk", **self._labels})
            self._seen[sid] = {_entry_key(json.loads(m.content_json)) for m in s.messages}
            self._sessions[sid] = s
            return s

    def _folder(self) -> Callable[..., Any] | None:
        if self._fold is None:
            try:
                from claude_agent_sdk import fold_session_summary
            except ImportError:
                return None
            self._fold = fold_session_summary
        return self._fold

    async def _append(self, sid: str, s: AsyncSession, entries: Sequence[Mapping[str, Any]], key: Mapping[str, Any] | None = None) -> None:
        """Save the entries not saved yet, in order, as one revision per 1000;
        with the SDK's key, the labels that name it and (for a main
        transcript) the folded summary go with the last revision."""
        async with self._lock(sid):
            seen = self._seen[sid]
            fresh: list[Message] = []
            keys: list[str] = []
            for e in entries:
                k = _entry_key(e)
                if k in seen or k in keys:
                    continue
                keys.append(k)
                fresh.append(Message(role=str(e.get("type") or "entry"), content_json=json.dumps(e, ensure_ascii=False, separators=(",", ":"))))
            labels: dict[str, str] | None = None
            state: str | None = None
            if key is not None:
                want = {LABEL_PROJECT: str(key["project_key"]), LABEL_SESSION: str(key["session_id"])}
                if key.get("subpath"):
                    want[LABEL_SUBPATH] = str(key["subpath"])
                if any(s.labels.get(k) != v for k, v in want.items()):
                    labels = {**s.labels, **want}
                fold = self._folder()
                if fresh and not key.get("subpath") and fold is not None:
                    st = json.loads(s.state_json or "{}")
                    prev = st.get(SUMMARY_STATE)
                    prev_entry = {"session_id": key["session_id"], "mtime": 0, "data": prev} if prev is not None else None
                    folded = fold(prev_entry, dict(key), [json.loads(m.content_json) for m in fresh])
                    state = json.dumps({**st, SUMMARY_STATE: folded["data"]}, separators=(",", ":"))
            chunks = [fresh[i : i + 1000] for i in range(0, len(fresh), 1000)] or ([[]] if labels is not None else [])
            for i, chunk in enumerate(chunks):
                last = i == len(chunks) - 1
                await s.save(append=chunk, labels=labels if last else None, state_json=state if last else None)
            seen.update(keys)

    # -- SessionStore ------------------------------------------------------------

    async def append(self, key: Mapping[str, Any], entries: list[dict[str, Any]]) -> None:
        """Mirror a batch of transcript entries into the session's history,
        durably, skipping entries already saved (by uuid; an entry without
        one by its whole content), so a batch the SDK retries is kept once."""
        sid = session_id_for(key["session_id"], key.get("subpath"))
        s = await self._session(sid, create=True)
        assert s is not None
        await self._append(sid, s, entries, key)
        await self._record_refusals(key["session_id"], entries)

    async def _record_refusals(self, sdk_session_id: str, entries: Sequence[Mapping[str, Any]]) -> None:
        """Record as refused, never run, each call a transcript entry answers
        with a permission denial (``permissionDecision.decision`` "reject":
        the CLI's permission rules or mode, which fire no hook after
        PreToolUse). A call the ledger does not know, or has an outcome for
        already (a refusal can_use_tool recorded), is left as it is."""
        refusals = []
        for e in entries:
            pd = e.get("permissionDecision")
            if e.get("type") != "user" or not isinstance(pd, Mapping) or pd.get("decision") != "reject":
                continue
            for b in _blocks(e):
                if isinstance(b, Mapping) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                    refusals.append((b["tool_use_id"], b.get("content", "")))
        if not refusals:
            return
        s = await self._session(session_id_for(sdk_session_id), create=True)
        assert s is not None
        for tid, content in refusals:
            text = content if isinstance(content, str) else json.dumps(content)
            try:
                await s.refuse_tool_use(tid, json.dumps(text))
            except (CallUnknownError, EffectConflictError):
                pass

    async def load(self, key: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The session's transcript for a resume, or None when it was never
        written. It takes the session over (Resume), and answers every tool
        call the transcript leaves without a result with Reconcile's
        decision, in one user entry saved before it is returned: REUSE gives
        the recorded output, RUN (never begun) says it never started,
        IN_DOUBT gives the daemon's text as an error."""
        sid = session_id_for(key["session_id"], key.get("subpath"))
        s = await self._session(sid, create=False)
        if s is None:
            return None
        entries: list[dict[str, Any]] = [json.loads(m.content_json) for m in s.messages]
        dangling = dangling_tool_uses(entries)
        if not dangling:
            return entries
        resolutions = await s.reconcile_tool_uses([d["id"] for d in dangling])
        # A call deferred for approval stays unanswered: the SDK asks PreToolUse about it again.
        answered = [(d, r) for d, r in zip(dangling, resolutions, strict=True) if not _deferred(r)]
        if not answered:
            return entries
        blocks = [self._answer(d, r) for d, r in answered]
        last = answered[-1][0]["entry"]
        answer = {
            "parentUuid": last.get("uuid"),
            "isSidechain": bool(last.get("isSidechain", False)),
            "type": "user",
            "message": {"role": "user", "content": blocks},
            "uuid": str(uuid.uuid4()),
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "userType": "external",
            "sessionId": key["session_id"],
            **{k: last[k] for k in ("cwd", "version", "gitBranch", "entrypoint") if k in last},
            "toolUseResult": "savepoint: answered on resume from the ledger",
            "sourceToolAssistantUUID": last.get("uuid"),
        }
        await self._append(sid, s, [answer])
        return [*entries, answer]

    @staticmethod
    def _answer(d: Mapping[str, Any], r: pb.Resolution) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": d["id"]}
        if r.decision == pb.DECISION_REUSE:
            block["content"] = _output_of(r.effect.output)
            if r.effect.is_error:
                block["is_error"] = True
        elif r.decision == pb.DECISION_RUN:
            block["content"] = (INTERRUPTED if r.begun else NEVER_STARTED).format(name=d["name"], id=d["id"])
            block["is_error"] = True
        else:
            block["content"] = r.tool_result_text
            block["is_error"] = True
        return block

    async def delete(self, key: Mapping[str, Any]) -> None:
        """Delete the session; a main transcript's (no subpath) with its
        subagent transcripts, as the SDK's contract asks."""
        subpaths = [key.get("subpath")] if key.get("subpath") else [None, *await self.list_subkeys(key)]
        for sub in subpaths:
            sid = session_id_for(key["session_id"], sub)
            s = await self._session(sid, create=False)
            if s is not None:
                await s.delete()
                self._sessions.pop(sid, None)
                self._seen.pop(sid, None)

    async def _listed(self, **labels: str) -> list[pb.SessionSummary]:
        return [x async for x in self._client.list_sessions(labels, page_size=1000)]

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        """The main transcripts of ``project_key``: each SDK session id with
        its savepointd session's last update, in Unix milliseconds. Nothing
        is taken over (unlike ``load``)."""
        return [{"session_id": x.labels[LABEL_SESSION], "mtime": _ms(x.update_time)}
                for x in await self._listed(**{LABEL_PROJECT: project_key}) if LABEL_SUBPATH not in x.labels]

    async def list_session_summaries(self, project_key: str) -> list[dict[str, Any]]:
        """The SDK's folded summary of each main transcript of ``project_key``
        that has one (saved with its appends), stamped with the same
        ``mtime`` as ``list_sessions``: one ListSessions and one GetSession
        (for the session's state) per session, none taken over."""
        out = []
        for x in await self._listed(**{LABEL_PROJECT: project_key}):
            if LABEL_SUBPATH in x.labels:
                continue
            try:
                r = await self._client.raw.GetSession(pb.GetSessionRequest(session_id=x.session_id))
            except SessionNotFoundError:
                continue
            data = json.loads(r.checkpoint.state_json or "{}").get(SUMMARY_STATE)
            if data is not None:
                out.append({"session_id": x.labels[LABEL_SESSION], "mtime": _ms(x.update_time), "data": data})
        return out

    async def list_subkeys(self, key: Mapping[str, Any]) -> list[str]:
        """The subpaths of the subagent transcripts saved under the SDK
        session ``key``."""
        listed = await self._listed(**{LABEL_PROJECT: str(key["project_key"]), LABEL_SESSION: str(key["session_id"])})
        return [x.labels[LABEL_SUBPATH] for x in listed if LABEL_SUBPATH in x.labels]

    # -- hooks -------------------------------------------------------------------

    def hooks(self, matcher: str | None = None) -> dict[str, list[Any]]:
        """``ClaudeAgentOptions.hooks`` putting every tool call matching
        ``matcher`` (None: every tool) on the ledger, with
        ``on_failure="block"``: a call whose registration fails does not
        run."""
        from claude_agent_sdk import HookMatcher

        return {
            "PreToolUse": [HookMatcher(matcher=matcher, hooks=[self.pre_tool_use], on_failure="block")],
            "PostToolUse": [HookMatcher(matcher=matcher, hooks=[self.post_tool_use], on_failure="block")],
            "PostToolUseFailure": [HookMatcher(matcher=matcher, hooks=[self.post_tool_use_failure], on_failure="block")],
        }

    async def pre_tool_use(self, input: Any, tool_use_id: str | None, context: Any) -> Any:
        """PreToolUse: register the call as pending and begun in one durable
        step. A call with a recorded outcome is denied with that outcome as
        the reason (the model reads it as the tool's result) instead of
        running again; a side-effecting call another process began and never
        recorded is denied with the daemon's in-doubt text."""
        tid = tool_use_id or input["tool_use_id"]
        name = input["tool_name"]
        s = await self._session(session_id_for(input["session_id"]), create=True)
        assert s is not None
        cls = self.effect_class(name)
        call = ToolUse(tool_use_id=tid, name=name, input_json=json.dumps(input.get("tool_input", {})), effect_class=cls)
        self._calls[tid] = s
        if name in self._approval:
            req = s._register_request(call)
            req.requires_approval = True
            b = await self._client.raw.BeginEffect(req)
            if b.decision == pb.DECISION_AWAIT_APPROVAL:
                return _defer(f"This {name} call (tool_use_id {tid}) waits for a person's approval: savepoint approve {s.id} {tid}")
            if b.decision == pb.DECISION_DENIED:
                note = denied_text(b.approval)
                await s.refuse_tool_use(tid, json.dumps(note))
                return _deny(note)
            reg = s._registration(b)  # begun against its approval, which the begin spent
        else:
            reg = await s.register_tool_use(call)
        if reg.duplicate is not None:
            # The same call of an earlier, interrupted run: not run again.
            return _deny(reg.duplicate.tool_result_text)
        if reg.effect is not None:
            out = _output_of(reg.effect.output)
            text = out if isinstance(out, str) else json.dumps(out)
            what = "was refused before it ran" if reg.effect.refused else "already ran"
            return _deny(f"Not run again: this {name} call (tool_use_id {tid}) {what}; its recorded outcome follows.\n{text}")
        if reg.already_begun and tid not in self._begun and cls == EffectClass.SIDE_EFFECT:
            (res,) = await s.reconcile_tool_uses([tid])
            return _deny(res.tool_result_text)
        self._begun.add(tid)
        return {}

    async def post_tool_use(self, input: Any, tool_use_id: str | None, context: Any) -> Any:
        """PostToolUse: record what the tool returned (as JSON text)."""
        tid = tool_use_id or input["tool_use_id"]
        s = await self._session(session_id_for(input["session_id"]), create=True)
        assert s is not None
        await s.record_tool_use(tid, json.dumps(input.get("tool_response"), ensure_ascii=False))
        return {}

    async def post_tool_use_failure(self, input: Any, tool_use_id: str | None, context: Any) -> Any:
        """PostToolUseFailure: record the failure as an error outcome. An
        interrupted call is not recorded: its outcome is unknown."""
        if input.get("is_interrupt"):
            return {}
        tid = tool_use_id or input["tool_use_id"]
        s = await self._session(session_id_for(input["session_id"]), create=True)
        assert s is not None
        await s.record_tool_use(tid, json.dumps(str(input.get("error", ""))), is_error=True)
        return {}

    def can_use_tool(
        self, inner: Callable[[str, dict[str, Any], Any], Awaitable[Any]] | None = None
    ) -> Callable[[str, dict[str, Any], Any], Awaitable[Any]]:
        """``ClaudeAgentOptions.can_use_tool`` that asks ``inner`` (None:
        allow everything) and records a call it refuses as refused, never
        run, so that a resume does not report it in doubt."""

        async def check(tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
            if inner is None:
                from claude_agent_sdk import PermissionResultAllow

                return PermissionResultAllow()
            result = await inner(tool_name, tool_input, context)
            tid = getattr(context, "tool_use_id", None)
            if getattr(result, "behavior", "allow") == "deny" and tid and tid in self._calls:
                reason = getattr(result, "message", "") or "refused by the permission check"
                await self._calls[tid].refuse_tool_use(tid, json.dumps(reason))
            return result

        return check


def _deny(reason: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}}


def _defer(reason: str) -> dict[str, Any]:
    """The SDK's pause for a call that waits for a person: the query ends
    with the call deferred, and a resume asks PreToolUse again."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "defer", "permissionDecisionReason": reason}}


def _deferred(r: pb.Resolution) -> bool:
    """Whether a dangling call is one PreToolUse deferred for approval and no
    begin has spent its decision yet."""
    return (r.decision == pb.DECISION_RUN and not r.begun and r.HasField("approval")
            and r.approval.status != pb.APPROVAL_STATUS_UNSPECIFIED and not r.approval.spent)
