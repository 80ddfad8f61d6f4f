package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// refusedStartupParameter tells, after a connection failed with a protocol
// violation (SQLSTATE 08P01), whether the server accepts one without
// statement_timeout in its start-up parameters: PgBouncer refuses the
// connection of a client sending one it is not told to ignore. It returns an
// ErrConfig error saying what to change then, and nil otherwise.
func (s *Store) refusedStartupParameter(ctx context.Context, cc *pgx.ConnConfig, err error) error {
	var pe *pgconn.PgError
	if _, set := cc.RuntimeParams["statement_timeout"]; !set || !errors.As(err, &pe) || pe.Code != "08P01" {
		return nil
	}
	bare := cc.Copy()
	delete(bare.RuntimeParams, "statement_timeout")
	c, cerr := pgx.ConnectConfig(ctx, bare)
	if cerr != nil {
		return nil
	}
	c.Close(context.Background())
	return fmt.Errorf("%w: %s refuses connections that set statement_timeout at start-up, as PgBouncer does: "+
		"behind PgBouncer's transaction pooling add default_query_exec_mode=simple_protocol (or exec) to the URL; "+
		"behind its session pooling add statement_timeout to its ignore_startup_parameters (%v)", ErrConfig, s.target, err)
}

// checkPreparedStatements makes sure, in pgx's default query exec mode,
// that a statement prepared on one connection stays on it and on it alone,
// as pgx's statement cache needs. A pooler in transaction mode (PgBouncer
// before 1.21, or without max_prepared_statements) hands each transaction
// whichever server connection is free, so a statement prepared by one
// client is missing for it at its next transaction, or already there for
// another client preparing the same text. It returns an ErrConfig error
// saying which exec mode to use then.
func (s *Store) checkPreparedStatements(ctx context.Context) error {
	c1, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.unavailable(ctx, err)
	}
	defer c1.Release()
	c2, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.unavailable(ctx, err)
	}
	defer c2.Release()
	name := "savepoint_probe_" + rand.Text()
	if _, err := c1.Conn().Prepare(ctx, name, "SELECT 1"); err != nil {
		return s.unavailable(ctx, err)
	}
	// The second client prepares the same name: a pooler gives it the
	// server connection the first one just left.
	_, err = c2.Conn().Prepare(ctx, name, "SELECT 1")
	if err == nil {
		// And the first runs its statement: a pooler may give it another.
		_, err = c1.Conn().Exec(ctx, name)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P05" || pe.Code == "26000") { // duplicate_prepared_statement, invalid_sql_statement_name
		// The prepared statements are on unknown server connections:
		// close these client connections rather than release them.
		c1.Conn().Close(ctx)
		c2.Conn().Close(ctx)
		return fmt.Errorf("%w: %s does not keep a connection's prepared statements from one transaction to the next "+
			"(a pooler in transaction mode, such as PgBouncer's pool_mode=transaction), and pgx's default query exec mode "+
			"prepares statements: add default_query_exec_mode=simple_protocol (or exec) to the URL (%v)", ErrConfig, s.target, err)
	}
	if err != nil {
		return s.unavailable(ctx, err)
	}
	for _, c := range []*pgxpool.Conn{c1, c2} {
		if err := c.Conn().Deallocate(ctx, name); err != nil {
			return s.unavailable(ctx, err)
		}
	}
	return nil
}
