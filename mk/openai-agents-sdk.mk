# The OpenAI Agents SDK's own tests against SavepointSession (issue 41):
# openai-agents' sdist of the pinned release, its test dependencies in a
# directory of their own (not in ./.venv), and client/python/sdk_tests's
# pytest plugin, which swaps SavepointSession in for the sessions the
# listed modules build (its MODULES) on a real savepointd and deselects
# the tests listed in its EXCLUDED, each with its reason.
# `make test` runs the short form (the plugin's QUICK modules: the session
# and compaction-suffix tests, about 20 s); test-openai-agents-sdk runs
# every listed module (session, session limit, compaction, compaction
# visibility, deferred session writes, runner, resume; several minutes).
# Recursive: VENV and PY_DIR come from mk/python.mk, included after this file.
OPENAI_AGENTS_SDK_VERSION := 0.24.0
SDK_TESTS_DIR = $(BIN)/openai-agents-sdk-$(OPENAI_AGENTS_SDK_VERSION)
SDK_TESTS_DEPS := pytest-asyncio==1.5.0 pytest-mock==3.17.0 aiosqlite==0.22.1 cryptography==50.0.2 inline-snapshot==0.37.0
SDK_TESTS_ENV = PYTHONPATH=$(abspath $(SDK_TESTS_DIR)/extra):$(abspath $(PY_DIR)/sdk_tests) SAVEPOINTD=$(abspath $(BIN))/savepointd
SDK_TESTS_PYTEST = $(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider -p savepoint_sdk_plugin

TEST_TARGETS += test-openai-agents-sdk-quick

$(SDK_TESTS_DIR)/.ready: mk/openai-agents-sdk.mk | clients-python
	rm -rf $(SDK_TESTS_DIR) && mkdir -p $(SDK_TESTS_DIR)
	$(VENV)/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d $(SDK_TESTS_DIR) openai-agents==$(OPENAI_AGENTS_SDK_VERSION)
	tar xzf $(SDK_TESTS_DIR)/openai_agents-$(OPENAI_AGENTS_SDK_VERSION).tar.gz -C $(SDK_TESTS_DIR)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --target $(SDK_TESTS_DIR)/extra $(SDK_TESTS_DEPS)
	# ./.venv's pytest runs the tests, not the copy pip put beside the plugins.
	cd $(SDK_TESTS_DIR)/extra && rm -rf _pytest pytest py.py pluggy pluggy-* iniconfig iniconfig-* packaging packaging-* pygments pygments-* pytest-[0-9]*.dist-info bin
	@touch $@

.PHONY: test-openai-agents-sdk-quick
test-openai-agents-sdk-quick: $(SDK_TESTS_DIR)/.ready clients-python ## openai-agents' own session and compaction-suffix tests against SavepointSession (the short form make test runs)
	go build -o $(BIN)/ ./cmd/savepointd
	cd $(SDK_TESTS_DIR)/openai_agents-$(OPENAI_AGENTS_SDK_VERSION) && \
		mods=($$($(SDK_TESTS_ENV) $(abspath $(VENV))/bin/python -c 'import savepoint_sdk_plugin as p; print(*p.QUICK)')) && [[ $${#mods[@]} -gt 0 ]] && \
		$(SDK_TESTS_ENV) SAVEPOINT_SDK_QUICK=1 $(SDK_TESTS_PYTEST) \
			"$${mods[@]}"

.PHONY: test-openai-agents-sdk
test-openai-agents-sdk: $(SDK_TESTS_DIR)/.ready clients-python ## openai-agents' own session, compaction, deferred-write, runner and resume tests against SavepointSession (several minutes; not in make test)
	go build -o $(BIN)/ ./cmd/savepointd
	cd $(SDK_TESTS_DIR)/openai_agents-$(OPENAI_AGENTS_SDK_VERSION) && \
		mods=($$($(SDK_TESTS_ENV) $(abspath $(VENV))/bin/python -c 'import savepoint_sdk_plugin as p; print(*p.MODULES)')) && [[ $${#mods[@]} -gt 0 ]] && \
		$(SDK_TESTS_ENV) nice -n 10 $(SDK_TESTS_PYTEST) \
			"$${mods[@]}"
