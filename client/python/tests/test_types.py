"""Effect classes from MCP tool annotations, tool uses and tool results."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import REPO

from savepoint import EffectClass, ToolResult, ToolUse, anthropic_tool_results


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        (None, EffectClass.SIDE_EFFECT),
        ({}, EffectClass.SIDE_EFFECT),
        ({"readOnlyHint": True}, EffectClass.READ_ONLY),
        ({"readOnlyHint": True, "idempotentHint": True}, EffectClass.READ_ONLY),
        ({"readOnlyHint": False, "idempotentHint": True}, EffectClass.IDEMPOTENT),
        ({"idempotentHint": True, "destructiveHint": True}, EffectClass.IDEMPOTENT),
        ({"readOnlyHint": False, "destructiveHint": False}, EffectClass.SIDE_EFFECT),
        ({"readOnlyHint": "yes"}, EffectClass.SIDE_EFFECT),  # a hint is a boolean
        (SimpleNamespace(readOnlyHint=True, idempotentHint=None), EffectClass.READ_ONLY),
        (SimpleNamespace(readOnlyHint=None, idempotentHint=True), EffectClass.IDEMPOTENT),
        ({"name": "search", "annotations": {"readOnlyHint": True}}, EffectClass.READ_ONLY),
        (SimpleNamespace(name="pay", annotations=SimpleNamespace(idempotentHint=True)), EffectClass.IDEMPOTENT),
    ],
)
def test_effect_class_from_mcp(annotations: object, want: EffectClass) -> None:
    assert EffectClass.from_mcp(annotations) == want


def test_tool_use_proto() -> None:
    p = ToolUse("t1", "read", "{}", EffectClass.READ_ONLY).to_proto()
    assert (p.effect_class, p.begin_tracked) == (EffectClass.READ_ONLY, False)
    p = ToolUse("t2", "write", effect_class=EffectClass.UNSPECIFIED).to_proto()
    assert (p.effect_class, p.begin_tracked) == (EffectClass.SIDE_EFFECT, True)
    assert ToolUse.from_proto(p) == ToolUse("t2", "write", "", EffectClass.SIDE_EFFECT)


def test_anthropic_tool_results() -> None:
    assert anthropic_tool_results([]) == []
    (m,) = anthropic_tool_results([ToolResult("a", "ok <&>"), ToolResult("b", "boom", is_error=True)])
    assert m.role == "user"
    assert m.content_json == (
        '[{"type":"tool_result","tool_use_id":"a","content":"ok <&>"},'
        '{"type":"tool_result","tool_use_id":"b","content":"boom","is_error":true}]'
    )


def test_tool_use_and_result_share_tool_use_id() -> None:
    call = ToolUse(tool_use_id="toolu_1", name="send")
    assert call.tool_use_id == ToolResult(tool_use_id="toolu_1", content="").tool_use_id
    assert call.to_proto().tool_use_id == "toolu_1"
    with pytest.warns(DeprecationWarning, match="tool_use_id"):
        assert call.id == "toolu_1"  # the old name, kept as a deprecated alias


def test_effect_class_from_mcp_shared_cases() -> None:
    """The MCP annotation cases every client's mapping is tested against."""
    cases = json.loads((REPO / "client" / "testdata" / "mcp_annotations.json").read_text())["cases"]
    assert cases
    for c in cases:
        assert EffectClass.from_mcp(c["annotations"]) == EffectClass[c["effect"]], c["name"]
