package badgerstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
)

// Healing Badger's failed-flush defect. When the MANIFEST's fsync fails
// during a memtable flush, Badger v4.9.6 deletes the new table but its
// MANIFEST record stays, and the next Open fails on the missing file
// (docs/reliability.md, defect 1). While savepointd runs, the watch below
// sees that trace: a table the MANIFEST names before and after its file was
// found missing (a table Badger deletes on purpose has its DELETE record
// written first), and that Badger never took into its levels. Such a table
// never served a read: its memtable stays in memory and in its memtable log
// until a retried flush succeeds, so its data is in another table or is
// replayed at Open. The watch records its id in HealFile, durably; Open
// removes the MANIFEST records of missing tables when every one of them is
// recorded there and every table on disk is listed, and otherwise refuses
// with the repair-manifest command to run by hand.

// HealFile in the data directory lists, one id a line, the tables whose
// MANIFEST records the next Open may remove.
const HealFile = "savepoint.manifest-heal"

// manifestWatchEvery is how often the watch looks at the MANIFEST when it
// or the directory changed. A variable for tests.
var manifestWatchEvery = time.Second

// manifestWatch holds what the watch saw last.
type manifestWatch struct {
	stamp [3]int64 // MANIFEST size and mtime, the directory's mtime
}

func (s *Store) manifestWatchLoop() {
	t := time.NewTicker(manifestWatchEvery)
	defer t.Stop()
	var w manifestWatch
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := s.watchManifest(&w); err != nil {
			s.log.Warn("watching the MANIFEST for Badger's failed-flush defect", "err", err)
		}
	}
}

// watchManifest records in HealFile the tables the MANIFEST names whose
// files Badger deleted without a DELETE record and that are not in its
// levels. It reads the MANIFEST only when it or the directory changed
// since the last look.
func (s *Store) watchManifest(w *manifestWatch) error {
	mfi, err := os.Stat(filepath.Join(s.dir, badger.ManifestFilename))
	if err != nil {
		return err
	}
	dfi, err := os.Stat(s.dir)
	if err != nil {
		return err
	}
	stamp := [3]int64{mfi.Size(), mfi.ModTime().UnixNano(), dfi.ModTime().UnixNano()}
	if stamp == w.stamp {
		return nil
	}
	if err := noteFailedFlushes(s.dir, s.levels, s.log); err != nil {
		return err
	}
	w.stamp = stamp
	return nil
}

// levels returns the ids of the tables in Badger's levels.
func (s *Store) levels() map[uint64]bool {
	ids := map[uint64]bool{}
	for _, ti := range s.db.Tables() {
		ids[ti.ID] = true
	}
	return ids
}

// noteFailedFlushes adds to HealFile in dir the tables the MANIFEST names
// before and after their files were found missing and that are not among
// levels' (read in between).
func noteFailedFlushes(dir string, levels func() map[uint64]bool, log *slog.Logger) error {
	before, err := namedTables(dir)
	if err != nil {
		return err
	}
	var gone []uint64
	for id := range before {
		if _, err := os.Stat(filepath.Join(dir, table.IDToFilename(id))); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	in := levels()
	after, err := namedTables(dir)
	if err != nil {
		return err
	}
	noted, err := readHealFile(dir)
	if err != nil {
		return err
	}
	var add []uint64
	for _, id := range gone {
		if after[id] && !in[id] && !slices.Contains(noted, id) {
			add = append(add, id)
		}
	}
	if len(add) == 0 {
		return nil
	}
	slices.Sort(add)
	if err := writeHealFile(dir, append(noted, add...)); err != nil {
		return err
	}
	for _, id := range add {
		log.Error("Badger's MANIFEST names a table its failed flush deleted; the next start removes that record",
			"table", table.IDToFilename(id), "file", HealFile)
	}
	return nil
}

// namedTables returns the ids of the tables the MANIFEST of dir names.
func namedTables(dir string) (map[uint64]bool, error) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return nil, err
	}
	ids := make(map[uint64]bool, len(m.Tables))
	for id := range m.Tables {
		ids[id] = true
	}
	return ids, nil
}

// healManifest removes from the MANIFEST of dir the records of missing
// tables when HealFile lists every one of them and every table on disk is
// listed; it returns their file names, none when it changed nothing. The
// caller holds the directory lock.
func healManifest(dir string) ([]string, error) {
	noted, err := readHealFile(dir)
	if err != nil || len(noted) == 0 {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, badger.ManifestFilename), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	missing, valid, err := manifestMissing(f, dir)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	for _, id := range missing {
		if !slices.Contains(noted, id) {
			return nil, nil
		}
	}
	return removeTables(f, dir, valid, missing)
}

func readHealFile(dir string) ([]uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, HealFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", HealFile, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func writeHealFile(dir string, ids []uint64) error {
	var b []byte
	for _, id := range ids {
		b = strconv.AppendUint(b, id, 10)
		b = append(b, '\n')
	}
	return replaceFile(dir, HealFile, b)
}
