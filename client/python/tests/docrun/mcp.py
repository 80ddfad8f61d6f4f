# docrun prelude: an MCP tool as the mcp package gives it, its annotations
# a ToolAnnotations-like object.
from types import SimpleNamespace

from savepoint import EffectClass

tool = SimpleNamespace(name="read_notes", annotations=SimpleNamespace(readOnlyHint=True, idempotentHint=None, destructiveHint=None))
