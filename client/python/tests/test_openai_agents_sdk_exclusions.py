"""The list of the OpenAI Agents SDK's session tests not run against
SavepointSession (client/python/sdk_tests, make test-openai-agents-sdk) may
only shrink: a test excluded is one that reads SQLite's internals, each with
its reason."""

from __future__ import annotations

import importlib.util
from importlib.metadata import version
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "sdk_tests" / "savepoint_sdk_plugin.py"

MAX_EXCLUDED = 23
"""The count when the list was reasoned (openai-agents 0.24.0, the modules in
the plugin's MODULES); lower it as tests are won back."""


def _plugin():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("savepoint_sdk_plugin", PLUGIN)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exclusions_do_not_grow() -> None:
    p = _plugin()
    assert len(p.EXCLUDED) <= MAX_EXCLUDED, f"{len(p.EXCLUDED)} SDK tests excluded, more than {MAX_EXCLUDED}"
    reasons = {p.SQLITE_CONNECTIONS, p.SQLITE_ROWS, p.SQLITE_ROLLBACK, p.SQLITE_WORKER}
    for test, reason in p.EXCLUDED.items():
        assert reason in reasons, test
        assert test.split("::")[0] in p.MODULES, test
    assert set(p.QUICK) <= set(p.MODULES)


def test_plugin_pins_the_installed_sdk() -> None:
    assert _plugin().SDK_RELEASE == version("openai-agents")
    mk = (Path(__file__).resolve().parents[3] / "mk" / "openai-agents-sdk.mk").read_text()
    assert f"OPENAI_AGENTS_SDK_VERSION := {version('openai-agents')}" in mk
