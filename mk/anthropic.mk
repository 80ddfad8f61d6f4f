# The Anthropic SDK integration in TypeScript (client/anthropic,
# @savepoint-dev/anthropic; issue 36): its build and its tests. It depends on
# the TypeScript client by a file: link, so the client is built first
# (mk/typescript.mk; its tests use the client's dist/tests/daemon.js), and on
# @anthropic-ai/sdk from npm, pinned by its package-lock.json.

# Simply expanded with literal paths: this file is included before
# mk/typescript.mk, whose variables are not set yet.
ANTHROPIC_TS_DIR := client/anthropic
ANTHROPIC_TS_SOURCES := $(shell find $(ANTHROPIC_TS_DIR)/src -name '*.ts' 2>/dev/null)

CLIENT_TARGETS += clients-anthropic
TEST_TARGETS += test-anthropic

# npm ci only when the lockfile changed; tsc only when a source (or the client) changed.
$(ANTHROPIC_TS_DIR)/node_modules/.package-lock.json: $(ANTHROPIC_TS_DIR)/package.json $(ANTHROPIC_TS_DIR)/package-lock.json
	cd $(ANTHROPIC_TS_DIR) && npm ci --no-audit --no-fund
	@touch $@

$(ANTHROPIC_TS_DIR)/dist/.built: client/typescript/dist/.built $(ANTHROPIC_TS_DIR)/node_modules/.package-lock.json $(ANTHROPIC_TS_DIR)/tsconfig.json $(ANTHROPIC_TS_SOURCES)
	cd $(ANTHROPIC_TS_DIR) && npm run build
	@touch $@

.PHONY: clients-anthropic
clients-anthropic: $(ANTHROPIC_TS_DIR)/dist/.built ## Build @savepoint-dev/anthropic (npm ci && npm run build in client/anthropic)

.PHONY: test-anthropic
test-anthropic: clients-anthropic ## Anthropic SDK integration tests (node --test): DurableAgent killed and resumed against a fake Messages API
	go build -o $(BIN)/ ./cmd/savepointd
	$(call node_test,$(ANTHROPIC_TS_DIR),dist/tests/*.test.js,SAVEPOINTD=$(abspath $(BIN))/savepointd)

# The whole crash matrix (issue 36): DurableAgent SIGKILLed at every moment
# of every turn (16, as client/python/tests/test_anthropic.py has them) and
# durableToolRunner at eight, each resumed by a new process, and both killed
# during a resume; three node processes a moment, a few minutes in all, so
# make test runs the moments that cover each way a resume goes
# (agent.test.ts says which).
.PHONY: test-anthropic-matrix
test-anthropic-matrix: clients-anthropic ## The TypeScript DurableAgent and durableToolRunner killed at every crash moment and resumed
	go build -o $(BIN)/ ./cmd/savepointd
	cd $(ANTHROPIC_TS_DIR) && SAVEPOINT_FULL_MATRIX=1 SAVEPOINTD=$(abspath $(BIN))/savepointd \
		node --test --test-reporter=spec dist/tests/agent.test.js
