# The Claude Agent SDK integration (savepoint.claude_agent; issue 36) run for
# real: claude-agent-sdk with its bundled CLI (~360 MB installed), so it has
# a virtual environment of its own (./.venv-claude) and a target of its own,
# outside `make test`. The hooks' and the store's tests, which do not need
# the SDK, run in `make test` (client/python/tests/test_claude_agent.py).
#
# mk/python.mk, which sets PY_DIR and PYTHON, is included after this file:
# the prerequisite names client/python itself, the recipes use them.
CLAUDE_VENV := .venv-claude

$(CLAUDE_VENV)/.savepoint-stamp: client/python/pyproject.toml
	rm -rf $(CLAUDE_VENV)
	$(PYTHON) -m venv $(CLAUDE_VENV)
	$(CLAUDE_VENV)/bin/pip install --quiet --disable-pip-version-check -e './$(PY_DIR)[claude-agent]' 'pytest>=8' 'pytest-timeout>=2.3'
	@touch $@

# Each test starts the agent twice (killed, then resumed), each run spawning
# the SDK's CLI: about a minute in all.
.PHONY: test-claude-agent
test-claude-agent: $(CLAUDE_VENV)/.savepoint-stamp ## The Claude Agent SDK run for real (its bundled CLI, a fake Messages API), SIGKILLed and resumed
	go build -o $(BIN)/ ./cmd/savepointd ./cmd/savepoint-demo
	cd $(PY_DIR) && SAVEPOINTD=$(abspath $(BIN))/savepointd SAVEPOINT_DEMO=$(abspath $(BIN))/savepoint-demo \
		../../$(CLAUDE_VENV)/bin/python -m pytest -p no:cacheprovider tests/e2e_claude_agent_sdk.py
