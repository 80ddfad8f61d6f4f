package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// addTableRecord appends to the MANIFEST of dir the record of a new level 0
// table id whose file does not exist: the trace Badger's failed flush
// leaves (the record written, its fsync failed, the table deleted).
func addTableRecord(t *testing.T, dir string, id uint64) {
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
	data, err := proto.Marshal(&pb.ManifestChangeSet{Changes: []*pb.ManifestChange{{Id: id, Op: pb.ManifestChange_CREATE}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	rec = binary.BigEndian.AppendUint32(rec, crc32.Checksum(data, castagnoli))
	if _, err := f.WriteAt(append(rec, data...), valid); err != nil {
		t.Fatal(err)
	}
}

// TestManifestHeal: a table record the watch saw Badger's failed flush
// leave is removed by the next Open, with every acknowledged write kept; a
// missing table the watch did not see, or that Badger had in its levels,
// is refused with the repair-manifest command, never removed.
func TestManifestHeal(t *testing.T) {
	const bogus = 900
	discard := slog.New(slog.DiscardHandler)
	// store writes sessions and closes the store, and returns the tables
	// Badger had in its levels then.
	store := func(t *testing.T) (dir string, levels map[uint64]bool) {
		t.Helper()
		dir = t.TempDir()
		s := openT(t, dir)
		for i := range 50 {
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: fmt.Sprint("s", i),
				AppendMessages: []core.Message{{Role: "user", ContentJSON: fmt.Sprintf("%q", fmt.Sprint("m", i))}}}); err != nil {
				t.Fatal(err)
			}
		}
		var w manifestWatch
		if err := s.watchManifest(&w); err != nil { // a sound MANIFEST: nothing to note
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, HealFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s written for a sound MANIFEST: %v", HealFile, err)
		}
		levels = s.levels()
		s.Close()
		return dir, levels
	}

	t.Run("seen by the watch", func(t *testing.T) {
		dir, levels := store(t)
		addTableRecord(t, dir, bogus)
		if err := noteFailedFlushes(dir, func() map[uint64]bool { return levels }, discard); err != nil {
			t.Fatal(err)
		}
		if ids, err := readHealFile(dir); err != nil || len(ids) != 1 || ids[0] != bogus {
			t.Fatalf("%s: %v %v, want [%d]", HealFile, ids, err, bogus)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("open after the watch saw the failed flush: %v", err)
		}
		defer s.Close()
		for i := range 50 {
			cp, err := s.Checkpoint(ctx, fmt.Sprint("s", i), 0)
			if err != nil || cp.Revision != 1 || cp.MessageCount != 1 {
				t.Fatalf("session s%d after the heal: %v %+v", i, err, cp)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, HealFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after the heal: %v", HealFile, err)
		}
	})

	t.Run("not seen", func(t *testing.T) {
		dir, _ := store(t)
		addTableRecord(t, dir, bogus)
		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "file does not exist for table") ||
			!strings.Contains(err.Error(), "savepointd repair-manifest --data-dir "+dir) {
			t.Fatalf("open with an unseen missing table: %v, want ErrDamaged naming repair-manifest", err)
		}
	})

	t.Run("another table missing too", func(t *testing.T) {
		dir, levels := store(t)
		addTableRecord(t, dir, bogus)
		if err := noteFailedFlushes(dir, func() map[uint64]bool { return levels }, discard); err != nil {
			t.Fatal(err)
		}
		addTableRecord(t, dir, bogus+1) // not seen
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
			t.Fatalf("open with a seen and an unseen missing table: %v, want ErrDamaged", err)
		}
	})

	t.Run("table in Badger's levels", func(t *testing.T) {
		dir, tables := flushedStore(t)
		s := openT(t, dir)
		defer s.Close()
		if err := os.Remove(tables[0]); err != nil { // gone from under Badger: data lost
			t.Fatal(err)
		}
		var w manifestWatch
		if err := s.watchManifest(&w); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, HealFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s written for a table Badger served: %v", HealFile, err)
		}
	})
}
