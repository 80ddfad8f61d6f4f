package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// addTableRecord appends to the MANIFEST of dir the record of a new level 0
// table id whose file does not exist: the trace Badger's failed flush
// leaves (the record written, its fsync failed, the table deleted), and
// with deleted, the trace of a compaction of those tables into id.
func addTableRecord(t *testing.T, dir string, id uint64, deleted ...uint64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, badger.ManifestFilename), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, valid, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	set := &pb.ManifestChangeSet{Changes: []*pb.ManifestChange{{Id: id, Op: pb.ManifestChange_CREATE}}}
	for _, d := range deleted {
		set.Changes = append(set.Changes, &pb.ManifestChange{Id: d, Op: pb.ManifestChange_DELETE})
	}
	data, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	rec := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	rec = binary.BigEndian.AppendUint32(rec, crc32.Checksum(data, castagnoli))
	if _, err := f.WriteAt(append(rec, data...), valid); err != nil {
		t.Fatal(err)
	}
}

// TestManifestHeal: the record of a missing table that no checkpoint saw
// in Badger's levels (a failed flush, or a power cut during one) is removed
// by the next Open, with every acknowledged write kept; a missing table
// TablesFile lists, or any missing table without TablesFile, is refused
// with the repair-manifest command, never removed.
func TestManifestHeal(t *testing.T) {
	const bogus = 900
	// store writes sessions over two runs of the store, so that the second
	// run's checkpoint lists the table the first run's close flushed, and
	// returns the tables TablesFile lists.
	store := func(t *testing.T) (dir string, listed []uint64) {
		t.Helper()
		dir = t.TempDir()
		for run := range 2 {
			s := openT(t, dir)
			for i := run * 50; i < (run+1)*50; i++ {
				if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprint("s", i),
					AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf("%q", fmt.Sprint("m", i))}}}); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
		}
		listed, found, err := readIDs(filepath.Join(dir, TablesFile))
		if err != nil || !found || len(listed) == 0 {
			t.Fatalf("%s after two runs: %v %v %v", TablesFile, listed, found, err)
		}
		return dir, listed
	}
	refused := func(t *testing.T, dir, why string) {
		t.Helper()
		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "file does not exist for table") {
			t.Fatalf("open with %s: %v, want ErrDamaged for a missing table", why, err)
		}
		if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("not listed: healed", func(t *testing.T) {
		dir, _ := store(t)
		addTableRecord(t, dir, bogus)
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("open with a missing table no checkpoint saw: %v", err)
		}
		defer s.Close()
		for i := range 100 {
			cp, err := s.Checkpoint(ctx, fmt.Sprint("s", i), 0)
			if err != nil || cp.Revision != 1 || cp.MessageCount != 1 {
				t.Fatalf("session s%d after the heal: %v %+v", i, err, cp)
			}
		}
	})

	t.Run("a new store before its first checkpoint: healed", func(t *testing.T) {
		// A copy of a running store, made before any checkpoint, is what a
		// power cut leaves: its sessions are in savepointd's log alone.
		dir := t.TempDir()
		s := openT(t, dir)
		listed, found, err := readIDs(filepath.Join(dir, TablesFile))
		if err != nil || !found || len(listed) != 0 {
			t.Fatalf("%s of a new store: %v %v %v, want it empty", TablesFile, listed, found, err)
		}
		for i := range 20 {
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprint("s", i),
				AppendMessages: []core.Message{{Role: "user", ContentJSON: `"m"`}}}); err != nil {
				t.Fatal(err)
			}
		}
		cut := t.TempDir()
		copyDir(t, dir, cut)
		s.Close()
		addTableRecord(t, cut, bogus)
		s, err = Open(cut, Options{})
		if err != nil {
			t.Fatalf("open with a missing table before any checkpoint: %v", err)
		}
		defer s.Close()
		for i := range 20 {
			if cp, err := s.Checkpoint(ctx, fmt.Sprint("s", i), 0); err != nil || cp.Revision != 1 {
				t.Fatalf("session s%d after the heal: %v %+v", i, err, cp)
			}
		}
	})

	t.Run("no tables file", func(t *testing.T) {
		dir, _ := store(t)
		if err := os.Remove(filepath.Join(dir, TablesFile)); err != nil {
			t.Fatal(err)
		}
		addTableRecord(t, dir, bogus)
		refused(t, dir, "no "+TablesFile)
		_, err := Open(dir, Options{})
		if !strings.Contains(err.Error(), "savepointd repair-manifest --data-dir "+dir) {
			t.Fatalf("the refusal does not name the command: %v", err)
		}
	})

	t.Run("listed table missing", func(t *testing.T) {
		dir, listed := store(t)
		if err := os.Remove(filepath.Join(dir, table.IDToFilename(listed[0]))); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "a listed table missing")
	})

	t.Run("a listed and an unlisted table missing", func(t *testing.T) {
		dir, listed := store(t)
		addTableRecord(t, dir, bogus)
		if err := os.Remove(filepath.Join(dir, table.IDToFilename(listed[0]))); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "a listed and an unlisted table missing")
	})

	t.Run("a compaction's output missing", func(t *testing.T) {
		dir, listed := store(t)
		addTableRecord(t, dir, bogus, listed[0]) // its input, deleted in the MANIFEST, is on disk
		refused(t, dir, "a compaction's output missing")
	})

	t.Run("tables on disk not in the MANIFEST", func(t *testing.T) {
		// A power cut after a compaction recorded its change set brings
		// back the tables it then deleted; Badger deletes them at open.
		dir, _ := store(t)
		addTableRecord(t, dir, bogus)
		orphan := filepath.Join(dir, table.IDToFilename(bogus+1))
		if err := os.WriteFile(orphan, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("open with a missing flushed table and a table the MANIFEST does not name: %v", err)
		}
		s.Close()
		if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the table the MANIFEST does not name is still there: %v", err)
		}
	})
}

// TestTablesFileOnAFullDisk: a checkpoint that cannot write TablesFile for
// want of space leaves the file as it was and keeps the store serving; the
// next checkpoint with room writes it.
func TestTablesFileOnAFullDisk(t *testing.T) {
	dir, _ := flushedStore(t)
	s := openT(t, dir)
	defer s.Close()
	write := writeTables
	var full atomic.Bool
	full.Store(true)
	writeTables = func(dir string, ids []uint64) error {
		if full.Load() {
			return fmt.Errorf("write: %w", syscall.ENOSPC)
		}
		return write(dir, ids)
	}
	t.Cleanup(func() { writeTables = write })
	if err := os.Remove(filepath.Join(dir, TablesFile)); err != nil {
		t.Fatal(err)
	}
	save := func(id string) {
		t.Helper()
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: id, AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.eng.checkpoint(false); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	}
	save("a")
	if err := s.Err(); err != nil {
		t.Fatalf("the store failed for want of room for %s: %v", TablesFile, err)
	}
	if _, found, _ := readIDs(filepath.Join(dir, TablesFile)); found {
		t.Fatalf("%s written on a full disk", TablesFile)
	}
	full.Store(false)
	save("b")
	if ids, found, err := readIDs(filepath.Join(dir, TablesFile)); err != nil || !found || len(ids) == 0 {
		t.Fatalf("%s after the disk had room again: %v %v %v", TablesFile, ids, found, err)
	}
}
