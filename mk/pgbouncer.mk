# PgBouncer in front of the test PostgreSQL (daemon/pgstore/pgtest
# Bouncer): the PgBouncer tests (daemon/pgstore TestPgBouncer*,
# cmd/savepointd TestPostgresPgBouncer) run /usr/sbin/pgbouncer, a process of
# their own per test, never Debian's pgbouncer service. Like the PostgreSQL
# binaries, the harness installs Debian's pgbouncer package itself when it can
# and otherwise fails those tests, never skips them; test-postgres installs it
# first.

.PHONY: pgbouncer-tools
pgbouncer-tools: ## Install PgBouncer (Debian's pgbouncer package) when missing
	@test -x /usr/sbin/pgbouncer || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq pgbouncer) || \
		{ echo "pgbouncer-tools: PgBouncer is not installed as /usr/sbin/pgbouncer and cannot be installed here" >&2; exit 1; }

test-postgres: pgbouncer-tools

.PHONY: test-pgbouncer
test-pgbouncer: postgres-tools pgbouncer-tools ## The PostgreSQL store through a real PgBouncer in transaction pooling
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) -run 'PgBouncer' ./daemon/pgstore ./cmd/savepointd

# test-go runs the PgBouncer tests too, in several test binaries at once:
# install first, so that they do not race for apt's lock.
test-go: pgbouncer-tools
