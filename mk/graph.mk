# The graph API (GraphCheckpointService): its long crash run. The short form
# (3 cycles, 8 writers) runs in `make test` with the rest of tests/crashtest.

.PHONY: crashtest-graph
crashtest-graph: strace ## Graph crash durability: kill -9 savepointd CYCLES times under CLIENTS graph writers
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestGraphCrashDurability$$' ./tests/crashtest \
		-graph-cycles=$(CYCLES) -graph-clients=$(CLIENTS)
