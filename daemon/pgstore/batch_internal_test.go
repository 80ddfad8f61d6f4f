package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestBatchRefusalIsolated folds good and refused requests into one
// transaction, as the group commit does under load: each refused request is
// rolled back to its savepoint and its neighbours commit, in every query
// exec mode.
func TestBatchRefusalIsolated(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, mode := range []string{"cache_statement", "simple_protocol", "exec"} {
		t.Run(mode, func(t *testing.T) {
			testBatchRefusalIsolated(t, srv.URL("postgres", "default_query_exec_mode="+mode), "batch_"+mode)
		})
	}
}

func testBatchRefusalIsolated(t *testing.T, url, schema string) {
	s, err := Open(context.Background(), url, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "old"}); err != nil {
		t.Fatal(err)
	}
	var ops []*op
	results := make([]core.SaveResult, 8)
	for i := range 8 {
		req := &core.SaveRequest{SessionID: fmt.Sprintf("s%d", i), AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}
		if i%2 == 1 { // refused: a session that exists, then one that does not
			req = &core.SaveRequest{SessionID: "old"}
			if i%4 == 3 {
				req = &core.SaveRequest{SessionID: fmt.Sprintf("missing%d", i), ExpectedRevision: 1}
			}
		}
		ops = append(ops, &op{sessionID: req.SessionID, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
			var err error
			results[i], err = core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
			return err
		}})
	}
	// A statement that fails inside a request is rolled back to its
	// savepoint too, without aborting the transaction.
	ops = append(ops, &op{sessionID: "zz", done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
		_, err := q.tx.Exec(ctx, "SELECT 1/0")
		return err
	}})
	// So is one that fails among a request's queued writes, sent with its
	// RELEASE SAVEPOINT: the save before it in that request is undone, and
	// the request after it commits.
	ops = append(ops, &op{sessionID: "zy", done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
		if _, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "zy"}, s.now()); err != nil {
			return err
		}
		return q.exec(ctx, "SELECT 1/0")
	}})
	ops = append(ops, &op{sessionID: "zzz", done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
		_, err := core.Save(&domainTxn{ctx: ctx, q: q}, &core.SaveRequest{SessionID: "zzz"}, s.now())
		return err
	}})
	s.commitBatch(ops)
	for i, o := range ops {
		err := <-o.done
		switch {
		case i == 8 || i == 9:
			if !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("failed statement %d: %v, want ErrUnavailable", i, err)
			}
		case i == 10:
			if err != nil {
				t.Errorf("request after the failed one: %v", err)
			}
		case i%2 == 0:
			if err != nil || results[i].Revision != 1 {
				t.Errorf("request %d: %+v %v", i, results[i], err)
			}
		case i%4 == 1:
			if !errors.Is(err, core.ErrSessionExists) {
				t.Errorf("request %d: %v, want ErrSessionExists", i, err)
			}
		default:
			if !errors.Is(err, core.ErrSessionNotFound) {
				t.Errorf("request %d: %v, want ErrSessionNotFound", i, err)
			}
		}
	}
	for i := 0; i < 8; i += 2 {
		ms, err := s.Messages(ctx, fmt.Sprintf("s%d", i), 0, 0, 1<<20, 0)
		if err != nil || len(ms) != 1 {
			t.Errorf("s%d after the batch: %+v %v", i, ms, err)
		}
	}
	if _, err := s.Checkpoint(ctx, "zzz", 0); err != nil {
		t.Errorf("zzz after the batch: %v", err)
	}
	for _, id := range []string{"missing3", "missing7", "zy"} {
		if _, err := s.Checkpoint(ctx, id, 0); !errors.Is(err, core.ErrSessionNotFound) {
			t.Errorf("%s exists after its refused save: %v", id, err)
		}
	}
}

// TestBatchSplitByTime: a batch whose requests together outlast the
// statement timeout is committed in parts, each within it, and every
// request succeeds.
func TestBatchSplitByTime(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "batch_split", StatementTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ops []*op
	for i := range 12 { // 12 x 80 ms, over the 700 ms a transaction may take
		req := &core.SaveRequest{SessionID: fmt.Sprintf("s%02d", i)}
		ops = append(ops, &op{sessionID: req.SessionID, done: make(chan error, 1), fn: func(ctx context.Context, q *query) error {
			if _, err := q.tx.Exec(ctx, "SELECT pg_sleep(0.08)"); err != nil {
				return err
			}
			_, err := core.Save(&domainTxn{ctx: ctx, q: q}, req, s.now())
			return err
		}})
	}
	s.commitBatch(ops)
	for i, o := range ops {
		if err := <-o.done; err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	sums, err := s.ListSessions(context.Background(), "", 100, core.SessionFilter{})
	if err != nil || len(sums) != 12 {
		t.Fatalf("%d sessions after the batch (%v), want 12", len(sums), err)
	}
}
