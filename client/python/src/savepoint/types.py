"""The values a Session takes and returns: messages, tool uses, results,
effect classes, decisions, session statuses and tool events; and the events
of a watch of the sessions."""

from __future__ import annotations

import enum
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

from savepoint.v1 import savepoint_pb2 as pb


class EffectClass(enum.IntEnum):
    """What running a tool does to the world outside. UNSPECIFIED counts as
    SIDE_EFFECT, the safe assumption."""

    UNSPECIFIED = pb.EFFECT_CLASS_UNSPECIFIED
    #: The tool only reads: re-running it after a crash is always safe, so
    #: the Session does not call BeginEffect for it.
    READ_ONLY = pb.EFFECT_CLASS_READ_ONLY
    #: The tool changes the world, but running it twice with the same
    #: idempotency key has the effect of running it once.
    IDEMPOTENT = pb.EFFECT_CLASS_IDEMPOTENT
    #: The tool changes the world and must not run twice.
    SIDE_EFFECT = pb.EFFECT_CLASS_SIDE_EFFECT

    @property
    def effective(self) -> EffectClass:
        """The class the protocol applies: SIDE_EFFECT for UNSPECIFIED."""
        return EffectClass.SIDE_EFFECT if self == EffectClass.UNSPECIFIED else self

    @classmethod
    def from_mcp(cls, annotations: Any) -> EffectClass:
        """Return the effect class of an MCP tool from its annotations:
        READ_ONLY when ``readOnlyHint`` is true, else IDEMPOTENT when
        ``idempotentHint`` is true, else SIDE_EFFECT (the MCP defaults of both
        hints are false). ``annotations`` is a mapping (the JSON object), an
        object with those attributes (an SDK's ToolAnnotations), a whole
        tool carrying them under ``annotations``, or None."""

        def get(obj: Any, key: str) -> Any:
            if isinstance(obj, Mapping):
                return obj.get(key)
            return getattr(obj, key, None)

        if annotations is None:
            return cls.SIDE_EFFECT
        nested = get(annotations, "annotations")
        if nested is not None:
            annotations = nested
        if get(annotations, "readOnlyHint") is True:
            return cls.READ_ONLY
        if get(annotations, "idempotentHint") is True:
            return cls.IDEMPOTENT
        return cls.SIDE_EFFECT


class SessionStatus(enum.IntEnum):
    """Where a session's task stands: ACTIVE until Session.complete makes it
    COMPLETED (the task is done) or FAILED (the agent gave up)."""

    UNSPECIFIED = pb.SESSION_STATUS_UNSPECIFIED
    ACTIVE = pb.SESSION_STATUS_ACTIVE
    COMPLETED = pb.SESSION_STATUS_COMPLETED
    FAILED = pb.SESSION_STATUS_FAILED


class Decision(enum.IntEnum):
    """Reconcile's answer for one pending tool use."""

    UNSPECIFIED = pb.DECISION_UNSPECIFIED
    #: The outcome is in the ledger; its output is the result.
    REUSE = pb.DECISION_REUSE
    #: Running the tool is safe; it was run and recorded.
    RUN = pb.DECISION_RUN
    #: The outcome is unknown; the result is the daemon's is_error text
    #: telling the model to check before any retry.
    IN_DOUBT = pb.DECISION_IN_DOUBT
    #: Only from a begin of a tool that requires approval: none exists for
    #: this call and input yet; nothing ran (AwaitingApprovalError).
    AWAIT_APPROVAL = pb.DECISION_AWAIT_APPROVAL
    #: A person denied the call; the result is their note, is_error, and
    #: the tool did not run.
    DENIED = pb.DECISION_DENIED


class WatchEventType(enum.IntEnum):
    """What a WatchEvent of Client.watch_sessions reports (docs/api.md,
    WatchSessions)."""

    UNSPECIFIED = pb.WATCH_EVENT_TYPE_UNSPECIFIED
    #: The session changed durably (a save, a begin or record, a resume, a
    #: completion, a rewind, or the fork that made it), or its idle time
    #: reached min_idle, and the filters select it: ``session`` holds its
    #: summary as list_sessions gives it, read after the change.
    CHANGED = pb.WATCH_EVENT_TYPE_CHANGED
    #: The session changed durably, or was deleted, and the filters do not
    #: select it: ``session_id`` only. Drop it if you show it.
    REMOVED = pb.WATCH_EVENT_TYPE_REMOVED
    #: Nothing else to send. The first event of every watch, once the daemon
    #: has registered it: every change durable after it is sent, so list the
    #: sessions after it and apply the events from there.
    HEARTBEAT = pb.WATCH_EVENT_TYPE_HEARTBEAT
    #: The watch fell behind and events were dropped (more than 1024
    #: distinct sessions changed while it was not read, or a poll of a
    #: shared PostgreSQL database failed): list the sessions again. Every
    #: change durable after it is sent.
    RESYNC = pb.WATCH_EVENT_TYPE_RESYNC


@dataclass(frozen=True)
class WatchEvent:
    """One event of Client.watch_sessions: its ``type``, the session it is
    about (``session_id``, for CHANGED and REMOVED), the session's summary
    (``session``, for CHANGED only) and when the daemon sent it
    (``send_time``, timezone-aware UTC)."""

    type: WatchEventType
    session_id: str = ""
    session: pb.SessionSummary | None = None
    send_time: datetime | None = None

    @classmethod
    def from_proto(cls, r: pb.WatchSessionsResponse) -> WatchEvent | None:
        """The event of a WatchSessionsResponse; None for a type this client
        does not know, which a watch skips."""
        try:
            t = WatchEventType(r.type)
        except ValueError:
            return None
        if t == WatchEventType.UNSPECIFIED:
            return None
        return cls(
            type=t,
            session_id=r.session_id,
            session=r.session if t == WatchEventType.CHANGED and r.HasField("session") else None,
            send_time=r.send_time.ToDatetime(tzinfo=timezone.utc) if r.HasField("send_time") else None,
        )


@dataclass(frozen=True)
class Message:
    """One entry of a session's history: the provider's role and its content
    as JSON text (for Anthropic, the content array or a string)."""

    role: str
    content_json: str


@dataclass(frozen=True)
class ToolUse:
    """A tool call the model named; pending from point_a until point_b
    answers it. ``tool_use_id`` is the provider's id of the call (Anthropic's
    tool_use block ``id``), which the ToolResult answering it carries too;
    ``input_json`` is its input as JSON text, empty meaning {};
    ``effect_class`` UNSPECIFIED means SIDE_EFFECT. ``repeatable`` exempts
    the call from the daemon's duplicate-intent guard (docs/api.md "The same
    action under a new id"): set it for a tool that may legitimately repeat
    a call with the same input after a restart."""

    tool_use_id: str
    name: str
    input_json: str = ""
    effect_class: EffectClass = EffectClass.SIDE_EFFECT
    repeatable: bool = False

    @property
    def id(self) -> str:
        """Deprecated: use tool_use_id, the name every client and the
        protocol use."""
        warnings.warn("ToolUse.id is deprecated; use ToolUse.tool_use_id", DeprecationWarning, stacklevel=2)
        return self.tool_use_id

    def to_proto(self) -> pb.ToolUse:
        cls = EffectClass(self.effect_class).effective
        # The Session calls BeginEffect before running any tool that is not
        # read-only, so a call never begun is safe to run after a crash.
        return pb.ToolUse(
            tool_use_id=self.tool_use_id,
            name=self.name,
            input_json=self.input_json,
            effect_class=cast(pb.EffectClass, int(cls)),
            begin_tracked=cls != EffectClass.READ_ONLY,
            repeatable=self.repeatable,
        )

    @classmethod
    def from_proto(cls, p: pb.ToolUse) -> ToolUse:
        return cls(
            tool_use_id=p.tool_use_id,
            name=p.name,
            input_json=p.input_json,
            effect_class=EffectClass(p.effect_class).effective,
            repeatable=p.repeatable,
        )


ContentBlock = dict[str, Any]
"""One content block of a tool result, as the provider's JSON object
(Anthropic: ``{"type": "text", "text": ...}``, ``{"type": "image", ...}``,
``{"type": "document", ...}``)."""

ToolContent = str | list[ContentBlock]
"""What a tool returns: text, or a list of content blocks."""


def tool_output(content: ToolContent) -> str:
    """The ledger's text of a tool's content: the text itself, or the content
    blocks as compact JSON. tool_content reads it back."""
    if isinstance(content, str):
        return content
    return compact_json(content)


def tool_content(output: str) -> ToolContent:
    """The content a ledger output stands for: the list of content blocks
    when the text is a non-empty JSON array of objects that each have a
    string ``type``, else the text itself. Every client reads the ledger
    with this rule (client/testdata/tool_content.json)."""
    if not output.startswith("["):
        return output
    try:
        v = json.loads(output)
    except ValueError:
        return output
    if isinstance(v, list) and v and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in v):
        return v
    return output


def normalize_content(value: Any) -> ToolContent:
    """The ToolContent of what a tool function returned: None is "", a str
    is read as tool_content reads the ledger (so a run and a later REUSE give
    the model the same thing), and a list or tuple of blocks (dicts, or SDK
    objects with ``to_dict`` or ``model_dump``) becomes a list of JSON
    objects. Anything else raises TypeError."""
    if value is None:
        return ""
    if isinstance(value, str):
        return tool_content(value)
    if isinstance(value, (list, tuple)):
        blocks: list[ContentBlock] = []
        for b in value:
            if hasattr(b, "to_dict"):
                b = b.to_dict()
            elif hasattr(b, "model_dump"):
                b = b.model_dump(mode="json", exclude_unset=True)
            if not isinstance(b, Mapping) or not isinstance(b.get("type"), str):
                raise TypeError(f"a content block must be an object with a string type, not {type(b).__name__}")
            blocks.append(dict(b))
        if not blocks:
            return ""
        # What the ledger stores is JSON: the blocks must survive the trip.
        out = tool_content(tool_output(blocks))
        return out
    raise TypeError(f"a tool returns a str or a list of content blocks, not {type(value).__name__}")


@dataclass(frozen=True)
class Registration:
    """What register_tool_use returns: the call's idempotency key, whether it
    had been begun before, and for a call whose outcome is recorded already
    that outcome (``effect``): then the tool must not run again, and its
    recorded output (``effect.output``, an error when ``effect.is_error``)
    answers the call. ``duplicate`` is set when the daemon's duplicate-intent
    guard caught the call (it repeats a call an earlier, interrupted run
    made): the tool must not run; ``duplicate.tool_result_text`` answers it
    (an error when ``duplicate.is_error``)."""

    idempotency_key: str
    already_begun: bool = False
    effect: pb.Effect | None = None
    duplicate: pb.DuplicateToolUse | None = None


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool use.

    ``content`` is the tool's output (text, or a list of content blocks; see
    normalize_content), or its error text when ``is_error`` is
    set (the tool ran and failed or, after reconcile, its outcome is in
    doubt). ``decision`` is set by reconcile, UNSPECIFIED for run_tool's
    results. ``ledger_error`` is set when the tool ran but its outcome could
    not be written to the ledger: the content is still the real outcome, to
    be appended (telling the model it failed would make it retry and repeat
    the side effect); point_b tries to record it once more.
    ``duplicate_of`` is set when the tool did not run because the daemon's
    duplicate-intent guard found that an earlier, interrupted run made the
    same call: the earlier tool use id; ``content`` is then the daemon's text
    saying the action was already taken (with its output) or may have been.
    """

    tool_use_id: str
    content: ToolContent
    is_error: bool = False
    decision: Decision = Decision.UNSPECIFIED
    ledger_error: BaseException | None = None
    duplicate_of: str = ""


class VerifyStatus(enum.IntEnum):
    """Whether a tool use in doubt took effect, as a verify hook found."""

    #: It cannot be told; the tool use stays in doubt.
    UNKNOWN = 0
    #: It took effect; Verified.output is its outcome.
    DONE = 1
    #: It did not; it runs again with the same idempotency key.
    NOT_DONE = 2


@dataclass(frozen=True)
class Verified:
    """What a verify hook found about a tool use in doubt: its status and,
    for DONE, its outcome (``output``, ``is_error``); ``note`` is kept with
    the resolution. Make one with done(), not_done() or unknown()."""

    status: VerifyStatus
    output: ToolContent = ""
    is_error: bool = False
    note: str = ""

    @classmethod
    def done(cls, output: ToolContent, *, is_error: bool = False, note: str = "") -> "Verified":
        return cls(VerifyStatus.DONE, output, is_error, note)

    @classmethod
    def not_done(cls, *, note: str = "") -> "Verified":
        return cls(VerifyStatus.NOT_DONE, note=note)

    @classmethod
    def unknown(cls) -> "Verified":
        return cls(VerifyStatus.UNKNOWN)


class ToolStage(enum.StrEnum):
    """A moment in the life of a tool use that a tool hook observes, in the
    order they happen."""

    #: Reconcile has the daemon's decision and is about to act on it.
    DECIDED = "decided"
    #: BeginEffect marked the tool use as dispatched; the tool has not run.
    #: Read-only tools skip this stage.
    BEGUN = "begun"
    #: The tool returned; its outcome is not in the ledger yet.
    RAN = "ran"
    #: RecordEffect wrote the outcome to the ledger.
    RECORDED = "recorded"


@dataclass(frozen=True)
class ToolEvent:
    """What a tool hook is told: ``decision`` and ``begun`` at DECIDED,
    ``result`` at RAN and RECORDED."""

    stage: ToolStage
    session_id: str
    call: ToolUse
    decision: Decision = Decision.UNSPECIFIED
    begun: bool = False
    result: ToolResult | None = None


ToolResultsFunc = Callable[[Sequence[ToolResult]], list[Message]]
"""Turns the results of one turn, in the order their tool uses were named,
into the message(s) point_b appends."""

ToolHook = Callable[[ToolEvent], None]
"""Observes each ToolStage of every tool use a Session runs or reconciles."""

LedgerErrorHandler = Callable[[ToolUse, ToolResult, BaseException], None]
"""Called when a tool ran but its outcome could not be written to the ledger."""


def anthropic_tool_results(results: Sequence[ToolResult]) -> list[Message]:
    """The default ToolResultsFunc: one message with role "user" whose content
    is an array of Anthropic tool_result blocks,
    ``{"type":"tool_result","tool_use_id":...,"content":...,"is_error":true}``,
    with is_error left out when false."""
    if not results:
        return []
    blocks: list[dict[str, Any]] = []
    for r in results:
        b: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.tool_use_id, "content": r.content}
        if r.is_error:
            b["is_error"] = True
        blocks.append(b)
    return [Message(role="user", content_json=compact_json(blocks))]


def compact_json(v: Any) -> str:
    """JSON text without insignificant space and with non-ASCII characters
    as they are, as Go's encoding/json writes it."""
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
