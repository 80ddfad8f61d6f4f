# The OpenAI Agents SDK's own session tests against SavepointSession (issue
# 41): openai-agents' sdist of the pinned release, its test dependencies in
# a directory of their own (not in ./.venv), and client/python/sdk_tests's
# pytest plugin, which swaps SavepointSession in for SQLiteSession on a real
# savepointd and deselects the tests listed in its EXCLUDED. Recursive: VENV
# and PY_DIR come from mk/python.mk, included after this file.
OPENAI_AGENTS_SDK_VERSION := 0.24.0
SDK_TESTS_DIR = $(BIN)/openai-agents-sdk-$(OPENAI_AGENTS_SDK_VERSION)
SDK_TESTS_DEPS := pytest-asyncio==1.5.0 pytest-mock==3.17.0 aiosqlite==0.22.1 cryptography==50.0.2 inline-snapshot==0.37.0

TEST_TARGETS += test-openai-agents-sdk

$(SDK_TESTS_DIR)/.ready: mk/openai-agents-sdk.mk | clients-python
	rm -rf $(SDK_TESTS_DIR) && mkdir -p $(SDK_TESTS_DIR)
	$(VENV)/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d $(SDK_TESTS_DIR) openai-agents==$(OPENAI_AGENTS_SDK_VERSION)
	tar xzf $(SDK_TESTS_DIR)/openai_agents-$(OPENAI_AGENTS_SDK_VERSION).tar.gz -C $(SDK_TESTS_DIR)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --target $(SDK_TESTS_DIR)/extra $(SDK_TESTS_DEPS)
	# ./.venv's pytest runs the tests, not the copy pip put beside the plugins.
	cd $(SDK_TESTS_DIR)/extra && rm -rf _pytest pytest py.py pluggy pluggy-* iniconfig iniconfig-* packaging packaging-* pygments pygments-* pytest-[0-9]*.dist-info bin
	@touch $@

.PHONY: test-openai-agents-sdk
test-openai-agents-sdk: $(SDK_TESTS_DIR)/.ready clients-python ## openai-agents' own session and compaction tests against SavepointSession on a real savepointd
	go build -o $(BIN)/ ./cmd/savepointd
	cd $(SDK_TESTS_DIR)/openai_agents-$(OPENAI_AGENTS_SDK_VERSION) && \
		PYTHONPATH=$(abspath $(SDK_TESTS_DIR)/extra):$(abspath $(PY_DIR)/sdk_tests) SAVEPOINTD=$(abspath $(BIN))/savepointd \
		$(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider -p savepoint_sdk_plugin \
			tests/memory/test_session.py tests/memory/test_compaction_suffix.py
