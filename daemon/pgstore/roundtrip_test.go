package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// roundTrips counts what the store sends: each query and each batch is one
// round trip to the database.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestWriteRoundTrips: a request of the protocol's write rules costs two
// round trips alone, whatever its calls: BEGIN with the session's row
// locked and read with its request id's row and its calls' rows, then its
// writes with COMMIT (fast.go: no SAVEPOINT, one statement per table). A delete, not
// pipelined, sends BEGIN and its SAVEPOINT before it reads.
func TestWriteRoundTrips(t *testing.T) {
	srv := pgtest.Shared(t)
	rt := &roundTrips{}
	s := open(t, srv.URL("postgres"), newSchema(), func(o *pgstore.Options) { o.Tracer = rt })
	msg := []core.Message{{Role: "user", ContentJSON: `"hello"`}}
	steps := []struct {
		name string
		want int64 // round trips
		run  func() error
	}{
		{"create", 2, func() error { // BEGIN and the lock (no row), the writes and COMMIT
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", RequestID: "r1", AppendMessages: msg})
			return err
		}},
		{"save with a pending call", 2, func() error { // the call read with the lock
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 1, RequestID: "r2",
				AppendMessages: msg, PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}})
			return err
		}},
		{"begin effect", 2, func() error {
			_, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1})
			return err
		}},
		{"record effect", 2, func() error {
			_, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "sent"})
			return err
		}},
		{"save", 2, func() error {
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 1, RequestID: "r3", AppendMessages: msg})
			return err
		}},
		{"delete", 3, func() error { // BEGIN and SAVEPOINT, lock, deletes and tombstone with COMMIT
			_, err := s.DeleteSession(ctx, "s", 1)
			return err
		}},
	}
	for _, st := range steps {
		before := rt.n.Load()
		if err := st.run(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := rt.n.Load() - before; got != st.want {
			t.Errorf("%s: %d round trips, want %d", st.name, got, st.want)
		}
	}
}
