package badgerstore

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
)

// TestVerifyOnlyNewTables: Open verifies only the tables its list does not
// name, so damage to a listed table (same size and time) is not seen at
// Open but by the scrub, which reports and counts it, makes the sessions in
// the table's range answer ErrCheckpointCorrupt, and takes the table off the list so
// that the next Open refuses it.
func TestVerifyOnlyNewTables(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	// Enough sessions for a table of many blocks: Badger reads the first
	// and last at Open.
	for i := range 300 {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprintf("s%03d", i), StateJSON: `{"k":1}`,
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + strings.Repeat("m", 300) + `"`}}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // flushes the memtable to a table
	s = openT(t, dir)
	tables := s.db.Tables()
	s.Close()
	if len(tables) == 0 {
		t.Fatal("no table after a flush")
	}
	listed := readVerified(dir)
	for _, ti := range tables {
		st, err := stampOf(dir, ti.ID)
		if err != nil || !listed[st] {
			t.Fatalf("table %d not listed as verified after Open: %v", ti.ID, err)
		}
	}

	// Flip a byte in the first table's data blocks, keeping size and time.
	path := filepath.Join(dir, table.IDToFilename(tables[0].ID))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}

	s = openT(t, dir) // the listed table is not read again
	n, err := s.scrub(true)
	if err != nil || n != 1 || s.Stats().DamagedTables != 1 {
		t.Fatalf("scrub: %d damaged, %v, stats %+v", n, err, s.Stats())
	}
	for _, sid := range []string{"s000", "s299"} {
		if _, err := s.Checkpoint(ctx, sid, 0); !errors.Is(err, core.ErrCheckpointCorrupt) {
			t.Errorf("Checkpoint(%s) in a damaged table: %v, want ErrCheckpointCorrupt", sid, err)
		}
	}
	if n, err := s.scrub(true); err != nil || n != 0 || s.Stats().DamagedTables != 1 {
		t.Errorf("second scrub: %d new, %v; damaged tables %d, want 1", n, err, s.Stats().DamagedTables)
	}
	s.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open after the scrub found damage: %v, want ErrDamaged", err)
	}
}

// TestDamagedRangeServesRest: only the keys in a damaged table's range
// answer ErrCheckpointCorrupt; other sessions keep serving, reads and writes.
func TestDamagedRangeServesRest(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	for _, sid := range []string{"a", "b"} {
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	s.damage.add(keyRange{first: revisionKey("a", 0), last: revisionKey("a", math.MaxUint64)})
	var se *core.StateError
	if _, err := s.Resume(ctx, "a", false); !errors.Is(err, core.ErrCheckpointCorrupt) || !errors.As(err, &se) || se.CurrentEpoch != 1 {
		t.Errorf("Resume(a), its revisions in a damaged table: %v, want ErrCheckpointCorrupt with the epoch", err)
	}
	if _, err := s.Resume(ctx, "b", false); err != nil {
		t.Errorf("Resume(b): %v", err)
	}
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "b", ExpectedRevision: 1, Epoch: 2}); err != nil {
		t.Errorf("save to b: %v", err)
	}
	if _, err := s.DeleteSession(ctx, "a", 1); err != nil {
		t.Errorf("DeleteSession(a), the way out of damage: %v", err)
	}
}

// TestVerifyAtOpenSkipsCompactedTables: a table Badger listed at Open whose
// file a compaction deleted before the verification read it (found by the
// 1,000-cut power-cut run: "stat 000873.sst: no such file or directory" at
// a restart) is skipped once it is no longer listed; a missing file still
// listed is damage.
func TestVerifyAtOpenSkipsCompactedTables(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	saveN(t, s, "s", 1)
	s.Close() // flushes the memtable to a table
	s = openT(t, dir)
	real := s.db.Tables()
	opts := s.db.Opts()
	s.Close()
	if len(real) == 0 {
		t.Fatal("no table after a flush")
	}
	gone := badger.TableInfo{ID: 999999} // no such file
	calls := 0
	compacted := func() []badger.TableInfo {
		calls++
		if calls == 1 {
			return append([]badger.TableInfo{gone}, real...) // listed, then compacted away
		}
		return real
	}
	if err := verifyListed(dir, compacted, noPin, opts); err != nil {
		t.Fatalf("a table compacted away during the verification: %v", err)
	}
	stillListed := func() []badger.TableInfo { return append([]badger.TableInfo{gone}, real...) }
	if err := verifyListed(dir, stillListed, noPin, opts); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a listed table without its file: %v, want fs.ErrNotExist", err)
	}
	// Badger truncates a compacted table's file to 0 before removing it (cut
	// 413 of the second 1,000-cut run: "table 001319.sst is damaged: ...
	// while mmapping ... with size: 0"): an empty file no longer listed is
	// skipped, one still listed is damage.
	empty := badger.TableInfo{ID: 999998}
	if err := os.WriteFile(filepath.Join(dir, table.IDToFilename(empty.ID)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	calls = 0
	truncated := func() []badger.TableInfo {
		calls++
		if calls == 1 {
			return append([]badger.TableInfo{empty}, real...)
		}
		return real
	}
	if err := verifyListed(dir, truncated, noPin, opts); err != nil {
		t.Fatalf("a table truncated by its deletion during the verification: %v", err)
	}
	emptyListed := func() []badger.TableInfo { return append([]badger.TableInfo{empty}, real...) }
	if err := verifyListed(dir, emptyListed, noPin, opts); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Fatalf("a listed table whose file is empty: %v, want damage", err)
	}
}

// noPin pins nothing: the tests of verifyListed's listing rules.
func noPin() func() { return func() {} }

// TestPinTablesKeepsCompactedFiles: a table Badger compacts away while it
// is pinned keeps its file, whole, until the pin is released, so the
// verification never reads a file its deletion truncates (defect 20).
func TestPinTablesKeepsCompactedFiles(t *testing.T) {
	dir := t.TempDir()
	for run := range 3 { // three runs: three tables, flushed by each Close
		s := openT(t, dir)
		saveN(t, s, fmt.Sprint("s", run), 20)
		s.Close()
	}
	s := openT(t, dir)
	defer s.Close()
	sizes := map[uint64]int64{}
	for _, ti := range s.db.Tables() {
		fi, err := os.Stat(filepath.Join(dir, table.IDToFilename(ti.ID)))
		if err != nil {
			t.Fatal(err)
		}
		sizes[ti.ID] = fi.Size()
	}
	release := pinTables(s.db)
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	var gone []uint64
	for id, size := range sizes {
		if stillListed(s.db.Tables, id) {
			continue
		}
		gone = append(gone, id)
		if fi, err := os.Stat(filepath.Join(dir, table.IDToFilename(id))); err != nil || fi.Size() != size {
			t.Errorf("table %d, compacted away while pinned: %v %v, want its file whole (%d bytes)", id, fi, err, size)
			continue
		}
		if err := verifyTable(dir, id, s.db.Opts()); err != nil {
			t.Errorf("table %d, compacted away while pinned, fails its verification: %v", id, err)
		}
	}
	if len(gone) == 0 {
		t.Fatalf("Flatten compacted none of the tables %v away: the test proves nothing", sizes)
	}
	release()
	for _, id := range gone {
		if _, err := os.Stat(filepath.Join(dir, table.IDToFilename(id))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("table %d still has its file once released: %v", id, err)
		}
	}
}
