package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// race runs fn(0) and fn(1) at once and returns their errors.
func race(fn func(i int) error) []error {
	errs := make([]error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner fails the test unless exactly one of errs is nil and the other
// is want.
func oneWinner(t *testing.T, round int, errs []error, want error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("round %d: both won", round)
		case !errors.Is(err, want):
			t.Fatalf("round %d: store %d: %v, want %v", round, i, err, want)
		}
	}
	if winner < 0 {
		t.Fatalf("round %d: no winner: %v", round, errs)
	}
	return winner
}

// TestTwoStoresLifecycle: two stores on one database, as two savepointd on
// two hosts: a completion on one is seen and enforced by the other, a
// reopen on one fences the other, and races of two completions and of two
// forks into one new session have exactly one winner each round.
func TestTwoStoresLifecycle(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	a, b := open(t, srv.URL("postgres"), schema), open(t, srv.TCPURL("postgres"), schema)
	if _, err := a.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hi"`}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CompleteSession(ctx, &core.CompleteRequest{SessionID: "s", Status: core.StatusCompleted, FinalOutput: "done"}); err != nil {
		t.Fatal(err)
	}
	cp, err := b.Resume(ctx, "s", false)
	if err != nil || cp.Status != core.StatusCompleted || cp.FinalOutput != "done" || cp.Epoch != 1 {
		t.Fatalf("resume on B of a session completed on A: %+v %v", cp, err)
	}
	_, err = b.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
	if !errors.Is(err, core.ErrSessionCompleted) {
		t.Fatalf("save on B of a session completed on A: %v", err)
	}
	if cp, err = b.Resume(ctx, "s", true); err != nil || cp.Status != core.StatusActive || cp.Epoch != 2 {
		t.Fatalf("reopen on B: %+v %v", cp, err)
	}
	if _, err := b.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 2}); err != nil {
		t.Fatalf("save on B after its reopen: %v", err)
	}
	_, err = a.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 1})
	if !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("save on A with the epoch before B's reopen: %v", err)
	}
	if _, err := a.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Epoch: 1, Revision: 1}); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("rewind on A with the epoch before B's reopen: %v", err)
	}

	stores := []*pgstore.Store{a, b}
	for round := range *rounds {
		// Two owners of one epoch complete it with different outcomes.
		id := fmt.Sprintf("c%d", round)
		if _, err := a.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
		errs := race(func(i int) error {
			_, err := stores[i].CompleteSession(ctx, &core.CompleteRequest{SessionID: id, Status: core.StatusFailed, FinalOutput: fmt.Sprint(i)})
			return err
		})
		w := oneWinner(t, round, errs, core.ErrSessionCompleted)
		if cp, err := stores[1-w].Checkpoint(ctx, id, 0); err != nil || cp.FinalOutput != fmt.Sprint(w) || cp.Status != core.StatusFailed {
			t.Fatalf("round %d: after the completion race won by %d: %+v %v", round, w, cp, err)
		}

		// Two forks into one new session, of different revisions.
		fid := fmt.Sprintf("f%d", round)
		errs = race(func(i int) error {
			_, err := stores[i].ForkSession(ctx, &core.ForkRequest{SourceID: "s", Revision: uint64(1 + i), NewID: fid})
			return err
		})
		w = oneWinner(t, round, errs, core.ErrSessionExists)
		if cp, err := stores[1-w].Checkpoint(ctx, fid, 0); err != nil || cp.Revision != 1 || cp.Epoch != 1 {
			t.Fatalf("round %d: the fork: %+v %v", round, cp, err)
		}
	}
}

// TestForkAndLedgerCorrupt: a call row edited outside savepointd makes
// ListEffects, a fork and a rewind CHECKPOINT_CORRUPT, and the fork creates
// nothing.
func TestForkAndLedgerCorrupt(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1,
		PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "sent"}); err != nil {
		t.Fatal(err)
	}
	if es, err := s.Effects(ctx, "s", "", 10); err != nil || len(es) != 1 {
		t.Fatalf("ledger: %+v %v", es, err)
	}
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "calls"}.Sanitize()+
		` SET record = convert_to(replace(convert_from(record, 'UTF8'), 'sent', 'SENT'), 'UTF8') WHERE session_id = $1`, []byte("s"))
	if _, err := s.Effects(ctx, "s", "", 10); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("ledger with a tampered call: %v", err)
	}
	if _, err := s.ForkSession(ctx, &core.ForkRequest{SourceID: "s", NewID: "f"}); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("fork with a tampered call: %v", err)
	}
	if _, err := s.Checkpoint(ctx, "f", 0); !errors.Is(err, core.ErrSessionNotFound) {
		t.Fatalf("the failed fork left a session: %v", err)
	}
	if _, err := s.RewindSession(ctx, &core.RewindRequest{SessionID: "s", Revision: 1}); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("rewind with a tampered call: %v", err)
	}
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.Revision != 2 {
		t.Fatalf("the failed rewind changed the session: %+v %v", cp, err)
	}
}

// TestMigrateFromVersion1: a schema of version 1, as savepointd before the
// session lifecycle left it, is migrated at Open, and its sessions, whose
// records hold no status, are active and can be completed; the graph tables
// of version 3 are created and take a checkpoint; the changed_xid column of
// version 4 is added and a write sets it; version 5's neg_update_ns is
// filled from the records; version 6's graph ledger takes a begin.
func TestMigrateFromVersion1(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	s, err := pgstore.Open(ctx, srv.URL(db), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "old"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	srv.Exec(t, db, "DELETE FROM savepoint.schema_version WHERE version > 1")
	// A version 1 schema has no graph tables (version 3).
	srv.Exec(t, db, "DROP TABLE savepoint.graph_threads, savepoint.graph_checkpoints, savepoint.graph_blobs, savepoint.graph_writes,"+
		" savepoint.graph_requests, savepoint.graph_upload_chunks, savepoint.graph_uploads")
	// Nor the graph ledger (version 6).
	srv.Exec(t, db, "DROP TABLE savepoint.graph_effects")
	// Nor the sessions' changed_xid (version 4).
	srv.Exec(t, db, "ALTER TABLE savepoint.sessions DROP COLUMN changed_xid")
	// Nor neg_update_ns (version 5), filled from the records.
	srv.Exec(t, db, "ALTER TABLE savepoint.sessions DROP COLUMN neg_update_ns")
	s = open(t, srv.URL(db), "")
	c, err := pgx.Connect(ctx, srv.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, "SELECT MAX(version) FROM savepoint.schema_version").Scan(&v); err != nil || v != pgstore.SchemaVersion || v < 2 {
		t.Fatalf("schema version after Open: %d %v", v, err)
	}
	if sums, err := s.ListSessionsByUpdate(ctx, core.UpdateCursor{}, 10, core.SessionFilter{}); err != nil || len(sums) != 1 || sums[0].SessionID != "old" {
		t.Fatalf("by update after the migration to version 5: %+v %v", sums, err)
	}
	if cp, err := s.Checkpoint(ctx, "old", 0); err != nil || cp.Status != core.StatusActive {
		t.Fatalf("a version 1 session: %+v %v", cp, err)
	}
	if res, err := s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "old", Status: core.StatusCompleted}); err != nil || res.Already {
		t.Fatalf("complete a version 1 session: %+v %v", res, err)
	}
	if _, err := s.PutCheckpoint(ctx, graphPut("t", "1")); err != nil {
		t.Fatalf("graph put after the migration to version 3: %v", err)
	}
	if res, err := s.BeginThreadEffect(ctx, &core.ThreadEffectBegin{ThreadID: "t", ToolUseID: "c", Name: "f", CheckpointID: "1"}); err != nil || res.Decision != core.DecisionRun {
		t.Fatalf("ledger begin after the migration to version 6: %+v %v", res, err)
	}
	var stamped bool
	if err := c.QueryRow(ctx, "SELECT changed_xid <> '0' FROM savepoint.sessions WHERE session_id = 'old'").Scan(&stamped); err != nil || !stamped {
		t.Fatalf("changed_xid after a completion: %v %v", stamped, err)
	}
}
