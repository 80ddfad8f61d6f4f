# Savepoint's build. Tools are built from go.mod's tool block (plus a pinned
# grpcurl) into ./bin and rebuilt only when go.mod changes, so repeated runs
# are fast. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build
# Nothing here gains from make-level parallelism (go parallelizes itself), and
# generate must never race the compiler.
.NOTPARALLEL:
MAKEFLAGS += --no-builtin-rules --warn-undefined-variables

BIN := bin

# grpcurl is installed at a pinned version, outside go.mod, to keep go.mod
# lean. It is only used by hand (README walk-through), never by the build.
GRPCURL_VERSION := v1.9.4

# Binaries: one per directory under cmd/.
CMDS := $(wildcard cmd/*)

# Where `make run` puts its data and socket. A socket path must stay under
# ~100 bytes (sun_path); set SAVEPOINT_ADDR to pick another address.
DATA_DIR ?= data
SAVEPOINT_ADDR ?=
RUN_SOCKET = $(abspath $(DATA_DIR))/savepoint.sock
RUN_FLAGS ?=

# The version the binaries report (savepointd --version and version,
# GetServerInfo, savepoint --version). Empty: the checkout's
# `git describe --tags --always --dirty` (as containerd's Makefile does), so
# that the commit shows even where Go's VCS stamping is off
# (GOFLAGS=-buildvcs=false); outside a git checkout, NO_GIT_VERSION, and the
# build says so.
VERSION ?=
NO_GIT_VERSION := unknown (not built from a git checkout)
BUILD_VERSION := $(or $(VERSION),$(shell git describe --tags --always --dirty 2>/dev/null),$(NO_GIT_VERSION))
VERSION_VARS := github.com/savepoint-dev/savepoint/internal/version.version
VERSION_LDFLAGS = -ldflags "$(foreach v,$(VERSION_VARS),-X '$(v)=$(BUILD_VERSION)')"

GO_TEST_TIMEOUT ?= 15m
# The long forms (crashtest, powerloss, soak and the like) run for as long
# as their CYCLES take, past the unit tests' timeout.
SOAK_TIMEOUT ?= 4h
FUZZTIME ?= 30s
# make crashtest: kill -9 cycles and concurrent clients (`make test` runs 5).
CYCLES ?= 50
CLIENTS ?= 32
# make loadtest: sessions and duration (`make test` runs a 10 s form).
LOAD_SESSIONS ?= 256
LOAD_DURATION ?= 60s
LOAD_FLAGS ?=

# node --test runs this many test files at once. The files are mostly
# CPU-bound on 2 cores, so this gains little there: test-typescript took
# 91 s with 4 against 116 s one at a time.
NODE_TEST_CONCURRENCY ?= 4

# $(call node_test,DIR,FILES,ENV) runs node --test over FILES in DIR with
# ENV, printing the spec report; its TAP copy counts the tests that ran (node
# reports a file without tests as a passing test named after the file, so
# those are not counted), and a run in which none ran fails.
define node_test
@tap="$$(mktemp)"; trap 'rm -f "$$tap"' EXIT; cd $(1) && rc=0 && \
	$(3) node --test --test-concurrency=$(NODE_TEST_CONCURRENCY) --test-reporter=spec --test-reporter-destination=stdout \
		--test-reporter=tap --test-reporter-destination="$$tap" $(2) || rc=$$?; \
	n="$$(grep '^# Subtest: ' "$$tap" | grep -vc '\.test\.js$$' || true)"; \
	if [[ -z "$$n" || "$$n" == 0 ]]; then echo "$@: no test ran" >&2; exit 1; fi; \
	echo "$@: $$n tests ran"; \
	exit $$rc
endef

# Each mk/*.mk fragment adds one area's targets (a client, the systemd
# units, the benchmark) and appends to these lists, so that generate,
# checkgenerate and test cover it without this file naming it.
GENERATE_TARGETS :=
GENERATED_PATHS := proto
TEST_TARGETS :=
CLIENT_TARGETS :=
include $(sort $(wildcard mk/*.mk))

.PHONY: help
help: ## Describe the targets
	@grep -hE '^[a-z][a-zA-Z0-9_-]*:.*## ' $(MAKEFILE_LIST) | \
		awk -F ':.*## ' '{ printf "  %-14s %s\n", $$1, $$2 }'

# ---------------------------------------------------------------------------
# Tools

$(BIN)/buf: go.mod go.sum
	GOBIN=$(abspath $(BIN)) go install github.com/bufbuild/buf/cmd/buf
	@touch $@

$(BIN)/protoc-gen-go: go.mod go.sum
	GOBIN=$(abspath $(BIN)) go install google.golang.org/protobuf/cmd/protoc-gen-go
	@touch $@

$(BIN)/protoc-gen-go-grpc: go.mod go.sum
	GOBIN=$(abspath $(BIN)) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc
	@touch $@

# The stamp names the version, so changing GRPCURL_VERSION reinstalls it.
$(BIN)/.grpcurl-$(GRPCURL_VERSION):
	GOBIN=$(abspath $(BIN)) go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	@rm -f $(BIN)/.grpcurl-*
	@touch $@

$(BIN)/grpcurl: $(BIN)/.grpcurl-$(GRPCURL_VERSION)
	@touch $@

GEN_TOOLS := $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc

# strace, for tests/crashtest's fault injection: installed when missing and
# possible (Debian, root); those tests skip, saying why, when it cannot be had.
.PHONY: strace
strace:
	@command -v strace >/dev/null || (apt-get update -qq && apt-get install -y -qq strace) || \
		echo "strace: not installed and cannot be installed here; the fault-injection tests will skip" >&2

.PHONY: tools
tools: $(GEN_TOOLS) $(BIN)/grpcurl ## Build the tools into ./bin (buf, protoc plugins, grpcurl)

# ---------------------------------------------------------------------------
# Code generation

.PHONY: generate
generate: generate-go $(GENERATE_TARGETS) ## Regenerate the code of every language from proto/

.PHONY: generate-go
generate-go: $(GEN_TOOLS) ## Regenerate the Go code from proto/ (buf.gen.yaml)
	@# Remove the old output first so a deleted .proto leaves nothing behind.
	find proto -name '*.pb.go' -delete
	$(BIN)/buf generate

.PHONY: checkgenerate
checkgenerate: generate ## Fail if the committed generated code is stale
	@if ! git diff --exit-code --stat -- $(GENERATED_PATHS); then \
		echo "checkgenerate: generated code differs from git; run 'make generate' and commit it" >&2; \
		exit 1; \
	fi
	@untracked="$$(git ls-files --others --exclude-standard -- $(GENERATED_PATHS))"; \
	if [[ -n "$$untracked" ]]; then \
		echo "checkgenerate: untracked generated files (git add them):" >&2; \
		echo "$$untracked" >&2; \
		exit 1; \
	fi

# ---------------------------------------------------------------------------
# Checks

.PHONY: lint
lint: $(BIN)/buf breaking ## buf lint, buf format, buf breaking (mk/api.mk), go vet, gofmt, checkfiles (mk/files.mk)
	$(BIN)/buf lint
	$(BIN)/buf format -d --exit-code
	go vet ./...
	@files="$$(git ls-files --cached --others --exclude-standard -- '*.go' | xargs -r gofmt -l)"; \
	if [[ -n "$$files" ]]; then \
		echo "gofmt: these files need 'gofmt -w':" >&2; \
		echo "$$files" >&2; \
		exit 1; \
	fi

.PHONY: clients
clients: $(CLIENT_TARGETS) ## Build the Python and TypeScript clients (./.venv, client/typescript/dist)

.PHONY: test
test: checkgenerate lint test-go $(TEST_TARGETS) ## checkgenerate, lint, then every test suite

# go test prints a package only when it finishes; test-go pipes its events
# through testprogress (internal/testprogress), which prints each package as
# it starts and finishes, every failed test's output, and each minute the
# packages still running.
$(BIN)/testprogress: $(wildcard internal/testprogress/*.go tools/testprogress/*.go)
	go build -o $@ ./tools/testprogress

.PHONY: test-go
test-go: strace $(BIN)/testprogress ## Go tests with the race detector
	go test -json -race -count=1 -timeout $(GO_TEST_TIMEOUT) ./... 2>&1 | $(BIN)/testprogress

.PHONY: crashtest
crashtest: strace ## Crash durability: kill -9 savepointd CYCLES times under CLIENTS clients (defaults 50, 32)
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestCrashDurability$$' ./tests/crashtest \
		-cycles=$(CYCLES) -clients=$(CLIENTS)

.PHONY: loadtest
loadtest: ## Load: LOAD_SESSIONS agent loops for LOAD_DURATION against a fresh savepointd (defaults 256, 60s)
	go build -o $(BIN)/ ./cmd/savepointd ./cmd/savepoint-load
	@tmp="$$(mktemp -d)"; pid=; \
	trap '[[ -n "$$pid" ]] && kill "$$pid" 2>/dev/null; rm -rf "$$tmp"' EXIT; \
	$(BIN)/savepointd --data-dir "$$tmp/data" --listen "unix:$$tmp/s.sock" 2>"$$tmp/savepointd.log" & pid=$$!; \
	rc=0; $(BIN)/savepoint-load --addr "unix:$$tmp/s.sock" --pid "$$pid" \
		--sessions $(LOAD_SESSIONS) --duration $(LOAD_DURATION) $(LOAD_FLAGS) || rc=$$?; \
	kill -TERM "$$pid" 2>/dev/null || true; drc=0; wait "$$pid" || drc=$$?; pid=; \
	if (( drc != 0 )); then echo "loadtest: savepointd exited $$drc; its log:" >&2; cat "$$tmp/savepointd.log" >&2; rc=1; fi; \
	exit $$rc

# `make bench` (the benchmark program under bench/) is in mk/bench.mk.
.PHONY: bench-go
bench-go: ## Go micro-benchmarks (go test -bench, -benchmem) of every package
	go test -run '^$$' -bench . -benchmem ./...

.PHONY: fuzz
fuzz: ## Run every Fuzz target for FUZZTIME (default 30s) each
	@for pkg in $$(go list ./...); do \
		for fz in $$(go test -list '^Fuzz' "$$pkg" | grep '^Fuzz' || true); do \
			echo "== $$pkg $$fz ($(FUZZTIME))"; \
			go test -run '^$$' -fuzz "^$$fz\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

# ---------------------------------------------------------------------------
# Build and run

.PHONY: build
build: ## Build every cmd/* binary into ./bin (version: VERSION=v1.2.3, else git describe)
ifneq ($(CMDS),)
	@if [[ '$(BUILD_VERSION)' == '$(NO_GIT_VERSION)' ]]; then \
		echo "build: not a git checkout, so the binaries report version \"$(NO_GIT_VERSION)\"; VERSION=v1.2.3 names it" >&2; \
	fi
	go build $(VERSION_LDFLAGS) -o $(BIN)/ $(addprefix ./,$(CMDS))
else
	@echo "build: nothing under cmd/ yet"
endif

.PHONY: run
run: build ## Build and start savepointd on ./data (socket ./data/savepoint.sock)
ifeq ($(SAVEPOINT_ADDR),)
	@sock='$(RUN_SOCKET)'; if (( $${#sock} > 100 )); then \
		echo "run: socket path $(RUN_SOCKET) is too long for a unix socket;" >&2; \
		echo "     set SAVEPOINT_ADDR=unix:/tmp/savepoint.sock (or 127.0.0.1:PORT)" >&2; \
		exit 1; \
	fi
	@mkdir -p $(DATA_DIR)
	@echo "savepointd: data in $(DATA_DIR)/, listening on unix:$(RUN_SOCKET)"
	@echo "try:        bin/grpcurl -plaintext -unix $(RUN_SOCKET) list   (make tools builds bin/grpcurl)"
	$(BIN)/savepointd --data-dir $(DATA_DIR) --listen unix:$(RUN_SOCKET) $(RUN_FLAGS)
else
	@echo "savepointd: data in $(DATA_DIR)/, listening on $(SAVEPOINT_ADDR) (SAVEPOINT_ADDR)"
	$(BIN)/savepointd --data-dir $(DATA_DIR) --listen $(SAVEPOINT_ADDR) $(RUN_FLAGS)
endif

.PHONY: clean
clean: ## Remove ./bin (binaries and tools); ./data is never touched
	rm -rf $(BIN)
