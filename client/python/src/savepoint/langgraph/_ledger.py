"""The graph-thread ledger's client side, shared by DurableToolNode and
@durable: where a call is keyed, its effect class, the BeginThreadEffect and
RecordThreadEffect calls (sync and async) and the serialization of what
they record."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from savepoint._retry import RetryPolicy
from savepoint.address import TLSConfig
from savepoint.errors import DurableToolError, SavepointError
from savepoint.langgraph._conn import Connection
from savepoint.langgraph.saver import SavepointSaver
from savepoint.types import Verified, VerifyStatus
from savepoint.v1 import graph_pb2 as gpb
from savepoint.v1 import savepoint_pb2 as pb

LOGGER = logging.getLogger("savepoint.langgraph")

Effect = Literal["read_only", "idempotent", "side_effect"]
"""What running a tool does: re-running a read-only tool is always safe, an
idempotent one is safe with the same idempotency key, a side-effecting one
must not run twice."""

EFFECTS: Mapping[str, pb.EffectClass] = {
    "read_only": pb.EFFECT_CLASS_READ_ONLY,
    "idempotent": pb.EFFECT_CLASS_IDEMPOTENT,
    "side_effect": pb.EFFECT_CLASS_SIDE_EFFECT,
}

IDEMPOTENCY_KEY = "savepoint_idempotency_key"
"""The key of the run config's ``configurable`` under which a tool run
through the ledger finds its call's idempotency key."""

# LangGraph's keys in a task's configurable (langgraph._internal._constants).
_TASK_ID = "__pregel_task_id"
_CHECKPOINTER = "__pregel_checkpointer"
_RUNTIME = "__pregel_runtime"

_KEY: ContextVar[str] = ContextVar("savepoint_langgraph_idempotency_key", default="")

# The graph ledger caps a tool use id at 256 bytes.
_MAX_TOOL_USE_ID = 256

RUN_ID = uuid.uuid4().hex
"""This process's run id, sent with every BeginThreadEffect: the daemon's
duplicate-intent guard (docs/api.md "The thread ledger") tells an earlier,
interrupted run's calls from this run's by it, so two identical calls of
this process both run."""

REPEATABLE = "savepoint_repeatable"
"""The metadata key (a tool's ``metadata``) that exempts its calls from the
daemon's duplicate-intent guard: set it True for a tool that may
legitimately repeat a call with the same input after a restart."""


class EffectInDoubtError(SavepointError):
    """A side-effecting call was begun before and its outcome never recorded
    (its process died mid-call): it may or may not have taken effect, and it
    was not run again. Raised by a @durable function (a DurableToolNode
    answers such a call with an error ToolMessage instead); ``tool_use_id``,
    ``name``, ``thread_id`` and ``checkpoint_ns`` say which call."""

    def __init__(self, name: str, key: EffectKey) -> None:
        super().__init__(in_doubt_text(name, key.tool_use_id))
        self.name = name
        self.tool_use_id = key.tool_use_id
        self.thread_id = key.thread_id
        self.checkpoint_ns = key.ns


def in_doubt_text(name: str, tool_call_id: str) -> str:
    """The text of the error ToolMessage a DurableToolNode answers for a
    side-effecting call that was begun and never recorded."""
    return (
        f"The outcome of this {name} call (tool_use_id {tool_call_id}) is unknown: it was started, but the agent "
        "stopped before its outcome was recorded. It was not run again, to avoid repeating a side effect. Check "
        "whether it took effect before retrying it."
    )


def idempotency_key() -> str:
    """The idempotency key of the tool use running in this context (a
    DurableToolNode's tool, a @durable function or tool): the same for every
    attempt of one call, to pass to an API that accepts one. Empty outside
    such a call."""
    return _KEY.get()


@contextmanager
def key_set(key: str) -> Iterator[None]:
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


_LEDGER_MARK = "_savepoint_ledger_error"


@contextmanager
def ledger_errors() -> Iterator[None]:
    """Mark the exceptions raised inside as the ledger's (a begin refused or
    failed, a recorded outcome unreadable): a DurableToolNode raises them
    whatever its handle_tool_errors says, as they are not a tool's."""
    try:
        yield
    except Exception as e:
        setattr(e, _LEDGER_MARK, True)
        raise


def is_ledger_error(e: BaseException) -> bool:
    return bool(getattr(e, _LEDGER_MARK, False))


# -- effect classes ---------------------------------------------------------


def check_effect(effect: object, what: str) -> Effect:
    if effect not in EFFECTS:
        raise ValueError(f"{what}: the effect class must be 'read_only', 'idempotent' or 'side_effect', not {effect!r}")
    return effect  # type: ignore[return-value]


def _hint(md: Mapping[str, Any], camel: str, snake: str) -> Any:
    for m in (md, md.get("annotations")):
        if isinstance(m, Mapping):
            for k in (camel, snake):
                if m.get(k) is not None:
                    return m[k]
    return None


def effect_from_metadata(name: str, metadata: Mapping[str, Any] | None, trust_annotations: bool) -> Effect:
    """A tool's effect class: its metadata's ``savepoint_effect``; else,
    when ``trust_annotations``, its MCP annotations (readOnlyHint: read_only,
    idempotentHint: idempotent, as langchain-mcp-adapters puts them in the
    metadata, camelCase or snake_case); else side_effect."""
    md = metadata or {}
    v = md.get("savepoint_effect")
    if v is not None:
        return check_effect(v, f"tool {name!r} (metadata savepoint_effect)")
    if trust_annotations:
        if _hint(md, "readOnlyHint", "read_only_hint") is True:
            return "read_only"
        if _hint(md, "idempotentHint", "idempotent_hint") is True:
            return "idempotent"
    return "side_effect"


def trusts(trust_annotations: bool | Collection[str], name: str) -> bool:
    if isinstance(trust_annotations, bool):
        return trust_annotations
    return name in trust_annotations


# -- where an effect is keyed -------------------------------------------------


@dataclass(frozen=True)
class EffectKey:
    """Where a tool use's effect is in a thread's ledger, and the checkpoint
    its task runs from (for the late-write rule)."""

    thread_id: str
    ns: str
    tool_use_id: str
    checkpoint_id: str


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def effect_key(config: RunnableConfig | None, tool_use_id: str, what: str) -> EffectKey:
    """The ledger key of tool use ``tool_use_id`` made by a task running with
    ``config``: its thread, the namespace of the graph the task's node runs
    in (the task's checkpoint_ns without its own last segment: "" in the
    root graph), and the checkpoint the task runs from."""
    conf = _configurable(config)
    thread = conf.get("thread_id")
    if thread is None or thread == "":
        raise DurableToolError(
            f"{what} needs configurable.thread_id: run it in a graph compiled with a checkpointer, with a thread_id in "
            "the config"
        )
    if not tool_use_id:
        raise DurableToolError(f"{what}: the call has no id; the ledger keys a call by its tool_call_id")
    ns = str(conf.get("checkpoint_ns") or "")
    task = conf.get(_TASK_ID)
    if isinstance(task, str) and task and ns.endswith(":" + task):
        bar = ns.rfind("|")
        ns = "" if bar < 0 else ns[:bar]
    cp = (conf.get("checkpoint_map") or {}).get(ns) or conf.get("checkpoint_id") or ""
    return EffectKey(str(thread), ns, str(tool_use_id), str(cp))


# The calls each running task execution has made of each durable function,
# keyed by (task id, attempt, time of the first attempt): LangGraph gives a
# task a new execution (a retry, a resume) a new attempt number or first
# attempt time. Bounded: an execution long finished is forgotten.
_COUNTS: OrderedDict[tuple[str, int, float | None], Counter[str]] = OrderedDict()
_COUNTS_KEPT = 4096
_COUNTS_LOCK = threading.Lock()


def derived_id(config: RunnableConfig | None, name: str, what: str) -> str:
    """The call id of the next call of durable function ``name`` in the
    running task execution: ``NAME#N@TASK_ID``, N counting this task
    execution's calls of ``name`` from 0. A task run again from the same
    checkpoint (a crash, a RetryPolicy retry, a resume) makes the same calls
    in the same order, so it gets the same ids."""
    runtime = _configurable(config).get(_RUNTIME)
    info = getattr(runtime, "execution_info", None)
    task_id = getattr(info, "task_id", "")
    if not task_id:
        raise DurableToolError(
            f"{what} was called outside a LangGraph node or task, so it has no call id to derive: call it from a node "
            "or a @task, or pass one with .with_call_id(call_id)"
        )
    k = (str(task_id), int(getattr(info, "node_attempt", 1) or 1), getattr(info, "node_first_attempt_time", None))
    with _COUNTS_LOCK:
        counts = _COUNTS.get(k)
        if counts is None:
            counts = _COUNTS[k] = Counter()
            while len(_COUNTS) > _COUNTS_KEPT:
                _COUNTS.popitem(last=False)
        else:
            _COUNTS.move_to_end(k)
        n = counts[name]
        counts[name] += 1
    suffix = f"#{n}@{task_id}"
    head = name.encode()[: _MAX_TOOL_USE_ID - len(suffix.encode())].decode(errors="ignore")
    return head + suffix


# -- values ---------------------------------------------------------------------


def _json_default(o: object) -> Any:
    """A value JSON cannot hold, as a call's input records it: its type."""
    return f"<{type(o).__qualname__}>"


def input_json(args: Any) -> str:
    """A call's arguments as the JSON text its begin sends."""
    if args is None:
        return "{}"
    return json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default)


def default_serde() -> SerializerProtocol:
    return JsonPlusSerializer()


def error_value(e: BaseException) -> dict[str, Any]:
    """An exception as a failed attempt records it."""
    return {"error": {"name": type(e).__name__, "message": str(e)}}


# -- the calls ----------------------------------------------------------------


class Ledger:
    """The effect calls of one DurableToolNode or durable function: begin()
    and record(), on the daemon at ``address`` or, when that is None, on the
    run's checkpointer's daemon when it is a SavepointSaver, else on the
    address SavepointSaver() resolves."""

    def __init__(
        self,
        address: str | None,
        tls: TLSConfig | bool | None,
        retry: RetryPolicy,
        timeout: float | None,
        serde: SerializerProtocol | None,
        logger: logging.Logger | None,
    ) -> None:
        self._address = address
        self._tls = tls
        self._retry = retry
        self._timeout = timeout
        self.serde = serde or default_serde()
        self.logger = logger or LOGGER
        self._own: Connection | None = None
        self._lock = threading.Lock()

    def conn(self, config: RunnableConfig | None) -> Connection:
        if self._address is None:
            saver = _configurable(config).get(_CHECKPOINTER)
            if isinstance(saver, SavepointSaver):
                return saver._conn
        with self._lock:
            if self._own is None:
                self._own = Connection(self._address, self._tls, self._retry, self._timeout, self.logger)
            return self._own

    def close(self) -> None:
        with self._lock:
            if self._own is not None:
                self._own.close()

    async def aclose(self) -> None:
        if self._own is not None:
            await self._own.aclose()

    def approve_request(self, key: EffectKey, approved: bool, note: str, by: str, digest: bytes) -> gpb.ApproveThreadEffectRequest:
        return gpb.ApproveThreadEffectRequest(
            thread_id=key.thread_id, checkpoint_ns=key.ns, tool_use_id=key.tool_use_id,
            decision=pb.APPROVAL_STATUS_APPROVED if approved else pb.APPROVAL_STATUS_DENIED,
            input_digest=digest, decided_by=by, note=note, request_id=str(uuid.uuid4()),
        )

    def approve(self, config: RunnableConfig | None, key: EffectKey, approved: bool, note: str, by: str, digest: bytes) -> gpb.ApproveThreadEffectResponse:
        """ApproveThreadEffect of a call as it waits (digest: its input's),
        retried with its request id."""
        return self.conn(config).unary("ApproveThreadEffect", self.approve_request(key, approved, note, by, digest))  # type: ignore[no-any-return]

    async def aapprove(self, config: RunnableConfig | None, key: EffectKey, approved: bool, note: str, by: str, digest: bytes) -> gpb.ApproveThreadEffectResponse:
        return await self.conn(config).aunary("ApproveThreadEffect", self.approve_request(key, approved, note, by, digest))  # type: ignore[no-any-return]

    def begin_request(
        self, key: EffectKey, name: str, args: Any, effect: Effect, requires_approval: bool = False, repeatable: bool = False
    ) -> gpb.BeginThreadEffectRequest:
        return gpb.BeginThreadEffectRequest(
            requires_approval=requires_approval,
            run_id=RUN_ID,
            repeatable=repeatable,
            thread_id=key.thread_id,
            checkpoint_ns=key.ns,
            tool_use_id=key.tool_use_id,
            name=name,
            input_json=input_json(args),
            effect_class=EFFECTS[effect],
            checkpoint_id=key.checkpoint_id,
            request_id=str(uuid.uuid4()),
        )

    def begin(
        self, config: RunnableConfig | None, key: EffectKey, name: str, args: Any, effect: Effect, requires_approval: bool = False,
        repeatable: bool = False,
    ) -> gpb.BeginThreadEffectResponse:
        """BeginThreadEffect, retried with its request id while the daemon
        is unavailable. Its errors are raised (EffectInputMismatchError for a
        reused call id): the tool has not run."""
        req = self.begin_request(key, name, args, effect, requires_approval, repeatable)
        return self.conn(config).unary("BeginThreadEffect", req)  # type: ignore[no-any-return]

    async def abegin(
        self, config: RunnableConfig | None, key: EffectKey, name: str, args: Any, effect: Effect, requires_approval: bool = False,
        repeatable: bool = False,
    ) -> gpb.BeginThreadEffectResponse:
        req = self.begin_request(key, name, args, effect, requires_approval, repeatable)
        return await self.conn(config).aunary("BeginThreadEffect", req)  # type: ignore[no-any-return]

    def _record_request(self, key: EffectKey, attempt: int, value: Any, is_error: bool) -> gpb.RecordThreadEffectRequest | None:
        try:
            typ, data = self.serde.dumps_typed(value)
        except Exception as e:
            self.logger.error(
                "savepoint: the outcome of tool use %s of thread %s cannot be serialized (%s); it ran, and is not "
                "recorded: a later begin of a side-effecting call will report it in doubt",
                key.tool_use_id, key.thread_id, e,
            )
            return None
        return gpb.RecordThreadEffectRequest(
            thread_id=key.thread_id,
            checkpoint_ns=key.ns,
            tool_use_id=key.tool_use_id,
            attempt=attempt,
            output=gpb.TypedValue(type=typ, data=data, total_size=len(data)),
            is_error=is_error,
            request_id=str(uuid.uuid4()),
        )

    def _record_failed(self, key: EffectKey, e: SavepointError) -> None:
        self.logger.error(
            "savepoint: the outcome of tool use %s of thread %s could not be recorded (%s); it ran, and a later begin "
            "of a side-effecting call will report it in doubt",
            key.tool_use_id, key.thread_id, e,
        )

    def record(self, config: RunnableConfig | None, key: EffectKey, attempt: int, value: Any, is_error: bool) -> None:
        """RecordThreadEffect of attempt ``attempt``'s outcome. A record that
        fails (after the connection's retries) is logged, not raised: the
        tool ran and its outcome stands; the entry stays begun."""
        if attempt <= 0:
            return  # the late-write rule dropped the begin: nothing to record
        req = self._record_request(key, attempt, value, is_error)
        if req is None:
            return
        try:
            self.conn(config).unary("RecordThreadEffect", req)
        except SavepointError as e:
            self._record_failed(key, e)

    async def arecord(self, config: RunnableConfig | None, key: EffectKey, attempt: int, value: Any, is_error: bool) -> None:
        if attempt <= 0:
            return
        req = self._record_request(key, attempt, value, is_error)
        if req is None:
            return
        try:
            await self.conn(config).aunary("RecordThreadEffect", req)
        except SavepointError as e:
            self._record_failed(key, e)

    def resolve_request(self, key: EffectKey, v: Verified, value: Any) -> gpb.ResolveThreadEffectRequest:
        """The ResolveThreadEffect recording v (resolver VERIFY); for DONE,
        ``value`` (the ToolMessage answering the call) is its output."""
        req = gpb.ResolveThreadEffectRequest(
            thread_id=key.thread_id, checkpoint_ns=key.ns, tool_use_id=key.tool_use_id,
            outcome=pb.RESOLUTION_OUTCOME_DONE if v.status == VerifyStatus.DONE else pb.RESOLUTION_OUTCOME_NOT_DONE,
            note=v.note, resolver_kind=pb.RESOLVER_KIND_VERIFY, resolved_by="verify", request_id=str(uuid.uuid4()),
        )
        if v.status == VerifyStatus.DONE:
            typ, data = self.serde.dumps_typed(value)
            req.output.CopyFrom(gpb.TypedValue(type=typ, data=data, total_size=len(data)))
        return req

    def resolve(self, config: RunnableConfig | None, key: EffectKey, v: Verified, value: Any) -> gpb.ResolveThreadEffectResponse:
        """ResolveThreadEffect, retried with its request id; errors raised."""
        return self.conn(config).unary("ResolveThreadEffect", self.resolve_request(key, v, value))  # type: ignore[no-any-return]

    async def aresolve(self, config: RunnableConfig | None, key: EffectKey, v: Verified, value: Any) -> gpb.ResolveThreadEffectResponse:
        return await self.conn(config).aunary("ResolveThreadEffect", self.resolve_request(key, v, value))  # type: ignore[no-any-return]

    def duplicate(self, resp: gpb.BeginThreadEffectResponse, key: EffectKey) -> tuple[str, bool]:
        """The answer to a call the daemon's duplicate-intent guard caught
        (``resp.duplicate_of`` set): the daemon's text, the one wording every
        client gives the model, followed for a REUSE answer by the earlier
        call's output, and whether it is an error (the earlier call is in
        doubt)."""
        if resp.decision != REUSE:
            return resp.tool_result_text, True
        out = self.load(key, resp.duplicate_of)
        body = out.content if isinstance(out, ToolMessage) else out
        if not isinstance(body, str):
            body = json.dumps(body, default=str)
        return resp.tool_result_text + body, False

    def load(self, key: EffectKey, effect: gpb.ThreadEffect) -> Any:
        """The recorded result of a REUSE answer."""
        out = effect.output
        try:
            return self.serde.loads_typed((out.type, bytes(out.data)))
        except Exception as e:
            raise DurableToolError(
                f"the recorded outcome of tool use {key.tool_use_id!r} of thread {key.thread_id!r} (type {out.type!r}) "
                f"cannot be read: {e}"
            ) from e


VerifyHook = Callable[[str, Any], Verified | Awaitable[Verified]]
"""A tool's verify hook: given the idempotency key of a call in doubt and
the call's arguments, it says whether the call took effect:
savepoint.Verified.done(output), .not_done() or .unknown(); an exception
counts as unknown. It may be a coroutine function under ainvoke."""


def definite(v: object, key: EffectKey, logger: logging.Logger) -> Verified | None:
    """v when a verify hook's answer is DONE or NOT_DONE, else None (logged):
    the call stays in doubt."""
    if isinstance(v, Verified) and v.status in (VerifyStatus.DONE, VerifyStatus.NOT_DONE):
        return v
    logger.warning("savepoint: verify could not tell whether tool use %s of thread %s took effect; it stays in doubt", key.tool_use_id, key.thread_id)
    return None


def verify_failed(e: BaseException, key: EffectKey, logger: logging.Logger) -> None:
    logger.warning("savepoint: verify of tool use %s of thread %s failed (%s); it stays in doubt", key.tool_use_id, key.thread_id, e)


def attempt_of(resp: gpb.BeginThreadEffectResponse) -> int:
    """The attempt a RUN answer started; 0 when the late-write rule dropped
    the begin (nothing is stored, so nothing is recorded)."""
    return 0 if resp.dropped_late else int(resp.effect.attempts)


REUSE = pb.DECISION_REUSE
RUN = pb.DECISION_RUN
IN_DOUBT = pb.DECISION_IN_DOUBT
AWAIT_APPROVAL = pb.DECISION_AWAIT_APPROVAL
DENIED = pb.DECISION_DENIED


def unexpected(resp: gpb.BeginThreadEffectResponse, key: EffectKey) -> DurableToolError:
    return DurableToolError(f"BeginThreadEffect answered decision {resp.decision} for tool use {key.tool_use_id!r}")
