# The benchmark (issue 9): bench/ is its own module, so SQLite and the other
# baselines never enter savepointd's go.mod or go.sum. `make bench` runs it
# in full, `make bench-quick` in its short form (under 3 minutes once the
# store of 100,000 sessions is cached in BENCH_CACHE). `make bench-compare`
# runs the go test micro-benchmarks and compares them with benchstat against
# the committed GOBENCH_BASELINE; `make bench-baseline` rewrites it.
#
# bench/ follows the root module through a replace directive, so a new
# dependency of the root needs its checksums in bench/go.sum too: the
# commands here run with -mod=mod, which adds them (commit the change), and
# `make bench-tidy` tidies bench/go.mod.

BENCH_CACHE ?= $(BIN)/benchcache
BENCH_FLAGS ?=
# benchstat is installed at a pinned version, outside go.mod (it has no tags).
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
GOBENCH_PKGS := ./daemon/rpc ./daemon/badgerstore
GOBENCH_PATTERN ?= .
GOBENCH_COUNT ?= 6
GOBENCH_TIME ?= 1s
GOBENCH_BASELINE := bench/testdata/gobench-baseline.txt

TEST_TARGETS += test-bench

.PHONY: bench-build
bench-build: ## Build savepointd, the savepoint CLI (its web inspector is measured) and the benchmark program into ./bin
	go build -o $(BIN)/ ./cmd/savepointd ./cmd/savepoint
	cd bench && go build -mod=mod -o ../$(BIN)/savepoint-bench .

.PHONY: bench-tidy
bench-tidy: ## go mod tidy in bench/ (after the root module's dependencies change)
	cd bench && go mod tidy

.PHONY: bench
bench: bench-build ## The benchmark, full run: savepointd against fsync, Badger, a JSON file, SQLite; on PostgreSQL against plain SQL (docs/benchmarks.md)
	$(BIN)/savepoint-bench -savepointd $(BIN)/savepointd -savepoint $(BIN)/savepoint -cache $(BENCH_CACHE) $(BENCH_FLAGS)

.PHONY: bench-quick
bench-quick: bench-build ## The benchmark, short run (-quick); ends with the name=value figures
	$(BIN)/savepoint-bench -quick -savepointd $(BIN)/savepointd -savepoint $(BIN)/savepoint -cache $(BENCH_CACHE) $(BENCH_FLAGS)

# The checkpointer comparison (docs/benchmarks.md, "Checkpointers
# compared"): savepointd on Badger and on PostgreSQL, SQLite, LangGraph's
# AsyncSqliteSaver and AsyncPostgresSaver (client/python/bench/checkpointers.py
# in ./.venv) and the seed's JSON file, in one run and one table; it draws
# its latency CDF and throughput plots into CHECKPOINTERS_PLOTS. About 6
# minutes on the 2-core machine. PY_DIR and VENV come from mk/python.mk.
CHECKPOINTERS_PLOTS ?= docs/benchmarks
CHECKPOINTERS_FLAGS ?=

.PHONY: bench-checkpointers
bench-checkpointers: bench-build clients-python ## Checkpointers compared: savepointd (Badger, PostgreSQL), SQLite, LangGraph's savers, the seed's JSON file; one table and two plots
	$(BIN)/savepoint-bench -checkpointers -savepointd $(BIN)/savepointd -cache $(BENCH_CACHE) \
		-langgraph-python $(VENV)/bin/python -checkpointers-script $(PY_DIR)/bench/checkpointers.py \
		-plots $(CHECKPOINTERS_PLOTS) $(CHECKPOINTERS_FLAGS)

$(BIN)/.benchstat-$(BENCHSTAT_VERSION):
	GOBIN=$(abspath $(BIN)) go install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)
	@rm -f $(BIN)/.benchstat-*
	@touch $@

$(BIN)/benchstat: $(BIN)/.benchstat-$(BENCHSTAT_VERSION)
	@touch $@

.PHONY: bench-compare
bench-compare: $(BIN)/benchstat ## Go micro-benchmarks against GOBENCH_BASELINE, with benchstat
	go test -run '^$$' -bench '$(GOBENCH_PATTERN)' -benchmem -count $(GOBENCH_COUNT) -benchtime $(GOBENCH_TIME) \
		$(GOBENCH_PKGS) | tee $(BIN)/gobench-new.txt
	$(BIN)/benchstat $(GOBENCH_BASELINE) $(BIN)/gobench-new.txt

.PHONY: bench-baseline
bench-baseline: ## Rewrite GOBENCH_BASELINE from a run of the micro-benchmarks (then commit it)
	go test -run '^$$' -bench '$(GOBENCH_PATTERN)' -benchmem -count $(GOBENCH_COUNT) -benchtime $(GOBENCH_TIME) \
		$(GOBENCH_PKGS) > $(GOBENCH_BASELINE).new
	mv $(GOBENCH_BASELINE).new $(GOBENCH_BASELINE)

# The benchmark module's own checks (cheap: the program's logic, not a run),
# and that none of its dependencies reached the root module: not in go.mod
# or go.sum, not among the packages the root module builds. (`go list -m
# all` cannot serve here: it fails on two buf.build modules the proxy does
# not serve.)
BENCH_ONLY_MODULES := modernc.org/sqlite modernc.org/libc gonum.org/v1/plot

.PHONY: test-bench
test-bench: ## vet and test the bench/ module; fail if its baselines entered the root module
	cd bench && go vet -mod=mod ./... && go test -mod=mod -count=1 ./...
	@deps="$$(go list -deps ./...)"; \
	for m in $(BENCH_ONLY_MODULES); do \
		if grep -qE "(^|[[:space:]])$$m " go.mod go.sum || grep -q "^$$m/\|^$$m\$$" <<<"$$deps"; then \
			echo "test-bench: $$m is in the root module; keep it in bench/go.mod" >&2; exit 1; \
		fi; \
	done
