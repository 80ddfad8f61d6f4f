# The power-cut tests (tests/crashtest TestPowerCut*): savepointd on
# faultfs, a FUSE file system that keeps only what was fsynced, with power
# cut at random moments, at injected syncs and at the write-ahead log's named
# points (docs/reliability.md). The short form (4 cycles, two cuts at each
# of the log's points, a cut during and one right after each sync of a new
# store's first start, and the proofs against builds that skip their syncs
# or their directory syncs) runs in `make test`, within test-go (`go test
# -race ./...`); test-powerloss runs it alone. `make powerloss CYCLES=N`
# runs the long one (CYCLES defaults to 50, as for make crashtest), and
# `make powerloss-gc CYCLES=N` the long form of the cuts during value-log
# GC, whose short form (4 cuts) runs in `make test`.
# They need /dev/fuse; where it is missing they skip, saying so. As root
# they mount with mount(2); otherwise go-fuse needs fusermount3 (fuse3).

# fusermount3, installed when missing and possible (Debian, root), as the
# strace target does for the fault-injection tests.
.PHONY: fuse
fuse:
	@command -v fusermount3 >/dev/null || (apt-get update -qq && apt-get install -y -qq fuse3) || \
		echo "fuse: fusermount3 not installed and cannot be installed here; the power-cut tests need root or it" >&2

# test-go runs the power-cut tests: install first.
test-go: fuse

.PHONY: test-powerloss
test-powerloss: fuse ## Power-cut tests, short form (4 cuts, 10 at the named points of the log and of a memtable flush, every sync of a first start, 4 during value-log GC; builds without syncs, or directory syncs, must lose writes)
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) -run '^TestPowerCut' ./tests/crashtest

.PHONY: powerloss
powerloss: fuse ## Power-loss test, long form: CYCLES power cuts (default 50), 0 acknowledged writes lost
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestPowerCut$$' ./tests/crashtest \
		-powercut-cycles=$(CYCLES)

.PHONY: powerloss-gc
powerloss-gc: fuse ## Power-loss test during value-log GC, long form: CYCLES power cuts (default 50) while a GC is in progress, 0 acknowledged writes lost
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestPowerCutDuringValueLogGC$$' ./tests/crashtest \
		-powercut-gc-cycles=$(CYCLES)
