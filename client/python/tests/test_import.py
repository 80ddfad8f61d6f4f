"""``import savepoint`` is cheap: it loads grpc, protobuf and the stubs only
when a name that needs them is used, and the client never loads the graph
stubs or google.rpc's protos before it needs them. (python -X importtime
measures it; docs/profiles.md has the figures.)"""

from __future__ import annotations

import subprocess
import sys

import savepoint
from savepoint import errors


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running code."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    return set(out.split())


def test_import_savepoint_loads_no_grpc() -> None:
    mods = loaded_after("import savepoint")
    assert not {m for m in mods if m == "grpc" or m.startswith(("grpc.", "google.protobuf", "savepoint.v1"))}, sorted(mods)


def test_client_loads_no_graph_stubs_or_status_protos() -> None:
    mods = loaded_after("from savepoint import Client")
    assert "grpc" in mods and "savepoint.v1.savepoint_pb2" in mods
    assert not {"savepoint.v1.graph_pb2", "google.rpc.error_details_pb2", "langgraph"} & mods


def test_every_name_is_there() -> None:
    assert set(savepoint.__all__) >= {"Client", "Session", "RetryPolicy", "ToolUse", "SessionStatus", *errors.__all__}
    assert set(errors.__all__) == set(errors.NAMES)
    for name in savepoint.__all__:
        assert getattr(savepoint, name) is not None, name
    assert savepoint.SessionFencedError is errors.SessionFencedError
    assert set(savepoint.__all__) <= set(dir(savepoint))
    ns: dict[str, object] = {}
    exec("from savepoint import *", ns)
    assert set(savepoint.__all__) <= set(ns)
    try:
        savepoint.NoSuchThing  # type: ignore[attr-defined]
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("savepoint.NoSuchThing did not raise AttributeError")


def test_one_durable_tool_error() -> None:
    # savepoint.openai_agents and savepoint.langgraph raise the one
    # DurableToolError of savepoint.errors, so one except clause catches both.
    from savepoint import langgraph, openai_agents

    assert openai_agents.DurableToolError is errors.DurableToolError
    assert langgraph.DurableToolError is errors.DurableToolError
    assert savepoint.DurableToolError is errors.DurableToolError
    assert issubclass(errors.DurableToolError, errors.SavepointError)
