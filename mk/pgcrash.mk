# The crash tests with PostgreSQL as the store (tests/crashtest
# TestPostgres*: kill -9 of savepointd, pg_ctl stop -m immediate of
# PostgreSQL, two daemons with A killed under 8 writers, the two-daemon
# resume race, and TestPostgresGraph*: the graph service's writers under
# kill -9 of savepointd and under an immediate shutdown of PostgreSQL).
# Their short forms (2 cycles, 50 rounds) run in `make test` with the rest
# of tests/crashtest; this runs the long form.

PG_CYCLES ?= 20
PG_RACE_ROUNDS ?= 1000

.PHONY: crashtest-postgres
crashtest-postgres: postgres-tools ## PostgreSQL crash tests (sessions and graph): PG_CYCLES kill -9 / immediate-shutdown cycles, PG_RACE_ROUNDS resume-race rounds
	go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestPostgres' ./tests/crashtest \
		-pg-cycles=$(PG_CYCLES) -pg-race-rounds=$(PG_RACE_ROUNDS)
