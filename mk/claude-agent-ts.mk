# The Claude Agent SDK integration in TypeScript
# (@savepoint-dev/anthropic/claude-agent; issue 36) checked against the SDK's
# own types. The module writes the SDK's types structurally, so that
# @savepoint-dev/anthropic does not depend on the SDK; this target compiles
# client/anthropic/sdkcheck/*.ts and the TypeScript example of
# docs/frameworks/claude-agent-sdk.md against @anthropic-ai/claude-agent-sdk
# (installed in ./.claude-agent-ts without its optional native CLI: about
# 14 MB, so it is part of make test). Its behaviour is tested by
# test-anthropic (client/anthropic/src/tests/claude_agent.test.ts).

CLAUDE_TS_DIR := .claude-agent-ts
CLAUDE_TS_SDK := 0.3.337
CLAUDE_TS_ZOD := 4.6.7

TEST_TARGETS += check-claude-agent-ts

$(CLAUDE_TS_DIR)/.stamp-$(CLAUDE_TS_SDK):
	rm -rf $(CLAUDE_TS_DIR) && mkdir -p $(CLAUDE_TS_DIR)
	cd $(CLAUDE_TS_DIR) && echo '{"type": "module", "private": true}' > package.json && \
		npm install --no-audit --no-fund --save-exact --omit=optional --legacy-peer-deps \
			@anthropic-ai/claude-agent-sdk@$(CLAUDE_TS_SDK) zod@$(CLAUDE_TS_ZOD)
	@touch $@

.PHONY: check-claude-agent-ts
check-claude-agent-ts: clients-anthropic $(CLAUDE_TS_DIR)/.stamp-$(CLAUDE_TS_SDK) ## Compile @savepoint-dev/anthropic/claude-agent and its docs example against @anthropic-ai/claude-agent-sdk's types
	rm -rf $(CLAUDE_TS_DIR)/check && mkdir -p $(CLAUDE_TS_DIR)/check $(CLAUDE_TS_DIR)/node_modules/@savepoint-dev
	ln -sfn $(abspath client/anthropic) $(CLAUDE_TS_DIR)/node_modules/@savepoint-dev/anthropic
	ln -sfn $(abspath client/typescript) $(CLAUDE_TS_DIR)/node_modules/@savepoint-dev/client
	cp client/anthropic/sdkcheck/*.ts $(CLAUDE_TS_DIR)/check/
	awk '/^```ts$$/ { f = 1; next } /^```$$/ { f = 0 } f' docs/frameworks/claude-agent-sdk.md > $(CLAUDE_TS_DIR)/check/docs_example.ts
	@test -s $(CLAUDE_TS_DIR)/check/docs_example.ts || { echo "check-claude-agent-ts: no ts block in docs/frameworks/claude-agent-sdk.md" >&2; exit 1; }
	client/anthropic/node_modules/.bin/tsc --noEmit --strict --skipLibCheck --module nodenext --moduleResolution nodenext \
		--target es2022 --types node --typeRoots client/anthropic/node_modules/@types $(CLAUDE_TS_DIR)/check/*.ts
	@echo "check-claude-agent-ts: the store, its hooks and the docs example type-check against @anthropic-ai/claude-agent-sdk $(CLAUDE_TS_SDK)"

# The SDK run for real: its bundled native CLI (the optional dependency
# @anthropic-ai/claude-agent-sdk-linux-x64 and the rest, about 480 MB in
# ./.claude-agent-ts-e2e) pointed at the fake Messages API of the Python tests
# (client/python/tests/fake_messages_api.py, standard library only, run with
# python3), the agent client/anthropic/e2e/claude_agent_app.mjs SIGKILLed and
# resumed; and docs/frameworks/claude-agent-sdk.md's TypeScript example run as
# it is, then resumed. Not in make test, as test-claude-agent is not.
CLAUDE_TS_E2E := .claude-agent-ts-e2e
CLAUDE_TS_MCP := 1.32.2

$(CLAUDE_TS_E2E)/.stamp-$(CLAUDE_TS_SDK):
	rm -rf $(CLAUDE_TS_E2E) && mkdir -p $(CLAUDE_TS_E2E)
	cd $(CLAUDE_TS_E2E) && echo '{"type": "module", "private": true}' > package.json && \
		npm install --no-audit --no-fund --save-exact \
			@anthropic-ai/claude-agent-sdk@$(CLAUDE_TS_SDK) zod@$(CLAUDE_TS_ZOD) @modelcontextprotocol/sdk@$(CLAUDE_TS_MCP)
	@touch $@

.PHONY: test-claude-agent-ts
test-claude-agent-ts: clients-anthropic $(CLAUDE_TS_E2E)/.stamp-$(CLAUDE_TS_SDK) ## The Claude Agent SDK (TypeScript) run for real (its bundled CLI, a fake Messages API), SIGKILLed and resumed
	go build -o $(BIN)/ ./cmd/savepointd
	rm -rf $(CLAUDE_TS_E2E)/e2e && mkdir -p $(CLAUDE_TS_E2E)/e2e $(CLAUDE_TS_E2E)/node_modules/@savepoint-dev
	ln -sfn $(abspath client/anthropic) $(CLAUDE_TS_E2E)/node_modules/@savepoint-dev/anthropic
	ln -sfn $(abspath client/typescript) $(CLAUDE_TS_E2E)/node_modules/@savepoint-dev/client
	cp client/anthropic/e2e/*.mjs $(CLAUDE_TS_E2E)/e2e/
	cd $(CLAUDE_TS_E2E) && REPO_ROOT=$(abspath .) SAVEPOINTD=$(abspath $(BIN))/savepointd \
		node --test --test-concurrency=1 e2e/claude_agent.e2e.mjs
