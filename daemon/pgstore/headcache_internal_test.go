package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestHeadCacheSeesOtherStores: two stores on one schema, as two daemons
// of a fleet. Store a caches the session's rows with each of its commits
// (headcache.go); store b then writes the session, so a's next request,
// which a's cached rows would let through, fails the check of its one
// round trip and runs again with its reads: a stale save is refused, a
// second effect of the call conflicts with b's first, which stands. Without
// the check, a's writes would replace b's.
func TestHeadCacheSeesOtherStores(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(ctx, srv.URL("postgres"), Options{Schema: "head_cache"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	msg := func(text string) []core.Message { return []core.Message{{Role: "user", ContentJSON: `"` + text + `"`}} }
	must := func(_ core.SaveResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: msg("a1")}))
	must(a.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1, Epoch: 1, RequestID: "a2", AppendMessages: msg("a2"),
		PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}}))
	if _, _, ok := a.heads.lookup([]*op{{sessionID: "s", toolUseIDs: []string{"t1"}}}); !ok {
		t.Fatal("store a did not cache the session it wrote")
	}

	must(b.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 1, RequestID: "b3", AppendMessages: msg("b3"),
		PendingToolUses: []core.ToolUse{{ID: "t1", Name: "send"}}}))
	uncached := a.uncached.Load()
	_, err := a.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 2, Epoch: 1, RequestID: "a3", AppendMessages: msg("a3")})
	if !errors.Is(err, core.ErrRevisionMismatch) {
		t.Fatalf("store a's save on its stale revision 2: %v, want %v", err, core.ErrRevisionMismatch)
	}
	if a.uncached.Load() != uncached+1 {
		t.Errorf("store a's stale save did not fail its cached run's check")
	}
	cp, err := a.Checkpoint(ctx, "s", 0)
	if err != nil || cp.Revision != 3 || cp.MessageCount != 3 {
		t.Fatalf("after the stale save: revision %d, %d messages, %v; want b's revision 3 of 3", cp.Revision, cp.MessageCount, err)
	}

	// a knows the call again (its refused save read it), as pending.
	if _, err := a.BeginEffect(ctx, "s", "t1", 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "from b"}); err != nil {
		t.Fatal(err)
	}
	uncached = a.uncached.Load()
	if _, _, err := a.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "from a"}); !errors.Is(err, core.ErrEffectConflict) {
		t.Fatalf("store a's second effect of the call: %v, want %v", err, core.ErrEffectConflict)
	}
	if a.uncached.Load() != uncached+1 {
		t.Errorf("store a's second effect did not fail its cached run's check")
	}
	e, already, err := a.RecordEffect(ctx, "s", core.Effect{ToolUseID: "t1", Output: "from b"})
	if err != nil || !already || e.Output != "from b" {
		t.Fatalf("the call's effect: %+v, already %v, %v; want b's, already recorded", e, already, err)
	}
}
