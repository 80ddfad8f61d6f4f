package badgerstore

import (
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

func TestSnapshots(t *testing.T) {
	s := newSnapshots(10)
	if d := s.advance(11); d != 11 {
		t.Fatalf("no reader: discard %d, want the latest version 11", d)
	}
	a := s.open()
	b := s.open()
	if a != 11 || b != 11 {
		t.Fatalf("readers opened at %d and %d, want 11", a, b)
	}
	if d := s.advance(12); d != 11 {
		t.Fatalf("two readers of 11: discard %d, want 11", d)
	}
	c := s.open()
	if c != 12 {
		t.Fatalf("reader opened at %d after advance(12)", c)
	}
	s.close(a)
	if d := s.advance(13); d != 11 {
		t.Fatalf("one reader of 11 left: discard %d, want 11", d)
	}
	s.close(b)
	if d := s.advance(14); d != 12 {
		t.Fatalf("oldest reader 12: discard %d, want 12", d)
	}
	s.close(c)
	if d := s.advance(15); d != 15 || len(s.readers) != 0 || s.current() != 15 {
		t.Fatalf("no reader left: discard %d, %d versions still counted, current %d", d, len(s.readers), s.current())
	}
}

// TestReadersSeeOnlyDurableCommits: a commit is read by nobody until its
// sync returns, not even by a reader that starts after Badger took it.
func TestReadersSeeOnlyDurableCommits(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 1)
	finish := saveSyncHeld(s, "c", 1)
	s.eng.cache.clear() // read from Badger, not from the cache
	during := s.newTx()
	snap := snapshotHead(t, during, "c")
	s.closeTx(during)
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if snap.Revision != 1 {
		t.Fatalf("a reader during the sync of revision 2 read revision %d, want 1", snap.Revision)
	}
	s.eng.cache.clear()
	after := s.newTx()
	defer s.closeTx(after)
	if snap := snapshotHead(t, after, "c"); snap.Revision != 2 {
		t.Fatalf("after the sync: revision %d, want 2", snap.Revision)
	}
}

// TestDiscardFollowsOldestReader: the engine lets Badger discard a version
// only once no reader reads at it or before it.
func TestDiscardFollowsOldestReader(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	saveN(t, s, "c", 1)
	held := s.readTxn()
	v := held.ReadTs()
	saveN(t, s, "d", 1)
	if d := s.eng.snaps.advance(s.eng.snaps.current()); d != v {
		t.Fatalf("with a reader at %d open: discard %d", v, d)
	}
	s.discardReadTxn(held)
	if d := s.eng.snaps.advance(s.eng.snaps.current()); d != s.eng.snaps.current() || d <= v {
		t.Fatalf("no reader: discard %d, want the latest version %d", d, s.eng.snaps.current())
	}
}

// TestSupersededVersionsCompacted: once no reader needs them, the versions a
// save overwrote go at compaction, as in Badger's default mode; a store that
// never advanced Badger's discard timestamp would keep every one.
func TestSupersededVersionsCompacted(t *testing.T) {
	dir := t.TempDir()
	saveInTables(t, dir, 3)
	s := openT(t, dir)
	defer s.Close()
	saveN(t, s, "d", 1)
	if err := s.db.Flatten(1); err != nil { // compacts the tables into one
		t.Fatal(err)
	}
	if tables := len(s.db.Tables()); tables != 1 {
		t.Fatalf("%d tables after Flatten, want 1: nothing was compacted", tables)
	}
	if versions := headVersions(t, s, "c"); versions != 1 {
		t.Fatalf("%d versions of the head after compaction, want 1", versions)
	}
}

// current returns the version of the last durable commit.
func (s *snapshots) current() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// TestCompactionDuringOpenDropsSupersededVersions: a compaction that Badger's
// compactors run while Open is still replaying the log and verifying (the
// compactors start inside badger.Open) drops the versions a save overwrote,
// as a later one does; one run with Badger's initial discard timestamp of 0
// would keep them all until those tables are compacted again.
func TestCompactionDuringOpenDropsSupersededVersions(t *testing.T) {
	dir := t.TempDir()
	// Two level-0 tables: a compactor merges them once Badger is open, and
	// the hook holds Open until it has.
	saveInTables(t, dir, 2)
	openedHook = func(db *badger.DB) {
		deadline := time.Now().Add(30 * time.Second)
		for len(db.Tables()) != 1 {
			if time.Now().After(deadline) {
				t.Errorf("Badger's compactors left %d tables in 30s", len(db.Tables()))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	s := openT(t, dir)
	openedHook = nil
	defer s.Close()
	if versions := headVersions(t, s, "c"); versions != 1 {
		t.Fatalf("%d versions of the head after a compaction during Open, want 1", versions)
	}
}

// headVersions counts the versions of session sid's head in s's Badger.
func headVersions(t *testing.T, s *Store, sid string) int {
	t.Helper()
	versions := 0
	err := rawView(s, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{AllVersions: true, Prefix: sessionKey(sid)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if string(it.Item().Key()) == string(sessionKey(sid)) {
				versions++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return versions
}

// saveInTables leaves in dir a closed store whose session "c" has 3n
// revisions, saved by n stores in turn, three each: each Close flushes its
// three versions of the head as a level-0 table. Badger compacts level 0 from
// two tables (WithNumLevelZeroTables), so with n <= 2 every table is still
// on level 0; with more, the compactors may have merged some.
func saveInTables(t *testing.T, dir string, n int) {
	t.Helper()
	rev := uint64(0)
	for range n {
		s := openT(t, dir)
		for range 3 {
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "c", ExpectedRevision: rev}); err != nil {
				t.Fatal(err)
			}
			rev++
		}
		s.Close()
	}
}
