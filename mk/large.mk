# The largest values of the graph suite, without the race detector: test-go
# (go test -race) uploads a 21 MiB checkpoint at the default limits
# (tests/integration TestGraphService/Defaults), where the size is not the
# point and the race detector would spend a minute copying bytes; test-large,
# part of `make test`, streams the 64 MiB one (four 16 MiB blobs) and the
# 16 MiB pending writes that docs/api.md cites, in seconds. (Plain `go test
# ./tests/integration` runs them too.)
TEST_TARGETS += test-large

.PHONY: test-large
test-large: ## The graph suite's 64 MiB upload and 16 MiB pending writes at the default limits, without -race
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) -run '^TestGraphService$$/^Defaults$$' ./tests/integration
