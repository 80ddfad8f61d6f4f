package badgerstore

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDataFilesSyncsTheDirectoryOnlyWhenItChanged checks the contract of
// dataFiles: the first commit syncs the directory, a commit after which
// the directory is unchanged (and its mtime old) does not, and one after
// Badger created a file does, following a new value-log file and syncing
// the one Badger left (the commit that filled it is in it).
func TestDataFilesSyncsTheDirectoryOnlyWhenItChanged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "000001.vlog"), []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	var synced []string
	f := &dataFiles{dir: dir, datasync: func(v *os.File) error {
		synced = append(synced, filepath.Base(v.Name()))
		return nil
	}}
	defer f.close()
	commit := func() {
		t.Helper()
		if err := f.beforeSync(time.Now(), true); err != nil {
			t.Fatal(err)
		}
		if err := f.afterSync(); err != nil {
			t.Fatal(err)
		}
	}
	commit()
	if f.dirSyncs != 1 || f.vlogFid != 1 {
		t.Fatalf("after the first commit: %d directory syncs, value log %d; want 1 and 1", f.dirSyncs, f.vlogFid)
	}
	commit()
	if f.dirSyncs != 1 {
		t.Fatalf("a commit with the directory unchanged synced it (%d syncs)", f.dirSyncs)
	}
	if err := os.WriteFile(filepath.Join(dir, "000002.vlog"), []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	synced = nil
	commit()
	if len(synced) != 2 || synced[0] != "000001.vlog" || synced[1] != "000002.vlog" {
		t.Fatalf("the commit after a rotation synced %v, want the old value log, then the new one", synced)
	}
	if f.dirSyncs != 2 || f.vlogFid != 2 {
		t.Fatalf("after a new value-log file: %d directory syncs, value log %d; want 2 and 2", f.dirSyncs, f.vlogFid)
	}
	// A sync begun within dirChangeWindow of the change proves nothing
	// about a later change in the same coarse clock tick, so the directory
	// is synced again; once a sync began later than that, it is not.
	commit()
	if f.dirSyncs != 3 {
		t.Fatalf("a commit after a sync begun within %v of the directory's change did not sync it (%d syncs)", dirChangeWindow, f.dirSyncs)
	}
	time.Sleep(2 * dirChangeWindow)
	commit()
	commit()
	if f.dirSyncs != 4 {
		t.Fatalf("after a sync begun %v after the change: %d directory syncs, want 4", 2*dirChangeWindow, f.dirSyncs)
	}
}

// TestSyncMemtablesSyncsEveryMemtableLog: a checkpoint syncs the log of
// every memtable, not only the active one that db.Sync syncs: a memtable
// Badger rotated away holds commits until its flush to a table, which may
// not have run when the mark claims them.
func TestSyncMemtablesSyncsEveryMemtableLog(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"00001.mem", "00002.mem", "000001.vlog"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var synced []string
	f := &dataFiles{dir: dir, datasync: func(v *os.File) error {
		synced = append(synced, filepath.Base(v.Name()))
		return nil
	}}
	defer f.close()
	if err := f.syncMemtables(); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || synced[0] != "00001.mem" || synced[1] != "00002.mem" {
		t.Fatalf("synced %v, want both memtable logs", synced)
	}
}
