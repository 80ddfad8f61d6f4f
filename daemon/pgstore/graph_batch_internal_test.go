package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestGraphBatch folds graph puts into one group commit with a session
// save: a put refused for its reused request id is rolled back to its
// savepoint and the others, on several threads, commit.
func TestGraphBatch(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "graph_batch_internal"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	put := func(thread, id, rid string) *core.GraphPut {
		return &core.GraphPut{RequestID: rid, Checkpoint: core.GraphCheckpoint{ThreadID: thread, ID: id, MetadataJSON: `{}`,
			Value: core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2}}}
	}
	const rid = "00000000-0000-4000-8000-000000000001"
	if _, err := s.PutCheckpoint(ctx, put("r", "1", rid)); err != nil {
		t.Fatal(err)
	}
	var ops []*op
	already := make([]bool, 6)
	for i := range 6 {
		p := put(fmt.Sprintf("t%d", i%3), fmt.Sprint(i), "")
		if i == 4 {
			p = put("r", "2", rid) // the id of a different put
		}
		var fp []byte
		if p.RequestID != "" {
			fp = p.Fingerprint().Sum(nil)
		}
		fn := s.putOp(p, fp, &already[i])
		ops = append(ops, &op{sessionID: "\x00graph\x00" + p.Checkpoint.ThreadID, done: make(chan error, 1),
			fn: func(ctx context.Context, q *query) error { return fn(ctx, q.tx) }})
	}
	ops = append(ops, &op{sessionID: "s", done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
		_, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "s"}, s.now())
		return err
	}})
	s.commitBatch(ops)
	for i, o := range ops {
		err := <-o.done
		if i == 4 {
			if !errors.Is(err, core.ErrRequestIDReused) {
				t.Errorf("put with a reused request id: %v, want ErrRequestIDReused", err)
			}
		} else if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM "+pgx.Identifier{"graph_batch_internal", "graph_checkpoints"}.Sanitize()).Scan(&n); err != nil || n != 6 {
		t.Fatalf("%d checkpoints stored (%v), want 6: r/1 and the batch's five", n, err)
	}
	if _, err := s.Checkpoint(ctx, "s", 0); err != nil {
		t.Fatalf("the batch's session save: %v", err)
	}
}
