package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connTx is a transaction on a pooled connection whose BEGIN and COMMIT
// the group commit queues with its statements (pipeline.go), where
// pgx.Tx would send each in a round trip of its own. It serves what
// pgstore uses of a pgx.Tx; LargeObjects and nested transactions it does
// not.
type connTx struct {
	pgx.Tx // nil: LargeObjects is not served
	c      *pgxpool.Conn
}

func (t *connTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("pgstore: a group commit has no nested transactions.")
}

// Commit sends COMMIT; the group commit queues it with its last statements
// instead.
func (t *connTx) Commit(ctx context.Context) error {
	_, err := t.c.Exec(ctx, "COMMIT")
	return err
}

// Rollback ends the transaction when one is open, and closes the
// connection when that fails; the pool drops a connection left in a
// transaction.
func (t *connTx) Rollback(ctx context.Context) error {
	pc := t.c.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return nil
	}
	_, err := t.c.Exec(ctx, "ROLLBACK")
	if err != nil {
		pc.Close(ctx) //nolint:errcheck // the connection is dropped either way
	}
	return err
}

func (t *connTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.c.CopyFrom(ctx, table, cols, src)
}

func (t *connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.c.SendBatch(ctx, b)
}

func (t *connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.c.Conn().Prepare(ctx, name, sql)
}

func (t *connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.c.Exec(ctx, sql, args...)
}

func (t *connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.c.Query(ctx, sql, args...)
}

func (t *connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.c.QueryRow(ctx, sql, args...)
}

func (t *connTx) Conn() *pgx.Conn { return t.c.Conn() }
