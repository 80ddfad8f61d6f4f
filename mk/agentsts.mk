# The OpenAI Agents SDK integration in TypeScript (client/openai-agents,
# @savepoint-dev/openai-agents; issue 20): its build and its tests. It
# depends on the TypeScript client by a file: link, so the client is built
# first (mk/typescript.mk), and on @openai/agents-core from npm, pinned by
# its package-lock.json and installed with npm ci.

# Simply expanded with literal paths: this file is included before
# mk/typescript.mk, whose variables are not set yet.
AGENTS_TS_DIR := client/openai-agents
AGENTS_TS_SOURCES := $(shell find $(AGENTS_TS_DIR)/src -name '*.ts' 2>/dev/null)

CLIENT_TARGETS += clients-openai-agents
TEST_TARGETS += test-openai-agents

# npm ci only when the lockfile changed; tsc only when a source (or the client) changed.
$(AGENTS_TS_DIR)/node_modules/.package-lock.json: $(AGENTS_TS_DIR)/package.json $(AGENTS_TS_DIR)/package-lock.json
	cd $(AGENTS_TS_DIR) && npm ci --no-audit --no-fund
	@touch $@

$(AGENTS_TS_DIR)/dist/.built: client/typescript/dist/.built $(AGENTS_TS_DIR)/node_modules/.package-lock.json $(AGENTS_TS_DIR)/tsconfig.json $(AGENTS_TS_SOURCES)
	cd $(AGENTS_TS_DIR) && npm run build
	@touch $@

.PHONY: clients-openai-agents
clients-openai-agents: $(AGENTS_TS_DIR)/dist/.built ## Build @savepoint-dev/openai-agents (npm ci && npm run build in client/openai-agents)

.PHONY: test-openai-agents
test-openai-agents: clients-openai-agents ## OpenAI Agents SDK integration tests (node --test) against a real savepointd
	go build -o $(BIN)/ ./cmd/savepointd
	$(call node_test,$(AGENTS_TS_DIR),dist/tests/*.test.js,SAVEPOINTD=$(abspath $(BIN))/savepointd)

# The targets' names before the package's folder was named after it
# (client/typescript-agents), kept for one release.
.PHONY: clients-typescript-agents test-typescript-agents
clients-typescript-agents: clients-openai-agents ## Deprecated: make clients-openai-agents
test-typescript-agents: test-openai-agents ## Deprecated: make test-openai-agents
