package pgstore_test

import (
	"context"
	"errors"
	"fmt"
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
// writes with COMMIT (fast.go: no SAVEPOINT, one statement per table); one
// when this store committed the session last and knows the calls it names
// (headcache.go: BEGIN, the check, the writes and COMMIT together). A
// replayed request id, or a refusal, costs the cached run and then the
// two. A delete, not pipelined, sends BEGIN and its SAVEPOINT before it
// reads.
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
		{"begin effect", 1, func() error { // the call was read as absent with the save
			_, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1})
			return err
		}},
		{"record effect", 1, func() error {
			_, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "sent"})
			return err
		}},
		{"save", 1, func() error {
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 1, RequestID: "r3", AppendMessages: msg})
			return err
		}},
		// A refusal on the cached run sends nothing: the request runs again
		// with its reads, and is answered from them.
		{"save replayed", 2, func() error {
			res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 1, RequestID: "r3", AppendMessages: msg})
			if err == nil && res.Revision != 3 {
				t.Errorf("the replayed save: revision %d, want its first answer, 3", res.Revision)
			}
			return err
		}},
		{"save refused", 2, func() error {
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 1, RequestID: "r4", AppendMessages: msg})
			if !errors.Is(err, core.ErrRevisionMismatch) {
				return fmt.Errorf("got %v, want %w", err, core.ErrRevisionMismatch)
			}
			return nil
		}},
		// A request id used before, on a request the cached run would
		// perform: the plain INSERT of its row fails that run, which is
		// rolled back (ROLLBACK, a round trip), and the run with its reads
		// refuses it.
		{"request id reused", 1 + 1 + 2, func() error {
			_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 3, Epoch: 1, RequestID: "r3"})
			if !errors.Is(err, core.ErrRequestIDReused) {
				return fmt.Errorf("got %v, want %w", err, core.ErrRequestIDReused)
			}
			return nil
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
