package badgerstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// flushedStore writes a session and closes the store, so that Badger has
// flushed it to a table, and returns the table files.
func flushedStore(t *testing.T) (dir string, tables []string) {
	t.Helper()
	dir = t.TempDir()
	s := openT(t, dir)
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"x"`}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tables, _ = filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table after a clean close")
	}
	return dir, tables
}

func TestRepairManifest(t *testing.T) {
	t.Run("nothing to repair", func(t *testing.T) {
		dir, _ := flushedStore(t)
		got, err := RepairManifest(dir)
		if err != nil || len(got) != 0 {
			t.Fatalf("repair of a sound store: %v %v", got, err)
		}
	})
	t.Run("missing table", func(t *testing.T) {
		dir, tables := flushedStore(t)
		os.Remove(tables[0])
		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("open with a missing table: %v", err)
		}
		// The refusal names the table and the exact commands.
		for _, want := range []string{filepath.Base(tables[0]), "savepointd repair-manifest --data-dir " + dir,
			"savepointd verify --data-dir " + dir} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("open with a missing table: %v\nwant it to say %q", err, want)
			}
		}
		got, err := RepairManifest(dir)
		if err != nil || len(got) != 1 || got[0] != filepath.Base(tables[0]) {
			t.Fatalf("repair: %v %v", got, err)
		}
		s, err := Open(dir, Options{AcceptDataLoss: true}) // the table held data: it is behind now
		if err != nil {
			t.Fatalf("open after the repair: %v", err)
		}
		s.Close()
	})
	t.Run("table not in the MANIFEST", func(t *testing.T) {
		dir, tables := flushedStore(t)
		if err := os.Rename(tables[0], filepath.Join(dir, "000099.sst")); err != nil {
			t.Fatal(err)
		}
		if _, err := RepairManifest(dir); !errors.Is(err, ErrUnsafeRepair) {
			t.Fatalf("repair with a table the MANIFEST does not list: %v", err)
		}
		// The open's refusal does not send the operator to a repair that
		// would refuse: it says to restore.
		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrDamaged) || strings.Contains(err.Error(), "repair-manifest") || !strings.Contains(err.Error(), "Restore the directory from a backup") {
			t.Fatalf("open with an unlisted table and a missing one: %v", err)
		}
	})
	t.Run("daemon running", func(t *testing.T) {
		dir, _ := flushedStore(t)
		s := openT(t, dir)
		defer s.Close()
		if _, err := RepairManifest(dir); !errors.Is(err, ErrLocked) {
			t.Fatalf("repair under a running store: %v", err)
		}
	})
}

// TestEmptyWALIgnored opens a store beside an empty write-ahead log file, as
// a process that ends while Badger deletes a flushed memtable's log leaves
// it; Badger alone refuses to open then.
func TestEmptyWALIgnored(t *testing.T) {
	dir, _ := flushedStore(t)
	if err := os.WriteFile(filepath.Join(dir, "00001.mem"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open beside an empty WAL: %v", err)
	}
	defer s.Close()
	if cp, err := s.Checkpoint(ctx, "s", 0); err != nil || cp.MessageCount != 1 {
		t.Fatalf("session after open: %+v %v", cp, err)
	}
}
