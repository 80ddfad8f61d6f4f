# @openai/agents-core's own session tests against SavepointSession (issue
# 41): the test folder of agents-core from a checkout of openai-agents-js
# (OPENAI_AGENTS_JS, a git checkout; no package registry serves the SDK's
# tests) run under vitest against the @openai/agents-core that
# client/openai-agents pins, twice: beside the SDK's own MemorySession (the
# control) and with SavepointSession in its place on a real savepointd
# (client/openai-agents/sdk_tests). The target fails when a test that passes
# with MemorySession does not pass with SavepointSession; the tests left out
# of the SavepointSession run, each with its reason, are in sdk_tests/excluded.ts.
# Not part of `make test`, whose clean clone has no such checkout.
OPENAI_AGENTS_JS ?=
AGENTS_SDK_TESTS_DIR := client/openai-agents/sdk_tests
AGENTS_SDK_TESTS_COPY = $(BIN)/openai-agents-js-tests

$(AGENTS_SDK_TESTS_DIR)/node_modules/.package-lock.json: $(AGENTS_SDK_TESTS_DIR)/package.json $(AGENTS_SDK_TESTS_DIR)/package-lock.json
	cd $(AGENTS_SDK_TESTS_DIR) && npm ci --no-audit --no-fund
	@touch $@

.PHONY: test-openai-agents-sdk-js
test-openai-agents-sdk-js: clients-openai-agents $(AGENTS_SDK_TESTS_DIR)/node_modules/.package-lock.json ## agents-core's own session, runner and guardrail tests (OPENAI_AGENTS_JS=<openai-agents-js checkout>) against SavepointSession, beside MemorySession
	@if [[ -z "$(OPENAI_AGENTS_JS)" || ! -d "$(OPENAI_AGENTS_JS)/packages/agents-core/test" ]]; then \
		echo "test-openai-agents-sdk-js: set OPENAI_AGENTS_JS to a checkout of openai-agents-js (its packages/agents-core/test is run)" >&2; exit 2; fi
	go build -o $(BIN)/ ./cmd/savepointd
	rm -rf $(AGENTS_SDK_TESTS_COPY) && mkdir -p $(AGENTS_SDK_TESTS_COPY)
	cp -r "$(OPENAI_AGENTS_JS)/packages/agents-core/test" $(AGENTS_SDK_TESTS_COPY)/test
	@echo "test-openai-agents-sdk-js: tests of agents-core $$(node -p 'require(process.argv[1]).version' "$(abspath $(OPENAI_AGENTS_JS))/packages/agents-core/package.json") against @openai/agents-core $$(node -p 'require(process.argv[1]).version' "$(abspath $(AGENTS_TS_DIR))/node_modules/@openai/agents-core/package.json")"
	cd $(AGENTS_SDK_TESTS_DIR) && for p in memory savepoint; do \
		SDK_TESTS=$(abspath $(AGENTS_SDK_TESTS_COPY))/test SAVEPOINTD=$(abspath $(BIN))/savepointd \
			nice -n 10 npx vitest run --config vitest.config.ts --project $$p --reporter=dot --reporter=json \
			--outputFile.json=$(abspath $(AGENTS_SDK_TESTS_COPY))/$$p.json >/dev/null 2>$(abspath $(AGENTS_SDK_TESTS_COPY))/$$p.log || true; \
		[[ -s $(abspath $(AGENTS_SDK_TESTS_COPY))/$$p.json ]] || { cat $(abspath $(AGENTS_SDK_TESTS_COPY))/$$p.log >&2; exit 1; }; \
	done
	node $(AGENTS_SDK_TESTS_DIR)/compare.mjs $(AGENTS_SDK_TESTS_COPY)/memory.json $(AGENTS_SDK_TESTS_COPY)/savepoint.json
