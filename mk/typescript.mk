# The TypeScript client (client/typescript) and the LangGraph.js saver on it
# (client/langgraphjs, @savepoint-dev/langgraph): the generated code, the
# builds and the tests. ts-proto is pinned by tools/tsgen/package-lock.json and
# installed into bin/tsgen, never into the client's node_modules; buf runs
# it with buf.gen.ts.yaml.

TS_DIR := client/typescript
TSGEN_DIR := $(BIN)/tsgen
TS_PROTOC_GEN := $(TSGEN_DIR)/node_modules/.bin/protoc-gen-ts_proto
TS_SOURCES := $(shell find $(TS_DIR)/src -name '*.ts' 2>/dev/null)
LG_DIR := client/langgraphjs
LG_SOURCES := $(shell find $(LG_DIR)/src -name '*.ts' 2>/dev/null)
# Where the tests find the binaries they run (built by test-typescript).
TS_TEST_ENV := SAVEPOINTD=$(abspath $(BIN))/savepointd SAVEPOINT_DEMO_GO=$(abspath $(BIN))/savepoint-demo

GENERATE_TARGETS += generate-ts
GENERATED_PATHS += $(TS_DIR)/src/gen
CLIENT_TARGETS += clients-typescript clients-langgraphjs
TEST_TARGETS += test-typescript test-langgraphjs

$(TS_PROTOC_GEN): tools/tsgen/package.json tools/tsgen/package-lock.json
	mkdir -p $(TSGEN_DIR)
	cp tools/tsgen/package.json tools/tsgen/package-lock.json $(TSGEN_DIR)/
	npm ci --prefix $(TSGEN_DIR) --ignore-scripts --no-audit --no-fund
	@touch $@

.PHONY: generate-ts
generate-ts: $(BIN)/buf $(TS_PROTOC_GEN) ## Regenerate the TypeScript client's code from proto/ (buf.gen.ts.yaml)
	@# buf.gen.ts.yaml cleans the output directory first, so a deleted .proto leaves nothing behind.
	$(BIN)/buf generate --template buf.gen.ts.yaml

# npm ci only when the lockfile changed; tsc only when a source changed.
$(TS_DIR)/node_modules/.package-lock.json: $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund
	@touch $@

$(TS_DIR)/dist/.built: $(TS_DIR)/node_modules/.package-lock.json $(TS_DIR)/tsconfig.json $(TS_SOURCES)
	cd $(TS_DIR) && npm run build
	@touch $@

.PHONY: clients-typescript
clients-typescript: $(TS_DIR)/dist/.built ## Build the TypeScript client and demo (npm ci && npm run build in client/typescript)

.PHONY: test-typescript
test-typescript: clients-typescript ## TypeScript client tests (node --test) against a real savepointd
	go build -o $(BIN)/ ./cmd/savepointd ./cmd/savepoint-demo
	$(call node_test,$(TS_DIR),dist/tests/*.test.js,$(TS_TEST_ENV))

# @savepoint-dev/langgraph depends on the client through a file: link
# (../typescript), so the client is built first; npm ci installs LangGraph.js
# and the validation suite from its lockfile.
$(LG_DIR)/node_modules/.package-lock.json: $(LG_DIR)/package.json $(LG_DIR)/package-lock.json $(TS_DIR)/dist/.built
	cd $(LG_DIR) && npm ci --no-audit --no-fund
	@touch $@

$(LG_DIR)/dist/.built: $(LG_DIR)/node_modules/.package-lock.json $(LG_DIR)/tsconfig.json $(LG_SOURCES) $(TS_DIR)/dist/.built
	cd $(LG_DIR) && npm run build
	@touch $@

.PHONY: clients-langgraphjs
clients-langgraphjs: $(LG_DIR)/dist/.built ## Build @savepoint-dev/langgraph, the LangGraph.js saver (client/langgraphjs)

# @langchain/langgraph-checkpoint-validation in full, by its validate() under
# vitest (its CLI of 1.1.1 cannot load an initializer), against a real
# savepointd per checkpointer; a run in which no test ran, or one was
# skipped, fails. Then the package's own tests (node --test): uploads of
# checkpoints and writes, the first call after an outage, a graph resumed
# after SIGKILL, DurableToolNode (tools.test.js, and durable.test.js: an
# agent killed before, during and after its tool), retries as the proto
# declares them (retry.test.js), and docs/frameworks/langgraphjs.md's
# examples.
.PHONY: test-langgraphjs
test-langgraphjs: clients-langgraphjs ## The LangGraph.js saver against @langchain/langgraph-checkpoint-validation, on a real savepointd
	go build -o $(BIN)/ ./cmd/savepointd
	@out="$$(mktemp)"; trap 'rm -f "$$out"' EXIT; cd $(LG_DIR) && rc=0 && \
		SAVEPOINTD=$(abspath $(BIN))/savepointd node_modules/.bin/vitest run --globals --reporter=dot \
			--reporter=json --outputFile.json="$$out" dist/tests/validation.spec.js || rc=$$?; \
		counts="$$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")); console.log(r.numPassedTests, r.numTotalTests, r.numPendingTests + r.numTodoTests)' "$$out")"; \
		read -r passed total skipped <<<"$$counts"; \
		echo "test-langgraphjs: $$passed of $$total validation tests passed, $$skipped skipped"; \
		if [[ "$$total" == 0 || "$$skipped" != 0 ]]; then echo "test-langgraphjs: want every test to run, none skipped" >&2; exit 1; fi; \
		[[ $$rc == 0 ]] || exit $$rc; \
		SAVEPOINTD=$(abspath $(BIN))/savepointd node --test --test-concurrency=$(NODE_TEST_CONCURRENCY) --test-reporter=spec dist/tests/*.test.js
