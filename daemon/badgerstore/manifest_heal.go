package badgerstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
)

// Healing a MANIFEST that names missing tables. Two failures leave one:
// Badger's failed flush (when the MANIFEST's fsync fails, Badger v4.9.6
// deletes the new table but its record stays; docs/reliability.md, defect
// 1) and a power cut right after a flush synced the MANIFEST, before any
// directory sync made the new table's entry durable (Badger's flush syncs
// no directory; defect 16). Neither loses data: a failed flush keeps the
// memtable, in memory and in its log, until a retried flush succeeds; and
// a table whose directory entry was lost was created after the last
// directory sync, so the removal of its memtable's log, which came after,
// was not made durable either, and Open replays that log (and savepointd's
// own log the commits after the last checkpoint).
//
// What tells such a table from one that held data alone: every checkpoint
// writes to TablesFile, after the directory sync, the tables that were in
// Badger's levels before it, whose entries that sync made durable (and a
// Close that flushes Badger writes there every table then named). A table
// the MANIFEST names, whose file is missing and that TablesFile does not
// list, was never in the levels at a checkpoint: Open removes its record.
// A missing table TablesFile lists held data of its own; Open refuses, with
// the repair-manifest command when every table on disk is listed. A new
// store writes an empty TablesFile before Badger creates anything, so a
// power cut before its first checkpoint heals too; without TablesFile (a
// directory an older version created) nothing is removed.

// TablesFile in the data directory lists, one id a line, the tables in
// Badger's levels at the last checkpoint, their directory entries durable.
const TablesFile = "savepoint.tables"

// tableIDs returns the ids of the tables in db's levels, sorted.
func tableIDs(db *badger.DB) []uint64 {
	var ids []uint64
	for _, ti := range db.Tables() {
		ids = append(ids, ti.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// listNoTables writes an empty TablesFile, durably, in dir when it holds no
// MANIFEST and no table: a new store, in which no table is durable yet.
func listNoTables(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if ssts, err := filepath.Glob(filepath.Join(dir, "*.sst")); err != nil || len(ssts) > 0 {
		return err
	}
	return writeTables(dir, nil)
}

// manifestTables returns the ids of the tables the MANIFEST of dir names,
// sorted.
func manifestTables(dir string) ([]uint64, error) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, _, err := replayManifest(f, dir)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// healManifest removes from the MANIFEST of dir the records of missing
// tables when TablesFile exists and lists none of them and each was created
// by a change set of its own that deleted nothing (a flush's, not a
// compaction's, whose inputs it would leave deleted); it returns their file
// names, none when it changed nothing. Tables on disk that the MANIFEST
// does not name are left to Badger, which deletes them at open: a power cut
// brings back the tables a compaction deleted after recording it. The
// caller holds the directory lock.
func healManifest(dir string) ([]string, error) {
	durable, found, err := readIDs(filepath.Join(dir, TablesFile))
	if err != nil || !found {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, badger.ManifestFilename), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, valid, err := replayManifest(f, dir)
	if err != nil {
		return nil, err
	}
	missing := absentTables(dir, m)
	if len(missing) == 0 {
		return nil, nil
	}
	flushed, err := flushedTables(f, valid)
	if err != nil {
		return nil, err
	}
	for _, id := range missing {
		if _, ok := slices.BinarySearch(durable, id); ok || !flushed[id] {
			return nil, nil // it held data of its own, or a compaction's inputs were deleted for it
		}
	}
	return removeTables(f, dir, valid, missing)
}

// flushedTables returns the tables created by a change set of the MANIFEST
// f (its first valid bytes) that created nothing else and deleted nothing:
// a memtable flush's.
func flushedTables(f *os.File, valid int64) (map[uint64]bool, error) {
	b := make([]byte, valid)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	sets, err := manifestSets(b)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, set := range sets {
		if c := set.Changes; len(c) == 1 && c[0].Op == pb.ManifestChange_CREATE && c[0].Level == 0 {
			out[c[0].Id] = true
		}
	}
	return out, nil
}

// readIDs reads a file of ids, one a line, and returns them sorted; found
// is false when the file does not exist.
func readIDs(path string) (ids []uint64, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, true, nil
}

// writeTables replaces TablesFile in dir with ids, durably. A variable for
// tests.
var writeTables = func(dir string, ids []uint64) error {
	var b []byte
	for _, id := range ids {
		b = strconv.AppendUint(b, id, 10)
		b = append(b, '\n')
	}
	return replaceFile(dir, TablesFile, b)
}
