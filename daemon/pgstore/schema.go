package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaVersion is the version of the tables this package writes, kept in
// the schema's schema_version table (one row per migration applied). A
// schema of a newer version is refused at Open.
const SchemaVersion = 6

// migrations[v-1] brings the schema from version v-1 to v. Each table holds
// key columns, a record (JSON, see records.go) and its checksum. Session,
// tool use and request ids are bytea: they may hold any UTF-8, NUL
// included, and sort by their bytes as in the embedded store.
var migrations = [][]string{
	{
		`CREATE TABLE {sessions} (
			session_id BYTEA PRIMARY KEY,
			record     BYTEA NOT NULL,
			checksum   BIGINT NOT NULL)`,
		`CREATE TABLE {revisions} (
			session_id BYTEA NOT NULL,
			revision   BIGINT NOT NULL,
			record     BYTEA NOT NULL,
			checksum   BIGINT NOT NULL,
			PRIMARY KEY (session_id, revision))`,
		`CREATE TABLE {messages} (
			session_id BYTEA NOT NULL,
			seq        BIGINT NOT NULL,
			record     BYTEA NOT NULL,
			checksum   BIGINT NOT NULL,
			PRIMARY KEY (session_id, seq))`,
		`CREATE TABLE {calls} (
			session_id  BYTEA NOT NULL,
			tool_use_id BYTEA NOT NULL,
			record      BYTEA NOT NULL,
			checksum    BIGINT NOT NULL,
			PRIMARY KEY (session_id, tool_use_id))`,
		`CREATE TABLE {requests} (
			session_id BYTEA NOT NULL,
			request_id BYTEA NOT NULL,
			record     BYTEA NOT NULL,
			checksum   BIGINT NOT NULL,
			PRIMARY KEY (session_id, request_id))`,
	},
	// Version 2: session records gain a status, a final output and a
	// completion time (CompleteSession), and requests record completions,
	// rewinds and forks. No table changes; the version keeps an older
	// savepointd, which would ignore a completion, from opening the schema.
	{},
	// Version 3: the graph checkpoint service (graph*.go).
	graphMigration,
	// Version 4: each session row names the transaction that last changed
	// it, so that WatchSessions polls the changes of other daemons (watch.go).
	{
		`ALTER TABLE {sessions} ADD COLUMN changed_xid xid8 NOT NULL DEFAULT '0'`,
		`CREATE INDEX ON {sessions} (changed_xid)`,
	},
	// Version 5: each live head's row carries its update time, negated, in
	// an index with the session id, for ListSessions by last update; the
	// rows are filled from their records (backfillUpdateOrder).
	{
		`ALTER TABLE {sessions} ADD COLUMN neg_update_ns BIGINT`,
		`CREATE INDEX ON {sessions} (neg_update_ns, session_id) WHERE neg_update_ns IS NOT NULL`,
	},
	// Version 6: the graph-thread ledger, graph_effects (graph_effect.go);
	// a graph request record may name the attempt its begin started.
	graphEffectsMigration,
}

// migrationSteps[v] runs after the statements of migration v, in the same
// transaction, for what SQL alone cannot do safely.
var migrationSteps = map[int]func(ctx context.Context, s *Store, tx pgx.Tx) error{
	5: backfillUpdateOrder,
}

// backfillUpdateOrder sets neg_update_ns from each live head's record; a
// record that does not decode is left for Verify to report, and unlisted by
// update time until it is written again.
func backfillUpdateOrder(ctx context.Context, s *Store, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, "SELECT session_id, record FROM "+s.table("sessions"))
	if err != nil {
		return err
	}
	type fill struct {
		id  []byte
		neg int64
	}
	var fills []fill
	for rows.Next() {
		var id, rec []byte
		if err := rows.Scan(&id, &rec); err != nil {
			rows.Close()
			return err
		}
		var h sessionRec
		if decodeJSON(rec, &h) == nil && !h.Deleted {
			fills = append(fills, fill{id, -h.UpdateTime})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, f := range fills {
		if _, err := tx.Exec(ctx, "UPDATE "+s.table("sessions")+" SET neg_update_ns = $2 WHERE session_id = $1", f.id, f.neg); err != nil {
			return err
		}
	}
	return nil
}

// tables are the store's data tables, in the order Verify reads them.
var tables = []string{"sessions", "revisions", "messages", "calls", "requests"}

// allTables are every table {name} may name in a migration.
var allTables = append(slices.Clone(tables), graphTables...)

// migrate creates the schema and applies the migrations it lacks, in one
// transaction. Daemons starting at once on an empty database race to create
// the same tables; the loser's transaction fails on a unique or duplicate
// object error, and it runs again to find the work done.
func (s *Store) migrate(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		var from int
		from, err = s.migrateOnce(ctx)
		if err == nil {
			if from < SchemaVersion {
				s.log.Info("migrated the PostgreSQL schema", "schema", s.schema, "from_version", from, "to_version", SchemaVersion)
			}
			return nil
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || !(pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42P06" || pe.Code == "40001" || pe.Code == "40P01") {
			break
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
	if errors.Is(err, ErrFormat) {
		return err
	}
	return fmt.Errorf("create or migrate schema %q: %w", s.schema, s.unavailable(ctx, err))
}

func (s *Store) migrateOnce(ctx context.Context) (from int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	if err := s.setLocalTimeout(ctx, tx); err != nil {
		return 0, err
	}
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{s.schema}.Sanitize(),
		"CREATE TABLE IF NOT EXISTS " + s.table("schema_version") + " (version INT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
	}
	for _, st := range stmts {
		if _, err := tx.Exec(ctx, st); err != nil {
			return 0, err
		}
	}
	if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM "+s.table("schema_version")).Scan(&from); err != nil {
		return 0, err
	}
	if from > SchemaVersion {
		return from, fmt.Errorf("%w: schema %q is at version %d, this savepointd serves up to %d; run a newer savepointd",
			ErrFormat, s.schema, from, SchemaVersion)
	}
	for v := from + 1; v <= SchemaVersion; v++ {
		for _, st := range migrations[v-1] {
			if _, err := tx.Exec(ctx, s.expand(st)); err != nil {
				return from, fmt.Errorf("migration to version %d: %w", v, err)
			}
		}
		if step := migrationSteps[v]; step != nil {
			if err := step(ctx, s, tx); err != nil {
				return from, fmt.Errorf("migration to version %d: %w", v, err)
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.table("schema_version")+" (version) VALUES ($1)", v); err != nil {
			return from, err
		}
	}
	return from, tx.Commit(ctx)
}

// expand replaces {table} with the table's qualified name.
func (s *Store) expand(stmt string) string {
	for _, t := range allTables {
		stmt = strings.ReplaceAll(stmt, "{"+t+"}", s.table(t))
	}
	return stmt
}
