# PgBouncer in front of the test PostgreSQL (daemon/pgstore/pgtest
# Bouncer): the PgBouncer tests (daemon/pgstore TestPgBouncer*,
# tests/integration TestPgBouncerGraphService,
# cmd/savepointd TestPostgresPgBouncer) run /usr/sbin/pgbouncer, a process of
# their own per test, never Debian's pgbouncer service. This target is the
# one place that installs it: the harness fails those tests, never skips
# them, when /usr/sbin/pgbouncer is missing, saying to run it; test-go and
# test-postgres run it first.
#
# Debian's package enables and starts a pgbouncer service when installed.
# The tests need only the binary, so the install runs under a policy-rc.d that
# forbids starting services (the Debian way to install without starting
# one; an existing policy-rc.d is left as it is), then disables the unit, and
# fails if a pgbouncer service is left enabled or running.

.PHONY: pgbouncer-tools
pgbouncer-tools: ## Install PgBouncer (Debian's pgbouncer package) when missing, without enabling or starting its service
	@test -x /usr/sbin/pgbouncer || { \
		policy=/usr/sbin/policy-rc.d; ours=; \
		if [[ ! -e $$policy ]]; then printf '#!/bin/sh\nexit 101\n' >$$policy && chmod 0755 $$policy && ours=1; fi; \
		trap '[[ -n "$$ours" ]] && rm -f '"$$policy" EXIT; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq pgbouncer; } || \
			{ echo "pgbouncer-tools: PgBouncer is not installed as /usr/sbin/pgbouncer and cannot be installed here" >&2; exit 1; }; \
		if command -v systemctl >/dev/null; then systemctl disable --quiet pgbouncer.service 2>/dev/null || true; fi; \
		if command -v update-rc.d >/dev/null && [[ -e /etc/init.d/pgbouncer ]]; then update-rc.d pgbouncer disable >/dev/null 2>&1 || true; fi; \
	}
	@if pgrep -f '^/usr/sbin/pgbouncer .*/etc/pgbouncer/' >/dev/null; then \
		echo "pgbouncer-tools: Debian's pgbouncer service is running; the tests start their own: stop it with 'systemctl disable --now pgbouncer'" >&2; exit 1; fi
	@if command -v systemctl >/dev/null && [[ "$$(systemctl is-enabled pgbouncer.service 2>/dev/null)" == enabled ]]; then \
		echo "pgbouncer-tools: the pgbouncer service is enabled; the tests start their own: 'systemctl disable pgbouncer'" >&2; exit 1; fi

test-postgres: pgbouncer-tools

.PHONY: test-pgbouncer
test-pgbouncer: postgres-tools pgbouncer-tools ## The PostgreSQL store through a real PgBouncer in transaction pooling
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) -run 'PgBouncer' ./daemon/pgstore ./cmd/savepointd

# test-go runs the PgBouncer tests too, in several test binaries at once:
# install first, so that they do not race for apt's lock.
test-go: pgbouncer-tools
