package pgstore

import (
	"context"
	"errors"
	"strings"
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
	if _, err := a.BeginEffect(ctx, &core.BeginRequest{SessionID: "s", ToolUseID: "t1", Epoch: 1}); err != nil {
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

// TestHeadCacheBounded: a session whose rows' records pass
// maxCachedSessionBytes (a call with a large output) is not kept, and the
// cache's bytes count only what it keeps; a later save of it reads ahead
// again and is right.
func TestHeadCacheBounded(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.URL("postgres"), Options{Schema: "head_cache_bounded"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "big", PendingToolUses: []core.ToolUse{{ID: "t1", Name: "read"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "small"}); err != nil {
		t.Fatal(err)
	}
	cached := func(sid string, calls ...string) bool {
		_, _, ok := s.heads.lookup([]*op{{sessionID: sid, toolUseIDs: calls}})
		return ok
	}
	if !cached("big", "t1") || !cached("small") {
		t.Fatal("the sessions were not cached after their saves")
	}
	big := strings.Repeat("x", maxCachedSessionBytes)
	if _, _, err := s.RecordEffect(ctx, "big", core.Effect{ToolUseID: "t1", Output: big}); err != nil {
		t.Fatal(err)
	}
	if cached("big", "t1") {
		t.Error("a session of more than maxCachedSessionBytes was kept")
	}
	s.heads.mu.Lock()
	size, n := s.heads.size, len(s.heads.sessions)
	s.heads.mu.Unlock()
	if n != 1 || size <= 0 || size > 4096 {
		t.Errorf("the cache keeps %d sessions of %d bytes, want the small one alone", n, size)
	}
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "big", ExpectedRevision: 1, Epoch: 1})
	if err != nil || res.Revision != 2 {
		t.Fatalf("a save of the session not kept: %+v %v", res, err)
	}
	e, already, err := s.RecordEffect(ctx, "big", core.Effect{ToolUseID: "t1", Output: big})
	if err != nil || !already || e.Output != big {
		t.Fatalf("the large effect again: already %v, %v", already, err)
	}
}
