# The PostgreSQL store (daemon/pgstore, savepointd --store-url). Its tests
# start a real PostgreSQL from /usr/lib/postgresql/*/bin (daemon/pgstore/pgtest)
# and fail, never skip, without one. test-go runs them all, with 40 rounds
# of the two-store races (several stores on one schema, as a fleet); make test
# then runs those races again with PG_ROUNDS rounds (test-postgres-races),
# rather than the whole package a second time. test-postgres runs every
# PostgreSQL test on its own, with the race detector and PG_ROUNDS rounds.

PG_ROUNDS ?= 300

TEST_TARGETS += test-postgres-races

.PHONY: postgres-tools
postgres-tools: ## Install PostgreSQL's server binaries (Debian's postgresql package) when missing
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq postgresql) || \
		{ echo "test-postgres: PostgreSQL is not installed under /usr/lib/postgresql/*/bin and cannot be installed here" >&2; exit 1; }

.PHONY: test-postgres-races
test-postgres-races: postgres-tools ## The PostgreSQL store's two-store tests (TwoStores) with PG_ROUNDS rounds of each race (test-go runs 40)
	go test -race -count=1 -timeout $(GO_TEST_TIMEOUT) -run 'TwoStores' ./daemon/pgstore -pg-rounds=$(PG_ROUNDS)

.PHONY: test-postgres
test-postgres: postgres-tools ## The PostgreSQL store: storetest, faults and races against a real PostgreSQL, and savepointd --store-url over gRPC
	go test -race -count=1 -timeout $(GO_TEST_TIMEOUT) ./daemon/pgstore/... -pg-rounds=$(PG_ROUNDS)
	go test -race -count=1 -timeout $(GO_TEST_TIMEOUT) -run 'Postgres' ./cmd/savepointd

# test-go runs the PostgreSQL tests too, in several test binaries at once:
# install first, so that they do not race for apt's lock.
test-go: postgres-tools
