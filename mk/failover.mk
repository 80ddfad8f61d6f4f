# The failover harness (tests/failover): writers against two savepointd on
# a PostgreSQL primary with a synchronous streaming standby, while the
# harness kills the primary, promotes the standby, cuts connections through
# fault proxies and brings the old primary back as the new standby; an
# oracle then checks every acknowledged write. make test's test-go runs its
# short form with the race detector (2 failovers, and the two controls,
# which must be caught); test-failover runs that form alone, and make
# failover runs CYCLES failovers.

FAILOVER_QUICK_CYCLES ?= 2
FAILOVER_WRITERS ?= 4

.PHONY: test-failover
test-failover: postgres-tools ## The failover harness's short form: FAILOVER_QUICK_CYCLES failovers, and its two controls (an asynchronous standby, retries without request ids), which must be caught
	go test -count=1 -timeout 20m -v -run 'TestFailover' ./tests/failover -cycles=$(FAILOVER_QUICK_CYCLES) -writers=$(FAILOVER_WRITERS)

.PHONY: failover
failover: postgres-tools ## The failover harness: CYCLES (default 50) kills of the primary and promotions under load; prints what the oracle found (make failover CYCLES=100)
	go test -count=1 -timeout 0 -v -run 'TestFailover$$' ./tests/failover -cycles=$(CYCLES) -writers=$(FAILOVER_WRITERS)
