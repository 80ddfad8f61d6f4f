package pgstore_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/jackc/pgx/v5"

	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

func effectBegin(thread, id string) *core.ThreadEffectBegin {
	return &core.ThreadEffectBegin{ThreadID: thread, ToolUseID: id, Name: "pay", InputJSON: `{"amount":5}`, Class: core.SideEffect}
}

func effectRecord(thread, id string, attempt uint32, out string) *core.ThreadEffectRecord {
	return &core.ThreadEffectRecord{ThreadID: thread, ToolUseID: id, Attempt: attempt,
		Output: core.GraphValue{Type: "json", Data: []byte(out), Size: int64(len(out))}}
}

// TestGraphEffectTwoStores: two stores on one schema (two hosts) racing on
// the begin of one side-effecting call never both get RUN: one starts the
// attempt and every other begin, on either, is IN_DOUBT with its
// idempotency key; of two different outcomes recorded at once, one stands
// and the other is EFFECT_CONFLICT; a begin retried on the other store
// with its request id answers the attempt it started.
func TestGraphEffectTwoStores(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	a, b := open(t, srv.URL("postgres"), schema), open(t, srv.URL("postgres"), schema)
	stores := []*pgstore.Store{a, b}
	const racers = 12
	for round := range 6 {
		// Odd rounds race on a thread both have seen, even ones on a new
		// thread, whose row the racers create at once.
		thread := fmt.Sprintf("t%d", round)
		if round%2 == 1 {
			if _, err := a.PutCheckpoint(ctx, graphPut(thread, "1")); err != nil {
				t.Fatal(err)
			}
		}
		results := make([]core.ThreadEffectBeginResult, racers)
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = stores[i%2].BeginThreadEffect(ctx, effectBegin(thread, "call"))
			}()
		}
		close(start)
		wg.Wait()
		runs, key := 0, ""
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("round %d: begin %d: %v", round, i, errs[i])
			}
			switch res.Decision {
			case core.DecisionRun:
				runs++
			case core.DecisionInDoubt:
			default:
				t.Fatalf("round %d: begin %d answered %v", round, i, res.Decision)
			}
			if res.Effect.Attempts != 1 || (key != "" && res.Effect.IdempotencyKey != key) {
				t.Fatalf("round %d: begin %d: attempt %d, key %q (others %q)", round, i, res.Effect.Attempts, res.Effect.IdempotencyKey, key)
			}
			key = res.Effect.IdempotencyKey
		}
		if runs != 1 {
			t.Fatalf("round %d: %d of %d racing begins on two stores answered RUN, want 1", round, runs, racers)
		}

		// Two outcomes for the attempt at once, one from each store.
		var recErrs [2]error
		var recs [2]core.ThreadEffectRecordResult
		start = make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				recs[i], recErrs[i] = stores[i].RecordThreadEffect(ctx, effectRecord(thread, "call", 1, fmt.Sprintf(`"from %d"`, i)))
			}()
		}
		close(start)
		wg.Wait()
		won := -1
		for i, err := range recErrs {
			switch {
			case err == nil:
				if won >= 0 {
					t.Fatalf("round %d: both outcomes recorded", round)
				}
				won = i
			case !errors.Is(err, core.ErrEffectConflict):
				t.Fatalf("round %d: record %d: %v, want ErrEffectConflict", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither outcome recorded", round)
		}
		for _, s := range stores {
			es, err := s.ListThreadEffects(ctx, thread, core.ThreadEffectKey{}, 10, 0)
			if err != nil || len(es) != 1 || string(es[0].Output.Data) != fmt.Sprintf(`"from %d"`, won) || es[0].State != core.ThreadEffectSucceeded {
				t.Fatalf("round %d: the ledger after the racing records: %+v %v", round, es, err)
			}
		}
	}

	// A begin retried on B with the request id of its first try on A.
	retried := effectBegin("r", "call")
	retried.Class = core.Idempotent
	retried.RequestID = "0b9f8a52-4a0d-4c55-9d7e-8e5f1c7f0a11"
	first, err := a.BeginThreadEffect(ctx, retried)
	if err != nil {
		t.Fatal(err)
	}
	again := *retried
	again.RequestID = ""
	if second, err := a.BeginThreadEffect(ctx, &again); err != nil || second.Decision != core.DecisionRun || second.Effect.Attempts != 2 {
		t.Fatalf("a second attempt: %+v %v", second, err)
	}
	replay, err := b.BeginThreadEffect(ctx, retried)
	if err != nil || replay.Decision != core.DecisionRun || replay.Effect.Attempts != 1 || replay.Effect.IdempotencyKey != first.Effect.IdempotencyKey {
		t.Fatalf("the first begin retried on the other store: %+v %v, want RUN for attempt 1", replay, err)
	}
}

// TestGraphEffectCorruptRow: a ledger row edited outside savepointd is
// CHECKPOINT_CORRUPT when a begin, a record, ListThreadEffects or the
// thread's dump reads it, and Verify reports it.
func TestGraphEffectCorruptRow(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := newSchema()
	s := open(t, srv.URL("postgres"), schema)
	if _, err := s.BeginThreadEffect(ctx, effectBegin("t", "call")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordThreadEffect(ctx, effectRecord("t", "call", 1, `"sent"`)); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 0 || rep.CheckedRecords != 2 { // the head and the entry
		t.Fatalf("Verify before the edit: %+v %v", rep, err)
	}
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "graph_effects"}.Sanitize()+" SET data = '\\x226e6f7422'::bytea")
	if _, err := s.BeginThreadEffect(ctx, effectBegin("t", "call")); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Errorf("begin over the edited entry: %v, want ErrCheckpointCorrupt", err)
	}
	if _, err := s.RecordThreadEffect(ctx, effectRecord("t", "call", 1, `"sent"`)); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Errorf("record over the edited entry: %v, want ErrCheckpointCorrupt", err)
	}
	if _, err := s.ListThreadEffects(ctx, "t", core.ThreadEffectKey{}, 10, 0); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Errorf("ListThreadEffects of the edited entry: %v, want ErrCheckpointCorrupt", err)
	}
	if _, err := s.ReadGraphThread(ctx, "t", func(*core.GraphThreadDump) error { return nil }); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Errorf("ReadGraphThread of the edited entry: %v, want ErrCheckpointCorrupt", err)
	}
	rep, err = s.Verify(ctx)
	if err != nil || len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0].Problem, "graph_effects") {
		t.Fatalf("Verify after the edit: %+v %v", rep, err)
	}
	// The record moved under another call's key is detected too.
	if err := s.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginThreadEffect(ctx, effectBegin("t", "a")); err != nil {
		t.Fatal(err)
	}
	srv.Exec(t, "postgres", "UPDATE "+pgx.Identifier{schema, "graph_effects"}.Sanitize()+" SET tool_use_id = 'b'::bytea")
	if _, err := s.ListThreadEffects(ctx, "t", core.ThreadEffectKey{}, 10, 0); !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Errorf("ListThreadEffects of a moved entry: %v, want ErrCheckpointCorrupt", err)
	}
}

// TestGraphEffectLifecycle: a begin or a record is a write to the thread
// (DeleteIdleThreads spares it); a thread holding a ledger alone is deleted
// when idle, its ledger with it; DeleteForRuns leaves the ledger.
func TestGraphEffectLifecycle(t *testing.T) {
	srv := pgtest.Shared(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := open(t, srv.URL("postgres"), newSchema(), func(o *pgstore.Options) {
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	list := func(thread string) []core.ThreadEffect {
		t.Helper()
		es, err := s.ListThreadEffects(ctx, thread, core.ThreadEffectKey{}, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	p := graphPut("busy", "1")
	p.Checkpoint.MetadataJSON = `{"run_id":"r1"}`
	if _, err := s.PutCheckpoint(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginThreadEffect(ctx, effectBegin("ledger-only", "call")); err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	if _, err := s.BeginThreadEffect(ctx, effectBegin("busy", "call")); err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	if _, err := s.RecordThreadEffect(ctx, effectRecord("busy", "call", 1, `"ok"`)); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteIdleThreads(ctx, now.Add(-30*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("DeleteIdleThreads: %d %v, want 1 (the thread with a ledger alone)", n, err)
	}
	if es := list("ledger-only"); len(es) != 0 {
		t.Fatalf("the idle thread's ledger is still there: %+v", es)
	}
	if es := list("busy"); len(es) != 1 {
		t.Fatalf("the thread recorded in was deleted: %+v", es)
	}
	if n, err := s.DeleteForRuns(ctx, []string{"r1"}); err != nil || n != 1 {
		t.Fatalf("DeleteForRuns: %d %v", n, err)
	}
	if es := list("busy"); len(es) != 1 || es[0].State != core.ThreadEffectSucceeded {
		t.Fatalf("DeleteForRuns changed the ledger: %+v", es)
	}
}

// TestGraphEffectDump: ReadGraphThread passes the ledger and the attempt a
// begin's request id started, and ImportGraphThread writes them as they
// are: the imported thread lists the same entries and answers the begin's
// retry with its attempt.
func TestGraphEffectDump(t *testing.T) {
	srv := pgtest.Shared(t)
	a, b := open(t, srv.URL("postgres"), newSchema()), open(t, srv.URL("postgres"), newSchema())
	if _, err := a.PutCheckpoint(ctx, graphPut("t", "1")); err != nil {
		t.Fatal(err)
	}
	retried := effectBegin("t", "pay")
	retried.RequestID = "0b9f8a52-4a0d-4c55-9d7e-8e5f1c7f0a11"
	retried.CheckpointID = "1"
	if _, err := a.BeginThreadEffect(ctx, retried); err != nil {
		t.Fatal(err)
	}
	failed := effectRecord("t", "pay", 1, `"declined"`)
	failed.IsError = true
	if _, err := a.RecordThreadEffect(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RecordThreadEffect(ctx, effectRecord("t", "pay", 1, `"declined"`)); !errors.Is(err, core.ErrEffectConflict) {
		t.Fatalf("another outcome: %v", err)
	}
	big := strings.Repeat("x", 100<<10) // read in pieces by the dump
	look := &core.ThreadEffectBegin{ThreadID: "t", NS: "child:1", ToolUseID: "look", Name: "look", Class: core.ReadOnly}
	if _, err := a.BeginThreadEffect(ctx, look); err != nil {
		t.Fatal(err)
	}
	rl := effectRecord("t", "look", 1, `"`+big+`"`)
	rl.NS = "child:1"
	if _, err := a.RecordThreadEffect(ctx, rl); err != nil {
		t.Fatal(err)
	}
	if _, err := a.BeginThreadEffect(ctx, &core.ThreadEffectBegin{ThreadID: "t", ToolUseID: "zz", Name: "f", Class: core.Idempotent}); err != nil {
		t.Fatal(err)
	}
	want, err := a.ListThreadEffects(ctx, "t", core.ThreadEffectKey{}, 100, 0)
	if err != nil || len(want) != 3 {
		t.Fatalf("the source's ledger: %d %v", len(want), err)
	}
	found, err := a.ReadGraphThread(ctx, "t", func(d *core.GraphThreadDump) error {
		if len(d.Effects) != 3 || len(d.Requests) != 1 || d.Requests[0].EffectAttempt != 1 {
			return fmt.Errorf("the dump holds %d entries and requests %+v", len(d.Effects), d.Requests)
		}
		return b.ImportGraphThread(ctx, d)
	})
	if err != nil || !found {
		t.Fatalf("dump and import: %v %v", found, err)
	}
	got, err := b.ListThreadEffects(ctx, "t", core.ThreadEffectKey{}, 100, 0)
	if err != nil || !reflect.DeepEqual(want, got) {
		t.Fatalf("the imported ledger differs:\n%+v\n%+v (%v)", want, got, err)
	}
	// The failed attempt is retried as attempt 2 on the import; the first
	// begin retried with its request id still answers attempt 1.
	again := *retried
	again.RequestID = ""
	if res, err := b.BeginThreadEffect(ctx, &again); err != nil || res.Decision != core.DecisionRun || res.Effect.Attempts != 2 {
		t.Fatalf("a retry of the failed call on the import: %+v %v", res, err)
	}
	if res, err := b.BeginThreadEffect(ctx, retried); err != nil || res.Decision != core.DecisionRun || res.Effect.Attempts != 1 {
		t.Fatalf("the first begin retried on the import: %+v %v", res, err)
	}
	if rep, err := b.Verify(ctx); err != nil || len(rep.Damaged) != 0 {
		t.Fatalf("Verify of the import: %+v %v", rep, err)
	}
}
