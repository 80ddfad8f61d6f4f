"""The tools a DurableAgent runs: the SDK's own (``@beta_tool`` functions),
or plain tool definitions with a function, each with the effect class the
ledger needs."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from savepoint.types import EffectClass

EFFECTS = {
    "read_only": EffectClass.READ_ONLY,
    "idempotent": EffectClass.IDEMPOTENT,
    "side_effect": EffectClass.SIDE_EFFECT,
}


def effect_class(effect: str | EffectClass) -> EffectClass:
    """The EffectClass of ``"read_only"``, ``"idempotent"``,
    ``"side_effect"`` or an EffectClass; anything else raises ValueError."""
    if isinstance(effect, EffectClass):
        return effect.effective
    try:
        return EFFECTS[effect]
    except (KeyError, TypeError):
        raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, not {effect!r}") from None


@dataclass(frozen=True)
class DurableTool:
    """A tool with its effect class: ``definition`` is what the Messages API
    gets in ``tools=``, ``function`` runs it with the tool use's input (a
    dict) and returns text or a list of content blocks (or a coroutine of
    them), and ``effect`` says what running it does (``marked`` is False when
    nothing said so and SIDE_EFFECT was assumed)."""

    definition: Mapping[str, Any]
    function: Callable[[dict[str, Any]], Any]
    effect: EffectClass = EffectClass.SIDE_EFFECT
    marked: bool = False
    annotations: Any = None

    @property
    def name(self) -> str:
        return str(self.definition["name"])

    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)

    def call(self, tool_input: dict[str, Any]) -> Any:
        return self.function(tool_input)


def _from_sdk(tool: Any) -> DurableTool:
    """A DurableTool of a ``@beta_tool``/``@beta_async_tool`` object (its
    ``to_dict()`` and ``call(input)``)."""
    return DurableTool(
        definition=tool.to_dict(), function=tool.call, annotations=getattr(tool, "annotations", None)
    )


def as_tool(tool: Any) -> DurableTool:
    """The DurableTool of a DurableTool, an SDK function tool, or a mapping
    ``{"name", "description", "input_schema", "function"}`` (the definition
    with the function beside it). Anything else raises TypeError."""
    if isinstance(tool, DurableTool):
        return tool
    if isinstance(tool, Mapping):
        fn = tool.get("function")
        if not callable(fn) or not isinstance(tool.get("name"), str):
            raise TypeError("a plain tool is a definition with a name and a callable under \"function\"")
        d = {k: v for k, v in tool.items() if k not in ("function", "annotations")}
        return DurableTool(definition=d, function=fn, annotations=tool.get("annotations"))
    if callable(getattr(tool, "to_dict", None)) and callable(getattr(tool, "call", None)):
        return _from_sdk(tool)
    raise TypeError(f"not a tool: {tool!r} (use @beta_tool, a definition with a function, or durable(...))")


@overload
def durable(tool: None = None, *, effect: str | EffectClass = "side_effect", function: Callable[..., Any] | None = None) -> Callable[[Any], DurableTool]: ...
@overload
def durable(tool: Any, *, effect: str | EffectClass = "side_effect", function: Callable[..., Any] | None = None) -> DurableTool: ...
def durable(tool: Any = None, *, effect: str | EffectClass = "side_effect", function: Callable[..., Any] | None = None) -> Any:
    """Mark a tool with its effect class: ``@durable(effect="read_only")``
    over ``@beta_tool``, ``durable(tool, effect="idempotent")``, or
    ``durable({"name": ..., "input_schema": ...}, function=fn, effect=...)``
    for a plain definition (``fn`` takes the input dict). ``effect`` is
    ``"read_only"`` (re-run after a crash), ``"idempotent"`` or
    ``"side_effect"`` (the default: never run twice)."""
    cls = effect_class(effect)

    def wrap(t: Any) -> DurableTool:
        if function is not None:
            if not isinstance(t, Mapping):
                raise TypeError("function= goes with a plain tool definition (a mapping)")
            t = {**t, "function": function}
        base = as_tool(t)
        return DurableTool(definition=base.definition, function=base.function, effect=cls, marked=True, annotations=base.annotations)

    return wrap if tool is None else wrap(tool)


def resolve(tools: Sequence[Any], trust_mcp_annotations: bool) -> dict[str, DurableTool]:
    """The tools by name, each with its effect class: marked with durable,
    else from its MCP annotations when they are trusted, else SIDE_EFFECT.
    Two tools of one name raise ValueError."""
    out: dict[str, DurableTool] = {}
    for t in tools:
        dt = as_tool(t)
        if not dt.marked and trust_mcp_annotations and dt.annotations is not None:
            dt = DurableTool(dt.definition, dt.function, EffectClass.from_mcp(dt.annotations), True, dt.annotations)
        if dt.name in out:
            raise ValueError(f"two tools are named {dt.name!r}")
        out[dt.name] = dt
    return out


AsyncResult = Awaitable[Any]
