# The savepoint CLI (cmd/savepoint) and the walk-throughs of
# docs/walkthrough.md, the README's CLI section and docs/operations.md's
# "Inspecting sessions": `make test-cli` (part of
# `make test`) installs grpcurl and grpc_health_probe at pinned versions into
# ./bin and runs every savepoint, grpcurl and grpc_health_probe command they
# document against a live daemon, comparing the output they show
# (TestWalkthrough, TestReadmeCLI, TestOperationsDoc; go test -update
# in cmd/savepoint rewrites the outputs from a real run).
# The test is given the tools' paths, so it fails, rather than skips, when
# they are missing. (Under plain `go test ./...` it runs when ./bin has them
# and skips otherwise.)

# grpc_health_probe is installed outside go.mod, like grpcurl (the root
# Makefile's GRPCURL_VERSION). go install names it grpc-health-probe; it is
# renamed to the name its documentation and the doc use.
GRPC_HEALTH_PROBE_VERSION := v0.4.63

# The stamp names the version, so changing it reinstalls; a missing binary
# is reinstalled too.
$(BIN)/.grpc_health_probe-$(GRPC_HEALTH_PROBE_VERSION):
	@mkdir -p $(BIN)
	@rm -f $(BIN)/.grpc_health_probe-*
	@touch $@

$(BIN)/grpc_health_probe: $(BIN)/.grpc_health_probe-$(GRPC_HEALTH_PROBE_VERSION)
	GOBIN=$(abspath $(BIN)) go install github.com/grpc-ecosystem/grpc-health-probe@$(GRPC_HEALTH_PROBE_VERSION)
	mv -f $(BIN)/grpc-health-probe $@

# `make tools` builds it too.
tools: $(BIN)/grpc_health_probe

TEST_TARGETS += test-cli

.PHONY: test-cli
test-cli: $(BIN)/grpcurl $(BIN)/grpc_health_probe ## Run the savepoint, grpcurl and grpc_health_probe commands of the README, docs/walkthrough.md and docs/operations.md against a live daemon
	SAVEPOINT_GRPCURL=$(abspath $(BIN)/grpcurl) SAVEPOINT_GRPC_HEALTH_PROBE=$(abspath $(BIN)/grpc_health_probe) \
		go test -race -count=1 -run '^(TestOperationsDoc|TestWalkthrough|TestReadmeCLI)$$' ./cmd/savepoint
