# The soak run (issue 22): SOAK_CYCLES kill -9 cycles of the crash harness
# on the embedded store (TestCrashDurability, under CLIENTS clients), then
# as many kill -9 / immediate-shutdown cycles on PostgreSQL (TestPostgres*).
# Each prints its acknowledged, lost and torn counts; docs/reliability.md
# has the current figures. Hours, not minutes: it is not part of make test.

SOAK_CYCLES ?= 1000
.PHONY: soak
soak: strace postgres-tools ## Soak: SOAK_CYCLES kill -9 cycles on Badger, then on PostgreSQL (default 1000 each; hours)
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestCrashDurability$$' ./tests/crashtest \
		-cycles=$(SOAK_CYCLES) -clients=$(CLIENTS)
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestPostgres(CrashDurability|ImmediateShutdown|GraphCrashDurability|GraphImmediateShutdown)$$' ./tests/crashtest \
		-pg-cycles=$(SOAK_CYCLES) -pg-race-rounds=$(PG_RACE_ROUNDS)
