"""@durable: the ledger's guarantee for a tool or a plain function called
from a graph node of one's own or a functional-API @task.

A call is keyed by (thread_id, the graph's checkpoint namespace, call id).
The call id is, in order: the one given with ``.with_call_id(call_id)``; a
ToolCall's id when a durable tool is invoked with one
(``tool.invoke(ai_message.tool_calls[0])``); else derived from the running
task: ``NAME#N@TASK_ID``, the N-th call (from 0) of the function named NAME
in this execution of the task. LangGraph gives a task run again from the
same checkpoint (after a crash, by a RetryPolicy, on a resume) the same task
id, and a node or task must be deterministic to be resumed, so it makes the
same calls in the same order and gets the same ids; a run that calls with
other arguments at the same position is refused with
EffectInputMismatchError rather than taken for another call.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.checkpoint.serde.base import SerializerProtocol
from pydantic import PrivateAttr

from savepoint._retry import DEFAULT_RETRY_POLICY, RetryPolicy
from savepoint.types import Verified, VerifyStatus
from savepoint.address import TLSConfig
from savepoint.langgraph import _ledger
from savepoint.langgraph._ledger import IDEMPOTENCY_KEY, EffectKey, EffectInDoubtError, Effect, Ledger, VerifyHook

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

# Parameters left out of a call's recorded input: a run config or runtime
# differs on every run.
_NOT_INPUT = frozenset({"config", "runtime"})


def _with_key(config: RunnableConfig, key: str) -> RunnableConfig:
    return cast(RunnableConfig, {**config, "configurable": {**(config.get("configurable") or {}), IDEMPOTENCY_KEY: key}})


def _is_tool_call(input: Any) -> bool:
    return isinstance(input, dict) and input.get("type") == "tool_call" and "id" in input and "args" in input


def _model_args(tool: BaseTool, args: Any) -> Any:
    """A tool call's arguments without the ones LangGraph injects (state,
    store, runtime): those the model gave."""
    if not isinstance(args, dict):
        return args
    try:
        fields = getattr(tool.tool_call_schema, "model_fields", None)
    except Exception:
        fields = None
    if not isinstance(fields, dict):
        return args
    return {k: v for k, v in args.items() if k in fields}


def _verified(hook: VerifyHook | None, resp: Any, key: EffectKey, args: Any, ledger: Ledger) -> Verified | None:
    """The definite answer of verify hook ``hook`` about a call the begin
    ``resp`` answered IN_DOUBT; None when there is no hook, the call is not
    in doubt (or is a caught duplicate), the hook cannot tell, or it raised."""
    if hook is None or resp.decision != _ledger.IN_DOUBT or resp.HasField("duplicate_of"):
        return None
    try:
        v = hook(resp.effect.idempotency_key, args)
        if inspect.isawaitable(v):
            close = getattr(v, "close", None)
            if close is not None:
                close()
            raise TypeError("an async verify hook needs the async call (ainvoke, or an async function)")
    except Exception as e:
        _ledger.verify_failed(e, key, ledger.logger)
        return None
    return _ledger.definite(v, key, ledger.logger)


async def _averified(hook: VerifyHook | None, resp: Any, key: EffectKey, args: Any, ledger: Ledger) -> Verified | None:
    if hook is None or resp.decision != _ledger.IN_DOUBT or resp.HasField("duplicate_of"):
        return None
    try:
        v = hook(resp.effect.idempotency_key, args)
        if inspect.isawaitable(v):
            v = await v
    except Exception as e:
        _ledger.verify_failed(e, key, ledger.logger)
        return None
    return _ledger.definite(v, key, ledger.logger)


# -- tools ------------------------------------------------------------------------


class DurableTool(BaseTool):
    """A tool whose calls go through the graph-thread ledger (made by
    ``durable(tool)``): invoked with a ToolCall (``tool.invoke(call)``) the
    call is keyed by the call's id and answered with a ToolMessage, the
    error ToolMessage of in_doubt_text when in doubt; invoked with its
    arguments it is keyed by a derived id (the module's doc) and raises
    EffectInDoubtError when in doubt. A DurableToolNode given a DurableTool
    runs its inner tool under its own effect calls."""

    inner: BaseTool
    """The tool run."""
    effect: str = "side_effect"
    """Its effect class."""
    _ledger: Ledger = PrivateAttr()
    _verify: VerifyHook | None = PrivateAttr(default=None)

    def __init__(self, tool: BaseTool, effect: Effect, ledger: Ledger, verify: VerifyHook | None = None, repeatable: bool = False) -> None:
        super().__init__(
            inner=tool,
            effect=effect,
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            return_direct=tool.return_direct,
            response_format=tool.response_format,
            tags=tool.tags,
            metadata={**(tool.metadata or {}), "savepoint_effect": effect, **({_ledger.REPEATABLE: True} if repeatable else {})},
        )
        self._ledger = ledger
        self._verify = verify

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a DurableTool runs through invoke() and ainvoke()")

    def _repeatable(self) -> bool:
        """Whether the tool opts out of the duplicate-intent guard (metadata
        savepoint_repeatable)."""
        return bool((self.metadata or {}).get(_ledger.REPEATABLE))

    def _prepare(self, input: Any, config: RunnableConfig) -> tuple[bool, EffectKey, Any]:
        what = f"durable tool {self.name!r}"
        if _is_tool_call(input):
            call_id, args, is_call = str(input["id"] or ""), input["args"], True
        else:
            call_id, args, is_call = _ledger.derived_id(config, self.name, what), input, False
        return is_call, _ledger.effect_key(config, call_id, what), _model_args(self.inner, args)

    def _answer(self, resp: Any, key: EffectKey, is_call: bool) -> tuple[bool, Any]:
        if resp.HasField("duplicate_of"):
            # The same call of an earlier, interrupted run answers this one.
            if not is_call:
                if resp.decision == _ledger.REUSE:
                    return True, self._ledger.load(key, resp.duplicate_of)
                raise EffectInDoubtError(self.name, key)
            text, is_error = self._ledger.duplicate(resp, key)
            return True, ToolMessage(content=text, name=self.name, tool_call_id=key.tool_use_id, status="error" if is_error else "success")
        if resp.decision == _ledger.REUSE:
            return True, self._ledger.load(key, resp.effect)
        if resp.decision == _ledger.IN_DOUBT:
            if not is_call:
                raise EffectInDoubtError(self.name, key)
            text = _ledger.in_doubt_text(self.name, key.tool_use_id)
            return True, ToolMessage(content=text, name=self.name, tool_call_id=key.tool_use_id, status="error")
        if resp.decision != _ledger.RUN:
            raise _ledger.unexpected(resp, key)
        return False, None

    def _found(self, v: Verified, key: EffectKey, is_call: bool) -> Any:
        """The answer to a call a verify hook found done: a ToolMessage for
        a ToolCall, else the output it found."""
        if not is_call:
            return v.output
        content: str | list[str | dict[Any, Any]] = v.output if isinstance(v.output, str) else [dict(b) for b in v.output]
        return ToolMessage(content=content, name=self.name, tool_call_id=key.tool_use_id, status="error" if v.is_error else "success")

    def invoke(self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        cfg = ensure_config(config)
        is_call, key, args = self._prepare(input, cfg)
        resp = self._ledger.begin(cfg, key, self.name, args, cast(Effect, self.effect), repeatable=self._repeatable())
        v = _verified(self._verify, resp, key, args, self._ledger)
        if v is not None:
            # Recorded with ResolveThreadEffect: done answers the call from
            # now on; not done lets the next begin start a new attempt.
            if v.status == VerifyStatus.DONE:
                found = self._found(v, key, is_call)
                self._ledger.resolve(cfg, key, v, found)
                return found
            self._ledger.resolve(cfg, key, v, None)
            resp = self._ledger.begin(cfg, key, self.name, args, cast(Effect, self.effect), repeatable=self._repeatable())
        done, out = self._answer(resp, key, is_call)
        if done:
            return out
        attempt, idem = _ledger.attempt_of(resp), resp.effect.idempotency_key
        try:
            with _ledger.key_set(idem):
                out = self.inner.invoke(input, _with_key(cfg, idem), **kwargs)
        except Exception as e:
            self._ledger.record(cfg, key, attempt, _ledger.error_value(e), True)
            raise
        self._ledger.record(cfg, key, attempt, out, False)
        return out

    async def ainvoke(self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        cfg = ensure_config(config)
        is_call, key, args = self._prepare(input, cfg)
        resp = await self._ledger.abegin(cfg, key, self.name, args, cast(Effect, self.effect), repeatable=self._repeatable())
        v = await _averified(self._verify, resp, key, args, self._ledger)
        if v is not None:
            if v.status == VerifyStatus.DONE:
                found = self._found(v, key, is_call)
                await self._ledger.aresolve(cfg, key, v, found)
                return found
            await self._ledger.aresolve(cfg, key, v, None)
            resp = await self._ledger.abegin(cfg, key, self.name, args, cast(Effect, self.effect), repeatable=self._repeatable())
        done, out = self._answer(resp, key, is_call)
        if done:
            return out
        attempt, idem = _ledger.attempt_of(resp), resp.effect.idempotency_key
        try:
            with _ledger.key_set(idem):
                out = await self.inner.ainvoke(input, _with_key(cfg, idem), **kwargs)
        except Exception as e:
            await self._ledger.arecord(cfg, key, attempt, _ledger.error_value(e), True)
            raise
        await self._ledger.arecord(cfg, key, attempt, out, False)
        return out


# -- functions ----------------------------------------------------------------------


class DurableFunction(Protocol[P, R_co]):
    """A function whose calls go through the graph-thread ledger (made by
    ``@durable``): a function (an ``async def`` one for an async function)
    called as the decorated one is. A call is keyed by a derived id, or the
    one given with ``f.with_call_id(call_id)(...)``; a recorded result is
    returned without running the function (rebuilt by the serializer, as a
    checkpoint value is), a side-effecting call begun and never recorded
    raises EffectInDoubtError, and an exception is recorded as a failed
    attempt and raised. The run config is the running node's or task's, or
    the one given to with_call_id."""

    effect: Effect
    """The function's effect class."""
    name: str
    """The name its calls have in the ledger."""
    repeatable: bool
    """Whether its calls are exempt from the duplicate-intent guard."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def with_call_id(self, call_id: str | None, *, config: RunnableConfig | None = None) -> Callable[P, R_co]:
        """The function keyed by ``call_id`` (None: a derived id) in the run
        of ``config`` (None: the running node's or task's)."""
        ...


class _Function:
    """What a DurableFunction does."""

    def __init__(self, fn: Callable[..., Any], effect: Effect, name: str, ledger: Ledger, verify: VerifyHook | None = None,
                 repeatable: bool = False) -> None:
        self.fn = fn
        self.effect: Effect = effect
        self.name = name
        self.ledger = ledger
        self.verify = verify
        self.repeatable = repeatable
        self.sig = inspect.signature(fn)

    def key(self, call_id: str | None, config: RunnableConfig | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[RunnableConfig | None, EffectKey, dict[str, Any]]:
        cfg = config if config is not None else var_child_runnable_config.get()
        what = f"durable function {self.name!r}"
        bound = self.sig.bind(*args, **kwargs)  # a call that cannot bind raises here, before any begin
        data = {k: v for k, v in bound.arguments.items() if k not in _NOT_INPUT}
        cid = call_id if call_id is not None else _ledger.derived_id(cfg, self.name, what)
        return cfg, _ledger.effect_key(cfg, cid, what), data

    def _answer(self, resp: Any, key: EffectKey) -> tuple[bool, Any]:
        if resp.HasField("duplicate_of"):
            # The same call of an earlier, interrupted run: its result, or
            # its doubt.
            if resp.decision == _ledger.REUSE:
                return True, self.ledger.load(key, resp.duplicate_of)
            raise EffectInDoubtError(self.name, key)
        if resp.decision == _ledger.REUSE:
            return True, self.ledger.load(key, resp.effect)
        if resp.decision == _ledger.IN_DOUBT:
            raise EffectInDoubtError(self.name, key)
        if resp.decision != _ledger.RUN:
            raise _ledger.unexpected(resp, key)
        return False, None

    def call(self, call_id: str | None, config: RunnableConfig | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        cfg, key, data = self.key(call_id, config, args, kwargs)
        resp = self.ledger.begin(cfg, key, self.name, data, self.effect, repeatable=self.repeatable)
        v = _verified(self.verify, resp, key, data, self.ledger)
        if v is not None:
            if v.status == VerifyStatus.DONE:
                self.ledger.resolve(cfg, key, v, v.output)
                return v.output
            self.ledger.resolve(cfg, key, v, None)
            resp = self.ledger.begin(cfg, key, self.name, data, self.effect, repeatable=self.repeatable)
        done, out = self._answer(resp, key)
        if done:
            return out
        attempt, idem = _ledger.attempt_of(resp), resp.effect.idempotency_key
        try:
            with _ledger.key_set(idem):
                out = self.fn(*args, **kwargs)
        except Exception as e:
            self.ledger.record(cfg, key, attempt, _ledger.error_value(e), True)
            raise
        self.ledger.record(cfg, key, attempt, out, False)
        return out

    async def acall(self, call_id: str | None, config: RunnableConfig | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        cfg, key, data = self.key(call_id, config, args, kwargs)
        resp = await self.ledger.abegin(cfg, key, self.name, data, self.effect, repeatable=self.repeatable)
        v = await _averified(self.verify, resp, key, data, self.ledger)
        if v is not None:
            if v.status == VerifyStatus.DONE:
                await self.ledger.aresolve(cfg, key, v, v.output)
                return v.output
            await self.ledger.aresolve(cfg, key, v, None)
            resp = await self.ledger.abegin(cfg, key, self.name, data, self.effect, repeatable=self.repeatable)
        done, out = self._answer(resp, key)
        if done:
            return out
        attempt, idem = _ledger.attempt_of(resp), resp.effect.idempotency_key
        try:
            with _ledger.key_set(idem):
                out = await self.fn(*args, **kwargs)
        except Exception as e:
            await self.ledger.arecord(cfg, key, attempt, _ledger.error_value(e), True)
            raise
        await self.ledger.arecord(cfg, key, attempt, out, False)
        return out


def _durable_function(f: _Function) -> Any:
    """The function a DurableFunction is: ``async def`` for an async
    function, so that LangGraph (a @task, a node) and inspect see it as
    one."""
    if inspect.iscoroutinefunction(f.fn):

        @functools.wraps(f.fn)
        async def afunc(*args: Any, **kwargs: Any) -> Any:
            return await f.acall(None, None, args, kwargs)

        def awith_call_id(call_id: str | None, *, config: RunnableConfig | None = None) -> Callable[..., Any]:
            async def call(*args: Any, **kwargs: Any) -> Any:
                return await f.acall(call_id, config, args, kwargs)

            return call

        func: Any = afunc
        func.with_call_id = awith_call_id
    else:

        @functools.wraps(f.fn)
        def sfunc(*args: Any, **kwargs: Any) -> Any:
            return f.call(None, None, args, kwargs)

        def with_call_id(call_id: str | None, *, config: RunnableConfig | None = None) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                return f.call(call_id, config, args, kwargs)

            return call

        func = sfunc
        func.with_call_id = with_call_id
    func.effect = f.effect
    func.name = f.name
    func.repeatable = f.repeatable
    return func


# -- the decorator --------------------------------------------------------------


class _Durable(Protocol):
    @overload
    def __call__(self, func: BaseTool) -> DurableTool: ...
    @overload
    def __call__(self, func: Callable[P, R_co]) -> DurableFunction[P, R_co]: ...


# Durable functions given no connection arguments share one ledger per
# serializer-less default: the run's SavepointSaver, else one connection.
_SHARED: dict[tuple[Any, ...], Ledger] = {}
_SHARED_LOCK = threading.Lock()


def _ledger_for(
    address: str | None,
    tls: TLSConfig | bool | None,
    retry: RetryPolicy,
    timeout: float | None,
    serde: SerializerProtocol | None,
) -> Ledger:
    if tls is not None or serde is not None:
        return Ledger(address, tls, retry, timeout, serde, None)
    k = (address, retry, timeout)
    with _SHARED_LOCK:
        got = _SHARED.get(k)
        if got is None:
            got = _SHARED[k] = Ledger(address, None, retry, timeout, None, None)
        return got


def _make(func: Any, effect: Effect | None, name: str | None, ledger: Ledger, verify: VerifyHook | None, repeatable: bool) -> Any:
    if isinstance(func, DurableTool):
        raise TypeError(f"durable: tool {func.name!r} is durable already")
    if isinstance(func, BaseTool):
        eff = _ledger.check_effect(effect, "durable") if effect is not None else _ledger.effect_from_metadata(
            func.name, func.metadata, False
        )
        if name is not None and name != func.name:
            raise ValueError("durable: a tool keeps its name; name= is for functions")
        return DurableTool(func, eff, ledger, verify, repeatable)
    if not callable(func):
        raise TypeError(f"durable: {func!r} is neither a tool nor a function")
    eff = _ledger.check_effect(effect if effect is not None else "side_effect", "durable")
    return _durable_function(_Function(func, eff, name or getattr(func, "__qualname__", None) or repr(func), ledger, verify, repeatable))


@overload
def durable(
    func: BaseTool,
    *,
    effect: Effect | None = None,
    name: str | None = None,
    address: str | None = None,
    tls: TLSConfig | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: float | None = None,
    serde: SerializerProtocol | None = None,
    verify: VerifyHook | None = None,
    repeatable: bool = False,
) -> DurableTool: ...
@overload
def durable(
    func: Callable[P, R],
    *,
    effect: Effect | None = None,
    name: str | None = None,
    address: str | None = None,
    tls: TLSConfig | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: float | None = None,
    serde: SerializerProtocol | None = None,
    verify: VerifyHook | None = None,
    repeatable: bool = False,
) -> DurableFunction[P, R]: ...
@overload
def durable(
    func: None = None,
    *,
    effect: Effect | None = None,
    name: str | None = None,
    address: str | None = None,
    tls: TLSConfig | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: float | None = None,
    serde: SerializerProtocol | None = None,
    verify: VerifyHook | None = None,
    repeatable: bool = False,
) -> _Durable: ...


def durable(
    func: Any = None,
    *,
    effect: Effect | None = None,
    name: str | None = None,
    address: str | None = None,
    tls: TLSConfig | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: float | None = None,
    serde: SerializerProtocol | None = None,
    verify: VerifyHook | None = None,
    repeatable: bool = False,
) -> Any:
    """Give a tool or a function (sync or async) the ledger's guarantee when
    it is called from a graph node of one's own or a functional-API @task:
    a call whose result is recorded returns it without running again; a
    side-effecting call begun and never recorded (its process died) is not
    run again (EffectInDoubtError, or an error ToolMessage for a tool
    invoked with a ToolCall); a read-only or idempotent one runs again with
    the same idempotency key (savepoint.langgraph.idempotency_key(), and
    configurable.savepoint_idempotency_key for a tool).

    ``@durable``, ``@durable(effect="idempotent")`` or ``durable(tool)``.
    ``effect`` is "read_only", "idempotent" or "side_effect"; unset, a
    tool's metadata savepoint_effect, else "side_effect". ``name`` names a
    function's calls in the ledger (default its __qualname__). How a call is
    keyed: the module's doc, and docs/frameworks/langgraph.md. ``address``
    and the rest are as for DurableToolNode.

    ``verify``, when given, is the verify hook ``verify(idempotency_key,
    args)`` (args: a tool call's arguments, or a function's as a dict by
    parameter name), asked about a call in doubt: Verified.done(output) is
    recorded (ResolveThreadEffect) and answers the call (a function returns
    output; a tool invoked with a ToolCall answers a ToolMessage),
    not_done() runs the call again as a new attempt under the same key, and
    unknown() or an exception leaves it in doubt. ``repeatable=True``
    exempts the calls from the daemon's duplicate-intent guard (for a tool,
    as its metadata savepoint_repeatable does): a call that repeats an
    earlier, interrupted run's call with the same input runs."""
    ledger = _ledger_for(address, tls, retry, timeout, serde)
    if func is not None:
        return _make(func, effect, name, ledger, verify, repeatable)
    return lambda f: _make(f, effect, name, ledger, verify, repeatable)


__all__ = ["DurableFunction", "DurableTool", "durable"]
