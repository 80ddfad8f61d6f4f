package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// useLZ4 makes PostgreSQL compress the values of the schema's tables (their
// record and data columns) with lz4 instead of the default pglz: a message
// of 2 KiB already passes the size at which PostgreSQL compresses a row, and
// lz4 compresses with about a third less CPU and decompresses faster
// (docs/profiles.md). Rows written before keep their compression; both read
// back the same, and the schema's version does not change, so an older
// savepointd still opens it.
//
// It is tuning, not a migration: where it cannot be done (PostgreSQL 13,
// a server built without lz4, a role that does not own the tables, a table
// held by other transactions for 200 ms) it logs why and Open goes on
// with pglz. It takes a table's ACCESS EXCLUSIVE lock only while it changes
// that table's catalog entry, once; later Opens find nothing to change.
func (s *Store) useLZ4(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	tables, err := s.pglzColumns(ctx)
	if err == nil {
		for _, t := range tables {
			if err = s.setLZ4(ctx, t.table, t.columns); err != nil {
				break
			}
		}
	}
	var pe *pgconn.PgError
	switch {
	case err == nil:
		if len(tables) > 0 {
			s.log.Info("the PostgreSQL schema's values are compressed with lz4 from now on", "schema", s.schema, "tables", len(tables))
		}
	case errors.As(err, &pe) && (pe.Code == "42703" || pe.Code == "0A000" || pe.Code == "42501" || pe.Code == "55P03"):
		// 42703: no attcompression before PostgreSQL 14; 0A000: a server
		// built without lz4; 42501: not the tables' owner; 55P03: lock
		// not granted within lock_timeout.
		s.log.Info("the PostgreSQL schema's values stay compressed with pglz", "schema", s.schema, "why", pe.Message)
	default:
		s.log.Warn("could not make the PostgreSQL schema's values compress with lz4; they stay with pglz", "schema", s.schema, "err", err)
	}
}

type pglzTable struct {
	table   string
	columns []string
}

// pglzColumns returns the schema's tables whose record or data column is
// not set to lz4, with those columns.
func (s *Store) pglzColumns(ctx context.Context) ([]pglzTable, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.relname, a.attname FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		AND a.atttypid = 'bytea'::regtype AND a.attname IN ('record', 'data') AND a.attcompression <> 'l'
		ORDER BY c.relname, a.attname`, s.schema)
	if err != nil {
		return nil, err
	}
	var out []pglzTable
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			rows.Close()
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].table != table {
			out = append(out, pglzTable{table: table})
		}
		out[len(out)-1].columns = append(out[len(out)-1].columns, column)
	}
	rows.Close()
	return out, rows.Err()
}

// setLZ4 sets table's columns to lz4, waiting at most 200 ms for the
// table's lock.
func (s *Store) setLZ4(ctx context.Context, table string, columns []string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '200ms'"); err != nil {
		return err
	}
	alters := make([]string, len(columns))
	for i, c := range columns {
		alters[i] = "ALTER COLUMN " + pgx.Identifier{c}.Sanitize() + " SET COMPRESSION lz4"
	}
	if _, err := tx.Exec(ctx, "ALTER TABLE "+s.table(table)+" "+strings.Join(alters, ", ")); err != nil {
		return fmt.Errorf("table %s: %w", table, err)
	}
	return tx.Commit(ctx)
}
