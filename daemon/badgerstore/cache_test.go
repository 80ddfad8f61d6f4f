package badgerstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// snapshotHead reads sid's head from t's Badger snapshot, beside the cache.
func snapshotHead(t *testing.T, x *tx, sid string) *storagev1.SessionRecord {
	t.Helper()
	item, err := x.r.Get(sessionKey(sid))
	if err != nil {
		t.Fatal(err)
	}
	var h storagev1.SessionRecord
	if err := item.Value(func(v []byte) error { return decodeValue(sessionKey(sid), v, &h) }); err != nil {
		t.Fatal(err)
	}
	return &h
}

func TestCacheAnswersTheNextSave(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 3)
	// The first save finds no head; the next two find the one before in the cache.
	if hits := s.Stats().CacheHits; hits < 2 {
		t.Fatalf("%d cache hits in 3 saves, want at least 2", hits)
	}
	cp, err := s.Checkpoint(ctx, "c", 0)
	if err != nil || cp.Revision != 3 {
		t.Fatalf("checkpoint: revision %d, %v; want 3", cp.Revision, err)
	}
}

// TestCacheNotNewerThanSnapshot: a transaction whose snapshot predates a
// commit reads what its snapshot holds, not the commit's cached head.
func TestCacheNotNewerThanSnapshot(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 2)
	old := s.newTx()
	defer s.closeTx(old)
	saveN2 := func() {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 2}); err != nil {
			t.Fatal(err)
		}
	}
	saveN2()
	h, _, err := head(old, "c")
	if err != nil {
		t.Fatal(err)
	}
	if h.Revision != 2 {
		t.Fatalf("a snapshot of revision 2 read revision %d of its head", h.Revision)
	}
	now := s.newTx()
	defer s.closeTx(now)
	hits := now.cacheHits
	if h, _, err = head(now, "c"); err != nil || h.Revision != 3 {
		t.Fatalf("a new snapshot: revision %d, %v; want 3", h.GetRevision(), err)
	}
	if now.cacheHits != hits+1 {
		t.Fatal("a new snapshot did not read the cached head")
	}
}

// TestCacheNotUsedWhileCommitUnsynced: while a commit is in Badger but not
// yet synced, a snapshot and the cache agree on its keys (both the last
// durable value: snapshot.go).
func TestCacheNotUsedWhileCommitUnsynced(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 1)
	finish := saveSyncHeld(s, "c", 1)
	x := s.newTx()
	h, _, err := head(x, "c")
	snap := snapshotHead(t, x, "c")
	s.closeTx(x)
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if h.Revision != snap.Revision {
		t.Fatalf("head read as revision %d while the snapshot holds revision %d", h.Revision, snap.Revision)
	}
}

// saveSyncHeld starts a save of session sid at revision expected and
// returns once its commit is in Badger and its sync is held; finish lets the
// sync go and returns the save's error. Later syncs are not held.
func saveSyncHeld(s *Store, sid string, expected uint64) (finish func() error) {
	inSync, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sync0 := s.eng.sync
	s.eng.sync = func() error {
		once.Do(func() { close(inSync); <-release })
		return sync0()
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, ExpectedRevision: expected})
		done <- err
	}()
	<-inSync
	return func() error {
		close(release)
		return <-done
	}
}

func TestCacheEmptiedByFailedSync(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 2)
	saveN(t, s, "d", 1)
	if n := s.eng.cache.len(); n != 2 {
		t.Fatalf("%d heads cached after saves of two sessions, want 2", n)
	}
	s.eng.sync = func() error { return errors.New("injected sync failure") }
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 2}); err == nil {
		t.Fatal("a save whose sync failed was acknowledged")
	}
	if n := s.eng.cache.len(); n != 0 {
		t.Fatalf("%d entries cached after a failed sync", n)
	}
}

func TestCacheEmptiedByExclusive(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 1)
	if s.eng.cache.len() == 0 {
		t.Fatal("nothing cached after a save")
	}
	if err := s.eng.runExclusive(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := s.eng.cache.len(); n != 0 {
		t.Fatalf("%d entries cached after an exclusive operation", n)
	}
}

// TestCacheFollowsDeleteFenceAndResume runs the writes that change a head
// other than a save, each followed by the reads and saves that a stale
// cached head would answer wrongly.
func TestCacheFollowsDeleteFenceAndResume(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 2)

	// Resume: the old epoch is fenced, the new one saves.
	cp, err := s.Resume(ctx, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 2, Epoch: cp.Epoch - 1}); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("save with the epoch before Resume: %v, want ErrSessionFenced", err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 2, Epoch: cp.Epoch}); err != nil {
		t.Fatal(err)
	}

	// BeginEffect and RecordEffect read the ledger entry a save wrote.
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 3, Epoch: cp.Epoch,
		PendingToolUses: []core.ToolUse{{ID: "t1", Name: "w", BeginTracked: true}}}); err != nil {
		t.Fatal(err)
	}
	b, err := s.BeginEffect(ctx, &core.BeginRequest{SessionID: "c", ToolUseID: "t1", Epoch: cp.Epoch})
	if err != nil || b.AlreadyBegun {
		t.Fatalf("begin: %+v, %v", b, err)
	}
	if b, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "c", ToolUseID: "t1", Epoch: cp.Epoch}); err != nil || !b.AlreadyBegun {
		t.Fatalf("second begin: %+v, %v; want already begun", b, err)
	}
	if _, already, err := s.RecordEffect(ctx, "c", core.Effect{ToolUseID: "t1", Name: "w", Output: `"ok"`}); err != nil || already {
		t.Fatalf("record: already %v, %v", already, err)
	}
	if _, already, err := s.RecordEffect(ctx, "c", core.Effect{ToolUseID: "t1", Name: "w", Output: `"ok"`}); err != nil || !already {
		t.Fatalf("second record: already %v, %v; want already recorded", already, err)
	}

	// Delete: the session is gone, its revision unknown, a stale epoch fenced.
	tomb, err := s.DeleteSession(ctx, "c", cp.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(ctx, "c", 0); !errors.Is(err, core.ErrSessionNotFound) {
		t.Fatalf("checkpoint after delete: %v, want ErrSessionNotFound", err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 4, Epoch: cp.Epoch}); !errors.Is(err, core.ErrSessionNotFound) {
		t.Fatalf("save at the deleted revision: %v, want ErrSessionNotFound", err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", Epoch: tomb}); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("re-create at the tombstone's epoch: %v, want ErrSessionFenced", err)
	}
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 1 || res.Epoch <= tomb {
		t.Fatalf("re-created at revision %d epoch %d; want revision 1 above epoch %d", res.Revision, res.Epoch, tomb)
	}
}

// TestCacheAcrossInstances: a store opened after another instance wrote the
// directory answers what that instance committed.
func TestCacheAcrossInstances(t *testing.T) {
	dir := t.TempDir()
	a := openT(t, dir)
	saveN(t, a, "c", 2)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openT(t, dir)
	cp, err := b.Resume(ctx, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 2, Epoch: cp.Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := openT(t, dir)
	defer c.Close()
	if _, err := c.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 3, Epoch: cp.Epoch - 1}); !errors.Is(err, core.ErrSessionFenced) {
		t.Fatalf("save with the epoch before the other instance's Resume: %v, want ErrSessionFenced", err)
	}
	if _, err := c.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: 2, Epoch: cp.Epoch}); !errors.Is(err, core.ErrRevisionMismatch) {
		t.Fatalf("save at the revision before the other instance's save: %v, want ErrRevisionMismatch", err)
	}
}

func TestCacheBudget(t *testing.T) {
	c := newRecordCache()
	val := []byte(strings.Repeat("v", 1000))
	for i := range 3 * cacheBudget / len(val) {
		c.remember([]*op{{writes: []write{{key: sessionKey(fmt.Sprintf("s%d", i)), val: val}}}}, uint64(i+1))
	}
	if c.bytes > cacheBudget {
		t.Fatalf("%d bytes cached, over the budget of %d", c.bytes, cacheBudget)
	}
	c.remember([]*op{{writes: []write{{key: sessionKey("big"), val: make([]byte, cacheMaxValue+1)}}}}, 1)
	if _, ok := c.get(sessionKey("big"), 1); ok {
		t.Fatal("a value over cacheMaxValue was cached")
	}
	c.remember([]*op{{writes: []write{{key: revisionKey("r", 1), val: val}}}}, 1)
	if _, ok := c.get(revisionKey("r", 1), 1); ok {
		t.Fatal("a revision record was cached")
	}
}
